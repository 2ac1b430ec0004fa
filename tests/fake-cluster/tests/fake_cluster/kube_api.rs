//! The fake API server answers as the real one does (reference: kube-api.md).

use crate::common;

use std::time::Duration;

use common::*;
use fake_cluster::{FakeCluster, Fault, Resource};
use serde_json::{Value, json};

const CFG: &str = r#"{"auths":{"https://1.dkr.ecr.us-east-1.amazonaws.com":{"auth":"QVdTOnB3"}}}"#;

fn cluster_with(ns: &[&str]) -> FakeCluster {
    let c = FakeCluster::start();
    for n in ns {
        c.add_namespace(n, &[]);
    }
    c
}

fn seed_secret(c: &FakeCluster, ns: &str, name: &str, manager: &str) -> Value {
    c.seed(Resource::Secrets, docker_secret(ns, name, "{}"), manager)
}

#[test]
fn apply_creates_an_absent_secret_with_201_and_a_fresh_uid() {
    let c = cluster_with(&["a"]);
    let r = apply(
        &c.url(),
        &secret_path("a", "s"),
        "ecr-refresh",
        true,
        &docker_secret("a", "s", CFG),
    );
    assert_eq!(r.status, 201);
    let uid = r.body["metadata"]["uid"].as_str().unwrap();
    assert_eq!(uid.len(), 36);
    assert!(
        r.body["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .parse::<u64>()
            .is_ok()
    );
    assert_eq!(
        owners(&r.body, &["f:data", "f:.dockerconfigjson"]),
        ["ecr-refresh/Apply"]
    );
    assert_eq!(
        c.get(Resource::Secrets, "a", "s").unwrap()["metadata"]["uid"],
        uid
    );
    let again = apply(
        &c.url(),
        &secret_path("a", "s"),
        "ecr-refresh",
        true,
        &docker_secret("a", "s", CFG),
    );
    assert_eq!(again.status, 200);
    assert_eq!(
        again.body["metadata"]["resourceVersion"], r.body["metadata"]["resourceVersion"],
        "a no-op apply writes nothing"
    );
}

#[test]
fn apply_naming_a_uid_of_an_absent_object_is_409_and_creates_nothing() {
    let c = cluster_with(&["a"]);
    let mut body = docker_secret("a", "s", CFG);
    body["metadata"]["uid"] = json!("1b4e28ba-2fa1-11d2-883f-0016d3cca427");
    let r = apply(&c.url(), &secret_path("a", "s"), "ecr-refresh", true, &body);
    assert_eq!(r.status, 409);
    assert_eq!(r.reason(), "Conflict");
    assert_eq!(
        r.message(),
        "Operation cannot be fulfilled on secrets \"s\": uid mismatch: the provided object specified uid 1b4e28ba-2fa1-11d2-883f-0016d3cca427, and no existing object was found"
    );
    assert_eq!(r.body["details"], json!({"name": "s", "kind": "secrets"}));
    assert!(c.get(Resource::Secrets, "a", "s").is_none());
    assert!(c.history(Resource::Secrets, "a", "s").is_empty());
}

#[test]
fn the_uid_check_of_an_absent_object_comes_before_namespace_admission() {
    let c = FakeCluster::start();
    c.add_terminating_namespace("t");
    for ns in ["t", "gone"] {
        let mut body = docker_secret(ns, "s", CFG);
        body["metadata"]["uid"] = json!("1b4e28ba-2fa1-11d2-883f-0016d3cca427");
        let r = apply(&c.url(), &secret_path(ns, "s"), "ecr-refresh", true, &body);
        assert_eq!(r.status, 409, "{ns}: {:?}", r.body);
        assert_eq!(
            r.message(),
            "Operation cannot be fulfilled on secrets \"s\": uid mismatch: the provided object specified uid 1b4e28ba-2fa1-11d2-883f-0016d3cca427, and no existing object was found"
        );
    }
    // Without a uid, admission answers: 403 in a terminating namespace, 404 in a missing one.
    let r = apply(
        &c.url(),
        &secret_path("t", "s"),
        "ecr-refresh",
        true,
        &docker_secret("t", "s", CFG),
    );
    assert_eq!(r.status, 403);
    let r = apply(
        &c.url(),
        &secret_path("gone", "s"),
        "ecr-refresh",
        true,
        &docker_secret("gone", "s", CFG),
    );
    assert_eq!(r.status, 404);
}

#[test]
fn apply_naming_another_objects_uid_is_422() {
    let c = cluster_with(&["a"]);
    seed_secret(&c, "a", "s", "kubectl-create");
    let mut body = docker_secret("a", "s", CFG);
    body["metadata"]["uid"] = json!("1b4e28ba-2fa1-11d2-883f-0016d3cca427");
    let r = apply(&c.url(), &secret_path("a", "s"), "ecr-refresh", true, &body);
    assert_eq!(r.status, 422);
    assert_eq!(r.reason(), "Invalid");
    assert_eq!(
        r.message(),
        "Secret \"s\" is invalid: metadata.uid: Invalid value: \"1b4e28ba-2fa1-11d2-883f-0016d3cca427\": field is immutable"
    );
    assert_eq!(r.body["details"]["causes"][0]["field"], "metadata.uid");
}

#[test]
fn apply_naming_the_live_uid_updates_in_place() {
    let c = cluster_with(&["a"]);
    let live = seed_secret(&c, "a", "s", "kubectl-create");
    let mut body = docker_secret("a", "s", CFG);
    body["metadata"]["uid"] = live["metadata"]["uid"].clone();
    let r = apply(&c.url(), &secret_path("a", "s"), "ecr-refresh", true, &body);
    assert_eq!(r.status, 200);
    assert_eq!(r.body["metadata"]["uid"], live["metadata"]["uid"]);
    assert_eq!(r.body["data"], body["data"]);
}

#[test]
fn apply_with_a_stale_resource_version_is_409() {
    let c = cluster_with(&["a"]);
    let live = seed_secret(&c, "a", "s", "kubectl-create");
    let mut body = docker_secret("a", "s", CFG);
    body["metadata"]["resourceVersion"] = json!("1");
    assert_ne!(live["metadata"]["resourceVersion"], "1");
    let r = apply(&c.url(), &secret_path("a", "s"), "ecr-refresh", true, &body);
    assert_eq!(r.status, 409);
    assert_eq!(
        r.message(),
        "Operation cannot be fulfilled on secrets \"s\": the object has been modified; please apply your changes to the latest version and try again"
    );
    assert_eq!(c.history(Resource::Secrets, "a", "s").len(), 1);
    body["metadata"]["resourceVersion"] = live["metadata"]["resourceVersion"].clone();
    assert_eq!(
        apply(&c.url(), &secret_path("a", "s"), "ecr-refresh", true, &body).status,
        200
    );
}

#[test]
fn apply_resource_version_is_ignored_when_the_object_is_absent() {
    let c = cluster_with(&["a"]);
    let mut body = docker_secret("a", "s", CFG);
    body["metadata"]["resourceVersion"] = json!("12345");
    let r = apply(&c.url(), &secret_path("a", "s"), "ecr-refresh", true, &body);
    assert_eq!(r.status, 201);
    assert_ne!(r.body["metadata"]["resourceVersion"], "12345");
}

#[test]
fn data_labels_and_annotations_merge_per_key_between_managers() {
    let c = cluster_with(&["a"]);
    let seeded = json!({"metadata": {"name": "s", "namespace": "a", "labels": {"team": "x"},
        "annotations": {"note": "keep"}}, "type": "kubernetes.io/dockerconfigjson",
        "data": {".dockerconfigjson": "e30=", "other": "b3RoZXI="}});
    c.seed(Resource::Secrets, seeded, "kubectl-create");
    let mut body = docker_secret("a", "s", CFG);
    body["metadata"]["labels"] = json!({"app": "ecr-refresh"});
    body["metadata"]["annotations"] = json!({"refreshed": "now"});
    let r = apply(&c.url(), &secret_path("a", "s"), "ecr-refresh", true, &body);
    assert_eq!(r.status, 200);
    assert_eq!(
        r.body["metadata"]["labels"],
        json!({"team": "x", "app": "ecr-refresh"})
    );
    assert_eq!(
        r.body["metadata"]["annotations"],
        json!({"note": "keep", "refreshed": "now"})
    );
    assert_eq!(r.body["data"]["other"], "b3RoZXI=");
    assert_eq!(
        r.body["data"][".dockerconfigjson"],
        body["data"][".dockerconfigjson"]
    );
    assert_eq!(
        owners(&r.body, &["f:data", "f:other"]),
        ["kubectl-create/Update"]
    );
    assert_eq!(
        owners(&r.body, &["f:data", "f:.dockerconfigjson"]),
        ["ecr-refresh/Apply"]
    );
    assert_eq!(
        owners(&r.body, &["f:metadata", "f:labels", "f:app"]),
        ["ecr-refresh/Apply"]
    );
}

#[test]
fn changing_a_value_another_manager_owns_conflicts_without_force() {
    let c = cluster_with(&["a"]);
    seed_secret(&c, "a", "s", "kubectl-create");
    let r = apply(
        &c.url(),
        &secret_path("a", "s"),
        "ecr-refresh",
        false,
        &docker_secret("a", "s", CFG),
    );
    assert_eq!(r.status, 409);
    assert_eq!(r.reason(), "Conflict");
    assert_eq!(
        r.message(),
        "Apply failed with 1 conflict: conflict with \"kubectl-create\" using v1: .data..dockerconfigjson"
    );
    assert_eq!(
        r.body["details"]["causes"],
        json!([{"reason": "FieldManagerConflict", "message": "conflict with \"kubectl-create\" using v1", "field": ".data..dockerconfigjson"}])
    );
    assert_eq!(c.history(Resource::Secrets, "a", "s").len(), 1);
}

#[test]
fn a_type_owned_by_another_manager_conflicts_before_the_immutability_check() {
    let c = cluster_with(&["a"]);
    c.seed(Resource::Secrets, json!({"metadata": {"name": "s", "namespace": "a"}, "type": "Opaque", "data": {"x": "eA=="}}), "kubectl-create");
    let mut body = docker_secret("a", "s", CFG);
    body["data"]["x"] = json!("eQ==");
    let r = apply(
        &c.url(),
        &secret_path("a", "s"),
        "ecr-refresh",
        false,
        &body,
    );
    assert_eq!(r.status, 409);
    assert_eq!(
        r.message(),
        "Apply failed with 2 conflicts: conflicts with \"kubectl-create\" using v1:\n- .type\n- .data.x"
    );
}

#[test]
fn force_takes_ownership_and_same_values_share_it() {
    let c = cluster_with(&["a"]);
    c.seed(
        Resource::Secrets,
        json!({"metadata": {"name": "s", "namespace": "a", "labels": {"l": "v"}},
        "type": "kubernetes.io/dockerconfigjson", "data": {".dockerconfigjson": "e30="}}),
        "kubectl-create",
    );
    let mut body = docker_secret("a", "s", CFG);
    body["metadata"]["labels"] = json!({"l": "v"});
    let r = apply(&c.url(), &secret_path("a", "s"), "ecr-refresh", true, &body);
    assert_eq!(r.status, 200);
    assert_eq!(
        owners(&r.body, &["f:data", "f:.dockerconfigjson"]),
        ["ecr-refresh/Apply"]
    );
    let mut shared = owners(&r.body, &["f:metadata", "f:labels", "f:l"]);
    shared.sort();
    assert_eq!(shared, ["ecr-refresh/Apply", "kubectl-create/Update"]);
    let mut type_owners = owners(&r.body, &["f:type"]);
    type_owners.sort();
    assert_eq!(type_owners, ["ecr-refresh/Apply", "kubectl-create/Update"]);
    // Now that ecr-refresh owns the data, it changes it again without force.
    let r = apply(
        &c.url(),
        &secret_path("a", "s"),
        "ecr-refresh",
        false,
        &docker_secret("a", "s", "{}"),
    );
    assert_eq!(r.status, 200, "{:?}", r.body);
}

#[test]
fn keys_this_manager_applied_before_and_alone_owns_are_pruned() {
    let c = cluster_with(&["a"]);
    let mut body = docker_secret("a", "s", CFG);
    body["metadata"]["labels"] = json!({"old": "1", "shared": "x"});
    body["data"]["stale"] = json!("c3RhbGU=");
    assert_eq!(
        apply(&c.url(), &secret_path("a", "s"), "ecr-refresh", true, &body).status,
        201
    );
    // Another manager applies the same "shared" label: now it is co-owned.
    let other = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "labels": {"shared": "x"}}});
    assert_eq!(
        apply(&c.url(), &secret_path("a", "s"), "other", false, &other).status,
        200
    );
    let mut body = docker_secret("a", "s", CFG);
    body["metadata"]["labels"] = json!({});
    let r = apply(&c.url(), &secret_path("a", "s"), "ecr-refresh", true, &body);
    assert_eq!(r.status, 200);
    assert_eq!(r.body["metadata"]["labels"], json!({"shared": "x"}));
    assert_eq!(
        r.body["data"].as_object().unwrap().len(),
        1,
        "{:?}",
        r.body["data"]
    );
    assert!(r.body["data"].get("stale").is_none());
}

