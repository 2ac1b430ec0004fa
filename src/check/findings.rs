//! What a check can find in one namespace, and the Secret's findings: the refresh's own
//! decision (`write::can_write`, `due::reasons`) for the Secret as read, worded for a person.

use std::collections::BTreeSet;
use std::fmt;
use std::str::FromStr;
use std::time::SystemTime;

use k8s_openapi::api::core::v1::Secret;

use crate::aws::registry::RegistryHost;
use crate::pull_secret::due::{self, Due, Policy, Registries, TOKEN_LIFETIME};
use crate::pull_secret::write::{self, SecretError};
use crate::pull_secret::{DATA_KEY, SECRET_TYPE, docker_config, keyring};

/// One thing that keeps (or will keep) pods in a namespace from pulling from ECR.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Finding {
    SecretMissing,
    WrongType(String),
    Unreadable(String),
    /// A Secret a refresh cannot write (immutable): it fails that namespace.
    NotWritable(String),
    Expired(String),
    ExpiresSoon {
        expires_at: String,
        renew_before: String,
    },
    /// A host we manage (or its dual-stack twin) with no entry in the Secret.
    NoEntry(String),
    /// Any other reason a refresh would rewrite the Secret: `reason` is the refresh's `due`.
    Due {
        kind: &'static str,
        reason: String,
        meaning: &'static str,
    },
    /// Pods use an ECR host that is not one we manage.
    NotCovered {
        host: String,
        pods: Group,
        hint: String,
    },
    /// Pods that reference the Secret neither directly nor through their ServiceAccount.
    NotWired {
        pods: Group,
        service_account: String,
        why: String,
    },
    /// Pods stuck pulling an ECR image, and which findings explain it.
    PullStuck {
        pods: Group,
        reason: String,
        image: String,
        explained_by: String,
    },
    /// The registry refused the stored credentials for an image.
    LoginRefused {
        host: String,
        image: String,
        status: u16,
        answer: String,
    },
    /// The login could not be tried to its end (unreachable, unexpected answer).
    LoginFailed {
        host: String,
        image: String,
        error: String,
    },
    /// A request the check needed failed: nothing can be said about this part.
    CheckFailed(String),
    /// The install's own namespace is not selected, while its pods pull ecr-refresh's own
    /// image with the Secret (own_namespace.rs).
    OwnNamespaceNotSelected(String),
}

/// Pods reported together: those of one controller, or one pod alone.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Group {
    /// `ReplicaSet/web-7d9f8`, or `Pod/debug` for a pod without a controller.
    pub owner: String,
    /// One of its pods, by name.
    pub example: String,
    pub count: usize,
}

impl fmt::Display for Group {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.owner.strip_prefix("Pod/"), self.count) {
            (Some(pod), _) => write!(f, "pod {pod}"),
            (None, 1) => write!(f, "{} (pod {})", self.owner, self.example),
            (None, n) => write!(f, "{} ({n} pods, e.g. {})", self.owner, self.example),
        }
    }
}

/// Every kind, as `Finding::kind` names them: the metrics report each, zero included.
pub(super) const KINDS: &[&str] = &[
    "secret-missing",
    "wrong-type",
    "unreadable",
    "not-writable",
    "expired",
    "expires-soon",
    "no-entry",
    "missing-registry",
    "no-expiry",
    "unreadable-expiry",
    "implausible-expiry",
    "stale-registry",
    "entries-changed",
    "last-applied-holds-password",
    "registry-not-covered",
    "not-wired",
    "pull-stuck",
    "login-refused",
    "login-failed",
    "check-failed",
    "own-namespace-not-selected",
];

