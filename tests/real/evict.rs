//! ECR_REFRESH_EVICT_STUCK_PODS on a real kube-apiserver: what it must never evict, with the
//! objects as the real server stores them (an ephemeral container added through the
//! `ephemeralcontainers` subresource, statuses written through `pods/status` as a kubelet
//! writes them; no kubelet runs). As the admin, on the shared control plane, in namespaces of
//! its own. (The rights and the policy: tests/real/admission.rs; a real node:
//! tests/node/evict.rs.)

use crate::common;

use common::real::{admin, create, get, send};
use common::*;
use control_plane::ControlPlane;
use serde_json::{Value, json};

/// The refresh, or the check with `check`, as the admin, in `ns`, with the option on.
fn run(cp: &ControlPlane, ns: &str, mode: Option<&str>) -> Run {
    let kubeconfig = cp.admin_kubeconfig().to_owned();
    let binary = Binary::new(|_| kubeconfig);
    let env = [
        ("ECR_REFRESH_NAMESPACES", ns),
        ("ECR_REFRESH_EVICT_STUCK_PODS", "true"),
    ];
    let mut command = binary.command(&env);
    if let Some(mode) = mode {
        command.arg(mode);
    }
    binary.checked(command.output().expect("ecr-refresh runs"))
}

/// A container's status as a kubelet writes it.
fn container(name: &str, image: &str, state: Value) -> Value {
    let ready = state.get("running").is_some();
    json!({"name": name, "image": image, "imageID": "", "ready": ready, "started": ready,
        "restartCount": 0, "state": state})
}

fn write_status(cp: &ControlPlane, ns: &str, pod: &str, status: Value) {
    admin(
        cp,
        &[
            "patch",
            "pod",
            pod,
            "-n",
            ns,
            "--subresource=status",
            "--type=merge",
            "-p",
            &json!({ "status": status }).to_string(),
        ],
        "",
    );
}

/// A ReplicaSet's pod whose app runs and is Ready, with a `kubectl debug` container on our
/// registry stuck in ImagePullBackOff for want of credentials, is not evicted: a replacement
/// never has ephemeral containers, so the eviction would only stop the app. Its ServiceAccount
/// lists the Secret and the pod lists none, as for the pod beside it, whose app itself is
/// stuck and which is evicted. The check still reports the debug container's pull.
#[test]
#[ignore = "needs KUBEBUILDER_ASSETS (bash .ci/test)"]
fn a_running_pod_is_not_evicted_for_its_stuck_debug_container() {
    let cp = ControlPlane::shared();
    let ns = "evict-debug";
    cp.create_namespace(ns);
    // No ServiceAccount admission on this server: `default` is made here, listing the Secret.
    create(
        cp,
        &[json!({"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": "default", "namespace": ns},
            "imagePullSecrets": [{"name": SECRET}]})],
    );
    let image = format!("{REGISTRY}/web:1");
    let tools = format!("{REGISTRY}/tools:1");
    let no_credentials = |image: &str| {
        json!({"waiting": {"reason": "ImagePullBackOff", "message": format!(
            "Back-off pulling image \"{image}\": ErrImagePull: failed to pull and unpack image \
             \"{image}\": failed to resolve image: unexpected status from HEAD request to \
             https://{REGISTRY}/v2/tools/manifests/1: 401 Unauthorized")}})
    };
    create(
        cp,
        &[
            pods::pod(ns, "web-1", &image, Some("web-7d9f8")),
            pods::pod(ns, "web-2", &image, Some("web-7d9f8")),
        ],
    );
    let debug = json!({"spec": {"ephemeralContainers": [{
        "name": "debugger", "image": tools, "targetContainerName": "app",
        "stdin": true, "tty": true}]}});
    let (status, body) = send(
        cp,
        cp.admin_token(),
        "PATCH",
        &format!("/api/v1/namespaces/{ns}/pods/web-1/ephemeralcontainers"),
        "application/strategic-merge-patch+json",
        &debug,
    );
    assert_eq!(status, 200, "kubectl debug's request: {body}");
    write_status(
        cp,
        ns,
        "web-1",
        json!({"phase": "Running",
            "conditions": [{"type": "Ready", "status": "True"}],
            "containerStatuses": [container("app", &image,
                json!({"running": {"startedAt": "2026-01-01T00:00:00Z"}}))],
            "ephemeralContainerStatuses": [container("debugger", &tools, no_credentials(&tools))]}),
    );
    write_status(
        cp,
        ns,
        "web-2",
        json!({"phase": "Pending",
            "containerStatuses": [container("app", &image, no_credentials(&image))]}),
    );
    let before = get(cp, "pod", ns, "web-1").expect("the debugged pod");
    assert_eq!(
        before["status"]["ephemeralContainerStatuses"][0]["state"]["waiting"]["reason"],
        "ImagePullBackOff",
        "the server kept the status: {}",
        before["status"]
    );

    let refresh = run(cp, ns, None);

    refresh.expect_code(0);
    let line = |pod: &str| refresh.lines.iter().find(|l| l["pod"] == pod).cloned();
    assert!(
        line("web-1").is_none(),
        "the debugged pod is not ours to touch: {}",
        refresh.stdout
    );
    let web2 = line("web-2").unwrap_or_else(|| panic!("no line for web-2:\n{}", refresh.stdout));
    assert_eq!(web2["outcome"], "evicted", "{web2}");
    let after = get(cp, "pod", ns, "web-1").expect("the debugged pod is still there");
    assert_eq!(after["metadata"]["uid"], before["metadata"]["uid"]);
    assert!(
        after["metadata"]["deletionTimestamp"].is_null(),
        "{}",
        after["metadata"]
    );

    let check = run(cp, ns, Some("check"));
    let findings = check.findings(ns);
    assert!(
        findings.contains("ImagePullBackOff") && findings.contains(&tools),
        "the check still reports the debug container's pull: {findings}\n{}",
        check.stdout
    );
    assert!(
        !findings.contains("would recover it"),
        "and no eviction for it: {findings}"
    );
}
