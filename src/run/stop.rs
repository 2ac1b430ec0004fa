//! The run's stop, for either mode: at the deadline (ECR_REFRESH_TIMEOUT) or on SIGTERM,
//! nothing new starts; namespaces in flight get SHUTDOWN_GRACE, then are abandoned.

use std::future::Future;
use std::time::Duration;

use tokio::sync::watch;
use tracing::warn;

/// Resolves when the run must stop starting work: at the deadline, or on SIGTERM / Ctrl-C.
/// Yields why.
pub async fn shutdown_signal(timeout: Duration) -> &'static str {
    let deadline = tokio::time::sleep(timeout);
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = deadline => "run deadline (ECR_REFRESH_TIMEOUT) reached",
        () = terminate => "SIGTERM received",
        _ = tokio::signal::ctrl_c() => "interrupted",
    }
}

/// How long writes in flight may go on after a stop before they are abandoned: inside the 30 s
/// a pod gets between SIGTERM and SIGKILL, with time left for the summary.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(20);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Running,
    /// No new namespace is started; writes in flight finish.
    Stopping(&'static str),
    /// The grace is over: writes still in flight are abandoned.
    Abandoning(&'static str),
}

/// The run's stop: set once the shutdown future resolves, then after SHUTDOWN_GRACE, abandon.
pub struct Stop(watch::Receiver<Phase>);

impl Stop {
    pub fn new(shutdown: impl Future<Output = &'static str> + Send + 'static) -> Self {
        let (tx, rx) = watch::channel(Phase::Running);
        tokio::spawn(async move {
            let reason = shutdown.await;
            warn!(
                reason,
                grace_s = SHUTDOWN_GRACE.as_secs(),
                "stopping: no new namespace is started; those in flight may finish within the grace"
            );
            let _ = tx.send(Phase::Stopping(reason));
            tokio::time::sleep(SHUTDOWN_GRACE).await;
            let _ = tx.send(Phase::Abandoning(reason));
        });
        Self(rx)
    }

    pub fn reason(&self) -> Option<&'static str> {
        match *self.0.borrow() {
            Phase::Running => None,
            Phase::Stopping(reason) | Phase::Abandoning(reason) => Some(reason),
        }
    }

    /// Resolves once the run is stopping, with why.
    pub async fn stopping(&self) -> &'static str {
        let mut rx = self.0.clone();
        match rx.wait_for(|p| *p != Phase::Running).await.map(|p| *p) {
            Ok(Phase::Stopping(reason) | Phase::Abandoning(reason)) => reason,
            _ => std::future::pending().await,
        }
    }

    /// Resolves once writes in flight are to be abandoned.
    pub async fn abandoned(&self) {
        let mut rx = self.0.clone();
        if rx
            .wait_for(|p| matches!(p, Phase::Abandoning(_)))
            .await
            .is_err()
        {
            std::future::pending::<()>().await;
        }
    }
}
