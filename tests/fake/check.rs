//! `ecr-refresh check`: the built binary against the fake cluster, read-only. Each finding the
//! check reports, the exit codes, that it sends no write, a check without pod rights, and its
//! request count at 1,000 namespaces.

use crate::common;

use std::time::{Duration, SystemTime};

use common::manifests::{documents, render_component, yaml};
use common::pushgateway::Gateway;
use common::*;
use fake_cluster::{FakeCluster, Resource};
use serde_json::{Value, json};

const TWIN: &str = "123456789012.dkr-ecr.us-east-1.on.aws";
const OTHER: &str = "210987654321.dkr.ecr.eu-west-1.amazonaws.com";

/// A check: the `check` argument, the harness's environment.
fn check(h: &Harness, env: &[(&str, &str)]) -> Run {
    let output = h
        .command(env)
        .arg("check")
        .output()
        .expect("ecr-refresh runs");
    h.checked(output)
}

/// A namespace whose Secret a refresh wrote, as every healthy namespace has.
fn refreshed(h: &Harness, names: &[&str], env: &[(&str, &str)]) {
    h.namespaces(names);
    h.run(env).expect_code(0);
}

/// A pod using `image`, as a ReplicaSet `owner` makes them (None: a bare pod).
fn pod(h: &Harness, ns: &str, name: &str, image: &str, owner: Option<&str>) -> Value {
    h.cluster.seed(
        Resource::Pods,
        pods::pod(ns, name, image, owner),
        "kube-controller-manager",
    )
}

/// The kubelet's status of a container that cannot pull its image.
fn back_off(h: &Harness, ns: &str, name: &str, image: &str) {
    h.cluster
        .set_pod_status(ns, name, pods::back_off_status(image));
}

/// The ServiceAccount `default` lists the Secret, as the service-accounts component makes it.
fn wire_default(h: &Harness, ns: &str) {
    h.cluster.seed(
        Resource::ServiceAccounts,
        json!({"metadata": {"name": "default", "namespace": ns},
               "imagePullSecrets": [{"name": SECRET}]}),
        "ecr-refresh",
    );
}

/// No request but GET since the `from`th.
fn no_writes(h: &Harness, from: usize) {
    let writes: Vec<String> = h
        .cluster
        .requests()
        .into_iter()
        .skip(from)
        .filter(|r| r.method != "GET")
        .map(|r| format!("{} {}", r.method, r.path))
        .collect();
    assert!(writes.is_empty(), "a check sent writes: {writes:?}");
}

#[test]
fn a_healthy_namespace_is_ok_and_the_check_exits_0() {
    let h = Harness::new();
    refreshed(&h, &["team-a"], &[]);
    wire_default(&h, "team-a");
    pod(
        &h,
        "team-a",
        "web-1",
        &format!("{REGISTRY}/web:1"),
        Some("web-5d8f"),
    );
    let before = h.cluster.requests().len();

    let run = check(&h, &[]);

    run.expect_code(0);
    assert_eq!(run.outcome("team-a"), "ok");
    assert_eq!(run.line("team-a")["ecr_pods"], 1);
    assert_eq!(run.summary()["ok"], 1);
    let message: Value = serde_json::from_str(
        &std::fs::read_to_string(h.termination_log()).expect("a termination message"),
    )
    .expect("JSON");
    assert_eq!(message["mode"], "check");
    assert_eq!(message["exit_code"], 0);
    assert_eq!(message["ok"], 1);
    assert!(
        h.cluster.requests()[before..]
            .iter()
            .all(|r| r.method == "GET")
    );
    assert!(
        h.ecr.calls().len() == 1,
        "the check asks ECR for no token: {:?}",
        h.ecr.calls()
    );
}

#[test]
fn a_missing_secret_is_reported_and_the_check_exits_1_naming_it_in_the_termination_message() {
    let h = Harness::new();
    h.namespaces(&["team-a", "team-b"]);
    refreshed(&h, &["team-b"], &[("ECR_REFRESH_NAMESPACES", "team-b")]);
    let before = h.cluster.requests().len();

    let run = check(&h, &[]);

    run.expect_code(1);
    assert_eq!(run.finding_kinds("team-a"), ["secret-missing"]);
    assert_eq!(run.findings("team-a"), "Secret missing");
    assert_eq!(run.outcome("team-b"), "ok");
    let message: Value =
        serde_json::from_str(&std::fs::read_to_string(h.termination_log()).unwrap()).unwrap();
    assert_eq!(message["exit_code"], 1);
    assert_eq!(message["namespaces_with_findings"], json!(["team-a"]));
    assert_eq!(message["findings"]["secret-missing"], 1);
    no_writes(&h, before);
    assert!(h.secret("team-a").is_none());
}

#[test]
fn a_secret_of_another_type_is_reported() {
    let h = Harness::new();
    h.namespaces(&["team-a"]);
    h.seed_secret(
        "team-a",
        "kubectl-create",
        json!({"type": "Opaque", "data": {"token": b64("x")}}),
    );

    let run = check(&h, &[]);

    run.expect_code(1);
    assert_eq!(run.finding_kinds("team-a"), ["wrong-type"]);
    assert_eq!(
        run.findings("team-a"),
        "wrong type: Opaque, not kubernetes.io/dockerconfigjson"
    );
}

