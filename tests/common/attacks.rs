//! The requests a stolen ServiceAccount token could make beyond a run's own, and the
//! namespaces they aim at: one list, sent to the fake API server (tests/fake/admission.rs) and to
//! the real one (tests/real/admission.rs).

use serde_json::{Value, json};

use super::{REGISTRY, SECRET, b64};

/// What an older or hand-made install may still grant: everything on Secrets,
/// ServiceAccounts and Events, and the TokenRequest (RBAC names a subresource apart:
/// `serviceaccounts` grants no `serviceaccounts/token`). The policy must hold without
/// RBAC's help.
pub const WIDE_RBAC: &str = "
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: too-wide}
rules:
- apiGroups: ['', 'events.k8s.io']
  resources: [secrets, serviceaccounts, serviceaccounts/token, events]
  verbs: ['*']
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: too-wide}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: too-wide}
subjects:
- {kind: ServiceAccount, name: ecr-refresh, namespace: ecr-refresh}
";

/// [`WIDE_RBAC`] granted to the ServiceAccount `(namespace, name)`.
pub fn wide_rbac((namespace, name): (&str, &str)) -> String {
    WIDE_RBAC.replace(
        "{kind: ServiceAccount, name: ecr-refresh, namespace: ecr-refresh}",
        &format!("{{kind: ServiceAccount, name: {name}, namespace: {namespace}}}"),
    )
}

/// The attack that needs an Opaque Secret named like ours in the victim namespace.
pub const OPAQUE_UPDATE: &str = "an Opaque Secret named like ours made a pull Secret by a patch";

/// A request a stolen token could make: what it is, and how to send it.
pub struct Attack {
    pub what: &'static str,
    /// The part of the policy's message that names the rule it breaks.
    pub refused_with: &'static str,
    pub method: &'static str,
    pub path: String,
    pub content_type: &'static str,
    pub body: Value,
}

pub fn pull_secret_body(name: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": { "name": name, "labels": { "app.kubernetes.io/managed-by": "ecr-refresh" } },
        "type": "kubernetes.io/dockerconfigjson",
        "data": { ".dockerconfigjson": b64(r#"{"auths":{}}"#) }
    })
}

