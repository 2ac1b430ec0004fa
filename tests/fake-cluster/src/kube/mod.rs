//! The fake Kubernetes API server: plain HTTP on 127.0.0.1, serving namespaces, secrets
//! and serviceaccounts of the core v1 API, Events (core/v1 and events.k8s.io/v1, events.rs), and a ServiceAccount's TokenRequest, with the user each request is made as (auth.rs), the way the real kube-apiserver does for what
//! ecr-refresh needs (what the real server answers, and where the fake differs: REAL-SERVER.md and CONFORMANCE.md beside this crate).
//!
//! The server runs on a background thread with its own tokio runtime; its state sits
//! behind one mutex that every request holds only while it reads or writes the store
//! (added latency is slept outside it).

mod auth;
mod events;
mod fields;
mod gojson;
mod http;
mod patch;
mod pods;
mod protobuf;
mod rbac;
mod selector;
mod status;
mod store;

use std::net::TcpListener as StdListener;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use regex::Regex;
use serde_json::Value;
use tokio::sync::mpsc;

use auth::User;
use rbac::{Identity, Rbac};
use store::{Hook, Store};

pub use auth::TokenRequested;

/// The documents of a multi-document YAML (kubectl kustomize's output) as JSON values,
/// empty documents left out: for tests that read manifests as the fake does.
pub fn yaml_documents(yaml: &str) -> Result<Vec<Value>, String> {
    use serde::Deserialize;
    let mut docs = Vec::new();
    for doc in serde_yaml_ng::Deserializer::from_str(yaml) {
        let value = Value::deserialize(doc).map_err(|e| format!("YAML: {e}"))?;
        if !value.is_null() {
            docs.push(value);
        }
    }
    Ok(docs)
}

/// The resources the fake serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Resource {
    Namespaces,
    Secrets,
    ServiceAccounts,
    /// Served for reading as the real server serves them (list pages, field selectors); their
    /// status is written only through the status subresource (pods.rs).
    Pods,
}

impl Resource {
    /// The resource's name in paths and errors (`secrets`).
    pub fn plural(self) -> &'static str {
        match self {
            Resource::Namespaces => "namespaces",
            Resource::Secrets => "secrets",
            Resource::ServiceAccounts => "serviceaccounts",
            Resource::Pods => "pods",
        }
    }

    /// The object kind (`Secret`).
    pub fn kind(self) -> &'static str {
        match self {
            Resource::Namespaces => "Namespace",
            Resource::Secrets => "Secret",
            Resource::ServiceAccounts => "ServiceAccount",
            Resource::Pods => "Pod",
        }
    }
}

/// One request as the server saw it, and what it answered.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: String,
    /// Path without the query, e.g. `/api/v1/namespaces/a/secrets/aws-ecr-token`.
    pub path: String,
    /// Raw query string (without `?`), empty when none.
    pub query: String,
    pub content_type: Option<String>,
    /// 0 when a fault cut the connection instead of answering (before serving, or after:
    /// `Fault::lose_answer`).
    pub status: u16,
    /// Request body as text (empty when none).
    pub body: String,
    /// The user the request was made as: the ServiceAccount whose TokenRequest token it
    /// carried, the user it impersonated (`Impersonate-User`), or else the kubeconfig's user
    /// (kube/auth.rs).
    pub user: String,
    /// The user its credential authenticated, before any impersonation: the kubeconfig's
    /// for every request that carried no token this server issued.
    pub credential_user: String,
}

/// A rule that makes matching requests fail (or slow) instead of being served.
#[derive(Debug, Clone)]
pub struct Fault {
    /// HTTP method to match, e.g. "PATCH"; None matches any.
    pub method: Option<String>,
    /// Regex matched against the request path.
    pub path: String,
    /// Regex matched against the raw query string (without the `?`); None matches any. E.g.
    /// `continue=` for a list's later pages only.
    pub query: Option<String>,
    /// Status to answer; None serves the request normally (after `latency`).
    pub status: Option<u16>,
    /// Body to answer with (a JSON string is sent as plain text); None answers as the real
    /// server does for `status`: a Status, or for 429 the plain text of its flow control.
    pub body: Option<Value>,
    pub retry_after_seconds: Option<u64>,
    pub latency: Option<Duration>,
    /// How many matching requests this rule applies to; None means every one.
    pub count: Option<usize>,
    /// Cut the connection mid-answer instead of answering (a dropped connection, a proxy or
    /// load balancer reset): the request log records status 0.
    pub hang_up: bool,
    /// Serve the request, then cut the connection before the answer arrives: the change is
    /// stored, the client never hears of it. The request log records status 0.
    pub lose_answer: bool,
}

