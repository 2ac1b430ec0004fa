//! The RBAC in manifests/ grants everything a run needs and nothing it doesn't use: a full
//! refresh passes with the fake API server enforcing it, and fails when any verb is taken out.
//! The fake grants only roles bound to ecr-refresh's ServiceAccount, so every test loads the
//! bindings with the roles.

mod common;

use std::path::Path;

use common::*;
use fake_cluster::{FakeCluster, Resource};
use serde_json::json;

fn manifest(path: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(path))
        .unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Every verb the role grants, as (resource, verb).
fn grants(yaml: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut resource = None;
    for line in yaml.lines().map(str::trim) {
        if let Some(list) = line.strip_prefix("resources:") {
            resource = Some(list.trim_matches(|c| " []\"".contains(c)).to_owned());
        } else if let (Some(list), Some(r)) = (line.strip_prefix("verbs:"), &resource) {
            for verb in list.trim_matches(|c| " []".contains(c)).split(',') {
                out.push((r.clone(), verb.trim().trim_matches('"').to_owned()));
            }
        }
    }
    out
}

/// The role with one verb taken out of one resource's rule.
fn without(yaml: &str, resource: &str, verb: &str) -> String {
    let mut in_rule = false;
    let mut out = Vec::new();
    for line in yaml.lines() {
        if line.trim().starts_with("resources:") {
            in_rule = line.contains(&format!("\"{resource}\""));
        }
        if in_rule && line.trim().starts_with("verbs:") {
            let kept: Vec<String> = line
                .trim()
                .trim_start_matches("verbs:")
                .trim_matches(|c| " []".contains(c))
                .split(',')
                .map(|v| v.trim().to_owned())
                .filter(|v| v.trim_matches('"') != verb)
                .collect();
            let indent = &line[..line.len() - line.trim_start().len()];
            out.push(format!("{indent}verbs: [{}]", kept.join(", ")));
            in_rule = false;
        } else {
            out.push(line.to_owned());
        }
    }
    out.join("\n")
}

