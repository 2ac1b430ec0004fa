//! ECR_REFRESH_CLUSTERS: one run, many clusters (issue 51). The binary reads a directory of
//! kubeconfig files (`dir:`), one fake API server per spoke. Each spoke tells the requests
//! made with its kubeconfig's credential (the hub's, `ecr-refresh-hub`) from those made as
//! its own ServiceAccount (a TokenRequest's token, or impersonated): tests/fake-cluster's
//! kube/auth.rs.

use crate::common;

use std::collections::BTreeMap;
use std::path::PathBuf;

use common::*;
use fake_cluster::{EcrFault, FakeCluster, Fault, Recorded, Resource};
use serde_json::{Value, json};

const RENEW_8H: (&str, &str) = ("ECR_REFRESH_RENEW_BEFORE", "8h");

/// The kubeconfig's credential in every spoke: the narrowed hub identity the spoke install ships.
const HUB: &str = "system:serviceaccount:ecr-refresh:ecr-refresh-hub";
/// The spoke's own ServiceAccount, every request but the TokenRequest is made as it.
const SPOKE: &str = "system:serviceaccount:ecr-refresh:ecr-refresh";
const TOKEN_PATH: &str = "/api/v1/namespaces/ecr-refresh/serviceaccounts/ecr-refresh/token";
/// The namespaces of every spoke: the install's own and two teams'.
const NAMESPACES: [&str; 3] = ["ecr-refresh", "team-a", "team-b"];

/// A spoke as the spoke install leaves it: the ServiceAccount `ecr-refresh` in its namespace,
/// the teams' namespaces, and a kubeconfig whose credential is the hub's.
fn spoke() -> FakeCluster {
    let c = FakeCluster::builder().kubeconfig_user(HUB).start();
    for ns in NAMESPACES {
        c.add_namespace(ns, &[]);
    }
    c.seed(
        Resource::ServiceAccounts,
        json!({"metadata": {"name": "ecr-refresh", "namespace": "ecr-refresh"}}),
        "kubectl-create",
    );
    c
}

/// A port nothing listens on (bound, then let go).
fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a port");
    listener.local_addr().expect("an address").port()
}

/// A kubeconfig like the fake's, pointing at `url`.
fn kubeconfig_at(url: &str) -> String {
    format!(
        "apiVersion: v1
kind: Config
clusters:
- name: spoke
  cluster:
    server: {url}
contexts:
- name: spoke
  context:
    cluster: spoke
    user: hub
current-context: spoke
users:
- name: hub
  user:
    token: fake-token
"
    )
}

/// The hub: the binary (its own KUBECONFIG names a fake of its own, which a fleet without
/// ECR_REFRESH_CLUSTERS_INCLUDE_LOCAL must leave alone) and the directory of the spokes'
/// kubeconfigs, one file per spoke, named for it.
struct Fleet {
    hub: Harness,
    dir: PathBuf,
    spokes: BTreeMap<String, FakeCluster>,
}

impl Fleet {
    fn new() -> Self {
        let hub = Harness::new();
        hub.namespaces(&["hub-team"]);
        let dir = hub.dir.path().join("clusters");
        std::fs::create_dir(&dir).expect("the clusters directory");
        Self {
            hub,
            dir,
            spokes: BTreeMap::new(),
        }
    }

    fn with_spokes(names: &[&str]) -> Self {
        let mut fleet = Self::new();
        for name in names {
            fleet.add(name, spoke());
        }
        fleet
    }

    fn add(&mut self, name: &str, cluster: FakeCluster) {
        write(&self.dir.join(name), &cluster.kubeconfig());
        self.spokes.insert(name.to_owned(), cluster);
    }

    /// A cluster file that names a server nothing listens on.
    fn add_down(&self, name: &str) {
        let url = format!("http://127.0.0.1:{}", closed_port());
        write(&self.dir.join(name), &kubeconfig_at(&url));
    }

    fn source(&self) -> String {
        format!("dir:{}", self.dir.display())
    }

