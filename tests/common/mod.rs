//! The one helper every process-level test shares: a fresh fake cluster and fake ECR per test,
//! and the built `ecr-refresh` binary run against them.
//!
//! Every run is checked for the two things no test may ever see: a DELETE in the request log,
//! and a token handed out by the fake ECR anywhere in the binary's output.
#![allow(dead_code)]

pub(crate) mod argocd;
pub(crate) mod attacks;
pub(crate) mod docs;
pub(crate) mod fleet;
pub(crate) mod helm;
pub(crate) mod lane;
pub(crate) mod manifests;
pub(crate) mod pki;
pub(crate) mod pods;
pub(crate) mod proxy;
pub(crate) mod pushgateway;
pub(crate) mod real;
pub(crate) mod registry;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use base64::Engine as _;
use fake_cluster::{FakeCluster, FakeEcr, Resource};
use serde_json::{Value, json};

pub(crate) const SECRET: &str = "aws-ecr-token";
pub(crate) const REGISTRY: &str = "123456789012.dkr.ecr.us-east-1.amazonaws.com";
pub(crate) const REGION: &str = "us-east-1";

/// The built binary with a fake ECR, pointed at any kubeconfig: the fake API server's
/// ([`Harness`]) or a real one's (tests/common/real.rs).
pub(crate) struct Binary {
    pub ecr: FakeEcr,
    pub dir: tempfile::TempDir,
    kubeconfig: PathBuf,
}

impl Binary {
    /// A temporary directory, a fake ECR, and the kubeconfig `kubeconfig` writes or names
    /// (it is given the directory).
    pub(crate) fn new(kubeconfig: impl FnOnce(&Path) -> PathBuf) -> Self {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let kubeconfig = kubeconfig(dir.path());
        Self {
            ecr: FakeEcr::start(),
            dir,
            kubeconfig,
        }
    }

    pub(crate) fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    pub(crate) fn termination_log(&self) -> PathBuf {
        self.dir.path().join("termination-log")
    }

    /// The binary's environment: the kubeconfig, the fake ECR, JSON logs, the default log
    /// filter, and nothing from the developer's shell.
    pub(crate) fn command(&self, env: &[(&str, &str)]) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_ecr-refresh"));
        command
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", self.dir.path())
            .env("KUBECONFIG", &self.kubeconfig)
            .envs(self.ecr.client_env(REGION))
            .env("ECR_REFRESH_LOG_FORMAT", "json")
            .env("ECR_REFRESH_REGISTRIES", REGISTRY)
            .env("ECR_REFRESH_TERMINATION_LOG", self.termination_log());
        for (k, v) in env {
            command.env(k, v);
        }
        command
    }

    /// Runs the binary to completion; no token in its output.
    pub(crate) fn run(&self, env: &[(&str, &str)]) -> Run {
        let output = self.command(env).output().expect("ecr-refresh runs");
        self.checked(output)
    }

    /// The run's output, checked for every token the fake ECR handed out (the password, and
    /// the forms it travels in: the token and the `auth` field).
    pub(crate) fn checked(&self, output: Output) -> Run {
        let run = Run::from(output);
        for password in self.ecr.passwords_issued() {
            for form in [password.clone(), b64(&format!("AWS:{password}"))] {
                assert!(
                    !run.stdout.contains(&form) && !run.stderr.contains(&form),
                    "a token reached the output:\n{}{}",
                    run.stdout,
                    run.stderr
                );
            }
        }
        run
    }
}

/// The binary against a fresh fake cluster. Every run is also checked for a DELETE in the
/// fake's request log.
pub(crate) struct Harness {
    pub cluster: FakeCluster,
    binary: Binary,
}

impl std::ops::Deref for Harness {
    type Target = Binary;

    fn deref(&self) -> &Binary {
        &self.binary
    }
}

impl Harness {
    pub(crate) fn new() -> Self {
        Self::with(FakeCluster::start())
    }

    pub(crate) fn with(cluster: FakeCluster) -> Self {
        let binary = Binary::new(|dir| cluster.write_kubeconfig(dir));
        Self { cluster, binary }
    }

    pub(crate) fn namespaces(&self, names: &[&str]) {
        for name in names {
            self.cluster.add_namespace(name, &[]);
        }
    }

    /// Runs the binary to completion and checks what every run must hold.
    pub(crate) fn run(&self, env: &[(&str, &str)]) -> Run {
        let output = self.command(env).output().expect("ecr-refresh runs");
        self.checked(output)
    }

    pub(crate) fn checked(&self, output: Output) -> Run {
        let run = self.binary.checked(output);
        no_delete(
            self.cluster
                .requests()
                .into_iter()
                .map(|r| (r.method, r.path)),
        );
        run
    }

    pub(crate) fn secret(&self, namespace: &str) -> Option<Value> {
        self.cluster.get(Resource::Secrets, namespace, SECRET)
    }