#[test]
fn managed_fields_in_an_apply_body_is_400() {
    let c = cluster_with(&["a"]);
    let mut body = docker_secret("a", "s", CFG);
    body["metadata"]["managedFields"] = json!([{"manager": "x"}]);
    let r = apply(&c.url(), &secret_path("a", "s"), "ecr-refresh", true, &body);
    assert_eq!(r.status, 400);
    assert_eq!(r.reason(), "BadRequest");
    assert_eq!(r.message(), "metadata.managedFields must be nil");
}

#[test]
fn apply_without_a_field_manager_is_refused() {
    let c = cluster_with(&["a"]);
    let r = patch(
        &c.url(),
        &secret_path("a", "s"),
        APPLY,
        &docker_secret("a", "s", CFG),
    );
    assert_eq!(r.status, 422);
    assert_eq!(r.reason(), "Invalid");
    assert_eq!(
        r.message(),
        "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch"
    );
}

#[test]
fn type_is_immutable_422_with_causes() {
    let c = cluster_with(&["a"]);
    c.seed(
        Resource::Secrets,
        json!({"metadata": {"name": "s", "namespace": "a"}, "data": {"x": "eA=="}}),
        "kubectl-create",
    );
    let r = apply(
        &c.url(),
        &secret_path("a", "s"),
        "ecr-refresh",
        true,
        &docker_secret("a", "s", CFG),
    );
    assert_eq!(r.status, 422);
    assert_eq!(
        r.message(),
        "Secret \"s\" is invalid: type: Invalid value: \"kubernetes.io/dockerconfigjson\": field is immutable"
    );
    assert_eq!(
        r.body["details"]["causes"],
        json!([{"reason": "FieldValueInvalid", "message": "Invalid value: \"kubernetes.io/dockerconfigjson\": field is immutable", "field": "type"}])
    );
    assert_eq!(r.body["details"]["kind"], "Secret");
    assert_eq!(
        c.get(Resource::Secrets, "a", "s").unwrap()["type"],
        "Opaque"
    );
}

