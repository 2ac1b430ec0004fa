//! What ships in `manifests/` matches the binary.
//!
//! Variables: the manifests and the README name the variables the binary reads, and no
//! others. A variable renamed in `src/config.rs` but not in `manifests/` would make every
//! deployed run fail with "not a variable ecr-refresh knows" (exit 2); one added to the
//! code but not to the CronJob would never be seen by an operator. These tests scan the
//! text for `ECR_REFRESH_[A-Z0-9_]+` by hand: no YAML parser is needed for that.
//!
//! RBAC: a run against a fake API server that enforces the shipped ClusterRole (or the
//! namespaced Roles), and nothing else, is never refused.

mod common;

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

use common::{Harness, SECRET, b64};
use ecr_refresh::config::VARIABLES;
use fake_cluster::{FakeCluster, Resource};
use serde_json::json;

const PREFIX: &str = "ECR_REFRESH_";

/// The test suite's own variables: documented for developers, never set in a manifest.
const TEST_VARIABLES: &[&str] = &["ECR_REFRESH_E2E_KUBECONFIG"];

/// The CronJob every variant is built from: it shows every variable with its default.
const BASE_CRONJOB: &str = "manifests/base/cronjob.yaml";

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

/// Every `ECR_REFRESH_[A-Z0-9_]+` in `text` (digits too: `ECR_REFRESH_E2E_KUBECONFIG`), not preceded by an identifier character.
fn variables_in(text: &str) -> BTreeSet<String> {
    let bytes = text.as_bytes();
    let mut found = BTreeSet::new();
    let mut from = 0;
    while let Some(at) = text[from..].find(PREFIX).map(|i| from + i) {
        let start_of_word =
            at == 0 || !(bytes[at - 1].is_ascii_alphanumeric() || bytes[at - 1] == b'_');
        let mut end = at + PREFIX.len();
        while end < bytes.len()
            && (bytes[end].is_ascii_uppercase()
                || bytes[end].is_ascii_digit()
                || bytes[end] == b'_')
        {
            end += 1;
        }
        let name = text[at..end].trim_end_matches('_');
        if start_of_word && name.len() > PREFIX.len() {
            found.insert(name.to_owned());
        }
        from = end.max(at + 1);
    }
    found
}

/// The names of the container's `env` entries: lines like `- name: ECR_REFRESH_X`.
/// Comments don't count: a variable must be set, not only mentioned.
fn env_names_in(yaml: &str) -> BTreeSet<String> {
    yaml.lines()
        .map(str::trim_start)
        .filter(|line| !line.starts_with('#'))
        .filter_map(|line| line.strip_prefix("- name:"))
        .map(|name| name.trim().trim_matches(['"', '\'']).to_owned())
        .collect()
}

fn yaml_files(dir: &Path, into: &mut Vec<PathBuf>) {
    let entries = fs::read_dir(dir).unwrap_or_else(|e| panic!("listing {}: {e}", dir.display()));
    for entry in entries {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            yaml_files(&path, into);
        } else if matches!(
            path.extension().and_then(|e| e.to_str()),
            Some("yaml" | "yml")
        ) {
            into.push(path);
        }
    }
}

fn documents() -> Vec<PathBuf> {
    let mut files = Vec::new();
    yaml_files(&repo().join("manifests"), &mut files);
    assert!(
        !files.is_empty(),
        "no YAML files found under manifests/: the scan would prove nothing"
    );
    files.push(repo().join("README.md"));
    files.sort();
    files
}

#[test]
fn every_variable_the_manifests_and_readme_name_is_one_ecr_refresh_reads() {
    let mut unknown = Vec::new();
    for file in documents() {
        for name in variables_in(&read(&file)) {
            if !VARIABLES.contains(&name.as_str()) && !TEST_VARIABLES.contains(&name.as_str()) {
                let shown = file.strip_prefix(repo()).unwrap_or(&file).display();
                unknown.push(format!("{name} in {shown}"));
            }
        }
    }
    assert!(
        unknown.is_empty(),
        "variables ecr-refresh would refuse (exit 2), not in ecr_refresh::config::VARIABLES:\n  {}",
        unknown.join("\n  ")
    );
}

#[test]
fn the_base_cronjob_sets_every_variable_ecr_refresh_reads() {
    let set = env_names_in(&read(&repo().join(BASE_CRONJOB)));
    let missing: Vec<_> = VARIABLES.iter().filter(|v| !set.contains(**v)).collect();
    assert!(
        missing.is_empty(),
        "{BASE_CRONJOB} has no env entry (with its default and a comment) for {missing:?}"
    );
}

#[test]
fn the_readme_documents_every_variable_ecr_refresh_reads() {
    let named = variables_in(&read(&repo().join("README.md")));
    let missing: Vec<_> = VARIABLES.iter().filter(|v| !named.contains(**v)).collect();
    assert!(missing.is_empty(), "README.md does not mention {missing:?}");
}

#[test]
fn the_scan_finds_whole_variable_names_only() {
    let text = "ECR_REFRESH_TIMEOUT=5m, `ECR_REFRESH_*` variables, XECR_REFRESH_NOPE, \
                ECR_REFRESH_DRY_RUN_, ECR_REFRESH_E2E_KUBECONFIG and ECR_REFRESH_";
    let found: Vec<_> = variables_in(text).into_iter().collect();
    assert_eq!(
        found,
        [
            "ECR_REFRESH_DRY_RUN",
            "ECR_REFRESH_E2E_KUBECONFIG",
            "ECR_REFRESH_TIMEOUT"
        ]
    );

    let yaml = "env:\n  # - name: ECR_REFRESH_A\n  - name: ECR_REFRESH_B\n  - name: \"RUST_LOG\"\n";
    let names: Vec<_> = env_names_in(yaml).into_iter().collect();
    assert_eq!(names, ["ECR_REFRESH_B", "RUST_LOG"]);
}

/// The value the namespaced overlay's CronJob patch gives a variable.
fn namespaced_value(variable: &str) -> String {
    let text = read(&repo().join("manifests/namespaced/kustomization.yaml"));
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
    let yaml: Vec<String> = files.iter().map(|f| read(&repo().join(f))).collect();
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
    let h = harness_with_rbac_from(&["manifests/clusterrole.yaml"]);
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
    let h = harness_with_rbac_from(&[
        "manifests/namespaced/role-team-a.yaml",
        "manifests/namespaced/role-team-b.yaml",
    ]);
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
    let h = harness_with_rbac_from(&[
        "manifests/namespaced/role-team-a.yaml",
        "manifests/namespaced/role-team-b.yaml",
    ]);
    seed(&h, &["team-a", "team-b"]);

    let run = h.run(&[("ECR_REFRESH_NAMESPACES", "team-*")]);

    run.expect_code(3);
    assert!(h.secret("team-b").is_none());
}
