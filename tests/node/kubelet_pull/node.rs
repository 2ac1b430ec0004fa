//! One Kubernetes node on this machine for the end-to-end pull test: containerd (with Debian's
//! runc) and the kubelet, registered with a control plane of `control-plane`'s harness.
//!
//! Everything either daemon keeps is under one temporary directory: containerd's root, state,
//! sockets, registry hosts directory and CNI directories; the kubelet's root, certificates,
//! config and pod logs. What a node can't help touching outside it is made its own and undone:
//! - cgroups: the kubelet's `cgroupRoot` is a cgroup of this node's own name, made in every
//!   hierarchy before it starts and removed (deepest first) after;
//! - mounts: containerd's overlay mounts are under the temporary directory and are unmounted
//!   after it stops; the kubelet runs in a mount namespace of its own (`unshare --mount`),
//!   so the bind mount it makes of its root directory dies with it;
//! - kernel settings: the kubelet sets `vm.overcommit_memory`, `kernel.panic` and others at
//!   start (container_manager_linux.go, setupKernelTunables). In its mount namespace those
//!   /proc/sys files are bind mounts of copies in the temporary directory, so it writes the
//!   copies, and `/var/log` (where it makes `containers/`, a path no flag moves) is a bind
//!   mount of an empty directory in the temporary directory.
//!
//! No scheduler and no CNI: a pod names this node in `spec.nodeName` and uses the host's
//! network, which the kubelet runs while the node is NotReady for want of a network plugin.
// The daemons are stopped and their mounts undone with kill(2) and umount2(2) through libc.
#![allow(unsafe_code)]

