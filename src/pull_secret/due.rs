//! Whether a namespace's Secret is due: a pure decision from the Secret as read, the
//! configuration and the time. A Secret that is not due is left as it is, and no token is
//! fetched for it: a run where nothing is due reads one Secret per namespace and writes nothing.

use std::collections::BTreeSet;
use std::fmt;
use std::str::FromStr;
use std::time::{Duration, SystemTime};

use k8s_openapi::api::core::v1::Secret;
use serde_json::value::RawValue;
use sha2::{Digest as _, Sha256};

use crate::aws::registry::RegistryHost;
use crate::pull_secret::docker_config::{self, UnreadableDockerConfig, is_entry_for};
use crate::pull_secret::install::Install;
use crate::pull_secret::{
    DATA_KEY, DIGEST_ANNOTATION, EXPIRES_ANNOTATION, annotation, data_value,
    last_applied_holds_ours,
};

/// The registries a Secret that is not due holds our entries for: every host a run writes.
#[derive(Debug, Clone, Copy)]
pub enum Registries<'a> {
    /// ECR_REFRESH_REGISTRIES, with their dual-stack twins under ECR_REFRESH_DUAL_STACK
    /// (`registry::with_twins`, `Config::written`): exactly the hosts a write puts in `auths`.
    Configured(&'a [RegistryHost]),
    /// ECR_REFRESH_REGISTRIES empty: the caller's own registry in AWS_REGION. Only ECR's answer
    /// names its host (the account is the caller's), and a run where nothing is due asks ECR
    /// nothing. So a Secret is not due for its registries when our last write recorded exactly
    /// one host, in this region. A change of account alone is written when the Secret is next
    /// due by its expiry. With `dual_stack`, that host's dual-stack twin is recorded beside it.
    Own {
        region: Option<&'a str>,
        dual_stack: bool,
    },
}

pub use crate::aws::ecr::TOKEN_LIFETIME;
/// How far our clock may be behind the one that recorded an expiry.
pub const CLOCK_SKEW: Duration = Duration::from_secs(5 * 60);

/// What a Secret that is not due must satisfy, besides its content matching our record.
#[derive(Debug, Clone, Copy)]
pub struct Policy<'a> {
    /// ECR_REFRESH_RENEW_BEFORE: due once its token has less than this left.
    pub renew_before: Duration,
    pub registries: Registries<'a>,
    /// The name this install records (`install::Install`): a Secret another install wrote for
    /// registries this one does not write is not ours to write.
    pub install: Option<&'a Install>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Not due: left as it is until `due_at` (its recorded expiry less RENEW_BEFORE).
    Fresh {
        expires_at: SystemTime,
        due_at: SystemTime,
    },
    Due(Due),
}

/// A Secret we own as read (None: there is none), and whether it is due.
pub struct Judged {
    pub current: Option<Secret>,
    pub decision: Decision,
}

/// Why a Secret is due.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Due {
    /// There is no Secret.
    Missing,
    /// No recorded expiry (`ecr-refresh/token-expires-at`): not written by us, or by a version
    /// before the record.
    NoExpiry,
    UnreadableExpiry,
    /// The recorded expiry is further ahead than a token lives (TOKEN_LIFETIME and
    /// CLOCK_SKEW): not one of our writes, whoever wrote it, so not believed.
    ImplausibleExpiry {
        expires_at: SystemTime,
    },
    /// Its token has less than RENEW_BEFORE left (always, with RENEW_BEFORE 12h or more).
    ExpiresSoon {
        expires_at: SystemTime,
        due_at: SystemTime,
    },
    /// A configured registry has no entry of ours.
    MissingRegistry(String),
    /// It holds an entry we wrote for a registry no longer configured.
    StaleRegistry(String),
    /// Our entries are not what we wrote (edited, added to, or no digest recorded).
    EntriesChanged,
    /// kubectl's last-applied annotation still holds a copy of one of our passwords.
    LastAppliedHoldsPassword,
}

