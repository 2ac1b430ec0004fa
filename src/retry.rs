//! One request to the API server: bounded retries with backoff and jitter on what a retry can
//! fix (500, 502, connection errors and reads that time out), and a deadline on each call.
//!
//! Two timeouts: the transport gives up on one HTTP attempt after ATTEMPT_TIMEOUT (a retryable
//! error here); a whole call, all its attempts and the client's own throttling retries
//! included, after CALL_TIMEOUT. 429, 503 and 504 are retried inside the client, where the
//! Retry-After header is seen (cluster.rs): retrying them here too would multiply the attempts.

use std::future::Future;
use std::time::Duration;

use kube::core::Status;
use tracing::debug;

/// How long one HTTP attempt may wait for the server (connect, read, write).
pub const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(15);
/// How long one call may take, every attempt and Retry-After wait included.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(60);
const ATTEMPTS: u32 = 5;
const BASE_DELAY: Duration = Duration::from_millis(100);
const MAX_DELAY: Duration = Duration::from_secs(5);

/// Why a request failed, after any retries.
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    #[error("{} (HTTP {}, {})", .0.message, .0.code, .0.reason)]
    Api(Box<Status>),
    #[error("no answer within {}s", .0.as_secs())]
    Timeout(Duration),
    #[error("{}", crate::logging::error_chain(.0))]
    Client(kube::Error),
}

impl RequestError {
    pub fn status(&self) -> Option<&Status> {
        match self {
            Self::Api(status) => Some(status),
            _ => None,
        }
    }

    pub fn code(&self) -> Option<u16> {
        self.status().map(|s| s.code)
    }

    /// Whether another attempt may succeed.
    fn retryable(&self) -> bool {
        match self {
            Self::Api(s) => matches!(s.code, 500 | 502),
            Self::Timeout(_) => false,
            Self::Client(e) => matches!(e, kube::Error::HyperError(_) | kube::Error::Service(_)),
        }
    }
}

impl From<kube::Error> for RequestError {
    fn from(e: kube::Error) -> Self {
        match e {
            kube::Error::Api(status) => Self::Api(status),
            other => Self::Client(other),
        }
    }
}

/// Sends a request (`send` builds a fresh one per attempt), retrying what can be retried,
/// within CALL_TIMEOUT for all its attempts.
pub async fn send<T, F, Fut>(what: &'static str, send: F) -> Result<T, RequestError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, kube::Error>>,
{
    tokio::time::timeout(CALL_TIMEOUT, attempts(what, send))
        .await
        .unwrap_or(Err(RequestError::Timeout(CALL_TIMEOUT)))
}

async fn attempts<T, F, Fut>(what: &'static str, mut send: F) -> Result<T, RequestError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, kube::Error>>,
{
    let mut attempt = 1;
    loop {
        let error = match send().await {
            Ok(value) => return Ok(value),
            Err(e) => RequestError::from(e),
        };
        if !error.retryable() || attempt >= ATTEMPTS {
            return Err(error);
        }
        let delay = backoff(attempt);
        debug!(request = what, attempt, delay_ms = delay.as_millis() as u64, error = %error, "retrying");
        tokio::time::sleep(delay).await;
        attempt += 1;
    }
}

/// Exponential backoff with jitter: a random delay in the upper half of the step.
fn backoff(attempt: u32) -> Duration {
    let step = BASE_DELAY
        .saturating_mul(1 << attempt.min(16))
        .min(MAX_DELAY);
    step / 2 + step.mul_f64(fastrand::f64() / 2.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_and_is_capped() {
        for attempt in 1..10 {
            let step = BASE_DELAY.saturating_mul(1 << attempt).min(MAX_DELAY);
            let d = backoff(attempt);
            assert!(d >= step / 2 && d <= step, "attempt {attempt}: {d:?}");
        }
        assert!(backoff(30) <= MAX_DELAY);
    }

    fn status(code: u16) -> RequestError {
        RequestError::Api(Status::failure("x", "y").with_code(code).boxed())
    }

    #[test]
    fn only_what_a_retry_can_fix_is_retried_here() {
        // 429, 503 and 504 are the client's retry layer's, with Retry-After.
        for (code, retried) in [
            (500, true),
            (502, true),
            (429, false),
            (503, false),
            (504, false),
            (404, false),
            (409, false),
            (410, false),
            (422, false),
            (403, false),
        ] {
            assert_eq!(status(code).retryable(), retried, "{code}");
        }
        assert!(
            !RequestError::Timeout(CALL_TIMEOUT).retryable(),
            "the call's own deadline is final"
        );
    }
}
