//! What `ecr-refresh uninstall` does to one pull Secret: the one rule that decides between
//! deleting it, taking only our entries out of it, and leaving it alone.
//!
//! Only a Secret ecr-refresh created (labelled [`CREATED_LABEL`] by its create) may be
//! deleted, and only while it holds nothing but the entries our last write recorded
//! (`ecr-refresh/registries`). A Secret we adopted (one a script or a person made, that a
//! refresh then wrote in place), or one we created that others have added entries to since,
//! loses only our entries, our annotations and our labels: every other entry stays byte for
//! byte. An adopted Secret that holds nothing but our entries is left as it is: someone
//! else made it, and pods may pull with it; its owner deletes it.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::Secret;

use crate::pull_secret::docker_config::{self, UnreadableDockerConfig};
use crate::pull_secret::install::{Install, recorded as recorded_install};
use crate::pull_secret::{CREATED_LABEL, DATA_KEY, FIELD_MANAGER, MANAGED_BY_LABEL};
use crate::pull_secret::{data_value, label, recorded_hosts};

/// The annotations and labels of ours that a Secret keeps after its entries are taken out:
/// none. Everything under this prefix is ours.
pub const OUR_PREFIX: &str = "ecr-refresh/";

/// What uninstall does to one Secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Removal {
    /// We created it and it holds only our entries: delete it, pinned to its uid and
    /// resourceVersion.
    Delete,
    /// Others' entries stay: write this value, without our annotations and labels.
    Strip {
        value: Vec<u8>,
        /// The entries taken out, by key.
        removed: Vec<String>,
    },
    /// Left as it is, and why.
    Keep(Kept),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kept {
    /// Adopted, and nothing but our entries in it: not ours to delete.
    Adopted,
    /// No `ecr-refresh/registries` record: we can't tell our entries from others'.
    Unrecorded,
    /// Its `.dockerconfigjson` is not a docker config we can read.
    Unreadable,
    /// Another install than the one being removed wrote the Secret last.
    OtherInstall,
}

impl Kept {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Adopted => {
                "adopted, not created by ecr-refresh, and holding only ecr-refresh's entries: \
                 left as it is; delete it yourself once nothing pulls with it"
            }
            Self::Unrecorded => {
                "no ecr-refresh/registries annotation says which entries are ecr-refresh's: left as it is"
            }
            Self::Unreadable => "its .dockerconfigjson can't be read: left as it is",
            Self::OtherInstall => {
                "another install wrote it last (ecr-refresh/install): left as it is; run \
                 uninstall with that install's ECR_REFRESH_INSTALL to remove its entries"
            }
        }
    }
}

/// Whether ecr-refresh created this Secret (its create set the label; nothing else does).
pub fn created_by_us(secret: &Secret) -> bool {
    label(secret, CREATED_LABEL) == Some("true")
}

/// Whether the Secret carries our mark at all (the label every write sets).
pub fn managed_by_us(secret: &Secret) -> bool {
    label(secret, MANAGED_BY_LABEL) == Some(FIELD_MANAGER)
}

/// More than one install is recorded on the selected Secrets and none is named: uninstall
/// removes nothing until ECR_REFRESH_INSTALL names the one to remove.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the selected Secrets were written by {} installs ({}): set ECR_REFRESH_INSTALL to the one to \
     remove (and ECR_REFRESH_NAMESPACES, ECR_REFRESH_EXCLUDE_NAMESPACES and \
     ECR_REFRESH_NAMESPACE_SELECTOR to its selection); nothing was changed",
    .0.len(),
    .0.join(", ")
)]
pub struct WhichInstall(pub Vec<String>);

/// Whose Secrets this uninstall removes: the install ECR_REFRESH_INSTALL names; with none
/// named, the one install the selected Secrets record (`recorded`, each Secret's
/// `ecr-refresh/install`), or None when they record none. With none named and more than one
/// recorded, it can't tell which is being removed: it must never remove one install's
/// entries for another's uninstall, so it refuses.
pub fn whose<'a>(
    named: Option<&Install>,
    recorded: impl IntoIterator<Item = &'a str>,
) -> Result<Option<String>, WhichInstall> {
    if let Some(named) = named {
        return Ok(Some(named.as_str().to_owned()));
    }
    let recorded: BTreeSet<&str> = recorded.into_iter().collect();
    match recorded.len() {
        0 => Ok(None),
        1 => Ok(recorded.into_iter().next().map(str::to_owned)),
        _ => Err(WhichInstall(
            recorded.into_iter().map(str::to_owned).collect(),
        )),
    }
}

