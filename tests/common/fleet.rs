//! A fleet on real control planes (tests/control-plane): a hub, where the binary reads its
//! clusters from Cluster API or Argo CD Secrets, and spokes of their own, each with the
//! spoke install (the ServiceAccount ecr-refresh, its RBAC and admission policy, and the
//! hub's one right: a token for that ServiceAccount, granted to the ServiceAccount
//! ecr-refresh-hub) and an audit log that says who sent each request. For
//! tests/real/fleet.rs, and tests/compat (a spoke on Kubernetes 1.30).

use std::path::PathBuf;
use std::time::Instant;

use control_plane::{ControlPlane, Options};
use serde_json::{Value, json};

use super::manifests::{copy, documents, yaml};
use super::real::{RealHarness, admin, create, get, kubectl, namespaces, ok, wait_until_enforced};
use super::{Run, SECRET, b64};

/// The spoke's ServiceAccount every write in a spoke is made as (the default of
/// ECR_REFRESH_CLUSTERS_SERVICE_ACCOUNT).
pub(crate) const SPOKE_ACCOUNT: (&str, &str) = ("ecr-refresh", "ecr-refresh");
/// Its user name, as the spoke's audit log records it.
pub(crate) const SPOKE_USER: &str = "system:serviceaccount:ecr-refresh:ecr-refresh";
/// The narrowed hub credential: the ServiceAccount whose token the hub holds for a spoke.
pub(crate) const HUB_ACCOUNT: (&str, &str) = ("ecr-refresh", "ecr-refresh-hub");
pub(crate) const HUB_USER: &str = "system:serviceaccount:ecr-refresh:ecr-refresh-hub";
/// The namespaces a run selects in every spoke (ECR_REFRESH_NAMESPACES), and one it does not.
pub(crate) const SELECTED: [&str; 2] = ["team-a", "team-b"];
pub(crate) const UNSELECTED: &str = "not-selected";

/// One spoke: its control plane (with an audit log), the spoke install, the namespaces, and
/// the token of ecr-refresh-hub the hub is given for it.
pub(crate) struct Spoke {
    pub name: &'static str,
    pub cp: ControlPlane,
    /// The token of ecr-refresh-hub, the server's URL and its CA (base64 PEM), as the
    /// `hub-token` recipe gives them.
    pub hub_token: String,
    pub server: String,
    pub ca_data: String,
}

impl Spoke {
    /// Starts a control plane from `assets` (None: KUBEBUILDER_ASSETS), installs the spoke
    /// install as its admin, and mints the hub's credential.
    pub(crate) fn start(name: &'static str, assets: Option<PathBuf>) -> Self {
        let started = Instant::now();
        let cp = ControlPlane::start_with_options(Options {
            assets,
            audit_log: true,
        });
        if by_recipe() {
            install_by_recipe(&cp);
        } else {
            install(&cp);
        }
        let mut all = SELECTED.to_vec();
        all.push(UNSELECTED);
        namespaces(&cp, &all);
        wait_until_enforced(&cp, SELECTED[0]);
        let (hub_token, server, ca_data) = if by_recipe() {
            hub_credential_by_recipe(&cp)
        } else {
            (hub_token(&cp), cp.server_url(), b64(&cp.ca_pem()))
        };
        eprintln!(
            "spoke {name}: {} installed in {:.1?}",
            cp.version(),
            started.elapsed()
        );
        Self {
            name,
            cp,
            hub_token,
            server,
            ca_data,
        }
    }