#[test]
fn immutable_secrets_refuse_data_changes() {
    let c = cluster_with(&["a"]);
    let mut seeded = docker_secret("a", "s", "{}");
    seeded["immutable"] = json!(true);
    c.seed(Resource::Secrets, seeded, "kubectl-create");
    let mut body = docker_secret("a", "s", CFG);
    body["immutable"] = json!(true);
    let r = apply(&c.url(), &secret_path("a", "s"), "ecr-refresh", true, &body);
    assert_eq!(r.status, 422);
    assert_eq!(
        r.message(),
        "Secret \"s\" is invalid: data: Forbidden: field is immutable when `immutable` is set"
    );
    assert_eq!(
        r.body["details"]["causes"][0]["reason"],
        "FieldValueForbidden"
    );
}

#[test]
fn dry_run_validates_answers_and_stores_nothing() {
    let c = cluster_with(&["a"]);
    let live = seed_secret(&c, "a", "s", "kubectl-create");
    let target = format!(
        "{}?fieldManager=ecr-refresh&force=true&dryRun=All",
        secret_path("a", "s")
    );
    let r = patch(&c.url(), &target, APPLY, &docker_secret("a", "s", CFG));
    assert_eq!(r.status, 200);
    assert_eq!(
        r.body["data"][".dockerconfigjson"],
        docker_secret("a", "s", CFG)["data"][".dockerconfigjson"]
    );
    assert_eq!(
        r.body["metadata"]["resourceVersion"],
        live["metadata"]["resourceVersion"]
    );
    assert_eq!(c.get(Resource::Secrets, "a", "s").unwrap(), live);
    assert_eq!(c.history(Resource::Secrets, "a", "s").len(), 1);
    let target = format!(
        "{}?fieldManager=ecr-refresh&dryRun=All",
        secret_path("a", "new")
    );
    assert_eq!(
        patch(&c.url(), &target, APPLY, &docker_secret("a", "new", CFG)).status,
        201
    );
    assert!(c.get(Resource::Secrets, "a", "new").is_none());
    let mut bad = docker_secret("a", "s", CFG);
    bad["type"] = json!("Opaque");
    let target = format!(
        "{}?fieldManager=ecr-refresh&force=true&dryRun=All",
        secret_path("a", "s")
    );
    assert_eq!(
        patch(&c.url(), &target, APPLY, &bad).status,
        422,
        "dry runs still validate"
    );
}

/// The 422 of a `.dockerconfigjson` Go's json.Unmarshal refuses with `why`.
fn assert_not_json(r: &Response, name: &str, why: &str) {
    assert_eq!(r.status, 422, "{:?}", r.body);
    assert_eq!(r.reason(), "Invalid");
    assert_eq!(
        r.message(),
        format!(
            "Secret \"{name}\" is invalid: data[.dockerconfigjson]: Invalid value: \"<secret contents redacted>\": {why}"
        )
    );
    assert_eq!(
        r.body["details"]["causes"],
        json!([{
            "reason": "FieldValueInvalid",
            "message": format!("Invalid value: \"<secret contents redacted>\": {why}"),
            "field": "data[.dockerconfigjson]",
        }])
    );
}

#[test]
fn dockerconfigjson_must_be_a_json_object_on_every_write() {
    let c = cluster_with(&["a"]);
    let null_u = "invalid character 'o' in literal null (expecting 'u')";
    let array = "json: cannot unmarshal array into Go value of type map[string]interface {}";
    let bad = docker_secret("a", "s", "not json");
    let r = apply(&c.url(), &secret_path("a", "s"), "ecr-refresh", true, &bad);
    assert_not_json(&r, "s", null_u);
    let r = post(&c.url(), "/api/v1/namespaces/a/secrets", &bad);
    assert_not_json(&r, "s", null_u);
    let r = post(
        &c.url(),
        "/api/v1/namespaces/a/secrets",
        &docker_secret("a", "s", r#"{"auths":{}"#),
    );
    assert_not_json(&r, "s", "unexpected end of JSON input");
    let r = post(
        &c.url(),
        "/api/v1/namespaces/a/secrets",
        &json!({"metadata": {"name": "s"}, "type": "kubernetes.io/dockerconfigjson", "stringData": {".dockerconfigjson": "[]"}}),
    );
    assert_not_json(&r, "s", array);
    assert!(c.history(Resource::Secrets, "a", "s").is_empty());
    let r = post(
        &c.url(),
        "/api/v1/namespaces/a/secrets",
        &json!({"metadata": {"name": "s"}, "type": "kubernetes.io/dockerconfigjson", "data": {}}),
    );
    assert_eq!(r.status, 422);
    assert_eq!(
        r.message(),
        "Secret \"s\" is invalid: data[.dockerconfigjson]: Required value"
    );
    // Opaque Secrets hold anything.
    let mut opaque = bad.clone();
    opaque["metadata"]["name"] = json!("opaque");
    opaque["type"] = json!("Opaque");
    assert_eq!(
        post(&c.url(), "/api/v1/namespaces/a/secrets", &opaque).status,
        201
    );

    // Updates: apply, PUT and every patch type.
    let live = seed_secret(&c, "a", "s", "kubectl-create");
    let r = apply(&c.url(), &secret_path("a", "s"), "ecr-refresh", true, &bad);
    assert_not_json(&r, "s", null_u);
    let mut put = live.clone();
    put["data"] = bad["data"].clone();
    let r = send(
        &c.url(),
        "PUT",
        &secret_path("a", "s"),
        Some("application/json"),
        &put.to_string(),
    );
    assert_not_json(&r, "s", null_u);
    let data = json!({"data": bad["data"]});
    for content_type in [MERGE_PATCH, STRATEGIC] {
        let r = patch(&c.url(), &secret_path("a", "s"), content_type, &data);
        assert_not_json(&r, "s", null_u);
    }
    let r = patch(
        &c.url(),
        &secret_path("a", "s"),
        JSON_PATCH,
        &json!([{"op": "replace", "path": "/data/.dockerconfigjson", "value": bad["data"][".dockerconfigjson"]}]),
    );
    assert_not_json(&r, "s", null_u);
    assert_eq!(c.history(Resource::Secrets, "a", "s").len(), 1);
    let r = apply(
        &c.url(),
        &secret_path("a", "s"),
        "ecr-refresh",
        true,
        &docker_secret("a", "s", CFG),
    );
    assert_eq!(r.status, 200);
}

#[test]
fn create_after_next_get_makes_the_next_post_meet_already_exists() {
    let c = cluster_with(&["a"]);
    c.create_after_next_get(
        Resource::Secrets,
        "a",
        "s",
        json!({"type": "kubernetes.io/dockerconfigjson", "data": {".dockerconfigjson": "e30="}}),
        "someone-else",
    );
    assert_eq!(
        get(&c.url(), &secret_path("a", "s")).status,
        404,
        "the GET itself sees nothing"
    );
    let theirs = c
        .get(Resource::Secrets, "a", "s")
        .expect("created after the GET");
    assert_eq!(theirs["metadata"]["namespace"], "a");
    assert_eq!(theirs["metadata"]["uid"].as_str().unwrap().len(), 36);
    assert_eq!(
        owners(&theirs, &["f:data", "f:.dockerconfigjson"]),
        ["someone-else/Update"]
    );
    let r = post(
        &c.url(),
        "/api/v1/namespaces/a/secrets",
        &docker_secret("a", "s", CFG),
    );
    assert_eq!(r.status, 409);
    assert_eq!(r.reason(), "AlreadyExists");
    assert_eq!(r.message(), "secrets \"s\" already exists");
    assert_eq!(c.get(Resource::Secrets, "a", "s").unwrap(), theirs);
    // The hook fires once.
    c.delete(Resource::Secrets, "a", "s");
    assert_eq!(get(&c.url(), &secret_path("a", "s")).status, 404);
    assert!(c.get(Resource::Secrets, "a", "s").is_none());
}

#[test]
fn post_creates_with_defaults_and_refuses_an_existing_name() {
    let c = cluster_with(&["a"]);
    let body = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "stringData": {"k": "v"}});
    let r = post(
        &c.url(),
        "/api/v1/namespaces/a/secrets?fieldManager=kubectl-create",
        &body,
    );
    assert_eq!(r.status, 201);
    assert_eq!(r.body["type"], "Opaque");
    assert_eq!(r.body["data"], json!({"k": "dg=="}));
    assert!(r.body["metadata"]["creationTimestamp"].is_string());
    assert_eq!(owners(&r.body, &["f:type"]), ["kubectl-create/Update"]);
    let again = post(&c.url(), "/api/v1/namespaces/a/secrets", &body);
    assert_eq!(again.status, 409);
    assert_eq!(again.reason(), "AlreadyExists");
    assert_eq!(again.message(), "secrets \"s\" already exists");
    assert_eq!(
        again.body["details"],
        json!({"name": "s", "kind": "secrets"})
    );
}

