//! `fake-cluster demo`: ecr-refresh's main job on an embedded default, in one command.
//!
//! Starts the fake API server and fake ECR in this process, seeds a few namespaces (one holding
//! a Secret made by the old `kubectl create secret docker-registry --dry-run=client -o yaml |
//! kubectl apply -f -` loop), runs the given ecr-refresh binary twice against them and prints,
//! per run, each namespace's outcome and the Secret's uid before and after.

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use base64::Engine as _;
use serde_json::{Value, json};

use crate::{FakeCluster, FakeEcr, Resource};

pub const SECRET: &str = "aws-ecr-token";
pub const REGISTRY: &str = "123456789012.dkr.ecr.us-east-1.amazonaws.com";
/// New namespaces: the first run creates their Secret, the second updates it.
pub const NEW: &[&str] = &["team-a", "team-b"];
/// The namespace whose Secret the kubectl loop made: both runs update it in place.
pub const LEGACY: &str = "legacy";
/// A namespace being deleted: skipped, since the API server refuses new objects in it.
pub const TERMINATING: &str = "retired";
/// How many times the binary runs.
pub const RUNS: usize = 2;

/// One namespace's line of a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    pub namespace: String,
    pub outcome: String,
    pub uid_before: String,
    pub uid_after: String,
}

/// One run of the binary.
#[derive(Debug, Clone)]
pub struct Run {
    pub exit_code: i32,
    /// Sorted by namespace.
    pub rows: Vec<Row>,
    /// Requests the run sent to the API server, by method.
    pub requests: BTreeMap<String, usize>,
}

/// What the demo saw.
#[derive(Debug)]
pub struct Demo {
    /// The uid of the Secret the kubectl loop made, as seeded.
    pub legacy_uid: String,
    pub runs: Vec<Run>,
}

