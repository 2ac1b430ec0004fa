//! The Argo CD Secrets (ECR_REFRESH_ARGOCD_NAMESPACE), after the namespaces: each is read and
//! judged as a pull Secret is, and written from the run's tokens only when it is due. A run
//! where nothing is due asks ECR nothing for them either.

use std::collections::BTreeSet;
use std::str::FromStr;
use std::sync::Arc;
use std::time::SystemTime;

use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use tracing::{Level, info};

use super::report::Report;
use crate::argocd::secret::{self, ArgoError, Desired};
use crate::argocd::{self as argo, ArgoCd, Target};
use crate::aws::registry::RegistryHost;
use crate::owned::{self, Settled, SkipReason};
use crate::pull_secret::due::Judged;
use crate::report::Outcome;

use super::Shared;
use super::lines::{log_failed, log_left_undone};
use super::secret::{Kind, NotRefreshed, Seen};
use super::tokens::{Fetched, TokenError};

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
        let registry = Some(target.registry.host());
        if let Some(reason) = shared.stop.reason() {
            log_left_undone(namespace, secret, registry, reason);
            report.record_argocd(secret, Outcome::Failed);
            continue;
        }
        match refresh_one(shared, argocd, &api, target).await {
            Ok(settled) => {
                log_settled(namespace, target, argocd, &settled);
                report.record_argocd(secret, settled.outcome);
            }
            Err(NotRefreshed::Tokens(e)) => return Err(e),
            Err(NotRefreshed::Failed(e, _)) => {
                log_failed(namespace, secret, registry, &e);
                report.record_argocd(secret, Outcome::Failed);
            }
        }
    }
    log_left_alone(shared, argocd, dropped);
    Ok(())
}

/// An Argo CD Secret, as one kind of Secret a refresh writes.
struct ArgoSecret<'s> {
    shared: &'s Shared<'s>,
    argocd: &'s ArgoCd,
    api: &'s Api<Secret>,
    target: &'s Target,
}

impl Kind for ArgoSecret<'_> {
    type Error = ArgoError;

    async fn judge(&mut self, current: Option<Secret>) -> Result<Judged, ArgoError> {
        let argocd = self.argocd;
        let (repo_type, project) = (argocd.repo_type, argocd.project.as_ref());
        let now = SystemTime::now();
        secret::judge(
            current,
            self.target,
            repo_type,
            project,
            &self.shared.policy,
            now,
        )
    }

    async fn write(
        &mut self,
        fetched: &Fetched,
        current: Option<Secret>,
    ) -> Result<Settled, ArgoError> {
        let token = fetched
            .tokens
            .0
            .iter()
            .find(|t| t.registries.contains(&self.target.registry))
            .expect("every configured registry has its token");
        let expiry = SystemTime::try_from(token.expires_at).ok();
        let desired = Desired {
            target: self.target,
            repo_type: self.argocd.repo_type,
            project: self.argocd.project.as_ref(),
            password: &token.password,
            expires_at: expiry
                .map(|at| humantime::format_rfc3339_seconds(at).to_string())
                .unwrap_or_else(|| fetched.expires_at.clone()),
            expiry: expiry.map(super::tokens::whole_seconds),
            dry_run: self.shared.config.dry_run,
        };
        let namespace = self.argocd.namespace.as_str();
        owned::write(self.api, namespace, &desired, current).await
    }
}

/// Reads the Secret, then refreshes it.
async fn refresh_one(
    shared: &Shared<'_>,
    argocd: &ArgoCd,
    api: &Api<Secret>,
    target: &Target,
) -> Result<Settled, NotRefreshed<ArgoError>> {
    let current = owned::read(api, target.name.as_str())
        .await
        .map_err(|e| NotRefreshed::Failed(e, Seen::default()))?;
    let mut argo_secret = ArgoSecret {
        shared,
        argocd,
        api,
        target,
    };
    super::secret::refresh(&mut argo_secret, shared.tokens, current).await
}

/// One line per Argo CD Secret, as for a namespace: the uid before and after says it was
/// written in place.
fn log_settled(namespace: &str, target: &Target, argocd: &ArgoCd, w: &Settled) {
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