impl Fault {
    /// A rule answering `status` to `method` requests whose path matches `path`, forever.
    pub fn new(method: &str, path: &str, status: u16) -> Self {
        Fault {
            method: Some(method.to_owned()),
            path: path.to_owned(),
            query: None,
            status: Some(status),
            body: None,
            retry_after_seconds: None,
            latency: None,
            count: None,
            hang_up: false,
            lose_answer: false,
        }
    }
    /// A rule that serves matching requests, then cuts the connection before the answer
    /// reaches the client (a proxy or an API server restart at the wrong moment).
    pub fn lose_answer(method: &str, path: &str) -> Self {
        Fault {
            lose_answer: true,
            status: None,
            ..Fault::new(method, path, 0)
        }
    }
    /// A rule that cuts the connection of matching requests mid-answer.
    pub fn hang_up(method: &str, path: &str) -> Self {
        Fault {
            hang_up: true,
            status: None,
            ..Fault::new(method, path, 0)
        }
    }
    /// A rule that only slows matching requests down (any method when `method` is None).
    pub fn slow(method: Option<&str>, path: &str, latency: Duration) -> Self {
        Fault {
            method: method.map(str::to_owned),
            path: path.to_owned(),
            query: None,
            status: None,
            body: None,
            retry_after_seconds: None,
            latency: Some(latency),
            count: None,
            hang_up: false,
            lose_answer: false,
        }
    }
    pub fn times(self, n: usize) -> Self {
        Fault {
            count: Some(n),
            ..self
        }
    }
    /// Only requests whose raw query string matches this regex: `continue=` for the pages
    /// after a list's first.
    pub fn query(self, query: &str) -> Self {
        Fault {
            query: Some(query.to_owned()),
            ..self
        }
    }
    pub fn retry_after(self, seconds: u64) -> Self {
        Fault {
            retry_after_seconds: Some(seconds),
            ..self
        }
    }
    /// Answers this body instead of a Status made for the code.
    pub fn body(self, body: Value) -> Self {
        Fault {
            body: Some(body),
            ..self
        }
    }
    pub fn latency(self, latency: Duration) -> Self {
        Fault {
            latency: Some(latency),
            ..self
        }
    }
}

/// A fault rule with its path compiled and its remaining count.
struct ActiveFault {
    fault: Fault,
    path: Regex,
    query: Option<Regex>,
    remaining: Option<usize>,
}

/// What a fault makes of a request: added latency, the answer if it replaces serving, and
/// whether the answer is lost after serving.
type FaultOutcome = (Option<Duration>, Option<(u16, Value, Option<u64>)>, bool);

/// The mutable state, behind the one lock.
#[derive(Default)]
struct Inner {
    store: Store,
    events: events::Events,
    requests: Vec<Recorded>,
    faults: Vec<ActiveFault>,
    /// Until when, after an outage, every resource request is refused 403: a restarted
    /// kube-apiserver serves before its RBAC authorizer has loaded the roles (REAL-SERVER.md).
    rbac_unsynced_until: Option<Instant>,
    /// The tokens TokenRequests issued, each with the ServiceAccount it authenticates.
    tokens: std::collections::HashMap<String, Identity>,
    /// The TokenRequests answered, in order.
    token_requests: Vec<TokenRequested>,
}

/// How long the fake refuses resource requests after an outage. The real server did for up
/// to a few seconds on 2 loaded cores; a shorter spell keeps the tests quick.
pub const RBAC_UNSYNCED_AFTER_OUTAGE: Duration = Duration::from_secs(2);

impl Inner {
    fn rbac_unsynced(&self) -> bool {
        self.rbac_unsynced_until
            .is_some_and(|until| Instant::now() < until)
    }

    /// The first fault rule matching the request, counted down.
    fn take_fault(&mut self, method: &str, path: &str, query: &str) -> Option<FaultOutcome> {
        let i = self.faults.iter().position(|f| {
            f.remaining != Some(0)
                && f.fault
                    .method
                    .as_deref()
                    .is_none_or(|m| m.eq_ignore_ascii_case(method))
                && f.path.is_match(path)
                && f.query.as_ref().is_none_or(|q| q.is_match(query))
        })?;
        let active = &mut self.faults[i];
        if let Some(n) = active.remaining.as_mut() {
            *n -= 1;
        }
        let fault = &active.fault;
        let answer = if fault.hang_up {
            Some((0, Value::Null, None))
        } else {
            fault
                .status
                .map(|code| http::fault_answer(code, fault.body.clone(), fault.retry_after_seconds))
        };
        Some((fault.latency, answer, fault.lose_answer))
    }
}

