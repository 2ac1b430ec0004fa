//! What ships in `manifests/` matches the binary.
//!
//! Variables: the manifests and the README name the variables the binary reads, and no
//! others. A variable renamed in `src/config.rs` but not in `manifests/` would make every
//! deployed run fail with "not a variable ecr-refresh knows" (exit 2); one added to the
//! code but not to the CronJob would never be seen by an operator. These tests scan the
//! text for `ECR_REFRESH_[A-Z0-9_]+` by hand: no YAML parser is needed for that.
//! The RBAC they grant is tested in rbac.rs.
//!
//! Rendered (`kubectl kustomize`, which must be on PATH): the CronJob's deadlines add up, and
//! the monitoring component's release-label component labels the PrometheusRule.

use crate::common;

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

use std::time::Duration;

use ecr_refresh::config::{Config, VARIABLES};
use serde_json::Value;

use common::manifests::{copy, documents as objects, kustomize, render};

const PREFIX: &str = "ECR_REFRESH_";

/// The test suite's own variables: documented for developers, never set in a manifest.
const TEST_VARIABLES: &[&str] = &[
    "ECR_REFRESH_E2E_KUBECONFIG",
    "ECR_REFRESH_NODE_ASSETS",
    "ECR_REFRESH_SIGNING_HELPER",
];

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
    files.sort();
    files.extend(common::docs::files());
    files
}