    /// Runs the hub with ECR_REFRESH_CLUSTERS=dir:<the directory> and `env`; checks that no
    /// spoke saw a DELETE and no TokenRequest's token reached the output.
    fn run(&self, env: &[(&str, &str)]) -> Run {
        let source = self.source();
        let mut all = vec![("ECR_REFRESH_CLUSTERS", source.as_str())];
        all.extend_from_slice(env);
        let run = self.hub.run(&all);
        for (name, spoke) in &self.spokes {
            no_delete(spoke.requests().into_iter().map(|r| (r.method, r.path)));
            for asked in spoke.token_requests() {
                assert!(
                    !run.stdout.contains(&asked.token) && !run.stderr.contains(&asked.token),
                    "{name}: the spoke ServiceAccount's token reached the output"
                );
            }
        }
        run
    }

    fn spoke(&self, name: &str) -> &FakeCluster {
        &self.spokes[name]
    }

    /// Every selected namespace of the spoke holds the Secret, recorded as the spoke
    /// ServiceAccount's install.
    fn assert_written(&self, name: &str) {
        for ns in NAMESPACES {
            let secret = self
                .spoke(name)
                .get(Resource::Secrets, ns, SECRET)
                .unwrap_or_else(|| panic!("{name}: no Secret in {ns}"));
            assert_eq!(
                secret["metadata"]["annotations"]["ecr-refresh/install"], "ecr-refresh/ecr-refresh",
                "{name}/{ns}: the spoke ServiceAccount is the Secret's install"
            );
            assert_eq!(secret["type"], "kubernetes.io/dockerconfigjson");
        }
    }

    fn termination(&self) -> Value {
        let text = std::fs::read_to_string(self.hub.termination_log())
            .expect("the termination message was written");
        serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("the termination message is JSON ({e}): {text}"))
    }
}

/// The requests a spoke received from `from` on (its log's index before a run).
fn since(spoke: &FakeCluster, from: usize) -> Vec<Recorded> {
    spoke.requests().into_iter().skip(from).collect()
}

