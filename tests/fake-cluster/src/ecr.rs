//! The fake ECR endpoint. CONTRACT: the public signatures below are used by ecr-refresh's
//! tests; keep them (add to them freely). Bodies are to be implemented.
//!
//! It speaks awsJson1.1 as ECR does: `POST /` with
//! `X-Amz-Target: AmazonEC2ContainerRegistry_V20150921.<Operation>`. Only
//! GetAuthorizationToken is served; any other target gets 400 UnknownOperationException.
//! The region is read from the SigV4 credential scope of the Authorization header, so one
//! fake serves every region (the signature itself is not checked). With
//! [`FakeEcr::require_signer`] it answers only calls signed with given credentials: the access
//! key id of `Credential=` and the `X-Amz-Security-Token` header, as the fake STS issued them;
//! others get ECR's answer to an unknown key, 400 UnrecognizedClientException.
//!
//! Wire details copied from real ECR: `expiresAt` is epoch seconds written the way Java
//! writes a double (`1.7385984915E9`); errors carry both `x-amzn-ErrorType` and a body
//! `{"__type":..,"message":..}`; every answer has an `x-amzn-RequestId`.
//!
//! It also serves ECR Public's GetAuthorizationToken, the same awsJson1.1 protocol with its own
//! target and output shape. Taken from the AWS SDK for Rust's generated client,
//! aws-sdk-ecrpublic 1.122.0 (crates.io), not from memory:
//! - src/config.rs: the service shape is `SpencerFrontendService` (so the target is
//!   `X-Amz-Target: SpencerFrontendService.GetAuthorizationToken`; aws-smithy-json's
//!   src/protocol/aws_json_rpc.rs writes `{ServiceName}.{OperationName}`), protocol awsJson1.1,
//!   SigV4 signing name `ecr-public` (the credential scope reads `/<region>/ecr-public/aws4_request`),
//!   and the endpoint override key `("ECR PUBLIC", "AWS_ENDPOINT_URL")`, i.e. the variable
//!   `AWS_ENDPOINT_URL_ECR_PUBLIC`.
//! - src/operation/get_authorization_token/_get_authorization_token_output.rs: `authorizationData`
//!   is ONE `AuthorizationData` structure, not ECR's list; src/types/_authorization_data.rs: its
//!   members are `authorizationToken` (string) and `expiresAt` (timestamp), no proxyEndpoint.
//! - src/operation/get_authorization_token/builders.rs: "This API requires the
//!   ecr-public:GetAuthorizationToken and sts:GetServiceBearerToken permissions."
//!
//! The other client-side copies agree: aws-sdk-js-v3's and the Haskell amazonka's serialisers send
//! `SpencerFrontendService.GetAuthorizationToken`, and kubernetes/cloud-provider-aws's
//! ecr-credential-provider reads `output.AuthorizationData.AuthorizationToken` as one object,
//! calling ECR Public in us-east-1.

use crate::serve::{self, Served};
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::body::Bytes;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use regex::Regex;
use serde::Deserialize;

/// The account that owns the fake's credentials, used when a call names no registryIds.
pub const CALLER_ACCOUNT: &str = "123456789012";

/// The `X-Amz-Target` prefix of every ECR operation.
pub const TARGET_PREFIX: &str = "AmazonEC2ContainerRegistry_V20150921.";

/// The `X-Amz-Target` prefix of every ECR Public operation (its Smithy service shape name).
pub const PUBLIC_TARGET_PREFIX: &str = "SpencerFrontendService.";

/// The awsJson1.1 content type, sent and answered.
pub const CONTENT_TYPE: &str = "application/x-amz-json-1.1";

/// How long a token lives unless `set_expires_at` says otherwise.
pub const TOKEN_LIFETIME: Duration = Duration::from_secs(12 * 60 * 60);

/// A fault as ECR sends it, for the next `count` calls (None: every call).
#[derive(Debug, Clone)]
pub enum EcrFault {
    /// 400 ThrottlingException, "Rate exceeded".
    Throttling,
    /// 400 AccessDeniedException, as for a principal without ecr:GetAuthorizationToken.
    AccessDenied,
    /// 400 ExpiredTokenException, "The security token included in the request is expired".
    ExpiredCredentials,
    /// 500 ServerException.
    ServerError,
    /// 200 with an authorizationToken that does not decode to `AWS:<password>`.
    MalformedToken,
}

