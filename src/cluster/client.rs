//! The connection to the Kubernetes API server.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use hyper_util::client::proxy::matcher::Matcher;
use kube::Client;
use kube::client::ClientBuilder;
use kube::client::retry::RetryPolicy;
use tower::buffer::BufferLayer;
use tower::retry::RetryLayer;

use crate::cluster::retry::{self, ATTEMPT_TIMEOUT, RequestError};

const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Throttling (429) and unavailability (503, 504): retried this many times, waiting as the
/// server's Retry-After header says, or else backing off from this first delay up to this one.
const THROTTLE_RETRIES: u32 = 4;
const THROTTLE_FIRST_DELAY: Duration = Duration::from_millis(100);
const THROTTLE_MAX_DELAY: Duration = Duration::from_secs(10);

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
/// timeouts. 429, 503 and 504 are retried by kube's retry layer, which alone sees the
/// Retry-After header (the API server's flow control answers 429 in plain text), bounded here
/// to a few retries instead of kube's default of 15, and by retry.rs's CALL_TIMEOUT in time;
/// retry.rs covers the rest.
pub async fn connect() -> Result<(Client, String), ClusterError> {
    Target::local().await?.client(true)
}

/// A cluster a run works on: where its API server is and what the run is there. The cluster
/// the run runs in, by kube's inference; or a fleet's spoke, as its ServiceAccount.
#[derive(Clone)]
pub struct Target {
    config: kube::Config,
    /// A fleet's cluster: its requests are counted as its own too.
    cluster: Option<String>,
}

impl Target {
    /// The cluster the run runs in (KUBECONFIG, ~/.kube/config, in-cluster).
    pub async fn local() -> Result<Self, ClusterError> {
        let config = kube::Config::infer().await.map_err(ClusterError::Config)?;
        Ok(Self::new(config))
    }

    /// A cluster from its own configuration (a fleet's spoke).
    pub fn new(config: kube::Config) -> Self {
        Self {
            config,
            cluster: None,
        }
    }

    /// The same cluster, named as a fleet's: its requests are counted apart too
    /// ([`api_requests`]).
    pub fn named(self, cluster: &str) -> Self {
        Self {
            cluster: Some(cluster.to_owned()),
            ..self
        }
    }

    /// A client of this cluster, with the timeouts and retries every client of ours has;
    /// `throttle_retries: false` answers 429s instead of retrying them (the evictions': an
    /// eviction's 429 is a PodDisruptionBudget saying no, with a Retry-After of 10s, which a
    /// retry can't change).
    pub fn client(&self, throttle_retries: bool) -> Result<(Client, String), ClusterError> {
        let (mut config, cluster) = (self.config.clone(), self.cluster.clone());
        config.default_retry = false;
        config.connect_timeout = Some(CONNECT_TIMEOUT);
        config.read_timeout = Some(ATTEMPT_TIMEOUT);
        config.write_timeout = Some(ATTEMPT_TIMEOUT);
        let environment = ["HTTPS_PROXY", "https_proxy"]
            .iter()
            .filter_map(|v| std::env::var(v).ok())
            .find(|v| !v.trim().is_empty());
        config.proxy_url = proxy_for_cluster(
            &config.cluster_url,
            config.proxy_url.take(),
            environment.as_deref(),
            &Matcher::from_env(),
        );
        let url = config.cluster_url.to_string();
        let policy = RetryPolicy::new(
            THROTTLE_FIRST_DELAY,
            THROTTLE_MAX_DELAY,
            if throttle_retries {
                THROTTLE_RETRIES
            } else {
                0
            },
            true,
        )
        .expect("the throttling backoff's bounds are valid");
        let client = ClientBuilder::try_from(config)
            .map_err(ClusterError::Client)?
            // Innermost: counts every HTTP attempt, retries included, for the run's metrics.
            .with_layer(&tower::util::MapRequestLayer::new(move |request| {
                count_request(cluster.as_deref(), request)
            }))
            // Retry needs a service it can clone: the buffer is one.
            .with_layer(&BufferLayer::new(1024))
            .with_layer(&RetryLayer::new(policy))
            .build();
        Ok((client, url))
    }
}

