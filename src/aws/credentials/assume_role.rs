//! Assume-role over the run's base credentials (ECR_REFRESH_ASSUME_ROLE_*): the values, parsed
//! once, and the layer that calls STS AssumeRole with them.
//!
//! The limits are STS's own, from the AssumeRole API reference (RoleArn: an IAM role ARN of 20 to
//! 2048 characters; ExternalId: 2 to 1224 of `[\w+=,.@:/-]`; RoleSessionName: 2 to 64 of
//! `[\w+=,.@-]`), so a value STS would refuse is refused before anything is sent.

use std::fmt;
use std::str::FromStr;

use aws_config::SdkConfig;
use aws_config::sts::AssumeRoleProvider;
use aws_credential_types::Credentials;
use aws_credential_types::provider::{ProvideCredentials, error::CredentialsError};

use crate::aws::partition::Partitions;

/// The session name when ECR_REFRESH_ASSUME_ROLE_SESSION_NAME is not set: what CloudTrail shows.
pub const DEFAULT_SESSION_NAME: &str = "ecr-refresh";

/// An IAM role's ARN: `arn:<partition>:iam::<12-digit account>:role/<path/><name>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoleArn(String);

impl RoleArn {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for RoleArn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

const ROLE_ARN_FORM: &str = "must be an IAM role ARN, arn:<partition>:iam::<12-digit account>:role/<name> \
     (a path before the name is allowed, like role/ci/ecr-reader)";

impl FromStr for RoleArn {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = |why: &str| Err(format!("{ROLE_ARN_FORM}; {why}"));
        if !(20..=2048).contains(&s.len()) {
            return bad("STS takes 20 to 2048 characters");
        }
        let parts: Vec<&str> = s.splitn(6, ':').collect();
        let [arn, partition, service, region, account, resource] = parts[..] else {
            return bad("it does not have the six ':'-separated fields");
        };
        if arn != "arn" {
            return bad("it does not start with 'arn:'");
        }
        if !Partitions::sdk().all().any(|p| p.id == partition) {
            let known: Vec<&str> = Partitions::sdk().all().map(|p| p.id.as_str()).collect();
            return bad(&format!(
                "'{partition}' is not a partition (known: {})",
                known.join(", ")
            ));
        }
        if service != "iam" || !region.is_empty() {
            return bad("the service must be iam, with an empty region (iam::)");
        }
        if account.len() != 12 || !account.bytes().all(|b| b.is_ascii_digit()) {
            return bad(&format!("'{account}' is not a 12-digit account id"));
        }
        let Some(path_and_name) = resource.strip_prefix("role/") else {
            return bad("the resource must start with role/");
        };
        let name = path_and_name.rsplit('/').next().unwrap_or_default();
        let name_ok = (1..=64).contains(&name.len())
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"+=,.@_-".contains(&b));
        if !name_ok {
            return bad(&format!(
                "'{name}' is not a role name (1 to 64 of letters, digits and +=,.@_-)"
            ));
        }
        if !path_and_name.bytes().all(|b| (b'!'..=b'~').contains(&b)) {
            return bad("the role's path holds characters IAM does not allow");
        }
        Ok(Self(s.to_owned()))
    }
}

/// The external id the role's trust policy requires (`sts:ExternalId`). AWS does not treat it
/// as a secret (a refused value is quoted in the configuration error), but a run's own lines
/// say only whether one was sent: it tells one tenant's role from another's.
#[derive(Clone, PartialEq, Eq)]
pub struct ExternalId(String);

impl ExternalId {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for ExternalId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ExternalId([redacted])")
    }
}

impl FromStr for ExternalId {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let ok = (2..=1224).contains(&s.len())
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"_+=,.@:/-".contains(&b));
        if ok {
            Ok(Self(s.to_owned()))
        } else {
            Err(
                "must be 2 to 1224 characters of letters, digits and _+=,.@:/- (STS's limits)"
                    .into(),
            )
        }
    }
}

/// The role session's name: CloudTrail records it, and a trust policy may match it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionName(String);

impl SessionName {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Default for SessionName {
    fn default() -> Self {
        Self(DEFAULT_SESSION_NAME.to_owned())
    }
}

impl FromStr for SessionName {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let ok = (2..=64).contains(&s.len())
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"_+=,.@-".contains(&b));
        if ok {
            Ok(Self(s.to_owned()))
        } else {
            Err("must be 2 to 64 characters of letters, digits and _+=,.@- (STS's limits)".into())
        }
    }
}

/// The role to assume over the base credentials, as configured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AssumeRole {
    pub role_arn: RoleArn,
    pub external_id: Option<ExternalId>,
    pub session_name: SessionName,
}

/// STS AssumeRole with `base` as the caller: aws-config's AssumeRoleProvider, given the credentials
/// already resolved, so that a failure here is STS's answer and never the base's.
pub(super) async fn assume(
    role: &AssumeRole,
    sdk: &SdkConfig,
    base: Credentials,
) -> Result<Credentials, CredentialsError> {
    let mut builder = AssumeRoleProvider::builder(role.role_arn.as_str())
        .session_name(role.session_name.as_str())
        .configure(sdk);
    if let Some(id) = &role.external_id {
        builder = builder.external_id(id.as_str());
    }
    builder
        .build_from_provider(base)
        .await
        .provide_credentials()
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn role_arns_are_iam_roles_in_a_known_partition() {
        for good in [
            "arn:aws:iam::123456789012:role/ecr-reader",
            "arn:aws:iam::123456789012:role/ci/team-a/ecr-reader",
            "arn:aws-cn:iam::123456789012:role/r+=,.@_-",
            "arn:aws-us-gov:iam::123456789012:role/ecr",
        ] {
            assert_eq!(RoleArn::from_str(good).unwrap().as_str(), good);
        }
        for (bad, why) in [
            ("arn:aws:iam::123456789012:user/ci", "role/"),
            ("arn:aws:iam::12345678901:role/ecr-reader", "12-digit"),
            (
                "arn:aws:sts::123456789012:role/ecr-reader",
                "service must be iam",
            ),
            (
                "arn:aws:iam:us-east-1:123456789012:role/ecr",
                "empty region",
            ),
            (
                "arn:nope:iam::123456789012:role/ecr-reader",
                "not a partition",
            ),
            ("ecr-reader", "20 to 2048"),
            ("arx:aws:iam::123456789012:role/ecr-reader", "'arn:'"),
            ("arn:aws:iam::123456789012:role/", "not a role name"),
            (
                "arn:aws:iam::123456789012:role/has space",
                "not a role name",
            ),
        ] {
            let err = RoleArn::from_str(bad).unwrap_err();
            assert!(err.starts_with(ROLE_ARN_FORM), "{bad}: {err}");
            assert!(err.contains(why), "{bad}: {err}");
        }
    }

    #[test]
    fn external_ids_and_session_names_follow_sts_limits() {
        assert!(ExternalId::from_str("tenant-42:prod/ecr").is_ok());
        for bad in ["x", "has space", &"a".repeat(1225)] {
            assert!(ExternalId::from_str(bad).is_err(), "{bad}");
        }
        assert_eq!(SessionName::default().as_str(), "ecr-refresh");
        assert!(SessionName::from_str("cluster-eu-1@ci").is_ok());
        for bad in ["x", "a/b", &"a".repeat(65)] {
            assert!(SessionName::from_str(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn an_external_id_never_shows_in_debug() {
        let id = ExternalId::from_str("the-tenant-id").unwrap();
        assert!(!format!("{id:?}").contains("the-tenant-id"));
    }
}