/// The error an `EcrFault` answers with, or None for a fault that answers 200.
fn fault_error(fault: &EcrFault) -> Option<(StatusCode, &'static str, &'static str)> {
    match fault {
        EcrFault::Throttling => Some((
            StatusCode::BAD_REQUEST,
            "ThrottlingException",
            "Rate exceeded",
        )),
        EcrFault::AccessDenied => Some((
            StatusCode::BAD_REQUEST,
            "AccessDeniedException",
            "User: arn:aws:iam::123456789012:user/ci is not authorized to perform: \
             ecr:GetAuthorizationToken on resource: * because no identity-based policy \
             allows the ecr:GetAuthorizationToken action",
        )),
        EcrFault::ExpiredCredentials => Some((
            StatusCode::BAD_REQUEST,
            "ExpiredTokenException",
            "The security token included in the request is expired",
        )),
        EcrFault::ServerError => Some((
            StatusCode::INTERNAL_SERVER_ERROR,
            "ServerException",
            "We encountered an internal error. Please try again.",
        )),
        EcrFault::MalformedToken => None,
    }
}

#[derive(Debug, Default)]
struct State {
    passwords: HashMap<String, String>,
    expires_at: Option<SystemTime>,
    proxy_endpoint: Option<String>,
    /// Pending faults, oldest first; a None count never runs out.
    faults: VecDeque<(EcrFault, Option<usize>)>,
    calls: Vec<(String, Vec<String>)>,
    calls_per_region: HashMap<String, usize>,
    passwords_issued: Vec<String>,
    /// ECR Public: its password, faults and calls (the region of each) apart from ECR's.
    public_password: Option<String>,
    public_expires_at: Option<SystemTime>,
    public_faults: VecDeque<(EcrFault, Option<usize>)>,
    public_calls: Vec<String>,
    /// When set, only calls signed by this signer are answered.
    required_signer: Option<crate::sts::Signer>,
    /// Who signed each call, answered or not (ECR's and ECR Public's alike).
    signers: Vec<crate::sts::Signer>,
}

/// The fault for this call, if any, counting it down.
fn take_fault(faults: &mut VecDeque<(EcrFault, Option<usize>)>) -> Option<EcrFault> {
    let (fault, remaining) = faults.front_mut()?;
    let fault = fault.clone();
    if let Some(n) = remaining {
        *n -= 1;
        if *n == 0 {
            faults.pop_front();
        }
    }
    Some(fault)
}

type Shared = Arc<Mutex<State>>;

fn lock(state: &Shared) -> MutexGuard<'_, State> {
    // A panic while holding the lock can't leave State half-updated in a way that matters
    // to a test double, so carry on with the data.
    state
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A running fake ECR endpoint (awsJson1.1 GetAuthorizationToken). Dropping it stops it.
pub struct FakeEcr {
    url: String,
    state: Shared,
    _served: Served,
}

