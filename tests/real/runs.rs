//! The built binary against a real kube-apiserver (tests/control-plane), as ecr-refresh's
//! ServiceAccount with a TokenRequest token, under the RBAC and admission policy of the
//! manifests installed by `kubectl apply -k`: the scenarios of tests/fake/refresh.rs that depend
//! on what the server does, answered by the real one. ECR stays the fake.
//!
//! The runs go through a recording proxy (tests/common/proxy.rs), which also makes the
//! in-flight delete: the Secret deleted right after the server answered our GET.
//!
//! The tests take turns on the installs' control planes (`common::real::installs_keeping`),
//! with manifests/ and the service-accounts component installed once per server; each test
//! uses namespaces of its own and names them (ECR_REFRESH_NAMESPACES: literal names are read
//! one namespace at a time, a glob by the one list of every Secret). A turn is one test at a
//! time on its server, so the server's request counters are the test's own. The namespaced
//! install takes a scrubbed turn (its Roles would be moot beside the ClusterRole).

use crate::common;

use std::sync::OnceLock;

use common::manifests::{copy, cronjob_env};
use common::real::{
    RealHarness, SERVICE_ACCOUNT, Turn, admin, create, env, get, install, installs,
    installs_keeping, namespaces, ok, send, wait_until_enforced, write_requests,
};
use common::*;
use control_plane::ControlPlane;
use serde_json::{Value, json};

/// A turn on an installs' control plane (`common::real::installs_keeping`) with manifests/
/// and the service-accounts component installed and in force, and the CronJob's
/// environment. This module's tests share the install, each in namespaces of its own, and a
/// turn is one test at a time: the write counters of /metrics are the test's own.
fn installed() -> (Turn, &'static [(String, String)]) {
    static ENV: OnceLock<Vec<(String, String)>> = OnceLock::new();
    let turn = installs_keeping("runs: manifests/ installed", |cp| {
        let manifests = copy();
        let root = manifests.path().join("manifests");
        let rendered = install(cp, &cp.assets().join("kubectl"), &root, "", true);
        wait_until_enforced(cp, "default");
        ENV.get_or_init(|| cronjob_env(&common::manifests::yaml(&rendered)));
    });
    let env = ENV.get().expect("set when the manifests were installed");
    (turn, env)
}

fn data_text(secret: &Value) -> String {
    String::from_utf8(docker_config_bytes(secret)).expect("UTF-8")
}

#[test]
#[ignore = "needs KUBEBUILDER_ASSETS (bash .ci/test)"]
fn a_first_run_creates_in_fresh_namespaces_and_a_second_keeps_every_uid() {
    let (turn, shipped) = installed();
    let cp: &ControlPlane = &turn;
    namespaces(cp, &["fresh-a", "fresh-b"]);
    let h = RealHarness::new(cp);

    let first = h.run(&env(shipped, "fresh-*", &[]));
    first.expect_code(0);
    let uids: Vec<String> = ["fresh-a", "fresh-b"]
        .iter()
        .map(|ns| {
            assert_eq!(first.outcome(ns), "created", "{}", first.stdout);
            let secret = h.secret(ns).expect("created");
            assert_eq!(secret["type"], "kubernetes.io/dockerconfigjson");
            assert!(
                h.ecr
                    .passwords_issued()
                    .contains(&password(&secret, REGISTRY))
            );
            uid(&secret)
        })
        .collect();

    // 12h or more rewrites every Secret.
    let second = h.run(&env(
        shipped,
        "fresh-*",
        &[("ECR_REFRESH_RENEW_BEFORE", "12h")],
    ));
    second.expect_code(0);
    for (ns, before) in ["fresh-a", "fresh-b"].iter().zip(&uids) {
        assert_eq!(second.outcome(ns), "updated", "{}", second.stdout);
        assert_eq!(
            &uid(&h.secret(ns).unwrap()),
            before,
            "{ns}: updated in place"
        );
    }
    assert_eq!(h.ecr.passwords_issued().len(), 2, "one token per run");
}

#[test]
#[ignore = "needs KUBEBUILDER_ASSETS (bash .ci/test)"]
fn with_nothing_due_a_run_writes_nothing() {
    let (turn, shipped) = installed();
    let cp: &ControlPlane = &turn;
    namespaces(cp, &["idle-a", "idle-b"]);
    let h = RealHarness::new(cp);
    h.run(&env(shipped, "idle-a,idle-b", &[])).expect_code(0);
    let stored: Vec<Value> = ["idle-a", "idle-b"]
        .iter()
        .map(|ns| h.secret(ns).unwrap())
        .collect();
    let writes_before = h.proxy.writes().len();
    let calls_before = h.ecr.calls().len();
    let counted_before = write_requests(cp, &["secrets", "serviceaccounts", "events"]);
    assert!(counted_before > 0, "the first run's writes are counted");

    let run = h.run(&env(
        shipped,
        "idle-a,idle-b",
        &[("ECR_REFRESH_RENEW_BEFORE", "8h")],
    ));

    run.expect_code(0);
    let counted = write_requests(cp, &["secrets", "serviceaccounts", "events"]) - counted_before;
    assert_eq!(counted, 0, "the server counted writes: {}", run.stdout);
    assert_eq!(h.proxy.writes().len(), writes_before, "no write request");
    assert_eq!(h.ecr.calls().len(), calls_before, "no ECR call");
    for (ns, before) in ["idle-a", "idle-b"].iter().zip(&stored) {
        assert_eq!(run.outcome(ns), "fresh");
        let now = h.secret(ns).unwrap();
        assert_eq!(
            now["metadata"]["resourceVersion"],
            before["metadata"]["resourceVersion"]
        );
    }
}