use std::fs;
use std::io::Write as _;
use std::net::{Ipv4Addr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

/// The directories (colon-separated, like PATH) with containerd, containerd-shim-runc-v2,
/// ctr and crictl.
pub(crate) const NODE_ASSETS: &str = "ECR_REFRESH_NODE_ASSETS";

/// Debian's runc (package `runc`), which containerd's shim runs.
pub(crate) const RUNC: &str = "/usr/sbin/runc";

/// The static busybox (package `busybox-static`) the test image is made of.
pub(crate) const BUSYBOX: &str = "/bin/busybox";

/// The sandbox ("pause") image, imported into containerd before the kubelet starts: the node
/// has no way to the Internet, where registry.k8s.io/pause is.
pub(crate) const PAUSE_IMAGE: &str = "ecr-refresh.test/pause:1";

const BUILD: &str = "build them with `bash .ci/go-tool containerd` and `bash .ci/go-tool crictl` \
    and set ECR_REFRESH_NODE_ASSETS to the two directories they print on their last lines: \
    export ECR_REFRESH_NODE_ASSETS=\"$(bash .ci/go-tool containerd | tail -1):$(bash .ci/go-tool crictl | tail -1)\"";

/// Where each binary a node runs is.
#[derive(Clone, Debug)]
pub(crate) struct NodeAssets {
    pub containerd: PathBuf,
    pub shim: PathBuf,
    pub ctr: PathBuf,
    pub crictl: PathBuf,
    pub kubelet: PathBuf,
}

impl NodeAssets {
    /// From [`NODE_ASSETS`] and the kubelet in `kube_assets` (KUBEBUILDER_ASSETS), with runc,
    /// busybox and unshare checked too.
    ///
    /// # Panics
    /// Naming what is missing and the command that provides it.
    pub(crate) fn find(kube_assets: &Path) -> Self {
        Self::check(std::env::var_os(NODE_ASSETS), kube_assets).unwrap_or_else(|e| panic!("{e}"))
    }

    pub(crate) fn check(
        value: Option<std::ffi::OsString>,
        kube_assets: &Path,
    ) -> Result<Self, String> {
        let dirs: Vec<PathBuf> = match &value {
            Some(v) if !v.is_empty() => std::env::split_paths(v).collect(),
            _ => {
                return Err(format!(
                    "{NODE_ASSETS} is not set: tests/node/kubelet_pull.rs needs containerd, \
                     containerd-shim-runc-v2, ctr and crictl; {BUILD}"
                ));
            }
        };
        let find = |name: &str, from: &str| -> Result<PathBuf, String> {
            dirs.iter()
                .map(|d| d.join(name))
                .find(|p| p.is_file())
                .ok_or_else(|| {
                    format!(
                        "{NODE_ASSETS}={} has no {name}; {from}",
                        value.as_deref().unwrap_or_default().to_string_lossy()
                    )
                })
        };
        let containerd_build = "build it with `bash .ci/go-tool containerd`; ".to_owned() + BUILD;
        let crictl_build = "build it with `bash .ci/go-tool crictl`; ".to_owned() + BUILD;
        let assets = Self {
            containerd: find("containerd", &containerd_build)?,
            shim: find("containerd-shim-runc-v2", &containerd_build)?,
            ctr: find("ctr", &containerd_build)?,
            crictl: find("crictl", &crictl_build)?,
            kubelet: kube_assets.join("kubelet"),
        };
        if !assets.kubelet.is_file() {
            return Err(format!(
                "KUBEBUILDER_ASSETS={} has no kubelet; build it with `bash .ci/kube-binaries`",
                kube_assets.display()
            ));
        }
        for (path, package) in [(RUNC, "runc"), (BUSYBOX, "busybox-static")] {
            if !Path::new(path).is_file() {
                return Err(format!(
                    "{path} is missing: tests/node/kubelet_pull.rs needs it; install it with \
                     `apt-get install {package}` (.ci/run does)"
                ));
            }
        }
        Ok(assets)
    }
}

/// A child process killed (SIGTERM, then SIGKILL after `grace`) and reaped on drop.
struct Daemon {
    name: &'static str,
    child: Child,
    log: PathBuf,
}

impl Daemon {
    fn spawn(name: &'static str, mut command: Command, log: &Path) -> Self {
        let out = fs::File::create(log).unwrap_or_else(|e| panic!("create {}: {e}", log.display()));
        let err = out.try_clone().expect("clone a log handle");
        let child = command
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .unwrap_or_else(|e| panic!("start {name} ({:?}): {e}", command.get_program()));
        Self {
            name,
            child,
            log: log.to_owned(),
        }
    }

    /// Panics with its log's tail if it has exited.
    fn check_running(&mut self) {
        if let Ok(Some(status)) = self.child.try_wait() {
            panic!(
                "{} exited ({status}); the last lines of {}:\n{}",
                self.name,
                self.log.display(),
                tail(&self.log, 30)
            );
        }
    }

    fn stop(mut self, grace: Duration) {
        let pid = self.child.id() as libc::pid_t;
        // SAFETY: kill(2) on our own child, not yet reaped, so the pid is not reused.
        unsafe { libc::kill(pid, libc::SIGTERM) };
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The last `lines` lines of a log file.
pub(crate) fn tail(path: &Path, lines: usize) -> String {
    let text = fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// The last lines of a kubelet or containerd log at level E or F (klog) or `level=error`.
pub(crate) fn errors(path: &Path, lines: usize) -> String {
    let text = fs::read_to_string(path).unwrap_or_default();
    let errors: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with('E') || l.starts_with('F') || l.contains("level=error"))
        .collect();
    errors[errors.len().saturating_sub(lines)..].join("\n")
}

fn free_port() -> u16 {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

fn write(path: &Path, text: &str) {
    fs::write(path, text).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
}

fn run(command: &mut Command, what: &str) -> String {
    let out = command
        .output()
        .unwrap_or_else(|e| panic!("{what}: cannot run: {e}"));
    assert!(
        out.status.success(),
        "{what}: {}\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The cgroup hierarchies to make the node's cgroup root in: the unified one alone on a
/// cgroup v2 host, else every mounted v1 hierarchy (and the hybrid's unified one).
fn cgroup_hierarchies() -> Vec<PathBuf> {
    let base = Path::new("/sys/fs/cgroup");
    if base.join("cgroup.controllers").exists() {
        return vec![base.to_owned()];
    }
    let mut dirs: Vec<PathBuf> = fs::read_dir(base)
        .map(|entries| {
            entries
                .flatten()
                .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                .map(|e| e.path())
                .filter(|p| p.join("cgroup.procs").exists())
                .collect()
        })
        .unwrap_or_default();
    dirs.sort();
    dirs.dedup();
    dirs
}

/// A running node: containerd and the kubelet, registered as `name`.
pub(crate) struct Node {
    pub name: String,
    pub dir: PathBuf,
    pub assets: NodeAssets,
    /// containerd's CRI socket, `unix://` included.
    pub endpoint: String,
    /// containerd's registry hosts directory (`certs.d`).
    pub hosts_dir: PathBuf,
    cgroup_root: String,
    containerd: Option<Daemon>,
    kubelet: Option<Daemon>,
    _temp: tempfile::TempDir,
}

impl Node {
    /// Starts containerd, imports the sandbox image made of `pause_layout` (an OCI layout
    /// tar), and starts the kubelet with `kubeconfig`; returns once the Node object exists.
    /// Registry hosts are configured after, in [`Node::hosts_dir`] (containerd reads it on
    /// every pull).
    pub(crate) fn start(
        assets: NodeAssets,
        kubeconfig: &Path,
        kubectl: impl Fn() -> Command,
        pause_layout: &Path,
    ) -> Self {
        let temp = tempfile::Builder::new()
            .prefix("ecr-refresh-node-")
            .tempdir()
            .expect("a temporary directory");
        let dir = temp.path().to_owned();
        let id = dir
            .file_name()
            .and_then(|n| n.to_str())
            .expect("a temporary directory's name")
            .to_owned();
        let name = id.to_lowercase().replace('_', "-");
        let hosts_dir = dir.join("certs.d");
        for sub in [
            "containerd-root",
            "containerd-state",
            "certs.d",
            "cni-bin",
            "cni-conf",
            "opt",
            "kubelet",
            "kubelet-pki",
            "pod-logs",
            "var-log",
            "sysctl",
        ] {
            fs::create_dir(dir.join(sub)).expect("create a node directory");
        }
        let socket = dir.join("containerd.sock");
        let mut node = Self {
            name,
            endpoint: format!("unix://{}", socket.display()),
            hosts_dir: hosts_dir.clone(),
            cgroup_root: format!("/{id}"),
            assets,
            containerd: None,
            kubelet: None,
            dir: dir.clone(),
            _temp: temp,
        };
        // crictl refuses to run without a config file (it looks in /etc, then beside itself).
        write(
            &dir.join("crictl.yaml"),
            &format!(
                "runtime-endpoint: {e}\nimage-endpoint: {e}\ntimeout: 30\n",
                e = node.endpoint
            ),
        );
        // From here on, Drop undoes everything on every path.
        node.start_containerd(&socket);
        node.import(pause_layout, PAUSE_IMAGE);
        node.start_kubelet(kubeconfig, kubectl);
        node
    }

    fn start_containerd(&mut self, socket: &Path) {
        let d = &self.dir;
        // Every path containerd would otherwise take from its defaults (/var/lib/containerd,
        // /run/containerd, /opt/containerd, /etc/containerd/conf.d, /etc/cdi) is set; NRI,
        // whose socket is /var/run/nri, is off.
        let config = format!(
            r#"version = 3
root = "{root}"
state = "{state}"
imports = []
disabled_plugins = ["io.containerd.nri.v1.nri"]

[grpc]
  address = "{socket}"
[ttrpc]
  address = "{socket}.ttrpc"

[plugins.'io.containerd.internal.v1.opt']
  path = "{opt}"
[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"
[plugins.'io.containerd.cri.v1.images'.registry]
  config_path = "{hosts}"
[plugins.'io.containerd.cri.v1.images'.pinned_images]
  sandbox = "{PAUSE_IMAGE}"
[plugins.'io.containerd.transfer.v1.local']
  config_path = "{hosts}"
[plugins.'io.containerd.cri.v1.runtime']
  enable_cdi = false
  cdi_spec_dirs = []
  # Without CAP_SYS_RESOURCE (a container host often drops it) runc can't lower a
  # process's oom_score_adj, and the sandbox's -998 fails every pod with "failed to
  # update /proc/self/oom_score_adj: Permission denied". This keeps it at containerd's.
  restrict_oom_score_adj = true
[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
  BinaryName = "{RUNC}"
[plugins.'io.containerd.cri.v1.runtime'.cni]
  bin_dirs = ["{cni_bin}"]
  conf_dir = "{cni_conf}"
"#,
            root = d.join("containerd-root").display(),
            state = d.join("containerd-state").display(),
            socket = socket.display(),
            opt = d.join("opt").display(),
            hosts = self.hosts_dir.display(),
            cni_bin = d.join("cni-bin").display(),
            cni_conf = d.join("cni-conf").display(),
        );
        let path = d.join("containerd.toml");
        write(&path, &config);
        let shim_dir = self
            .assets
            .shim
            .parent()
            .expect("the shim's directory")
            .to_owned();
        let mut command = Command::new(&self.assets.containerd);
        command
            .arg("--config")
            .arg(&path)
            .current_dir(d)
            .env_clear()
            // containerd finds containerd-shim-runc-v2 on PATH.
            .env(
                "PATH",
                format!("{}:/usr/sbin:/usr/bin:/sbin:/bin", shim_dir.display()),
            )
            .env("TMPDIR", d);
        let mut daemon = Daemon::spawn("containerd", command, &d.join("containerd.log"));
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            daemon.check_running();
            if self
                .crictl()
                .arg("info")
                .output()
                .is_ok_and(|o| o.status.success())
            {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "containerd did not answer `crictl info` within 60s; its log:\n{}",
                tail(&d.join("containerd.log"), 30)
            );
            thread::sleep(Duration::from_millis(200));
        }
        self.containerd = Some(daemon);
    }

    /// `crictl` against this node's containerd.
    pub(crate) fn crictl(&self) -> Command {
        let mut command = Command::new(&self.assets.crictl);
        command
            .arg("--runtime-endpoint")
            .arg(&self.endpoint)
            .arg("--image-endpoint")
            .arg(&self.endpoint)
            .arg("--timeout=30s")
            // No /etc/crictl.yaml read.
            .arg("--config")
            .arg(self.dir.join("crictl.yaml"));
        command
    }

    /// Imports an OCI layout tar into the CRI's namespace; it is named by its index's
    /// `io.containerd.image.name` annotation, which must be `name`. (Not `--index-name`: the
    /// index image that makes carries a `containerd.io/gc.expire` label and goes.)
    fn import(&self, layout: &Path, name: &str) {
        let ctr = || {
            let mut command = Command::new(&self.assets.ctr);
            command
                .arg("--address")
                .arg(self.endpoint.trim_start_matches("unix://"))
                .args(["--namespace", "k8s.io"]);
            command
        };
        run(
            ctr().args(["images", "import"]).arg(layout),
            &format!("ctr images import {}", layout.display()),
        );
        let images = run(
            self.crictl().args(["images", "--output", "json"]),
            "crictl images",
        );
        assert!(
            images.contains(&format!("\"{name}\"")),
            "after `ctr images import`, the CRI has no image {name}: {images}"
        );
    }

    fn start_kubelet(&mut self, kubeconfig: &Path, kubectl: impl Fn() -> Command) {
        let d = self.dir.clone();
        let hierarchies = cgroup_hierarchies();
        assert!(
            !hierarchies.is_empty(),
            "no cgroup hierarchy under /sys/fs/cgroup: the kubelet needs cgroups"
        );
        for h in &hierarchies {
            let path = h.join(self.cgroup_root.trim_start_matches('/'));
            fs::create_dir(&path).unwrap_or_else(|e| panic!("mkdir {}: {e}", path.display()));
        }
        let config = format!(
            r#"apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# kubelet 1.35+ refuses a cgroup v1 host unless told; this machine may be one.
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: {cgroup_root}
containerRuntimeEndpoint: {endpoint}
imageServiceEndpoint: {endpoint}
address: 127.0.0.1
port: {port}
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: {healthz}
authentication:
  anonymous: {{enabled: true}}
  webhook: {{enabled: false}}
authorization: {{mode: AlwaysAllow}}
failSwapOn: false
enforceNodeAllocatable: []
evictionHard: {{}}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
localStorageCapacityIsolation: false
podLogsDir: {pod_logs}
resolvConf: /etc/resolv.conf
staticPodPath: ""
"#,
            cgroup_root = self.cgroup_root,
            endpoint = self.endpoint,
            port = free_port(),
            healthz = free_port(),
            pod_logs = d.join("pod-logs").display(),
        );
        let config_path = d.join("kubelet.yaml");
        write(&config_path, &config);
        // The mount namespace of its own: see the module's comment. `--propagation slave`
        // lets it see the host's mounts (containerd's among them) without its own leaking.
        let mut script = String::from("set -e\n");
        for file in [
            "vm/overcommit_memory",
            "vm/panic_on_oom",
            "kernel/panic",
            "kernel/panic_on_oops",
            "kernel/keys/root_maxkeys",
            "kernel/keys/root_maxbytes",
        ] {
            let copy = d.join("sysctl").join(file.replace('/', "."));
            script += &format!(
                "cat /proc/sys/{file} > '{copy}'\nmount --bind '{copy}' /proc/sys/{file}\n",
                copy = copy.display()
            );
        }
        script += &format!(
            "mount --bind '{}' /var/log\nexec \"$@\"\n",
            d.join("var-log").display()
        );
        let mut command = Command::new("unshare");
        command
            .args([
                "--mount",
                "--propagation",
                "slave",
                "sh",
                "-c",
                &script,
                "kubelet",
            ])
            .arg(&self.assets.kubelet)
            .arg(format!("--kubeconfig={}", kubeconfig.display()))
            .arg(format!("--config={}", config_path.display()))
            .arg(format!("--root-dir={}", d.join("kubelet").display()))
            .arg(format!("--cert-dir={}", d.join("kubelet-pki").display()))
            .arg(format!("--hostname-override={}", self.name))
            .arg("--v=2")
            .current_dir(&d)
            .env_clear()
            .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
            .env("TMPDIR", &d);
        let mut daemon = Daemon::spawn("kubelet", command, &d.join("kubelet.log"));
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            daemon.check_running();
            let got = kubectl()
                .args(["get", "node", &self.name, "-o", "name"])
                .output()
                .is_ok_and(|o| o.status.success());
            if got {
                break;
            }
            if Instant::now() > deadline {
                self.kubelet = Some(daemon);
                panic!(
                    "the kubelet did not register node {} within 120s; its first errors:\n{}\n\
                     its last lines:\n{}",
                    self.name,
                    errors(&d.join("kubelet.log"), 15),
                    tail(&d.join("kubelet.log"), 15)
                );
            }
            thread::sleep(Duration::from_millis(250));
        }
        self.kubelet = Some(daemon);
    }

    pub(crate) fn kubelet_log(&self) -> PathBuf {
        self.dir.join("kubelet.log")
    }

    pub(crate) fn containerd_log(&self) -> PathBuf {
        self.dir.join("containerd.log")
    }

    /// Routes pulls of `host` to `https://endpoint` trusting `ca` (a PEM file), as
    /// `certs.d/<host>/hosts.toml`.
    pub(crate) fn route_registry(&self, host: &str, endpoint: &str, ca: &Path) {
        let dir = self.hosts_dir.join(host);
        fs::create_dir_all(&dir).expect("create a hosts.toml directory");
        write(
            &dir.join("hosts.toml"),
            &format!(
                "server = \"https://{host}\"\n\n\
                 [host.\"https://{endpoint}\"]\n  capabilities = [\"pull\", \"resolve\"]\n  \
                 ca = \"{}\"\n",
                ca.display()
            ),
        );
    }

    /// Pids of processes whose command line names this node's directory: the shims and
    /// anything they left. All are descendants of the test's own children.
    fn leftover_pids(&self) -> Vec<libc::pid_t> {
        let needle = self.dir.to_string_lossy().into_owned();
        let mut pids = Vec::new();
        for entry in fs::read_dir("/proc").into_iter().flatten().flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|s| s.parse::<libc::pid_t>().ok())
            else {
                continue;
            };
            let cmdline = fs::read(entry.path().join("cmdline")).unwrap_or_default();
            if String::from_utf8_lossy(&cmdline).contains(&needle) {
                pids.push(pid);
            }
        }
        pids
    }

    fn teardown(&mut self) {
        if let Some(kubelet) = self.kubelet.take() {
            kubelet.stop(Duration::from_secs(5));
        }
        if self.containerd.is_some() {
            // Every sandbox and its containers, through the CRI, so that containerd unmounts
            // their snapshots and the shims exit.
            let _ = self.crictl().args(["rmp", "--force", "--all"]).output();
        }
        if let Some(containerd) = self.containerd.take() {
            containerd.stop(Duration::from_secs(10));
        }
        // Processes still in the node's cgroups (a container a failed removal left).
        for h in cgroup_hierarchies() {
            let root = h.join(self.cgroup_root.trim_start_matches('/'));
            for procs in walk(&root).iter().map(|d| d.join("cgroup.procs")) {
                for pid in fs::read_to_string(procs).unwrap_or_default().lines() {
                    if let Ok(pid) = pid.trim().parse::<libc::pid_t>() {
                        // SAFETY: kill(2); the process is in a cgroup this node made.
                        unsafe { libc::kill(pid, libc::SIGKILL) };
                    }
                }
            }
        }
        for pid in self.leftover_pids() {
            // SAFETY: kill(2) on a shim of this node's containerd (its command line names
            // the node's directory).
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        thread::sleep(Duration::from_millis(200));
        self.unmount_all();
        for h in cgroup_hierarchies() {
            let root = h.join(self.cgroup_root.trim_start_matches('/'));
            // Deepest first; a cgroup whose last process just died may take a moment.
            for _ in 0..50 {
                let dirs = walk(&root);
                if dirs.is_empty() {
                    break;
                }
                for d in dirs.iter().rev() {
                    let _ = fs::remove_dir(d);
                }
                thread::sleep(Duration::from_millis(100));
            }
        }
    }

    /// Unmounts (lazily, deepest first) every mount under the node's directory.
    fn unmount_all(&self) {
        let prefix = self.dir.to_string_lossy().into_owned();
        for _ in 0..3 {
            let mountinfo = fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
            let mut points: Vec<String> = mountinfo
                .lines()
                .filter_map(|l| l.split(' ').nth(4))
                .map(unescape_mount_point)
                .filter(|p| p.starts_with(&prefix))
                .collect();
            if points.is_empty() {
                return;
            }
            points.sort_by_key(|p| std::cmp::Reverse(p.len()));
            for point in points {
                if let Ok(c) = std::ffi::CString::new(point) {
                    // SAFETY: umount2(2) with a valid C string; the mount is under our
                    // temporary directory.
                    unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) };
                }
            }
        }
    }

    /// Mount points under the node's directory still mounted (after teardown: none).
    pub(crate) fn mounts(dir: &Path) -> Vec<String> {
        let prefix = dir.to_string_lossy().into_owned();
        fs::read_to_string("/proc/self/mountinfo")
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.split(' ').nth(4))
            .map(unescape_mount_point)
            .filter(|p| p.starts_with(&prefix))
            .collect()
    }

    /// The cgroups of this node's cgroup root still present.
    pub(crate) fn cgroups(cgroup_root: &str) -> Vec<PathBuf> {
        cgroup_hierarchies()
            .iter()
            .map(|h| h.join(cgroup_root.trim_start_matches('/')))
            .filter(|p| p.exists())
            .collect()
    }

    pub(crate) fn cgroup_root(&self) -> &str {
        &self.cgroup_root
    }

    /// Stops everything now and says what was left (nothing, when all went well).
    pub(crate) fn stop(mut self) -> Vec<String> {
        self.teardown();
        let mut left: Vec<String> = Self::mounts(&self.dir)
            .into_iter()
            .map(|m| format!("mount {m}"))
            .collect();
        left.extend(
            Self::cgroups(&self.cgroup_root)
                .into_iter()
                .map(|c| format!("cgroup {}", c.display())),
        );
        left.extend(
            self.leftover_pids()
                .into_iter()
                .map(|p| format!("process {p}")),
        );
        left
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.teardown();
    }
}

/// A directory and every directory below it, parents before children.
fn walk(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_owned()];
    while let Some(d) = stack.pop() {
        if !d.is_dir() {
            continue;
        }
        for entry in fs::read_dir(&d).into_iter().flatten().flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(entry.path());
            }
        }
        out.push(d);
    }
    out.sort_by_key(|p| p.components().count());
    out
}

