//! One request to the API server: retries with backoff and jitter on what a retry can fix, and
//! a deadline on each call.
//!
//! A connection that can't be made or is cut (refused, reset, closed mid-answer, a read that
//! times out) is how an API server restart or a load balancer failover looks: those are retried
//! until the call's deadline, so a run rides out an outage of tens of seconds. 500 and 502, and
//! other transport errors (TLS, a garbled answer), get ATTEMPTS tries.
//!
//! Two timeouts: the transport gives up on one HTTP attempt after ATTEMPT_TIMEOUT (a retryable
//! error here); a whole call, all its attempts and the client's own throttling retries
//! included, after CALL_TIMEOUT. 429, 503 and 504 are retried inside the client, where the
//! Retry-After header is seen (client.rs): retrying them here too would multiply the attempts.
//!
//! A 403 within RESTART_GRACE of a lost connection is retried too: a kube-apiserver that was
//! restarted serves requests as soon as it listens, before its RBAC authorizer has loaded the
//! roles, and answers them 403 for some seconds (tests/fake-cluster/REAL-SERVER.md).

use std::future::Future;
use std::time::Duration;

use kube::core::Status;
use tracing::debug;

/// How long one HTTP attempt may wait for the server (connect, read, write).
pub const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(15);
/// How long one call may take, every attempt and Retry-After wait included.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(60);
/// Tries for 500, 502 and transport errors that are not connection failures.
const ATTEMPTS: u32 = 5;
const BASE_DELAY: Duration = Duration::from_millis(100);
/// The longest wait between tries: an API server back from a restart is used within this.
const MAX_DELAY: Duration = Duration::from_secs(3);
/// How long after a lost connection a 403 is taken for a restarted API server that has not
/// loaded its RBAC roles yet, rather than a missing grant. kube-apiserver 1.37 answered
/// `RBAC: clusterrole.rbac.authorization.k8s.io "ecr-refresh" not found` for up to a few
/// seconds after it listened again, on 2 loaded cores; a grant that is really missing costs
/// at most this much more after a restart, and nothing at other times.
const RESTART_GRACE: Duration = Duration::from_secs(30);

/// When a call to each API server last lost its connection: that server may have restarted.
/// Keyed by the cluster a fleet's call is for ([`for_cluster`]); None, the one cluster of a
/// run without ECR_REFRESH_CLUSTERS (and the hub's).
static LAST_LOST: std::sync::Mutex<Vec<(Option<String>, tokio::time::Instant)>> =
    std::sync::Mutex::new(Vec::new());

tokio::task_local! {
    /// The cluster the calls of a future are for (a fleet's spoke).
    static CLUSTER: String;
}

/// `work`, whose calls are `cluster`'s: a lost connection to one spoke is no reason to retry
/// another's 403s as a restart's.
pub async fn for_cluster<F: Future>(cluster: String, work: F) -> F::Output {
    CLUSTER.scope(cluster, work).await
}

/// `work` for the same cluster as the caller's: for a task it spawns.
pub fn in_current_cluster<F: Future>(work: F) -> impl Future<Output = F::Output> {
    let cluster = current_cluster();
    async move {
        match cluster {
            Some(cluster) => CLUSTER.scope(cluster, work).await,
            None => work.await,
        }
    }
}

fn current_cluster() -> Option<String> {
    CLUSTER.try_with(Clone::clone).ok()
}

fn connection_lost_now() {
    let cluster = current_cluster();
    let mut last = LAST_LOST.lock().unwrap_or_else(|p| p.into_inner());
    let now = tokio::time::Instant::now();
    match last.iter_mut().find(|(c, _)| *c == cluster) {
        Some((_, at)) => *at = now,
        None => last.push((cluster, now)),
    }
}

/// Whether a connection to this call's API server was lost within RESTART_GRACE.
fn restarted_lately() -> bool {
    let cluster = current_cluster();
    LAST_LOST
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .iter()
        .any(|(c, at)| *c == cluster && at.elapsed() < RESTART_GRACE)
}

