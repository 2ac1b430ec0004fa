//! One run: tokens, then every selected namespace, ECR_REFRESH_CONCURRENCY at a time, as the
//! namespace pages arrive; then the summary and the exit code.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use futures::channel::mpsc;
use futures::{SinkExt, StreamExt};
use k8s_openapi::api::core::v1::{Secret, ServiceAccount};
use kube::{Api, Client};
use tracing::{error, info, warn};

use crate::config::Config;
use crate::namespaces::{Candidate, Pages};
use crate::report::{AccountOutcome, Outcome, Report, Summary, exit};
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

/// Runs once and returns the process exit code.
pub async fn run(
    config: &Config,
    shutdown: impl Future<Output = &'static str> + Send + 'static,
) -> u8 {
    let started = Instant::now();
    let stop = Stop::new(shutdown);

    let sdk = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
    let tokens = match ecr::fetch(&sdk, &config.registries).await {
        Ok(tokens) => tokens,
        Err(e) => {
            error!(error = %e, "no ECR token: nothing was written");
            return exit::UNAVAILABLE;
        }
    };
    let registries = tokens.registries();
    let expires_at = tokens.expires_at();
    info!(registries = %registries.join(","), token_expires_at = %expires_at, regions = tokens.0.len(), "ECR tokens fetched");

    if config.verify_login
        && let Err(e) = login::verify(&tokens).await
    {
        error!(error = %e, "login check failed: nothing was written");
        return exit::UNAVAILABLE;
    }

    let (client, url) = match cluster::connect().await {
        Ok(connected) => connected,
        Err(e) => {
            error!(error = %e, "no Kubernetes connection: nothing was written");
            return exit::UNAVAILABLE;
        }
    };
    match cluster::check(&client, &url).await {
        Ok(version) => info!(api_server = %url, %version, dry_run = config.dry_run, "connected"),
        Err(e) => {
            error!(error = %e, "nothing was written");
            return exit::UNAVAILABLE;
        }
    }

    let desired = Desired {
        name: &config.secret_name,
        credentials: tokens.credentials(),
        expires_at: expires_at.clone(),
        dry_run: config.dry_run,
    };
    let report = match refresh_all(config, &client, &desired, &stop).await {
        Ok(report) => report,
        Err(e) => {
            error!(error = %e, "nothing was written");
            return exit::UNAVAILABLE;
        }
    };

    let summary = Summary {
        registries,
        token_expires_at: expires_at,
        elapsed_ms: started.elapsed().as_millis() as u64,
    };
    log_summary(&report, &summary, config);
    write_termination_message(config, &report, &summary).await;
    report.exit_code()
}

/// The stop flag: set once the shutdown future resolves. New namespaces are not started after
/// it; writes in flight finish.
struct Stop(Arc<AtomicBool>, Arc<std::sync::OnceLock<&'static str>>);

impl Stop {
    fn new(shutdown: impl Future<Output = &'static str> + Send + 'static) -> Self {
        let flag = Arc::new(AtomicBool::new(false));
        let why = Arc::new(std::sync::OnceLock::new());
        let (f, w) = (flag.clone(), why.clone());
        tokio::spawn(async move {
            let reason = shutdown.await;
            warn!(
                reason,
                "stopping: no new namespace is started; writes in flight finish"
            );
            let _ = w.set(reason);
            f.store(true, Ordering::SeqCst);
        });
        Self(flag, why)
    }

    fn reason(&self) -> Option<&'static str> {
        self.0
            .load(Ordering::SeqCst)
            .then(|| self.1.get().copied().unwrap_or("stopped"))
    }
}

