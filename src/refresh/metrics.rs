//! A refresh's metrics, pushed to the Pushgateway when the run ends, as job `ecr-refresh` plus
//! ECR_REFRESH_PUSHGATEWAY_LABELS. A run that succeeded PUTs the group, which replaces every
//! metric in it, the last success time included. A run that failed POSTs, which replaces only
//! the metrics it sends: it sends no last success time, so the gateway keeps the one of the last
//! run that succeeded.

use std::collections::BTreeMap;
use std::sync::atomic::AtomicU64;
use std::time::{Duration, SystemTime};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::encoding::prometheus_text;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::report::Report;
use crate::cluster::client;
use crate::config::pushgateway::Pushgateway;
use crate::metrics::{certificate_expiry, gauge, seconds};
use crate::report::{Outcome, exit};

/// What a run ended with, as the metrics need it.
#[derive(Debug)]
pub struct RunEnd<'a> {
    pub finished_at: SystemTime,
    pub duration: Duration,
    pub exit_code: u8,
    /// A dry run refreshes nothing: it is no success, and leaves the Secrets' expiry as it was.
    pub dry_run: bool,
    /// None when the run ended before any namespace (exit 3, or stopped early).
    pub report: Option<&'a Report>,
    /// Each region's token expiry; empty when no token was fetched.
    pub token_expiry: &'a BTreeMap<String, SystemTime>,
    /// When the Roles Anywhere certificate expires; None when that is not the source.
    pub certificate_expiry: Option<SystemTime>,
    /// A fleet's cluster whose group this is (its requests only); None: the whole run's.
    pub cluster: Option<&'a str>,
}

