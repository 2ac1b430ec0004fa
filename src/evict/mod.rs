//! ECR_REFRESH_EVICT_STUCK_PODS: at the end of a refresh, pods stuck in ImagePullBackOff on a
//! registry we cover, for want of the Secret, are evicted so that their controllers recreate
//! them with it.
//!
//! A ServiceAccount's imagePullSecrets reach a pod only when it is created, so a pod created
//! before our first run in its namespace never gets the Secret. Which pods to evict is
//! `pods::recovery`, decided from each pod's state (the same decision `check` reports), not
//! from what this run wrote: pods past one run's ECR_REFRESH_EVICT_LIMIT are evicted by the
//! next, which may write nothing.
//!
//! Per namespace: a GET of the Secret (the hosts our last write recorded), a LIST of the
//! unfinished pods, a GET of each ServiceAccount a stuck pod runs as, and a POST of each
//! eviction (the Eviction API: PodDisruptionBudgets hold; a 429 leaves the pod for the next
//! run). One log line per pod
//! considered, with its outcome: `evicted`, `would-evict` (dry run) or `left`, and why. A dry
//! run judges as if its own writes had happened: a ServiceAccount it would have given the
//! Secret counts as listing it.

use std::collections::{BTreeSet, HashMap};

use k8s_openapi::api::core::v1::{Pod, Secret};
use kube::{Api, Client};
use tracing::{info, warn};

use crate::cluster::pods;
use crate::cluster::retry::{self, RequestError};
use crate::config::Config;
use crate::pods::{Account, Managed, Recovery, RecoveryContext, recovery};
use crate::report::{Evictions, PodOutcome};
use crate::run::stop::Stop;

/// What the evictions of one run work with.
pub struct Evictor<'a> {
    pub config: &'a Config,
    /// A client that does not retry 429s (the cluster's `Target::client(false)`).
    pub client: Client,
    /// AWS_REGION: the caller's own registry's, when none is configured.
    pub region: Option<String>,
    pub limit: usize,
    /// (namespace, account) of the ServiceAccounts this dry run would have given the Secret:
    /// judged as listing it, so that the preview says what the real run would do.
    pub would_add: BTreeSet<(String, String)>,
}

