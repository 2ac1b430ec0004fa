//! Warning Events where namespace owners look: one per failed namespace per run, in that
//! namespace, regarding the Secret; none for namespaces that succeeded; off with
//! ECR_REFRESH_EVENTS=false; a refused Event create never fails the run.

use crate::common;

use std::path::Path;
use std::process::Command;

use common::*;
use fake_cluster::{FakeCluster, Fault};
use serde_json::{Value, json};

const EVENTS_PATH: &str = "/apis/events.k8s.io/v1/namespaces/";
const POD: &str = "ecr-refresh-29400050-x7k2p";

fn manifest(path: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(path))
        .unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// An Opaque Secret with our name: ecr-refresh must leave it alone and fail the namespace.
fn seed_wrong_type(h: &Harness, namespace: &str) -> String {
    uid(&h.seed_secret(
        namespace,
        "kubectl-create",
        json!({ "type": "Opaque", "data": { "token": b64("someone else's") } }),
    ))
}

fn event_posts(h: &Harness) -> Vec<u16> {
    h.statuses("POST", EVENTS_PATH)
}

/// The one Event in `namespace`.
fn only_event(h: &Harness, namespace: &str) -> Value {
    let events = h.cluster.events(namespace);
    assert_eq!(events.len(), 1, "one Event in {namespace}: {events:?}");
    events[0].clone()
}

#[test]
fn a_secret_of_the_wrong_type_gets_one_warning_event_regarding_it() {
    let h = Harness::new();
    h.namespaces(&["team-a", "team-b"]);
    let uid = seed_wrong_type(&h, "team-a");

    let run = h.run(&[("HOSTNAME", POD)]);

    run.expect_code(1);
    assert_eq!(run.outcome("team-a"), "failed");
    assert_eq!(run.outcome("team-b"), "created");
    let event = only_event(&h, "team-a");
    assert_eq!(event["type"], "Warning");
    assert_eq!(event["reason"], "WrongSecretType");
    assert_eq!(event["action"], "Refresh");
    assert_eq!(event["reportingController"], "ecr-refresh");
    assert_eq!(event["reportingInstance"], POD);
    assert_eq!(
        event["regarding"],
        json!({"apiVersion": "v1", "kind": "Secret", "name": SECRET, "namespace": "team-a", "uid": uid})
    );
    let note = event["note"].as_str().unwrap();
    assert!(note.contains("type Opaque"), "{note}");
    assert!(
        note.contains("delete or rename that Secret yourself"),
        "says what to do: {note}"
    );
    for password in h.ecr.passwords_issued() {
        assert!(!note.contains(&password), "a token in the note");
    }
    // MicroTime: microseconds, as the real API serialises eventTime.
    let time = event["eventTime"].as_str().unwrap();
    assert_eq!(time.len(), "2026-12-01T14:00:00.123456Z".len(), "{time}");
    assert!(h.cluster.events("team-b").is_empty(), "no Event on success");
    assert_eq!(event_posts(&h), [201]);
}

#[test]
fn each_namespace_the_role_forbids_gets_a_forbidden_event_once_per_run() {
    let rbac = format!(
        "{}\n---\n{}",
        manifest("manifests/clusterrole.yaml"),
        manifest("manifests/clusterrolebinding.yaml")
    );
    let h = Harness::with(FakeCluster::builder().rbac_from_yaml(&rbac).start());
    h.namespaces(&["team-a", "team-b"]);
    // The role grants get and patch on aws-ecr-token only.
    let env = [("ECR_REFRESH_SECRET_NAME", "other-pull-secret")];

    h.run(&env).expect_code(1);
    h.run(&env).expect_code(1);

    for ns in ["team-a", "team-b"] {
        let events = h.cluster.events(ns);
        assert_eq!(events.len(), 2, "one per run in {ns}: {events:?}");
        for event in events {
            assert_eq!(event["reason"], "Forbidden");
            assert_eq!(
                event["regarding"],
                json!({"apiVersion": "v1", "kind": "Secret", "name": "other-pull-secret", "namespace": ns}),
                "no uid: the Secret could not be read"
            );
            let note = event["note"].as_str().unwrap();
            assert!(
                note.contains("forbidden to read the Secret") && note.contains("grant"),
                "{note}"
            );
        }
    }
}