impl Demo {
    /// Every run exited 0.
    pub fn succeeded(&self) -> bool {
        self.runs.iter().all(|r| r.exit_code == 0)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    #[error("could not start {binary}: {source}")]
    Start {
        binary: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("could not write the demo's files in {dir}: {source}")]
    Files {
        dir: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("could not print: {0}")]
    Print(#[from] io::Error),
}

/// Runs the demo with this ecr-refresh binary, printing to `out`.
pub fn run(binary: &Path, out: &mut dyn Write) -> Result<Demo, DemoError> {
    let cluster = FakeCluster::start();
    let ecr = FakeEcr::start();
    for namespace in NEW.iter().chain([&LEGACY]) {
        cluster.add_namespace(namespace, &[]);
    }
    cluster.add_terminating_namespace(TERMINATING);
    let legacy = seed_kubectl_loop_secret(&cluster, LEGACY);
    let legacy_uid = legacy["metadata"]["uid"]
        .as_str()
        .unwrap_or_default()
        .to_owned();

    let scratch = Scratch::create()?;
    let dir = scratch.0.as_path();
    let files = |source| DemoError::Files {
        dir: dir.to_owned(),
        source,
    };
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(&kubeconfig, cluster.kubeconfig()).map_err(files)?;

    writeln!(
        out,
        "ecr-refresh demo: {binary}, run {RUNS} times against a fake API server\n\
         ({cluster}) and a fake ECR ({ecr}), both in this process.\n\
         Namespaces: {new} (empty); {LEGACY}, whose Secret the old loop made:\n  \
         kubectl create secret docker-registry --dry-run=client -o yaml | kubectl apply -f -\n\
         and {TERMINATING} (being deleted).",
        binary = binary.display(),
        cluster = cluster.url(),
        ecr = ecr.url(),
        new = NEW.join(" and "),
    )?;

    let mut runs = Vec::with_capacity(RUNS);
    for n in 1..=RUNS {
        let sent_before = cluster.requests().len();
        let started = Instant::now();
        let output = Command::new(binary)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", dir)
            .env("KUBECONFIG", &kubeconfig)
            .env("AWS_ENDPOINT_URL_ECR", ecr.url())
            .env("AWS_REGION", "us-east-1")
            .env("AWS_ACCESS_KEY_ID", "AKIDDEMO")
            .env("AWS_SECRET_ACCESS_KEY", "demo")
            // Nothing here is on EC2: never ask instance metadata.
            .env("AWS_EC2_METADATA_DISABLED", "true")
            .env("ECR_REFRESH_LOG_FORMAT", "json")
            .env("ECR_REFRESH_REGISTRIES", REGISTRY)
            .env("ECR_REFRESH_TERMINATION_LOG", dir.join("termination-log"))
            .output()
            .map_err(|source| DemoError::Start {
                binary: binary.to_owned(),
                source,
            })?;
        let elapsed = started.elapsed();
        let mut requests = BTreeMap::new();
        for r in &cluster.requests()[sent_before..] {
            *requests.entry(r.method.clone()).or_insert(0) += 1;
        }
        let stdout = String::from_utf8_lossy(&output.stdout);
        let run = Run {
            exit_code: output.status.code().unwrap_or(-1),
            rows: rows(&stdout),
            requests,
        };
        writeln!(
            out,
            "\nrun {n}: exit {code} in {ms} ms; requests to the API server: {requests}",
            code = run.exit_code,
            ms = elapsed.as_millis(),
            requests = ["GET", "POST", "PATCH", "PUT", "DELETE"]
                .iter()
                .map(|m| format!("{} {m}", run.requests.get(*m).copied().unwrap_or(0)))
                .collect::<Vec<_>>()
                .join(", "),
        )?;
        print_table(out, &run.rows)?;
        if run.exit_code != 0 || run.rows.is_empty() {
            writeln!(out, "the run's output:\n{stdout}")?;
            out.write_all(&output.stderr)?;
        }
        runs.push(run);
    }

    let demo = Demo { legacy_uid, runs };
    let uids = |namespace: &str| -> Vec<&str> {
        demo.runs
            .iter()
            .flat_map(|r| &r.rows)
            .filter(|r| r.namespace == namespace)
            .flat_map(|r| [r.uid_before.as_str(), r.uid_after.as_str()])
            .collect()
    };
    if uids(LEGACY).iter().all(|uid| *uid == demo.legacy_uid) {
        writeln!(
            out,
            "\n{LEGACY}'s Secret kept uid {uid} through both runs: adopted and updated\n\
             in place, never deleted.",
            uid = demo.legacy_uid
        )?;
    }
    // Created in run 1 (no uid before), then the same Secret ever after.
    let kept_new = NEW.iter().all(|namespace| {
        let uids = uids(namespace);
        uids.len() == 2 * RUNS && uids[0] == "-" && uids[1..].windows(2).all(|w| w[0] == w[1])
    });
    if kept_new {
        writeln!(
            out,
            "{new}'s Secrets, created in run 1, kept their uids in run 2.",
            new = NEW.join(" and ")
        )?;
    }
    Ok(demo)
}

/// The demo's kubeconfig and HOME, removed when the demo ends.
struct Scratch(PathBuf);

impl Scratch {
    fn create() -> Result<Self, DemoError> {
        // Unique per demo, as tests run several in one process.
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "ecr-refresh-demo-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).map_err(|source| DemoError::Files {
            dir: dir.clone(),
            source,
        })?;
        Ok(Self(dir))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A Secret as the old loop made it: `kubectl apply` (client-side) stores the whole object
/// in the last-applied-configuration annotation, old password included, under the field
/// manager `kubectl-client-side-apply`; `kubectl create secret docker-registry` keys the entry
/// by the `--docker-server` given, usually `https://<host>`.
pub fn seed_kubectl_loop_secret(cluster: &FakeCluster, namespace: &str) -> Value {
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    let docker_config = json!({
        "auths": { format!("https://{REGISTRY}"): {
            "username": "AWS",
            "password": "OLD-PASSWORD",
            "auth": b64("AWS:OLD-PASSWORD"),
        }}
    })
    .to_string();
    let data = json!({ ".dockerconfigjson": b64(&docker_config) });
    let last_applied = json!({
        "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/dockerconfigjson",
        "metadata": { "name": SECRET, "namespace": namespace },
        "data": data,
    })
    .to_string();
    cluster.seed(
        Resource::Secrets,
        json!({
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {
                "name": SECRET,
                "namespace": namespace,
                "annotations": { "kubectl.kubernetes.io/last-applied-configuration": last_applied },
            },
            "type": "kubernetes.io/dockerconfigjson",
            "data": data,
        }),
        "kubectl-client-side-apply",
    )
}

/// The per-namespace lines of ecr-refresh's JSON log, sorted by namespace.
pub fn rows(log: &str) -> Vec<Row> {
    let field = |line: &Value, name: &str| line[name].as_str().unwrap_or("-").to_owned();
    let mut rows: Vec<Row> = log
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|l| l.get("namespace").is_some() && l.get("outcome").is_some())
        .map(|l| Row {
            namespace: field(&l, "namespace"),
            outcome: field(&l, "outcome"),
            uid_before: field(&l, "uid_before"),
            uid_after: field(&l, "uid_after"),
        })
        .collect();
    rows.sort_by(|a, b| a.namespace.cmp(&b.namespace));
    rows
}

fn print_table(out: &mut dyn Write, rows: &[Row]) -> io::Result<()> {
    let header = Row {
        namespace: "NAMESPACE".into(),
        outcome: "OUTCOME".into(),
        uid_before: "UID BEFORE".into(),
        uid_after: "UID AFTER".into(),
    };
    let width = |f: fn(&Row) -> &str| {
        rows.iter()
            .chain([&header])
            .map(|r| f(r).len())
            .max()
            .unwrap_or(0)
    };
    let (ns, outcome, before) = (
        width(|r| &r.namespace),
        width(|r| &r.outcome),
        width(|r| &r.uid_before),
    );
    for r in [&header].into_iter().chain(rows) {
        writeln!(
            out,
            "  {:ns$}  {:outcome$}  {:before$}  {}",
            r.namespace, r.outcome, r.uid_before, r.uid_after
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_the_namespace_lines_sorted() {
        let log = r#"{"level":"INFO","message":"connected"}
{"namespace":"b","outcome":"created","uid_before":"-","uid_after":"u2"}
not json
{"namespace":"a","outcome":"updated","uid_before":"u1","uid_after":"u1"}
{"namespaces":2,"elapsed_ms":3}"#;
        assert_eq!(
            rows(log),
            vec![
                Row {
                    namespace: "a".into(),
                    outcome: "updated".into(),
                    uid_before: "u1".into(),
                    uid_after: "u1".into()
                },
                Row {
                    namespace: "b".into(),
                    outcome: "created".into(),
                    uid_before: "-".into(),
                    uid_after: "u2".into()
                },
            ]
        );
    }
}
