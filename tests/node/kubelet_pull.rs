//! The end-to-end pull: a real kubelet and containerd pull an image with the Secret
//! ecr-refresh wrote, before, after and during a refresh.
//!
//! One node on this machine (tests/node/kubelet_pull/node.rs) joins a control plane of
//! `control-plane`'s harness. The image is named by an ECR host
//! (`123456789012.dkr.ecr.us-east-1.amazonaws.com/app:1`); containerd reaches that host
//! through `certs.d/<host>/hosts.toml`, which points to Debian's docker-registry on loopback
//! (tests/common/registry.rs; TLS, htpasswd: it really checks the password) and trusts its certificate. ECR is the fake;
//! it hands out the password the htpasswd file accepts.
//!
//! Needs root (the kubelet and containerd), KUBEBUILDER_ASSETS with a kubelet
//! (`bash .ci/kube-binaries`), ECR_REFRESH_NODE_ASSETS (`bash .ci/go-tool containerd` and
//! `crictl`), and Debian's runc, busybox-static, docker-registry and skopeo. Without one of
//! them the test fails, naming it.

use crate::common;
pub(crate) mod node;

use std::path::Path;
use std::process::{Command, Output};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant, SystemTime};

use base64::Engine as _;
use common::registry::TlsRegistry;
use control_plane::ControlPlane;
use fake_cluster::FakeEcr;
use node::{BUSYBOX, Node, NodeAssets, oci_layout};
use serde_json::{Value, json};

pub(crate) const REGISTRY: &str = "123456789012.dkr.ecr.us-east-1.amazonaws.com";
pub(crate) const REGION: &str = "us-east-1";
pub(crate) const SECRET: &str = "aws-ecr-token";
const NAMESPACE: &str = "pull";
/// How long a pod may take to run or fail its pull; generous, the machine is shared.
const POD_TIMEOUT: Duration = Duration::from_secs(120);

/// What became of a pod.
#[derive(Debug)]
pub(crate) enum Fate {
    Running,
    /// The container's waiting reason (ErrImagePull, ImagePullBackOff) and message.
    PullFailed(String, String),
}

// Fields drop in order: the node before the control plane it is registered with.
pub(crate) struct Cluster {
    pub node: Option<Node>,
    pub cp: ControlPlane,
    pub ecr: FakeEcr,
    /// The image the pods pull, `REGISTRY/<repository>:1`.
    pub image: String,
    /// Where the pods run and ecr-refresh writes.
    pub namespace: &'static str,
    pub dir: tempfile::TempDir,
}

impl Cluster {
    /// A registry under the ECR host holding the image at `repository` (its password
    /// `password`), the fake ECR handing that password out, a control plane with the
    /// ServiceAccount admission plugin, and a node routed to the registry. `namespace`
    /// created.
    pub(crate) fn start(
        namespace: &'static str,
        repository: &str,
        password: &str,
    ) -> (Self, TlsRegistry) {
        let started = Instant::now();
        let kube_assets = control_plane::assets();
        let assets = NodeAssets::find(&kube_assets);
        let dir = tempfile::tempdir().expect("a temporary directory");
        let image = format!("{REGISTRY}/{repository}:1");
        let (app_layout, pause_tar) = image_layouts(dir.path(), &image);

        let registry = TlsRegistry::on_loopback("AWS", password);
        registry.push(&app_layout, "1", repository, password);

        let cp = ControlPlane::start_with_service_account_admission();
        let ecr = FakeEcr::start();
        ecr.set_password(REGION, password);
        let admin = cp.admin_kubeconfig().to_owned();
        let node = Node::start(assets, &admin, || cp.kubectl(), &pause_tar);
        node.route_registry(REGISTRY, &registry.host(), &registry.certificate);
        eprintln!(
            "{namespace}: node {} ready in {:.1?}",
            node.name,
            started.elapsed()
        );
        let c = Self {
            cp,
            ecr,
            node: Some(node),
            image,
            namespace,
            dir,
        };
        c.cp.create_namespace(namespace);
        (c, registry)
    }

    pub(crate) fn kubectl(&self, args: &[&str]) -> String {
        self.cp.kubectl_run(args)
    }

