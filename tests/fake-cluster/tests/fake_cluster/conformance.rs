//! The fake measured against the real kube-apiserver: every scenario below sends the same
//! requests to both, from one test body, and compares what ecr-refresh reads of the answers
//! (status, reason, message, details, and chosen fields). Differences the fake can't lose
//! are listed in `LISTED`, each explained in CONFORMANCE.md; any other difference fails.
//!
//! Needs the real control plane: `KUBEBUILDER_ASSETS` (see `.ci/kube-binaries`) and curl.
//! No kube-controller-manager runs, so a deleted namespace stays Terminating, and new
//! namespaces get no `default` ServiceAccount (the scenarios make their own).

use crate::common;

use std::io::Write;
use std::process::{Command, Stdio};

use common::{APPLY, JSON_PATCH, MERGE_PATCH, Response, STRATEGIC, docker_secret, owners};
use control_plane::ControlPlane;
use fake_cluster::FakeCluster;
use serde_json::{Value, json};

const CFG: &str = r#"{"auths":{"https://1.dkr.ecr.us-east-1.amazonaws.com":{"auth":"QVdTOnB3"}}}"#;
const UID: &str = "1b4e28ba-2fa1-11d2-883f-0016d3cca427";

/// `scenario/step/key` of each assertion where the fake knowingly differs (CONFORMANCE.md).
const LISTED: &[&str] = &[
    "label-selectors/bad/message",
    "image-pull-secrets/test-passes/owners",
];

/// One API server, reached the same way for every scenario.
enum Server {
    Fake(FakeCluster),
    Real(&'static ControlPlane),
}

impl Server {
    fn send(&self, method: &str, target: &str, content_type: Option<&str>, body: &str) -> Response {
        match self {
            Server::Fake(c) => common::send(&c.url(), method, target, content_type, body),
            Server::Real(cp) => curl(cp, method, target, content_type, body),
        }
    }
    fn get(&self, target: &str) -> Response {
        self.send("GET", target, None, "")
    }
    fn delete(&self, target: &str) -> Response {
        self.send("DELETE", target, None, "")
    }
    fn post(&self, target: &str, body: &Value) -> Response {
        self.send("POST", target, Some("application/json"), &body.to_string())
    }
    fn patch(&self, target: &str, content_type: &str, body: &Value) -> Response {
        self.send("PATCH", target, Some(content_type), &body.to_string())
    }
    fn apply(&self, path: &str, manager: &str, force: bool, body: &Value) -> Response {
        let target = format!(
            "{path}?fieldManager={manager}{}",
            if force { "&force=true" } else { "" }
        );
        self.patch(&target, APPLY, body)
    }

