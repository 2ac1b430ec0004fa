//! ecr-refresh at scale, kubectl loops and Secret readers against a real kube-apiserver and etcd
//! (tests/control-plane): what `benches/real.rs`, `tests/real/absence.rs` and
//! `tests/real/restarts.rs` share. Included with `#[path]`, not through `common/mod.rs`, so
//! the fake-server tests don't build it.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::ops::Deref;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use control_plane::ControlPlane;
use fake_cluster::FakeEcr;
use futures::StreamExt as _;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ListParams, WatchEvent, WatchParams};

pub(crate) const SECRET: &str = "aws-ecr-token";
pub(crate) const REGISTRY: &str = "123456789012.dkr.ecr.us-east-1.amazonaws.com";
pub(crate) const REGION: &str = "us-east-1";

/// A control plane with ecr-refresh's ClusterRole bound to its ServiceAccount user, N
/// namespaces, and a fake ECR.
pub(crate) struct Real {
    /// One of its own ([`Real::start`]), or a test's turn on a shared one ([`Real::on`]),
    /// held as long as the `Real`.
    pub cp: Box<dyn Deref<Target = ControlPlane> + Sync>,
    pub ecr: FakeEcr,
    pub dir: tempfile::TempDir,
    pub namespaces: Vec<String>,
    /// `<prefix>-`, what every namespace's name starts with.
    prefix: String,
}

impl Real {
    /// On a control plane of its own, stopped when the `Real` is dropped.
    pub(crate) fn start(namespaces: usize) -> Self {
        struct Own(ControlPlane);
        impl Deref for Own {
            type Target = ControlPlane;
            fn deref(&self) -> &ControlPlane {
                &self.0
            }
        }
        Self::on(Own(ControlPlane::start()), "ns", namespaces)
    }

