//! A plain-HTTP proxy on loopback in front of a real kube-apiserver, for the binary's runs:
//! it forwards every request over TLS (trusting the control plane's CA), records each
//! exchange as the fake API server records its requests, and can act between the server's
//! answer and its delivery (the in-flight delete).
//!
//! The binary's kubeconfig names `http://127.0.0.1:PORT` with the bearer token, which the
//! proxy passes on untouched: kube-rs takes an http server (its connector is
//! `https_or_http`).

use std::sync::{Arc, Mutex};

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::Response;

/// One request through the proxy and the server's answer to it.
#[derive(Clone, Debug)]
pub(crate) struct Exchange {
    pub method: String,
    /// The path without the query.
    pub path: String,
    pub query: String,
    pub content_type: Option<String>,
    pub request_body: String,
    pub status: u16,
    pub response_body: String,
}

type Hook = Box<dyn FnOnce() + Send>;

struct Shared {
    upstream: String,
    client: reqwest::Client,
    exchanges: Mutex<Vec<Exchange>>,
    /// (method, path, what to do): once, after the server answered that request with a 2xx
    /// and before the answer is passed on.
    hook: Mutex<Option<(String, String, Hook)>>,
}

pub(crate) struct Proxy {
    url: String,
    shared: Arc<Shared>,
    // Dropping the runtime stops the server.
    _runtime: tokio::runtime::Runtime,
}

impl Proxy {
    /// A proxy to `upstream` (`https://127.0.0.1:PORT`), trusting the PEM CA `ca_pem`.
    pub(crate) fn start(upstream: &str, ca_pem: &str) -> Self {
        // kube (aws-lc-rs) and reqwest in one test binary: name the provider, or rustls
        // refuses to pick one. A second install (another proxy) is refused, harmlessly.
        let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
        let ca = reqwest::Certificate::from_pem(ca_pem.as_bytes()).expect("the CA is PEM");
        let client = reqwest::Client::builder()
            .tls_certs_only([ca])
            .build()
            .expect("a TLS client for the control plane");
        let shared = Arc::new(Shared {
            upstream: upstream.trim_end_matches('/').to_owned(),
            client,
            exchanges: Mutex::new(Vec::new()),
            hook: Mutex::new(None),
        });
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("a runtime for the proxy");
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .expect("a free loopback port");
        let url = format!(
            "http://{}",
            listener.local_addr().expect("the proxy's address")
        );
        let app = axum::Router::new()
            .fallback(forward)
            .with_state(shared.clone());
        runtime.spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self {
            url,
            shared,
            _runtime: runtime,
        }
    }

    /// `http://127.0.0.1:PORT`.
    pub(crate) fn url(&self) -> &str {
        &self.url
    }

    /// Every exchange so far, in order of the server's answers.
    pub(crate) fn exchanges(&self) -> Vec<Exchange> {
        self.shared.exchanges.lock().unwrap().clone()
    }

    /// Once: right after the server answers `method path` (no query) with a 2xx, and before
    /// that answer is passed on, runs `act`.
    pub(crate) fn after_answer_to(
        &self,
        method: &str,
        path: &str,
        act: impl FnOnce() + Send + 'static,
    ) {
        *self.shared.hook.lock().unwrap() =
            Some((method.to_owned(), path.to_owned(), Box::new(act)));
    }

    /// The exchanges whose method is not a read (GET, LIST and WATCH are all GET here).
    pub(crate) fn writes(&self) -> Vec<Exchange> {
        self.exchanges()
            .into_iter()
            .filter(|e| e.method != "GET")
            .collect()
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

async fn forward(State(shared): State<Arc<Shared>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let body = axum::body::to_bytes(body, usize::MAX)
        .await
        .unwrap_or_default();
    let path = parts.uri.path().to_owned();
    let query = parts.uri.query().unwrap_or_default().to_owned();
    let target = match parts.uri.query() {
        Some(q) => format!("{}{path}?{q}", shared.upstream),
        None => format!("{}{path}", shared.upstream),
    };
    let mut outgoing = shared.client.request(parts.method.clone(), target);
    for (name, value) in &parts.headers {
        if ![header::HOST, header::CONTENT_LENGTH, header::CONNECTION].contains(name) {
            outgoing = outgoing.header(name, value);
        }
    }
    let (status, headers, answer) = match outgoing.body(body.clone()).send().await {
        Ok(answer) => {
            let status = answer.status();
            let headers = answer.headers().clone();
            let bytes = answer.bytes().await.unwrap_or_default();
            (status, headers, bytes)
        }
        Err(e) => (
            StatusCode::BAD_GATEWAY,
            HeaderMap::new(),
            Bytes::from(format!("the proxy could not reach the control plane: {e}")),
        ),
    };
    let method = parts.method.as_str().to_owned();
    if status.is_success() {
        let act = {
            let mut hook = shared.hook.lock().unwrap();
            match hook.take() {
                Some((m, p, act)) if m == method && p == path => Some(act),
                other => {
                    *hook = other;
                    None
                }
            }
        };
        if let Some(act) = act {
            tokio::task::spawn_blocking(act)
                .await
                .expect("the proxy's hook ran");
        }
    }
    shared.exchanges.lock().unwrap().push(Exchange {
        method,
        path,
        query,
        content_type: parts
            .headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned),
        request_body: text(&body),
        status: status.as_u16(),
        response_body: text(&answer),
    });
    let mut response = Response::new(Body::from(answer));
    *response.status_mut() = status;
    for (name, value) in &headers {
        if ![
            header::CONTENT_LENGTH,
            header::TRANSFER_ENCODING,
            header::CONNECTION,
        ]
        .contains(name)
        {
            response.headers_mut().append(name, value.clone());
        }
    }
    response
}
