//! What both modes' metrics share: the push to a Prometheus Pushgateway, the gauges' helpers,
//! and the certificate's expiry. Each mode's metrics live beside it (`refresh::metrics`,
//! `check::metrics`), each pushed under its own job.
//!
//! A CronJob has no endpoint to scrape; the Pushgateway keeps each group's last push for
//! Prometheus to scrape. PUT replaces every metric in a group; POST only those it sends.
//!
//! The push is best effort: a gateway that is down, hung or refusing costs one warning line
//! and at most PUSH_TIMEOUT, never the exit code.

use std::sync::atomic::AtomicU64;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use prometheus_client::encoding::prometheus_text;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use reqwest::Method;
use tracing::{debug, warn};

use crate::logging::error_chain;

/// The whole push, connect to answer. Well under the 10 s a refresh may lose to it.
pub const PUSH_TIMEOUT: Duration = Duration::from_secs(5);

/// A time as Unix seconds, as every timestamp gauge has it.
pub fn seconds(at: SystemTime) -> f64 {
    at.duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs_f64()
}

/// One gauge of a float value, registered.
pub fn gauge(registry: &mut Registry, name: &str, help: &str, value: f64) {
    let g: Gauge<f64, AtomicU64> = Gauge::default();
    g.set(value);
    registry.register(name, help, g);
}

/// `ecr_refresh_credentials_certificate_expiry_timestamp_seconds`, in a registry prefixed
/// `ecr_refresh`: refresh and check push the same name (each under its own job), since the
/// Secrets' freshness hangs on it (the alert EcrRefreshCertificateExpiringSoon).
pub fn certificate_expiry(registry: &mut Registry, at: Option<SystemTime>) {
    if let Some(at) = at {
        gauge(
            registry,
            "credentials_certificate_expiry_timestamp_seconds",
            "When the certificate the run gets its AWS credentials with (IAM Roles Anywhere) \
             expires, in Unix seconds",
            seconds(at),
        );
    }
}

#[derive(Debug, thiserror::Error)]
enum PushError {
    #[error("could not build the HTTP client: {0}")]
    Client(String),
    #[error("{0}")]
    Send(String),
    #[error("the gateway answered HTTP {status}: {body}")]
    Refused { status: u16, body: String },
}

/// Pushes metrics already encoded to a group's URL: PUT (`replace`) replaces the group, POST
/// only the metrics it sends. Never fails the run: a push that fails is one warning line.
pub async fn push(url: &str, replace: bool, body: String) {
    let method = if replace { Method::PUT } else { Method::POST };
    match send(url, method.clone(), body).await {
        Ok(()) => debug!(pushgateway = %url, method = method.as_str(), "metrics pushed"),
        Err(e) => warn!(
            pushgateway = %url,
            method = method.as_str(),
            error = %e,
            "could not push the run's metrics; the run itself is unaffected: check \
             ECR_REFRESH_PUSHGATEWAY_URL and that the gateway is reachable from this pod"
        ),
    }
}

async fn send(url: &str, method: Method, body: String) -> Result<(), PushError> {
    let client = reqwest::Client::builder()
        .timeout(PUSH_TIMEOUT)
        .connect_timeout(PUSH_TIMEOUT)
        .build()
        .map_err(|e| PushError::Client(error_chain(&e)))?;
    let response = client
        .request(method, url)
        .header(reqwest::header::CONTENT_TYPE, prometheus_text::CONTENT_TYPE)
        .body(body)
        .send()
        .await
        .map_err(|e| PushError::Send(error_chain(&e)))?;
    let status = response.status();
    if status.is_success() {
        return Ok(());
    }
    // The gateway says why in the body; a proxy may answer at length: keep a line of it.
    let text = response.text().await.unwrap_or_default();
    let body: String = text.trim().chars().take(300).collect();
    Err(PushError::Refused {
        status: status.as_u16(),
        body,
    })
}
