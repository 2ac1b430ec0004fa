//! What a pod pulls, and with what: the one place that says whether a pod is stuck on a pull,
//! whether it is wired to the Secret, and whether evicting it would let it pull. `check`
//! reports these (src/check/pods.rs); the eviction acts on them (src/evict/).
//!
//! Pure functions of the pods, the Secret as read and the ServiceAccounts: no request here.

mod recovery;

use std::collections::{BTreeSet, HashMap};
use std::str::FromStr;

use k8s_openapi::api::core::v1::{ContainerStatus, Pod, Secret, ServiceAccount};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

use crate::aws::registry::RegistryHost;
use crate::pull_secret::{own_recorded, own_written, recorded_hosts};
pub use recovery::{Recovery, RecoveryContext, recovery};

/// The waiting reasons of a container whose image could not be pulled (kubelet's
/// pkg/kubelet/images: ErrImagePull, then ImagePullBackOff while it backs off).
pub const PULL_REASONS: &[&str] = &["ErrImagePull", "ImagePullBackOff"];

/// The hosts a check holds a pod's images against: those the refresh writes.
#[derive(Debug, Clone)]
pub struct Managed {
    /// Exact hosts, dual-stack twins included when they are written.
    pub hosts: Vec<String>,
    /// ECR_REFRESH_REGISTRIES empty and no host recorded yet: any private registry in this
    /// region may be the caller's own.
    pub any_in_region: Option<String>,
    pub dual_stack: bool,
}

impl Managed {
    /// The hosts the refresh writes: `written`, the configured registries with their twins
    /// (`Config::written`), or, with none configured, the caller's own as our last write
    /// recorded it in `secret` (any private registry in `region` while none is recorded), with
    /// its twin under `dual_stack`.
    pub fn of(
        written: &[RegistryHost],
        dual_stack: bool,
        region: Option<&str>,
        secret: Option<&Secret>,
    ) -> Self {
        let mut any_in_region = None;
        let hosts = if written.is_empty() {
            // The caller's own registry: the account is only known from our last write.
            let recorded = secret.map(recorded_hosts).unwrap_or_default();
            let own = own_recorded(&recorded, region);
            if own.is_empty() {
                any_in_region = region.map(str::to_owned);
            }
            own_written(own, dual_stack)
        } else {
            written.to_vec()
        };
        Self {
            hosts: hosts.iter().map(|h| h.host().to_owned()).collect(),
            any_in_region,
            dual_stack,
        }
    }

    pub fn covers(&self, host: &RegistryHost) -> bool {
        self.hosts.iter().any(|h| h == host.host())
            || self.any_in_region.as_deref().is_some_and(|region| {
                !host.is_public() && host.region() == region && !host.is_dual_stack()
            })
    }

    /// What to do about a host not covered.
    pub fn hint(&self, host: &RegistryHost) -> String {
        let sibling = self.hosts.iter().any(|h| {
            RegistryHost::from_str(h).is_ok_and(|h| {
                !h.is_dual_stack()
                    && h.account() == host.account()
                    && h.region() == host.region()
                    && h.is_public() == host.is_public()
            })
        });
        if host.is_dual_stack() && sibling && !self.dual_stack {
            "; its IPv4 host is managed but ECR_REFRESH_DUAL_STACK is off: set it to true".into()
        } else {
            "; add it to ECR_REFRESH_REGISTRIES".into()
        }
    }
}

/// The registry host of an image reference, as the container runtime reads it: the first
/// path component when it holds a `.` or a `:` or is `localhost`; else Docker Hub.
pub fn image_host(image: &str) -> Option<&str> {
    let (first, rest) = image.split_once('/')?;
    (!rest.is_empty() && (first.contains('.') || first.contains(':') || first == "localhost"))
        .then_some(first)
}

/// One container's image on an ECR host.
#[derive(Debug, Clone)]
pub struct EcrImage {
    pub container: String,
    pub image: String,
    pub host: RegistryHost,
}