#[test]
fn a_run_where_every_namespace_succeeds_writes_no_event() {
    let h = Harness::new();
    h.namespaces(&["team-a", "team-b"]);

    h.run(&[]).expect_code(0);
    h.run(&[]).expect_code(0);

    assert!(event_posts(&h).is_empty());
    assert!(h.cluster.events("team-a").is_empty());
}

#[test]
fn a_service_account_that_cannot_be_given_the_secret_gets_an_event_regarding_the_secret() {
    let h = Harness::new();
    h.namespaces(&["team-a"]);
    h.cluster.seed(
        fake_cluster::Resource::ServiceAccounts,
        json!({ "metadata": { "name": "default", "namespace": "team-a" } }),
        "kube-controller-manager",
    );
    h.cluster.add_fault(Fault::new(
        "PATCH",
        "^/api/v1/namespaces/team-a/serviceaccounts/default$",
        403,
    ));

    let run = h.run(&[("ECR_REFRESH_SERVICE_ACCOUNTS", "default")]);

    run.expect_code(1);
    let secret = h.secret("team-a").expect("the Secret was written");
    let event = only_event(&h, "team-a");
    assert_eq!(event["reason"], "ServiceAccountFailed");
    assert_eq!(event["regarding"]["uid"], uid(&secret).as_str());
    let note = event["note"].as_str().unwrap();
    assert!(
        note.contains("refreshed image-pull Secret") && note.contains("imagePullSecrets"),
        "{note}"
    );
}

#[test]
fn events_false_writes_no_event() {
    let h = Harness::new();
    h.namespaces(&["team-a"]);
    seed_wrong_type(&h, "team-a");

    let run = h.run(&[("ECR_REFRESH_EVENTS", "false")]);

    run.expect_code(1);
    assert_eq!(run.outcome("team-a"), "failed");
    assert!(event_posts(&h).is_empty(), "{:?}", event_posts(&h));
    assert!(h.cluster.events("team-a").is_empty());
}

#[test]
fn a_forbidden_event_create_is_one_warning_and_changes_nothing_else() {
    // The shipped ClusterRole without its events rule.
    let role = manifest("manifests/clusterrole.yaml");
    let without_events = role
        .split("\n  # Warning Events")
        .next()
        .expect("the role text")
        .to_owned();
    assert!(!without_events.contains("events.k8s.io"));
    let rbac = format!(
        "{without_events}\n---\n{}",
        manifest("manifests/clusterrolebinding.yaml")
    );
    let h = Harness::with(FakeCluster::builder().rbac_from_yaml(&rbac).start());
    h.namespaces(&["team-a", "team-b", "team-c"]);
    seed_wrong_type(&h, "team-a");
    seed_wrong_type(&h, "team-b");

    let run = h.run(&[]);

    run.expect_code(1);
    assert_eq!(run.outcome("team-a"), "failed");
    assert_eq!(run.outcome("team-b"), "failed");
    assert_eq!(run.outcome("team-c"), "created");
    assert_eq!(event_posts(&h), [403, 403], "each failed namespace tried");
    let warnings: Vec<&Value> = run
        .lines
        .iter()
        .filter(|l| {
            l["level"] == "WARN" && l["message"].as_str().is_some_and(|m| m.contains("Events"))
        })
        .collect();
    assert_eq!(warnings.len(), 1, "one warning per run:\n{}", run.stdout);
    let message = warnings[0]["message"].as_str().unwrap();
    assert!(
        message.contains("events.k8s.io") && message.contains("ECR_REFRESH_EVENTS=false"),
        "{message}"
    );
    assert_eq!(run.summary()["failed"], 2);
}

#[test]
fn an_event_create_that_fails_otherwise_never_fails_a_run_that_succeeded_elsewhere() {
    let h = Harness::new();
    h.namespaces(&["team-a", "team-b"]);
    seed_wrong_type(&h, "team-a");
    h.cluster
        .add_fault(Fault::new("POST", "^/apis/events.k8s.io/", 500));

    let run = h.run(&[]);

    run.expect_code(1);
    assert_eq!(run.outcome("team-b"), "created");
    assert!(h.cluster.events("team-a").is_empty());
    let warned = run
        .lines
        .iter()
        .filter(|l| {
            l["message"]
                .as_str()
                .is_some_and(|m| m.contains("could not write the Event"))
        })
        .count();
    assert_eq!(warned, 1, "{}", run.stdout);
}