    /// The kubeconfig the hub holds for this spoke: its server, its CA inline, and the token
    /// of ecr-refresh-hub (what Cluster API's `value` and an Argo CD `config` carry).
    pub(crate) fn kubeconfig(&self) -> String {
        let config = json!({
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{ "name": self.name, "cluster": {
                "server": self.server,
                "certificate-authority-data": self.ca_data,
            }}],
            "users": [{ "name": "ecr-refresh-hub", "user": { "token": self.hub_token } }],
            "contexts": [{ "name": self.name, "context": {
                "cluster": self.name, "user": "ecr-refresh-hub",
            }}],
            "current-context": self.name,
        });
        format!("{config:#}\n")
    }

    /// The pull Secret in `namespace`, as the spoke's admin reads it.
    pub(crate) fn secret(&self, namespace: &str) -> Option<Value> {
        get(&self.cp, "secret", namespace, SECRET)
    }

    /// The audit log's events sent as `user`.
    pub(crate) fn requests_of(&self, user: &str) -> Vec<Value> {
        self.cp
            .audit_events()
            .into_iter()
            .filter(|e| e["user"]["username"] == user)
            .collect()
    }

    /// Every selected namespace holds the Secret, recorded as the spoke install's, and
    /// every write of it, in the audit log, was sent as the spoke's ServiceAccount; the
    /// namespace not selected holds none; the hub's credential sent nothing but
    /// TokenRequests for that ServiceAccount.
    pub(crate) fn assert_refreshed_as_its_service_account(&self) {
        for namespace in SELECTED {
            let secret = self
                .secret(namespace)
                .unwrap_or_else(|| panic!("{}: no Secret in {namespace}", self.name));
            assert_eq!(
                secret["type"], "kubernetes.io/dockerconfigjson",
                "{}: {secret}",
                self.name
            );
            assert_eq!(
                secret["metadata"]["annotations"]["ecr-refresh/install"], "ecr-refresh/ecr-refresh",
                "{}/{namespace}: recorded as the spoke install's: {secret}",
                self.name
            );
            let managers: Vec<&Value> = secret["metadata"]["managedFields"]
                .as_array()
                .expect("managedFields")
                .iter()
                .map(|f| &f["manager"])
                .collect();
            assert!(
                managers.iter().all(|m| *m == "ecr-refresh"),
                "{}/{namespace}: written by ecr-refresh alone: {managers:?}",
                self.name
            );
        }
        assert!(
            self.secret(UNSELECTED).is_none(),
            "{}: nothing written in {UNSELECTED}",
            self.name
        );
        let events = self.cp.audit_events();
        let writes: Vec<&Value> = events
            .iter()
            .filter(|e| {
                e["objectRef"]["resource"] == "secrets"
                    && e["objectRef"]["name"] == SECRET
                    && !["get", "list", "watch"].contains(&e["verb"].as_str().unwrap_or_default())
            })
            .collect();
        assert!(
            writes.len() >= SELECTED.len(),
            "{}: a write per selected namespace in the audit log: {writes:#?}",
            self.name
        );
        for write in &writes {
            assert_eq!(
                write["user"]["username"], SPOKE_USER,
                "{}: every write of the Secret sent as the spoke's ServiceAccount: {write}",
                self.name
            );
        }
        self.assert_hub_sent_only_token_requests();
    }

    /// The hub's credential sent TokenRequests for the spoke's ServiceAccount, and nothing
    /// else (before any attack of the test's own).
    pub(crate) fn assert_hub_sent_only_token_requests(&self) {
        let sent = self.requests_of(HUB_USER);
        assert!(!sent.is_empty(), "{}: the hub asked for a token", self.name);
        for request in &sent {
            let (namespace, name) = SPOKE_ACCOUNT;
            assert_eq!(
                (
                    request["verb"].as_str(),
                    request["objectRef"]["resource"].as_str(),
                    request["objectRef"]["subresource"].as_str(),
                    request["objectRef"]["namespace"].as_str(),
                    request["objectRef"]["name"].as_str(),
                    request["responseStatus"]["code"].as_u64(),
                ),
                (
                    Some("create"),
                    Some("serviceaccounts"),
                    Some("token"),
                    Some(namespace),
                    Some(name),
                    Some(201)
                ),
                "{}: the hub's credential sends a TokenRequest and nothing else: {request}",
                self.name
            );
        }
    }
}

