//! CreateSession: `POST /sessions?profileArn=..&roleArn=..&trustAnchorArn=..` with the body
//! `{"durationSeconds":N}`, signed with the certificate's key ([`super::signing`]), answered
//! `{"credentialSet":[{"credentials":{"accessKeyId","secretAccessKey","sessionToken",
//! "expiration"}}]}` (the CreateSession API reference, and what AWS's helper v1.4.0 sends and
//! reads: aws_signing_helper/credentials.go `GenerateCredentials`).
//!
//! The endpoint follows the SDK's convention: AWS_ENDPOINT_URL_ROLESANYWHERE, else
//! AWS_ENDPOINT_URL, else `https://rolesanywhere.<region>.<the partition's DNS suffix>`, the
//! region being the trust anchor's. The call goes through reqwest, which takes HTTPS_PROXY,
//! HTTP_PROXY and NO_PROXY from the environment as curl does (on-premises is where proxies are).

use std::time::{Duration, SystemTime};

use aws_credential_types::Credentials;
use reqwest::Url;
use serde_json::Value;
use tracing::{debug, info};

use super::identity::{Identity, IdentityError};
use super::signing::{self, Unsigned};
use super::{RolesAnywhere, credentials};
use crate::aws::partition::Partitions;

/// How long CreateSession may take.
const TIMEOUT: Duration = Duration::from_secs(30);

/// Why Roles Anywhere gave no credentials. Each names what is at fault: the file, or the ARNs.
#[derive(Debug, Clone, thiserror::Error)]
pub enum SessionError {
    #[error(transparent)]
    Identity(#[from] IdentityError),
    #[error(
        "the certificate in {path} (ECR_REFRESH_ROLES_ANYWHERE_CERTIFICATE, serial {serial}, {subject}) \
         is not valid before {not_before}; Roles Anywhere refuses it until then: check the clocks of \
         its issuer and of this node"
    )]
    NotYetValid {
        path: String,
        serial: String,
        subject: String,
        not_before: String,
    },
    #[error(
        "the certificate in {path} (ECR_REFRESH_ROLES_ANYWHERE_CERTIFICATE, serial {serial}, {subject}) \
         expired at {not_after}; Roles Anywhere refuses it: renew it (cert-manager renews a Certificate \
         before it expires: check its status with kubectl describe certificate)"
    )]
    Expired {
        path: String,
        serial: String,
        subject: String,
        not_after: String,
    },
    #[error(
        "{variable}={url:?} is not an http or https URL; set the Roles Anywhere endpoint there"
    )]
    Endpoint { variable: &'static str, url: String },
    #[error(
        "CreateSession at {url} could not be sent: {error}; check the endpoint, and HTTPS_PROXY and \
         NO_PROXY if a proxy is on the way"
    )]
    Unreachable { url: String, error: String },
    #[error("CreateSession refused: HTTP {status} {code}: {message}; {hint} ({arns})")]
    Refused {
        status: u16,
        code: String,
        message: String,
        hint: &'static str,
        arns: String,
    },
    #[error("CreateSession at {url} answered HTTP {status} with no session: {why}")]
    Malformed {
        url: String,
        status: u16,
        why: String,
    },
}

/// The endpoint's base URL, and the variable that named it (None: the partition's default).
fn endpoint(config: &RolesAnywhere) -> (String, Option<&'static str>) {
    for variable in ["AWS_ENDPOINT_URL_ROLESANYWHERE", "AWS_ENDPOINT_URL"] {
        if let Some(url) = std::env::var(variable)
            .ok()
            .filter(|v| !v.trim().is_empty())
        {
            return (url.trim().trim_end_matches('/').to_owned(), Some(variable));
        }
    }
    let region = config.trust_anchor_arn.0.region();
    let suffix = Partitions::sdk()
        .of_region(region)
        .map_or_else(|| "amazonaws.com".to_owned(), |p| p.dns_suffix);
    (format!("https://rolesanywhere.{region}.{suffix}"), None)
}

fn rfc3339(at: SystemTime) -> String {
    humantime::format_rfc3339_seconds(at).to_string()
}

/// The files read and checked, and the certificate valid at `now`: what CreateSession needs
/// before it is sent. A refresh calls it before each CreateSession, and a check once, to
/// report what a refresh would meet.
pub fn usable(config: &RolesAnywhere, now: SystemTime) -> Result<Identity, SessionError> {
    let identity = Identity::load(config)?;
    let path = || config.certificate.display().to_string();
    if now < identity.not_before {
        return Err(SessionError::NotYetValid {
            path: path(),
            serial: identity.serial.clone(),
            subject: identity.subject.clone(),
            not_before: rfc3339(identity.not_before),
        });
    }
    if now > identity.not_after {
        return Err(SessionError::Expired {
            path: path(),
            serial: identity.serial.clone(),
            subject: identity.subject.clone(),
            not_after: rfc3339(identity.not_after),
        });
    }
    Ok(identity)
}