/// The images of a pod's containers, init containers and ephemeral containers on private ECR
/// hosts. An image on ECR Public (`public.ecr.aws`) is pulled anonymously whatever the pod
/// lists, so it is never a finding: it needs neither our entry nor the wiring.
pub fn ecr_images(pod: &Pod) -> Vec<EcrImage> {
    let Some(spec) = &pod.spec else {
        return Vec::new();
    };
    let named = spec
        .init_containers
        .iter()
        .flatten()
        .map(|c| (&c.name, &c.image))
        .chain(spec.containers.iter().map(|c| (&c.name, &c.image)))
        .chain(
            spec.ephemeral_containers
                .iter()
                .flatten()
                .map(|c| (&c.name, &c.image)),
        );
    named
        .filter_map(|(name, image)| {
            let image = image.as_deref()?;
            let host = RegistryHost::from_str(image_host(image)?).ok()?;
            if host.is_public() {
                return None;
            }
            Some(EcrImage {
                container: name.clone(),
                image: image.to_owned(),
                host,
            })
        })
        .collect()
}

/// The ServiceAccount a pod runs as.
pub fn service_account(pod: &Pod) -> &str {
    pod.spec
        .as_ref()
        .and_then(|s| s.service_account_name.as_deref())
        .filter(|n| !n.is_empty())
        .unwrap_or("default")
}

/// The names in the pod's own imagePullSecrets, the only list the kubelet reads.
fn own_pull_secrets(pod: &Pod) -> impl Iterator<Item = &str> {
    pod.spec
        .iter()
        .flat_map(|s| s.image_pull_secrets.iter().flatten())
        .map(|r| r.name.as_str())
}

/// Whether the pod lists the Secret in its own imagePullSecrets.
pub fn references_directly(pod: &Pod, secret: &str) -> bool {
    own_pull_secrets(pod).any(|name| name == secret)
}

/// Whether a ServiceAccount lists the Secret in its imagePullSecrets.
pub fn account_references(account: &ServiceAccount, secret: &str) -> bool {
    account
        .image_pull_secrets
        .as_ref()
        .is_some_and(|l| l.iter().any(|r| r.name == secret))
}

/// The pod's controller (`ReplicaSet/web-7d9f8`), or the pod itself.
pub fn owner(pod: &Pod) -> String {
    controller(pod)
        .map(|o| format!("{}/{}", o.kind, o.name))
        .unwrap_or_else(|| format!("Pod/{}", pod.metadata.name.as_deref().unwrap_or_default()))
}

/// The owner reference that is the pod's controller, if one is.
fn controller(pod: &Pod) -> Option<&OwnerReference> {
    pod.metadata
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true))
}

/// Containers waiting on a pull: (container, reason, the kubelet's message), ephemeral
/// containers (`kubectl debug`) included: check reports every one.
pub fn stuck(pod: &Pod) -> Vec<(String, String, String)> {
    stuck_among(pod, true)
}

/// The init and regular containers waiting on a pull: the ones a replacement pod would pull
/// again. Never an ephemeral container: a replacement has none.
pub fn stuck_in_template(pod: &Pod) -> Vec<(String, String, String)> {
    stuck_among(pod, false)
}

fn stuck_among(pod: &Pod, ephemeral: bool) -> Vec<(String, String, String)> {
    let Some(status) = &pod.status else {
        return Vec::new();
    };
    let ephemeral = status
        .ephemeral_container_statuses
        .iter()
        .flatten()
        .filter(|_| ephemeral);
    waiting_on_pull(
        status
            .init_container_statuses
            .iter()
            .flatten()
            .chain(status.container_statuses.iter().flatten())
            .chain(ephemeral),
    )
}

/// Whether every regular container of the pod runs: such a pod serves, whatever an ephemeral
/// or a sidecar container waits on.
pub fn serving(pod: &Pod) -> bool {
    let (Some(spec), Some(status)) = (&pod.spec, &pod.status) else {
        return false;
    };
    let statuses = status.container_statuses.as_deref().unwrap_or_default();
    !spec.containers.is_empty()
        && spec.containers.iter().all(|c| {
            statuses.iter().any(|s| {
                s.name == c.name && s.state.as_ref().is_some_and(|st| st.running.is_some())
            })
        })
}

fn waiting_on_pull<'a>(
    statuses: impl Iterator<Item = &'a ContainerStatus>,
) -> Vec<(String, String, String)> {
    statuses
        .filter_map(|s| {
            let waiting = s.state.as_ref()?.waiting.as_ref()?;
            let reason = waiting.reason.as_deref()?;
            PULL_REASONS.contains(&reason).then(|| {
                (
                    s.name.clone(),
                    reason.to_owned(),
                    waiting.message.clone().unwrap_or_default(),
                )
            })
        })
        .collect()
}

/// What is known of a ServiceAccount the pods run as.
#[derive(Debug, Clone)]
pub enum Account {
    /// It lists the Secret, or it does not.
    Found {
        lists_secret: bool,
    },
    Missing,
    /// Not readable (no rights, an error): the advice on a pod not wired names no account.
    Unknown,
}