impl Due {
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Missing => "missing",
            Self::NoExpiry => "no-expiry",
            Self::UnreadableExpiry => "unreadable-expiry",
            Self::ImplausibleExpiry { .. } => "implausible-expiry",
            Self::ExpiresSoon { .. } => "expires-soon",
            Self::MissingRegistry(_) => "missing-registry",
            Self::StaleRegistry(_) => "stale-registry",
            Self::EntriesChanged => "entries-changed",
            Self::LastAppliedHoldsPassword => "last-applied-holds-password",
        }
    }

    /// What the reason means for the Secret's pulls, and what the next refresh does about it:
    /// how a check explains it.
    pub fn meaning(&self) -> &'static str {
        match self {
            Self::Missing => "there is no Secret; the next refresh creates it",
            Self::NoExpiry => {
                "the Secret records no token expiry (ecr-refresh/token-expires-at): ecr-refresh did \
                 not write it, so its token may be of any age; the next refresh rewrites it"
            }
            Self::UnreadableExpiry => {
                "its recorded token expiry (ecr-refresh/token-expires-at) is not a time; the next \
                 refresh rewrites it"
            }
            Self::ImplausibleExpiry { .. } => {
                "its recorded token expiry is further ahead than a token lives: ecr-refresh did not \
                 write it, so it is not believed; the next refresh rewrites it"
            }
            Self::ExpiresSoon { .. } => {
                "its token expires within RENEW_BEFORE; the next refresh rewrites it"
            }
            Self::MissingRegistry(_) => {
                "a configured registry has no entry; the next refresh writes it"
            }
            Self::StaleRegistry(_) => {
                "it holds an entry ecr-refresh wrote for a registry no longer configured; the next \
                 refresh removes it"
            }
            Self::EntriesChanged => {
                "its entries for our registries are not what ecr-refresh wrote (edited by hand?), and \
                 pods pull with them; the next refresh rewrites them"
            }
            Self::LastAppliedHoldsPassword => {
                "kubectl's last-applied-configuration annotation holds a copy of an old password; the \
                 next refresh removes it"
            }
        }
    }
}

/// `expires-soon`, or `missing-registry <host>`: what the log's `due` field says.
impl fmt::Display for Due {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::MissingRegistry(host) | Self::StaleRegistry(host) => {
                write!(f, "{} {host}", self.as_str())
            }
            Self::ImplausibleExpiry { expires_at } => write!(
                f,
                "{} {} (a token lives {})",
                self.as_str(),
                humantime::format_rfc3339_seconds(*expires_at),
                humantime::format_duration(TOKEN_LIFETIME)
            ),
            _ => f.write_str(self.as_str()),
        }
    }
}

/// Decides whether `secret` (None: there is none) is due at `now`: a refresh writes it when it
/// is, and its log's `due` field names the first of `reasons`.
pub fn decide(secret: Option<&Secret>, policy: &Policy<'_>, now: SystemTime) -> Decision {
    let Some(secret) = secret else {
        return Decision::Due(Due::Missing);
    };
    let (expires_at, due_at) = match expiry(secret, policy, now) {
        Ok(times) => times,
        Err(due) => return Decision::Due(due),
    };
    match content(secret, policy).into_iter().next() {
        Some(due) => Decision::Due(due),
        None => Decision::Fresh { expires_at, due_at },
    }
}

/// Every reason `secret` is due at `now`, in the order `decide` weighs them (its answer is the
/// first): the expiry's, then the registries', then our entries', then kubectl's copy. A check
/// reports each; empty when the Secret is fresh.
pub fn reasons(secret: Option<&Secret>, policy: &Policy<'_>, now: SystemTime) -> Vec<Due> {
    let Some(secret) = secret else {
        return vec![Due::Missing];
    };
    expiry(secret, policy, now)
        .err()
        .into_iter()
        .chain(content(secret, policy))
        .collect()
}

