//! One run: the cluster, then every selected namespace, ECR_REFRESH_CONCURRENCY at a time, as
//! the namespace pages arrive: each Secret is read, and written only if it is due, with tokens
//! fetched when the first namespace turns out to be due. Then the summary and the exit code.

mod lines;
mod stop;
mod tokens;

use std::future::Future;
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use aws_config::SdkConfig;
use futures::channel::mpsc;
use futures::{SinkExt, StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Secret, ServiceAccount};
use kube::{Api, Client};
use tokio::sync::OnceCell;
use tracing::{error, info, warn};

use crate::aws::ecr;
use crate::cluster::namespaces::{Candidate, Origin, Pages};
use crate::cluster::{client, events};
use crate::config::Config;
use crate::metrics;
use crate::pull_secret::due::{self, Decision, Policy, Registries};
use crate::pull_secret::service_accounts;
use crate::pull_secret::write::{self, SecretError, SkipReason, Written};
use crate::report::{self, AccountOutcome, Outcome, Report, Summary, exit};
use crate::termination::write_termination_message;
use lines::{log_left_undone, log_summary, log_written};
use stop::Stop;
pub use stop::{SHUTDOWN_GRACE, shutdown_signal};
use tokens::{TokenError, Tokens};

/// Why a run wrote nothing at all.
#[derive(Debug, thiserror::Error)]
enum Unavailable {
    /// Stopped (deadline or SIGTERM) before the first namespace: exit 1, as any stop.
    #[error("stopped before any namespace was written: {0}; the next run covers them")]
    Stopped(&'static str),
    /// No tokens. ServiceAccounts of namespaces that needed none (fresh Secrets) may have
    /// been given the Secret before the failure: `accounts_added` says which, so that the
    /// summary says what was written.
    #[error("{error}{}", accounts_note(.accounts_added))]
    Tokens {
        error: Arc<TokenError>,
        accounts_added: Vec<String>,
    },
    #[error("{0}")]
    Cluster(#[from] client::ClusterError),
    #[error("{0}")]
    Namespaces(#[from] crate::cluster::namespaces::NamespaceError),
}

/// What the exit-3 message adds when ServiceAccounts were written before the tokens failed.
fn accounts_note(added: &[String]) -> String {
    if added.is_empty() {
        String::new()
    } else {
        format!(
            "; no Secret was written, but the Secret was already added to the imagePullSecrets of \
             these ServiceAccounts (their namespaces' Secrets were fresh): {}",
            added.join(", ")
        )
    }
}

impl Unavailable {
    fn accounts_added(&self) -> &[String] {
        match self {
            Self::Tokens { accounts_added, .. } => accounts_added,
            _ => &[],
        }
    }
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
                config.termination_log.as_deref(),
                &report.termination_message(&summary),
            )
            .await;
            let code = report.exit_code();
            push_metrics(config, code, started, Some(&report), &summary.token_expiry).await;
            code
        }
        Err(e) => {
            let code = match e {
                Unavailable::Stopped(_) => exit::FAILED,
                _ => exit::UNAVAILABLE,
            };
            let added = e.accounts_added();
            if added.is_empty() {
                error!(error = %e, exit_code = code, "nothing was written");
            } else {
                error!(
                    error = %e,
                    exit_code = code,
                    service_accounts_added = %added.join(","),
                    "no Secret was written; ServiceAccounts were"
                );
            }
            write_termination_message(
                config.termination_log.as_deref(),
                &report::termination_error(code, &e.to_string()),
            )
            .await;
            push_metrics(config, code, started, None, &Default::default()).await;
            code
        }
    }
}

/// The run's metrics to the Pushgateway, when one is configured.
async fn push_metrics(
    config: &Config,
    exit_code: u8,
    started: Instant,
    report: Option<&Report>,
    token_expiry: &std::collections::BTreeMap<String, SystemTime>,
) {
    if let Some(gateway) = &config.pushgateway {
        let run = metrics::RunEnd {
            finished_at: SystemTime::now(),
            duration: started.elapsed(),
            exit_code,
            dry_run: config.dry_run,
            report,
            token_expiry,
        };
        metrics::push(gateway, &run).await;
    }
}

/// What a run has in hand before its first namespace.
struct Prepared<'a> {
    sdk: SdkConfig,
    client: Client,
    pages: Pages<'a>,
    first: Vec<Candidate>,
}

