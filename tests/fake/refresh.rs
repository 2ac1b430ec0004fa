//! A run against the fake cluster and fake ECR: each test one behaviour of the refresh.

use crate::common;

use std::time::{Duration, SystemTime};

use common::*;
use fake_cluster::{EcrFault, FakeCluster, Fault, Resource};
use serde_json::{Value, json};

#[test]
fn a_first_run_creates_the_pull_secret_in_every_namespace() {
    let h = Harness::new();
    h.namespaces(&["team-a", "team-b"]);

    let run = h.run(&[]);

    run.expect_code(0);
    for ns in ["team-a", "team-b"] {
        assert_eq!(run.outcome(ns), "created");
        let line = run.line(ns);
        assert_eq!(line["secret"], SECRET);
        assert_eq!(line["uid_before"], "-");
        let secret = h.secret(ns).expect("the Secret exists");
        assert_eq!(line["uid_after"], uid(&secret));
        assert_eq!(secret["type"], "kubernetes.io/dockerconfigjson");
        assert_eq!(
            secret["metadata"]["labels"]["app.kubernetes.io/managed-by"],
            "ecr-refresh"
        );
        assert_eq!(
            secret["metadata"]["annotations"]["ecr-refresh/registries"],
            REGISTRY
        );
        let expires = secret["metadata"]["annotations"]["ecr-refresh/token-expires-at"]
            .as_str()
            .unwrap();
        assert!(
            expires.ends_with('Z') && expires.contains('T'),
            "RFC 3339: {expires}"
        );
        let entry = &docker_config(&secret)["auths"][REGISTRY];
        let pw = entry["password"].as_str().unwrap();
        assert_eq!(entry["username"], "AWS");
        assert_eq!(entry["auth"], b64(&format!("AWS:{pw}")));
        assert!(h.ecr.passwords_issued().contains(&pw.to_owned()));
    }
    let summary = run.summary();
    assert_eq!(summary["created"], 2);
    assert_eq!(summary["failed"], 0);
    assert_eq!(summary["registries"], REGISTRY);
}

#[test]
fn two_runs_keep_every_uid_and_rotate_the_password() {
    let h = Harness::new();
    h.namespaces(&["a", "b", "c"]);
    h.run(&[]).expect_code(0);
    let first: Vec<(String, String)> = ["a", "b", "c"]
        .iter()
        .map(|ns| {
            let s = h.secret(ns).unwrap();
            (uid(&s), password(&s, REGISTRY))
        })
        .collect();

    let run = h.run(&[]);

    run.expect_code(0);
    for (ns, (uid_before, password_before)) in ["a", "b", "c"].iter().zip(first) {
        assert_eq!(run.outcome(ns), "updated");
        let secret = h.secret(ns).unwrap();
        assert_eq!(uid(&secret), uid_before, "{ns}: same uid");
        assert_eq!(run.line(ns)["uid_before"], uid_before);
        assert_eq!(run.line(ns)["uid_after"], uid_before);
        assert_ne!(
            password(&secret, REGISTRY),
            password_before,
            "{ns}: fresh password"
        );
        let history = h.cluster.history(Resource::Secrets, ns, SECRET);
        assert_eq!(history.len(), 2, "{ns}: created once, updated once");
        assert!(history.iter().all(Option::is_some), "{ns}: never absent");
    }
    // The update path is an apply, nothing else: the Secrets were read in one list per run.
    assert_eq!(h.requests_to("GET", &format!("/secrets/{SECRET}")), 0);
    assert_eq!(h.statuses("GET", "/api/v1/secrets"), [200, 200]);
    assert_eq!(h.requests_to("PATCH", &format!("/secrets/{SECRET}")), 3);
    let apply = h
        .cluster
        .requests()
        .into_iter()
        .find(|r| r.method == "PATCH")
        .unwrap();
    assert_eq!(
        apply.content_type.as_deref(),
        Some("application/apply-patch+yaml")
    );
    assert!(
        apply.query.contains("fieldManager=ecr-refresh") && apply.query.contains("force=true"),
        "{}",
        apply.query
    );
    let body: Value = serde_json::from_str(&apply.body).unwrap();
    assert!(
        body["metadata"]["uid"].is_string(),
        "the apply names the uid it read: {body}"
    );
}

