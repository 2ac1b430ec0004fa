//! Where the clusters come from (ECR_REFRESH_CLUSTERS): each source's kubeconfigs, read from
//! the hub with the hub's own client, made into the client configuration of each spoke.
//!
//! - `capi`: Cluster API's kubeconfig Secrets. Exactly `<cluster>-kubeconfig`, where
//!   `<cluster>` is the Secret's `cluster.x-k8s.io/cluster-name` label, of type
//!   `cluster.x-k8s.io/secret`, its key `value`. Never another Secret of the cluster's
//!   (`-ca`, `-etcd`, `-sa`, `-proxy`, `-user-kubeconfig`, bootstrap tokens): those hold
//!   keys that sign for the cluster, and no run needs one. Named `<namespace>/<cluster>`.
//! - `argocd`: Argo CD's cluster Secrets (label `argocd.argoproj.io/secret-type: cluster`),
//!   keys `name`, `server` and `config`; `server: https://kubernetes.default.svc` is the
//!   cluster Argo CD runs in, the hub's own ([`Found::Local`]). Named by `name`.
//! - `dir:<path>`: one kubeconfig per regular file (a mounted Secret's keys are symlinks into
//!   `..data/`: followed), by its current context, named by the file; dotfiles skipped.
//!
//! A cluster the source names but that can't be used (an exec plugin, Argo CD's
//! `awsAuthConfig`, a kubeconfig that does not parse, a name given twice) is
//! [`Found::Refused`]: that cluster's failure, the others go on. A source that can't be read
//! at all is a [`SourceError`]. No line or message here carries a credential: the refusals
//! name the Secret or file and the field, never its value.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use futures::{StreamExt as _, stream};
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::ListParams;
use kube::config::{
    AuthInfo, Cluster, Context, Kubeconfig, KubeconfigError, NamedAuthInfo, NamedCluster,
    NamedContext,
};
use serde::Deserialize;
use tracing::info;

use super::{LOCAL, Source, kubeconfig};
use crate::cluster::pager::{MAX_RESTARTS, PageError, Pager};
use crate::cluster::retry::RequestError;

/// The label Cluster API puts on every Secret of a cluster, its value the cluster's name.
const CAPI_CLUSTER_LABEL: &str = "cluster.x-k8s.io/cluster-name";
/// The type of Cluster API's Secrets.
const CAPI_SECRET_TYPE: &str = "cluster.x-k8s.io/secret";
/// The key of the kubeconfig in Cluster API's `<cluster>-kubeconfig` Secret.
const CAPI_KEY: &str = "value";
/// The label of Argo CD's cluster Secrets.
const ARGOCD_CLUSTER_LABEL: &str = "argocd.argoproj.io/secret-type=cluster";
/// The server Argo CD names the cluster it runs in by (its `KubernetesInternalAPIServerAddr`).
const ARGOCD_IN_CLUSTER: &str = "https://kubernetes.default.svc";

/// A cluster to reach: its name and the kubeconfig's server, CA, TLS and credential.
#[derive(Debug, Clone)]
pub struct Spoke {
    pub name: String,
    pub config: kube::Config,
}

/// A cluster the source names but that can't be used: that cluster's failure. `reason` names
/// the Secret or file, what is wrong and what to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    pub name: String,
    pub reason: String,
}

/// What the source says of one cluster.
#[derive(Debug, Clone)]
pub enum Found {
    /// Boxed: a `kube::Config` is a kilobyte, a refusal a few words.
    Spoke(Box<Spoke>),
    Refused(Refused),
    /// The cluster the run runs in (Argo CD's `https://kubernetes.default.svc`), reached with
    /// the run's own client.
    Local,
}

impl Found {
    /// The cluster's name; the local cluster's is [`LOCAL`].
    pub fn name(&self) -> &str {
        match self {
            Self::Spoke(s) => &s.name,
            Self::Refused(r) => &r.name,
            Self::Local => LOCAL,
        }
    }

    /// The spoke of a client configuration, or the cluster refused for why it has none.
    fn from_config(name: String, config: Result<kube::Config, String>) -> Self {
        match config {
            Ok(config) => Self::Spoke(Box::new(Spoke { name, config })),
            Err(reason) => Self::Refused(Refused { name, reason }),
        }
    }
}

