//! `fake-cluster demo`: ecr-refresh's main job, with the shipped CronJob's settings, in one
//! command.
//!
//! Starts the fake API server and fake ECR in this process, seeds a few namespaces (one holding
//! a Secret made by the old `kubectl create secret docker-registry --dry-run=client -o yaml |
//! kubectl apply -f -` loop), and runs the given ecr-refresh binary three times against them,
//! with manifests/base/cronjob.yaml's environment: the first run writes every Secret; the
//! second, what the CronJob does every 10 minutes after that, finds them all fresh and writes
//! nothing; the third comes after one Secret was edited by hand and rewrites only that one.
//! Per run it prints each namespace's outcome and the Secret's uid before and after, and how
//! many Secrets were written and ECR calls made.

use std::collections::BTreeMap;
use std::io::{self, Read as _, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::{Value, json};

use crate::{FakeCluster, FakeEcr, Resource};

pub const SECRET: &str = "aws-ecr-token";
pub const REGISTRY: &str = "123456789012.dkr.ecr.us-east-1.amazonaws.com";
/// New namespaces: the first run creates their Secret.
pub const NEW: &[&str] = &["team-a", "team-b"];
/// The namespace whose Secret the kubectl loop made: the first run adopts it in place.
pub const LEGACY: &str = "legacy";
/// A namespace being deleted: skipped, since the API server refuses new objects in it.
pub const TERMINATING: &str = "retired";
/// The Secret edited by hand before the third run.
pub const EDITED: &str = "team-b";
/// How many times the binary runs.
pub const RUNS: usize = 3;

/// The shipped CronJob, whose container's environment every run gets.
const CRONJOB: &str = include_str!("../../../manifests/base/cronjob.yaml");
/// Set by the demo instead of the CronJob: a registry (the CronJob's empty value means the
/// caller's own, which only a real account has), JSON logs (the demo reads them), and a
/// termination log in the demo's scratch directory.
pub const DEMO_SETS: &[(&str, &str)] = &[
    ("ECR_REFRESH_REGISTRIES", REGISTRY),
    ("ECR_REFRESH_LOG_FORMAT", "json"),
];

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
    /// Secrets the run wrote (created or updated), by its POST, PATCH and PUT requests.
    pub secret_writes: usize,
    /// Calls the run made to the fake ECR.
    pub ecr_calls: usize,
}