#[test]
fn a_missing_secret_is_404_with_details() {
    let c = cluster_with(&["a"]);
    let r = get(&c.url(), &secret_path("a", "nope"));
    assert_eq!(r.status, 404);
    assert_eq!(
        r.body,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "secrets \"nope\" not found", "reason": "NotFound",
            "details": {"name": "nope", "kind": "secrets"}, "code": 404})
    );
    let r = patch(
        &c.url(),
        &secret_path("a", "nope"),
        MERGE_PATCH,
        &json!({"data": {}}),
    );
    assert_eq!(r.status, 404, "a non-apply patch does not create");
}

#[test]
fn invalid_names_are_422() {
    let c = cluster_with(&["a"]);
    let r = apply(
        &c.url(),
        &secret_path("a", "Bad_Name"),
        "ecr-refresh",
        true,
        &docker_secret("a", "Bad_Name", CFG),
    );
    assert_eq!(r.status, 422);
    assert!(r.message().starts_with("Secret \"Bad_Name\" is invalid: metadata.name: Invalid value: \"Bad_Name\": a lowercase RFC 1123 subdomain"), "{}", r.message());
}

#[test]
fn namespaces_page_with_limit_and_continue_sorted_by_name() {
    let c = FakeCluster::builder().max_page(3).start();
    for i in (1..=7).rev() {
        c.add_namespace(&format!("ns-{i}"), &[]);
    }
    let mut names = Vec::new();
    let mut token = String::new();
    let mut pages = 0;
    loop {
        let target = if token.is_empty() {
            "/api/v1/namespaces?limit=5".to_owned()
        } else {
            format!("/api/v1/namespaces?limit=5&continue={token}")
        };
        let r = get(&c.url(), &target);
        assert_eq!(r.status, 200);
        assert_eq!(r.body["kind"], "NamespaceList");
        let items = r.body["items"].as_array().unwrap();
        assert!(items.len() <= 3, "the server-side page caps the limit");
        names.extend(
            items
                .iter()
                .map(|i| i["metadata"]["name"].as_str().unwrap().to_owned()),
        );
        pages += 1;
        token = r.body["metadata"]["continue"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        if token.is_empty() {
            break;
        }
    }
    assert_eq!(pages, 3);
    assert_eq!(
        names,
        (1..=7).map(|i| format!("ns-{i}")).collect::<Vec<_>>()
    );
}

#[test]
fn an_expired_continue_token_is_410() {
    let c = FakeCluster::start();
    for i in 0..4 {
        c.add_namespace(&format!("ns-{i}"), &[]);
    }
    let first = get(&c.url(), "/api/v1/namespaces?limit=2");
    let token = first.body["metadata"]["continue"]
        .as_str()
        .unwrap()
        .to_owned();
    c.expire_next_continue();
    let r = get(
        &c.url(),
        &format!("/api/v1/namespaces?limit=2&continue={token}"),
    );
    assert_eq!(r.status, 410);
    assert_eq!(r.reason(), "Expired");
    assert!(r.message().starts_with(
        "The provided continue parameter is too old to display a consistent list result."
    ));
    let again = get(
        &c.url(),
        &format!("/api/v1/namespaces?limit=2&continue={token}"),
    );
    assert_eq!(again.status, 200, "only the next token expires");
}

#[test]
fn label_selectors_filter_lists() {
    let c = FakeCluster::start();
    c.add_namespace("a", &[("env", "prod"), ("team", "x")]);
    c.add_namespace("b", &[("env", "dev")]);
    c.add_namespace("c", &[]);
    let names = |sel: &str| -> Vec<String> {
        let r = get(
            &c.url(),
            &format!(
                "/api/v1/namespaces?labelSelector={}",
                sel.replace(' ', "%20")
            ),
        );
        assert_eq!(r.status, 200, "{sel}: {:?}", r.body);
        r.body["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["metadata"]["name"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(names("env=prod"), ["a"]);
    assert_eq!(names("env!=prod"), ["b", "c"]);
    assert_eq!(names("env"), ["a", "b"]);
    assert_eq!(names("!env"), ["c"]);
    assert_eq!(names("env in (dev,prod)"), ["a", "b"]);
    assert_eq!(names("env notin (dev)"), ["a", "c"]);
    assert_eq!(names("env=prod,team=x"), ["a"]);
    assert_eq!(names("kubernetes.io/metadata.name=b"), ["b"]);
    assert_eq!(
        get(&c.url(), "/api/v1/namespaces?labelSelector=a%20in%20x").status,
        400
    );
}

#[test]
fn terminating_namespaces_refuse_creates_but_allow_updates() {
    let c = cluster_with(&["live"]);
    c.add_terminating_namespace("t");
    let ns = get(&c.url(), "/api/v1/namespaces/t").body;
    assert_eq!(ns["status"]["phase"], "Terminating");
    assert!(ns["metadata"]["deletionTimestamp"].is_string());
    let expected_cause = json!([{"reason": "NamespaceTerminating", "message": "namespace t is being terminated", "field": "metadata.namespace"}]);
    let r = apply(
        &c.url(),
        &secret_path("t", "s"),
        "ecr-refresh",
        true,
        &docker_secret("t", "s", CFG),
    );
    assert_eq!(r.status, 403);
    assert_eq!(r.reason(), "Forbidden");
    assert_eq!(
        r.message(),
        "secrets \"s\" is forbidden: unable to create new content in namespace t because it is being terminated"
    );
    assert_eq!(r.body["details"]["causes"], expected_cause);
    let r = post(
        &c.url(),
        "/api/v1/namespaces/t/secrets",
        &docker_secret("t", "s", CFG),
    );
    assert_eq!(r.status, 403);
    assert_eq!(r.body["details"]["causes"], expected_cause);
    // An object that was there before termination can still be updated.
    seed_secret(&c, "t", "old", "kubectl-create");
    let r = apply(
        &c.url(),
        &secret_path("t", "old"),
        "ecr-refresh",
        true,
        &docker_secret("t", "old", CFG),
    );
    assert_eq!(r.status, 200);
}

#[test]
fn creates_in_a_missing_namespace_are_404() {
    let c = FakeCluster::start();
    let r = apply(
        &c.url(),
        &secret_path("gone", "s"),
        "ecr-refresh",
        true,
        &docker_secret("gone", "s", CFG),
    );
    assert_eq!(r.status, 404);
    assert_eq!(r.message(), "namespaces \"gone\" not found");
    assert_eq!(
        r.body["details"],
        json!({"name": "gone", "kind": "namespaces"})
    );
    let r = post(
        &c.url(),
        "/api/v1/namespaces/gone/secrets",
        &docker_secret("gone", "s", CFG),
    );
    assert_eq!(r.status, 404);
    assert_eq!(r.body["details"]["kind"], "namespaces");
}

fn sa_path(ns: &str, name: &str) -> String {
    format!("/api/v1/namespaces/{ns}/serviceaccounts/{name}")
}

#[test]
fn json_patch_test_failure_is_422_and_stores_nothing() {
    let c = cluster_with(&["a"]);
    let sa = get(&c.url(), &sa_path("a", "default")).body;
    let rv = sa["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_owned();
    let add_list = json!([
        {"op": "test", "path": "/metadata/resourceVersion", "value": "999999"},
        {"op": "add", "path": "/imagePullSecrets", "value": [{"name": "aws-ecr-token"}]}
    ]);
    let r = patch(&c.url(), &sa_path("a", "default"), JSON_PATCH, &add_list);
    assert_eq!(r.status, 422);
    assert_eq!(r.reason(), "Invalid");
    assert_eq!(
        r.message(),
        "the server rejected our request due to an error in our request"
    );
    assert_eq!(
        c.get(Resource::ServiceAccounts, "a", "default").unwrap(),
        sa
    );
    let mut ok = add_list.clone();
    ok[0]["value"] = json!(rv);
    let r = patch(
        &c.url(),
        &format!("{}?fieldManager=ecr-refresh", sa_path("a", "default")),
        JSON_PATCH,
        &ok,
    );
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(
        r.body["imagePullSecrets"],
        json!([{"name": "aws-ecr-token"}])
    );
    assert_eq!(
        owners(&r.body, &["f:imagePullSecrets"]),
        ["ecr-refresh/Update"]
    );
}

#[test]
fn json_patch_append_needs_the_list_to_exist() {
    let c = cluster_with(&["a"]);
    let append =
        json!([{"op": "add", "path": "/imagePullSecrets/-", "value": {"name": "aws-ecr-token"}}]);
    let r = patch(&c.url(), &sa_path("a", "default"), JSON_PATCH, &append);
    assert_eq!(r.status, 422, "appending to a missing list fails");
    c.seed(Resource::ServiceAccounts, json!({"metadata": {"name": "default", "namespace": "a"}, "imagePullSecrets": [{"name": "theirs"}]}), "kubectl");
    let r = patch(&c.url(), &sa_path("a", "default"), JSON_PATCH, &append);
    assert_eq!(r.status, 200);
    assert_eq!(
        r.body["imagePullSecrets"],
        json!([{"name": "theirs"}, {"name": "aws-ecr-token"}])
    );
}

#[test]
fn merge_patch_with_a_stale_resource_version_is_409() {
    let c = cluster_with(&["a"]);
    seed_secret(&c, "a", "s", "kubectl-create");
    let body = json!({"metadata": {"resourceVersion": "1"}, "data": {"x": "eA=="}});
    let r = patch(&c.url(), &secret_path("a", "s"), MERGE_PATCH, &body);
    assert_eq!(r.status, 409);
    assert!(r.message().ends_with("the object has been modified; please apply your changes to the latest version and try again"));
    let r = patch(
        &c.url(),
        &secret_path("a", "s"),
        STRATEGIC,
        &json!({"data": {"x": "eA==", ".dockerconfigjson": "e30="}}),
    );
    assert_eq!(r.status, 200);
    assert_eq!(r.body["data"]["x"], "eA==");
}

#[test]
fn service_account_image_pull_secrets_are_replaced_whole_by_apply() {
    let c = cluster_with(&["a"]);
    c.seed(Resource::ServiceAccounts, json!({"metadata": {"name": "default", "namespace": "a"}, "imagePullSecrets": [{"name": "theirs"}]}), "kubectl");
    let body = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}, "imagePullSecrets": [{"name": "mine"}]});
    let r = apply(
        &c.url(),
        &sa_path("a", "default"),
        "ecr-refresh",
        false,
        &body,
    );
    assert_eq!(r.status, 409, "the atomic list is owned by kubectl");
    assert_eq!(
        r.message(),
        "Apply failed with 1 conflict: conflict with \"kubectl\" using v1: .imagePullSecrets"
    );
    let r = apply(
        &c.url(),
        &sa_path("a", "default"),
        "ecr-refresh",
        true,
        &body,
    );
    assert_eq!(r.body["imagePullSecrets"], json!([{"name": "mine"}]));
}

const RBAC: &str = r#"
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: ecr-refresh
rules:
- apiGroups: [""]
  resources: ["secrets"]
  resourceNames: ["aws-ecr-token"]
  verbs: ["get", "create", "patch"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: ecr-refresh
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: ecr-refresh
subjects:
- kind: ServiceAccount
  name: ecr-refresh
  namespace: ecr-refresh
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: lister
  namespace: a
rules:
- apiGroups: [""]
  resources: ["secrets"]
  verbs: ["list"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: lister
  namespace: a
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: lister
subjects:
- kind: ServiceAccount
  name: ecr-refresh
  namespace: ecr-refresh
"#;

const USER_CANNOT: &str = "User \"system:serviceaccount:ecr-refresh:ecr-refresh\" cannot";

#[test]
fn rbac_refuses_what_is_not_granted_and_allows_what_is() {
    let c = FakeCluster::builder().rbac_from_yaml(RBAC).start();
    c.add_namespace("a", &[]);
    c.add_namespace("b", &[]);
    let r = apply(
        &c.url(),
        &secret_path("a", "aws-ecr-token"),
        "ecr-refresh",
        true,
        &docker_secret("a", "aws-ecr-token", CFG),
    );
    assert_eq!(
        r.status, 201,
        "patch, and create for the apply that creates, on the named secret are granted"
    );
    assert_eq!(
        get(&c.url(), &secret_path("a", "aws-ecr-token")).status,
        200
    );
    let r = apply(
        &c.url(),
        &secret_path("a", "other"),
        "ecr-refresh",
        true,
        &docker_secret("a", "other", CFG),
    );
    assert_eq!(r.status, 403);
    assert_eq!(r.reason(), "Forbidden");
    assert_eq!(
        r.message(),
        format!(
            "secrets \"other\" is forbidden: {USER_CANNOT} patch resource \"secrets\" in API group \"\" in the namespace \"a\""
        )
    );
    assert_eq!(
        r.body["details"],
        json!({"name": "other", "kind": "secrets"})
    );
    // A POST names no object when it is authorized: resourceNames cannot grant it.
    let r = post(
        &c.url(),
        "/api/v1/namespaces/b/secrets",
        &docker_secret("b", "aws-ecr-token", CFG),
    );
    assert_eq!(r.status, 403);
    assert_eq!(
        r.message(),
        format!(
            "secrets is forbidden: {USER_CANNOT} create resource \"secrets\" in API group \"\" in the namespace \"b\""
        )
    );
    let r = get(&c.url(), "/api/v1/namespaces");
    assert_eq!(r.status, 403);
    assert_eq!(
        r.message(),
        format!(
            "namespaces is forbidden: {USER_CANNOT} list resource \"namespaces\" in API group \"\" at the cluster scope"
        )
    );
    assert_eq!(
        get(&c.url(), "/api/v1/namespaces/a/secrets").status,
        200,
        "the Role grants list in a"
    );
    assert_eq!(
        get(&c.url(), "/api/v1/namespaces/b/secrets").status,
        403,
        "but not in b"
    );
    assert_eq!(get(&c.url(), "/version").status, 200);
    assert_eq!(get(&c.url(), "/api/v1").status, 200);
}

/// Lists namespaces (cluster-wide) and secrets in `a` and `b` under this RBAC: which were let through.
fn granted(rbac: &str) -> (bool, bool, bool) {
    let c = FakeCluster::builder().rbac_from_yaml(rbac).start();
    let ok = |path: &str| get(&c.url(), path).status == 200;
    (
        ok("/api/v1/namespaces"),
        ok("/api/v1/namespaces/a/secrets"),
        ok("/api/v1/namespaces/b/secrets"),
    )
}

const LISTER: &str = r#"
kind: ClusterRole
metadata: {name: lister}
rules:
- apiGroups: [""]
  resources: ["namespaces", "secrets"]
  verbs: ["list"]
"#;

fn cluster_binding(role_kind: &str, role: &str, subject: &str) -> String {
    format!(
        "kind: ClusterRoleBinding\nmetadata: {{name: b}}\nroleRef: {{apiGroup: rbac.authorization.k8s.io, kind: {role_kind}, name: {role}}}\nsubjects: [{subject}]\n"
    )
}

const THE_SA: &str = "{kind: ServiceAccount, name: ecr-refresh, namespace: ecr-refresh}";

#[test]
fn rbac_grants_only_roles_bound_to_the_service_account() {
    let all = (true, true, true);
    let none = (false, false, false);
    assert_eq!(granted(LISTER), none, "a ClusterRole without a binding");
    for (subject, want) in [
        (THE_SA, all),
        (
            "{kind: ServiceAccount, name: ecr-refresh, namespace: default}",
            none,
        ),
        ("{kind: ServiceAccount, name: ecr-refresh}", none),
        (
            "{kind: User, name: \"system:serviceaccount:ecr-refresh:ecr-refresh\"}",
            all,
        ),
        ("{kind: Group, name: \"system:serviceaccounts\"}", all),
        (
            "{kind: Group, name: \"system:serviceaccounts:ecr-refresh\"}",
            all,
        ),
        ("{kind: Group, name: \"system:authenticated\"}", all),
        (
            "{kind: Group, name: \"system:serviceaccounts:kube-system\"}",
            none,
        ),
    ] {
        let rbac = format!(
            "{LISTER}---\n{}",
            cluster_binding("ClusterRole", "lister", subject)
        );
        assert_eq!(granted(&rbac), want, "{subject}");
    }
    // roleRef must name the role by kind and name.
    let wrong_name = format!(
        "{LISTER}---\n{}",
        cluster_binding("ClusterRole", "other", THE_SA)
    );
    assert_eq!(granted(&wrong_name), none);
    // A ClusterRole bound by a RoleBinding grants only in the binding's namespace; a Role
    // only where it is, and only when bound there.
    let in_a = format!(
        "{LISTER}---\nkind: RoleBinding\nmetadata: {{name: b, namespace: a}}\nroleRef: {{kind: ClusterRole, name: lister}}\nsubjects: [{THE_SA}]\n"
    );
    assert_eq!(granted(&in_a), (false, true, false));
    let role_in_b = "kind: Role\nmetadata: {name: lister, namespace: b}\nrules: [{apiGroups: [\"\"], resources: [secrets], verbs: [list]}]\n";
    let bound_in_a = format!(
        "{role_in_b}---\nkind: RoleBinding\nmetadata: {{name: b, namespace: a}}\nroleRef: {{kind: Role, name: lister}}\nsubjects: [{THE_SA}]\n"
    );
    assert_eq!(
        granted(&bound_in_a),
        none,
        "the Role is in b, its binding in a"
    );
    let bound_in_b = bound_in_a.replace("namespace: a}", "namespace: b}");
    assert_eq!(granted(&bound_in_b), (false, false, true));
}

#[test]
fn a_refusal_names_the_missing_role_a_binding_refers_to() {
    let c = FakeCluster::builder()
        .rbac_from_yaml(&cluster_binding("ClusterRole", "ecr-refresh", THE_SA))
        .start();
    let r = get(&c.url(), "/api/v1/namespaces");
    assert_eq!(r.status, 403);
    assert_eq!(
        r.message(),
        format!(
            "namespaces is forbidden: {USER_CANNOT} list resource \"namespaces\" in API group \"\" at the cluster scope: RBAC: clusterrole.rbac.authorization.k8s.io \"ecr-refresh\" not found"
        )
    );
}

const SECRETS_GET_PATCH: &str = r#"
kind: ClusterRole
metadata: {name: ecr-refresh}
rules:
- apiGroups: [""]
  resources: ["secrets"]
  verbs: ["get", "patch"]
---
kind: ClusterRoleBinding
metadata: {name: ecr-refresh}
roleRef: {kind: ClusterRole, name: ecr-refresh}
subjects: [{kind: ServiceAccount, name: ecr-refresh, namespace: ecr-refresh}]
"#;

#[test]
fn an_apply_that_creates_needs_create_as_well_as_patch() {
    let c = FakeCluster::builder()
        .rbac_from_yaml(SECRETS_GET_PATCH)
        .start();
    c.add_namespace("a", &[]);
    for dry_run in ["", "&dryRun=All"] {
        let r = patch(
            &c.url(),
            &format!(
                "{}?fieldManager=ecr-refresh&force=true{dry_run}",
                secret_path("a", "s")
            ),
            APPLY,
            &docker_secret("a", "s", CFG),
        );
        assert_eq!(r.status, 403, "{dry_run}");
        assert_eq!(r.reason(), "Forbidden");
        // withAuthorization reports only the authorizer's reason, which RBAC leaves empty.
        assert_eq!(r.message(), "secrets \"s\" is forbidden: ");
        assert_eq!(r.body["details"], json!({"name": "s", "kind": "secrets"}));
    }
    assert!(c.history(Resource::Secrets, "a", "s").is_empty());
    // Namespace admission and validation come before the create check.
    let r = apply(
        &c.url(),
        &secret_path("gone", "s"),
        "ecr-refresh",
        true,
        &docker_secret("gone", "s", CFG),
    );
    assert_eq!(r.status, 404);
    let r = apply(
        &c.url(),
        &secret_path("a", "s"),
        "ecr-refresh",
        true,
        &docker_secret("a", "s", "not json"),
    );
    assert_eq!(r.status, 422);
    // An apply that updates needs only patch.
    seed_secret(&c, "a", "s", "kubectl-create");
    let r = apply(
        &c.url(),
        &secret_path("a", "s"),
        "ecr-refresh",
        true,
        &docker_secret("a", "s", CFG),
    );
    assert_eq!(r.status, 200, "{:?}", r.body);
    // And create alone does not let an apply through: patch is checked first.
    let create_only = SECRETS_GET_PATCH.replace("[\"get\", \"patch\"]", "[\"create\"]");
    let c = FakeCluster::builder().rbac_from_yaml(&create_only).start();
    c.add_namespace("a", &[]);
    let r = apply(
        &c.url(),
        &secret_path("a", "s"),
        "ecr-refresh",
        true,
        &docker_secret("a", "s", CFG),
    );
    assert_eq!(r.status, 403);
    assert_eq!(
        r.message(),
        format!(
            "secrets \"s\" is forbidden: {USER_CANNOT} patch resource \"secrets\" in API group \"\" in the namespace \"a\""
        )
    );
}

#[test]
fn faults_answer_as_the_real_server_for_their_count() {
    let c = cluster_with(&["a"]);
    c.add_fault(
        Fault::new("PATCH", "^/api/v1/namespaces/a/secrets/", 429)
            .times(2)
            .retry_after(1),
    );
    let path = secret_path("a", "s");
    let r = apply(
        &c.url(),
        &path,
        "ecr-refresh",
        true,
        &docker_secret("a", "s", CFG),
    );
    // Flow control answers 429 in plain text, with the delay in the Retry-After header.
    assert_eq!(r.status, 429);
    assert_eq!(
        r.body,
        json!("Too many requests, please try again later.\n")
    );
    assert_eq!(r.header("content-type"), Some("text/plain; charset=utf-8"));
    assert_eq!(r.header("retry-after"), Some("1"));
    assert_eq!(
        apply(
            &c.url(),
            &path,
            "ecr-refresh",
            true,
            &docker_secret("a", "s", CFG)
        )
        .status,
        429
    );
    assert_eq!(
        apply(
            &c.url(),
            &path,
            "ecr-refresh",
            true,
            &docker_secret("a", "s", CFG)
        )
        .status,
        201
    );
    c.add_fault(Fault::new("GET", "secrets", 500).times(1));
    let r = get(&c.url(), &path);
    assert_eq!((r.status, r.reason()), (500, "InternalError"));
    c.add_fault(
        Fault::new("GET", "secrets", 503)
            .body(json!({"custom": true}))
            .times(1),
    );
    assert_eq!(get(&c.url(), &path).body, json!({"custom": true}));
    assert_eq!(get(&c.url(), &path).status, 200);
}

#[test]
fn latency_does_not_serialize_requests() {
    let c = FakeCluster::builder()
        .latency(Duration::from_millis(200))
        .start();
    c.add_namespace("a", &[]);
    let start = std::time::Instant::now();
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let url = c.url();
            std::thread::spawn(move || get(&url, "/api/v1/namespaces/a").status)
        })
        .collect();
    for t in threads {
        assert_eq!(t.join().unwrap(), 200);
    }
    assert!(
        start.elapsed() < Duration::from_millis(1200),
        "{:?}",
        start.elapsed()
    );
}

#[test]
fn history_and_hooks_show_every_version() {
    let c = cluster_with(&["a"]);
    seed_secret(&c, "a", "s", "kubectl-create");
    c.delete_after_next_get(Resource::Secrets, "a", "s");
    assert_eq!(
        get(&c.url(), &secret_path("a", "s")).status,
        200,
        "the GET itself still sees it"
    );
    assert!(c.get(Resource::Secrets, "a", "s").is_none());
    let r = apply(
        &c.url(),
        &secret_path("a", "s"),
        "ecr-refresh",
        true,
        &docker_secret("a", "s", CFG),
    );
    assert_eq!(r.status, 201);
    c.change_after_next_get(Resource::Secrets, "a", "s", |obj| {
        obj["metadata"]["labels"] = json!({"touched": "yes"});
    });
    let seen = get(&c.url(), &secret_path("a", "s")).body;
    let now = c.get(Resource::Secrets, "a", "s").unwrap();
    assert_ne!(
        seen["metadata"]["resourceVersion"],
        now["metadata"]["resourceVersion"]
    );
    assert_eq!(
        owners(&now, &["f:metadata", "f:labels", "f:touched"]),
        ["someone-else/Update"]
    );
    let history = c.history(Resource::Secrets, "a", "s");
    assert_eq!(history.len(), 4);
    assert!(history[1].is_none());
    assert!(history[0].is_some() && history[2].is_some() && history[3].is_some());
}

#[test]
fn the_request_log_records_and_can_be_turned_off() {
    let c = cluster_with(&["a"]);
    apply(
        &c.url(),
        &secret_path("a", "s"),
        "ecr-refresh",
        true,
        &docker_secret("a", "s", CFG),
    );
    let log = c.requests();
    assert_eq!(log.len(), 1);
    assert_eq!(log[0].method, "PATCH");
    assert_eq!(log[0].path, "/api/v1/namespaces/a/secrets/s");
    assert_eq!(log[0].query, "fieldManager=ecr-refresh&force=true");
    assert_eq!(log[0].content_type.as_deref(), Some(APPLY));
    assert_eq!(log[0].status, 201);
    assert!(log[0].body.contains("dockerconfigjson"));
    let quiet = FakeCluster::builder().without_request_log().start();
    get(&quiet.url(), "/api/v1/namespaces");
    assert!(quiet.requests().is_empty());
    assert_eq!(quiet.request_count(), 1);
}

#[test]
fn discovery_answers_enough_for_kubectl() {
    let c = FakeCluster::start();
    assert_eq!(get(&c.url(), "/version").body["major"], "1");
    assert_eq!(get(&c.url(), "/api").body["versions"], json!(["v1"]));
    let groups = get(&c.url(), "/apis").body;
    assert_eq!(groups["groups"][0]["name"], "events.k8s.io", "{groups}");
    let v1 = get(&c.url(), "/api/v1").body;
    let names: Vec<&str> = v1["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "namespaces",
            "secrets",
            "serviceaccounts",
            "pods",
            "pods/status",
            "events"
        ]
    );
    assert_eq!(get(&c.url(), "/openapi/v2").status, 404);
    assert_eq!(get(&c.url(), "/openapi/v3").status, 404);
}

