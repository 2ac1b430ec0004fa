//! ECR_REFRESH_CLUSTERS for a check: every cluster checked by the one pipeline a single
//! cluster's check goes through (`check_cluster`), as the spoke's check ServiceAccount
//! (ECR_REFRESH_CLUSTERS_CHECK_SERVICE_ACCOUNT). Each reached cluster's metrics go to its own
//! Pushgateway group.

use std::future::Future;
use std::time::{Duration, Instant};

use tracing::{Instrument as _, Level, info_span};

use super::{Before, NOTHING_CHECKED, Tally, before, check_cluster, log_summary, metrics};
use crate::aws::credentials::roles_anywhere::certificate_expiry;
use crate::cluster::client::Target;
use crate::config::Config;
use crate::config::pushgateway::Pushgateway;
use crate::fleet::Clusters;
use crate::run::end::{Finished, Unavailable, end};
use crate::run::fleet::{self, Reached, each_cluster};
use crate::run::stop::Stop;

/// What the fleet's check came to.
struct Fleet {
    clusters: Vec<Reached<Tally>>,
}

/// Checks the fleet once and returns the process exit code.
pub(super) async fn run(
    config: &Config,
    clusters: &Clusters,
    shutdown: impl Future<Output = &'static str> + Send + 'static,
) -> u8 {
    let started = Instant::now();
    let stop = Stop::new(shutdown);
    let result = check(config, clusters, &stop).await;
    let push = async |gateway: &Pushgateway, code, duration, done: Option<&Fleet>| {
        let certificate = certificate_expiry(config.roles_anywhere.as_ref());
        for cluster in done.map_or(&[][..], |d| &d.clusters[..]) {
            let Ok(tally) = &cluster.result else { continue };
            let span = info_span!("cluster", cluster = %cluster.name);
            let elapsed = Duration::from_millis(cluster.elapsed_ms);
            let gateway = gateway.for_cluster(&cluster.name);
            metrics::push(
                &gateway,
                tally.exit_code(),
                elapsed,
                Some(tally),
                certificate,
            )
            .instrument(span)
            .await;
        }
        metrics::push(gateway, code, duration, None, certificate).await;
    };
    end(config, started, result, NOTHING_CHECKED, push).await
}

async fn check(config: &Config, clusters: &Clusters, stop: &Stop) -> Result<Fleet, Unavailable> {
    let before: Before = tokio::select! {
        before = before(config) => before?,
        reason = stop.stopping() => return Err(Unavailable::Stopped { reason, done: "checked" }),
    };
    let before = &before;
    let work = |target: Target, install| async move {
        let started = Instant::now();
        let tally = check_cluster(config, before, &target, install, stop).await?;
        log_summary(&tally, started.elapsed().as_millis() as u64);
        Ok(tally)
    };
    let account = &clusters.check_service_account;
    let clusters = each_cluster(clusters, account, config.install.clone(), stop, work).await?;
    Ok(Fleet { clusters })
}

impl Fleet {
    /// Clusters not reached, or with findings.
    fn failed(&self) -> Vec<String> {
        fleet::failed(&self.clusters, Tally::exit_code)
    }

    fn tallies(&self) -> impl Iterator<Item = &Tally> {
        self.clusters.iter().filter_map(|c| c.result.as_ref().ok())
    }
}

impl Finished for Fleet {
    fn exit_code(&self) -> u8 {
        fleet::exit_code(&self.failed())
    }

    fn log_summary(&self, elapsed_ms: u64) {
        let failed = self.failed();
        let namespaces: usize = self.tallies().map(|t| t.namespaces).sum();
        let ok: usize = self.tallies().map(|t| t.ok).sum();
        let with_findings: usize = self.tallies().map(|t| t.with_findings.len()).sum();
        let failed_clusters = failed.join(",");
        macro_rules! summary {
            ($level:expr) => {
                tracing::event!(
                    $level,
                    mode = "check",
                    clusters = self.clusters.len(),
                    clusters_reached = fleet::reached(&self.clusters),
                    clusters_failed = failed.len(),
                    failed_clusters = %failed_clusters,
                    namespaces,
                    ok,
                    with_findings,
                    elapsed_ms,
                    "fleet summary"
                )
            };
        }
        if failed.is_empty() {
            summary!(Level::INFO);
        } else {
            summary!(Level::WARN);
        }
    }

    fn termination_message(&self, elapsed_ms: u64) -> String {
        let failed = self.failed();
        let namespaces: usize = self.tallies().map(|t| t.namespaces).sum();
        let ok: usize = self.tallies().map(|t| t.ok).sum();
        fleet::termination_message(&failed, |names| {
            serde_json::json!({
                "mode": "check",
                "exit_code": self.exit_code(),
                "clusters": self.clusters.len(),
                "clusters_reached": fleet::reached(&self.clusters),
                "clusters_failed": failed.len(),
                "namespaces": namespaces,
                "ok": ok,
                "failed_clusters": names,
                "elapsed_ms": elapsed_ms,
            })
            .to_string()
        })
    }
}
