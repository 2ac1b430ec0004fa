//! IAM Roles Anywhere as the run's base credentials (ECR_REFRESH_ROLES_ANYWHERE_*): an X.509
//! certificate from a CA the account trusts is exchanged for a role's temporary credentials
//! by CreateSession, signed with the certificate's key. No AWS key is stored.
//!
//! - [`identity`]: the certificate, its chain and its key, read fresh at each run and checked
//!   against each other (a mismatch is a configuration error, exit 2, before anything is sent);
//! - [`signing`]: the SigV4-X509 signature;
//! - [`session`]: the CreateSession call and its answer.
//!
//! When these variables are set, Roles Anywhere is the base: the SDK's sources are not tried,
//! so that static keys left in the environment never sign in its place. An assume-role
//! (ECR_REFRESH_ASSUME_ROLE_*) chains on top of it as on any base.

pub mod identity;
pub mod session;
pub mod signing;

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::{Duration, SystemTime};

use aws_credential_types::Credentials;
use aws_credential_types::provider::{self, ProvideCredentials, error::CredentialsError, future};

use crate::aws::credentials::RoleArn;
use crate::aws::partition::Partitions;

pub use identity::{Identity, IdentityError};
pub use session::SessionError;

/// CreateSession's `durationSeconds` when ECR_REFRESH_ROLES_ANYWHERE_SESSION_DURATION is not set.
pub const DEFAULT_SESSION_DURATION: Duration = Duration::from_secs(3600);

/// What CreateSession takes: 15 minutes to 12 hours (the CreateSession API, `durationSeconds`;
/// a profile may lower the maximum).
pub const SESSION_DURATIONS: std::ops::RangeInclusive<u64> = 900..=43_200;

/// A Roles Anywhere resource's ARN:
/// `arn:<partition>:rolesanywhere:<region>:<12-digit account>:<kind>/<uuid>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceArn {
    text: String,
    partition: String,
    region: String,
}

impl ResourceArn {
    fn parse(s: &str, kind: &str) -> Result<Self, String> {
        let form = format!(
            "must be a Roles Anywhere {kind} ARN, arn:<partition>:rolesanywhere:<region>:<12-digit \
             account>:{kind}/<id>"
        );
        let bad = |why: &str| Err(format!("{form}; {why}"));
        let parts: Vec<&str> = s.splitn(6, ':').collect();
        let [arn, partition, service, region, account, resource] = parts[..] else {
            return bad("it does not have the six ':'-separated fields");
        };
        if arn != "arn" {
            return bad("it does not start with 'arn:'");
        }
        if service != "rolesanywhere" {
            return bad(&format!("the service is '{service}', not rolesanywhere"));
        }
        let region_shaped = region.contains('-')
            && region.ends_with(|c: char| c.is_ascii_digit())
            && region
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
        let in_partition = Partitions::sdk()
            .of_region(region)
            .filter(|_| region_shaped);
        let Some(in_partition) = in_partition else {
            return bad(&format!("'{region}' is not a region"));
        };
        if in_partition.id != partition {
            return bad(&format!(
                "region {region} is in partition {}, not {partition}",
                in_partition.id
            ));
        }
        if account.len() != 12 || !account.bytes().all(|b| b.is_ascii_digit()) {
            return bad(&format!("'{account}' is not a 12-digit account id"));
        }
        let id = resource
            .strip_prefix(kind)
            .and_then(|r| r.strip_prefix('/'))
            .unwrap_or_default();
        // The service's pattern: `[a-f0-9-]{36}` (a UUID).
        if id.len() != 36 || !id.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-') {
            return bad(&format!(
                "the resource must be {kind}/ and a 36-character id"
            ));
        }
        Ok(Self {
            text: s.to_owned(),
            partition: partition.to_owned(),
            region: region.to_owned(),
        })
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The region the resource is in: CreateSession is asked there (as AWS's helper does,
    /// from the trust anchor's ARN).
    pub fn region(&self) -> &str {
        &self.region
    }

    pub fn partition(&self) -> &str {
        &self.partition
    }
}

impl fmt::Display for ResourceArn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// ECR_REFRESH_ROLES_ANYWHERE_TRUST_ANCHOR_ARN.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrustAnchorArn(pub ResourceArn);

impl FromStr for TrustAnchorArn {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        ResourceArn::parse(s, "trust-anchor").map(Self)
    }
}

/// ECR_REFRESH_ROLES_ANYWHERE_PROFILE_ARN.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProfileArn(pub ResourceArn);

impl FromStr for ProfileArn {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        ResourceArn::parse(s, "profile").map(Self)
    }
}

/// CreateSession's `durationSeconds`, from a duration like `1h` or `3600s`.
pub fn parse_session_duration(s: &str) -> Result<Duration, String> {
    let accepted = "must be a duration from 15m to 12h (900s to 43200s), like 1h";
    let duration = humantime::parse_duration(s.trim()).map_err(|_| accepted.to_owned())?;
    if SESSION_DURATIONS.contains(&duration.as_secs()) && duration.subsec_nanos() == 0 {
        Ok(duration)
    } else {
        Err(accepted.to_owned())
    }
}