/// The one decision for one Secret. `install`: the install being removed ([`whose`]); a
/// Secret another install wrote last is left to that install's uninstall, and with None, any
/// Secret that records an install is (it was recorded after [`whose`] looked).
///
/// Never touched: a Secret another install wrote last, one without our record of which
/// entries are ours, one we can't read, and every entry that is not ours.
pub fn removal(secret: &Secret, install: Option<&str>) -> Removal {
    if let Some(writer) = recorded_install(secret)
        && install != Some(writer)
    {
        return Removal::Keep(Kept::OtherInstall);
    }
    let ours: Vec<String> = recorded_hosts(secret).into_iter().collect();
    if ours.is_empty() {
        return Removal::Keep(Kept::Unrecorded);
    }
    let Some(current) = data_value(secret, DATA_KEY) else {
        return Removal::Keep(Kept::Unreadable);
    };
    let Ok(stripped) = without(current, &ours) else {
        return Removal::Keep(Kept::Unreadable);
    };
    if stripped.left_empty {
        return if created_by_us(secret) {
            Removal::Delete
        } else {
            Removal::Keep(Kept::Adopted)
        };
    }
    Removal::Strip {
        value: stripped.value,
        removed: stripped.removed,
    }
}

struct Stripped {
    value: Vec<u8>,
    removed: Vec<String>,
    /// Nothing left: no entry and no other member than an empty `auths`.
    left_empty: bool,
}

/// `current` without the entries of `ours` (the merge of no credentials over the hosts our
/// last write recorded: it keeps every other entry as it is).
fn without(current: &[u8], ours: &[String]) -> Result<Stripped, UnreadableDockerConfig> {
    let merged = docker_config::merge(Some(current), &[], ours)?;
    let removed = merged_dropped(current, ours)?;
    let value = merged.into_bytes();
    // Our own merge's bytes: they parse.
    let left_empty = serde_json::from_slice::<serde_json::Value>(&value)
        .is_ok_and(|left| left == serde_json::json!({"auths": {}}));
    Ok(Stripped {
        value,
        removed,
        left_empty,
    })
}

