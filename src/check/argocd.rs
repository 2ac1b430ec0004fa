//! The Argo CD Secrets (ECR_REFRESH_ARGOCD_NAMESPACE) in a check: each read (a GET) and judged
//! as a refresh would, and its expiry reported as a pull Secret's is. Nothing is written.

use std::time::SystemTime;

use k8s_openapi::api::core::v1::Secret;
use kube::{Api, Client};
use tracing::{info, warn};

use crate::argocd::secret::{self, ArgoError};
use crate::argocd::{ArgoCd, Target};
use crate::check::Finding;
use crate::check::findings::due_finding;
use crate::owned;
use crate::pull_secret::due::{self, Policy};

/// One Argo CD Secret's findings: empty when Argo CD can log in with it until the next run.
pub(super) async fn check(
    client: &Client,
    argocd: &ArgoCd,
    policy: &Policy<'_>,
) -> Vec<(String, Vec<Finding>)> {
    let namespace = argocd.namespace.as_str();
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let mut checked = Vec::new();
    for target in &argocd.targets {
        let secret = target.name.as_str();
        let (findings, expires_at) = match owned::read::<ArgoError>(&api, secret).await {
            Ok(current) => judge(current.as_ref(), target, argocd, policy, SystemTime::now()),
            Err(e) => (vec![Finding::CheckFailed(e.to_string())], None),
        };
        let kinds: Vec<&str> = findings.iter().map(Finding::kind).collect();
        let detail: Vec<String> = findings.iter().map(ToString::to_string).collect();
        let expires_at = expires_at.as_deref();
        if findings.is_empty() {
            info!(
                namespace,
                secret,
                argocd = true,
                registry = target.registry.host(),
                expires_at,
                outcome = "ok",
                "Argo CD Secret ok"
            );
        } else {
            warn!(namespace, secret, argocd = true, registry = target.registry.host(), expires_at, finding_kinds = %kinds.join(","), findings = %detail.join("; "), outcome = "findings", "Argo CD Secret has findings");
        }
        checked.push((secret.to_owned(), findings));
    }
    checked
}

/// The findings, and the recorded expiry (RFC 3339) when there is one.
fn judge(
    current: Option<&Secret>,
    target: &Target,
    argocd: &ArgoCd,
    policy: &Policy<'_>,
    now: SystemTime,
) -> (Vec<Finding>, Option<String>) {
    let Some(current) = current else {
        return (vec![Finding::SecretMissing], None);
    };
    let expires_at =
        due::recorded_expiry(current).map(|at| humantime::format_rfc3339_seconds(at).to_string());
    if let Err(e) = secret::can_write(current, target.kind) {
        return (
            vec![Finding::NotWritable(ArgoError::from(e).to_string())],
            expires_at,
        );
    }
    let reasons = secret::reasons(
        Some(current),
        target,
        argocd.repo_type,
        argocd.project.as_ref(),
        policy,
        now,
    );
    let findings = reasons
        .iter()
        .filter_map(|reason| due_finding(reason, policy, now))
        .collect();
    (findings, expires_at)
}
