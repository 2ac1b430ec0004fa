//! ServiceAccounts that carry the pull Secret in imagePullSecrets.
//!
//! imagePullSecrets is an atomic list: an apply or merge patch would replace the whole list and
//! wipe what others put there. Our entry is appended with a JSON patch that first tests the
//! resourceVersion read, so a change made since our read fails the test and we read again.
//! Once only: an entry already there means no write at all. We never create ServiceAccounts.

use std::ops::ControlFlow;

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
    first: Option<Option<ServiceAccount>>,
) -> Result<AccountOutcome, AccountError> {
    let outcomes = Outcomes {
        missing: AccountOutcome::Missing,
        patched: AccountOutcome::Added,
        would_patch: AccountOutcome::WouldAdd,
    };
    edit(api, account.as_str(), dry_run, first, outcomes, |current| {
        let entries = current.image_pull_secrets.as_deref();
        if entries.is_some_and(|e| e.iter().any(|r| r.name == secret.as_str())) {
            return ControlFlow::Break(AccountOutcome::Present);
        }
        let entry = serde_json::json!({ "name": secret.as_str() });
        ControlFlow::Continue(vec![match entries {
            None => {
                serde_json::json!({ "op": "add", "path": "/imagePullSecrets", "value": [entry] })
            }
            Some(_) => {
                serde_json::json!({ "op": "add", "path": "/imagePullSecrets/-", "value": entry })
            }
        }])
    })
    .await
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
    first: Option<ServiceAccount>,
) -> Result<Detached, AccountError> {
    let outcomes = Outcomes {
        missing: Detached::Missing,
        patched: Detached::Removed,
        would_patch: Detached::WouldRemove,
    };
    edit(api, account, dry_run, first.map(Some), outcomes, |current| {
        let ours: Vec<usize> = current
            .image_pull_secrets
            .iter()
            .flatten()
            .enumerate()
            .filter(|(_, r)| r.name == secret.as_str())
            .map(|(i, _)| i)
            .collect();
        if ours.is_empty() {
            return ControlFlow::Break(Detached::Absent);
        }
        // From the last, so each index still points at the entry it tested.
        let mut ops = Vec::new();
        for i in ours.iter().rev() {
            let path = format!("/imagePullSecrets/{i}");
            ops.push(serde_json::json!({ "op": "test", "path": format!("{path}/name"), "value": secret.as_str() }));
            ops.push(serde_json::json!({ "op": "remove", "path": path }));
        }
        ControlFlow::Continue(ops)
    })
    .await
}

/// What an edit came to when the ServiceAccount is gone, and when its patch went through.
struct Outcomes<T> {
    missing: T,
    patched: T,
    would_patch: T,
}

/// Every change we make to a ServiceAccount: read it (or take what a list showed: `first`), and
/// `decide` from it what it comes to with no write (`Break`), or the JSON patch ops to send
/// (`Continue`), behind a test of the resourceVersion read. The test failed (422) or the object
/// changed (409): read again and decide again, ATTEMPTS times.
async fn edit<T: Copy>(
    api: &Api<ServiceAccount>,
    name: &str,
    dry_run: bool,
    mut first: Option<Option<ServiceAccount>>,
    outcomes: Outcomes<T>,
    decide: impl Fn(&ServiceAccount) -> ControlFlow<T, Vec<serde_json::Value>>,
) -> Result<T, AccountError> {
    let fail = |action, source| AccountError::new(name, action, source);
    for _ in 0..ATTEMPTS {
        let read = match first.take() {
            Some(listed) => listed,
            None => retry::send("get serviceaccount", || api.get_opt(name))
                .await
                .map_err(|e| fail("read", e))?,
        };
        let Some(current) = read else {
            return Ok(outcomes.missing);
        };
        let ops = match decide(&current) {
            ControlFlow::Break(outcome) => return Ok(outcome),
            ControlFlow::Continue(ops) => ops,
        };
        let test = serde_json::json!(
            { "op": "test", "path": "/metadata/resourceVersion", "value": current.metadata.resource_version }
        );
        let patch: json_patch::Patch =
            serde_json::from_value(serde_json::Value::Array([vec![test], ops].concat()))
                .expect("test, add and remove ops");
        let patch = Patch::<()>::Json(patch);
        let params = PatchParams {
            dry_run,
            field_manager: Some(FIELD_MANAGER.to_owned()),
            ..PatchParams::default()
        };
        match retry::send("patch serviceaccount", || api.patch(name, &params, &patch)).await {
            Ok(_) if dry_run => return Ok(outcomes.would_patch),
            Ok(_) => return Ok(outcomes.patched),
            Err(RequestError::Api(s)) if s.is_invalid() || s.is_conflict() => {}
            Err(RequestError::Api(s)) if s.is_not_found() => return Ok(outcomes.missing),
            Err(e) => return Err(fail("patch", e)),
        }
    }
    Err(AccountError::Contended {
        account: name.to_owned(),
    })
}