    // Seeding, through the API on both servers (as the admin on the real one).
    fn namespace(&self, name: &str, labels: Value) {
        let r = self.post(
            "/api/v1/namespaces",
            &json!({"metadata": {"name": name, "labels": labels}}),
        );
        assert_eq!(r.status, 201, "creating namespace {name}: {:?}", r.body);
    }
    fn terminate(&self, name: &str) {
        let r = self.delete(&format!("/api/v1/namespaces/{name}"));
        assert_eq!(r.status, 200, "deleting namespace {name}: {:?}", r.body);
    }
    /// Creates `obj` in `ns` as `manager` (an Update, as kubectl create is).
    fn seed(&self, ns: &str, plural: &str, obj: Value, manager: &str) -> Value {
        let r = self.post(
            &format!("/api/v1/namespaces/{ns}/{plural}?fieldManager={manager}"),
            &obj,
        );
        assert_eq!(r.status, 201, "seeding {ns}/{plural}: {:?}", r.body);
        r.body
    }
    fn seed_secret(&self, ns: &str, name: &str) -> Value {
        self.seed(
            ns,
            "secrets",
            docker_secret(ns, name, "{}"),
            "kubectl-create",
        )
    }
}

/// One request to the real server with curl, as the admin, over TLS checked against its CA.
fn curl(cp: &ControlPlane, method: &str, target: &str, ct: Option<&str>, body: &str) -> Response {
    let mut cmd = Command::new("curl");
    cmd.args(["-sS", "--http1.1", "-i", "-X", method, "--cacert"])
        .arg(cp.ca_path())
        .args(["-H", &format!("Authorization: Bearer {}", cp.admin_token())])
        .args(["-H", "Expect:", "-H", "Accept: application/json"]);
    if let Some(ct) = ct {
        cmd.args(["-H", &format!("Content-Type: {ct}"), "--data-binary", "@-"]);
    }
    cmd.arg(format!("{}{target}", cp.server_url()));
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("curl is needed for the real-server conformance test (apt-get install curl)");
    child
        .stdin
        .take()
        .expect("curl's stdin")
        .write_all(body.as_bytes())
        .expect("write curl's stdin");
    let out = child.wait_with_output().expect("curl runs");
    assert!(
        out.status.success(),
        "curl {method} {target}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).expect("utf-8 answer");
    Response::parse(&text)
}

/// What one server answered in one scenario, assertion by assertion, in order.
#[derive(Default)]
struct Record {
    seen: Vec<(String, Value)>,
}

impl Record {
    /// Status, and for a Status body its reason, message and details.
    fn answer(&mut self, step: &str, r: &Response) {
        self.field(step, "status", json!(r.status));
        self.field(step, "kind", r.body["kind"].clone());
        let status = r.body["kind"] == "Status";
        for key in ["reason", "message", "details"] {
            let mut v = if status {
                r.body[key].clone()
            } else {
                Value::Null
            };
            // A deleted object's uid is named, and uids differ between servers.
            if let Some(uid) = v.get_mut("uid") {
                *uid = json!(uid.is_string());
            }
            self.field(step, key, v);
        }
    }
    fn field(&mut self, step: &str, key: &str, v: Value) {
        self.seen.push((format!("{step}/{key}"), v));
    }
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

fn names(r: &Response) -> Value {
    json!(
        r.body["items"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|i| i["metadata"]["name"].clone())
            .collect::<Vec<_>>()
    )
}

fn sp(ns: &str, name: &str) -> String {
    format!("/api/v1/namespaces/{ns}/secrets/{name}")
}

fn sap(ns: &str, name: &str) -> String {
    format!("/api/v1/namespaces/{ns}/serviceaccounts/{name}")
}

type Scenario = fn(&Server, &mut Record);

fn apply_creates(s: &Server, rec: &mut Record) {
    let ns = "cf-create";
    s.namespace(ns, json!({}));
    let r = s.apply(
        &sp(ns, "s"),
        "ecr-refresh",
        true,
        &docker_secret(ns, "s", CFG),
    );
    rec.answer("create", &r);
    rec.field(
        "create",
        "owners",
        json!(owners(&r.body, &["f:data", "f:.dockerconfigjson"])),
    );
    rec.field("create", "type", r.body["type"].clone());
    rec.field(
        "create",
        "uid-length",
        json!(r.body["metadata"]["uid"].as_str().map(str::len)),
    );
    let again = s.apply(
        &sp(ns, "s"),
        "ecr-refresh",
        true,
        &docker_secret(ns, "s", CFG),
    );
    rec.answer("again", &again);
    rec.field(
        "again",
        "same-resource-version",
        json!(again.body["metadata"]["resourceVersion"] == r.body["metadata"]["resourceVersion"]),
    );
}

fn uid_of_absent(s: &Server, rec: &mut Record) {
    let ns = "cf-uid-absent";
    s.namespace(ns, json!({}));
    let mut body = docker_secret(ns, "s", CFG);
    body["metadata"]["uid"] = json!(UID);
    rec.answer("apply", &s.apply(&sp(ns, "s"), "ecr-refresh", true, &body));
    rec.answer("get", &s.get(&sp(ns, "s")));
}

fn uid_before_admission(s: &Server, rec: &mut Record) {
    s.namespace("cf-term-uid", json!({}));
    s.terminate("cf-term-uid");
    for ns in ["cf-term-uid", "cf-gone-uid"] {
        let mut body = docker_secret(ns, "s", CFG);
        body["metadata"]["uid"] = json!(UID);
        rec.answer(
            &format!("{ns}-uid"),
            &s.apply(&sp(ns, "s"), "ecr-refresh", true, &body),
        );
        let plain = docker_secret(ns, "s", CFG);
        rec.answer(
            &format!("{ns}-plain"),
            &s.apply(&sp(ns, "s"), "ecr-refresh", true, &plain),
        );
    }
}

fn uid_of_another(s: &Server, rec: &mut Record) {
    let ns = "cf-uid-other";
    s.namespace(ns, json!({}));
    s.seed_secret(ns, "s");
    let mut body = docker_secret(ns, "s", CFG);
    body["metadata"]["uid"] = json!(UID);
    rec.answer("apply", &s.apply(&sp(ns, "s"), "ecr-refresh", true, &body));
}

fn uid_of_live(s: &Server, rec: &mut Record) {
    let ns = "cf-uid-live";
    s.namespace(ns, json!({}));
    let live = s.seed_secret(ns, "s");
    let mut body = docker_secret(ns, "s", CFG);
    body["metadata"]["uid"] = live["metadata"]["uid"].clone();
    let r = s.apply(&sp(ns, "s"), "ecr-refresh", true, &body);
    rec.answer("apply", &r);
    rec.field(
        "apply",
        "same-uid",
        json!(r.body["metadata"]["uid"] == live["metadata"]["uid"]),
    );
    rec.field("apply", "data", r.body["data"].clone());
}

fn stale_resource_version(s: &Server, rec: &mut Record) {
    let ns = "cf-stale-rv";
    s.namespace(ns, json!({}));
    let live = s.seed_secret(ns, "s");
    let mut body = docker_secret(ns, "s", CFG);
    body["metadata"]["resourceVersion"] = json!("1");
    rec.answer("stale", &s.apply(&sp(ns, "s"), "ecr-refresh", true, &body));
    body["metadata"]["resourceVersion"] = live["metadata"]["resourceVersion"].clone();
    rec.answer("live", &s.apply(&sp(ns, "s"), "ecr-refresh", true, &body));
    let mut absent = docker_secret(ns, "new", CFG);
    absent["metadata"]["resourceVersion"] = json!("12345");
    let r = s.apply(&sp(ns, "new"), "ecr-refresh", true, &absent);
    rec.answer("absent", &r);
    rec.field(
        "absent",
        "rv-kept",
        json!(r.body["metadata"]["resourceVersion"] == "12345"),
    );
}

fn merge_per_key(s: &Server, rec: &mut Record) {
    let ns = "cf-merge";
    s.namespace(ns, json!({}));
    let seeded = json!({"metadata": {"name": "s", "labels": {"team": "x"},
        "annotations": {"note": "keep"}}, "type": "kubernetes.io/dockerconfigjson",
        "data": {".dockerconfigjson": "e30=", "other": "b3RoZXI="}});
    s.seed(ns, "secrets", seeded, "kubectl-create");
    let mut body = docker_secret(ns, "s", CFG);
    body["metadata"]["labels"] = json!({"app": "ecr-refresh"});
    body["metadata"]["annotations"] = json!({"refreshed": "now"});
    let r = s.apply(&sp(ns, "s"), "ecr-refresh", true, &body);
    rec.answer("apply", &r);
    rec.field("apply", "labels", r.body["metadata"]["labels"].clone());
    rec.field(
        "apply",
        "annotations",
        r.body["metadata"]["annotations"].clone(),
    );
    rec.field("apply", "data", r.body["data"].clone());
}

fn conflicts(s: &Server, rec: &mut Record) {
    let ns = "cf-conflict";
    s.namespace(ns, json!({}));
    s.seed_secret(ns, "s");
    rec.answer(
        "data",
        &s.apply(
            &sp(ns, "s"),
            "ecr-refresh",
            false,
            &docker_secret(ns, "s", CFG),
        ),
    );
    s.seed(
        ns,
        "secrets",
        json!({"metadata": {"name": "o"}, "type": "Opaque", "data": {"x": "eA=="}}),
        "kubectl-create",
    );
    let mut body = docker_secret(ns, "o", CFG);
    body["data"]["x"] = json!("eQ==");
    rec.answer("type", &s.apply(&sp(ns, "o"), "ecr-refresh", false, &body));
}

fn force_shares_ownership(s: &Server, rec: &mut Record) {
    let ns = "cf-force";
    s.namespace(ns, json!({}));
    s.seed(
        ns,
        "secrets",
        json!({"metadata": {"name": "s", "labels": {"l": "v"}},
        "type": "kubernetes.io/dockerconfigjson", "data": {".dockerconfigjson": "e30="}}),
        "kubectl-create",
    );
    let mut body = docker_secret(ns, "s", CFG);
    body["metadata"]["labels"] = json!({"l": "v"});
    let r = s.apply(&sp(ns, "s"), "ecr-refresh", true, &body);
    rec.answer("force", &r);
    rec.field(
        "force",
        "data-owners",
        json!(owners(&r.body, &["f:data", "f:.dockerconfigjson"])),
    );
    rec.field(
        "force",
        "label-owners",
        json!(sorted(owners(&r.body, &["f:metadata", "f:labels", "f:l"]))),
    );
    rec.field(
        "force",
        "type-owners",
        json!(sorted(owners(&r.body, &["f:type"]))),
    );
    let r = s.apply(
        &sp(ns, "s"),
        "ecr-refresh",
        false,
        &docker_secret(ns, "s", "{}"),
    );
    rec.answer("unforced", &r);
}

fn pruning(s: &Server, rec: &mut Record) {
    let ns = "cf-prune";
    s.namespace(ns, json!({}));
    let mut body = docker_secret(ns, "s", CFG);
    body["metadata"]["labels"] = json!({"old": "1", "shared": "x"});
    body["data"]["stale"] = json!("c3RhbGU=");
    rec.answer("first", &s.apply(&sp(ns, "s"), "ecr-refresh", true, &body));
    let other = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "labels": {"shared": "x"}}});
    rec.answer("other", &s.apply(&sp(ns, "s"), "other", false, &other));
    let mut body = docker_secret(ns, "s", CFG);
    body["metadata"]["labels"] = json!({});
    let r = s.apply(&sp(ns, "s"), "ecr-refresh", true, &body);
    rec.answer("second", &r);
    rec.field("second", "labels", r.body["metadata"]["labels"].clone());
    rec.field("second", "data", r.body["data"].clone());
}