/// The files read and checked, CreateSession sent; the credentials, and the certificate's end.
pub async fn create(config: &RolesAnywhere) -> Result<(Credentials, SystemTime), SessionError> {
    let now = SystemTime::now();
    let identity = usable(config, now)?;
    let (base, variable) = endpoint(config);
    let bad_endpoint = || SessionError::Endpoint {
        variable: variable.unwrap_or("the trust anchor's region"),
        url: base.clone(),
    };
    let query = [
        ("profileArn", config.profile_arn.0.as_str()),
        ("roleArn", config.role_arn.as_str()),
        ("trustAnchorArn", config.trust_anchor_arn.0.as_str()),
    ];
    let url = Url::parse(&format!(
        "{base}/sessions?{}",
        signing::canonical_query(&query)
    ))
    .ok()
    .filter(|u| matches!(u.scheme(), "http" | "https") && u.host_str().is_some())
    .ok_or_else(bad_endpoint)?;
    let host = match url.port() {
        Some(port) => format!("{}:{port}", url.host_str().unwrap_or_default()),
        None => url.host_str().unwrap_or_default().to_owned(),
    };
    let body =
        serde_json::json!({"durationSeconds": config.session_duration.as_secs()}).to_string();
    let headers = signing::sign(
        &identity,
        &Unsigned {
            host: &host,
            path: url.path(),
            query: &query,
            body: body.as_bytes(),
            region: config.trust_anchor_arn.0.region(),
            at: now,
        },
    );
    debug!(
        url = %url,
        serial = %identity.serial,
        subject = %identity.subject,
        algorithm = identity.algorithm(),
        intermediates = identity.chain.len(),
        "CreateSession"
    );
    let client = reqwest::Client::builder()
        .timeout(TIMEOUT)
        .build()
        .map_err(|e| unreachable(&url, &e))?;
    let mut request = client.post(url.clone()).body(body);
    for (name, value) in headers {
        request = request.header(name, value);
    }
    let response = request.send().await.map_err(|e| unreachable(&url, &e))?;
    let status = response.status();
    let error_type = response
        .headers()
        .get("x-amzn-errortype")
        .and_then(|v| v.to_str().ok())
        .map(|v| v.split(':').next().unwrap_or_default().to_owned());
    let text = response.text().await.map_err(|e| unreachable(&url, &e))?;
    let answer: Option<Value> = serde_json::from_str(&text).ok();
    if !status.is_success() {
        let field = |name: &str| {
            answer
                .as_ref()
                .and_then(|a| a[name].as_str())
                .map(str::to_owned)
        };
        let code = error_type
            .or_else(|| field("__type"))
            .or_else(|| field("code"))
            .unwrap_or_else(|| "unknown".into());
        return Err(SessionError::Refused {
            status: status.as_u16(),
            message: field("message")
                .or_else(|| field("Message"))
                .unwrap_or_else(|| text.chars().take(200).collect()),
            hint: hint(&code),
            code,
            arns: config.arns(),
        });
    }
    let malformed = |why: &str| SessionError::Malformed {
        url: url.to_string(),
        status: status.as_u16(),
        why: why.to_owned(),
    };
    let answer = answer.ok_or_else(|| malformed("the body is not JSON"))?;
    let set = &answer["credentialSet"][0]["credentials"];
    let field = |name: &str| {
        set[name]
            .as_str()
            .filter(|v| !v.is_empty())
            .map(str::to_owned)
            .ok_or_else(|| malformed(&format!("credentialSet[0].credentials.{name} is missing")))
    };
    let expiration = field("expiration")?;
    let expiration = humantime::parse_rfc3339_weak(&expiration).map_err(|_| {
        malformed("credentialSet[0].credentials.expiration is not an RFC 3339 time")
    })?;
    info!(
        role = %config.role_arn,
        serial = %identity.serial,
        subject = %identity.subject,
        certificate_expires_at = %rfc3339(identity.not_after),
        session_expires_at = %rfc3339(expiration),
        "Roles Anywhere session created"
    );
    Ok((
        credentials(
            field("accessKeyId")?,
            field("secretAccessKey")?,
            field("sessionToken")?,
            expiration,
        ),
        identity.not_after,
    ))
}

fn unreachable(url: &Url, e: &reqwest::Error) -> SessionError {
    let mut error = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        error = format!("{error}: {s}");
        source = s.source();
    }
    SessionError::Unreachable {
        url: url.to_string(),
        error,
    }
}

/// What to look at, by the error's code.
fn hint(code: &str) -> &'static str {
    match code {
        "AccessDeniedException" => {
            "the trust anchor must hold the CA that issued the certificate, with the intermediates \
             sent (the extra blocks of tls.crt, or ECR_REFRESH_ROLES_ANYWHERE_CHAIN); the trust \
             anchor and the profile must be enabled, the profile must list the role, and the role \
             must trust rolesanywhere.amazonaws.com with conditions the certificate's subject meets"
        }
        "ValidationException" => {
            "check the ARNs, and that the session duration is within the profile's \
             (ECR_REFRESH_ROLES_ANYWHERE_SESSION_DURATION)"
        }
        "ResourceNotFoundException" => {
            "the trust anchor or the profile does not exist in the trust anchor's region"
        }
        _ => "check the trust anchor, the profile and the role",
    }
}
