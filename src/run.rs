//! One run: tokens, then every selected namespace, ECR_REFRESH_CONCURRENCY at a time, as the
//! namespace pages arrive; then the summary and the exit code.

use std::future::Future;
use std::path::Path;
use std::time::{Duration, Instant};

use futures::channel::mpsc;
use futures::{SinkExt, StreamExt};
use k8s_openapi::api::core::v1::{Secret, ServiceAccount};
use kube::{Api, Client};
use tokio::sync::watch;
use tracing::{Level, error, info, warn};

use crate::config::Config;
use crate::namespaces::{Candidate, Pages};
use crate::report::{self, AccountOutcome, Outcome, Report, Summary, exit};
use crate::secret::{self, Desired, SkipReason, Written};
use crate::{cluster, ecr, login, service_accounts};

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

/// Why a run wrote nothing at all.
#[derive(Debug, thiserror::Error)]
enum Unavailable {
    /// Stopped (deadline or SIGTERM) before the first namespace: exit 1, as any stop.
    #[error("stopped before any namespace was written: {0}; the next run covers them")]
    Stopped(&'static str),
    #[error("no ECR token: {0}")]
    Token(#[from] ecr::EcrError),
    #[error("login check failed: {0}")]
    Login(#[from] login::LoginError),
    #[error("{0}")]
    Cluster(#[from] cluster::ClusterError),
    #[error("{0}")]
    Namespaces(#[from] crate::namespaces::NamespaceError),
}

/// Runs once and returns the process exit code.
pub async fn run(
    config: &Config,
    shutdown: impl Future<Output = &'static str> + Send + 'static,
) -> u8 {
    let started = Instant::now();
    match refresh(config, Stop::new(shutdown)).await {
        Ok((report, mut summary)) => {
            summary.elapsed_ms = started.elapsed().as_millis() as u64;
            log_summary(&report, &summary, config);
            write_termination_message(
                &config.termination_log,
                &report.termination_message(&summary),
            )
            .await;
            report.exit_code()
        }
        Err(e) => {
            let code = match e {
                Unavailable::Stopped(_) => exit::FAILED,
                _ => exit::UNAVAILABLE,
            };
            error!(error = %e, exit_code = code, "nothing was written");
            write_termination_message(
                &config.termination_log,
                &report::termination_error(code, &e.to_string()),
            )
            .await;
            code
        }
    }
}

/// What a run has in hand before its first write.
struct Prepared<'a> {
    tokens: ecr::Tokens,
    client: Client,
    pages: Pages<'a>,
    first: Vec<Candidate>,
}

/// Tokens, the login check, the cluster and the first namespace page, then every namespace.
/// A stop before the first write ends the run at once: nothing is in flight.
async fn refresh(config: &Config, stop: Stop) -> Result<(Report, Summary), Unavailable> {
    let prepared = tokio::select! {
        prepared = prepare(config) => prepared?,
        reason = stop.stopping() => return Err(Unavailable::Stopped(reason)),
    };
    let summary = Summary {
        registries: prepared.tokens.registries(),
        token_expires_at: prepared.tokens.expires_at(),
        elapsed_ms: 0,
    };
    let desired = Desired {
        name: &config.secret_name,
        credentials: prepared.tokens.credentials(),
        expires_at: summary.token_expires_at.clone(),
        dry_run: config.dry_run,
    };
    let report = refresh_all(
        config,
        &prepared.client,
        &desired,
        &stop,
        prepared.pages,
        prepared.first,
    )
    .await;
    Ok((report, summary))
}

async fn prepare(config: &Config) -> Result<Prepared<'_>, Unavailable> {
    let sdk = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
    let tokens = ecr::fetch(&sdk, &config.registries).await?;
    info!(
        registries = %tokens.registries().join(","),
        token_expires_at = %tokens.expires_at(),
        regions = tokens.0.len(),
        "ECR tokens fetched"
    );
    if config.verify_login {
        login::verify(&tokens).await?;
    }

    let (client, url) = cluster::connect().await?;
    let version = cluster::check(&client, &url).await?;
    info!(api_server = %url, %version, dry_run = config.dry_run, "connected");

    // The first page decides whether the cluster lets us in at all: nothing is written before it.
    let mut pages = Pages::new(client.clone(), &config.selection);
    let first = pages.next().await.transpose()?.unwrap_or_default();
    Ok(Prepared {
        tokens,
        client,
        pages,
        first,
    })
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
struct Stop(watch::Receiver<Phase>);

impl Stop {
    fn new(shutdown: impl Future<Output = &'static str> + Send + 'static) -> Self {
        let (tx, rx) = watch::channel(Phase::Running);
        tokio::spawn(async move {
            let reason = shutdown.await;
            warn!(
                reason,
                grace_s = SHUTDOWN_GRACE.as_secs(),
                "stopping: no new namespace is started; writes in flight may finish within the grace"
            );
            let _ = tx.send(Phase::Stopping(reason));
            tokio::time::sleep(SHUTDOWN_GRACE).await;
            let _ = tx.send(Phase::Abandoning(reason));
        });
        Self(rx)
    }

    fn reason(&self) -> Option<&'static str> {
        match *self.0.borrow() {
            Phase::Running => None,
            Phase::Stopping(reason) | Phase::Abandoning(reason) => Some(reason),
        }
    }

    /// Resolves once the run is stopping, with why.
    async fn stopping(&self) -> &'static str {
        let mut rx = self.0.clone();
        match rx.wait_for(|p| *p != Phase::Running).await.map(|p| *p) {
            Ok(Phase::Stopping(reason) | Phase::Abandoning(reason)) => reason,
            _ => std::future::pending().await,
        }
    }

    /// Resolves once writes in flight are to be abandoned.
    async fn abandoned(&self) {
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

/// Every selected namespace, streamed from the list pages into the writers.
async fn refresh_all(
    config: &Config,
    client: &Client,
    desired: &Desired<'_>,
    stop: &Stop,
    mut pages: Pages<'_>,
    first: Vec<Candidate>,
) -> Report {
    let (mut tx, rx) = mpsc::channel::<Candidate>(config.concurrency);

    let producer = async move {
        let mut undone: Vec<String> = Vec::new();
        let mut listing_incomplete = false;
        let mut page = Some(first);
        while let Some(candidates) = page.take() {
            for candidate in candidates {
                if stop.reason().is_some() {
                    undone.push(candidate.name);
                } else if let Err(e) = tx.send(candidate.clone()).await {
                    // The writers are gone, which a panic would do: count it anyway.
                    error!(error = %e, "namespace queue closed");
                    undone.push(candidate.name);
                }
            }
            if let Some(reason) = stop.reason() {
                if pages.has_more() {
                    listing_incomplete = true;
                    warn!(reason, "the namespace list was not read to its end");
                }
                break;
            }
            let next = tokio::select! {
                next = pages.next() => next,
                () = stop.abandoned() => {
                    warn!("the namespace list was not read to its end: the shutdown grace ran out");
                    listing_incomplete = true;
                    break;
                }
            };
            match next {
                None => {}
                Some(Ok(next)) => page = Some(next),
                Some(Err(e)) => {
                    error!(error = %e, "namespace list stopped: namespaces on later pages were not refreshed");
                    listing_incomplete = true;
                }
            }
        }
        drop(tx);
        (undone, listing_incomplete)
    };

    let writers = rx
        .map(|candidate| refresh_namespace(config, client, desired, stop, candidate))
        .buffer_unordered(config.concurrency)
        .fold(
            Report::default(),
            |mut report, (namespace, outcome, accounts)| async move {
                report.record(&namespace, outcome, &accounts);
                report
            },
        );

    let ((undone, listing_incomplete), mut report) = futures::join!(producer, writers);
    let reason = stop.reason().unwrap_or("stopped");
    for namespace in undone {
        log_left_undone(&namespace, config.secret_name.as_str(), reason);
        report.record(&namespace, Outcome::Failed, &[]);
    }
    report.listing_incomplete = listing_incomplete;
    report
}

/// One namespace, unless the run is stopping; abandoned if the shutdown grace runs out.
async fn refresh_namespace(
    config: &Config,
    client: &Client,
    desired: &Desired<'_>,
    stop: &Stop,
    candidate: Candidate,
) -> (String, Outcome, Vec<AccountOutcome>) {
    let namespace = candidate.name;
    let secret = config.secret_name.as_str();
    if let Some(reason) = stop.reason() {
        log_left_undone(&namespace, secret, reason);
        return (namespace, Outcome::Failed, Vec::new());
    }
    if candidate.terminating {
        let written = Written::skipped(SkipReason::NamespaceTerminating);
        log_written(&namespace, secret, &written, "", "");
        return (namespace, Outcome::Skipped, Vec::new());
    }
    let (outcome, accounts) = tokio::select! {
        done = write_namespace(config, client, desired, &namespace) => done,
        () = stop.abandoned() => {
            let error = format!(
                "interrupted: still in flight {}s after the stop; the write may or may not have landed, \
                 the next run covers it",
                SHUTDOWN_GRACE.as_secs()
            );
            error!(%namespace, secret, outcome = %Outcome::Failed, %error, "namespace failed");
            (Outcome::Failed, Vec::new())
        }
    };
    (namespace, outcome, accounts)
}

/// The Secret, then the ServiceAccounts; one log line.
async fn write_namespace(
    config: &Config,
    client: &Client,
    desired: &Desired<'_>,
    namespace: &str,
) -> (Outcome, Vec<AccountOutcome>) {
    let secret = config.secret_name.as_str();
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let written = match secret::refresh(&api, namespace, desired).await {
        Ok(written) => written,
        Err(e) => {
            error!(namespace, secret, outcome = %Outcome::Failed, uid_before = "-", uid_after = "-", error = %e, "namespace failed");
            return (Outcome::Failed, Vec::new());
        }
    };
    let mut accounts = Vec::new();
    let mut account_notes = Vec::new();
    let mut account_errors = Vec::new();
    if written.outcome != Outcome::Skipped {
        let api: Api<ServiceAccount> = Api::namespaced(client.clone(), namespace);
        for account in &config.service_accounts {
            let outcome =
                match service_accounts::attach(&api, account, &config.secret_name, config.dry_run)
                    .await
                {
                    Ok(outcome) => outcome,
                    Err(e) => {
                        account_errors.push(e.to_string());
                        AccountOutcome::Failed
                    }
                };
            accounts.push(outcome);
            account_notes.push(format!("{account}:{}", outcome.as_str()));
        }
    }
    log_written(
        namespace,
        secret,
        &written,
        &account_notes.join(","),
        &account_errors.join("; "),
    );
    (written.outcome, accounts)
}

fn log_left_undone(namespace: &str, secret: &str, reason: &str) {
    let error = format!("left undone: {reason}; the next run covers it");
    error!(namespace, secret, outcome = %Outcome::Failed, %error, "namespace failed");
}

/// The namespace's one line: the level says how it went, the fields what happened.
fn log_written(namespace: &str, secret: &str, w: &Written, accounts: &str, account_error: &str) {
    let uid_before = w.uid_before.as_deref().unwrap_or("-");
    let uid_after = w.uid_after.as_deref().unwrap_or("-");
    let outcome = w.outcome.as_str();
    let reason = w.reason.map(SkipReason::as_str);
    let message = match (w.outcome, w.reason) {
        (Outcome::Created, _) => "Secret created",
        (Outcome::Updated, _) if w.removed_last_applied => {
            "Secret updated in place; removed kubectl's last-applied-configuration annotation, which held a copy of the old password"
        }
        (Outcome::Updated, _) => "Secret updated in place",
        (Outcome::Recreated, _) => {
            "Secret was deleted during the run; created it fresh with the new token"
        }
        (Outcome::WouldCreate, _) => "dry run: Secret would be created",
        (Outcome::WouldUpdate, _) => "dry run: Secret would be updated in place",
        (Outcome::Skipped, Some(SkipReason::NamespaceNotFound)) => {
            "namespace skipped: it does not exist"
        }
        (Outcome::Skipped, _) => "namespace skipped",
        (Outcome::Failed, _) => "namespace failed",
    };
    // Fields that say nothing in the common case are left out of the line.
    let service_accounts = (!accounts.is_empty()).then_some(accounts);
    let kept_entries = (w.kept_entries > 0).then_some(w.kept_entries);
    let dropped = w.dropped_entries.join(",");
    let dropped_entries = (!dropped.is_empty()).then_some(dropped.as_str());
    let warning = w.warning.as_deref();
    let error = (!account_error.is_empty()).then_some(account_error);
    macro_rules! line {
        ($level:expr) => {
            tracing::event!(
                $level,
                namespace,
                secret,
                outcome,
                uid_before,
                uid_after,
                reason,
                service_accounts,
                kept_entries,
                dropped_entries,
                warning,
                error,
                "{message}"
            )
        };
    }
    if error.is_some() {
        line!(Level::ERROR);
    } else if warning.is_some() || w.reason == Some(SkipReason::NamespaceNotFound) {
        line!(Level::WARN);
    } else {
        line!(Level::INFO);
    }
}

fn log_summary(report: &Report, summary: &Summary, config: &Config) {
    let message = if report.exit_code() == exit::OK {
        "run complete"
    } else {
        "run finished with failures"
    };
    let sa = |outcome| report.service_accounts.get(&outcome).copied().unwrap_or(0);
    info!(
        namespaces = report.total(),
        created = report.count(Outcome::Created),
        updated = report.count(Outcome::Updated),
        recreated = report.count(Outcome::Recreated),
        skipped = report.count(Outcome::Skipped),
        failed = report.count(Outcome::Failed),
        // Namespaces whose Secret was written but a ServiceAccount failed count here too.
        namespaces_failed = report.failed.len(),
        would_write = report.count(Outcome::WouldCreate) + report.count(Outcome::WouldUpdate),
        sa_added = sa(AccountOutcome::Added),
        sa_present = sa(AccountOutcome::Present),
        sa_missing = sa(AccountOutcome::Missing),
        sa_would_add = sa(AccountOutcome::WouldAdd),
        sa_failed = sa(AccountOutcome::Failed),
        listing_incomplete = report.listing_incomplete,
        dry_run = config.dry_run,
        registries = %summary.registries.join(","),
        token_expires_at = %summary.token_expires_at,
        elapsed_ms = summary.elapsed_ms,
        "{message}"
    );
}

/// The outcome where `kubectl describe pod` shows it; a run outside a pod has no such file.
pub async fn write_termination_message(path: &Path, message: &str) {
    if let Err(e) = tokio::fs::write(path, message).await {
        tracing::debug!(path = %path.display(), error = %e, "termination message not written");
    }
}