fn refused_apply_bodies(s: &Server, rec: &mut Record) {
    let ns = "cf-refused";
    s.namespace(ns, json!({}));
    let mut body = docker_secret(ns, "s", CFG);
    body["metadata"]["managedFields"] = json!([{"manager": "x"}]);
    rec.answer(
        "managed-fields",
        &s.apply(&sp(ns, "s"), "ecr-refresh", true, &body),
    );
    rec.answer(
        "no-manager",
        &s.patch(&sp(ns, "s"), APPLY, &docker_secret(ns, "s", CFG)),
    );
    rec.answer(
        "bad-name",
        &s.apply(
            &sp(ns, "Bad_Name"),
            "ecr-refresh",
            true,
            &docker_secret(ns, "Bad_Name", CFG),
        ),
    );
}

fn immutability(s: &Server, rec: &mut Record) {
    let ns = "cf-immutable";
    s.namespace(ns, json!({}));
    s.seed(
        ns,
        "secrets",
        json!({"metadata": {"name": "s"}, "data": {"x": "eA=="}}),
        "kubectl-create",
    );
    rec.answer(
        "type",
        &s.apply(
            &sp(ns, "s"),
            "ecr-refresh",
            true,
            &docker_secret(ns, "s", CFG),
        ),
    );
    rec.field(
        "type",
        "stored-type",
        s.get(&sp(ns, "s")).body["type"].clone(),
    );
    let mut seeded = docker_secret(ns, "i", "{}");
    seeded["immutable"] = json!(true);
    s.seed(ns, "secrets", seeded, "kubectl-create");
    let mut body = docker_secret(ns, "i", CFG);
    body["immutable"] = json!(true);
    rec.answer(
        "immutable",
        &s.apply(&sp(ns, "i"), "ecr-refresh", true, &body),
    );
}

