//! `ecr-refresh check` (ECR_REFRESH_MODE=check): a read-only answer, per selected namespace, to
//! "can its pods pull from ECR right now?". The configuration is a refresh's; nothing is
//! written (no Secret, no ServiceAccount, no Event) and no ECR token is fetched.
//!
//! Per namespace it sends: a GET of the Secret (none when the run reads every Secret in one
//! list: cluster::reads), a LIST of the pods that are not finished
//! (`status.phase` neither Succeeded nor Failed; one request per 500 pods), and a GET of each
//! ServiceAccount that pods using ECR run as without listing the Secret themselves. With
//! ECR_REFRESH_VERIFY_LOGIN=true, one HEAD of a manifest per registry host and stored
//! credentials, shared by every namespace holding the same credentials.

mod argocd;
mod findings;
mod fleet;
mod login;
mod metrics;
mod own_namespace;
mod pods;

use std::collections::{BTreeMap, HashMap};
use std::convert::Infallible;
use std::future::Future;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Instant, SystemTime};

use k8s_openapi::api::core::v1::{Pod, Secret};
use kube::{Api, Client};
use tracing::{info, warn};

use crate::aws::credentials::roles_anywhere::{certificate_expiry, session};
use crate::aws::credentials::{CredentialError, set_up};
use crate::aws::sdk;
use crate::cluster::client::{self, Target};
use crate::cluster::reads::{Read, Reads, Work};
use crate::cluster::retry;
use crate::config::Config;
use crate::config::pushgateway::Pushgateway;
use crate::pull_secret::install::Install;
use crate::pull_secret::rules::Rules;
use crate::report::exit;
use crate::run::end::{Finished, NOTHING_SELECTED, Unavailable, end};
use crate::run::pages::{Driver, Visit, each_namespace};
use crate::run::stop::Stop;
use crate::termination;
pub use findings::Finding;
use findings::{SecretState, secret_findings};
use login::Logins;
use pods::{Account, Context, Managed};

/// How the log line and the termination message call a namespace with nothing found.
const OK: &str = "ok";
const FINDINGS: &str = "findings";

/// A check's error line when nothing could be checked, of one cluster or a fleet.
const NOTHING_CHECKED: &str = "check failed: nothing was checked";

/// What one namespace came to.
struct Checked {
    namespace: String,
    findings: Vec<Finding>,
    pods_checked: bool,
}

/// The run's tally.
#[derive(Debug, Default)]
pub struct Tally {
    pub namespaces: usize,
    pub ok: usize,
    /// Namespaces with findings, in the order they were checked.
    pub with_findings: Vec<String>,
    pub kinds: BTreeMap<&'static str, usize>,
    /// Namespaces whose pods could not be listed.
    pub pods_unchecked: usize,
    /// Namespaces not checked: the run stopped, or the namespace list broke off.
    pub unchecked: usize,
    pub listing_incomplete: bool,
    /// Argo CD Secrets checked (ECR_REFRESH_ARGOCD_NAMESPACE), and those with findings.
    pub argocd: usize,
    pub argocd_with_findings: Vec<String>,
    /// The run's credentials would fail a refresh (Roles Anywhere's certificate unreadable,
    /// expired or not yet valid): what a refresh would say.
    pub credentials: Option<String>,
}

impl Tally {
    /// No namespace was selected: as in a refresh, exit 1 and a warning, never "every
    /// namespace can pull".
    pub fn nothing_selected(&self) -> bool {
        self.namespaces == 0 && self.unchecked == 0 && !self.listing_incomplete
    }
}

impl Finished for Tally {
    fn exit_code(&self) -> u8 {
        if self.with_findings.is_empty()
            && self.argocd_with_findings.is_empty()
            && self.credentials.is_none()
            && self.unchecked == 0
            && !self.listing_incomplete
            && !self.nothing_selected()
        {
            exit::OK
        } else {
            exit::FAILED
        }
    }

    fn log_summary(&self, elapsed_ms: u64) {
        log_summary(self, elapsed_ms);
    }