fn describe(requests: &[Recorded]) -> String {
    requests
        .iter()
        .map(|r| {
            format!(
                "{} {}?{} -> {} as {} (credential {})",
                r.method, r.path, r.query, r.status, r.user, r.credential_user
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The kubeconfig's credential sent exactly one request, the TokenRequest for the spoke's
/// ServiceAccount (expirationSeconds 600), and every other request was made as that
/// ServiceAccount with the token it got.
fn assert_only_the_token_request_with_the_kubeconfigs_credential(
    name: &str,
    requests: &[Recorded],
) {
    let with_credential: Vec<&Recorded> = requests
        .iter()
        .filter(|r| r.credential_user == HUB)
        .collect();
    assert_eq!(
        with_credential.len(),
        1,
        "{name}: one request with the kubeconfig's credential:\n{}",
        describe(requests)
    );
    let token_request = with_credential[0];
    assert_eq!(
        (token_request.method.as_str(), token_request.path.as_str()),
        ("POST", TOKEN_PATH),
        "{name}: the kubeconfig's credential sends only the TokenRequest"
    );
    let body: Value = serde_json::from_str(&token_request.body).expect("a JSON TokenRequest");
    assert_eq!(body["kind"], "TokenRequest", "{name}: {body}");
    assert_eq!(
        body["apiVersion"], "authentication.k8s.io/v1",
        "{name}: {body}"
    );
    assert_eq!(body["spec"]["expirationSeconds"], 600, "{name}: {body}");
    let first = requests.iter().position(|r| r.path == TOKEN_PATH).unwrap();
    assert_eq!(
        first,
        0,
        "{name}: the TokenRequest comes first:\n{}",
        describe(requests)
    );
    for r in &requests[1..] {
        assert_eq!(
            (r.user.as_str(), r.credential_user.as_str()),
            (SPOKE, SPOKE),
            "{name}: every request after the TokenRequest is made as the spoke ServiceAccount:\n{}",
            describe(requests)
        );
    }
}

#[test]
fn with_nothing_due_each_spoke_gets_at_most_five_requests_the_token_request_alone_with_the_kubeconfigs_credential()
 {
    let fleet = Fleet::with_spokes(&["east", "north", "west"]);
    fleet.run(&[]).expect_code(0);
    for (name, spoke) in &fleet.spokes {
        assert_only_the_token_request_with_the_kubeconfigs_credential(name, &spoke.requests());
        fleet.assert_written(name);
    }
    let before: BTreeMap<&String, usize> = fleet
        .spokes
        .iter()
        .map(|(name, spoke)| (name, spoke.requests().len()))
        .collect();

    // The fake ECR's tokens live 12 hours: renewing 8 hours before, nothing is due.
    let run = fleet.run(&[("ECR_REFRESH_RENEW_BEFORE", "8h")]);

    run.expect_code(0);
    assert_eq!(
        fleet.hub.ecr.calls().len(),
        1,
        "no ECR call with nothing due"
    );
    for (name, spoke) in &fleet.spokes {
        let requests = since(spoke, before[name]);
        assert!(
            requests.len() <= 5,
            "{name}: {} requests with nothing due (TokenRequest, /version, the namespace and Secret lists):\n{}",
            requests.len(),
            describe(&requests)
        );
        assert!(
            requests
                .iter()
                .all(|r| r.method == "GET" || r.path == TOKEN_PATH),
            "{name}: nothing written:\n{}",
            describe(&requests)
        );
        assert_only_the_token_request_with_the_kubeconfigs_credential(name, &requests);
        let asked = spoke.token_requests();
        assert_eq!(asked.len(), 2, "{name}: one TokenRequest per run");
        assert!(
            asked
                .iter()
                .all(|a| a.requested_by == HUB && a.expiration_seconds == Some(600))
        );
    }
    assert!(
        fleet.hub.secret("hub-team").is_none(),
        "the hub's own cluster is no target without ECR_REFRESH_CLUSTERS_INCLUDE_LOCAL"
    );
}

#[test]
fn one_get_authorization_token_per_region_serves_every_spoke() {
    let names = ["a", "b", "c", "d", "e", "f"];
    let fleet = Fleet::with_spokes(&names);
    let eu = "123456789012.dkr.ecr.eu-west-1.amazonaws.com";
    let registries = format!("{REGISTRY},{eu}");

    let run = fleet.run(&[
        ("ECR_REFRESH_REGISTRIES", &registries),
        ("ECR_REFRESH_CLUSTERS_CONCURRENCY", "3"),
    ]);

    run.expect_code(0);
    let mut regions: Vec<String> = fleet
        .hub
        .ecr
        .calls()
        .into_iter()
        .map(|(region, _)| region)
        .collect();
    regions.sort();
    assert_eq!(
        regions,
        ["eu-west-1", "us-east-1"],
        "one GetAuthorizationToken per region for the whole fleet"
    );
    for name in names {
        fleet.assert_written(name);
        for ns in NAMESPACES {
            let secret = fleet
                .spoke(name)
                .get(Resource::Secrets, ns, SECRET)
                .unwrap();
            let auths = &docker_config(&secret)["auths"];
            assert!(
                auths.get(REGISTRY).is_some() && auths.get(eu).is_some(),
                "{name}/{ns}: both regions' hosts: {auths}"
            );
        }
        assert_only_the_token_request_with_the_kubeconfigs_credential(
            name,
            &fleet.spoke(name).requests(),
        );
    }
    let per_cluster: Vec<&Value> = run
        .lines
        .iter()
        .filter(|l| l.get("cluster").is_some() && l.get("outcome").is_some())
        .collect();
    assert_eq!(
        per_cluster.len(),
        names.len() * NAMESPACES.len(),
        "a line per namespace per spoke:\n{}",
        run.stdout
    );
}

#[test]
fn a_spoke_down_or_refusing_the_token_request_fails_alone_and_is_named() {
    let mut fleet = Fleet::with_spokes(&["good-1", "good-2"]);
    fleet.add_down("down");
    // No ServiceAccount `ecr-refresh`: the TokenRequest is answered 404.
    let no_account = FakeCluster::builder().kubeconfig_user(HUB).start();
    no_account.add_namespace("team-a", &[]);
    fleet.add("no-account", no_account);
    // The hub's right was not granted: 403.
    let forbidden = spoke();
    forbidden.add_fault(Fault::new(
        "POST",
        "/serviceaccounts/ecr-refresh/token$",
        403,
    ));
    fleet.add("forbidden", forbidden);

    let run = fleet.run(&[]);

    run.expect_code(1);
    fleet.assert_written("good-1");
    fleet.assert_written("good-2");
    let failed = ["down", "forbidden", "no-account"];
    for name in ["no-account", "forbidden"] {
        let requests = fleet.spoke(name).requests();
        assert_eq!(
            requests.len(),
            1,
            "{name}: nothing after a refused TokenRequest:\n{}",
            describe(&requests)
        );
        assert_eq!(requests[0].path, TOKEN_PATH);
        assert!(
            fleet
                .spoke(name)
                .get(Resource::Secrets, "team-a", SECRET)
                .is_none()
        );
    }
    let mut named: Vec<&str> = run
        .lines
        .iter()
        .filter(|l| l["message"] == "cluster failed")
        .map(|l| {
            assert_eq!(l["level"], "ERROR", "{l}");
            assert!(
                l["error"].as_str().is_some_and(|e| !e.is_empty()),
                "a cluster failed line says why: {l}"
            );
            l["cluster"]
                .as_str()
                .unwrap_or_else(|| panic!("cluster failed without cluster: {l}"))
        })
        .collect();
    named.sort_unstable();
    assert_eq!(
        named, failed,
        "one `cluster failed` line per failed cluster:\n{}",
        run.stdout
    );

    let fleet_summary = run.messages_starting("fleet summary");
    assert_eq!(fleet_summary.len(), 1, "{}", run.stdout);
    let summary = fleet_summary[0];
    assert_eq!(summary["clusters"], 5, "{summary}");
    assert_eq!(summary["clusters_failed"], 3, "{summary}");
    let mut listed: Vec<&str> = summary["failed_clusters"]
        .as_str()
        .unwrap_or_default()
        .split(',')
        .collect();
    listed.sort_unstable();
    assert_eq!(listed, failed, "{summary}");

    let message = fleet.termination();
    assert_eq!(message["exit_code"], 1, "{message}");
    assert_eq!(message["clusters"], 5, "{message}");
    assert_eq!(message["clusters_failed"], 3, "{message}");
    let mut listed: Vec<&str> = message["failed_clusters"]
        .as_array()
        .unwrap_or_else(|| panic!("failed_clusters: {message}"))
        .iter()
        .map(|n| n.as_str().unwrap())
        .collect();
    listed.sort_unstable();
    assert_eq!(listed, failed, "{message}");
}

/// 999 of the 1,000 fail without a connection: their kubeconfig's user runs an `exec` plugin,
/// refused for every source. (999 on a closed port each spend the 15 s of a spoke's first
/// contact, all at once at this concurrency, and 1,000 clients built at once starve the one
/// reachable spoke's TokenRequest past its own 15 s in a debug build on 2 busy cores.)
#[test]
fn the_termination_message_at_a_thousand_clusters_stays_under_4096_bytes() {
    let fleet = Fleet::with_spokes(&["reachable"]);
    let with_exec = kubeconfig_at("http://127.0.0.1:1").replace(
        "    token: fake-token\n",
        "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: aws\n      args: [eks, get-token]\n",
    );
    for i in 0..999 {
        write(&fleet.dir.join(format!("exec-user-{i:04}")), &with_exec);
    }

    let started = std::time::Instant::now();
    let run = fleet.run(&[("ECR_REFRESH_CLUSTERS_CONCURRENCY", "1000")]);
    let took = started.elapsed();

    run.expect_code(1);
    fleet.assert_written("reachable");
    let text = std::fs::read_to_string(fleet.hub.termination_log()).unwrap();
    assert!(text.len() < 4096, "{} bytes: {text}", text.len());
    let message = fleet.termination();
    assert_eq!(message["exit_code"], 1, "{message}");
    assert_eq!(message["clusters"], 1000, "{message}");
    assert_eq!(message["clusters_reached"], 1, "{message}");
    assert_eq!(message["clusters_failed"], 999, "{message}");
    assert!(
        message["outcomes"].is_object(),
        "summed outcomes: {message}"
    );
    assert!(message.get("elapsed_ms").is_some(), "{message}");
    let failed = message["failed_clusters"].as_array().unwrap();
    let last = failed.last().and_then(Value::as_str).unwrap_or_default();
    let more: usize = last
        .strip_prefix('+')
        .and_then(|rest| rest.strip_suffix(" more"))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("failed_clusters ends with \"+N more\": {last:?}"));
    let names = &failed[..failed.len() - 1];
    assert!(
        names
            .iter()
            .all(|n| n.as_str().is_some_and(|n| n.starts_with("exec-user-"))),
        "{message}"
    );
    assert_eq!(names.len() + more, 999, "{message}");
    eprintln!(
        "1,000 clusters, 999 refused: {took:?}, termination message {} bytes",
        text.len()
    );
}

#[test]
fn every_line_of_a_clusters_work_carries_the_cluster_at_the_top_level() {
    let fleet = Fleet::with_spokes(&["east", "west"]);
    fleet.add_down("gone");

    let run = fleet.run(&[]);

    run.expect_code(1);
    let names = ["east", "gone", "west"];
    for line in &run.lines {
        let text = line.to_string();
        let about_a_namespace = line.get("namespace").is_some() || line.get("outcome").is_some();
        let about_a_server = fleet
            .spokes
            .values()
            .any(|spoke| text.contains(&spoke.url()));
        if about_a_namespace || about_a_server {
            let cluster = line["cluster"].as_str().unwrap_or_else(|| {
                panic!("a line of a cluster's work without a top-level cluster: {line}")
            });
            assert!(names.contains(&cluster), "{line}");
        }
        for nested in ["fields", "span", "spans"] {
            assert!(
                line.get(nested).is_none_or(|n| n.get("cluster").is_none()),
                "cluster is a top-level field, not under {nested}: {line}"
            );
        }
    }
    for name in ["east", "west"] {
        for ns in NAMESPACES {
            let lines: Vec<&Value> = run
                .lines
                .iter()
                .filter(|l| {
                    l["namespace"] == ns && l.get("outcome").is_some() && l["cluster"] == name
                })
                .collect();
            assert_eq!(lines.len(), 1, "{name}/{ns}:\n{}", run.stdout);
            assert_eq!(lines[0]["outcome"], "created");
        }
        let summaries: Vec<&Value> = run
            .lines
            .iter()
            .filter(|l| l["cluster"] == name && l.get("elapsed_ms").is_some())
            .collect();
        assert_eq!(summaries.len(), 1, "{name}'s summary line:\n{}", run.stdout);
        assert_eq!(summaries[0]["created"], 3, "{}", summaries[0]);
    }
}

#[test]
fn an_unknown_cluster_source_exits_2_naming_the_variable() {
    let h = Harness::new();
    h.namespaces(&["a"]);

    let run = h.run(&[("ECR_REFRESH_CLUSTERS", "bogus")]);

    run.expect_code(2);
    let said = format!("{}{}", run.stdout, run.stderr);
    assert!(said.contains("ECR_REFRESH_CLUSTERS"), "{said}");
    assert!(
        said.contains("capi") && said.contains("argocd") && said.contains("dir:"),
        "what is accepted: {said}"
    );
    assert!(h.cluster.requests().is_empty(), "nothing sent");
    assert!(h.ecr.calls().is_empty(), "no ECR call");
}

#[test]
fn capi_without_the_namespace_of_its_secrets_exits_2_naming_the_variable() {
    let h = Harness::new();

    let run = h.run(&[("ECR_REFRESH_CLUSTERS", "capi")]);

    run.expect_code(2);
    let said = format!("{}{}", run.stdout, run.stderr);
    assert!(said.contains("ECR_REFRESH_CLUSTERS_NAMESPACE"), "{said}");
    assert!(h.cluster.requests().is_empty(), "nothing sent");
    assert!(h.ecr.calls().is_empty(), "no ECR call");
}

#[test]
fn a_directory_source_with_a_namespace_exits_2_naming_the_variable() {
    let fleet = Fleet::with_spokes(&["east"]);

    let run = fleet.run(&[("ECR_REFRESH_CLUSTERS_NAMESPACE", "capi-system")]);

    run.expect_code(2);
    let said = format!("{}{}", run.stdout, run.stderr);
    assert!(said.contains("ECR_REFRESH_CLUSTERS_NAMESPACE"), "{said}");
    assert!(fleet.spoke("east").requests().is_empty(), "nothing sent");
}

#[test]
fn impersonation_sends_no_token_request_and_every_request_impersonates_the_spoke_service_account() {
    let fleet = Fleet::with_spokes(&["east", "west"]);

    let run = fleet.run(&[("ECR_REFRESH_CLUSTERS_AUTH", "impersonate")]);

    run.expect_code(0);
    for (name, spoke) in &fleet.spokes {
        fleet.assert_written(name);
        let requests = spoke.requests();
        assert!(spoke.token_requests().is_empty(), "{name}: no TokenRequest");
        assert!(
            requests
                .iter()
                .all(|r| r.user == SPOKE && r.credential_user == HUB),
            "{name}: every request impersonates the spoke ServiceAccount with the kubeconfig's credential:\n{}",
            describe(&requests)
        );
    }
}

/// A spoke is named by its file: a file starting with `.` (a mounted Secret's `..data`
/// links) is no cluster.
#[test]
fn hidden_files_of_the_directory_are_no_clusters() {
    let fleet = Fleet::with_spokes(&["east"]);
    let hidden = spoke();
    write(&fleet.dir.join(".east-old"), &hidden.kubeconfig());

    let run = fleet.run(&[]);

    run.expect_code(0);
    fleet.assert_written("east");
    assert!(
        hidden.requests().is_empty(),
        "a hidden file is not read as a cluster"
    );
    let summary = run.messages_starting("fleet summary");
    assert_eq!(summary.len(), 1, "{}", run.stdout);
    assert_eq!(summary[0]["clusters"], 1, "{}", summary[0]);
}

/// `check` over the fleet: each spoke checked as its check ServiceAccount
/// (ECR_REFRESH_CLUSTERS_CHECK_SERVICE_ACCOUNT, the spoke install's `ecr-refresh-check`), with
/// a summary per cluster and one for the fleet, nothing written; a spoke without that
/// ServiceAccount refuses the TokenRequest and fails alone.
#[test]
fn check_over_the_fleet_reads_each_spoke_as_its_check_service_account_and_writes_nothing() {
    const CHECK: &str = "system:serviceaccount:ecr-refresh:ecr-refresh-check";
    let mut fleet = Fleet::with_spokes(&["east", "west"]);
    for spoke in fleet.spokes.values() {
        spoke.seed(
            Resource::ServiceAccounts,
            json!({"metadata": {"name": "ecr-refresh-check", "namespace": "ecr-refresh"}}),
            "kubectl-create",
        );
    }
    fleet.run(&[]).expect_code(0);
    fleet.add("north", spoke()); // no ecr-refresh-check there
    let before: BTreeMap<String, usize> = fleet
        .spokes
        .iter()
        .map(|(name, spoke)| (name.clone(), spoke.requests().len()))
        .collect();

    let run = fleet.run(&[("ECR_REFRESH_MODE", "check")]);

    run.expect_code(1);
    for name in ["east", "west"] {
        let requests = since(fleet.spoke(name), before[name]);
        assert!(
            requests
                .iter()
                .all(|r| r.method == "GET" || r.path.ends_with("/ecr-refresh-check/token")),
            "{name}: a check writes nothing:\n{}",
            describe(&requests)
        );
        assert!(
            requests[1..].iter().all(|r| r.user == CHECK),
            "{name}: every request after the TokenRequest is the check ServiceAccount's:\n{}",
            describe(&requests)
        );
        let summary = run
            .lines
            .iter()
            .find(|l| l["cluster"] == name && l["namespaces"].is_number() && l["mode"] == "check")
            .unwrap_or_else(|| panic!("{name}: a check summary line with its cluster"));
        assert_eq!(summary["namespaces"], NAMESPACES.len(), "{summary}");
    }
    let failed = run
        .lines
        .iter()
        .find(|l| l["message"] == "cluster failed")
        .expect("a cluster failed line");
    assert_eq!(failed["cluster"], "north", "{failed}");
    let fleet_summary = run
        .lines
        .iter()
        .find(|l| l["message"] == "fleet summary")
        .expect("the fleet summary");
    assert_eq!(fleet_summary["mode"], "check");
    assert_eq!(fleet_summary["clusters_reached"], 2, "{fleet_summary}");
    assert_eq!(fleet_summary["failed_clusters"], "north", "{fleet_summary}");
    let message = fleet.termination();
    assert_eq!(message["mode"], "check", "{message}");
    assert_eq!(message["failed_clusters"], json!(["north"]), "{message}");
}

/// A directory's fleet reads no cluster for its source: the cluster the run runs in is asked
/// nothing unless ECR_REFRESH_CLUSTERS_INCLUDE_LOCAL makes it a target too.
#[test]
fn a_directory_fleet_asks_the_cluster_it_runs_in_nothing_unless_it_is_included() {
    let fleet = Fleet::with_spokes(&["east"]);

    fleet.run(&[]).expect_code(0);

    assert_eq!(
        fleet.hub.cluster.requests().len(),
        0,
        "the hub's cluster was asked: {:?}",
        fleet.hub.cluster.requests()
    );
    let run = fleet.run(&[("ECR_REFRESH_CLUSTERS_INCLUDE_LOCAL", "true")]);
    run.expect_code(0);
    assert!(
        run.lines
            .iter()
            .any(|l| l["cluster"] == "local" && l["outcome"] == "created"),
        "the local cluster's Secret is written: {}",
        run.stdout
    );
}

/// Each spoke reached gets a Pushgateway group of its own (the grouping labels plus
/// `ecr_refresh_cluster`), holding its outcomes, its Secrets' earliest expiry and the requests
/// sent to it alone; a spoke not reached pushes nothing, so its group ages
/// (EcrRefreshClusterNotReached); the hub's own group holds the run's exit code.
#[test]
#[ignore = "needs prometheus-pushgateway (bash .ci/test)"]
fn each_reached_spoke_pushes_its_own_group_with_its_own_requests() {
    let gateway = common::pushgateway::Gateway::start();
    let fleet = Fleet::with_spokes(&["east", "west"]);
    fleet.add_down("gone");
    let url = gateway.url();

    let run = fleet.run(&[
        ("ECR_REFRESH_PUSHGATEWAY_URL", url.as_str()),
        ("ECR_REFRESH_PUSHGATEWAY_LABELS", "env=test"),
    ]);

    run.expect_code(1);
    for name in ["east", "west"] {
        let group = [("env", "test"), ("ecr_refresh_cluster", name)];
        assert_eq!(
            gateway.value(
                "ecr_refresh_namespaces",
                &[group[0], group[1], ("outcome", "created")]
            ),
            Some(NAMESPACES.len() as f64),
            "{name}"
        );
        assert!(
            gateway
                .value(
                    "ecr_refresh_secrets_earliest_expiry_timestamp_seconds",
                    &group
                )
                .is_some(),
            "{name}: its Secrets' earliest expiry"
        );
        let sent: f64 = ["GET", "POST", "PATCH", "PUT", "other"]
            .iter()
            .filter_map(|m| {
                gateway.value(
                    "ecr_refresh_run_api_requests",
                    &[group[0], group[1], ("method", m)],
                )
            })
            .sum();
        // The TokenRequest is sent before the cluster's work begins, in its scope too.
        assert_eq!(
            sent,
            fleet.spoke(name).requests().len() as f64,
            "{name}: the requests of its group are those it received"
        );
    }
    assert!(
        gateway
            .samples()
            .iter()
            .all(|s| s.labels.get("ecr_refresh_cluster").map(String::as_str) != Some("gone")),
        "a spoke not reached pushes nothing"
    );
    assert_eq!(
        gateway.value(
            "ecr_refresh_last_run_exit_code",
            &[("env", "test"), ("ecr_refresh_cluster", "")]
        ),
        None,
        "the gateway has no empty label: the hub's group is the one without it"
    );
    let hub: Vec<f64> = gateway
        .ours("ecr_refresh_last_run_exit_code")
        .into_iter()
        .filter(|s| !s.labels.contains_key("ecr_refresh_cluster"))
        .map(|s| s.value)
        .collect();
    assert_eq!(hub, [1.0], "the hub's group: the run's exit code");
}

/// At the deadline (ECR_REFRESH_TIMEOUT), a spoke being reached, and every one not begun, is
/// left for the next run: the run ends within the deadline, not a TokenRequest's 15 s per spoke
/// later, and names them.
#[test]
fn at_the_deadline_no_further_spoke_is_begun() {
    let fleet = Fleet::new();
    for name in ["a", "b", "c", "d"] {
        fleet.add_down(name);
    }
    let started = std::time::Instant::now();

    let run = fleet.run(&[
        ("ECR_REFRESH_TIMEOUT", "2s"),
        ("ECR_REFRESH_CLUSTERS_CONCURRENCY", "1"),
    ]);

    let took = started.elapsed();
    assert!(
        took < std::time::Duration::from_secs(12),
        "the run ended {took:?} after its start, past the 2 s deadline and its grace:\n{}",
        run.stdout
    );
    assert_ne!(run.code, 0, "{}", run.stdout);
    let failed: Vec<&str> = run
        .lines
        .iter()
        .filter(|l| l["message"] == "cluster failed")
        .filter_map(|l| l["cluster"].as_str())
        .collect();
    assert_eq!(failed, ["a", "b", "c", "d"], "{}", run.stdout);
}

/// No token is the run's error (exit 3), as for one cluster, even where another spoke needed
/// none and was done: a spoke's failure that needs no token is not what is wrong.
#[test]
fn no_token_is_the_fleets_exit_3_even_with_a_spoke_that_needed_none() {
    let fleet = Fleet::with_spokes(&["a", "b"]);
    fleet.run(&[RENEW_8H]).expect_code(0);
    fleet.spoke("b").add_namespace("team-c", &[]);
    fleet.hub.ecr.add_fault(EcrFault::AccessDenied, None);

    let run = fleet.run(&[RENEW_8H]);

    run.expect_code(3);
    let last = run.lines.last().unwrap();
    let error = last["error"].as_str().unwrap_or_default();
    assert!(error.contains("AccessDeniedException"), "{last}");
    assert!(
        fleet
            .spoke("b")
            .get(Resource::Secrets, "team-c", SECRET)
            .is_none()
    );
    assert!(
        run.lines
            .iter()
            .any(|l| l["cluster"] == "a" && l["outcome"] == "fresh"),
        "spoke a needed no token:\n{}",
        run.stdout
    );
}