#[test]
fn delete_removes_and_records_none() {
    let c = cluster_with(&["a"]);
    seed_secret(&c, "a", "s", "kubectl-create");
    let r = send(&c.url(), "DELETE", &secret_path("a", "s"), None, "");
    assert_eq!(r.status, 200);
    assert_eq!(
        r.body["kind"], "Status",
        "secrets don't return the deleted object"
    );
    assert_eq!(r.body["status"], "Success");
    assert_eq!(c.history(Resource::Secrets, "a", "s").last(), Some(&None));
    assert_eq!(
        send(&c.url(), "DELETE", &secret_path("a", "s"), None, "").status,
        404
    );
}

#[test]
fn finalizers_hold_a_deleted_object_until_they_are_removed() {
    let c = cluster_with(&["a"]);
    let mut held = docker_secret("a", "s", CFG);
    held["metadata"]["finalizers"] = json!(["example.com/hold"]);
    c.seed(Resource::Secrets, held, "kubectl-create");

    let r = send(&c.url(), "DELETE", &secret_path("a", "s"), None, "");
    assert_eq!(r.status, 200);
    assert!(r.body["metadata"]["deletionTimestamp"].is_string());
    let stored = c.get(Resource::Secrets, "a", "s").expect("still there");
    assert!(stored["metadata"]["deletionTimestamp"].is_string());
    assert_eq!(
        stored["metadata"]["finalizers"],
        json!(["example.com/hold"])
    );

    // Updates still work, but no finalizer may be added.
    let r = apply(
        &c.url(),
        &secret_path("a", "s"),
        "ecr-refresh",
        true,
        &docker_secret("a", "s", CFG),
    );
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert!(r.body["metadata"]["deletionTimestamp"].is_string());
    let mut more = docker_secret("a", "s", CFG);
    more["metadata"]["finalizers"] = json!(["example.com/more"]);
    let r = apply(&c.url(), &secret_path("a", "s"), "other", true, &more);
    assert_eq!(r.status, 422);
    assert_eq!(
        r.message(),
        r#"Secret "s" is invalid: metadata.finalizers: Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{"example.com/more"}"#
    );

    // The last finalizer removed, the object goes.
    let r = patch(
        &c.url(),
        &secret_path("a", "s"),
        "application/merge-patch+json",
        &json!({"metadata": {"finalizers": null}}),
    );
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert!(c.get(Resource::Secrets, "a", "s").is_none());
}

