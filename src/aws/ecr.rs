//! Registry tokens: one ECR GetAuthorizationToken per region, and one from ECR Public when it is
//! configured, before any namespace is touched.

use std::fmt;
use std::time::{Duration, SystemTime};

use aws_config::SdkConfig;
use aws_credential_types::provider::SharedCredentialsProvider;
use aws_sdk_ecr::primitives::{DateTime, DateTimeFormat};
use base64::Engine as _;
use secrecy::SecretString;
use tracing::{debug, warn};

use crate::aws::credentials::{self, CredentialError};
use crate::aws::registry::{NoDualStack, PUBLIC_REGION, RegistryHost, with_twins};

/// One registry's credentials, as they go into `auths`.
pub struct Credential<'a> {
    pub registry: &'a RegistryHost,
    pub password: &'a SecretString,
}

/// ECR Public's token among the expiries by token (the metric's `region` label).
pub const PUBLIC_TOKEN_KEY: &str = "ecr-public";

/// How long one GetAuthorizationToken may take, retries included.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// How long an ECR authorization token lives (GetAuthorizationToken: 12 hours): none of ours
/// expires later than this after its fetch. Every rule about a token's age reads it from here.
pub const TOKEN_LIFETIME: Duration = Duration::from_secs(12 * 3600);

/// Which GetAuthorizationToken issued a token: ECR's in a region, or ECR Public's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenApi {
    Ecr {
        region: String,
    },
    /// ECR Public's own API, served in us-east-1 only.
    EcrPublic,
}

impl TokenApi {
    /// The IAM actions the call needs, for error messages.
    fn permissions(&self) -> &'static str {
        match self {
            Self::Ecr { .. } => "ecr:GetAuthorizationToken",
            // ECR Public's token is an STS service bearer token: the call needs both.
            Self::EcrPublic => "ecr-public:GetAuthorizationToken and sts:GetServiceBearerToken",
        }
    }
}

impl fmt::Display for TokenApi {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Ecr { region } => write!(f, "ECR GetAuthorizationToken in {region}"),
            Self::EcrPublic => write!(f, "ECR Public GetAuthorizationToken in {PUBLIC_REGION}"),
        }
    }
}

/// One token: it serves every registry host of its region (or of ECR Public) the principal can
/// reach, IPv4 and dual-stack alike.
pub struct RegionToken {
    pub region: String,
    pub api: TokenApi,
    /// The hosts this token is written under, dual-stack twins included.
    pub registries: Vec<RegistryHost>,
    pub password: SecretString,
    pub expires_at: DateTime,
    /// The `proxyEndpoint`s ECR returned (`https://<host>`), where a login check goes. ECR
    /// Public returns none.
    pub proxy_endpoints: Vec<String>,
}

impl fmt::Debug for RegionToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RegionToken")
            .field("region", &self.region)
            .field("api", &self.api)
            .field("registries", &self.registries)
            .field("password", &"[redacted]")
            .field("expires_at", &self.expires_at)
            .finish()
    }
}

/// The run's tokens, one per region needed and one for ECR Public if it is configured, and
/// where the credentials that fetched them came from (`web identity`, `assume role arn:… over
/// static keys`), for the run's log.
#[derive(Debug)]
pub struct Tokens {
    /// One per region needed, and one for ECR Public if it is configured.
    pub regions: Vec<RegionToken>,
    /// Where the credentials came from, for the run's log.
    pub source: String,
}