impl Finding {
    /// The finding's kind, as the log's `finding_kinds` field and the metrics name it.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::SecretMissing => "secret-missing",
            Self::WrongType(_) => "wrong-type",
            Self::Unreadable(_) => "unreadable",
            Self::NotWritable(_) => "not-writable",
            Self::Expired(_) => "expired",
            Self::ExpiresSoon { .. } => "expires-soon",
            Self::NoEntry(_) => "no-entry",
            Self::Due { kind, .. } => kind,
            Self::NotCovered { .. } => "registry-not-covered",
            Self::NotWired { .. } => "not-wired",
            Self::PullStuck { .. } => "pull-stuck",
            Self::LoginRefused { .. } => "login-refused",
            Self::LoginFailed { .. } => "login-failed",
            Self::CheckFailed(_) => "check-failed",
            Self::OwnNamespaceNotSelected(_) => "own-namespace-not-selected",
        }
    }

    /// Whether this finding stops every pull of the namespace, whatever the host.
    pub fn blocks_every_pull(&self) -> bool {
        matches!(
            self,
            Self::SecretMissing | Self::WrongType(_) | Self::Unreadable(_) | Self::Expired(_)
        )
    }

    /// Whether this finding may stop a pull from any of our hosts: a token of unknown age, or
    /// entries that are not what ecr-refresh wrote.
    pub fn may_block_our_pulls(&self) -> bool {
        self.blocks_every_pull()
            || matches!(
                self,
                Self::Due {
                    kind: "no-expiry"
                        | "unreadable-expiry"
                        | "implausible-expiry"
                        | "entries-changed",
                    ..
                }
            )
    }
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::SecretMissing => f.write_str("Secret missing"),
            Self::WrongType(t) => write!(f, "wrong type: {t}, not {SECRET_TYPE}"),
            Self::Unreadable(why) => write!(f, "unreadable: {why}"),
            Self::NotWritable(why) => write!(f, "not writable: {why}"),
            Self::Expired(at) => write!(f, "expired: its token expired at {at}"),
            Self::ExpiresSoon {
                expires_at,
                renew_before,
            } => write!(
                f,
                "expiring: its token expires at {expires_at}, within RENEW_BEFORE ({renew_before}); \
                 is the refresh CronJob running?"
            ),
            Self::NoEntry(host) => write!(f, "no entry for registry {host}"),
            Self::Due {
                reason, meaning, ..
            } => write!(f, "{reason}: {meaning}"),
            Self::NotCovered { host, pods, hint } => {
                write!(f, "ECR registry not covered: {host}, used by {pods}{hint}")
            }
            Self::NotWired {
                pods,
                service_account,
                why,
            } => write!(
                f,
                "not wired: {pods}, ServiceAccount {service_account}: {why}"
            ),
            Self::PullStuck {
                pods,
                reason,
                image,
                explained_by,
            } => write!(f, "{reason}: {pods} pulling {image}: {explained_by}"),
            Self::LoginRefused {
                host,
                image,
                status,
                answer,
            } => write!(
                f,
                "login refused: {host} answered HTTP {status} for {image} with the Secret's credentials: {answer}"
            ),
            Self::LoginFailed { host, image, error } => {
                write!(f, "login not checked: {host} for {image}: {error}")
            }
            Self::CheckFailed(error) => write!(f, "check failed: {error}"),
            Self::OwnNamespaceNotSelected(what) => {
                write!(f, "own namespace not selected: {what}")
            }
        }
    }
}

/// The Secret as the check read it: its findings, and what the pods' checks need of it.
#[derive(Debug, Default)]
pub(super) struct SecretState {
    pub findings: Vec<Finding>,
    /// Its `auths` entries as the kubelet's keyring indexes them (`keyring::key`): a host,
    /// or a host and a path.
    pub entries: BTreeSet<String>,
    /// What a refresh's `due` would say, when that is a finding here.
    pub due: Option<String>,
}

/// The Secret's own findings: every reason a refresh would refuse or rewrite it, by the
/// refresh's own decision. One exception: with RENEW_BEFORE of a token's life or more, a
/// refresh rewrites every Secret on every run, so only an expired token is a finding then.
pub(super) fn secret_findings(
    secret: Option<&Secret>,
    policy: &Policy<'_>,
    now: SystemTime,
) -> SecretState {
    let mut state = SecretState::default();
    let Some(secret) = secret else {
        state.findings.push(Finding::SecretMissing);
        state.due = Some(Due::Missing.to_string());
        return state;
    };
    if let Err(e) = write::can_write(secret, policy) {
        state.findings.push(match e {
            SecretError::WrongType { found, .. } => Finding::WrongType(found),
            SecretError::Unreadable(e) => Finding::Unreadable(e.to_string()),
            e => Finding::NotWritable(e.to_string()),
        });
        return state;
    }
    let Some(value) = secret.data.as_ref().and_then(|d| d.get(DATA_KEY)) else {
        state
            .findings
            .push(Finding::Unreadable(format!("it has no {DATA_KEY}")));
        return state;
    };
    state.entries = docker_config::kubelet_auths(&value.0)
        .unwrap_or_default()
        .iter()
        .filter_map(|(k, _)| keyring::key(k))
        .collect();
    let reasons = due::reasons(Some(secret), policy, now);
    let mut missing = Vec::new();
    for reason in &reasons {
        match reason {
            // No entry at all, as the kubelet reads the Secret; or an entry ecr-refresh did not
            // record as its own, which the next refresh replaces.
            Due::MissingRegistry(host) if !has_entry(&state, host, policy) => {
                missing.push(host.clone());
            }
            other => state.findings.extend(due_finding(other, policy, now)),
        }
    }
    // The configured hosts first, then their dual-stack twins, as ECR_REFRESH_REGISTRIES lists them.
    missing.sort_by_key(|h| RegistryHost::from_str(h).is_ok_and(|h| h.is_dual_stack()));
    state
        .findings
        .extend(missing.into_iter().map(Finding::NoEntry));
    if !state.findings.is_empty() {
        state.due = reasons.first().map(ToString::to_string);
    }
    state
}