/// The source itself can't be read: the run reaches no cluster (exit 3).
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    /// A source of Secrets read with no client of the cluster they are in (a caller's bug).
    #[error("the cluster Secrets can't be read: no connection to the cluster they are in")]
    NoHub,
    #[error(
        "forbidden to list the cluster Secrets of ECR_REFRESH_CLUSTERS={clusters} in {scope}: \
         grant the hub's ServiceAccount get and list on Secrets there (a Role in each \
         namespace of ECR_REFRESH_CLUSTERS_NAMESPACE; the chart's clusters.namespaces does): {error}"
    )]
    Forbidden {
        clusters: Source,
        scope: String,
        error: RequestError,
    },
    #[error(
        "could not list the cluster Secrets of ECR_REFRESH_CLUSTERS={clusters} in {scope}: {error}"
    )]
    Request {
        clusters: Source,
        scope: String,
        error: RequestError,
    },
    #[error(
        "the list of the cluster Secrets in {scope} kept expiring (410) after {MAX_RESTARTS} \
         restarts: the API server compacts faster than the list is read; run again"
    )]
    Expiring { scope: String },
    #[error(
        "cannot read the kubeconfig directory {} (ECR_REFRESH_CLUSTERS=dir:{}): {error}; mount \
         the kubeconfig Secret there, or fix the path",
        path.display(),
        path.display()
    )]
    Dir {
        path: PathBuf,
        error: std::io::Error,
    },
}

/// The clusters of `source`, in its order (namespace then Secret name; file name): Secrets
/// listed in each of `namespaces` (none: every namespace) with `selector` (a label selector,
/// ANDed with the source's own label). A name is one cluster: a second cluster of the same
/// name, or one named `local`, is refused. At most one [`Found::Local`].
/// `hub`: the client of the cluster the run runs in, where the Secrets are (None with `dir:`,
/// which reads no cluster).
pub async fn read(
    hub: Option<&kube::Client>,
    source: &Source,
    namespaces: &[String],
    selector: Option<&str>,
) -> Result<Vec<Found>, SourceError> {
    let selector = selector.map(str::trim).filter(|s| !s.is_empty());
    let namespaces = distinct(namespaces);
    // The Secrets with the source's own label, and the user's.
    let secrets = async |own: &str| {
        let hub = hub.ok_or(SourceError::NoHub)?;
        let labels = selector.map_or(own.to_owned(), |s| format!("{own},{s}"));
        list_secrets(hub, source, &namespaces, &labels)
            .await
            .map(stream::iter)
    };
    let found = match source {
        Source::Capi => {
            let secrets = secrets(CAPI_CLUSTER_LABEL).await?;
            secrets.filter_map(capi).collect().await
        }
        Source::ArgoCd => {
            let secrets = secrets(ARGOCD_CLUSTER_LABEL).await?;
            secrets.then(argocd).collect().await
        }
        Source::Dir(path) => dir(path).await?,
    };
    let found = unique(found);
    let refused = found
        .iter()
        .filter(|f| matches!(f, Found::Refused(_)))
        .count();
    let scope = match source {
        Source::Dir(_) => None,
        _ if namespaces.is_empty() => Some("*".to_owned()),
        _ => Some(namespaces.join(",")),
    };
    info!(
        source = %source,
        clusters_namespaces = scope.as_deref(),
        clusters = found.len() - refused,
        refused,
        "cluster source read"
    );
    Ok(found)
}

/// A cluster as the source found it, and where (the Secret or file), as a refusal names it.
struct Named {
    origin: String,
    found: Found,
}

fn distinct(namespaces: &[String]) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    namespaces
        .iter()
        .map(|n| n.trim())
        .filter(|n| !n.is_empty() && seen.insert(*n))
        .map(str::to_owned)
        .collect()
}

/// The Secrets with these labels in each namespace (none: every namespace), paged, each once
/// (a list restarted after its continue token expired shows Secrets again), in namespace and
/// name order.
async fn list_secrets(
    hub: &kube::Client,
    source: &Source,
    namespaces: &[String],
    labels: &str,
) -> Result<Vec<Secret>, SourceError> {
    let scopes: Vec<Option<&str>> = if namespaces.is_empty() {
        vec![None]
    } else {
        namespaces.iter().map(|n| Some(n.as_str())).collect()
    };
    let params = ListParams::default().labels(labels);
    let mut secrets = BTreeMap::new();
    for namespace in scopes {
        let pager = Pager::new("secrets", "list cluster secrets");
        let (api, mut pager) = match namespace {
            Some(ns) => (
                Api::<Secret>::namespaced(hub.clone(), ns),
                pager.in_namespace(ns),
            ),
            None => (Api::<Secret>::all(hub.clone()), pager),
        };
        let api = &api;
        while let Some(page) = pager
            .next(&params, |params| async move { api.list(&params).await })
            .await
        {
            let scope = || match namespace {
                Some(ns) => format!("namespace {ns}"),
                None => "every namespace".to_owned(),
            };
            let page = page.map_err(|e| match e {
                PageError::Request(error) if error.code() == Some(403) => SourceError::Forbidden {
                    clusters: source.clone(),
                    scope: scope(),
                    error,
                },
                PageError::Request(error) => SourceError::Request {
                    clusters: source.clone(),
                    scope: scope(),
                    error,
                },
                PageError::Expiring { .. } => SourceError::Expiring { scope: scope() },
            })?;
            for secret in page {
                let key = (
                    secret.metadata.namespace.clone().unwrap_or_default(),
                    secret.metadata.name.clone().unwrap_or_default(),
                );
                secrets.insert(key, secret);
            }
        }
    }
    Ok(secrets.into_values().collect())
}

