//! `ecr-refresh check` against a real kube-apiserver (tests/control-plane), as the check
//! component's ServiceAccount (ecr-refresh-check; ecr-refresh's without the component) with a
//! TokenRequest token, under the RBAC of the manifests installed by
//! `kubectl apply -k`: the findings of tests/fake/check.rs that depend on what the server
//! answers (pods listed with the real field selector, ServiceAccounts read, the real 403
//! without the check component), and that a check sends no write, by the proxy's log and by
//! the server's own request counters.
//!
//! No kubelet and no scheduler run: pods stay Pending on no node, and their statuses are
//! written through the status subresource as the admin, as a kubelet would write them.

use crate::common;

use common::manifests::copy;
use common::real::{
    RealHarness, admin, create, get, install_with, installs, message, namespaces, send,
    wait_until_enforced, write_requests,
};
use common::*;
use control_plane::ControlPlane;
use serde_json::json;

const OTHER: &str = "210987654321.dkr.ecr.eu-west-1.amazonaws.com";
/// The check component's ServiceAccount: (namespace, name).
const CHECK_ACCOUNT: (&str, &str) = ("ecr-refresh", "ecr-refresh-check");

/// manifests/ installed with `component` (or none), its policy in force.
fn install(cp: &ControlPlane, component: Option<&str>) {
    let manifests = copy();
    let root = manifests.path().join("manifests");
    install_with(cp, &cp.assets().join("kubectl"), &root, "", "", component);
    wait_until_enforced(cp, "default");
}

/// A pod as the admin creates it, owned by ReplicaSet `owner` when given.
fn pod(cp: &ControlPlane, ns: &str, name: &str, image: &str, owner: Option<&str>) {
    create(cp, &[pods::pod(ns, name, image, owner)]);
}

/// The status a kubelet writes for a pod that can't pull `image`, through the status
/// subresource.
fn back_off(cp: &ControlPlane, ns: &str, name: &str, image: &str) {
    let status = json!({ "status": pods::back_off_status(image) }).to_string();
    admin(
        cp,
        &[
            "patch",
            "pod",
            name,
            "-n",
            ns,
            "--subresource=status",
            "--type=merge",
            "-p",
            &status,
        ],
        "",
    );
}

/// The `default` ServiceAccount of `ns` lists the pull Secret too.
fn wire_default(cp: &ControlPlane, ns: &str) {
    let patch = json!([{"op": "add", "path": "/imagePullSecrets/-", "value": {"name": SECRET}}]);
    admin(
        cp,
        &[
            "patch",
            "serviceaccount",
            "default",
            "-n",
            ns,
            "--type=json",
            "-p",
            &patch.to_string(),
        ],
        "",
    );
}

fn check(h: &RealHarness, env: &[(&str, &str)]) -> Run {
    let output = h
        .command(env)
        .arg("check")
        .output()
        .expect("ecr-refresh runs");
    h.checked(output)
}

/// Every resource a refresh or a check could write.
const WRITABLE: [&str; 4] = ["secrets", "serviceaccounts", "events", "pods"];

