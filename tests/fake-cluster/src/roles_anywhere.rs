//! The fake IAM Roles Anywhere endpoint: `CreateSession`, which verifies for real.
//!
//! What it checks, in the order a refusal names:
//! 1. the request: `POST /sessions` with `profileArn`, `roleArn` and `trustAnchorArn` in the
//!    query and `{"durationSeconds":N}` (900 to 43200) as the body;
//! 2. the `Authorization` header: `AWS4-X509-RSA-SHA256` or `AWS4-X509-ECDSA-SHA256`,
//!    `Credential=<serial>/<yyyymmdd>/<region>/rolesanywhere/aws4_request`, `SignedHeaders`
//!    naming at least host, x-amz-date and x-amz-x509 (and x-amz-x509-chain when sent),
//!    `Signature` in hex; `X-Amz-Date` within 5 minutes of now (SigV4's rule);
//! 3. the certificate of `X-Amz-X509` (base64 DER): its serial, in decimal, must be the one
//!    `Credential=` names, and its chain, with the intermediates of `X-Amz-X509-Chain`
//!    (comma-separated base64 DER), must lead to the trust anchor's CA at the current time.
//!    rustls-webpki checks the path, dates and signatures (`EndEntityCert::verify_for_usage`,
//!    client authentication usage: an extended key usage, if present, must allow it);
//! 4. the request's signature, over SigV4's string to sign recomputed here from what arrived
//!    (the canonical request of the signed headers, the query re-encoded and sorted, the
//!    body's SHA-256), against the certificate's public key with SHA-256: RSA PKCS#1 v1.5, or
//!    ECDSA DER (`EndEntityCert::verify_signature`);
//! 5. the trust anchor and the profile exist and the profile lists the role.
//!
//! Its answer is CreateSession's: 201 with
//! `{"credentialSet":[{"assumedRoleUser":{..},"credentials":{"accessKeyId","secretAccessKey",
//! "sessionToken","expiration"},"packedPolicySize":0,"roleArn":..,"sourceIdentity":..}],
//! "subjectArn":..}` (CreateSession API reference, "Response Syntax"; AWS's helper v1.4.0 reads
//! `CredentialSet[0].Credentials`, aws_signing_helper/credentials.go). Errors are restJson:
//! `x-amzn-ErrorType` and `{"message":..}`. The wording of the refusals is the fake's: what
//! AWS says for each was not checked against the service (no AWS account in the tests).
//!
//! The signature check does not share code with ecr-refresh's signer: both the product and AWS's
//! own helper (tests/fake/roles_anywhere.rs, the reference check) must pass it.

use crate::serve::{self, Served};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use rustls_pki_types::{CertificateDer, UnixTime};
use serde_json::{Value, json};
use webpki::{EndEntityCert, KeyUsage, anchor_from_trusted_cert};

use crate::sts::Issued;

/// How long the credentials it hands out live, unless the request asks less.
pub const MAX_SESSION: Duration = Duration::from_secs(43_200);

/// One trust anchor: its ARN and the CA certificate it holds (DER).
#[derive(Debug, Clone)]
pub struct TrustAnchor {
    pub arn: String,
    pub ca: Vec<u8>,
}

/// One profile: its ARN and the roles it lists.
#[derive(Debug, Clone)]
pub struct Profile {
    pub arn: String,
    pub roles: Vec<String>,
}

/// One CreateSession, as the fake saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionCall {
    pub trust_anchor_arn: Option<String>,
    pub profile_arn: Option<String>,
    pub role_arn: Option<String>,
    /// The algorithm of `Authorization`.
    pub algorithm: Option<String>,
    /// `Credential=`'s first part: the certificate's serial as the client wrote it.
    pub serial: Option<String>,
    /// The region of the credential scope.
    pub region: Option<String>,
    pub signed_headers: Option<String>,
    /// How many certificates `X-Amz-X509-Chain` held.
    pub intermediates: usize,
    pub duration_seconds: Option<u64>,
    pub content_type: Option<String>,
    /// `OK`, or the error code answered, then its message.
    pub outcome: String,
}

#[derive(Debug, Default)]
struct State_ {
    anchors: HashMap<String, TrustAnchor>,
    profiles: HashMap<String, Profile>,
    credentials: HashMap<String, Issued>,
    calls: Vec<SessionCall>,
    issued: Vec<Issued>,
}