/// What one namespace needs besides its name.
struct Shared<'a> {
    config: &'a Config,
    client: &'a Client,
    policy: Policy<'a>,
    tokens: &'a Tokens<'a>,
    stop: &'a Stop,
    events: &'a events::Events,
    /// `namespace/account` of every ServiceAccount given the Secret so far.
    accounts_added: std::sync::Mutex<Vec<String>>,
}

/// The cluster and the first namespace page, then every namespace.
/// A stop before the first namespace ends the run at once: nothing is in flight.
async fn refresh(config: &Config, stop: Stop) -> Result<(Report, Summary), Unavailable> {
    let prepared = tokio::select! {
        prepared = prepare(config) => prepared?,
        reason = stop.stopping() => return Err(Unavailable::Stopped(reason)),
    };
    let tokens = Tokens {
        sdk: &prepared.sdk,
        config,
        cell: OnceCell::new(),
    };
    let region = prepared.sdk.region().map(|r| r.as_ref().to_owned());
    // Every host a write puts in `auths`: a Secret holding exactly these is not due for them.
    let written = ecr::with_twins(config.registries.clone(), config.dual_stack).expect(
        "Config::from_env refuses DUAL_STACK for a configured registry without a dual-stack form",
    );
    let registries = if config.registries.is_empty() {
        Registries::Own {
            region: region.as_deref(),
            dual_stack: config.dual_stack,
        }
    } else {
        Registries::Configured(&written)
    };
    let events = events::Events::new(
        &prepared.client,
        config.events,
        config.dry_run,
        config.secret_name.as_str(),
    );
    let shared = Shared {
        config,
        client: &prepared.client,
        policy: Policy {
            renew_before: config.renew_before,
            registries,
        },
        tokens: &tokens,
        stop: &stop,
        events: &events,
        accounts_added: std::sync::Mutex::default(),
    };
    let report = refresh_all(&shared, prepared.pages, prepared.first).await;
    // Failures past the Events' limit are counted, even if the tokens then failed the run.
    events.summarize().await;
    let report = report.map_err(|error| {
        let mut added = shared
            .accounts_added
            .lock()
            .map(|mut a| std::mem::take(&mut *a))
            .unwrap_or_default();
        added.sort();
        Unavailable::Tokens {
            error,
            accounts_added: added,
        }
    })?;
    // No token fetched (nothing was due): no registries or expiry to report.
    let summary = tokens
        .fetched()
        .map(|f| Summary {
            registries: f.tokens.registries(),
            token_expires_at: f.expires_at.clone(),
            elapsed_ms: 0,
            token_expiry: f.tokens.expiry_by_token(),
        })
        .unwrap_or_default();
    Ok((report, summary))
}

async fn prepare(config: &Config) -> Result<Prepared<'_>, Unavailable> {
    // Loaded, not used yet (no ECR call): the region, and the credentials for when a Secret
    // turns out to be due.
    let sdk = crate::aws::sdk::load(config.assume_role.as_ref()).await;
    // The caller's own registry is found in the region: without one, no Secret can be judged
    // or written. Said before the cluster is asked anything.
    if config.registries.is_empty() && sdk.region().is_none() {
        let no_region = TokenError::Token(ecr::EcrError::NoRegion);
        return Err(Unavailable::Tokens {
            error: Arc::new(no_region),
            accounts_added: Vec::new(),
        });
    }
    let (client, url) = client::connect().await?;
    let version = client::check(&client, &url).await?;
    info!(api_server = %url, %version, dry_run = config.dry_run, "connected");

    // The first page decides whether the cluster lets us in at all: nothing is written before it.
    let mut pages = Pages::new(client.clone(), &config.selection);
    let first = pages.next().await.transpose()?.unwrap_or_default();
    Ok(Prepared {
        sdk,
        client,
        pages,
        first,
    })
}

