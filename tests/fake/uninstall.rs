//! `ecr-refresh uninstall` against the fake: whose Secrets it removes (one install's, never
//! another's), within the install's selection, and the ServiceAccount entries it takes out
//! only where it removed the Secret. tests/real/runs.rs proves the same on the real server.

use crate::common;

use common::*;
use fake_cluster::Resource;
use serde_json::{Value, json};

fn seed_account(h: &Harness, namespace: &str, pull_secrets: Value) {
    h.cluster.seed(
        Resource::ServiceAccounts,
        json!({
            "apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": { "name": "default", "namespace": namespace },
            "imagePullSecrets": pull_secrets
        }),
        "kubectl-edit",
    );
}

fn pull_secrets(h: &Harness, namespace: &str) -> Value {
    h.cluster
        .get(Resource::ServiceAccounts, namespace, "default")
        .expect("the ServiceAccount")["imagePullSecrets"]
        .clone()
}

/// The operator's uninstall: no DELETE check, as it is the one run that may delete.
fn uninstall(h: &Harness, env: &[(&str, &str)]) -> Run {
    let output = h
        .command(env)
        .arg("uninstall")
        .output()
        .expect("ecr-refresh runs");
    Binary::checked(h, output)
}

fn writes(h: &Harness) -> usize {
    h.cluster
        .requests()
        .iter()
        .filter(|r| matches!(r.method.as_str(), "DELETE" | "PATCH" | "PUT" | "POST"))
        .count()
}

#[test]
fn with_no_install_named_two_recorded_installs_are_refused_and_nothing_is_changed() {
    let h = Harness::new();
    h.namespaces(&["a", "b"]);
    for (install, ns) in [("team-a/ecr-refresh", "a"), ("team-b/ecr-refresh", "b")] {
        h.run(&[
            ("ECR_REFRESH_INSTALL", install),
            ("ECR_REFRESH_NAMESPACES", ns),
        ])
        .expect_code(0);
    }
    let before = writes(&h);

    let refused = uninstall(&h, &[]);

    refused.expect_code(1);
    let error = refused
        .lines
        .iter()
        .find(|l| l["level"] == "ERROR")
        .unwrap_or_else(|| panic!("an error line:\n{}", refused.stdout));
    let said = error["error"].as_str().unwrap_or_default();
    assert!(
        said.contains("team-a/ecr-refresh, team-b/ecr-refresh")
            && said.contains("set ECR_REFRESH_INSTALL"),
        "{said}"
    );
    assert_eq!(writes(&h), before, "nothing written, nothing deleted");
    assert!(h.secret("a").is_some() && h.secret("b").is_some());

    let named = uninstall(&h, &[("ECR_REFRESH_INSTALL", "team-b/ecr-refresh")]);
    named.expect_code(0);
    assert_eq!(named.outcome("a"), "kept", "{}", named.stdout);
    assert_eq!(named.line("a")["install"], "team-a/ecr-refresh");
    assert_eq!(named.outcome("b"), "deleted", "{}", named.stdout);
    assert!(h.secret("a").is_some(), "team-a's Secret stays");
    assert!(h.secret("b").is_none());
}

#[test]
fn uninstall_looks_only_in_the_selected_namespaces() {
    let h = Harness::new();
    h.namespaces(&["in", "out", "excluded"]);
    h.cluster.add_namespace("unlabelled", &[]);
    h.run(&[]).expect_code(0);

    let run = uninstall(
        &h,
        &[
            ("ECR_REFRESH_NAMESPACES", "in,excluded,unlabelled"),
            ("ECR_REFRESH_EXCLUDE_NAMESPACES", "excluded"),
        ],
    );
    run.expect_code(0);
    assert_eq!(run.outcome("in"), "deleted", "{}", run.stdout);
    assert!(run.outcome("unlabelled") == "deleted");
    for ns in ["out", "excluded"] {
        assert!(h.secret(ns).is_some(), "{ns}: outside the selection");
        assert!(run.lines.iter().all(|l| l["namespace"] != ns), "{ns}");
    }

    // With a label selector, only the namespaces it selects.
    let h = Harness::new();
    h.cluster.add_namespace("labelled", &[("team", "a")]);
    h.cluster.add_namespace("other", &[]);
    h.run(&[]).expect_code(0);
    let run = uninstall(&h, &[("ECR_REFRESH_NAMESPACE_SELECTOR", "team=a")]);
    run.expect_code(0);
    assert_eq!(run.outcome("labelled"), "deleted", "{}", run.stdout);
    assert!(h.secret("other").is_some(), "not selected by the label");
}

#[test]
fn service_account_entries_go_only_where_the_secret_went() {
    let h = Harness::new();
    h.namespaces(&["ours", "team"]);
    let ours = json!([{"name": "team-creds"}]);
    seed_account(&h, "ours", ours.clone());
    // The team's own Secret of our name (ghcr.io, not ours) and its entry for it.
    seed_account(&h, "team", json!([{"name": SECRET}]));
    h.seed_secret(
        "team",
        "kubectl-create",
        json!({"type": "kubernetes.io/dockerconfigjson", "data": {".dockerconfigjson":
            b64(&json!({"auths": {"ghcr.io": {"username": "bot", "password": "theirs"}}}).to_string())}}),
    );
    let env = [
        ("ECR_REFRESH_SERVICE_ACCOUNTS", "default"),
        ("ECR_REFRESH_NAMESPACES", "ours"),
    ];
    h.run(&env).expect_code(0);
    assert_eq!(
        pull_secrets(&h, "ours"),
        json!([{"name": "team-creds"}, {"name": SECRET}])
    );

    for selection in ["ours", "*"] {
        let run = uninstall(
            &h,
            &[
                ("ECR_REFRESH_SERVICE_ACCOUNTS", "default"),
                ("ECR_REFRESH_NAMESPACES", selection),
            ],
        );
        run.expect_code(0);
        assert_eq!(
            pull_secrets(&h, "team"),
            json!([{"name": SECRET}]),
            "{selection}: the team's entry for its own Secret stays\n{}",
            run.stdout
        );
    }
    assert!(h.secret("ours").is_none());
    assert_eq!(pull_secrets(&h, "ours"), ours);
    assert!(h.secret("team").is_some(), "the team's Secret is not ours");
}
