//! The run's AWS credentials: a base source, and optionally a role assumed over it.
//!
//! The base is the SDK's default chain, in the SDK's order (aws-config 1.13,
//! src/default_provider/credentials.rs: environment, profile, web identity, container, instance
//! metadata), built here from the same providers so that each carries its name: a failure then
//! says which source failed and what was refused, instead of the SDK's "an error occurred while
//! loading credentials". A source that is not configured (the SDK's `CredentialsNotLoaded`) is
//! passed over, as the SDK's chain does; the first that is configured decides.
//!
//! Over the base, ECR_REFRESH_ASSUME_ROLE_ARN adds an STS AssumeRole (aws-config's
//! AssumeRoleProvider) with the external id and session name.
//!
//! ECR_REFRESH_ROLES_ANYWHERE_* replaces the SDK's sources with one: IAM Roles Anywhere
//! ([`roles_anywhere`]). Configured explicitly, it is the only base, so that keys left in the
//! environment never sign in its place; assume-role chains on top of it as on any base.

pub mod assume_role;
pub mod roles_anywhere;
pub mod set_up;

use std::fmt;
use std::time::Duration;

use aws_config::Region;
use aws_config::SdkConfig;
use aws_config::ecs::EcsCredentialsProvider;
use aws_config::environment::credentials::EnvironmentVariableCredentialsProvider;
use aws_config::imds::credentials::ImdsCredentialsProvider;
use aws_config::profile::ProfileFileCredentialsProvider;
use aws_config::provider_config::ProviderConfig;
use aws_config::web_identity_token::WebIdentityTokenCredentialsProvider;
use aws_credential_types::Credentials;
use aws_credential_types::provider::error::CredentialsError;
use aws_credential_types::provider::{self, ProvideCredentials, SharedCredentialsProvider, future};
use aws_sdk_sts::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use aws_sdk_sts::operation::assume_role::AssumeRoleError;
use aws_sdk_sts::operation::assume_role_with_web_identity::AssumeRoleWithWebIdentityError;
use tracing::debug;

pub use assume_role::{AssumeRole, ExternalId, RoleArn, SessionName};
pub use roles_anywhere::{CertificateExpiry, RolesAnywhere, RolesAnywhereProvider};

/// How long the credentials may take, every source and STS call included.
const RESOLVE_TIMEOUT: Duration = Duration::from_secs(60);

/// A base source of credentials, as the SDK's default chain orders them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (the chart's `aws.existingSecret`).
    Environment,
    /// A profile of the shared config and credentials files (AWS_PROFILE, AWS_CONFIG_FILE).
    Profile,
    /// AWS_ROLE_ARN and AWS_WEB_IDENTITY_TOKEN_FILE: a ServiceAccount token (IRSA, or a
    /// cluster's own issuer).
    WebIdentity,
    /// The container endpoint (ECS, EKS Pod Identity).
    Container,
    /// EC2 instance metadata.
    InstanceMetadata,
    /// IAM Roles Anywhere (ECR_REFRESH_ROLES_ANYWHERE_*): when configured, the only source.
    RolesAnywhere,
}

impl Source {
    /// Every source, in the order they are tried.
    pub const ALL: [Source; 5] = [
        Self::Environment,
        Self::Profile,
        Self::WebIdentity,
        Self::Container,
        Self::InstanceMetadata,
    ];

    /// What sets this source up, for the message when none is.
    fn configured_by(self) -> &'static str {
        match self {
            Self::Environment => "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY",
            Self::Profile => "AWS_PROFILE or ~/.aws/config",
            Self::WebIdentity => "AWS_ROLE_ARN and AWS_WEB_IDENTITY_TOKEN_FILE",
            Self::Container => "AWS_CONTAINER_CREDENTIALS_FULL_URI (EKS Pod Identity, ECS)",
            Self::InstanceMetadata => "an EC2 instance profile",
            Self::RolesAnywhere => "ECR_REFRESH_ROLES_ANYWHERE_*",
        }
    }
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Environment => "static keys",
            Self::Profile => "profile",
            Self::WebIdentity => "web identity",
            Self::Container => "container credentials",
            Self::InstanceMetadata => "instance metadata",
            Self::RolesAnywhere => "roles anywhere",
        })
    }
}

