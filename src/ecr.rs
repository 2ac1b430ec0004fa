//! ECR tokens: one GetAuthorizationToken per region, before any namespace is touched.

use std::fmt;
use std::time::{Duration, SystemTime};

use aws_config::SdkConfig;
use aws_sdk_ecr::error::DisplayErrorContext;
use aws_sdk_ecr::primitives::{DateTime, DateTimeFormat};
use base64::Engine as _;
use secrecy::SecretString;
use tracing::{debug, warn};

use crate::docker_config::Credential;
use crate::registry::RegistryHost;

/// How long one GetAuthorizationToken may take, retries included.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// The token for one region: it serves every registry of that region the principal can reach.
pub struct RegionToken {
    pub region: String,
    pub registries: Vec<RegistryHost>,
    pub password: SecretString,
    pub expires_at: DateTime,
    /// The `proxyEndpoint`s ECR returned (`https://<host>`), where a login check goes.
    pub proxy_endpoints: Vec<String>,
}

impl fmt::Debug for RegionToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RegionToken")
            .field("region", &self.region)
            .field("registries", &self.registries)
            .field("password", &"[redacted]")
            .field("expires_at", &self.expires_at)
            .finish()
    }
}

/// The run's tokens, one per region needed.
#[derive(Debug)]
pub struct Tokens(pub Vec<RegionToken>);

impl Tokens {
    /// One credential per registry, in the configured order within each region.
    pub fn credentials(&self) -> Vec<Credential<'_>> {
        self.0
            .iter()
            .flat_map(|t| {
                t.registries.iter().map(|registry| Credential {
                    registry,
                    password: &t.password,
                })
            })
            .collect()
    }

    pub fn registries(&self) -> Vec<String> {
        self.0
            .iter()
            .flat_map(|t| t.registries.iter().map(|r| r.host().to_owned()))
            .collect()
    }

    /// Each region's expiry, for the metrics.
    pub fn expiry_by_region(&self) -> std::collections::BTreeMap<String, SystemTime> {
        self.0
            .iter()
            .filter_map(|t| Some((t.region.clone(), SystemTime::try_from(t.expires_at).ok()?)))
            .collect()
    }

    /// The earliest expiry, RFC 3339: when the Secret stops working.
    pub fn expires_at(&self) -> String {
        self.0
            .iter()
            .map(|t| t.expires_at)
            .min_by_key(|d| (d.secs(), d.subsec_nanos()))
            .and_then(|d| {
                DateTime::from_secs(d.secs())
                    .fmt(DateTimeFormat::DateTime)
                    .ok()
            })
            .unwrap_or_default()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum EcrError {
    #[error(
        "no AWS region is configured: set AWS_REGION (or a profile's region), or name the registries in \
         ECR_REFRESH_REGISTRIES"
    )]
    NoRegion,
    #[error(
        "ECR GetAuthorizationToken in {region} failed: {message}; check that the credentials (IRSA role, \
         EKS Pod Identity or keys) are valid and allow ecr:GetAuthorizationToken"
    )]
    Call { region: String, message: String },
    #[error("ECR GetAuthorizationToken in {region} got no answer within {}s", CALL_TIMEOUT.as_secs())]
    Timeout { region: String },
    #[error("ECR GetAuthorizationToken in {region} returned no authorization data")]
    Empty { region: String },
    #[error("the token ECR returned in {region} does not decode to AWS:<password>")]
    Malformed { region: String },
    #[error(
        "ECR returned proxyEndpoint {endpoint:?} in {region}, which is not an ECR registry host: {reason}"
    )]
    Endpoint {
        region: String,
        endpoint: String,
        reason: String,
    },
}