impl FakeEcr {
    /// Caller account 123456789012; every region answers with password
    /// `pw-<region>-<n>` (n counts calls), expiring 12 hours from now, and proxyEndpoint
    /// `https://<account>.dkr.ecr.<region>.<partition's suffix>` (account: the first
    /// registryId, or the caller's; see [`default_proxy_endpoint`]).
    ///
    /// n counts the GetAuthorizationToken calls made in that region so far, this one
    /// included and faulted ones too (a call that succeeds after one throttled attempt
    /// answers `pw-<region>-2`).
    pub fn start() -> FakeEcr {
        let state = Shared::default();
        let bound = serve::bind();
        let url = bound.url.clone();
        let app = axum::Router::new()
            .fallback(handle)
            .with_state(Arc::clone(&state));
        FakeEcr {
            url,
            state,
            _served: Served::start("fake ECR", bound, app),
        }
    }
    /// `http://127.0.0.1:PORT` (for AWS_ENDPOINT_URL_ECR)
    pub fn url(&self) -> String {
        self.url.clone()
    }
    /// The variables that point the AWS SDK of a process at this fake (for `Command::envs`):
    /// its endpoint, `region`, a static key it accepts, and no instance metadata.
    pub fn client_env(&self, region: &str) -> [(&'static str, String); 5] {
        [
            ("AWS_ENDPOINT_URL_ECR", self.url()),
            ("AWS_REGION", region.to_owned()),
            ("AWS_ACCESS_KEY_ID", "AKIDFAKE".to_owned()),
            ("AWS_SECRET_ACCESS_KEY", "fake-secret".to_owned()),
            ("AWS_EC2_METADATA_DISABLED", "true".to_owned()),
        ]
    }
    /// Every later call in `region` answers this password.
    pub fn set_password(&self, region: &str, password: &str) {
        lock(&self.state)
            .passwords
            .insert(region.to_owned(), password.to_owned());
    }
    /// Every later call answers this expiry.
    pub fn set_expires_at(&self, at: SystemTime) {
        lock(&self.state).expires_at = Some(at);
    }
    /// Every later call answers this proxyEndpoint (e.g. a local registry for login checks).
    pub fn set_proxy_endpoint(&self, endpoint: &str) {
        lock(&self.state).proxy_endpoint = Some(endpoint.to_owned());
    }
    /// Queues `fault` for the next `count` GetAuthorizationToken calls (None: all of them).
    /// Faults queued together apply one after the other, in the order they were added.
    pub fn add_fault(&self, fault: EcrFault, count: Option<usize>) {
        if count == Some(0) {
            return;
        }
        lock(&self.state).faults.push_back((fault, count));
    }
    /// Calls seen, with the region (from the SigV4 credential scope) and registryIds.
    pub fn calls(&self) -> Vec<(String, Vec<String>)> {
        lock(&self.state).calls.clone()
    }
    /// Every later ECR Public call answers this password (default `pw-public-<n>`, n counting
    /// ECR Public's calls).
    pub fn set_public_password(&self, password: &str) {
        lock(&self.state).public_password = Some(password.to_owned());
    }
    /// Every later ECR Public call answers this expiry (default: as `set_expires_at`).
    pub fn set_public_expires_at(&self, at: SystemTime) {
        lock(&self.state).public_expires_at = Some(at);
    }
    /// Queues `fault` for the next `count` ECR Public GetAuthorizationToken calls (None: all).
    /// `EcrFault::AccessDenied` answers as for a principal without sts:GetServiceBearerToken.
    pub fn add_public_fault(&self, fault: EcrFault, count: Option<usize>) {
        if count == Some(0) {
            return;
        }
        lock(&self.state).public_faults.push_back((fault, count));
    }
    /// ECR Public GetAuthorizationToken calls seen: the region of each (from the credential scope).
    pub fn public_calls(&self) -> Vec<String> {
        lock(&self.state).public_calls.clone()
    }
    /// Every later call must be signed by `signer` (access key id and session token), as with
    /// credentials the fake STS issued; any other is refused with 400
    /// UnrecognizedClientException.
    pub fn require_signer(&self, signer: crate::sts::Signer) {
        lock(&self.state).required_signer = Some(signer);
    }
    /// Who signed each call (ECR's and ECR Public's), in order, refused ones too.
    pub fn signers(&self) -> Vec<crate::sts::Signer> {
        lock(&self.state).signers.clone()
    }
    /// Every password this endpoint has handed out, to check none leaks into logs.
    pub fn passwords_issued(&self) -> Vec<String> {
        lock(&self.state).passwords_issued.clone()
    }
}

impl std::fmt::Debug for FakeEcr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeEcr").field("url", &self.url).finish()
    }
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct GetAuthorizationTokenRequest {
    #[serde(default)]
    registry_ids: Option<Vec<String>>,
}

