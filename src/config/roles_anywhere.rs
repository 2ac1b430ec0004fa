//! ECR_REFRESH_ROLES_ANYWHERE_*: the three ARNs, the certificate and key files, and the
//! optional chain and session duration. All five required values or none. The files are not
//! read here: only a refresh signs with them, and it reads them first ([`Config::identity`]),
//! so that an unreadable file, an unsupported key or a key of another certificate is a
//! configuration error (exit 2) before anything is sent; `check` reports them as a finding,
//! and `uninstall`, run from an operator's machine that may not hold them, never reads them.
//!
//! [`Config::identity`]: super::Config::identity

use std::path::PathBuf;
use std::time::Duration;

use super::{ConfigError, Given, defaulted, invalid};
use crate::aws::credentials::RoleArn;
use crate::aws::credentials::roles_anywhere::{ProfileArn, RolesAnywhere, TrustAnchorArn};

/// The variables, parsed (each by its entry in VARIABLES).
#[derive(Debug, Default)]
pub(super) struct Slots {
    pub(super) trust_anchor_arn: Option<TrustAnchorArn>,
    pub(super) profile_arn: Option<ProfileArn>,
    pub(super) role_arn: Option<RoleArn>,
    pub(super) certificate: Option<PathBuf>,
    pub(super) private_key: Option<PathBuf>,
    pub(super) chain: Option<PathBuf>,
    pub(super) session_duration: Option<Duration>,
}

const REQUIRED: [&str; 5] = [
    "ECR_REFRESH_ROLES_ANYWHERE_TRUST_ANCHOR_ARN",
    "ECR_REFRESH_ROLES_ANYWHERE_PROFILE_ARN",
    "ECR_REFRESH_ROLES_ANYWHERE_ROLE_ARN",
    "ECR_REFRESH_ROLES_ANYWHERE_CERTIFICATE",
    "ECR_REFRESH_ROLES_ANYWHERE_PRIVATE_KEY",
];

/// The five values or none; `given` is a variable's value as set, for those with a default.
pub(super) fn finish(slots: Slots, given: &Given) -> Result<Option<RolesAnywhere>, ConfigError> {
    let Slots {
        trust_anchor_arn,
        profile_arn,
        role_arn,
        certificate,
        private_key,
        chain,
        session_duration,
    } = slots;
    let set = [
        trust_anchor_arn.is_some(),
        profile_arn.is_some(),
        role_arn.is_some(),
        certificate.is_some(),
        private_key.is_some(),
    ];
    let (
        Some(trust_anchor_arn),
        Some(profile_arn),
        Some(role_arn),
        Some(certificate),
        Some(private_key),
    ) = (
        trust_anchor_arn,
        profile_arn,
        role_arn,
        certificate,
        private_key,
    )
    else {
        if let Some(given) = set.iter().position(|s| *s) {
            let missing: Vec<&str> = REQUIRED
                .iter()
                .zip(set)
                .filter(|(_, s)| !s)
                .map(|(name, _)| *name)
                .collect();
            return Err(ConfigError::Incomplete {
                given: REQUIRED[given],
                missing: missing.join(", "),
            });
        }
        if let Some(chain) = chain {
            return Err(invalid(
                "ECR_REFRESH_ROLES_ANYWHERE_CHAIN",
                &chain.display().to_string(),
                format!(
                    "is only used with {}, which are not set",
                    REQUIRED.join(", ")
                ),
            ));
        }
        let needed = format!("{}, which are not set", REQUIRED.join(", "));
        given.only_with(&["ECR_REFRESH_ROLES_ANYWHERE_SESSION_DURATION"], &needed)?;
        return Ok(None);
    };
    // CreateSession is asked in the trust anchor's region, where the profile must be too (AWS's
    // helper refuses the pair the same way: aws_signing_helper/credentials.go).
    if trust_anchor_arn.0.region() != profile_arn.0.region() {
        return Err(invalid(
            REQUIRED[1],
            profile_arn.0.as_str(),
            format!(
                "is in region {}, the trust anchor in {}: both must be in the region CreateSession is asked in",
                profile_arn.0.region(),
                trust_anchor_arn.0.region()
            ),
        ));
    }
    let config = RolesAnywhere {
        trust_anchor_arn,
        profile_arn,
        role_arn,
        certificate,
        private_key,
        chain,
        session_duration: defaulted(session_duration),
    };
    Ok(Some(config))
}
