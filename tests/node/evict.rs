//! ECR_REFRESH_EVICT_STUCK_PODS on a real node, a pod listing the Secret recovering on its
//! own (timed), and the kubelet's record of which Secret pulled an image (KEP-2535) measured,
//! in place against delete-and-create.
//!
//! One node (tests/node/kubelet_pull/node.rs: a kubelet 1.37 and containerd) joins a control
//! plane with the ServiceAccount admission plugin and kube-controller-manager's replicaset
//! and deployment controllers. No scheduler: every pod template names the node.
//! The registry is Debian's docker-registry under an ECR host name (as in kubelet_pull.rs),
//! whose own access log counts what the node asks of it.
//!
//! Every wait is for a state, bounded: the image pull back-off doubles up to 5 minutes, so
//! nothing here waits for time to pass.

use crate::common;
use crate::kubelet_pull::node::{self, BUSYBOX, Node, NodeAssets, oci_layout};

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use common::registry::{Request, TlsRegistry};
use control_plane::ControlPlane;
use fake_cluster::FakeEcr;
use serde_json::{Value, json};

const REGISTRY: &str = "123456789012.dkr.ecr.us-east-1.amazonaws.com";
const REGION: &str = "us-east-1";
const SECRET: &str = "aws-ecr-token";
/// Generous: the machine is shared, and a pull's back-off doubles from 10s.
const WAIT: Duration = Duration::from_secs(150);

struct Cluster {
    node: Node,
    cp: ControlPlane,
    ecr: FakeEcr,
    registry: TlsRegistry,
    dir: tempfile::TempDir,
}

/// What one ecr-refresh run said.
struct Run {
    code: i32,
    lines: Vec<Value>,
    stdout: String,
    termination: Value,
}

impl Run {
    /// The line about pod `name` (its name starts with it), if any.
    fn pod(&self, prefix: &str) -> Option<&Value> {
        self.lines.iter().find(|l| {
            l["pod"]
                .as_str()
                .is_some_and(|p| p == prefix || p.starts_with(&format!("{prefix}-")))
        })
    }

    fn summary(&self) -> &Value {
        self.lines
            .iter()
            .rev()
            .find(|l| l.get("namespaces").is_some() && l.get("elapsed_ms").is_some())
            .unwrap_or_else(|| panic!("no summary line:\n{}", self.stdout))
    }
}

impl Cluster {
    fn kubectl(&self, args: &[&str]) -> String {
        self.cp.kubectl_run(args)
    }