type Shared = Arc<Mutex<State_>>;

fn lock(state: &Shared) -> MutexGuard<'_, State_> {
    state
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A running fake Roles Anywhere. Dropping it stops it.
pub struct FakeRolesAnywhere {
    url: String,
    state: Shared,
    _served: Served,
}

impl std::fmt::Debug for FakeRolesAnywhere {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeRolesAnywhere")
            .field("url", &self.url)
            .finish()
    }
}

impl FakeRolesAnywhere {
    /// A fake that trusts nothing yet: every CreateSession is refused until an anchor and a
    /// profile are added.
    pub fn start() -> Self {
        let state = Shared::default();
        let bound = serve::bind();
        let url = bound.url.clone();
        let app = axum::Router::new()
            .fallback(handle)
            .with_state(Arc::clone(&state));
        Self {
            url,
            state,
            _served: Served::start("fake Roles Anywhere", bound, app),
        }
    }

    /// `http://127.0.0.1:PORT` (for AWS_ENDPOINT_URL_ROLESANYWHERE).
    pub fn url(&self) -> String {
        self.url.clone()
    }

    pub fn add_trust_anchor(&self, anchor: TrustAnchor) {
        lock(&self.state).anchors.insert(anchor.arn.clone(), anchor);
    }

    /// A profile; returns the credentials a session for each of its roles answers (the same
    /// for every call), so that a test can make the fake ECR or STS require them.
    pub fn add_profile(&self, profile: Profile) -> Vec<Issued> {
        let mut state = lock(&self.state);
        let issued = profile
            .roles
            .iter()
            .map(|role| credentials_of(&mut state, role))
            .collect();
        state.profiles.insert(profile.arn.clone(), profile);
        issued
    }

    pub fn calls(&self) -> Vec<SessionCall> {
        lock(&self.state).calls.clone()
    }

    pub fn issued(&self) -> Vec<Issued> {
        lock(&self.state).issued.clone()
    }
}