/// What the request handler shares.
struct Shared {
    inner: Mutex<Inner>,
    latency: Duration,
    max_page: usize,
    rbac: Option<Rbac>,
    /// The ServiceAccount RBAC holds (every request made as it is authorized by `rbac`).
    identity: Identity,
    /// Whom the kubeconfig's credential (and any token this server did not issue)
    /// authenticates: `identity`'s user unless a test sets another (kube/auth.rs).
    kubeconfig_user: User,
    log_requests: bool,
    request_count: AtomicUsize,
    port: u16,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic under the lock (a bug in a hook) must not hide the state from the test.
        self.inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

pub struct FakeClusterBuilder {
    latency: Duration,
    max_page: usize,
    /// The RBAC YAML, resolved for `identity` when the server starts.
    rbac: Option<String>,
    identity: Identity,
    kubeconfig_user: Option<String>,
    log_requests: bool,
    port: u16,
}

impl FakeClusterBuilder {
    /// Added latency on every request (before it is served).
    pub fn latency(self, latency: Duration) -> Self {
        FakeClusterBuilder { latency, ..self }
    }
    /// Server-side maximum page for lists (default 500).
    pub fn max_page(self, n: usize) -> Self {
        assert!(n > 0, "max_page must be at least 1");
        FakeClusterBuilder {
            max_page: n,
            ..self
        }
    }
    /// Enforce RBAC from the ClusterRole, Role, ClusterRoleBinding and RoleBinding documents
    /// in this YAML (multi-document): only rules of roles bound to the user every request is
    /// made as (see [`FakeClusterBuilder::service_account`]; directly or by its groups) are
    /// granted, a ClusterRole bound by a RoleBinding only in that namespace. Anything not
    /// granted is refused with 403 as the real server does; roles without a binding grant
    /// nothing.
    ///
    /// Panics when the YAML does not parse (a broken test fixture).
    pub fn rbac_from_yaml(self, yaml: &str) -> Self {
        Rbac::from_yaml(yaml, &self.identity).unwrap_or_else(|e| panic!("{e}"));
        FakeClusterBuilder {
            rbac: Some(yaml.to_owned()),
            ..self
        }
    }
    /// The ServiceAccount every request is authenticated as (its user
    /// `system:serviceaccount:NAMESPACE:NAME` and groups), for RBAC. By default
    /// ecr-refresh's own, `ecr-refresh` in namespace `ecr-refresh`; an overlay that renames it
    /// (kustomize `namespace:`, `namePrefix:`) is tested by naming the renamed one here.
    pub fn service_account(self, namespace: &str, name: &str) -> Self {
        FakeClusterBuilder {
            identity: Identity {
                namespace: namespace.to_owned(),
                name: name.to_owned(),
            },
            ..self
        }
    }
    /// The user the kubeconfig's credential authenticates as (default: the ServiceAccount of
    /// [`FakeClusterBuilder::service_account`]). A fleet's spoke sets it apart, e.g.
    /// `system:serviceaccount:ecr-refresh:ecr-refresh-hub`, so that the requests made with
    /// the kubeconfig's credential are told from those made with a token its TokenRequest
    /// issued ([`Recorded::user`], [`Recorded::credential_user`]). RBAC holds only requests
    /// made as the ServiceAccount: any other user is served as an admin.
    pub fn kubeconfig_user(self, user: &str) -> Self {
        FakeClusterBuilder {
            kubeconfig_user: Some(user.to_owned()),
            ..self
        }
    }
    /// Do not record requests (for benchmarks).
    pub fn without_request_log(self) -> Self {
        FakeClusterBuilder {
            log_requests: false,
            ..self
        }
    }
    /// Listen on this port (0, the default, picks a free one).
    pub fn port(self, port: u16) -> Self {
        FakeClusterBuilder { port, ..self }
    }
    ///
    /// Panics when the port cannot be bound or the runtime cannot start.
    pub fn start(self) -> FakeCluster {
        let listener = StdListener::bind(("127.0.0.1", self.port))
            .unwrap_or_else(|e| panic!("fake cluster: binding 127.0.0.1:{}: {e}", self.port));
        listener
            .set_nonblocking(true)
            .expect("fake cluster: a bound socket can be made non-blocking");
        let port = listener
            .local_addr()
            .expect("fake cluster: a bound socket has an address")
            .port();
        let rbac = self
            .rbac
            .as_deref()
            .map(|yaml| Rbac::from_yaml(yaml, &self.identity).unwrap_or_else(|e| panic!("{e}")));
        let inner = Inner::default();
        let shared = Arc::new(Shared {
            inner: Mutex::new(inner),
            latency: self.latency,
            max_page: self.max_page,
            rbac,
            kubeconfig_user: self
                .kubeconfig_user
                .as_deref()
                .map_or_else(|| User::of(&self.identity), User::named),
            identity: self.identity.clone(),
            log_requests: self.log_requests,
            request_count: AtomicUsize::new(0),
            port,
        });
        let (control, commands) = mpsc::unbounded_channel::<Command>();
        let app = axum::Router::new()
            .fallback(http::handle)
            .with_state(Arc::clone(&shared));
        let thread = std::thread::Builder::new()
            .name(format!("fake-cluster-{port}"))
            .spawn({
                let shared = Arc::clone(&shared);
                move || serve(listener, app, port, commands, &shared)
            })
            .expect("fake cluster: spawning the server thread");
        FakeCluster {
            shared,
            port,
            control,
            thread: Some(thread),
        }
    }
}

/// What the server thread is told to do.
enum Command {
    Stop,
    /// Close the listener and every open connection, stay away this long, then listen again
    /// on the same port; `down` is answered once nothing listens any more.
    Outage {
        duration: Duration,
        down: std::sync::mpsc::Sender<()>,
    },
}

/// The server thread: serves until told to stop. An outage drops the runtime, which closes
/// the listener and every connection at once (as a restarting API server does), and
/// re-binds the same port afterwards; the state lives in `Shared`, outside, and is kept.
fn serve(
    listener: StdListener,
    app: axum::Router,
    port: u16,
    mut commands: mpsc::UnboundedReceiver<Command>,
    shared: &Shared,
) {
    let mut listener = Some(listener);
    loop {
        let std_listener = match listener.take() {
            Some(l) => l,
            None => rebind(port),
        };
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("fake cluster: tokio runtime");
        let command = runtime.block_on(async {
            let listener = tokio::net::TcpListener::from_std(std_listener)
                .expect("fake cluster: listener into tokio");
            tokio::select! {
                served = axum::serve(listener, app.clone()) => {
                    if let Err(e) = served {
                        eprintln!("fake cluster on port {port} stopped: {e}");
                    }
                    Command::Stop
                }
                command = commands.recv() => command.unwrap_or(Command::Stop),
            }
        });
        // Drop open connections instead of waiting for clients to close them.
        runtime.shutdown_background();
        match command {
            Command::Stop => return,
            Command::Outage { duration, down } => {
                let _ = down.send(());
                std::thread::sleep(duration);
                shared.lock().rbac_unsynced_until =
                    Some(Instant::now() + RBAC_UNSYNCED_AFTER_OUTAGE);
            }
        }
    }
}

/// The same port again, once the old listener is gone. std sets SO_REUSEADDR on Unix, so
/// connections still in TIME_WAIT do not hold the port; anything else gets a few tries.
fn rebind(port: u16) -> StdListener {
    let mut tries = 0;
    loop {
        match StdListener::bind(("127.0.0.1", port)) {
            Ok(listener) => {
                listener
                    .set_nonblocking(true)
                    .expect("fake cluster: a bound socket can be made non-blocking");
                return listener;
            }
            Err(e) if tries < 100 => {
                tries += 1;
                eprintln!("fake cluster: re-binding 127.0.0.1:{port}: {e}; trying again");
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(e) => panic!("fake cluster: re-binding 127.0.0.1:{port}: {e}"),
        }
    }
}

/// A running fake API server. Dropping it stops the server.
pub struct FakeCluster {
    shared: Arc<Shared>,
    port: u16,
    control: mpsc::UnboundedSender<Command>,
    thread: Option<JoinHandle<()>>,
}

impl Drop for FakeCluster {
    fn drop(&mut self) {
        // The server may already be gone; then there is nothing to stop.
        let _ = self.control.send(Command::Stop);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl FakeCluster {
    pub fn builder() -> FakeClusterBuilder {
        FakeClusterBuilder {
            latency: Duration::ZERO,
            max_page: 500,
            rbac: None,
            identity: Identity::default(),
            kubeconfig_user: None,
            log_requests: true,
            port: 0,
        }
    }
    /// A server with no latency, pages of 500 and no RBAC.
    pub fn start() -> FakeCluster {
        FakeCluster::builder().start()
    }
    /// `http://127.0.0.1:PORT`
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
    /// Writes a kubeconfig pointing at this server into `dir` and returns its path.
    ///
    /// Panics when the file cannot be written.
    pub fn write_kubeconfig(&self, dir: &Path) -> PathBuf {
        let path = dir.join("kubeconfig");
        self.write_kubeconfig_to(&path);
        path
    }
    /// Writes a kubeconfig pointing at this server to exactly `path`.
    pub fn write_kubeconfig_to(&self, path: &Path) {
        std::fs::write(path, self.kubeconfig())
            .unwrap_or_else(|e| panic!("writing kubeconfig {}: {e}", path.display()));
    }
    /// The kubeconfig text: one cluster, one context, a user with a dummy token.
    pub fn kubeconfig(&self) -> String {
        format!(
            "apiVersion: v1
kind: Config
clusters:
- name: fake
  cluster:
    server: {url}
contexts:
- name: fake
  context:
    cluster: fake
    user: fake
    namespace: default
current-context: fake
users:
- name: fake
  user:
    token: fake-token
",
            url = self.url()
        )
    }

    // Seeding and reading state directly (no request is logged for these).

    /// Creates an Active namespace with these labels.
    pub fn add_namespace(&self, name: &str, labels: &[(&str, &str)]) {
        let labels: serde_json::Map<String, Value> = labels
            .iter()
            .map(|(k, v)| ((*k).to_owned(), Value::String((*v).to_owned())))
            .collect();
        let ns = serde_json::json!({"metadata": {"name": name, "labels": labels}});
        self.shared
            .lock()
            .store
            .seed(Resource::Namespaces, ns, "kubectl-create");
    }
    /// Creates a namespace that is Terminating (status.phase and metadata.deletionTimestamp).
    pub fn add_terminating_namespace(&self, name: &str) {
        let ns =
            serde_json::json!({"metadata": {"name": name}, "status": {"phase": "Terminating"}});
        self.shared
            .lock()
            .store
            .seed(Resource::Namespaces, ns, "kubectl-create");
    }
    /// Stores an object as if `manager` had created it with an Update operation
    /// (POST), giving it a fresh uid and resourceVersion; returns the stored object.
    /// `obj` must carry metadata.name (and metadata.namespace for namespaced resources).
    ///
    /// Panics when `obj` lacks metadata.name (or metadata.namespace when namespaced).
    pub fn seed(&self, resource: Resource, obj: Value, manager: &str) -> Value {
        self.shared.lock().store.seed(resource, obj, manager)
    }
    pub fn get(&self, resource: Resource, namespace: &str, name: &str) -> Option<Value> {
        let inner = self.shared.lock();
        inner
            .store
            .lookup(resource, namespace, name)
            .map(|s| s.obj.clone())
    }
    /// Deletes the object as a DELETE would (recorded in its history, not in the request log).
    /// Deleting a namespace removes it and everything in it at once.
    pub fn delete(&self, resource: Resource, namespace: &str, name: &str) {
        self.shared
            .lock()
            .store
            .delete_now(resource, namespace, name);
    }
    /// Writes a pod's status as the admin would through the status subresource (there is no
    /// kubelet): everything but the status stays as it is. Not recorded in the request log.
    ///
    /// Panics when the pod does not exist or the status is refused (a broken test).
    pub fn set_pod_status(&self, namespace: &str, name: &str, status: Value) -> Value {
        let opts = store::WriteOptions {
            manager: "kubelet".into(),
            dry_run: false,
        };
        self.shared
            .lock()
            .store
            .write_status(
                Resource::Pods,
                namespace,
                name,
                serde_json::json!({ "status": status }),
                true,
                &opts,
            )
            .unwrap_or_else(|e| panic!("status of pod {namespace}/{name}: {}", e.body))
    }
    /// Every version of the object ever stored, in order; `None` where it was deleted.
    pub fn history(&self, resource: Resource, namespace: &str, name: &str) -> Vec<Option<Value>> {
        self.shared.lock().store.history(resource, namespace, name)
    }
    /// The Events in `namespace`, in their events.k8s.io/v1 form.
    pub fn events(&self, namespace: &str) -> Vec<Value> {
        self.shared.lock().events.in_namespace(namespace)
    }
    pub fn requests(&self) -> Vec<Recorded> {
        self.shared.lock().requests.clone()
    }
    /// The user the kubeconfig's credential authenticates as
    /// ([`FakeClusterBuilder::kubeconfig_user`]).
    pub fn kubeconfig_user(&self) -> String {
        self.shared.kubeconfig_user.name.clone()
    }
    /// The TokenRequests this server answered with a token, in order.
    pub fn token_requests(&self) -> Vec<TokenRequested> {
        self.shared.lock().token_requests.clone()
    }
    /// Count of requests served, even when the log is off.
    pub fn request_count(&self) -> usize {
        self.shared
            .request_count
            .load(std::sync::atomic::Ordering::Relaxed)
    }
    /// Rules are tried in the order they were added; the first match applies.
    ///
    /// Panics when `fault.path` (or `fault.query`) is not a valid regex.
    pub fn add_fault(&self, fault: Fault) {
        let path = Regex::new(&fault.path)
            .unwrap_or_else(|e| panic!("fault path {:?} is not a regex: {e}", fault.path));
        let query = fault.query.as_ref().map(|q| {
            Regex::new(q).unwrap_or_else(|e| panic!("fault query {q:?} is not a regex: {e}"))
        });
        let remaining = fault.count;
        self.shared.lock().faults.push(ActiveFault {
            fault,
            path,
            query,
            remaining,
        });
    }
    /// Right after the next GET of this object is answered, delete it (the in-flight delete).
    pub fn delete_after_next_get(&self, resource: Resource, namespace: &str, name: &str) {
        self.shared
            .lock()
            .store
            .add_hook(resource, namespace, name, Hook::Delete);
    }
    /// Right after the next GET of this object is answered, delete its namespace with
    /// everything in it (a namespace deleted during a run, between our read and our write).
    pub fn delete_namespace_after_next_get(&self, resource: Resource, namespace: &str, name: &str) {
        self.shared
            .lock()
            .store
            .add_hook(resource, namespace, name, Hook::DeleteNamespace);
    }
    /// Right after the next GET of this object is answered (typically a 404), create it as
    /// `manager` would with a POST (the in-flight create of another client), so a create
    /// that follows meets 409 AlreadyExists. `obj` gets the name and namespace given here;
    /// nothing happens if the object exists by then.
    pub fn create_after_next_get(
        &self,
        resource: Resource,
        namespace: &str,
        name: &str,
        obj: Value,
        manager: &str,
    ) {
        self.shared.lock().store.add_hook(
            resource,
            namespace,
            name,
            Hook::Create(obj, manager.to_owned()),
        );
    }
    /// Right after the next GET of this object is answered, run `change` on the stored
    /// object (as an Update by manager "someone-else", bumping resourceVersion).
    pub fn change_after_next_get(
        &self,
        resource: Resource,
        namespace: &str,
        name: &str,
        change: impl FnOnce(&mut Value) + Send + 'static,
    ) {
        self.shared.lock().store.add_hook(
            resource,
            namespace,
            name,
            Hook::Change(Box::new(change)),
        );
    }
    /// An API server outage (a restart, a load balancer failing over): the listener and every
    /// open connection are closed, so connecting is refused and requests in flight are cut;
    /// after `duration` the server listens on the same port again, its state as it was, but
    /// for [`RBAC_UNSYNCED_AFTER_OUTAGE`] refuses every resource request 403 Forbidden, as a
    /// restarted kube-apiserver does before its RBAC authorizer has loaded the roles
    /// (REAL-SERVER.md). Returns once nothing listens any more.
    ///
    /// Panics when the server thread is gone.
    pub fn outage(&self, duration: Duration) {
        let (down, is_down) = std::sync::mpsc::channel();
        self.control
            .send(Command::Outage { duration, down })
            .expect("fake cluster: the server thread is running");
        is_down
            .recv()
            .expect("fake cluster: the server thread answers an outage");
    }
    /// The next continue token that is presented is answered with 410 Expired.
    pub fn expire_next_continue(&self) {
        self.shared.lock().store.expire_next_continue = true;
    }
    /// The next continue token presented to a list of `resource` is answered with 410 Expired.
    pub fn expire_next_continue_of(&self, resource: Resource) {
        self.shared.lock().store.expire_next_continue_of = Some(resource);
    }
}
