//! The requests a stolen ServiceAccount token could make beyond a run's own, and the
//! namespaces they aim at: one list, sent to the real API
//! server (tests/real/admission.rs, tests/real/overlays.rs).

use serde_json::{Value, json};

use super::{REGISTRY, SECRET, b64};

/// What an older or hand-made install may still grant: everything on Secrets,
/// ServiceAccounts and Events, and the TokenRequest (RBAC names a subresource apart:
/// `serviceaccounts` grants no `serviceaccounts/token`). The policy must hold without
/// RBAC's help.
pub(crate) const WIDE_RBAC: &str = "
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
pub(crate) fn wide_rbac((namespace, name): (&str, &str)) -> String {
    WIDE_RBAC.replace(
        "{kind: ServiceAccount, name: ecr-refresh, namespace: ecr-refresh}",
        &format!("{{kind: ServiceAccount, name: {name}, namespace: {namespace}}}"),
    )
}

/// The attack that needs an Opaque Secret named like ours in the victim namespace.
pub(crate) const OPAQUE_UPDATE: &str =
    "an Opaque Secret named like ours made a pull Secret by a patch";

/// A request a stolen token could make: what it is, and how to send it.
pub(crate) struct Attack {
    pub what: &'static str,
    /// The part of the policy's message that names the rule it breaks.
    pub refused_with: &'static str,
    pub method: &'static str,
    pub path: String,
    pub content_type: &'static str,
    pub body: Value,
}