#[test]
#[ignore = "needs kubectl (bash .ci/test)"]
fn kubectl_get_events_shows_the_event_in_the_namespace() {
    let kubectl = Command::new("kubectl")
        .arg("version")
        .arg("--client")
        .output();
    assert!(
        kubectl.is_ok_and(|o| o.status.success()),
        "kubectl is needed for this test (.ci/test puts one on PATH)"
    );
    let h = Harness::new();
    h.namespaces(&["team-a"]);
    seed_wrong_type(&h, "team-a");
    h.run(&[]).expect_code(1);

    let get = |args: &[&str]| {
        // Its discovery cache in the test's directory, not ~/.kube/cache.
        let out = Command::new("kubectl")
            .args(args)
            .env("KUBECONFIG", h.kubeconfig())
            .env("KUBECACHEDIR", h.dir.path().join("kube-cache"))
            .output()
            .expect("kubectl runs");
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "kubectl {args:?}: {stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        stdout
    };
    let table = get(&["get", "events", "-n", "team-a"]);
    let json: Value = serde_json::from_str(&get(&["get", "events", "-n", "team-a", "-o", "json"]))
        .expect("kubectl prints JSON");

    // The columns a real server's Table gives, the Event's in them.
    let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        ["LAST", "SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"],
        "{table}"
    );
    let row = table.lines().nth(1).expect("one row");
    assert!(
        row.contains("Warning")
            && row.contains("WrongSecretType")
            && row.contains(&format!("secret/{SECRET}"))
            && row.contains("type Opaque"),
        "{table}"
    );
    let items = json["items"].as_array().expect("items");
    assert_eq!(items.len(), 1, "{json}");
    // kubectl asks for core/v1: the same Event, with core/v1's field names.
    assert_eq!(items[0]["apiVersion"], "v1");
    assert_eq!(items[0]["reason"], "WrongSecretType");
    assert_eq!(items[0]["involvedObject"]["name"], SECRET);
    assert!(
        items[0]["message"]
            .as_str()
            .unwrap()
            .contains("type Opaque")
    );
}

/// Every namespace fails the same way (the shipped ClusterRole reads only `aws-ecr-token`,
/// the run asks for another name), as a systemic failure does. The run's own namespace is
/// `ecr-refresh`, as in the pod (the kubeconfig's context namespace stands in for the
/// ServiceAccount's); it is not selected.
fn everywhere_failing(count: usize) -> (Harness, Vec<String>, std::path::PathBuf) {
    let rbac = format!(
        "{}\n---\n{}",
        manifest("manifests/clusterrole.yaml"),
        manifest("manifests/clusterrolebinding.yaml")
    );
    let h = Harness::with(FakeCluster::builder().rbac_from_yaml(&rbac).start());
    let names: Vec<String> = (0..count).map(|i| format!("team-{i:03}")).collect();
    for name in &names {
        h.cluster.add_namespace(name, &[]);
    }
    h.cluster.add_namespace("ecr-refresh", &[]);
    let kubeconfig = h.dir.path().join("kubeconfig-in-ecr-refresh");
    let text = h.cluster.kubeconfig();
    assert!(text.contains("namespace: default"), "{text}");
    std::fs::write(
        &kubeconfig,
        text.replace("namespace: default", "namespace: ecr-refresh"),
    )
    .expect("writing the kubeconfig");
    (h, names, kubeconfig)
}

fn failing_env(kubeconfig: &Path) -> Vec<(&'static str, String)> {
    vec![
        ("KUBECONFIG", kubeconfig.display().to_string()),
        ("ECR_REFRESH_SECRET_NAME", "other-pull-secret".to_owned()),
        ("ECR_REFRESH_EXCLUDE_NAMESPACES", "ecr-refresh".to_owned()),
        ("HOSTNAME", POD.to_owned()),
    ]
}

fn events_in(h: &Harness, namespaces: &[String]) -> usize {
    namespaces.iter().map(|ns| h.cluster.events(ns).len()).sum()
}