#[test]
fn every_variable_the_manifests_and_readme_name_is_one_ecr_refresh_reads() {
    let mut unknown = Vec::new();
    for file in documents() {
        for name in variables_in(&read(&file)) {
            if !VARIABLES.iter().any(|v| v.name == name) && !TEST_VARIABLES.contains(&name.as_str())
            {
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
    let missing: Vec<_> = VARIABLES
        .iter()
        .map(|v| v.name)
        .filter(|v| !set.contains(*v))
        .collect();
    assert!(
        missing.is_empty(),
        "{BASE_CRONJOB} has no env entry (with its default and a comment) for {missing:?}"
    );
}

#[test]
fn the_docs_document_every_variable_ecr_refresh_reads() {
    let named: std::collections::BTreeSet<String> = common::docs::texts()
        .iter()
        .flat_map(|(_, text)| variables_in(text))
        .collect();
    let missing: Vec<_> = VARIABLES
        .iter()
        .map(|v| v.name)
        .filter(|v| !named.contains(*v))
        .collect();
    assert!(missing.is_empty(), "the docs do not mention {missing:?}");
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

/// What a pod needs before the run's clock starts, per try: scheduling, pulling the image
/// onto a node that lacks it, the container starting, the credential chain.
const START_UP: Duration = Duration::from_secs(45);
/// The Job controller's backoff before its first retry; it doubles for each further one.
const FIRST_BACKOFF: Duration = Duration::from_secs(10);
/// ... and stops doubling here.
const MAX_BACKOFF: Duration = Duration::from_secs(360);

fn seconds(v: &Value, what: &str) -> Duration {
    Duration::from_secs(
        v.as_u64()
            .unwrap_or_else(|| panic!("{what}: not a whole number of seconds: {v}")),
    )
}

/// The time between runs of a `*/N * * * *` schedule.
fn interval(schedule: &str) -> Duration {
    let fields: Vec<&str> = schedule.split_whitespace().collect();
    let minutes = match fields.as_slice() {
        [minute, "*", "*", "*", "*"] => minute.strip_prefix("*/").and_then(|n| n.parse().ok()),
        _ => None,
    };
    let minutes: u64 = minutes.unwrap_or_else(|| {
        panic!("schedule {schedule:?}: this test reads only \"*/N * * * *\"; teach it yours")
    });
    Duration::from_secs(minutes * 60)
}

#[test]
#[ignore = "needs kubectl (bash .ci/test)"]
fn both_tries_of_a_job_fit_its_deadline_and_end_before_the_next_run() {
    for variant in ["", "namespaced"] {
        let rendered = render(variant, false);
        let cronjob = objects(&rendered)
            .into_iter()
            .find(|d| d["kind"] == "CronJob")
            .expect("a CronJob");
        let job = &cronjob["spec"]["jobTemplate"]["spec"];
        let pod = &job["template"]["spec"];
        let container = pod["containers"]
            .as_array()
            .and_then(|c| c.iter().find(|c| c["name"] == "ecr-refresh"))
            .expect("the ecr-refresh container");
        let env = container["env"]
            .as_array()
            .expect("env")
            .iter()
            .filter_map(|e| {
                Some((
                    e["name"].as_str()?.to_owned(),
                    e["value"].as_str()?.to_owned(),
                ))
            });
        let config = Config::from_vars(env).expect("the CronJob's variables parse");

        // Kubernetes' defaults where a field is left out.
        let backoff_limit = job["backoffLimit"].as_u64().unwrap_or(6);
        let termination_grace = match &pod["terminationGracePeriodSeconds"] {
            Value::Null => Duration::from_secs(30),
            v => seconds(v, "terminationGracePeriodSeconds"),
        };
        let deadline = seconds(&job["activeDeadlineSeconds"], "activeDeadlineSeconds");

        // A try stops starting work at the timeout; then writes in flight get the grace, the
        // summary Event and the metrics push their timeouts.
        let stopping = ecr_refresh::run::stop::SHUTDOWN_GRACE
            + ecr_refresh::cluster::events::SUMMARY_TIMEOUT
            + ecr_refresh::metrics::PUSH_TIMEOUT;
        let tries = backoff_limit as u32 + 1;
        let backoffs: Duration = (0..backoff_limit as u32)
            .map(|retry| (FIRST_BACKOFF * 2u32.pow(retry.min(16))).min(MAX_BACKOFF))
            .sum();
        let needed = (config.timeout + stopping + START_UP) * tries + backoffs;
        assert!(
            needed <= deadline,
            "manifests/{variant}: {tries} tries x (ECR_REFRESH_TIMEOUT {}s + stopping {}s + \
             start-up {}s) + backoff {}s = {}s, over activeDeadlineSeconds {}s: the deadline \
             would cut the last try short",
            config.timeout.as_secs(),
            stopping.as_secs(),
            START_UP.as_secs(),
            backoffs.as_secs(),
            needed.as_secs(),
            deadline.as_secs()
        );
        // SIGTERM (a drain, or the deadline) leaves the pod its grace period: the run's own
        // stop must fit in it, or SIGKILL cuts the summary and the push.
        assert!(
            stopping <= termination_grace,
            "manifests/{variant}: stopping takes {}s, terminationGracePeriodSeconds is {}s",
            stopping.as_secs(),
            termination_grace.as_secs()
        );
        // With concurrencyPolicy Forbid a Job still running skips the next run.
        let every = interval(cronjob["spec"]["schedule"].as_str().expect("a schedule"));
        assert!(
            deadline + termination_grace <= every,
            "manifests/{variant}: a Job may last {}s (deadline and the pod's grace), runs \
             come every {}s",
            (deadline + termination_grace).as_secs(),
            every.as_secs()
        );
    }
}

#[test]
fn the_schedule_reader_reads_only_what_it_understands() {
    assert_eq!(interval("*/10 * * * *"), Duration::from_secs(600));
    assert!(std::panic::catch_unwind(|| interval("0 * * * *")).is_err());
}

/// The PrometheusRule the monitoring component renders on top of manifests/, with these
/// components of it.
fn prometheus_rule(extra_components: &[&str]) -> Value {
    let copy = copy();
    let overlay = copy.path().join("overlay");
    fs::create_dir_all(&overlay).expect("an overlay directory");
    let mut components = vec!["../manifests/components/monitoring".to_owned()];
    components.extend(
        extra_components
            .iter()
            .map(|c| format!("../manifests/components/monitoring/{c}")),
    );
    fs::write(
        overlay.join("kustomization.yaml"),
        format!(
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n\
             resources: [\"../manifests\"]\ncomponents: {components:?}\n"
        ),
    )
    .expect("writing the overlay");
    let rules: Vec<Value> = objects(&kustomize(&overlay))
        .into_iter()
        .filter(|d| d["kind"] == "PrometheusRule")
        .collect();
    assert_eq!(rules.len(), 1, "{rules:?}");
    rules.into_iter().next().expect("one rule")
}

#[test]
#[ignore = "needs kubectl (bash .ci/test)"]
fn the_release_label_component_labels_the_rule_for_kube_prometheus_stack() {
    let plain = prometheus_rule(&[]);
    assert!(
        plain["metadata"]["labels"]["release"].is_null(),
        "without it the rule has no release label: {}",
        plain["metadata"]
    );

    let labelled = prometheus_rule(&["release-label"]);

    assert_eq!(
        labelled["metadata"]["labels"]["release"], "kube-prometheus-stack",
        "{}",
        labelled["metadata"]
    );
    assert_eq!(labelled["metadata"]["name"], "ecr-refresh");
    assert_eq!(labelled["metadata"]["namespace"], "ecr-refresh");
    // The same rule, groups and all: the patch touches the labels only.
    assert_eq!(labelled["spec"], plain["spec"]);
    let groups: Vec<&str> = labelled["spec"]["groups"]
        .as_array()
        .expect("groups")
        .iter()
        .filter_map(|g| g["name"].as_str())
        .collect();
    assert_eq!(
        groups,
        ["ecr-refresh-pushgateway", "ecr-refresh-kube-state-metrics"]
    );
}

/// The overlay the book's kustomize page shows, as written there, beside a copy of the
/// repository named `ecr-refresh`: `kubectl kustomize` alone renders it (no standalone
/// kustomize), with the image pinned to this version and the region and registries it sets;
/// with its commented component lines taken in, and pointed at the namespaced variant, too.
#[test]
#[ignore = "needs kubectl (bash .ci/test)"]
fn the_books_install_overlay_renders_with_kubectl_alone() {
    let page = common::docs::page("install/kustomize.md");
    let overlay = page
        .split_once("`ecr-refresh-install/kustomization.yaml`:\n\n```yaml\n")
        .and_then(|(_, rest)| rest.split_once("```\n"))
        .map(|(yaml, _)| yaml.to_owned())
        .expect("the book's kustomize page shows ecr-refresh-install/kustomization.yaml");
    let copy = common::manifests::copy();
    let clone = copy.path().join("ecr-refresh");
    fs::create_dir_all(&clone).expect("a directory for the clone");
    fs::rename(copy.path().join("manifests"), clone.join("manifests")).expect("move the copy");
    let install = copy.path().join("ecr-refresh-install");
    fs::create_dir_all(&install).expect("the overlay's directory");

    let with_components = overlay.replace("# components:", "components:").replace(
        "#   - ../ecr-refresh/manifests/components",
        "  - ../ecr-refresh/manifests/components",
    );
    assert_ne!(
        with_components, overlay,
        "the overlay shows the component, commented"
    );
    let namespaced = overlay.replace(
        "  - ../ecr-refresh/manifests ",
        "  - ../ecr-refresh/manifests/namespaced ",
    );
    assert_ne!(
        namespaced, overlay,
        "the overlay names the namespaced variant"
    );
    for (what, yaml) in [
        ("as shown", &overlay),
        ("with the component", &with_components),
        ("namespaced", &namespaced),
    ] {
        fs::write(install.join("kustomization.yaml"), yaml).expect("write the overlay");
        let rendered = common::manifests::kustomize(&install);
        let cronjob = common::manifests::documents(&rendered)
            .into_iter()
            .find(|d| d["kind"] == "CronJob")
            .unwrap_or_else(|| panic!("{what}: no CronJob"));
        let container =
            &cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0];
        assert_eq!(
            container["image"],
            format!(
                "ghcr.io/ecr-refresh/ecr-refresh:{}",
                env!("CARGO_PKG_VERSION")
            ),
            "{what}"
        );
        let env: Vec<(&str, &str)> = container["env"]
            .as_array()
            .expect("the container's env")
            .iter()
            .filter_map(|e| Some((e["name"].as_str()?, e["value"].as_str().unwrap_or(""))))
            .collect();
        let value = |name: &str| {
            let found: Vec<&str> = env
                .iter()
                .filter(|(n, _)| *n == name)
                .map(|(_, v)| *v)
                .collect();
            assert_eq!(found.len(), 1, "{what}: {name} set once: {env:?}");
            found[0]
        };
        assert_eq!(value("AWS_REGION"), "eu-west-1", "{what}");
        assert_eq!(
            value("ECR_REFRESH_REGISTRIES"),
            "111122223333.dkr.ecr.eu-west-1.amazonaws.com",
            "{what}"
        );
        let accounts = if what == "with the component" {
            "default"
        } else {
            ""
        };
        assert_eq!(value("ECR_REFRESH_SERVICE_ACCOUNTS"), accounts, "{what}");
        if what == "namespaced" {
            assert_eq!(value("ECR_REFRESH_NAMESPACES"), "team-a,team-b");
        }
    }
}

/// A book overlay's kustomization added to the install overlay's, as the page says to: the
/// install overlay with the snippet's fields (`namespace`, `namePrefix`), its `resources`
/// added (a variant of the manifests it names replaces the install overlay's), and both
/// lists of `components` and `patches`, the install overlay's first. A snippet shows only
/// what it adds.
fn added_to(base: &str, snippet: &str) -> String {
    let mut merged = objects(base)
        .into_iter()
        .next()
        .expect("the install overlay");
    let snippet = objects(snippet).into_iter().next().expect("the overlay");
    let snippet = snippet.as_object().expect("a kustomization");
    for (key, value) in snippet {
        let added = value.as_array().cloned().unwrap_or_default();
        match key.as_str() {
            // The manifests' variant a snippet names replaces the install overlay's; its own
            // files are added.
            "resources" => {
                let variant = |r: &Value| {
                    r.as_str()
                        .is_some_and(|r| r.starts_with("../ecr-refresh/manifests"))
                };
                let mut list: Vec<Value> = merged[key].as_array().cloned().unwrap_or_default();
                if added.iter().any(variant) {
                    list.retain(|r| !variant(r));
                }
                list.extend(added);
                merged[key] = Value::Array(list);
            }
            "components" | "patches" => {
                let mut list = merged[key].as_array().cloned().unwrap_or_default();
                list.extend(added);
                merged[key] = Value::Array(list);
            }
            _ => merged[key] = value.clone(),
        }
    }
    serde_json::to_string(&merged).expect("JSON")
}

/// The kustomize page's overlays for what users change (`## Changes in your overlay` and
/// `## Into another namespace`), each rendered as written beside a copy of the manifests:
/// each does what its heading says, and no overlay of those sections goes untested.
#[test]
#[ignore = "needs kubectl (bash .ci/test)"]
fn the_books_overlays_render_what_they_say() {
    let page = common::docs::page("install/kustomize.md");
    let overlays = common::manifests::book_overlays(
        &page,
        &["Changes in your overlay", "Into another namespace"],
    );
    let names: Vec<&str> = overlays.iter().map(|o| o.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "Another Secret name",
            "The IAM role, with IRSA",
            "EKS Pod Identity",
            "Static keys",
            "A Pushgateway",
            "Argo CD",
            "Without the admission policy",
            "Your own namespaces, namespaced",
            "Into another namespace, a new namespace",
            "Into another namespace, a namespace you already have",
        ],
        "every overlay of the page has its assertions below"
    );
    let shipped = objects(&render("", false));
    let shipped_env: Vec<String> = shipped
        .iter()
        .find(|d| d["kind"] == "CronJob")
        .and_then(|c| {
            c["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["env"].as_array()
        })
        .expect("the shipped CronJob's env")
        .iter()
        .map(|e| e["name"].as_str().expect("a name").to_owned())
        .collect();
    // Each is shown on its own, to be added to the install overlay at the top of the page,
    // which pins the image and sets the region: rendered so, both hold.
    let base = common::manifests::book_overlays(&page, &["With kustomize"])
        .into_iter()
        .next()
        .expect("the page's install overlay");
    let base_kustomization = &base.files[0].1;
    for overlay in &overlays {
        let what = overlay.name.as_str();
        let mut overlay = common::manifests::BookOverlay {
            name: overlay.name.clone(),
            files: overlay.files.clone(),
        };
        overlay.files[0].1 = added_to(base_kustomization, &overlay.files[0].1);
        let (_dir, install) = common::manifests::write_book_overlay(&overlay);
        let text = kustomize(&install);
        let docs = objects(&text);
        let find = |kind: &str, name: &str| -> Option<&Value> {
            docs.iter()
                .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
        };
        let cronjob = docs
            .iter()
            .find(|d| d["kind"] == "CronJob")
            .unwrap_or_else(|| panic!("{what}: a CronJob"));
        let container =
            &cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0];
        let env = |name: &str| -> Vec<String> {
            container["env"]
                .as_array()
                .expect("the container's env")
                .iter()
                .filter(|e| e["name"] == name)
                .map(|e| e["value"].as_str().unwrap_or("").to_owned())
                .collect()
        };
        // Whatever else changed, every variable is still there once, the install overlay's
        // region and image with them.
        for name in &shipped_env {
            assert_eq!(env(name).len(), 1, "{what}: {name} once");
        }
        assert_eq!(env("AWS_REGION"), ["eu-west-1"], "{what}: the region");
        assert!(
            container["image"]
                .as_str()
                .is_some_and(|i| i.ends_with(&format!(":{}", env!("CARGO_PKG_VERSION")))),
            "{what}: the image pinned: {}",
            container["image"]
        );
        let resource_names = |kind: &str, name: &str| -> Vec<Value> {
            docs.iter()
                .filter(|d| d["kind"] == kind && d["metadata"]["name"] == name)
                .map(|d| d["rules"][0]["resourceNames"].clone())
                .collect()
        };
        match what {
            "Another Secret name" => {
                assert_eq!(env("ECR_REFRESH_SECRET_NAME"), ["ecr-pull"], "{what}");
                assert!(
                    !text.contains("aws-ecr-token"),
                    "{what}: the old name is left somewhere:\n{text}"
                );
                assert_eq!(
                    resource_names("ClusterRole", "ecr-refresh"),
                    [serde_json::json!(["ecr-pull"])]
                );
                assert_eq!(
                    resource_names("ClusterRole", "ecr-refresh-admission"),
                    [serde_json::json!(["ecr-pull"])]
                );
                let policy = find("ValidatingAdmissionPolicy", "ecr-refresh").expect("the policy");
                let policy = policy.to_string();
                assert!(policy.contains(r#"'ecr-pull'"#), "{what}: {policy}");
                assert!(policy.contains(r#"name('ecr-pull')"#), "{what}: {policy}");
                assert!(
                    docs.iter().all(|d| d["kind"] != "ConfigMap"),
                    "{what}: the ConfigMap that carried the name is not applied"
                );
            }
            "The IAM role, with IRSA" => {
                let account = find("ServiceAccount", "ecr-refresh").expect("the ServiceAccount");
                assert_eq!(
                    account["metadata"]["annotations"]["eks.amazonaws.com/role-arn"],
                    "arn:aws:iam::444455556666:role/ecr-refresh"
                );
            }
            "EKS Pod Identity" => {
                let account = find("ServiceAccount", "ecr-refresh").expect("the ServiceAccount");
                assert!(
                    account["metadata"]["annotations"]
                        .get("eks.amazonaws.com/role-arn")
                        .is_none(),
                    "{what}: no IRSA annotation left: {account}"
                );
            }
            "Static keys" => {
                assert_eq!(
                    container["envFrom"],
                    serde_json::json!([{"secretRef": {"name": "ecr-refresh-aws"}}])
                );
            }
            "A Pushgateway" => {
                assert_eq!(
                    env("ECR_REFRESH_PUSHGATEWAY_URL"),
                    ["http://pushgateway.observability.svc:9091"]
                );
                assert_eq!(
                    env("ECR_REFRESH_PUSHGATEWAY_LABELS"),
                    ["install=ecr-refresh/ecr-refresh"]
                );
                assert!(find("PrometheusRule", "ecr-refresh").is_some(), "{what}");
            }
            "Argo CD" => argocd_registry_everywhere(&text, what),
            "Without the admission policy" => {
                let kinds: BTreeSet<String> = docs
                    .iter()
                    .map(|d| format!("{} {}", d["kind"], d["metadata"]["name"]))
                    .collect();
                let expected: BTreeSet<String> = shipped
                    .iter()
                    .filter(|d| {
                        !d["kind"]
                            .as_str()
                            .unwrap()
                            .starts_with("ValidatingAdmission")
                    })
                    .filter(|d| d["metadata"]["name"] != "ecr-refresh-admission")
                    .map(|d| format!("{} {}", d["kind"], d["metadata"]["name"]))
                    .collect();
                assert_eq!(kinds, expected, "{what}");
                assert!(find("ClusterRole", "ecr-refresh").is_some(), "{what}");
            }
            "Your own namespaces, namespaced" => {
                assert_eq!(env("ECR_REFRESH_NAMESPACES"), ["payments,web"]);
                let grants: BTreeSet<(String, String)> = docs
                    .iter()
                    .filter(|d| d["kind"] == "Role" || d["kind"] == "RoleBinding")
                    .filter(|d| d["metadata"]["name"] == "ecr-refresh")
                    .map(|d| {
                        (
                            d["kind"].as_str().unwrap().to_owned(),
                            d["metadata"]["namespace"].as_str().unwrap().to_owned(),
                        )
                    })
                    .collect();
                let expected: BTreeSet<(String, String)> = ["payments", "web"]
                    .iter()
                    .flat_map(|ns| {
                        ["Role", "RoleBinding"].map(|k| (k.to_owned(), (*ns).to_owned()))
                    })
                    .collect();
                assert_eq!(grants, expected, "{what}");
            }
            "Into another namespace, a new namespace" => {
                let namespace = find("Namespace", "platform-ecr").expect("the Namespace");
                assert_eq!(
                    namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"],
                    "restricted"
                );
                assert_eq!(cronjob["metadata"]["namespace"], "platform-ecr");
                assert_eq!(cronjob["metadata"]["name"], "prod-ecr-refresh");
            }
            "Into another namespace, a namespace you already have" => {
                assert!(
                    docs.iter().all(|d| d["kind"] != "Namespace"),
                    "{what}: the namespace is left as it is"
                );
                assert_eq!(cronjob["metadata"]["namespace"], "platform");
                assert_eq!(cronjob["metadata"]["name"], "prod-ecr-refresh");
                let binding = find("ClusterRoleBinding", "prod-ecr-refresh-admission")
                    .expect("the policy's binding");
                assert_eq!(
                    binding["subjects"][0],
                    serde_json::json!({"kind": "ServiceAccount", "name": "prod-ecr-refresh", "namespace": "platform"})
                );
            }
            other => panic!("no assertions for the overlay {other:?}"),
        }
    }
}

/// The registry the kustomize page's Argo CD overlay writes once (its own component's
/// literals), and the Secret names that go with it.
const ARGOCD_HOST: &str = "111122223333.dkr.ecr.eu-west-1.amazonaws.com";
const ARGOCD_NAMES: [&str; 2] = [
    "aws-ecr-token-111122223333-eu-west-1",
    "aws-ecr-token-111122223333-eu-west-1-repository",
];

/// An Argo CD overlay's rendering carries its registry in every place that names one: the
/// CronJob's ECR_REFRESH_REGISTRIES, the ClusterRole's resourceNames, and in the admission
/// policy the names (matchCondition, maps, message), the urls and their base64 text. Nothing
/// of the component's example registry (account 123456789012, us-east-1) is left, in plain
/// or base64 form, and the source objects are not rendered.
fn argocd_registry_everywhere(rendered: &str, what: &str) {
    use base64::Engine as _;
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    let docs = objects(rendered);
    let find = |kind: &str, name: &str| -> &Value {
        docs.iter()
            .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
            .unwrap_or_else(|| panic!("{what}: {kind} {name}"))
    };
    let env = env_map(rendered);
    assert_eq!(
        env.get("ECR_REFRESH_REGISTRIES").map(String::as_str),
        Some(ARGOCD_HOST),
        "{what}: ECR_REFRESH_REGISTRIES"
    );
    let role = find("ClusterRole", "ecr-refresh-argocd");
    assert_eq!(
        role["rules"][0]["resourceNames"],
        serde_json::json!(ARGOCD_NAMES),
        "{what}: the ClusterRole's names"
    );
    let policy = find("ValidatingAdmissionPolicy", "ecr-refresh-argocd");
    let [creds, repository] = ARGOCD_NAMES;
    let condition = policy["spec"]["matchConditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["name"] == "an-argocd-secret"))
        .and_then(|c| c["expression"].as_str())
        .unwrap_or_else(|| panic!("{what}: the an-argocd-secret matchCondition"));
    assert!(
        condition.contains(&format!("[\"{creds}\",\"{repository}\"]")),
        "{what}: the matchCondition's names: {condition}"
    );
    let variable = |name: &str| -> String {
        policy["spec"]["variables"]
            .as_array()
            .and_then(|v| v.iter().find(|v| v["name"] == name))
            .and_then(|v| v["expression"].as_str())
            .unwrap_or_else(|| panic!("{what}: the variable {name}"))
            .to_owned()
    };
    assert_eq!(
        variable("urls"),
        format!("{{'{creds}': '{ARGOCD_HOST}/', '{repository}': '{ARGOCD_HOST}'}}"),
        "{what}: urls"
    );
    assert_eq!(
        variable("encodedUrls"),
        format!(
            "{{'{creds}': '{}', '{repository}': '{}'}}",
            b64(&format!("{ARGOCD_HOST}/")),
            b64(ARGOCD_HOST)
        ),
        "{what}: encodedUrls, base64 as a Secret's data reaches CEL"
    );
    assert_eq!(
        variable("kinds"),
        format!("{{'{creds}': 'repo-creds', '{repository}': 'repository'}}"),
        "{what}: kinds"
    );
    let messages: Vec<&str> = policy["spec"]["validations"]
        .as_array()
        .expect("validations")
        .iter()
        .filter_map(|v| v["message"].as_str())
        .filter(|m| m.contains("may only write the Argo CD Secrets"))
        .collect();
    assert_eq!(messages.len(), 1, "{what}: the message naming the Secrets");
    assert!(
        messages[0].contains(creds) && messages[0].contains(repository),
        "{what}: {}",
        messages[0]
    );
    for example in [
        "123456789012",
        "us-east-1",
        &b64("123456789012.dkr.ecr.us-east-1.amazonaws.com/"),
        &b64("123456789012.dkr.ecr.us-east-1.amazonaws.com"),
    ] {
        assert!(
            !rendered.contains(example),
            "{what}: the component's example registry is left: {example}"
        );
    }
    assert!(
        !rendered.contains("ecr-refresh-argocd-registry"),
        "{what}: the registry's source objects are not applied"
    );
}

/// The same Argo CD overlay under the kustomize kubectl 1.30 and 1.31 bundle
/// (`ECR_REFRESH_KUSTOMIZE_5_0`, `.ci/go-tool kustomize-5.0`), which runs a parent's
/// generators after its components: the registry's own component comes first.
#[test]
#[ignore = "needs kubectl and ECR_REFRESH_KUSTOMIZE_5_0 (bash .ci/test)"]
fn the_argocd_overlay_writes_its_registry_everywhere_under_kubectl_1_30s_kustomize() {
    let kustomize_5_0 = std::env::var_os("ECR_REFRESH_KUSTOMIZE_5_0")
        .map(PathBuf::from)
        .filter(|p| p.is_file())
        .expect(
            "needs ECR_REFRESH_KUSTOMIZE_5_0: \
             export ECR_REFRESH_KUSTOMIZE_5_0=\"$(bash .ci/go-tool kustomize-5.0 | tail -1)/kustomize\"",
        );
    let page = common::docs::page("install/kustomize.md");
    let base = common::manifests::book_overlays(&page, &["With kustomize"])
        .into_iter()
        .next()
        .expect("the page's install overlay");
    let mut overlay = common::manifests::book_overlays(&page, &["Changes in your overlay"])
        .into_iter()
        .find(|o| o.name == "Argo CD")
        .expect("the page's Argo CD overlay");
    overlay.files[0].1 = added_to(&base.files[0].1, &overlay.files[0].1);
    let (_dir, install) = common::manifests::write_book_overlay(&overlay);
    let out = std::process::Command::new(&kustomize_5_0)
        .arg("build")
        .arg(&install)
        .output()
        .expect("running kustomize 5.0");
    assert!(
        out.status.success(),
        "kustomize 5.0 build: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    argocd_registry_everywhere(
        &String::from_utf8(out.stdout).expect("UTF-8"),
        "Argo CD (kustomize 5.0)",
    );
}

/// No region is chosen for the user: the chart's `aws.region` is empty, the rendered
/// CronJob has no AWS_REGION entry at all (an empty value would hide the one EKS's webhook
/// injects), and neither file names us-east-1. A run without a region then stops with the
/// binary's own error (exit 2) instead of writing another region's registry.
#[test]
fn no_region_is_chosen_for_the_user() {
    let values = read(&repo().join("charts/ecr-refresh/values.yaml"));
    let region_line = values
        .lines()
        .find(|l| l.trim_start().starts_with("region:"))
        .expect("values.yaml has aws.region");
    assert!(
        region_line.trim_start().starts_with("region: \"\""),
        "aws.region has no default: {region_line}"
    );
    let schema = read(&repo().join("charts/ecr-refresh/values.schema.json"));
    assert!(
        !schema.contains("us-east-1"),
        "values.schema.json names us-east-1"
    );
    let cronjob = read(&repo().join(BASE_CRONJOB));
    assert!(
        !cronjob.contains("us-east-1"),
        "{BASE_CRONJOB} names us-east-1"
    );
    let doc = objects(&cronjob).into_iter().next().expect("the CronJob");
    let env = doc["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["env"]
        .as_array()
        .expect("the container's env")
        .clone();
    assert!(
        env.iter().all(|e| e["name"] != "AWS_REGION"),
        "{BASE_CRONJOB} sets AWS_REGION: {env:?}"
    );
}

/// A variant, its components, and the variables they mean to set.
type Case = (
    &'static str,
    &'static [&'static str],
    &'static [(&'static str, &'static str)],
);

/// The CronJob's env, name to value, as a render shows it.
fn env_map(rendered: &str) -> std::collections::BTreeMap<String, String> {
    let cronjob = objects(rendered)
        .into_iter()
        .find(|d| d["kind"] == "CronJob")
        .expect("a CronJob");
    cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["env"]
        .as_array()
        .expect("the container's env")
        .iter()
        .map(|e| {
            (
                e["name"].as_str().expect("a name").to_owned(),
                e["value"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect()
}

/// Every component and variant that sets a variable sets it by name, never by its place in
/// the env: with the shipped CronJob's variables in the reverse order (as a release that
/// reorders them would ship), each renders the same variables with the same values, among
/// them the ones it means to set. And no patch in manifests/ addresses `env/<index>`.
#[test]
#[ignore = "needs kubectl (bash .ci/test)"]
fn the_components_set_the_variables_they_mean_by_name() {
    let mut by_index = Vec::new();
    let mut files = Vec::new();
    yaml_files(&repo().join("manifests"), &mut files);
    for file in &files {
        for (n, line) in read(file).lines().enumerate() {
            let line = line.trim_start();
            if line.starts_with('#') {
                continue;
            }
            if let Some((_, rest)) = line.split_once("/env/")
                && rest.starts_with(|c: char| c.is_ascii_digit())
            {
                by_index.push(format!("{}:{}: {line}", file.display(), n + 1));
            }
        }
    }
    assert!(
        by_index.is_empty(),
        "patches by index:\n{}",
        by_index.join("\n")
    );

    let cases: [Case; 9] = [
        (
            "namespaced",
            &[],
            &[("ECR_REFRESH_NAMESPACES", "team-a,team-b")],
        ),
        (
            "",
            &["components/service-accounts"],
            &[("ECR_REFRESH_SERVICE_ACCOUNTS", "default")],
        ),
        (
            "",
            &["components/evict-stuck-pods"],
            &[("ECR_REFRESH_EVICT_STUCK_PODS", "true")],
        ),
        (
            "",
            &["components/monitoring"],
            &[(
                "ECR_REFRESH_PUSHGATEWAY_URL",
                "http://prometheus-pushgateway.monitoring.svc:9091",
            )],
        ),
        (
            "",
            &["components/argocd"],
            &[("ECR_REFRESH_ARGOCD_NAMESPACE", "argocd")],
        ),
        (
            "",
            &["components/web-identity"],
            &[("AWS_ROLE_ARN", "arn:aws:iam::111122223333:role/ecr-refresh")],
        ),
        (
            "",
            &["components/assume-role"],
            &[(
                "ECR_REFRESH_ASSUME_ROLE_ARN",
                "arn:aws:iam::444455556666:role/ecr-pull",
            )],
        ),
        (
            "",
            &["components/roles-anywhere"],
            &[("ECR_REFRESH_ROLES_ANYWHERE_SESSION_DURATION", "1h")],
        ),
        (
            "",
            &["components/hub"],
            &[
                ("ECR_REFRESH_CLUSTERS", "capi"),
                ("ECR_REFRESH_CLUSTERS_NAMESPACE", "capi-clusters"),
            ],
        ),
    ];
    for (variant, components, meant) in cases {
        let shipped = env_map(&common::manifests::render_with_components(
            variant, components,
        ));
        for (name, value) in meant {
            assert_eq!(
                shipped.get(*name).map(String::as_str),
                Some(*value),
                "{components:?} on {variant:?} sets {name}"
            );
        }
        // The same, over a CronJob whose env is in the reverse order.
        let copy = copy();
        let path = copy.path().join("manifests/base/cronjob.yaml");
        let mut doc = objects(&read(&path))
            .into_iter()
            .next()
            .expect("the CronJob");
        doc["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["env"]
            .as_array_mut()
            .expect("the env")
            .reverse();
        fs::write(&path, serde_json::to_string(&doc).expect("JSON")).expect("write");
        let overlay = copy.path().join("overlay");
        fs::create_dir_all(&overlay).expect("an overlay directory");
        let list: Vec<String> = components
            .iter()
            .map(|c| format!("\"../manifests/{c}\""))
            .collect();
        fs::write(
            overlay.join("kustomization.yaml"),
            format!(
                "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n\
                 resources: [\"../manifests/{variant}\"]\ncomponents: [{}]\n",
                list.join(", ")
            ),
        )
        .expect("writing the overlay");
        let reordered = env_map(&kustomize(&overlay));
        assert_eq!(
            reordered, shipped,
            "{components:?} on {variant:?}: the same variables whatever their order"
        );
    }
}

/// The CronJob's pod spec, and its Secret's name, in a rendering.
fn pod_spec_and_secret(rendered: &str) -> (Value, String) {
    let cronjob = objects(rendered)
        .into_iter()
        .find(|d| d["kind"] == "CronJob")
        .expect("the CronJob");
    let spec = cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"].clone();
    let secret = spec["containers"][0]["env"]
        .as_array()
        .expect("the env")
        .iter()
        .find(|e| e["name"] == "ECR_REFRESH_SECRET_NAME")
        .and_then(|e| e["value"].as_str())
        .expect("ECR_REFRESH_SECRET_NAME")
        .to_owned();
    (spec, secret)
}

/// Self-hosting from ECR (docs/src/install/self-hosting.md): components/self-hosted lists the
/// pull Secret in the CronJob's pod's imagePullSecrets, by the name ECR_REFRESH_SECRET_NAME
/// holds, renamed by components/secret-name listed before it, and keeps an entry the overlay
/// lists already. Nothing else changes.
#[test]
#[ignore = "needs kubectl (bash .ci/test)"]
fn the_self_hosted_component_lists_the_pull_secret_by_its_one_name_in_the_runs_pod() {
    use common::manifests::render_with_components;
    for variant in ["", "namespaced"] {
        let shipped = render_with_components(variant, &[]);
        let (spec, secret) = pod_spec_and_secret(&shipped);
        assert!(spec["imagePullSecrets"].is_null(), "{variant:?}: {spec}");
        let hosted = render_with_components(variant, &["components/self-hosted"]);
        let (mut hosted_spec, _) = pod_spec_and_secret(&hosted);
        assert_eq!(
            hosted_spec["imagePullSecrets"],
            serde_json::json!([{"name": secret}]),
            "{variant:?}"
        );
        hosted_spec
            .as_object_mut()
            .expect("a pod spec")
            .remove("imagePullSecrets");
        assert_eq!(
            hosted_spec, spec,
            "{variant:?}: only imagePullSecrets changes"
        );
        let others = |text: &str| -> Vec<Value> {
            objects(text)
                .into_iter()
                .filter(|d| d["kind"] != "CronJob")
                .collect()
        };
        assert_eq!(others(&hosted), others(&shipped), "{variant:?}");
    }

    // Renamed, with an entry of the overlay's own: both listed, the name followed.
    let copy = copy();
    let overlay = copy.path().join("overlay");
    fs::create_dir_all(&overlay).expect("an overlay directory");
    fs::write(
        overlay.join("secret-name.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ecr-refresh-secret-name}\ndata: {name: ecr-pull}\n",
    )
    .expect("write");
    fs::write(
        overlay.join("kustomization.yaml"),
        r#"apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources: ["../manifests", "secret-name.yaml"]
components: ["../manifests/components/secret-name", "../manifests/components/self-hosted"]
patches:
  - target: {kind: CronJob, name: ecr-refresh}
    patch: |-
      - op: add
        path: /spec/jobTemplate/spec/template/spec/imagePullSecrets/-
        value: {name: mirror-pull}
"#,
    )
    .expect("write");
    let rendered = kustomize(&overlay);
    let (spec, secret) = pod_spec_and_secret(&rendered);
    assert_eq!(secret, "ecr-pull");
    assert_eq!(
        spec["imagePullSecrets"],
        serde_json::json!([{"name": "ecr-pull"}, {"name": "mirror-pull"}])
    );
    assert!(!rendered.contains("aws-ecr-token"), "{rendered}");
}

/// components/hub: a hub run over Cluster API's kubeconfig Secrets in the placeholder
/// namespace capi-clusters. It reads Secrets there and nowhere else (a Role and RoleBinding of
/// get and list, bound to the run's ServiceAccount), its memory limit is 128Mi, and nothing
/// else of the install changes.
#[test]
#[ignore = "needs kubectl (bash .ci/test)"]
fn the_hub_component_reads_the_cluster_secrets_of_its_namespace_only_with_128mi() {
    let plain = objects(&render("", false));
    let hub = objects(&common::manifests::render_with_components(
        "",
        &["components/hub"],
    ));
    let named = |docs: &[Value], kind: &str| -> Vec<Value> {
        docs.iter().filter(|d| d["kind"] == kind).cloned().collect()
    };
    let roles = named(&hub, "Role");
    assert_eq!(roles.len(), 1, "{roles:#?}");
    assert_eq!(roles[0]["metadata"]["name"], "ecr-refresh-clusters");
    assert_eq!(roles[0]["metadata"]["namespace"], "capi-clusters");
    assert_eq!(
        roles[0]["rules"],
        serde_json::json!([{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list"]}]),
        "get and list on Secrets, nothing else"
    );
    let bindings = named(&hub, "RoleBinding");
    assert_eq!(bindings.len(), 1, "{bindings:#?}");
    assert_eq!(bindings[0]["metadata"]["namespace"], "capi-clusters");
    assert_eq!(
        bindings[0]["roleRef"],
        serde_json::json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "ecr-refresh-clusters"})
    );
    assert_eq!(
        bindings[0]["subjects"],
        serde_json::json!([{"kind": "ServiceAccount", "name": "ecr-refresh", "namespace": "ecr-refresh"}])
    );
    let container = |docs: &[Value]| -> Value {
        named(docs, "CronJob")[0]["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"]
            [0]
        .clone()
    };
    assert_eq!(container(&plain)["resources"]["limits"]["memory"], "64Mi");
    assert_eq!(container(&hub)["resources"]["limits"]["memory"], "128Mi");
    // The rest is the install's: the same ClusterRole, policy and ServiceAccount.
    for kind in [
        "ClusterRole",
        "ClusterRoleBinding",
        "ValidatingAdmissionPolicy",
        "ServiceAccount",
    ] {
        assert_eq!(named(&hub, kind), named(&plain, kind), "{kind}");
    }
}