/// `namespace/name` of a Secret.
fn secret_name(secret: &Secret) -> String {
    format!(
        "{}/{}",
        secret.metadata.namespace.as_deref().unwrap_or_default(),
        secret.metadata.name.as_deref().unwrap_or_default()
    )
}

/// A key of a Secret's data as text: None when absent, Err when not UTF-8.
fn text<'a>(secret: &'a Secret, key: &str) -> Option<Result<&'a str, String>> {
    let bytes = secret.data.as_ref()?.get(key)?;
    Some(std::str::from_utf8(&bytes.0).map_err(|_| format!("its key {key} is not UTF-8 text")))
}

/// A Cluster API Secret: the cluster's kubeconfig when it is exactly `<cluster>-kubeconfig`
/// of Cluster API's type, None for every other Secret of the cluster.
async fn capi(secret: Secret) -> Option<Named> {
    let namespace = secret.metadata.namespace.as_deref().unwrap_or_default();
    let cluster = secret.metadata.labels.as_ref()?.get(CAPI_CLUSTER_LABEL)?;
    // Exactly the name Cluster API gives the admin kubeconfig: `<cluster>-user-kubeconfig`
    // (a cluster named `<cluster>-user` aside), `-ca`, `-etcd`, `-sa`, `-proxy` never match.
    if cluster.is_empty()
        || secret.metadata.name.as_deref() != Some(format!("{cluster}-kubeconfig").as_str())
        || secret.type_.as_deref() != Some(CAPI_SECRET_TYPE)
    {
        return None;
    }
    let secret_name = secret_name(&secret);
    let origin = format!("Secret {secret_name}, key {CAPI_KEY}");
    let config = match text(&secret, CAPI_KEY) {
        None => Err(format!("Secret {secret_name} has no key {CAPI_KEY}")),
        Some(Err(e)) => Err(format!("Secret {secret_name}: {e}")),
        Some(Ok(yaml)) => match Kubeconfig::from_yaml(yaml) {
            Err(e) => Err(format!("{origin}: {}", unparsed(&e))),
            Ok(kc) => kubeconfig::config(&origin, kc).await,
        },
    };
    let found = Found::from_config(format!("{namespace}/{cluster}"), config);
    Some(Named { origin, found })
}

/// Why a kubeconfig does not parse, without the parser's own words: a YAML error quotes the
/// text around it, which may be the credential.
fn unparsed(e: &KubeconfigError) -> String {
    match e {
        KubeconfigError::Parse(_) => "not a kubeconfig: its YAML does not parse (the parser's \
             message is not shown: it may quote the credential)"
            .to_owned(),
        other => format!("not a kubeconfig: {}", crate::logging::error_chain(other)),
    }
}

/// Argo CD's `config` key (its `ClusterConfig`): the credential and TLS settings.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct ArgoConfig {
    bearer_token: Option<String>,
    username: Option<String>,
    password: Option<String>,
    #[serde(default)]
    tls_client_config: ArgoTls,
    exec_provider_config: Option<serde_json::Value>,
    aws_auth_config: Option<serde_json::Value>,
    proxy_url: Option<String>,
    disable_compression: Option<bool>,
}

/// Argo CD's `tlsClientConfig`: the `*Data` fields are Go `[]byte`, base64 in JSON, as a
/// kubeconfig's `*-data` fields are.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct ArgoTls {
    #[serde(default)]
    insecure: bool,
    server_name: Option<String>,
    ca_data: Option<String>,
    cert_data: Option<String>,
    key_data: Option<String>,
}

/// An Argo CD cluster Secret: the local cluster, a spoke, or why not.
async fn argocd(secret: Secret) -> Named {
    let origin = format!("Argo CD Secret {}", secret_name(&secret));
    let name = match text(&secret, "name") {
        Some(Ok(n)) if !n.trim().is_empty() => n.trim().to_owned(),
        _ => secret_name(&secret),
    };
    let found = match argocd_config(&secret, &origin).await.transpose() {
        None => Found::Local,
        Some(config) => Found::from_config(name, config),
    };
    Named { origin, found }
}