/// Why the run has no AWS credentials: which source was tried, and what was refused.
#[derive(Debug, Clone, thiserror::Error)]
pub enum CredentialError {
    #[error(
        "no AWS credentials: none of the sources is set up ({}); set one of them",
        Source::ALL.iter().map(|s| format!("{s}: {}", s.configured_by())).collect::<Vec<_>>().join("; ")
    )]
    NoSource,
    #[error("web identity: STS refused the token for role {role_arn}: {code}: {message}; {}", web_identity_hint(.code))]
    WebIdentityRefused {
        role_arn: String,
        code: String,
        message: String,
    },
    #[error("{from}: {detail}")]
    Failed { from: Source, detail: String },
    #[error(
        "assume role {role_arn} ({external_id}) over {over}: STS refused: {code}: {message}; the role's \
         trust policy must trust the principal of the {over} and require the external id sent \
         (sts:ExternalId), or none if none is sent",
        external_id = if *.external_id { "with an external id" } else { "no external id" }
    )]
    AssumeRoleRefused {
        role_arn: RoleArn,
        external_id: bool,
        over: Source,
        code: String,
        message: String,
    },
    #[error("assume role {role_arn} over {over}: {detail}")]
    AssumeRoleFailed {
        role_arn: RoleArn,
        over: Source,
        detail: String,
    },
    #[error(
        "ECR_REFRESH_ASSUME_ROLE_ARN is set, but no AWS region is: STS is asked in AWS_REGION; set it"
    )]
    AssumeRoleNoRegion,
    #[error("no AWS credentials within {}s (sources and STS included)", RESOLVE_TIMEOUT.as_secs())]
    Timeout,
    /// The provider in the SDK configuration is not ours (a caller set its own).
    #[error("AWS credentials: {0}")]
    Other(String),
}

/// The credentials a run signs with, and where they came from.
pub struct Resolved {
    pub credentials: Credentials,
    /// `web identity`, or `assume role arn:… over static keys`: for the logs.
    pub source: String,
    /// When the certificate they were had with expires (Roles Anywhere), for the logs and the
    /// metric; None for a source without a certificate.
    pub certificate_expires_at: Option<std::time::SystemTime>,
}

/// The base sources with their names, and the role to assume over them.
#[derive(Debug)]
pub struct Chain {
    sources: Vec<(Source, SharedCredentialsProvider)>,
    /// AWS_ROLE_ARN, as the web identity source reads it: named when STS refuses the token.
    web_identity_role: Option<String>,
    /// AWS_WEB_IDENTITY_TOKEN_FILE: named when it can't be read.
    web_identity_token_file: Option<String>,
    assume_role: Option<(AssumeRole, SdkConfig)>,
}

