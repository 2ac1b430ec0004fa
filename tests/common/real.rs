//! The binary and kubectl against a real kube-apiserver and etcd (tests/control-plane):
//! the manifests installed as the admin, and runs as ecr-refresh's ServiceAccount with a
//! real TokenRequest token, through a recording proxy (tests/common/proxy.rs).
//!
//! Needs `KUBEBUILDER_ASSETS` (see tests/control-plane): without it the first test panics,
//! naming the command that builds the binaries. No kube-controller-manager runs, so a
//! deleted namespace stays Terminating and no `default` ServiceAccount appears by itself.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use control_plane::ControlPlane;
use serde_json::{Value, json};

use super::manifests::{documents, kustomization_with, yaml};
use super::proxy::Proxy;
use super::{Binary, Run};

/// The kubectl a user would run: the first on PATH (on CI's machine /usr/bin/kubectl,
/// 1.32 with kustomize v5.5; where none is installed, `.ci/test` puts the control plane's
/// own on PATH). None when there is none.
pub fn kubectl_on_path() -> Option<PathBuf> {
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|dir| dir.join("kubectl"))
        .find(|p| p.is_file())
}

/// The namespace and name of ecr-refresh's ServiceAccount in the manifests.
pub const SERVICE_ACCOUNT: (&str, &str) = ("ecr-refresh", "ecr-refresh");

/// How long the server may take to act on what was just applied (its informers: RBAC, the
/// policy, its type check).
pub const SETTLE: Duration = Duration::from_secs(60);

/// `program` (a kubectl) with `kubeconfig`, its cache in the control plane's directory and
/// no kuberc or kubeconfig of the developer's.
pub fn kubectl(cp: &ControlPlane, program: &Path, kubeconfig: &Path) -> Command {
    assert!(
        program.is_file(),
        "kubectl not found at {}: the real-server tests need it",
        program.display()
    );
    let mut command = Command::new(program);
    command
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", cp.dir())
        .env("KUBECONFIG", kubeconfig)
        .env("KUBECACHEDIR", cp.dir().join("kubectl-cache"))
        .env("KUBERC", "off");
    command
}

