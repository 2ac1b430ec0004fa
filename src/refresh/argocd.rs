//! The Argo CD Secrets (ECR_REFRESH_ARGOCD_NAMESPACE), after the namespaces: each is read and
//! judged as a pull Secret is, and written from the run's tokens only when it is due. A run
//! where nothing is due asks ECR nothing for them either.

use std::collections::BTreeSet;
use std::str::FromStr;
use std::sync::Arc;
use std::time::SystemTime;

use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use tracing::info;

use super::report::Report;
use crate::argocd::secret::{self as argo_secret, ArgoError, Desired};
use crate::argocd::{self as argo, ArgoCd, Target};
use crate::aws::registry::RegistryHost;
use crate::cluster::reads::Read;
use crate::owned::{self, Settled};
use crate::pull_secret::due::Judged;
use crate::report::Outcome;

use super::Shared;
use super::lines::{ArgoCdFields, log_failed, log_left_undone, log_written};
use super::secret::{self, NotRefreshed, SecretKind};
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
        let mut kind = ArgoSecret {
            shared,
            argocd,
            api: &api,
            target,
        };
        match secret::refresh(&mut kind, shared.tokens, &api, secret, Read::ByName).await {
            Ok(settled) => {
                let fields = ArgoCdFields {
                    registry: target.registry.host(),
                    repo_type: argocd.repo_type.as_str(),
                };
                log_written(namespace, secret, Some(fields), &settled, "", "");
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

impl SecretKind for ArgoSecret<'_> {
    type Error = ArgoError;

    async fn judge(&mut self, current: Option<Secret>) -> Result<Judged, ArgoError> {
        let (target, policy) = (self.target, &self.shared.policy);
        argo_secret::judge(current, target, self.argocd, policy, SystemTime::now())
    }

    async fn write(
        &mut self,
        fetched: &Fetched,
        current: Option<Secret>,
    ) -> Result<Settled, ArgoError> {
        let token = fetched
            .tokens
            .regions
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