fn dry_run(s: &Server, rec: &mut Record) {
    let ns = "cf-dry-run";
    s.namespace(ns, json!({}));
    let live = s.seed_secret(ns, "s");
    let target = format!(
        "{}?fieldManager=ecr-refresh&force=true&dryRun=All",
        sp(ns, "s")
    );
    let r = s.patch(&target, APPLY, &docker_secret(ns, "s", CFG));
    rec.answer("update", &r);
    rec.field("update", "data", r.body["data"].clone());
    rec.field(
        "update",
        "same-resource-version",
        json!(r.body["metadata"]["resourceVersion"] == live["metadata"]["resourceVersion"]),
    );
    rec.field(
        "update",
        "stored-unchanged",
        json!(s.get(&sp(ns, "s")).body == live),
    );
    let target = format!("{}?fieldManager=ecr-refresh&dryRun=All", sp(ns, "new"));
    let r = s.patch(&target, APPLY, &docker_secret(ns, "new", CFG));
    rec.answer("create", &r);
    rec.answer("create-stored", &s.get(&sp(ns, "new")));
    let mut bad = docker_secret(ns, "s", CFG);
    bad["type"] = json!("Opaque");
    let target = format!(
        "{}?fieldManager=ecr-refresh&force=true&dryRun=All",
        sp(ns, "s")
    );
    rec.answer("invalid", &s.patch(&target, APPLY, &bad));
}

