//! Which install wrote a Secret, so that two installs writing one Secret name don't undo each
//! other.
//!
//! Each write records the registries it wrote (`ecr-refresh/registries`); a later write removes
//! the entries of recorded registries it no longer writes, since a registry taken out of the
//! configuration should leave with its token. Two installs writing the same Secret name (one per
//! AWS account, each with its own role) would each take the other's entries for its own removed
//! ones, at every run, and pods would alternate between pulling and ImagePullBackOff.
//!
//! So each write also records who wrote it (`ecr-refresh/install`): ECR_REFRESH_INSTALL, or in a
//! pod the ServiceAccount it runs as (`<namespace>/<name>`). A Secret another install wrote, that
//! holds entries for registries this one does not write, is refused, loudly, and left as it is:
//! one Secret name per install is the fix. Entries another install wrote for registries this one
//! writes too are simply taken over, as nothing is lost.

use std::fmt;
use std::str::FromStr;

use base64::Engine as _;
use k8s_openapi::api::core::v1::Secret;

use super::docker_config::is_entry_for;
use super::{annotation, recorded_hosts};

/// Who wrote the Secret last: ECR_REFRESH_INSTALL, or the writer's ServiceAccount.
pub const INSTALL_ANNOTATION: &str = "ecr-refresh/install";

/// Where a pod's ServiceAccount token is mounted (the kubelet's default projection).
pub const SERVICE_ACCOUNT_TOKEN: &str = "/var/run/secrets/kubernetes.io/serviceaccount/token";

/// An install's name, as recorded in `ecr-refresh/install`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Install(String);

impl Install {
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The ServiceAccount a token was issued to, as `<namespace>/<name>`, from its `sub` claim
    /// (`system:serviceaccount:<namespace>:<name>`). The token is not verified: the API server
    /// does that for every request it authenticates, and this name only tells installs apart.
    pub fn from_service_account_token(token: &str) -> Option<Self> {
        let payload = token.trim().split('.').nth(1)?;
        let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(payload.trim_end_matches('='))
            .ok()?;
        let claims: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
        let subject = claims["sub"].as_str()?;
        subject.strip_prefix("system:serviceaccount:")?;
        Self::from_username(subject)
    }

    /// The name an API server user records: a ServiceAccount's user name
    /// (`system:serviceaccount:<namespace>:<name>`) as `<namespace>/<name>`, the name a pod of
    /// that ServiceAccount records; any other user name (an OIDC email, an EKS role ARN, a
    /// client certificate's CN) as it is.
    pub fn from_username(username: &str) -> Option<Self> {
        match username
            .strip_prefix("system:serviceaccount:")
            .and_then(|rest| rest.split_once(':'))
        {
            Some((namespace, name)) => format!("{namespace}/{name}").parse().ok(),
            None => username.parse().ok(),
        }
    }

    /// The ServiceAccount this pod runs as, when it runs in one with a token mounted.
    pub fn in_cluster() -> Option<Self> {
        std::fs::read_to_string(SERVICE_ACCOUNT_TOKEN)
            .ok()
            .and_then(|token| Self::from_service_account_token(&token))
    }
}

impl FromStr for Install {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        // Any user name an API server may give (an OIDC email, an EKS role ARN): printable,
        // no spaces, as an annotation value and a log field hold it unquoted.
        let ok = !s.is_empty()
            && s.len() <= 253
            && s.chars().all(|c| {
                c.is_ascii_graphic() || (!c.is_ascii() && !c.is_control() && !c.is_whitespace())
            });
        ok.then(|| Self(s.to_owned())).ok_or_else(|| {
            "must be 1 to 253 characters without spaces, such as <namespace>/<serviceaccount> or a user name"
                .to_owned()
        })
    }
}

impl fmt::Display for Install {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The install a Secret records as its writer (`ecr-refresh/install`), if any.
pub fn recorded(secret: &Secret) -> Option<&str> {
    annotation(secret, INSTALL_ANNOTATION).filter(|name| !name.is_empty())
}

/// Entries another install wrote, for registries this one does not write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OtherInstall {
    /// The install recorded in `ecr-refresh/install`.
    pub install: String,
    /// Its recorded registries this write would drop.
    pub hosts: Vec<String>,
}