/// The spoke's configuration from an Argo CD Secret; None for the local cluster.
async fn argocd_config(secret: &Secret, origin: &str) -> Result<Option<kube::Config>, String> {
    let server = match text(secret, "server") {
        Some(Ok(s)) if !s.trim().is_empty() => s.trim().to_owned(),
        Some(Err(e)) => return Err(format!("{origin}: {e}")),
        _ => {
            return Err(format!(
                "{origin} has no key server: give the cluster's API server URL"
            ));
        }
    };
    if server.trim_end_matches('/') == ARGOCD_IN_CLUSTER {
        return Ok(None);
    }
    if let Some(namespaces) = text(secret, "namespaces")
        && namespaces.is_ok_and(|n| !n.trim().is_empty())
    {
        return Err(format!(
            "{origin} has the key namespaces: its credential is limited to those namespaces \
             (Argo CD's namespace-scoped cluster); give the spoke install's hub credential \
             (ServiceAccount ecr-refresh-hub) in a cluster Secret without namespaces"
        ));
    }
    let config: ArgoConfig = match text(secret, "config") {
        None => ArgoConfig::default(),
        Some(Err(e)) => return Err(format!("{origin}: {e}")),
        Some(Ok(json)) => serde_json::from_str(json).map_err(|e| {
            // Position only: serde_json's message quotes the value it could not read.
            format!(
                "{origin}: its key config is not Argo CD's cluster config JSON (line {}, column {})",
                e.line(),
                e.column()
            )
        })?,
    };
    let plugin = |key: &str| {
        format!(
            "{origin}: config.{key} runs a plugin to get a credential: exec plugins are not run \
             (the image has none); give a bearerToken or tlsClientConfig certData/keyData \
             (the spoke install's hub credential)"
        )
    };
    if config.exec_provider_config.is_some() {
        return Err(plugin("execProviderConfig"));
    }
    if config.aws_auth_config.is_some() {
        return Err(plugin("awsAuthConfig"));
    }
    if config.tls_client_config.insecure {
        return Err(format!(
            "{origin}: config.tlsClientConfig.insecure is true: the hub would send its \
             credential to whoever answers; give the cluster's CA (caData) instead"
        ));
    }
    kubeconfig::config(origin, argocd_kubeconfig(server, config))
        .await
        .map(Some)
}

/// Argo CD's cluster config as a kubeconfig of one context.
fn argocd_kubeconfig(server: String, config: ArgoConfig) -> Kubeconfig {
    let nonempty = |s: Option<String>| s.filter(|s| !s.is_empty());
    let tls = config.tls_client_config;
    const NAME: &str = "argocd";
    Kubeconfig {
        clusters: vec![NamedCluster {
            name: NAME.into(),
            cluster: Some(Cluster {
                server: Some(server),
                certificate_authority_data: nonempty(tls.ca_data),
                tls_server_name: nonempty(tls.server_name),
                proxy_url: nonempty(config.proxy_url),
                disable_compression: config.disable_compression,
                ..Cluster::default()
            }),
            ..NamedCluster::default()
        }],
        auth_infos: vec![NamedAuthInfo {
            name: NAME.into(),
            auth_info: Some(AuthInfo {
                token: nonempty(config.bearer_token).map(Into::into),
                username: nonempty(config.username),
                password: nonempty(config.password).map(Into::into),
                client_certificate_data: nonempty(tls.cert_data),
                client_key_data: nonempty(tls.key_data).map(Into::into),
                ..AuthInfo::default()
            }),
            ..NamedAuthInfo::default()
        }],
        contexts: vec![NamedContext {
            name: NAME.into(),
            context: Some(Context {
                cluster: NAME.into(),
                user: Some(NAME.into()),
                ..Context::default()
            }),
            ..NamedContext::default()
        }],
        current_context: Some(NAME.into()),
        ..Kubeconfig::default()
    }
}

/// The kubeconfig files of a directory, in file name order.
async fn dir(path: &Path) -> Result<Vec<Named>, SourceError> {
    let listing = path.to_owned();
    let files = tokio::task::spawn_blocking(move || kubeconfig_files(&listing))
        .await
        .unwrap_or_else(|e| Err(std::io::Error::other(e)))
        .map_err(|error| SourceError::Dir {
            path: path.to_owned(),
            error,
        })?;
    let mut found = Vec::new();
    for (name, file, read) in files {
        let origin = format!("file {}", file.display());
        let config = match read {
            Err(reason) => Err(format!("{origin}: {reason}")),
            Ok(kc) => kubeconfig::config_from_file(&origin, kc).await,
        };
        found.push(Named {
            found: Found::from_config(name, config),
            origin,
        });
    }
    Ok(found)
}

/// A file of the directory: its name, path, and its kubeconfig or why it has none.
type File = (String, PathBuf, Result<Kubeconfig, String>);

