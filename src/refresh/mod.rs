//! One run: the cluster, then every selected namespace, ECR_REFRESH_CONCURRENCY at a time, as
//! the namespace pages arrive: each Secret is read (one list for all, or a GET each: cluster::reads),
//! and written only if it is due, with tokens
//! fetched when the first namespace turns out to be due. Then the summary and the exit code.

mod argocd;
mod fleet;
mod install_name;
mod lines;
pub mod metrics;
pub mod report;
mod secret;
mod tokens;

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use aws_config::SdkConfig;
use k8s_openapi::api::core::v1::{Secret, ServiceAccount};
use kube::{Api, Client};
use tracing::{info, warn};

use crate::aws::credentials::roles_anywhere::certificate_expiry;
use crate::cluster::client::{self, Target};
use crate::cluster::events;
use crate::cluster::namespaces::Origin;
use crate::cluster::reads::{Read, Reads, Work};
use crate::config::Config;
use crate::config::pushgateway::Pushgateway;
use crate::evict::Evictor;
use crate::owned::{self, Settled, SkipReason};
use crate::pull_secret::due::{Judged, Policy};
use crate::pull_secret::install::Install;
use crate::pull_secret::service_accounts;
use crate::pull_secret::write::{self, SecretError};
use crate::report::{AccountOutcome, Evictions, Outcome};
use crate::run::end::{Finished, Unavailable, end};
use crate::run::pages::{Driver, Visit, each_namespace};
use crate::run::stop::SHUTDOWN_GRACE;
use crate::run::stop::Stop;
use install_name::InstallName;
use lines::{log_dropped, log_failed, log_left_undone, log_summary, log_written};
use report::{Report, Summary};
use secret::{NotRefreshed, SecretKind};
use tokens::{Fetched, OnDemand, TokenError};

/// What a run came to, for its end.
struct Refreshed<'a> {
    report: Report,
    summary: Summary,
    config: &'a Config,
}

impl Finished for Refreshed<'_> {
    fn exit_code(&self) -> u8 {
        self.report.exit_code()
    }

    fn log_summary(&self, elapsed_ms: u64) {
        log_summary(&self.report, &self.summary(elapsed_ms), self.config);
    }

    fn termination_message(&self, elapsed_ms: u64) -> String {
        self.report.termination_message(&self.summary(elapsed_ms))
    }
}

impl Refreshed<'_> {
    /// The run-wide facts, with the run's time as its end measured it.
    fn summary(&self, elapsed_ms: u64) -> Summary {
        Summary {
            elapsed_ms,
            ..self.summary.clone()
        }
    }
}

/// Runs once and returns the process exit code.
pub async fn run(
    config: &Config,
    shutdown: impl Future<Output = &'static str> + Send + 'static,
) -> u8 {
    if let Some(clusters) = &config.clusters {
        return fleet::run(config, clusters, shutdown).await;
    }
    let started = Instant::now();
    let result = refresh(config, Stop::new(shutdown))
        .await
        .map(|(report, summary)| Refreshed {
            report,
            summary,
            config,
        });
    let push = async |gateway: &Pushgateway, exit_code, duration, done: Option<&Refreshed>| {
        let none = BTreeMap::new();
        let run = metrics::RunEnd {
            finished_at: SystemTime::now(),
            duration,
            exit_code,
            dry_run: config.dry_run,
            report: done.map(|d| &d.report),
            token_expiry: done.map_or(&none, |d| &d.summary.token_expiry),
            certificate_expiry: certificate_expiry(config.roles_anywhere.as_ref()),
            cluster: None,
        };
        metrics::push(gateway, &run).await;
    };
    end(config, started, result, "nothing was written", push).await
}

/// What a run has in hand before its first namespace.
struct Prepared<'a> {
    client: Client,
    pages: Reads<'a>,
    first: Vec<Work>,
}

/// What one namespace needs besides its name.
struct Shared<'a> {
    config: &'a Config,
    client: &'a Client,
    policy: Policy<'a>,
    /// The name the Secrets written record (asked of the API server when none is configured).
    install: InstallName<'a>,
    tokens: &'a OnDemand<'a>,
    stop: &'a Stop,
    events: &'a events::Events,
}

/// What the namespaces came to: the report, and what the steps after them need, gathered
/// from each namespace's `Done`.
#[derive(Default)]
struct Namespaces {
    report: Report,
    /// `namespace/account` of every ServiceAccount given the Secret: named in the exit-3
    /// message when the tokens then fail.
    accounts_added: Vec<String>,
    /// Registries whose entries a write removed (no longer configured), with the number of
    /// namespaces they left: the log says so once each, and their Argo CD Secrets are left alone.
    dropped_registries: BTreeMap<String, usize>,
    /// The namespaces whose Secret stands after the run (written, or fresh): where
    /// ECR_REFRESH_EVICT_STUCK_PODS looks for stuck pods.
    standing: Vec<String>,
    /// (namespace, account) of every ServiceAccount a dry run would have given the Secret:
    /// its eviction preview judges them as listing it, as the real run would.
    would_add: BTreeSet<(String, String)>,
}