/// Starts the spokes side by side, each on `assets` (None: KUBEBUILDER_ASSETS).
pub(crate) fn start_spokes(spokes: &[(&'static str, Option<PathBuf>)]) -> Vec<Spoke> {
    let started: Vec<_> = spokes
        .iter()
        .cloned()
        .map(|(name, assets)| std::thread::spawn(move || Spoke::start(name, assets)))
        .collect();
    started
        .into_iter()
        .map(|s| s.join().expect("a spoke starts"))
        .collect()
}

/// The spoke install, applied by the spoke's admin: manifests/ without the CronJob, and the
/// hub's Role, RoleBinding and ServiceAccount ecr-refresh-hub.
fn install(cp: &ControlPlane) {
    let manifests = copy();
    let program = cp.assets().join("kubectl");
    let rendered = documents(&ok(
        kubectl(cp, &program, cp.admin_kubeconfig())
            .arg("kustomize")
            .arg(manifests.path().join("manifests")),
        "",
    ));
    let spoke: Vec<Value> = rendered
        .into_iter()
        .filter(|o| o["kind"] != "CronJob")
        .collect();
    admin(cp, &["apply", "-f", "-"], &yaml(&spoke));
    admin(cp, &["apply", "-f", "-"], HUB_RIGHT);
}

/// The one right the hub has in a spoke: a token for the spoke's ServiceAccount.
const HUB_RIGHT: &str = "
apiVersion: v1
kind: ServiceAccount
metadata: {name: ecr-refresh-hub, namespace: ecr-refresh}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: ecr-refresh-hub, namespace: ecr-refresh}
rules:
- {apiGroups: [''], resources: [serviceaccounts/token], resourceNames: [ecr-refresh], verbs: [create]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: ecr-refresh-hub, namespace: ecr-refresh}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: ecr-refresh-hub}
subjects:
- {kind: ServiceAccount, name: ecr-refresh-hub, namespace: ecr-refresh}
";

/// The hub's credential for a spoke: a token of ecr-refresh-hub, minted by the spoke's admin.
fn hub_token(cp: &ControlPlane) -> String {
    let (namespace, name) = HUB_ACCOUNT;
    cp.kubectl_run(&["create", "token", name, "-n", namespace, "--duration=24h"])
        .trim()
        .to_owned()
}

/// Where the hub keeps its clusters.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Source {
    /// Cluster API's `<cluster>-kubeconfig` Secrets.
    Capi,
    /// Argo CD's cluster Secrets.
    ArgoCd,
}

impl Source {
    /// The value of ECR_REFRESH_CLUSTERS.
    pub(crate) fn variable(self) -> &'static str {
        match self {
            Self::Capi => "capi",
            Self::ArgoCd => "argocd",
        }
    }

    /// The name a run gives the spoke, when its Secret sits in `namespace`.
    pub(crate) fn cluster_name(self, namespace: &str, spoke: &Spoke) -> String {
        match self {
            Self::Capi => format!("{namespace}/{}", spoke.name),
            Self::ArgoCd => spoke.name.to_owned(),
        }
    }

    /// The hub's Secret for `spoke`.
    fn secret(self, namespace: &str, spoke: &Spoke) -> Value {
        match self {
            Self::Capi => json!({
                "apiVersion": "v1", "kind": "Secret",
                "metadata": { "name": format!("{}-kubeconfig", spoke.name), "namespace": namespace,
                              "labels": { "cluster.x-k8s.io/cluster-name": spoke.name } },
                "type": "cluster.x-k8s.io/secret",
                "data": { "value": b64(&spoke.kubeconfig()) }
            }),
            Self::ArgoCd => json!({
                "apiVersion": "v1", "kind": "Secret",
                "metadata": { "name": format!("cluster-{}", spoke.name), "namespace": namespace,
                              "labels": { "argocd.argoproj.io/secret-type": "cluster" } },
                "type": "Opaque",
                "stringData": {
                    "name": spoke.name,
                    "server": spoke.server,
                    "config": json!({
                        "bearerToken": spoke.hub_token,
                        "tlsClientConfig": { "caData": spoke.ca_data }
                    }).to_string(),
                }
            }),
        }
    }
}

/// The hub: a namespace holding the clusters' Secrets, and the binary as a hub
/// ServiceAccount that may get and list Secrets there only (as the hub install grants).
pub(crate) struct Hub<'a> {
    pub cp: &'a ControlPlane,
    pub namespace: String,
    pub source: Source,
    pub harness: RealHarness<'a>,
}

