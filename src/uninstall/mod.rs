//! `ecr-refresh uninstall`: undoes what the runs wrote, after `helm uninstall` or
//! `kubectl delete -k`, run once with the operator's own credentials (a kubeconfig with
//! delete on Secrets and patch on ServiceAccounts; the CronJob's ServiceAccount has neither,
//! by design).
//!
//! For every Secret of the configured name that carries our label, in the namespaces the
//! install selected (ECR_REFRESH_NAMESPACES, the exclusions, the label selector), one
//! decision (`pull_secret::remove::removal`):
//! - one ecr-refresh created and that holds only our entries is deleted, pinned to the uid
//!   and resourceVersion read, so a Secret changed or replaced since is read again, never
//!   deleted blind;
//! - one that holds others' entries too loses only ours, our annotations and our labels, in
//!   a JSON patch that tests the resourceVersion read;
//! - one we adopted that holds only our entries is left, with a line saying so: someone else
//!   made it.
//!
//! A Secret another install wrote last (`ecr-refresh/install`) is left to that install's
//! uninstall: the install removed is the one ECR_REFRESH_INSTALL names, or with none named
//! the only one the selected Secrets record; while they record more than one and none is
//! named, nothing is changed (exit 1, the installs listed).
//!
//! Then, in each namespace whose Secret it deleted or stripped, and only there, every
//! ServiceAccount named in ECR_REFRESH_SERVICE_ACCOUNTS loses its `{name: <secret>}` entry in
//! imagePullSecrets, and nothing else: elsewhere an entry of that name may be another
//! install's, or a team's for its own Secret of that name.
//! ECR_REFRESH_DRY_RUN=true sends every write as a server-side dry run: the log says what
//! would go. Exit 0 when everything was done, 1 when something failed (each failure logged
//! with its namespace), 3 when the API server can't be reached.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use base64::Engine as _;
use k8s_openapi::api::core::v1::{Secret, ServiceAccount};
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams, Preconditions};
use tracing::{error, info, warn};

use crate::cluster::by_name::{ByName, ListedSecret};
use crate::cluster::client;
use crate::cluster::namespaces::{NamespaceError, Origin, Pages};
use crate::cluster::retry::{self, RequestError};
use crate::cluster::selection::Selection;
use crate::config::Config;
use crate::pull_secret::install::recorded as recorded_install;
use crate::pull_secret::remove::{self, OUR_PREFIX, Removal};
use crate::pull_secret::service_accounts::{self, Detached};
use crate::pull_secret::{DATA_KEY, FIELD_MANAGER, MANAGED_BY_LABEL};
use crate::report::exit;

/// The namespaces the selection covers: ECR_REFRESH_NAMESPACES and the exclusions match a
/// name; a label selector needs the namespace list, as a refresh reads it.
enum Selected {
    Matching(Selection),
    Listed(HashSet<String>),
}

impl Selected {
    async fn read(client: &kube::Client, selection: &Selection) -> Result<Self, NamespaceError> {
        if selection.label_selector.is_none() {
            return Ok(Self::Matching(selection.clone()));
        }
        let mut names = HashSet::new();
        let mut pages = Pages::new(client.clone(), selection);
        while let Some(page) = pages.next().await {
            names.extend(
                page?
                    .into_iter()
                    .filter(|c| c.origin != Origin::Missing)
                    .map(|c| c.name),
            );
        }
        Ok(Self::Listed(names))
    }

    fn contains(&self, namespace: &str) -> bool {
        match self {
            Self::Matching(selection) => selection.matches(namespace),
            Self::Listed(names) => names.contains(namespace),
        }
    }
}

/// Reads and conflicts survived before a Secret is given up.
const ATTEMPTS: usize = 5;

/// What happened to one Secret, as the log line says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fate {
    Deleted,
    Stripped,
    Kept,
    /// Gone before we got to it.
    Gone,
}

impl Fate {
    fn as_str(self, dry_run: bool) -> &'static str {
        match (self, dry_run) {
            (Self::Deleted, false) => "deleted",
            (Self::Deleted, true) => "would-delete",
            (Self::Stripped, false) => "stripped",
            (Self::Stripped, true) => "would-strip",
            (Self::Kept, _) => "kept",
            (Self::Gone, _) => "gone",
        }
    }
}

#[derive(Debug, thiserror::Error)]
enum UninstallError {
    #[error(
        "forbidden to {action} Secret {namespace}/{name}: {source}; run `ecr-refresh uninstall` \
         with credentials that may get, delete and patch Secrets (a cluster admin's kubeconfig)"
    )]
    Forbidden {
        action: &'static str,
        namespace: String,
        name: String,
        source: RequestError,
    },
    #[error("could not {action} Secret {namespace}/{name}: {source}")]
    Request {
        action: &'static str,
        namespace: String,
        name: String,
        source: RequestError,
    },
    #[error("Secret {namespace}/{name} kept changing under us: gave up after {ATTEMPTS} attempts")]
    Contended { namespace: String, name: String },
}