/// The recorded expiry and when it makes the Secret due, or why it is due by its expiry (the
/// Argo CD Secrets are judged by it too).
pub fn expiry(
    secret: &Secret,
    policy: &Policy<'_>,
    now: SystemTime,
) -> Result<(SystemTime, SystemTime), Due> {
    let expiry = annotation(secret, EXPIRES_ANNOTATION).ok_or(Due::NoExpiry)?;
    let expires_at = humantime::parse_rfc3339(expiry.trim()).map_err(|_| Due::UnreadableExpiry)?;
    // Anyone who may edit the Secret may write any expiry (ecr-refresh's own token too:
    // the admission policy lets it set ecr-refresh/ annotations). One past what a token
    // can live would keep the Secret fresh forever while its token dies.
    if expires_at > now + TOKEN_LIFETIME + CLOCK_SKEW {
        return Err(Due::ImplausibleExpiry { expires_at });
    }
    // A RENEW_BEFORE reaching back before 1970 makes every Secret due.
    let due_at = expires_at
        .checked_sub(policy.renew_before)
        .unwrap_or(SystemTime::UNIX_EPOCH);
    // RENEW_BEFORE of a token's lifetime or more means every run: no recorded expiry, even
    // one inside the clock-skew allowance, keeps a Secret from being written.
    if now >= due_at || policy.renew_before >= TOKEN_LIFETIME {
        return Err(Due::ExpiresSoon { expires_at, due_at });
    }
    Ok((expires_at, due_at))
}

/// Why the Secret's content is due: its registries, then our entries (only when the registries
/// are right: a missing or stale one changes them anyway), then kubectl's copy of a password.
fn content(secret: &Secret, policy: &Policy<'_>) -> Vec<Due> {
    let recorded = crate::pull_secret::recorded_hosts(secret);
    let entries = match data_value(secret, DATA_KEY).map(docker_config::auths) {
        None => Vec::new(),
        Some(Ok(entries)) => entries,
        // The write refuses an unreadable value with its own error; nothing here is ours.
        Some(Err(_)) => return vec![Due::EntriesChanged],
    };
    // Our entries are keyed by the bare host; `https://HOST` beside it is caught by the digest.
    let keys: BTreeSet<String> = entries.iter().map(|(k, _)| k.clone()).collect();
    let mut due = registries_due(&recorded, &keys, policy.registries);
    let ours: Vec<&str> = recorded.iter().map(String::as_str).collect();
    if due.is_empty()
        && (annotation(secret, DIGEST_ANNOTATION) != Some(digest(&entries, &ours).as_str())
            || variant_holds_ours(secret, &ours, policy.registries))
    {
        due.push(Due::EntriesChanged);
    }
    if last_applied_holds_ours(secret, &ours) {
        due.push(Due::LastAppliedHoldsPassword);
    }
    due
}

/// Whether another letter case of `auths` (`Auths`) holds an entry for one of our hosts: the
/// kubelet reads it into the same map as `auths` (Go's encoding/json matches member names
/// without case), so it may be what pods pull with, whatever our `auths` entry says.
fn variant_holds_ours(secret: &Secret, recorded: &[&str], registries: Registries<'_>) -> bool {
    let Some(value) = data_value(secret, DATA_KEY) else {
        return false;
    };
    let configured: Vec<&str> = match registries {
        Registries::Configured(hosts) => hosts.iter().map(RegistryHost::host).collect(),
        Registries::Own { .. } => Vec::new(),
    };
    docker_config::variant_keys(value)
        .unwrap_or_default()
        .iter()
        .any(|key| {
            recorded
                .iter()
                .chain(&configured)
                .any(|host| is_entry_for(key, host))
        })
}