/// What a check reports for one reason a refresh would write a Secret we own (the pull
/// Secret, an Argo CD Secret), in the refresh's words. None: with RENEW_BEFORE of a token's life
/// or more, every run rewrites every Secret, so a token that has not expired is no finding.
pub(super) fn due_finding(due: &Due, policy: &Policy<'_>, now: SystemTime) -> Option<Finding> {
    match due {
        Due::Missing => Some(Finding::SecretMissing),
        Due::ExpiresSoon { expires_at, .. } => {
            let at = humantime::format_rfc3339_seconds(*expires_at).to_string();
            if now >= *expires_at {
                Some(Finding::Expired(at))
            } else if policy.renew_before < TOKEN_LIFETIME {
                Some(Finding::ExpiresSoon {
                    expires_at: at,
                    renew_before: humantime::format_duration(policy.renew_before).to_string(),
                })
            } else {
                None
            }
        }
        other => Some(Finding::Due {
            kind: other.as_str(),
            reason: other.to_string(),
            meaning: other.meaning(),
        }),
    }
}

impl SecretState {
    /// Whether an entry serves `target` (an image's repository, or a bare host: every image
    /// on it) as the kubelet's keyring matches them: `HOST/team-x` does not serve `HOST/web`.
    pub(super) fn serves(&self, target: &str) -> bool {
        self.entries.iter().any(|key| keyring::matches(key, target))
    }
}

