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

use super::manifests::{copy, documents};
use super::real::{RealHarness, create, get, namespaces, ok, wait_until_enforced};
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
        install(&cp);
        let mut all = SELECTED.to_vec();
        all.push(UNSELECTED);
        namespaces(&cp, &all);
        wait_until_enforced(&cp, SELECTED[0]);
        let (hub_token, server, ca_data) = hub_credential(&cp);
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
            // kubectl get leaves managedFields out; the API's own answer has them.
            let raw: Value = serde_json::from_str(
                &self
                    .cp
                    .get_raw(&format!("/api/v1/namespaces/{namespace}/secrets/{SECRET}")),
            )
            .expect("JSON");
            let managers: Vec<&Value> = raw["metadata"]["managedFields"]
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
                // The test's own, as the admin (a Secret deleted for the next run), aside.
                e["user"]["username"] != control_plane::ADMIN_USER
                    && e["objectRef"]["resource"] == "secrets"
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

/// Where the hub keeps its clusters.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Source {
    /// Cluster API's `<cluster>-kubeconfig` Secrets (the page's `hub-capi` values).
    Capi,
    /// Argo CD cluster Secrets holding the narrowed credential (`hub-argocd`, each Secret
    /// written by `argocd-cluster-secret`).
    ArgoCd,
}

impl Source {
    /// The hub's chart values as the Fleets page shows them: (`clusters.source`, that is
    /// ECR_REFRESH_CLUSTERS; `clusters.namespaces`, ECR_REFRESH_CLUSTERS_NAMESPACE).
    pub(crate) fn values(self) -> (String, Vec<String>) {
        let name = match self {
            Self::Capi => "hub-capi",
            Self::ArgoCd => "hub-argocd",
        };
        let values = documents(&recipe(name, "yaml"));
        let clusters = &values[0]["clusters"];
        let source = clusters["source"]
            .as_str()
            .unwrap_or_else(|| panic!("{name}: clusters.source"))
            .to_owned();
        let namespaces: Vec<String> = clusters["namespaces"]
            .as_array()
            .unwrap_or_else(|| panic!("{name}: clusters.namespaces"))
            .iter()
            .map(|n| n.as_str().expect("a namespace").to_owned())
            .collect();
        (source, namespaces)
    }

    /// The Cluster API Secret for `spoke` in `namespace`, as Cluster API writes one, holding
    /// the `hub-token` recipe's credential.
    fn capi_secret(namespace: &str, spoke: &Spoke) -> Value {
        json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": { "name": format!("{}-kubeconfig", spoke.name), "namespace": namespace,
                          "labels": { "cluster.x-k8s.io/cluster-name": spoke.name } },
            "type": "cluster.x-k8s.io/secret",
            "data": { "value": b64(&spoke.kubeconfig()) }
        })
    }
}

/// The hub: the namespaces of the page's hub values, the spokes' Secrets in the first, and
/// the binary as a hub ServiceAccount that may get and list Secrets in those namespaces
/// only (as the hub install grants).
pub(crate) struct Hub<'a> {
    pub cp: &'a ControlPlane,
    pub source: Source,
    /// ECR_REFRESH_CLUSTERS.
    pub clusters: String,
    pub namespaces: Vec<String>,
    pub harness: RealHarness<'a>,
}

