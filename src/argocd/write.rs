//! Writing one Argo CD Secret in place, as the pull Secret is written (`pull_secret::write`):
//! server-side apply with our field manager, pinned to the uid and resourceVersion read; a
//! create is a POST, which never overwrites; never a delete. What others put in it (keys,
//! labels, annotations) stays: an apply only touches the fields its manager sends.

use std::time::SystemTime;

use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use tracing::debug;

use crate::argocd::secret::{self, Desired, NotOurs};
use crate::argocd::{RepoType, Target};
use crate::cluster::names::ProjectName;
use crate::cluster::retry::{self, RequestError};
use crate::pull_secret::FIELD_MANAGER;
use crate::pull_secret::due::Policy;
use crate::pull_secret::write::{
    Read, SkipReason, Written, is_namespace_not_found, is_namespace_terminating, is_uid_field,
};
use crate::report::Outcome;

/// Reads, conflicts and deletions survived before the Secret is given up.
const ATTEMPTS: usize = 5;

#[derive(Debug, thiserror::Error)]
pub enum ArgoError {
    #[error(transparent)]
    NotOurs(#[from] NotOurs),
    #[error("the Argo CD namespace does not exist: create it, or fix ECR_REFRESH_ARGOCD_NAMESPACE")]
    NoNamespace,
    #[error(
        "forbidden to {action} the Argo CD Secret: {source}; grant ecr-refresh's ServiceAccount create, and get \
         and patch on this Secret's name, in the Argo CD namespace (the chart's argocd.namespace, or the \
         kustomize component components/argocd: a ClusterRole and ClusterRoleBinding ecr-refresh-argocd, \
         whose binding names this ServiceAccount; a Role of an earlier components/argocd is moved out of \
         the Argo CD namespace by an overlay's namespace: and grants nothing there)"
    )]
    Forbidden {
        action: &'static str,
        source: RequestError,
    },
    #[error("could not {action} the Argo CD Secret: {source}")]
    Request {
        action: &'static str,
        source: RequestError,
    },
    #[error(
        "the Argo CD Secret kept changing under us: gave up after {ATTEMPTS} attempts; the next run tries again"
    )]
    Contended,
}

impl ArgoError {
    fn request(action: &'static str, source: RequestError) -> Self {
        if source.code() == Some(403) {
            Self::Forbidden { action, source }
        } else {
            Self::Request { action, source }
        }
    }
}

/// Reads the Secret (None: there is none).
pub async fn get(api: &Api<Secret>, target: &Target) -> Result<Option<Secret>, ArgoError> {
    retry::send("get secret", || api.get_opt(target.name.as_str()))
        .await
        .map_err(|e| ArgoError::request("read", e))
}

/// Decides whether the Secret as read is due; one no write could fix fails here, before any
/// token is fetched for it.
pub fn judge(
    current: Option<Secret>,
    target: &Target,
    repo_type: RepoType,
    project: Option<&ProjectName>,
    policy: &Policy<'_>,
    now: SystemTime,
) -> Result<Read, ArgoError> {
    if let Some(current) = &current {
        secret::can_write(current, target.kind)?;
    }
    let decision = secret::decide(current.as_ref(), target, repo_type, project, policy, now);
    Ok(Read { current, decision })
}

/// Writes the Secret, starting from `first`, what `get` found: no second read unless a write
/// is refused for a change meanwhile.
pub async fn write(
    api: &Api<Secret>,
    desired: &Desired<'_>,
    first: Option<Secret>,
) -> Result<Written, ArgoError> {
    let name = desired.target.name.as_str();
    let mut deleted_uid: Option<String> = None;
    // What our create sent, when its answer may have been lost (an earlier attempt of the POST
    // failed): a Secret found holding exactly that is the one this run created.
    let mut maybe_ours = None;
    let created =
        |uid, deleted_uid| Written::created(desired.dry_run, uid, deleted_uid, desired.expiry);
    let mut read = Some(first);
    for _ in 0..ATTEMPTS {
        let current = match read.take() {
            Some(current) => current,
            None => retry::send("get secret", || api.get_opt(name))
                .await
                .map_err(|e| ArgoError::request("read", e))?,
        };
        let Some(current) = current else {
            let params = PostParams {
                dry_run: desired.dry_run,
                field_manager: Some(FIELD_MANAGER.to_owned()),
            };
            let body = secret::body(desired, None, None);
            let mut tries = 0;
            let sent = retry::send("create secret", || {
                tries += 1;
                api.create(&params, &body)
            })
            .await;
            match sent {
                Ok(made) => return Ok(created(made.metadata.uid, deleted_uid)),
                // Appeared since our read: read it, and apply over it, unless it is what our
                // own earlier attempt stored.
                Err(RequestError::Api(s)) if s.is_already_exists() => {
                    maybe_ours = (tries > 1).then(|| body.data.clone());
                    continue;
                }
                // A namespace being deleted takes its Secrets with it: nothing to write.
                Err(RequestError::Api(s)) if is_namespace_terminating(&s) => {
                    return Ok(Written::skipped(SkipReason::NamespaceTerminating));
                }
                Err(RequestError::Api(s)) if is_namespace_not_found(&s) => {
                    return Err(ArgoError::NoNamespace);
                }
                Err(e) => return Err(ArgoError::request("create", e)),
            }
        };
        if let Some(sent) = maybe_ours.take()
            && current.data == sent
        {
            // The password in it is this run's: no one else could have written it.
            debug!(
                secret = name,
                "our create's answer was lost; the Argo CD Secret found is the one it created"
            );
            return Ok(created(current.metadata.uid, deleted_uid));
        }
        secret::can_write(&current, desired.target.kind)?;
        let uid = current.metadata.uid.clone();
        let body = secret::body(
            desired,
            uid.clone(),
            current.metadata.resource_version.clone(),
        );
        let mut params = PatchParams::apply(FIELD_MANAGER).force();
        params.dry_run = desired.dry_run;
        let patch = Patch::Apply(&body);
        match retry::send("apply secret", || api.patch(name, &params, &patch)).await {
            Ok(applied) => {
                let outcome = if desired.dry_run {
                    Outcome::WouldUpdate
                } else {
                    Outcome::Updated
                };
                return Ok(Written {
                    expires_at: desired.expiry,
                    ..Written::new(outcome, uid, applied.metadata.uid)
                });
            }
            Err(RequestError::Api(s)) if s.is_conflict() && s.message.contains("uid mismatch") => {
                debug!(
                    secret = name,
                    uid = uid.as_deref().unwrap_or("-"),
                    "Argo CD Secret deleted between our read and our apply"
                );
                deleted_uid = uid;
            }
            Err(RequestError::Api(s))
                if s.is_conflict() || (s.is_invalid() && is_uid_field(&s)) =>
            {
                debug!(
                    secret = name,
                    "Argo CD Secret changed between our read and our apply; reading it again"
                );
            }
            Err(e) => return Err(ArgoError::request("apply", e)),
        }
    }
    Err(ArgoError::Contended)
}