fn dockerconfigjson_validation(s: &Server, rec: &mut Record) {
    let ns = "cf-dockercfg";
    s.namespace(ns, json!({}));
    let posts = format!("/api/v1/namespaces/{ns}/secrets");
    let bad = docker_secret(ns, "s", "not json");
    rec.answer("apply", &s.apply(&sp(ns, "s"), "ecr-refresh", true, &bad));
    rec.answer("post", &s.post(&posts, &bad));
    rec.answer(
        "post-truncated",
        &s.post(&posts, &docker_secret(ns, "s", r#"{"auths":{}"#)),
    );
    rec.answer(
        "post-array",
        &s.post(&posts, &json!({"metadata": {"name": "s"}, "type": "kubernetes.io/dockerconfigjson", "stringData": {".dockerconfigjson": "[]"}})),
    );
    rec.answer(
        "post-missing",
        &s.post(&posts, &json!({"metadata": {"name": "s"}, "type": "kubernetes.io/dockerconfigjson", "data": {}})),
    );
    let mut opaque = bad.clone();
    opaque["metadata"]["name"] = json!("opaque");
    opaque["type"] = json!("Opaque");
    rec.answer("opaque", &s.post(&posts, &opaque));
    let live = s.seed_secret(ns, "s");
    rec.answer(
        "update-apply",
        &s.apply(&sp(ns, "s"), "ecr-refresh", true, &bad),
    );
    let mut put = live.clone();
    put["data"] = bad["data"].clone();
    rec.answer(
        "update-put",
        &s.send(
            "PUT",
            &sp(ns, "s"),
            Some("application/json"),
            &put.to_string(),
        ),
    );
    let data = json!({"data": bad["data"]});
    rec.answer("update-merge", &s.patch(&sp(ns, "s"), MERGE_PATCH, &data));
    rec.answer("update-strategic", &s.patch(&sp(ns, "s"), STRATEGIC, &data));
    rec.answer(
        "update-json-patch",
        &s.patch(&sp(ns, "s"), JSON_PATCH, &json!([{"op": "replace", "path": "/data/.dockerconfigjson", "value": bad["data"][".dockerconfigjson"]}])),
    );
}

fn posts_and_missing(s: &Server, rec: &mut Record) {
    let ns = "cf-post";
    s.namespace(ns, json!({}));
    let body = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "stringData": {"k": "v"}});
    let r = s.post(
        &format!("/api/v1/namespaces/{ns}/secrets?fieldManager=kubectl-create"),
        &body,
    );
    rec.answer("create", &r);
    rec.field("create", "type", r.body["type"].clone());
    rec.field("create", "data", r.body["data"].clone());
    rec.field(
        "create",
        "created",
        json!(r.body["metadata"]["creationTimestamp"].is_string()),
    );
    rec.field("create", "type-owners", json!(owners(&r.body, &["f:type"])));
    rec.answer(
        "again",
        &s.post(&format!("/api/v1/namespaces/{ns}/secrets"), &body),
    );
    let r = s.get(&sp(ns, "nope"));
    rec.answer("missing", &r);
    rec.field("missing", "body", r.body.clone());
    rec.answer(
        "missing-merge",
        &s.patch(&sp(ns, "nope"), MERGE_PATCH, &json!({"data": {}})),
    );
    rec.answer("delete", &s.delete(&sp(ns, "s")));
    rec.answer("delete-again", &s.delete(&sp(ns, "s")));
}