async fn handle(
    axum::extract::State(state): axum::extract::State<Shared>,
    method: Method,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let target = headers
        .get("x-amz-target")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let public = target == format!("{PUBLIC_TARGET_PREFIX}GetAuthorizationToken");
    if method != Method::POST
        || !(public || target == format!("{TARGET_PREFIX}GetAuthorizationToken"))
    {
        return error(StatusCode::BAD_REQUEST, "UnknownOperationException", None);
    }
    let Some(authorization) = headers.get(header::AUTHORIZATION) else {
        return error(
            StatusCode::BAD_REQUEST,
            "MissingAuthenticationTokenException",
            Some("Missing Authentication Token"),
        );
    };
    let Some(region) = authorization.to_str().ok().and_then(region_of) else {
        return error(
            StatusCode::BAD_REQUEST,
            "IncompleteSignatureException",
            Some("Authorization header requires 'Credential' parameter."),
        );
    };
    let signer = crate::sts::Signer {
        access_key_id: authorization
            .to_str()
            .ok()
            .and_then(access_key_of)
            .unwrap_or_default(),
        session_token: headers
            .get("x-amz-security-token")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned),
    };
    {
        let mut state = lock(&state);
        state.signers.push(signer.clone());
        if state.required_signer.as_ref().is_some_and(|r| *r != signer) {
            return error(
                StatusCode::BAD_REQUEST,
                "UnrecognizedClientException",
                Some("The security token included in the request is invalid."),
            );
        }
    }
    if public {
        return public_token(&state, region);
    }
    // The SDK sends `{}` when nothing is set; an empty body means the same.
    let body: &[u8] = if body.is_empty() { b"{}" } else { &body };
    let request: GetAuthorizationTokenRequest = match serde_json::from_slice(body) {
        Ok(r) => r,
        Err(_) => return error(StatusCode::BAD_REQUEST, "SerializationException", None),
    };
    let registry_ids = request.registry_ids;
    if let Some(message) = registry_ids.as_deref().and_then(invalid_registry_ids) {
        return error(
            StatusCode::BAD_REQUEST,
            "InvalidParameterException",
            Some(&message),
        );
    }
    let registry_ids = registry_ids.unwrap_or_default();

    let mut state = lock(&state);
    state.calls.push((region.clone(), registry_ids.clone()));
    let n = {
        let n = state.calls_per_region.entry(region.clone()).or_default();
        *n += 1;
        *n
    };
    let fault = take_fault(&mut state.faults);
    if let Some((status, code, message)) = fault.as_ref().and_then(fault_error) {
        return error(status, code, Some(message));
    }
    let password = state
        .passwords
        .get(&region)
        .cloned()
        .unwrap_or_else(|| format!("pw-{region}-{n}"));
    state.passwords_issued.push(password.clone());
    let token = match fault {
        Some(EcrFault::MalformedToken) => BASE64.encode(&password),
        _ => BASE64.encode(format!("AWS:{password}")),
    };
    let expires_at = state
        .expires_at
        .unwrap_or_else(|| SystemTime::now() + TOKEN_LIFETIME);
    let accounts = if registry_ids.is_empty() {
        vec![CALLER_ACCOUNT.to_owned()]
    } else {
        registry_ids
    };
    let data: Vec<String> = accounts
        .iter()
        .map(|account| {
            let proxy = state
                .proxy_endpoint
                .clone()
                .unwrap_or_else(|| default_proxy_endpoint(account, &region));
            // Written by hand: expiresAt must be a JSON number in Java's double notation.
            format!(
                r#"{{"authorizationToken":{},"expiresAt":{},"proxyEndpoint":{}}}"#,
                serde_json::Value::from(token.as_str()),
                java_double_seconds(expires_at),
                serde_json::Value::from(proxy),
            )
        })
        .collect();
    drop(state);
    json_response(
        StatusCode::OK,
        format!(r#"{{"authorizationData":[{}]}}"#, data.join(",")),
    )
}

/// ECR Public's GetAuthorizationToken: `{"authorizationData":{"authorizationToken":..,"expiresAt":..}}`,
/// one object, no proxyEndpoint.
fn public_token(state: &Shared, region: String) -> Response {
    let mut state = lock(state);
    state.public_calls.push(region);
    let n = state.public_calls.len();
    let fault = take_fault(&mut state.public_faults);
    if let Some(EcrFault::AccessDenied) = fault {
        // ECR Public's token is an STS service bearer token: without that permission the call
        // is refused this way (the message users report, e.g. in fluxcd/pkg#938).
        return error(
            StatusCode::BAD_REQUEST,
            "AccessDeniedException",
            Some(
                "User: arn:aws:iam::123456789012:user/ci is not authorized to perform: \
                 sts:GetServiceBearerToken on resource: * because no identity-based policy \
                 allows the sts:GetServiceBearerToken action",
            ),
        );
    }
    if let Some((status, code, message)) = fault.as_ref().and_then(fault_error) {
        return error(status, code, Some(message));
    }
    let password = state
        .public_password
        .clone()
        .unwrap_or_else(|| format!("pw-public-{n}"));
    state.passwords_issued.push(password.clone());
    let token = match fault {
        Some(EcrFault::MalformedToken) => BASE64.encode(&password),
        _ => BASE64.encode(format!("AWS:{password}")),
    };
    let expires_at = state
        .public_expires_at
        .or(state.expires_at)
        .unwrap_or_else(|| SystemTime::now() + TOKEN_LIFETIME);
    drop(state);
    json_response(
        StatusCode::OK,
        format!(
            r#"{{"authorizationData":{{"authorizationToken":{},"expiresAt":{}}}}}"#,
            serde_json::Value::from(token.as_str()),
            java_double_seconds(expires_at),
        ),
    )
}