/// The keys of `current`'s entries that are ours, in `auths` and its other letter cases.
fn merged_dropped(current: &[u8], ours: &[String]) -> Result<Vec<String>, UnreadableDockerConfig> {
    let keys: BTreeSet<String> = docker_config::auths_keys(current)?
        .into_iter()
        .chain(docker_config::variant_keys(current)?)
        .collect();
    Ok(keys
        .into_iter()
        .filter(|k| ours.iter().any(|host| docker_config::is_entry_for(k, host)))
        .collect())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::ByteString;

    use super::*;
    use crate::pull_secret::REGISTRIES_ANNOTATION;
    use crate::pull_secret::install::INSTALL_ANNOTATION;

    const OURS: &str = "111122223333.dkr.ecr.eu-west-1.amazonaws.com";

    fn secret(created: bool, recorded: Option<&str>, config: serde_json::Value) -> Secret {
        let mut labels = BTreeMap::from([(MANAGED_BY_LABEL.to_owned(), FIELD_MANAGER.to_owned())]);
        if created {
            labels.insert(CREATED_LABEL.to_owned(), "true".to_owned());
        }
        let mut s = Secret::default();
        s.metadata.labels = Some(labels);
        s.metadata.annotations =
            recorded.map(|r| BTreeMap::from([(REGISTRIES_ANNOTATION.to_owned(), r.to_owned())]));
        s.data = Some(BTreeMap::from([(
            DATA_KEY.to_owned(),
            ByteString(config.to_string().into_bytes()),
        )]));
        s
    }

    fn entry(password: &str) -> serde_json::Value {
        serde_json::json!({"username": "AWS", "password": password})
    }

    #[test]
    fn a_secret_we_created_holding_only_our_entries_is_deleted() {
        let s = secret(
            true,
            Some(OURS),
            serde_json::json!({"auths": {OURS: entry("t")}}),
        );
        assert_eq!(removal(&s, None), Removal::Delete);
    }

    #[test]
    fn an_adopted_secret_holding_only_our_entries_is_kept() {
        let s = secret(
            false,
            Some(OURS),
            serde_json::json!({"auths": {OURS: entry("t")}}),
        );
        assert_eq!(removal(&s, None), Removal::Keep(Kept::Adopted));
    }

    #[test]
    fn others_entries_stay_byte_for_byte_in_a_secret_we_created_or_adopted() {
        for created in [true, false] {
            let s = secret(
                created,
                Some(OURS),
                serde_json::json!({"auths": {"ghcr.io": entry("theirs"), OURS: entry("t"),
                    format!("https://{OURS}/"): entry("old")}}),
            );
            let Removal::Strip { value, removed } = removal(&s, None) else {
                panic!("created={created}: {:?}", removal(&s, None));
            };
            let left: serde_json::Value = serde_json::from_slice(&value).unwrap();
            assert_eq!(
                left,
                serde_json::json!({"auths": {"ghcr.io": entry("theirs")}})
            );
            assert_eq!(removed, [OURS.to_owned(), format!("https://{OURS}/")]);
        }
    }

    #[test]
    fn a_secret_without_our_record_or_with_an_unreadable_value_is_kept() {
        let s = secret(true, None, serde_json::json!({"auths": {OURS: entry("t")}}));
        assert_eq!(removal(&s, None), Removal::Keep(Kept::Unrecorded));
        let mut s = secret(true, Some(OURS), serde_json::json!({}));
        s.data = Some(BTreeMap::from([(
            DATA_KEY.to_owned(),
            ByteString(b"not json".to_vec()),
        )]));
        assert_eq!(removal(&s, None), Removal::Keep(Kept::Unreadable));
    }

    #[test]
    fn a_secret_another_install_wrote_is_left_to_that_installs_uninstall() {
        let mut s = secret(
            true,
            Some(OURS),
            serde_json::json!({"auths": {OURS: entry("t")}}),
        );
        s.metadata
            .annotations
            .get_or_insert_with(BTreeMap::new)
            .insert(
                INSTALL_ANNOTATION.to_owned(),
                "team-b/ecr-refresh".to_owned(),
            );
        assert_eq!(
            removal(&s, Some("platform/ecr-refresh")),
            Removal::Keep(Kept::OtherInstall)
        );
        assert_eq!(removal(&s, Some("team-b/ecr-refresh")), Removal::Delete);
        assert_eq!(
            removal(&s, None),
            Removal::Keep(Kept::OtherInstall),
            "no install being removed: a Secret that records one is kept"
        );
        let unrecorded = secret(
            true,
            Some(OURS),
            serde_json::json!({"auths": {OURS: entry("t")}}),
        );
        assert_eq!(
            removal(&unrecorded, Some("team-b/ecr-refresh")),
            Removal::Delete,
            "written before the record: any install's"
        );
    }

    #[test]
    fn with_no_install_named_the_one_recorded_is_removed_and_two_are_refused() {
        let named: Install = "team-a/ecr-refresh".parse().unwrap();
        assert_eq!(
            whose(Some(&named), ["team-b/x", "team-c/y"]),
            Ok(Some("team-a/ecr-refresh".to_owned())),
            "named: that one, whatever is recorded"
        );
        assert_eq!(whose(None, []), Ok(None), "nothing recorded");
        assert_eq!(
            whose(None, ["team-b/x", "team-b/x"]),
            Ok(Some("team-b/x".to_owned())),
            "one install recorded, on every Secret"
        );
        let refused = whose(None, ["team-c/y", "team-b/x", "team-c/y"]).unwrap_err();
        assert_eq!(refused.0, ["team-b/x", "team-c/y"]);
        let message = refused.to_string();
        for said in [
            "team-b/x, team-c/y",
            "ECR_REFRESH_INSTALL",
            "nothing was changed",
        ] {
            assert!(message.contains(said), "{said}: {message}");
        }
    }

    #[test]
    fn a_created_secret_with_another_top_level_member_is_stripped_not_deleted() {
        let s = secret(
            true,
            Some(OURS),
            serde_json::json!({"auths": {OURS: entry("t")}, "credHelpers": {"x": "y"}}),
        );
        assert!(
            matches!(removal(&s, None), Removal::Strip { .. }),
            "{:?}",
            removal(&s, None)
        );
    }
}
