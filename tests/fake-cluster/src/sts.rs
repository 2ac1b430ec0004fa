//! The fake STS endpoint: `AssumeRoleWithWebIdentity`, which verifies the token for real, and
//! `AssumeRole`, which checks the role, the external id and who signed the call. Both answer
//! temporary credentials; the fake ECR can then require them ([`crate::FakeEcr::require_signer`]).
//!
//! It speaks awsQuery as STS does: `POST /` with a form body (`Action`, `Version=2011-06-15`,
//! the parameters), answered in XML. The shapes are STS's, from the API reference
//! (AssumeRole and AssumeRoleWithWebIdentity, "Response Elements") and the AWS SDK for Rust's
//! generated deserialisers (aws-sdk-sts 1.124.0,
//! src/protocol_serde/shape_assume_role_with_web_identity.rs and shape_credentials.rs: the
//! result element `<{Action}Result>` inside `<{Action}Response>`, `Credentials` with
//! `AccessKeyId`, `SecretAccessKey`, `SessionToken` and `Expiration` as an RFC 3339 date-time).
//! Errors are awsQuery's `<ErrorResponse><Error><Type/><Code/><Message/></Error><RequestId/>`.
//! The SDK is the reference client: every test that runs the binary against this fake has the
//! SDK parse these answers, and fails if it can't.
//!
//! The refusals and their words are STS's, as users report them:
//! - a token whose signature, issuer or audience does not check out: 400 InvalidIdentityToken
//!   ("Incorrect token audience", "No OpenIDConnect provider found in your account for <iss>");
//! - an expired token: 400 ExpiredTokenException ("Token expired: current date/time ... must be
//!   before the expiration date/time ...");
//! - a token the role's trust policy does not allow (another `sub`), and an AssumeRole with the
//!   wrong caller or external id: 403 AccessDenied ("Not authorized to perform
//!   sts:AssumeRoleWithWebIdentity", "User: ... is not authorized to perform: sts:AssumeRole on
//!   resource: ...").
//!
//! The token check: the JWS header's `alg` must be ES256 (the key the test control plane signs
//! with) and its `kid` a key of the JWKS; the signature is verified with aws-lc-rs (the crypto
//! rustls already brings), ECDSA P-256 with SHA-256 over `header.payload`, r||s fixed-width as
//! JWS writes it (RFC 7518 section 3.4); then `iss`, `aud`, `sub`, `exp` and `nbf`.

use crate::serve::{self, Served};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::body::Bytes;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64URL;
use serde_json::Value;

use crate::ecr::access_key_of;

/// The account of every role the fake knows (the assumed-role ARNs it answers are in it).
pub const ACCOUNT: &str = "123456789012";

/// How long the credentials it hands out live.
pub const CREDENTIALS_LIFETIME: Duration = Duration::from_secs(3600);

/// What a role assumed with a web identity trusts: the OIDC provider (its issuer and keys) and
/// the trust policy's conditions on `aud` and `sub`.
#[derive(Debug, Clone)]
pub struct WebIdentityTrust {
    pub role_arn: String,
    /// The token's `iss` must be this (the IAM OIDC provider's URL).
    pub issuer: String,
    /// The provider's keys, `{"keys":[...]}` as `/openid/v1/jwks` serves them.
    pub jwks: Value,
    /// The trust policy's `<provider>:aud`.
    pub audience: String,
    /// The trust policy's `<provider>:sub`, like `system:serviceaccount:<ns>:<name>`.
    pub subject: String,
}

/// The caller a role assumed with AssumeRole trusts: its access key id (from the SigV4
/// `Credential=`), and the session token it must send with temporary credentials.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signer {
    pub access_key_id: String,
    pub session_token: Option<String>,
}

/// What a role assumed with AssumeRole trusts.
#[derive(Debug, Clone)]
pub struct RoleTrust {
    pub role_arn: String,
    pub caller: Signer,
    /// The trust policy's `sts:ExternalId` condition, if it has one.
    pub external_id: Option<String>,
}

/// One call, as the fake saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StsCall {
    pub action: String,
    pub role_arn: Option<String>,
    pub role_session_name: Option<String>,
    pub external_id: Option<String>,
    /// The SigV4 access key id, None for an unsigned call (AssumeRoleWithWebIdentity).
    pub access_key_id: Option<String>,
    /// `OK`, or the error code answered.
    pub outcome: String,
}

/// Temporary credentials the fake handed out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Issued {
    pub role_arn: String,
    pub access_key_id: String,
    pub secret_access_key: String,
    pub session_token: String,
}