#[test]
fn a_seeded_object_being_deleted_keeps_its_deletion_timestamp_only_with_finalizers() {
    let c = cluster_with(&["a"]);
    for (name, finalizers, kept) in [
        ("held", json!(["example.com/hold"]), true),
        ("free", json!([]), false),
    ] {
        let mut s = docker_secret("a", name, CFG);
        s["metadata"]["finalizers"] = finalizers;
        s["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        let stored = c.seed(Resource::Secrets, s, "kubectl-create");
        assert_eq!(
            stored["metadata"]["deletionTimestamp"].is_string(),
            kept,
            "{name}"
        );
    }
}

#[test]
fn a_lost_answer_is_served_but_never_heard() {
    let c = cluster_with(&["a"]);
    c.add_fault(Fault::lose_answer("POST", "/secrets$").times(1));
    let addr = c.url().replace("http://", "");
    let mut stream = std::net::TcpStream::connect(&addr).unwrap();
    let body = docker_secret("a", "s", CFG).to_string();
    use std::io::{Read, Write};
    write!(
        stream,
        "POST /api/v1/namespaces/a/secrets HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut raw = Vec::new();
    let _ = stream.read_to_end(&mut raw);
    let text = String::from_utf8_lossy(&raw);
    assert!(!text.contains("\"uid\""), "no answer arrives: {text}");
    assert!(
        c.get(Resource::Secrets, "a", "s").is_some(),
        "but the Secret was stored"
    );
    assert_eq!(c.requests()[0].status, 0);
}

#[test]
fn an_outage_refuses_connections_then_the_server_comes_back_with_its_state() {
    let c = cluster_with(&["a"]);
    seed_secret(&c, "a", "s", "kubectl-create");
    let addr = c.url().replace("http://", "");
    c.outage(Duration::from_secs(1));
    let refused = std::net::TcpStream::connect(&addr);
    assert_eq!(
        refused.map(|_| ()).unwrap_err().kind(),
        std::io::ErrorKind::ConnectionRefused
    );
    let back = std::time::Instant::now();
    loop {
        if std::net::TcpStream::connect(&addr).is_ok() {
            break;
        }
        assert!(
            back.elapsed() < Duration::from_secs(10),
            "the server came back"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // Back, but refusing for a while: a restarted kube-apiserver's RBAC authorizer has no
    // roles yet (REAL-SERVER.md).
    let refused = get(&c.url(), &secret_path("a", "s"));
    assert_eq!(refused.status, 403, "{:?}", refused.body);
    assert_eq!(refused.body["reason"], "Forbidden");
    let message = refused.body["message"].as_str().unwrap();
    assert!(
        message.starts_with("secrets \"s\" is forbidden: User ")
            && message.contains(
                "cannot get resource \"secrets\" in API group \"\" in the namespace \"a\""
            ),
        "{message}"
    );
    std::thread::sleep(fake_cluster::kube::RBAC_UNSYNCED_AFTER_OUTAGE);
    assert_eq!(get(&c.url(), &secret_path("a", "s")).status, 200);
}

#[test]
fn a_list_that_shows_an_object_or_would_runs_its_read_hooks_as_a_get_does() {
    let c = FakeCluster::builder().max_page(1).start();
    for ns in ["a", "b", "c"] {
        c.add_namespace(ns, &[]);
    }
    seed_secret(&c, "a", "s", "kubectl-create");
    seed_secret(&c, "c", "s", "kubectl-create");
    c.delete_after_next_get(Resource::Secrets, "c", "s");
    c.create_after_next_get(
        Resource::Secrets,
        "b",
        "s",
        json!({"type": "kubernetes.io/dockerconfigjson", "data": {".dockerconfigjson": "e30="}}),
        "someone-else",
    );
    let first = get(
        &c.url(),
        "/api/v1/secrets?fieldSelector=metadata.name%3Ds&limit=1",
    );
    assert_eq!(first.status, 200);
    assert_eq!(first.body["items"][0]["metadata"]["namespace"], "a");
    assert!(
        c.get(Resource::Secrets, "b", "s").is_none()
            && c.get(Resource::Secrets, "c", "s").is_some(),
        "a page runs the hooks of its own keys only"
    );
    let token = first.body["metadata"]["continue"]
        .as_str()
        .unwrap()
        .to_owned();
    let rest = get(
        &c.url(),
        &format!("/api/v1/secrets?fieldSelector=metadata.name%3Ds&limit=500&continue={token}"),
    );
    assert_eq!(rest.status, 200);
    let namespaces: Vec<&str> = rest.body["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["metadata"]["namespace"].as_str().unwrap())
        .collect();
    assert_eq!(
        namespaces,
        ["c"],
        "the page shows what was there when it was read"
    );
    assert!(
        c.get(Resource::Secrets, "b", "s").is_some(),
        "created after the page that would show it"
    );
    assert!(
        c.get(Resource::Secrets, "c", "s").is_none(),
        "deleted after the page that showed it"
    );
}

#[test]
fn a_list_selected_by_name_is_allowed_by_resource_names_and_no_other_list() {
    let c = FakeCluster::builder()
        .rbac_from_yaml(
            r#"
kind: ClusterRole
metadata: {name: ecr-refresh}
rules:
- apiGroups: [""]
  resources: ["secrets"]
  resourceNames: ["s"]
  verbs: ["get", "list"]
---
kind: ClusterRoleBinding
metadata: {name: ecr-refresh}
roleRef: {kind: ClusterRole, name: ecr-refresh}
subjects: [{kind: ServiceAccount, name: ecr-refresh, namespace: ecr-refresh}]
"#,
        )
        .start();
    c.add_namespace("a", &[]);
    seed_secret(&c, "a", "s", "kubectl-create");
    seed_secret(&c, "a", "other", "kubectl-create");
    for allowed in [
        "/api/v1/secrets?fieldSelector=metadata.name%3Ds",
        "/api/v1/secrets?fieldSelector=metadata.name%3D%3Ds&limit=1",
        "/api/v1/namespaces/a/secrets?fieldSelector=metadata.name%3Ds",
    ] {
        let r = get(&c.url(), allowed);
        assert_eq!(r.status, 200, "{allowed}: {:?}", r.body);
        let names: Vec<&Value> = r.body["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| &i["metadata"]["name"])
            .collect();
        assert_eq!(names, [&json!("s")], "{allowed}");
    }
    for refused in [
        "/api/v1/secrets",
        "/api/v1/secrets?fieldSelector=metadata.name%3Dother",
        "/api/v1/secrets?fieldSelector=metadata.name%21%3Ds",
    ] {
        let r = get(&c.url(), refused);
        assert_eq!(r.status, 403, "{refused}");
    }
    // As kube-apiserver words it: the name the selector requires is the resource's name.
    let r = get(
        &c.url(),
        "/api/v1/secrets?fieldSelector=metadata.name%3Dother",
    );
    assert_eq!(
        r.message(),
        format!(
            "secrets \"other\" is forbidden: {USER_CANNOT} list resource \"secrets\" in API group \"\" at the cluster scope"
        )
    );
}
