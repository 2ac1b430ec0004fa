//! A real control plane for ecr-refresh's tests: etcd and kube-apiserver on free loopback
//! ports, the way controller-runtime's envtest runs them.
//!
//! The binaries come from the directory named by `KUBEBUILDER_ASSETS` (`kube-apiserver`,
//! `etcd`, `kubectl`), which `bash .ci/kube-binaries` builds and prints:
//!
//! ```text
//! export KUBEBUILDER_ASSETS="$(bash .ci/kube-binaries | tail -1)"
//! ```
//!
//! Without the variable, or without one of the binaries, the harness panics and says so:
//! a test that needs the real server never skips.
//!
//! # Use
//! ```no_run
//! use control_plane::ControlPlane;
//!
//! // One control plane per test binary, started by the first test that asks (a start
//! // costs seconds). Tests share it by each using namespaces of their own.
//! let cp = ControlPlane::shared();
//! cp.create_namespace("adoption-1");
//! // A real token from the TokenRequest API, for any ServiceAccount (created if missing).
//! let kubeconfig = cp.kubeconfig_for_service_account("adoption-1", "ecr-refresh");
//! let whoami = cp.kubectl_as(&kubeconfig).args(["auth", "whoami"]).output().unwrap();
//! # let _ = whoami;
//! ```
//!
//! `ControlPlane::start()` gives a control plane of one's own, stopped when it is dropped;
//! only such a one can be restarted ([`ControlPlane::kill_apiserver`] and the rest), since
//! restarting the shared one would break the tests running beside. Tests that install
//! cluster-scoped objects under fixed names share `ControlPlane::shared_by("group")`, one
//! more per group, apart from the binary's other tests; `ControlPlane::one_at_a_time("group")`
//! is such a server for a caller that gives it to one test at a time, which may restart it.
//!
//! # What runs, and what does not
//! - etcd (one member, `--unsafe-no-fsync`, data in the temporary directory) and
//!   kube-apiserver (`--authorization-mode=RBAC`, the default admission plugins but
//!   `ServiceAccount`, so NamespaceLifecycle and ValidatingAdmissionPolicy are on, and a pod
//!   needs no ServiceAccount; service-account signing keys made for the run).
//! - Users: an admin (group `system:masters`) and ecr-refresh's ServiceAccount user
//!   `system:serviceaccount:ecr-refresh:ecr-refresh`, both from a static token file; and any
//!   ServiceAccount through [`ControlPlane::kubeconfig_for_service_account`].
//! - On demand ([`ControlPlane::start_policy_status_controller`]), kube-controller-manager
//!   with one controller only, the admission-policy status controller
//!   (`--controllers=validatingadmissionpolicy-status-controller`): it type-checks each
//!   ValidatingAdmissionPolicy and writes `status.typeChecking`, which kube-apiserver alone
//!   never fills in. Every other controller is off.
//! - **No other controller**, no scheduler, no kubelet. So a deleted namespace stays
//!   `Terminating` for good (the namespace controller would empty and finalize it); no
//!   `default` ServiceAccount appears in a new namespace; service-account-token Secrets are
//!   never filled in; nothing is garbage-collected (ownerReferences are never acted on); pods
//!   never run. kube-apiserver itself creates the `default`, `kube-system`, `kube-public` and
//!   `kube-node-lease` namespaces and the RBAC bootstrap roles, and `start` waits for them.
//!
//! # Cleanup
//! Both processes and the temporary directory go when the handle drops, and for the shared
//! one when the test process exits (an `atexit` handler). If the test process is killed,
//! the kernel kills both (PR_SET_PDEATHSIG), and the next start removes the directory it
//! left. Nothing is written outside that directory: kubectl's cache is in it too.

mod pki;
mod process;
mod scratch;

use std::collections::BTreeMap;
use std::hash::{BuildHasher as _, Hasher as _};
use std::io::{Read as _, Write as _};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock, TryLockError};
use std::thread;
use std::time::{Duration, Instant};

use process::{Daemon, log_tail, private_file, run};

/// The environment variable naming the directory with the binaries (envtest's name).
pub const ASSETS_VARIABLE: &str = "KUBEBUILDER_ASSETS";

/// The admin user's name (group `system:masters`).
pub const ADMIN_USER: &str = "control-plane-admin";

/// ecr-refresh's ServiceAccount user, in the static token file.
pub const ECR_REFRESH_USER: &str = "system:serviceaccount:ecr-refresh:ecr-refresh";

/// How long etcd, and then kube-apiserver, may take to be ready. Generous: the CI machine
/// has 2 cores shared with the build.
pub const READY_TIMEOUT: Duration = Duration::from_secs(120);

/// How long a SIGTERM may take before SIGKILL follows.
const STOP_GRACE: Duration = Duration::from_secs(30);

/// Removes the temporary directories that control planes of killed processes left (every
/// start does this first).
pub fn sweep_stale_directories() {
    scratch::sweep(&std::env::temp_dir());
}

/// The directory in `KUBEBUILDER_ASSETS`, checked to hold every binary the harness runs.
///
/// # Panics
/// When the variable is unset or a binary is missing, naming the variable and the command
/// that builds them.
pub fn assets() -> PathBuf {
    check_assets(std::env::var_os(ASSETS_VARIABLE)).unwrap_or_else(|e| panic!("{e}"))
}