impl Tokens {
    /// One credential per registry host, in the configured order within each token.
    pub fn credentials(&self) -> Vec<Credential<'_>> {
        self.regions
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
        self.regions
            .iter()
            .flat_map(|t| t.registries.iter().map(|r| r.host().to_owned()))
            .collect()
    }

    /// Each token's expiry, for the metrics: a private registry's by its region, ECR Public's
    /// as `ecr-public` (PUBLIC_TOKEN_KEY). ECR Public's token is issued in us-east-1 too, but it
    /// is another token with its own expiry: keyed by region, one would hide the other.
    pub fn expiry_by_token(&self) -> std::collections::BTreeMap<String, SystemTime> {
        self.regions
            .iter()
            .filter_map(|t| {
                let key = match &t.api {
                    TokenApi::Ecr { region } => region.clone(),
                    TokenApi::EcrPublic => PUBLIC_TOKEN_KEY.to_owned(),
                };
                Some((key, SystemTime::try_from(t.expires_at).ok()?))
            })
            .collect()
    }

    /// The earliest expiry, RFC 3339: when the Secret stops working.
    pub fn expires_at(&self) -> String {
        self.regions
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
    /// Before any ECR call: the credential source named, and what it was refused.
    #[error(transparent)]
    Credentials(#[from] CredentialError),
    #[error(
        "{api} failed: {message}; check that the credentials (IRSA role, EKS Pod Identity or keys) are \
         valid and allow {permissions}",
        permissions = .api.permissions()
    )]
    Call { api: TokenApi, message: String },
    #[error("{api} got no answer within {}s", CALL_TIMEOUT.as_secs())]
    Timeout { api: TokenApi },
    #[error("{api} returned no authorization data")]
    Empty { api: TokenApi },
    #[error("the token from {api} does not decode to AWS:<password>")]
    Malformed { api: TokenApi },
    #[error("ECR_REFRESH_DUAL_STACK=true, but {0}")]
    NoDualStack(#[from] NoDualStack),
    #[error(
        "ECR returned proxyEndpoint {endpoint:?} in {region}, which is not an ECR registry host: {reason}"
    )]
    Endpoint {
        region: String,
        endpoint: String,
        reason: String,
    },
}

/// Fetches one token per region of the configured private registries (or the default region's,
/// for the caller's own registry, when none are configured), and one from ECR Public if
/// `public.ecr.aws` or its twin is configured. With `dual_stack`, each token is also written under
/// its registries' dual-stack hosts. The credentials are resolved first, once: a failure there
/// names its source, and every call signs with what it gave.
pub async fn fetch(
    sdk: &SdkConfig,
    registries: &[RegistryHost],
    dual_stack: bool,
) -> Result<Tokens, EcrError> {
    let credentials::Resolved {
        credentials,
        source,
        ..
    } = credentials::resolve(sdk).await?;
    let sdk = &sdk
        .to_builder()
        .credentials_provider(SharedCredentialsProvider::new(credentials))
        .build();
    if registries.is_empty() {
        let region = sdk.region().ok_or(EcrError::NoRegion)?.to_string();
        let mut token = get_token(sdk, &region, &[]).await?;
        let endpoint = token
            .proxy_endpoints
            .first()
            .ok_or_else(|| EcrError::Empty {
                api: token.api.clone(),
            })?;
        let registry =
            RegistryHost::from_proxy_endpoint(endpoint).map_err(|reason| EcrError::Endpoint {
                region: region.clone(),
                endpoint: endpoint.clone(),
                reason,
            })?;
        token.registries = with_twins(vec![registry], dual_stack)?;
        return Ok(Tokens {
            regions: vec![token],
            source,
        });
    }
    // One group per token, in the order the registries were configured: a region's private
    // registries (None: ECR Public's).
    let mut groups: Vec<(Option<&str>, Vec<RegistryHost>)> = Vec::new();
    for registry in registries {
        let key = (!registry.is_public()).then(|| registry.region());
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, hosts)) => hosts.push(registry.clone()),
            None => groups.push((key, vec![registry.clone()])),
        }
    }
    let mut tokens = Vec::with_capacity(groups.len());
    for (region, hosts) in groups {
        let mut token = match region {
            Some(region) => {
                let mut accounts: Vec<String> = Vec::new();
                for account in hosts.iter().filter_map(RegistryHost::account) {
                    if !accounts.iter().any(|a| a == account) {
                        accounts.push(account.to_owned());
                    }
                }
                get_token(sdk, region, &accounts).await?
            }
            None => get_public_token(sdk).await?,
        };
        token.registries = with_twins(hosts, dual_stack)?;
        tokens.push(token);
    }
    Ok(Tokens {
        regions: tokens,
        source,
    })
}

async fn get_token(
    sdk: &SdkConfig,
    region: &str,
    accounts: &[String],
) -> Result<RegionToken, EcrError> {
    let api = TokenApi::Ecr {
        region: region.to_owned(),
    };
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
        .map_err(|_| EcrError::Timeout { api: api.clone() })?
        .map_err(|e| EcrError::Call {
            api: api.clone(),
            message: aws_sdk_ecr::error::DisplayErrorContext(&e).to_string(),
        })?;
    let data = output.authorization_data();
    let first = data
        .first()
        .ok_or_else(|| EcrError::Empty { api: api.clone() })?;
    let (password, expires_at) = token_of(&api, first.authorization_token(), first.expires_at())?;
    Ok(RegionToken {
        region: region.to_owned(),
        api,
        registries: Vec::new(),
        password,
        expires_at,
        proxy_endpoints: data
            .iter()
            .filter_map(|d| d.proxy_endpoint().map(str::to_owned))
            .collect(),
    })
}

