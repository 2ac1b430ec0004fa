//! Events in the fake: one store served under core/v1 and events.k8s.io/v1, and creates
//! refused as the real API server refuses them (see src/kube/events.rs for the source read).

use crate::common;

use common::*;
use fake_cluster::FakeCluster;
use serde_json::{Value, json};

const V1: &str = "/apis/events.k8s.io/v1";

fn cluster() -> FakeCluster {
    let c = FakeCluster::start();
    c.add_namespace("team-a", &[]);
    c
}

/// A valid events.k8s.io/v1 Event regarding Secret `aws-ecr-token` in `ns`.
fn event(ns: &str, name: &str) -> Value {
    json!({
        "apiVersion": "events.k8s.io/v1", "kind": "Event",
        "metadata": {"name": name, "namespace": ns},
        "eventTime": "2026-12-01T14:00:00.123456Z",
        "type": "Warning", "reason": "WrongSecretType", "action": "Refresh",
        "note": "the Secret has type Opaque",
        "reportingController": "ecr-refresh", "reportingInstance": "ecr-refresh-abc",
        "regarding": {"apiVersion": "v1", "kind": "Secret", "namespace": ns, "name": "aws-ecr-token"}
    })
}

fn post_event(c: &FakeCluster, ns: &str, body: &Value) -> Response {
    post(&c.url(), &format!("{V1}/namespaces/{ns}/events"), body)
}