    fn json(&self, args: &[&str]) -> Value {
        let text = self.kubectl(&[args, &["-o", "json"]].concat());
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("kubectl {args:?}: {e}: {text}"))
    }

    fn create(&self, object: &Value) {
        let mut child = self
            .cp
            .kubectl()
            .args(["create", "-f", "-"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
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
            "kubectl create {}: {}",
            object["metadata"]["name"],
            texts(&out).1
        );
    }

    /// ecr-refresh once in `namespace`, as the CronJob runs it with the service-accounts
    /// component; RENEW_BEFORE=12h makes every run write. `extra`: more variables.
    fn refresh(&self, namespace: &str, extra: &[(&str, &str)]) -> Run {
        let termination = self.dir.path().join("termination-log");
        let _ = std::fs::remove_file(&termination);
        let out = Command::new(env!("CARGO_BIN_EXE_ecr-refresh"))
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", self.dir.path())
            .env("KUBECONFIG", self.cp.admin_kubeconfig())
            .envs(self.ecr.client_env(REGION))
            .env("ECR_REFRESH_LOG_FORMAT", "json")
            .env("ECR_REFRESH_REGISTRIES", REGISTRY)
            .env("ECR_REFRESH_NAMESPACES", namespace)
            .env("ECR_REFRESH_SERVICE_ACCOUNTS", "default")
            .env("ECR_REFRESH_RENEW_BEFORE", "12h")
            .env("ECR_REFRESH_TERMINATION_LOG", &termination)
            .envs(extra.iter().copied())
            .output()
            .expect("ecr-refresh runs");
        let (stdout, stderr) = texts(&out);
        for password in self.ecr.passwords_issued() {
            assert!(
                !stdout.contains(&password) && !stderr.contains(&password),
                "a token reached the output:\n{stdout}{stderr}"
            );
        }
        let lines = stdout
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect();
        let termination = std::fs::read_to_string(&termination)
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or(Value::Null);
        Run {
            code: out.status.code().unwrap_or(-1),
            lines,
            stdout: format!("{stdout}\n{stderr}"),
            termination,
        }
    }

    /// A pod spec on the node: host network (no CNI), no token, image `image`.
    fn spec(&self, image: &str, policy: &str, command: &[&str]) -> Value {
        json!({
            "nodeName": self.node.name,
            "hostNetwork": true,
            "automountServiceAccountToken": false,
            "terminationGracePeriodSeconds": 1,
            "containers": [{
                "name": "app",
                "image": format!("{REGISTRY}/{image}"),
                "imagePullPolicy": policy,
                "command": command,
            }],
        })
    }

    fn deployment(&self, namespace: &str, name: &str, image: &str, command: &[&str]) {
        self.create(&json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": {"app": name}},
                "template": {
                    "metadata": {"labels": {"app": name}},
                    "spec": self.spec(image, "Always", command),
                },
            },
        }));
    }

    /// [`Self::deployment`], its pod template listing the Secret itself.
    fn deployment_listing_the_secret(&self, namespace: &str, name: &str, image: &str) {
        let mut spec = self.spec(image, "Always", &["/bin/busybox", "sleep", "3600"]);
        spec["imagePullSecrets"] = json!([{"name": SECRET}]);
        self.create(&json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": {"app": name}},
                "template": {"metadata": {"labels": {"app": name}}, "spec": spec},
            },
        }));
    }

    fn pod(&self, namespace: &str, name: &str, image: &str, policy: &str) {
        let mut spec = self.spec(image, policy, &["/bin/busybox", "sleep", "3600"]);
        spec["restartPolicy"] = json!("Never");
        self.create(&json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace},
            "spec": spec,
        }));
    }

    /// The pods of Deployment (label `app`) `app`, not being deleted.
    fn pods_of(&self, namespace: &str, app: &str) -> Vec<Value> {
        let list = self.json(&["get", "pods", "-n", namespace, "-l", &format!("app={app}")]);
        list["items"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
            .collect()
    }

    fn get_pod(&self, namespace: &str, name: &str) -> Option<Value> {
        let text = self.kubectl(&[
            "get",
            "pod",
            name,
            "-n",
            namespace,
            "-o",
            "json",
            "--ignore-not-found",
        ]);
        (!text.trim().is_empty()).then(|| serde_json::from_str(&text).expect("JSON"))
    }

    /// Polls `check` until it gives Some, for at most [`WAIT`]; then panics with `what`, the
    /// last thing seen, and the kubelet's last errors.
    fn until<T>(&self, what: &str, mut check: impl FnMut() -> Result<T, String>) -> T {
        let deadline = Instant::now() + WAIT;
        loop {
            let last = match check() {
                Ok(v) => return v,
                Err(last) => last,
            };
            assert!(
                Instant::now() < deadline,
                "{what}: not within {WAIT:?}; last seen: {last}\nthe kubelet's last errors:\n{}\n\
                 kube-controller-manager's log: {}",
                node::errors(&self.node.kubelet_log(), 8),
                self.cp.dir().join("kube-controller-manager.log").display()
            );
            thread::sleep(Duration::from_millis(300));
        }
    }

    /// The one pod of Deployment `app`, once its container waits on a failed pull whose
    /// message holds `says`.
    fn stuck_pod_of(&self, namespace: &str, app: &str, says: Says) -> Value {
        self.until(&format!("Deployment {app}'s pod stuck on a pull"), || {
            let pods = self.pods_of(namespace, app);
            match pods.as_slice() {
                [pod] if pull_failed(pod, says) => Ok(pod.clone()),
                _ => Err(statuses(&pods)),
            }
        })
    }

    fn running_pod_of(&self, namespace: &str, app: &str) -> Value {
        self.until(&format!("Deployment {app}'s pod running"), || {
            let pods = self.pods_of(namespace, app);
            match pods.as_slice() {
                [pod] if pod["status"]["phase"] == "Running" && waiting(pod).is_null() => {
                    Ok(pod.clone())
                }
                _ => Err(statuses(&pods)),
            }
        })
    }

    /// How many times the kubelet reported a failed pull of pod `uid` (its Events' counts).
    fn failed_pulls(&self, namespace: &str, uid: &str) -> u64 {
        let events = self.json(&[
            "get",
            "events",
            "-n",
            namespace,
            "--field-selector",
            &format!("involvedObject.uid={uid},reason=Failed"),
        ]);
        events["items"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|e| {
                e["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("Failed to pull image"))
            })
            .map(|e| e["count"].as_u64().unwrap_or(1))
            .sum()
    }

    /// The registry's requests from the node (containerd) so far.
    fn node_requests(&self) -> Vec<Request> {
        self.registry
            .requests()
            .into_iter()
            .filter(|r| r.user_agent.contains("containerd"))
            .collect()
    }
}

fn texts(out: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn waiting(pod: &Value) -> &Value {
    &pod["status"]["containerStatuses"][0]["state"]["waiting"]
}

/// What a failed pull's message says: [`NO_CREDENTIALS`] or [`NOT_FOUND`].
type Says = fn(&str) -> bool;

/// The registry wanted credentials: none were sent (containerd: "authorization failed: no
/// basic auth credentials"), or a password it no longer takes ("401 Unauthorized").
const NO_CREDENTIALS: Says =
    |m| m.contains("no basic auth credentials") || m.contains("401") || m.contains("Unauthorized");

/// The tag is not there ("...: not found").
const NOT_FOUND: Says = |m| m.contains("not found");

/// Whether the pod's container waits on a failed pull whose message `says` so.
fn pull_failed(pod: &Value, says: Says) -> bool {
    let w = waiting(pod);
    matches!(
        w["reason"].as_str(),
        Some("ErrImagePull" | "ImagePullBackOff")
    ) && w["message"].as_str().is_some_and(says)
}

fn statuses(pods: &[Value]) -> String {
    pods.iter()
        .map(|p| {
            format!(
                "{} {} {}",
                p["metadata"]["name"], p["status"]["phase"], p["status"]["containerStatuses"]
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

fn uid(object: &Value) -> String {
    object["metadata"]["uid"]
        .as_str()
        .expect("a uid")
        .to_owned()
}

fn name(object: &Value) -> String {
    object["metadata"]["name"]
        .as_str()
        .expect("a name")
        .to_owned()
}

/// The images: `app:1` and `kep:1` (a config of its own, so a digest of its own: pulled
/// for the first time by the measurement), and the sandbox.
fn images(dir: &Path) -> (std::path::PathBuf, std::path::PathBuf, std::path::PathBuf) {
    let busybox = Path::new(BUSYBOX);
    let (app, _) = oci_layout(
        &dir.join("app"),
        &[("bin/busybox", busybox)],
        &["/bin/busybox", "sleep", "3600"],
        "1",
        &format!("{REGISTRY}/app:1"),
    );
    let (kep, _) = oci_layout(
        &dir.join("kep"),
        &[("bin/busybox", busybox)],
        &["/bin/busybox", "sleep", "3601"],
        "1",
        &format!("{REGISTRY}/kep:1"),
    );
    let (_, pause) = oci_layout(
        &dir.join("pause"),
        &[("bin/busybox", busybox)],
        &["/bin/busybox", "sleep", "2147483647"],
        "1",
        node::PAUSE_IMAGE,
    );
    (app, kep, pause)
}

/// Requests by kind: (all, manifests, blobs, answered 401).
fn kinds(requests: &[Request]) -> (usize, usize, usize, usize) {
    (
        requests.len(),
        requests
            .iter()
            .filter(|r| r.path.contains("/manifests/"))
            .count(),
        requests
            .iter()
            .filter(|r| r.path.contains("/blobs/"))
            .count(),
        requests.iter().filter(|r| r.status == 401).count(),
    )
}

#[test]
#[ignore = "needs root, KUBEBUILDER_ASSETS, ECR_REFRESH_NODE_ASSETS, runc, busybox-static, docker-registry and skopeo (bash .ci/test)"]
fn stuck_pods_are_evicted_on_a_real_node_and_the_kubelet_trusts_a_secret_updated_in_place() {
    let started = Instant::now();
    let kube_assets = control_plane::assets();
    let assets = NodeAssets::find(&kube_assets);
    let dir = tempfile::tempdir().expect("a temporary directory");
    let (app_layout, kep_layout, pause_tar) = images(dir.path());
    let first = "first-token-from-ecr";
    let registry = TlsRegistry::on_loopback("AWS", first);
    registry.push(&app_layout, "1", "app", first);
    registry.push(&kep_layout, "1", "kep", first);

    let cp = ControlPlane::start_with_service_account_admission();
    // Deployments make ReplicaSets make pods.
    cp.start_controllers(&["deployment-controller", "replicaset-controller"]);
    let ecr = FakeEcr::start();
    ecr.set_password(REGION, first);
    let node = Node::start(assets, cp.admin_kubeconfig(), || cp.kubectl(), &pause_tar);
    node.route_registry(REGISTRY, &registry.host(), &registry.certificate);
    let c = Cluster {
        node,
        cp,
        ecr,
        registry,
        dir,
    };
    eprintln!("evict: node ready at {:.1?}", started.elapsed());
    let ns = "stuck";
    c.cp.create_namespace(ns);
    c.kubectl(&["create", "serviceaccount", "default", "-n", ns]);
    let sleep = ["/bin/busybox", "sleep", "3600"];

    // 1. Created before the Secret exists, so stuck: a Deployment, a bare pod, and a
    //    Deployment whose pods list the Secret themselves (`own`).
    c.deployment_listing_the_secret(ns, "own", "app:1");
    c.deployment(ns, "web", "app:1", &sleep);
    c.pod(ns, "bare", "app:1", "Always");
    let own = c.stuck_pod_of(ns, "own", NO_CREDENTIALS);
    let web = c.stuck_pod_of(ns, "web", NO_CREDENTIALS);
    c.until("the bare pod stuck on a pull", || {
        let pod = c.get_pod(ns, "bare").expect("the bare pod");
        pull_failed(&pod, NO_CREDENTIALS)
            .then_some(())
            .ok_or_else(|| pod["status"].to_string())
    });
    eprintln!("evict: step 1 (stuck) at {:.1?}", started.elapsed());

    // 2. A run without the option writes the Secret and lists it on the ServiceAccount; the
    //    kubelet reads only the pod's own list, so its next pull fails too.
    let run = c.refresh(ns, &[]);
    let written = Instant::now();
    assert_eq!(run.code, 0, "{}", run.stdout);
    assert!(
        run.pod("web").is_none(),
        "no option, no pod line: {}",
        run.stdout
    );
    // The pod that lists the Secret recovers on its own, without an eviction: the kubelet
    // reads a pod's pull Secrets at every sync, so its next retry (the image back-off: 10 s,
    // doubling to 300 s) pulls with the Secret just written. Written after the pod's first
    // failure, the retry is within 60 s.
    let recovered = c.running_pod_of(ns, "own");
    let after = written.elapsed();
    assert_eq!(
        uid(&recovered),
        uid(&own),
        "the same pod, not a replacement"
    );
    eprintln!("evict: a pod listing the Secret pulled {after:.1?} after the write");
    assert!(
        after <= Duration::from_secs(60),
        "a pod listing the Secret pulled {after:?} after the write, not within 60 s"
    );
    assert!(
        run.summary().get("pods_evicted").is_none(),
        "{}",
        run.stdout
    );
    let sa = c.json(&["get", "serviceaccount", "default", "-n", ns]);
    assert_eq!(sa["imagePullSecrets"], json!([{"name": SECRET}]), "{sa}");
    let pulls = c.failed_pulls(ns, &uid(&web));
    c.until("a pull of web's pod after the run", || {
        let now = c.failed_pulls(ns, &uid(&web));
        (now > pulls)
            .then_some(())
            .ok_or_else(|| format!("{now} failed pulls, {pulls} before the run"))
    });
    let still = c
        .get_pod(ns, &name(&web))
        .expect("web's pod is still there");
    assert!(pull_failed(&still, NO_CREDENTIALS), "{}", still["status"]);
    assert!(
        still["spec"]["imagePullSecrets"].is_null(),
        "the pod never gets the ServiceAccount's list: {}",
        still["spec"]
    );
    eprintln!("evict: step 2 (still stuck) at {:.1?}", started.elapsed());

    // 3. A dry run with the option: would-evict, and nothing is evicted.
    let run = c.refresh(
        ns,
        &[
            ("ECR_REFRESH_EVICT_STUCK_PODS", "true"),
            ("ECR_REFRESH_DRY_RUN", "true"),
        ],
    );
    assert_eq!(run.code, 0, "{}", run.stdout);
    let line = run
        .pod("web")
        .unwrap_or_else(|| panic!("no line for web:\n{}", run.stdout));
    assert_eq!(line["outcome"], "would-evict", "{line}");
    assert_eq!(
        line["owner"]
            .as_str()
            .map(|o| o.starts_with("ReplicaSet/web-")),
        Some(true),
        "{line}"
    );
    assert_eq!(run.summary()["pods_would_evict"], 1, "{}", run.stdout);
    assert_eq!(run.summary()["pods_evicted"], 0, "{}", run.stdout);
    assert!(
        c.get_pod(ns, &name(&web))
            .is_some_and(|p| uid(&p) == uid(&web))
    );

    // 4. A pod that pulled with the Secret, whose token then stops working (the registry's
    //    password rotates): its container exits, and its restart's pull fails. It lists the
    //    Secret (the ServiceAccount's list, copied in when it was created).
    c.deployment(ns, "held", "app:1", &["/bin/busybox", "sleep", "2"]);
    c.until("held's pod has run", || {
        let pods = c.pods_of(ns, "held");
        match pods.as_slice() {
            [pod]
                if pod["status"]["containerStatuses"][0]["restartCount"].as_u64() > Some(0)
                    || !pod["status"]["containerStatuses"][0]["lastState"]["terminated"]
                        .is_null()
                    || pod["status"]["containerStatuses"][0]["state"]["running"].is_object() =>
            {
                Ok(())
            }
            _ => Err(statuses(&pods)),
        }
    });
    let second = "second-token-from-ecr";
    c.registry.set_password(second);
    c.ecr.set_password(REGION, second);
    let held = c.until("held's pod restarting on a failed pull", || {
        let pods = c.pods_of(ns, "held");
        match pods.as_slice() {
            [pod] if pull_failed(pod, NO_CREDENTIALS) => Ok(pod.clone()),
            _ => Err(statuses(&pods)),
        }
    });
    assert_eq!(
        held["spec"]["imagePullSecrets"],
        json!([{"name": SECRET}]),
        "{}",
        held["spec"]
    );
    eprintln!("evict: step 4 (held) at {:.1?}", started.elapsed());

    // 5. The run with the option writes the new token, evicts web's pod, leaves the bare
    //    pod, and does not touch held's pod, which lists the Secret: it pulls with the new
    //    token at its next retry, the same pod.
    let run = c.refresh(ns, &[("ECR_REFRESH_EVICT_STUCK_PODS", "true")]);
    for line in run.lines.iter().filter(|l| l.get("pod").is_some()) {
        eprintln!(
            "evict:   {} {}: {}",
            line["pod"], line["outcome"], line["reason"]
        );
    }
    assert_eq!(run.code, 0, "left pods change no exit code: {}", run.stdout);
    let web_line = run
        .pod("web")
        .unwrap_or_else(|| panic!("no line for web:\n{}", run.stdout));
    assert_eq!(web_line["outcome"], "evicted", "{web_line}");
    assert_eq!(web_line["namespace"], ns);
    let bare_line = run
        .pod("bare")
        .unwrap_or_else(|| panic!("no line for bare:\n{}", run.stdout));
    assert_eq!(bare_line["outcome"], "left", "{bare_line}");
    assert!(
        bare_line["reason"]
            .as_str()
            .is_some_and(|r| r.contains("bare pod")),
        "{bare_line}"
    );
    assert!(
        run.pod("held").is_none(),
        "a pod listing the Secret is not ours to evict: {}",
        run.stdout
    );
    c.until("held's pod pulling with the new token", || {
        let pods = c.pods_of(ns, "held");
        match pods.as_slice() {
            [pod]
                if uid(pod) == uid(&held)
                    && (pod["status"]["containerStatuses"][0]["state"]["running"].is_object()
                        || waiting(pod)["reason"] == "CrashLoopBackOff") =>
            {
                Ok(())
            }
            _ => Err(statuses(&pods)),
        }
    });
    let summary = run.summary();
    assert_eq!(summary["pods_evicted"], 1, "{}", run.stdout);
    assert_eq!(summary["pods_left"], 1, "{}", run.stdout);
    assert_eq!(run.termination["pods"]["evicted"], 1, "{}", run.termination);
    assert_eq!(run.termination["pods"]["left"], 1, "{}", run.termination);
    assert!(c.get_pod(ns, "bare").is_some(), "the bare pod is left");
    // The replacement carries the Secret (from the ServiceAccount) and runs.
    let replacement = c.running_pod_of(ns, "web");
    assert_ne!(uid(&replacement), uid(&web), "a new pod");
    assert_eq!(
        replacement["spec"]["imagePullSecrets"],
        json!([{"name": SECRET}]),
        "{}",
        replacement["spec"]
    );
    eprintln!(
        "evict: step 5 (evicted, replacement running) at {:.1?}",
        started.elapsed()
    );

    // 6. A pod that fails on a missing tag, with the Secret: left alone, no line.
    c.deployment(ns, "typo", "app:missing", &sleep);
    let typo = c.stuck_pod_of(ns, "typo", NOT_FOUND);
    let run = c.refresh(ns, &[("ECR_REFRESH_EVICT_STUCK_PODS", "true")]);
    assert_eq!(run.code, 0, "{}", run.stdout);
    assert!(
        run.pod("typo").is_none(),
        "a missing tag is not ours: {}",
        run.stdout
    );
    assert!(
        c.get_pod(ns, &name(&typo))
            .is_some_and(|p| uid(&p) == uid(&typo)),
        "the missing tag's pod is left"
    );
    eprintln!(
        "evict: step 6 (missing tag left) at {:.1?}",
        started.elapsed()
    );

    // 7. KEP-2535 on the same node, kubelet 1.37's defaults (feature gate
    //    KubeletEnsureSecretPulledImages on, imagePullCredentialsVerificationPolicy
    //    NeverVerifyPreloadedImages): an image a pod pulled with a Secret is used without
    //    asking the registry by a pod whose Secret has the same namespace, name and uid, or
    //    the same credentials (pkg/kubelet/images/pullmanager MustAttemptImagePull).
    let kep = "kep";
    c.cp.create_namespace(kep);
    c.kubectl(&["create", "serviceaccount", "default", "-n", kep]);
    let run = c.refresh(kep, &[]);
    assert_eq!(run.code, 0, "{}", run.stdout);
    let secret_uid = uid(&c.json(&["get", "secret", SECRET, "-n", kep]));
    let wait_running = |pod: &str| {
        c.until(&format!("pod {pod} running"), || {
            let p = c.get_pod(kep, pod).expect("the pod");
            (p["status"]["phase"] == "Running")
                .then_some(())
                .ok_or_else(|| p["status"].to_string())
        });
    };
    let mark = c.node_requests().len();
    c.pod(kep, "a", "kep:1", "IfNotPresent");
    wait_running("a");
    let after_a = c.node_requests()[mark..].to_vec();

    // In place: a new token, the same Secret (same uid).
    let third = "third-token-from-ecr";
    c.registry.set_password(third);
    c.ecr.set_password(REGION, third);
    let run = c.refresh(kep, &[]);
    assert_eq!(run.code, 0, "{}", run.stdout);
    let secret = c.json(&["get", "secret", SECRET, "-n", kep]);
    assert_eq!(uid(&secret), secret_uid, "updated in place");
    let mark = c.node_requests().len();
    c.pod(kep, "b", "kep:1", "IfNotPresent");
    wait_running("b");
    let after_in_place = c.node_requests()[mark..].to_vec();

    // Delete and create, as the CronJob loops of other tools do: a new uid, a new token.
    let fourth = "fourth-token-from-ecr";
    c.registry.set_password(fourth);
    c.kubectl(&["delete", "secret", SECRET, "-n", kep]);
    c.kubectl(&[
        "create",
        "secret",
        "docker-registry",
        SECRET,
        "-n",
        kep,
        &format!("--docker-server={REGISTRY}"),
        "--docker-username=AWS",
        &format!("--docker-password={fourth}"),
    ]);
    let recreated = c.json(&["get", "secret", SECRET, "-n", kep]);
    assert_ne!(uid(&recreated), secret_uid, "a new Secret");
    let mark = c.node_requests().len();
    c.pod(kep, "c", "kep:1", "IfNotPresent");
    wait_running("c");
    let after_recreate = c.node_requests()[mark..].to_vec();

    let table = [
        ("pod A, first pull with the Secret", kinds(&after_a)),
        (
            "pod B, after the in-place refresh (same uid, new token)",
            kinds(&after_in_place),
        ),
        (
            "pod C, after delete-and-create (new uid, new token)",
            kinds(&after_recreate),
        ),
    ];
    eprintln!(
        "evict: KEP-2535, the registry's requests from the node (all, manifests, blobs, 401):"
    );
    for (step, (all, manifests, blobs, unauthorized)) in &table {
        eprintln!(
            "evict:   {step}: {all} ({manifests} manifests, {blobs} blobs, {unauthorized} 401)"
        );
    }
    assert!(!after_a.is_empty(), "pod A pulled: the log counts requests");
    assert!(
        after_in_place.is_empty(),
        "after the in-place refresh the kubelet asked the registry: {after_in_place:?}"
    );
    assert!(
        !after_recreate.is_empty(),
        "after delete-and-create the kubelet did not ask the registry; \
         the in-place advantage is not measured"
    );
    eprintln!("evict: done in {:.1?}", started.elapsed());
}