/// A refusal: status, code, message.
type Refusal = (StatusCode, &'static str, String);

fn denied(message: impl Into<String>) -> Refusal {
    (
        StatusCode::FORBIDDEN,
        "AccessDeniedException",
        message.into(),
    )
}

fn invalid(message: impl Into<String>) -> Refusal {
    (
        StatusCode::BAD_REQUEST,
        "ValidationException",
        message.into(),
    )
}

async fn handle(
    State(state): State<Shared>,
    method: Method,
    uri: Uri,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let authorization = header("authorization").map(|a| parse_authorization(&a));
    let mut call = SessionCall {
        trust_anchor_arn: query.get("trustAnchorArn").cloned(),
        profile_arn: query.get("profileArn").cloned(),
        role_arn: query.get("roleArn").cloned(),
        algorithm: authorization.as_ref().map(|a| a.algorithm.clone()),
        serial: authorization.as_ref().map(|a| a.serial.clone()),
        region: authorization.as_ref().map(|a| a.region.clone()),
        signed_headers: authorization.as_ref().map(|a| a.signed_headers.join(";")),
        intermediates: header("x-amz-x509-chain")
            .map_or(0, |c| c.split(',').filter(|c| !c.trim().is_empty()).count()),
        duration_seconds: serde_json::from_slice::<Value>(&body)
            .ok()
            .and_then(|b| b["durationSeconds"].as_u64()),
        content_type: header("content-type"),
        outcome: String::new(),
    };
    let mut state = lock(&state);
    let answer = create_session(&mut state, &method, &uri, &query, &headers, &body);
    call.outcome = match &answer {
        Ok(_) => "OK".into(),
        Err((_, code, message)) => format!("{code}: {message}"),
    };
    state.calls.push(call);
    match answer {
        Ok(body) => json_response(StatusCode::CREATED, body),
        Err((status, code, message)) => {
            let mut response = json_response(status, json!({ "message": message }));
            if let Ok(code) = HeaderValue::from_str(code) {
                response.headers_mut().insert("x-amzn-errortype", code);
            }
            response
        }
    }
}

fn create_session(
    state: &mut State_,
    method: &Method,
    uri: &Uri,
    query: &HashMap<String, String>,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<Value, Refusal> {
    if method != Method::POST || uri.path() != "/sessions" {
        return Err((
            StatusCode::NOT_FOUND,
            "UnknownOperationException",
            format!("no operation at {method} {}", uri.path()),
        ));
    }
    let param = |name: &str| {
        query
            .get(name)
            .cloned()
            .ok_or_else(|| invalid(format!("{name} is required")))
    };
    let (anchor_arn, profile_arn, role_arn) = (
        param("trustAnchorArn")?,
        param("profileArn")?,
        param("roleArn")?,
    );
    let duration = serde_json::from_slice::<Value>(body)
        .ok()
        .map(|b| b["durationSeconds"].clone())
        .unwrap_or(Value::Null);
    let duration = match duration {
        Value::Null => 3600,
        d => d
            .as_u64()
            .filter(|d| (900..=MAX_SESSION.as_secs()).contains(d))
            .ok_or_else(|| invalid("durationSeconds must be 900 to 43200"))?,
    };

    verify(state, uri, query, headers, body, &anchor_arn)?;

    let profile = state
        .profiles
        .get(&profile_arn)
        .ok_or_else(|| denied(format!("Profile {profile_arn} not found or disabled")))?;
    if !profile.roles.contains(&role_arn) {
        return Err(denied(format!(
            "Unable to assume role {role_arn}: it is not in profile {profile_arn}"
        )));
    }
    let issued = credentials_of(state, &role_arn);
    state.issued.push(issued.clone());
    let expiration = SystemTime::now() + Duration::from_secs(duration);
    let expiration = chrono::DateTime::<chrono::Utc>::from(expiration)
        .format("%Y-%m-%dT%H:%M:%SZ")
        .to_string();
    let role_name = role_arn.rsplit('/').next().unwrap_or_default();
    Ok(json!({
        "credentialSet": [{
            "assumedRoleUser": {
                "arn": format!("arn:aws:sts::{}:assumed-role/{role_name}/session", crate::sts::ACCOUNT),
                "assumedRoleId": "AROA3XFRBF535PLBIFPI4:session",
            },
            "credentials": {
                "accessKeyId": issued.access_key_id,
                "secretAccessKey": issued.secret_access_key,
                "sessionToken": issued.session_token,
                "expiration": expiration,
            },
            "packedPolicySize": 0,
            "roleArn": role_arn,
            "sourceIdentity": "",
        }],
        "subjectArn": format!("arn:aws:rolesanywhere:{}:subject/00000000-0000-0000-0000-000000000000", crate::sts::ACCOUNT),
    }))
}

/// Steps 2 to 4 of the module's list.
fn verify(
    state: &State_,
    uri: &Uri,
    query: &HashMap<String, String>,
    headers: &HeaderMap,
    body: &[u8],
    anchor_arn: &str,
) -> Result<(), Refusal> {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let authorization =
        header("authorization").ok_or_else(|| denied("Missing Authentication Token"))?;
    let auth = parse_authorization(&authorization);
    let algorithm: &[&dyn rustls_pki_types::SignatureVerificationAlgorithm] = match auth
        .algorithm
        .as_str()
    {
        "AWS4-X509-RSA-SHA256" => &[webpki::aws_lc_rs::RSA_PKCS1_2048_8192_SHA256],
        "AWS4-X509-ECDSA-SHA256" => &[
            webpki::aws_lc_rs::ECDSA_P256_SHA256,
            webpki::aws_lc_rs::ECDSA_P384_SHA256,
        ],
        other => {
            return Err(denied(format!(
                "Unsupported signing algorithm {other:?}: AWS4-X509-RSA-SHA256 or AWS4-X509-ECDSA-SHA256"
            )));
        }
    };
    if auth.service != "rolesanywhere" || auth.terminator != "aws4_request" {
        return Err(denied(format!(
            "Credential should be scoped to a valid service and aws4_request, not {}/{}",
            auth.service, auth.terminator
        )));
    }
    for required in ["host", "x-amz-date", "x-amz-x509"] {
        if !auth.signed_headers.iter().any(|h| h == required) {
            return Err(denied(format!("{required} must be a signed header")));
        }
    }
    if headers.contains_key("x-amz-x509-chain")
        && !auth.signed_headers.iter().any(|h| h == "x-amz-x509-chain")
    {
        return Err(denied("x-amz-x509-chain must be signed when sent"));
    }
    let date = header("x-amz-date").unwrap_or_default();
    let signed_at = chrono::NaiveDateTime::parse_from_str(&date, "%Y%m%dT%H%M%SZ")
        .map_err(|_| denied(format!("X-Amz-Date {date:?} is not yyyymmddThhmmssZ")))?
        .and_utc();
    let skew = (chrono::Utc::now() - signed_at).num_seconds().abs();
    if skew > 300 {
        return Err(denied(format!(
            "Signature expired: {date} is more than 5 minutes from now"
        )));
    }
    if !date.starts_with(&auth.date) {
        return Err(denied(format!(
            "Date in Credential scope {} does not match X-Amz-Date {date}",
            auth.date
        )));
    }

    let der = |b64: &str| {
        BASE64
            .decode(b64.trim())
            .map_err(|_| denied("X-Amz-X509 and X-Amz-X509-Chain must be base64 DER certificates"))
    };
    let leaf = CertificateDer::from(der(&header("x-amz-x509").unwrap_or_default())?);
    let intermediates: Vec<CertificateDer<'static>> = header("x-amz-x509-chain")
        .unwrap_or_default()
        .split(',')
        .filter(|c| !c.trim().is_empty())
        .map(|c| der(c).map(CertificateDer::from))
        .collect::<Result<_, _>>()?;
    let cert = EndEntityCert::try_from(&leaf)
        .map_err(|e| denied(format!("Invalid certificate in X-Amz-X509: {e}")))?;
    let serial = decimal(cert.serial());
    if serial != auth.serial {
        return Err(denied(format!(
            "Credential names serial {} but the certificate's is {serial}",
            auth.serial
        )));
    }
    let anchor = state
        .anchors
        .get(anchor_arn)
        .ok_or_else(|| denied(format!("Trust anchor {anchor_arn} not found or disabled")))?;
    let ca = CertificateDer::from(anchor.ca.clone());
    let trust_anchor = anchor_from_trusted_cert(&ca)
        .map_err(|e| denied(format!("the trust anchor's CA is not usable: {e}")))?;
    cert.verify_for_usage(
        webpki::ALL_VERIFICATION_ALGS,
        &[trust_anchor],
        &intermediates,
        UnixTime::now(),
        KeyUsage::client_auth(),
        None,
        None,
    )
    .map_err(|e| denied(format!("Untrusted signing certificate: {e:?}")))?;

    let canonical = canonical_request(uri, query, headers, &auth.signed_headers, body);
    let to_sign = format!(
        "{}\n{date}\n{}/{}/{}/{}\n{}",
        auth.algorithm,
        auth.date,
        auth.region,
        auth.service,
        auth.terminator,
        hex(aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, canonical.as_bytes()).as_ref())
    );
    let signature = unhex(&auth.signature).ok_or_else(|| denied("Signature must be hex"))?;
    let verified = algorithm.iter().any(|alg| {
        cert.verify_signature(*alg, to_sign.as_bytes(), &signature)
            .is_ok()
    });
    if !verified {
        return Err(denied(
            "The request signature we calculated does not match the signature you provided",
        ));
    }
    Ok(())
}

/// The parts of `Authorization: ALG Credential=SERIAL/DATE/REGION/SERVICE/aws4_request,
/// SignedHeaders=a;b, Signature=hex`; missing parts are empty.
#[derive(Debug, Default)]
struct Authorization {
    algorithm: String,
    serial: String,
    date: String,
    region: String,
    service: String,
    terminator: String,
    signed_headers: Vec<String>,
    signature: String,
}

fn parse_authorization(header: &str) -> Authorization {
    let (algorithm, rest) = header.trim().split_once(' ').unwrap_or((header, ""));
    let mut auth = Authorization {
        algorithm: algorithm.to_owned(),
        ..Authorization::default()
    };
    for part in rest.split(',') {
        let Some((name, value)) = part.trim().split_once('=') else {
            continue;
        };
        match name {
            "Credential" => {
                let scope: Vec<&str> = value.split('/').collect();
                if let [serial, date, region, service, terminator] = scope[..] {
                    auth.serial = serial.to_owned();
                    auth.date = date.to_owned();
                    auth.region = region.to_owned();
                    auth.service = service.to_owned();
                    auth.terminator = terminator.to_owned();
                }
            }
            "SignedHeaders" => {
                auth.signed_headers = value.split(';').map(str::to_owned).collect();
            }
            "Signature" => auth.signature = value.to_owned(),
            _ => {}
        }
    }
    auth
}

/// SigV4's canonical request, from what arrived.
fn canonical_request(
    uri: &Uri,
    query: &HashMap<String, String>,
    headers: &HeaderMap,
    signed: &[String],
    body: &[u8],
) -> String {
    let mut pairs: Vec<(String, String)> = query
        .iter()
        .map(|(k, v)| (uri_encode(k), uri_encode(v)))
        .collect();
    pairs.sort();
    let query = pairs
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join("&");
    let canonical_headers: String = signed
        .iter()
        .map(|name| {
            let values: Vec<String> = headers
                .get_all(name.as_str())
                .iter()
                .map(|v| collapse(v.to_str().unwrap_or_default()))
                .collect();
            format!("{name}:{}\n", values.join(","))
        })
        .collect();
    format!(
        "POST\n{}\n{query}\n{canonical_headers}\n{}\n{}",
        uri.path(),
        signed.join(";"),
        hex(aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, body).as_ref())
    )
}

