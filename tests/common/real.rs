//! The binary and kubectl against a real kube-apiserver and etcd (tests/control-plane):
//! the manifests installed as the admin, and runs as ecr-refresh's ServiceAccount with a
//! real TokenRequest token, through a recording proxy (tests/common/proxy.rs).
//!
//! Needs `KUBEBUILDER_ASSETS` (see tests/control-plane): without it the first test panics,
//! naming the command that builds the binaries. No kube-controller-manager runs (but on the
//! installs' control planes, [`installs`]), so a deleted namespace stays Terminating, and no
//! `default` ServiceAccount appears by itself anywhere.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use control_plane::ControlPlane;
use serde_json::{Value, json};

use super::manifests::{documents, kustomization_with, yaml};
use super::proxy::Proxy;
use super::{Binary, Run};

/// The kubectl a user would run: the first on PATH (on CI's machine /usr/bin/kubectl,
/// 1.32 with kustomize v5.5; where none is installed, `.ci/test` puts the control plane's
/// own on PATH). None when there is none.
pub(crate) fn kubectl_on_path() -> Option<PathBuf> {
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|dir| dir.join("kubectl"))
        .find(|p| p.is_file())
}

/// The namespace and name of ecr-refresh's ServiceAccount in the manifests.
pub(crate) const SERVICE_ACCOUNT: (&str, &str) = ("ecr-refresh", "ecr-refresh");

/// How long the server may take to act on what was just applied (its informers: RBAC, the
/// policy, its type check).
pub(crate) const SETTLE: Duration = Duration::from_secs(60);

