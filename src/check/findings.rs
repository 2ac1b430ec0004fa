//! What a check can find in one namespace, and how the Secret's findings are decided: pure
//! functions of the Secret as read, the hosts we manage and the time.

use std::collections::BTreeSet;
use std::fmt;
use std::time::{Duration, SystemTime};

use k8s_openapi::api::core::v1::Secret;

use crate::aws::registry::normalize;
use crate::pull_secret::docker_config;
use crate::pull_secret::{DATA_KEY, EXPIRES_ANNOTATION, SECRET_TYPE};

/// An ECR token's whole life. A RENEW_BEFORE of this or more rewrites every Secret on every
/// run, so "expiring within RENEW_BEFORE" would be every Secret: only an expired one counts then.
pub const TOKEN_LIFE: Duration = Duration::from_secs(12 * 3600);

/// One thing that keeps (or will keep) pods in a namespace from pulling from ECR.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Finding {
    SecretMissing,
    WrongType(String),
    Unreadable(String),
    Expired(String),
    ExpiresSoon {
        expires_at: String,
        renew_before: String,
    },
    /// A host we manage (or its dual-stack twin) with no entry in the Secret.
    NoEntry(String),
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
pub const KINDS: &[&str] = &[
    "secret-missing",
    "wrong-type",
    "unreadable",
    "expired",
    "expires-soon",
    "no-entry",
    "registry-not-covered",
    "not-wired",
    "pull-stuck",
    "login-refused",
    "login-failed",
    "check-failed",
];

impl Finding {
    /// The finding's kind, as the log's `finding_kinds` field and the metrics name it.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::SecretMissing => "secret-missing",
            Self::WrongType(_) => "wrong-type",
            Self::Unreadable(_) => "unreadable",
            Self::Expired(_) => "expired",
            Self::ExpiresSoon { .. } => "expires-soon",
            Self::NoEntry(_) => "no-entry",
            Self::NotCovered { .. } => "registry-not-covered",
            Self::NotWired { .. } => "not-wired",
            Self::PullStuck { .. } => "pull-stuck",
            Self::LoginRefused { .. } => "login-refused",
            Self::LoginFailed { .. } => "login-failed",
            Self::CheckFailed(_) => "check-failed",
        }
    }

    /// Whether this finding stops every pull of the namespace, whatever the host.
    pub fn blocks_every_pull(&self) -> bool {
        matches!(
            self,
            Self::SecretMissing | Self::WrongType(_) | Self::Unreadable(_) | Self::Expired(_)
        )
    }
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::SecretMissing => f.write_str("Secret missing"),
            Self::WrongType(t) => write!(f, "wrong type: {t}, not {SECRET_TYPE}"),
            Self::Unreadable(why) => write!(f, "unreadable: {why}"),
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
        }
    }
}

/// The Secret as the check read it: its findings, and what the pods' checks need of it.
#[derive(Debug, Default)]
pub struct SecretState {
    pub findings: Vec<Finding>,
    /// The hosts its `auths` has entries for, as the kubelet matches them.
    pub entries: BTreeSet<String>,
}