impl<'a> Hub<'a> {
    /// On `cp`, the clusters namespace `namespace` with a Secret per spoke.
    pub(crate) fn new(
        cp: &'a ControlPlane,
        namespace: &str,
        source: Source,
        spokes: &[&Spoke],
    ) -> Self {
        let account_namespace = format!("{namespace}-hub");
        create(
            cp,
            &[
                json!({ "apiVersion": "v1", "kind": "Namespace", "metadata": { "name": namespace } }),
                json!({ "apiVersion": "v1", "kind": "Namespace", "metadata": { "name": account_namespace } }),
                json!({ "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                    "metadata": { "name": "ecr-refresh-clusters", "namespace": namespace },
                    "rules": [{ "apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list"] }] }),
                json!({ "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                    "metadata": { "name": "ecr-refresh-clusters", "namespace": namespace },
                    "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                 "name": "ecr-refresh-clusters" },
                    "subjects": [{ "kind": "ServiceAccount", "name": "ecr-refresh",
                                   "namespace": account_namespace }] }),
            ],
        );
        match source {
            Source::ArgoCd if by_recipe() => {
                for spoke in spokes {
                    argocd_cluster_secret_by_recipe(cp, namespace, spoke);
                }
            }
            _ => {
                let secrets: Vec<Value> =
                    spokes.iter().map(|s| source.secret(namespace, s)).collect();
                create(cp, &secrets);
            }
        }
        let harness = RealHarness::as_account(cp, (&account_namespace, "ecr-refresh"));
        Self {
            cp,
            namespace: namespace.to_owned(),
            source,
            harness,
        }
    }

    /// One fleet run over the hub's clusters, selecting [`SELECTED`] in each, with `extra`
    /// variables; every request it sent to the hub was a read of the clusters' Secrets.
    pub(crate) fn run(&self, extra: &[(&str, &str)]) -> Run {
        let namespaces = SELECTED.join(",");
        let mut env = vec![
            ("ECR_REFRESH_CLUSTERS", self.source.variable()),
            ("ECR_REFRESH_CLUSTERS_NAMESPACE", self.namespace.as_str()),
            ("ECR_REFRESH_NAMESPACES", namespaces.as_str()),
        ];
        env.extend_from_slice(extra);
        let started = Instant::now();
        let run = self.harness.run(&env);
        eprintln!(
            "fleet run ({}): exit {} in {:.1?}",
            self.source.variable(),
            run.code,
            started.elapsed()
        );
        let clusters = format!("/api/v1/namespaces/{}/secrets", self.namespace);
        for exchange in self.harness.proxy.exchanges() {
            assert!(
                exchange.method == "GET"
                    && (!exchange.path.contains("/secrets")
                        || exchange.path.starts_with(&clusters)),
                "the hub is only read, and of its Secrets only the clusters': {} {}",
                exchange.method,
                exchange.path
            );
        }
        run
    }

    /// The run's name for `spoke`.
    pub(crate) fn cluster_name(&self, spoke: &Spoke) -> String {
        self.source.cluster_name(&self.namespace, spoke)
    }
}

/// The run's line `fleet summary`.
pub(crate) fn fleet_summary(run: &Run) -> &Value {
    let lines = run.messages_starting("fleet summary");
    assert_eq!(lines.len(), 1, "one fleet summary:\n{}", run.stdout);
    lines[0]
}

/// Each cluster's run reached it and wrote [`SELECTED`]: per-namespace lines carrying its
/// name in `cluster`.
pub(crate) fn assert_each_cluster_reported(run: &Run, clusters: &[String]) {
    for cluster in clusters {
        for namespace in SELECTED {
            let lines: Vec<&Value> = run
                .lines
                .iter()
                .filter(|l| {
                    l["cluster"] == cluster.as_str()
                        && l["namespace"] == namespace
                        && l.get("outcome").is_some()
                })
                .collect();
            assert_eq!(
                lines.len(),
                1,
                "one line for {cluster}'s {namespace}, with its cluster:\n{}",
                run.stdout
            );
        }
    }
}

/// The fenced blocks of the Fleets page (docs/src/fleets.md) under `<!-- recipe: NAME -->`,
/// up to the next recipe or heading: (language, text) each, as the page shows them.
pub(crate) fn recipe(name: &str) -> Vec<(String, String)> {
    let page = super::docs::page("fleets.md");
    let marker = format!("<!-- recipe: {name} -->");
    let start = page
        .find(&marker)
        .unwrap_or_else(|| panic!("docs/src/fleets.md has no {marker}"));
    let mut blocks = Vec::new();
    let mut lines = page[start + marker.len()..].lines();
    while let Some(line) = lines.next() {
        if line.starts_with("<!-- recipe:") || line.starts_with('#') {
            break;
        }
        if let Some(language) = line.strip_prefix("```") {
            let body: Vec<&str> = lines.by_ref().take_while(|l| *l != "```").collect();
            blocks.push((language.to_owned(), body.join("\n") + "\n"));
        }
    }
    assert!(!blocks.is_empty(), "recipe {name}: no code block");
    blocks
}