    /// The summary as compact JSON under the kubelet's 4096 bytes: the counts always, then as
    /// many namespaces with findings as fit.
    fn termination_message(&self, elapsed_ms: u64) -> String {
        termination::fit([&self.with_findings], |[listed]| {
            let mut message = serde_json::json!({
                "mode": "check",
                "exit_code": self.exit_code(),
                "namespaces": self.namespaces,
                "ok": self.ok,
                "findings": self.kinds,
                "namespaces_with_findings": listed,
                "namespaces_with_findings_total": self.with_findings.len(),
                "pods_unchecked": self.pods_unchecked,
                "unchecked": self.unchecked,
                "listing_incomplete": self.listing_incomplete,
                "elapsed_ms": elapsed_ms,
            });
            if let Some(credentials) = &self.credentials {
                message["credentials"] = serde_json::json!(credentials);
            }
            if self.argocd > 0 {
                message["argocd"] = serde_json::json!(self.argocd);
                message["argocd_with_findings"] = serde_json::json!(self.argocd_with_findings);
            }
            message.to_string()
        })
    }
}

/// Runs one check and returns the process exit code.
pub async fn run(
    config: &Config,
    shutdown: impl Future<Output = &'static str> + Send + 'static,
) -> u8 {
    if let Some(clusters) = &config.clusters {
        return fleet::run(config, clusters, shutdown).await;
    }
    let started = Instant::now();
    let result = check(config, &Stop::new(shutdown)).await;
    let push = async |gateway: &Pushgateway, code, duration, tally: Option<&Tally>| {
        let certificate = certificate_expiry(config.roles_anywhere.as_ref());
        metrics::push(gateway, code, duration, tally, certificate).await;
    };
    end(config, started, result, NOTHING_CHECKED, push).await
}

/// What every namespace's check shares.
struct Shared<'a> {
    config: &'a Config,
    client: Client,
    rules: Rules<'a>,
    logins: Logins,
    /// Whether the "pods were not checked" line was logged.
    pods_refused: AtomicBool,
    accounts_refused: AtomicBool,
    /// Why a refresh's credentials would fail now, found without asking AWS.
    credentials: Option<String>,
}

/// The run's region and credentials, then the cluster the run runs in.
async fn check(config: &Config, stop: &Stop) -> Result<Tally, Unavailable> {
    let before = tokio::select! {
        before = before(config) => before?,
        reason = stop.stopping() => return Err(Unavailable::Stopped { reason, done: "checked" }),
    };
    let target = Target::local().await?;
    check_cluster(config, &before, &target, config.install.clone(), stop).await
}

/// What a check knows before any cluster: the region (with no registries configured, the
/// caller's own is in it) and why a refresh's credentials would fail, if they would.
struct Before {
    region: Option<String>,
    /// Logged once, after the first cluster's `connected` line.
    credentials: OnceLock<Option<String>>,
}

async fn before(config: &Config) -> Result<Before, Unavailable> {
    let region = if config.registries.is_empty() {
        Some(sdk::region().await?.ok_or(Unavailable::NoRegion)?)
    } else {
        None
    };
    Ok(Before {
        region,
        credentials: OnceLock::new(),
    })
}