impl Issued {
    /// Who signs with these.
    pub fn signer(&self) -> Signer {
        Signer {
            access_key_id: self.access_key_id.clone(),
            session_token: Some(self.session_token.clone()),
        }
    }
}

#[derive(Debug, Default)]
struct State {
    web_identity: HashMap<String, WebIdentityTrust>,
    roles: HashMap<String, RoleTrust>,
    /// What each role's successful calls answer, made when the role is first trusted.
    credentials: HashMap<String, Issued>,
    calls: Vec<StsCall>,
    issued: Vec<Issued>,
    /// Added to the clock the token's `exp` and `nbf` are judged by.
    clock_ahead: Duration,
}

type Shared = Arc<Mutex<State>>;

fn lock(state: &Shared) -> MutexGuard<'_, State> {
    state
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A running fake STS. Dropping it stops it.
pub struct FakeSts {
    url: String,
    state: Shared,
    _served: Served,
}

impl FakeSts {
    /// A fake STS that trusts nothing yet: every call is refused until a role is added.
    pub fn start() -> FakeSts {
        let state = Shared::default();
        let bound = serve::bind();
        let url = bound.url.clone();
        let app = axum::Router::new()
            .fallback(handle)
            .with_state(Arc::clone(&state));
        FakeSts {
            url,
            state,
            _served: Served::start("fake STS", bound, app),
        }
    }

    /// `http://127.0.0.1:PORT` (for AWS_ENDPOINT_URL_STS).
    pub fn url(&self) -> String {
        self.url.clone()
    }

    /// A role that AssumeRoleWithWebIdentity may assume with a token this trust accepts.
    /// Returns the credentials every successful call for the role answers, so that a test can
    /// make the fake ECR require them before the run.
    pub fn trust_web_identity(&self, trust: WebIdentityTrust) -> Issued {
        let mut state = lock(&self.state);
        let role = trust.role_arn.clone();
        state.web_identity.insert(role.clone(), trust);
        credentials_of(&mut state, &role)
    }

    /// A role that AssumeRole may assume for this caller and external id; returns the
    /// credentials it answers, as [`FakeSts::trust_web_identity`] does.
    pub fn trust_assume_role(&self, trust: RoleTrust) -> Issued {
        let mut state = lock(&self.state);
        let role = trust.role_arn.clone();
        state.roles.insert(role.clone(), trust);
        credentials_of(&mut state, &role)
    }

    /// Judges tokens' `exp` and `nbf` as if it were `ahead` later than it is.
    pub fn set_clock_ahead(&self, ahead: Duration) {
        lock(&self.state).clock_ahead = ahead;
    }

    pub fn calls(&self) -> Vec<StsCall> {
        lock(&self.state).calls.clone()
    }

    /// Every set of credentials handed out, in order.
    pub fn issued(&self) -> Vec<Issued> {
        lock(&self.state).issued.clone()
    }
}

impl std::fmt::Debug for FakeSts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeSts").field("url", &self.url).finish()
    }
}

/// A refusal: status, code, message.
type Refusal = (StatusCode, &'static str, String);

async fn handle(
    axum::extract::State(state): axum::extract::State<Shared>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let params: HashMap<String, String> = form_urlencoded_pairs(&body);
    let action = params.get("Action").cloned().unwrap_or_default();
    let access_key_id = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(access_key_of);
    let session_token = headers
        .get("x-amz-security-token")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let mut state = lock(&state);
    let answer = match action.as_str() {
        "AssumeRoleWithWebIdentity" => assume_role_with_web_identity(&mut state, &params),
        "AssumeRole" => assume_role(
            &mut state,
            &params,
            access_key_id.as_deref(),
            session_token.as_deref(),
        ),
        _ => Err((
            StatusCode::BAD_REQUEST,
            "InvalidAction",
            format!("Could not find operation {action} for version 2011-06-15"),
        )),
    };
    state.calls.push(StsCall {
        action: action.clone(),
        role_arn: params.get("RoleArn").cloned(),
        role_session_name: params.get("RoleSessionName").cloned(),
        external_id: params.get("ExternalId").cloned(),
        access_key_id,
        outcome: match &answer {
            Ok(_) => "OK".into(),
            Err((_, code, _)) => (*code).into(),
        },
    });
    match answer {
        Ok(xml) => xml_response(StatusCode::OK, xml),
        Err((status, code, message)) => error(status, code, &message),
    }
}

fn form_urlencoded_pairs(body: &[u8]) -> HashMap<String, String> {
    form_urlencoded::parse(body).into_owned().collect()
}

fn required<'a>(params: &'a HashMap<String, String>, name: &str) -> Result<&'a str, Refusal> {
    params.get(name).map(String::as_str).ok_or_else(|| {
        (
            StatusCode::BAD_REQUEST,
            "MissingParameter",
            format!("The request must contain the parameter {name}"),
        )
    })
}

