//! The harness against the real kube-apiserver and etcd: what later tests build on.

// A test's unwrap is its assertion, in the helpers as in the #[test]s (clippy.toml allows
// the latter; the product refuses unwrap_used).
#![allow(clippy::unwrap_used)]

use std::io::{BufRead as _, BufReader};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use control_plane::{ControlPlane, ECR_REFRESH_USER};
use serde_json::Value;

/// The Kubernetes releases `.ci/kube-binaries` pins, one per `.ci/kube/<minor>/go.mod`.
fn pinned_versions() -> Vec<String> {
    let modules = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.ci/kube");
    let mut versions = Vec::new();
    for entry in std::fs::read_dir(&modules).expect(".ci/kube is readable") {
        let go_mod = entry.unwrap().path().join("go.mod");
        let Ok(text) = std::fs::read_to_string(&go_mod) else {
            continue;
        };
        versions.extend(
            text.lines()
                .filter_map(|l| l.trim().strip_prefix("require k8s.io/kubernetes "))
                .map(|v| v.trim().to_owned()),
        );
    }
    assert!(
        !versions.is_empty(),
        "no pinned k8s.io/kubernetes in {}",
        modules.display()
    );
    versions
}

fn json(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

/// `kubectl auth whoami` (a SelfSubjectReview) with `kubeconfig`: the user's name and groups.
fn whoami(cp: &ControlPlane, kubeconfig: &Path) -> (String, Vec<String>) {
    let output = cp
        .kubectl_as(kubeconfig)
        .args(["auth", "whoami", "-o", "json"])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "whoami: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let review = json(&String::from_utf8_lossy(&output.stdout));
    let user = &review["status"]["userInfo"];
    let groups = user["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g.as_str().unwrap().to_owned())
        .collect();
    (user["username"].as_str().unwrap().to_owned(), groups)
}

/// Dead or a zombie waiting for a reaper that may never come (PID 1 in a container).
fn gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat[stat.rfind(')').unwrap() + 1..]
            .trim_start()
            .starts_with('Z'),
    }
}

fn wait_gone(pid: u32) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if gone(pid) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

fn port_of(url: &str) -> u16 {
    url.rsplit(':').next().unwrap().parse().unwrap()
}

#[test]
#[ignore = "needs KUBEBUILDER_ASSETS (bash .ci/test)"]
fn the_server_answers_with_the_pinned_version_of_its_binary() {
    let cp = ControlPlane::shared();
    let version = cp.version();
    println!("real kube-apiserver: {version} at {}", cp.server_url());
    let binary = Command::new(cp.assets().join("kube-apiserver"))
        .arg("--version")
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&binary.stdout).trim(),
        format!("Kubernetes {version}")
    );
    let pinned = pinned_versions();
    assert!(
        pinned.iter().any(|p| p == version),
        "the server says {version}; .ci/kube pins {pinned:?}"
    );
    let etcd = Command::new(cp.assets().join("etcd"))
        .arg("--version")
        .output()
        .unwrap();
    println!(
        "real etcd: {}",
        String::from_utf8_lossy(&etcd.stdout)
            .lines()
            .next()
            .unwrap_or("")
    );
}

#[test]
#[ignore = "needs KUBEBUILDER_ASSETS (bash .ci/test)"]
fn the_admin_creates_a_namespace_and_reads_metrics() {
    let cp = ControlPlane::shared();
    let (user, groups) = whoami(cp, cp.admin_kubeconfig());
    assert_eq!(user, control_plane::ADMIN_USER);
    assert!(groups.contains(&"system:masters".to_owned()), "{groups:?}");
    cp.create_namespace("smoke-admin");
    let namespace = json(&cp.kubectl_run(&["get", "namespace", "smoke-admin", "-o", "json"]));
    assert_eq!(namespace["status"]["phase"], "Active");
    assert!(
        cp.metrics().contains("apiserver_request_total{"),
        "/metrics has no apiserver_request_total"
    );
}