    /// On `cp`, which no other test uses while the `Real` lives (a turn), in the namespaces
    /// `<prefix>-00000`…, which must not exist yet. The runs select `<prefix>-*`.
    pub(crate) fn on(
        cp: impl Deref<Target = ControlPlane> + Sync + 'static,
        prefix: &str,
        namespaces: usize,
    ) -> Self {
        let cp: Box<dyn Deref<Target = ControlPlane> + Sync> = Box::new(cp);
        let manifests = Path::new(env!("CARGO_MANIFEST_DIR")).join("manifests");
        cp.kubectl_run(&[
            "apply",
            "-f",
            &manifests.join("clusterrole.yaml").to_string_lossy(),
            "-f",
            &manifests.join("clusterrolebinding.yaml").to_string_lossy(),
        ]);
        let real = Self {
            cp,
            ecr: FakeEcr::start(),
            dir: tempfile::tempdir().expect("a temporary directory"),
            namespaces: (0..namespaces)
                .map(|i| format!("{prefix}-{i:05}"))
                .collect(),
            prefix: format!("{prefix}-"),
        };
        let items: Vec<serde_json::Value> = real
            .namespaces
            .iter()
            .map(|n| serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}}))
            .collect();
        real.create_list(&items);
        real
    }

    /// `kubectl create -f` of a v1 List: one process, one POST per item.
    pub(crate) fn create_list(&self, items: &[serde_json::Value]) {
        for chunk in items.chunks(1000) {
            let path = self.dir.path().join("list.json");
            let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": chunk});
            std::fs::write(&path, list.to_string()).expect("write the list");
            self.cp
                .kubectl_run(&["create", "-f", &path.to_string_lossy(), "-o", "name"]);
        }
    }

    /// Seeds every namespace with the Secret as `kubectl create secret docker-registry` makes
    /// it (the delete-and-create script's Secret); returns each namespace's uid.
    pub(crate) fn seed_secrets(&self, password: &str) -> BTreeMap<String, String> {
        let config = docker_config(password);
        let items: Vec<serde_json::Value> = self
            .namespaces
            .iter()
            .map(|n| {
                serde_json::json!({
                    "apiVersion": "v1", "kind": "Secret",
                    "metadata": {"name": SECRET, "namespace": n},
                    "type": "kubernetes.io/dockerconfigjson",
                    "data": {".dockerconfigjson": b64(&config)},
                })
            })
            .collect();
        self.create_list(&items);
        self.uids()
    }

    /// Every namespace's Secret uid, from one list.
    pub(crate) fn uids(&self) -> BTreeMap<String, String> {
        let list = self.cp.kubectl_run(&[
            "get",
            "secrets",
            "-A",
            "--field-selector",
            &format!("metadata.name={SECRET}"),
            "-o",
            "jsonpath={range .items[*]}{.metadata.namespace} {.metadata.uid}{\"\\n\"}{end}",
        ]);
        list.lines()
            .filter_map(|l| l.split_once(' '))
            .filter(|(n, _)| n.starts_with(&self.prefix))
            .map(|(n, u)| (n.to_owned(), u.to_owned()))
            .collect()
    }

    /// Every namespace's Secret: its password for REGISTRY, from one list.
    pub(crate) fn passwords(&self) -> BTreeMap<String, String> {
        let list = self.cp.kubectl_run(&[
            "get",
            "secrets",
            "-A",
            "--field-selector",
            &format!("metadata.name={SECRET}"),
            "-o",
            "json",
        ]);
        let list: serde_json::Value = serde_json::from_str(&list).expect("a JSON list");
        list["items"]
            .as_array()
            .expect("items")
            .iter()
            .filter(|s| {
                s["metadata"]["namespace"]
                    .as_str()
                    .is_some_and(|n| n.starts_with(&self.prefix))
            })
            .map(|s| {
                let ns = s["metadata"]["namespace"].as_str().unwrap().to_owned();
                let encoded = s["data"][".dockerconfigjson"].as_str().unwrap_or_default();
                let config: serde_json::Value = base64_decode(encoded)
                    .and_then(|b| serde_json::from_slice(&b).ok())
                    .unwrap_or_default();
                let pw = config["auths"][REGISTRY]["password"]
                    .as_str()
                    .or_else(|| config["auths"][format!("https://{REGISTRY}")]["password"].as_str())
                    .unwrap_or_default()
                    .to_owned();
                (ns, pw)
            })
            .collect()
    }

    /// The built binary as ecr-refresh's ServiceAccount user, against this control plane
    /// and the fake ECR, JSON logs; nothing from the developer's shell.
    pub(crate) fn ecr_refresh(&self, env: &[(&str, &str)]) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_ecr-refresh"));
        command
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", self.dir.path())
            .env("KUBECONFIG", self.cp.ecr_refresh_kubeconfig())
            .envs(self.ecr.client_env(REGION))
            .env("ECR_REFRESH_LOG_FORMAT", "json")
            .env("ECR_REFRESH_REGISTRIES", REGISTRY)
            .env("ECR_REFRESH_NAMESPACES", format!("{}*", self.prefix))
            .env("ECR_REFRESH_EVENTS", "false")
            .env(
                "ECR_REFRESH_TERMINATION_LOG",
                self.dir.path().join("termination-log"),
            );
        for (k, v) in env {
            command.env(k, v);
        }
        command
    }

    /// The seed's cron loop for one namespace, as its script runs it: delete, then create.
    pub(crate) fn delete_and_create(&self, ns: &str, password: &str) -> Measured {
        let mut delete =
            self.timed_kubectl(&["delete", "secret", "--ignore-not-found", SECRET, "-n", ns]);
        let deleted = delete.output().expect("kubectl runs");
        check(&deleted, "kubectl delete", ns);
        let mut create = self.timed_kubectl(&self.create_args(ns, password, false));
        let created = create.output().expect("kubectl runs");
        check(&created, "kubectl create", ns);
        Measured::of(&deleted.stderr).max(Measured::of(&created.stderr))
    }

    /// The seed's fix for one namespace: `kubectl create … --dry-run=client -o yaml |
    /// kubectl apply -f -`.
    pub(crate) fn create_apply(&self, ns: &str, password: &str) -> Measured {
        let mut render = self.timed_kubectl(&self.create_args(ns, password, true));
        let mut render = render
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("kubectl starts");
        let manifest = render.stdout.take().expect("piped stdout");
        let applied = self
            .timed_kubectl(&["apply", "-f", "-"])
            .stdin(manifest)
            .output()
            .expect("kubectl runs");
        let rendered = render.wait_with_output().expect("kubectl create finishes");
        check(&rendered, "kubectl create --dry-run=client", ns);
        check(&applied, "kubectl apply", ns);
        Measured::of(&rendered.stderr).max(Measured::of(&applied.stderr))
    }

    fn create_args(&self, ns: &str, password: &str, dry_run: bool) -> Vec<String> {
        let mut args: Vec<String> = [
            "create",
            "secret",
            "docker-registry",
            SECRET,
            "-n",
            ns,
            &format!("--docker-server=https://{REGISTRY}"),
            "--docker-username=AWS",
            &format!("--docker-password={password}"),
        ]
        .map(String::from)
        .into();
        if dry_run {
            args.extend(["--dry-run=client", "-o", "yaml"].map(String::from));
        }
        args
    }

    /// kubectl as the admin under GNU time, which appends `TIME <max RSS kB> <wall s>` to
    /// its stderr.
    fn timed_kubectl<S: AsRef<std::ffi::OsStr>>(&self, args: &[S]) -> Command {
        let kubectl = self.cp.kubectl();
        let mut command = Command::new(gnu_time());
        command
            .args(["-f", "TIME %M %e", "--"])
            .arg(kubectl.get_program());
        for (k, v) in kubectl.get_envs() {
            if let Some(v) = v {
                command.env(k, v);
            }
        }
        command.args(args);
        command
    }

    /// etcd's database size: (total, in use), bytes, from its /metrics.
    pub(crate) fn etcd_db_size(&self) -> (u64, u64) {
        let port: u16 = self
            .cp
            .etcd_url()
            .rsplit(':')
            .next()
            .and_then(|p| p.parse().ok())
            .expect("etcd's port");
        let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("etcd listens");
        write!(stream, "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").expect("write");
        let mut text = String::new();
        stream.read_to_string(&mut text).expect("etcd's metrics");
        let value = |name: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
                .and_then(|v| v.trim().parse::<f64>().ok())
                .unwrap_or_else(|| panic!("etcd's /metrics has no {name}")) as u64
        };
        (
            value("etcd_mvcc_db_total_size_in_bytes"),
            value("etcd_mvcc_db_total_size_in_use_in_bytes"),
        )
    }

    /// `apiserver_request_total` summed by (verb, resource), from the server's /metrics.
    pub(crate) fn requests(&self) -> Requests {
        Requests(self.cp.request_totals())
    }
}