/// Every selected namespace, streamed from the list pages into the writers. Ends at once,
/// with the error, if the tokens cannot be had: nothing has been written then, and nothing is.
async fn refresh_all(
    shared: &Shared<'_>,
    mut pages: Pages<'_>,
    first: Vec<Candidate>,
) -> Result<Report, Arc<TokenError>> {
    let config = shared.config;
    let stop = shared.stop;
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
        Ok((undone, listing_incomplete))
    };

    let writers = rx
        .map(|candidate| refresh_namespace(shared, candidate))
        .buffer_unordered(config.concurrency)
        .try_fold(Report::default(), |mut report, done| async move {
            report.record(&done.namespace, done.outcome, &done.accounts);
            report.record_expiry(done.expires_at);
            report.unknown += usize::from(done.unknown);
            if done.reason == Some(SkipReason::NamespaceNotFound) {
                report.not_found.push(done.namespace);
            }
            Ok(report)
        });

    // A token failure drops the producer and every namespace in flight: none of them can have
    // written, since a write needs the tokens.
    let ((undone, listing_incomplete), mut report) = futures::try_join!(producer, writers)?;
    let reason = stop.reason().unwrap_or("stopped");
    for namespace in undone {
        log_left_undone(&namespace, config.secret_name.as_str(), reason);
        report.record(&namespace, Outcome::Failed, &[]);
        report.unknown += 1;
    }
    report.listing_incomplete = listing_incomplete;
    // In name order, not the order the writes happened to finish in.
    report.not_found.sort();
    Ok(report)
}

/// What one namespace came to, for the report.
struct Done {
    namespace: String,
    outcome: Outcome,
    accounts: Vec<AccountOutcome>,
    /// Why it was skipped.
    reason: Option<SkipReason>,
    /// When its Secret stops working, if it holds a token after the run (written, fresh, or
    /// read and left as it was).
    expires_at: Option<SystemTime>,
    /// Its Secret was never read (or its write was abandoned): what it holds is not known.
    unknown: bool,
}

impl Done {
    /// Failed before its Secret was read: nothing is known of it.
    fn failed(namespace: String) -> Self {
        Self {
            namespace,
            outcome: Outcome::Failed,
            accounts: Vec::new(),
            reason: None,
            expires_at: None,
            unknown: true,
        }
    }

    fn skipped(namespace: String, reason: SkipReason) -> Self {
        Self {
            outcome: Outcome::Skipped,
            reason: Some(reason),
            unknown: false,
            ..Self::failed(namespace)
        }
    }
}

/// One namespace, unless the run is stopping; abandoned if the shutdown grace runs out.
async fn refresh_namespace(
    shared: &Shared<'_>,
    candidate: Candidate,
) -> Result<Done, Arc<TokenError>> {
    let namespace = candidate.name;
    let secret = shared.config.secret_name.as_str();
    if let Some(reason) = shared.stop.reason() {
        log_left_undone(&namespace, secret, reason);
        return Ok(Done::failed(namespace));
    }
    // A namespace being deleted takes its Secret with it; one named but not there has none.
    let skip = match (candidate.terminating, candidate.origin) {
        (true, _) => Some(SkipReason::NamespaceTerminating),
        (false, Origin::Missing) => Some(SkipReason::NamespaceNotFound),
        (false, Origin::Named | Origin::Listed) => None,
    };
    if let Some(reason) = skip {
        log_written(&namespace, secret, &Written::skipped(reason), "", "");
        return Ok(Done::skipped(namespace, reason));
    }
    let done = tokio::select! {
        done = write_namespace(shared, &namespace, candidate.origin) => done?,
        () = shared.stop.abandoned() => {
            let error = format!(
                "interrupted: still in flight {}s after the stop; the write may or may not have landed, \
                 the next run covers it",
                SHUTDOWN_GRACE.as_secs()
            );
            error!(namespace = namespace.as_str(), secret, outcome = Outcome::Failed.as_str(), uid_before = "-", uid_after = "-", %error, "namespace failed");
            Done::failed(namespace)
        }
    };
    Ok(done)
}

/// Why one namespace's Secret was not refreshed.
enum NotDone {
    /// With what the run had read of the Secret before it failed.
    Failed(SecretError, Seen),
    /// No tokens: the whole run ends.
    Tokens(Arc<TokenError>),
}

/// What a namespace's read showed, kept for when a later step fails: the Secret is then as it
/// was read, its expiry still the one that says when its pulls fail.
#[derive(Debug, Clone, Default)]
struct Seen {
    read: bool,
    uid: Option<String>,
    expires_at: Option<SystemTime>,
}