/// Every attack the issue names, and a few more. Namespace `victim` holds no Secret of ours
/// (creates), `ours` holds our Secret with someone else's annotation, label and data key,
/// and both a `default` ServiceAccount with others' imagePullSecrets.
pub fn attacks(victim: &str, ours: &str) -> Vec<Attack> {
    let creates = format!("/api/v1/namespaces/{victim}/secrets");
    let secret = format!("/api/v1/namespaces/{ours}/secrets/{SECRET}");
    let account = format!("/api/v1/namespaces/{ours}/serviceaccounts/default");
    let mut extra_annotation = pull_secret_body(SECRET);
    extra_annotation["metadata"]["annotations"] = json!({ "example.com/note": "x" });
    let mut argo_label = pull_secret_body(SECRET);
    argo_label["metadata"]["labels"]["argocd.argoproj.io/secret-type"] = json!("cluster");
    let mut opaque = pull_secret_body(SECRET);
    opaque["type"] = json!("Opaque");
    let mut extra_key = pull_secret_body(SECRET);
    extra_key["data"]["config"] = json!(b64("x"));
    let mut owned = pull_secret_body(SECRET);
    owned["metadata"]["finalizers"] = json!(["example.com/hold"]);
    let events = format!("/apis/events.k8s.io/v1/namespaces/{ours}/events");
    let event = |change: &dyn Fn(&mut Value)| {
        let mut e = event_body(ours);
        change(&mut e);
        e
    };
    vec![
        Attack {
            what: "a service-account-token Secret named like ours",
            refused_with: "may only create Secrets of type kubernetes.io/dockerconfigjson",
            method: "POST",
            path: creates.clone(),
            content_type: "application/json",
            body: json!({
                "apiVersion": "v1", "kind": "Secret",
                "metadata": { "name": SECRET, "annotations": { "kubernetes.io/service-account.name": "default" } },
                "type": "kubernetes.io/service-account-token"
            }),
        },
        Attack {
            what: "a service-account-token Secret created by server-side apply",
            refused_with: "may only create Secrets of type kubernetes.io/dockerconfigjson",
            method: "PATCH",
            path: format!("{creates}/{SECRET}?fieldManager=ecr-refresh&force=true"),
            content_type: "application/apply-patch+yaml",
            body: json!({
                "apiVersion": "v1", "kind": "Secret",
                "metadata": { "name": SECRET, "annotations": { "kubernetes.io/service-account.name": "default" } },
                "type": "kubernetes.io/service-account-token"
            }),
        },
        Attack {
            what: "an Opaque Secret under our name",
            refused_with: "may only create Secrets of type kubernetes.io/dockerconfigjson",
            method: "POST",
            path: creates.clone(),
            content_type: "application/json",
            body: opaque,
        },
        Attack {
            what: "a Secret under another name",
            refused_with: "may only write the Secret named aws-ecr-token",
            method: "POST",
            path: creates.clone(),
            content_type: "application/json",
            body: pull_secret_body("argocd-repo-creds"),
        },
        Attack {
            what: "an extra annotation on create",
            refused_with: "may only annotate its Secret with ecr-refresh/ annotations",
            method: "POST",
            path: creates.clone(),
            content_type: "application/json",
            body: extra_annotation,
        },
        Attack {
            what: "another label on create",
            refused_with: "may only label its Secret app.kubernetes.io/managed-by: ecr-refresh",
            method: "POST",
            path: creates.clone(),
            content_type: "application/json",
            body: argo_label,
        },
        Attack {
            what: "another data key on create",
            refused_with: "whose only data key is .dockerconfigjson",
            method: "POST",
            path: creates.clone(),
            content_type: "application/json",
            body: extra_key,
        },
        Attack {
            what: "a finalizer on create",
            refused_with: "may not create a Secret with ownerReferences, finalizers or immutable",
            method: "POST",
            path: creates.clone(),
            content_type: "application/json",
            body: owned,
        },
        Attack {
            what: "someone else's annotation changed on update",
            refused_with: "may only add or change ecr-refresh/ annotations",
            method: "PATCH",
            path: secret.clone(),
            content_type: "application/merge-patch+json",
            body: json!({ "metadata": { "annotations": { "team.example.com/owner": "mallory" } } }),
        },
        Attack {
            what: "someone else's annotation removed",
            refused_with: "may only add or change ecr-refresh/ annotations",
            method: "PATCH",
            path: secret.clone(),
            content_type: "application/json-patch+json",
            body: json!([{ "op": "remove", "path": "/metadata/annotations/team.example.com~1owner" }]),
        },
        Attack {
            what: "someone else's label changed on update",
            refused_with: "may only add or set the label app.kubernetes.io/managed-by",
            method: "PATCH",
            path: secret.clone(),
            content_type: "application/merge-patch+json",
            body: json!({ "metadata": { "labels": { "team": "mallory" } } }),
        },
        Attack {
            what: "someone else's data key changed on update",
            refused_with: "may only add or change the data key .dockerconfigjson",
            method: "PATCH",
            path: secret.clone(),
            content_type: "application/merge-patch+json",
            body: json!({ "data": { "config": b64("changed") } }),
        },
        Attack {
            what: "an owner reference added on update",
            refused_with: "may not change a Secret's type, ownerReferences",
            method: "PATCH",
            path: secret.clone(),
            content_type: "application/merge-patch+json",
            body: json!({ "metadata": { "ownerReferences": [{ "apiVersion": "v1", "kind": "ConfigMap", "name": "x", "uid": "1" }] } }),
        },
        Attack {
            what: "a ServiceAccount annotation change",
            refused_with: "may only change a ServiceAccount's imagePullSecrets",
            method: "PATCH",
            path: account.clone(),
            content_type: "application/merge-patch+json",
            body: json!({ "metadata": { "annotations": { "eks.amazonaws.com/role-arn": "arn:aws:iam::111122223333:role/admin" } } }),
        },
        Attack {
            what: "the removal of someone else's imagePullSecrets entry",
            refused_with: "may only append {name: aws-ecr-token}",
            method: "PATCH",
            path: account.clone(),
            content_type: "application/json-patch+json",
            body: json!([{ "op": "remove", "path": "/imagePullSecrets/0" }]),
        },
        Attack {
            what: "the reordering of someone else's imagePullSecrets entries",
            refused_with: "may only append {name: aws-ecr-token}",
            method: "PATCH",
            path: account.clone(),
            content_type: "application/merge-patch+json",
            body: json!({ "imagePullSecrets": [{ "name": "team-b-creds" }, { "name": "team-a-creds" }] }),
        },
        Attack {
            what: "another Secret added to imagePullSecrets",
            refused_with: "may only append {name: aws-ecr-token}",
            method: "PATCH",
            path: account.clone(),
            content_type: "application/json-patch+json",
            body: json!([{ "op": "add", "path": "/imagePullSecrets/-", "value": { "name": "mallory" } }]),
        },
        Attack {
            what: "a delete of our Secret",
            refused_with: "not DELETE secrets",
            method: "DELETE",
            path: secret.clone(),
            content_type: "application/json",
            body: Value::Null,
        },
        Attack {
            what: "a ServiceAccount create",
            refused_with: "not CREATE serviceaccounts",
            method: "POST",
            path: format!("/api/v1/namespaces/{victim}/serviceaccounts"),
            content_type: "application/json",
            body: json!({ "apiVersion": "v1", "kind": "ServiceAccount", "metadata": { "name": "backdoor" } }),
        },
        Attack {
            what: OPAQUE_UPDATE,
            refused_with: "may only update Secrets of type kubernetes.io/dockerconfigjson",
            method: "PATCH",
            path: format!("{creates}/{SECRET}"),
            content_type: "application/merge-patch+json",
            body: json!({
                "metadata": { "labels": { "app.kubernetes.io/managed-by": "ecr-refresh" },
                              "annotations": { "ecr-refresh/registries": REGISTRY } },
                "data": { ".dockerconfigjson": b64(r#"{"auths":{}}"#) }
            }),
        },
        Attack {
            what: "an Event under another reporting controller",
            refused_with: "may only write Events with reportingController ecr-refresh",
            method: "POST",
            path: events.clone(),
            content_type: "application/json",
            body: event(&|e| e["reportingController"] = json!("kubelet")),
        },
        Attack {
            what: "a Normal Event",
            refused_with: "may only write Events of type Warning",
            method: "POST",
            path: events.clone(),
            content_type: "application/json",
            body: event(&|e| e["type"] = json!("Normal")),
        },
        Attack {
            what: "an Event regarding a Pod",
            refused_with: "may only write Events regarding its Secret aws-ecr-token",
            method: "POST",
            path: events.clone(),
            content_type: "application/json",
            body: event(&|e| {
                e["regarding"] =
                    json!({ "apiVersion": "v1", "kind": "Pod", "namespace": ours, "name": "web-0" })
            }),
        },
        Attack {
            what: "an Event regarding another Secret",
            refused_with: "may only write Events regarding its Secret aws-ecr-token",
            method: "POST",
            path: events.clone(),
            content_type: "application/json",
            body: event(&|e| e["regarding"]["name"] = json!("argocd-repo-creds")),
        },
        Attack {
            what: "an Event regarding our Secret in another namespace",
            refused_with: "may only write Events regarding its Secret aws-ecr-token",
            method: "POST",
            path: events.clone(),
            content_type: "application/json",
            body: event(&|e| e["regarding"]["namespace"] = json!(victim)),
        },
        Attack {
            what: "an Event with a related object",
            refused_with: "with no related object",
            method: "POST",
            path: events.clone(),
            content_type: "application/json",
            body: event(&|e| {
                e["related"] =
                    json!({ "apiVersion": "v1", "kind": "Pod", "namespace": ours, "name": "web-0" })
            }),
        },
        Attack {
            what: "a core/v1 Event",
            refused_with: "not CREATE events",
            method: "POST",
            path: format!("/api/v1/namespaces/{ours}/events"),
            content_type: "application/json",
            body: json!({
                "apiVersion": "v1", "kind": "Event", "metadata": { "name": "web-0.1" },
                "involvedObject": { "apiVersion": "v1", "kind": "Pod", "namespace": ours, "name": "web-0" },
                "reason": "Killing", "message": "x", "type": "Warning"
            }),
        },
    ]
}

/// The attacks on subresources: TokenRequests, which mint a token for any ServiceAccount
/// of the namespace (the review's minted one for kube-system/cluster-operator). Sent to the
/// real server only (tests/real/admission.rs): the fake serves no subresource of Secrets or
/// ServiceAccounts (its only one is pods/status), so there they would be a 404, not a test
/// of the policy. Secrets have no subresource to write on either server.
pub fn subresource_attacks(ours: &str) -> Vec<Attack> {
    let token = format!("/api/v1/namespaces/{ours}/serviceaccounts/default/token");
    let request = |bound: Value| {
        let mut spec = json!({ "audiences": [], "expirationSeconds": 600 });
        if !bound.is_null() {
            spec["boundObjectRef"] = bound;
        }
        json!({ "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec })
    };
    vec![
        Attack {
            what: "a TokenRequest for another ServiceAccount",
            refused_with: "not CREATE serviceaccounts/token",
            method: "POST",
            path: token.clone(),
            content_type: "application/json",
            body: request(Value::Null),
        },
        Attack {
            what: "a TokenRequest bound to our Secret",
            refused_with: "not CREATE serviceaccounts/token",
            method: "POST",
            path: token,
            content_type: "application/json",
            body: request(json!({ "apiVersion": "v1", "kind": "Secret", "name": SECRET })),
        },
    ]
}

/// The pod `web-0` of [`pod_attacks`], made by the admin in `ours` first.
pub fn victim_pod(ours: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": { "name": "web-0", "namespace": ours, "labels": { "app": "web" } },
        "spec": { "containers": [{ "name": "app", "image": format!("{REGISTRY}/web:1") }] }
    })
}

/// What a stolen token with the evictions' rights (ECR_REFRESH_EVICT_STUCK_PODS: pods list
/// and get, pods/eviction create) could try beyond an eviction with the pod's own grace
/// period, at pod `web-0` in `ours` ([`victim_pod`]). RBAC refuses the first three unless
/// widened ([`WIDE_POD_RBAC`]); the policy refuses them all. Sent to the real server only
/// (tests/real/admission.rs): the fake serves no pods/eviction.
pub fn pod_attacks(ours: &str) -> Vec<Attack> {
    let pods = format!("/api/v1/namespaces/{ours}/pods");
    let pod = format!("{pods}/web-0");
    let eviction = |options: Value| {
        json!({
            "apiVersion": "policy/v1", "kind": "Eviction",
            "metadata": { "name": "web-0", "namespace": ours },
            "deleteOptions": options
        })
    };
    let mut created = victim_pod(ours);
    created["metadata"]["name"] = json!("miner");
    vec![
        Attack {
            what: "a pod delete",
            refused_with: "not DELETE pods",
            method: "DELETE",
            path: pod.clone(),
            content_type: "application/json",
            body: Value::Null,
        },
        Attack {
            what: "a pod create",
            refused_with: "not CREATE pods",
            method: "POST",
            path: pods,
            content_type: "application/json",
            body: created,
        },
        Attack {
            what: "a pod update",
            refused_with: "not UPDATE pods",
            method: "PATCH",
            path: pod.clone(),
            content_type: "application/merge-patch+json",
            body: json!({ "metadata": { "labels": { "app": "elsewhere" } } }),
        },
        Attack {
            what: "an eviction with a grace period of 0",
            refused_with: "may only evict a pod with its own grace period",
            method: "POST",
            path: format!("{pod}/eviction"),
            content_type: "application/json",
            body: eviction(json!({ "gracePeriodSeconds": 0 })),
        },
        Attack {
            what: "an eviction that orphans the pod's dependents",
            refused_with: "may only evict a pod with its own grace period",
            method: "POST",
            path: format!("{pod}/eviction"),
            content_type: "application/json",
            body: eviction(json!({ "propagationPolicy": "Orphan" })),
        },
    ]
}

/// Everything on pods, for [`pod_attacks`] with RBAC out of the way: the policy alone.
pub const WIDE_POD_RBAC: &str = "
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: too-wide-pods}
rules:
- apiGroups: ['']
  resources: [pods, pods/eviction]
  verbs: ['*']
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: too-wide-pods}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: too-wide-pods}
subjects:
- {kind: ServiceAccount, name: ecr-refresh, namespace: ecr-refresh}
";