/// Why a request failed, after any retries.
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    #[error("{} (HTTP {}, {})", .0.message, .0.code, .0.reason)]
    Api(Box<Status>),
    #[error("no answer within {}s", .0.as_secs())]
    Timeout(Duration),
    #[error("{}", crate::logging::error_chain(.0))]
    Client(kube::Error),
    /// A retryable error, still there after every try the call had: its tries or its deadline
    /// ran out.
    #[error("{last} (gave up after {tries} tries in {}s)", .elapsed.as_secs())]
    GaveUp {
        tries: u32,
        elapsed: Duration,
        last: Box<RequestError>,
    },
}

impl RequestError {
    pub fn status(&self) -> Option<&Status> {
        match self {
            Self::Api(status) => Some(status),
            Self::GaveUp { last, .. } => last.status(),
            _ => None,
        }
    }

    pub fn code(&self) -> Option<u16> {
        self.status().map(|s| s.code)
    }

    /// Whether another attempt may succeed, and how many tries that is worth;
    /// `restarted_lately`: a connection was lost within RESTART_GRACE.
    fn retry(&self, restarted_lately: bool) -> Retry {
        match self {
            Self::Api(s) if matches!(s.code, 500 | 502) => Retry::Bounded,
            // Until the grace is over, not the call's deadline: see RESTART_GRACE.
            Self::Api(s) if s.code == 403 && restarted_lately => Retry::WhileRestarting,
            Self::Client(e) if lost_connection(e) => Retry::UntilDeadline,
            Self::Client(kube::Error::HyperError(_) | kube::Error::Service(_)) => Retry::Bounded,
            _ => Retry::No,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Retry {
    No,
    /// Up to ATTEMPTS tries.
    Bounded,
    /// Until the call's deadline: the server is (re)starting or out of reach for a while.
    UntilDeadline,
    /// While a connection was lost within RESTART_GRACE, within the call's deadline.
    WhileRestarting,
}

/// Whether the connection could not be made or was lost: refused, reset, closed before the
/// answer was complete, or timed out. Anywhere in the error's chain of causes, since kube, the
/// buffer layer and hyper each wrap it.
fn lost_connection(e: &(dyn std::error::Error + 'static)) -> bool {
    use std::io::ErrorKind;
    if let Some(io) = e.downcast_ref::<std::io::Error>() {
        if matches!(
            io.kind(),
            ErrorKind::ConnectionRefused
                | ErrorKind::ConnectionReset
                | ErrorKind::ConnectionAborted
                | ErrorKind::NotConnected
                | ErrorKind::BrokenPipe
                | ErrorKind::UnexpectedEof
                | ErrorKind::TimedOut
                | ErrorKind::HostUnreachable
                | ErrorKind::NetworkUnreachable
                | ErrorKind::AddrNotAvailable
        ) {
            return true;
        }
        // An io::Error's source() skips the error it wraps: look at that one too.
        if io.get_ref().is_some_and(|inner| lost_connection(inner)) {
            return true;
        }
    }
    if let Some(h) = e.downcast_ref::<hyper::Error>()
        && (h.is_incomplete_message()
            || h.is_closed()
            || h.is_canceled()
            || h.is_body_write_aborted()
            || h.is_timeout())
    {
        return true;
    }
    // Connecting failed: refused, DNS (a restarting cluster DNS), or the connect timeout.
    if e.downcast_ref::<hyper_util::client::legacy::Error>()
        .is_some_and(hyper_util::client::legacy::Error::is_connect)
    {
        return true;
    }
    e.source().is_some_and(lost_connection)
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
    send_within(what, CALL_TIMEOUT, send).await
}

/// [`send`], within `budget` for all its attempts: a fleet's first request to a spoke, where a
/// cluster that is down is that cluster's failure, not a restart to wait out.
pub async fn send_within<T, F, Fut>(
    what: &'static str,
    budget: Duration,
    mut send: F,
) -> Result<T, RequestError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, kube::Error>>,
{
    let started = tokio::time::Instant::now();
    let deadline = started + budget;
    let mut attempt = 1;
    // What the try before this one failed with: when the deadline cuts a retry short, the
    // error that made us retry says more than the timeout.
    let mut previous: Option<RequestError> = None;
    // The last error, and that it was not for want of trying.
    let gave_up = |tries, last| RequestError::GaveUp {
        tries,
        elapsed: started.elapsed(),
        last: Box::new(last),
    };
    loop {
        let error = match tokio::time::timeout_at(deadline, send()).await {
            Ok(Ok(value)) => return Ok(value),
            Ok(Err(e)) => RequestError::from(e),
            Err(_) => {
                return Err(match previous {
                    Some(last) => gave_up(attempt, last),
                    None => RequestError::Timeout(budget),
                });
            }
        };
        if matches!(&error, RequestError::Client(e) if lost_connection(e)) {
            connection_lost_now();
        }
        let retry = error.retry(restarted_lately());
        if retry == Retry::No {
            return Err(error);
        }
        let delay = backoff(attempt);
        let out_of_tries = retry == Retry::Bounded && attempt >= ATTEMPTS;
        let out_of_time = tokio::time::Instant::now() + delay >= deadline;
        if out_of_tries || out_of_time {
            return Err(if attempt > 1 {
                gave_up(attempt, error)
            } else {
                error
            });
        }
        debug!(request = what, attempt, delay_ms = delay.as_millis() as u64, error = %error, "retrying");
        tokio::time::sleep(delay).await;
        previous = Some(error);
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

    #[tokio::test(start_paused = true)]
    async fn a_retry_the_deadline_cuts_short_reports_the_error_that_made_us_retry() {
        use std::io::{Error, ErrorKind};
        let mut tries = 0;
        let error = send("test", || {
            tries += 1;
            let first = tries == 1;
            async move {
                if first {
                    Err(kube::Error::Service(Box::new(Error::new(
                        ErrorKind::ConnectionRefused,
                        "refused",
                    ))))
                } else {
                    std::future::pending::<Result<(), kube::Error>>().await
                }
            }
        })
        .await
        .unwrap_err();
        let text = error.to_string();
        assert!(
            matches!(error, RequestError::GaveUp { tries: 2, .. }) && text.contains("refused"),
            "{text}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_first_try_without_an_answer_is_a_timeout() {
        let error = send("test", std::future::pending::<Result<(), kube::Error>>)
            .await
            .unwrap_err();
        assert!(
            matches!(error, RequestError::Timeout(CALL_TIMEOUT)),
            "{error}"
        );
    }

    #[test]
    fn backoff_grows_and_is_capped() {
        for attempt in 1..10 {
            let step = BASE_DELAY.saturating_mul(1 << attempt).min(MAX_DELAY);
            let d = backoff(attempt);
            assert!(d >= step / 2 && d <= step, "attempt {attempt}: {d:?}");
        }
        assert!(backoff(30) <= MAX_DELAY);
    }

    #[test]
    fn a_lost_connection_is_retried_until_the_deadline_other_transport_errors_a_few_times() {
        use std::io::{Error, ErrorKind};
        let io = |kind| RequestError::Client(kube::Error::Service(Box::new(Error::new(kind, "x"))));
        for kind in [
            ErrorKind::ConnectionRefused,
            ErrorKind::ConnectionReset,
            ErrorKind::UnexpectedEof,
            ErrorKind::TimedOut,
        ] {
            assert_eq!(io(kind).retry(false), Retry::UntilDeadline, "{kind:?}");
        }
        assert_eq!(io(ErrorKind::InvalidData).retry(false), Retry::Bounded);
        // Wrapped, as the buffer layer wraps the client's errors.
        let wrapped = kube::Error::Service(Box::new(Error::other(Error::new(
            ErrorKind::ConnectionRefused,
            "x",
        ))));
        assert_eq!(
            RequestError::Client(wrapped).retry(false),
            Retry::UntilDeadline
        );
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
            let expected = if retried { Retry::Bounded } else { Retry::No };
            assert_eq!(status(code).retry(false), expected, "{code}");
        }
        // Right after a lost connection, a 403 may be a restarted server's unsynced RBAC.
        assert_eq!(status(403).retry(true), Retry::WhileRestarting);
        assert_eq!(status(404).retry(true), Retry::No);
        assert_eq!(
            RequestError::Timeout(CALL_TIMEOUT).retry(false),
            Retry::No,
            "the call's own deadline is final"
        );
    }
}
