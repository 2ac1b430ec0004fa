//! The pull Secret: what one written by ecr-refresh holds, by name (its type, data key, label
//! and annotations, and kubectl's copy of an old password), and the modules that build it
//! (`docker_config`), decide whether it is due (`due`), write it (`write`), wire it into
//! ServiceAccounts (`service_accounts`) and decide what uninstall does to it (`remove`).

pub mod docker_config;
pub mod due;
pub mod install;
pub mod keyring;
pub mod remove;
pub mod rules;
pub mod service_accounts;
pub mod write;

use std::collections::BTreeSet;

use base64::Engine as _;
use k8s_openapi::api::core::v1::Secret;

use crate::aws::registry::{self, RegistryHost};

use docker_config::is_entry_for;

pub use crate::owned::FIELD_MANAGER;
pub const SECRET_TYPE: &str = "kubernetes.io/dockerconfigjson";
pub const DATA_KEY: &str = ".dockerconfigjson";
pub const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";
/// Set to "true" by our create, and by nothing else: the Secrets ecr-refresh created, which
/// `ecr-refresh uninstall` may delete (`remove`). An adopted Secret never carries it.
pub const CREATED_LABEL: &str = "ecr-refresh/created";
/// The registries our last write put in `auths`, comma-separated: entries for those no longer
/// configured are ours to remove; every other entry is someone else's.
pub const REGISTRIES_ANNOTATION: &str = "ecr-refresh/registries";
pub const EXPIRES_ANNOTATION: &str = "ecr-refresh/token-expires-at";
/// What our last write put in our `auths` entries, as a digest (see `due::digest`): entries
/// that no longer match it were changed by someone, and the Secret is due.
pub const DIGEST_ANNOTATION: &str = "ecr-refresh/auths-sha256";
/// Where `kubectl apply` keeps a copy of the whole object it applied, password included.
pub const LAST_APPLIED_ANNOTATION: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// The value of one of the Secret's annotations.
pub fn annotation<'s>(secret: &'s Secret, key: &str) -> Option<&'s str> {
    secret
        .metadata
        .annotations
        .as_ref()?
        .get(key)
        .map(String::as_str)
}

/// The value of one of the Secret's labels.
pub fn label<'s>(secret: &'s Secret, key: &str) -> Option<&'s str> {
    secret
        .metadata
        .labels
        .as_ref()?
        .get(key)
        .map(String::as_str)
}

/// The bytes of one of the Secret's data keys (the pull Secret's: `DATA_KEY`).
pub fn data_value<'s>(secret: &'s Secret, key: &str) -> Option<&'s [u8]> {
    secret.data.as_ref()?.get(key).map(|b| b.0.as_slice())
}

/// The caller's own registry as our last write recorded it, when ECR_REFRESH_REGISTRIES names
/// none (the account is only known from there): the `recorded` hosts in `region` as ECR names
/// them, never a dual-stack host. Empty: none recorded yet.
pub fn own_recorded(recorded: &BTreeSet<String>, region: Option<&str>) -> Vec<RegistryHost> {
    recorded
        .iter()
        .filter_map(|h| h.parse::<RegistryHost>().ok())
        .filter(|h| region.is_none_or(|r| h.region() == r) && !h.is_dual_stack())
        .collect()
}

/// What a write of the caller's own registry puts in `auths`: those hosts, each with its
/// dual-stack twin under `dual_stack`. A partition without dual-stack hosts has no twin to
/// expect (a refresh refuses to write there, `NoDualStack`), so its hosts stand alone.
pub fn own_written(own: Vec<RegistryHost>, dual_stack: bool) -> Vec<RegistryHost> {
    registry::with_twins(own.clone(), dual_stack).unwrap_or(own)
}

/// The hosts our last write recorded (`ecr-refresh/registries`), as the kubelet matches them.
pub fn recorded_hosts(secret: &Secret) -> BTreeSet<String> {
    annotation(secret, REGISTRIES_ANNOTATION)
        .unwrap_or_default()
        .split(',')
        .map(registry::normalize)
        .filter(|h| !h.is_empty())
        .collect()
}

/// Whether kubectl's last-applied annotation holds a docker config with an entry for one of
/// our registries (`hosts`): a copy of a password we replace. Any other last-applied
/// annotation is someone else's, and stays.
pub fn last_applied_holds_ours(secret: &Secret, hosts: &[&str]) -> bool {
    let Some(text) = annotation(secret, LAST_APPLIED_ANNOTATION) else {
        return false;
    };
    let Ok(applied) = serde_json::from_str::<serde_json::Value>(text) else {
        return false;
    };
    // `kubectl apply` of a manifest written with `stringData` keeps the docker config as
    // text there; one written with `data`, base64-encoded.
    let value = match (&applied["data"][DATA_KEY], &applied["stringData"][DATA_KEY]) {
        (serde_json::Value::String(b64), _) => {
            match base64::engine::general_purpose::STANDARD.decode(b64) {
                Ok(bytes) => bytes,
                Err(_) => return false,
            }
        }
        (_, serde_json::Value::String(text)) => text.clone().into_bytes(),
        _ => return false,
    };
    docker_config::auths_keys(&value).is_ok_and(|keys| {
        keys.iter()
            .any(|k| hosts.iter().any(|host| is_entry_for(k, host)))
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    const HOST: &str = "123456789012.dkr.ecr.us-east-1.amazonaws.com";

    fn with_last_applied(applied: serde_json::Value) -> Secret {
        let mut secret = Secret::default();
        secret.metadata.annotations = Some(BTreeMap::from([(
            LAST_APPLIED_ANNOTATION.to_owned(),
            applied.to_string(),
        )]));
        secret
    }

    fn config(host: &str) -> String {
        serde_json::json!({"auths": {host: {"username": "AWS", "password": "old"}}}).to_string()
    }

    #[test]
    fn kubectls_copy_of_our_password_is_found_under_data_and_under_string_data() {
        let b64 = base64::engine::general_purpose::STANDARD.encode(config(HOST));
        for applied in [
            serde_json::json!({"data": {DATA_KEY: b64}}),
            serde_json::json!({"stringData": {DATA_KEY: config(HOST)}}),
        ] {
            assert!(
                last_applied_holds_ours(&with_last_applied(applied.clone()), &[HOST]),
                "{applied}"
            );
        }
    }

    #[test]
    fn a_last_applied_copy_of_another_registry_is_someone_elses() {
        for applied in [
            serde_json::json!({"stringData": {DATA_KEY: config("ghcr.io")}}),
            serde_json::json!({"stringData": {"other": config(HOST)}}),
            serde_json::json!({"data": {DATA_KEY: "not base64!"}}),
            serde_json::json!({"kind": "ConfigMap"}),
        ] {
            assert!(
                !last_applied_holds_ours(&with_last_applied(applied.clone()), &[HOST]),
                "{applied}"
            );
        }
        assert!(!last_applied_holds_ours(&Secret::default(), &[HOST]));
    }
}