/// The whole uninstall; returns the exit code.
pub async fn run(config: &Config) -> u8 {
    if let Some(clusters) = &config.clusters {
        warn!(
            source = %clusters.source,
            "uninstall works on the one cluster KUBECONFIG names, not on ECR_REFRESH_CLUSTERS' \
             spokes: run it against each spoke (KUBECONFIG pointing there) with the same \
             ECR_REFRESH_INSTALL as the spoke's ServiceAccount (ecr-refresh/ecr-refresh)"
        );
    }
    let (client, url) = match client::connect().await {
        Ok(connected) => connected,
        Err(e) => {
            error!(error = %e, "uninstall: could not reach the API server; nothing was changed");
            return exit::UNAVAILABLE;
        }
    };
    if let Err(e) = client::check(&client, &url).await {
        error!(error = %e, "uninstall: could not reach the API server; nothing was changed");
        return exit::UNAVAILABLE;
    }
    let name = config.secret_name.as_str();
    let dry_run = config.dry_run;
    info!(
        api_server = url,
        secret = name,
        service_accounts = config
            .service_accounts
            .iter()
            .map(|a| a.as_str())
            .collect::<Vec<_>>()
            .join(","),
        dry_run,
        "uninstall: removing what ecr-refresh wrote: the Secrets it created, its entries in the others, and its imagePullSecrets entries"
    );

    let selected = match Selected::read(&client, &config.selection).await {
        Ok(selected) => selected,
        Err(e) => {
            error!(error = %e, "uninstall: could not list the selected namespaces; nothing was changed");
            return exit::FAILED;
        }
    };
    let mut secrets = Vec::new();
    let mut pages = ByName::<ListedSecret>::new(client.clone(), "secrets", name);
    while let Some(page) = pages.next().await {
        match page {
            Ok(page) => secrets.extend(page.into_iter().filter(|s| {
                remove::managed_by_us(s)
                    && selected.contains(s.metadata.namespace.as_deref().unwrap_or_default())
            })),
            Err(e) => {
                error!(error = %e, "uninstall: could not list the Secrets; run it again with rights to list Secrets in every namespace; nothing was changed");
                return exit::FAILED;
            }
        }
    }
    let install = match remove::whose(
        config.install.as_ref(),
        secrets.iter().filter_map(recorded_install),
    ) {
        Ok(install) => install,
        Err(e) => {
            error!(secret = name, installs = e.0.join(","), error = %e, "uninstall: refused");
            return exit::FAILED;
        }
    };
    if let Some(install) = &install {
        info!(
            install,
            "uninstall: removing this install's Secrets; another install's are kept"
        );
    }

    let mut tally: BTreeMap<&'static str, usize> = BTreeMap::new();
    let mut failed = 0usize;
    // The namespaces whose Secret this uninstall deleted or stripped of our entries: the only
    // ones whose ServiceAccounts lose their entry for it.
    let mut undone: BTreeSet<String> = BTreeSet::new();
    for secret in secrets {
        let namespace = secret.metadata.namespace.clone().unwrap_or_default();
        let uid = secret.metadata.uid.clone().unwrap_or_default();
        let writer = recorded_install(&secret).map(str::to_owned);
        let api: Api<Secret> = Api::namespaced(client.clone(), &namespace);
        match undo(&api, name, dry_run, install.as_deref(), secret).await {
            Ok((done, detail)) => {
                *tally.entry(done.as_str(dry_run)).or_default() += 1;
                if matches!(done, Fate::Deleted | Fate::Stripped) {
                    undone.insert(namespace.clone());
                }
                info!(
                    namespace,
                    secret = name,
                    uid,
                    install = writer,
                    outcome = done.as_str(dry_run),
                    detail,
                    "uninstall: Secret"
                );
            }
            Err(e) => {
                failed += 1;
                error!(namespace, secret = name, uid, outcome = "failed", error = %e, "uninstall: Secret");
            }
        }
    }

    // Never touched: a ServiceAccount in a namespace whose Secret stays (another install's, an
    // adopted one, one outside the selection): its entry may name a Secret someone else keeps
    // under that name.
    for namespace in &undone {
        let api: Api<ServiceAccount> = Api::namespaced(client.clone(), namespace);
        for account in &config.service_accounts {
            let outcome = service_accounts::detach(
                &api,
                account.as_str(),
                &config.secret_name,
                dry_run,
                None,
            )
            .await;
            match outcome {
                Ok(Detached::Absent | Detached::Missing) => {}
                Ok(done) => {
                    let outcome = if done == Detached::Removed {
                        "removed"
                    } else {
                        "would-remove"
                    };
                    *tally
                        .entry(if dry_run { "would-detach" } else { "detached" })
                        .or_default() += 1;
                    info!(
                        namespace,
                        service_account = account.as_str(),
                        secret = name,
                        image_pull_secrets = outcome,
                        "uninstall: imagePullSecrets entry"
                    );
                }
                Err(e) => {
                    failed += 1;
                    error!(namespace, service_account = account.as_str(), image_pull_secrets = "failed", error = %e,
                        "uninstall: imagePullSecrets entry; run it with credentials that may patch ServiceAccounts");
                }
            }
        }
    }

    let counts = tally
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(" ");
    if failed > 0 {
        warn!(
            counts,
            failed,
            dry_run,
            "uninstall incomplete: run it again once the errors above are fixed; what was done stays done"
        );
        exit::FAILED
    } else {
        info!(counts, dry_run, "uninstall done");
        exit::OK
    }
}

