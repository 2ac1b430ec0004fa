//! ECR_REFRESH_CLUSTERS, for either mode: the clusters read from their source, then each one
//! worked on, ECR_REFRESH_CLUSTERS_CONCURRENCY at a time, as its own ServiceAccount
//! (`fleet::connect`), by the mode's one-cluster pipeline, in a span that puts `cluster` on
//! every line. A cluster that can't be reached, or fails half-way, is that cluster's failure:
//! the others finish.

use std::future::Future;
use std::time::Instant;

use futures::StreamExt as _;
use tracing::{Instrument as _, error, info, info_span};

use crate::cluster::client::{self, Target};
use crate::cluster::retry;
use crate::fleet::connect::as_account;
use crate::fleet::source::{self, Found};
use crate::fleet::{Clusters, LOCAL, Source, SpokeAccount};
use crate::pull_secret::install::Install;
use crate::report::exit;
use crate::run::end::Unavailable;
use crate::run::stop::Stop;
use crate::termination;

/// What one cluster came to: the mode's result, or why the cluster failed.
pub struct Reached<T> {
    pub name: String,
    pub result: Result<T, Unavailable>,
    pub elapsed_ms: u64,
}

/// A cluster to work on, or why it can't be.
enum Spoke {
    /// The cluster the run runs in, as the run itself.
    Local(Box<Target>),
    /// A spoke, with the kubeconfig's credential (reached as its ServiceAccount).
    Remote(Box<kube::Config>),
    /// Named by the source, but refused.
    Refused(String),
}

/// The clusters the source names (and the local one with ECR_REFRESH_CLUSTERS_INCLUDE_LOCAL),
/// each worked on by `work` with its target and the install its Secrets record: `account`'s
/// name in a spoke, `local_install` in the cluster the run runs in. In name order.
pub async fn each_cluster<T, F, Fut>(
    clusters: &Clusters,
    account: &SpokeAccount,
    local_install: Option<Install>,
    stop: &Stop,
    work: F,
) -> Result<Vec<Reached<T>>, Unavailable>
where
    F: Fn(Target, Option<Install>) -> Fut,
    Fut: Future<Output = Result<T, Unavailable>>,
{
    // The cluster the run runs in: where the Secrets of capi and argocd are, and a target with
    // ECR_REFRESH_CLUSTERS_INCLUDE_LOCAL. A directory's fleet needs none of it.
    let needs_hub = clusters.include_local || !matches!(clusters.source, Source::Dir(_));
    let hub = if needs_hub {
        let hub = Target::local().await?;
        let (client, url) = hub.client(true)?;
        client::check(&client, &url).await?;
        Some((hub, client))
    } else {
        None
    };
    let namespaces: Vec<String> = clusters
        .namespaces
        .iter()
        .map(ToString::to_string)
        .collect();
    let selector = clusters.selector.as_ref().map(ToString::to_string);
    let client = hub.as_ref().map(|(_, client)| client);
    let found = source::read(client, &clusters.source, &namespaces, selector.as_deref())
        .await
        .map_err(|e| Unavailable::Clusters(e.to_string()))?;
    let local_named = found.iter().any(|f| matches!(f, Found::Local));
    let mut targets: Vec<(String, Spoke)> = found
        .into_iter()
        .filter_map(|found| match found {
            Found::Spoke(spoke) => Some((spoke.name, Spoke::Remote(Box::new(spoke.config)))),
            Found::Refused(refused) => Some((refused.name, Spoke::Refused(refused.reason))),
            Found::Local => None,
        })
        .collect();
    if let (true, Some((hub, _))) = (clusters.include_local, &hub) {
        targets.push((
            LOCAL.to_owned(),
            Spoke::Local(Box::new(hub.clone().named(LOCAL))),
        ));
    } else if local_named {
        info!(
            source = %clusters.source,
            "the source names the cluster the run runs in: left out (set \
             ECR_REFRESH_CLUSTERS_INCLUDE_LOCAL=true to include it)"
        );
    }
    if targets.is_empty() {
        return Err(Unavailable::Clusters(format!(
            "ECR_REFRESH_CLUSTERS={} names no cluster{}: check ECR_REFRESH_CLUSTERS_NAMESPACE and \
             ECR_REFRESH_CLUSTERS_SELECTOR (or set ECR_REFRESH_CLUSTERS_INCLUDE_LOCAL=true)",
            clusters.source,
            if namespaces.is_empty() {
                String::new()
            } else {
                format!(" in {}", namespaces.join(","))
            }
        )));
    }
    let spoke_install: Option<Install> = account.to_string().parse().ok();
    let work = &work;
    let runs = targets.into_iter().map(|(name, spoke)| {
        let span = info_span!("cluster", cluster = %name);
        let (spoke_install, local_install) = (spoke_install.clone(), local_install.clone());
        let key = name.clone();
        let run = async move {
            let started = Instant::now();
            let result = match spoke {
                Spoke::Refused(reason) => Err(Unavailable::Refused(reason)),
                Spoke::Local(hub) => work(*hub, local_install).await,
                // A cluster not yet reached at the stop is not begun: its TokenRequest would
                // run past the deadline.
                Spoke::Remote(kubeconfig) => tokio::select! {
                    reached = as_account(&name, *kubeconfig, account, clusters.auth) => match reached {
                        Ok(target) => work(target, spoke_install).await,
                        Err(e) => Err(Unavailable::Spoke(e)),
                    },
                    reason = stop.stopping() => Err(Unavailable::Stopped { reason, done: "begun" }),
                },
            };
            if let Err(e) = &result {
                error!(error = %e, "cluster failed");
            }
            Reached {
                name,
                result,
                elapsed_ms: started.elapsed().as_millis() as u64,
            }
        };
        retry::for_cluster(key, run).instrument(span)
    });
    let mut reached: Vec<Reached<T>> = futures::stream::iter(runs)
        .buffer_unordered(clusters.concurrency)
        .collect()
        .await;
    reached.sort_by(|a, b| a.name.cmp(&b.name));
    // No token (a refresh's): as for one cluster, the run's error (exit 3), whatever the
    // clusters that needed none came to.
    if let Some(i) = reached
        .iter()
        .position(|r| matches!(r.result, Err(Unavailable::Tokens { .. })))
    {
        reached.swap_remove(i).result?;
    }
    if !reached.is_empty() && reached.iter().all(|r| r.result.is_err()) {
        let failed = reached.into_iter().map(|r| r.name).collect();
        return Err(Unavailable::NoClusterReached { failed });
    }
    Ok(reached)
}