/// Whether the Secret holds entries another install wrote for registries outside `writes` (the
/// hosts this write puts in `auths`): writing it would drop them. A Secret with no recorded
/// install (written by hand, or before the record) is ours to take over, as before.
pub fn other_install(
    secret: &Secret,
    ours: Option<&Install>,
    writes: &[&str],
) -> Option<OtherInstall> {
    let recorded = annotation(secret, INSTALL_ANNOTATION)?;
    if ours.is_some_and(|ours| ours.as_str() == recorded) {
        return None;
    }
    let hosts: Vec<String> = recorded_hosts(secret)
        .into_iter()
        .filter(|host| !writes.iter().any(|w| is_entry_for(host, w)))
        .collect();
    (!hosts.is_empty()).then(|| OtherInstall {
        install: recorded.to_owned(),
        hosts,
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;
    use crate::pull_secret::REGISTRIES_ANNOTATION;

    const A: &str = "111111111111.dkr.ecr.us-east-1.amazonaws.com";
    const B: &str = "222222222222.dkr.ecr.us-east-1.amazonaws.com";

    fn written(install: Option<&str>, registries: &str) -> Secret {
        let mut annotations =
            BTreeMap::from([(REGISTRIES_ANNOTATION.to_owned(), registries.to_owned())]);
        if let Some(install) = install {
            annotations.insert(INSTALL_ANNOTATION.to_owned(), install.to_owned());
        }
        Secret {
            metadata: ObjectMeta {
                annotations: Some(annotations),
                ..ObjectMeta::default()
            },
            ..Secret::default()
        }
    }

    fn install(s: &str) -> Install {
        s.parse().unwrap()
    }

    #[test]
    fn another_installs_entries_for_registries_we_do_not_write_are_refused() {
        let theirs = written(Some("team-a/ecr-refresh"), &format!("{A},{B}"));
        let ours = install("team-b/ecr-refresh");
        assert_eq!(
            other_install(&theirs, Some(&ours), &[B]),
            Some(OtherInstall {
                install: "team-a/ecr-refresh".into(),
                hosts: vec![A.into()],
            })
        );
        assert!(
            other_install(&theirs, None, &[B]).is_some(),
            "a run that knows no name of its own is another install too"
        );
    }

    #[test]
    fn our_own_record_an_unrecorded_writer_and_a_takeover_losing_nothing_pass() {
        let ours = install("team-a/ecr-refresh");
        let cases = [
            (
                written(Some("team-a/ecr-refresh"), A),
                vec![B],
                "our own write",
            ),
            (written(None, A), vec![B], "no install recorded"),
            (
                written(Some("old/ecr-refresh"), A),
                vec![A, B],
                "every recorded registry is written again",
            ),
            (
                written(Some("old/ecr-refresh"), &format!("https://{A}")),
                vec![A],
                "recorded as the kubelet matches it",
            ),
        ];
        for (secret, writes, case) in cases {
            assert_eq!(other_install(&secret, Some(&ours), &writes), None, "{case}");
        }
    }

    #[test]
    fn a_service_account_token_names_its_namespace_and_account() {
        let claims = r#"{"iss":"https://kubernetes.default.svc","sub":"system:serviceaccount:team-a:ecr-refresh"}"#;
        let payload = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(claims);
        let token = format!("eyJhbGciOiJSUzI1NiJ9.{payload}.c2lnbmF0dXJl\n");
        assert_eq!(
            Install::from_service_account_token(&token),
            Some(install("team-a/ecr-refresh"))
        );
        let user = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(r#"{"sub":"alice"}"#);
        for not_one in ["", "opaque", &format!("h.{user}.s"), "h.!!!.s"] {
            assert_eq!(
                Install::from_service_account_token(not_one),
                None,
                "{not_one}"
            );
        }
    }

    #[test]
    fn an_install_name_is_short_printable_text() {
        for good in [
            "team-a/ecr-refresh",
            "alice@example.com",
            "arn:aws:sts::111111111111:assumed-role/Admin/alice",
            "kubernetes-admin",
        ] {
            assert!(good.parse::<Install>().is_ok(), "{good:?}");
        }
        for bad in ["", "with space", "tab\there", "new\nline", &"x".repeat(254)] {
            assert!(bad.parse::<Install>().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_user_name_is_recorded_as_a_pod_of_its_service_account_would_record_it() {
        let cases = [
            (
                "system:serviceaccount:team-a:ecr-refresh",
                Some("team-a/ecr-refresh"),
            ),
            ("kubernetes-admin", Some("kubernetes-admin")),
            ("system:admin", Some("system:admin")),
            ("alice@example.com", Some("alice@example.com")),
            (
                "arn:aws:sts::111111111111:assumed-role/Admin/alice",
                Some("arn:aws:sts::111111111111:assumed-role/Admin/alice"),
            ),
            ("", None),
            ("with space", None),
        ];
        for (username, recorded) in cases {
            assert_eq!(
                Install::from_username(username)
                    .as_ref()
                    .map(Install::as_str),
                recorded,
                "{username:?}"
            );
        }
    }
}