/// GNU time's path; the bench and tests need it for kubectl's peak RSS.
pub(crate) fn gnu_time() -> &'static str {
    const PATH: &str = "/usr/bin/time";
    assert!(
        Path::new(PATH).is_file(),
        "{PATH} (GNU time, Debian package `time`) is needed to measure kubectl's peak RSS"
    );
    PATH
}

fn check(output: &std::process::Output, what: &str, ns: &str) {
    assert!(
        output.status.success(),
        "{what} failed in {ns}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Peak RSS and wall time of one process, from GNU time's `TIME %M %e` line.
#[derive(Clone, Copy, Default, Debug)]
pub(crate) struct Measured {
    pub max_rss_kb: u64,
}

impl Measured {
    fn of(stderr: &[u8]) -> Self {
        let text = String::from_utf8_lossy(stderr);
        let line = text
            .lines()
            .rev()
            .find_map(|l| l.strip_prefix("TIME "))
            .unwrap_or_else(|| panic!("no GNU time line in: {text}"));
        Self {
            max_rss_kb: line
                .split(' ')
                .next()
                .and_then(|v| v.parse().ok())
                .unwrap_or(0),
        }
    }

    pub(crate) fn max(self, other: Self) -> Self {
        Self {
            max_rss_kb: self.max_rss_kb.max(other.max_rss_kb),
        }
    }
}

/// `apiserver_request_total` by (verb, resource).
#[derive(Clone, Default, Debug)]
pub(crate) struct Requests(pub BTreeMap<(String, String), u64>);

impl Requests {
    /// What was served between `before` and `self`.
    pub(crate) fn since(&self, before: &Self) -> Self {
        Self(
            self.0
                .iter()
                .map(|(k, v)| (k.clone(), v - before.0.get(k).copied().unwrap_or(0)))
                .filter(|(_, v)| *v > 0)
                .collect(),
        )
    }

    pub(crate) fn total(&self) -> u64 {
        self.0.values().sum()
    }

    /// Only what the tools measured here send: Secrets, namespaces, and non-resource paths
    /// (discovery, OpenAPI, /version). kube-apiserver's own traffic (lease renewals, its
    /// informers' re-watches) is left out.
    pub(crate) fn ours(self) -> Self {
        Self(
            self.0
                .into_iter()
                .filter(|((_, r), _)| matches!(r.as_str(), "secrets" | "namespaces" | ""))
                .collect(),
        )
    }

    pub(crate) fn get(&self, verb: &str, resource: &str) -> u64 {
        self.0
            .get(&(verb.to_owned(), resource.to_owned()))
            .copied()
            .unwrap_or(0)
    }

    /// Takes `n` off (verb, resource): requests others made (the readers, the scrape).
    pub(crate) fn take_off(&mut self, verb: &str, resource: &str, n: u64) {
        let entry = self
            .0
            .entry((verb.to_owned(), resource.to_owned()))
            .or_insert(0);
        *entry = entry.saturating_sub(n);
        self.0.retain(|_, v| *v > 0);
    }

    /// `GET secrets 2000, PATCH secrets 1000, …`.
    pub(crate) fn describe(&self) -> String {
        self.0
            .iter()
            .map(|((verb, resource), n)| {
                let resource = if resource.is_empty() { "-" } else { resource };
                format!("{verb} {resource} {n}")
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// What the readers of one namespace saw.
#[derive(Clone, Default, Debug)]
pub(crate) struct Seen {
    pub reads: u64,
    /// GETs answered 404.
    pub not_found: u64,
    /// GETs that failed otherwise (connection, 5xx).
    pub errors: u64,
    /// A GET returning another uid than the GET before it.
    pub read_uid_changes: u64,
    /// DELETED events on the watch.
    pub deleted_events: u64,
    /// ADDED or MODIFIED events with another uid than the last event's.
    pub watch_uid_changes: u64,
    pub watch_events: u64,
    pub watches: u64,
    /// The watch's LISTs (its start, and after a 410).
    pub lists: u64,
}

impl Seen {
    /// Reads without a Secret, DELETED events and uid changes together.
    pub(crate) fn gaps(&self) -> u64 {
        self.not_found + self.deleted_events + self.read_uid_changes + self.watch_uid_changes
    }

    pub(crate) fn add(&mut self, other: &Self) {
        self.reads += other.reads;
        self.not_found += other.not_found;
        self.errors += other.errors;
        self.read_uid_changes += other.read_uid_changes;
        self.deleted_events += other.deleted_events;
        self.watch_uid_changes += other.watch_uid_changes;
        self.watch_events += other.watch_events;
        self.watches += other.watches;
        self.lists += other.lists;
    }
}

#[derive(Default)]
struct Counters {
    reads: AtomicU64,
    not_found: AtomicU64,
    errors: AtomicU64,
    read_uid_changes: AtomicU64,
    deleted_events: AtomicU64,
    watch_uid_changes: AtomicU64,
    watch_events: AtomicU64,
    watches: AtomicU64,
    lists: AtomicU64,
}

impl Counters {
    fn seen(&self) -> Seen {
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        Seen {
            reads: l(&self.reads),
            not_found: l(&self.not_found),
            errors: l(&self.errors),
            read_uid_changes: l(&self.read_uid_changes),
            deleted_events: l(&self.deleted_events),
            watch_uid_changes: l(&self.watch_uid_changes),
            watch_events: l(&self.watch_events),
            watches: l(&self.watches),
            lists: l(&self.lists),
        }
    }

    fn bump(a: &AtomicU64) {
        a.fetch_add(1, Ordering::Relaxed);
    }
}

/// Readers in some namespaces: each GETs the Secret in a tight loop and watches it, as the
/// admin, on a runtime of their own, until stopped.
pub(crate) struct Readers {
    runtime: Option<tokio::runtime::Runtime>,
    stop: Arc<AtomicBool>,
    counters: Vec<(String, Arc<Counters>)>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Readers {
    /// Starts them, and returns once every watch is established (so no event is missed).
    pub(crate) fn start(kubeconfig: &Path, namespaces: &[String]) -> Self {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("a tokio runtime");
        let kubeconfig = kubeconfig.to_path_buf();
        let client = runtime.block_on(client(&kubeconfig));
        let stop = Arc::new(AtomicBool::new(false));
        let mut counters = Vec::new();
        let mut tasks = Vec::new();
        let mut started = Vec::new();
        for ns in namespaces {
            let c = Arc::new(Counters::default());
            counters.push((ns.clone(), c.clone()));
            let api: Api<Secret> = Api::namespaced(client.clone(), ns);
            let (tx, rx) = tokio::sync::oneshot::channel();
            started.push(rx);
            tasks.push(runtime.spawn(watch(api.clone(), c.clone(), stop.clone(), tx)));
            tasks.push(runtime.spawn(read(api, c, stop.clone())));
        }
        runtime.block_on(async {
            for rx in started {
                let _ = rx.await;
            }
        });
        Self {
            runtime: Some(runtime),
            stop,
            counters,
            tasks,
        }
    }

    /// What each namespace's readers saw so far.
    pub(crate) fn seen(&self) -> Vec<(String, Seen)> {
        self.counters
            .iter()
            .map(|(n, c)| (n.clone(), c.seen()))
            .collect()
    }

    pub(crate) fn total(&self) -> Seen {
        let mut total = Seen::default();
        for (_, s) in self.seen() {
            total.add(&s);
        }
        total
    }

    /// The fewest reads of any namespace's reader.
    pub(crate) fn min_reads(&self) -> u64 {
        self.seen().iter().map(|(_, s)| s.reads).min().unwrap_or(0)
    }

    /// Stops them and waits (a GET in flight finishes; a watch is dropped). Then the counts
    /// are final.
    pub(crate) fn stop(mut self) -> Vec<(String, Seen)> {
        self.stop.store(true, Ordering::SeqCst);
        let runtime = self.runtime.take().expect("running");
        let tasks = std::mem::take(&mut self.tasks);
        runtime.block_on(async {
            for t in tasks {
                let _ = t.await;
            }
        });
        runtime.shutdown_timeout(Duration::from_secs(5));
        self.seen()
    }
}

async fn client(kubeconfig: &Path) -> kube::Client {
    let kubeconfig = kube::config::Kubeconfig::read_from(kubeconfig).expect("a kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .expect("a kube config");
    kube::Client::try_from(config).expect("a kube client")
}

async fn read(api: Api<Secret>, c: Arc<Counters>, stop: Arc<AtomicBool>) {
    let mut last_uid: Option<String> = None;
    while !stop.load(Ordering::Relaxed) {
        let got = api.get_opt(SECRET).await;
        Counters::bump(&c.reads);
        match got {
            Ok(Some(secret)) => {
                let uid = secret.metadata.uid;
                if last_uid.is_some() && uid != last_uid {
                    Counters::bump(&c.read_uid_changes);
                }
                last_uid = uid;
            }
            Ok(None) => Counters::bump(&c.not_found),
            Err(_) => {
                Counters::bump(&c.errors);
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

/// Lists the one Secret, then watches from that list's resourceVersion, again from the last
/// one seen whenever the watch ends, and from a new list when that version is too old.
async fn watch(
    api: Api<Secret>,
    c: Arc<Counters>,
    stop: Arc<AtomicBool>,
    started: tokio::sync::oneshot::Sender<()>,
) {
    let field = format!("metadata.name={SECRET}");
    let mut started = Some(started);
    let mut last_uid: Option<String> = None;
    'relist: while !stop.load(Ordering::Relaxed) {
        let list = api.list(&ListParams::default().fields(&field)).await;
        Counters::bump(&c.lists);
        let Ok(list) = list else {
            tokio::time::sleep(Duration::from_millis(200)).await;
            continue;
        };
        let listed = list.items.first().and_then(|s| s.metadata.uid.clone());
        if last_uid.is_some() && listed != last_uid {
            Counters::bump(&c.watch_uid_changes);
        }
        last_uid = listed;
        let mut version = list.metadata.resource_version.unwrap_or_default();
        while !stop.load(Ordering::Relaxed) {
            let params = WatchParams::default().fields(&field).timeout(60);
            let Ok(stream) = api.watch(&params, &version).await else {
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue 'relist;
            };
            Counters::bump(&c.watches);
            if let Some(tx) = started.take() {
                let _ = tx.send(());
            }
            let mut stream = stream.boxed();
            loop {
                let next = tokio::select! {
                    next = stream.next() => next,
                    () = until(stop.clone()) => return,
                };
                let Some(event) = next else { break };
                let Ok(event) = event else { break };
                match event {
                    WatchEvent::Added(s) | WatchEvent::Modified(s) => {
                        Counters::bump(&c.watch_events);
                        if last_uid.is_some() && s.metadata.uid != last_uid {
                            Counters::bump(&c.watch_uid_changes);
                        }
                        last_uid = s.metadata.uid;
                        version = s.metadata.resource_version.unwrap_or(version);
                    }
                    WatchEvent::Deleted(s) => {
                        Counters::bump(&c.watch_events);
                        Counters::bump(&c.deleted_events);
                        // A create after it carries another uid: that is the same gap, so
                        // it is not counted again as a uid change.
                        last_uid = None;
                        version = s.metadata.resource_version.unwrap_or(version);
                    }
                    WatchEvent::Bookmark(b) => version = b.metadata.resource_version,
                    // 410 Gone: the version is compacted away.
                    WatchEvent::Error(_) => continue 'relist,
                }
            }
        }
    }
    if let Some(tx) = started.take() {
        let _ = tx.send(());
    }
}

async fn until(stop: Arc<AtomicBool>) {
    while !stop.load(Ordering::Relaxed) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

pub(crate) fn docker_config(password: &str) -> String {
    let auth = b64(&format!("AWS:{password}"));
    format!(
        r#"{{"auths":{{"https://{REGISTRY}":{{"username":"AWS","password":"{password}","auth":"{auth}"}}}}}}"#
    )
}

pub(crate) fn b64(s: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(s)
}

fn base64_decode(s: &str) -> Option<Vec<u8>> {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.decode(s).ok()
}

/// The binary's stdout as JSON lines; a line that is not JSON panics, naming it.
pub(crate) fn json_lines(stdout: &str) -> Vec<serde_json::Value> {
    stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not a JSON line ({e}): {l}")))
        .collect()
}

/// Where the run's per-namespace lines are: namespace → its lines with an outcome.
pub(crate) fn outcome_lines(
    lines: &[serde_json::Value],
) -> BTreeMap<String, Vec<serde_json::Value>> {
    let mut by = BTreeMap::<String, Vec<serde_json::Value>>::new();
    for l in lines {
        if let (Some(ns), Some(_)) = (l["namespace"].as_str(), l.get("outcome")) {
            by.entry(ns.to_owned()).or_default().push(l.clone());
        }
    }
    by
}

pub(crate) fn path_str(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

pub(crate) fn kubeconfig(real: &Real) -> PathBuf {
    real.cp.admin_kubeconfig().to_path_buf()
}