#[test]
fn an_unreadable_docker_config_is_reported_without_quoting_it() {
    let h = Harness::new();
    h.namespaces(&["team-a"]);
    h.seed_secret(
        "team-a",
        "kubectl-create",
        json!({"type": "kubernetes.io/dockerconfigjson",
               "data": {".dockerconfigjson": b64(r#"{"auths":"hunter2"}"#)}}),
    );

    let run = check(&h, &[]);

    run.expect_code(1);
    assert_eq!(run.finding_kinds("team-a"), ["unreadable"]);
    assert!(!run.stdout.contains("hunter2"), "{}", run.stdout);
}

#[test]
fn an_expired_secret_is_reported_expired_and_one_inside_renew_before_as_expiring() {
    let h = Harness::new();
    refreshed(&h, &["team-a", "team-b"], &[]);
    let set_expiry = |ns: &str, at: SystemTime| {
        let mut secret = h.secret(ns).expect("written");
        secret["metadata"]["annotations"]["ecr-refresh/token-expires-at"] =
            json!(humantime::format_rfc3339_seconds(at).to_string());
        secret["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("managedFields");
        h.cluster.seed(Resource::Secrets, secret, "ecr-refresh");
    };
    set_expiry("team-a", SystemTime::now() - Duration::from_secs(3600));
    set_expiry("team-b", SystemTime::now() + Duration::from_secs(1800));

    let run = check(&h, &[("ECR_REFRESH_RENEW_BEFORE", "1h")]);

    run.expect_code(1);
    assert_eq!(run.finding_kinds("team-a"), ["expired"]);
    assert!(
        run.findings("team-a")
            .starts_with("expired: its token expired at ")
    );
    assert_eq!(run.finding_kinds("team-b"), ["expires-soon"]);
}

#[test]
fn a_host_without_an_entry_is_reported_and_with_dual_stack_on_its_twin_too() {
    let h = Harness::new();
    // Written for one registry; the check is configured with two, and dual-stack.
    refreshed(&h, &["team-a"], &[]);
    let env = [
        ("ECR_REFRESH_REGISTRIES", &*format!("{REGISTRY},{OTHER}")),
        ("ECR_REFRESH_DUAL_STACK", "true"),
    ];

    let run = check(&h, &env);

    run.expect_code(1);
    assert_eq!(
        run.findings("team-a"),
        format!(
            "no entry for registry {OTHER}; no entry for registry {TWIN}; no entry for registry 210987654321.dkr-ecr.eu-west-1.on.aws"
        )
    );
}

#[test]
fn a_dual_stack_image_with_dual_stack_off_is_an_ecr_registry_not_covered() {
    let h = Harness::new();
    refreshed(&h, &["team-a"], &[]);
    wire_default(&h, "team-a");
    pod(&h, "team-a", "api-1", &format!("{TWIN}/api:2"), None);

    let run = check(&h, &[]);

    run.expect_code(1);
    assert_eq!(run.finding_kinds("team-a"), ["registry-not-covered"]);
    assert_eq!(
        run.findings("team-a"),
        format!(
            "ECR registry not covered: {TWIN}, used by pod api-1; its IPv4 host is managed but \
             ECR_REFRESH_DUAL_STACK is off: set it to true"
        )
    );
}

#[test]
fn a_pod_on_a_registry_we_do_not_manage_is_reported_not_covered_naming_the_host() {
    let h = Harness::new();
    refreshed(&h, &["team-a"], &[]);
    wire_default(&h, "team-a");
    for image in [
        format!("{OTHER}/api:2"),
        "public.ecr.aws/nginx/nginx:1".to_owned(),
        "docker.io/library/busybox:1".to_owned(),
    ] {
        let name = format!("p-{}", image.len());
        pod(&h, "team-a", &name, &image, None);
    }

    let run = check(&h, &[]);

    run.expect_code(1);
    let text = run.findings("team-a");
    assert!(
        text.contains(&format!("ECR registry not covered: {OTHER}")),
        "{text}"
    );
    assert!(
        !text.contains("public.ecr.aws"),
        "pulled anonymously: {text}"
    );
    assert!(!text.contains("docker.io"), "not an ECR host: {text}");
    assert_eq!(run.line("team-a")["ecr_pods"], 1);
}

#[test]
fn an_anonymous_pull_from_ecr_public_is_never_a_finding() {
    let h = Harness::new();
    refreshed(&h, &["team-a"], &[]);
    // Neither wired nor covered: ECR Public serves every image without credentials.
    pod(&h, "team-a", "web-1", "public.ecr.aws/nginx/nginx:1", None);
    pod(
        &h,
        "team-a",
        "web-2",
        "public.ecr.aws/nginx/nginx:1",
        Some("web-5d8f"),
    );

    let run = check(&h, &[]);

    run.expect_code(0);
    assert_eq!(run.outcome("team-a"), "ok", "{}", run.stdout);
}

#[test]
fn pods_whose_service_account_does_not_list_the_secret_are_not_wired_once_per_controller() {
    let h = Harness::new();
    refreshed(&h, &["team-a"], &[]);
    let image = format!("{REGISTRY}/web:1");
    for i in 0..3 {
        pod(
            &h,
            "team-a",
            &format!("web-5d8f-{i}"),
            &image,
            Some("web-5d8f"),
        );
    }
    // A pod that lists the Secret itself is wired, whatever its ServiceAccount says.
    let mut direct = json!({
        "metadata": {"name": "direct", "namespace": "team-a"},
        "spec": {"containers": [{"name": "app", "image": image}],
                 "imagePullSecrets": [{"name": SECRET}]}
    });
    direct["apiVersion"] = json!("v1");
    h.cluster.seed(Resource::Pods, direct, "kubectl");
    // An init container on ECR counts as much as a container.
    h.cluster.seed(
        Resource::Pods,
        json!({"metadata": {"name": "job-x", "namespace": "team-a"},
               "spec": {"serviceAccountName": "builder",
                        "initContainers": [{"name": "init", "image": image}],
                        "containers": [{"name": "app", "image": "busybox"}]}}),
        "kubectl",
    );

    let run = check(&h, &[]);

    run.expect_code(1);
    assert_eq!(run.finding_kinds("team-a"), ["not-wired", "not-wired"]);
    let text = run.findings("team-a");
    assert!(
        text.contains(
            "not wired: ReplicaSet/web-5d8f (3 pods, e.g. web-5d8f-0), ServiceAccount default: \
             neither the pod nor its ServiceAccount lists aws-ecr-token in imagePullSecrets: add \
             it to the ServiceAccount"
        ),
        "{text}"
    );
    assert!(
        text.contains("not wired: pod job-x, ServiceAccount builder: the pod does not list aws-ecr-token in imagePullSecrets, and its ServiceAccount does not exist"),
        "{text}"
    );
    assert!(!text.contains("direct"), "{text}");
}

/// The kubelet reads only the pod's own `imagePullSecrets` (pkg/kubelet/kubelet_pods.go
/// `getPullSecretsForPod`); the ServiceAccount's list is copied into a pod once, at its
/// creation, and only into a pod that lists none.
#[test]
fn a_pod_without_the_secret_in_its_own_spec_is_not_wired_whatever_its_service_account_lists() {
    let h = Harness::new();
    refreshed(&h, &["team-a"], &[]);
    let image = format!("{REGISTRY}/web:1");
    // Created before the ServiceAccount listed the Secret.
    pod(&h, "team-a", "old-0", &image, Some("old"));
    wire_default(&h, "team-a");
    // Created after, with its own list: the account's never reaches it.
    let mut own = pods::pod("team-a", "hub-0", &image, Some("hub"));
    own["spec"]["imagePullSecrets"] = json!([{"name": "dockerhub"}]);
    h.cluster
        .seed(Resource::Pods, own, "kube-controller-manager");
    // Created after, listing none: the account's list was copied in.
    pod(&h, "team-a", "new-0", &image, Some("new"));

    let run = check(&h, &[]);

    run.expect_code(1);
    assert_eq!(run.finding_kinds("team-a"), ["not-wired", "not-wired"]);
    let text = run.findings("team-a");
    assert!(
        text.contains(
            "not wired: ReplicaSet/old (pod old-0), ServiceAccount default: the pod lists no \
             imagePullSecrets: it was created before its ServiceAccount listed aws-ecr-token, and \
             the kubelet reads only the pod's own list; recreate the pods"
        ),
        "{text}"
    );
    assert!(
        text.contains(
            "not wired: ReplicaSet/hub (pod hub-0), ServiceAccount default: the pod lists its own \
             imagePullSecrets [dockerhub] without aws-ecr-token"
        ),
        "{text}"
    );
    assert!(
        text.contains("add aws-ecr-token to the imagePullSecrets of its owner's pod template"),
        "{text}"
    );
    assert!(!text.contains("new-0"), "{text}");
}

#[test]
fn a_pod_in_image_pull_back_off_is_explained_by_the_findings_or_none_of_the_above() {
    let h = Harness::new();
    refreshed(&h, &["team-a", "team-b"], &[]);
    wire_default(&h, "team-b");
    // team-a: not wired, and stuck.
    let image = format!("{REGISTRY}/web:1");
    pod(&h, "team-a", "web-1", &image, None);
    back_off(&h, "team-a", "web-1", &image);
    // team-b: wired and covered, stuck anyway (a tag that does not exist, say).
    pod(&h, "team-b", "web-1", &image, None);
    back_off(&h, "team-b", "web-1", &image);
    // A finished pod is not listed (status.phase), whatever it pulled.
    pod(&h, "team-b", "done", &format!("{OTHER}/x:1"), None);
    h.cluster
        .set_pod_status("team-b", "done", json!({"phase": "Succeeded"}));

    let run = check(&h, &[]);

    run.expect_code(1);
    assert_eq!(run.finding_kinds("team-a"), ["not-wired", "pull-stuck"]);
    assert!(
        run.findings("team-a").contains(&format!(
            "ImagePullBackOff: pod web-1 pulling {image}: explained by not-wired"
        )),
        "{}",
        run.findings("team-a")
    );
    assert_eq!(run.finding_kinds("team-b"), ["pull-stuck"]);
    assert_eq!(
        run.findings("team-b"),
        format!(
            "ImagePullBackOff: pod web-1 pulling {image}: explained by none of the above \
             (the kubelet says: Back-off pulling image \"{image}\")"
        )
    );
    let lists: Vec<String> = h
        .cluster
        .requests()
        .into_iter()
        .filter(|r| r.path.ends_with("/pods"))
        .map(|r| r.query)
        .collect();
    assert!(
        lists
            .iter()
            .all(|q| q
                .contains("fieldSelector=status.phase%21%3DSucceeded%2Cstatus.phase%21%3DFailed")),
        "{lists:?}"
    );
}

#[test]
fn a_missing_secret_explains_a_stuck_pod() {
    let h = Harness::new();
    h.namespaces(&["team-a"]);
    wire_default(&h, "team-a");
    let image = format!("{REGISTRY}/web:1");
    pod(&h, "team-a", "web-1", &image, None);
    back_off(&h, "team-a", "web-1", &image);

    let run = check(&h, &[("ECR_REFRESH_MODE", "check")]);

    run.expect_code(1);
    assert_eq!(
        run.finding_kinds("team-a"),
        ["secret-missing", "pull-stuck"]
    );
    assert!(
        run.findings("team-a")
            .ends_with("explained by secret-missing")
    );
}

#[test]
fn a_check_sends_no_write_even_where_a_refresh_would_write_everything() {
    let h = Harness::new();
    h.namespaces(&["team-a", "team-b"]);
    // Missing, foreign and stuck: a refresh would create, update and attach.
    h.seed_secret(
        "team-b",
        "kubectl-create",
        json!({"type": "kubernetes.io/dockerconfigjson",
               "data": {".dockerconfigjson": b64(r#"{"auths":{}}"#)}}),
    );
    let image = format!("{REGISTRY}/web:1");
    pod(&h, "team-a", "web-1", &image, None);
    back_off(&h, "team-a", "web-1", &image);

    let run = check(
        &h,
        &[
            ("ECR_REFRESH_SERVICE_ACCOUNTS", "default"),
            ("ECR_REFRESH_EVENTS", "true"),
        ],
    );

    run.expect_code(1);
    no_writes(&h, 0);
    assert!(h.cluster.events("team-a").is_empty());
    assert!(h.ecr.calls().is_empty(), "no token: {:?}", h.ecr.calls());
}

#[test]
fn configuration_errors_and_stray_arguments_exit_2_before_any_request() {
    let h = Harness::new();
    h.namespaces(&["team-a"]);
    let bad_mode = h.run(&[("ECR_REFRESH_MODE", "verify")]);
    bad_mode.expect_code(2);
    assert!(
        bad_mode.stdout.contains("must be 'refresh' or 'check'"),
        "{}",
        bad_mode.stdout
    );
    let bad_value = check(&h, &[("ECR_REFRESH_RENEW_BEFORE", "soon")]);
    bad_value.expect_code(2);
    let stray = h
        .command(&[])
        .args(["check", "team-a"])
        .output()
        .expect("runs");
    assert_eq!(stray.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&stray.stderr)
            .contains("unexpected argument \"team-a\" after check")
    );
    assert!(h.cluster.requests().is_empty());
}

/// The cluster-wide manifests' RBAC, with or without the check component; with it, as the
/// component's own ServiceAccount, ecr-refresh-check.
fn rbac_harness(component: Option<&str>) -> Harness {
    let rendered = render_component("", component);
    let docs: Vec<Value> = documents(&rendered)
        .into_iter()
        .filter(|d| {
            ["ClusterRole", "ClusterRoleBinding"]
                .iter()
                .any(|k| d["kind"] == *k)
        })
        .collect();
    let account = if component.is_some() {
        "ecr-refresh-check"
    } else {
        "ecr-refresh"
    };
    Harness::with(
        FakeCluster::builder()
            .service_account("ecr-refresh", account)
            .rbac_from_yaml(&yaml(&docs))
            .start(),
    )
}

#[test]
#[ignore = "needs kubectl (bash .ci/test)"]
fn a_check_without_pod_rights_checks_the_secrets_and_says_once_that_pods_were_not_checked() {
    let h = rbac_harness(None);
    h.namespaces(&["team-a", "team-b", "team-c"]);
    h.seed_secret(
        "team-c",
        "kubectl-create",
        json!({"type": "Opaque", "data": {"token": b64("x")}}),
    );
    pod(&h, "team-a", "web-1", &format!("{OTHER}/web:1"), None);

    let run = check(&h, &[]);

    run.expect_code(1);
    let notes = run.messages_starting("pods were not checked");
    assert_eq!(notes.len(), 1, "{}", run.stdout);
    // Both ways to the rights, kustomize's and the chart's, and the account they grant.
    for way in [
        "manifests/components/check",
        "check.podRights=true",
        "ecr-refresh-check",
    ] {
        let note = notes[0]["message"].as_str().unwrap_or_default();
        assert!(note.contains(way), "names {way}: {note}");
    }
    assert_eq!(run.finding_kinds("team-a"), ["secret-missing"]);
    assert_eq!(run.finding_kinds("team-c"), ["wrong-type"]);
    assert_eq!(run.line("team-b")["pods_checked"], false);
    assert_eq!(run.summary()["pods_unchecked"], 3);

    // With the component, the same cluster's pods are checked.
    let h = rbac_harness(Some("check"));
    h.namespaces(&["team-a"]);
    pod(&h, "team-a", "web-1", &format!("{OTHER}/web:1"), None);
    let run = check(&h, &[]);
    run.expect_code(1);
    assert_eq!(
        run.finding_kinds("team-a"),
        ["secret-missing", "registry-not-covered", "not-wired"]
    );
    let refused: Vec<String> = h
        .cluster
        .requests()
        .into_iter()
        .filter(|r| r.status == 403)
        .map(|r| r.path)
        .collect();
    assert!(
        refused.is_empty(),
        "refused with the component: {refused:?}"
    );
    no_writes(&h, 0);
}

#[test]
fn a_thousand_namespaces_with_ten_pods_each_are_checked_with_the_requests_needed_and_no_more() {
    let h = Harness::with(FakeCluster::builder().without_request_log().start());
    let names: Vec<String> = (0..1000).map(|i| format!("team-{i:04}")).collect();
    let image = format!("{REGISTRY}/web:1");
    for name in &names {
        h.cluster.add_namespace(name, &[]);
        h.seed_secret(
            name,
            "ecr-refresh",
            json!({"type": "kubernetes.io/dockerconfigjson",
                   "data": {".dockerconfigjson": b64(&format!(r#"{{"auths":{{"{REGISTRY}":{{"auth":"{}"}}}}}}"#, b64("AWS:x")))}}),
        );
        for i in 0..10 {
            pod(&h, name, &format!("web-{i}"), &image, Some("web-5d8f"));
        }
    }
    let before = h.cluster.request_count();

    let run = check(&h, &[]);

    run.expect_code(1);
    let sent = h.cluster.request_count() - before;
    // What a check must send: /version, 2 pages of the one Secret list, 2 namespace pages of
    // 500, and per namespace one page of pods and the pods' ServiceAccount `default` (not
    // wired here). A GET of each Secret made it 3,003 before the list.
    let needed = 1 + 2 + 2 + 1000 * 2;
    eprintln!("1,000 namespaces x 10 pods: {sent} requests, {needed} needed");
    assert_eq!(sent, needed, "no Secret read one namespace at a time");
    assert_eq!(run.summary()["with_findings"], 1000);
    let line = run.line("team-0999");
    assert!(
        line["findings"]
            .as_str()
            .unwrap()
            .contains("not wired: ReplicaSet/web-5d8f (10 pods, e.g. web-0)"),
        "{line}"
    );
}

#[test]
#[ignore = "needs docker-registry (bash .ci/test)"]
fn a_login_the_registry_refuses_is_reported_with_its_answer_and_the_token_is_never_logged() {
    use common::registry::{ConnectProxy, TlsRegistry};
    // The real registry under the ECR host's name, holding another password than the token
    // the refresh wrote into the Secret.
    let registry = TlsRegistry::start(REGISTRY, "AWS", "a-password-ecr-never-hands-out");
    let proxy = ConnectProxy::start(registry.addr);
    let h = Harness::new();
    h.ecr.set_password(REGION, "the-token-in-the-secret");
    refreshed(&h, &["team-a"], &[]);
    wire_default(&h, "team-a");
    let image = format!("{REGISTRY}/team/web:1.2");
    pod(&h, "team-a", "web-1", &image, None);
    back_off(&h, "team-a", "web-1", &image);

    let output = h
        .command(&[
            ("ECR_REFRESH_VERIFY_LOGIN", "true"),
            // For the registry login; NO_PROXY keeps the API server (on loopback) direct.
            ("HTTPS_PROXY", &proxy.url),
            ("NO_PROXY", "127.0.0.1,localhost"),
            ("SSL_CERT_FILE", registry.certificate.to_str().unwrap()),
        ])
        .arg("check")
        .output()
        .expect("ecr-refresh runs");
    let run = h.checked(output);

    run.expect_code(1);
    assert_eq!(
        run.finding_kinds("team-a"),
        ["pull-stuck", "login-refused"],
        "{}",
        run.stdout
    );
    let text = run.findings("team-a");
    assert!(
        text.contains(&format!(
            "login refused: {REGISTRY} answered HTTP 401 for {image} with the Secret's credentials: "
        )) && text.contains("UNAUTHORIZED"),
        "{text}"
    );
    assert!(text.contains("explained by login-refused"), "{text}");
    assert_eq!(
        *proxy.targets.lock().unwrap(),
        [format!("{REGISTRY}:443")],
        "one login, tunnelled to the ECR host"
    );
    assert!(!run.stdout.contains("the-token-in-the-secret"));
    assert!(!run.stdout.contains(&b64("AWS:the-token-in-the-secret")));
}

#[test]
#[ignore = "needs prometheus-pushgateway (bash .ci/test)"]
fn a_check_pushes_its_whole_answer_under_its_own_job_and_leaves_the_refreshs_metrics_alone() {
    const JOB: &str = "ecr-refresh-check";
    let gateway = Gateway::start();
    let url = gateway.url();
    let h = Harness::new();
    h.namespaces(&["team-a", "team-b"]);
    let pushing = |namespaces: &'static str| {
        [
            ("ECR_REFRESH_PUSHGATEWAY_URL", url.clone()),
            (
                "ECR_REFRESH_PUSHGATEWAY_LABELS",
                "cluster=prod-eu".to_owned(),
            ),
            ("ECR_REFRESH_NAMESPACES", namespaces.to_owned()),
        ]
    };
    let run_with = |pairs: [(&'static str, String); 3], check_mode: bool| {
        let env: Vec<(&str, &str)> = pairs.iter().map(|(k, v)| (*k, v.as_str())).collect();
        if check_mode {
            check(&h, &env)
        } else {
            h.run(&env)
        }
    };
    let cluster = [("cluster", "prod-eu")];

    run_with(pushing("team-b"), false).expect_code(0);
    let success = gateway
        .value("ecr_refresh_last_success_timestamp_seconds", &cluster)
        .expect("the refresh pushed its success time");

    run_with(pushing("team-*"), true).expect_code(1);
    let value = |name: &str, labels: &[(&str, &str)]| {
        let mut all = cluster.to_vec();
        all.extend_from_slice(labels);
        gateway.value_of_job(JOB, name, &all)
    };
    assert_eq!(
        value("ecr_refresh_check_last_run_exit_code", &[]),
        Some(1.0)
    );
    assert_eq!(value("ecr_refresh_check_namespaces", &[]), Some(2.0));
    assert_eq!(
        value("ecr_refresh_check_namespaces_with_findings", &[]),
        Some(1.0)
    );
    assert_eq!(
        value("ecr_refresh_check_findings", &[("kind", "secret-missing")]),
        Some(1.0)
    );
    assert_eq!(
        value("ecr_refresh_check_findings", &[("kind", "wrong-type")]),
        Some(0.0),
        "every kind is pushed, so an alert on one sees it go back to 0"
    );
    assert_eq!(
        gateway.value("ecr_refresh_last_success_timestamp_seconds", &cluster),
        Some(success),
        "a check leaves the refresh's group alone"
    );
    assert!(
        gateway
            .of_job(JOB, "ecr_refresh_last_success_timestamp_seconds")
            .is_empty(),
        "a check pushes no refresh metric"
    );

    // Once the refresh has written team-a too, the next check's answer replaces the last.
    run_with(pushing("team-*"), false).expect_code(0);
    run_with(pushing("team-*"), true).expect_code(0);
    assert_eq!(
        value("ecr_refresh_check_last_run_exit_code", &[]),
        Some(0.0)
    );
    assert_eq!(
        value("ecr_refresh_check_namespaces_with_findings", &[]),
        Some(0.0)
    );
    assert_eq!(
        value("ecr_refresh_check_findings", &[("kind", "secret-missing")]),
        Some(0.0)
    );
}

// A check judges a Secret with the refresh's own decision (issue 33.1 a to c): where a refresh's
// dry run says a Secret is due, the check reports it, with the refresh's `due` words.

/// The Secret re-seeded as `manager` after `change`, as a hand edit leaves it.
fn edited(h: &Harness, ns: &str, manager: &str, change: impl FnOnce(&mut Value)) {
    let mut secret = h.secret(ns).expect("written");
    secret["metadata"]
        .as_object_mut()
        .expect("metadata")
        .remove("managedFields");
    change(&mut secret);
    h.cluster.seed(Resource::Secrets, secret, manager);
}

/// Go's encoding/json reads `Auths` into the same map as `auths` (later keys winning), so a
/// stale entry for our host there is what the kubelet may pull with: the refresh and the
/// check both call it `entries-changed`, and the refresh moves our host's entry out of it.
#[test]
fn a_stale_entry_for_our_host_under_another_case_of_auths_is_due_and_replaced() {
    let h = Harness::new();
    refreshed(&h, &["team-a"], &[]);
    let foreign = r#"{ "auth" : "Zm9vOmJhcg==" }"#;
    edited(&h, "team-a", "helm", |secret| {
        let text = String::from_utf8(docker_config_bytes(secret)).unwrap();
        let stale = format!(
            r#"{},"Auths":{{"ghcr.io":{foreign},"{REGISTRY}":{{"username":"AWS","password":"stale","auth":"{}"}}}}}}"#,
            text.strip_suffix('}').unwrap(),
            b64("AWS:stale")
        );
        secret["data"][".dockerconfigjson"] = json!(b64(&stale));
    });

    // With RENEW_BEFORE under a token's life a refresh names the edit, not the expiry.
    let renew = [("ECR_REFRESH_RENEW_BEFORE", "8h")];
    let (due, run) = due_and_check(&h, "team-a", &renew);

    assert_eq!(due, "entries-changed");
    run.expect_code(1);
    assert_eq!(run.finding_kinds("team-a"), ["entries-changed"]);

    let refresh = h.run(&renew);
    refresh.expect_code(0);
    assert_eq!(refresh.outcome("team-a"), "updated", "{}", refresh.stdout);
    let secret = h.secret("team-a").unwrap();
    let text = String::from_utf8(docker_config_bytes(&secret)).unwrap();
    let value = docker_config(&secret);
    // What the kubelet reads for our host: the one entry under any case of `auths`.
    for (key, entries) in value.as_object().unwrap() {
        if key.eq_ignore_ascii_case("auths") && key != "auths" {
            assert!(entries.get(REGISTRY).is_none(), "{text}");
        }
    }
    let fresh = h.ecr.passwords_issued().last().unwrap().clone();
    assert_eq!(password(&secret, REGISTRY), fresh);
    assert_eq!(
        value["auths"][REGISTRY]["auth"],
        b64(&format!("AWS:{fresh}"))
    );
    assert!(!text.contains("stale"), "{text}");
    // Another host's entry stays where it was, byte for byte.
    assert!(
        text.contains(&format!(r#""Auths":{{"ghcr.io":{foreign}}}"#)),
        "{text}"
    );
    check(&h, &renew).expect_code(0);
}

/// A dry run's `due` for `ns`, and the check's findings there, with the same environment.
fn due_and_check(h: &Harness, ns: &str, env: &[(&str, &str)]) -> (String, Run) {
    let mut dry = env.to_vec();
    dry.push(("ECR_REFRESH_DRY_RUN", "true"));
    let before = h.secret(ns);
    let refresh = h.run(&dry);
    refresh.expect_code(0);
    assert_eq!(h.secret(ns), before, "a dry run changes nothing");
    let due = refresh.line(ns)["due"]
        .as_str()
        .unwrap_or_else(|| panic!("a dry run says why {ns} is due:\n{}", refresh.stdout))
        .to_owned();
    (due, check(h, env))
}

#[test]
fn a_secret_without_a_recorded_expiry_is_a_finding_where_a_refresh_says_no_expiry() {
    let h = Harness::new();
    h.namespaces(&["old-loop"]);
    // What the old `kubectl create secret docker-registry` loop left: a week-old token, no record.
    let config = json!({"auths": {REGISTRY: {
        "username": "AWS", "password": "a-week-old-token", "auth": b64("AWS:a-week-old-token")}}});
    h.seed_secret(
        "old-loop",
        "kubectl-create",
        json!({"type": "kubernetes.io/dockerconfigjson",
               "data": {".dockerconfigjson": b64(&config.to_string())}}),
    );

    let (due, run) = due_and_check(&h, "old-loop", &[]);

    assert_eq!(due, "no-expiry");
    run.expect_code(1);
    // Its entry is not one ecr-refresh recorded as its own: the refresh's next reason.
    assert_eq!(
        run.finding_kinds("old-loop"),
        ["no-expiry", "missing-registry"]
    );
    assert!(
        run.findings("old-loop").starts_with("no-expiry: "),
        "{}",
        run.findings("old-loop")
    );
    assert_eq!(run.line("old-loop")["due"], due.as_str());
}

#[test]
fn a_forged_far_future_expiry_is_a_finding_where_a_refresh_says_implausible_expiry() {
    let h = Harness::new();
    refreshed(&h, &["frozen"], &[]);
    edited(&h, "frozen", "kubectl-edit", |s| {
        s["metadata"]["annotations"]["ecr-refresh/token-expires-at"] =
            json!("9999-12-31T23:59:59Z");
    });

    let (due, run) = due_and_check(&h, "frozen", &[]);

    assert_eq!(
        due,
        "implausible-expiry 9999-12-31T23:59:59Z (a token lives 12h)"
    );
    run.expect_code(1);
    assert_eq!(run.finding_kinds("frozen"), ["implausible-expiry"]);
    assert!(
        run.findings("frozen").starts_with(&format!("{due}: ")),
        "{}",
        run.findings("frozen")
    );
    assert_eq!(run.line("frozen")["due"], due.as_str());
}

#[test]
fn our_entry_edited_by_hand_is_a_finding_where_a_refresh_says_entries_changed() {
    let h = Harness::new();
    refreshed(&h, &["edited", "untouched"], &[]);
    edited(&h, "edited", "kubectl-edit", |s| {
        let text = String::from_utf8(docker_config_bytes(s)).expect("UTF-8");
        let ours = password(s, REGISTRY);
        assert!(text.contains(&ours), "{text}");
        s["data"][".dockerconfigjson"] = json!(b64(&text.replace(&ours, "typed-by-hand")));
    });
    // With RENEW_BEFORE under a token's life a refresh names the edit, not the expiry.
    let renew = [("ECR_REFRESH_RENEW_BEFORE", "8h")];

    let (due, run) = due_and_check(&h, "edited", &renew);

    assert_eq!(due, "entries-changed");
    run.expect_code(1);
    assert_eq!(run.finding_kinds("edited"), ["entries-changed"]);
    assert_eq!(run.line("edited")["due"], due.as_str());
    assert_eq!(run.outcome("untouched"), "ok");

    // With the default RENEW_BEFORE (every run rewrites every Secret) the edit is still a
    // finding: pods pull with the edited password until the next run.
    let run = check(&h, &[]);
    run.expect_code(1);
    assert_eq!(run.finding_kinds("edited"), ["entries-changed"]);
    assert_eq!(run.outcome("untouched"), "ok");
}

#[test]
fn a_check_stops_at_its_deadline_between_namespaces_as_a_refresh_does() {
    let h = Harness::new();
    let names = ["a-slow", "b-undone", "c-undone"];
    refreshed(&h, &names, &[]);
    h.cluster.add_fault(fake_cluster::Fault::slow(
        Some("GET"),
        "/namespaces/a-slow/secrets/",
        Duration::from_secs(4),
    ));

    // One at a time: a-slow is in flight at the deadline and finishes within the grace; the
    // others are never started.
    let started = std::time::Instant::now();
    let run = check(
        &h,
        &[
            ("ECR_REFRESH_NAMESPACES", "a-slow,b-undone,c-undone"),
            ("ECR_REFRESH_CONCURRENCY", "1"),
            ("ECR_REFRESH_TIMEOUT", "1s"),
        ],
    );

    run.expect_code(1);
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(run.outcome("a-slow"), "ok");
    assert_eq!(run.summary()["namespaces"], 1, "{}", run.stdout);
    assert_eq!(run.summary()["unchecked"], 2, "{}", run.stdout);
    let message: Value =
        serde_json::from_str(&std::fs::read_to_string(h.termination_log()).unwrap()).unwrap();
    assert_eq!(message["unchecked"], 2);
}

#[test]
fn a_selection_that_matches_nothing_is_a_warning_and_exit_1_in_both_modes() {
    let h = Harness::new();
    refreshed(&h, &["team-a"], &[]);
    // A typo in the selector: no namespace carries `tema=a`.
    let typo = [("ECR_REFRESH_NAMESPACE_SELECTOR", "tema=a")];

    let run = h.run(&typo);
    run.expect_code(1);
    assert_eq!(run.summary()["level"], "WARN", "{}", run.stdout);
    assert_eq!(run.summary()["namespaces"], 0);
    assert!(
        run.summary()["message"]
            .as_str()
            .unwrap()
            .starts_with("no namespace was selected"),
        "{}",
        run.stdout
    );

    let run = check(&h, &typo);
    run.expect_code(1);
    assert_eq!(run.summary()["level"], "WARN", "{}", run.stdout);
    let message = run.summary()["message"].as_str().unwrap();
    assert!(
        message.starts_with("no namespace was selected"),
        "{message}"
    );
    assert!(!run.stdout.contains("every namespace can pull"));
}

#[test]
fn a_check_refused_the_secret_list_reads_each_secret_by_name_with_the_same_findings() {
    let h = Harness::new();
    refreshed(&h, &["team-a"], &[]);
    h.namespaces(&["team-b"]);
    let by_list = check(&h, &[]);
    h.cluster
        .add_fault(fake_cluster::Fault::new("GET", "^/api/v1/secrets$", 403));
    let before = h.cluster.requests().len();

    let by_name = check(&h, &[]);

    assert_eq!(by_list.lines[0]["read"], "list");
    assert_eq!(by_name.lines[0]["read"], "per-namespace");
    for run in [&by_list, &by_name] {
        run.expect_code(1);
        assert_eq!(run.outcome("team-a"), "ok");
        assert_eq!(run.outcome("team-b"), "findings");
    }
    assert_eq!(
        by_list.line("team-b")["findings"],
        by_name.line("team-b")["findings"]
    );
    let gets = h.cluster.requests()[before..]
        .iter()
        .filter(|r| r.path.ends_with(&format!("/secrets/{SECRET}")))
        .count();
    assert_eq!(gets, 2, "one GET per namespace, after the refused list");
}

/// A pod stuck for want of the Secret, that ECR_REFRESH_EVICT_STUCK_PODS would recover (a
/// ReplicaSet's, created before its ServiceAccount listed the Secret): the finding says so.
/// A bare pod in the same state: it doesn't, as the eviction would leave it
/// (`pods::recovery`, the one decision of both).
#[test]
fn a_stuck_pod_the_eviction_would_recover_is_pointed_at_the_option() {
    let h = Harness::new();
    refreshed(&h, &["team-a", "team-b"], &[]);
    let image = format!("{REGISTRY}/web:1");
    let unauthorized = json!({
        "phase": "Pending",
        "containerStatuses": [{
            "name": "app", "image": image, "imageID": "", "ready": false, "restartCount": 0,
            "state": {"waiting": {
                "reason": "ImagePullBackOff",
                "message": format!("Back-off pulling image \"{image}\": ErrImagePull: failed to \
                    pull and unpack image \"{image}\": failed to resolve reference \"{image}\": \
                    pulling from host {REGISTRY} failed with status code [manifests 1]: 401 Unauthorized")
            }}
        }]
    });
    for (ns, owner) in [("team-a", Some("web-7d9f8")), ("team-b", None)] {
        // Created before its ServiceAccount lists the Secret: it lists none itself.
        pod(&h, ns, "web-1", &image, owner);
        wire_default(&h, ns);
        h.cluster.set_pod_status(ns, "web-1", unauthorized.clone());
    }

    let run = check(&h, &[("ECR_REFRESH_MODE", "check")]);

    run.expect_code(1);
    let a = run.findings("team-a");
    assert!(
        a.contains("ECR_REFRESH_EVICT_STUCK_PODS=true would recover it"),
        "{a}"
    );
    let b = run.findings("team-b");
    assert!(
        b.contains("pull-stuck") || b.contains("ImagePullBackOff"),
        "{b}"
    );
    assert!(
        !b.contains("ECR_REFRESH_EVICT_STUCK_PODS"),
        "a bare pod: {b}"
    );
}

/// Check and the eviction agree, on both ways the Secrets are read (one list, which keeps
/// items lean, or a GET per namespace): for each kind of stuck pod, the check says
/// "ECR_REFRESH_EVICT_STUCK_PODS=true would recover it" exactly where a dry run with the
/// option says `would-evict`. One namespace per pod; every ServiceAccount lists the Secret.
#[test]
fn check_and_the_eviction_agree_on_both_read_paths() {
    let h = Harness::new();
    let image = format!("{REGISTRY}/web:1");
    let tools = format!("{REGISTRY}/tools:1");
    let message = format!(
        "Back-off pulling image \"{image}\": ErrImagePull: failed to pull and unpack image \
         \"{image}\": failed to resolve image: unexpected status from HEAD request to \
         https://{REGISTRY}/v2/web/manifests/1: 401 Unauthorized"
    );
    let waiting = json!({"waiting": {"reason": "ImagePullBackOff", "message": message}});
    let running = json!({"running": {"startedAt": "2026-01-01T00:00:00Z"}});
    let status = |name: &str, image: &str, state: &Value| {
        json!({"name": name, "image": image, "imageID": "", "ready": false,
            "restartCount": 0, "state": state})
    };
    // (namespace, the pod, its status, whether an eviction recovers it)
    let early = pods::pod("ev-early", "web-1", &image, Some("web-7d9f8"));
    let mut lists = pods::pod("ev-lists", "web-1", &image, Some("web-7d9f8"));
    lists["spec"]["imagePullSecrets"] = json!([{"name": SECRET}]);
    let bare = pods::pod("ev-bare", "web-1", &image, None);
    let mut job = pods::pod("ev-job", "web-1", &image, Some("nightly"));
    job["metadata"]["ownerReferences"][0]["apiVersion"] = json!("batch/v1");
    job["metadata"]["ownerReferences"][0]["kind"] = json!("Job");
    let mut debug = pods::pod("ev-debug", "web-1", &image, Some("web-7d9f8"));
    debug["spec"]["ephemeralContainers"] =
        json!([{"name": "debugger", "image": tools, "targetContainerName": "app"}]);
    let stuck = json!({"phase": "Pending", "containerStatuses": [status("app", &image, &waiting)]});
    let rows = [
        ("ev-early", early, stuck.clone(), true),
        ("ev-lists", lists, stuck.clone(), false),
        ("ev-bare", bare, stuck.clone(), false),
        ("ev-job", job, stuck.clone(), false),
        (
            "ev-debug",
            debug,
            json!({"phase": "Running",
                "containerStatuses": [status("app", &image, &running)],
                "ephemeralContainerStatuses": [status("debugger", &tools, &waiting)]}),
            false,
        ),
    ];
    let names: Vec<&str> = rows.iter().map(|(ns, ..)| *ns).collect();
    h.namespaces(&names);
    for (ns, pod, status, _) in &rows {
        h.cluster
            .seed(Resource::Pods, pod.clone(), "kube-controller-manager");
        h.cluster.set_pod_status(ns, "web-1", status.clone());
        wire_default(&h, ns);
    }
    // The Secret written after the pods were created (times are whole seconds): a pod that
    // lists it pulled while it was missing.
    std::thread::sleep(Duration::from_millis(1100));
    h.run(&[]).expect_code(0);

    let by_list = check(&h, &[]);
    let literal = names.join(",");
    let by_name = check(&h, &[("ECR_REFRESH_NAMESPACES", literal.as_str())]);
    assert_eq!(by_list.lines[0]["read"], "list", "{}", by_list.stdout);
    assert_eq!(
        by_name.lines[0]["read"], "per-namespace",
        "{}",
        by_name.stdout
    );
    let dry = h.run(&[
        ("ECR_REFRESH_DRY_RUN", "true"),
        ("ECR_REFRESH_EVICT_STUCK_PODS", "true"),
    ]);
    dry.expect_code(0);

    let mut seen = Vec::new();
    let mut expected = Vec::new();
    for (ns, _, _, recovers) in &rows {
        let recover = |run: &Run| {
            run.findings(ns)
                .contains("ECR_REFRESH_EVICT_STUCK_PODS=true would recover it")
        };
        let evicts = dry
            .lines
            .iter()
            .any(|l| l["namespace"] == *ns && l["pod"] == "web-1" && l["outcome"] == "would-evict");
        seen.push((*ns, recover(&by_list), recover(&by_name), evicts));
        expected.push((*ns, *recovers, *recovers, *recovers));
    }
    assert_eq!(
        seen, expected,
        "(namespace, check by list, check by GET, dry-run would-evict)\nlist:\n{}\nGET:\n{}\n\
         dry run:\n{}",
        by_list.stdout, by_name.stdout, dry.stdout
    );
    for run in [&by_list, &by_name] {
        let debug = run.findings("ev-debug");
        assert!(
            debug.contains(&tools),
            "the debug container is still a finding: {debug}"
        );
    }
}

/// Self-hosting from ECR (docs/src/install/image.md): the install's own namespace, where a
/// pod of ecr-refresh's CronJob lists the Secret to pull ecr-refresh's own image.
const OWN: &str = "ecr-refresh";
const INSTALL: (&str, &str) = ("ECR_REFRESH_INSTALL", "ecr-refresh/ecr-refresh");

/// A pod of the install's CronJob, finished as most of them are, that lists `secrets`.
fn own_pod(h: &Harness, name: &str, secrets: &[&str]) {
    let mut body = pods::pod(
        OWN,
        name,
        &format!("{REGISTRY}/ecr-refresh/ecr-refresh:0.2.0"),
        None,
    );
    body["metadata"]["ownerReferences"] = json!([{
        "apiVersion": "batch/v1", "kind": "Job", "name": "ecr-refresh-29000000",
        "uid": "0b6e4c7a-0000-4000-8000-000000000002", "controller": true
    }]);
    body["spec"]["serviceAccountName"] = json!("ecr-refresh");
    body["spec"]["imagePullSecrets"] = secrets.iter().map(|s| json!({"name": s})).collect();
    h.cluster
        .seed(Resource::Pods, body, "kube-controller-manager");
    h.cluster
        .set_pod_status(OWN, name, json!({"phase": "Succeeded"}));
}

/// The requests a check sent about the install's own namespace, from the `from`th.
fn own_requests(h: &Harness, from: usize) -> Vec<String> {
    h.cluster
        .requests()
        .into_iter()
        .skip(from)
        .filter(|r| r.path.contains(&format!("/namespaces/{OWN}/")))
        .map(|r| format!("{} {}", r.method, r.path))
        .collect()
}

#[test]
fn the_installs_own_namespace_unselected_while_its_pods_list_the_secret_is_a_finding() {
    let h = Harness::new();
    h.namespaces(&[OWN]);
    refreshed(&h, &["team-a"], &[("ECR_REFRESH_NAMESPACES", "team-a")]);
    own_pod(&h, "ecr-refresh-29000000-x7k2p", &[SECRET]);
    let before = h.cluster.requests().len();

    // Not among the names.
    let run = check(&h, &[("ECR_REFRESH_NAMESPACES", "team-a"), INSTALL]);
    run.expect_code(1);
    assert_eq!(run.outcome("team-a"), "ok");
    assert_eq!(run.finding_kinds(OWN), ["own-namespace-not-selected"]);
    let finding = run.findings(OWN);
    for says in [
        "Job/ecr-refresh-29000000 (pod ecr-refresh-29000000-x7k2p)",
        &format!("lists {SECRET} in imagePullSecrets"),
        "this install's own namespace (ecr-refresh/ecr-refresh)",
        "no run writes the Secret there",
        "add ecr-refresh to ECR_REFRESH_NAMESPACES",
    ] {
        assert!(finding.contains(says), "{says:?} in {finding}");
    }
    let message: Value =
        serde_json::from_str(&std::fs::read_to_string(h.termination_log()).unwrap()).unwrap();
    assert_eq!(message["namespaces_with_findings"], json!([OWN]));
    assert_eq!(message["findings"]["own-namespace-not-selected"], 1);
    assert_eq!(
        run.summary()["namespaces"],
        1,
        "the own namespace is not counted as selected"
    );
    no_writes(&h, before);
    // Its pods, every phase (the CronJob's are mostly finished), and its ServiceAccount.
    assert_eq!(
        own_requests(&h, before),
        [
            format!("GET /api/v1/namespaces/{OWN}/pods"),
            format!("GET /api/v1/namespaces/{OWN}/serviceaccounts/ecr-refresh"),
        ]
    );

    // Taken out by an exclusion.
    let run = check(&h, &[("ECR_REFRESH_EXCLUDE_NAMESPACES", "ecr-*"), INSTALL]);
    run.expect_code(1);
    assert_eq!(run.finding_kinds(OWN), ["own-namespace-not-selected"]);
    assert!(
        run.findings(OWN)
            .contains("take it out of ECR_REFRESH_EXCLUDE_NAMESPACES"),
        "{}",
        run.findings(OWN)
    );
}

#[test]
fn the_installs_service_account_listing_the_secret_in_its_unselected_namespace_is_a_finding() {
    let h = Harness::new();
    h.namespaces(&[OWN]);
    refreshed(&h, &["team-a"], &[("ECR_REFRESH_NAMESPACES", "team-a")]);
    h.cluster.seed(
        Resource::ServiceAccounts,
        json!({"metadata": {"name": "ecr-refresh", "namespace": OWN},
               "imagePullSecrets": [{"name": SECRET}]}),
        "kubectl",
    );

    let run = check(&h, &[("ECR_REFRESH_NAMESPACES", "team-a"), INSTALL]);

    run.expect_code(1);
    assert_eq!(run.finding_kinds(OWN), ["own-namespace-not-selected"]);
    assert!(
        run.findings(OWN).contains(&format!(
            "ServiceAccount ecr-refresh lists {SECRET} in imagePullSecrets"
        )),
        "{}",
        run.findings(OWN)
    );
}

#[test]
fn the_installs_own_namespace_is_no_finding_when_selected_unwired_or_unknown() {
    let h = Harness::new();
    refreshed(
        &h,
        &["team-a", OWN],
        &[("ECR_REFRESH_NAMESPACES", "team-a,ecr-refresh")],
    );
    own_pod(&h, "ecr-refresh-29000000-x7k2p", &[SECRET]);

    // Selected: its Secret is checked as any other, and is fine.
    let run = check(
        &h,
        &[("ECR_REFRESH_NAMESPACES", "team-a,ecr-refresh"), INSTALL],
    );
    run.expect_code(0);
    assert_eq!(run.outcome(OWN), "ok");

    // Unselected, but no pod there lists the Secret, nor its ServiceAccount.
    let h = Harness::new();
    h.namespaces(&[OWN]);
    refreshed(&h, &["team-a"], &[("ECR_REFRESH_NAMESPACES", "team-a")]);
    own_pod(&h, "ecr-refresh-29000000-x7k2p", &["ghcr-pull"]);
    let run = check(&h, &[("ECR_REFRESH_NAMESPACES", "team-a"), INSTALL]);
    run.expect_code(0);
    assert!(
        run.lines.iter().all(|l| l["namespace"] != OWN),
        "{}",
        run.stdout
    );

    // No install name to go by (a check from a laptop without ECR_REFRESH_INSTALL, or one
    // that is a user name): nothing is read there.
    own_pod(&h, "ecr-refresh-29000001-b4n8q", &[SECRET]);
    for env in [vec![], vec![("ECR_REFRESH_INSTALL", "alice@example.com")]] {
        let before = h.cluster.requests().len();
        let run = check(
            &h,
            &[[("ECR_REFRESH_NAMESPACES", "team-a")].as_slice(), &env].concat(),
        );
        run.expect_code(0);
        assert!(own_requests(&h, before).is_empty(), "{env:?}");
    }
}