fn check_assets(value: Option<std::ffi::OsString>) -> Result<PathBuf, String> {
    const BUILD: &str = "build them with `bash .ci/kube-binaries` and set \
        KUBEBUILDER_ASSETS to the directory it prints on its last line: \
        export KUBEBUILDER_ASSETS=\"$(bash .ci/kube-binaries | tail -1)\"";
    let dir = match value {
        Some(v) if !v.is_empty() => PathBuf::from(v),
        _ => {
            return Err(format!(
                "{ASSETS_VARIABLE} is not set: the real-server tests need kube-apiserver, etcd \
                 and kubectl; {BUILD}"
            ));
        }
    };
    for binary in [
        "kube-apiserver",
        "kube-controller-manager",
        "etcd",
        "kubectl",
    ] {
        if !dir.join(binary).is_file() {
            return Err(format!(
                "{ASSETS_VARIABLE}={} has no {binary}; {BUILD}",
                dir.display()
            ));
        }
    }
    Ok(dir)
}

/// What [`ControlPlane::start_with_options`] changes.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// The binaries' directory, instead of `KUBEBUILDER_ASSETS`'s (such as Kubernetes 1.30's,
    /// built by `.ci/kube-binaries 1.30`); checked like it.
    pub assets: Option<PathBuf>,
    /// An audit log of every request, at level Metadata ([`ControlPlane::audit_events`]).
    pub audit_log: bool,
}

/// Metadata (who, what, the answer; no bodies) of every request once answered, but the
/// server's own (`system:apiserver`) and the health and readiness probes.
const AUDIT_POLICY: &str = "apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: None
    users: [system:apiserver]
  - level: None
    nonResourceURLs: [/healthz*, /readyz*, /livez*]
  - level: Metadata
";

/// A running etcd and kube-apiserver, with their temporary directory and kubeconfigs.
pub struct ControlPlane {
    dir: PathBuf,
    assets: PathBuf,
    etcd_client_port: u16,
    etcd_peer_port: u16,
    port: u16,
    pki: pki::Pki,
    admin_token: String,
    admin_kubeconfig: PathBuf,
    ecr_refresh_kubeconfig: PathBuf,
    token_file: PathBuf,
    etcd: Mutex<Option<Daemon>>,
    apiserver: Mutex<Option<Daemon>>,
    policy_status: Mutex<Option<Daemon>>,
    // The pids again, readable without a lock: the exit handler must not block.
    etcd_pid: AtomicU32,
    apiserver_pid: AtomicU32,
    policy_status_pid: AtomicU32,
    version: OnceLock<String>,
    shared: bool,
    service_account_admission: bool,
    /// `--service-account-issuer`; None: the server's own URL.
    service_account_issuer: Option<String>,
    /// `--audit-log-path`, when [`Options::audit_log`] asked for one.
    audit_log: Option<PathBuf>,
    cleaned: AtomicBool,
    next_file: AtomicU32,
}

impl ControlPlane {
    /// Starts a control plane of its own, ready to use: `/readyz` answers ok to the admin,
    /// and the `default` namespace and the RBAC bootstrap roles exist. It stops when dropped.
    ///
    /// # Panics
    /// When a binary is missing (see [`assets`]), or either daemon fails or is not ready
    /// within [`READY_TIMEOUT`]; the message holds the last lines of its log.
    pub fn start() -> Self {
        Self::start_as(false, false).unwrap_or_else(|e| panic!("{e}"))
    }

    /// Like [`ControlPlane::start`], with the `ServiceAccount` admission plugin on, as in a
    /// real cluster: a pod's ServiceAccount must exist (create it; no controller makes
    /// `default`), and its `imagePullSecrets` are copied into the pod, which is what the
    /// kubelet reads. The plugin also adds the `kube-api-access` volume, whose ConfigMap
    /// `kube-root-ca.crt` only kube-controller-manager publishes: a pod that is to run sets
    /// `automountServiceAccountToken: false`.
    pub fn start_with_service_account_admission() -> Self {
        Self::start_as(false, true).unwrap_or_else(|e| panic!("{e}"))
    }