impl RunEnd<'_> {
    /// Whether the run refreshed every selected namespace: then it replaces the group.
    pub fn succeeded(&self) -> bool {
        self.exit_code == exit::OK && !self.dry_run
    }
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabel {
    outcome: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RegionLabel {
    region: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct MethodLabel {
    method: &'static str,
}

/// The run's metrics in the Prometheus text format. Every one is a gauge: the gateway keeps
/// the last run's values, each run pushes its own. The last success time only when the run
/// succeeded.
pub fn encode(run: &RunEnd<'_>) -> String {
    let mut registry = Registry::with_prefix("ecr_refresh");
    gauge(
        &mut registry,
        "last_run_timestamp_seconds",
        "When the last run ended, in Unix seconds",
        seconds(run.finished_at),
    );
    if run.succeeded() {
        gauge(
            &mut registry,
            "last_success_timestamp_seconds",
            "When the last run that succeeded (exit code 0) ended, in Unix seconds",
            seconds(run.finished_at),
        );
    }
    certificate_expiry(&mut registry, run.certificate_expiry);
    let exit_code: Gauge = Gauge::default();
    exit_code.set(i64::from(run.exit_code));
    registry.register(
        "last_run_exit_code",
        "The last run's exit code: 0 ok, 1 some namespaces failed, 3 nothing written",
        exit_code,
    );
    gauge(
        &mut registry,
        "run_duration_seconds",
        "How long the last run took",
        run.duration.as_secs_f64(),
    );
    if let Some(report) = run.report {
        let namespaces: Family<OutcomeLabel, Gauge> = Family::default();
        for outcome in Outcome::ALL {
            namespaces
                .get_or_create(&OutcomeLabel {
                    outcome: outcome.as_str(),
                })
                .set(i64::try_from(report.count(outcome)).unwrap_or(i64::MAX));
        }
        registry.register(
            "namespaces",
            "Selected namespaces in the last run, by what happened to their Secret",
            namespaces,
        );
        if let Some(earliest) = report.earliest_expiry.filter(|_| !run.dry_run) {
            gauge(
                &mut registry,
                "secrets_earliest_expiry_timestamp_seconds",
                "The earliest expiry among the selected namespaces' Secrets as they stand after the last \
                 run, in Unix seconds: when the first pull fails unless a run refreshes it. Every Secret \
                 whose expiry the run knows counts, those it failed to write included",
                seconds(earliest),
            );
        }
        if !report.argocd.is_empty() {
            let argocd: Family<OutcomeLabel, Gauge> = Family::default();
            for outcome in Outcome::ALL {
                argocd
                    .get_or_create(&OutcomeLabel {
                        outcome: outcome.as_str(),
                    })
                    .set(i64::try_from(report.argocd_count(outcome)).unwrap_or(i64::MAX));
            }
            registry.register(
                "argocd_secrets",
                "Argo CD repository-credential Secrets (ECR_REFRESH_ARGOCD_NAMESPACE) in the last run, by \
                 what happened to them",
                argocd,
            );
        }

        if let Some(pods) = &report.evictions {
            let evicted: Gauge = Gauge::default();
            evicted.set(i64::try_from(pods.evicted).unwrap_or(i64::MAX));
            registry.register(
                "pods_evicted",
                "Pods stuck in ImagePullBackOff that the last run evicted so that their controllers \
                 recreate them with the Secret (ECR_REFRESH_EVICT_STUCK_PODS=true; absent without it)",
                evicted,
            );
        }
        // A dry run says nothing of the Secrets after it, as for the expiry.
        if !run.dry_run {
            let unknown: Gauge = Gauge::default();
            unknown.set(i64::try_from(report.unknown).unwrap_or(i64::MAX));
            registry.register(
                "secrets_unknown",
                "Selected namespaces whose Secret the last run never read (left undone at a stop, or \
                 a read that failed) or whose write it abandoned: their expiry is not in the earliest expiry",
                unknown,
            );
        }
    }
    if !run.token_expiry.is_empty() {
        let expiry: Family<RegionLabel, Gauge<f64, AtomicU64>> = Family::default();
        for (region, at) in run.token_expiry {
            expiry
                .get_or_create(&RegionLabel {
                    region: region.clone(),
                })
                .set(seconds(*at));
        }
        registry.register(
            "token_expiry_timestamp_seconds",
            "When the ECR tokens the last run fetched expire, in Unix seconds: per region, ECR \
             Public's token under the region label value ecr-public",
            expiry,
        );
    }
    let requests: Family<MethodLabel, Gauge> = Family::default();
    for (method, n) in client::api_requests(run.cluster) {
        requests
            .get_or_create(&MethodLabel { method })
            .set(i64::try_from(n).unwrap_or(i64::MAX));
    }
    registry.register(
        "run_api_requests",
        "Requests the last run sent to the Kubernetes API server, every attempt counted, by HTTP method \
         (in a fleet's cluster group, those sent to that cluster)",
        requests,
    );
    let mut text = String::new();
    prometheus_text::encode(&mut text, &registry).expect("writing to a String cannot fail");
    text
}

/// Pushes the run's metrics: PUT when it succeeded, POST when it failed.
pub async fn push(gateway: &Pushgateway, run: &RunEnd<'_>) {
    crate::metrics::push(&gateway.group_url(), run.succeeded(), encode(run)).await;
}

#[cfg(test)]
mod tests {
    use std::time::UNIX_EPOCH;

    use super::*;

    #[test]
    fn the_certificate_s_expiry_is_pushed_whatever_the_run_s_end() {
        let none = BTreeMap::new();
        let at = UNIX_EPOCH + Duration::from_secs(4_000);
        let run = |certificate_expiry| RunEnd {
            finished_at: UNIX_EPOCH + Duration::from_secs(1_000),
            duration: Duration::from_secs(1),
            exit_code: exit::UNAVAILABLE,
            dry_run: false,
            report: None,
            token_expiry: &none,
            certificate_expiry,
            cluster: None,
        };
        const LINE: &str = "ecr_refresh_credentials_certificate_expiry_timestamp_seconds 4000.0";
        let with = encode(&run(Some(at)));
        assert!(with.contains(LINE), "even a failed run pushes it: {with}");
        assert!(!encode(&run(None)).contains("certificate"));
    }

    #[test]
    fn a_failed_run_sends_no_last_success_time() {
        let mut report = Report::default();
        report.record("a", Outcome::Updated, &[]);
        report.record("b", Outcome::Failed, &[]);
        report.record_expiry(Some(UNIX_EPOCH + Duration::from_secs(3_000)));
        let expiry = BTreeMap::from([(
            "us-east-1".to_owned(),
            UNIX_EPOCH + Duration::from_secs(2_000),
        )]);
        let run = |exit_code| RunEnd {
            finished_at: UNIX_EPOCH + Duration::from_secs(1_000),
            duration: Duration::from_millis(1500),
            exit_code,
            dry_run: false,
            report: Some(&report),
            token_expiry: &expiry,
            certificate_expiry: None,
            cluster: None,
        };
        let ok = encode(&run(exit::OK));
        assert!(
            ok.contains("ecr_refresh_last_success_timestamp_seconds 1000.0"),
            "{ok}"
        );
        let failed = encode(&run(exit::FAILED));
        assert!(!failed.contains("last_success"), "{failed}");
        for line in [
            "ecr_refresh_last_run_timestamp_seconds 1000.0",
            "ecr_refresh_last_run_exit_code 1",
            "ecr_refresh_run_duration_seconds 1.5",
            "ecr_refresh_namespaces{outcome=\"failed\"} 1",
            "ecr_refresh_namespaces{outcome=\"updated\"} 1",
            "ecr_refresh_namespaces{outcome=\"created\"} 0",
            "ecr_refresh_token_expiry_timestamp_seconds{region=\"us-east-1\"} 2000.0",
            "# TYPE ecr_refresh_namespaces gauge",
        ] {
            assert!(failed.lines().any(|l| l == line), "{line} in:\n{failed}");
        }
        assert!(
            failed.contains("ecr_refresh_secrets_earliest_expiry_timestamp_seconds 3000.0"),
            "the namespaces written count: {failed}"
        );

        let dry = encode(&RunEnd {
            dry_run: true,
            ..run(exit::OK)
        });
        assert!(!dry.contains("last_success"), "a dry run is no success");
        assert!(
            !dry.contains("earliest_expiry"),
            "a dry run leaves the Secrets as they were"
        );
        assert!(ok.contains("earliest_expiry_timestamp_seconds 3000.0"));
    }

    #[test]
    fn argo_cd_secrets_are_counted_by_outcome_only_with_the_option_on() {
        let mut report = Report::default();
        report.record("a", Outcome::Fresh, &[]);
        fn run<'a>(report: &'a Report, none: &'a BTreeMap<String, SystemTime>) -> RunEnd<'a> {
            RunEnd {
                finished_at: UNIX_EPOCH,
                duration: Duration::from_secs(1),
                exit_code: exit::OK,
                dry_run: false,
                report: Some(report),
                token_expiry: none,
                certificate_expiry: None,
                cluster: None,
            }
        }
        let none = BTreeMap::new();
        assert!(!encode(&run(&report, &none)).contains("argocd"));
        report.record_argocd("aws-ecr-token-123456789012-us-east-1", Outcome::Updated);
        let text = encode(&run(&report, &none));
        for line in [
            "ecr_refresh_argocd_secrets{outcome=\"updated\"} 1",
            "ecr_refresh_argocd_secrets{outcome=\"failed\"} 0",
            "# TYPE ecr_refresh_argocd_secrets gauge",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} in:\n{text}");
        }
    }
}