impl Namespaces {
    /// One namespace's `Done`.
    fn record(&mut self, done: Done) {
        let report = &mut self.report;
        report.record(&done.namespace, done.outcome, &done.accounts);
        report.record_expiry(done.expires_at);
        report.unknown += usize::from(done.unknown);
        self.accounts_added.extend(
            done.added
                .iter()
                .map(|account| format!("{}/{account}", done.namespace)),
        );
        for host in done.dropped {
            *self.dropped_registries.entry(host).or_default() += 1;
        }
        for account in done.would_add {
            self.would_add.insert((done.namespace.clone(), account));
        }
        if done.standing {
            self.standing.push(done.namespace.clone());
        }
        if done.reason == Some(SkipReason::NamespaceNotFound) {
            report.not_found.push(done.namespace);
        }
    }
}

/// The AWS configuration, then the cluster the run runs in.
/// A stop before the first namespace ends the run at once: nothing is in flight.
async fn refresh(config: &Config, stop: Stop) -> Result<(Report, Summary), Unavailable> {
    let sdk = tokio::select! {
        sdk = load(config) => sdk?,
        reason = stop.stopping() => return Err(Unavailable::Stopped { reason, done: "written" }),
    };
    let tokens = OnDemand::new(&sdk, config);
    let target = Target::local().await?;
    let install = config.install.clone().or_else(Install::in_cluster);
    refresh_cluster(config, &tokens, &target, install, &stop).await
}

/// The region and credentials, loaded (no call yet): the run's, for every cluster.
async fn load(config: &Config) -> Result<SdkConfig, Unavailable> {
    let sdk =
        crate::aws::sdk::load(config.assume_role.as_ref(), config.roles_anywhere.as_ref()).await?;
    // The caller's own registry is found in the region: without one, no Secret can be judged
    // or written; and a role is assumed at STS in it. Said before the cluster is asked anything.
    if config.registries.is_empty() && sdk.region().is_none() {
        return Err(Unavailable::NoRegion);
    }
    if config.assume_role.is_some() && sdk.region().is_none() {
        return Err(Unavailable::AssumeRoleNoRegion);
    }
    Ok(sdk)
}

/// One cluster: its first namespace page, then every namespace, written as `install` records;
/// the tokens are the run's, shared by every cluster.
async fn refresh_cluster(
    config: &Config,
    tokens: &OnDemand<'_>,
    target: &Target,
    install: Option<Install>,
    stop: &Stop,
) -> Result<(Report, Summary), Unavailable> {
    let prepared = tokio::select! {
        prepared = prepare(config, target) => prepared?,
        reason = stop.stopping() => return Err(Unavailable::Stopped { reason, done: "written" }),
    };
    let region = tokens.sdk.region().map(|r| r.as_ref().to_owned());
    let rules = config.rules(region.clone(), install);
    let events = events::Events::new(
        &prepared.client,
        config.events,
        config.dry_run,
        config.secret_name.as_str(),
    );
    let shared = Shared {
        config,
        client: &prepared.client,
        policy: rules.policy(),
        install: InstallName::new(rules.install(), &prepared.client),
        tokens,
        stop,
        events: &events,
    };
    let mut done = Namespaces::default();
    let mut finished = refresh_all(&shared, prepared.pages, prepared.first, &mut done).await;
    log_dropped(&done.dropped_registries, config.dry_run);
    // The Argo CD Secrets, from the same tokens: fetched already if a namespace was due.
    if let (Ok(()), Some(argo)) = (&finished, &config.argocd) {
        let dropped = done.dropped_registries.keys().cloned().collect();
        finished = argocd::refresh(&shared, argo, &mut done.report, &dropped).await;
    }
    // Failures past the Events' limit are counted, even if the tokens then failed the run.
    events.summarize().await;
    if let Err(error) = finished {
        let mut added = done.accounts_added;
        added.sort();
        return Err(Unavailable::Tokens {
            error,
            accounts_added: added,
        });
    }
    let mut report = done.report;
    if let Some(limit) = config.evict_stuck_pods {
        let mut namespaces = done.standing;
        namespaces.sort();
        report.evictions = Some(
            evict_stuck_pods(
                config,
                target,
                region,
                limit,
                &namespaces,
                done.would_add,
                stop,
            )
            .await,
        );
    }
    Ok((report, tokens.summary()))
}