fn pagination(s: &Server, rec: &mut Record) {
    for i in (1..=7).rev() {
        s.namespace(&format!("cf-page-{i}"), json!({"cf-page": "yes"}));
    }
    let mut token = String::new();
    let mut pages = 0;
    loop {
        let mut target = "/api/v1/namespaces?limit=3&labelSelector=cf-page%3Dyes".to_owned();
        if !token.is_empty() {
            target.push_str(&format!("&continue={token}"));
        }
        let r = s.get(&target);
        let step = format!("page-{pages}");
        rec.answer(&step, &r);
        rec.field(&step, "kind", r.body["kind"].clone());
        rec.field(&step, "names", names(&r));
        token = r.body["metadata"]["continue"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        rec.field(&step, "has-continue", json!(!token.is_empty()));
        pages += 1;
        if token.is_empty() || pages > 5 {
            break;
        }
    }
    rec.answer(
        "bad-continue",
        &s.get("/api/v1/namespaces?limit=3&continue=bm90LWEtdG9rZW4"),
    );
}

/// One list of a Secret name across every namespace, field-selected by `metadata.name` and
/// paged, as ecr-refresh reads every Secret in one list: the items of that name only, in
/// namespace order, and the continue tokens of a paged list.
fn field_selected_list(s: &Server, rec: &mut Record) {
    for i in 1..=5 {
        let ns = format!("cf-list-{i}");
        s.namespace(&ns, json!({}));
        s.seed_secret(&ns, "other");
        if i != 3 {
            s.seed_secret(&ns, "cf-listed");
        }
    }
    let mut token = String::new();
    let mut pages = 0;
    loop {
        let mut target =
            "/api/v1/secrets?fieldSelector=metadata.name%3Dcf-listed&limit=2".to_owned();
        if !token.is_empty() {
            target.push_str(&format!("&continue={token}"));
        }
        let r = s.get(&target);
        let step = format!("page-{pages}");
        rec.answer(&step, &r);
        let items: Vec<String> = r.body["items"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|i| format!("{}/{}", i["metadata"]["namespace"], i["metadata"]["name"]))
            .collect();
        rec.field(&step, "items", json!(items));
        token = r.body["metadata"]["continue"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        rec.field(&step, "has-continue", json!(!token.is_empty()));
        pages += 1;
        if token.is_empty() || pages > 5 {
            break;
        }
    }
    let r = s.get("/api/v1/secrets?fieldSelector=metadata.name%3Dcf-none&limit=500");
    rec.answer("none", &r);
    rec.field("none", "items", names(&r));
    rec.answer(
        "unsupported-field",
        &s.get("/api/v1/secrets?fieldSelector=status.phase%3DRunning"),
    );
}

fn label_selectors(s: &Server, rec: &mut Record) {
    s.namespace(
        "cf-sel-a",
        json!({"cfenv": "prod", "cfteam": "x", "cfsel": "1"}),
    );
    s.namespace("cf-sel-b", json!({"cfenv": "dev", "cfsel": "1"}));
    s.namespace("cf-sel-c", json!({"cfsel": "1"}));
    for sel in [
        "cfenv=prod",
        "cfenv!=prod",
        "cfenv",
        "!cfenv",
        "cfenv in (dev,prod)",
        "cfenv notin (dev)",
        "cfenv=prod,cfteam=x",
        "kubernetes.io/metadata.name=cf-sel-b",
    ] {
        let q = format!("{sel},cfsel")
            .replace(' ', "%20")
            .replace('!', "%21");
        let r = s.get(&format!("/api/v1/namespaces?labelSelector={q}"));
        rec.answer(sel, &r);
        rec.field(sel, "names", names(&r));
    }
    rec.answer("bad", &s.get("/api/v1/namespaces?labelSelector=a%20in%20x"));
}

/// The answers to a new Secret `s` in `ns`, created by apply and by POST.
fn new_secret_both_ways(s: &Server, rec: &mut Record, ns: &str) {
    rec.answer(
        "apply",
        &s.apply(
            &sp(ns, "s"),
            "ecr-refresh",
            true,
            &docker_secret(ns, "s", CFG),
        ),
    );
    rec.answer(
        "post",
        &s.post(
            &format!("/api/v1/namespaces/{ns}/secrets"),
            &docker_secret(ns, "s", CFG),
        ),
    );
}

fn terminating_namespace(s: &Server, rec: &mut Record) {
    let ns = "cf-terminating";
    s.namespace(ns, json!({}));
    s.seed_secret(ns, "old");
    s.terminate(ns);
    let got = s.get(&format!("/api/v1/namespaces/{ns}")).body;
    rec.field("namespace", "phase", got["status"]["phase"].clone());
    rec.field(
        "namespace",
        "deleting",
        json!(got["metadata"]["deletionTimestamp"].is_string()),
    );
    new_secret_both_ways(s, rec, ns);
    let r = s.apply(
        &sp(ns, "old"),
        "ecr-refresh",
        true,
        &docker_secret(ns, "old", CFG),
    );
    rec.answer("update", &r);
    rec.answer(
        "delete-again",
        &s.delete(&format!("/api/v1/namespaces/{ns}")),
    );
}

fn missing_namespace(s: &Server, rec: &mut Record) {
    let ns = "cf-gone";
    new_secret_both_ways(s, rec, ns);
    rec.answer("get", &s.get(&sp(ns, "s")));
    rec.answer("namespace", &s.get(&format!("/api/v1/namespaces/{ns}")));
}

fn image_pull_secrets(s: &Server, rec: &mut Record) {
    let ns = "cf-pull";
    s.namespace(ns, json!({}));
    let sa = s.seed(
        ns,
        "serviceaccounts",
        json!({"metadata": {"name": "builder"}}),
        "kubectl-create",
    );
    let add_list = json!([
        {"op": "test", "path": "/metadata/resourceVersion", "value": "999999"},
        {"op": "add", "path": "/imagePullSecrets", "value": [{"name": "aws-ecr-token"}]}
    ]);
    rec.answer(
        "test-fails",
        &s.patch(&sap(ns, "builder"), JSON_PATCH, &add_list),
    );
    rec.field(
        "test-fails",
        "unchanged",
        json!(s.get(&sap(ns, "builder")).body == sa),
    );
    let append =
        json!([{"op": "add", "path": "/imagePullSecrets/-", "value": {"name": "aws-ecr-token"}}]);
    rec.answer(
        "append-missing",
        &s.patch(&sap(ns, "builder"), JSON_PATCH, &append),
    );
    let mut ok = add_list.clone();
    ok[0]["value"] = sa["metadata"]["resourceVersion"].clone();
    let r = s.patch(
        &format!("{}?fieldManager=ecr-refresh", sap(ns, "builder")),
        JSON_PATCH,
        &ok,
    );
    rec.answer("test-passes", &r);
    rec.field("test-passes", "list", r.body["imagePullSecrets"].clone());
    rec.field(
        "test-passes",
        "owners",
        json!(owners(&r.body, &["f:imagePullSecrets"])),
    );

    s.seed(
        ns,
        "serviceaccounts",
        json!({"metadata": {"name": "theirs"}, "imagePullSecrets": [{"name": "theirs"}]}),
        "kubectl",
    );
    let r = s.patch(&sap(ns, "theirs"), JSON_PATCH, &append);
    rec.answer("append", &r);
    rec.field("append", "list", r.body["imagePullSecrets"].clone());

    s.seed(
        ns,
        "serviceaccounts",
        json!({"metadata": {"name": "applied"}, "imagePullSecrets": [{"name": "theirs"}]}),
        "kubectl",
    );
    let body = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "applied"}, "imagePullSecrets": [{"name": "mine"}]});
    rec.answer(
        "apply",
        &s.apply(&sap(ns, "applied"), "ecr-refresh", false, &body),
    );
    let r = s.apply(&sap(ns, "applied"), "ecr-refresh", true, &body);
    rec.answer("apply-force", &r);
    rec.field("apply-force", "list", r.body["imagePullSecrets"].clone());
}