/// Reads the Secret; if it is due, gets the tokens and writes it.
async fn refresh_secret(
    shared: &Shared<'_>,
    namespace: &str,
    origin: Origin,
) -> Result<Written, NotDone> {
    let config = shared.config;
    let api: Api<Secret> = Api::namespaced(shared.client.clone(), namespace);
    let current = write::get(&api, &config.secret_name)
        .await
        .map_err(|e| NotDone::Failed(e, Seen::default()))?;
    let seen = Seen {
        read: true,
        uid: current.as_ref().and_then(|s| s.metadata.uid.clone()),
        expires_at: current.as_ref().and_then(due::recorded_expiry),
    };
    let failed = |e| NotDone::Failed(e, seen.clone());
    let read = write::judge(current, &shared.policy, SystemTime::now()).map_err(failed)?;
    let due = match read.decision {
        Decision::Fresh { expires_at, due_at } => {
            return Ok(Written::fresh(seen.uid.clone(), expires_at, due_at));
        }
        Decision::Due(due) => due,
    };
    // A name given literally may not exist, and reading a Secret there is just a 404 for the
    // Secret. Before the first token, ask the namespace (a dry-run create), so that a typo in
    // ECR_REFRESH_NAMESPACES costs no ECR call.
    if read.current.is_none()
        && origin == Origin::Named
        && shared.tokens.fetched().is_none()
        && write::namespace_missing(&api, &config.secret_name).await
    {
        return Ok(Written::skipped(SkipReason::NamespaceNotFound));
    }
    // A namespace in flight when the run stops still gets its tokens and its write, within
    // the shutdown grace, as any write in flight.
    let fetched = shared.tokens.get().await.map_err(NotDone::Tokens)?;
    let desired = fetched.desired(config);
    let mut written = write::write(&api, namespace, &desired, read.current)
        .await
        .map_err(failed)?;
    // Listed, then gone before its create: deleted during the run, not a name that is wrong.
    if origin == Origin::Listed && written.reason == Some(SkipReason::NamespaceNotFound) {
        written.reason = Some(SkipReason::NamespaceDeleted);
    }
    if written.outcome != Outcome::Skipped {
        written.due = Some(due.to_string());
    }
    Ok(written)
}

/// The Secret, then the ServiceAccounts; one log line, and a Warning Event on failure.
async fn write_namespace(
    shared: &Shared<'_>,
    namespace: &str,
    origin: Origin,
) -> Result<Done, Arc<TokenError>> {
    let config = shared.config;
    let secret = config.secret_name.as_str();
    let written = match refresh_secret(shared, namespace, origin).await {
        Ok(written) => written,
        Err(NotDone::Tokens(e)) => return Err(e),
        Err(NotDone::Failed(e, seen)) => {
            error!(namespace, secret, outcome = Outcome::Failed.as_str(), uid_before = "-", uid_after = "-", error = %e, "namespace failed");
            let failure = events::Failure {
                namespace,
                secret,
                // The Secret's, whenever it exists and was read, whatever failed after.
                uid: seen.uid.as_deref().or(e.uid()),
                reason: e.event_reason(),
                note: format!("ecr-refresh could not refresh image-pull Secret {secret}: {e}"),
            };
            shared.events.failed(failure).await;
            return Ok(Done {
                expires_at: seen.expires_at,
                unknown: !seen.read,
                ..Done::failed(namespace.to_owned())
            });
        }
    };
    let mut accounts = Vec::new();
    let mut account_notes = Vec::new();
    let mut account_errors = Vec::new();
    // A fresh Secret's ServiceAccounts are checked too (a read each): one created since the
    // Secret was written gets it within a run.
    if written.outcome != Outcome::Skipped {
        let api: Api<ServiceAccount> = Api::namespaced(shared.client.clone(), namespace);
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
            if outcome == AccountOutcome::Added
                && let Ok(mut added) = shared.accounts_added.lock()
            {
                added.push(format!("{namespace}/{account}"));
            }
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
    if !account_errors.is_empty() {
        let failure = events::Failure {
            namespace,
            secret,
            uid: written.uid_after.as_deref(),
            reason: events::SERVICE_ACCOUNT_FAILED,
            note: format!(
                "ecr-refresh refreshed image-pull Secret {secret}, but could not add it to imagePullSecrets: {}",
                account_errors.join("; ")
            ),
        };
        shared.events.failed(failure).await;
    }
    Ok(Done {
        namespace: namespace.to_owned(),
        outcome: written.outcome,
        accounts,
        reason: written.reason,
        expires_at: written.expires_at,
        unknown: false,
    })
}