impl Account {
    /// What a ServiceAccount as read (None: there is none) says of `secret`.
    pub fn read(account: Option<&ServiceAccount>, secret: &str) -> Self {
        match account {
            Some(sa) => Self::Found {
                lists_secret: account_references(sa, secret),
            },
            None => Self::Missing,
        }
    }
}

/// The ServiceAccounts whose lists decide for `pods`: those they run as, for the pods that do
/// not list `secret` themselves. Check and the evictions read exactly these.
pub fn deciding_accounts<'a>(pods: &[&'a Pod], secret: &str) -> BTreeSet<&'a str> {
    pods.iter()
        .filter(|p| !references_directly(p, secret))
        .map(|p| service_account(p))
        .collect()
}

/// Why the pod is not wired to `secret` (None: it is): the one decision of whether a pod
/// pulls with the Secret.
///
/// The kubelet reads only the pod's own `spec.imagePullSecrets` (pkg/kubelet/kubelet_pods.go
/// `getPullSecretsForPod`). A ServiceAccount's list reaches a pod once, when it is created
/// and only when it sets none (plugin/pkg/admission/serviceaccount `Admit`), so what the
/// ServiceAccount lists now decides nothing: it only shapes what to do about it.
pub fn not_wired(pod: &Pod, secret: &str, accounts: &HashMap<String, Account>) -> Option<String> {
    if references_directly(pod, secret) {
        return None;
    }
    let own: Vec<&str> = own_pull_secrets(pod).collect();
    let account = service_account(pod);
    if !own.is_empty() {
        return Some(format!(
            "the pod lists its own imagePullSecrets [{}] without {secret}, and the kubelet reads \
             only those (a ServiceAccount's list never reaches a pod that sets its own): add \
             {secret} to the imagePullSecrets of its owner's pod template, then recreate the pods",
            own.join(", ")
        ));
    }
    Some(match accounts.get(account) {
        Some(Account::Found { lists_secret: true }) => format!(
            "the pod lists no imagePullSecrets: it was created before its ServiceAccount listed \
             {secret}, and the kubelet reads only the pod's own list; recreate the pods (e.g. \
             kubectl rollout restart of the owner)"
        ),
        Some(Account::Found {
            lists_secret: false,
        }) => format!(
            "neither the pod nor its ServiceAccount lists {secret} in imagePullSecrets: add it to \
             the ServiceAccount (ECR_REFRESH_SERVICE_ACCOUNTS) or to the owner's pod template, then \
             recreate the pods"
        ),
        Some(Account::Missing) => format!(
            "the pod does not list {secret} in imagePullSecrets, and its ServiceAccount does not \
             exist: list {secret} in the owner's pod template, then recreate the pods"
        ),
        Some(Account::Unknown) | None => format!(
            "the pod does not list {secret} in its own imagePullSecrets, the only list the kubelet \
             reads: list it in the owner's pod template (or in the ServiceAccount's, for pods \
             created after), then recreate the pods"
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_host_of_an_image_is_read_as_the_runtime_reads_it() {
        let cases = [
            (
                "123456789012.dkr.ecr.us-east-1.amazonaws.com/app:1",
                Some("123456789012.dkr.ecr.us-east-1.amazonaws.com"),
            ),
            ("public.ecr.aws/nginx/nginx:latest", Some("public.ecr.aws")),
            ("localhost/x", Some("localhost")),
            ("registry:5000/x", Some("registry:5000")),
            ("nginx", None),
            ("library/nginx:1", None),
        ];
        for (image, host) in cases {
            assert_eq!(image_host(image), host, "{image}");
        }
    }

    #[test]
    fn a_dual_stack_host_not_written_says_to_turn_dual_stack_on() {
        let managed = Managed {
            hosts: vec!["123456789012.dkr.ecr.us-east-1.amazonaws.com".into()],
            any_in_region: None,
            dual_stack: false,
        };
        let twin = RegistryHost::from_str("123456789012.dkr-ecr.us-east-1.on.aws").unwrap();
        assert!(!managed.covers(&twin));
        assert!(managed.hint(&twin).contains("ECR_REFRESH_DUAL_STACK"));
        let other = RegistryHost::from_str("210987654321.dkr.ecr.us-east-1.amazonaws.com").unwrap();
        assert!(managed.hint(&other).contains("ECR_REFRESH_REGISTRIES"));
    }
}