fn merge_patches(s: &Server, rec: &mut Record) {
    let ns = "cf-merge-patch";
    s.namespace(ns, json!({}));
    s.seed_secret(ns, "s");
    let body = json!({"metadata": {"resourceVersion": "1"}, "data": {"x": "eA=="}});
    rec.answer("stale", &s.patch(&sp(ns, "s"), MERGE_PATCH, &body));
    let r = s.patch(
        &sp(ns, "s"),
        STRATEGIC,
        &json!({"data": {"x": "eA==", ".dockerconfigjson": "e30="}}),
    );
    rec.answer("strategic", &r);
    rec.field("strategic", "x", r.body["data"]["x"].clone());
}

fn finalizers(s: &Server, rec: &mut Record) {
    let ns = "cf-finalizers";
    s.namespace(ns, json!({}));
    let mut held = docker_secret(ns, "s", CFG);
    held["metadata"]["finalizers"] = json!(["example.com/hold"]);
    s.seed(ns, "secrets", held, "kubectl-create");
    let r = s.delete(&sp(ns, "s"));
    rec.answer("delete", &r);
    rec.field(
        "delete",
        "deleting",
        json!(r.body["metadata"]["deletionTimestamp"].is_string()),
    );
    let stored = s.get(&sp(ns, "s")).body;
    rec.field(
        "stored",
        "finalizers",
        stored["metadata"]["finalizers"].clone(),
    );
    let r = s.apply(
        &sp(ns, "s"),
        "ecr-refresh",
        true,
        &docker_secret(ns, "s", CFG),
    );
    rec.answer("apply", &r);
    rec.field(
        "apply",
        "deleting",
        json!(r.body["metadata"]["deletionTimestamp"].is_string()),
    );
    let mut more = docker_secret(ns, "s", CFG);
    more["metadata"]["finalizers"] = json!(["example.com/more"]);
    rec.answer(
        "add-finalizer",
        &s.apply(&sp(ns, "s"), "other", true, &more),
    );
    let r = s.patch(
        &sp(ns, "s"),
        MERGE_PATCH,
        &json!({"metadata": {"finalizers": null}}),
    );
    rec.answer("release", &r);
    rec.answer("gone", &s.get(&sp(ns, "s")));
}

