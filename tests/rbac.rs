//! The RBAC in manifests/ grants everything a run needs and nothing it doesn't use: a full
//! refresh passes with the fake API server enforcing it, and fails when any verb is taken out.

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
/// exists (patch), and a ServiceAccount to attach to.
fn scenario(rbac: &str) -> Harness {
    let h = Harness::with(FakeCluster::builder().rbac_from_yaml(rbac).start());
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
fn a_full_refresh_succeeds_under_the_cluster_role_in_manifests() {
    let role = manifest("manifests/clusterrole.yaml");
    let h = scenario(&role);

    let run = h.run(FULL);

    run.expect_code(0);
    assert_eq!(run.outcome("team-a"), "created");
    assert_eq!(run.outcome("team-b"), "updated");
    assert_eq!(run.line("team-a")["service_accounts"], "default:added");
    let refused: Vec<_> = h
        .cluster
        .requests()
        .into_iter()
        .filter(|r| r.status == 403)
        .collect();
    assert!(refused.is_empty(), "{refused:?}");
}

#[test]
fn every_verb_the_cluster_role_grants_is_one_a_run_needs() {
    let role = manifest("manifests/clusterrole.yaml");
    let granted = grants(&role);
    assert_eq!(
        granted.len(),
        6,
        "namespaces list; secrets get, create, patch; serviceaccounts get, patch: {granted:?}"
    );
    for (resource, verb) in granted {
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

#[test]
fn the_namespaced_roles_suffice_for_literal_namespaces() {
    let roles = format!(
        "{}\n---\n{}",
        manifest("manifests/namespaced/role-team-a.yaml"),
        manifest("manifests/namespaced/role-team-b.yaml")
    );
    let h = scenario(&roles);

    let run = h.run(&[("ECR_REFRESH_NAMESPACES", "team-a,team-b"), FULL[0]]);

    run.expect_code(0);
    assert_eq!(run.outcome("team-a"), "created");
    assert_eq!(run.outcome("team-b"), "updated");
    assert!(h.cluster.get(Resource::Secrets, "team-a", SECRET).is_some());

    // Without the list grant, a glob cannot work: the run says so and writes nothing.
    let listing = h.run(&[("ECR_REFRESH_NAMESPACES", "team-*")]);
    listing.expect_code(3);
    assert!(
        listing.lines.last().unwrap()["error"]
            .as_str()
            .unwrap()
            .contains("list namespaces")
    );
}