#[test]
fn a_secret_deleted_right_after_our_read_is_recreated_fresh_without_the_deleted_entries() {
    let h = Harness::new();
    h.namespaces(&["shop"]);
    let old = h.seed_secret(
        "shop",
        "kubectl-create",
        json!({
            "type": "kubernetes.io/dockerconfigjson",
            "data": { ".dockerconfigjson": b64(r#"{"auths":{"ghcr.io":{"auth":"b2xkOnNlY3JldA=="}}}"#) }
        }),
    );
    h.cluster
        .delete_after_next_get(Resource::Secrets, "shop", SECRET);

    let run = h.run(&[]);

    run.expect_code(0);
    assert_eq!(run.outcome("shop"), "recreated");
    let secret = h.secret("shop").expect("the Secret exists again");
    assert_ne!(uid(&secret), uid(&old));
    assert_eq!(run.line("shop")["uid_before"], uid(&old));
    assert_eq!(run.line("shop")["uid_after"], uid(&secret));
    let auths = docker_config(&secret)["auths"].clone();
    assert!(
        auths.get("ghcr.io").is_none(),
        "nothing of the deleted object comes back: {auths}"
    );
    assert!(
        h.ecr
            .passwords_issued()
            .contains(&password(&secret, REGISTRY))
    );
    // The apply named the deleted uid and was refused; a POST made the new one.
    let statuses: Vec<(String, u16)> = h
        .cluster
        .requests()
        .iter()
        .filter(|r| r.path.ends_with(SECRET) || r.path.ends_with("/secrets"))
        .map(|r| (r.method.clone(), r.status))
        .collect();
    assert_eq!(
        statuses,
        [
            ("GET".into(), 200),
            ("PATCH".into(), 409),
            ("GET".into(), 404),
            ("POST".into(), 201)
        ]
    );
}

#[test]
fn foreign_auths_entries_survive_byte_for_byte() {
    let h = Harness::new();
    h.namespaces(&["ci"]);
    let foreign = r#"{"auth":"dXNlcjpwYXNz",  "email" : "ci@example.com"}"#;
    let value = format!(r#"{{"auths":{{"ghcr.io":{foreign},"{REGISTRY}":{{"auth":"b2xk"}}}}}}"#);
    h.seed_secret(
        "ci",
        "helm",
        json!({ "type": "kubernetes.io/dockerconfigjson", "data": { ".dockerconfigjson": b64(&value), "extra": b64("keep me") } }),
    );

    let run = h.run(&[]);

    run.expect_code(0);
    assert_eq!(run.outcome("ci"), "updated");
    assert_eq!(run.line("ci")["kept_entries"], 1);
    let secret = h.secret("ci").unwrap();
    let text = String::from_utf8(docker_config_bytes(&secret)).unwrap();
    assert!(text.contains(&format!(r#""ghcr.io":{foreign}"#)), "{text}");
    assert_ne!(password(&secret, REGISTRY), "old");
    assert_eq!(
        secret["data"]["extra"],
        b64("keep me"),
        "other data keys stay"
    );
    // The apply was pinned to the resourceVersion it read.
    let apply = h
        .cluster
        .requests()
        .into_iter()
        .find(|r| r.method == "PATCH")
        .unwrap();
    let body: Value = serde_json::from_str(&apply.body).unwrap();
    assert!(body["metadata"]["resourceVersion"].is_string(), "{body}");
}

#[test]
fn a_change_between_our_read_and_our_write_is_not_lost() {
    let h = Harness::new();
    h.namespaces(&["ci"]);
    let value = r#"{"auths":{"ghcr.io":{"auth":"Z2g6MQ=="}}}"#;
    h.seed_secret("ci", "helm", json!({ "type": "kubernetes.io/dockerconfigjson", "data": { ".dockerconfigjson": b64(value) } }));
    // Someone adds quay.io right after our read: our apply, pinned to what we read, must not erase it.
    h.cluster
        .change_after_next_get(Resource::Secrets, "ci", SECRET, |secret| {
            let changed =
                r#"{"auths":{"ghcr.io":{"auth":"Z2g6MQ=="},"quay.io":{"auth":"cXVheToy"}}}"#;
            secret["data"][".dockerconfigjson"] = json!(b64(changed));
        });

    let run = h.run(&[]);

    run.expect_code(0);
    assert_eq!(run.outcome("ci"), "updated");
    let auths = docker_config(&h.secret("ci").unwrap())["auths"].clone();
    assert_eq!(auths["quay.io"]["auth"], "cXVheToy", "{auths}");
    assert_eq!(auths["ghcr.io"]["auth"], "Z2g6MQ==");
    assert!(auths.get(REGISTRY).is_some());
    let conflicts = h
        .cluster
        .requests()
        .iter()
        .filter(|r| r.method == "PATCH" && r.status == 409)
        .count();
    assert_eq!(
        conflicts, 1,
        "the stale apply was refused once, then retried on a fresh read"
    );
}

#[test]
fn entries_we_wrote_for_a_registry_no_longer_configured_are_removed() {
    let h = Harness::new();
    h.namespaces(&["a"]);
    let other = "210987654321.dkr.ecr.eu-west-1.amazonaws.com";
    h.run(&[("ECR_REFRESH_REGISTRIES", &format!("{REGISTRY},{other}"))])
        .expect_code(0);
    let both = docker_config(&h.secret("a").unwrap());
    assert!(both["auths"].get(other).is_some());
    assert_eq!(h.ecr.calls().len(), 2, "one call per region");

    let run = h.run(&[]);

    run.expect_code(0);
    let secret = h.secret("a").unwrap();
    let auths = docker_config(&secret)["auths"].clone();
    assert!(auths.get(other).is_none(), "{auths}");
    assert!(auths.get(REGISTRY).is_some());
    assert_eq!(
        secret["metadata"]["annotations"]["ecr-refresh/registries"],
        REGISTRY
    );
    assert_eq!(run.line("a")["dropped_entries"], other);
}

/// Two runs with one identity and different registries (a configuration change, or two setups
/// sharing a kubeconfig) each drop the other's entry: the run that drops one says so, once, with
/// the host and why (issue 49, item 8).
#[test]
fn a_run_that_drops_a_registry_it_wrote_warns_once_naming_it() {
    let h = Harness::new();
    h.namespaces(&["a", "b"]);
    let other = "210987654321.dkr.ecr.eu-west-1.amazonaws.com";
    let first = h.run(&[("ECR_REFRESH_REGISTRIES", REGISTRY)]);
    first.expect_code(0);
    assert!(
        first
            .lines
            .iter()
            .all(|l| l["level"] != "WARN" || l.get("registry").is_none()),
        "nothing dropped yet:\n{}",
        first.stdout
    );

    let second = h.run(&[("ECR_REFRESH_REGISTRIES", other)]);

    second.expect_code(0);
    let warnings: Vec<&Value> = second
        .lines
        .iter()
        .filter(|l| l["level"] == "WARN" && l["registry"] == REGISTRY)
        .collect();
    assert_eq!(
        warnings.len(),
        1,
        "one line for the registry, not one per namespace:\n{}",
        second.stdout
    );
    let message = warnings[0]["message"].as_str().unwrap_or_default();
    assert!(message.contains("no longer configured"), "{message}");
    assert_eq!(warnings[0]["namespaces"], 2, "{}", warnings[0]);

    // Back again: the other one is dropped now, and said so.
    let third = h.run(&[("ECR_REFRESH_REGISTRIES", REGISTRY)]);
    third.expect_code(0);
    assert_eq!(
        third
            .lines
            .iter()
            .filter(|l| l["level"] == "WARN" && l["registry"] == other)
            .count(),
        1,
        "{}",
        third.stdout
    );
}

/// Two installs, one per account, writing one Secret name (issue 33, item 3): each used to take
/// the other's entries for a registry it no longer writes, and drop them, every run.
#[test]
fn a_second_install_writing_the_same_secret_name_is_refused_and_drops_nothing() {
    let h = Harness::new();
    h.namespaces(&["a"]);
    let theirs = "210987654321.dkr.ecr.eu-west-1.amazonaws.com";
    h.run(&[
        ("ECR_REFRESH_INSTALL", "team-a/ecr-refresh"),
        ("ECR_REFRESH_REGISTRIES", theirs),
    ])
    .expect_code(0);
    let before = h.secret("a").unwrap();
    assert_eq!(
        before["metadata"]["annotations"]["ecr-refresh/install"],
        "team-a/ecr-refresh"
    );

    let run = h.run(&[("ECR_REFRESH_INSTALL", "team-b/ecr-refresh")]);

    run.expect_code(1);
    assert_eq!(run.outcome("a"), "failed");
    let error = run.line("a")["error"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    for said in [
        "team-a/ecr-refresh",
        theirs,
        "its own ECR_REFRESH_SECRET_NAME",
    ] {
        assert!(error.contains(said), "names {said}: {error}");
    }
    let after = h.secret("a").unwrap();
    assert_eq!(
        after["metadata"]["resourceVersion"], before["metadata"]["resourceVersion"],
        "left untouched"
    );
    assert_eq!(
        h.ecr.calls().len(),
        1,
        "refused before any token of its own"
    );
    let events = h.cluster.events("a");
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["reason"], "WrittenByOtherInstall");

    // Its check says the same, and exits 1.
    let output = h
        .command(&[("ECR_REFRESH_INSTALL", "team-b/ecr-refresh")])
        .arg("check")
        .output()
        .expect("ecr-refresh runs");
    let check = h.checked(output);
    check.expect_code(1);
    assert_eq!(check.finding_kinds("a"), ["not-writable"]);
    assert!(check.findings("a").contains("team-a/ecr-refresh"));
}

#[test]
fn an_install_whose_registries_are_all_written_again_is_taken_over() {
    let h = Harness::new();
    h.namespaces(&["a"]);
    h.run(&[("ECR_REFRESH_INSTALL", "old/ecr-refresh")])
        .expect_code(0);
    let uid_before = uid(&h.secret("a").unwrap());

    let run = h.run(&[("ECR_REFRESH_INSTALL", "new/ecr-refresh")]);

    run.expect_code(0);
    assert_eq!(run.outcome("a"), "updated");
    let secret = h.secret("a").unwrap();
    assert_eq!(uid(&secret), uid_before);
    assert_eq!(
        secret["metadata"]["annotations"]["ecr-refresh/install"],
        "new/ecr-refresh"
    );
}

#[test]
fn one_token_call_per_region_names_that_regions_accounts() {
    let h = Harness::new();
    h.namespaces(&["a"]);
    let same_region = "111111111111.dkr.ecr.us-east-1.amazonaws.com";
    let other_region = "222222222222.dkr.ecr.eu-west-1.amazonaws.com";

    h.run(&[(
        "ECR_REFRESH_REGISTRIES",
        &format!("{REGISTRY},{same_region},{other_region}"),
    )])
    .expect_code(0);

    let mut calls = h.ecr.calls();
    calls.sort();
    assert_eq!(
        calls,
        [
            ("eu-west-1".to_owned(), vec!["222222222222".to_owned()]),
            (
                "us-east-1".to_owned(),
                vec!["123456789012".to_owned(), "111111111111".to_owned()]
            ),
        ]
    );
    let auths = docker_config(&h.secret("a").unwrap())["auths"].clone();
    assert_eq!(
        auths[REGISTRY]["password"], auths[same_region]["password"],
        "one token serves the region"
    );
    assert_ne!(auths[REGISTRY]["password"], auths[other_region]["password"]);
}

#[test]
fn without_registries_the_callers_own_registry_in_aws_region_is_used() {
    let h = Harness::new();
    h.namespaces(&["a"]);

    let run = h.run(&[("ECR_REFRESH_REGISTRIES", "")]);

    run.expect_code(0);
    assert_eq!(h.ecr.calls(), [(REGION.to_owned(), vec![])]);
    assert!(
        docker_config(&h.secret("a").unwrap())["auths"]
            .get(REGISTRY)
            .is_some()
    );
}

#[test]
fn a_secret_of_another_type_is_refused_and_left_untouched() {
    let h = Harness::new();
    h.namespaces(&["a", "b"]);
    let opaque = h.seed_secret(
        "a",
        "kubectl-create",
        json!({ "type": "Opaque", "data": { "password": b64("db") } }),
    );

    let run = h.run(&[]);

    run.expect_code(1);
    assert_eq!(run.outcome("a"), "failed");
    let error = run.line("a")["error"].as_str().unwrap();
    assert!(
        error.contains("type Opaque") && error.contains("ECR_REFRESH_SECRET_NAME"),
        "{error}"
    );
    assert_eq!(h.secret("a").unwrap(), opaque, "untouched");
    assert_eq!(
        run.outcome("b"),
        "created",
        "one namespace's failure never stops the others"
    );
    assert_eq!(
        h.requests_to("PATCH", "/namespaces/a/secrets/aws-ecr-token"),
        0
    );
}

#[test]
fn an_immutable_secret_is_refused_and_left_untouched() {
    let h = Harness::new();
    h.namespaces(&["a"]);
    let frozen = h.seed_secret(
        "a",
        "kubectl-create",
        json!({ "type": "kubernetes.io/dockerconfigjson", "immutable": true, "data": { ".dockerconfigjson": b64(r#"{"auths":{}}"#) } }),
    );

    let run = h.run(&[]);

    run.expect_code(1);
    assert!(
        run.line("a")["error"]
            .as_str()
            .unwrap()
            .contains("immutable")
    );
    assert_eq!(h.secret("a").unwrap(), frozen);
}

#[test]
fn a_secret_from_the_kubectl_loop_is_adopted_in_place_and_its_copy_of_the_old_password_removed() {
    let h = Harness::new();
    h.namespaces(&["legacy"]);
    let value = format!(
        r#"{{"auths":{{"https://{REGISTRY}":{{"username":"AWS","password":"OLD-PASSWORD","auth":"{}"}}}}}}"#,
        b64("AWS:OLD-PASSWORD")
    );
    let last_applied = json!({
        "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/dockerconfigjson",
        "metadata": { "name": SECRET, "namespace": "legacy" },
        "data": { ".dockerconfigjson": b64(&value) }
    })
    .to_string();
    let old = h.seed_secret(
        "legacy",
        "kubectl-client-side-apply",
        json!({
            "metadata": { "annotations": { "kubectl.kubernetes.io/last-applied-configuration": last_applied } },
            "type": "kubernetes.io/dockerconfigjson",
            "data": { ".dockerconfigjson": b64(&value) }
        }),
    );

    let run = h.run(&[]);

    run.expect_code(0);
    assert_eq!(run.outcome("legacy"), "updated");
    assert!(
        run.line("legacy")["message"]
            .as_str()
            .unwrap()
            .contains("last-applied")
    );
    let secret = h.secret("legacy").unwrap();
    assert_eq!(uid(&secret), uid(&old), "adopted in place");
    let annotations = secret["metadata"]["annotations"].as_object().unwrap();
    assert!(!annotations.contains_key("kubectl.kubernetes.io/last-applied-configuration"));
    let auths = docker_config(&secret)["auths"].clone();
    assert!(
        auths.get(format!("https://{REGISTRY}")).is_none(),
        "the https:// key is recognised as ours: {auths}"
    );
    assert!(!secret.to_string().contains(&b64("AWS:OLD-PASSWORD")));
    assert!(
        !String::from_utf8(docker_config_bytes(&secret))
            .unwrap()
            .contains("OLD-PASSWORD")
    );
    // The removal was a JSON patch pinned to the resourceVersion it saw.
    let patch = h
        .cluster
        .requests()
        .into_iter()
        .find(|r| r.content_type.as_deref() == Some("application/json-patch+json"))
        .expect("a JSON patch");
    assert!(
        patch.body.contains(r#""op":"test""#) && patch.body.contains("/metadata/resourceVersion"),
        "{}",
        patch.body
    );
}

#[test]
fn terminating_namespaces_are_skipped_with_that_reason() {
    let h = Harness::new();
    h.namespaces(&["live"]);
    h.cluster.add_terminating_namespace("going");

    let run = h.run(&[]);

    run.expect_code(0);
    assert_eq!(run.outcome("going"), "skipped");
    assert_eq!(run.line("going")["reason"], "namespace is terminating");
    assert_eq!(
        h.requests_to("GET", "/namespaces/going/secrets/aws-ecr-token"),
        0
    );
    assert_eq!(run.outcome("live"), "created");
}

#[test]
fn a_literal_namespace_that_is_terminating_is_skipped_on_the_servers_refusal() {
    let h = Harness::new();
    h.cluster.add_terminating_namespace("going");

    let run = h.run(&[("ECR_REFRESH_NAMESPACES", "going")]);

    run.expect_code(0);
    assert_eq!(run.outcome("going"), "skipped");
    assert_eq!(run.line("going")["reason"], "namespace is terminating");
    assert!(h.secret("going").is_none());
}

#[test]
fn a_forbidden_namespace_fails_alone() {
    let h = Harness::new();
    h.namespaces(&["open", "locked"]);
    h.cluster.add_fault(Fault::new(
        "POST",
        "^/api/v1/namespaces/locked/secrets$",
        403,
    ));

    let run = h.run(&[]);

    run.expect_code(1);
    assert_eq!(run.outcome("open"), "created");
    assert_eq!(run.outcome("locked"), "failed");
    let error = run.line("locked")["error"].as_str().unwrap();
    assert!(
        error.contains("forbidden") && error.contains("manifests/"),
        "{error}"
    );
    assert_eq!(run.summary()["failed"], 1);
    let message: Value =
        serde_json::from_str(&std::fs::read_to_string(h.termination_log()).unwrap()).unwrap();
    assert_eq!(message["failed"], json!(["locked"]));
}

#[test]
fn throttling_and_server_errors_are_retried_then_succeed() {
    let h = Harness::new();
    h.namespaces(&["a"]);
    h.run(&[]).expect_code(0);
    h.cluster
        .add_fault(Fault::new("GET", "^/api/v1/secrets$", 503).times(1));
    h.cluster
        .add_fault(Fault::new("GET", "^/api/v1/secrets$", 500).times(1));
    h.cluster.add_fault(
        Fault::new("PATCH", "/secrets/", 429)
            .retry_after(1)
            .times(2),
    );

    let started = std::time::Instant::now();
    let run = h.run(&[]);

    run.expect_code(0);
    assert_eq!(run.outcome("a"), "updated");
    let patches = h.statuses("PATCH", "");
    assert_eq!(
        patches,
        [429, 429, 200],
        "the first run created with POST; these are the second run's"
    );
    // The one list of every Secret, the first run's and the second's.
    let lists = h.statuses("GET", "/api/v1/secrets");
    assert_eq!(lists, [200, 503, 500, 200]);
    assert_eq!(
        h.statuses("GET", &format!("/secrets/{SECRET}")),
        Vec::<u16>::new()
    );
    assert!(
        started.elapsed() >= Duration::from_secs(2),
        "Retry-After was honoured"
    );
    let errors: Vec<&Value> = run.lines.iter().filter(|l| l["level"] == "ERROR").collect();
    assert!(
        errors.is_empty(),
        "a retried failure is no error to report: {errors:?}"
    );
}

#[test]
fn namespaces_are_selected_by_glob_and_exclusion() {
    let h = Harness::new();
    h.namespaces(&["team-a", "team-b", "team-b-old", "ops", "kube-system"]);

    let run = h.run(&[
        ("ECR_REFRESH_NAMESPACES", "team-*,ops"),
        ("ECR_REFRESH_EXCLUDE_NAMESPACES", "*-old"),
    ]);

    run.expect_code(0);
    for ns in ["team-a", "team-b", "ops"] {
        assert!(h.secret(ns).is_some(), "{ns}");
    }
    for ns in ["team-b-old", "kube-system"] {
        assert!(h.secret(ns).is_none(), "{ns}");
        assert_eq!(
            h.requests_to("GET", &format!("/namespaces/{ns}/secrets/{SECRET}")),
            0
        );
    }
    assert_eq!(run.summary()["namespaces"], 3);
}

#[test]
fn namespaces_are_narrowed_by_the_label_selector_on_the_server() {
    let h = Harness::new();
    h.cluster.add_namespace("prod-a", &[("env", "prod")]);
    h.cluster.add_namespace("dev-a", &[("env", "dev")]);

    let run = h.run(&[("ECR_REFRESH_NAMESPACE_SELECTOR", "env=prod")]);

    run.expect_code(0);
    assert!(h.secret("prod-a").is_some());
    assert!(h.secret("dev-a").is_none());
    let list = h
        .cluster
        .requests()
        .into_iter()
        .find(|r| r.path == "/api/v1/namespaces")
        .unwrap();
    assert!(
        list.query.contains("labelSelector=env%3Dprod"),
        "{}",
        list.query
    );
}

#[test]
fn literal_names_are_refreshed_without_listing_namespaces() {
    let h = Harness::new();
    h.namespaces(&["team-a", "team-b", "team-c"]);

    let run = h.run(&[("ECR_REFRESH_NAMESPACES", "team-a,team-b")]);

    run.expect_code(0);
    assert!(h.secret("team-a").is_some() && h.secret("team-b").is_some());
    assert!(h.secret("team-c").is_none());
    let lists = h
        .cluster
        .requests()
        .iter()
        .filter(|r| r.path == "/api/v1/namespaces")
        .count();
    assert_eq!(lists, 0, "namespace-scoped RBAC suffices");
}

#[test]
fn a_literal_namespace_that_does_not_exist_is_skipped_with_that_reason() {
    let h = Harness::new();
    h.namespaces(&["here"]);

    let run = h.run(&[("ECR_REFRESH_NAMESPACES", "here,gone")]);

    // The skip is told in the exit code too: tests/fake/robustness.rs.
    run.expect_code(1);
    assert_eq!(run.outcome("gone"), "skipped");
    assert_eq!(run.line("gone")["reason"], "namespace not found");
    assert_eq!(run.outcome("here"), "created");
}

#[test]
fn the_namespace_list_is_paged_and_restarts_when_its_continue_token_expires() {
    let h = Harness::with(FakeCluster::builder().max_page(3).start());
    let names: Vec<String> = (0..10).map(|i| format!("ns-{i:02}")).collect();
    for n in &names {
        h.cluster.add_namespace(n, &[]);
    }
    h.cluster.expire_next_continue();

    let run = h.run(&[]);

    run.expect_code(0);
    for n in &names {
        assert_eq!(run.outcome(n), "created", "each namespace once");
    }
    let lists: Vec<(String, u16)> = h
        .cluster
        .requests()
        .into_iter()
        .filter(|r| r.path == "/api/v1/namespaces")
        .map(|r| (r.query, r.status))
        .collect();
    assert!(lists.iter().any(|(_, s)| *s == 410), "{lists:?}");
    assert!(lists.len() >= 5, "several pages: {lists:?}");
    assert_eq!(run.summary()["namespaces"], 10);
}

#[test]
fn a_dry_run_stores_nothing() {
    let h = Harness::new();
    h.namespaces(&["new", "old"]);
    h.run(&[("ECR_REFRESH_NAMESPACES", "old")]).expect_code(0);
    let before = h.cluster.history(Resource::Secrets, "old", SECRET);
    let mark = h.cluster.requests().len();

    let run = h.run(&[
        ("ECR_REFRESH_DRY_RUN", "true"),
        ("ECR_REFRESH_SERVICE_ACCOUNTS", "default"),
    ]);

    run.expect_code(0);
    assert_eq!(run.outcome("new"), "would-create");
    assert_eq!(run.outcome("old"), "would-update");
    assert!(h.secret("new").is_none());
    assert_eq!(h.cluster.history(Resource::Secrets, "old", SECRET), before);
    assert_eq!(run.line("old")["service_accounts"], "default:would-add");
    let account = h
        .cluster
        .history(Resource::ServiceAccounts, "old", "default");
    assert_eq!(
        account.len(),
        1,
        "the ServiceAccount was not written: {account:?}"
    );
    let writes: Vec<_> = h
        .cluster
        .requests()
        .into_iter()
        .skip(mark) // the first run's
        .filter(|r| r.method == "POST" || r.method == "PATCH")
        // Asking who we are (a SelfSubjectReview, for the install name) stores nothing.
        .filter(|r| !r.path.ends_with("/selfsubjectreviews"))
        .collect();
    assert!(!writes.is_empty());
    for w in writes {
        assert!(
            w.query.contains("dryRun=All"),
            "{} {} ?{}",
            w.method,
            w.path,
            w.query
        );
    }
}

#[test]
fn a_bad_configuration_exits_2_naming_the_variable_and_sends_no_request() {
    let h = Harness::new();
    h.namespaces(&["a"]);
    for (variable, value, words) in [
        ("ECR_REFRESH_CONCURRENCY", "many", "must be a whole number"),
        ("ECR_REFRESH_REGISTRIES", "docker.io", "ECR registry host"),
        (
            "ECR_REFRESH_NAMESPACE",
            "a",
            "did you mean ECR_REFRESH_NAMESPACES?",
        ),
        ("ECR_REFRESH_TIMEOUT", "soon", "duration"),
    ] {
        let run = h.run(&[(variable, value)]);
        run.expect_code(2);
        let error = run.lines.last().unwrap()["error"]
            .as_str()
            .unwrap()
            .to_owned();
        assert!(error.contains(variable) && error.contains(words), "{error}");
    }
    assert_eq!(h.cluster.request_count(), 0);
    assert!(h.ecr.calls().is_empty());
}

#[test]
fn no_token_means_nothing_is_written() {
    for (fault, words) in [
        (EcrFault::AccessDenied, "AccessDeniedException"),
        (EcrFault::ExpiredCredentials, "ExpiredTokenException"),
        (EcrFault::MalformedToken, "does not decode"),
    ] {
        let h = Harness::new();
        h.namespaces(&["a"]);
        h.ecr.add_fault(fault, None);

        let run = h.run(&[]);

        run.expect_code(3);
        let error = run.lines.last().unwrap()["error"]
            .as_str()
            .unwrap()
            .to_owned();
        assert!(error.contains(words), "{error}");
        // The Secret is read (it is due: missing), then the token is asked for: no write.
        assert_eq!(h.statuses("POST", "/secrets"), Vec::<u16>::new());
        assert_eq!(h.statuses("PATCH", "/secrets"), Vec::<u16>::new());
        assert!(h.secret("a").is_none());
    }
}

#[test]
fn an_expiry_already_past_is_a_warning_not_a_refusal() {
    let h = Harness::new();
    h.namespaces(&["a"]);
    h.ecr
        .set_expires_at(SystemTime::UNIX_EPOCH + Duration::from_secs(1_420_070_400));

    let run = h.run(&[]);

    run.expect_code(0);
    assert!(
        run.lines
            .iter()
            .any(|l| l["level"] == "WARN" && l["message"].as_str().unwrap().contains("clock"))
    );
    assert!(h.secret("a").is_some());
}

#[test]
fn an_unreachable_cluster_exits_3_with_nothing_written() {
    let h = Harness::new();
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = dead.local_addr().unwrap().port();
    drop(dead);
    let kubeconfig = h.dir.path().join("dead.kubeconfig");
    let text = std::fs::read_to_string(h.cluster.write_kubeconfig(h.dir.path())).unwrap();
    write(
        &kubeconfig,
        &text.replace(&h.cluster.url(), &format!("http://127.0.0.1:{port}")),
    );

    let run = h.run(&[("KUBECONFIG", kubeconfig.to_str().unwrap())]);

    run.expect_code(3);
    let error = run.lines.last().unwrap()["error"].as_str().unwrap();
    assert!(
        error.contains("unreachable") && error.contains(&port.to_string()),
        "{error}"
    );
    // Refused connections are retried until the call's deadline (an API server restarting).
    assert!(error.contains("gave up after"), "{error}");
}

#[test]
fn a_cluster_that_refuses_the_namespace_list_exits_3_with_nothing_written() {
    let h = Harness::new();
    h.namespaces(&["a"]);
    h.cluster
        .add_fault(Fault::new("GET", "^/api/v1/namespaces$", 403));

    let run = h.run(&[]);

    run.expect_code(3);
    assert!(
        run.lines.last().unwrap()["error"]
            .as_str()
            .unwrap()
            .contains("list namespaces")
    );
    assert!(h.secret("a").is_none());
}

#[test]
fn at_the_deadline_nothing_new_starts_and_what_was_left_is_reported_failed() {
    let h = Harness::new();
    let names: Vec<String> = (0..6).map(|i| format!("slow-{i}")).collect();
    for n in &names {
        h.cluster.add_namespace(n, &[]);
    }
    h.cluster.add_fault(Fault::slow(
        Some("POST"),
        "/secrets$",
        Duration::from_millis(8000),
    ));

    let run = h.run(&[
        ("ECR_REFRESH_TIMEOUT", "5s"),
        ("ECR_REFRESH_CONCURRENCY", "2"),
    ]);

    run.expect_code(1);
    let outcomes: Vec<&str> = names.iter().map(|n| run.outcome(n)).collect();
    assert_eq!(
        outcomes.iter().filter(|o| **o == "created").count(),
        2,
        "the two in flight finish: {outcomes:?}"
    );
    assert_eq!(
        outcomes.iter().filter(|o| **o == "failed").count(),
        4,
        "{outcomes:?}"
    );
    let undone = names.iter().find(|n| run.outcome(n) == "failed").unwrap();
    assert!(
        run.line(undone)["error"]
            .as_str()
            .unwrap()
            .contains("left undone")
    );
    assert_eq!(run.summary()["failed"], 4);
}

/// Runs the binary, sends it SIGTERM `after` its first Secret write is in flight (requests:
/// version, the Secret list, the namespace list, then it), and returns the run and how long
/// it took to exit.
fn sigterm_once_busy(h: &Harness, env: &[(&str, &str)], after: Duration) -> (Run, Duration) {
    let child = h
        .command(env)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    while h.cluster.request_count() < 4 {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the run never reached a namespace"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(after);
    let signalled = std::time::Instant::now();
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let run = h.checked(child.wait_with_output().unwrap());
    (run, signalled.elapsed())
}

#[test]
fn sigterm_stops_new_work_lets_writes_finish_and_prints_the_summary() {
    let h = Harness::new();
    let names: Vec<String> = (0..6).map(|i| format!("slow-{i}")).collect();
    for n in &names {
        h.cluster.add_namespace(n, &[]);
    }
    h.cluster.add_fault(Fault::slow(
        Some("POST"),
        "/secrets$",
        Duration::from_millis(1500),
    ));
    let (run, _) = sigterm_once_busy(
        &h,
        &[("ECR_REFRESH_CONCURRENCY", "1")],
        Duration::from_millis(300),
    );

    run.expect_code(1);
    assert!(run.lines.iter().any(|l| l["reason"] == "SIGTERM received"));
    let created = names.iter().filter(|n| run.outcome(n) == "created").count();
    assert_eq!(created, 1, "the write in flight finished");
    assert_eq!(run.summary()["failed"], 5);
}

#[test]
fn the_run_report_is_written_as_the_termination_message() {
    let h = Harness::new();
    h.namespaces(&["a", "b"]);

    h.run(&[]).expect_code(0);

    let text = std::fs::read_to_string(h.termination_log()).unwrap();
    let message: Value = serde_json::from_str(&text).unwrap();
    assert!(text.len() < 4096);
    assert_eq!(message["outcomes"]["created"], 2);
    assert_eq!(message["exit_code"], 0);
    assert_eq!(message["registries"], json!([REGISTRY]));
}

#[test]
fn the_termination_message_stays_under_4096_bytes_with_10000_failed_namespaces() {
    let h = Harness::with(FakeCluster::builder().without_request_log().start());
    for i in 0..10_000 {
        h.cluster.add_namespace(&format!("tenant-{i:05}"), &[]);
    }
    h.cluster.add_fault(Fault::new("POST", "/secrets$", 403));

    let run = h.run(&[("ECR_REFRESH_CONCURRENCY", "64"), ("RUST_LOG", "warn")]);

    run.expect_code(1);
    let text = std::fs::read_to_string(h.termination_log()).unwrap();
    assert!(text.len() < 4096, "{} bytes", text.len());
    let message: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(message["outcomes"]["failed"], 10_000);
    assert_eq!(message["failed_total"], 10_000);
    assert_eq!(message["failed_truncated"], true);
}

#[test]
fn text_logs_carry_the_same_fields() {
    let h = Harness::new();
    h.namespaces(&["a"]);

    let output = h
        .command(&[("ECR_REFRESH_LOG_FORMAT", "text")])
        .output()
        .unwrap();

    assert_eq!(output.status.code(), Some(0));
    let text = String::from_utf8(output.stdout).unwrap();
    let line = text.lines().find(|l| l.contains("Secret created")).unwrap();
    for field in [
        "namespace=\"a\"",
        "outcome=\"created\"",
        "uid_before=\"-\"",
        "uid_after=",
    ] {
        assert!(line.contains(field), "{field} in {line}");
    }
    assert!(
        !text.contains('\u{1b}'),
        "no colour codes outside a terminal"
    );
}

#[test]
fn an_entry_added_to_a_secret_we_wrote_between_our_read_and_write_is_not_lost() {
    let h = Harness::new();
    h.namespaces(&["ci"]);
    h.run(&[]).expect_code(0);
    // The Secret holds only our entry; someone adds theirs right after our next read.
    h.cluster
        .change_after_next_get(Resource::Secrets, "ci", SECRET, |secret| {
            let value = docker_config(secret);
            let mut auths = value["auths"].clone();
            auths["quay.io"] = json!({ "auth": "cXVheToy" });
            secret["data"][".dockerconfigjson"] =
                json!(b64(&json!({ "auths": auths }).to_string()));
        });

    let run = h.run(&[]);

    run.expect_code(0);
    assert_eq!(run.outcome("ci"), "updated");
    let auths = docker_config(&h.secret("ci").unwrap())["auths"].clone();
    assert_eq!(auths["quay.io"]["auth"], "cXVheToy", "{auths}");
}

#[test]
fn labels_and_annotations_of_other_owners_stay() {
    let h = Harness::new();
    h.namespaces(&["a"]);
    h.seed_secret(
        "a",
        "argocd",
        json!({
            "metadata": {
                "labels": { "team": "payments" },
                "annotations": { "argocd.argoproj.io/sync-options": "Prune=false" }
            },
            "type": "kubernetes.io/dockerconfigjson",
            "data": { ".dockerconfigjson": b64(r#"{"auths":{}}"#) }
        }),
    );

    h.run(&[]).expect_code(0);
    h.run(&[]).expect_code(0);

    let secret = h.secret("a").unwrap();
    assert_eq!(secret["metadata"]["labels"]["team"], "payments");
    assert_eq!(
        secret["metadata"]["labels"]["app.kubernetes.io/managed-by"],
        "ecr-refresh"
    );
    assert_eq!(
        secret["metadata"]["annotations"]["argocd.argoproj.io/sync-options"],
        "Prune=false"
    );
}

#[test]
fn a_last_applied_annotation_without_our_password_is_someone_elses_and_stays() {
    let h = Harness::new();
    h.namespaces(&["a"]);
    let value = r#"{"auths":{"ghcr.io":{"auth":"Z2g6MQ=="}}}"#;
    let last_applied = json!({
        "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/dockerconfigjson",
        "metadata": { "name": SECRET, "namespace": "a" },
        "data": { ".dockerconfigjson": b64(value) }
    })
    .to_string();
    h.seed_secret(
        "a",
        "kubectl-client-side-apply",
        json!({
            "metadata": { "annotations": { "kubectl.kubernetes.io/last-applied-configuration": last_applied } },
            "type": "kubernetes.io/dockerconfigjson",
            "data": { ".dockerconfigjson": b64(value) }
        }),
    );

    h.run(&[]).expect_code(0);

    let secret = h.secret("a").unwrap();
    assert_eq!(
        secret["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"],
        last_applied
    );
    assert_eq!(
        h.requests_to("PATCH", &format!("/secrets/{SECRET}")),
        1,
        "the apply only"
    );
}

#[test]
fn a_secret_that_keeps_changing_fails_after_a_bounded_number_of_tries() {
    let h = Harness::new();
    h.namespaces(&["busy"]);
    h.run(&[]).expect_code(0);
    h.cluster.add_fault(Fault::new("PATCH", "/secrets/", 409));

    let run = h.run(&[]);

    run.expect_code(1);
    assert_eq!(run.outcome("busy"), "failed");
    assert!(
        run.line("busy")["error"]
            .as_str()
            .unwrap()
            .contains("kept changing")
    );
    assert_eq!(h.requests_to("PATCH", &format!("/secrets/{SECRET}")), 5);
}

#[test]
fn no_token_reaches_the_log_even_at_trace_level() {
    let h = Harness::new();
    h.namespaces(&["a"]);

    // Harness::checked looks for every password issued, and its base64 forms, in the output.
    let run = h.run(&[("RUST_LOG", "trace")]);

    run.expect_code(0);
    assert!(
        run.lines.len() > 20,
        "trace logging was on: {} lines",
        run.lines.len()
    );
    let password = password(&h.secret("a").unwrap(), REGISTRY);
    assert!(!run.stdout.contains(&password));
}

#[test]
fn an_early_failure_still_writes_the_termination_message() {
    let h = Harness::new();
    // A namespace to write, so a token is asked for.
    h.namespaces(&["a"]);
    h.ecr.add_fault(EcrFault::AccessDenied, None);
    h.run(&[]).expect_code(3);
    let message: Value =
        serde_json::from_str(&std::fs::read_to_string(h.termination_log()).unwrap()).unwrap();
    assert_eq!(message["exit_code"], 3);
    assert!(
        message["error"]
            .as_str()
            .unwrap()
            .contains("AccessDeniedException")
    );

    h.run(&[("ECR_REFRESH_CONCURRENCY", "0")]).expect_code(2);
    let message: Value =
        serde_json::from_str(&std::fs::read_to_string(h.termination_log()).unwrap()).unwrap();
    assert_eq!(message["exit_code"], 2);
    assert!(
        message["error"]
            .as_str()
            .unwrap()
            .contains("ECR_REFRESH_CONCURRENCY")
    );
}

#[test]
fn a_write_still_in_flight_after_the_shutdown_grace_is_abandoned_and_the_summary_printed() {
    let h = Harness::new();
    h.namespaces(&["stuck"]);
    h.cluster.add_fault(Fault::slow(
        Some("POST"),
        "/secrets$",
        Duration::from_secs(50),
    ));
    let (run, waited) = sigterm_once_busy(&h, &[], Duration::ZERO);

    assert!(
        waited < Duration::from_secs(28),
        "exited {waited:?} after SIGTERM: inside a pod's 30 s grace"
    );
    run.expect_code(1);
    assert_eq!(run.outcome("stuck"), "failed");
    assert!(
        run.line("stuck")["error"]
            .as_str()
            .unwrap()
            .contains("interrupted")
    );
    assert_eq!(run.summary()["failed"], 1);
}

#[test]
fn a_secret_that_appears_between_our_read_and_our_create_is_updated_not_overwritten() {
    let h = Harness::new();
    h.namespaces(&["race"]);
    let theirs = r#"{"auths":{"ghcr.io":{"auth":"Z2g6MQ=="}}}"#;
    h.cluster.create_after_next_get(
        Resource::Secrets,
        "race",
        SECRET,
        json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": { "name": SECRET, "namespace": "race" },
            "type": "kubernetes.io/dockerconfigjson",
            "data": { ".dockerconfigjson": b64(theirs) }
        }),
        "someone-else",
    );

    let run = h.run(&[]);

    run.expect_code(0);
    assert_eq!(run.outcome("race"), "updated");
    let history = h.cluster.history(Resource::Secrets, "race", SECRET);
    assert_eq!(
        history.len(),
        2,
        "their create, then our update: {history:?}"
    );
    let secret = h.secret("race").unwrap();
    assert_eq!(
        uid(&secret),
        uid(history[0].as_ref().unwrap()),
        "theirs, updated in place"
    );
    let auths = docker_config(&secret)["auths"].clone();
    assert_eq!(auths["ghcr.io"]["auth"], "Z2g6MQ==");
    assert!(auths.get(REGISTRY).is_some());
    let posts = h.statuses("POST", "/secrets");
    assert_eq!(
        posts,
        [409],
        "our create met AlreadyExists and overwrote nothing"
    );
}

#[test]
fn a_connection_cut_mid_answer_is_retried() {
    let h = Harness::new();
    h.namespaces(&["a"]);
    h.run(&[]).expect_code(0);
    h.cluster
        .add_fault(Fault::hang_up("GET", "^/api/v1/secrets$").times(1));
    h.cluster
        .add_fault(Fault::hang_up("PATCH", "/secrets/").times(1));

    let run = h.run(&[]);

    run.expect_code(0);
    assert_eq!(run.outcome("a"), "updated");
    let statuses: Vec<(String, u16)> = h
        .cluster
        .requests()
        .iter()
        .skip(4)
        .filter(|r| r.path.ends_with(SECRET) || r.path == "/api/v1/secrets")
        .map(|r| (r.method.clone(), r.status))
        .collect();
    assert_eq!(
        statuses,
        [
            ("GET".into(), 0),
            ("GET".into(), 200),
            ("PATCH".into(), 0),
            ("PATCH".into(), 200)
        ]
    );
}

#[test]
fn a_request_the_server_never_answers_times_out_and_is_retried() {
    let h = Harness::new();
    h.namespaces(&["a"]);
    h.cluster
        .add_fault(Fault::slow(Some("GET"), "^/api/v1/secrets$", Duration::from_secs(40)).times(1));

    let started = std::time::Instant::now();
    let run = h.run(&[]);

    run.expect_code(0);
    assert_eq!(run.outcome("a"), "created");
    let took = started.elapsed();
    assert!(
        took >= Duration::from_secs(15) && took < Duration::from_secs(35),
        "one attempt timed out at 15 s: {took:?}"
    );
}

#[test]
fn a_stop_before_the_first_namespace_ends_the_run_at_once() {
    let h = Harness::new();
    h.namespaces(&["a"]);
    h.cluster.add_fault(Fault::slow(
        Some("GET"),
        "^/version$",
        Duration::from_secs(40),
    ));

    let started = std::time::Instant::now();
    let run = h.run(&[("ECR_REFRESH_TIMEOUT", "2s")]);

    assert!(
        started.elapsed() < Duration::from_secs(15),
        "took {:?}",
        started.elapsed()
    );
    run.expect_code(1);
    let error = run.lines.last().unwrap()["error"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        error.contains("stopped before any namespace was written"),
        "{error}"
    );
    assert!(h.secret("a").is_none());
    let message: Value =
        serde_json::from_str(&std::fs::read_to_string(h.termination_log()).unwrap()).unwrap();
    assert_eq!(message["exit_code"], 1);
}

#[test]
fn a_namespace_deleted_during_the_run_is_skipped_as_deleted_and_the_run_exits_0() {
    let h = Harness::new();
    h.namespaces(&["team-a", "team-b"]);
    // Listed, then deleted right after the namespace list showed it, before its create.
    h.cluster
        .delete_after_next_get(Resource::Namespaces, "", "team-b");

    let run = h.run(&[("ECR_REFRESH_NAMESPACES", "team-*")]);

    run.expect_code(0);
    assert_eq!(run.outcome("team-a"), "created");
    assert_eq!(run.outcome("team-b"), "skipped");
    let line = run.line("team-b");
    assert_eq!(line["reason"], "namespace deleted during the run");
    assert_eq!(line["level"], "INFO");
    assert_eq!(
        h.statuses("POST", "/namespaces/team-b/secrets"),
        [404],
        "the create met the namespace's 404"
    );
    let summary = run.summary();
    assert_eq!(summary["not_found"], 0, "{summary}");
    assert_eq!(summary["skipped"], 1);
    assert_eq!(summary["level"], "INFO");
}

#[test]
fn a_literal_name_that_does_not_exist_is_reported_beside_globs() {
    let h = Harness::new();
    h.namespaces(&["team-a"]);

    let run = h.run(&[
        ("ECR_REFRESH_NAMESPACES", "team-*,typo-ns,excluded-typo"),
        ("ECR_REFRESH_EXCLUDE_NAMESPACES", "excluded-*"),
    ]);

    run.expect_code(1);
    assert_eq!(run.outcome("team-a"), "created");
    assert_eq!(run.outcome("typo-ns"), "skipped");
    assert_eq!(run.line("typo-ns")["reason"], "namespace not found");
    assert_eq!(run.line("typo-ns")["level"], "WARN");
    let summary = run.summary();
    assert_eq!(summary["not_found_namespaces"], "typo-ns", "{summary}");
    assert_eq!(summary["level"], "WARN");
    assert!(
        h.cluster
            .requests()
            .iter()
            .all(|r| !r.path.contains("/namespaces/typo-ns/")),
        "nothing is sent to a namespace the list shows does not exist"
    );
}

#[test]
fn with_a_label_selector_a_literal_name_is_reported_only_if_no_such_namespace_exists() {
    let h = Harness::new();
    h.cluster.add_namespace("team-a", &[("refresh", "yes")]);
    h.cluster.add_namespace("unlabelled", &[]);

    let run = h.run(&[
        ("ECR_REFRESH_NAMESPACES", "team-a,unlabelled,typo-ns"),
        ("ECR_REFRESH_NAMESPACE_SELECTOR", "refresh=yes"),
    ]);

    run.expect_code(1);
    assert_eq!(run.outcome("team-a"), "created");
    assert_eq!(run.outcome("typo-ns"), "skipped");
    assert_eq!(run.line("typo-ns")["reason"], "namespace not found");
    assert!(
        run.lines.iter().all(|l| l["namespace"] != "unlabelled"),
        "a namespace without the labels is not selected, and no typo:\n{}",
        run.stdout
    );
    assert!(h.secret("unlabelled").is_none());
    assert_eq!(run.summary()["not_found_namespaces"], "typo-ns");
}

#[test]
fn a_literal_name_that_does_not_exist_makes_no_ecr_call() {
    let h = Harness::new();
    h.namespaces(&["team-a"]);
    let renew = ("ECR_REFRESH_RENEW_BEFORE", "8h");
    h.run(&[("ECR_REFRESH_NAMESPACES", "team-a"), renew])
        .expect_code(0);
    assert_eq!(h.ecr.calls().len(), 1);

    let mark = h.cluster.requests().len();

    // team-a is fresh: only the typo could be due, and it has no namespace to write to.
    let run = h.run(&[("ECR_REFRESH_NAMESPACES", "team-a,typo-ns"), renew]);

    run.expect_code(1);
    assert_eq!(run.outcome("team-a"), "fresh");
    assert_eq!(run.outcome("typo-ns"), "skipped");
    assert_eq!(run.line("typo-ns")["reason"], "namespace not found");
    assert_eq!(
        h.ecr.calls().len(),
        1,
        "no ECR call for a namespace that is not there"
    );
    let writes: Vec<String> = h
        .cluster
        .requests()
        .split_off(mark)
        .iter()
        .filter(|r| r.method != "GET")
        .map(|r| format!("{} {} ?{} {}", r.method, r.path, r.query, r.status))
        .collect();
    assert_eq!(
        writes,
        ["POST /api/v1/namespaces/typo-ns/secrets ?&dryRun=All&fieldManager=ecr-refresh 404"],
        "one dry-run create asks the namespace, and nothing is stored"
    );
}

#[test]
fn someone_elses_path_scoped_and_differently_cased_entries_are_kept_byte_for_byte() {
    let h = Harness::new();
    h.namespaces(&["team-a"]);
    let upper = REGISTRY.to_uppercase();
    let path_scoped = format!(r#""{REGISTRY}/team-x":{{ "auth" : "dGVhbTp4" }}"#);
    let cased = format!(r#""{upper}":{{"auth":"dXBwZXI="}}"#);
    // As `kubectl create secret docker-registry --docker-server=https://HOST` writes it: the
    // kubelet reads this key as the bare host, so it is ours to replace.
    let https = format!(r#""https://{REGISTRY}":{{"auth":"QVdTOm9sZA=="}}"#);
    let value = format!(r#"{{"auths":{{{path_scoped},{cased},{https}}}}}"#);
    h.seed_secret(
        "team-a",
        "kubectl-create",
        json!({ "type": "kubernetes.io/dockerconfigjson", "data": { ".dockerconfigjson": b64(&value) } }),
    );

    let run = h.run(&[]);

    run.expect_code(0);
    assert_eq!(run.outcome("team-a"), "updated");
    let secret = h.secret("team-a").unwrap();
    let text = String::from_utf8(docker_config_bytes(&secret)).unwrap();
    assert!(text.contains(&path_scoped), "{text}");
    assert!(text.contains(&cased), "{text}");
    assert!(
        !text.contains("https://"),
        "the https:// key is replaced: {text}"
    );
    let auths = docker_config(&secret)["auths"].clone();
    assert_eq!(auths.as_object().unwrap().len(), 3, "{auths}");
    assert_eq!(
        auths[REGISTRY]["password"].as_str().unwrap(),
        h.ecr.passwords_issued()[0]
    );
    assert_eq!(run.line("team-a")["kept_entries"], 2);

    // Our write leaves them be, run after run.
    let run = h.run(&[]);
    run.expect_code(0);
    let text = String::from_utf8(docker_config_bytes(&h.secret("team-a").unwrap())).unwrap();
    assert!(
        text.contains(&path_scoped) && text.contains(&cased),
        "{text}"
    );
}

#[test]
fn a_run_with_failed_namespaces_logs_its_summary_as_an_error() {
    let h = Harness::new();
    h.namespaces(&["team-a", "team-b"]);
    h.cluster.add_fault(Fault::new(
        "GET",
        "^/api/v1/namespaces/team-b/secrets/",
        403,
    ));

    // Named literally, each Secret is read by a GET.
    let run = h.run(&[("ECR_REFRESH_NAMESPACES", "team-a,team-b")]);

    run.expect_code(1);
    assert_eq!(run.outcome("team-b"), "failed");
    let summary = run.summary();
    assert_eq!(summary["level"], "ERROR", "{summary}");
    assert_eq!(summary["message"], "run finished with failures");
    assert_eq!(summary["unknown"], 1, "team-b's Secret was never read");
}

#[test]
fn in_text_logs_every_outcome_is_quoted_alike() {
    let h = Harness::new();
    h.namespaces(&["team-a", "team-b"]);
    h.cluster.add_fault(Fault::new(
        "PATCH",
        "^/api/v1/namespaces/team-b/secrets/",
        403,
    ));
    h.seed_secret(
        "team-b",
        "kubectl-create",
        json!({ "type": "kubernetes.io/dockerconfigjson", "data": { ".dockerconfigjson": b64(r#"{"auths":{}}"#) } }),
    );

    let output = h
        .command(&[("ECR_REFRESH_LOG_FORMAT", "text")])
        .output()
        .unwrap();

    assert_eq!(output.status.code(), Some(1));
    let text = String::from_utf8(output.stdout).unwrap();
    let line = |ns: &str| {
        text.lines()
            .find(|l| l.contains(&format!("namespace=\"{ns}\"")) && l.contains("outcome="))
            .unwrap_or_else(|| panic!("no line for {ns}:\n{text}"))
            .to_owned()
    };
    assert!(
        line("team-a").contains("outcome=\"created\""),
        "{}",
        line("team-a")
    );
    assert!(
        line("team-b").contains("outcome=\"failed\""),
        "{}",
        line("team-b")
    );
    assert_eq!(
        text.matches("outcome=\"failed\"").count(),
        1,
        "grep 'outcome=\"failed\"' finds the failed namespace:\n{text}"
    );
}

#[test]
fn a_dry_run_would_create_has_no_uid_after() {
    let h = Harness::new();
    h.namespaces(&["new"]);

    let run = h.run(&[("ECR_REFRESH_DRY_RUN", "true")]);

    run.expect_code(0);
    assert_eq!(run.outcome("new"), "would-create");
    assert_eq!(run.line("new")["uid_after"], "-");
    assert_eq!(run.line("new")["uid_before"], "-");
    assert!(h.secret("new").is_none());
}

/// ECR_REFRESH_EVICT_STUCK_PODS in a dry run: a ReplicaSet's pod stuck for want of
/// credentials, created before its ServiceAccount listed the Secret, would be evicted; a bare
/// pod in the same state is left, with why; a pod stuck on a missing tag gets no line. Nothing
/// is evicted (no request to pods/eviction), the exit code is 0, and the summary and the
/// termination message count them. (Evictions themselves: tests/real/admission.rs and
/// tests/node/evict.rs; the fake serves no pods/eviction.)
#[test]
fn a_dry_run_with_the_eviction_option_says_which_stuck_pods_it_would_evict() {
    let h = Harness::new();
    h.namespaces(&["team-a"]);
    let image = format!("{REGISTRY}/web:1");
    let waiting = |message: &str| {
        json!({"phase": "Pending", "containerStatuses": [{
            "name": "app", "image": image, "imageID": "", "ready": false, "restartCount": 0,
            "state": {"waiting": {"reason": "ImagePullBackOff", "message": message}}}]})
    };
    let no_credentials = format!(
        "Back-off pulling image \"{image}\": ErrImagePull: failed to pull and unpack image \
         \"{image}\": failed to resolve image: pull access denied, repository does not exist \
         or may require authorization: authorization failed: no basic auth credentials"
    );
    let not_found = format!("Back-off pulling image \"{image}\": ErrImagePull: {image}: not found");
    for (name, owner, message) in [
        ("web-1", Some("web-7d9f8"), &no_credentials),
        ("bare", None, &no_credentials),
        ("typo-1", Some("typo-5c4b3"), &not_found),
    ] {
        h.cluster.seed(
            Resource::Pods,
            pods::pod("team-a", name, &image, owner),
            "kube-controller-manager",
        );
        h.cluster.set_pod_status("team-a", name, waiting(message));
    }
    // Listed on the ServiceAccount after the pods were created, as the component does.
    h.cluster.seed(
        Resource::ServiceAccounts,
        json!({"metadata": {"name": "default", "namespace": "team-a"},
               "imagePullSecrets": [{"name": SECRET}]}),
        "ecr-refresh",
    );

    let run = h.run(&[
        ("ECR_REFRESH_DRY_RUN", "true"),
        ("ECR_REFRESH_EVICT_STUCK_PODS", "true"),
    ]);

    run.expect_code(0);
    let line = |pod: &str| run.lines.iter().find(|l| l["pod"] == pod).cloned();
    let web = line("web-1").unwrap_or_else(|| panic!("no line for web-1:\n{}", run.stdout));
    assert_eq!(web["outcome"], "would-evict", "{web}");
    assert_eq!(web["owner"], "ReplicaSet/web-7d9f8", "{web}");
    assert_eq!(web["namespace"], "team-a", "{web}");
    let bare = line("bare").unwrap_or_else(|| panic!("no line for bare:\n{}", run.stdout));
    assert_eq!(bare["outcome"], "left", "{bare}");
    assert!(
        bare["reason"]
            .as_str()
            .is_some_and(|r| r.contains("bare pod")),
        "{bare}"
    );
    assert!(line("typo-1").is_none(), "a missing tag: {}", run.stdout);
    assert!(
        h.cluster
            .requests()
            .iter()
            .all(|r| !r.path.contains("eviction")),
        "a dry run evicts nothing"
    );
    let termination: Value =
        serde_json::from_str(&std::fs::read_to_string(h.termination_log()).unwrap()).unwrap();
    assert_eq!(
        termination["pods"],
        json!({"evicted": 0, "would_evict": 1, "left": 1}),
        "{termination}"
    );
    let summary = run
        .lines
        .iter()
        .find(|l| l.get("pods_would_evict").is_some())
        .unwrap_or_else(|| panic!("no summary with pods:\n{}", run.stdout));
    assert_eq!(summary["pods_would_evict"], 1);
    assert_eq!(summary["pods_left"], 1);
    assert_eq!(summary["pods_evicted"], 0);
}

/// A dry run judges the pods as if its own writes had happened: with
/// ECR_REFRESH_SERVICE_ACCOUNTS, the ServiceAccount it would list the Secret on is taken as
/// listing it, so a ReplicaSet's stuck pod without imagePullSecrets is `would-evict`, as the
/// real run then evicts it, not `left` for a ServiceAccount that "does not list" the Secret.
/// Nothing is written.
#[test]
fn a_dry_run_judges_stuck_pods_as_if_its_service_account_writes_had_happened() {
    let h = Harness::new();
    h.namespaces(&["team-a"]);
    let image = format!("{REGISTRY}/web:1");
    h.cluster.seed(
        Resource::Pods,
        pods::pod("team-a", "web-1", &image, Some("web-7d9f8")),
        "kube-controller-manager",
    );
    h.cluster.set_pod_status(
        "team-a",
        "web-1",
        json!({"phase": "Pending", "containerStatuses": [{
            "name": "app", "image": image, "imageID": "", "ready": false, "restartCount": 0,
            "state": {"waiting": {"reason": "ImagePullBackOff", "message": format!(
                "Back-off pulling image \"{image}\": ErrImagePull: failed to pull and unpack \
                 image \"{image}\": failed to resolve image: pull access denied, repository does \
                 not exist or may require authorization: authorization failed: no basic auth \
                 credentials")}}}]}),
    );
    let account = h.cluster.seed(
        Resource::ServiceAccounts,
        json!({"metadata": {"name": "default", "namespace": "team-a"}}),
        "kube-controller-manager",
    );

    let run = h.run(&[
        ("ECR_REFRESH_DRY_RUN", "true"),
        ("ECR_REFRESH_SERVICE_ACCOUNTS", "default"),
        ("ECR_REFRESH_EVICT_STUCK_PODS", "true"),
    ]);

    run.expect_code(0);
    let web = run
        .lines
        .iter()
        .find(|l| l["pod"] == "web-1")
        .unwrap_or_else(|| panic!("no line for web-1:\n{}", run.stdout));
    assert_eq!(web["outcome"], "would-evict", "{web}");
    assert_eq!(
        h.cluster
            .get(Resource::ServiceAccounts, "team-a", "default")
            .map(|a| a["metadata"]["resourceVersion"].clone()),
        Some(account["metadata"]["resourceVersion"].clone()),
        "a dry run writes nothing"
    );
    assert!(h.secret("team-a").is_none());
}

/// An eviction whose answer never came (the connection cut mid-answer, or no answer within
/// the 15 s a request's attempt waits) may have gone through: it counts against ECR_REFRESH_EVICT_LIMIT, and its
/// line says so. With a limit of 2, two such evictions leave the third stuck pod for the next
/// run, unasked.
#[test]
fn an_eviction_that_got_no_answer_counts_against_the_limit() {
    let h = Harness::new();
    h.namespaces(&["team-a"]);
    let image = format!("{REGISTRY}/web:1");
    let no_credentials = format!(
        "Back-off pulling image \"{image}\": ErrImagePull: failed to pull and unpack image \
         \"{image}\": failed to resolve image: pull access denied, repository does not exist \
         or may require authorization: authorization failed: no basic auth credentials"
    );
    for name in ["web-1", "web-2", "web-3"] {
        h.cluster.seed(
            Resource::Pods,
            pods::pod("team-a", name, &image, Some("web-7d9f8")),
            "kube-controller-manager",
        );
        h.cluster.set_pod_status(
            "team-a",
            name,
            json!({"phase": "Pending", "containerStatuses": [{
                "name": "app", "image": image, "imageID": "", "ready": false, "restartCount": 0,
                "state": {"waiting": {"reason": "ImagePullBackOff", "message": no_credentials}}}]}),
        );
    }
    h.cluster.seed(
        Resource::ServiceAccounts,
        json!({"metadata": {"name": "default", "namespace": "team-a"},
               "imagePullSecrets": [{"name": SECRET}]}),
        "ecr-refresh",
    );
    h.cluster.add_fault(Fault::hang_up(
        "POST",
        "^/api/v1/namespaces/team-a/pods/web-1/eviction$",
    ));
    h.cluster.add_fault(
        Fault::new(
            "POST",
            "^/api/v1/namespaces/team-a/pods/web-2/eviction$",
            201,
        )
        .latency(Duration::from_secs(20)),
    );

    let run = h.run(&[
        ("ECR_REFRESH_EVICT_STUCK_PODS", "true"),
        ("ECR_REFRESH_EVICT_LIMIT", "2"),
    ]);

    run.expect_code(0);
    let line = |pod: &str| {
        run.lines
            .iter()
            .find(|l| l["pod"] == pod)
            .cloned()
            .unwrap_or_else(|| panic!("no line for {pod}:\n{}", run.stdout))
    };
    let web3 = line("web-3");
    assert_eq!(web3["outcome"], "left", "{web3}");
    assert!(
        web3["reason"]
            .as_str()
            .is_some_and(|r| r.contains("ECR_REFRESH_EVICT_LIMIT=2")),
        "{web3}"
    );
    for pod in ["web-1", "web-2"] {
        let l = line(pod);
        assert_eq!(l["outcome"], "left", "{l}");
        let reason = l["reason"].as_str().unwrap_or_default();
        assert!(
            reason.contains("no answer")
                && reason.contains("counts against ECR_REFRESH_EVICT_LIMIT"),
            "{l}"
        );
    }
    // (The fake records a request once it answered: web-2's, cut off by the client, may not
    // be there.)
    assert!(
        h.cluster
            .requests()
            .iter()
            .all(|r| r.path != "/api/v1/namespaces/team-a/pods/web-3/eviction"),
        "no eviction past the limit"
    );
}

/// The pod list is paged like the others, and restarts like them when its continue token
/// expires (410): every stuck pod is judged, each once, however many pages are read again.
#[test]
fn a_pod_list_whose_continue_token_expires_is_read_again_and_each_pod_judged_once() {
    let h = Harness::with(FakeCluster::builder().max_page(2).start());
    h.namespaces(&["team-a"]);
    let image = format!("{REGISTRY}/web:1");
    let names: Vec<String> = (1..=5).map(|i| format!("web-{i}")).collect();
    for name in &names {
        h.cluster.seed(
            Resource::Pods,
            pods::pod("team-a", name, &image, Some("web-7d9f8")),
            "kube-controller-manager",
        );
        h.cluster.set_pod_status(
            "team-a",
            name,
            json!({"phase": "Pending", "containerStatuses": [{
                "name": "app", "image": image, "imageID": "", "ready": false, "restartCount": 0,
                "state": {"waiting": {"reason": "ImagePullBackOff", "message": format!(
                    "Back-off pulling image \"{image}\": ErrImagePull: failed to pull and unpack \
                     image \"{image}\": failed to resolve image: pull access denied, repository \
                     does not exist or may require authorization: authorization failed: no basic \
                     auth credentials")}}}]}),
        );
    }
    h.cluster.seed(
        Resource::ServiceAccounts,
        json!({"metadata": {"name": "default", "namespace": "team-a"},
               "imagePullSecrets": [{"name": SECRET}]}),
        "ecr-refresh",
    );
    h.cluster.expire_next_continue_of(Resource::Pods);

    let run = h.run(&[
        ("ECR_REFRESH_DRY_RUN", "true"),
        ("ECR_REFRESH_EVICT_STUCK_PODS", "true"),
        ("ECR_REFRESH_EVICT_LIMIT", "5"),
    ]);

    run.expect_code(0);
    for name in &names {
        let lines: Vec<&Value> = run.lines.iter().filter(|l| l["pod"] == *name).collect();
        assert_eq!(lines.len(), 1, "{name} judged once:\n{}", run.stdout);
        assert_eq!(lines[0]["outcome"], "would-evict", "{}", lines[0]);
    }
    let lists: Vec<u16> = h
        .cluster
        .requests()
        .into_iter()
        .filter(|r| r.method == "GET" && r.path == "/api/v1/namespaces/team-a/pods")
        .map(|r| r.status)
        .collect();
    // Pages of 2: the second meets the 410, and the list starts again, 3 pages.
    assert_eq!(lists, [200, 410, 200, 200, 200]);
    let summary = run
        .lines
        .iter()
        .find(|l| l.get("pods_would_evict").is_some())
        .unwrap_or_else(|| panic!("no summary with pods:\n{}", run.stdout));
    assert_eq!(summary["pods_would_evict"], 5, "{summary}");
    assert_eq!(summary["pods_left"], 0, "{summary}");
}

/// Without the option, no pod is looked at: no pod request, and no pod counts anywhere.
#[test]
fn without_the_eviction_option_no_pod_is_read() {
    let h = Harness::new();
    h.namespaces(&["team-a"]);

    let run = h.run(&[]);

    run.expect_code(0);
    assert!(
        h.cluster
            .requests()
            .iter()
            .all(|r| !r.path.contains("/pods")),
        "{:?}",
        h.cluster.requests()
    );
    let termination: Value =
        serde_json::from_str(&std::fs::read_to_string(h.termination_log()).unwrap()).unwrap();
    assert!(termination.get("pods").is_none(), "{termination}");
    assert!(run.lines.iter().all(|l| l.get("pods_evicted").is_none()));
}

/// Never delete, in the source: the one call that sends a DELETE is `ecr-refresh
/// uninstall`'s (src/uninstall/), which an operator runs with their own credentials; no
/// module a refresh or a check goes through has one. (Every run in these tests is also
/// checked for a DELETE on the wire: tests/common/mod.rs.)
#[test]
fn the_only_delete_in_src_is_uninstalls() {
    fn rust_files(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        for entry in std::fs::read_dir(dir).expect("a readable directory") {
            let path = entry.expect("an entry").path();
            if path.is_dir() {
                rust_files(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut deletes: Vec<String> = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).expect("a source file");
        for (n, line) in text.lines().enumerate() {
            if line.contains(".delete(") || line.contains("Method::DELETE") {
                let relative = file.strip_prefix(&src).unwrap().display().to_string();
                deletes.push(format!("{relative}:{}", n + 1));
            }
        }
    }
    assert!(!deletes.is_empty(), "the scan finds uninstall's delete");
    let elsewhere: Vec<&String> = deletes
        .iter()
        .filter(|d| !d.starts_with("uninstall/"))
        .collect();
    assert!(
        elsewhere.is_empty(),
        "a delete outside src/uninstall/: {elsewhere:?}"
    );
}
