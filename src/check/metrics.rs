//! A check's metrics, pushed under their own job (`ecr-refresh-check`, with the grouping
//! labels of ECR_REFRESH_PUSHGATEWAY_LABELS), so a check never replaces a refresh's metrics.
//! Every push replaces the group: a check's answer is whole each time.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::encoding::prometheus_text;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::Tally;
use super::findings::KINDS;
use crate::config::pushgateway::Pushgateway;
use crate::metrics::gauge;

/// The check's job on the Pushgateway.
pub(super) const JOB: &str = "ecr-refresh-check";

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabel {
    kind: &'static str,
}

fn count(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// The check's metrics in the Prometheus text format: its own under `ecr_refresh_check_`, and
/// the certificate's expiry under the name a refresh pushes it with.
pub(super) fn encode_check(
    exit_code: u8,
    duration: Duration,
    tally: Option<&Tally>,
    certificate_expiry: Option<SystemTime>,
) -> String {
    let mut root = Registry::with_prefix("ecr_refresh");
    crate::metrics::certificate_expiry(&mut root, certificate_expiry);
    let registry = root.sub_registry_with_prefix("check");
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs_f64();
    gauge(
        registry,
        "last_run_timestamp_seconds",
        "When the last check ended, in Unix seconds",
        now,
    );
    let code: Gauge = Gauge::default();
    code.set(i64::from(exit_code));
    registry.register(
        "last_run_exit_code",
        "The last check's exit code: 0 every namespace ok, 1 findings, 3 nothing checked",
        code,
    );
    gauge(
        registry,
        "duration_seconds",
        "How long the last check took",
        duration.as_secs_f64(),
    );
    if let Some(tally) = tally {
        let namespaces: Gauge = Gauge::default();
        namespaces.set(count(tally.namespaces));
        registry.register(
            "namespaces",
            "Namespaces the last check covered",
            namespaces,
        );
        let with: Gauge = Gauge::default();
        with.set(count(tally.with_findings.len()));
        registry.register(
            "namespaces_with_findings",
            "Namespaces where the last check found something that keeps pods from pulling",
            with,
        );
        let findings: Family<KindLabel, Gauge> = Family::default();
        for kind in KINDS {
            findings
                .get_or_create(&KindLabel { kind })
                .set(count(tally.kinds.get(kind).copied().unwrap_or(0)));
        }
        registry.register("findings", "Findings of the last check, by kind", findings);
    }
    let mut text = String::new();
    prometheus_text::encode(&mut text, &root).expect("writing to a String cannot fail");
    text
}

pub(super) async fn push(
    gateway: &Pushgateway,
    exit_code: u8,
    duration: Duration,
    tally: Option<&Tally>,
    certificate_expiry: Option<SystemTime>,
) {
    let body = encode_check(exit_code, duration, tally, certificate_expiry);
    crate::metrics::push(&gateway.group_url_for(JOB), true, body).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_check_pushes_the_certificate_s_expiry_under_the_refresh_s_name() {
        let at = UNIX_EPOCH + Duration::from_secs(4_000);
        let text = encode_check(0, Duration::from_secs(1), None, Some(at));
        assert!(
            text.contains("ecr_refresh_credentials_certificate_expiry_timestamp_seconds 4000.0"),
            "{text}"
        );
        assert!(
            text.contains("ecr_refresh_check_last_run_exit_code 0"),
            "{text}"
        );
        assert!(!encode_check(0, Duration::from_secs(1), None, None).contains("certificate"));
    }
}