/// The one block of `language` in recipe `name`.
pub(crate) fn recipe_block(name: &str, language: &str) -> String {
    let blocks: Vec<String> = recipe(name)
        .into_iter()
        .filter(|(l, _)| l == language)
        .map(|(_, b)| b)
        .collect();
    assert_eq!(
        blocks.len(),
        1,
        "recipe {name}: one {language} block: {blocks:?}"
    );
    blocks.into_iter().next().expect("one block")
}

/// `script` run by bash in `dir`, with the control plane's kubectl first on PATH as the
/// admin (`KUBECONFIG`), `set -euo pipefail`; its stdout.
pub(crate) fn shell(
    cp: &ControlPlane,
    kubeconfig: &std::path::Path,
    dir: &std::path::Path,
    script: &str,
) -> String {
    let mut command = std::process::Command::new("bash");
    command
        .arg("-c")
        .arg(format!("set -euo pipefail\n{script}"))
        .current_dir(dir)
        .env_clear()
        .env("PATH", format!("{}:/usr/bin:/bin", cp.assets().display()))
        .env("HOME", cp.dir())
        .env("KUBECONFIG", kubeconfig)
        .env("KUBECACHEDIR", cp.dir().join("kubectl-cache"))
        .env("KUBERC", "off");
    ok(&mut command, "")
}

/// The spoke install as the Fleets page's `spoke-kustomization` recipe makes it: its overlay
/// `ecr-refresh-spoke/kustomization.yaml` beside a clone holding manifests/, applied by its
/// command as the spoke's admin.
fn install_by_recipe(cp: &ControlPlane) {
    let dir = copy();
    let clone = dir.path().join("ecr-refresh");
    std::fs::create_dir(&clone).expect("the clone's directory");
    std::fs::rename(dir.path().join("manifests"), clone.join("manifests")).expect("manifests/");
    let overlay = dir.path().join("ecr-refresh-spoke");
    std::fs::create_dir(&overlay).expect("the overlay's directory");
    super::write(
        &overlay.join("kustomization.yaml"),
        &recipe_block("spoke-kustomization", "yaml"),
    );
    shell(
        cp,
        cp.admin_kubeconfig(),
        dir.path(),
        &recipe_block("spoke-kustomization", "sh"),
    );
}

/// The hub's credential for a spoke as the `hub-token` recipe mints it with kubectl on the
/// spoke: (token, server, CA data).
fn hub_credential_by_recipe(cp: &ControlPlane) -> (String, String, String) {
    let script = format!(
        "{}printf '%s\\n' \"$token\" \"$server\" \"$ca\"\n",
        recipe_block("hub-token", "sh")
    );
    let out = shell(cp, cp.admin_kubeconfig(), cp.dir(), &script);
    let values: Vec<&str> = out.lines().collect();
    assert_eq!(values.len(), 3, "hub-token: token, server and CA: {out}");
    assert!(!values.iter().any(|v| v.is_empty()), "hub-token: {out}");
    (
        values[0].to_owned(),
        values[1].to_owned(),
        values[2].to_owned(),
    )
}

/// The Argo CD cluster Secret for `spoke` in the hub's `namespace`, as the
/// `argocd-cluster-secret` recipe writes it with kubectl on the hub (its `spoke-1` and
/// `ecr-refresh-clusters` being this spoke's name and the namespace), from the `hub-token`
/// recipe's values.
fn argocd_cluster_secret_by_recipe(hub: &ControlPlane, namespace: &str, spoke: &Spoke) {
    let recipe = recipe_block("argocd-cluster-secret", "sh");
    for shown in ["spoke-1", "ecr-refresh-clusters"] {
        assert!(
            recipe.contains(shown),
            "argocd-cluster-secret names {shown}: {recipe}"
        );
    }
    let script = format!(
        "token='{}'\nserver='{}'\nca='{}'\n{}",
        spoke.hub_token,
        spoke.server,
        spoke.ca_data,
        recipe
            .replace("spoke-1", spoke.name)
            .replace("ecr-refresh-clusters", namespace)
    );
    shell(hub, hub.admin_kubeconfig(), hub.dir(), &script);
}

/// Whether the spoke install and the hub's Secrets are made by the Fleets page's recipes
/// (once manifests/spoke and docs/src/fleets.md exist).
fn by_recipe() -> bool {
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    repo.join("manifests/spoke").is_dir() && repo.join("docs/src/fleets.md").is_file()
}