impl Evictor<'_> {
    /// Every namespace in `namespaces`, in order, until the limit or the stop.
    pub async fn run(&self, namespaces: &[String], stop: &Stop) -> Evictions {
        let mut tally = Evictions::default();
        for namespace in namespaces {
            if let Some(reason) = stop.reason() {
                warn!(
                    reason,
                    "stuck pods were not all looked at: the run is stopping; the next run does"
                );
                break;
            }
            self.namespace(namespace, &mut tally).await;
        }
        tally
    }

    async fn namespace(&self, namespace: &str, tally: &mut Evictions) {
        let secret_name = self.config.secret_name.as_str();
        let pod_api: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
        let pods = match pods::unfinished(&pod_api).await {
            Ok(pods) => pods,
            Err(e) => {
                warn!(namespace, error = %e, hint = hint(e.code()),
                    "stuck pods were not looked at: the pods could not be listed");
                return;
            }
        };
        let stuck: Vec<&Pod> = pods
            .iter()
            .filter(|p| !crate::pods::stuck(p).is_empty())
            .collect();
        if stuck.is_empty() {
            return;
        }
        let secrets: Api<Secret> = Api::namespaced(self.client.clone(), namespace);
        let secret = match retry::send("get secret", || secrets.get_opt(secret_name)).await {
            Ok(secret) => secret,
            Err(e) => {
                warn!(namespace, secret = secret_name, error = %e,
                    "stuck pods were not looked at: the Secret could not be read");
                return;
            }
        };
        let managed = Managed::of(
            &self.config.written,
            self.config.dual_stack,
            self.region.as_deref(),
            secret.as_ref(),
        );
        let accounts = self.accounts(namespace, &stuck, secret_name).await;
        let cx = RecoveryContext {
            secret_name,
            managed: &managed,
            accounts: &accounts,
        };
        for pod in stuck {
            let Some(decision) = recovery(pod, &cx) else {
                continue;
            };
            let name = pod.metadata.name.as_deref().unwrap_or_default();
            let owner = crate::pods::owner(pod);
            let (outcome, reason) = match decision {
                Recovery::Left { reason } => (PodOutcome::Left, reason),
                Recovery::Evict { reason } if tally.spent() >= self.limit => (
                    PodOutcome::Left,
                    format!(
                        "{reason}; not evicted: this run reached ECR_REFRESH_EVICT_LIMIT={}, the \
                         next run evicts it",
                        self.limit
                    ),
                ),
                Recovery::Evict { reason } if self.config.dry_run => {
                    (PodOutcome::WouldEvict, reason)
                }
                Recovery::Evict { reason } => {
                    match pods::evict(&pod_api, name, pod.metadata.uid.as_deref()).await {
                        Ok(()) => (PodOutcome::Evicted, reason),
                        // Gone, or replaced under its name, since the list: nothing to do.
                        Err(e) if matches!(e.code(), Some(404 | 409)) => continue,
                        Err(e) if e.code() == Some(429) => (
                            PodOutcome::Left,
                            format!(
                                "{reason}; not evicted: the eviction was refused ({e}): a \
                                 PodDisruptionBudget allows no disruption now; the next run tries \
                                 again"
                            ),
                        ),
                        // Sent, and no answer came: it may have gone through. Counted
                        // against the limit, so that the limit holds whatever the network does.
                        Err(e) if unanswered(&e) => {
                            tally.unanswered += 1;
                            (
                                PodOutcome::Left,
                                format!(
                                    "{reason}; the eviction got no answer ({e}): it may have gone \
                                     through, and counts against ECR_REFRESH_EVICT_LIMIT={}; the \
                                     next run looks at the pod again",
                                    self.limit
                                ),
                            )
                        }
                        Err(e) => (
                            PodOutcome::Left,
                            format!("{reason}; not evicted: {e}{}", hint(e.code())),
                        ),
                    }
                }
            };
            tally.count(outcome);
            let owner = owner.as_str();
            match outcome {
                PodOutcome::Left => warn!(
                    namespace,
                    pod = name,
                    owner,
                    outcome = outcome.as_str(),
                    reason = %reason,
                    "stuck pod left"
                ),
                PodOutcome::WouldEvict => info!(
                    namespace,
                    pod = name,
                    owner,
                    outcome = outcome.as_str(),
                    reason = %reason,
                    "stuck pod would be evicted (dry run)"
                ),
                PodOutcome::Evicted => info!(
                    namespace,
                    pod = name,
                    owner,
                    outcome = outcome.as_str(),
                    reason = %reason,
                    "stuck pod evicted"
                ),
            }
        }
    }

    /// The ServiceAccounts stuck pods without their own imagePullSecrets run as: one GET each
    /// (`run::accounts`, as check reads them).
    async fn accounts(
        &self,
        namespace: &str,
        stuck: &[&Pod],
        secret: &str,
    ) -> HashMap<String, Account> {
        let mut found =
            crate::run::accounts::read(&self.client, namespace, stuck, secret, |name, e| {
                // Whether it lists the Secret is the decision (pods::recovery).
                let hint = if e.code() == Some(403) {
                    " (grant get on serviceaccounts: the evict-stuck-pods component and the \
                     chart's evictStuckPods do, in the ecr-refresh-evict ClusterRole)"
                } else {
                    ""
                };
                warn!(namespace, service_account = name, error = %e, hint,
                    "a ServiceAccount could not be read: its pods are not evicted");
            })
            .await;
        // A dry run judges as if its own ServiceAccount writes had happened.
        for (name, account) in &mut found {
            if matches!(account, Account::Found { .. })
                && self
                    .would_add
                    .contains(&(namespace.to_owned(), name.clone()))
            {
                *account = Account::Found { lists_secret: true };
            }
        }
        found
    }
}

/// Whether an eviction got no answer: none in time, or the connection failed on the way
/// (refused, reset, cut mid-answer, an attempt's read timeout). The server may have evicted
/// the pod; the client cannot tell which of these happened before the request arrived.
fn unanswered(e: &RequestError) -> bool {
    matches!(e, RequestError::Timeout(_) | RequestError::Client(_))
}

/// What to do about a refusal: the rights come with the option's component.
fn hint(code: Option<u16>) -> &'static str {
    if code == Some(403) {
        " (ECR_REFRESH_EVICT_STUCK_PODS needs pods list and get, and pods/eviction create: \
         install the kustomize component manifests/components/evict-stuck-pods, or set the \
         chart's evictStuckPods.enabled=true)"
    } else {
        ""
    }
}
