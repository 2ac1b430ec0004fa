//! Self-hosting from ECR (docs/src/install/self-hosting.md): where ECR is the only registry,
//! ecr-refresh's own pod pulls its image with the Secret the runs write in its namespace. The
//! bootstrap is one run of the binary from the operator's machine, with ECR_REFRESH_INSTALL
//! naming the install's ServiceAccount, so the CronJob's runs take the Secret as their own.
//!
//! On the node of kubelet_pull.rs: the image is pushed under ecr-refresh's repository path,
//! and each pod is the chart's rendered pod template (with the value `imagePullSecrets`
//! listing the Secret, and imagePullPolicy Always), placed on the node. It can't pull before
//! the bootstrap, does after it, and again after a refresh the registry's password rotated
//! for.

use crate::common;
use crate::kubelet_pull::{Cluster, Fate, REGION, REGISTRY, SECRET, outcome, texts};

use std::process::Command;
use std::time::Instant;

use serde_json::{Value, json};

/// The install: its namespace and ServiceAccount, the chart's defaults.
const NAMESPACE: &str = "ecr-refresh";
const SERVICE_ACCOUNT: &str = "ecr-refresh";
const INSTALL: (&str, &str) = ("ECR_REFRESH_INSTALL", "ecr-refresh/ecr-refresh");
/// ecr-refresh's repository path, as the book's push names it.
const REPOSITORY: &str = "ecr-refresh/ecr-refresh";

/// The pod template of the chart's CronJob, rendered for an image at `REGISTRY/REPOSITORY:1`,
/// pulled Always, with the self-hosting value.
fn chart_pod_template() -> Value {
    let helm_home = tempfile::tempdir().expect("a temporary directory");
    let chart = concat!(env!("CARGO_MANIFEST_DIR"), "/charts/ecr-refresh");
    let out = Command::new(common::helm::helm_binary())
        .env("HELM_CACHE_HOME", helm_home.path().join("cache"))
        .env("HELM_CONFIG_HOME", helm_home.path().join("config"))
        .env("HELM_DATA_HOME", helm_home.path().join("data"))
        .env("KUBECONFIG", helm_home.path().join("no-kubeconfig"))
        .args(["template", "ecr-refresh", chart, "--namespace", NAMESPACE])
        .args([
            "--set",
            &format!("image.repository={REGISTRY}/{REPOSITORY}"),
        ])
        .args([
            "--set-string",
            "image.tag=1",
            "--set",
            "image.pullPolicy=Always",
        ])
        .args(["--set", &format!("imagePullSecrets[0].name={SECRET}")])
        .output()
        .expect("helm runs");
    let (stdout, stderr) = texts(&out);
    assert!(out.status.success(), "helm template: {stderr}");
    let cronjob = common::manifests::documents(&stdout)
        .into_iter()
        .find(|d| d["kind"] == "CronJob")
        .expect("the chart's CronJob");
    cronjob["spec"]["jobTemplate"]["spec"]["template"].clone()
}

#[test]
#[ignore = "needs root, KUBEBUILDER_ASSETS, ECR_REFRESH_NODE_ASSETS, runc, busybox-static, docker-registry, skopeo and helm (bash .ci/test)"]
fn ecr_refreshs_own_pod_pulls_its_image_with_the_secret_the_bootstrap_wrote_and_after_a_refresh() {
    let started = Instant::now();
    let template = chart_pod_template();
    let spec = &template["spec"];
    assert_eq!(
        spec["imagePullSecrets"],
        json!([{"name": SECRET}]),
        "{spec}"
    );
    assert_eq!(spec["serviceAccountName"], SERVICE_ACCOUNT);
    assert_eq!(spec["containers"][0]["imagePullPolicy"], "Always");
    let first = "first-token-from-ecr";
    let (c, registry) = Cluster::start(NAMESPACE, REPOSITORY, first);
    assert_eq!(spec["containers"][0]["image"], c.image.as_str());
    // The chart's ServiceAccount, without pull Secrets: the pod's own list is what pulls.
    c.kubectl(&["create", "serviceaccount", SERVICE_ACCOUNT, "-n", NAMESPACE]);
    let pod = |name: &str| -> Value {
        let mut pod = json!({"apiVersion": "v1", "kind": "Pod"});
        pod["metadata"] = template["metadata"].clone();
        pod["metadata"]["name"] = json!(name);
        pod["metadata"]["namespace"] = json!(NAMESPACE);
        pod["spec"] = template["spec"].clone();
        // On this node: no scheduler, no network plugin, and no kube-controller-manager to
        // publish the kube-root-ca.crt a projected token volume needs. The rest is the chart's.
        pod["spec"]["nodeName"] = json!(c.node().name);
        pod["spec"]["hostNetwork"] = json!(true);
        pod["spec"]["automountServiceAccountToken"] = json!(false);
        pod
    };

    // 0. Before the bootstrap, the pod can't pull ecr-refresh's own image: the Secret it
    //    lists doesn't exist yet.
    c.create(&pod("unbootstrapped"));
    match c.fate("unbootstrapped") {
        Fate::PullFailed(reason, message) => assert!(
            // containerd asks for credentials on the registry's 401, and has none.
            message.contains("no basic auth credentials"),
            "{reason}: the pull failed for another reason than the missing credentials: {message}"
        ),
        Fate::Running => {
            panic!("step 0: the pod ran without credentials: the registry does not check")
        }
    }
    c.delete_pod("unbootstrapped");

    // 1. The bootstrap, as the book gives it: the binary from the operator's machine (the
    //    admin's kubeconfig), the install's own namespace, its ServiceAccount's name.
    let run = c.refresh_with(&[
        ("ECR_REFRESH_NAMESPACES", NAMESPACE),
        ("ECR_REFRESH_SERVICE_ACCOUNTS", ""),
        INSTALL,
    ]);
    assert_eq!(outcome(&run, NAMESPACE), "created");
    let secret = c.secret();
    assert_eq!(
        secret["metadata"]["annotations"]["ecr-refresh/install"], INSTALL.1,
        "recorded as the CronJob's runs record it: {secret}"
    );
    let uid = secret["metadata"]["uid"].clone();
    c.create(&pod("bootstrapped"));
    let fate = c.fate("bootstrapped");
    assert!(matches!(fate, Fate::Running), "step 1: {fate:?}");
    c.delete_pod("bootstrapped");
    eprintln!("self_hosting: bootstrapped at {:.1?}", started.elapsed());

    // 2. The password rotates; a run as the CronJob's pod makes it (its ServiceAccount's
    //    name) writes the new token in place; the next pod pulls with it.
    let second = "second-token-from-ecr";
    registry.set_password(second);
    c.ecr.set_password(REGION, second);
    let run = c.refresh_with(&[
        ("ECR_REFRESH_NAMESPACES", NAMESPACE),
        ("ECR_REFRESH_SERVICE_ACCOUNTS", ""),
        INSTALL,
    ]);
    assert_eq!(outcome(&run, NAMESPACE), "updated");
    assert_eq!(
        c.secret()["metadata"]["uid"],
        uid,
        "the Secret kept its uid"
    );
    assert_eq!(c.secret_password(), second);
    c.create(&pod("refreshed"));
    let fate = c.fate("refreshed");
    assert!(matches!(fate, Fate::Running), "step 2: {fate:?}");
    c.delete_pod("refreshed");
    eprintln!("self_hosting: done in {:.1?}", started.elapsed());
}