#[test]
fn hundreds_of_failing_namespaces_get_a_hundred_events_and_one_summary_per_run() {
    let (h, names, kubeconfig) = everywhere_failing(250);
    let env = failing_env(&kubeconfig);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();

    let first = h.run(&env);

    first.expect_code(1);
    assert_eq!(first.summary()["failed"], 250);
    assert_eq!(
        events_in(&h, &names),
        100,
        "one per failed namespace, up to 100"
    );
    assert_eq!(
        event_posts(&h).len(),
        101,
        "100 and the summary: no more requests"
    );
    let summary = only_event(&h, "ecr-refresh");
    assert_eq!(summary["type"], "Warning");
    assert_eq!(summary["reason"], "MoreNamespacesFailed");
    assert_eq!(summary["reportingController"], "ecr-refresh");
    assert_eq!(summary["reportingInstance"], POD);
    assert_eq!(
        summary["regarding"],
        json!({"apiVersion": "v1", "kind": "Secret", "name": "other-pull-secret", "namespace": "ecr-refresh"})
    );
    let note = summary["note"].as_str().unwrap();
    assert!(note.starts_with("150 more namespaces failed"), "{note}");
    assert!(note.len() <= 1024, "{}", note.len());
    // The ones it names are among those that got no Event, in name order.
    let named: Vec<&str> = note
        .split_once("error: ")
        .expect("the names after the count")
        .1
        .trim_end_matches(" ...")
        .split(", ")
        .collect();
    assert!(named.len() >= 10, "{note}");
    assert!(named.windows(2).all(|w| w[0] < w[1]), "{note}");
    for ns in &named {
        assert!(
            h.cluster.events(ns).is_empty(),
            "{ns} has an Event and is named: {note}"
        );
    }
    let warned: Vec<&Value> = first
        .lines
        .iter()
        .filter(|l| l["namespaces_without_event"] == 150)
        .collect();
    assert_eq!(
        warned.len(),
        1,
        "one warning counts them:\n{}",
        first.stdout
    );
    assert_eq!(warned[0]["level"], "WARN");
    assert_eq!(warned[0]["events_limit"], 100);

    // A second run (the Job's retry, or the next run) adds as many again, not 250.
    h.run(&env).expect_code(1);

    assert_eq!(events_in(&h, &names), 200);
    let summaries = h.cluster.events("ecr-refresh");
    assert_eq!(summaries.len(), 2, "{summaries:?}");
    assert!(
        summaries
            .iter()
            .all(|e| e["reason"] == "MoreNamespacesFailed")
    );
    assert_eq!(event_posts(&h), vec![201; 202]);
}

#[test]
fn a_hundred_failing_namespaces_get_an_event_each_and_no_summary() {
    let (h, names, kubeconfig) = everywhere_failing(100);
    let env = failing_env(&kubeconfig);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();

    let run = h.run(&env);

    run.expect_code(1);
    for ns in &names {
        assert_eq!(h.cluster.events(ns).len(), 1, "{ns}");
    }
    assert!(h.cluster.events("ecr-refresh").is_empty());
    assert!(
        !run.stdout.contains("namespaces_without_event"),
        "{}",
        run.stdout
    );
}

#[test]
fn a_dry_run_sends_its_event_with_dry_run_all_and_stores_none() {
    let h = Harness::new();
    h.namespaces(&["team-a"]);
    seed_wrong_type(&h, "team-a");

    let run = h.run(&[("ECR_REFRESH_DRY_RUN", "true")]);

    run.expect_code(1);
    assert_eq!(run.outcome("team-a"), "failed");
    let posts: Vec<String> = h
        .cluster
        .requests()
        .into_iter()
        .filter(|r| r.method == "POST" && r.path.starts_with(EVENTS_PATH))
        .map(|r| format!("{} {}?{}", r.status, r.path, r.query))
        .collect();
    assert_eq!(posts.len(), 1, "{posts:?}");
    assert!(
        posts[0].starts_with("201 ") && posts[0].contains("dryRun=All"),
        "{posts:?}"
    );
    assert_eq!(
        h.cluster.events("team-a"),
        Vec::<Value>::new(),
        "nothing stored"
    );
}