/// A header value trimmed, its runs of spaces made one (SigV4's `Trimall`).
fn collapse(value: &str) -> String {
    value.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn uri_encode(text: &str) -> String {
    text.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

/// A positive big-endian integer in decimal (Go's `big.Int.String()`).
pub fn decimal(bytes: &[u8]) -> String {
    let mut digits = vec![0u8];
    for byte in bytes {
        let mut carry = u32::from(*byte);
        for digit in &mut digits {
            let value = u32::from(*digit) * 256 + carry;
            *digit = (value % 10) as u8;
            carry = value / 10;
        }
        while carry > 0 {
            digits.push((carry % 10) as u8);
            carry /= 10;
        }
    }
    while digits.len() > 1 && digits.last() == Some(&0) {
        digits.pop();
    }
    digits.iter().rev().map(|d| (b'0' + d) as char).collect()
}

/// The role's credentials, made at random the first time.
fn credentials_of(state: &mut State_, role_arn: &str) -> Issued {
    let random = || uuid::Uuid::new_v4().simple().to_string();
    state
        .credentials
        .entry(role_arn.to_owned())
        .or_insert_with(|| Issued {
            role_arn: role_arn.to_owned(),
            access_key_id: format!("ASIA{}", &random().to_uppercase()[..16]),
            secret_access_key: format!("{}{}", random(), &random()[..8]),
            session_token: format!("IQoJb3JpZ2luX2VjE{}{}", random(), random()),
        })
        .clone()
}

fn json_response(status: StatusCode, body: Value) -> Response {
    let mut response = (status, body.to_string()).into_response();
    let headers = response.headers_mut();
    headers.insert(
        axum::http::header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    if let Ok(id) = HeaderValue::from_str(&uuid::Uuid::new_v4().to_string()) {
        headers.insert("x-amzn-requestid", id);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serials_are_decimal_and_authorization_headers_split_into_their_parts() {
        assert_eq!(decimal(&[]), "0");
        assert_eq!(decimal(&[0x01, 0x00]), "256");
        assert_eq!(
            decimal(&[0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]),
            "2361183241434822606847"
        );
        let auth = parse_authorization(
            "AWS4-X509-ECDSA-SHA256 Credential=1234/20261202/eu-west-1/rolesanywhere/aws4_request, \
             SignedHeaders=content-type;host;x-amz-date;x-amz-x509, Signature=0a1b",
        );
        assert_eq!(auth.algorithm, "AWS4-X509-ECDSA-SHA256");
        assert_eq!(auth.serial, "1234");
        assert_eq!(auth.region, "eu-west-1");
        assert_eq!(auth.signed_headers.len(), 4);
        assert_eq!(unhex(&auth.signature), Some(vec![0x0a, 0x1b]));
    }
}