/// Whether the hosts our last write recorded (and the entries present) are what is configured:
/// every configured host missing, then every recorded host no longer configured.
fn registries_due(
    recorded: &BTreeSet<String>,
    keys: &BTreeSet<String>,
    expected: Registries<'_>,
) -> Vec<Due> {
    let missing_then_stale = |expected: Vec<&str>| -> Vec<Due> {
        let missing: Vec<Due> = expected
            .iter()
            .filter(|h| !recorded.contains(**h) || !keys.contains(**h))
            .map(|h| Due::MissingRegistry((*h).to_owned()))
            .collect();
        if !missing.is_empty() {
            return missing;
        }
        recorded
            .iter()
            .filter(|r| !expected.contains(&r.as_str()))
            .map(|stale| Due::StaleRegistry(stale.clone()))
            .collect()
    };
    match expected {
        Registries::Configured(hosts) => {
            missing_then_stale(hosts.iter().map(RegistryHost::host).collect())
        }
        Registries::Own { region, dual_stack } => {
            let elsewhere = |host: &String| match (RegistryHost::from_str(host), region) {
                (Err(_), _) => true,
                (Ok(h), Some(region)) => h.region() != region,
                (Ok(_), None) => false,
            };
            if let Some(stale) = recorded.iter().find(|h| elsewhere(h)) {
                return vec![Due::StaleRegistry(stale.clone())];
            }
            // The caller's registry as ECR names it (never a dual-stack host), then its twin.
            let own = crate::pull_secret::own_recorded(recorded, region);
            let host = match &own[..] {
                [] => {
                    return vec![Due::MissingRegistry(format!(
                        "(the caller's own registry in {})",
                        region.unwrap_or("AWS_REGION")
                    ))];
                }
                [host] => host.clone(),
                // Only one of them is the caller's, and which one only ECR can say.
                [_, ..] => {
                    return vec![Due::StaleRegistry(
                        recorded.iter().cloned().collect::<Vec<_>>().join(","),
                    )];
                }
            };
            let written = crate::pull_secret::own_written(vec![host], dual_stack);
            let expected: Vec<&str> = written.iter().map(RegistryHost::host).collect();
            missing_then_stale(expected)
        }
    }
}