/// ECR_REFRESH_EVICT_STUCK_PODS, after every Secret: pods stuck for want of it, evicted.
async fn evict_stuck_pods(
    config: &Config,
    target: &Target,
    region: Option<String>,
    limit: usize,
    namespaces: &[String],
    would_add: BTreeSet<(String, String)>,
    stop: &Stop,
) -> Evictions {
    let client = match target.client(false) {
        Ok((client, _)) => client,
        Err(e) => {
            warn!(error = %e, "stuck pods were not looked at: no client for the evictions");
            return Evictions::default();
        }
    };
    let evictor = Evictor {
        config,
        client,
        region,
        limit,
        would_add,
    };
    evictor.run(namespaces, stop).await
}

async fn prepare<'a>(config: &'a Config, target: &Target) -> Result<Prepared<'a>, Unavailable> {
    let (client, url) = target.client(true)?;
    let version = client::check(&client, &url).await?;
    let (mut pages, refused) = Reads::open(
        client.clone(),
        &config.selection,
        &config.secret_name,
        &config.service_accounts,
    )
    .await;
    info!(api_server = %url, %version, dry_run = config.dry_run, read = pages.path().as_str(), "connected");
    if let Some(e) = refused {
        warn!(error = %e, "the Secrets are read one namespace at a time: grant ecr-refresh's ServiceAccount \
            list on the Secret's name (resourceNames; see manifests/) to read them in one list");
    }

    // The first page decides whether the cluster lets us in at all: nothing is written before it.
    let first = pages.first().await?;
    Ok(Prepared {
        client,
        pages,
        first,
    })
}

