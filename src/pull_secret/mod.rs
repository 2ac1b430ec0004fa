//! The pull Secret: what one written by ecr-refresh holds, by name (its type, data key, label
//! and annotations, and kubectl's copy of an old password), and the modules that build it
//! (`docker_config`), decide whether it is due (`due`), write it (`write`) and wire it into
//! ServiceAccounts (`service_accounts`).

pub mod docker_config;
pub mod due;
pub mod service_accounts;
pub mod write;

use base64::Engine as _;
use k8s_openapi::api::core::v1::Secret;

use docker_config::is_entry_for;

pub const FIELD_MANAGER: &str = "ecr-refresh";
pub const SECRET_TYPE: &str = "kubernetes.io/dockerconfigjson";
pub const DATA_KEY: &str = ".dockerconfigjson";
pub const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";
/// The registries our last write put in `auths`, comma-separated: entries for those no longer
/// configured are ours to remove; every other entry is someone else's.
pub const REGISTRIES_ANNOTATION: &str = "ecr-refresh/registries";
pub const EXPIRES_ANNOTATION: &str = "ecr-refresh/token-expires-at";
/// What our last write put in our `auths` entries, as a digest (see `due::digest`): entries
/// that no longer match it were changed by someone, and the Secret is due.
pub const DIGEST_ANNOTATION: &str = "ecr-refresh/auths-sha256";
/// Where `kubectl apply` keeps a copy of the whole object it applied, password included.
pub const LAST_APPLIED_ANNOTATION: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// Whether kubectl's last-applied annotation holds a docker config with an entry for one of
/// our registries (`hosts`): a copy of a password we replace. Any other last-applied
/// annotation is someone else's, and stays.
pub fn last_applied_holds_ours(secret: &Secret, hosts: &[&str]) -> bool {
    let Some(text) = secret
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(LAST_APPLIED_ANNOTATION))
    else {
        return false;
    };
    let Ok(applied) = serde_json::from_str::<serde_json::Value>(text) else {
        return false;
    };
    let Some(value) = applied["data"][DATA_KEY]
        .as_str()
        .and_then(|b64| base64::engine::general_purpose::STANDARD.decode(b64).ok())
    else {
        return false;
    };
    docker_config::auths_keys(&value).is_ok_and(|keys| {
        keys.iter()
            .any(|k| hosts.iter().any(|host| is_entry_for(k, host)))
    })
}