/// A Warning Event as src/cluster/events.rs writes it, regarding our Secret in `namespace`.
pub fn event_body(namespace: &str) -> Value {
    json!({
        "apiVersion": "events.k8s.io/v1", "kind": "Event",
        "metadata": { "name": format!("{SECRET}.18a2b3c4d5e6f708"), "namespace": namespace },
        "eventTime": "2026-12-01T08:00:00.000000Z",
        "type": "Warning", "reason": "RefreshFailed", "action": "Refresh",
        "note": "ecr-refresh could not refresh image-pull Secret aws-ecr-token",
        "reportingController": "ecr-refresh", "reportingInstance": "ecr-refresh-29400050-x7k2p",
        "regarding": { "apiVersion": "v1", "kind": "Secret", "namespace": namespace, "name": SECRET }
    })
}

/// What [`OPAQUE_UPDATE`] needs first: someone else's Opaque Secret named like ours in
/// `victim`, with the field manager that made it.
pub fn opaque_under_our_name(victim: &str) -> (&'static str, Value) {
    (
        "kubectl-create",
        json!({ "apiVersion": "v1", "kind": "Secret",
                "metadata": { "name": SECRET, "namespace": victim },
                "type": "Opaque", "data": { "token": b64("someone else's") } }),
    )
}