/// One cluster, its Secrets recorded as `install`'s (None: the pod's ServiceAccount).
async fn check_cluster(
    config: &Config,
    before: &Before,
    target: &Target,
    install: Option<Install>,
    stop: &Stop,
) -> Result<Tally, Unavailable> {
    let own = own_namespace::Own::of(install.as_ref());
    let (shared, pages, first) = tokio::select! {
        prepared = prepare(config, before, target, install) => prepared?,
        reason = stop.stopping() => return Err(Unavailable::Stopped { reason, done: "checked" }),
    };
    let driver = Driver {
        stop,
        concurrency: config.concurrency,
        done: "checked",
    };
    let visit = |work: Work| async {
        Ok::<_, Infallible>(check_namespace(&shared, work.candidate.name, work.secret).await)
    };
    let mut own_visited = false;
    let count = |tally: &mut Tally, visit: Visit<Checked>| {
        let name = match &visit {
            Visit::Done(checked) => &checked.namespace,
            Visit::Undone(name) | Visit::Abandoned(name) => name,
        };
        own_visited |= own.as_ref().is_some_and(|own| &own.namespace == name);
        match visit {
            Visit::Done(checked) => record(tally, checked),
            Visit::Undone(_) | Visit::Abandoned(_) => tally.unchecked += 1,
        }
    };
    let mut tally = Tally::default();
    let listing_incomplete =
        match each_namespace(pages, first, driver, visit, count, &mut tally).await {
            Ok(incomplete) => incomplete,
            Err(never) => match never {},
        };
    tally.listing_incomplete = listing_incomplete;
    tally.credentials = shared.credentials.clone();
    // Only where the whole selection was seen: a namespace not seen is then not selected.
    if let Some(own) = own
        && !own_visited
        && !listing_incomplete
        && stop.reason().is_none()
        && let Some(found) = own_namespace::unselected(
            &shared.client,
            &own,
            &config.selection,
            config.secret_name.as_str(),
        )
        .await
    {
        let line = Line {
            namespace: &own.namespace,
            secret: config.secret_name.as_str(),
            due: None,
            pods_checked: true,
            ecr_pods: found.ecr_pods,
        };
        log_namespace(&line, std::slice::from_ref(&found.finding));
        tally.with_findings.push(own.namespace);
        *tally.kinds.entry(found.finding.kind()).or_default() += 1;
    }
    if let Some(argo) = &config.argocd
        && stop.reason().is_none()
    {
        for (secret, findings) in argocd::check(&shared.client, argo, &shared.rules.policy()).await
        {
            tally.argocd += 1;
            if !findings.is_empty() {
                tally.argocd_with_findings.push(secret);
            }
            for finding in &findings {
                *tally.kinds.entry(finding.kind()).or_default() += 1;
            }
        }
    }
    Ok(tally)
}

/// Which AWS credentials a refresh with this configuration signs with, and when its
/// certificate expires (Roles Anywhere): a check asks AWS nothing, so it says what is set up.
/// A certificate or key a refresh could not sign with now (unreadable, expired, not yet
/// valid) is a finding: returned, as the refresh would say it.
fn log_credentials(config: &Config) -> Option<String> {
    // The base the chain would take: Roles Anywhere when configured (the only one), else the
    // first source set up in this environment, none leaving a refresh without credentials.
    let base = match (&config.roles_anywhere, set_up::here()) {
        (Some(_), _) => "roles anywhere".to_owned(),
        (None, Some(set_up)) => set_up.to_string(),
        (None, None) => {
            let error = CredentialError::NoSource.to_string();
            warn!(credentials = "none", finding = "credentials", %error, "credentials: a refresh would fail");
            return Some(error);
        }
    };
    let credentials = match &config.assume_role {
        Some(role) => format!("assume role {} over {base}", role.role_arn),
        None => base,
    };
    let Some(ra) = &config.roles_anywhere else {
        info!(%credentials, "credentials");
        return None;
    };
    match session::usable(ra, SystemTime::now()) {
        Ok(identity) => {
            info!(
                %credentials,
                certificate = %ra.certificate.display(),
                certificate_expires_at = %humantime::format_rfc3339_seconds(identity.not_after),
                "credentials"
            );
            None
        }
        Err(e) => {
            warn!(
                %credentials,
                certificate = %ra.certificate.display(),
                finding = "credentials",
                error = %e,
                "credentials: a refresh would fail"
            );
            Some(e.to_string())
        }
    }
}

/// The region, the cluster and the first namespace page: what a check needs before its first
/// namespace.
async fn prepare<'a>(
    config: &'a Config,
    before: &Before,
    target: &Target,
    install: Option<Install>,
) -> Result<(Shared<'a>, Reads<'a>, Vec<Work>), Unavailable> {
    let (client, url) = target.client(true)?;
    let version = client::check(&client, &url).await?;
    // The ServiceAccounts a check reads are those its pods run as: one GET each, as needed.
    let (mut pages, refused) =
        Reads::open(client.clone(), &config.selection, &config.secret_name, &[]).await;
    info!(api_server = %url, %version, mode = "check", read = pages.path().as_str(), "connected");
    if let Some(e) = refused {
        warn!(error = %e, "the Secrets are read one namespace at a time: grant the check's ServiceAccount \
            list on the Secret's name (resourceNames; see manifests/) to read them in one list");
    }
    let credentials = before
        .credentials
        .get_or_init(|| log_credentials(config))
        .clone();
    let first = pages.first().await?;
    let shared = Shared {
        config,
        client,
        rules: config.rules(before.region.clone(), install.or_else(Install::in_cluster)),
        logins: Logins::new(),
        pods_refused: AtomicBool::new(false),
        accounts_refused: AtomicBool::new(false),
        credentials,
    };
    Ok((shared, pages, first))
}