impl Chain {
    /// The SDK's default sources for `region`, or Roles Anywhere alone when it is configured;
    /// with `assume_role`, its STS calls use `sdk`'s region and endpoint (AWS_ENDPOINT_URL_STS).
    pub fn new(
        region: Option<Region>,
        assume_role: Option<AssumeRole>,
        roles_anywhere: Option<RolesAnywhere>,
        sdk: &SdkConfig,
    ) -> Self {
        let conf = ProviderConfig::default().with_region(region);
        let provider = |source| -> SharedCredentialsProvider {
            match source {
                Source::Environment => {
                    SharedCredentialsProvider::new(EnvironmentVariableCredentialsProvider::new())
                }
                Source::Profile => SharedCredentialsProvider::new(
                    ProfileFileCredentialsProvider::builder()
                        .configure(&conf)
                        .build(),
                ),
                Source::WebIdentity => SharedCredentialsProvider::new(
                    WebIdentityTokenCredentialsProvider::builder()
                        .configure(&conf)
                        .build(),
                ),
                Source::Container => SharedCredentialsProvider::new(
                    EcsCredentialsProvider::builder().configure(&conf).build(),
                ),
                Source::InstanceMetadata => SharedCredentialsProvider::new(
                    ImdsCredentialsProvider::builder().configure(&conf).build(),
                ),
                Source::RolesAnywhere => unreachable!("built below, from its configuration"),
            }
        };
        let sources = match roles_anywhere {
            Some(config) => vec![(
                Source::RolesAnywhere,
                SharedCredentialsProvider::new(RolesAnywhereProvider::new(config)),
            )],
            None => Source::ALL.iter().map(|&s| (s, provider(s))).collect(),
        };
        Self {
            sources,
            web_identity_role: std::env::var("AWS_ROLE_ARN").ok(),
            web_identity_token_file: std::env::var("AWS_WEB_IDENTITY_TOKEN_FILE").ok(),
            assume_role: assume_role.map(|role| (role, sdk.clone())),
        }
    }

    /// The first configured base source's credentials, with the role assumed over them.
    pub async fn resolve(&self) -> Result<Resolved, CredentialError> {
        let (source, base) = self.base().await?;
        let certificate_expires_at = base.get_property::<CertificateExpiry>().map(|e| e.0);
        let Some((role, sdk)) = &self.assume_role else {
            return Ok(Resolved {
                credentials: base,
                source: source.to_string(),
                certificate_expires_at,
            });
        };
        if sdk.region().is_none() {
            return Err(CredentialError::AssumeRoleNoRegion);
        }
        let credentials = assume_role::assume(role, sdk, base)
            .await
            .map_err(|e| assume_role_error(role, source, &e))?;
        Ok(Resolved {
            credentials,
            source: format!("assume role {} over {source}", role.role_arn),
            certificate_expires_at,
        })
    }

    async fn base(&self) -> Result<(Source, Credentials), CredentialError> {
        for (source, provider) in &self.sources {
            match provider.provide_credentials().await {
                Ok(credentials) => return Ok((*source, credentials)),
                Err(e @ CredentialsError::CredentialsNotLoaded(_)) => {
                    debug!(%source, reason = %DisplayErrorContext(&e), "credential source not set up");
                }
                Err(e) => return Err(self.source_error(*source, &e)),
            }
        }
        Err(CredentialError::NoSource)
    }

    fn source_error(&self, source: Source, e: &CredentialsError) -> CredentialError {
        if let Some(refused) = find::<roles_anywhere::SessionError>(e) {
            return CredentialError::Failed {
                from: source,
                detail: refused.to_string(),
            };
        }
        let refused = find::<SdkError<AssumeRoleWithWebIdentityError>>(e)
            .and_then(SdkError::as_service_error);
        if let Some(refused) = refused {
            return CredentialError::WebIdentityRefused {
                role_arn: self
                    .web_identity_role
                    .clone()
                    .unwrap_or_else(|| "(AWS_ROLE_ARN)".into()),
                code: refused.code().unwrap_or("unknown").to_owned(),
                message: refused.message().unwrap_or_default().to_owned(),
            };
        }
        if source == Source::WebIdentity
            && let (Some(io), Some(path)) =
                (find::<std::io::Error>(e), &self.web_identity_token_file)
        {
            return CredentialError::Failed {
                from: source,
                detail: format!(
                    "cannot read the token file {path} (AWS_WEB_IDENTITY_TOKEN_FILE): {io}; check \
                     the projected ServiceAccount token volume and its mount"
                ),
            };
        }
        CredentialError::Failed {
            from: source,
            detail: DisplayErrorContext(e).to_string(),
        }
    }
}