/// Fetches one token per region: the configured registries' regions, or the default region's
/// for the caller's own registry when none are configured.
pub async fn fetch(sdk: &SdkConfig, registries: &[RegistryHost]) -> Result<Tokens, EcrError> {
    if registries.is_empty() {
        let region = sdk.region().ok_or(EcrError::NoRegion)?.to_string();
        let mut token = get_token(sdk, &region, &[]).await?;
        let endpoint = token
            .proxy_endpoints
            .first()
            .ok_or_else(|| EcrError::Empty {
                region: region.clone(),
            })?;
        let registry =
            RegistryHost::from_proxy_endpoint(endpoint).map_err(|reason| EcrError::Endpoint {
                region: region.clone(),
                endpoint: endpoint.clone(),
                reason,
            })?;
        token.registries = vec![registry];
        return Ok(Tokens(vec![token]));
    }
    let mut regions: Vec<(&str, Vec<RegistryHost>)> = Vec::new();
    for registry in registries {
        match regions.iter_mut().find(|(r, _)| *r == registry.region()) {
            Some((_, hosts)) => hosts.push(registry.clone()),
            None => regions.push((registry.region(), vec![registry.clone()])),
        }
    }
    let mut tokens = Vec::with_capacity(regions.len());
    for (region, hosts) in regions {
        let mut accounts: Vec<String> = hosts.iter().map(|h| h.account().to_owned()).collect();
        let mut seen = std::collections::HashSet::new();
        accounts.retain(|a| seen.insert(a.clone()));
        let mut token = get_token(sdk, region, &accounts).await?;
        token.registries = hosts;
        tokens.push(token);
    }
    Ok(Tokens(tokens))
}

async fn get_token(
    sdk: &SdkConfig,
    region: &str,
    accounts: &[String],
) -> Result<RegionToken, EcrError> {
    let config = aws_sdk_ecr::config::Builder::from(sdk)
        .region(aws_sdk_ecr::config::Region::new(region.to_owned()))
        .build();
    let client = aws_sdk_ecr::Client::from_conf(config);
    debug!(%region, accounts = ?accounts, "GetAuthorizationToken");
    // registryIds is deprecated because it does not narrow the token; it still decides which
    // proxyEndpoints come back, which the login check uses.
    #[allow(deprecated)]
    let call = client
        .get_authorization_token()
        .set_registry_ids((!accounts.is_empty()).then(|| accounts.to_vec()))
        .send();
    let output = tokio::time::timeout(CALL_TIMEOUT, call)
        .await
        .map_err(|_| EcrError::Timeout {
            region: region.to_owned(),
        })?
        .map_err(|e| EcrError::Call {
            region: region.to_owned(),
            message: DisplayErrorContext(&e).to_string(),
        })?;
    let data = output.authorization_data();
    let first = data.first().ok_or_else(|| EcrError::Empty {
        region: region.to_owned(),
    })?;
    let malformed = || EcrError::Malformed {
        region: region.to_owned(),
    };
    let password =
        decode(first.authorization_token().ok_or_else(malformed)?).ok_or_else(malformed)?;
    let expires_at = first
        .expires_at()
        .copied()
        .unwrap_or_else(|| DateTime::from(SystemTime::now() + Duration::from_secs(12 * 3600)));
    if SystemTime::try_from(expires_at).is_ok_and(|at| at <= SystemTime::now()) {
        // ECR just issued it: a past expiry means our clock or theirs is off, not a dead token.
        warn!(
            %region,
            expires_at = %expires_at.fmt(DateTimeFormat::DateTime).unwrap_or_default(),
            "ECR token expiry is already past: check this node's clock (NTP); writing the token anyway"
        );
    }
    Ok(RegionToken {
        region: region.to_owned(),
        registries: Vec::new(),
        password,
        expires_at,
        proxy_endpoints: data
            .iter()
            .filter_map(|d| d.proxy_endpoint().map(str::to_owned))
            .collect(),
    })
}

/// `base64("AWS:" + password)` to the password.
fn decode(token: &str) -> Option<SecretString> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(token.trim())
        .ok()?;
    let text = String::from_utf8(bytes).ok()?;
    let password = text.strip_prefix("AWS:")?;
    (!password.is_empty()).then(|| SecretString::from(password.to_owned()))
}

#[cfg(test)]
mod tests {
    use secrecy::ExposeSecret;

    use super::*;

    #[test]
    fn tokens_decode_to_the_password_after_aws() {
        let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
        assert_eq!(
            decode(&b64("AWS:s3cret:with:colons"))
                .unwrap()
                .expose_secret(),
            "s3cret:with:colons"
        );
        for bad in [b64("admin:x"), b64("AWS:"), "%%%".into(), b64("AWSx")] {
            assert!(decode(&bad).is_none(), "{bad}");
        }
    }
}