fn causes(r: &Response) -> Vec<(String, String)> {
    r.body["details"]["causes"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            (
                c["field"].as_str().unwrap_or_default().to_owned(),
                c["message"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

#[test]
fn an_event_posted_through_events_k8s_io_is_read_through_both_apis() {
    let c = cluster();

    let created = post_event(&c, "team-a", &event("team-a", "aws-ecr-token.1"));

    assert_eq!(created.status, 201, "{}", created.body);
    assert_eq!(created.body["note"], "the Secret has type Opaque");
    assert!(created.body["metadata"]["uid"].is_string());
    let core = get(&c.url(), "/api/v1/namespaces/team-a/events");
    assert_eq!(core.status, 200);
    assert_eq!(core.body["kind"], "EventList");
    let item = &core.body["items"][0];
    assert_eq!(item["apiVersion"], "v1");
    assert_eq!(item["message"], "the Secret has type Opaque");
    assert_eq!(item["involvedObject"]["kind"], "Secret");
    assert_eq!(item["reportingComponent"], "ecr-refresh");
    assert_eq!(item["reason"], "WrongSecretType");
    let one = get(
        &c.url(),
        &format!("{V1}/namespaces/team-a/events/aws-ecr-token.1"),
    );
    assert_eq!(one.body["regarding"]["name"], "aws-ecr-token");
    assert_eq!(c.events("team-a").len(), 1);
    assert!(c.events("default").is_empty());
}

#[test]
fn an_event_regarding_a_cluster_scoped_object_is_refused_outside_default() {
    let c = cluster();
    c.add_namespace("default", &[]);
    let mut body = event("team-a", "ns-event");
    body["regarding"] = json!({"apiVersion": "v1", "kind": "Namespace", "name": "team-a"});

    let refused = post_event(&c, "team-a", &body);
    let mut in_default = body.clone();
    in_default["metadata"]["namespace"] = json!("default");
    let allowed = post_event(&c, "default", &in_default);

    assert_eq!(refused.status, 422, "{}", refused.body);
    assert_eq!(
        refused.message(),
        "Event.events.k8s.io \"ns-event\" is invalid: involvedObject.namespace: Invalid value: \"\": does not match event.namespace"
    );
    assert_eq!(refused.body["details"]["group"], "events.k8s.io");
    assert_eq!(refused.body["details"]["kind"], "Event");
    assert_eq!(
        causes(&refused),
        [(
            "involvedObject.namespace".to_owned(),
            "Invalid value: \"\": does not match event.namespace".to_owned()
        )]
    );
    assert_eq!(allowed.status, 201, "{}", allowed.body);
    assert!(c.events("team-a").is_empty());
}

#[test]
fn events_k8s_io_v1_requires_its_fields_and_limits_the_note() {
    let c = cluster();
    let mut body = event("team-a", "bad");
    for field in [
        "eventTime",
        "reportingController",
        "reportingInstance",
        "action",
        "reason",
    ] {
        body.as_object_mut().unwrap().remove(field);
    }
    body["type"] = json!("Error");
    body["note"] = json!("x".repeat(1025));

    let refused = post_event(&c, "team-a", &body);

    assert_eq!(refused.status, 422, "{}", refused.body);
    let fields: Vec<String> = causes(&refused).into_iter().map(|(f, _)| f).collect();
    // Without eventTime the legacy checks are the namespace match only; the strict ones
    // then want eventTime and a valid type.
    assert_eq!(fields, ["eventTime", "type"], "{}", refused.body);
    assert!(
        refused
            .message()
            .contains("type: Invalid value: \"\": has invalid value: Error")
    );

    let mut body = event("team-a", "bad2");
    body["note"] = json!("x".repeat(1025));
    body["reason"] = json!("");
    body["reportingController"] = json!("not a name");
    let refused = post_event(&c, "team-a", &body);
    let fields: Vec<String> = causes(&refused).into_iter().map(|(f, _)| f).collect();
    assert_eq!(
        fields,
        ["reportingController", "reason", "message"],
        "{}",
        refused.body
    );
    assert!(
        refused
            .message()
            .contains("message: Invalid value: \"\": can have at most 1024 characters")
    );

    let mut body = event("team-a", "ok");
    body["note"] = json!("é".repeat(512));
    assert_eq!(
        post_event(&c, "team-a", &body).status,
        201,
        "1024 bytes is the limit"
    );
}

#[test]
fn event_creates_meet_namespace_admission() {
    let c = cluster();
    c.add_terminating_namespace("leaving");

    let missing = post_event(&c, "gone", &event("gone", "e"));
    let terminating = post_event(&c, "leaving", &event("leaving", "e"));

    assert_eq!(missing.status, 404);
    assert_eq!(missing.message(), "namespaces \"gone\" not found");
    assert_eq!(terminating.status, 403);
    assert_eq!(
        terminating.message(),
        "events.events.k8s.io \"e\" is forbidden: unable to create new content in namespace leaving because it is being terminated"
    );
}

#[test]
fn rbac_for_events_names_the_events_k8s_io_group() {
    let core_only = "
kind: ClusterRole
metadata: {name: r}
rules:
- apiGroups: [\"\"]
  resources: [events]
  verbs: [create]
---
kind: ClusterRoleBinding
metadata: {name: r}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: r}
subjects:
- {kind: ServiceAccount, name: ecr-refresh, namespace: ecr-refresh}
";
    let c = FakeCluster::builder().rbac_from_yaml(core_only).start();
    c.add_namespace("team-a", &[]);

    let refused = post_event(&c, "team-a", &event("team-a", "e"));
    let allowed = post(
        &c.url(),
        "/api/v1/namespaces/team-a/events",
        &json!({
            "metadata": {"name": "core"}, "involvedObject": {"kind": "Secret", "namespace": "team-a", "name": "s"},
            "reason": "R", "message": "m", "type": "Warning"
        }),
    );

    assert_eq!(refused.status, 403);
    assert_eq!(
        refused.message(),
        "events.events.k8s.io is forbidden: User \"system:serviceaccount:ecr-refresh:ecr-refresh\" cannot create resource \"events\" in API group \"events.k8s.io\" in the namespace \"team-a\""
    );
    assert_eq!(refused.body["details"]["group"], "events.k8s.io");
    assert_eq!(allowed.status, 201, "{}", allowed.body);
}

#[test]
fn discovery_lists_the_events_group() {
    let c = cluster();
    let groups = get(&c.url(), "/apis");
    assert_eq!(groups.body["groups"][0]["name"], "events.k8s.io");
    let resources = get(&c.url(), V1);
    assert_eq!(resources.body["resources"][0]["name"], "events");
    let core = get(&c.url(), "/api/v1");
    assert!(
        core.body["resources"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["name"] == "events")
    );
}