fn assume_role_error(role: &AssumeRole, over: Source, e: &CredentialsError) -> CredentialError {
    match find::<SdkError<AssumeRoleError>>(e).and_then(SdkError::as_service_error) {
        Some(refused) => CredentialError::AssumeRoleRefused {
            role_arn: role.role_arn.clone(),
            external_id: role.external_id.is_some(),
            over,
            code: refused.code().unwrap_or("unknown").to_owned(),
            message: refused.message().unwrap_or_default().to_owned(),
        },
        None => CredentialError::AssumeRoleFailed {
            role_arn: role.role_arn.clone(),
            over,
            detail: DisplayErrorContext(e).to_string(),
        },
    }
}

/// The first error of type `T` in `e`'s chain of sources.
fn find<T: std::error::Error + 'static>(e: &CredentialsError) -> Option<&T> {
    let mut next: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(error) = next {
        if let Some(found) = error.downcast_ref::<T>() {
            return Some(found);
        }
        next = error.source();
    }
    None
}

/// What to look at when STS refuses a web identity token, by STS's error code.
fn web_identity_hint(code: &str) -> &'static str {
    match code {
        "ExpiredTokenException" => {
            "the token file must hold a fresh token (a projected ServiceAccount token, which the \
             kubelet renews)"
        }
        "InvalidIdentityToken" => {
            "check the IAM OIDC provider: its URL must be the token's issuer (iss), its audience \
             the token's aud, and AWS must be able to fetch the issuer's keys (/openid/v1/jwks)"
        }
        "AccessDenied" | "AccessDeniedException" => {
            "check the role's trust policy: its sub condition must name this ServiceAccount \
             (system:serviceaccount:<namespace>:<name>) and its aud condition the token's audience"
        }
        _ => "check the role's trust policy and the IAM OIDC provider against the token",
    }
}

/// Where a run's credentials came from, carried on them (a property of [`Credentials`]) from
/// the chain in the SDK configuration to the caller of [`resolve`].
#[derive(Debug, Clone)]
struct CameFrom(String);

impl Chain {
    async fn provide(&self) -> provider::Result {
        match self.resolve().await {
            Ok(Resolved {
                mut credentials,
                source,
                certificate_expires_at,
            }) => {
                credentials.set_property(CameFrom(source));
                if let Some(at) = certificate_expires_at {
                    credentials.set_property(CertificateExpiry(at));
                }
                Ok(credentials)
            }
            Err(e) => Err(CredentialsError::provider_error(e)),
        }
    }
}

impl ProvideCredentials for Chain {
    fn provide_credentials<'a>(&'a self) -> future::ProvideCredentials<'a>
    where
        Self: 'a,
    {
        future::ProvideCredentials::new(self.provide())
    }
}

/// The credentials of `sdk`'s provider, once, with a [`CredentialError`] that names the source.
/// A caller then signs with these (a static provider), so that the sources and STS are asked
/// once per run, not once per client.
pub async fn resolve(sdk: &SdkConfig) -> Result<Resolved, CredentialError> {
    let Some(provider) = sdk.credentials_provider() else {
        return Err(CredentialError::NoSource);
    };
    let resolved = tokio::time::timeout(RESOLVE_TIMEOUT, provider.provide_credentials())
        .await
        .map_err(|_| CredentialError::Timeout)?;
    match resolved {
        Ok(credentials) => {
            let source = credentials
                .get_property::<CameFrom>()
                .map_or_else(|| "the SDK's provider".to_owned(), |c| c.0.clone());
            let certificate_expires_at =
                credentials.get_property::<CertificateExpiry>().map(|e| e.0);
            Ok(Resolved {
                credentials,
                source,
                certificate_expires_at,
            })
        }
        Err(e) => Err(find::<CredentialError>(&e)
            .cloned()
            .unwrap_or_else(|| CredentialError::Other(DisplayErrorContext(&e).to_string()))),
    }
}