#[test]
#[ignore = "needs KUBEBUILDER_ASSETS (bash .ci/test)"]
fn a_secret_from_the_kubectl_loop_is_adopted_in_place_without_its_last_applied_copy() {
    let (turn, shipped) = installed();
    let cp: &ControlPlane = &turn;
    namespaces(cp, &["legacy"]);
    let made = admin(
        cp,
        &[
            "create",
            "secret",
            "docker-registry",
            SECRET,
            "-n",
            "legacy",
            &format!("--docker-server=https://{REGISTRY}"),
            "--docker-username=AWS",
            "--docker-password=OLD-PASSWORD",
            "--dry-run=client",
            "-o",
            "yaml",
        ],
        "",
    );
    admin(cp, &["apply", "-f", "-"], &made);
    let h = RealHarness::new(cp);
    let old = h.secret("legacy").unwrap();
    assert!(
        old["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"]
            .as_str()
            .is_some_and(
                |a| a.contains(&b64(&String::from_utf8(docker_config_bytes(&old)).unwrap()))
            ),
        "kubectl's copy of the old password: {old}"
    );

    let run = h.run(&env(shipped, "legacy", &[]));

    run.expect_code(0);
    assert_eq!(run.outcome("legacy"), "updated", "{}", run.stdout);
    let secret = h.secret("legacy").unwrap();
    assert_eq!(uid(&secret), uid(&old), "adopted in place");
    assert!(
        secret["metadata"]["annotations"]
            .get("kubectl.kubernetes.io/last-applied-configuration")
            .is_none(),
        "{secret}"
    );
    assert!(!data_text(&secret).contains("OLD-PASSWORD"));
    assert!(!secret.to_string().contains(&b64("AWS:OLD-PASSWORD")));
    // The removal was the JSON patch, admitted by the policy.
    assert!(
        h.proxy.exchanges().iter().any(|e| e.method == "PATCH"
            && e.content_type.as_deref() == Some("application/json-patch+json")
            && e.status == 200),
        "the last-applied removal"
    );
}