/// Roles Anywhere, as configured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RolesAnywhere {
    pub trust_anchor_arn: TrustAnchorArn,
    pub profile_arn: ProfileArn,
    pub role_arn: RoleArn,
    /// PEM: the certificate, then any intermediates (cert-manager's tls.crt).
    pub certificate: PathBuf,
    /// PEM: the certificate's key (cert-manager's tls.key).
    pub private_key: PathBuf,
    /// PEM: more intermediates, sent after those of the certificate file.
    pub chain: Option<PathBuf>,
    pub session_duration: Duration,
}

impl RolesAnywhere {
    /// The configured ARNs, as an error names them.
    pub fn arns(&self) -> String {
        format!(
            "trust anchor {}, profile {}, role {}",
            self.trust_anchor_arn.0, self.profile_arn.0, self.role_arn
        )
    }
}

/// When the certificate that gave a run its credentials stops being valid: carried on the
/// credentials (a property of [`Credentials`]), for the logs and the metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CertificateExpiry(pub SystemTime);

/// The provider: at each call, the files read, the certificate's dates checked, CreateSession
/// signed and sent.
#[derive(Debug, Clone)]
pub struct RolesAnywhereProvider {
    config: RolesAnywhere,
}

impl RolesAnywhereProvider {
    pub fn new(config: RolesAnywhere) -> Self {
        Self { config }
    }

    async fn provide(&self) -> provider::Result {
        let (mut credentials, expiry) = session::create(&self.config)
            .await
            .map_err(CredentialsError::provider_error)?;
        credentials.set_property(CertificateExpiry(expiry));
        Ok(credentials)
    }
}

impl ProvideCredentials for RolesAnywhereProvider {
    fn provide_credentials<'a>(&'a self) -> future::ProvideCredentials<'a>
    where
        Self: 'a,
    {
        future::ProvideCredentials::new(self.provide())
    }
}

/// When the configured certificate expires, read as a run reads it: for the metric and for
/// `check`, which asks AWS nothing. None when Roles Anywhere is off or the file can't be read
/// now (the run's own error says why).
pub fn certificate_expiry(config: Option<&RolesAnywhere>) -> Option<SystemTime> {
    Identity::load(config?)
        .ok()
        .map(|identity| identity.not_after)
}

/// Credentials from CreateSession's answer.
pub(crate) fn credentials(
    access_key_id: String,
    secret_access_key: String,
    session_token: String,
    expiration: SystemTime,
) -> Credentials {
    Credentials::new(
        access_key_id,
        secret_access_key,
        Some(session_token),
        Some(expiration),
        "RolesAnywhere",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const ANCHOR: &str = "arn:aws:rolesanywhere:eu-west-1:123456789012:trust-anchor/0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0";

    #[test]
    fn trust_anchor_and_profile_arns_are_parsed_with_their_region() {
        let anchor = TrustAnchorArn::from_str(ANCHOR).unwrap();
        assert_eq!(anchor.0.region(), "eu-west-1");
        assert_eq!(anchor.0.partition(), "aws");
        let profile = ProfileArn::from_str(
            "arn:aws-cn:rolesanywhere:cn-north-1:123456789012:profile/0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0",
        )
        .unwrap();
        assert_eq!(profile.0.region(), "cn-north-1");
        for (bad, why) in [
            (ANCHOR.replace("trust-anchor/", "profile/"), "trust-anchor/"),
            (ANCHOR.replace("rolesanywhere", "iam"), "not rolesanywhere"),
            (ANCHOR.replace("eu-west-1", "EU_WEST"), "not a region"),
            (
                ANCHOR.replace("arn:aws:", "arn:aws-cn:"),
                "partition aws, not aws-cn",
            ),
            (ANCHOR.replace("123456789012", "1234"), "12-digit"),
            (ANCHOR[..ANCHOR.len() - 1].to_owned(), "36-character"),
            ("trust-anchor".to_owned(), "six"),
        ] {
            let err = TrustAnchorArn::from_str(&bad).unwrap_err();
            assert!(
                err.starts_with("must be a Roles Anywhere trust-anchor ARN"),
                "{bad}: {err}"
            );
            assert!(err.contains(why), "{bad}: {err}");
        }
        assert!(
            ProfileArn::from_str(ANCHOR)
                .unwrap_err()
                .contains("profile/")
        );
    }

    #[test]
    fn session_durations_are_15_minutes_to_12_hours() {
        assert_eq!(parse_session_duration("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_session_duration("900s"), Ok(Duration::from_secs(900)));
        assert_eq!(
            parse_session_duration("12h"),
            Ok(Duration::from_secs(43_200))
        );
        for bad in ["14m", "13h", "1.5s", "soon"] {
            assert!(parse_session_duration(bad).is_err(), "{bad}");
        }
    }
}