/// The proxy to reach the API server through. kube takes a kubeconfig's `proxy-url`, else
/// HTTPS_PROXY, and (5.0) matches NO_PROXY against the proxy's own address, not the server's.
/// A proxy from the environment is dropped when NO_PROXY names the server, as curl and Go's
/// net/http do; a kubeconfig's `proxy-url` is the user's word for this cluster, and stays.
fn proxy_for_cluster(
    cluster: &http::Uri,
    chosen: Option<http::Uri>,
    https_proxy_variable: Option<&str>,
    environment: &Matcher,
) -> Option<http::Uri> {
    let chosen = chosen?;
    let from_environment = https_proxy_variable
        .and_then(|v| v.trim().parse::<http::Uri>().ok())
        .is_some_and(|env| env == chosen);
    if from_environment && environment.intercept(cluster).is_none() {
        return None;
    }
    Some(chosen)
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

// Requests sent to the Kubernetes API server, by method: every HTTP attempt, retries
// included, counted at the client's transport (connect adds `count_request` as a layer).
// A process runs once, so a process-wide count is the run's count; a fleet's are counted by
// cluster too (each cluster's clients are built `Target::named`).
const METHODS: [&str; 5] = ["GET", "POST", "PATCH", "PUT", "other"];
static API_REQUESTS: [AtomicU64; 5] = [const { AtomicU64::new(0) }; 5];
static BY_CLUSTER: std::sync::Mutex<Vec<(String, [u64; 5])>> = std::sync::Mutex::new(Vec::new());

/// Counts one request on its way to the API server; passes it on unchanged.
fn count_request<B>(cluster: Option<&str>, request: http::Request<B>) -> http::Request<B> {
    let method = request.method().as_str();
    let i = METHODS
        .iter()
        .position(|m| *m == method)
        .unwrap_or(METHODS.len() - 1);
    API_REQUESTS[i].fetch_add(1, Ordering::Relaxed);
    if let Some(cluster) = cluster {
        let mut counts = BY_CLUSTER.lock().unwrap_or_else(|p| p.into_inner());
        match counts.iter_mut().find(|(c, _)| c == cluster) {
            Some((_, n)) => n[i] += 1,
            None => {
                let mut n = [0; 5];
                n[i] = 1;
                counts.push((cluster.to_owned(), n));
            }
        }
    }
    request
}

/// The requests counted so far, by method: the whole run's, or one cluster's of a fleet.
pub fn api_requests(cluster: Option<&str>) -> Vec<(&'static str, u64)> {
    let counts: [u64; 5] = match cluster {
        None => std::array::from_fn(|i| API_REQUESTS[i].load(Ordering::Relaxed)),
        Some(cluster) => BY_CLUSTER
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .find(|(c, _)| c == cluster)
            .map_or([0; 5], |(_, n)| *n),
    };
    METHODS.iter().copied().zip(counts).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn uri(s: &str) -> http::Uri {
        s.parse().unwrap()
    }

    #[test]
    fn no_proxy_naming_the_api_server_sends_it_direct_and_keeps_the_proxy_for_others() {
        const PROXY: &str = "http://proxy.corp:3128";
        let matcher = Matcher::builder()
            .https(PROXY)
            .no("k8s.corp.internal,10.0.0.0/8")
            .build();
        let from_env = |cluster: &str| {
            proxy_for_cluster(&uri(cluster), Some(uri(PROXY)), Some(PROXY), &matcher)
        };
        assert_eq!(from_env("https://k8s.corp.internal:6443"), None);
        assert_eq!(from_env("https://10.1.2.3:6443"), None);
        assert_eq!(from_env("https://k8s.elsewhere:6443"), Some(uri(PROXY)));
    }

    #[test]
    fn a_kubeconfig_proxy_url_stays_whatever_no_proxy_says() {
        let matcher = Matcher::builder()
            .https("http://proxy.corp:3128")
            .no("k8s.corp.internal")
            .build();
        let kubeconfigs = Some(uri("http://jump.corp:8080"));
        assert_eq!(
            proxy_for_cluster(
                &uri("https://k8s.corp.internal:6443"),
                kubeconfigs.clone(),
                Some("http://proxy.corp:3128"),
                &matcher
            ),
            kubeconfigs
        );
        assert_eq!(
            proxy_for_cluster(&uri("https://k8s.corp.internal"), None, None, &matcher),
            None
        );
    }
}