/// What the demo saw.
#[derive(Debug)]
pub struct Demo {
    /// The uid of the Secret the kubectl loop made, as seeded.
    pub legacy_uid: String,
    /// The environment every run got besides the fakes' addresses and credentials.
    pub settings: Vec<(String, String)>,
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
    #[error("manifests/base/cronjob.yaml: {0}")]
    CronJob(String),
    #[error("could not edit {namespace}'s Secret by hand: {why}")]
    Edit { namespace: String, why: String },
    #[error("could not print: {0}")]
    Print(#[from] io::Error),
}

/// The `name`/`value` environment of the shipped CronJob's container, ECR_REFRESH_* and AWS_*
/// entries, with [`DEMO_SETS`] in place of the CronJob's values.
pub fn cronjob_settings() -> Result<Vec<(String, String)>, DemoError> {
    let cronjob: Value =
        serde_yaml_ng::from_str(CRONJOB).map_err(|e| DemoError::CronJob(e.to_string()))?;
    let env = cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["env"]
        .as_array()
        .ok_or_else(|| DemoError::CronJob("no env in the first container".into()))?;
    let mut settings: Vec<(String, String)> = env
        .iter()
        .filter_map(|e| Some((e["name"].as_str()?, e["value"].as_str()?)))
        .filter(|(name, _)| name.starts_with("ECR_REFRESH_") || name.starts_with("AWS_"))
        // The termination log goes to the scratch directory; the kubelet provides the CronJob's.
        .filter(|(name, _)| *name != "ECR_REFRESH_TERMINATION_LOG")
        .map(|(name, value)| {
            let ours = DEMO_SETS.iter().find(|(n, _)| *n == name);
            (name.to_owned(), ours.map_or(value, |(_, v)| v).to_owned())
        })
        .collect();
    for (name, value) in DEMO_SETS {
        if !settings.iter().any(|(n, _)| n == name) {
            settings.push(((*name).to_owned(), (*value).to_owned()));
        }
    }
    Ok(settings)
}

/// Runs the demo with this ecr-refresh binary, printing to `out`.
pub fn run(binary: &Path, out: &mut dyn Write) -> Result<Demo, DemoError> {
    let settings = cronjob_settings()?;
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

    let setting = |name: &str| {
        settings
            .iter()
            .find(|(n, _)| n == name)
            .map_or("", |(_, v)| v.as_str())
    };
    writeln!(
        out,
        "ecr-refresh demo: {binary}, run {RUNS} times against a fake API server\n\
         ({cluster}) and a fake ECR ({ecr}), both in this process,\n\
         with the shipped CronJob's settings (manifests/base/cronjob.yaml: every 10 minutes,\n\
         ECR_REFRESH_RENEW_BEFORE={renew}, ECR_REFRESH_EVENTS={events}).\n\
         Namespaces: {new} (empty); {LEGACY}, whose Secret the old loop made:\n  \
         kubectl create secret docker-registry --dry-run=client -o yaml | kubectl apply -f -\n\
         and {TERMINATING} (being deleted).",
        binary = binary.display(),
        cluster = cluster.url(),
        ecr = ecr.url(),
        renew = setting("ECR_REFRESH_RENEW_BEFORE"),
        events = setting("ECR_REFRESH_EVENTS"),
        new = NEW.join(" and "),
    )?;

    let mut runs = Vec::with_capacity(RUNS);
    for n in 1..=RUNS {
        match n {
            2 => writeln!(
                out,
                "\nThe CronJob's next run, 10 minutes later: every token has hours left."
            )?,
            3 if cluster.get(Resource::Secrets, EDITED, SECRET).is_none() => {
                writeln!(
                    out,
                    "\n{EDITED} has no Secret to edit by hand. The next run:"
                )?;
            }
            3 => {
                edit_by_hand(&cluster, EDITED)?;
                writeln!(
                    out,
                    "\nSomeone edits {EDITED}'s Secret by hand, its password for\n\
                     {REGISTRY}, as `kubectl edit secret {SECRET} -n {EDITED}`\n\
                     would. The next run:"
                )?;
            }
            _ => {}
        }
        let sent_before = cluster.requests().len();
        let ecr_before = ecr.calls().len();
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
            .envs(settings.iter().map(|(k, v)| (k, v)))
            .env("ECR_REFRESH_TERMINATION_LOG", dir.join("termination-log"))
            .output()
            .map_err(|source| DemoError::Start {
                binary: binary.to_owned(),
                source,
            })?;
        let elapsed = started.elapsed();
        let sent = &cluster.requests()[sent_before..];
        let mut requests = BTreeMap::new();
        for r in sent {
            *requests.entry(r.method.clone()).or_insert(0) += 1;
        }
        // Secrets, not requests: adopting the kubectl loop's Secret takes two PATCHes.
        let secret_writes = sent
            .iter()
            .filter(|r| matches!(r.method.as_str(), "POST" | "PATCH" | "PUT"))
            .filter(|r| (200..300).contains(&r.status))
            .filter_map(|r| {
                let rest = r.path.strip_prefix("/api/v1/namespaces/")?;
                let (namespace, rest) = rest.split_once('/')?;
                rest.starts_with("secrets").then_some(namespace)
            })
            .collect::<std::collections::BTreeSet<_>>()
            .len();
        let stdout = String::from_utf8_lossy(&output.stdout);
        let run = Run {
            exit_code: output.status.code().unwrap_or(-1),
            rows: rows(&stdout),
            requests,
            secret_writes,
            ecr_calls: ecr.calls().len() - ecr_before,
        };
        writeln!(
            out,
            "\nrun {n}: exit {code} in {ms} ms; Secrets written: {writes}; ECR calls: {calls}\n\
             requests to the API server: {requests}",
            code = run.exit_code,
            ms = elapsed.as_millis(),
            writes = run.secret_writes,
            calls = run.ecr_calls,
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

    let demo = Demo {
        legacy_uid,
        settings,
        runs,
    };
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
            "\n{LEGACY}'s Secret kept uid {uid} through every run: adopted and updated\n\
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
            "{new}'s Secrets, created in run 1, kept their uids after.",
            new = NEW.join(" and ")
        )?;
    }
    if let Some(second) = demo.runs.get(1)
        && second.secret_writes == 0
        && second.ecr_calls == 0
    {
        writeln!(
            out,
            "Run 2 wrote nothing and asked ECR nothing: what the CronJob does on most runs."
        )?;
    }
    Ok(demo)
}

/// A merge patch of the Secret's `.dockerconfigjson`, with another password for REGISTRY, by
/// the field manager `kubectl edit` uses, through the fake's HTTP API as kubectl would send it.
fn edit_by_hand(cluster: &FakeCluster, namespace: &str) -> Result<(), DemoError> {
    let failed = |why: String| DemoError::Edit {
        namespace: namespace.to_owned(),
        why,
    };
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    let docker_config = json!({
        "auths": { REGISTRY: {
            "username": "AWS",
            "password": "EDITED-BY-HAND",
            "auth": b64("AWS:EDITED-BY-HAND"),
        }}
    })
    .to_string();
    let body = json!({ "data": { ".dockerconfigjson": b64(&docker_config) } }).to_string();
    let url = cluster.url();
    let address = url.strip_prefix("http://").unwrap_or(&url);
    let mut stream = TcpStream::connect(address).map_err(|e| failed(e.to_string()))?;
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .map_err(|e| failed(e.to_string()))?;
    write!(
        stream,
        "PATCH /api/v1/namespaces/{namespace}/secrets/{SECRET}?fieldManager=kubectl-edit HTTP/1.1\r\n\
         Host: {address}\r\nContent-Type: application/merge-patch+json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .map_err(|e| failed(e.to_string()))?;
    let mut answer = String::new();
    stream
        .read_to_string(&mut answer)
        .map_err(|e| failed(e.to_string()))?;
    let status = answer.split_whitespace().nth(1).unwrap_or_default();
    if status != "200" {
        return Err(failed(format!(
            "the API server answered {status}: {answer}"
        )));
    }
    Ok(())
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
