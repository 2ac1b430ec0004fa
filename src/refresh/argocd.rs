//! The Argo CD Secrets (ECR_REFRESH_ARGOCD_NAMESPACE), after the namespaces: each is read and
//! judged as a pull Secret is, and written from the run's tokens only when it is due. A run
//! where nothing is due asks ECR nothing for them either.

use std::collections::BTreeSet;
use std::str::FromStr;
use std::sync::Arc;
use std::time::SystemTime;

use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use tracing::{Level, error, info};

use super::report::Report;
use crate::argocd::secret::Desired;
use crate::argocd::write::{self, ArgoError};
use crate::argocd::{self as argo, ArgoCd, Target};
use crate::aws::registry::RegistryHost;
use crate::pull_secret::due::Decision;
use crate::pull_secret::write::{SkipReason, Written};
use crate::report::Outcome;

use super::Shared;
use super::tokens::TokenError;

enum NotDone {
    Failed(ArgoError),
    Tokens(Arc<TokenError>),
}

/// Every Argo CD Secret, one after the other (a handful: one per private registry), then a
/// line for each registry this run dropped from the pull Secrets (`dropped`) whose Argo CD
/// Secret is left.
pub(super) async fn refresh(
    shared: &Shared<'_>,
    argocd: &ArgoCd,
    report: &mut Report,
    dropped: &BTreeSet<String>,
) -> Result<(), Arc<TokenError>> {
    let namespace = argocd.namespace.as_str();
    let api: Api<Secret> = Api::namespaced(shared.client.clone(), namespace);
    for target in &argocd.targets {
        let secret = target.name.as_str();
        if let Some(reason) = shared.stop.reason() {
            let error = format!("left undone: {reason}; the next run covers it");
            error!(namespace, secret, argocd = true, outcome = Outcome::Failed.as_str(), uid_before = "-", uid_after = "-", %error, "Argo CD Secret failed");
            report.record_argocd(secret, Outcome::Failed);
            continue;
        }
        match one(shared, argocd, &api, target).await {
            Ok(written) => {
                log_written(namespace, target, argocd, &written);
                report.record_argocd(secret, written.outcome);
            }
            Err(NotDone::Tokens(e)) => return Err(e),
            Err(NotDone::Failed(e)) => {
                error!(namespace, secret, argocd = true, registry = target.registry.host(), outcome = Outcome::Failed.as_str(), uid_before = "-", uid_after = "-", error = %e, "Argo CD Secret failed");
                report.record_argocd(secret, Outcome::Failed);
            }
        }
    }
    log_left_alone(shared, argocd, dropped);
    Ok(())
}

/// Reads the Secret; if it is due, gets the tokens and writes it.
async fn one(
    shared: &Shared<'_>,
    argocd: &ArgoCd,
    api: &Api<Secret>,
    target: &Target,
) -> Result<Written, NotDone> {
    let config = shared.config;
    let current = write::get(api, target).await.map_err(NotDone::Failed)?;
    let uid = current.as_ref().and_then(|s| s.metadata.uid.clone());
    let read = write::judge(
        current,
        target,
        argocd.repo_type,
        argocd.project.as_ref(),
        &shared.policy,
        SystemTime::now(),
    )
    .map_err(NotDone::Failed)?;
    let due = match read.decision {
        Decision::Fresh { expires_at, due_at } => {
            return Ok(Written::fresh(uid, expires_at, due_at));
        }
        Decision::Due(due) => due,
    };
    let fetched = shared.tokens.get().await.map_err(NotDone::Tokens)?;
    let token = fetched
        .tokens
        .0
        .iter()
        .find(|t| t.registries.contains(&target.registry))
        .expect("every configured registry has its token");
    let expiry = SystemTime::try_from(token.expires_at).ok();
    let desired = Desired {
        target,
        repo_type: argocd.repo_type,
        project: argocd.project.as_ref(),
        password: &token.password,
        expires_at: expiry
            .map(|at| humantime::format_rfc3339_seconds(at).to_string())
            .unwrap_or_else(|| fetched.expires_at.clone()),
        expiry: expiry.map(super::tokens::whole_seconds),
        dry_run: config.dry_run,
    };
    let mut written = write::write(api, &desired, read.current)
        .await
        .map_err(NotDone::Failed)?;
    written.due = Some(due.to_string());
    Ok(written)
}

/// One line per Argo CD Secret, as for a namespace: the uid before and after says it was
/// written in place.
fn log_written(namespace: &str, target: &Target, argocd: &ArgoCd, w: &Written) {
    let secret = target.name.as_str();
    let registry = target.registry.host();
    let repo_type = argocd.repo_type.as_str();
    let uid_before = w.uid_before.as_deref().unwrap_or("-");
    let uid_after = w.uid_after.as_deref().unwrap_or("-");
    let outcome = w.outcome.as_str();
    let message = match w.outcome {
        Outcome::Created => "Argo CD Secret created",
        Outcome::Updated => "Argo CD Secret updated in place",
        Outcome::Recreated => {
            "Argo CD Secret was deleted during the run; created it fresh with the new token"
        }
        Outcome::WouldCreate => "dry run: Argo CD Secret would be created",
        Outcome::WouldUpdate => "dry run: Argo CD Secret would be updated in place",
        Outcome::Fresh => "Argo CD Secret is fresh: not due, not written",
        Outcome::Skipped | Outcome::Failed => "Argo CD Secret not written",
    };
    let reason = w.reason.map(SkipReason::as_str);
    let rfc3339 =
        |t: Option<SystemTime>| t.map(|t| humantime::format_rfc3339_seconds(t).to_string());
    let (expires_at, due_at) = (rfc3339(w.expires_at), rfc3339(w.due_at));
    let (expires_at, due_at, due) = (expires_at.as_deref(), due_at.as_deref(), w.due.as_deref());
    tracing::event!(
        Level::INFO,
        namespace,
        secret,
        argocd = true,
        registry,
        repo_type,
        outcome,
        uid_before,
        uid_after,
        reason,
        due,
        expires_at,
        due_at,
        "{message}"
    );
}

/// A registry this run removed from the pull Secrets (no longer configured) keeps its Argo
/// CD Secret: ecr-refresh never deletes, and Applications may still name it. Said once per
/// Secret, with what to do.
fn log_left_alone(shared: &Shared<'_>, argocd: &ArgoCd, dropped: &BTreeSet<String>) {
    let namespace = argocd.namespace.as_str();
    let mut said = BTreeSet::new();
    for host in dropped {
        let Ok(registry) = RegistryHost::from_str(host) else {
            continue;
        };
        let secret_name = &shared.config.secret_name;
        let names = [
            argo::secret_name(secret_name, &registry),
            argo::repository_name(secret_name, &registry),
        ];
        for name in names.into_iter().flatten() {
            if argocd.targets.iter().any(|t| t.name.as_str() == name) || !said.insert(name.clone())
            {
                continue;
            }
            info!(
                namespace,
                secret = name.as_str(),
                argocd = true,
                registry = host.as_str(),
                "registry no longer configured: its Argo CD Secret is left alone (never deleted), and its \
                 token expires; delete it yourself once no Application uses it"
            );
        }
    }
}