/// Every selected namespace, streamed from the list pages into the writers.
async fn refresh_all(
    config: &Config,
    client: &Client,
    desired: &Desired<'_>,
    stop: &Stop,
) -> Result<Report, crate::namespaces::NamespaceError> {
    let (mut tx, rx) = mpsc::channel::<Candidate>(config.concurrency);
    let mut pages = Pages::new(client.clone(), &config.selection);

    // The first page decides whether the cluster lets us in at all: nothing is written before it.
    let first = match pages.next().await {
        None => Vec::new(),
        Some(Ok(page)) => page,
        Some(Err(e)) => return Err(e),
    };

    let producer = async move {
        let mut undone: Vec<String> = Vec::new();
        let mut listing_incomplete = false;
        let mut page = Some(first);
        while let Some(candidates) = page.take() {
            for candidate in candidates {
                if stop.reason().is_some() {
                    undone.push(candidate.name);
                } else if let Err(e) = tx.send(candidate).await {
                    // The writers are gone: only possible if they panicked.
                    error!(error = %e, "namespace queue closed");
                    listing_incomplete = true;
                }
            }
            if let Some(reason) = stop.reason() {
                if pages.has_more() {
                    listing_incomplete = true;
                    warn!(reason, "the namespace list was not read to its end");
                }
                break;
            }
            match pages.next().await {
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
    Ok(report)
}

/// One namespace: the Secret, then the ServiceAccounts; one log line.
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
        let reason = SkipReason::NamespaceTerminating.as_str();
        info!(%namespace, secret, outcome = %Outcome::Skipped, reason, "namespace skipped");
        return (namespace, Outcome::Skipped, Vec::new());
    }
    let api: Api<Secret> = Api::namespaced(client.clone(), &namespace);
    let written = match secret::refresh(&api, desired).await {
        Ok(written) => written,
        Err(e) => {
            error!(%namespace, secret, outcome = %Outcome::Failed, uid_before = "-", uid_after = "-", error = %e, "namespace failed");
            return (namespace, Outcome::Failed, Vec::new());
        }
    };
    let mut accounts = Vec::new();
    let mut account_notes = Vec::new();
    let mut account_errors = Vec::new();
    if written.outcome != Outcome::Skipped {
        let api: Api<ServiceAccount> = Api::namespaced(client.clone(), &namespace);
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
        &namespace,
        secret,
        &written,
        &account_notes.join(","),
        &account_errors.join("; "),
    );
    (namespace, written.outcome, accounts)
}

fn log_left_undone(namespace: &str, secret: &str, reason: &str) {
    let error = format!("left undone: {reason}; the next run covers it");
    error!(namespace, secret, outcome = %Outcome::Failed, %error, "namespace failed");
}

fn log_written(namespace: &str, secret: &str, w: &Written, accounts: &str, account_error: &str) {
    let uid_before = w.uid_before.as_deref().unwrap_or("-");
    let uid_after = w.uid_after.as_deref().unwrap_or("-");
    let outcome = w.outcome.as_str();
    let message = match w.outcome {
        Outcome::Created => "Secret created",
        Outcome::Updated if w.removed_last_applied => {
            "Secret updated in place; removed kubectl's last-applied-configuration annotation, which held a copy of the old password"
        }
        Outcome::Updated => "Secret updated in place",
        Outcome::Recreated => {
            "Secret was deleted during the run; created it fresh with the new token"
        }
        Outcome::WouldCreate => "dry run: Secret would be created",
        Outcome::WouldUpdate => "dry run: Secret would be updated in place",
        Outcome::Skipped => {
            let reason = w.reason.map_or("-", SkipReason::as_str);
            if w.reason == Some(SkipReason::NamespaceNotFound) {
                warn!(
                    namespace,
                    secret, outcome, reason, "namespace skipped: it does not exist"
                );
            } else {
                info!(namespace, secret, outcome, reason, "namespace skipped");
            }
            return;
        }
        Outcome::Failed => "namespace failed",
    };
    // Fields that say nothing in the common case are left out of the line.
    let accounts = (!accounts.is_empty()).then_some(accounts);
    let kept_entries = (w.kept_entries > 0).then_some(w.kept_entries);
    let dropped = w.dropped_entries.join(",");
    let dropped_entries = (!dropped.is_empty()).then_some(dropped.as_str());
    if account_error.is_empty() {
        info!(
            namespace,
            secret,
            outcome,
            uid_before,
            uid_after,
            service_accounts = accounts,
            kept_entries,
            dropped_entries,
            "{message}"
        );
    } else {
        error!(
            namespace,
            secret,
            outcome,
            uid_before,
            uid_after,
            service_accounts = accounts,
            error = account_error,
            "{message}; a ServiceAccount failed"
        );
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
        would_write = report.count(Outcome::WouldCreate) + report.count(Outcome::WouldUpdate),
        sa_added = sa(AccountOutcome::Added),
        sa_present = sa(AccountOutcome::Present),
        sa_missing = sa(AccountOutcome::Missing),
        sa_failed = sa(AccountOutcome::Failed),
        listing_incomplete = report.listing_incomplete,
        dry_run = config.dry_run,
        registries = %summary.registries.join(","),
        token_expires_at = %summary.token_expires_at,
        elapsed_ms = summary.elapsed_ms,
        counts = %report.counts_text(),
        "{message}"
    );
}

/// The summary where `kubectl describe pod` shows it; a run outside a pod has no such file.
async fn write_termination_message(config: &Config, report: &Report, summary: &Summary) {
    let message = report.termination_message(summary);
    if let Err(e) = tokio::fs::write(&config.termination_log, message).await {
        tracing::debug!(path = %config.termination_log.display(), error = %e, "termination message not written");
    }
}