    /// Like [`ControlPlane::start`], with tokens issued by `issuer` (an https URL, such as
    /// the public host a cluster's discovery documents are copied to):
    /// `--service-account-issuer=<issuer>` and `--service-account-jwks-uri=<issuer>/openid/v1/jwks`,
    /// so that the discovery document the server serves names that host, as AWS reads it.
    /// The server still accepts its own tokens (the first issuer is also the one it trusts).
    pub fn start_with_issuer(issuer: &str) -> Self {
        Self::start_with(false, false, Some(issuer.trim_end_matches('/').to_owned()))
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// Like [`ControlPlane::start`], with [`Options`]: the binaries of another Kubernetes
    /// release (a fleet's older cluster beside today's), an audit log of who sent what.
    ///
    /// # Panics
    /// Like [`ControlPlane::start`].
    pub fn start_with_options(options: Options) -> Self {
        let assets = match options.assets {
            Some(dir) => check_assets(Some(dir.into_os_string())),
            None => check_assets(std::env::var_os(ASSETS_VARIABLE)),
        }
        .unwrap_or_else(|e| panic!("{e}"));
        Self::start_from(assets, false, false, None, options.audit_log)
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// The control plane of this test binary, started by the first call. Use namespaces of
    /// your own; it can't be restarted (use [`ControlPlane::start`] for that).
    ///
    /// # Panics
    /// Like [`ControlPlane::start`]; once it failed, every later call panics with the same
    /// message at once.
    pub fn shared() -> &'static Self {
        Self::shared_by("shared")
    }

    /// Like [`ControlPlane::shared`], one per `group` in this test binary: for tests that
    /// install cluster-scoped objects under fixed names (a ClusterRole, an admission policy
    /// that holds every ServiceAccount granted a name), which would collide with the other
    /// tests of the binary on one server. Each group is started by its first call, and
    /// stopped when the process exits.
    ///
    /// # Panics
    /// Like [`ControlPlane::shared`].
    pub fn shared_by(group: &'static str) -> &'static Self {
        Self::group(group, true)
    }

    /// Like [`ControlPlane::shared_by`], for a caller that hands the server to one test at a
    /// time (tests/common/real.rs's turns): such a test may stop and start its daemons
    /// ([`ControlPlane::kill_apiserver`] and the rest), and must leave them running. A group
    /// is one server whichever of the two names it first.
    pub fn one_at_a_time(group: &'static str) -> &'static Self {
        Self::group(group, false)
    }

    fn group(group: &'static str, shared: bool) -> &'static Self {
        type Slot = OnceLock<Result<ControlPlane, String>>;
        static GROUPS: Mutex<Vec<(&'static str, &'static Slot)>> = Mutex::new(Vec::new());
        static AT_EXIT: OnceLock<Result<(), String>> = OnceLock::new();
        extern "C" fn stop_shared() {
            // Never block at exit: a thread that holds the list is starting a group, whose
            // children die with the process anyway (prctl in process.rs).
            if let Ok(groups) = GROUPS.try_lock() {
                for (_, slot) in groups.iter() {
                    if let Some(Ok(cp)) = slot.get() {
                        cp.cleanup();
                    }
                }
            }
        }
        let slot: &'static Slot = {
            let mut groups = GROUPS
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            match groups.iter().find(|(name, _)| *name == group) {
                Some((_, slot)) => slot,
                None => {
                    let slot: &'static Slot = Box::leak(Box::new(OnceLock::new()));
                    groups.push((group, slot));
                    slot
                }
            }
        };
        // Started outside the list's lock: two groups start side by side.
        let shared = slot.get_or_init(|| {
            AT_EXIT
                .get_or_init(|| {
                    // SAFETY: atexit(3) with a function that takes nothing and never unwinds
                    // (cleanup ignores every error); it runs when the test harness exits.
                    if unsafe { libc::atexit(stop_shared) } != 0 {
                        return Err("atexit(3) refused the control planes' cleanup".into());
                    }
                    Ok(())
                })
                .clone()?;
            Self::start_as(shared, false)
        });
        match shared {
            Ok(cp) => cp,
            Err(e) => panic!("the shared control plane {group:?} did not start: {e}"),
        }
    }

    fn start_as(shared: bool, service_account_admission: bool) -> Result<Self, String> {
        Self::start_with(shared, service_account_admission, None)
    }

    fn start_with(
        shared: bool,
        service_account_admission: bool,
        issuer: Option<String>,
    ) -> Result<Self, String> {
        let assets = check_assets(std::env::var_os(ASSETS_VARIABLE))?;
        Self::start_from(assets, shared, service_account_admission, issuer, false)
    }

    fn start_from(
        assets: PathBuf,
        shared: bool,
        service_account_admission: bool,
        issuer: Option<String>,
        audit_log: bool,
    ) -> Result<Self, String> {
        // Free ports are found by binding port 0 and letting go, so another process may take
        // one before the daemon binds it: then try again with new ones.
        let mut attempt = 1;
        loop {
            let started = Instant::now();
            let mut cp = Self::prepare(assets.clone(), shared)?;
            cp.service_account_admission = service_account_admission;
            cp.service_account_issuer = issuer.clone();
            if audit_log {
                cp.audit_log = Some(cp.dir.join("audit.log"));
                write_private(&cp.dir.join("audit-policy.yaml"), AUDIT_POLICY)?;
            }
            match cp
                .start_etcd_inner()
                .and_then(|()| cp.start_apiserver_inner())
            {
                Ok(()) => {
                    eprintln!(
                        "control plane: {} ready at {} in {:.1?} ({})",
                        cp.version(),
                        cp.server_url(),
                        started.elapsed(),
                        cp.dir.display()
                    );
                    return Ok(cp);
                }
                Err(e) if attempt < 3 && e.contains("address already in use") => {
                    eprintln!("control plane: a port was taken, trying new ones: {e}");
                    attempt += 1;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// The temporary directory, ports, keys, token file and kubeconfigs; nothing running.
    fn prepare(assets: PathBuf, shared: bool) -> Result<Self, String> {
        let dir = scratch::create()?;
        // From here on, Drop removes the directory on every path.
        let mut cp = Self {
            dir: dir.clone(),
            assets,
            etcd_client_port: free_port()?,
            etcd_peer_port: free_port()?,
            port: free_port()?,
            pki: pki::Pki {
                ca: PathBuf::new(),
                serving_cert: PathBuf::new(),
                serving_key: PathBuf::new(),
                sa_key: PathBuf::new(),
                sa_pub: PathBuf::new(),
            },
            admin_token: random_token(),
            admin_kubeconfig: dir.join("admin.kubeconfig"),
            ecr_refresh_kubeconfig: dir.join("ecr-refresh.kubeconfig"),
            token_file: dir.join("tokens.csv"),
            etcd: Mutex::new(None),
            apiserver: Mutex::new(None),
            policy_status: Mutex::new(None),
            etcd_pid: AtomicU32::new(0),
            apiserver_pid: AtomicU32::new(0),
            policy_status_pid: AtomicU32::new(0),
            version: OnceLock::new(),
            shared,
            service_account_admission: false,
            service_account_issuer: None,
            audit_log: None,
            cleaned: AtomicBool::new(false),
            next_file: AtomicU32::new(0),
        };
        // Not etcd's data directory: etcd makes that itself, with the mode it insists on.
        for sub in ["certs", "kubectl-cache", "kubeconfigs"] {
            std::fs::create_dir(dir.join(sub))
                .map_err(|e| format!("cannot create {}: {e}", dir.join(sub).display()))?;
        }
        cp.pki = pki::generate(&dir.join("certs"))?;
        let ecr_refresh_token = random_token();
        // Static token file: token,user,uid,"group1,group2" (Kubernetes, Authenticating).
        let tokens = format!(
            "{},{ADMIN_USER},{ADMIN_USER},\"system:masters,system:authenticated\"\n\
             {ecr_refresh_token},{ECR_REFRESH_USER},ecr-refresh-static,\
             \"system:serviceaccounts,system:serviceaccounts:ecr-refresh,system:authenticated\"\n",
            cp.admin_token
        );
        write_private(&cp.token_file, &tokens)?;
        cp.write_kubeconfig(
            &cp.admin_kubeconfig,
            &cp.server_url(),
            ADMIN_USER,
            &cp.admin_token,
        );
        cp.write_kubeconfig(
            &cp.ecr_refresh_kubeconfig,
            &cp.server_url(),
            ECR_REFRESH_USER,
            &ecr_refresh_token,
        );
        Ok(cp)
    }

    // ---- Where it is -------------------------------------------------------------------

    /// `https://127.0.0.1:PORT`.
    pub fn server_url(&self) -> String {
        format!("https://127.0.0.1:{}", self.port)
    }

    /// kube-apiserver's secure port on 127.0.0.1 (the same across restarts).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The CA certificate (PEM) that signed the serving certificate.
    pub fn ca_path(&self) -> &Path {
        &self.pki.ca
    }

    /// The CA certificate, PEM.
    pub fn ca_pem(&self) -> String {
        std::fs::read_to_string(&self.pki.ca).expect("the control plane's CA is readable")
    }

    /// etcd's client URL, `http://127.0.0.1:PORT`.
    pub fn etcd_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.etcd_client_port)
    }

    /// The temporary directory holding everything of this control plane (logs included:
    /// `kube-apiserver.log`, `etcd.log`).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The directory the binaries came from (`KUBEBUILDER_ASSETS`).
    pub fn assets(&self) -> &Path {
        &self.assets
    }

    /// The last `lines` lines of kube-apiserver's log.
    pub fn apiserver_log_tail(&self, lines: usize) -> String {
        log_tail(&self.dir.join("kube-apiserver.log"), lines)
    }

    /// The server's `gitVersion` from `/version`, such as `v1.37.2`.
    pub fn version(&self) -> &str {
        self.version.get_or_init(|| {
            let body = self.get_raw("/version");
            let version: serde_json::Value = serde_json::from_str(&body)
                .unwrap_or_else(|e| panic!("/version is not JSON ({e}): {body}"));
            version["gitVersion"]
                .as_str()
                .unwrap_or_else(|| panic!("/version has no gitVersion: {body}"))
                .to_owned()
        })
    }

    // ---- Who talks to it -----------------------------------------------------------------

    /// A kubeconfig for the admin (group `system:masters`).
    pub fn admin_kubeconfig(&self) -> &Path {
        &self.admin_kubeconfig
    }

    /// The admin's bearer token, for a client that takes no kubeconfig (a proxy, raw HTTP).
    pub fn admin_token(&self) -> &str {
        &self.admin_token
    }

    /// A kubeconfig for [`ECR_REFRESH_USER`] from the static token file: the name and groups
    /// of ecr-refresh's ServiceAccount user, with no ServiceAccount object needed.
    pub fn ecr_refresh_kubeconfig(&self) -> &Path {
        &self.ecr_refresh_kubeconfig
    }

    /// A kubeconfig with a real token for ServiceAccount `name` in `namespace`, from the
    /// TokenRequest API (valid 24 hours). The ServiceAccount is created if it does not exist;
    /// the namespace must exist. Each call writes a new file with a new token.
    pub fn kubeconfig_for_service_account(&self, namespace: &str, name: &str) -> PathBuf {
        let token = self.service_account_token(namespace, name);
        let n = self.next_file.fetch_add(1, Ordering::Relaxed);
        let path = self
            .dir
            .join("kubeconfigs")
            .join(format!("{namespace}.{name}.{n}.kubeconfig"));
        let user = format!("system:serviceaccount:{namespace}:{name}");
        self.write_kubeconfig(&path, &self.server_url(), &user, &token);
        path
    }

    /// A real token for ServiceAccount `name` in `namespace` (created if missing), from the
    /// TokenRequest API, valid 24 hours.
    pub fn service_account_token(&self, namespace: &str, name: &str) -> String {
        let created = self
            .kubectl()
            .args(["create", "serviceaccount", name, "-n", namespace])
            .output()
            .expect("kubectl runs");
        let stderr = String::from_utf8_lossy(&created.stderr);
        assert!(
            // kubectl 1.37 says `serviceaccounts "NAME" already exists`, not the reason.
            created.status.success()
                || stderr.contains("AlreadyExists")
                || stderr.contains("already exists"),
            "creating ServiceAccount {namespace}/{name}: {stderr}"
        );
        let token = self.kubectl_run(&["create", "token", name, "-n", namespace, "--duration=24h"]);
        token.trim().to_owned()
    }

    /// Writes a kubeconfig at `path` for `server` (this control plane's URL, or a proxy in
    /// front of it) with a bearer token; the CA is this control plane's.
    pub fn write_kubeconfig(&self, path: &Path, server: &str, user: &str, token: &str) {
        // JSON is YAML: no quoting rules to get wrong.
        let config = serde_json::json!({
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "control-plane", "cluster": {
                "server": server,
                "certificate-authority": self.pki.ca,
            }}],
            "users": [{"name": user, "user": {"token": token}}],
            "contexts": [{"name": "control-plane", "context": {
                "cluster": "control-plane", "user": user,
            }}],
            "current-context": "control-plane",
        });
        write_private(path, &format!("{config:#}\n")).unwrap_or_else(|e| panic!("{e}"));
    }

    /// The built kubectl as the admin. Its cache is in the temporary directory, and no
    /// kuberc or kubeconfig of the developer's is read.
    pub fn kubectl(&self) -> Command {
        self.kubectl_as(&self.admin_kubeconfig)
    }

    /// The built kubectl with `kubeconfig`.
    pub fn kubectl_as(&self, kubeconfig: &Path) -> Command {
        let mut command = Command::new(self.assets.join("kubectl"));
        command
            .env("KUBECONFIG", kubeconfig)
            .env("KUBECACHEDIR", self.dir.join("kubectl-cache"))
            .env("KUBERC", "off");
        command
    }

    /// Runs the built kubectl as the admin and returns its stdout.
    ///
    /// # Panics
    /// When it fails, with its stderr.
    pub fn kubectl_run(&self, args: &[&str]) -> String {
        run(
            self.kubectl().args(args),
            &format!("kubectl {}", args.join(" ")),
        )
        .unwrap_or_else(|e| panic!("{e}"))
    }

    /// GET `path` as the admin (`kubectl get --raw`), the body.
    pub fn get_raw(&self, path: &str) -> String {
        self.kubectl_run(&["get", "--raw", path])
    }

    /// `/metrics` as the admin, in the Prometheus text format (`apiserver_request_total`…).
    pub fn metrics(&self) -> String {
        self.get_raw("/metrics")
    }

    /// The requests the server has answered since it started, from `apiserver_request_total`
    /// in its `/metrics`, summed by (verb, resource) over the other labels (code, scope…).
    /// Non-resource paths (discovery, /version) have resource "".
    pub fn request_totals(&self) -> BTreeMap<(String, String), u64> {
        request_totals(&self.metrics())
    }

    /// The audit log's events (`audit.k8s.io/v1` Event, one JSON object a line, stage
    /// ResponseComplete), in the order the server wrote them: who (`user.username`) sent
    /// what (`verb`, `objectRef`, `requestURI`) and what it was answered
    /// (`responseStatus.code`). Every request but the server's own loopback ones.
    ///
    /// # Panics
    /// When the control plane was started without [`Options::audit_log`].
    pub fn audit_events(&self) -> Vec<serde_json::Value> {
        let path = self
            .audit_log
            .as_ref()
            .expect("no audit log: start the control plane with Options { audit_log: true, .. }");
        let text = std::fs::read_to_string(path).unwrap_or_default();
        text.lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// Creates a namespace as the admin.
    pub fn create_namespace(&self, name: &str) {
        self.kubectl_run(&["create", "namespace", name]);
    }

    // ---- Stopping and starting (a control plane of one's own only) -----------------------

    /// kube-apiserver's pid, while it runs.
    pub fn apiserver_pid(&self) -> Option<u32> {
        Some(self.apiserver_pid.load(Ordering::Relaxed)).filter(|&p| p != 0)
    }

    /// etcd's pid, while it runs.
    pub fn etcd_pid(&self) -> Option<u32> {
        Some(self.etcd_pid.load(Ordering::Relaxed)).filter(|&p| p != 0)
    }

    /// The admission-policy status controller's (kube-controller-manager's) pid.
    pub fn policy_status_controller_pid(&self) -> Option<u32> {
        Some(self.policy_status_pid.load(Ordering::Relaxed)).filter(|&p| p != 0)
    }

    /// SIGKILL to kube-apiserver, and waits until it is gone.
    pub fn kill_apiserver(&self) {
        self.restartable();
        if let Some(daemon) = lock(&self.apiserver).take() {
            daemon.kill();
        }
        self.apiserver_pid.store(0, Ordering::Relaxed);
    }

    /// SIGTERM to kube-apiserver, and waits until it has shut down.
    ///
    /// # Panics
    /// When it is still running [`STOP_GRACE`] (30 s) after the signal (it is then killed).
    pub fn stop_apiserver(&self) {
        self.restartable();
        if let Some(daemon) = lock(&self.apiserver).take() {
            daemon
                .terminate(STOP_GRACE)
                .unwrap_or_else(|e| panic!("{e}"));
        }
        self.apiserver_pid.store(0, Ordering::Relaxed);
    }

    /// Starts kube-apiserver again, on the same port, with the same etcd, keys and tokens,
    /// and waits until it is ready.
    pub fn start_apiserver(&self) {
        self.restartable();
        self.start_apiserver_inner()
            .unwrap_or_else(|e| panic!("{e}"));
    }

    /// [`ControlPlane::stop_apiserver`], then [`ControlPlane::start_apiserver`].
    pub fn restart_apiserver(&self) {
        self.stop_apiserver();
        self.start_apiserver();
    }

    /// SIGKILL to etcd, and waits until it is gone. kube-apiserver keeps running, unready.
    pub fn kill_etcd(&self) {
        self.restartable();
        if let Some(daemon) = lock(&self.etcd).take() {
            daemon.kill();
        }
        self.etcd_pid.store(0, Ordering::Relaxed);
    }

    /// SIGTERM to etcd, and waits until it has shut down.
    pub fn stop_etcd(&self) {
        self.restartable();
        if let Some(daemon) = lock(&self.etcd).take() {
            daemon
                .terminate(STOP_GRACE)
                .unwrap_or_else(|e| panic!("{e}"));
        }
        self.etcd_pid.store(0, Ordering::Relaxed);
    }

    /// Starts etcd again on the same ports and data directory, and waits until it is
    /// healthy, and then, if kube-apiserver runs, until that is ready again.
    pub fn start_etcd(&self) {
        self.restartable();
        self.start_etcd_inner().unwrap_or_else(|e| panic!("{e}"));
        if self.apiserver_pid().is_some() {
            self.wait_until_ready().unwrap_or_else(|e| panic!("{e}"));
        }
    }

    fn restartable(&self) {
        assert!(
            !self.shared,
            "the shared control plane can't be stopped or restarted: tests beside this one use \
             it; start one of your own with ControlPlane::start()"
        );
    }

    // ---- The daemons ----------------------------------------------------------------------

    fn start_etcd_inner(&self) -> Result<(), String> {
        let mut slot = lock(&self.etcd);
        if slot.is_some() {
            return Err("etcd is running already".into());
        }
        let client = self.etcd_url();
        let peer = format!("http://127.0.0.1:{}", self.etcd_peer_port);
        let mut command = Command::new(self.assets.join("etcd"));
        command
            .arg("--name=control-plane")
            .arg(format!("--data-dir={}", self.dir.join("etcd").display()))
            .arg(format!("--listen-client-urls={client}"))
            .arg(format!("--advertise-client-urls={client}"))
            .arg(format!("--listen-peer-urls={peer}"))
            .arg(format!("--initial-advertise-peer-urls={peer}"))
            .arg(format!("--initial-cluster=control-plane={peer}"))
            .arg("--initial-cluster-state=new")
            .arg("--initial-cluster-token=ecr-refresh-control-plane")
            // For tests only: a crash of the machine is no concern here.
            .arg("--unsafe-no-fsync")
            .current_dir(&self.dir)
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("TMPDIR", &self.dir);
        let mut daemon = Daemon::spawn("etcd", command, &self.dir.join("etcd.log"))?;
        self.etcd_pid.store(daemon.pid(), Ordering::Relaxed);
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            if let Some(status) = daemon.exited() {
                self.etcd_pid.store(0, Ordering::Relaxed);
                return Err(daemon.exit_report(status));
            }
            if http_get(self.etcd_client_port, "/health")
                .is_some_and(|b| b.contains("\"health\":\"true\""))
            {
                *slot = Some(daemon);
                return Ok(());
            }
            if Instant::now() > deadline {
                let report = format!(
                    "etcd was not healthy within {READY_TIMEOUT:?}; the last lines of {}:\n{}",
                    self.dir.join("etcd.log").display(),
                    log_tail(&self.dir.join("etcd.log"), 40)
                );
                daemon.kill();
                self.etcd_pid.store(0, Ordering::Relaxed);
                return Err(report);
            }
            thread::sleep(Duration::from_millis(100));
        }
    }

    fn start_apiserver_inner(&self) -> Result<(), String> {
        {
            let mut slot = lock(&self.apiserver);
            if slot.is_some() {
                return Err("kube-apiserver is running already".into());
            }
            let certs = self.dir.join("certs");
            let mut command = Command::new(self.assets.join("kube-apiserver"));
            command
                .arg(format!("--etcd-servers={}", self.etcd_url()))
                .arg("--bind-address=127.0.0.1")
                .arg("--advertise-address=127.0.0.1")
                // The `kubernetes` Service's endpoints can't be a loopback address: 1.37 refuses
                // to start with "cannot use public IP 127.0.0.1 with endpoint reconciler".
                // Nothing in a test reaches the server through that Service.
                .arg("--endpoint-reconciler-type=none")
                .arg(format!("--secure-port={}", self.port))
                .arg(format!("--cert-dir={}", certs.display()))
                .arg(format!(
                    "--tls-cert-file={}",
                    self.pki.serving_cert.display()
                ))
                .arg(format!(
                    "--tls-private-key-file={}",
                    self.pki.serving_key.display()
                ))
                .arg("--authorization-mode=RBAC")
                .arg(format!("--token-auth-file={}", self.token_file.display()))
                .arg(format!(
                    "--service-account-issuer={}",
                    self.service_account_issuer
                        .clone()
                        .unwrap_or_else(|| self.server_url())
                ))
                .args(
                    self.service_account_issuer.as_ref().map(|issuer| {
                        format!("--service-account-jwks-uri={issuer}/openid/v1/jwks")
                    }),
                )
                .arg(format!(
                    "--service-account-key-file={}",
                    self.pki.sa_pub.display()
                ))
                .arg(format!(
                    "--service-account-signing-key-file={}",
                    self.pki.sa_key.display()
                ))
                .arg("--service-cluster-ip-range=10.0.0.0/24")
                // Without kube-controller-manager no `default` ServiceAccount ever appears,
                // and this plugin would refuse every pod for it. The other defaults stay on.
                .args(
                    (!self.service_account_admission)
                        .then_some("--disable-admission-plugins=ServiceAccount"),
                )
                .arg("--allow-privileged=true")
                .args(self.audit_log.iter().flat_map(|log| {
                    [
                        format!("--audit-log-path={}", log.display()),
                        format!(
                            "--audit-policy-file={}",
                            self.dir.join("audit-policy.yaml").display()
                        ),
                        // Each event written before the request is answered: a test reads
                        // the log right after its requests.
                        "--audit-log-mode=blocking".to_owned(),
                    ]
                }))
                .current_dir(&self.dir)
                .env_clear()
                .env("PATH", "/usr/bin:/bin")
                .env("TMPDIR", &self.dir);
            let daemon = Daemon::spawn(
                "kube-apiserver",
                command,
                &self.dir.join("kube-apiserver.log"),
            )?;
            self.apiserver_pid.store(daemon.pid(), Ordering::Relaxed);
            *slot = Some(daemon);
        }
        let ready = self.wait_until_ready();
        if ready.is_err() {
            if let Some(daemon) = lock(&self.apiserver).take() {
                daemon.kill();
            }
            self.apiserver_pid.store(0, Ordering::Relaxed);
        }
        ready
    }

    /// Starts kube-controller-manager with the admission-policy status controller alone, as
    /// the admin, once (later calls do nothing): from then on each ValidatingAdmissionPolicy
    /// gets `status.typeChecking`. On demand, not at start: its watches hold a SIGTERM'd
    /// kube-apiserver past [`STOP_GRACE`], which the restart tests would pay for.
    ///
    /// # Panics
    /// When kube-controller-manager can't be started.
    pub fn start_policy_status_controller(&self) {
        self.start_controllers_inner(&["validatingadmissionpolicy-status-controller"])
            .unwrap_or_else(|e| panic!("{e}"));
    }

    /// Starts kube-controller-manager with these controllers alone (their names as
    /// `--controllers` takes them, such as `replicaset-controller`), as the admin, once: one
    /// kube-controller-manager per control plane, so a later call, or
    /// [`ControlPlane::start_policy_status_controller`], does nothing. For the node tier's
    /// Deployments and PodDisruptionBudgets (tests/node/evict.rs).
    ///
    /// # Panics
    /// When kube-controller-manager can't be started.
    pub fn start_controllers(&self, controllers: &[&str]) {
        self.start_controllers_inner(controllers)
            .unwrap_or_else(|e| panic!("{e}"));
    }

    fn start_controllers_inner(&self, controllers: &[&str]) -> Result<(), String> {
        let mut slot = lock(&self.policy_status);
        if slot.is_some() {
            return Ok(());
        }
        let mut command = Command::new(self.assets.join("kube-controller-manager"));
        command
            .arg(format!("--kubeconfig={}", self.admin_kubeconfig.display()))
            .arg(format!("--controllers={}", controllers.join(",")))
            .arg("--leader-elect=false")
            .arg("--secure-port=0")
            .arg("--use-service-account-credentials=false")
            .current_dir(&self.dir)
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("TMPDIR", &self.dir);
        let daemon = Daemon::spawn(
            "kube-controller-manager",
            command,
            &self.dir.join("kube-controller-manager.log"),
        )?;
        self.policy_status_pid
            .store(daemon.pid(), Ordering::Relaxed);
        *slot = Some(daemon);
        Ok(())
    }

    /// Until `/readyz` answers ok to the admin and the objects kube-apiserver makes at start
    /// (the `default` namespace, the RBAC bootstrap roles) exist.
    fn wait_until_ready(&self) -> Result<(), String> {
        let deadline = Instant::now() + READY_TIMEOUT;
        let mut last = String::from("no answer yet");
        loop {
            {
                let mut slot = lock(&self.apiserver);
                let daemon = slot.as_mut().ok_or("kube-apiserver is not running")?;
                if let Some(status) = daemon.exited() {
                    return Err(daemon.exit_report(status));
                }
            }
            if TcpStream::connect((Ipv4Addr::LOCALHOST, self.port)).is_ok() {
                match self.try_kubectl(&["get", "--raw", "/readyz?verbose"]) {
                    Ok(_) => match self.try_kubectl(&[
                        "get",
                        "namespace/default",
                        "clusterrole/cluster-admin",
                        "clusterrole/admin",
                        "clusterrole/edit",
                        "clusterrole/view",
                        "clusterrolebinding/cluster-admin",
                        "-o",
                        "name",
                    ]) {
                        Ok(_) => return Ok(()),
                        Err(e) => last = e,
                    },
                    Err(e) => last = e,
                }
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "kube-apiserver was not ready within {READY_TIMEOUT:?}; last answer: {last}\n\
                     the last lines of {}:\n{}",
                    self.dir.join("kube-apiserver.log").display(),
                    self.apiserver_log_tail(40)
                ));
            }
            thread::sleep(Duration::from_millis(250));
        }
    }

    fn try_kubectl(&self, args: &[&str]) -> Result<String, String> {
        run(
            self.kubectl().arg("--request-timeout=5s").args(args),
            &format!("kubectl {}", args.join(" ")),
        )
    }

    /// Stops both daemons (SIGKILL: nothing in a test's etcd needs a clean shutdown) and
    /// removes the temporary directory. Once; never panics, never blocks on a lock (it runs
    /// from the exit handler too).
    fn cleanup(&self) {
        if self.cleaned.swap(true, Ordering::SeqCst) {
            return;
        }
        for (slot, pid) in [
            (&self.policy_status, &self.policy_status_pid),
            (&self.apiserver, &self.apiserver_pid),
            (&self.etcd, &self.etcd_pid),
        ] {
            match slot.try_lock() {
                Ok(mut guard) => {
                    if let Some(daemon) = guard.take() {
                        daemon.kill();
                    }
                }
                Err(TryLockError::Poisoned(poisoned)) => {
                    if let Some(daemon) = poisoned.into_inner().take() {
                        daemon.kill();
                    }
                }
                // Another thread is starting or stopping it: kill by pid, don't wait.
                Err(TryLockError::WouldBlock) => {
                    if let Ok(pid @ 1..) = libc::pid_t::try_from(pid.load(Ordering::Relaxed)) {
                        // SAFETY: kill(2) on a pid we spawned; its Daemon is still held, so
                        // it has not been reaped and the pid is not reused.
                        unsafe { libc::kill(pid, libc::SIGKILL) };
                    }
                }
            }
            pid.store(0, Ordering::Relaxed);
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        self.cleanup();
    }
}

/// A poisoned lock (a test panicked while holding it) still holds a good daemon slot.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn free_port() -> Result<u16, String> {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| format!("no free loopback port: {e}"))
}

/// A GET over plain HTTP to 127.0.0.1 (etcd's client port), the response as text.
fn http_get(port: u16, path: &str) -> Option<String> {
    let address = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let mut stream = TcpStream::connect_timeout(&address, Duration::from_secs(1)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    Some(response)
}

/// 128 random bits as hex, from std's randomly keyed hasher: a loopback test token needs
/// no more.
fn random_token() -> String {
    let half = || std::hash::RandomState::new().build_hasher().finish();
    format!("{:016x}{:016x}", half(), half())
}

fn write_private(path: &Path, text: &str) -> Result<(), String> {
    private_file(path)
        .and_then(|mut f| f.write_all(text.as_bytes()))
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// `apiserver_request_total` in a `/metrics` text, summed by (verb, resource).
fn request_totals(metrics: &str) -> BTreeMap<(String, String), u64> {
    let mut sums = BTreeMap::new();
    for line in metrics.lines() {
        let Some(rest) = line.strip_prefix("apiserver_request_total{") else {
            continue;
        };
        let Some((labels, value)) = rest.rsplit_once("} ") else {
            continue;
        };
        let label = |name: &str| {
            labels
                .split(',')
                .find_map(|l| l.strip_prefix(&format!("{name}=\"")))
                .map(|v| v.trim_end_matches('"').to_owned())
                .unwrap_or_default()
        };
        let value: f64 = value
            .trim()
            .parse()
            .unwrap_or_else(|e| panic!("apiserver_request_total: {line}: {e}"));
        *sums.entry((label("verb"), label("resource"))).or_insert(0) += value as u64;
    }
    sums
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_totals_sum_over_the_labels_other_than_verb_and_resource() {
        let metrics = "\
# HELP apiserver_request_total [STABLE] Counter of apiserver requests
apiserver_request_total{code=\"200\",component=\"apiserver\",dry_run=\"\",group=\"\",resource=\"secrets\",scope=\"resource\",subresource=\"\",verb=\"GET\",version=\"v1\"} 3
apiserver_request_total{code=\"404\",component=\"apiserver\",dry_run=\"\",group=\"\",resource=\"secrets\",scope=\"resource\",subresource=\"\",verb=\"GET\",version=\"v1\"} 2
apiserver_request_total{code=\"200\",component=\"apiserver\",dry_run=\"\",group=\"\",resource=\"\",scope=\"\",subresource=\"/version\",verb=\"GET\",version=\"\"} 1
apiserver_request_total_other{verb=\"GET\"} 9
";
        let totals = request_totals(metrics);
        let get = |verb: &str, resource: &str| {
            totals.get(&(verb.to_owned(), resource.to_owned())).copied()
        };
        assert_eq!(get("GET", "secrets"), Some(5));
        assert_eq!(get("GET", ""), Some(1));
        assert_eq!(totals.len(), 2, "{totals:?}");
    }

    #[test]
    fn without_the_variable_or_a_binary_the_message_names_the_variable_and_the_build_command() {
        let unset = check_assets(None).unwrap_err();
        assert!(unset.contains("KUBEBUILDER_ASSETS is not set"), "{unset}");
        assert!(unset.contains("bash .ci/kube-binaries"), "{unset}");
        let empty = std::env::temp_dir().join("control-plane-no-such-assets");
        let missing = check_assets(Some(empty.clone().into_os_string())).unwrap_err();
        assert!(
            missing.contains(&format!(
                "KUBEBUILDER_ASSETS={} has no kube-apiserver",
                empty.display()
            )),
            "{missing}"
        );
        assert!(missing.contains("bash .ci/kube-binaries"), "{missing}");
    }

    #[test]
    fn tokens_differ() {
        assert_ne!(random_token(), random_token());
        assert_eq!(random_token().len(), 32);
    }
}