/// Runs `command` with `stdin`, and returns its stdout.
///
/// # Panics
/// When it fails, with its stderr.
pub fn ok(command: &mut Command, stdin: &str) -> String {
    let what = format!("{command:?}");
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    child
        .stdin
        .take()
        .expect("a stdin")
        .write_all(stdin.as_bytes())
        .expect("writing kubectl's stdin");
    let output = child.wait_with_output().expect("kubectl ends");
    assert!(
        output.status.success(),
        "{what}: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// The admin's built kubectl with `args`, and `stdin`; its stdout.
pub fn admin(cp: &ControlPlane, args: &[&str], stdin: &str) -> String {
    ok(cp.kubectl().args(args), stdin)
}

/// Creates `objects` as the admin (`kubectl create -f -`; field manager kubectl-create).
pub fn create(cp: &ControlPlane, objects: &[Value]) {
    admin(cp, &["create", "-f", "-"], &yaml(objects));
}

/// One object as the admin sees it, or None when it does not exist.
pub fn get(cp: &ControlPlane, kind: &str, namespace: &str, name: &str) -> Option<Value> {
    let out = admin(
        cp,
        &[
            "get",
            kind,
            name,
            "-n",
            namespace,
            "-o",
            "json",
            "--ignore-not-found",
        ],
        "",
    );
    (!out.trim().is_empty()).then(|| serde_json::from_str(&out).expect("kubectl prints JSON"))
}

/// Namespaces, each with a `default` ServiceAccount holding `team-creds` in its
/// imagePullSecrets (as kube-controller-manager would have made it, and a team added to).
pub fn namespaces(cp: &ControlPlane, names: &[&str]) {
    let mut objects = Vec::new();
    for name in names {
        objects
            .push(json!({ "apiVersion": "v1", "kind": "Namespace", "metadata": { "name": name } }));
        objects.push(json!({ "apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": { "name": "default", "namespace": name },
            "imagePullSecrets": [{ "name": "team-creds" }] }));
    }
    create(cp, &objects);
}

/// Polls `check` until it gives Some, for at most [`SETTLE`].
///
/// # Panics
/// After that, with `what` and the last thing seen.
pub fn eventually<T>(what: &str, mut check: impl FnMut() -> Result<T, String>) -> T {
    let deadline = Instant::now() + SETTLE;
    loop {
        match check() {
            Ok(done) => return done,
            Err(seen) if Instant::now() > deadline => {
                panic!("{what}: not within {SETTLE:?}; last seen: {seen}")
            }
            Err(_) => std::thread::sleep(Duration::from_millis(200)),
        }
    }
}

/// Installs a variant ("" or "namespaced") of the manifests directory `root`, with or
/// without the service-accounts component, as the admin with `kubectl apply -k` of
/// `program`. Every object rendered must be answered `created`. Returns the rendered objects.
pub fn install(
    cp: &ControlPlane,
    program: &Path,
    root: &Path,
    variant: &str,
    with_service_accounts: bool,
) -> Vec<Value> {
    install_with(
        cp,
        program,
        root,
        variant,
        "",
        with_service_accounts.then_some("service-accounts"),
    )
}

/// [`install`] through an overlay with its own lines (`fields`, such as `namePrefix: b-`)
/// and one component of manifests/components (or none).
pub fn install_with(
    cp: &ControlPlane,
    program: &Path,
    root: &Path,
    variant: &str,
    fields: &str,
    component: Option<&str>,
) -> Vec<Value> {
    let dir = kustomization_with(root, variant, fields, component);
    let admin = cp.admin_kubeconfig();
    let rendered = documents(&ok(
        kubectl(cp, program, admin).arg("kustomize").arg(&dir),
        "",
    ));
    assert!(!rendered.is_empty(), "{} renders objects", dir.display());
    let applied = ok(
        kubectl(cp, program, admin).arg("apply").arg("-k").arg(&dir),
        "",
    );
    let created: Vec<&str> = applied
        .lines()
        .filter(|l| l.ends_with(" created"))
        .collect();
    assert_eq!(
        created.len(),
        rendered.len(),
        "{} with {}: every object created:\n{applied}",
        dir.display(),
        program.display()
    );
    for object in &rendered {
        let kind = object["kind"].as_str().expect("a kind").to_lowercase();
        let name = object["metadata"]["name"].as_str().expect("a name");
        assert!(
            created
                .iter()
                .any(|l| l.starts_with(kind.as_str()) && l.contains(&format!("/{name} "))),
            "{kind}/{name} is among the created:\n{applied}"
        );
    }
    rendered
}

/// The policy once the server has type-checked its current generation
/// (`status.observedGeneration == metadata.generation`).
pub fn checked_policy(cp: &ControlPlane, name: &str) -> Value {
    eventually("the policy's type check", || {
        let policy: Value = serde_json::from_str(&admin(
            cp,
            &["get", "validatingadmissionpolicy", name, "-o", "json"],
            "",
        ))
        .expect("kubectl prints JSON");
        // Written by kube-controller-manager (ControlPlane::start_policy_status_controller).
        let generation = &policy["metadata"]["generation"];
        if generation.is_number() && policy["status"]["observedGeneration"] == *generation {
            Ok(policy)
        } else {
            Err(policy["status"].to_string())
        }
    })
}

/// One request as `token` to the control plane (TLS, its CA): (status, body as JSON, or
/// Null when it is not).
pub fn send(
    cp: &ControlPlane,
    token: &str,
    method: &str,
    path: &str,
    content_type: &str,
    body: &Value,
) -> (u16, Value) {
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    let ca = reqwest::Certificate::from_pem(cp.ca_pem().as_bytes()).expect("the CA is PEM");
    let client = reqwest::Client::builder()
        .tls_certs_only([ca])
        .build()
        .expect("a TLS client");
    let method = reqwest::Method::from_bytes(method.as_bytes()).expect("a method");
    let url = format!("{}{path}", cp.server_url());
    let body = if body.is_null() {
        String::new()
    } else {
        body.to_string()
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        let answer = client
            .request(method, url)
            .bearer_auth(token)
            .header("Content-Type", content_type)
            .header("User-Agent", "attacker/1.0")
            .body(body)
            .send()
            .await
            .expect("the control plane answers");
        let status = answer.status().as_u16();
        let text = answer.text().await.unwrap_or_default();
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    })
}

/// The message of a Status.
pub fn message(body: &Value) -> &str {
    body["message"].as_str().unwrap_or_default()
}

/// Whether a Status is a ValidatingAdmissionPolicy's denial, by the shape of its message
/// (any policy and binding name): `ValidatingAdmissionPolicy 'P' with binding 'B' denied
/// request: ...`.
pub fn denied_by_policy(body: &Value) -> bool {
    let message = message(body);
    message.contains("ValidatingAdmissionPolicy '")
        && message.contains("' with binding '")
        && message.contains("' denied request: ")
}

/// Who refuses a request: RBAC (`… cannot …`) or an admission policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RefusedBy {
    Rbac,
    Policy,
}

/// Until `token`'s dry-run DELETE of the Secret at `path` (`/api/v1/namespaces/NS/secrets/NAME`)
/// is refused by `by`: RBAC's grants, or their removal, in force. A delete is what the
/// manifests never grant, so it reaches admission only under RBAC granting everything.
pub fn wait_until_delete_refused_by(cp: &ControlPlane, token: &str, path: &str, by: RefusedBy) {
    let path = format!("{path}?dryRun=All");
    eventually(&format!("a delete refused by {by:?}"), || {
        let (status, body) = send(cp, token, "DELETE", &path, "application/json", &Value::Null);
        let refused = match by {
            RefusedBy::Rbac => status == 403 && message(&body).contains("cannot "),
            RefusedBy::Policy => denied_by_policy(&body),
        };
        if refused {
            Ok(())
        } else {
            Err(format!("{status} {body}"))
        }
    });
}