/// The namespaces the attacks aim at (in the namespaced variant's, so that its Roles let
/// them reach admission): (victim, ours).
pub fn targets(variant: &str) -> (&'static str, &'static str) {
    if variant.is_empty() {
        ("victim", "ours")
    } else {
        ("team-a", "team-b")
    }
}

/// The namespaces the attacks aim at, as other users left them: both with a `default`
/// ServiceAccount holding others' imagePullSecrets, and `ours` with our Secret carrying
/// someone else's label, annotation and data key. Each object with the field manager that
/// made it.
pub fn target_objects((victim, ours): (&str, &str)) -> Vec<(&'static str, Value)> {
    let mut objects = Vec::new();
    for ns in [victim, ours] {
        objects.push((
            "kubectl-create",
            json!({ "apiVersion": "v1", "kind": "Namespace", "metadata": { "name": ns } }),
        ));
        objects.push((
            "kube-controller-manager",
            json!({ "apiVersion": "v1", "kind": "ServiceAccount",
                    "metadata": { "name": "default", "namespace": ns },
                    "imagePullSecrets": [{ "name": "team-a-creds" }, { "name": "team-b-creds" }] }),
        ));
    }
    objects.push((
        "kubectl-create",
        json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": { "name": SECRET, "namespace": ours,
                          "labels": { "team": "a" },
                          "annotations": { "team.example.com/owner": "alice" } },
            "type": "kubernetes.io/dockerconfigjson",
            "data": { ".dockerconfigjson": b64(r#"{"auths":{}}"#), "config": b64("x") }
        }),
    ));
    objects
}
