//! ECR_REFRESH_ROLES_ANYWHERE_*: the three ARNs, the certificate and key files, and the
//! optional chain and session duration. All five required values or none. The files are not
//! read here: only a refresh signs with them, and it reads them first ([`Config::identity`]),
//! so that an unreadable file, an unsupported key or a key of another certificate is a
//! configuration error (exit 2) before anything is sent; `check` reports them as a finding,
//! and `uninstall`, run from an operator's machine that may not hold them, never reads them.
//!
//! [`Config::identity`]: super::Config::identity

use std::path::PathBuf;
use std::str::FromStr;

use serde::Deserialize;

use super::{ConfigError, invalid, parse_opt};
use crate::aws::credentials::RoleArn;
use crate::aws::credentials::roles_anywhere::{
    DEFAULT_SESSION_DURATION, ProfileArn, RolesAnywhere, TrustAnchorArn, parse_session_duration,
};

/// The variables, as envy reads them (flattened into the configuration's own).
#[derive(Debug, Deserialize, Default)]
pub(super) struct Raw {
    roles_anywhere_trust_anchor_arn: Option<String>,
    roles_anywhere_profile_arn: Option<String>,
    roles_anywhere_role_arn: Option<String>,
    roles_anywhere_certificate: Option<String>,
    roles_anywhere_private_key: Option<String>,
    roles_anywhere_chain: Option<String>,
    roles_anywhere_session_duration: Option<String>,
}

const REQUIRED: [&str; 5] = [
    "ECR_REFRESH_ROLES_ANYWHERE_TRUST_ANCHOR_ARN",
    "ECR_REFRESH_ROLES_ANYWHERE_PROFILE_ARN",
    "ECR_REFRESH_ROLES_ANYWHERE_ROLE_ARN",
    "ECR_REFRESH_ROLES_ANYWHERE_CERTIFICATE",
    "ECR_REFRESH_ROLES_ANYWHERE_PRIVATE_KEY",
];

pub(super) fn parse(raw: Raw) -> Result<Option<RolesAnywhere>, ConfigError> {
    let trust_anchor_arn = parse_opt(
        REQUIRED[0],
        raw.roles_anywhere_trust_anchor_arn,
        TrustAnchorArn::from_str,
    )?;
    let profile_arn = parse_opt(
        REQUIRED[1],
        raw.roles_anywhere_profile_arn,
        ProfileArn::from_str,
    )?;
    let role_arn = parse_opt(REQUIRED[2], raw.roles_anywhere_role_arn, RoleArn::from_str)?;
    let session_duration = parse_opt(
        "ECR_REFRESH_ROLES_ANYWHERE_SESSION_DURATION",
        raw.roles_anywhere_session_duration.clone(),
        parse_session_duration,
    )?;
    let certificate = raw.roles_anywhere_certificate.map(PathBuf::from);
    let private_key = raw.roles_anywhere_private_key.map(PathBuf::from);
    let chain = raw.roles_anywhere_chain.map(PathBuf::from);
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
        if let Some(duration) = raw.roles_anywhere_session_duration {
            return Err(invalid(
                "ECR_REFRESH_ROLES_ANYWHERE_SESSION_DURATION",
                &duration,
                format!(
                    "is only used with {}, which are not set",
                    REQUIRED.join(", ")
                ),
            ));
        }
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
        session_duration: session_duration.unwrap_or(DEFAULT_SESSION_DURATION),
    };
    Ok(Some(config))
}