    pub(crate) fn json(&self, args: &[&str]) -> Value {
        let text = self.kubectl(&[args, &["-o", "json"]].concat());
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("kubectl {args:?}: {e}: {text}"))
    }

    pub(crate) fn node(&self) -> &Node {
        self.node.as_ref().expect("the node runs")
    }

    /// ecr-refresh once, as the CronJob runs it with the service-accounts component
    /// (ECR_REFRESH_SERVICE_ACCOUNTS=default); RENEW_BEFORE=12h makes every run write.
    fn refresh(&self) -> Vec<Value> {
        self.refresh_with(&[])
    }

    /// The same with more variables, or other values (`extra` is set last).
    pub(crate) fn refresh_with(&self, extra: &[(&str, &str)]) -> Vec<Value> {
        let out = Command::new(env!("CARGO_BIN_EXE_ecr-refresh"))
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", self.dir.path())
            .env("KUBECONFIG", self.cp.admin_kubeconfig())
            .envs(self.ecr.client_env(REGION))
            .env("ECR_REFRESH_LOG_FORMAT", "json")
            .env("ECR_REFRESH_REGISTRIES", REGISTRY)
            .env("ECR_REFRESH_NAMESPACES", self.namespace)
            .env("ECR_REFRESH_SERVICE_ACCOUNTS", "default")
            .env("ECR_REFRESH_RENEW_BEFORE", "12h")
            .env(
                "ECR_REFRESH_TERMINATION_LOG",
                self.dir.path().join("termination-log"),
            )
            .envs(extra.iter().copied())
            .output()
            .expect("ecr-refresh runs");
        let (stdout, stderr) = texts(&out);
        assert_eq!(
            out.status.code(),
            Some(0),
            "ecr-refresh\nstdout:\n{stdout}\nstderr:\n{stderr}"
        );
        for password in self.ecr.passwords_issued() {
            assert!(
                !stdout.contains(&password) && !stderr.contains(&password),
                "a token reached the output:\n{stdout}{stderr}"
            );
        }
        stdout
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    pub(crate) fn secret(&self) -> Value {
        self.json(&["get", "secret", SECRET, "-n", self.namespace])
    }

    pub(crate) fn secret_password(&self) -> String {
        let secret = self.secret();
        let encoded = secret["data"][".dockerconfigjson"]
            .as_str()
            .unwrap_or_else(|| panic!("no .dockerconfigjson in {secret}"));
        let config: Value = serde_json::from_slice(
            &base64::engine::general_purpose::STANDARD
                .decode(encoded)
                .expect("base64"),
        )
        .expect("JSON");
        config["auths"][REGISTRY]["password"]
            .as_str()
            .unwrap_or_else(|| panic!("no entry for {REGISTRY} in {config}"))
            .to_owned()
    }

    /// Creates a pod on the node that pulls the image (imagePullPolicy Always), its pull
    /// Secret from the default ServiceAccount (the ServiceAccount admission plugin copies it).
    fn create_pod(&self, name: &str) {
        let pod = json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": self.namespace},
            "spec": {
                "nodeName": self.node().name,
                "hostNetwork": true,
                "automountServiceAccountToken": false,
                "restartPolicy": "Never",
                "terminationGracePeriodSeconds": 1,
                "containers": [{
                    "name": "app",
                    "image": self.image,
                    "imagePullPolicy": "Always",
                    "command": ["/bin/busybox", "sleep", "3600"],
                }],
            },
        });
        self.create(&pod);
    }

    /// `kubectl create` of an object.
    pub(crate) fn create(&self, object: &Value) {
        let mut child = self
            .cp
            .kubectl()
            .args(["create", "-f", "-"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("kubectl runs");
        use std::io::Write as _;
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(object.to_string().as_bytes())
            .expect("write the object");
        let out = child.wait_with_output().expect("kubectl create");
        assert!(
            out.status.success(),
            "kubectl create {} {}: {}",
            object["kind"],
            object["metadata"]["name"],
            texts(&out).1
        );
    }

    /// Waits until the pod runs or its pull fails.
    pub(crate) fn fate(&self, name: &str) -> Fate {
        let deadline = Instant::now() + POD_TIMEOUT;
        loop {
            let pod = self.json(&["get", "pod", name, "-n", self.namespace]);
            if pod["status"]["phase"] == "Running" {
                return Fate::Running;
            }
            let waiting = &pod["status"]["containerStatuses"][0]["state"]["waiting"];
            let reason = waiting["reason"].as_str().unwrap_or_default();
            if matches!(reason, "ErrImagePull" | "ImagePullBackOff") {
                return Fate::PullFailed(
                    reason.to_owned(),
                    waiting["message"].as_str().unwrap_or_default().to_owned(),
                );
            }
            assert!(
                Instant::now() < deadline,
                "pod {name} neither ran nor failed its pull within {POD_TIMEOUT:?}: {}\n\
                 the kubelet's last errors:\n{}\ncontainerd's:\n{}",
                pod["status"],
                node::errors(&self.node().kubelet_log(), 8),
                node::errors(&self.node().containerd_log(), 8)
            );
            thread::sleep(Duration::from_millis(200));
        }
    }

    pub(crate) fn delete_pod(&self, name: &str) {
        self.kubectl(&["delete", "pod", name, "-n", self.namespace, "--wait=false"]);
    }
}

pub(crate) fn texts(out: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

pub(crate) fn outcome(lines: &[Value], namespace: &str) -> String {
    lines
        .iter()
        .find(|l| l["namespace"] == namespace && l.get("outcome").is_some())
        .map(|l| l["outcome"].as_str().unwrap_or_default().to_owned())
        .unwrap_or_else(|| panic!("no outcome for {namespace} in {lines:?}"))
}

/// The app's image (busybox sleeping, named `image`) and the sandbox's.
fn image_layouts(dir: &Path, image: &str) -> (std::path::PathBuf, std::path::PathBuf) {
    let busybox = Path::new(BUSYBOX);
    let (app, _) = oci_layout(
        &dir.join("app"),
        &[("bin/busybox", busybox)],
        &["/bin/busybox", "sleep", "3600"],
        "1",
        image,
    );
    // The sandbox: sleeps for good (as PID 1 it ignores SIGTERM; containerd kills it).
    let (_, pause) = oci_layout(
        &dir.join("pause"),
        &[("bin/busybox", busybox)],
        &["/bin/busybox", "sleep", "2147483647"],
        "1",
        node::PAUSE_IMAGE,
    );
    (app, pause)
}

#[test]
#[ignore = "needs root, KUBEBUILDER_ASSETS, ECR_REFRESH_NODE_ASSETS, runc, busybox-static, docker-registry and skopeo (bash .ci/test)"]
fn a_kubelet_pulls_with_the_secret_before_during_and_after_a_refresh() {
    let started = Instant::now();
    let first = "first-token-from-ecr";
    let (c, registry) = Cluster::start(NAMESPACE, "app", first);
    let cgroup_root = c.node().cgroup_root().to_owned();
    let node_dir = c.node().dir.clone();
    c.kubectl(&["create", "serviceaccount", "default", "-n", NAMESPACE]);

    // 1. ecr-refresh writes the Secret and lists it on the default ServiceAccount.
    let run = c.refresh();
    assert_eq!(outcome(&run, NAMESPACE), "created");
    let uid = c.secret()["metadata"]["uid"]
        .as_str()
        .expect("a uid")
        .to_owned();
    let sa = c.json(&["get", "serviceaccount", "default", "-n", NAMESPACE]);
    assert_eq!(sa["imagePullSecrets"], json!([{"name": SECRET}]), "{sa}");
    // The runtime half alone: containerd, through the CRI, with the Secret's credentials.
    let creds = format!("AWS:{}", c.secret_password());
    let pulled = c
        .node()
        .crictl()
        .args(["pull", "--creds", &creds, &c.image])
        .output()
        .expect("crictl runs");
    assert!(
        pulled.status.success(),
        "crictl pull with the Secret's credentials: {}",
        texts(&pulled).1
    );
    let refused = c
        .node()
        .crictl()
        .args(["pull", "--creds", "AWS:not-the-token", &c.image])
        .output()
        .expect("crictl runs");
    assert!(
        !refused.status.success(),
        "the registry took a wrong password: it does not check"
    );
    c.node()
        .crictl()
        .args(["rmi", &c.image])
        .output()
        .expect("crictl runs");
    // And the kubelet, with the pod's pull Secret from the ServiceAccount.
    c.create_pod("before");
    let pod = c.json(&["get", "pod", "before", "-n", NAMESPACE]);
    assert_eq!(
        pod["spec"]["imagePullSecrets"],
        json!([{"name": SECRET}]),
        "admission copies the ServiceAccount's pull Secret into the pod"
    );
    let fate = c.fate("before");
    assert!(matches!(fate, Fate::Running), "step 1: {fate:?}");
    c.delete_pod("before");
    eprintln!("kubelet_pull: step 1 done at {:.1?}", started.elapsed());

    // 2. The registry's password rotates: the Secret's token no longer pulls.
    let second = "second-token-from-ecr";
    registry.set_password(second);
    c.ecr.set_password(REGION, second);
    c.create_pod("rotated");
    match c.fate("rotated") {
        Fate::PullFailed(reason, message) => {
            assert_eq!(reason, "ErrImagePull", "{message}");
            assert!(
                message.contains("401") || message.to_lowercase().contains("unauthorized"),
                "the pull failed for another reason than the password: {message}"
            );
        }
        Fate::Running => panic!("step 2: the pod ran with a password the registry no longer takes"),
    }
    c.delete_pod("rotated");
    eprintln!("kubelet_pull: step 2 done at {:.1?}", started.elapsed());

    // 3. ecr-refresh writes the new token in place; the next pod runs.
    let run = c.refresh();
    assert_eq!(outcome(&run, NAMESPACE), "updated");
    assert_eq!(
        c.secret()["metadata"]["uid"],
        uid.as_str(),
        "the Secret kept its uid"
    );
    assert_eq!(c.secret_password(), second);
    c.create_pod("after");
    let fate = c.fate("after");
    assert!(matches!(fate, Fate::Running), "step 3: {fate:?}");
    c.delete_pod("after");
    eprintln!("kubelet_pull: step 3 done at {:.1?}", started.elapsed());

    // 4. Pods start one after another while ecr-refresh rewrites the Secret, again and
    //    again; none may fail its pull.
    let c = Arc::new(c);
    let stop = Arc::new(AtomicBool::new(false));
    let looper = {
        let (c, stop) = (Arc::clone(&c), Arc::clone(&stop));
        thread::spawn(move || {
            let mut fates = Vec::new();
            let mut n = 0;
            while !stop.load(Ordering::SeqCst) || n < 6 {
                let name = format!("loop-{n}");
                c.create_pod(&name);
                let fate = c.fate(&name);
                c.delete_pod(&name);
                fates.push((name, fate));
                n += 1;
            }
            fates
        })
    };
    let mut versions = vec![c.secret()["metadata"]["resourceVersion"].clone()];
    for i in 1..=3 {
        // The registry takes one password at a time, so ECR hands out the same token; a new
        // expiry each run makes each write a real change (a no-op apply writes nothing).
        c.ecr
            .set_expires_at(SystemTime::now() + Duration::from_secs(12 * 3600 - 60 * i));
        let run = c.refresh();
        assert_eq!(outcome(&run, NAMESPACE), "updated");
        let secret = c.secret();
        assert_eq!(
            secret["metadata"]["uid"],
            uid.as_str(),
            "the Secret kept its uid"
        );
        versions.push(secret["metadata"]["resourceVersion"].clone());
        thread::sleep(Duration::from_millis(500));
    }
    stop.store(true, Ordering::SeqCst);
    let fates = looper.join().expect("the pod loop");
    let failed: Vec<_> = fates
        .iter()
        .filter(|(_, f)| !matches!(f, Fate::Running))
        .collect();
    assert!(
        failed.is_empty(),
        "step 4: pods failed their pull: {failed:?}"
    );
    let distinct: std::collections::BTreeSet<String> =
        versions.iter().map(Value::to_string).collect();
    assert_eq!(
        distinct.len(),
        versions.len(),
        "each refresh wrote the Secret (a new resourceVersion): {versions:?}"
    );
    eprintln!(
        "kubelet_pull: step 4 done at {:.1?}: {} pods ran through 3 refreshes",
        started.elapsed(),
        fates.len()
    );

    // Nothing is left behind: no mount under the node's directory, no cgroup, no process.
    let mut c = Arc::into_inner(c).expect("the loop is over");
    let left = c.node.take().expect("the node").stop();
    assert!(left.is_empty(), "the node left {left:?}");
    assert!(Node::mounts(&node_dir).is_empty());
    assert!(Node::cgroups(&cgroup_root).is_empty());
    eprintln!("kubelet_pull: done in {:.1?}", started.elapsed());
}

#[test]
fn without_the_node_assets_the_failure_names_the_variable_and_the_build_command() {
    let kube = tempfile::tempdir().expect("a temporary directory");
    let unset = NodeAssets::check(None, kube.path()).unwrap_err();
    assert!(
        unset.contains("ECR_REFRESH_NODE_ASSETS is not set"),
        "{unset}"
    );
    assert!(unset.contains(".ci/go-tool containerd"), "{unset}");
    let empty = tempfile::tempdir().expect("a temporary directory");
    let missing =
        NodeAssets::check(Some(empty.path().as_os_str().to_owned()), kube.path()).unwrap_err();
    assert!(missing.contains("has no containerd"), "{missing}");
    assert!(missing.contains(".ci/go-tool containerd"), "{missing}");
}