/// `program` (a kubectl) with `kubeconfig`, its cache in the control plane's directory and
/// no kuberc or kubeconfig of the developer's.
pub(crate) fn kubectl(cp: &ControlPlane, program: &Path, kubeconfig: &Path) -> Command {
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
pub(crate) fn ok(command: &mut Command, stdin: &str) -> String {
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
pub(crate) fn admin(cp: &ControlPlane, args: &[&str], stdin: &str) -> String {
    ok(cp.kubectl().args(args), stdin)
}

/// Creates `objects` as the admin (`kubectl create -f -`; field manager kubectl-create).
pub(crate) fn create(cp: &ControlPlane, objects: &[Value]) {
    admin(cp, &["create", "-f", "-"], &yaml(objects));
}

/// One object as the admin sees it, or None when it does not exist.
pub(crate) fn get(cp: &ControlPlane, kind: &str, namespace: &str, name: &str) -> Option<Value> {
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
pub(crate) fn namespaces(cp: &ControlPlane, names: &[&str]) {
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
pub(crate) fn eventually<T>(what: &str, mut check: impl FnMut() -> Result<T, String>) -> T {
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
pub(crate) fn install(
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
pub(crate) fn install_with(
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
pub(crate) fn checked_policy(cp: &ControlPlane, name: &str) -> Value {
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
pub(crate) fn send(
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
pub(crate) fn message(body: &Value) -> &str {
    body["message"].as_str().unwrap_or_default()
}

/// Whether a Status is a ValidatingAdmissionPolicy's denial, by the shape of its message
/// (any policy and binding name): `ValidatingAdmissionPolicy 'P' with binding 'B' denied
/// request: ...`.
pub(crate) fn denied_by_policy(body: &Value) -> bool {
    let message = message(body);
    message.contains("ValidatingAdmissionPolicy '")
        && message.contains("' with binding '")
        && message.contains("' denied request: ")
}

/// Who refuses a request: RBAC (`… cannot …`) or an admission policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RefusedBy {
    Rbac,
    Policy,
}

/// Until `token`'s dry-run DELETE of the Secret at `path` (`/api/v1/namespaces/NS/secrets/NAME`)
/// is refused by `by`: RBAC's grants, or their removal, in force. A delete is what the
/// manifests never grant, so it reaches admission only under RBAC granting everything.
pub(crate) fn wait_until_delete_refused_by(
    cp: &ControlPlane,
    token: &str,
    path: &str,
    by: RefusedBy,
) {
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
pub(crate) fn wait_until_enforced(cp: &ControlPlane, namespace: &str) {
    wait_until_enforced_for(cp, namespace, SERVICE_ACCOUNT, super::SECRET);
}

/// The same for the install whose ServiceAccount is `(account namespace, name)` and whose
/// Secret is `secret`.
pub(crate) fn wait_until_enforced_for(
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
pub(crate) fn write_requests(cp: &ControlPlane, resources: &[&str]) -> u64 {
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
pub(crate) fn env<'a>(
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

/// The control planes of the tests that install the manifests, or restart the server, each
/// taken by one test at a time. The manifests' ClusterRoles, bindings and admission policy
/// have fixed names, and a policy holds every ServiceAccount granted `subject-to` its Secret
/// name, so two installs on one server judge each other's requests. Each turn starts on a
/// server as it was started: [`scrub`] first deletes whatever the previous test left, even
/// one that failed, unless both tests share what [`installs_keeping`] prepared. A turn is
/// also the server's request counters (`/metrics`) to itself.
pub(crate) struct Turn {
    cp: &'static ControlPlane,
    _slot: MutexGuard<'static, Option<&'static str>>,
}

impl std::ops::Deref for Turn {
    type Target = ControlPlane;

    fn deref(&self) -> &ControlPlane {
        self.cp
    }
}

/// How many installs' control planes a test binary runs: two tests at a time, for two cores,
/// where one server would make a queue of a dozen tests the real tier's longest path.
const INSTALL_SERVERS: usize = 2;

/// Waits for a free installs' control plane (started by its first turn), and scrubs it.
pub(crate) fn installs() -> Turn {
    turn(None, |_| {})
}

/// Like [`installs`], for the tests that run on what `prepare` installs (runs.rs: the
/// shipped manifests): a server whose last turn had the same `key` is taken as that turn
/// left it, neither scrubbed nor prepared again, so these tests use namespaces of their own.
pub(crate) fn installs_keeping(key: &'static str, prepare: impl FnOnce(&ControlPlane)) -> Turn {
    turn(Some(key), prepare)
}

fn turn(key: Option<&'static str>, prepare: impl FnOnce(&ControlPlane)) -> Turn {
    // Each slot holds the key its server was last prepared under.
    static SLOTS: [Mutex<Option<&'static str>>; INSTALL_SERVERS] =
        [Mutex::new(None), Mutex::new(None)];
    static READY: [OnceLock<()>; INSTALL_SERVERS] = [OnceLock::new(), OnceLock::new()];
    const GROUPS: [&str; INSTALL_SERVERS] = ["installs-1", "installs-2"];
    // A free server prepared under `key` first, else any free one.
    let free = |prepared_only: bool| {
        SLOTS.iter().enumerate().find_map(|(i, m)| {
            let guard = match m.try_lock() {
                Ok(guard) => guard,
                Err(std::sync::TryLockError::Poisoned(p)) => {
                    // The test before failed with the server in any state: scrub it.
                    m.clear_poison();
                    let mut guard = p.into_inner();
                    *guard = None;
                    guard
                }
                Err(std::sync::TryLockError::WouldBlock) => return None,
            };
            (!prepared_only || (key.is_some() && *guard == key)).then_some((i, guard))
        })
    };
    let (i, mut slot) = loop {
        match free(true).or_else(|| free(false)) {
            Some(taken) => break taken,
            None => std::thread::sleep(Duration::from_millis(100)),
        }
    };
    let cp = ControlPlane::one_at_a_time(GROUPS[i]);
    READY[i].get_or_init(|| {
        // The namespace controller empties and removes a deleted namespace (without it one
        // stays Terminating); the status controller type-checks policies (checked_policy).
        cp.start_controllers(&[
            "namespace-controller",
            "validatingadmissionpolicy-status-controller",
        ]);
        admin(cp, &["apply", "-f", "-"], WITNESS);
    });
    if key.is_none() || *slot != key {
        *slot = None;
        // A restart test that failed may have left a daemon stopped.
        if cp.etcd_pid().is_none() {
            cp.start_etcd();
        }
        if cp.apiserver_pid().is_none() {
            cp.start_apiserver();
        }
        scrub(cp);
        prepare(cp);
        *slot = key;
    }
    Turn { cp, _slot: slot }
}

/// Held by any admission policy for our Secret names (`aws-ecr-token`, `team-pull`), and
/// allowed by RBAC to create Secrets anywhere: whether its dry-run create of an Opaque Secret
/// is refused tells whether the server enforces such a policy.
pub(crate) const WITNESS: &str = "
apiVersion: v1
kind: Namespace
metadata: {name: witness}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: witness, namespace: witness}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: witness}
rules:
- {apiGroups: [ecr-refresh], resources: [admission-policy], resourceNames: [aws-ecr-token, team-pull], verbs: [subject-to]}
- {apiGroups: [''], resources: [secrets], verbs: [create]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: witness}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: witness}
subjects:
- {kind: ServiceAccount, name: witness, namespace: witness}
";

/// Whether the witness's dry-run create of an Opaque Secret named `secret` in `namespace`
/// is refused by a policy (`Ok(true)`) or admitted (`Ok(false)`).
pub(crate) fn witness_held(
    cp: &ControlPlane,
    namespace: &str,
    secret: &str,
) -> Result<bool, String> {
    let token = cp.service_account_token("witness", "witness");
    let probe = json!({ "apiVersion": "v1", "kind": "Secret",
        "metadata": { "name": secret }, "type": "Opaque" });
    let path = format!("/api/v1/namespaces/{namespace}/secrets?dryRun=All");
    match send(cp, &token, "POST", &path, "application/json", &probe) {
        (403, body) if denied_by_policy(&body) => Ok(true),
        (201, _) => Ok(false),
        (status, body) => Err(format!("{status} {body}")),
    }
}

/// Until no admission policy for our Secret names holds anyone in `namespace`.
pub(crate) fn wait_until_no_policy(cp: &ControlPlane, namespace: &str) {
    for secret in [super::SECRET, "team-pull"] {
        eventually("no policy in force", || {
            match witness_held(cp, namespace, secret)? {
                true => Err(format!("a policy holds {secret}")),
                false => Ok(()),
            }
        });
    }
}

/// Deletes what tests add to a control plane: every namespace but the server's own and the
/// witness's (the namespace controller empties them), every admission policy and binding,
/// the ClusterRoles and bindings that are not the server's bootstrap ones, and what sits in
/// `default`; then waits until the namespaces are gone and no policy is in force.
pub(crate) fn scrub(cp: &ControlPlane) {
    const KEPT: [&str; 5] = [
        "default",
        "kube-system",
        "kube-public",
        "kube-node-lease",
        "witness",
    ];
    let names = |kind: &str| -> Vec<String> {
        let list: Value =
            serde_json::from_str(&admin(cp, &["get", kind, "-o", "json"], "")).expect("JSON");
        list["items"]
            .as_array()
            .expect("a list")
            .iter()
            .filter(|o| o["metadata"]["labels"]["kubernetes.io/bootstrapping"] != "rbac-defaults")
            .filter_map(|o| o["metadata"]["name"].as_str().map(str::to_owned))
            .filter(|n| !KEPT.contains(&n.as_str()))
            .collect()
    };
    for kind in [
        "validatingadmissionpolicybindings",
        "validatingadmissionpolicies",
        "clusterrolebindings",
        "clusterroles",
    ] {
        let doomed = names(kind);
        if !doomed.is_empty() {
            let mut args = vec!["delete", kind];
            args.extend(doomed.iter().map(String::as_str));
            admin(cp, &args, "");
        }
    }
    // A finalizer a test put on an object (an attack admitted without the policy) would hold
    // its deletion, and its namespace's, forever: nothing here would remove it.
    let held: Value = serde_json::from_str(&admin(
        cp,
        &[
            "get",
            "secrets,serviceaccounts,configmaps,pods",
            "-A",
            "-o",
            "json",
        ],
        "",
    ))
    .expect("JSON");
    for object in held["items"].as_array().expect("a list") {
        let meta = &object["metadata"];
        if meta["finalizers"].as_array().is_some_and(|f| !f.is_empty()) {
            let kind = object["kind"].as_str().expect("a kind").to_lowercase();
            admin(
                cp,
                &[
                    "patch",
                    &kind,
                    meta["name"].as_str().expect("a name"),
                    "-n",
                    meta["namespace"].as_str().expect("a namespace"),
                    "--type=merge",
                    "-p",
                    r#"{"metadata":{"finalizers":null}}"#,
                ],
                "",
            );
        }
    }
    admin(
        cp,
        &[
            "delete",
            "secrets,serviceaccounts,configmaps,pods,jobs,cronjobs,roles,rolebindings",
            "--all",
            "--wait=false",
            "-n",
            "default",
        ],
        "",
    );
    let doomed = names("namespaces");
    if !doomed.is_empty() {
        // A namespace an earlier test deleted may finish going between the list and this.
        let mut args = vec!["delete", "namespaces", "--wait=false", "--ignore-not-found"];
        args.extend(doomed.iter().map(String::as_str));
        admin(cp, &args, "");
        eventually("the deleted namespaces gone", || {
            let left: Vec<String> = names("namespaces")
                .into_iter()
                .filter(|n| doomed.contains(n))
                .collect();
            if left.is_empty() {
                Ok(())
            } else {
                Err(format!("still there: {left:?}"))
            }
        });
    }
    wait_until_no_policy(cp, "default");
}

/// The binary against a real control plane, as ecr-refresh's ServiceAccount (a TokenRequest
/// token), through a recording proxy. Every run is checked for tokens in its output and for
/// a DELETE among its requests.
pub(crate) struct RealHarness<'a> {
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
    pub(crate) fn new(cp: &'a ControlPlane) -> Self {
        Self::as_account(cp, SERVICE_ACCOUNT)
    }

    /// As the ServiceAccount `(namespace, name)` another install made.
    pub(crate) fn as_account(cp: &'a ControlPlane, (namespace, name): (&str, &str)) -> Self {
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

    pub(crate) fn run(&self, env: &[(&str, &str)]) -> Run {
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
    pub(crate) fn secret(&self, namespace: &str) -> Option<Value> {
        get(self.cp, "secret", namespace, super::SECRET)
    }

    /// The requests of its runs answered with anything but success or a 404 read: what
    /// RBAC or an admission policy refused.
    pub(crate) fn refused(&self) -> Vec<String> {
        self.proxy
            .exchanges()
            .into_iter()
            .filter(|e| e.status >= 400 && !(e.status == 404 && e.method == "GET"))
            .map(|e| format!("{} {} {}: {}", e.status, e.method, e.path, e.response_body))
            .collect()
    }

    /// (method, status) of the exchanges whose path contains `part`.
    pub(crate) fn statuses(&self, part: &str) -> Vec<(String, u16)> {
        self.proxy
            .exchanges()
            .into_iter()
            .filter(|e| e.path.contains(part))
            .map(|e| (e.method, e.status))
            .collect()
    }
}