/// The record of what we wrote (annotation `ecr-refresh/auths-sha256`): the hex SHA-256 of our
/// `auths` entries only (those whose key names one of `hosts`), as `{"<key>":<entry>,…}`
/// sorted by key, each entry the exact bytes in the value. Others' entries, other keys and the
/// annotations are not covered: only a change to what we wrote makes a Secret due.
///
/// It cannot give the password away. An entry holds an ECR password: a token of well over a
/// thousand characters of base64 around encrypted, random key material, so the input has far
/// more entropy than any search can cover, and SHA-256 has no known preimage attack. What a
/// digest of a guessable secret would leak (a dictionary check) does not apply. A salt (the
/// Secret's uid, say) guards against precomputed tables and against telling equal inputs apart
/// across objects; neither matters here: no table covers such tokens, and that every namespace
/// holds the same token is plain from the expiry annotation anyway. Whoever can rewrite the
/// digest can rewrite the Secret itself, so the record needs no key either.
pub fn digest(entries: &[(String, Box<RawValue>)], hosts: &[&str]) -> String {
    let mut ours: Vec<&(String, Box<RawValue>)> = entries
        .iter()
        .filter(|(key, _)| hosts.iter().any(|host| is_entry_for(key, host)))
        .collect();
    ours.sort_by(|a, b| a.0.cmp(&b.0));
    let mut hasher = Sha256::new();
    hasher.update(b"{");
    for (i, (key, value)) in ours.into_iter().enumerate() {
        if i > 0 {
            hasher.update(b",");
        }
        hasher.update(
            serde_json::to_string(key)
                .expect("a string serialises")
                .as_bytes(),
        );
        hasher.update(b":");
        hasher.update(value.get().as_bytes());
    }
    hasher.update(b"}");
    hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The expiry a Secret records (`ecr-refresh/token-expires-at`), if it holds one that reads:
/// until then its token works, whatever this run did to it.
pub fn recorded_expiry(secret: &Secret) -> Option<SystemTime> {
    humantime::parse_rfc3339(annotation(secret, EXPIRES_ANNOTATION)?.trim()).ok()
}

/// The digest of a `.dockerconfigjson` value's entries for `hosts`.
pub fn value_digest(value: &[u8], hosts: &[&str]) -> Result<String, UnreadableDockerConfig> {
    Ok(digest(&docker_config::auths(value)?, hosts))
}

/// Secrets as a refresh leaves them, and the edits others make, for the tests of every module
/// that judges one.
#[cfg(test)]
pub(crate) mod fixtures {
    use std::collections::BTreeMap;
    use std::str::FromStr;

    use base64::Engine as _;
    use k8s_openapi::ByteString;
    use k8s_openapi::api::core::v1::Secret;
    use secrecy::SecretString;

    use super::value_digest;
    use crate::aws::ecr::Credential;
    use crate::aws::registry::RegistryHost;
    use crate::pull_secret::{
        DATA_KEY, DIGEST_ANNOTATION, EXPIRES_ANNOTATION, REGISTRIES_ANNOTATION, SECRET_TYPE,
        docker_config,
    };

    /// A Secret as our write leaves it: entries for `written`, the record, expiring at `expires`.
    pub(crate) fn ours(written: &[&str], expires: &str) -> Secret {
        let registries: Vec<RegistryHost> = written
            .iter()
            .map(|h| RegistryHost::from_str(h).expect("a registry host"))
            .collect();
        let password = SecretString::from("pw-a-long-random-token");
        let credentials: Vec<Credential> = registries
            .iter()
            .map(|registry| Credential {
                registry,
                password: &password,
            })
            .collect();
        let value = docker_config::merge(
            Some(br#"{"auths":{"ghcr.io":{"auth":"Zm9vOmJhcg=="}}}"#),
            &credentials,
            &[],
        )
        .unwrap()
        .into_bytes();
        let digest = value_digest(&value, written).unwrap();
        let mut secret = Secret {
            type_: Some(SECRET_TYPE.to_owned()),
            ..Secret::default()
        };
        secret.metadata.annotations = Some(BTreeMap::from([
            (EXPIRES_ANNOTATION.to_owned(), expires.to_owned()),
            (REGISTRIES_ANNOTATION.to_owned(), written.join(",")),
            (DIGEST_ANNOTATION.to_owned(), digest),
        ]));
        secret.data = Some(BTreeMap::from([(DATA_KEY.to_owned(), ByteString(value))]));
        secret
    }

    pub(crate) fn annotate(mut secret: Secret, key: &str, value: Option<&str>) -> Secret {
        let annotations = secret.metadata.annotations.get_or_insert_default();
        match value {
            Some(v) => annotations.insert(key.to_owned(), v.to_owned()),
            None => annotations.remove(key),
        };
        secret
    }

    /// kubectl's last-applied annotation, holding a password for `host`.
    pub(crate) fn last_applied(host: &str) -> String {
        let value = format!(r#"{{"auths":{{"https://{host}":{{"password":"old"}}}}}}"#);
        serde_json::json!({
            "data": { DATA_KEY: base64::engine::general_purpose::STANDARD.encode(value) }
        })
        .to_string()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::ByteString;

    use super::fixtures::{annotate, last_applied, ours};
    use super::*;
    use crate::pull_secret::LAST_APPLIED_ANNOTATION;

    const A: &str = "111111111111.dkr.ecr.us-east-1.amazonaws.com";
    const B: &str = "222222222222.dkr.ecr.eu-west-1.amazonaws.com";
    const HOUR: Duration = Duration::from_secs(3600);

    fn now() -> SystemTime {
        humantime::parse_rfc3339("2026-12-01T08:00:00Z").unwrap()
    }

    fn at(offset_hours: u64) -> String {
        humantime::format_rfc3339_seconds(now() + HOUR * offset_hours as u32).to_string()
    }

    fn hosts(list: &[&str]) -> Vec<RegistryHost> {
        list.iter()
            .map(|h| RegistryHost::from_str(h).unwrap())
            .collect()
    }

    fn with_value(mut secret: Secret, value: &str) -> Secret {
        secret.data = Some(BTreeMap::from([(
            DATA_KEY.to_owned(),
            ByteString(value.as_bytes().to_vec()),
        )]));
        secret
    }

    fn value_of(secret: &Secret) -> String {
        String::from_utf8(secret.data.as_ref().unwrap()[DATA_KEY].0.clone()).unwrap()
    }

    /// Go's encoding/json reads `Auths` (any letter case) into the same map as `auths`, so a
    /// stale entry for our host there is what pods may pull with: the Secret is due, as
    /// `merge` takes it out; an entry for another host there leaves it fresh.
    #[test]
    fn an_entry_for_our_host_under_another_letter_case_of_auths_makes_the_secret_due() {
        let configured = hosts(&[A]);
        let policy = Policy {
            renew_before: HOUR * 8,
            install: None,
            registries: Registries::Configured(&configured),
        };
        let fresh = ours(&[A], &at(11));
        assert!(matches!(
            decide(Some(&fresh), &policy, now()),
            Decision::Fresh { .. }
        ));
        for variant in ["Auths", "AUTHS", "authſ"] {
            let value = value_of(&fresh);
            let stale = format!(
                r#"{},"{variant}":{{"{A}":{{"username":"AWS","password":"stale"}}}}}}"#,
                value.strip_suffix('}').unwrap()
            );
            let secret = with_value(fresh.clone(), &stale);
            assert_eq!(
                decide(Some(&secret), &policy, now()),
                Decision::Due(Due::EntriesChanged),
                "{variant}"
            );
            let other = stale.replace(
                &format!(r#""{variant}":{{"{A}""#),
                &format!(r#""{variant}":{{"quay.io""#),
            );
            let secret = with_value(fresh.clone(), &other);
            assert!(
                matches!(
                    decide(Some(&secret), &policy, now()),
                    Decision::Fresh { .. }
                ),
                "{variant}: {other}"
            );
        }
    }

    #[test]
    fn a_secret_is_due_for_each_reason_and_fresh_otherwise() {
        fn policy(renew_hours: u32, configured: &[RegistryHost]) -> Policy<'_> {
            Policy {
                renew_before: HOUR * renew_hours,
                install: None,
                registries: Registries::Configured(configured),
            }
        }
        let (a, ab) = (&hosts(&[A]), &hosts(&[A, B]));
        let fresh = ours(&[A], &at(11));
        let edited = {
            let value = value_of(&fresh).replace("pw-a-long-random-token", "pw-edited");
            with_value(fresh.clone(), &value)
        };
        let foreign_added = {
            let value = value_of(&fresh)
                .replace(r#""ghcr.io":"#, r#""quay.io":{"auth":"eDp5"},"ghcr.io":"#);
            with_value(fresh.clone(), &value)
        };
        let https_key_added = {
            let value = value_of(&fresh).replace(
                r#""ghcr.io":"#,
                &format!(r#""https://{A}/":{{"auth":"eDp5"}},"ghcr.io":"#),
            );
            with_value(fresh.clone(), &value)
        };
        let our_entry_removed = {
            let value = r#"{"auths":{"ghcr.io":{"auth":"Zm9vOmJhcg=="}}}"#;
            with_value(fresh.clone(), value)
        };
        let expires = |h: u64| now() + HOUR * h as u32;

        let cases: Vec<(&str, Option<Secret>, Policy, Decision)> = vec![
            ("no Secret", None, policy(8, a), Decision::Due(Due::Missing)),
            (
                "fresh",
                Some(fresh.clone()),
                policy(8, a),
                Decision::Fresh {
                    expires_at: expires(11),
                    due_at: expires(3),
                },
            ),
            (
                "no recorded expiry",
                Some(annotate(fresh.clone(), EXPIRES_ANNOTATION, None)),
                policy(8, a),
                Decision::Due(Due::NoExpiry),
            ),
            (
                "unreadable expiry",
                Some(annotate(
                    fresh.clone(),
                    EXPIRES_ANNOTATION,
                    Some("tomorrow"),
                )),
                policy(8, a),
                Decision::Due(Due::UnreadableExpiry),
            ),
            (
                "inside the window",
                Some(ours(&[A], &at(7))),
                policy(8, a),
                Decision::Due(Due::ExpiresSoon {
                    expires_at: expires(7),
                    due_at: now() - HOUR,
                }),
            ),
            (
                "exactly at the window's edge",
                Some(ours(&[A], &at(8))),
                policy(8, a),
                Decision::Due(Due::ExpiresSoon {
                    expires_at: expires(8),
                    due_at: now(),
                }),
            ),
            (
                "RENEW_BEFORE above a token's 12 hours",
                Some(ours(&[A], &at(12))),
                policy(13, a),
                Decision::Due(Due::ExpiresSoon {
                    expires_at: expires(12),
                    due_at: now() - HOUR,
                }),
            ),
            (
                "an expiry further ahead than a token lives",
                Some(ours(&[A], "9999-12-31T23:59:59Z")),
                policy(8, a),
                Decision::Due(Due::ImplausibleExpiry {
                    expires_at: humantime::parse_rfc3339("9999-12-31T23:59:59Z").unwrap(),
                }),
            ),
            (
                "an expiry 12h ahead, inside the clock-skew allowance",
                Some(ours(&[A], &at(12))),
                policy(8, a),
                Decision::Fresh {
                    expires_at: expires(12),
                    due_at: expires(4),
                },
            ),
            (
                "RENEW_BEFORE 12h, with an expiry inside the clock-skew allowance",
                Some(ours(
                    &[A],
                    &humantime::format_rfc3339_seconds(now() + HOUR * 12 + CLOCK_SKEW).to_string(),
                )),
                policy(12, a),
                Decision::Due(Due::ExpiresSoon {
                    expires_at: now() + HOUR * 12 + CLOCK_SKEW,
                    due_at: now() + CLOCK_SKEW,
                }),
            ),
            (
                "a configured registry not recorded",
                Some(fresh.clone()),
                policy(8, ab),
                Decision::Due(Due::MissingRegistry(B.into())),
            ),
            (
                "our entry removed",
                Some(our_entry_removed),
                policy(8, a),
                Decision::Due(Due::MissingRegistry(A.into())),
            ),
            (
                "a registry no longer configured",
                Some(ours(&[A, B], &at(11))),
                policy(8, a),
                Decision::Due(Due::StaleRegistry(B.into())),
            ),
            (
                "our entry edited",
                Some(edited),
                policy(8, a),
                Decision::Due(Due::EntriesChanged),
            ),
            (
                "a second key for our registry",
                Some(https_key_added),
                policy(8, a),
                Decision::Due(Due::EntriesChanged),
            ),
            (
                "no digest recorded",
                Some(annotate(fresh.clone(), DIGEST_ANNOTATION, None)),
                policy(8, a),
                Decision::Due(Due::EntriesChanged),
            ),
            (
                "an unreadable value",
                Some(with_value(fresh.clone(), "not json")),
                policy(8, a),
                Decision::Due(Due::EntriesChanged),
            ),
            (
                "last-applied holds our registry's password",
                Some(annotate(
                    fresh.clone(),
                    LAST_APPLIED_ANNOTATION,
                    Some(&last_applied(A)),
                )),
                policy(8, a),
                Decision::Due(Due::LastAppliedHoldsPassword),
            ),
            (
                "last-applied of someone else's registry",
                Some(annotate(
                    fresh.clone(),
                    LAST_APPLIED_ANNOTATION,
                    Some(&last_applied("ghcr.io")),
                )),
                policy(8, a),
                Decision::Fresh {
                    expires_at: expires(11),
                    due_at: expires(3),
                },
            ),
            (
                "others' entries and annotations changed",
                Some(annotate(foreign_added, "team/owner", Some("x"))),
                policy(8, a),
                Decision::Fresh {
                    expires_at: expires(11),
                    due_at: expires(3),
                },
            ),
        ];
        for (name, secret, policy, expected) in cases {
            let first = reasons(secret.as_ref(), &policy, now()).into_iter().next();
            match &expected {
                Decision::Due(due) => assert_eq!(first.as_ref(), Some(due), "{name}: first reason"),
                Decision::Fresh { .. } => assert_eq!(first, None, "{name}: no reason"),
            }
            assert_eq!(decide(secret.as_ref(), &policy, now()), expected, "{name}");
        }
    }

    #[test]
    fn without_configured_registries_one_recorded_host_in_the_region_is_fresh() {
        let own = |region| Policy {
            renew_before: HOUR * 8,
            install: None,
            registries: Registries::Own {
                region,
                dual_stack: false,
            },
        };
        let fresh = Decision::Fresh {
            expires_at: now() + HOUR * 11,
            due_at: now() + HOUR * 3,
        };
        let cases: Vec<(&str, Secret, Option<&str>, Decision)> = vec![
            (
                "our host",
                ours(&[A], &at(11)),
                Some("us-east-1"),
                fresh.clone(),
            ),
            ("region unknown", ours(&[A], &at(11)), None, fresh),
            (
                "another region",
                ours(&[A], &at(11)),
                Some("eu-west-1"),
                Decision::Due(Due::StaleRegistry(A.into())),
            ),
            (
                "nothing recorded",
                ours(&[], &at(11)),
                Some("us-east-1"),
                Decision::Due(Due::MissingRegistry(
                    "(the caller's own registry in us-east-1)".into(),
                )),
            ),
            (
                "two recorded",
                ours(
                    &[A, "333333333333.dkr.ecr.us-east-1.amazonaws.com"],
                    &at(11),
                ),
                Some("us-east-1"),
                Decision::Due(Due::StaleRegistry(format!(
                    "{A},333333333333.dkr.ecr.us-east-1.amazonaws.com"
                ))),
            ),
        ];
        for (name, secret, region, expected) in cases {
            assert_eq!(
                decide(Some(&secret), &own(region), now()),
                expected,
                "{name}"
            );
        }
    }

    #[test]
    fn without_configured_registries_dual_stack_expects_the_twin_beside_the_own_host() {
        const TWIN: &str = "111111111111.dkr-ecr.us-east-1.on.aws";
        let own = |dual_stack| Policy {
            renew_before: HOUR * 8,
            install: None,
            registries: Registries::Own {
                region: Some("us-east-1"),
                dual_stack,
            },
        };
        let fresh = Decision::Fresh {
            expires_at: now() + HOUR * 11,
            due_at: now() + HOUR * 3,
        };
        let cases = [
            (
                "turned on",
                ours(&[A], &at(11)),
                true,
                Decision::Due(Due::MissingRegistry(TWIN.into())),
            ),
            ("on", ours(&[A, TWIN], &at(11)), true, fresh.clone()),
            (
                "turned off",
                ours(&[A, TWIN], &at(11)),
                false,
                Decision::Due(Due::StaleRegistry(TWIN.into())),
            ),
            ("off", ours(&[A], &at(11)), false, fresh),
        ];
        for (name, secret, dual_stack, expected) in cases {
            assert_eq!(
                decide(Some(&secret), &own(dual_stack), now()),
                expected,
                "{name}"
            );
        }
    }

    #[test]
    fn the_digest_covers_our_entries_in_key_order_and_nothing_else() {
        let entries = |text: &str| docker_config::auths(text.as_bytes()).unwrap();
        let one = entries(r#"{"auths":{"a":{"p":1},"b":{"p":2},"x":{"p":3}}}"#);
        let reordered = entries(r#"{"auths":{"x":{"p":9},"b":{"p":2},"a":{"p":1}}}"#);
        let spaced = entries(r#"{"auths":{"a":{ "p":1},"b":{"p":2}}}"#);
        assert_eq!(digest(&one, &["a", "b"]), digest(&reordered, &["a", "b"]));
        assert_ne!(digest(&one, &["a", "b"]), digest(&spaced, &["a", "b"]));
        assert_ne!(digest(&one, &["a", "b"]), digest(&one, &["a"]));
        let hex = digest(&one, &["a"]);
        assert_eq!(hex.len(), 64);
        assert!(hex.bytes().all(|b| b.is_ascii_hexdigit()), "{hex}");
    }
}