fn assume_role_with_web_identity(
    state: &mut State,
    params: &HashMap<String, String>,
) -> Result<String, Refusal> {
    let role_arn = required(params, "RoleArn")?;
    let session = required(params, "RoleSessionName")?;
    let token = required(params, "WebIdentityToken")?;
    let now = SystemTime::now() + state.clock_ahead;
    let claims = decode_unverified(token)?;
    let issuer = claims["iss"].as_str().unwrap_or_default().to_owned();
    let Some(trust) = state
        .web_identity
        .get(role_arn)
        .filter(|t| t.issuer == issuer)
    else {
        return Err(invalid_token(format!(
            "No OpenIDConnect provider found in your account for {issuer}"
        )));
    };
    verify_signature(token, &trust.jwks)?;
    let audiences: Vec<&str> = match &claims["aud"] {
        Value::String(one) => vec![one.as_str()],
        Value::Array(many) => many.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    if !audiences.contains(&trust.audience.as_str()) {
        return Err(invalid_token("Incorrect token audience".into()));
    }
    let now_secs = now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let exp = claims["exp"].as_u64().unwrap_or(0);
    if exp <= now_secs {
        return Err((
            StatusCode::BAD_REQUEST,
            "ExpiredTokenException",
            format!(
                "Token expired: current date/time {} must be before the expiration date/time {}",
                rfc3339(now_secs),
                rfc3339(exp)
            ),
        ));
    }
    if claims["nbf"].as_u64().is_some_and(|nbf| nbf > now_secs) {
        return Err(invalid_token(
            "Token used before its not-before time".into(),
        ));
    }
    let subject = claims["sub"].as_str().unwrap_or_default();
    if subject != trust.subject {
        return Err((
            StatusCode::FORBIDDEN,
            "AccessDenied",
            "Not authorized to perform sts:AssumeRoleWithWebIdentity".into(),
        ));
    }
    let audience = trust.audience.clone();
    let subject = subject.to_owned();
    let issued = issue(state, role_arn);
    let provider = issuer.trim_start_matches("https://").to_owned();
    Ok(format!(
        "<AssumeRoleWithWebIdentityResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\">\
         <AssumeRoleWithWebIdentityResult>\
         <SubjectFromWebIdentityToken>{}</SubjectFromWebIdentityToken>\
         <Audience>{}</Audience>\
         {}\
         <Provider>{}</Provider>\
         </AssumeRoleWithWebIdentityResult>\
         <ResponseMetadata><RequestId>{}</RequestId></ResponseMetadata>\
         </AssumeRoleWithWebIdentityResponse>",
        escape(&subject),
        escape(&audience),
        result_body(role_arn, session, &issued),
        escape(&provider),
        uuid::Uuid::new_v4()
    ))
}

fn assume_role(
    state: &mut State,
    params: &HashMap<String, String>,
    access_key_id: Option<&str>,
    session_token: Option<&str>,
) -> Result<String, Refusal> {
    let role_arn = required(params, "RoleArn")?;
    let session = required(params, "RoleSessionName")?;
    let Some(access_key_id) = access_key_id else {
        return Err((
            StatusCode::BAD_REQUEST,
            "MissingAuthenticationToken",
            "Request is missing Authentication Token".into(),
        ));
    };
    let external_id = params.get("ExternalId").map(String::as_str);
    let denied = || {
        (
            StatusCode::FORBIDDEN,
            "AccessDenied",
            format!(
                "User: arn:aws:iam::{ACCOUNT}:user/{access_key_id} is not authorized to perform: \
                 sts:AssumeRole on resource: {role_arn}"
            ),
        )
    };
    let trust = state.roles.get(role_arn).ok_or_else(denied)?;
    let caller = Signer {
        access_key_id: access_key_id.to_owned(),
        session_token: session_token.map(str::to_owned),
    };
    if trust.caller != caller || trust.external_id.as_deref() != external_id {
        return Err(denied());
    }
    let issued = issue(state, role_arn);
    Ok(format!(
        "<AssumeRoleResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\">\
         <AssumeRoleResult>{}</AssumeRoleResult>\
         <ResponseMetadata><RequestId>{}</RequestId></ResponseMetadata>\
         </AssumeRoleResponse>",
        result_body(role_arn, session, &issued),
        uuid::Uuid::new_v4()
    ))
}

/// The temporary credentials `role_arn` answers, made at random the first time.
fn credentials_of(state: &mut State, role_arn: &str) -> Issued {
    let random = || uuid::Uuid::new_v4().simple().to_string();
    state
        .credentials
        .entry(role_arn.to_owned())
        .or_insert_with(|| Issued {
            role_arn: role_arn.to_owned(),
            access_key_id: format!("ASIA{}", &random().to_uppercase()[..16]),
            secret_access_key: format!("{}{}", random(), &random()[..8]),
            session_token: format!("FwoGZXIvYXdzE{}{}", random(), random()),
        })
        .clone()
}

/// The role's credentials, recorded as handed out.
fn issue(state: &mut State, role_arn: &str) -> Issued {
    let issued = credentials_of(state, role_arn);
    state.issued.push(issued.clone());
    issued
}

/// `AssumedRoleUser` and `Credentials`, as both results carry them.
fn result_body(role_arn: &str, session: &str, issued: &Issued) -> String {
    let role_name = role_arn.rsplit('/').next().unwrap_or_default();
    let expiration = SystemTime::now() + CREDENTIALS_LIFETIME;
    let expiration = rfc3339(
        expiration
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
    );
    format!(
        "<AssumedRoleUser>\
         <Arn>arn:aws:sts::{ACCOUNT}:assumed-role/{}/{}</Arn>\
         <AssumedRoleId>AROA3XFRBF535PLBIFPI4:{}</AssumedRoleId>\
         </AssumedRoleUser>\
         <Credentials>\
         <AccessKeyId>{}</AccessKeyId>\
         <SecretAccessKey>{}</SecretAccessKey>\
         <SessionToken>{}</SessionToken>\
         <Expiration>{expiration}</Expiration>\
         </Credentials>",
        escape(role_name),
        escape(session),
        escape(session),
        issued.access_key_id,
        issued.secret_access_key,
        issued.session_token,
    )
}

fn invalid_token(message: String) -> Refusal {
    (StatusCode::BAD_REQUEST, "InvalidIdentityToken", message)
}

/// The claims of a compact JWS, before its signature is checked (to find the provider by `iss`).
fn decode_unverified(token: &str) -> Result<Value, Refusal> {
    let malformed = || invalid_token("The ID Token provided is not a valid JWT".into());
    let mut parts = token.trim().split('.');
    let (Some(_), Some(payload), Some(_), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(malformed());
    };
    let bytes = B64URL.decode(payload).map_err(|_| malformed())?;
    serde_json::from_slice(&bytes).map_err(|_| malformed())
}

/// Verifies an ES256 compact JWS against the JWKS key its header names.
pub fn verify_signature(token: &str, jwks: &Value) -> Result<(), Refusal> {
    let token = token.trim();
    let refused =
        |why: &str| invalid_token(format!("Couldn't verify the token's signature: {why}"));
    let (signing_input, signature) = token.rsplit_once('.').ok_or_else(|| refused("not a JWS"))?;
    let header = signing_input
        .split('.')
        .next()
        .and_then(|h| B64URL.decode(h).ok())
        .and_then(|h| serde_json::from_slice::<Value>(&h).ok())
        .ok_or_else(|| refused("its header is not base64url JSON"))?;
    if header["alg"] != "ES256" {
        return Err(refused(&format!("alg {} is not ES256", header["alg"])));
    }
    let kid = header["kid"].as_str().unwrap_or_default();
    let key = jwks["keys"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|k| k["kid"] == kid && k["kty"] == "EC" && k["crv"] == "P-256")
        .ok_or_else(|| refused(&format!("no P-256 key with kid {kid:?} in the JWKS")))?;
    let coordinate = |name: &str| {
        key[name]
            .as_str()
            .and_then(|c| B64URL.decode(c).ok())
            .filter(|c| c.len() == 32)
            .ok_or_else(|| refused(&format!("the key's {name} is not 32 bytes of base64url")))
    };
    // SEC 1 uncompressed point: 0x04 || x || y.
    let mut point = vec![0x04];
    point.extend(coordinate("x")?);
    point.extend(coordinate("y")?);
    let signature = B64URL
        .decode(signature)
        .map_err(|_| refused("the signature is not base64url"))?;
    aws_lc_rs::signature::UnparsedPublicKey::new(
        &aws_lc_rs::signature::ECDSA_P256_SHA256_FIXED,
        &point,
    )
    .verify(signing_input.as_bytes(), &signature)
    .map_err(|_| refused("the signature does not match the key"))
}

/// Seconds since the epoch as `2026-12-02T07:22:39Z`.
fn rfc3339(secs: u64) -> String {
    chrono::DateTime::<chrono::Utc>::from_timestamp(secs as i64, 0)
        .map(|t| t.format("%Y-%m-%dT%H:%M:%SZ").to_string())
        .unwrap_or_default()
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn xml_response(status: StatusCode, body: String) -> Response {
    let mut response = (status, body).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/xml"));
    if let Ok(id) = HeaderValue::from_str(&uuid::Uuid::new_v4().to_string()) {
        headers.insert("x-amzn-requestid", id);
    }
    response
}

/// An awsQuery error: `Sender` faults, as every refusal here is the caller's.
fn error(status: StatusCode, code: &str, message: &str) -> Response {
    xml_response(
        status,
        format!(
            "<ErrorResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\">\
             <Error><Type>Sender</Type><Code>{code}</Code><Message>{}</Message></Error>\
             <RequestId>{}</RequestId></ErrorResponse>",
            escape(message),
            uuid::Uuid::new_v4()
        ),
    )
}

/// An issuer of its own for tests that need no API server: an ES256 key made for it, its JWKS,
/// and tokens signed with it (what kube-apiserver does with `--service-account-signing-key-file`).
pub struct TestIssuer {
    pub issuer: String,
    key: aws_lc_rs::signature::EcdsaKeyPair,
    kid: String,
}

impl TestIssuer {
    pub fn new(issuer: &str) -> Self {
        let key = aws_lc_rs::signature::EcdsaKeyPair::generate(
            &aws_lc_rs::signature::ECDSA_P256_SHA256_FIXED_SIGNING,
        )
        .expect("generating a P-256 key");
        Self {
            issuer: issuer.to_owned(),
            key,
            kid: uuid::Uuid::new_v4().simple().to_string(),
        }
    }

    /// `{"keys":[...]}` with the one public key, as `/openid/v1/jwks` serves it.
    pub fn jwks(&self) -> Value {
        use aws_lc_rs::signature::KeyPair as _;
        let point = self.key.public_key().as_ref();
        serde_json::json!({"keys": [{
            "use": "sig", "kty": "EC", "kid": self.kid, "crv": "P-256", "alg": "ES256",
            "x": B64URL.encode(&point[1..33]), "y": B64URL.encode(&point[33..65]),
        }]})
    }

    /// A token with `claims` (`iss` added when missing), signed with the issuer's key.
    pub fn mint(&self, claims: &Value) -> String {
        let mut claims = claims.clone();
        if claims.get("iss").is_none() {
            claims["iss"] = self.issuer.clone().into();
        }
        let header = serde_json::json!({"alg": "ES256", "kid": self.kid});
        let input = format!(
            "{}.{}",
            B64URL.encode(header.to_string()),
            B64URL.encode(claims.to_string())
        );
        let signature = self
            .key
            .sign(&aws_lc_rs::rand::SystemRandom::new(), input.as_bytes())
            .expect("signing with a fresh key");
        format!("{input}.{}", B64URL.encode(signature.as_ref()))
    }

    /// A token for ServiceAccount `namespace/name` with `audience`, valid for `lifetime` from now.
    pub fn service_account_token(
        &self,
        namespace: &str,
        name: &str,
        audience: &str,
        lifetime: Duration,
    ) -> String {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        self.mint(&serde_json::json!({
            "aud": [audience],
            "sub": format!("system:serviceaccount:{namespace}:{name}"),
            "iat": now, "nbf": now, "exp": now + lifetime.as_secs(),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signature_verifies_against_its_jwks_and_a_changed_byte_or_key_does_not() {
        let issuer = TestIssuer::new("https://issuer.test");
        let token = issuer.mint(&serde_json::json!({"sub": "s"}));
        verify_signature(&token, &issuer.jwks()).expect("the issuer's own token verifies");

        let mut tampered = token.as_bytes().to_vec();
        let at = token.len() - 10;
        tampered[at] = if tampered[at] == b'A' { b'B' } else { b'A' };
        let tampered = String::from_utf8(tampered).unwrap();
        let (_, code, message) = verify_signature(&tampered, &issuer.jwks()).unwrap_err();
        assert_eq!(code, "InvalidIdentityToken");
        assert!(message.contains("does not match"), "{message}");

        let other = TestIssuer::new("https://issuer.test");
        let (_, _, message) = verify_signature(&token, &other.jwks()).unwrap_err();
        assert!(message.contains("no P-256 key"), "{message}");
        let mut same_kid = other.jwks();
        same_kid["keys"][0]["kid"] = issuer.jwks()["keys"][0]["kid"].clone();
        let (_, _, message) = verify_signature(&token, &same_kid).unwrap_err();
        assert!(message.contains("does not match"), "{message}");
    }
}