/// `https://<account>.dkr.ecr.<region>.<suffix>`, the suffix of the region's partition. Written
/// out here, apart from ecr-refresh's partition data, so that the fake checks that data rather
/// than repeating it. The suffixes are those of ECR's endpoint test cases in aws-sdk-ecr
/// (src/config/endpoint.rs: `api.ecr.eusc-de-east-1.amazonaws.eu`, `api.ecr.us-iso-east-1.c2s.ic.gov`...)
/// and of kubernetes/cloud-provider-aws's ecr-credential-provider host pattern.
pub fn default_proxy_endpoint(account: &str, region: &str) -> String {
    let suffix = [
        ("cn-", "amazonaws.com.cn"),
        ("eusc-", "amazonaws.eu"),
        ("us-isob-", "sc2s.sgov.gov"),
        ("us-isof-", "csp.hci.ic.gov"),
        ("us-iso-", "c2s.ic.gov"),
        ("eu-isoe-", "cloud.adc-e.uk"),
    ]
    .into_iter()
    .find(|(prefix, _)| region.starts_with(prefix))
    .map_or("amazonaws.com", |(_, suffix)| suffix);
    format!("https://{account}.dkr.ecr.{region}.{suffix}")
}

/// The region in a SigV4 `Authorization` header's credential scope
/// (`AWS4-HMAC-SHA256 Credential=AKID/20240101/us-east-1/ecr/aws4_request, ...`; ECR Public
/// signs as `ecr-public`).
pub fn region_of(authorization: &str) -> Option<String> {
    static SCOPE: std::sync::OnceLock<Regex> = std::sync::OnceLock::new();
    let scope = SCOPE.get_or_init(|| {
        Regex::new(r"Credential=[^/,\s]+/\d{8}/([a-z0-9-]+)/ecr(?:-public)?/aws4_request")
            .expect("a valid regex literal")
    });
    Some(scope.captures(authorization)?[1].to_owned())
}

/// The access key id in a SigV4 `Authorization` header (`Credential=<id>/<scope>`).
pub fn access_key_of(authorization: &str) -> Option<String> {
    let (_, rest) = authorization.split_once("Credential=")?;
    let id = rest.split('/').next()?;
    (!id.is_empty()).then(|| id.to_owned())
}

/// ECR's complaint about registryIds, if any (ids are 12 digits, 1 to 10 of them).
fn invalid_registry_ids(ids: &[String]) -> Option<String> {
    if ids.is_empty() || ids.len() > 10 {
        return Some(
            "Invalid parameter at 'registryIds' failed to satisfy constraint: \
             'Member must have length less than or equal to 10 and greater than or equal to 1'"
                .to_owned(),
        );
    }
    let bad = ids
        .iter()
        .any(|id| id.len() != 12 || !id.bytes().all(|b| b.is_ascii_digit()));
    bad.then(|| {
        "Invalid parameter at 'registryIds' failed to satisfy constraint: \
         'Member must satisfy constraint: [Member must satisfy regular expression pattern: [0-9]{12}]'"
            .to_owned()
    })
}

/// Epoch seconds (millisecond precision) as Java's `Double.toString` writes them, which is
/// what ECR sends: `1.7385984915E9`.
pub fn java_double_seconds(at: SystemTime) -> String {
    let millis = match at.duration_since(UNIX_EPOCH) {
        Ok(d) => d.as_millis() as f64,
        Err(before) => -(before.duration().as_millis() as f64),
    };
    let seconds = millis / 1000.0;
    if seconds != 0.0 && (seconds.abs() >= 1e7 || seconds.abs() < 1e-3) {
        let formatted = format!("{seconds:e}");
        let (mantissa, exponent) = formatted
            .split_once('e')
            .expect("{:e} always writes an exponent");
        if mantissa.contains('.') {
            format!("{mantissa}E{exponent}")
        } else {
            format!("{mantissa}.0E{exponent}")
        }
    } else {
        let formatted = format!("{seconds}");
        if formatted.contains('.') {
            formatted
        } else {
            format!("{formatted}.0")
        }
    }
}

fn json_response(status: StatusCode, body: String) -> Response {
    let mut response = (status, body).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(CONTENT_TYPE));
    if let Ok(id) = HeaderValue::from_str(&uuid::Uuid::new_v4().to_string()) {
        headers.insert("x-amzn-requestid", id);
    }
    response
}

/// An awsJson1.1 error: the code in `x-amzn-ErrorType` and in the body's `__type`.
fn error(status: StatusCode, code: &'static str, message: Option<&str>) -> Response {
    let mut body = serde_json::json!({ "__type": code });
    if let Some(message) = message {
        body["message"] = message.into();
    }
    let mut response = json_response(status, body.to_string());
    response
        .headers_mut()
        .insert("x-amzn-errortype", HeaderValue::from_static(code));
    response
}