pub(crate) fn pull_secret_body(name: &str) -> Value {
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
pub(crate) fn attacks(victim: &str, ours: &str) -> Vec<Attack> {
    let creates = format!("/api/v1/namespaces/{victim}/secrets");
    let secret = format!("/api/v1/namespaces/{ours}/secrets/{SECRET}");
    let account = format!("/api/v1/namespaces/{ours}/serviceaccounts/default");
    let mut extra_annotation = pull_secret_body(SECRET);
    extra_annotation["metadata"]["annotations"] = json!({ "example.com/note": "x" });
    let mut argo_label = pull_secret_body(SECRET);
    argo_label["metadata"]["labels"]["argocd.argoproj.io/secret-type"] = json!("cluster");
    // Our created label with another value: only "true", which our create sets.
    let mut created_other = pull_secret_body(SECRET);
    created_other["metadata"]["labels"]["ecr-refresh/created"] = json!("false");
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
            what: "our created label with another value on create",
            refused_with: "may only label its Secret app.kubernetes.io/managed-by: ecr-refresh",
            method: "POST",
            path: creates.clone(),
            content_type: "application/json",
            body: created_other,
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
pub(crate) fn subresource_attacks(ours: &str) -> Vec<Attack> {
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
pub(crate) fn victim_pod(ours: &str) -> Value {
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
pub(crate) fn pod_attacks(ours: &str) -> Vec<Attack> {
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
pub(crate) const WIDE_POD_RBAC: &str = "
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
pub(crate) fn event_body(namespace: &str) -> Value {
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
pub(crate) fn opaque_under_our_name(victim: &str) -> (&'static str, Value) {
    (
        "kubectl-create",
        json!({ "apiVersion": "v1", "kind": "Secret",
                "metadata": { "name": SECRET, "namespace": victim },
                "type": "Opaque", "data": { "token": b64("someone else's") } }),
    )
}

/// The namespaces the attacks aim at (in the namespaced variant's, so that its Roles let
/// them reach admission): (victim, ours).
pub(crate) fn targets(variant: &str) -> (&'static str, &'static str) {
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
pub(crate) fn target_objects((victim, ours): (&str, &str)) -> Vec<(&'static str, Value)> {
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

// ---- Argo CD's repository credentials (components/argocd, the chart's argocd.namespace) ----

/// The Argo CD Secret the component writes: the pull Secret's name, account and region.
pub(crate) const ARGOCD_SECRET: &str = "aws-ecr-token-123456789012-us-east-1";
/// The `repository` Secret beside it: its name and `-repository`.
pub(crate) const ARGOCD_REPOSITORY: &str = "aws-ecr-token-123456789012-us-east-1-repository";

/// The url a repo-creds Secret of ours holds: the host ended by a `/` (src/argocd/mod.rs).
pub(crate) fn argocd_creds_url() -> String {
    format!("{REGISTRY}/")
}
/// Its namespace in the component.
pub(crate) const ARGOCD_NAMESPACE: &str = "argocd";

/// Our Argo CD Secret as a run writes it, with `url`.
pub(crate) fn argocd_secret_body(name: &str, url: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": { "name": name, "labels": {
            "argocd.argoproj.io/secret-type": "repo-creds",
            "app.kubernetes.io/managed-by": "ecr-refresh" } },
        "type": "Opaque",
        "data": { "url": b64(url), "username": b64("AWS"), "password": b64("token"),
                  "type": b64("helm"), "enableOCI": b64("true") }
    })
}

/// The attacks on the Argo CD namespace `ns`, where our Secret is `name`. A POST aims at a
/// namespace without our Secret (`argocd_target_objects(ns, name, false)`), every other
/// request at one with it (`true`).
pub(crate) fn argocd_attacks(ns: &str, name: &str) -> Vec<Attack> {
    let creates = format!("/api/v1/namespaces/{ns}/secrets");
    let ours = format!("{creates}/{name}");
    let merge = "application/merge-patch+json";
    let names = "may only write the Argo CD Secrets";
    let with = |change: &dyn Fn(&mut Value)| {
        let mut body = argocd_secret_body(name, &argocd_creds_url());
        change(&mut body);
        body
    };
    vec![
        Attack {
            what: "Argo CD: a repository Secret pointing elsewhere",
            refused_with: names,
            method: "POST",
            path: creates.clone(),
            content_type: "application/json",
            body: json!({
                "apiVersion": "v1", "kind": "Secret",
                "metadata": { "name": "repo-elsewhere",
                              "labels": { "argocd.argoproj.io/secret-type": "repository" } },
                "type": "Opaque",
                "data": { "url": b64("https://github.com/attacker/charts"), "type": b64("git") }
            }),
        },
        Attack {
            what: "Argo CD: a cluster Secret",
            refused_with: names,
            method: "POST",
            path: creates.clone(),
            content_type: "application/json",
            body: json!({
                "apiVersion": "v1", "kind": "Secret",
                "metadata": { "name": "cluster-attacker",
                              "labels": { "argocd.argoproj.io/secret-type": "cluster" } },
                "type": "Opaque",
                "data": { "server": b64("https://attacker.example"), "config": b64("{}") }
            }),
        },
        Attack {
            what: "Argo CD: a cluster Secret under our name",
            refused_with: "labelled argocd.argoproj.io/secret-type: repo-creds",
            method: "POST",
            path: creates.clone(),
            content_type: "application/json",
            body: with(&|b| {
                b["metadata"]["labels"]["argocd.argoproj.io/secret-type"] = json!("cluster");
            }),
        },
        Attack {
            what: "Argo CD: our Secret with a url that is not our registry",
            refused_with: "may only write the url",
            method: "POST",
            path: creates.clone(),
            content_type: "application/json",
            body: argocd_secret_body(name, "ghcr.io/attacker"),
        },
        Attack {
            what: "Argo CD: our repo-creds Secret with the bare host, which every host starting with ours matches",
            refused_with: "may only write the url",
            method: "POST",
            path: creates.clone(),
            content_type: "application/json",
            body: argocd_secret_body(name, REGISTRY),
        },
        Attack {
            what: "Argo CD: our repo-creds Secret with an attacker's host that starts with ours",
            refused_with: "may only write the url",
            method: "POST",
            path: creates.clone(),
            content_type: "application/json",
            body: argocd_secret_body(name, &format!("{REGISTRY}.attacker.example/")),
        },
        Attack {
            what: "Argo CD: our repository Secret labelled repo-creds (a prefix match)",
            refused_with: "labelled argocd.argoproj.io/secret-type: repository",
            method: "POST",
            path: creates.clone(),
            content_type: "application/json",
            body: argocd_secret_body(&format!("{name}-repository"), REGISTRY),
        },
        Attack {
            what: "Argo CD: our Secret with another data key",
            refused_with: "may only create an Argo CD Secret with the data keys",
            method: "POST",
            path: creates.clone(),
            content_type: "application/json",
            body: with(&|b| b["data"]["insecure"] = json!(b64("true"))),
        },
        Attack {
            what: "Argo CD: our Secret of another type",
            refused_with: "of type Opaque",
            method: "POST",
            path: creates,
            content_type: "application/json",
            body: with(&|b| b["type"] = json!("kubernetes.io/basic-auth")),
        },
        Attack {
            what: "Argo CD: a change of our Secret's label",
            refused_with: "and keep that label",
            method: "PATCH",
            path: ours.clone(),
            content_type: merge,
            body: json!({ "metadata": { "labels": { "argocd.argoproj.io/secret-type": "repository" } } }),
        },
        Attack {
            what: "Argo CD: our Secret's url pointed elsewhere",
            refused_with: "may only write the url",
            method: "PATCH",
            path: ours.clone(),
            content_type: merge,
            body: json!({ "data": { "url": b64("https://github.com/attacker/charts") } }),
        },
        Attack {
            what: "Argo CD: someone else's label on our Secret removed",
            refused_with: "may only add or set the label app.kubernetes.io/managed-by",
            method: "PATCH",
            path: ours.clone(),
            content_type: merge,
            body: json!({ "metadata": { "labels": { "team": null } } }),
        },
        Attack {
            what: "Argo CD: argocd-secret's admin password",
            refused_with: names,
            method: "PATCH",
            path: format!("/api/v1/namespaces/{ns}/secrets/argocd-secret"),
            content_type: merge,
            body: json!({ "data": { "admin.password": b64("$2a$10$attacker") } }),
        },
        Attack {
            what: "Argo CD: a cluster Secret's server",
            refused_with: names,
            method: "PATCH",
            path: format!("/api/v1/namespaces/{ns}/secrets/cluster-prod"),
            content_type: merge,
            body: json!({ "data": { "server": b64("https://attacker.example") } }),
        },
        Attack {
            what: "Argo CD: a delete of our Secret",
            refused_with: "may only create and update its Argo CD Secrets",
            method: "DELETE",
            path: ours,
            content_type: "application/json",
            body: Value::Null,
        },
    ]
}

/// Which of [`attacks`] the manifests' own RBAC refuses before admission: it grants no
/// delete, no ServiceAccount create, no core/v1 Event and no TokenRequest.
pub(crate) fn refused_by_rbac(what: &str) -> bool {
    what == "a delete of our Secret"
        || what == "a ServiceAccount create"
        || what == "a core/v1 Event"
        || what.starts_with("a TokenRequest")
}

/// Which of the Argo CD attacks the shipped RBAC refuses before admission: the Role grants
/// get and patch on our Secret's name only, and no delete.
pub(crate) fn argocd_refused_by_rbac(what: &str) -> bool {
    what == "Argo CD: argocd-secret's admin password"
        || what == "Argo CD: a cluster Secret's server"
        || what == "Argo CD: a delete of our Secret"
}

/// The Argo CD namespace as Argo CD and others left it: its own argocd-secret, a cluster
/// Secret, and (with `ours`) our Secret with someone else's label, annotation and key.
pub(crate) fn argocd_target_objects(
    ns: &str,
    name: &str,
    ours: bool,
) -> Vec<(&'static str, Value)> {
    let mut objects = vec![
        (
            "kubectl-create",
            json!({ "apiVersion": "v1", "kind": "Namespace", "metadata": { "name": ns } }),
        ),
        (
            "argocd-server",
            json!({ "apiVersion": "v1", "kind": "Secret",
                    "metadata": { "name": "argocd-secret", "namespace": ns,
                                  "labels": { "app.kubernetes.io/part-of": "argocd" } },
                    "type": "Opaque", "data": { "admin.password": b64("$2a$10$owner") } }),
        ),
        (
            "argocd-server",
            json!({ "apiVersion": "v1", "kind": "Secret",
                    "metadata": { "name": "cluster-prod", "namespace": ns,
                                  "labels": { "argocd.argoproj.io/secret-type": "cluster" } },
                    "type": "Opaque",
                    "data": { "server": b64("https://prod.example"), "config": b64("{}") } }),
        ),
    ];
    if ours {
        let mut secret = argocd_secret_body(name, &argocd_creds_url());
        secret["metadata"]["namespace"] = json!(ns);
        secret["metadata"]["labels"]["team"] = json!("platform");
        secret["metadata"]["annotations"] = json!({ "team.example.com/owner": "alice" });
        secret["data"]["proxy"] = json!(b64("http://proxy:3128"));
        objects.push(("ecr-refresh", secret));
    }
    objects
}