#[test]
#[ignore = "needs KUBEBUILDER_ASSETS (bash .ci/test)"]
fn a_token_request_token_is_the_service_account_and_rbac_refuses_secrets_until_a_role_is_bound() {
    let cp = ControlPlane::shared();
    let namespace = "smoke-token";
    cp.create_namespace(namespace);
    let kubeconfig = cp.kubeconfig_for_service_account(namespace, "renamed-refresher");

    let (user, groups) = whoami(cp, &kubeconfig);
    assert_eq!(user, "system:serviceaccount:smoke-token:renamed-refresher");
    for group in [
        "system:serviceaccounts",
        "system:serviceaccounts:smoke-token",
        "system:authenticated",
    ] {
        assert!(
            groups.contains(&group.to_owned()),
            "{group} not in {groups:?}"
        );
    }

    let refused = cp
        .kubectl_as(&kubeconfig)
        .args(["get", "secrets", "-n", namespace])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        !refused.status.success(),
        "listing Secrets was allowed without a Role"
    );
    assert!(
        stderr.contains("Forbidden")
            && stderr.contains(
                "User \"system:serviceaccount:smoke-token:renamed-refresher\" cannot list resource \"secrets\""
            ),
        "{stderr}"
    );

    cp.kubectl_run(&[
        "create",
        "role",
        "secret-reader",
        "--verb=list",
        "--resource=secrets",
        "-n",
        namespace,
    ]);
    cp.kubectl_run(&[
        "create",
        "rolebinding",
        "secret-reader",
        "--role=secret-reader",
        "--serviceaccount=smoke-token:renamed-refresher",
        "-n",
        namespace,
    ]);
    // The authorizer reads Roles from its informers: allowed within moments, not at once.
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let listed = cp
            .kubectl_as(&kubeconfig)
            .args(["get", "secrets", "-n", namespace])
            .output()
            .unwrap();
        if listed.status.success() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "still refused after the RoleBinding: {}",
            String::from_utf8_lossy(&listed.stderr)
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
#[ignore = "needs KUBEBUILDER_ASSETS (bash .ci/test)"]
fn the_static_ecr_refresh_user_has_the_service_account_name_and_groups() {
    let cp = ControlPlane::shared();
    let (user, groups) = whoami(cp, cp.ecr_refresh_kubeconfig());
    assert_eq!(user, ECR_REFRESH_USER);
    for group in [
        "system:serviceaccounts",
        "system:serviceaccounts:ecr-refresh",
        "system:authenticated",
    ] {
        assert!(
            groups.contains(&group.to_owned()),
            "{group} not in {groups:?}"
        );
    }
}

#[test]
#[ignore = "needs KUBEBUILDER_ASSETS (bash .ci/test)"]
fn a_deleted_namespace_stays_terminating_without_a_controller_manager() {
    let cp = ControlPlane::shared();
    let namespace = "smoke-terminating";
    cp.create_namespace(namespace);
    cp.kubectl_run(&[
        "create",
        "configmap",
        "left",
        "-n",
        namespace,
        "--from-literal=k=v",
    ]);
    cp.kubectl_run(&["delete", "namespace", namespace, "--wait=false"]);
    std::thread::sleep(Duration::from_secs(2));
    let phase = cp.kubectl_run(&[
        "get",
        "namespace",
        namespace,
        "-o",
        "jsonpath={.status.phase}",
    ]);
    assert_eq!(phase, "Terminating");
    // Nothing empties it, and NamespaceLifecycle admission refuses anything new in it.
    cp.kubectl_run(&["get", "configmap", "left", "-n", namespace]);
    let refused = cp
        .kubectl()
        .args(["create", "configmap", "new", "-n", namespace])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        !refused.status.success() && stderr.contains("because it is being terminated"),
        "{stderr}"
    );
}