/// /proc/self/mountinfo escapes space, tab, newline and backslash as octal.
fn unescape_mount_point(field: &str) -> String {
    field
        .replace("\\040", " ")
        .replace("\\011", "\t")
        .replace("\\012", "\n")
        .replace("\\134", "\\")
}

/// Writes an OCI image layout of one layer (`files`: path in the image, path on this machine)
/// whose config runs `cmd`, tagged `tag`, named `name` (the annotation `ctr import` reads),
/// and returns its directory. `tar` is written to beside it as well (for `ctr import`).
pub(crate) fn oci_layout(
    dir: &Path,
    files: &[(&str, &Path)],
    cmd: &[&str],
    tag: &str,
    name: &str,
) -> (PathBuf, PathBuf) {
    use sha2::Digest as _;
    let rootfs = dir.join("rootfs");
    let layout = dir.join("layout");
    let blobs = layout.join("blobs").join("sha256");
    fs::create_dir_all(&blobs).expect("create the layout");
    for (inside, from) in files {
        let target = rootfs.join(inside);
        fs::create_dir_all(target.parent().expect("a parent")).expect("create the rootfs");
        fs::copy(from, &target).unwrap_or_else(|e| panic!("copy {}: {e}", from.display()));
    }
    let layer = dir.join("layer.tar");
    run(
        Command::new("tar")
            .args([
                "--numeric-owner",
                "--owner=0",
                "--group=0",
                "--mtime=@0",
                "--sort=name",
            ])
            .arg("-C")
            .arg(&rootfs)
            .arg("-cf")
            .arg(&layer)
            .arg("."),
        "tar the image's layer",
    );
    let blob = |bytes: &[u8]| -> (String, usize) {
        let hex: String = sha2::Sha256::digest(bytes)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let digest = format!("sha256:{hex}");
        write_bytes(&blobs.join(digest.trim_start_matches("sha256:")), bytes);
        (digest, bytes.len())
    };
    let layer_bytes = fs::read(&layer).expect("read the layer");
    let (layer_digest, layer_size) = blob(&layer_bytes);
    let config = serde_json::json!({
        "architecture": std::env::consts::ARCH.replace("x86_64", "amd64").replace("aarch64", "arm64"),
        "os": "linux",
        "config": {"Cmd": cmd},
        "rootfs": {"type": "layers", "diff_ids": [layer_digest]},
    });
    let (config_digest, config_size) = blob(config.to_string().as_bytes());
    let manifest = serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": config_digest, "size": config_size},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": layer_digest, "size": layer_size}],
    });
    let (manifest_digest, manifest_size) = blob(manifest.to_string().as_bytes());
    let index = serde_json::json!({
        "schemaVersion": 2,
        "manifests": [{
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "digest": manifest_digest,
            "size": manifest_size,
            "annotations": {
                "org.opencontainers.image.ref.name": tag,
                "io.containerd.image.name": name,
            },
        }],
    });
    write(&layout.join("index.json"), &index.to_string());
    write(
        &layout.join("oci-layout"),
        r#"{"imageLayoutVersion":"1.0.0"}"#,
    );
    let tar = dir.join("layout.tar");
    run(
        Command::new("tar")
            .arg("-C")
            .arg(&layout)
            .arg("-cf")
            .arg(&tar)
            .arg("."),
        "tar the image layout",
    );
    (layout, tar)
}

fn write_bytes(path: &Path, bytes: &[u8]) {
    let mut f = fs::File::create(path).unwrap_or_else(|e| panic!("create {}: {e}", path.display()));
    f.write_all(bytes).expect("write a blob");
}