#[test]
fn events_about_a_secret_that_exists_carry_its_uid() {
    let h = Harness::new();
    h.namespaces(&["unreadable", "forbidden"]);
    let unreadable = uid(&h.seed_secret(
        "unreadable",
        "kubectl-create",
        json!({ "type": "kubernetes.io/dockerconfigjson", "data": { ".dockerconfigjson": b64("not json") } }),
    ));
    let forbidden = uid(&h.seed_secret(
        "forbidden",
        "kubectl-create",
        json!({ "type": "kubernetes.io/dockerconfigjson", "data": { ".dockerconfigjson": b64(r#"{"auths":{}}"#) } }),
    ));
    h.cluster.add_fault(Fault::new(
        "PATCH",
        "^/api/v1/namespaces/forbidden/secrets/",
        403,
    ));

    let run = h.run(&[]);

    run.expect_code(1);
    for (ns, reason, uid) in [
        ("unreadable", "UnreadableSecret", unreadable),
        ("forbidden", "Forbidden", forbidden),
    ] {
        assert_eq!(run.outcome(ns), "failed");
        let event = only_event(&h, ns);
        assert_eq!(event["reason"], reason);
        assert_eq!(
            event["regarding"],
            json!({"apiVersion": "v1", "kind": "Secret", "name": SECRET, "namespace": ns, "uid": uid})
        );
    }
}

/// The namespaced install (manifests/namespaced/) listing more namespaces than get an Event
/// each: its Roles in the target namespaces don't reach ecr-refresh's own, so the summary
/// Event there needs the variant's Role ecr-refresh-events. With the Roles as rendered
/// (team-a's copied to each of 101 namespaces), nothing is refused and the summary arrives.
#[test]
#[ignore = "needs kubectl (bash .ci/test)"]
fn the_namespaced_install_grants_the_summary_event_in_its_own_namespace() {
    let rendered = common::manifests::render("namespaced", false);
    let docs = common::manifests::documents(&rendered);
    let of = |kind: &str, namespace: &str| -> Value {
        docs.iter()
            .find(|d| d["kind"] == kind && d["metadata"]["namespace"] == namespace)
            .unwrap_or_else(|| panic!("a {kind} in {namespace}"))
            .clone()
    };
    let names: Vec<String> = (0..101).map(|i| format!("team-{i:03}")).collect();
    let mut rbac: Vec<Value> = docs
        .iter()
        .filter(|d| {
            matches!(d["kind"].as_str(), Some("Role" | "RoleBinding"))
                && d["metadata"]["namespace"] == "ecr-refresh"
        })
        .cloned()
        .collect();
    assert_eq!(rbac.len(), 2, "the Role and RoleBinding in ecr-refresh");
    for name in &names {
        for kind in ["Role", "RoleBinding"] {
            let mut copy = of(kind, "team-a");
            copy["metadata"]["namespace"] = json!(name);
            rbac.push(copy);
        }
    }
    let h = Harness::with(
        FakeCluster::builder()
            .rbac_from_yaml(&common::manifests::yaml(&rbac))
            .start(),
    );
    h.cluster.add_namespace("ecr-refresh", &[]);
    for name in &names {
        h.cluster.add_namespace(name, &[]);
        seed_wrong_type(&h, name);
    }
    let kubeconfig = h.dir.path().join("kubeconfig-in-ecr-refresh");
    std::fs::write(
        &kubeconfig,
        h.cluster
            .kubeconfig()
            .replace("namespace: default", "namespace: ecr-refresh"),
    )
    .expect("writing the kubeconfig");
    let listed = names.join(",");
    let kubeconfig = kubeconfig.display().to_string();

    let run = h.run(&[
        ("KUBECONFIG", kubeconfig.as_str()),
        ("ECR_REFRESH_NAMESPACES", listed.as_str()),
        ("HOSTNAME", POD),
    ]);

    run.expect_code(1);
    assert_eq!(run.summary()["failed"], 101);
    let posts = event_posts(&h);
    assert_eq!(posts.len(), 101, "100 and the summary");
    assert!(posts.iter().all(|s| *s == 201), "{posts:?}");
    let summary = only_event(&h, "ecr-refresh");
    assert_eq!(summary["reason"], "MoreNamespacesFailed");
}