/// Every selected namespace, streamed from the list pages into the writers, each one's `Done`
/// recorded in `done`. Ends with the error if the tokens cannot be had: no Secret has been
/// written then, and none is; `done` holds every namespace that ended without needing them, those
/// in flight at the failure included.
async fn refresh_all(
    shared: &Shared<'_>,
    pages: Reads<'_>,
    first: Vec<Work>,
    done: &mut Namespaces,
) -> Result<(), Arc<TokenError>> {
    let config = shared.config;
    let secret = config.secret_name.as_str();
    let driver = Driver {
        stop: shared.stop,
        concurrency: config.concurrency,
        done: "refreshed",
    };
    let record = |namespaces: &mut Namespaces, visit: Visit<Done>| {
        let done = match visit {
            Visit::Done(done) => done,
            Visit::Undone(namespace) => {
                let reason = shared.stop.reason().unwrap_or("stopped");
                log_left_undone(&namespace, secret, None, reason);
                Done::failed(namespace)
            }
            Visit::Abandoned(namespace) => {
                let error = format!(
                    "interrupted: still in flight {}s after the stop; the write may or may not have landed, \
                     the next run covers it",
                    SHUTDOWN_GRACE.as_secs()
                );
                log_failed(&namespace, secret, None, &error);
                Done::failed(namespace)
            }
        };
        namespaces.record(done);
    };
    // After a token failure no namespace is handed out; those under way end (a write needs the
    // tokens, so none of their Secrets is written; a fresh one's ServiceAccounts may be).
    let visit = |work| refresh_namespace(shared, work);
    let listing_incomplete = each_namespace(pages, first, driver, visit, record, done).await?;
    done.report.listing_incomplete = listing_incomplete;
    // In name order, not the order the writes happened to finish in.
    done.report.not_found.sort();
    Ok(())
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
    /// The ServiceAccounts given the Secret.
    added: Vec<String>,
    /// The ServiceAccounts a dry run would have given it.
    would_add: Vec<String>,
    /// The registries whose entries its write removed (no longer configured).
    dropped: Vec<String>,
    /// Its Secret stands after the run (written, or fresh).
    standing: bool,
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
            added: Vec::new(),
            would_add: Vec::new(),
            dropped: Vec::new(),
            standing: false,
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

/// One namespace: skipped when it is being deleted or does not exist, else written.
async fn refresh_namespace(shared: &Shared<'_>, work: Work) -> Result<Done, Arc<TokenError>> {
    let Work {
        candidate,
        secret: read,
        accounts,
    } = work;
    let namespace = candidate.name;
    let secret = shared.config.secret_name.as_str();
    // A namespace being deleted takes its Secret with it; one named but not there has none.
    let skip = match (candidate.terminating, candidate.origin) {
        (true, _) => Some(SkipReason::NamespaceTerminating),
        (false, Origin::Missing) => Some(SkipReason::NamespaceNotFound),
        (false, Origin::Named | Origin::Listed) => None,
    };
    if let Some(reason) = skip {
        log_written(&namespace, secret, None, &Settled::skipped(reason), "", "");
        return Ok(Done::skipped(namespace, reason));
    }
    write_namespace(shared, &namespace, candidate.origin, read, accounts).await
}

/// A namespace's pull Secret, as one kind of Secret a refresh writes.
struct PullSecret<'s, 'a> {
    shared: &'s Shared<'a>,
    api: &'s Api<Secret>,
    namespace: &'s str,
    origin: Origin,
    /// The run's policy, with the install name once it is asked for.
    policy: Policy<'s>,
}

impl SecretKind for PullSecret<'_, '_> {
    type Error = SecretError;

    async fn judge(&mut self, current: Option<Secret>) -> Result<Judged, SecretError> {
        let now = SystemTime::now();
        if self.policy.install.is_some() {
            return write::judge(current, &self.policy, now);
        }
        match write::judge(current.clone(), &self.policy, now) {
            // Recorded by another install, as far as a run with no name can tell: it may be
            // this very user's record. Asked before refusing.
            Err(SecretError::OtherInstall { .. }) => {
                self.policy.install = self.shared.install.get().await;
                write::judge(current, &self.policy, now)
            }
            judged => judged,
        }
    }

    /// A name given literally may not exist, and reading a Secret there is just a 404 for the
    /// Secret. Before the first token, ask the namespace (a dry-run create), so that a typo in
    /// ECR_REFRESH_NAMESPACES costs no ECR call.
    async fn skip(&self, current: Option<&Secret>) -> Option<SkipReason> {
        let missing = current.is_none()
            && self.origin == Origin::Named
            && self.shared.tokens.fetched().is_none()
            && write::namespace_missing(self.api, &self.shared.config.secret_name).await;
        missing.then_some(SkipReason::NamespaceNotFound)
    }

    async fn write(
        &mut self,
        fetched: &Fetched,
        current: Option<Secret>,
    ) -> Result<Settled, SecretError> {
        if self.policy.install.is_none() {
            self.policy.install = self.shared.install.get().await;
        }
        let desired = fetched.desired(self.shared.config, self.policy.install);
        let mut settled = owned::write(self.api, self.namespace, &desired, current).await?;
        // Listed, then gone before its create: deleted during the run, not a name that is wrong.
        if self.origin == Origin::Listed && settled.reason == Some(SkipReason::NamespaceNotFound) {
            settled.reason = Some(SkipReason::NamespaceDeleted);
        }
        Ok(settled)
    }
}

/// The Secret, then the ServiceAccounts; one log line, and a Warning Event on failure.
async fn write_namespace(
    shared: &Shared<'_>,
    namespace: &str,
    origin: Origin,
    read: Read<Secret>,
    account_reads: Vec<Read<ServiceAccount>>,
) -> Result<Done, Arc<TokenError>> {
    let config = shared.config;
    let secret = config.secret_name.as_str();
    let api: Api<Secret> = Api::namespaced(shared.client.clone(), namespace);
    let mut pull_secret = PullSecret {
        shared,
        api: &api,
        namespace,
        origin,
        policy: shared.policy,
    };
    let refreshed = secret::refresh(&mut pull_secret, shared.tokens, &api, secret, read);
    let settled = match refreshed.await {
        Ok(settled) => settled,
        Err(NotRefreshed::Tokens(e)) => return Err(e),
        Err(NotRefreshed::Failed(e, seen)) => {
            log_failed(namespace, secret, None, &e);
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
    let (mut added, mut would_add) = (Vec::new(), Vec::new());
    let mut account_notes = Vec::new();
    let mut account_errors = Vec::new();
    // A fresh Secret's ServiceAccounts are checked too (a read each): one created since the
    // Secret was written gets it within a run.
    if settled.outcome != Outcome::Skipped {
        let api: Api<ServiceAccount> = Api::namespaced(shared.client.clone(), namespace);
        for (account, read) in config.service_accounts.iter().zip(account_reads) {
            let first = match read {
                Read::Listed(listed) => Some(listed),
                Read::ByName => None,
            };
            let attached =
                service_accounts::attach(&api, account, &config.secret_name, config.dry_run, first);
            let outcome = match attached.await {
                Ok(outcome) => outcome,
                Err(e) => {
                    account_errors.push(e.to_string());
                    AccountOutcome::Failed
                }
            };
            match outcome {
                AccountOutcome::Added => added.push(account.as_str().to_owned()),
                AccountOutcome::WouldAdd => would_add.push(account.as_str().to_owned()),
                _ => {}
            }
            accounts.push(outcome);
            account_notes.push(format!("{account}:{}", outcome.as_str()));
        }
    }
    log_written(
        namespace,
        secret,
        None,
        &settled,
        &account_notes.join(","),
        &account_errors.join("; "),
    );
    if !account_errors.is_empty() {
        let failure = events::Failure {
            namespace,
            secret,
            uid: settled.uid_after.as_deref(),
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
        outcome: settled.outcome,
        accounts,
        reason: settled.reason,
        expires_at: settled.expires_at,
        unknown: false,
        added,
        would_add,
        standing: settled.outcome != Outcome::Skipped,
        dropped: settled.dropped_entries,
    })
}