/// ECR Public's GetAuthorizationToken: always in us-east-1, whatever the SDK's region, as ECR
/// Public's API for tokens is served there. AWS_ENDPOINT_URL_ECR_PUBLIC points it elsewhere
/// (the SDK reads it when the client is built from the SdkConfig).
async fn get_public_token(sdk: &SdkConfig) -> Result<RegionToken, EcrError> {
    let api = TokenApi::EcrPublic;
    let config = aws_sdk_ecrpublic::config::Builder::from(sdk)
        .region(aws_sdk_ecrpublic::config::Region::new(PUBLIC_REGION))
        .build();
    let client = aws_sdk_ecrpublic::Client::from_conf(config);
    debug!(region = PUBLIC_REGION, "ECR Public GetAuthorizationToken");
    let call = client.get_authorization_token().send();
    let output = tokio::time::timeout(CALL_TIMEOUT, call)
        .await
        .map_err(|_| EcrError::Timeout { api: api.clone() })?
        .map_err(|e| EcrError::Call {
            api: api.clone(),
            message: aws_sdk_ecrpublic::error::DisplayErrorContext(&e).to_string(),
        })?;
    // A single object here, not ECR's list: the token serves the one public registry.
    let data = output
        .authorization_data()
        .ok_or_else(|| EcrError::Empty { api: api.clone() })?;
    let (password, expires_at) = token_of(&api, data.authorization_token(), data.expires_at())?;
    Ok(RegionToken {
        region: PUBLIC_REGION.to_owned(),
        api,
        registries: Vec::new(),
        password,
        expires_at,
        proxy_endpoints: Vec::new(),
    })
}

/// The password and expiry of an authorization token as either API returns it.
fn token_of(
    api: &TokenApi,
    token: Option<&str>,
    expires_at: Option<&DateTime>,
) -> Result<(SecretString, DateTime), EcrError> {
    let malformed = || EcrError::Malformed { api: api.clone() };
    let password = decode(token.ok_or_else(malformed)?).ok_or_else(malformed)?;
    let expires_at = expires_at
        .copied()
        .unwrap_or_else(|| DateTime::from(SystemTime::now() + TOKEN_LIFETIME));
    if SystemTime::try_from(expires_at).is_ok_and(|at| at <= SystemTime::now()) {
        // The API just issued it: a past expiry means our clock or theirs is off, not a dead token.
        warn!(
            api = %api,
            expires_at = %expires_at.fmt(DateTimeFormat::DateTime).unwrap_or_default(),
            "token expiry is already past: check this node's clock (NTP); writing the token anyway"
        );
    }
    Ok((password, expires_at))
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
    fn dual_stack_adds_each_hosts_twin_after_it_once() {
        use std::str::FromStr;
        let hosts = |names: &[&str]| -> Vec<RegistryHost> {
            names
                .iter()
                .map(|h| RegistryHost::from_str(h).unwrap())
                .collect()
        };
        let ipv4 = "123456789012.dkr.ecr.us-east-1.amazonaws.com";
        let twin = "123456789012.dkr-ecr.us-east-1.on.aws";
        let configured = hosts(&[ipv4, twin, "public.ecr.aws"]);
        assert_eq!(
            with_twins(configured.clone(), true).unwrap(),
            hosts(&[ipv4, twin, "public.ecr.aws", "ecr-public.aws.com"])
        );
        assert_eq!(with_twins(configured.clone(), false).unwrap(), configured);
    }

    #[test]
    fn dual_stack_is_refused_for_a_registry_whose_partition_has_none() {
        let partitions = crate::aws::partition::with_new_partition(true, false);
        let own =
            RegistryHost::parse_in("123456789012.dkr.ecr.nw-north-1.amazonaws.new", &partitions)
                .unwrap();
        let err = with_twins(vec![own.clone()], true).unwrap_err();
        assert_eq!(err.partition, "aws-new");
        let message = EcrError::from(err).to_string();
        assert!(
            message.starts_with("ECR_REFRESH_DUAL_STACK=true, but the registry 123456789012.dkr.ecr.nw-north-1.amazonaws.new is in partition aws-new"),
            "{message}"
        );
        assert_eq!(with_twins(vec![own.clone()], false).unwrap(), [own]);
    }

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