/// A TokenRequest for a ServiceAccount (what a fleet's hub sends a spoke), for one that does
/// not exist, with too short an expiry, and a GET of the subresource.
fn token_request(s: &Server, rec: &mut Record) {
    let ns = "cf-token";
    s.namespace(ns, json!({}));
    s.seed(
        ns,
        "serviceaccounts",
        json!({"metadata": {"name": "sa"}}),
        "kubectl-create",
    );
    let ask = |expiration: i64| {
        json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
               "spec": {"expirationSeconds": expiration}})
    };
    let token = |name: &str| format!("{}/token", sap(ns, name));
    let r = s.post(&token("sa"), &ask(600));
    rec.answer("granted", &r);
    rec.field("granted", "name", r.body["metadata"]["name"].clone());
    rec.field(
        "granted",
        "namespace",
        r.body["metadata"]["namespace"].clone(),
    );
    rec.field(
        "granted",
        "expirationSeconds",
        r.body["spec"]["expirationSeconds"].clone(),
    );
    rec.field(
        "granted",
        "token",
        json!(
            r.body["status"]["token"]
                .as_str()
                .is_some_and(|t| !t.is_empty())
        ),
    );
    rec.field(
        "granted",
        "expirationTimestamp",
        json!(r.body["status"]["expirationTimestamp"].is_string()),
    );
    rec.answer("missing", &s.post(&token("nope"), &ask(600)));
    rec.answer("too-short", &s.post(&token("sa"), &ask(599)));
    rec.answer("get", &s.get(&token("sa")));
}

const SCENARIOS: &[(&str, Scenario)] = &[
    ("apply-creates", apply_creates),
    ("uid-of-absent", uid_of_absent),
    ("uid-before-admission", uid_before_admission),
    ("uid-of-another", uid_of_another),
    ("uid-of-live", uid_of_live),
    ("resource-version", stale_resource_version),
    ("merge-per-key", merge_per_key),
    ("conflicts", conflicts),
    ("force", force_shares_ownership),
    ("pruning", pruning),
    ("refused-apply-bodies", refused_apply_bodies),
    ("immutability", immutability),
    ("dry-run", dry_run),
    ("dockerconfigjson", dockerconfigjson_validation),
    ("posts-and-missing", posts_and_missing),
    ("pagination", pagination),
    ("label-selectors", label_selectors),
    ("field-selected-list", field_selected_list),
    ("terminating-namespace", terminating_namespace),
    ("missing-namespace", missing_namespace),
    ("image-pull-secrets", image_pull_secrets),
    ("merge-patches", merge_patches),
    ("finalizers", finalizers),
    ("token-request", token_request),
];

#[test]
#[ignore = "needs KUBEBUILDER_ASSETS and curl (bash .ci/test)"]
fn the_fake_answers_as_the_real_kube_apiserver() {
    let real = Server::Real(ControlPlane::shared());
    let fake = Server::Fake(FakeCluster::start());
    let (mut total, mut agree) = (0, 0);
    let mut listed = Vec::new();
    let mut unlisted = Vec::new();
    let mut stale = Vec::new();
    for (name, scenario) in SCENARIOS {
        let (mut f, mut r) = (Record::default(), Record::default());
        scenario(&fake, &mut f);
        scenario(&real, &mut r);
        assert_eq!(
            f.seen.iter().map(|(k, _)| k).collect::<Vec<_>>(),
            r.seen.iter().map(|(k, _)| k).collect::<Vec<_>>(),
            "{name}: the same assertions on both"
        );
        for ((key, fv), (_, rv)) in f.seen.iter().zip(&r.seen) {
            let id = format!("{name}/{key}");
            total += 1;
            let known = LISTED.contains(&id.as_str());
            if fv == rv {
                agree += 1;
                if known {
                    stale.push(id);
                }
            } else if known {
                listed.push(id);
            } else {
                unlisted.push(format!("{id}\n  real: {rv}\n  fake: {fv}"));
            }
        }
    }
    if let Server::Real(cp) = real {
        println!("real server: kube-apiserver {}", cp.version());
    }
    println!(
        "{agree} of {total} assertions agree; {} listed; {} unlisted differences",
        listed.len(),
        unlisted.len()
    );
    assert!(
        unlisted.is_empty(),
        "the fake differs from the real server:\n{}",
        unlisted.join("\n")
    );
    assert!(
        stale.is_empty(),
        "listed in LISTED but agreeing now: {stale:?}"
    );
}