#[test]
#[ignore = "needs KUBEBUILDER_ASSETS (bash .ci/test)"]
fn others_entries_labels_annotations_and_data_keys_stay() {
    let (turn, shipped) = installed();
    let cp: &ControlPlane = &turn;
    namespaces(cp, &["shared"]);
    let foreign = r#"{"auth":"dXNlcjpwYXNz",  "email" : "ci@example.com"}"#;
    let value = format!(r#"{{"auths":{{"ghcr.io":{foreign},"{REGISTRY}":{{"auth":"b2xk"}}}}}}"#);
    create(
        cp,
        &[json!({ "apiVersion": "v1", "kind": "Secret",
            "metadata": { "name": SECRET, "namespace": "shared",
                "labels": { "team": "a" }, "annotations": { "team.example.com/owner": "alice" } },
            "type": "kubernetes.io/dockerconfigjson",
            "data": { ".dockerconfigjson": b64(&value), "extra": b64("keep me") } })],
    );
    let h = RealHarness::new(cp);

    let run = h.run(&env(shipped, "shared", &[]));

    run.expect_code(0);
    assert_eq!(run.outcome("shared"), "updated", "{}", run.stdout);
    assert_eq!(run.line("shared")["kept_entries"], 1);
    let secret = h.secret("shared").unwrap();
    assert!(
        data_text(&secret).contains(&format!(r#""ghcr.io":{foreign}"#)),
        "{secret}"
    );
    assert_ne!(password(&secret, REGISTRY), "old");
    assert_eq!(secret["data"]["extra"], b64("keep me"));
    assert_eq!(secret["metadata"]["labels"]["team"], "a");
    assert_eq!(
        secret["metadata"]["labels"]["app.kubernetes.io/managed-by"],
        "ecr-refresh"
    );
    assert_eq!(
        secret["metadata"]["annotations"]["team.example.com/owner"],
        "alice"
    );
}

#[test]
#[ignore = "needs KUBEBUILDER_ASSETS (bash .ci/test)"]
fn a_terminating_namespace_is_skipped_listed_or_named() {
    let (turn, shipped) = installed();
    let cp: &ControlPlane = &turn;
    namespaces(cp, &["term-going", "term-live"]);
    create(
        cp,
        &[json!({ "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": { "name": "held", "namespace": "term-going",
                          "finalizers": ["ecr-refresh.test/held"] } })],
    );
    // The ConfigMap's finalizer holds the namespace Terminating: the namespace controller
    // deletes the ConfigMap, and waits for it forever. (The next scrub removes the finalizer.)
    admin(
        cp,
        &["delete", "namespace", "term-going", "--wait=false"],
        "",
    );
    let going = get(cp, "namespace", "", "term-going").unwrap();
    assert_eq!(going["status"]["phase"], "Terminating");
    let h = RealHarness::new(cp);

    let listed = h.run(&env(shipped, "term-*", &[]));
    let named = h.run(&env(shipped, "term-going", &[]));

    listed.expect_code(0);
    named.expect_code(0);
    for run in [&listed, &named] {
        assert_eq!(run.outcome("term-going"), "skipped", "{}", run.stdout);
        assert_eq!(run.line("term-going")["reason"], "namespace is terminating");
    }
    assert_eq!(listed.outcome("term-live"), "created");
    assert!(h.secret("term-going").is_none());
    // Named, the real server's refusal of the create is what tells.
    let refusal = h
        .proxy
        .exchanges()
        .into_iter()
        .find(|e| e.method == "POST" && e.path == "/api/v1/namespaces/term-going/secrets")
        .expect("the create in the terminating namespace");
    assert_eq!(refusal.status, 403, "{}", refusal.response_body);
    println!("the real server's refusal: {}", refusal.response_body);
}

#[test]
#[ignore = "needs KUBEBUILDER_ASSETS (bash .ci/test)"]
fn the_service_accounts_component_appends_the_secret_to_default() {
    let (turn, shipped) = installed();
    let cp: &ControlPlane = &turn;
    assert!(
        shipped
            .iter()
            .any(|(k, v)| k == "ECR_REFRESH_SERVICE_ACCOUNTS" && v == "default"),
        "{shipped:?}"
    );
    namespaces(cp, &["accounts-a", "accounts-b"]);
    let h = RealHarness::new(cp);

    let first = h.run(&env(shipped, "accounts-*", &[]));
    let second = h.run(&env(
        shipped,
        "accounts-*",
        &[("ECR_REFRESH_RENEW_BEFORE", "12h")],
    ));

    first.expect_code(0);
    second.expect_code(0);
    for ns in ["accounts-a", "accounts-b"] {
        let account = get(cp, "serviceaccount", ns, "default").unwrap();
        assert_eq!(
            account["imagePullSecrets"],
            json!([{ "name": "team-creds" }, { "name": SECRET }]),
            "{ns}: appended once, the team's entry kept"
        );
    }
    let patches: Vec<u16> = h
        .proxy
        .exchanges()
        .into_iter()
        .filter(|e| e.method == "PATCH" && e.path.ends_with("/serviceaccounts/default"))
        .map(|e| e.status)
        .collect();
    assert_eq!(patches, [200, 200], "one patch per namespace, admitted");
}

#[test]
#[ignore = "needs KUBEBUILDER_ASSETS (bash .ci/test)"]
fn a_dry_run_stores_nothing() {
    let (turn, shipped) = installed();
    let cp: &ControlPlane = &turn;
    namespaces(cp, &["dry-fresh", "dry-stored"]);
    let h = RealHarness::new(cp);
    h.run(&env(shipped, "dry-stored", &[])).expect_code(0);
    let stored = h.secret("dry-stored").unwrap();
    let account = get(cp, "serviceaccount", "dry-fresh", "default").unwrap();

    let run = h.run(&env(
        shipped,
        "dry-*",
        &[
            ("ECR_REFRESH_DRY_RUN", "true"),
            ("ECR_REFRESH_RENEW_BEFORE", "12h"),
        ],
    ));

    run.expect_code(0);
    assert_eq!(run.outcome("dry-fresh"), "would-create", "{}", run.stdout);
    assert_eq!(run.outcome("dry-stored"), "would-update");
    assert!(h.secret("dry-fresh").is_none());
    assert_eq!(
        h.secret("dry-stored").unwrap()["metadata"]["resourceVersion"],
        stored["metadata"]["resourceVersion"]
    );
    assert_eq!(
        get(cp, "serviceaccount", "dry-fresh", "default").unwrap()["metadata"]["resourceVersion"],
        account["metadata"]["resourceVersion"]
    );
    let dry: Vec<(String, String, u16)> = h
        .proxy
        .writes()
        .into_iter()
        .filter(|e| e.query.contains("dryRun=All"))
        .map(|e| (e.method, e.path, e.status))
        .collect();
    assert!(
        dry.iter()
            .any(|(m, p, s)| m == "POST" && p.ends_with("/dry-fresh/secrets") && *s == 201),
        "{dry:?}"
    );
    assert!(
        dry.iter().any(|(m, _, s)| m == "PATCH" && *s == 200),
        "{dry:?}"
    );
}

#[test]
#[ignore = "needs KUBEBUILDER_ASSETS (bash .ci/test)"]
fn an_opaque_secret_under_our_name_fails_with_a_warning_event_kubectl_shows() {
    let (turn, shipped) = installed();
    let cp: &ControlPlane = &turn;
    namespaces(cp, &["opaque-a", "opaque-b"]);
    create(
        cp,
        &[json!({ "apiVersion": "v1", "kind": "Secret",
            "metadata": { "name": SECRET, "namespace": "opaque-a" },
            "type": "Opaque", "data": { "token": b64("someone else's") } })],
    );
    let h = RealHarness::new(cp);
    let before = h.secret("opaque-a").unwrap();

    let run = h.run(&env(shipped, "opaque-*", &[]));

    run.expect_code(1);
    assert_eq!(run.outcome("opaque-a"), "failed", "{}", run.stdout);
    assert_eq!(run.outcome("opaque-b"), "created");
    let after = h.secret("opaque-a").unwrap();
    assert_eq!(
        after["metadata"]["resourceVersion"],
        before["metadata"]["resourceVersion"]
    );
    let table = admin(cp, &["get", "events", "-n", "opaque-a"], "");
    assert!(
        table.contains("Warning") && table.contains("WrongSecretType"),
        "{table}"
    );
    let events: Value = serde_json::from_str(&admin(
        cp,
        &["get", "events", "-n", "opaque-a", "-o", "json"],
        "",
    ))
    .unwrap();
    let events = events["items"].as_array().unwrap();
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["type"], "Warning");
    assert_eq!(events[0]["involvedObject"]["uid"], uid(&before));
    assert!(
        events[0]["message"]
            .as_str()
            .unwrap()
            .contains("type Opaque"),
        "{events:?}"
    );
}

#[test]
#[ignore = "needs KUBEBUILDER_ASSETS (bash .ci/test)"]
fn a_secret_deleted_right_after_our_read_is_recreated_fresh_without_the_deleted_data() {
    let (turn, shipped) = installed();
    let cp: &ControlPlane = &turn;
    namespaces(cp, &["inflight"]);
    create(
        cp,
        &[json!({ "apiVersion": "v1", "kind": "Secret",
            "metadata": { "name": SECRET, "namespace": "inflight" },
            "type": "kubernetes.io/dockerconfigjson",
            "data": { ".dockerconfigjson": b64(r#"{"auths":{"ghcr.io":{"auth":"b2xkOnNlY3JldA=="}}}"#) } })],
    );
    let h = RealHarness::new(cp);
    let old = h.secret("inflight").unwrap();
    let path = format!("/api/v1/namespaces/inflight/secrets/{SECRET}");
    let mut delete = cp.kubectl();
    delete.args(["delete", "secret", SECRET, "-n", "inflight", "--wait=true"]);
    h.proxy.after_answer_to("GET", &path, move || {
        ok(&mut delete, "");
    });

    let run = h.run(&env(shipped, "inflight", &[]));

    run.expect_code(0);
    assert_eq!(run.outcome("inflight"), "recreated", "{}", run.stdout);
    let secret = h.secret("inflight").expect("created fresh");
    assert_ne!(uid(&secret), uid(&old));
    assert_eq!(run.line("inflight")["uid_before"], uid(&old));
    assert_eq!(run.line("inflight")["uid_after"], uid(&secret));
    let auths = docker_config(&secret)["auths"].clone();
    assert!(
        auths.get("ghcr.io").is_none(),
        "nothing of the deleted object: {auths}"
    );
    assert!(
        h.ecr
            .passwords_issued()
            .contains(&password(&secret, REGISTRY))
    );
    let exchanges: Vec<_> = h
        .proxy
        .exchanges()
        .into_iter()
        .filter(|e| e.path.ends_with(SECRET) || e.path.ends_with("/secrets"))
        .collect();
    let statuses: Vec<(&str, u16)> = exchanges
        .iter()
        .map(|e| (e.method.as_str(), e.status))
        .collect();
    assert_eq!(
        statuses,
        [("GET", 200), ("PATCH", 409), ("GET", 404), ("POST", 201)]
    );
    // The real server's answer to the apply naming the deleted uid.
    let conflict: Value = serde_json::from_str(&exchanges[1].response_body).unwrap();
    println!("the real server's 409: {conflict}");
    assert_eq!(conflict["reason"], "Conflict");
    assert_eq!(conflict["code"], 409);
    assert_eq!(
        conflict["message"],
        format!(
            "Operation cannot be fulfilled on secrets \"{SECRET}\": uid mismatch: the provided \
             object specified uid {}, and no existing object was found",
            uid(&old)
        )
    );
}

#[test]
#[ignore = "needs KUBEBUILDER_ASSETS (bash .ci/test)"]
fn a_run_by_glob_reads_every_secret_in_one_list_and_writes_pinned_to_what_it_showed() {
    let (turn, shipped) = installed();
    let cp: &ControlPlane = &turn;
    namespaces(cp, &["listed-a", "listed-b", "listed-c"]);
    for ns in ["listed-a", "listed-b"] {
        create(
            cp,
            &[json!({ "apiVersion": "v1", "kind": "Secret",
                "metadata": { "name": SECRET, "namespace": ns },
                "type": "kubernetes.io/dockerconfigjson",
                "data": { ".dockerconfigjson": b64(r#"{"auths":{"ghcr.io":{"auth":"b2xkOnNlY3JldA=="}}}"#) } })],
        );
    }
    let h = RealHarness::new(cp);
    let kept = h.secret("listed-a").unwrap();
    let deleted = h.secret("listed-b").unwrap();
    // The in-flight delete, on the list path: listed-b's Secret goes right after the list.
    let mut delete = cp.kubectl();
    delete.args(["delete", "secret", SECRET, "-n", "listed-b", "--wait=true"]);
    h.proxy.after_answer_to("GET", "/api/v1/secrets", move || {
        ok(&mut delete, "");
    });

    let run = h.run(&env(
        shipped,
        "listed-*",
        &[("ECR_REFRESH_RENEW_BEFORE", "12h")],
    ));

    run.expect_code(0);
    assert_eq!(run.lines[0]["read"], "list", "{}", run.stdout);
    assert_eq!(run.outcome("listed-a"), "updated");
    assert_eq!(uid(&h.secret("listed-a").unwrap()), uid(&kept), "in place");
    assert!(docker_config(&h.secret("listed-a").unwrap())["auths"]["ghcr.io"].is_object());
    assert_eq!(run.outcome("listed-b"), "recreated");
    assert_eq!(run.line("listed-b")["uid_before"], uid(&deleted));
    assert_eq!(run.outcome("listed-c"), "created");
    let lists: Vec<_> = h
        .proxy
        .exchanges()
        .into_iter()
        .filter(|e| e.path == "/api/v1/secrets")
        .collect();
    assert_eq!(lists.len(), 1, "one list, one page");
    assert_eq!(lists[0].status, 200);
    assert!(
        lists[0]
            .query
            .contains(&format!("fieldSelector=metadata.name%3D{SECRET}")),
        "{}",
        lists[0].query
    );
    // No read per namespace, but the one after the 409 of the deleted uid.
    let secret = |ns: &str| h.statuses(&format!("/namespaces/{ns}/secrets"));
    let pair = |m: &str, s: u16| (m.to_owned(), s);
    assert_eq!(secret("listed-a"), [pair("PATCH", 200)]);
    assert_eq!(
        secret("listed-b"),
        [pair("PATCH", 409), pair("GET", 404), pair("POST", 201)]
    );
    assert_eq!(secret("listed-c"), [pair("POST", 201)]);
}

#[test]
#[ignore = "needs KUBEBUILDER_ASSETS (bash .ci/test)"]
fn the_cluster_role_lists_its_own_secret_and_accounts_by_name_and_nothing_wider() {
    let (turn, _) = installed();
    let cp: &ControlPlane = &turn;
    let token = cp.service_account_token(SERVICE_ACCOUNT.0, SERVICE_ACCOUNT.1);
    let list = |path: &str| send(cp, &token, "GET", path, "application/json", &Value::Null);
    let by_name = format!("/api/v1/secrets?fieldSelector=metadata.name%3D{SECRET}&limit=1");
    let (status, body) = list(&by_name);
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["kind"], "SecretList");
    for refused in [
        "/api/v1/secrets?limit=1".to_owned(),
        "/api/v1/secrets?fieldSelector=metadata.name%3Dother&limit=1".to_owned(),
        "/api/v1/secrets?fieldSelector=metadata.name%21%3Daws-ecr-token&limit=1".to_owned(),
        "/api/v1/namespaces/default/secrets?limit=1".to_owned(),
        "/api/v1/serviceaccounts?limit=1".to_owned(),
        "/api/v1/serviceaccounts?fieldSelector=metadata.name%3Dbuilder&limit=1".to_owned(),
    ] {
        let (status, body) = list(&refused);
        assert_eq!(status, 403, "{refused}: {body}");
        println!("refused {refused}: {}", body["message"]);
    }
    // The service-accounts component's name, as the run lists it.
    let (status, body) =
        list("/api/v1/serviceaccounts?fieldSelector=metadata.name%3Ddefault&limit=1");
    assert_eq!(status, 200, "{body}");
}

#[test]
#[ignore = "needs KUBEBUILDER_ASSETS (bash .ci/test)"]
fn literal_namespaces_of_the_namespaced_install_are_refreshed_and_no_other() {
    let cp = installs();
    namespaces(&cp, &["team-a", "team-b", "team-c"]);
    let manifests = copy();
    let root = manifests.path().join("manifests");
    let rendered = install(&cp, &cp.assets().join("kubectl"), &root, "namespaced", true);
    wait_until_enforced(&cp, "team-a");
    let shipped = cronjob_env(&common::manifests::yaml(&rendered));
    let shipped_env = common::manifests::as_env(&shipped);
    assert!(shipped_env.contains(&("ECR_REFRESH_NAMESPACES", "team-a,team-b")));
    let h = RealHarness::new(&cp);
    let mut dry_env = shipped_env.clone();
    dry_env.push(("ECR_REFRESH_DRY_RUN", "true"));

    let dry = h.run(&dry_env);
    let run = h.run(&shipped_env);
    let refused = h.refused();
    let wider = h.run(&env(
        &shipped,
        "team-a,team-b,team-c",
        &[("ECR_REFRESH_RENEW_BEFORE", "8h")],
    ));

    dry.expect_code(0);
    run.expect_code(0);
    assert_eq!(dry.outcome("team-a"), "would-create", "{}", dry.stdout);
    assert_eq!(run.outcome("team-a"), "created", "{}", run.stdout);
    assert_eq!(run.outcome("team-b"), "created");
    assert_eq!(
        refused,
        Vec::<String>::new(),
        "the dry run and the run: refused requests"
    );
    for ns in ["team-a", "team-b"] {
        assert_eq!(
            get(&cp, "serviceaccount", ns, "default").unwrap()["imagePullSecrets"],
            json!([{ "name": "team-creds" }, { "name": SECRET }])
        );
    }
    // No namespace list: the Roles don't allow one.
    assert!(
        h.proxy
            .exchanges()
            .iter()
            .all(|e| e.path != "/api/v1/namespaces")
    );
    // A namespace without a Role is refused by the real RBAC, and only it fails.
    wider.expect_code(1);
    assert_eq!(wider.outcome("team-a"), "fresh");
    assert_eq!(wider.outcome("team-c"), "failed", "{}", wider.stdout);
    assert!(h.secret("team-c").is_none());
    let refused = h
        .proxy
        .exchanges()
        .into_iter()
        .find(|e| e.path.starts_with("/api/v1/namespaces/team-c/"))
        .unwrap();
    assert_eq!(refused.status, 403, "{}", refused.response_body);
    println!("the real RBAC's refusal: {}", refused.response_body);

    // Given the namespace list (a ClusterRole of list on namespaces, and nothing on Secrets),
    // a run by glob asks for the one list of every Secret, is refused, and reads each
    // namespace's Secret by name instead: once each, never both.
    create(
        &cp,
        &[
            json!({ "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                "metadata": { "name": "list-namespaces" },
                "rules": [{ "apiGroups": [""], "resources": ["namespaces"], "verbs": ["list"] }] }),
            json!({ "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                "metadata": { "name": "list-namespaces" },
                "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "list-namespaces" },
                "subjects": [{ "kind": "ServiceAccount", "name": SERVICE_ACCOUNT.1, "namespace": SERVICE_ACCOUNT.0 }] }),
        ],
    );
    let token = cp.service_account_token(SERVICE_ACCOUNT.0, SERVICE_ACCOUNT.1);
    common::real::eventually("the namespace list allowed", || {
        match send(
            &cp,
            &token,
            "GET",
            "/api/v1/namespaces?limit=1",
            "application/json",
            &Value::Null,
        ) {
            (200, _) => Ok(()),
            (status, body) => Err(format!("{status}: {body}")),
        }
    });
    let h = RealHarness::new(&cp);
    let by_glob = h.run(&env(
        &shipped,
        "team-*",
        &[("ECR_REFRESH_RENEW_BEFORE", "8h")],
    ));
    by_glob.expect_code(1);
    assert_eq!(
        by_glob.lines[0]["read"], "per-namespace",
        "{}",
        by_glob.stdout
    );
    assert_eq!(by_glob.outcome("team-a"), "fresh");
    assert_eq!(by_glob.outcome("team-b"), "fresh");
    assert_eq!(by_glob.outcome("team-c"), "failed");
    let exchanges = h.proxy.exchanges();
    let list = exchanges
        .iter()
        .find(|e| e.path == "/api/v1/secrets")
        .expect("the list was tried");
    assert_eq!(list.status, 403, "{}", list.response_body);
    for ns in ["team-a", "team-b", "team-c"] {
        let reads = exchanges
            .iter()
            .filter(|e| {
                e.method == "GET" && e.path == format!("/api/v1/namespaces/{ns}/secrets/{SECRET}")
            })
            .count();
        assert_eq!(reads, 1, "{ns}: read by name, once");
    }
}

/// `ecr-refresh uninstall`, run as the admin after runs wrote three kinds of Secret: one the
/// refresh created (labelled `ecr-refresh/created` by its create, the label still there after
/// an update in place), one adopted holding another registry's entry, and one adopted holding
/// only ours. A dry run changes nothing and says what would go; then the created one is
/// deleted, the mixed one keeps the other registry's entry byte for byte and loses our
/// entry, annotations and label, the adopted one is left, and the `default` ServiceAccount
/// of each namespace whose Secret went or was stripped loses our imagePullSecrets entry and
/// keeps the team's (the adopted Secret's keeps both).
#[test]
#[ignore = "needs KUBEBUILDER_ASSETS (bash .ci/test)"]
fn uninstall_deletes_only_what_ecr_refresh_created_and_strips_only_its_entries() {
    let (turn, shipped) = installed();
    let cp: &ControlPlane = &turn;
    let all = ["un-created", "un-mixed", "un-adopted"];
    namespaces(cp, &all);
    let theirs = json!({"username": "bot", "password": "theirs"});
    let seeded = |ns: &str, auths: Value| {
        json!({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/dockerconfigjson",
            "metadata": {"name": SECRET, "namespace": ns},
            "data": {".dockerconfigjson": b64(&json!({"auths": auths}).to_string())}})
    };
    create(
        cp,
        &[
            seeded(
                "un-mixed",
                json!({"ghcr.io": theirs, REGISTRY: {"username": "AWS", "password": "old"}}),
            ),
            seeded(
                "un-adopted",
                json!({REGISTRY: {"username": "AWS", "password": "old"}}),
            ),
        ],
    );
    let h = RealHarness::new(cp);
    h.run(&env(shipped, "un-*", &[])).expect_code(0);
    // Rewritten in place: the apply that doesn't name the label leaves it.
    h.run(&env(
        shipped,
        "un-*",
        &[("ECR_REFRESH_RENEW_BEFORE", "12h")],
    ))
    .expect_code(0);
    let created = |ns: &str| {
        get(cp, "secret", ns, SECRET).expect("the Secret")["metadata"]["labels"]
            ["ecr-refresh/created"]
            .clone()
    };
    assert_eq!(created("un-created"), "true", "our create labels it");
    assert_eq!(created("un-mixed"), Value::Null, "adopted: no label");
    assert_eq!(created("un-adopted"), Value::Null, "adopted: no label");
    let accounts = |ns: &str| {
        get(cp, "serviceaccount", ns, "default").expect("default")["imagePullSecrets"].clone()
    };
    for ns in all {
        assert_eq!(
            accounts(ns),
            json!([{"name": "team-creds"}, {"name": SECRET}]),
            "{ns}"
        );
    }
    let before: Vec<Value> = all
        .iter()
        .map(|ns| get(cp, "secret", ns, SECRET).unwrap())
        .collect();

    let operator = common::Binary::new(|_| cp.admin_kubeconfig().to_owned());
    let uninstall = |extra: &[(&str, &str)]| {
        let mut env = vec![
            ("ECR_REFRESH_SERVICE_ACCOUNTS", "default"),
            ("ECR_REFRESH_NAMESPACES", "un-*"),
        ];
        env.extend_from_slice(extra);
        let output = operator
            .command(&env)
            .arg("uninstall")
            .output()
            .expect("ecr-refresh uninstall runs");
        operator.checked(output)
    };
    let dry = uninstall(&[("ECR_REFRESH_DRY_RUN", "true")]);
    dry.expect_code(0);
    assert_eq!(dry.outcome("un-created"), "would-delete", "{}", dry.stdout);
    assert_eq!(dry.outcome("un-mixed"), "would-strip", "{}", dry.stdout);
    assert_eq!(dry.outcome("un-adopted"), "kept", "{}", dry.stdout);
    for (ns, was) in all.iter().zip(&before) {
        assert_eq!(
            get(cp, "secret", ns, SECRET).as_ref(),
            Some(was),
            "{ns}: a dry run changes nothing"
        );
        assert_eq!(
            accounts(ns),
            json!([{"name": "team-creds"}, {"name": SECRET}])
        );
    }

    let run = uninstall(&[]);
    run.expect_code(0);
    assert_eq!(run.outcome("un-created"), "deleted", "{}", run.stdout);
    assert!(get(cp, "secret", "un-created", SECRET).is_none(), "deleted");
    assert_eq!(run.outcome("un-mixed"), "stripped", "{}", run.stdout);
    let mixed = get(cp, "secret", "un-mixed", SECRET).expect("kept, stripped");
    assert_eq!(uid(&mixed), uid(&before[1]), "stripped in place");
    assert_eq!(
        docker_config(&mixed),
        json!({"auths": {"ghcr.io": theirs}}),
        "the other registry's entry stays, ours goes"
    );
    for part in ["labels", "annotations"] {
        let ours = mixed["metadata"][part].to_string();
        assert!(!ours.contains("ecr-refresh"), "no {part} of ours: {ours}");
    }
    assert_eq!(run.outcome("un-adopted"), "kept", "{}", run.stdout);
    assert_eq!(
        get(cp, "secret", "un-adopted", SECRET).as_ref(),
        Some(&before[2]),
        "adopted with only our entries: left as it is"
    );
    for ns in ["un-created", "un-mixed"] {
        assert_eq!(accounts(ns), json!([{"name": "team-creds"}]), "{ns}");
    }
    assert_eq!(
        accounts("un-adopted"),
        json!([{"name": "team-creds"}, {"name": SECRET}]),
        "the Secret stays, and so does the entry that names it"
    );
    // Again: nothing left to do, and nothing fails.
    let again = uninstall(&[]);
    again.expect_code(0);
    assert_eq!(again.outcome("un-adopted"), "kept", "{}", again.stdout);
    assert!(
        again
            .lines
            .iter()
            .all(|l| l["namespace"] != "un-created" && l["namespace"] != "un-mixed")
    );
}

/// `ecr-refresh uninstall` as the admin, by hand, with no install named, as the docs show it,
/// after two installs (`team-a/ecr-refresh`, `team-b/ecr-refresh`) each created the Secret in
/// a namespace of its own: it refuses, naming both, and changes nothing. Named, it deletes
/// only its own install's Secret and keeps the other's, with the other's ServiceAccount
/// entry; and it honours the selection: a Secret of the named install outside
/// ECR_REFRESH_NAMESPACES, or outside the label selector, is not touched.
#[test]
#[ignore = "needs KUBEBUILDER_ASSETS (bash .ci/test)"]
fn uninstall_with_no_install_named_refuses_two_installs_and_named_removes_only_its_own() {
    let (turn, shipped) = installed();
    let cp: &ControlPlane = &turn;
    let all = ["un2-a", "un2-b", "un2-a-later", "un2-a-unlabelled"];
    namespaces(cp, &all);
    // The label selector's case: un2-a is labelled, un2-b is not.
    admin(cp, &["label", "namespace", "un2-a", "team=a"], "");
    let h = RealHarness::new(cp);
    for (install, ns) in [
        ("team-a/ecr-refresh", "un2-a"),
        ("team-a/ecr-refresh", "un2-a-later"),
        ("team-a/ecr-refresh", "un2-a-unlabelled"),
        ("team-b/ecr-refresh", "un2-b"),
    ] {
        h.run(&env(shipped, ns, &[("ECR_REFRESH_INSTALL", install)]))
            .expect_code(0);
        let secret = h.secret(ns).expect("created");
        assert_eq!(
            secret["metadata"]["annotations"]["ecr-refresh/install"], install,
            "{ns}"
        );
    }
    let accounts = |ns: &str| {
        get(cp, "serviceaccount", ns, "default").expect("default")["imagePullSecrets"].clone()
    };
    let both = json!([{"name": "team-creds"}, {"name": SECRET}]);
    let snapshot = || -> Vec<(Option<Value>, Value)> {
        all.iter()
            .map(|ns| (get(cp, "secret", ns, SECRET), accounts(ns)))
            .collect()
    };
    let before = snapshot();

    let operator = common::Binary::new(|_| cp.admin_kubeconfig().to_owned());
    let uninstall = |extra: &[(&str, &str)]| {
        let mut env = vec![("ECR_REFRESH_SERVICE_ACCOUNTS", "default")];
        env.extend_from_slice(extra);
        let output = operator
            .command(&env)
            .arg("uninstall")
            .output()
            .expect("ecr-refresh uninstall runs");
        operator.checked(output)
    };

    // No install named: two are recorded, so nothing is touched, and the error names both.
    let refused = uninstall(&[("ECR_REFRESH_NAMESPACES", "un2-*")]);
    refused.expect_code(1);
    assert!(
        refused
            .stdout
            .contains("team-a/ecr-refresh, team-b/ecr-refresh")
            && refused.stdout.contains("ECR_REFRESH_INSTALL"),
        "the error lists the installs and what to set:\n{}",
        refused.stdout
    );
    assert_eq!(snapshot(), before, "refused: nothing changed");

    // Named, outside its selection: un2-a-later is team-a's, but not selected.
    let named = uninstall(&[
        ("ECR_REFRESH_INSTALL", "team-a/ecr-refresh"),
        ("ECR_REFRESH_NAMESPACES", "un2-a,un2-b,un2-a-unlabelled"),
        ("ECR_REFRESH_NAMESPACE_SELECTOR", "team in (a,b)"),
    ]);
    named.expect_code(0);
    assert_eq!(named.outcome("un2-a"), "deleted", "{}", named.stdout);
    assert!(
        get(cp, "secret", "un2-a", SECRET).is_none(),
        "team-a's: deleted"
    );
    assert_eq!(accounts("un2-a"), json!([{"name": "team-creds"}]));
    assert!(
        named.lines.iter().all(|l| l["namespace"] != "un2-b"),
        "un2-b has no label team: outside the selection\n{}",
        named.stdout
    );
    assert!(
        named
            .lines
            .iter()
            .all(|l| l["namespace"] != "un2-a-later" && l["namespace"] != "un2-a-unlabelled"),
        "outside the selection: not touched\n{}",
        named.stdout
    );
    for (i, ns) in all.iter().enumerate().skip(1) {
        assert_eq!(
            (get(cp, "secret", ns, SECRET), accounts(ns)),
            before[i],
            "{ns}: outside the selection, or another install's"
        );
    }

    // Named, over every namespace: team-b's Secret and its ServiceAccount entry stay.
    let rest = uninstall(&[
        ("ECR_REFRESH_INSTALL", "team-a/ecr-refresh"),
        ("ECR_REFRESH_NAMESPACES", "un2-*"),
    ]);
    rest.expect_code(0);
    assert_eq!(rest.outcome("un2-a-later"), "deleted", "{}", rest.stdout);
    assert_eq!(
        rest.outcome("un2-a-unlabelled"),
        "deleted",
        "{}",
        rest.stdout
    );
    assert_eq!(rest.outcome("un2-b"), "kept", "{}", rest.stdout);
    assert_eq!(
        get(cp, "secret", "un2-b", SECRET).as_ref(),
        before[1].0.as_ref(),
        "team-b's Secret: left to team-b's uninstall"
    );
    assert_eq!(accounts("un2-b"), both, "team-b's entry stays");

    // Now only team-b is recorded: with no name, it is the one removed.
    let last = uninstall(&[("ECR_REFRESH_NAMESPACES", "un2-*")]);
    last.expect_code(0);
    assert_eq!(last.outcome("un2-b"), "deleted", "{}", last.stdout);
    assert_eq!(accounts("un2-b"), json!([{"name": "team-creds"}]));
}

/// `ecr-refresh uninstall` strips ServiceAccount entries only where it deleted or stripped
/// the Secret: a team's own Secret of our name (ghcr.io, not ours) in a namespace the install
/// never selected keeps its ServiceAccount's entry, whether the uninstall's selection
/// covers that namespace or not.
#[test]
#[ignore = "needs KUBEBUILDER_ASSETS (bash .ci/test)"]
fn uninstall_leaves_the_service_account_entry_of_a_teams_own_secret_of_that_name() {
    let (turn, shipped) = installed();
    let cp: &ControlPlane = &turn;
    namespaces(cp, &["un3-ours"]);
    let team_secret = json!({"apiVersion": "v1", "kind": "Secret",
        "type": "kubernetes.io/dockerconfigjson",
        "metadata": {"name": SECRET, "namespace": "un3-team"},
        "data": {".dockerconfigjson": b64(&json!({"auths": {"ghcr.io":
            {"username": "bot", "password": "theirs"}}}).to_string())}});
    create(
        cp,
        &[
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "un3-team"}}),
            json!({"apiVersion": "v1", "kind": "ServiceAccount",
                "metadata": {"name": "default", "namespace": "un3-team"},
                "imagePullSecrets": [{"name": "team-creds"}, {"name": SECRET}]}),
            team_secret,
        ],
    );
    let h = RealHarness::new(cp);
    h.run(&env(shipped, "un3-ours", &[])).expect_code(0);
    let accounts = |ns: &str| {
        get(cp, "serviceaccount", ns, "default").expect("default")["imagePullSecrets"].clone()
    };
    let both = json!([{"name": "team-creds"}, {"name": SECRET}]);
    assert_eq!(accounts("un3-ours"), both, "the run added ours");
    let team_before = get(cp, "secret", "un3-team", SECRET).expect("the team's");

    let operator = common::Binary::new(|_| cp.admin_kubeconfig().to_owned());
    for selection in ["un3-ours", "un3-*"] {
        let output = operator
            .command(&[
                ("ECR_REFRESH_SERVICE_ACCOUNTS", "default"),
                ("ECR_REFRESH_NAMESPACES", selection),
            ])
            .arg("uninstall")
            .output()
            .expect("ecr-refresh uninstall runs");
        operator.checked(output).expect_code(0);
        assert_eq!(
            accounts("un3-team"),
            both,
            "selection {selection}: the team's entry for its own Secret stays"
        );
        assert_eq!(
            get(cp, "secret", "un3-team", SECRET).as_ref(),
            Some(&team_before),
            "the team's Secret is not ours"
        );
    }
    assert!(
        get(cp, "secret", "un3-ours", SECRET).is_none(),
        "ours: deleted"
    );
    assert_eq!(accounts("un3-ours"), json!([{"name": "team-creds"}]));
}
