//! ServiceAccounts that carry the pull Secret in imagePullSecrets.
//!
//! imagePullSecrets is an atomic list: an apply or merge patch would replace the whole list and
//! wipe what others put there. Our entry is appended with a JSON patch that first tests the
//! resourceVersion read, so a change made since our read fails the test and we read again.
//! Once only: an entry already there means no write at all. We never create ServiceAccounts.

use k8s_openapi::api::core::v1::ServiceAccount;
use kube::Api;
use kube::api::{Patch, PatchParams};

use crate::cluster::names::{SecretName, ServiceAccountName};
use crate::cluster::retry::{self, RequestError};
use crate::pull_secret::write::FIELD_MANAGER;
use crate::report::AccountOutcome;

const ATTEMPTS: usize = 5;

#[derive(Debug, thiserror::Error)]
pub enum AccountError {
    #[error(
        "forbidden to {action} ServiceAccount {account}: {source}; grant ecr-refresh's ServiceAccount get and \
         patch on serviceaccounts (see manifests/)"
    )]
    Forbidden {
        account: String,
        action: &'static str,
        source: RequestError,
    },
    #[error("could not {action} ServiceAccount {account}: {source}")]
    Request {
        account: String,
        action: &'static str,
        source: RequestError,
    },
    #[error("ServiceAccount {account} kept changing under us: gave up after {ATTEMPTS} attempts")]
    Contended { account: String },
}

impl AccountError {
    /// A failed request: Forbidden for a 403, which the fix is a grant for.
    fn new(account: &str, action: &'static str, source: RequestError) -> Self {
        let account = account.to_owned();
        if source.code() == Some(403) {
            Self::Forbidden {
                account,
                action,
                source,
            }
        } else {
            Self::Request {
                account,
                action,
                source,
            }
        }
    }
}

/// Makes sure the ServiceAccount lists the Secret in imagePullSecrets, exactly once. `first`:
/// what a list showed of it (None: read it first).
pub async fn attach(
    api: &Api<ServiceAccount>,
    account: &ServiceAccountName,
    secret: &SecretName,
    dry_run: bool,
    mut first: Option<Option<ServiceAccount>>,
) -> Result<AccountOutcome, AccountError> {
    let name = account.as_str();
    let fail = |action, source| AccountError::new(name, action, source);
    for _ in 0..ATTEMPTS {
        let read = match first.take() {
            Some(listed) => listed,
            None => retry::send("get serviceaccount", || api.get_opt(name))
                .await
                .map_err(|e| fail("read", e))?,
        };
        let Some(current) = read else {
            return Ok(AccountOutcome::Missing);
        };
        let entries = current.image_pull_secrets.as_deref();
        if entries.is_some_and(|e| e.iter().any(|r| r.name == secret.as_str())) {
            return Ok(AccountOutcome::Present);
        }
        let entry = serde_json::json!({ "name": secret.as_str() });
        let add = match entries {
            None => {
                serde_json::json!({ "op": "add", "path": "/imagePullSecrets", "value": [entry] })
            }
            Some(_) => {
                serde_json::json!({ "op": "add", "path": "/imagePullSecrets/-", "value": entry })
            }
        };
        let patch: json_patch::Patch = serde_json::from_value(serde_json::json!([
            { "op": "test", "path": "/metadata/resourceVersion", "value": current.metadata.resource_version },
            add,
        ]))
        .expect("a JSON patch of a test and an add op");
        let patch = Patch::<()>::Json(patch);
        let params = PatchParams {
            dry_run,
            field_manager: Some(FIELD_MANAGER.to_owned()),
            ..PatchParams::default()
        };
        match retry::send("patch serviceaccount", || api.patch(name, &params, &patch)).await {
            Ok(_) if dry_run => return Ok(AccountOutcome::WouldAdd),
            Ok(_) => return Ok(AccountOutcome::Added),
            // The test failed (422) or the object changed (409): read again and decide again.
            Err(RequestError::Api(s)) if s.is_invalid() || s.is_conflict() => {}
            Err(RequestError::Api(s)) if s.is_not_found() => return Ok(AccountOutcome::Missing),
            Err(e) => return Err(fail("patch", e)),
        }
    }
    Err(AccountError::Contended {
        account: name.to_owned(),
    })
}

/// What [`detach`] did to one ServiceAccount.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Detached {
    Removed,
    WouldRemove,
    /// Its imagePullSecrets don't name the Secret (any more).
    Absent,
    /// The ServiceAccount is gone.
    Missing,
}

/// Takes every `{name: <secret>}` entry out of the ServiceAccount's imagePullSecrets, and
/// nothing else: a JSON patch that tests the resourceVersion read and each entry it removes,
/// so a change made since our read is read again, never overwritten. `first`: the
/// ServiceAccount as a list showed it.
pub async fn detach(
    api: &Api<ServiceAccount>,
    account: &str,
    secret: &SecretName,
    dry_run: bool,
    mut first: Option<ServiceAccount>,
) -> Result<Detached, AccountError> {
    let fail = |action, source| AccountError::new(account, action, source);
    for _ in 0..ATTEMPTS {
        let read = match first.take() {
            Some(listed) => Some(listed),
            None => retry::send("get serviceaccount", || api.get_opt(account))
                .await
                .map_err(|e| fail("read", e))?,
        };
        let Some(current) = read else {
            return Ok(Detached::Missing);
        };
        let ours: Vec<usize> = current
            .image_pull_secrets
            .iter()
            .flatten()
            .enumerate()
            .filter(|(_, r)| r.name == secret.as_str())
            .map(|(i, _)| i)
            .collect();
        if ours.is_empty() {
            return Ok(Detached::Absent);
        }
        let mut ops = vec![serde_json::json!(
            { "op": "test", "path": "/metadata/resourceVersion", "value": current.metadata.resource_version }
        )];
        // From the last, so each index still points at the entry it tested.
        for i in ours.iter().rev() {
            let path = format!("/imagePullSecrets/{i}");
            ops.push(serde_json::json!({ "op": "test", "path": format!("{path}/name"), "value": secret.as_str() }));
            ops.push(serde_json::json!({ "op": "remove", "path": path }));
        }
        let patch: json_patch::Patch =
            serde_json::from_value(serde_json::Value::Array(ops)).expect("test and remove ops");
        let patch = Patch::<()>::Json(patch);
        let params = PatchParams {
            dry_run,
            field_manager: Some(FIELD_MANAGER.to_owned()),
            ..PatchParams::default()
        };
        match retry::send("patch serviceaccount", || {
            api.patch(account, &params, &patch)
        })
        .await
        {
            Ok(_) if dry_run => return Ok(Detached::WouldRemove),
            Ok(_) => return Ok(Detached::Removed),
            Err(RequestError::Api(s)) if s.is_invalid() || s.is_conflict() => {}
            Err(RequestError::Api(s)) if s.is_not_found() => return Ok(Detached::Missing),
            Err(e) => return Err(fail("patch", e)),
        }
    }
    Err(AccountError::Contended {
        account: account.to_owned(),
    })
}