fn record(tally: &mut Tally, checked: Checked) {
    tally.namespaces += 1;
    if !checked.pods_checked {
        tally.pods_unchecked += 1;
    }
    if checked.findings.is_empty() {
        tally.ok += 1;
    } else {
        tally.with_findings.push(checked.namespace);
        for f in &checked.findings {
            *tally.kinds.entry(f.kind()).or_default() += 1;
        }
    }
}

async fn check_namespace(shared: &Shared<'_>, namespace: String, read: Read<Secret>) -> Checked {
    let config = shared.config;
    let secret_name = config.secret_name.as_str();
    let mut findings = Vec::new();
    let secrets: Api<Secret> = Api::namespaced(shared.client.clone(), &namespace);
    let read = match read {
        Read::Listed(listed) => Ok(listed),
        Read::ByName => retry::send("get secret", || secrets.get_opt(secret_name)).await,
    };
    let (secret, state) = match read {
        Ok(secret) => {
            let state = secret_findings(secret.as_ref(), &shared.rules.policy(), SystemTime::now());
            (secret, state)
        }
        Err(e) => {
            findings.push(Finding::CheckFailed(format!(
                "could not read Secret {secret_name}: {e}"
            )));
            (None, SecretState::default())
        }
    };
    // The hosts the Secret must hold, and those pods may use: what the refresh writes.
    let region = shared.rules.region.as_deref();
    let managed = Managed::of(&config.written, config.dual_stack, region, secret.as_ref());
    findings.extend(state.findings.iter().cloned());

    let pods_api: Api<Pod> = Api::namespaced(shared.client.clone(), &namespace);
    let pods = match crate::cluster::pods::unfinished(&pods_api).await {
        Ok(pods) => Some(pods),
        Err(e) if e.code() == Some(403) => {
            if !shared.pods_refused.swap(true, Ordering::Relaxed) {
                warn!(
                    %namespace,
                    error = %e,
                    "pods were not checked: the check may not list pods; the Secrets are checked. \
                     Run it as its own ServiceAccount (ecr-refresh-check), which may: from the \
                     kustomize component manifests/components/check, or the chart's \
                     check.podRights=true"
                );
            }
            None
        }
        Err(e) => {
            findings.push(Finding::CheckFailed(format!("could not list pods: {e}")));
            None
        }
    };
    let mut ecr_pods = 0;
    if let Some(pods) = &pods {
        let using: Vec<&Pod> = pods
            .iter()
            .filter(|p| !pods::ecr_images(p).is_empty())
            .collect();
        ecr_pods = using.len();
        let accounts = accounts(shared, &namespace, &using, secret_name).await;
        let logins = match (&secret, config.verify_login) {
            (Some(secret), true) if !state.findings.iter().any(Finding::blocks_every_pull) => {
                logins(shared, secret, &using, &managed, &state).await
            }
            _ => BTreeMap::new(),
        };
        let cx = Context {
            secret_name,
            secret: &state,
            managed: &managed,
            accounts: &accounts,
            logins: &logins,
        };
        findings.extend(pods::pod_findings(pods, &cx));
        findings.extend(logins.into_values());
    }
    let line = Line {
        namespace: &namespace,
        secret: secret_name,
        due: state.due.as_deref(),
        pods_checked: pods.is_some(),
        ecr_pods,
    };
    log_namespace(&line, &findings);
    Checked {
        namespace,
        findings,
        pods_checked: pods.is_some(),
    }
}