    /// Seeds a Secret as another tool would have made it.
    pub(crate) fn seed_secret(&self, namespace: &str, manager: &str, body: Value) -> Value {
        let mut body = body;
        body["apiVersion"] = json!("v1");
        body["kind"] = json!("Secret");
        body["metadata"]["name"] = json!(SECRET);
        body["metadata"]["namespace"] = json!(namespace);
        self.cluster.seed(Resource::Secrets, body, manager)
    }

    /// The statuses answered to `method` requests whose path contains `part`, in order.
    pub(crate) fn statuses(&self, method: &str, part: &str) -> Vec<u16> {
        self.cluster
            .requests()
            .iter()
            .filter(|r| r.method == method && r.path.contains(part))
            .map(|r| r.status)
            .collect()
    }

    /// Requests to a path that ends with `suffix`.
    pub(crate) fn requests_to(&self, method: &str, suffix: &str) -> usize {
        self.cluster
            .requests()
            .iter()
            .filter(|r| r.method == method && r.path.ends_with(suffix))
            .count()
    }
}

/// Checks that no request (method, path) was a DELETE: ecr-refresh never deletes.
pub(crate) fn no_delete(requests: impl IntoIterator<Item = (String, String)>) {
    let deletes: Vec<String> = requests
        .into_iter()
        .filter(|(method, _)| method == "DELETE")
        .map(|(_, path)| path)
        .collect();
    assert!(deletes.is_empty(), "ecr-refresh sent a DELETE: {deletes:?}");
}

/// What one run printed and how it ended.
pub(crate) struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
    pub lines: Vec<Value>,
}

impl From<Output> for Run {
    fn from(output: Output) -> Self {
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        let lines = stdout
            .lines()
            .map(|l| {
                serde_json::from_str(l).unwrap_or_else(|e| panic!("not a JSON log line ({e}): {l}"))
            })
            .collect();
        Self {
            code: output.status.code().unwrap_or(-1),
            stdout,
            stderr,
            lines,
        }
    }
}

impl Run {
    /// The per-namespace line.
    pub(crate) fn line(&self, namespace: &str) -> &Value {
        let lines: Vec<&Value> = self
            .lines
            .iter()
            .filter(|l| l["namespace"] == namespace && l.get("outcome").is_some())
            .collect();
        assert_eq!(lines.len(), 1, "one line for {namespace}:\n{}", self.stdout);
        lines[0]
    }

    pub(crate) fn outcome(&self, namespace: &str) -> &str {
        self.line(namespace)["outcome"].as_str().unwrap_or_default()
    }

    /// The log lines whose message starts with `prefix`.
    pub(crate) fn messages_starting(&self, prefix: &str) -> Vec<&Value> {
        self.lines
            .iter()
            .filter(|l| l["message"].as_str().is_some_and(|m| m.starts_with(prefix)))
            .collect()
    }

    /// A check's finding kinds in `namespace` (its `finding_kinds`), in order.
    pub(crate) fn finding_kinds(&self, namespace: &str) -> Vec<String> {
        self.line(namespace)["finding_kinds"]
            .as_str()
            .unwrap_or_default()
            .split(',')
            .filter(|k| !k.is_empty())
            .map(str::to_owned)
            .collect()
    }

    /// A check's findings in `namespace`, as its line words them.
    pub(crate) fn findings(&self, namespace: &str) -> String {
        self.line(namespace)["findings"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    pub(crate) fn summary(&self) -> &Value {
        self.lines
            .iter()
            .rev()
            .find(|l| l.get("elapsed_ms").is_some())
            .unwrap_or_else(|| panic!("no summary line:\n{}", self.stdout))
    }

    pub(crate) fn expect_code(&self, code: i32) -> &Self {
        assert_eq!(
            self.code, code,
            "exit code\nstdout:\n{}\nstderr:\n{}",
            self.stdout, self.stderr
        );
        self
    }
}

/// The `.dockerconfigjson` of a stored Secret, parsed.
pub(crate) fn docker_config(secret: &Value) -> Value {
    serde_json::from_slice(&docker_config_bytes(secret)).expect("docker config JSON")
}

pub(crate) fn docker_config_bytes(secret: &Value) -> Vec<u8> {
    let encoded = secret["data"][".dockerconfigjson"]
        .as_str()
        .expect(".dockerconfigjson");
    base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .expect("base64")
}

pub(crate) fn b64(s: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(s)
}

pub(crate) fn uid(obj: &Value) -> String {
    obj["metadata"]["uid"].as_str().expect("a uid").to_owned()
}

/// The password our entry for `host` holds.
pub(crate) fn password(secret: &Value, host: &str) -> String {
    docker_config(secret)["auths"][host]["password"]
        .as_str()
        .unwrap_or_else(|| panic!("no entry for {host} in {secret}"))
        .to_owned()
}

pub(crate) fn write(path: &Path, text: &str) {
    std::fs::write(path, text).expect("write a test file");
}
