//! The pods of a namespace that pull from ECR, and what stands between them and a pull,
//! as findings. Whether a pod is stuck, wired, or would be recovered by an eviction is decided
//! in `crate::pods`, shared with the eviction.

use std::collections::{BTreeMap, HashMap};

use k8s_openapi::api::core::v1::Pod;

use super::findings::{Finding, Group, SecretState};
pub(super) use crate::pods::{
    Account, EcrImage, Managed, Recovery, RecoveryContext, ecr_images, not_wired, owner, recovery,
    service_account, stuck,
};

/// Everything a namespace's pods are held against.
pub(super) struct Context<'a> {
    pub secret_name: &'a str,
    pub secret: &'a SecretState,
    pub managed: &'a Managed,
    pub accounts: &'a HashMap<String, Account>,
    /// Login findings by registry host (only hosts whose login was tried and failed).
    pub logins: &'a BTreeMap<String, Finding>,
}

/// The pods' findings, those of one controller merged into one with a count.
pub(super) fn pod_findings(pods: &[Pod], cx: &Context<'_>) -> Vec<Finding> {
    let mut found = Vec::new();
    for pod in pods {
        let images = ecr_images(pod);
        if images.is_empty() {
            continue;
        }
        let group = Group {
            owner: owner(pod),
            example: pod.metadata.name.clone().unwrap_or_default(),
            count: 1,
        };
        for image in &images {
            if !cx.managed.covers(&image.host) {
                found.push(Finding::NotCovered {
                    host: image.host.host().to_owned(),
                    pods: group.clone(),
                    hint: cx.managed.hint(&image.host),
                });
            }
        }
        let account = service_account(pod);
        let not_wired = not_wired(pod, cx.secret_name, cx.accounts);
        if let Some(why) = &not_wired {
            found.push(Finding::NotWired {
                pods: group.clone(),
                service_account: account.to_owned(),
                why: why.clone(),
            });
        }
        let recovers = matches!(
            recovery(
                pod,
                &RecoveryContext {
                    secret_name: cx.secret_name,
                    managed: cx.managed,
                    accounts: cx.accounts,
                },
            ),
            Some(Recovery::Evict { .. })
        );
        for (container, reason, message) in stuck(pod) {
            let Some(image) = images.iter().find(|i| i.container == container) else {
                continue;
            };
            let mut explained_by = explain(image, not_wired.is_some(), cx, &message);
            if recovers {
                explained_by.push_str(
                    "; ECR_REFRESH_EVICT_STUCK_PODS=true would recover it (a refresh evicts it, \
                     and its controller recreates it with the Secret)",
                );
            }
            found.push(Finding::PullStuck {
                pods: group.clone(),
                reason,
                image: image.image.clone(),
                explained_by,
            });
        }
    }
    merge(found)
}

/// Which findings explain a stuck pull of `image`, or "none of the above" with the kubelet's
/// message.
fn explain(image: &EcrImage, not_wired: bool, cx: &Context<'_>, message: &str) -> String {
    let host = image.host.host();
    let mut causes: Vec<String> = cx
        .secret
        .findings
        .iter()
        .filter(|f| f.may_block_our_pulls() || matches!(f, Finding::NoEntry(h) if h == host))
        .map(Finding::kind)
        .map(str::to_owned)
        .collect();
    if !cx.managed.covers(&image.host) {
        causes.push("registry-not-covered".into());
    }
    if not_wired {
        causes.push("not-wired".into());
    }
    if let Some(login) = cx.logins.get(host) {
        causes.push(login.kind().into());
    }
    if causes.is_empty() {
        let message: String = message.chars().take(300).collect();
        format!("explained by none of the above (the kubelet says: {message})")
    } else {
        format!("explained by {}", causes.join(", "))
    }
}

/// One finding per controller: the same finding for pods of one owner becomes one with a count.
fn merge(found: Vec<Finding>) -> Vec<Finding> {
    let mut merged: BTreeMap<Finding, Finding> = BTreeMap::new();
    for finding in found {
        let mut key = finding.clone();
        if let Some(group) = group_mut(&mut key) {
            group.example.clear();
            group.count = 0;
        }
        merged
            .entry(key)
            .and_modify(|kept| {
                if let Some(group) = group_mut(kept) {
                    group.count += 1;
                }
            })
            .or_insert(finding);
    }
    merged.into_values().collect()
}

fn group_mut(finding: &mut Finding) -> Option<&mut Group> {
    match finding {
        Finding::NotCovered { pods, .. }
        | Finding::NotWired { pods, .. }
        | Finding::PullStuck { pods, .. } => Some(pods),
        _ => None,
    }
}
