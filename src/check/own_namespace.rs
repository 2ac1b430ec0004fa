//! Self-hosting from ECR (docs/src/install/image.md): ecr-refresh's own pods pull its image
//! with the Secret it writes, in the install's own namespace. That holds only while the runs
//! write the Secret there: where the namespace is not selected, the Secret the bootstrap wrote
//! expires 12 hours later and the CronJob's next pod can't pull. A check says so.
//!
//! The install's namespace is ECR_REFRESH_INSTALL's `<namespace>/<serviceaccount>`, or else
//! the namespace of the ServiceAccount the check's pod runs as. With neither (a check from a
//! laptop without ECR_REFRESH_INSTALL, or one naming a user) nothing is read. Where the run
//! visited the namespace it is selected, and checked as any other; otherwise one LIST of its
//! pods (every phase: the CronJob's pods are mostly finished) and one GET of the install's
//! ServiceAccount.

use k8s_openapi::api::core::v1::{Pod, ServiceAccount};
use kube::Api;
use kube::api::ListParams;
use tracing::info;

use super::findings::{Finding, Group};
use crate::cluster::names::{NamespaceName, ServiceAccountName};
use crate::cluster::retry;
use crate::cluster::selection::Selection;
use crate::pods::{account_references, ecr_images, owner, references_directly};
use crate::pull_secret::install::Install;

/// The install's namespace and ServiceAccount.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Own {
    pub namespace: String,
    pub service_account: String,
}

impl Own {
    /// ECR_REFRESH_INSTALL when it is `<namespace>/<serviceaccount>`, else the pod's own.
    pub(super) fn of(configured: Option<&Install>) -> Option<Self> {
        configured
            .and_then(Self::parse)
            .or_else(|| Install::in_cluster().as_ref().and_then(Self::parse))
    }

    fn parse(install: &Install) -> Option<Self> {
        let (namespace, account) = install.as_str().split_once('/')?;
        namespace.parse::<NamespaceName>().ok()?;
        account.parse::<ServiceAccountName>().ok()?;
        Some(Self {
            namespace: namespace.to_owned(),
            service_account: account.to_owned(),
        })
    }
}

/// What a check found in the install's namespace, which the run did not select.
pub(super) struct Unselected {
    pub finding: Finding,
    /// Its pods that pull from ECR.
    pub ecr_pods: usize,
}

/// The finding for the install's namespace, which the run did not select: a pod there, or
/// the install's ServiceAccount, lists the Secret. None: neither does, or they could not be
/// read (logged).
pub(super) async fn unselected(
    client: &kube::Client,
    own: &Own,
    selection: &Selection,
    secret: &str,
) -> Option<Unselected> {
    let namespace = own.namespace.as_str();
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), namespace);
    let params = ListParams::default();
    let listed = retry::send("list pods", || pods.list(&params)).await;
    let account = retry::send("get serviceaccount", || {
        accounts.get_opt(&own.service_account)
    })
    .await;
    let mut ecr_pods = 0;
    let by_pods = match listed {
        Ok(list) => {
            ecr_pods = list
                .items
                .iter()
                .filter(|p| !ecr_images(p).is_empty())
                .count();
            pods_listing(&list.items, secret)
        }
        Err(e) => {
            info!(%namespace, error = %e, "this install's own namespace is not selected and its pods could not be read: \
                whether they pull ecr-refresh's image with the Secret is not checked");
            None
        }
    };
    let by_account = match account {
        Ok(sa) => sa
            .filter(|sa| account_references(sa, secret))
            .map(|_| format!("ServiceAccount {}", own.service_account)),
        Err(e) => {
            info!(%namespace, service_account = own.service_account, error = %e,
                "this install's own namespace is not selected and its ServiceAccount could not be read");
            None
        }
    };
    let listed_by = by_pods.or(by_account)?;
    let finding = Finding::OwnNamespaceNotSelected(format!(
        "{listed_by} lists {secret} in imagePullSecrets in {namespace}, this install's own namespace \
         ({}/{}), which this configuration does not select: no run writes the Secret there, so its \
         token expires and the CronJob's next pods can't pull ecr-refresh's own image; {}",
        own.namespace,
        own.service_account,
        fix(selection, namespace)
    ));
    Some(Unselected { finding, ecr_pods })
}

/// The first pod listing the Secret, with its controller and how many of its pods do.
fn pods_listing(pods: &[Pod], secret: &str) -> Option<String> {
    let listing: Vec<&Pod> = pods
        .iter()
        .filter(|p| references_directly(p, secret))
        .collect();
    let first = listing.first()?;
    let first_owner = owner(first);
    let group = Group {
        count: listing.iter().filter(|p| owner(p) == first_owner).count(),
        owner: first_owner,
        example: first.metadata.name.clone().unwrap_or_default(),
    };
    Some(group.to_string())
}

/// What selects the namespace.
fn fix(selection: &Selection, namespace: &str) -> String {
    let included = Selection {
        exclude: Vec::new(),
        ..selection.clone()
    }
    .matches(namespace);
    if !included {
        format!(
            "add {namespace} to ECR_REFRESH_NAMESPACES (the chart's value `namespaces`), \
             or run the install in a selected namespace"
        )
    } else if !selection.matches(namespace) {
        "take it out of ECR_REFRESH_EXCLUDE_NAMESPACES (the chart's `excludeNamespaces`)".to_owned()
    } else {
        format!(
            "give {namespace} the labels of ECR_REFRESH_NAMESPACE_SELECTOR, or add it to ECR_REFRESH_NAMESPACES"
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_install_is_a_namespace_and_a_service_account_or_not_one() {
        let own = |s: &str| Own::parse(&s.parse().unwrap());
        assert_eq!(
            own("ecr-refresh/ecr-refresh"),
            Some(Own {
                namespace: "ecr-refresh".into(),
                service_account: "ecr-refresh".into()
            })
        );
        for not_one in [
            "alice@example.com",
            "arn:aws:sts::111111111111:assumed-role/Admin/alice",
            "Team/ecr-refresh",
            "team-a/ecr-refresh/extra",
            "kubernetes-admin",
        ] {
            assert_eq!(own(not_one), None, "{not_one}");
        }
    }
}