/// The Secret's own findings. `hosts` are those the Secret must hold entries for.
pub fn secret_findings(
    secret: Option<&Secret>,
    hosts: &[String],
    renew_before: Duration,
    now: SystemTime,
) -> SecretState {
    let mut state = SecretState::default();
    let Some(secret) = secret else {
        state.findings.push(Finding::SecretMissing);
        return state;
    };
    let kind = secret.type_.as_deref().unwrap_or("Opaque");
    if kind != SECRET_TYPE {
        state.findings.push(Finding::WrongType(kind.to_owned()));
        return state;
    }
    let value = secret.data.as_ref().and_then(|d| d.get(DATA_KEY));
    let keys = match value.map(|v| docker_config::auths_keys(&v.0)) {
        None => {
            state
                .findings
                .push(Finding::Unreadable(format!("it has no {DATA_KEY}")));
            return state;
        }
        Some(Err(e)) => {
            state.findings.push(Finding::Unreadable(e.to_string()));
            return state;
        }
        Some(Ok(keys)) => keys,
    };
    state.entries = keys.iter().map(|k| normalize(k)).collect();
    let expiry = secret
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(EXPIRES_ANNOTATION))
        .and_then(|v| humantime::parse_rfc3339(v.trim()).ok());
    if let Some(expires_at) = expiry {
        let at = humantime::format_rfc3339_seconds(expires_at).to_string();
        let due_at = expires_at
            .checked_sub(renew_before)
            .unwrap_or(SystemTime::UNIX_EPOCH);
        if now >= expires_at {
            state.findings.push(Finding::Expired(at));
        } else if renew_before < TOKEN_LIFE && now >= due_at {
            state.findings.push(Finding::ExpiresSoon {
                expires_at: at,
                renew_before: humantime::format_duration(renew_before).to_string(),
            });
        }
    }
    for host in hosts {
        if !state.entries.contains(host) {
            state.findings.push(Finding::NoEntry(host.clone()));
        }
    }
    state
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::ByteString;

    use super::*;

    const HOST: &str = "123456789012.dkr.ecr.us-east-1.amazonaws.com";

    fn secret(kind: &str, value: Option<&str>, expires: Option<&str>) -> Secret {
        let mut s = Secret {
            type_: Some(kind.into()),
            ..Secret::default()
        };
        if let Some(v) = value {
            s.data = Some(BTreeMap::from([(
                DATA_KEY.to_owned(),
                ByteString(v.as_bytes().to_vec()),
            )]));
        }
        if let Some(e) = expires {
            s.metadata.annotations = Some(BTreeMap::from([(
                EXPIRES_ANNOTATION.to_owned(),
                e.to_owned(),
            )]));
        }
        s
    }

    fn kinds(state: &SecretState) -> Vec<&'static str> {
        state.findings.iter().map(Finding::kind).collect()
    }

    #[test]
    fn each_secret_finding_is_decided_from_the_secret_and_the_time() {
        let now = humantime::parse_rfc3339("2030-01-01T12:00:00Z").unwrap();
        let hosts = vec![HOST.to_owned()];
        let entry = format!(r#"{{"auths":{{"https://{HOST}/":{{"auth":"x"}}}}}}"#);
        let hour = Duration::from_secs(3600);
        let cases: Vec<(Option<Secret>, Duration, Vec<&str>)> = vec![
            (None, hour, vec!["secret-missing"]),
            (
                Some(secret("Opaque", Some(&entry), None)),
                hour,
                vec!["wrong-type"],
            ),
            (
                Some(secret(SECRET_TYPE, Some("{"), None)),
                hour,
                vec!["unreadable"],
            ),
            (
                Some(secret(SECRET_TYPE, None, None)),
                hour,
                vec!["unreadable"],
            ),
            (
                Some(secret(SECRET_TYPE, Some(r#"{"auths":{}}"#), None)),
                hour,
                vec!["no-entry"],
            ),
            (
                Some(secret(
                    SECRET_TYPE,
                    Some(&entry),
                    Some("2030-01-01T11:00:00Z"),
                )),
                hour,
                vec!["expired"],
            ),
            (
                Some(secret(
                    SECRET_TYPE,
                    Some(&entry),
                    Some("2030-01-01T12:30:00Z"),
                )),
                hour,
                vec!["expires-soon"],
            ),
            // RENEW_BEFORE of a whole token life: only expiry counts.
            (
                Some(secret(
                    SECRET_TYPE,
                    Some(&entry),
                    Some("2030-01-01T12:30:00Z"),
                )),
                TOKEN_LIFE,
                vec![],
            ),
            (
                Some(secret(
                    SECRET_TYPE,
                    Some(&entry),
                    Some("2030-01-01T20:00:00Z"),
                )),
                hour,
                vec![],
            ),
        ];
        for (secret, renew_before, expected) in cases {
            let state = secret_findings(secret.as_ref(), &hosts, renew_before, now);
            assert_eq!(kinds(&state), expected, "{secret:?}");
        }
    }
}