/// One Secret: decide, write, and on a conflict read it again and decide again.
async fn undo(
    api: &Api<Secret>,
    name: &str,
    dry_run: bool,
    install: Option<&str>,
    first: Secret,
) -> Result<(Fate, String), UninstallError> {
    let namespace = first.metadata.namespace.clone().unwrap_or_default();
    let fail = |action: &'static str, source: RequestError| {
        if source.code() == Some(403) {
            UninstallError::Forbidden {
                action,
                namespace: namespace.clone(),
                name: name.to_owned(),
                source,
            }
        } else {
            UninstallError::Request {
                action,
                namespace: namespace.clone(),
                name: name.to_owned(),
                source,
            }
        }
    };
    let mut read = Some(first);
    for _ in 0..ATTEMPTS {
        let current = match read.take() {
            Some(secret) => secret,
            None => match retry::send("get secret", || api.get_opt(name))
                .await
                .map_err(|e| fail("read", e))?
            {
                Some(secret) => secret,
                None => return Ok((Fate::Gone, String::new())),
            },
        };
        if !remove::managed_by_us(&current) {
            return Ok((
                Fate::Kept,
                "no longer labelled app.kubernetes.io/managed-by: ecr-refresh".to_owned(),
            ));
        }
        // What was sent, and what the Secret comes to if it lands.
        let (sent, done) = match remove::removal(&current, install) {
            Removal::Keep(why) => return Ok((Fate::Kept, why.as_str().to_owned())),
            Removal::Delete => {
                let params = DeleteParams {
                    dry_run,
                    preconditions: Some(Preconditions {
                        uid: current.metadata.uid.clone(),
                        resource_version: current.metadata.resource_version.clone(),
                    }),
                    ..DeleteParams::default()
                };
                let sent = retry::send("delete secret", || api.delete(name, &params)).await;
                let detail = "created by ecr-refresh, only its entries".to_owned();
                (sent.map(drop), (Fate::Deleted, detail))
            }
            Removal::Strip { value, removed } => {
                let patch = strip(&current, &value);
                let params = PatchParams {
                    dry_run,
                    field_manager: Some(FIELD_MANAGER.to_owned()),
                    ..PatchParams::default()
                };
                let sent = retry::send("patch secret", || api.patch(name, &params, &patch)).await;
                let detail = format!("entries removed: {}; the others stay", removed.join(","));
                (sent.map(drop), (Fate::Stripped, detail))
            }
        };
        match sent {
            Ok(()) => return Ok(done),
            // A precondition or a test failed: it changed since our read. Read again.
            Err(RequestError::Api(s)) if s.is_conflict() || s.is_invalid() => {}
            Err(RequestError::Api(s)) if s.is_not_found() => {
                return Ok((Fate::Gone, String::new()));
            }
            Err(e) => return Err(fail("write", e)),
        }
    }
    Err(UninstallError::Contended {
        namespace,
        name: name.to_owned(),
    })
}

/// The JSON patch that leaves `value` as the Secret's docker config and takes out our
/// annotations and labels, after testing the resourceVersion read.
fn strip(current: &Secret, value: &[u8]) -> Patch<()> {
    let pointer = |s: &str| s.replace('~', "~0").replace('/', "~1");
    let mut ops = vec![
        serde_json::json!({ "op": "test", "path": "/metadata/resourceVersion", "value": current.metadata.resource_version }),
        serde_json::json!({ "op": "replace", "path": format!("/data/{}", pointer(DATA_KEY)),
            "value": base64::engine::general_purpose::STANDARD.encode(value) }),
    ];
    for key in current
        .metadata
        .annotations
        .iter()
        .flatten()
        .map(|(k, _)| k)
    {
        if key.starts_with(OUR_PREFIX) {
            ops.push(serde_json::json!({ "op": "remove", "path": format!("/metadata/annotations/{}", pointer(key)) }));
        }
    }
    for (key, value) in current.metadata.labels.iter().flatten() {
        if key.starts_with(OUR_PREFIX) || (key == MANAGED_BY_LABEL && value == FIELD_MANAGER) {
            ops.push(serde_json::json!({ "op": "remove", "path": format!("/metadata/labels/{}", pointer(key)) }));
        }
    }
    Patch::Json(
        serde_json::from_value(serde_json::Value::Array(ops))
            .expect("test, replace and remove ops"),
    )
}