#[test]
#[ignore = "needs KUBEBUILDER_ASSETS (bash .ci/test)"]
fn the_shared_control_plane_refuses_to_be_restarted() {
    let cp = ControlPlane::shared();
    let refused = std::panic::catch_unwind(|| cp.kill_apiserver()).unwrap_err();
    let message = refused
        .downcast_ref::<&str>()
        .map(|m| m.to_string())
        .or_else(|| refused.downcast_ref::<String>().cloned())
        .unwrap_or_default();
    assert!(message.contains("ControlPlane::start()"), "{message}");
    assert!(cp.apiserver_pid().is_some_and(|pid| !gone(pid)));
}

/// A group is its own server, and the same one to every test that names it.
#[test]
#[ignore = "needs KUBEBUILDER_ASSETS (bash .ci/test)"]
fn a_shared_group_is_one_control_plane_apart_from_the_binarys_shared_one() {
    let group = ControlPlane::shared_by("smoke-group");
    assert!(std::ptr::eq(group, ControlPlane::shared_by("smoke-group")));
    assert_ne!(group.port(), ControlPlane::shared().port());
    group.create_namespace("only-in-the-group");
    assert!(
        group
            .kubectl_run(&["get", "namespaces", "-o", "name"])
            .contains("namespace/only-in-the-group")
    );
    assert!(
        !ControlPlane::shared()
            .kubectl_run(&["get", "namespaces", "-o", "name"])
            .contains("namespace/only-in-the-group")
    );
}

#[test]
#[ignore = "needs KUBEBUILDER_ASSETS (bash .ci/test)"]
fn an_own_control_plane_restarts_with_its_data_and_leaves_nothing_when_dropped() {
    let started = Instant::now();
    let cp = ControlPlane::start();
    println!("one control plane started in {:.1?}", started.elapsed());
    let url = cp.server_url();
    cp.create_namespace("kept");
    cp.kubectl_run(&[
        "create",
        "configmap",
        "kept",
        "-n",
        "kept",
        "--from-literal=k=v1",
    ]);
    let read = |cp: &ControlPlane| {
        cp.kubectl_run(&[
            "get",
            "configmap",
            "kept",
            "-n",
            "kept",
            "-o",
            "jsonpath={.data.k}",
        ])
    };

    let killed = cp.apiserver_pid().unwrap();
    cp.kill_apiserver();
    assert!(gone(killed), "kube-apiserver {killed} outlived SIGKILL");
    assert!(
        cp.kubectl()
            .args(["get", "namespaces"])
            .output()
            .unwrap()
            .status
            .code()
            != Some(0)
    );
    let restarted = Instant::now();
    cp.start_apiserver();
    println!("kube-apiserver restarted in {:.1?}", restarted.elapsed());
    assert_eq!(cp.server_url(), url);
    assert_ne!(cp.apiserver_pid(), Some(killed));
    assert_eq!(read(&cp), "v1");

    let step = Instant::now();
    cp.restart_apiserver();
    println!(
        "kube-apiserver stopped (SIGTERM) and started in {:.1?}",
        step.elapsed()
    );
    assert_eq!(read(&cp), "v1");

    let step = Instant::now();
    cp.stop_etcd();
    cp.start_etcd();
    println!(
        "etcd stopped (SIGTERM) and started, kube-apiserver ready again, in {:.1?}",
        step.elapsed()
    );
    assert_eq!(read(&cp), "v1");
    let step = Instant::now();
    cp.kill_etcd();
    cp.start_etcd();
    println!(
        "etcd killed and started, kube-apiserver ready again, in {:.1?}",
        step.elapsed()
    );
    cp.kubectl_run(&["create", "configmap", "after", "-n", "kept"]);
    assert_eq!(read(&cp), "v1");

    cp.start_policy_status_controller();
    let pids = [
        cp.etcd_pid().unwrap(),
        cp.apiserver_pid().unwrap(),
        cp.policy_status_controller_pid().unwrap(),
    ];
    let ports = [port_of(&cp.etcd_url()), cp.port()];
    let dir = cp.dir().to_owned();
    let step = Instant::now();
    drop(cp);
    println!(
        "dropped in {:.1?}; the whole test took {:.1?}",
        step.elapsed(),
        started.elapsed()
    );
    for pid in pids {
        assert!(gone(pid), "process {pid} outlived its ControlPlane");
    }
    assert!(!dir.exists(), "{} outlived its ControlPlane", dir.display());
    for port in ports {
        TcpListener::bind(("127.0.0.1", port))
            .unwrap_or_else(|e| panic!("port {port} still taken: {e}"));
    }
}