/// The ServiceAccounts that pods using ECR run as, where the pod does not list the Secret
/// itself: one GET each (`run::accounts`, as the evictions read them).
async fn accounts(
    shared: &Shared<'_>,
    namespace: &str,
    using: &[&Pod],
    secret: &str,
) -> HashMap<String, Account> {
    crate::run::accounts::read(&shared.client, namespace, using, secret, |name, e| {
        if !shared.accounts_refused.swap(true, Ordering::Relaxed) {
            warn!(%namespace, service_account = name, error = %e,
                "ServiceAccounts could not be read: the advice for pods not wired names none");
        }
    })
    .await
}

/// One login per registry host in use (the first image seen on it), with the Secret's
/// credentials for that host. Hosts not covered or without an entry are findings already.
async fn logins(
    shared: &Shared<'_>,
    secret: &Secret,
    using: &[&Pod],
    managed: &Managed,
    state: &SecretState,
) -> BTreeMap<String, Finding> {
    let mut first: BTreeMap<String, String> = BTreeMap::new();
    for image in using.iter().flat_map(|p| pods::ecr_images(p)) {
        let host = image.host.host();
        if managed.covers(&image.host)
            && state.serves(crate::pull_secret::keyring::repository(&image.image))
        {
            first.entry(host.to_owned()).or_insert(image.image);
        }
    }
    let mut refused = BTreeMap::new();
    for (host, image) in first {
        let credentials = match login::credentials(secret, &image) {
            Ok(Some(credentials)) => credentials,
            found => {
                let error = found.err().unwrap_or_else(|| "no entry serves it".into());
                refused.insert(host.clone(), Finding::LoginFailed { host, image, error });
                continue;
            }
        };
        if let Some(finding) = shared.logins.try_image(&host, &image, &credentials).await {
            refused.insert(host, finding);
        }
    }
    refused
}

/// What a namespace's line says besides its findings.
struct Line<'a> {
    namespace: &'a str,
    secret: &'a str,
    /// A refresh's `due`, when the Secret's findings come from it.
    due: Option<&'a str>,
    pods_checked: bool,
    ecr_pods: usize,
}

fn log_namespace(line: &Line<'_>, findings: &[Finding]) {
    if findings.is_empty() {
        info!(
            namespace = line.namespace,
            secret = line.secret,
            outcome = OK,
            pods_checked = line.pods_checked,
            ecr_pods = line.ecr_pods,
            "ok"
        );
        return;
    }
    let text: Vec<String> = findings.iter().map(ToString::to_string).collect();
    let kinds: Vec<&str> = findings.iter().map(Finding::kind).collect();
    warn!(
        namespace = line.namespace,
        secret = line.secret,
        outcome = FINDINGS,
        findings = %text.join("; "),
        finding_kinds = %kinds.join(","),
        due = line.due,
        pods_checked = line.pods_checked,
        ecr_pods = line.ecr_pods,
        "findings"
    );
}

fn log_summary(tally: &Tally, elapsed_ms: u64) {
    let kinds: Vec<String> = tally
        .kinds
        .iter()
        .map(|(k, n)| format!("{k}={n}"))
        .collect();
    macro_rules! summary {
        ($level:expr, $message:expr) => {
            tracing::event!(
                $level,
                mode = "check",
                namespaces = tally.namespaces,
                ok = tally.ok,
                with_findings = tally.with_findings.len(),
                finding_kinds = %kinds.join(","),
                pods_unchecked = tally.pods_unchecked,
                unchecked = tally.unchecked,
                listing_incomplete = tally.listing_incomplete,
                argocd_checked = tally.argocd,
                argocd_with_findings = tally.argocd_with_findings.len(),
                credentials = tally.credentials.as_deref(),
                elapsed_ms,
                "{}",
                $message
            )
        };
    }
    if tally.nothing_selected() {
        summary!(tracing::Level::WARN, NOTHING_SELECTED);
    } else if tally.exit_code() == exit::OK {
        summary!(
            tracing::Level::INFO,
            "check complete: every namespace can pull"
        );
    } else {
        summary!(tracing::Level::INFO, "check complete: findings reported");
    }
}