/// A cluster where a full run uses every verb: a namespace to create in, one whose Secret
/// exists (patch), and a ServiceAccount to attach to. `role` is bound as in manifests/.
fn scenario(role: &str) -> Harness {
    let rbac = format!(
        "{role}\n---\n{}",
        manifest("manifests/clusterrolebinding.yaml")
    );
    let h = Harness::with(FakeCluster::builder().rbac_from_yaml(&rbac).start());
    h.namespaces(&["team-a", "team-b"]);
    h.seed_secret(
        "team-b",
        "kubectl-create",
        json!({ "type": "kubernetes.io/dockerconfigjson", "data": { ".dockerconfigjson": b64(r#"{"auths":{}}"#) } }),
    );
    h
}

const FULL: &[(&str, &str)] = &[("ECR_REFRESH_SERVICE_ACCOUNTS", "default")];

#[test]
fn the_cluster_role_reads_and_patches_no_secret_but_ours() {
    let h = scenario(&manifest("manifests/clusterrole.yaml"));

    let run = h.run(&[("ECR_REFRESH_SECRET_NAME", "other-pull-secret")]);

    run.expect_code(1);
    assert_eq!(run.outcome("team-a"), "failed");
    assert!(
        run.line("team-a")["error"]
            .as_str()
            .unwrap()
            .contains("forbidden")
    );
    let refused: Vec<_> = h
        .cluster
        .requests()
        .into_iter()
        .filter(|r| r.status == 403)
        .map(|r| r.path)
        .collect();
    assert!(
        refused
            .iter()
            .all(|p| p.ends_with("/secrets/other-pull-secret")),
        "{refused:?}"
    );
}

#[test]
fn every_verb_the_cluster_role_grants_is_one_a_run_needs() {
    let role = manifest("manifests/clusterrole.yaml");
    let granted = grants(&role);
    assert_eq!(
        granted.len(),
        7,
        "namespaces list; secrets get, create, patch; serviceaccounts get, patch; events create: {granted:?}"
    );
    for (resource, verb) in granted {
        // Events are best effort: without create on them a run passes and warns once
        // (tests/events.rs).
        if resource == "events" {
            continue;
        }
        let h = scenario(&without(&role, &resource, &verb));

        let run = h.run(FULL);

        assert_ne!(
            run.code, 0,
            "the run passed without {verb} on {resource}:\n{}",
            run.stdout
        );
        let refused = h
            .cluster
            .requests()
            .into_iter()
            .filter(|r| r.status == 403)
            .count();
        assert!(
            refused > 0,
            "without {verb} on {resource}, a request was refused"
        );
    }
}

/// The value the namespaced overlay's CronJob patch gives a variable.
fn namespaced_value(variable: &str) -> String {
    let text = manifest("manifests/namespaced/kustomization.yaml");
    let mut lines = text.lines().map(str::trim);
    lines
        .by_ref()
        .find(|line| line.strip_prefix("- name:").map(str::trim) == Some(variable))
        .unwrap_or_else(|| panic!("the namespaced overlay sets no {variable}"));
    let value = lines
        .next()
        .and_then(|line| line.strip_prefix("value:"))
        .unwrap_or_else(|| panic!("{variable} in the namespaced overlay has no value line"));
    value.trim().trim_matches(['"', '\'']).to_owned()
}

/// A fake cluster that grants only what these manifest files grant.
fn harness_with_rbac_from(files: &[&str]) -> Harness {
    let yaml: Vec<String> = files.iter().map(|f| manifest(f)).collect();
    Harness::with(
        FakeCluster::builder()
            .rbac_from_yaml(&yaml.join("\n---\n"))
            .start(),
    )
}

/// Namespaces with a `default` ServiceAccount; the first holds a Secret made by the
/// `kubectl create secret docker-registry ... | kubectl apply -f -` loop, to be adopted.
fn seed(h: &Harness, namespaces: &[&str]) {
    for ns in namespaces {
        h.cluster.add_namespace(ns, &[]);
        h.cluster.seed(
            Resource::ServiceAccounts,
            json!({ "metadata": { "name": "default", "namespace": ns } }),
            "kube-controller-manager",
        );
    }
    let old = r#"{"auths":{"https://123456789012.dkr.ecr.us-east-1.amazonaws.com":{"username":"AWS","password":"old"}}}"#;
    h.seed_secret(
        namespaces[0],
        "kubectl-client-side-apply",
        json!({
            "type": "kubernetes.io/dockerconfigjson",
            "metadata": { "annotations": {
                "kubectl.kubernetes.io/last-applied-configuration": "{\"data\":{\"password\":\"old\"}}"
            } },
            "data": { ".dockerconfigjson": b64(old) }
        }),
    );
}

/// The namespaced variant's Roles and their RoleBindings.
const NAMESPACED: &[&str] = &[
    "manifests/namespaced/role-team-a.yaml",
    "manifests/namespaced/rolebinding-team-a.yaml",
    "manifests/namespaced/role-team-b.yaml",
    "manifests/namespaced/rolebinding-team-b.yaml",
];

fn refused(h: &Harness) -> Vec<String> {
    h.cluster
        .requests()
        .into_iter()
        .filter(|r| r.status == 403)
        .map(|r| format!("{} {}", r.method, r.path))
        .collect()
}

#[test]
fn a_run_needs_no_right_the_cluster_wide_clusterrole_does_not_grant() {
    let h = harness_with_rbac_from(&[
        "manifests/clusterrole.yaml",
        "manifests/clusterrolebinding.yaml",
    ]);
    seed(&h, &["adopted", "fresh", "gone-mid-run"]);
    h.seed_secret(
        "gone-mid-run",
        "ecr-refresh",
        json!({ "type": "kubernetes.io/dockerconfigjson", "data": { ".dockerconfigjson": b64(r#"{"auths":{}}"#) } }),
    );
    h.cluster
        .delete_after_next_get(Resource::Secrets, "gone-mid-run", SECRET);
    let env = [("ECR_REFRESH_SERVICE_ACCOUNTS", "default")];

    let dry = h.run(&[env[0], ("ECR_REFRESH_DRY_RUN", "true")]);
    let run = h.run(&env);

    dry.expect_code(0);
    run.expect_code(0);
    assert_eq!(
        refused(&h),
        Vec::<String>::new(),
        "requests the ClusterRole refused"
    );
    assert_eq!(run.outcome("adopted"), "updated");
    assert_eq!(run.outcome("fresh"), "created");
    for ns in ["adopted", "fresh", "gone-mid-run"] {
        assert!(h.secret(ns).is_some(), "{ns}");
    }
}

#[test]
fn a_run_over_the_namespaced_variants_namespaces_needs_only_their_roles() {
    let h = harness_with_rbac_from(NAMESPACED);
    seed(&h, &["team-a", "team-b", "team-c"]);
    let namespaces = namespaced_value("ECR_REFRESH_NAMESPACES");
    assert_eq!(namespaces, "team-a,team-b");
    let env = [
        ("ECR_REFRESH_NAMESPACES", namespaces.as_str()),
        ("ECR_REFRESH_SERVICE_ACCOUNTS", "default"),
    ];

    let dry = h.run(&[env[0], env[1], ("ECR_REFRESH_DRY_RUN", "true")]);
    let run = h.run(&env);

    dry.expect_code(0);
    run.expect_code(0);
    assert_eq!(
        refused(&h),
        Vec::<String>::new(),
        "requests the Roles refused"
    );
    assert_eq!(run.outcome("team-a"), "updated");
    assert_eq!(run.outcome("team-b"), "created");
    assert!(h.secret("team-c").is_none());
}

#[test]
fn with_only_the_namespaced_roles_a_glob_is_refused_before_anything_is_written() {
    let h = harness_with_rbac_from(NAMESPACED);
    seed(&h, &["team-a", "team-b"]);

    let run = h.run(&[("ECR_REFRESH_NAMESPACES", "team-*")]);

    run.expect_code(3);
    assert!(h.secret("team-b").is_none());
}

#[test]
fn a_run_fails_when_the_binding_is_missing_or_names_another_subject() {
    let role = manifest("manifests/clusterrole.yaml");
    let binding = manifest("manifests/clusterrolebinding.yaml");
    assert!(binding.contains("namespace: ecr-refresh"), "{binding}");
    let elsewhere = binding.replace("namespace: ecr-refresh", "namespace: default");
    for (case, rbac) in [
        ("the ClusterRole without its binding", role.clone()),
        (
            "a binding to the ServiceAccount of namespace default",
            format!("{role}\n---\n{elsewhere}"),
        ),
    ] {
        let h = Harness::with(FakeCluster::builder().rbac_from_yaml(&rbac).start());
        seed(&h, &["adopted", "fresh"]);
        let before = h.secret("adopted");

        let run = h.run(&[("ECR_REFRESH_SERVICE_ACCOUNTS", "default")]);

        assert_eq!(run.code, 3, "{case}:\n{}{}", run.stdout, run.stderr);
        assert_eq!(
            refused(&h),
            ["GET /api/v1/namespaces"],
            "{case}: the namespace list is refused, and nothing is tried after it"
        );
        assert_eq!(h.secret("adopted"), before, "{case}");
        assert!(h.secret("fresh").is_none(), "{case}");
    }

    // The namespaced Roles without their RoleBindings grant nothing either.
    let h = harness_with_rbac_from(&[
        "manifests/namespaced/role-team-a.yaml",
        "manifests/namespaced/role-team-b.yaml",
    ]);
    seed(&h, &["team-a", "team-b"]);

    let run = h.run(&[("ECR_REFRESH_NAMESPACES", "team-a,team-b")]);

    assert_ne!(run.code, 0, "{}", run.stdout);
    assert!(!refused(&h).is_empty());
    assert!(h.secret("team-b").is_none());
}
