//! The connection to the Kubernetes API server.

use std::time::Duration;

use kube::Client;

use crate::retry::{self, REQUEST_TIMEOUT, RequestError};

const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    #[error(
        "no Kubernetes connection is configured: {0}; run in a pod with a ServiceAccount, or point KUBECONFIG \
         at a kubeconfig"
    )]
    Config(#[source] kube::config::InferConfigError),
    #[error("could not build the Kubernetes client: {0}")]
    Client(#[source] kube::Error),
    #[error(
        "the API server at {url} refused our credentials: {source}; check the ServiceAccount token or kubeconfig user"
    )]
    Unauthorized { url: String, source: RequestError },
    #[error("the API server at {url} is unreachable: {source}")]
    Unreachable { url: String, source: RequestError },
}

/// A client from kube's usual inference (KUBECONFIG, ~/.kube/config, in-cluster), with
/// timeouts, and without kube's own retry: ours (retry.rs) is bounded and jittered.
pub async fn connect() -> Result<(Client, String), ClusterError> {
    let mut config = kube::Config::infer().await.map_err(ClusterError::Config)?;
    config.default_retry = false;
    config.connect_timeout = Some(CONNECT_TIMEOUT);
    config.read_timeout = Some(REQUEST_TIMEOUT);
    config.write_timeout = Some(REQUEST_TIMEOUT);
    let url = config.cluster_url.to_string();
    let client = Client::try_from(config).map_err(ClusterError::Client)?;
    Ok((client, url))
}

/// Asks for /version, which every authenticated caller may read: fails fast, before any
/// write, when the server is unreachable or refuses our credentials.
pub async fn check(client: &Client, url: &str) -> Result<String, ClusterError> {
    match retry::send("get version", || client.apiserver_version()).await {
        Ok(info) => Ok(info.git_version),
        Err(e) if e.code() == Some(401) => Err(ClusterError::Unauthorized {
            url: url.to_owned(),
            source: e,
        }),
        Err(e) => Err(ClusterError::Unreachable {
            url: url.to_owned(),
            source: e,
        }),
    }
}