impl<'a> Hub<'a> {
    /// On `cp` (the namespaces must not exist yet), a Secret per spoke.
    pub(crate) fn new(cp: &'a ControlPlane, source: Source, spokes: &[&Spoke]) -> Self {
        let (clusters, namespaces) = source.values();
        let account_namespace = format!("{}-hub", namespaces[0]);
        let mut objects = vec![
            json!({ "apiVersion": "v1", "kind": "Namespace", "metadata": { "name": account_namespace } }),
        ];
        for namespace in &namespaces {
            objects.extend([
                json!({ "apiVersion": "v1", "kind": "Namespace", "metadata": { "name": namespace } }),
                json!({ "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                    "metadata": { "name": "ecr-refresh-clusters", "namespace": namespace },
                    "rules": [{ "apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list"] }] }),
                json!({ "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                    "metadata": { "name": "ecr-refresh-clusters", "namespace": namespace },
                    "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                 "name": "ecr-refresh-clusters" },
                    "subjects": [{ "kind": "ServiceAccount", "name": "ecr-refresh",
                                   "namespace": account_namespace }] }),
            ]);
        }
        create(cp, &objects);
        for spoke in spokes {
            match source {
                Source::Capi => create(cp, &[Source::capi_secret(&namespaces[0], spoke)]),
                Source::ArgoCd => argocd_cluster_secret(cp, &namespaces[0], spoke),
            }
        }
        let harness = RealHarness::as_account(cp, (&account_namespace, "ecr-refresh"));
        Self {
            cp,
            source,
            clusters,
            namespaces,
            harness,
        }
    }

    /// One fleet run over the hub's clusters, selecting [`SELECTED`] in each, with `extra`
    /// variables; the hub itself is only read, and of its Secrets only those namespaces'.
    pub(crate) fn run(&self, extra: &[(&str, &str)]) -> Run {
        let selected = SELECTED.join(",");
        let namespaces = self.namespaces.join(",");
        let mut env = vec![
            ("ECR_REFRESH_CLUSTERS", self.clusters.as_str()),
            ("ECR_REFRESH_CLUSTERS_NAMESPACE", namespaces.as_str()),
            ("ECR_REFRESH_NAMESPACES", selected.as_str()),
        ];
        env.extend_from_slice(extra);
        let started = Instant::now();
        let run = self.harness.run(&env);
        eprintln!(
            "fleet run ({}): exit {} in {:.1?}",
            self.clusters,
            run.code,
            started.elapsed()
        );
        for exchange in self.harness.proxy.exchanges() {
            assert!(
                exchange.method == "GET"
                    && (!exchange.path.contains("/secrets")
                        || self.namespaces.iter().any(|n| exchange
                            .path
                            .starts_with(&format!("/api/v1/namespaces/{n}/secrets")))),
                "the hub is only read, and of its Secrets only the clusters': {} {}",
                exchange.method,
                exchange.path
            );
        }
        run
    }

    /// The run's name for `spoke`: `<namespace>/<cluster>` for Cluster API, the Argo CD
    /// Secret's `name`.
    pub(crate) fn cluster_name(&self, spoke: &Spoke) -> String {
        match self.source {
            Source::Capi => format!("{}/{}", self.namespaces[0], spoke.name),
            Source::ArgoCd => spoke.name.to_owned(),
        }
    }
}

/// The run's line `fleet summary`.
pub(crate) fn fleet_summary(run: &Run) -> &Value {
    let lines = run.messages_starting("fleet summary");
    assert_eq!(lines.len(), 1, "one fleet summary:\n{}", run.stdout);
    lines[0]
}

/// Each cluster's run reached it and wrote [`SELECTED`]: per-namespace lines and a summary
/// (its `namespaces`) carrying its name in `cluster`.
pub(crate) fn assert_each_cluster_reported(run: &Run, clusters: &[String]) {
    for cluster in clusters {
        let summaries: Vec<&Value> = run
            .lines
            .iter()
            .filter(|l| {
                l["cluster"] == cluster.as_str()
                    && l.get("namespaces").is_some()
                    && l.get("elapsed_ms").is_some()
            })
            .collect();
        assert_eq!(
            summaries.len(),
            1,
            "one summary for {cluster}, with its cluster:\n{}",
            run.stdout
        );
        assert_eq!(
            summaries[0]["namespaces"],
            SELECTED.len(),
            "{}",
            summaries[0]
        );
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

/// The Fleets page's recipe `name` (docs/src/fleets.md, `<!-- recipe: NAME -->`): its
/// block as the page shows it, in `language`.
pub(crate) fn recipe(name: &str, language: &str) -> String {
    let found = super::docs::recipes(&super::docs::page("fleets.md"))
        .into_iter()
        .find(|r| r.name == name)
        .unwrap_or_else(|| panic!("docs/src/fleets.md has no recipe {name}"));
    assert_eq!(found.lang, language, "recipe {name}'s language");
    found.body
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
/// `ecr-refresh-spoke/kustomization.yaml` beside a clone holding manifests/, applied with the
/// page's `kubectl apply -k ecr-refresh-spoke/` as the spoke's admin.
fn install(cp: &ControlPlane) {
    let dir = copy();
    let clone = dir.path().join("ecr-refresh");
    std::fs::create_dir(&clone).expect("the clone's directory");
    std::fs::rename(dir.path().join("manifests"), clone.join("manifests")).expect("manifests/");
    let overlay = dir.path().join("ecr-refresh-spoke");
    std::fs::create_dir(&overlay).expect("the overlay's directory");
    super::write(
        &overlay.join("kustomization.yaml"),
        &recipe("spoke-kustomization", "yaml"),
    );
    shell(
        cp,
        cp.admin_kubeconfig(),
        dir.path(),
        "kubectl apply -k ecr-refresh-spoke/",
    );
}

/// The hub's credential for a spoke as the `hub-token` recipe mints it with kubectl on the
/// spoke: (token, server, CA data).
fn hub_credential(cp: &ControlPlane) -> (String, String, String) {
    let script = format!(
        "{}printf '%s\\n' \"$token\" \"$server\" \"$ca\"\n",
        recipe("hub-token", "sh")
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
/// `argocd-cluster-secret` recipe writes it with kubectl on the hub (its `spoke-1` being this
/// spoke's name, and `ecr-refresh-clusters` the namespace), from the `hub-token` recipe's
/// values.
fn argocd_cluster_secret(hub: &ControlPlane, namespace: &str, spoke: &Spoke) {
    let recipe = recipe("argocd-cluster-secret", "sh");
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