/// Whether the Secret has an entry the kubelet would use for every image on `host`: for the
/// caller's own registry, which only ECR can name (`due` says "the caller's own registry in
/// REGION"), any private registry in the region.
fn has_entry(state: &SecretState, host: &str, policy: &Policy<'_>) -> bool {
    match (RegistryHost::from_str(host), policy.registries) {
        (Ok(_), _) => state.serves(host),
        (Err(_), Registries::Own { region, .. }) => state.entries.iter().any(|e| {
            !e.contains('/')
                && RegistryHost::from_str(e)
                    .is_ok_and(|h| Some(h.region()) == region && !h.is_public())
        }),
        (Err(_), Registries::Configured(_)) => false,
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::time::Duration;

    use k8s_openapi::ByteString;

    use super::*;
    use crate::pull_secret::due::Decision;
    use crate::pull_secret::due::fixtures::{annotate, last_applied, ours};
    use crate::pull_secret::{EXPIRES_ANNOTATION, LAST_APPLIED_ANNOTATION, REGISTRIES_ANNOTATION};

    const HOST: &str = "123456789012.dkr.ecr.us-east-1.amazonaws.com";
    const OTHER: &str = "210987654321.dkr.ecr.eu-west-1.amazonaws.com";
    const HOUR: Duration = Duration::from_secs(3600);

    fn now() -> SystemTime {
        humantime::parse_rfc3339("2030-01-01T12:00:00Z").unwrap()
    }

    fn at(from_now: i64) -> String {
        let t = if from_now >= 0 {
            now() + HOUR * from_now as u32
        } else {
            now() - HOUR * (-from_now) as u32
        };
        humantime::format_rfc3339_seconds(t).to_string()
    }

    fn edited(mut secret: Secret, from: &str, to: &str) -> Secret {
        let value = &mut secret.data.as_mut().unwrap().get_mut(DATA_KEY).unwrap().0;
        let text = String::from_utf8(value.clone()).unwrap();
        assert!(text.contains(from), "{text}");
        *value = text.replace(from, to).into_bytes();
        secret
    }

    fn kinds(state: &SecretState) -> Vec<&'static str> {
        state.findings.iter().map(Finding::kind).collect()
    }

    /// The agreement: for each reason a refresh writes a Secret, the check reports it, with the
    /// refresh's `due` words; where the refresh leaves it, the check finds nothing.
    #[test]
    fn the_check_reports_every_reason_a_refresh_writes_with_the_refreshs_words() {
        let configured: Vec<RegistryHost> = vec![HOST.parse().unwrap()];
        let policy = |renew_hours: u32| Policy {
            renew_before: HOUR * renew_hours,
            install: None,
            registries: Registries::Configured(&configured),
        };
        let fresh = ours(&[HOST], &at(11));
        let (missing, stale) = (
            format!("missing-registry {HOST}"),
            format!("stale-registry {OTHER}"),
        );
        // (case, Secret, RENEW_BEFORE in hours, the refresh's `due`, the check's finding kinds)
        type Case<'a> = (&'a str, Option<Secret>, u32, Option<&'a str>, Vec<&'a str>);
        let cases: Vec<Case> = vec![
            ("fresh", Some(fresh.clone()), 8, None, vec![]),
            (
                "no Secret",
                None,
                8,
                Some("missing"),
                vec!["secret-missing"],
            ),
            (
                "no recorded expiry",
                Some(annotate(fresh.clone(), EXPIRES_ANNOTATION, None)),
                8,
                Some("no-expiry"),
                vec!["no-expiry"],
            ),
            (
                "unreadable expiry",
                Some(annotate(fresh.clone(), EXPIRES_ANNOTATION, Some("soon"))),
                8,
                Some("unreadable-expiry"),
                vec!["unreadable-expiry"],
            ),
            (
                "forged expiry",
                Some(annotate(
                    fresh.clone(),
                    EXPIRES_ANNOTATION,
                    Some("9999-12-31T23:59:59Z"),
                )),
                8,
                Some("implausible-expiry 9999-12-31T23:59:59Z (a token lives 12h)"),
                vec!["implausible-expiry"],
            ),
            (
                "inside RENEW_BEFORE",
                Some(ours(&[HOST], &at(7))),
                8,
                Some("expires-soon"),
                vec!["expires-soon"],
            ),
            (
                "expired",
                Some(ours(&[HOST], &at(-1))),
                8,
                Some("expires-soon"),
                vec!["expired"],
            ),
            (
                "expired, RENEW_BEFORE a token's life",
                Some(ours(&[HOST], &at(-1))),
                12,
                Some("expires-soon"),
                vec!["expired"],
            ),
            (
                "a configured registry without our entry",
                Some(ours(&[], &at(11))),
                8,
                Some(&*missing),
                vec!["no-entry"],
            ),
            (
                "an entry for a configured registry that we did not record",
                Some(annotate(fresh.clone(), REGISTRIES_ANNOTATION, Some(""))),
                8,
                Some(&*missing),
                vec!["missing-registry"],
            ),
            (
                "a registry no longer configured",
                Some(ours(&[HOST, OTHER], &at(11))),
                8,
                Some(&*stale),
                vec!["stale-registry"],
            ),
            (
                "our entry edited",
                Some(edited(fresh.clone(), "pw-a-long", "typed-by-hand")),
                8,
                Some("entries-changed"),
                vec!["entries-changed"],
            ),
            (
                "our entry edited, RENEW_BEFORE a token's life",
                Some(edited(fresh.clone(), "pw-a-long", "typed-by-hand")),
                12,
                Some("expires-soon"),
                vec!["entries-changed"],
            ),
            (
                "kubectl's copy of a password",
                Some(annotate(
                    fresh.clone(),
                    LAST_APPLIED_ANNOTATION,
                    Some(&last_applied(HOST)),
                )),
                8,
                Some("last-applied-holds-password"),
                vec!["last-applied-holds-password"],
            ),
            // Every run rewrites every Secret: that alone is no finding.
            (
                "RENEW_BEFORE a token's life",
                Some(fresh),
                12,
                Some("expires-soon"),
                vec![],
            ),
        ];
        let mut reported = BTreeSet::new();
        for (case, secret, renew, due, expected) in cases {
            let policy = policy(renew);
            let read = write::judge(secret.clone(), &policy, now()).expect(case);
            let refresh = match &read.decision {
                Decision::Fresh { .. } => None,
                Decision::Due(due) => {
                    reported.insert(due.as_str());
                    Some(due.to_string())
                }
            };
            assert_eq!(refresh.as_deref(), due, "{case}: the refresh's due");
            let state = secret_findings(secret.as_ref(), &policy, now());
            assert_eq!(kinds(&state), expected, "{case}: the check's findings");
            if !expected.is_empty() {
                assert_eq!(state.due.as_deref(), due, "{case}: the check's due");
            }
            for finding in &state.findings {
                if let Finding::Due { reason, .. } = finding {
                    assert!(
                        finding.to_string().starts_with(&format!("{reason}: ")),
                        "{case}"
                    );
                }
            }
        }
        let every: BTreeSet<&str> = [
            "missing",
            "no-expiry",
            "unreadable-expiry",
            "implausible-expiry",
            "expires-soon",
            "missing-registry",
            "stale-registry",
            "entries-changed",
            "last-applied-holds-password",
        ]
        .into();
        assert_eq!(reported, every, "a case for every reason a refresh writes");
        for kind in every {
            let as_finding = match kind {
                "missing" => "secret-missing",
                "missing-registry" => "no-entry",
                other => other,
            };
            assert!(KINDS.contains(&as_finding), "{kind} has a metric kind");
        }
    }

    #[test]
    fn a_secret_a_refresh_refuses_to_write_is_a_finding_with_the_refusal() {
        let configured: Vec<RegistryHost> = vec![HOST.parse().unwrap()];
        let policy = Policy {
            renew_before: HOUR * 8,
            install: None,
            registries: Registries::Configured(&configured),
        };
        let fresh = ours(&[HOST], &at(11));
        let mut opaque = fresh.clone();
        opaque.type_ = Some("Opaque".into());
        let mut immutable = fresh.clone();
        immutable.immutable = Some(true);
        let mut unreadable = fresh.clone();
        unreadable.data = Some(BTreeMap::from([(
            DATA_KEY.to_owned(),
            ByteString(br#"{"auths":"hunter2"}"#.to_vec()),
        )]));
        let mut no_value = fresh;
        no_value.data = None;
        for (case, secret, kind) in [
            ("another type", opaque, "wrong-type"),
            ("immutable", immutable, "not-writable"),
            ("unreadable", unreadable, "unreadable"),
            ("no value", no_value, "unreadable"),
        ] {
            let state = secret_findings(Some(&secret), &policy, now());
            assert_eq!(kinds(&state), [kind], "{case}");
            assert!(state.findings[0].blocks_every_pull() || kind == "not-writable");
        }
    }

    /// keyring.go matches an entry's host and path: `HOST/team-x` serves only images under
    /// team-x, so it is no entry for HOST.
    #[test]
    fn a_path_scoped_entry_is_no_entry_for_its_host() {
        let configured: Vec<RegistryHost> = vec![HOST.parse().unwrap()];
        let policy = Policy {
            renew_before: HOUR * 8,
            install: None,
            registries: Registries::Configured(&configured),
        };
        let scoped = edited(
            ours(&[HOST], &at(11)),
            &format!(r#""{HOST}":"#),
            &format!(r#""{HOST}/team-x":"#),
        );
        let state = secret_findings(Some(&scoped), &policy, now());
        assert_eq!(kinds(&state), ["no-entry"]);
        assert!(state.serves(&format!("{HOST}/team-x/web")));
        assert!(!state.serves(&format!("{HOST}/web")));
    }

    #[test]
    fn missing_hosts_are_named_in_configured_order_then_their_twins() {
        let configured: Vec<RegistryHost> = crate::aws::registry::with_twins(
            vec![HOST.parse().unwrap(), OTHER.parse().unwrap()],
            true,
        )
        .unwrap();
        let policy = Policy {
            renew_before: HOUR * 8,
            install: None,
            registries: Registries::Configured(&configured),
        };
        let state = secret_findings(Some(&ours(&[HOST], &at(11))), &policy, now());
        let text: Vec<String> = state.findings.iter().map(ToString::to_string).collect();
        assert_eq!(
            text,
            [
                format!("no entry for registry {OTHER}"),
                "no entry for registry 123456789012.dkr-ecr.us-east-1.on.aws".to_owned(),
                "no entry for registry 210987654321.dkr-ecr.eu-west-1.on.aws".to_owned(),
            ]
        );
    }

    #[test]
    fn without_configured_registries_an_unrecorded_entry_in_the_region_is_not_no_entry() {
        let own = Policy {
            renew_before: HOUR * 8,
            install: None,
            registries: Registries::Own {
                region: Some("us-east-1"),
                dual_stack: false,
            },
        };
        let unrecorded = annotate(ours(&[HOST], &at(11)), REGISTRIES_ANNOTATION, Some(""));
        let state = secret_findings(Some(&unrecorded), &own, now());
        assert_eq!(kinds(&state), ["missing-registry"]);
        let elsewhere = Policy {
            registries: Registries::Own {
                region: Some("eu-west-1"),
                dual_stack: false,
            },
            ..own
        };
        let state = secret_findings(Some(&unrecorded), &elsewhere, now());
        assert_eq!(
            state.findings,
            [Finding::NoEntry(
                "(the caller's own registry in eu-west-1)".into()
            )]
        );
    }
}
