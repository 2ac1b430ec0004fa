//! The fake Kubernetes API server. CONTRACT: the public signatures below are used by
//! ecr-refresh's tests; keep them (add to them freely). Bodies are to be implemented.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

/// The resources the fake serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Resource {
    Namespaces,
    Secrets,
    ServiceAccounts,
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
    pub status: u16,
    /// Request body as text (empty when none).
    pub body: String,
}

/// A rule that makes matching requests fail (or slow) instead of being served.
#[derive(Debug, Clone)]
pub struct Fault {
    /// HTTP method to match, e.g. "PATCH"; None matches any.
    pub method: Option<String>,
    /// Regex matched against the request path.
    pub path: String,
    /// Status to answer; None serves the request normally (after `latency`).
    pub status: Option<u16>,
    /// Body to answer with; None makes a Status body like the real server's for `status`.
    pub body: Option<Value>,
    pub retry_after_seconds: Option<u64>,
    pub latency: Option<Duration>,
    /// How many matching requests this rule applies to; None means every one.
    pub count: Option<usize>,
}

impl Fault {
    /// A rule answering `status` to `method` requests whose path matches `path`, forever.
    pub fn new(method: &str, path: &str, status: u16) -> Self {
        todo!()
    }
    pub fn times(self, n: usize) -> Self {
        todo!()
    }
    pub fn retry_after(self, seconds: u64) -> Self {
        todo!()
    }
}

pub struct FakeClusterBuilder {/* private */}

impl FakeClusterBuilder {
    /// Added latency on every request (before it is served).
    pub fn latency(self, latency: Duration) -> Self {
        todo!()
    }
    /// Server-side maximum page for lists (default 500).
    pub fn max_page(self, n: usize) -> Self {
        todo!()
    }
    /// Enforce RBAC from the ClusterRole/Role documents in this YAML (multi-document);
    /// anything not granted is refused with 403 as the real server does.
    pub fn rbac_from_yaml(self, yaml: &str) -> Self {
        todo!()
    }
    /// Do not record requests (for benchmarks).
    pub fn without_request_log(self) -> Self {
        todo!()
    }
    pub fn start(self) -> FakeCluster {
        todo!()
    }
}

/// A running fake API server. Dropping it stops the server.
pub struct FakeCluster {/* private */}

impl FakeCluster {
    pub fn builder() -> FakeClusterBuilder {
        todo!()
    }
    /// A server with no latency, pages of 500 and no RBAC.
    pub fn start() -> FakeCluster {
        todo!()
    }
    /// `http://127.0.0.1:PORT`
    pub fn url(&self) -> String {
        todo!()
    }
    /// Writes a kubeconfig pointing at this server into `dir` and returns its path.
    pub fn write_kubeconfig(&self, dir: &Path) -> PathBuf {
        todo!()
    }

    // Seeding and reading state directly (no request is logged for these).

    /// Creates an Active namespace with these labels.
    pub fn add_namespace(&self, name: &str, labels: &[(&str, &str)]) {
        todo!()
    }
    /// Creates a namespace that is Terminating (status.phase and metadata.deletionTimestamp).
    pub fn add_terminating_namespace(&self, name: &str) {
        todo!()
    }
    /// Stores an object as if `manager` had created it with an Update operation
    /// (POST), giving it a fresh uid and resourceVersion; returns the stored object.
    /// `obj` must carry metadata.name (and metadata.namespace for namespaced resources).
    pub fn seed(&self, resource: Resource, obj: Value, manager: &str) -> Value {
        todo!()
    }
    pub fn get(&self, resource: Resource, namespace: &str, name: &str) -> Option<Value> {
        todo!()
    }
    /// Deletes the object as a DELETE would (recorded in its history, not in the request log).
    pub fn delete(&self, resource: Resource, namespace: &str, name: &str) {
        todo!()
    }
    /// Every version of the object ever stored, in order; `None` where it was deleted.
    pub fn history(&self, resource: Resource, namespace: &str, name: &str) -> Vec<Option<Value>> {
        todo!()
    }
    pub fn requests(&self) -> Vec<Recorded> {
        todo!()
    }
    /// Count of requests served, even when the log is off.
    pub fn request_count(&self) -> usize {
        todo!()
    }
    pub fn add_fault(&self, fault: Fault) {
        todo!()
    }
    /// Right after the next GET of this object is answered, delete it (the in-flight delete).
    pub fn delete_after_next_get(&self, resource: Resource, namespace: &str, name: &str) {
        todo!()
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
        todo!()
    }
    /// The next continue token that is presented is answered with 410 Expired.
    pub fn expire_next_continue(&self) {
        todo!()
    }
}