#[test]
#[ignore = "needs KUBEBUILDER_ASSETS (bash .ci/test)"]
fn a_check_on_a_real_server_reports_each_finding_and_sends_no_write() {
    // The server copies a ServiceAccount's imagePullSecrets into the pods created after, as a
    // real cluster does: the pods' own lists are what the check is held to.
    let cp = ControlPlane::start_with_service_account_admission();
    install(&cp, Some("check"));
    let names = [
        "chk-ok",
        "chk-missing",
        "chk-opaque",
        "chk-unwired",
        "chk-stuck",
        "chk-early",
    ];
    namespaces(&cp, &names);
    let h = RealHarness::new(&cp);
    let image = format!("{REGISTRY}/web:1");

    // A refresh writes the Secret where one is expected.
    let refresh_env = [
        (
            "ECR_REFRESH_NAMESPACES",
            "chk-ok,chk-unwired,chk-stuck,chk-early",
        ),
        ("ECR_REFRESH_EVENTS", "true"),
    ];
    h.run(&refresh_env).expect_code(0);
    // chk-early: a pod created before its ServiceAccount listed the Secret, and one created
    // after with its own list: the kubelet reads only the pod's own (issue 33 item 1d).
    pod(&cp, "chk-early", "early-0", &image, Some("early"));
    for ns in ["chk-ok", "chk-missing", "chk-stuck", "chk-early"] {
        wire_default(&cp, ns);
    }
    let mut own = pods::pod("chk-early", "hub-0", &image, Some("hub"));
    own["spec"]["imagePullSecrets"] = json!([{"name": "dockerhub"}]);
    create(&cp, &[own]);
    create(
        &cp,
        &[
            json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                 "metadata": {"name": SECRET, "namespace": "chk-opaque"},
                 "data": {"token": b64("x")}}),
        ],
    );
    // chk-ok: a healthy Deployment's pod, and a finished pod on a registry we don't manage,
    // which the field selector leaves out.
    pod(&cp, "chk-ok", "web-5d8f-a", &image, Some("web-5d8f"));
    pod(&cp, "chk-ok", "done", &format!("{OTHER}/x:1"), None);
    admin(
        &cp,
        &[
            "patch",
            "pod",
            "done",
            "-n",
            "chk-ok",
            "--subresource=status",
            "--type=merge",
            "-p",
            r#"{"status":{"phase":"Succeeded"}}"#,
        ],
        "",
    );
    // chk-missing: no Secret, and a pod stuck for want of it.
    pod(&cp, "chk-missing", "web-1", &image, None);
    back_off(&cp, "chk-missing", "web-1", &image);
    // chk-unwired: three pods of one ReplicaSet whose ServiceAccount lists only team-creds,
    // one of them stuck; and a pod on a registry we don't manage.
    for i in 0..3 {
        let name = format!("web-5d8f-{i}");
        pod(&cp, "chk-unwired", &name, &image, Some("web-5d8f"));
    }
    back_off(&cp, "chk-unwired", "web-5d8f-0", &image);
    // chk-stuck: wired and covered, stuck anyway (a tag that does not exist, say).
    pod(&cp, "chk-stuck", "api-1", &image, None);
    back_off(&cp, "chk-stuck", "api-1", &image);
    pod(&cp, "chk-stuck", "other-1", &format!("{OTHER}/api:2"), None);

    // The check as the component's own ServiceAccount: its pod rights are not the refresh's.
    let checker = RealHarness::as_account(&cp, CHECK_ACCOUNT);
    let writes_before = checker.proxy.writes().len();
    let counted_before = write_requests(&cp, &WRITABLE);
    let exchanges_before = checker.proxy.exchanges().len();
    let calls_before = checker.ecr.calls().len();

    let run = check(
        &checker,
        &[
            ("ECR_REFRESH_NAMESPACES", "chk-*"),
            // What a refresh would act on: it must not, in a check.
            ("ECR_REFRESH_SERVICE_ACCOUNTS", "default"),
            ("ECR_REFRESH_EVENTS", "true"),
        ],
    );

    run.expect_code(1);
    assert_eq!(run.outcome("chk-ok"), "ok", "{}", run.stdout);
    assert_eq!(run.line("chk-ok")["ecr_pods"], 1, "{}", run.stdout);
    assert_eq!(
        run.finding_kinds("chk-missing"),
        ["secret-missing", "pull-stuck"]
    );
    assert!(
        run.findings("chk-missing")
            .ends_with("explained by secret-missing"),
        "{}",
        run.findings("chk-missing")
    );
    assert_eq!(run.finding_kinds("chk-opaque"), ["wrong-type"]);
    assert_eq!(
        run.findings("chk-opaque"),
        "wrong type: Opaque, not kubernetes.io/dockerconfigjson"
    );
    assert_eq!(
        run.finding_kinds("chk-unwired"),
        ["not-wired", "pull-stuck"]
    );
    // The server's ServiceAccount admission copied the account's team-creds into each pod.
    let unwired = run.findings("chk-unwired");
    assert!(
        unwired.contains(
            "not wired: ReplicaSet/web-5d8f (3 pods, e.g. web-5d8f-0), ServiceAccount default: \
             the pod lists its own imagePullSecrets [team-creds] without aws-ecr-token"
        ),
        "{unwired}"
    );
    assert_eq!(run.finding_kinds("chk-early"), ["not-wired", "not-wired"]);
    let early = run.findings("chk-early");
    assert!(
        early.contains(
            "not wired: ReplicaSet/early (pod early-0), ServiceAccount default: the pod lists its \
             own imagePullSecrets [team-creds] without aws-ecr-token"
        ),
        "{early}"
    );
    assert!(
        early.contains(
            "not wired: ReplicaSet/hub (pod hub-0), ServiceAccount default: the pod lists its own \
             imagePullSecrets [dockerhub] without aws-ecr-token"
        ),
        "{early}"
    );
    assert!(
        unwired.contains(&format!(
            "ImagePullBackOff: ReplicaSet/web-5d8f (pod web-5d8f-0) pulling {image}: \
             explained by not-wired"
        )),
        "{unwired}"
    );
    assert_eq!(
        run.finding_kinds("chk-stuck"),
        ["registry-not-covered", "pull-stuck"]
    );
    let stuck = run.findings("chk-stuck");
    assert!(
        stuck.contains(&format!(
            "ECR registry not covered: {OTHER}, used by pod other-1"
        )),
        "{stuck}"
    );
    assert!(
        stuck.contains(&format!(
            "ImagePullBackOff: pod api-1 pulling {image}: explained by none of the above \
             (the kubelet says: Back-off pulling image \"{image}\")"
        )),
        "{stuck}"
    );
    assert_eq!(run.summary()["ok"], 1, "{}", run.stdout);

    // Read-only, by the proxy's log and by the server's own counters.
    let sent: Vec<String> = checker.proxy.exchanges()[exchanges_before..]
        .iter()
        .map(|e| format!("{} {}?{} {}", e.method, e.path, e.query, e.status))
        .collect();
    assert_eq!(
        checker.proxy.writes().len(),
        writes_before,
        "a write: {sent:#?}"
    );
    assert_eq!(
        write_requests(&cp, &WRITABLE),
        counted_before,
        "the server counted writes during the check: {sent:#?}"
    );
    assert_eq!(
        checker.ecr.calls().len(),
        calls_before,
        "no token is asked for"
    );
    // Nor could it write: RBAC grants the check's account nothing to write, and the
    // admission policy doesn't hold it (there is nothing of it to narrow).
    let token = cp.service_account_token(CHECK_ACCOUNT.0, CHECK_ACCOUNT.1);
    let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": SECRET},
        "type": "kubernetes.io/dockerconfigjson",
        "data": {".dockerconfigjson": b64(r#"{"auths":{}}"#)}});
    let path = "/api/v1/namespaces/chk-missing/secrets?dryRun=All";
    let (status, body) = send(&cp, &token, "POST", path, "application/json", &secret);
    assert_eq!(status, 403, "{body}");
    assert!(
        message(&body).contains("cannot create resource \"secrets\""),
        "refused by RBAC: {body}"
    );
    assert!(get(&cp, "secret", "chk-missing", SECRET).is_none());
    // The real server answered the pod lists, with the field selector a kubelet's
    // finished pods are left out by.
    let pod_lists: Vec<&String> = sent.iter().filter(|s| s.contains("/pods?")).collect();
    assert!(!pod_lists.is_empty(), "{sent:#?}");
    for list in &pod_lists {
        assert!(
            list.contains("fieldSelector=status.phase%21%3DSucceeded%2Cstatus.phase%21%3DFailed")
                && list.ends_with(" 200"),
            "{list}"
        );
    }
}

#[test]
#[ignore = "needs KUBEBUILDER_ASSETS (bash .ci/test)"]
fn a_check_without_the_components_pod_rights_checks_the_secrets_and_says_so_once() {
    let cp = installs();
    install(&cp, None);
    namespaces(&cp, &["norights-a", "norights-b"]);
    let h = RealHarness::new(&cp);
    h.run(&[("ECR_REFRESH_NAMESPACES", "norights-b")])
        .expect_code(0);
    pod(&cp, "norights-a", "web-1", &format!("{OTHER}/web:1"), None);
    let exchanges_before = h.proxy.exchanges().len();

    let run = check(&h, &[("ECR_REFRESH_NAMESPACES", "norights-*")]);

    run.expect_code(1);
    let notes = run.messages_starting("pods were not checked");
    assert_eq!(notes.len(), 1, "{}", run.stdout);
    assert_eq!(run.finding_kinds("norights-a"), ["secret-missing"]);
    assert_eq!(run.outcome("norights-b"), "ok");
    assert_eq!(run.line("norights-b")["pods_checked"], false);
    assert_eq!(run.summary()["pods_unchecked"], 2);
    // The real RBAC's answer to the pod list.
    let refused: Vec<(String, u16)> = h.proxy.exchanges()[exchanges_before..]
        .iter()
        .filter(|e| e.path.ends_with("/pods"))
        .map(|e| (e.path.clone(), e.status))
        .collect();
    assert!(
        !refused.is_empty() && refused.iter().all(|(_, status)| *status == 403),
        "{refused:?}"
    );
}