/// The first line of the `control-plane` binary: its daemons' pids and its directory.
fn holder_line(line: &str) -> (u32, u32, PathBuf) {
    let field = |name: &str| {
        line.split_whitespace()
            .find_map(|f| f.strip_prefix(name))
            .unwrap_or_else(|| panic!("no {name} in {line}"))
    };
    (
        field("etcd=").parse().unwrap(),
        field("apiserver=").parse().unwrap(),
        PathBuf::from(field("dir=")),
    )
}

#[test]
#[ignore = "needs KUBEBUILDER_ASSETS (bash .ci/test)"]
fn the_shared_control_plane_goes_when_its_process_exits_or_is_killed() {
    let holder = env!("CARGO_BIN_EXE_control-plane");

    // A normal exit: the exit handler stops both and removes the directory.
    let exited = Command::new(holder)
        .arg("exit")
        .stderr(Stdio::inherit())
        .output()
        .unwrap();
    assert!(exited.status.success());
    let (etcd, apiserver, dir) = holder_line(
        String::from_utf8_lossy(&exited.stdout)
            .lines()
            .next()
            .unwrap(),
    );
    assert!(
        wait_gone(etcd) && wait_gone(apiserver),
        "etcd {etcd} or kube-apiserver {apiserver} outlived exit"
    );
    assert!(!dir.exists(), "{} outlived exit", dir.display());

    // SIGKILL: no handler runs; the kernel kills both (PDEATHSIG), the next start sweeps.
    let mut held = Command::new(holder)
        .arg("hold")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(held.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let (etcd, apiserver, dir) = holder_line(&line);
    assert!(!gone(etcd) && !gone(apiserver) && dir.exists());
    held.kill().unwrap();
    held.wait().unwrap();
    assert!(
        wait_gone(etcd) && wait_gone(apiserver),
        "etcd {etcd} or kube-apiserver {apiserver} outlived SIGKILL"
    );
    assert!(
        dir.exists(),
        "nothing should have removed {} yet",
        dir.display()
    );
    control_plane::sweep_stale_directories();
    assert!(!dir.exists(), "the sweep left {}", dir.display());
}

#[tokio::test]
#[ignore = "needs KUBEBUILDER_ASSETS (bash .ci/test)"]
async fn kube_rs_takes_the_kubeconfigs() {
    use k8s_openapi::api::core::v1::{Namespace, Secret};
    async fn client(kubeconfig: &Path) -> kube::Client {
        let kubeconfig = kube::config::Kubeconfig::read_from(kubeconfig).unwrap();
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
            .await
            .unwrap();
        kube::Client::try_from(config).unwrap()
    }
    // shared() blocks for seconds on its first call: not on the runtime's thread.
    let cp = tokio::task::spawn_blocking(ControlPlane::shared)
        .await
        .unwrap();
    let admin = client(cp.admin_kubeconfig()).await;
    assert_eq!(
        admin.apiserver_version().await.unwrap().git_version,
        cp.version()
    );
    let default = kube::Api::<Namespace>::all(admin)
        .get("default")
        .await
        .unwrap();
    assert_eq!(default.metadata.name.as_deref(), Some("default"));

    let as_user = client(cp.ecr_refresh_kubeconfig()).await;
    let refused = kube::Api::<Secret>::namespaced(as_user, "default")
        .list(&Default::default())
        .await
        .unwrap_err();
    assert!(
        matches!(&refused, kube::Error::Api(status) if status.code == 403),
        "{refused:?}"
    );
}

/// The status controller of kube-controller-manager type-checks each policy: a good
/// expression gets no warning, one naming a field a Secret does not have gets one. Without
/// the controller `status` stays empty, and the first assertion fails.
#[test]
#[ignore = "needs KUBEBUILDER_ASSETS (bash .ci/test)"]
fn the_policy_status_controller_type_checks_admission_policies() {
    let cp = ControlPlane::shared();
    cp.start_policy_status_controller();
    let policy = |name: &str, expression: &str| {
        format!(
            "apiVersion: admissionregistration.k8s.io/v1\n\
             kind: ValidatingAdmissionPolicy\n\
             metadata: {{name: {name}}}\n\
             spec:\n  \
               matchConstraints:\n    \
                 resourceRules:\n    \
                 - {{apiGroups: [\"\"], apiVersions: [v1], operations: [CREATE], resources: [secrets]}}\n  \
               validations:\n  \
               - expression: \"{expression}\"\n"
        )
    };
    let file = cp.dir().join("smoke-policies.yaml");
    std::fs::write(
        &file,
        format!(
            "{}---\n{}",
            policy("smoke-typed-good", "object.type != 'Opaque'"),
            policy("smoke-typed-bad", "object.spec.replicas > 1")
        ),
    )
    .unwrap();
    cp.kubectl_run(&["apply", "-f", file.to_str().unwrap()]);

    let checked = |name: &str| -> Value {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let p =
                json(&cp.kubectl_run(&["get", "validatingadmissionpolicy", name, "-o", "json"]));
            if p["status"]["observedGeneration"] == p["metadata"]["generation"] {
                return p["status"]["typeChecking"].clone();
            }
            assert!(
                Instant::now() < deadline,
                "{name} was not type-checked within 60 s: {}",
                p["status"]
            );
            std::thread::sleep(Duration::from_millis(250));
        }
    };
    let good = checked("smoke-typed-good");
    assert!(
        good["expressionWarnings"]
            .as_array()
            .is_none_or(Vec::is_empty),
        "{good}"
    );
    let bad = checked("smoke-typed-bad");
    let warnings = bad["expressionWarnings"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(warnings.len(), 1, "{bad}");
    println!(
        "the real type checker's warning: {}",
        warnings[0]["warning"]
    );
    cp.kubectl_run(&[
        "delete",
        "validatingadmissionpolicy",
        "smoke-typed-good",
        "smoke-typed-bad",
    ]);
}

#[test]
#[ignore = "needs KUBEBUILDER_ASSETS (bash .ci/test)"]
fn two_control_planes_run_side_by_side_and_an_audit_log_names_who_sent_what() {
    let started = |audit_log| {
        std::thread::spawn(move || {
            ControlPlane::start_with_options(control_plane::Options {
                assets: None,
                audit_log,
            })
        })
    };
    let (a, b) = (started(true), started(false));
    let (a, b) = (a.join().unwrap(), b.join().unwrap());
    assert_ne!(a.server_url(), b.server_url());
    a.create_namespace("only-in-a");
    let namespace_of = |cp: &ControlPlane| {
        cp.kubectl_run(&[
            "get",
            "namespace",
            "only-in-a",
            "--ignore-not-found",
            "-o",
            "name",
        ])
    };
    assert_eq!(namespace_of(&a).trim(), "namespace/only-in-a");
    assert_eq!(namespace_of(&b).trim(), "", "b is a cluster of its own");

    let created: Vec<Value> = a
        .audit_events()
        .into_iter()
        .filter(|e| e["verb"] == "create" && e["objectRef"]["name"] == "only-in-a")
        .collect();
    assert_eq!(created.len(), 1, "{created:?}");
    assert_eq!(created[0]["user"]["username"], control_plane::ADMIN_USER);
    assert_eq!(created[0]["objectRef"]["resource"], "namespaces");
    assert_eq!(created[0]["responseStatus"]["code"], 201);
    assert_eq!(created[0]["stage"], "ResponseComplete");
}