/// Each regular file of the directory (a symlink to one too: a mounted Secret's keys are
/// symlinks into `..data/`) whose name does not start with `.`, sorted by name, read.
fn kubeconfig_files(path: &Path) -> std::io::Result<Vec<File>> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(path)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') {
            continue;
        }
        let file = entry.path();
        let read = match std::fs::metadata(&file) {
            Ok(m) if !m.is_file() => continue,
            Ok(_) => Kubeconfig::read_from(&file).map_err(|e| match e {
                KubeconfigError::ReadConfig(error, _) => format!("cannot read it: {error}"),
                other => unparsed(&other),
            }),
            Err(e) => Err(format!("cannot read it: {e}")),
        };
        files.push((name, file, read));
    }
    files.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(files)
}

/// One cluster per name: a later cluster of a name already given, or one named `local` (the
/// cluster the run runs in), is refused; the local cluster is kept once.
fn unique(found: Vec<Named>) -> Vec<Found> {
    let mut first: HashMap<String, String> = HashMap::new();
    let mut local = false;
    let mut kept = Vec::new();
    for Named { origin, found } in found {
        if matches!(found, Found::Local) {
            if !std::mem::replace(&mut local, true) {
                kept.push(Found::Local);
            }
            continue;
        }
        let name = found.name().to_owned();
        let refusal = if name == LOCAL {
            Some(format!(
                "the name {LOCAL} is the cluster this run runs in: rename the cluster"
            ))
        } else {
            first.get(&name).map(|other| {
                format!("{other} names a cluster {name:?} too; a name is one cluster: rename one")
            })
        };
        match refusal {
            Some(why) => {
                let reason = format!("{origin}: {why}");
                kept.push(Found::Refused(Refused { name, reason }));
            }
            None => {
                first.insert(name, origin);
                kept.push(found);
            }
        }
    }
    kept
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine;
    use k8s_openapi::ByteString;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use secrecy::ExposeSecret;
    use serde_json::json;

    /// A PEM block kube takes for a certificate (it does not parse the DER).
    const PEM: &str = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";

    fn b64(s: &str) -> String {
        base64::engine::general_purpose::STANDARD.encode(s)
    }

    fn secret(
        namespace: &str,
        name: &str,
        type_: &str,
        labels: &[(&str, &str)],
        data: &[(&str, &str)],
    ) -> Secret {
        Secret {
            metadata: ObjectMeta {
                namespace: Some(namespace.into()),
                name: Some(name.into()),
                labels: Some(
                    labels
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect(),
                ),
                ..ObjectMeta::default()
            },
            type_: Some(type_.into()),
            data: Some(
                data.iter()
                    .map(|(k, v)| (k.to_string(), ByteString(v.as_bytes().to_vec())))
                    .collect(),
            ),
            ..Secret::default()
        }
    }

    fn kubeconfig_yaml(server: &str, user: &str) -> String {
        format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: c\n\
             contexts:\n- name: c\n  context: {{cluster: k, user: u}}\n\
             clusters:\n- name: k\n  cluster:\n    server: {server}\n    certificate-authority-data: {ca}\n\
             users:\n- name: u\n  user: {user}\n",
            ca = b64(PEM)
        )
    }

    fn capi_secret(name: &str, cluster: &str) -> Secret {
        secret(
            "fleet",
            name,
            CAPI_SECRET_TYPE,
            &[(CAPI_CLUSTER_LABEL, cluster)],
            &[(
                CAPI_KEY,
                &kubeconfig_yaml("https://prod:6443", "{token: t}"),
            )],
        )
    }

    async fn capi_found(secret: Secret) -> Option<Found> {
        capi(secret).await.map(|n| n.found)
    }

    fn spoke(found: Found) -> Spoke {
        match found {
            Found::Spoke(s) => *s,
            Found::Refused(r) => panic!("refused: {}", r.reason),
            Found::Local => panic!("local"),
        }
    }

    fn reason(found: Found) -> String {
        match found {
            Found::Refused(r) => r.reason,
            other => panic!("not refused: {}", other.name()),
        }
    }

    #[tokio::test]
    async fn capi_takes_exactly_the_clusters_kubeconfig_secret() {
        let found = spoke(
            capi_found(capi_secret("prod-kubeconfig", "prod"))
                .await
                .unwrap(),
        );
        assert_eq!(found.name, "fleet/prod");
        assert_eq!(found.config.cluster_url.to_string(), "https://prod:6443/");
    }

    #[tokio::test]
    async fn capi_never_takes_the_clusters_other_secrets() {
        for name in [
            "prod-ca",
            "prod-etcd",
            "prod-sa",
            "prod-proxy",
            "prod-user-kubeconfig",
            "prod-kubeconfig-old",
            "other-kubeconfig",
            "kubeconfig",
        ] {
            assert!(
                capi_found(capi_secret(name, "prod")).await.is_none(),
                "{name}"
            );
        }
        // The right name, another type or no label: not Cluster API's kubeconfig.
        let mut opaque = capi_secret("prod-kubeconfig", "prod");
        opaque.type_ = Some("Opaque".into());
        assert!(capi_found(opaque).await.is_none());
        let mut unlabelled = capi_secret("prod-kubeconfig", "prod");
        unlabelled.metadata.labels = None;
        assert!(capi_found(unlabelled).await.is_none());
        // A cluster named `prod-user` has its own `prod-user-kubeconfig`.
        let user = spoke(
            capi_found(capi_secret("prod-user-kubeconfig", "prod-user"))
                .await
                .unwrap(),
        );
        assert_eq!(user.name, "fleet/prod-user");
    }

    #[tokio::test]
    async fn capi_refuses_a_kubeconfig_secret_without_value_or_with_an_exec_user() {
        let mut empty = capi_secret("prod-kubeconfig", "prod");
        empty.data = None;
        let why = reason(capi_found(empty).await.unwrap());
        assert!(why.contains("has no key value"), "{why}");

        let mut exec = capi_secret("prod-kubeconfig", "prod");
        exec.data = Some(BTreeMap::from([(
            CAPI_KEY.to_owned(),
            ByteString(kubeconfig_yaml("https://prod:6443", "{exec: {command: aws}}").into_bytes()),
        )]));
        let why = reason(capi_found(exec).await.unwrap());
        assert!(
            why.starts_with("Secret fleet/prod-kubeconfig, key value: "),
            "{why}"
        );
        assert!(why.contains("exec plugins are not run"), "{why}");
    }

    #[tokio::test]
    async fn a_kubeconfig_that_does_not_parse_is_refused_without_quoting_it() {
        let mut broken = capi_secret("prod-kubeconfig", "prod");
        broken.data = Some(BTreeMap::from([(
            CAPI_KEY.to_owned(),
            ByteString(b"users: [token: s3cr3t: {".to_vec()),
        )]));
        let why = reason(capi_found(broken).await.unwrap());
        assert!(why.contains("does not parse"), "{why}");
        assert!(!why.contains("s3cr3t"), "{why}");
    }

    fn argocd_secret(name: Option<&str>, server: &str, config: serde_json::Value) -> Secret {
        let config = config.to_string();
        let mut data = vec![("server", server), ("config", config.as_str())];
        if let Some(name) = name {
            data.push(("name", name));
        }
        secret(
            "argocd",
            "cluster-prod",
            "Opaque",
            &[("argocd.argoproj.io/secret-type", "cluster")],
            &data,
        )
    }

    async fn argocd_found(secret: Secret) -> Found {
        argocd(secret).await.found
    }

    #[tokio::test]
    async fn argocd_bearer_token_config() {
        let found = spoke(
            argocd_found(argocd_secret(
                Some("prod"),
                "https://prod.example:6443",
                json!({"bearerToken": "t0k", "tlsClientConfig": {"caData": b64(PEM), "serverName": "prod.internal"}}),
            ))
            .await,
        );
        assert_eq!(found.name, "prod");
        assert_eq!(
            found.config.cluster_url.to_string(),
            "https://prod.example:6443/"
        );
        assert_eq!(found.config.auth_info.token.unwrap().expose_secret(), "t0k");
        assert_eq!(found.config.root_cert.map(|c| c.len()), Some(1));
        assert_eq!(
            found.config.tls_server_name.as_deref(),
            Some("prod.internal")
        );
        assert!(!found.config.accept_invalid_certs);
    }

    #[tokio::test]
    async fn argocd_basic_auth_config() {
        let found = spoke(
            argocd_found(argocd_secret(
                Some("prod"),
                "https://prod.example",
                json!({"username": "admin", "password": "pw", "tlsClientConfig": {"caData": b64(PEM)}}),
            ))
            .await,
        );
        assert_eq!(found.config.auth_info.username.as_deref(), Some("admin"));
        assert_eq!(
            found.config.auth_info.password.unwrap().expose_secret(),
            "pw"
        );
        assert!(found.config.root_cert.is_some());
    }

    #[tokio::test]
    async fn argocd_client_certificate_config() {
        let found = spoke(
            argocd_found(argocd_secret(
                Some("prod"),
                "https://prod.example",
                json!({"tlsClientConfig": {"caData": b64(PEM), "certData": b64(PEM), "keyData": b64("KEY")}}),
            ))
            .await,
        );
        let auth = found.config.auth_info;
        assert_eq!(auth.client_certificate_data, Some(b64(PEM)));
        assert_eq!(auth.client_key_data.unwrap().expose_secret(), b64("KEY"));
        assert!(auth.token.is_none());
        assert!(found.config.root_cert.is_some());
    }

    #[tokio::test]
    async fn argocd_in_cluster_is_the_local_cluster() {
        for server in [
            "https://kubernetes.default.svc",
            "https://kubernetes.default.svc/",
        ] {
            let found = argocd_found(argocd_secret(Some("in-cluster"), server, json!({}))).await;
            assert!(matches!(found, Found::Local), "{server}: {}", found.name());
        }
    }

    #[tokio::test]
    async fn argocd_refusals_name_the_key() {
        let cases = [
            (
                json!({"execProviderConfig": {"command": "argocd-k8s-auth", "apiVersion": "client.authentication.k8s.io/v1beta1"}}),
                "config.execProviderConfig",
            ),
            (
                json!({"awsAuthConfig": {"clusterName": "prod", "roleARN": "arn:aws:iam::1:role/r"}}),
                "config.awsAuthConfig",
            ),
            (
                json!({"bearerToken": "t", "tlsClientConfig": {"insecure": true}}),
                "config.tlsClientConfig.insecure is true",
            ),
            (json!({}), "the user has no credential"),
        ];
        for (config, expected) in cases {
            let why =
                reason(argocd_found(argocd_secret(Some("prod"), "https://prod", config)).await);
            assert!(
                why.starts_with("Argo CD Secret argocd/cluster-prod"),
                "{why}"
            );
            assert!(why.contains(expected), "{expected}: {why}");
        }
        let mut scoped = argocd_secret(Some("prod"), "https://prod", json!({"bearerToken": "t"}));
        scoped
            .data
            .as_mut()
            .unwrap()
            .insert("namespaces".into(), ByteString(b"team-a,team-b".to_vec()));
        let why = reason(argocd_found(scoped).await);
        assert!(why.contains("has the key namespaces"), "{why}");

        let mut serverless = argocd_secret(Some("prod"), "", json!({"bearerToken": "t"}));
        serverless.data.as_mut().unwrap().remove("server");
        let why = reason(argocd_found(serverless).await);
        assert!(why.contains("has no key server"), "{why}");

        let bad = argocd_secret(Some("prod"), "https://prod", json!({"bearerToken": 12345}));
        let why = reason(argocd_found(bad).await);
        assert!(why.contains("not Argo CD's cluster config JSON"), "{why}");
        assert!(!why.contains("12345"), "{why}");
    }

    #[tokio::test]
    async fn argocd_without_a_name_is_named_by_its_secret() {
        let found = argocd_found(argocd_secret(
            None,
            "https://prod",
            json!({"bearerToken": "t"}),
        ))
        .await;
        assert_eq!(found.name(), "argocd/cluster-prod");
    }

    fn named(origin: &str, found: Found) -> Named {
        Named {
            origin: origin.into(),
            found,
        }
    }

    #[test]
    fn a_name_given_twice_or_local_is_refused_and_local_is_kept_once() {
        let refused_one = |name: &str| {
            Found::Refused(Refused {
                name: name.into(),
                reason: "r".into(),
            })
        };
        let found = unique(vec![
            named("a", refused_one("prod")),
            named("b", refused_one("prod")),
            named("c", refused_one(LOCAL)),
            named("d", Found::Local),
            named("e", Found::Local),
        ]);
        let reasons: Vec<String> = found
            .into_iter()
            .map(|f| match f {
                Found::Refused(r) => r.reason,
                Found::Local => "LOCAL".into(),
                Found::Spoke(_) => unreachable!(),
            })
            .collect();
        assert_eq!(reasons.len(), 4, "{reasons:?}");
        assert_eq!(reasons[0], "r");
        assert!(
            reasons[1].starts_with("b: a names a cluster \"prod\" too"),
            "{}",
            reasons[1]
        );
        assert!(
            reasons[2].contains("the name local is the cluster this run runs in"),
            "{}",
            reasons[2]
        );
        assert_eq!(reasons[3], "LOCAL");
    }

    #[tokio::test]
    async fn dir_reads_regular_files_in_name_order_skipping_dotfiles() {
        let d = tempfile::tempdir().unwrap();
        let kc = |server: &str| kubeconfig_yaml(server, "{token: t}");
        std::fs::write(d.path().join("zeta"), kc("https://zeta")).unwrap();
        std::fs::write(d.path().join("alpha"), kc("https://alpha")).unwrap();
        std::fs::write(d.path().join(".hidden"), kc("https://hidden")).unwrap();
        std::fs::write(d.path().join("broken"), "users: [token: s3cr3t: {").unwrap();
        std::fs::create_dir(d.path().join("subdir")).unwrap();
        // A mounted Secret: `..data` a symlink to a timestamped directory, each key a symlink
        // into `..data/`.
        std::fs::create_dir(d.path().join("..2026_01_01")).unwrap();
        std::fs::write(d.path().join("..2026_01_01/mid"), kc("https://mid")).unwrap();
        std::os::unix::fs::symlink("..2026_01_01", d.path().join("..data")).unwrap();
        std::os::unix::fs::symlink("..data/mid", d.path().join("mid")).unwrap();

        let found = dir(d.path()).await.unwrap();
        let names: Vec<&str> = found.iter().map(|n| n.found.name()).collect();
        assert_eq!(names, ["alpha", "broken", "mid", "zeta"]);
        let urls: Vec<String> = found
            .iter()
            .filter_map(|n| match &n.found {
                Found::Spoke(s) => Some(s.config.cluster_url.to_string()),
                _ => None,
            })
            .collect();
        assert_eq!(urls, ["https://alpha/", "https://mid/", "https://zeta/"]);
        let Found::Refused(broken) = &found[1].found else {
            panic!("broken is not refused")
        };
        assert!(
            broken.reason.contains("does not parse"),
            "{}",
            broken.reason
        );
        assert!(!broken.reason.contains("s3cr3t"), "{}", broken.reason);
    }

    #[tokio::test]
    async fn a_missing_directory_is_a_source_error() {
        let d = tempfile::tempdir().unwrap();
        let missing = d.path().join("nope");
        let error = dir(&missing).await.err().unwrap();
        assert!(matches!(error, SourceError::Dir { .. }));
        assert!(
            error
                .to_string()
                .contains("mount the kubeconfig Secret there"),
            "{error}"
        );
    }

    /// A hub client on the fake API server.
    async fn hub(fake: &fake_cluster::FakeCluster) -> kube::Client {
        let kc = Kubeconfig::from_yaml(&fake.kubeconfig()).unwrap();
        let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
            .await
            .unwrap();
        kube::Client::try_from(config).unwrap()
    }

    fn seed_secret(fake: &fake_cluster::FakeCluster, s: &Secret) {
        fake.seed(
            fake_cluster::Resource::Secrets,
            serde_json::to_value(s).unwrap(),
            "test",
        );
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn read_lists_the_namespaces_with_the_selector_in_pages() {
        let fake = fake_cluster::FakeCluster::builder().max_page(1).start();
        for ns in ["fleet", "other"] {
            fake.add_namespace(ns, &[]);
        }
        let labelled = |name: &str, cluster: &str, ns: &str, env: &str| {
            let mut s = capi_secret(name, cluster);
            s.metadata.namespace = Some(ns.into());
            s.metadata
                .labels
                .as_mut()
                .unwrap()
                .insert("env".into(), env.into());
            s
        };
        for s in [
            labelled("b-kubeconfig", "b", "fleet", "prod"),
            labelled("a-kubeconfig", "a", "fleet", "prod"),
            labelled("a-ca", "a", "fleet", "prod"),
            labelled("c-kubeconfig", "c", "fleet", "dev"),
            labelled("d-kubeconfig", "d", "other", "prod"),
        ] {
            seed_secret(&fake, &s);
        }
        let hub = hub(&fake).await;
        let found = read(
            Some(&hub),
            &Source::Capi,
            &["fleet".into()],
            Some("env=prod"),
        )
        .await
        .unwrap();
        let names: Vec<&str> = found.iter().map(Found::name).collect();
        assert_eq!(names, ["fleet/a", "fleet/b"]);
        let lists: Vec<String> = fake
            .requests()
            .iter()
            .map(|r| format!("{} {}", r.method, r.path))
            .collect();
        assert!(
            lists
                .iter()
                .all(|l| l == "GET /api/v1/namespaces/fleet/secrets"),
            "{lists:?}"
        );
        assert!(lists.len() >= 3, "paged, one Secret a page: {lists:?}");
        let query = &fake.requests()[0].query;
        assert!(
            query.contains("labelSelector=cluster.x-k8s.io%2Fcluster-name%2Cenv%3Dprod"),
            "{query}"
        );

        let all = read(Some(&hub), &Source::Capi, &[], None).await.unwrap();
        let names: Vec<&str> = all.iter().map(Found::name).collect();
        assert_eq!(names, ["fleet/a", "fleet/b", "fleet/c", "other/d"]);
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn read_of_a_forbidden_namespace_says_what_to_grant() {
        let fake = fake_cluster::FakeCluster::start();
        fake.add_namespace("argocd", &[]);
        fake.add_fault(fake_cluster::Fault::new(
            "GET",
            "^/api/v1/namespaces/argocd/secrets$",
            403,
        ));
        let hub = hub(&fake).await;
        let error = read(Some(&hub), &Source::ArgoCd, &["argocd".into()], None)
            .await
            .unwrap_err();
        let text = error.to_string();
        assert!(matches!(error, SourceError::Forbidden { .. }), "{text}");
        assert!(
            text.contains("grant the hub's ServiceAccount get and list on Secrets"),
            "{text}"
        );
        assert!(text.contains("namespace argocd"), "{text}");
    }
}
