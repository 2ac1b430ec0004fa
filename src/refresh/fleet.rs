//! ECR_REFRESH_CLUSTERS for a refresh: every cluster by the one pipeline a single cluster's run
//! goes through (`refresh_cluster`), from one set of tokens fetched once for the whole fleet
//! (`run::fleet` reads the clusters and reaches each as its ServiceAccount). Each reached
//! cluster's metrics go to its own Pushgateway group.

use std::collections::BTreeMap;
use std::future::Future;
use std::time::{Duration, Instant, SystemTime};

use tracing::{Instrument as _, Level, info_span};

use super::lines::log_summary;
use super::report::{Report, Summary};
use super::tokens::OnDemand;
use super::{load, metrics, refresh_cluster};
use crate::aws::credentials::roles_anywhere::certificate_expiry;
use crate::cluster::client::Target;
use crate::config::Config;
use crate::config::pushgateway::Pushgateway;
use crate::fleet::Clusters;
use crate::pull_secret::install::Install;
use crate::report::Outcome;
use crate::run::end::{Finished, Unavailable, end};
use crate::run::fleet::{self, Reached, each_cluster};
use crate::run::stop::Stop;

/// What the fleet came to, for the run's end.
struct Fleet<'a> {
    clusters: Vec<Reached<(Report, Summary)>>,
    summary: Summary,
    config: &'a Config,
}

/// Runs once over the fleet and returns the process exit code.
pub(super) async fn run(
    config: &Config,
    clusters: &Clusters,
    shutdown: impl Future<Output = &'static str> + Send + 'static,
) -> u8 {
    let started = Instant::now();
    let stop = Stop::new(shutdown);
    let result = fleet(config, clusters, &stop).await;
    let push = async |gateway: &Pushgateway, exit_code, duration, done: Option<&Fleet<'_>>| {
        let none = BTreeMap::new();
        let certificate = certificate_expiry(config.roles_anywhere.as_ref());
        // Each cluster reached, in its own group: its Secrets' expiry and outcomes.
        for cluster in done.map_or(&[][..], |d| &d.clusters[..]) {
            let Ok((report, summary)) = &cluster.result else {
                continue;
            };
            let run = metrics::RunEnd {
                finished_at: SystemTime::now(),
                duration: Duration::from_millis(cluster.elapsed_ms),
                exit_code: report.exit_code(),
                dry_run: config.dry_run,
                report: Some(report),
                token_expiry: &summary.token_expiry,
                certificate_expiry: certificate,
                cluster: Some(&cluster.name),
            };
            let span = info_span!("cluster", cluster = %cluster.name);
            metrics::push(&gateway.for_cluster(&cluster.name), &run)
                .instrument(span)
                .await;
        }
        // The hub's own group: the run's exit code, duration and tokens.
        let run = metrics::RunEnd {
            finished_at: SystemTime::now(),
            duration,
            exit_code,
            dry_run: config.dry_run,
            report: None,
            token_expiry: done.map_or(&none, |d| &d.summary.token_expiry),
            certificate_expiry: certificate,
            cluster: None,
        };
        metrics::push(gateway, &run).await;
    };
    end(config, started, result, "nothing was written", push).await
}

async fn fleet<'a>(
    config: &'a Config,
    clusters: &Clusters,
    stop: &Stop,
) -> Result<Fleet<'a>, Unavailable> {
    let sdk = tokio::select! {
        sdk = load(config) => sdk?,
        reason = stop.stopping() => return Err(Unavailable::Stopped { reason, done: "written" }),
    };
    // One set of tokens for every cluster: one call per region for the whole fleet.
    let tokens = OnDemand::new(&sdk, config);
    let local_install = config.install.clone().or_else(Install::in_cluster);
    let work = |target: Target, install| {
        let tokens = &tokens;
        async move {
            let started = Instant::now();
            let (report, summary) = refresh_cluster(config, tokens, &target, install, stop).await?;
            let summary = Summary {
                elapsed_ms: started.elapsed().as_millis() as u64,
                ..summary
            };
            log_summary(&report, &summary, config);
            Ok((report, summary))
        }
    };
    let clusters = each_cluster(
        clusters,
        &clusters.service_account,
        local_install,
        stop,
        work,
    )
    .await?;
    let summary = tokens.summary();
    Ok(Fleet {
        clusters,
        summary,
        config,
    })
}

impl Fleet<'_> {
    fn failed(&self) -> Vec<String> {
        fleet::failed(&self.clusters, |(report, _)| report.exit_code())
    }

    /// Every reached cluster's namespaces, by outcome.
    fn outcomes(&self) -> BTreeMap<Outcome, usize> {
        let mut total = BTreeMap::new();
        for (report, _) in self.clusters.iter().filter_map(|c| c.result.as_ref().ok()) {
            for (outcome, n) in &report.outcomes {
                *total.entry(*outcome).or_default() += n;
            }
        }
        total
    }
}

impl Finished for Fleet<'_> {
    fn exit_code(&self) -> u8 {
        fleet::exit_code(&self.failed())
    }

    fn log_summary(&self, elapsed_ms: u64) {
        let failed = self.failed();
        let outcomes = self.outcomes();
        let count = |o| outcomes.get(&o).copied().unwrap_or(0);
        let failed_clusters = failed.join(",");
        macro_rules! summary {
            ($level:expr) => {
                tracing::event!(
                    $level,
                    clusters = self.clusters.len(),
                    clusters_reached = fleet::reached(&self.clusters),
                    clusters_failed = failed.len(),
                    failed_clusters = %failed_clusters,
                    namespaces = outcomes.values().sum::<usize>(),
                    created = count(Outcome::Created),
                    updated = count(Outcome::Updated),
                    fresh = count(Outcome::Fresh),
                    recreated = count(Outcome::Recreated),
                    skipped = count(Outcome::Skipped),
                    failed = count(Outcome::Failed),
                    dry_run = self.config.dry_run,
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
        let outcomes = self.outcomes();
        fleet::termination_message(&failed, |names| {
            serde_json::json!({
                "exit_code": self.exit_code(),
                "clusters": self.clusters.len(),
                "clusters_reached": fleet::reached(&self.clusters),
                "clusters_failed": failed.len(),
                "outcomes": outcomes,
                "failed_clusters": names,
                "token_expires_at": self.summary.token_expires_at,
                "elapsed_ms": elapsed_ms,
            })
            .to_string()
        })
    }
}