/// Until the policy refuses ecr-refresh's ServiceAccount a Secret of another type (a dry
/// run, so nothing is stored): the server's informers have the policy and binding.
pub fn wait_until_enforced(cp: &ControlPlane, namespace: &str) {
    wait_until_enforced_for(cp, namespace, SERVICE_ACCOUNT, super::SECRET);
}

/// The same for the install whose ServiceAccount is `(account namespace, name)` and whose
/// Secret is `secret`.
pub fn wait_until_enforced_for(
    cp: &ControlPlane,
    namespace: &str,
    (account_namespace, account): (&str, &str),
    secret: &str,
) {
    let token = cp.service_account_token(account_namespace, account);
    let probe = json!({ "apiVersion": "v1", "kind": "Secret",
        "metadata": { "name": secret }, "type": "Opaque" });
    let path = format!("/api/v1/namespaces/{namespace}/secrets?dryRun=All");
    eventually("the policy in force", || {
        let (status, body) = send(cp, &token, "POST", &path, "application/json", &probe);
        if status == 403 && denied_by_policy(&body) {
            Ok(())
        } else {
            Err(format!("{status} {body}"))
        }
    });
}

/// The sum of `apiserver_request_total` over the write verbs (anything but GET, LIST,
/// WATCH) for `resources`, from the server's `/metrics`.
pub fn write_requests(cp: &ControlPlane, resources: &[&str]) -> u64 {
    cp.request_totals()
        .into_iter()
        .filter(|((verb, resource), _)| {
            resources.contains(&resource.as_str())
                && !["GET", "LIST", "WATCH"].contains(&verb.as_str())
        })
        .map(|(_, n)| n)
        .sum()
}

/// The CronJob's environment with the namespaces replaced by `namespaces`, and `extra`.
pub fn env<'a>(
    shipped: &'a [(String, String)],
    namespaces: &'a str,
    extra: &[(&'a str, &'a str)],
) -> Vec<(&'a str, &'a str)> {
    let mut env: Vec<(&str, &str)> = shipped
        .iter()
        .filter(|(k, _)| k != "ECR_REFRESH_NAMESPACES")
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    env.push(("ECR_REFRESH_NAMESPACES", namespaces));
    env.extend_from_slice(extra);
    env
}

/// The binary against a real control plane, as ecr-refresh's ServiceAccount (a TokenRequest
/// token), through a recording proxy. Every run is checked for tokens in its output and for
/// a DELETE among its requests.
pub struct RealHarness<'a> {
    pub cp: &'a ControlPlane,
    pub proxy: Proxy,
    binary: Binary,
}

impl std::ops::Deref for RealHarness<'_> {
    type Target = Binary;

    fn deref(&self) -> &Binary {
        &self.binary
    }
}

impl<'a> RealHarness<'a> {
    /// The ServiceAccount must exist (the manifests make it).
    pub fn new(cp: &'a ControlPlane) -> Self {
        Self::as_account(cp, SERVICE_ACCOUNT)
    }

    /// As the ServiceAccount `(namespace, name)` another install made.
    pub fn as_account(cp: &'a ControlPlane, (namespace, name): (&str, &str)) -> Self {
        let proxy = Proxy::start(&cp.server_url(), &cp.ca_pem());
        let token = cp.service_account_token(namespace, name);
        let user = format!("system:serviceaccount:{namespace}:{name}");
        let binary = Binary::new(|dir| {
            let path: PathBuf = dir.join("kubeconfig");
            cp.write_kubeconfig(&path, proxy.url(), &user, &token);
            path
        });
        Self { cp, proxy, binary }
    }

    pub fn run(&self, env: &[(&str, &str)]) -> Run {
        let run = self.binary.run(env);
        super::no_delete(
            self.proxy
                .exchanges()
                .into_iter()
                .map(|e| (e.method, e.path)),
        );
        run
    }

    /// The pull Secret in `namespace`, as the admin reads it.
    pub fn secret(&self, namespace: &str) -> Option<Value> {
        get(self.cp, "secret", namespace, super::SECRET)
    }

    /// The requests of its runs answered with anything but success or a 404 read: what
    /// RBAC or an admission policy refused.
    pub fn refused(&self) -> Vec<String> {
        self.proxy
            .exchanges()
            .into_iter()
            .filter(|e| e.status >= 400 && !(e.status == 404 && e.method == "GET"))
            .map(|e| format!("{} {} {}: {}", e.status, e.method, e.path, e.response_body))
            .collect()
    }

    /// (method, status) of the exchanges whose path contains `part`.
    pub fn statuses(&self, part: &str) -> Vec<(String, u16)> {
        self.proxy
            .exchanges()
            .into_iter()
            .filter(|e| e.path.contains(part))
            .map(|e| (e.method, e.status))
            .collect()
    }
}