/// The clusters that failed, by name: not reached, or whose own run would not exit 0
/// (`exit_code`: the mode's for one cluster).
pub fn failed<T>(clusters: &[Reached<T>], exit_code: impl Fn(&T) -> u8) -> Vec<String> {
    clusters
        .iter()
        .filter(|c| c.result.as_ref().map_or(true, |t| exit_code(t) != exit::OK))
        .map(|c| c.name.clone())
        .collect()
}

/// How many clusters were reached.
pub fn reached<T>(clusters: &[Reached<T>]) -> usize {
    clusters.iter().filter(|c| c.result.is_ok()).count()
}

/// The fleet's exit code: 1 when any cluster failed.
pub fn exit_code(failed: &[String]) -> u8 {
    if failed.is_empty() {
        exit::OK
    } else {
        exit::FAILED
    }
}

/// The fleet's termination message: `build` renders it from a prefix of the failed clusters'
/// names, ending with "+N more" when they were cut to fit the kubelet's 4096 bytes.
pub fn termination_message(failed: &[String], build: impl Fn(Vec<String>) -> String) -> String {
    termination::fit([failed], |[listed]| {
        let mut names = listed.to_vec();
        if listed.len() < failed.len() {
            names.push(format!("+{} more", failed.len() - listed.len()));
        }
        build(names)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thousand_failed_clusters_fit_with_the_count_of_those_left_out() {
        let failed: Vec<String> = (0..1000)
            .map(|i| format!("capi-clusters/workload-cluster-{i:04}"))
            .collect();
        let message = termination_message(&failed, |names| {
            serde_json::json!({ "clusters": 1000, "clusters_failed": 1000, "failed_clusters": names })
                .to_string()
        });
        assert!(
            message.len() < termination::LIMIT,
            "{} bytes",
            message.len()
        );
        let parsed: serde_json::Value = serde_json::from_str(&message).unwrap();
        let names = parsed["failed_clusters"].as_array().unwrap();
        let last = names.last().unwrap().as_str().unwrap();
        let shown = names.len() - 1;
        assert!(shown > 10, "as many names as fit are kept: {shown}");
        assert_eq!(last, format!("+{} more", 1000 - shown));
        assert_eq!(names[0], "capi-clusters/workload-cluster-0000");
    }

    #[test]
    fn a_few_failed_clusters_are_named_in_full() {
        let failed = vec!["a".to_owned(), "b".to_owned()];
        let message = termination_message(&failed, |names| {
            serde_json::json!({ "failed_clusters": names }).to_string()
        });
        assert_eq!(message, r#"{"failed_clusters":["a","b"]}"#);
    }
}
