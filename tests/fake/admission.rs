//! The admission policy in manifests/ (manifests/policy/) narrows what RBAC can't: against
//! the fake API server enforcing the RBAC and the ValidatingAdmissionPolicy rendered by
//! `kubectl kustomize`, every request a stolen ServiceAccount token could make beyond a
//! run's own is refused by the policy, while full runs (create, update, adoption of a
//! kubectl-made Secret, ServiceAccounts, Events, dry run) pass under both variants. With
//! the binding removed, the same requests go through: the policy is what stops them. The
//! same holds for the ServiceAccount an overlay renames (kustomize `namespace:`,
//! `namePrefix:`, `nameSuffix:`), and the policy holds no other ServiceAccount.
//!
//! Needs `kubectl` (for its kustomize) on PATH, as .ci/validate-manifests does.

use crate::common;

use std::io::{Read, Write};
use std::net::TcpStream;

use common::attacks::{
    OPAQUE_UPDATE, WIDE_RBAC, attacks, opaque_under_our_name, pull_secret_body, target_objects,
    targets, wide_rbac,
};
use common::manifests::{
    copy as copy_of_manifests, cronjob_env, documents, render, render_overlay,
};
use common::*;
use fake_cluster::{FakeCluster, Resource};
use serde_json::{Value, json};

const DENIED: &str =
    "ValidatingAdmissionPolicy 'ecr-refresh' with binding 'ecr-refresh' denied request: ";
/// ecr-refresh's ServiceAccount as the manifests name it: (namespace, name).
const OURS: (&str, &str) = ("ecr-refresh", "ecr-refresh");
/// The rendered YAML without the ValidatingAdmissionPolicyBinding.
fn without_binding(yaml: &str) -> String {
    let kept: Vec<String> = documents(yaml)
        .into_iter()
        .filter(|d| d["kind"] != "ValidatingAdmissionPolicyBinding")
        .map(|d| serde_json::to_string(&d).expect("JSON is YAML"))
        .collect();
    assert!(kept.len() < documents(yaml).len(), "there was a binding");
    kept.join("\n---\n")
}

/// The fake enforcing the rendered RBAC and policy, and `extra` RBAC.
fn cluster(rendered: &str, extra: &str) -> FakeCluster {
    cluster_as(rendered, extra, OURS)
}

/// The same, every request made as the ServiceAccount `(namespace, name)`.
fn cluster_as(rendered: &str, extra: &str, (namespace, name): (&str, &str)) -> FakeCluster {
    let rbac = if extra.is_empty() {
        rendered.to_owned()
    } else {
        format!("{rendered}\n---\n{extra}")
    };
    FakeCluster::builder()
        .service_account(namespace, name)
        .rbac_from_yaml(&rbac)
        .admission_from_yaml(rendered)
        .start()
}

/// One HTTP request to the fake, as any client would send it: (status, body).
fn send(
    cluster: &FakeCluster,
    method: &str,
    path: &str,
    content_type: &str,
    body: &Value,
) -> (u16, Value) {
    let address = cluster.url().trim_start_matches("http://").to_owned();
    let mut stream = TcpStream::connect(&address).expect("connecting to the fake");
    let body = if body.is_null() {
        String::new()
    } else {
        body.to_string()
    };
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {address}\r\nUser-Agent: attacker/1.0\r\n\
         Content-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .expect("sending a request");
    let mut answer = String::new();
    stream
        .read_to_string(&mut answer)
        .expect("reading the answer");
    let status = answer
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status line: {answer}"));
    let body = answer
        .split_once("\r\n\r\n")
        .map(|(_, b)| b)
        .unwrap_or_default();
    (status, serde_json::from_str(body).unwrap_or(Value::Null))
}

/// The namespaces the attacks aim at, as other users left them (the one list of
/// tests/common/attacks.rs, which the real server gets too).
fn seed_targets(cluster: &FakeCluster, targets: (&str, &str)) {
    seed_objects(cluster, target_objects(targets));
}

fn seed_objects(cluster: &FakeCluster, objects: Vec<(&'static str, Value)>) {
    for (manager, object) in objects {
        match object["kind"].as_str() {
            Some("Namespace") => {
                cluster.add_namespace(object["metadata"]["name"].as_str().expect("a name"), &[])
            }
            Some("ServiceAccount") => {
                cluster.seed(Resource::ServiceAccounts, object, manager);
            }
            Some("Secret") => {
                cluster.seed(Resource::Secrets, object, manager);
            }
            kind => panic!("no seeding for {kind:?}"),
        }
    }
}

fn message(body: &Value) -> &str {
    body["message"].as_str().unwrap_or_default()
}

/// Sends every attack to a fresh cluster and returns (attack, rule, status, body).
fn launch(
    rendered: &str,
    extra_rbac: &str,
    variant: &str,
) -> Vec<(&'static str, &'static str, u16, Value)> {
    launch_as(rendered, extra_rbac, variant, OURS)
}

/// The same, every request made as the ServiceAccount `who`.
fn launch_as(
    rendered: &str,
    extra_rbac: &str,
    variant: &str,
    who: (&str, &str),
) -> Vec<(&'static str, &'static str, u16, Value)> {
    let (victim, ours) = targets(variant);
    attacks(victim, ours)
        .into_iter()
        .map(|attack| {
            let cluster = cluster_as(rendered, extra_rbac, who);
            seed_targets(&cluster, (victim, ours));
            if attack.what == OPAQUE_UPDATE {
                seed_objects(&cluster, vec![opaque_under_our_name(victim)]);
            }
            let (status, body) = send(
                &cluster,
                attack.method,
                &attack.path,
                attack.content_type,
                &attack.body,
            );
            (attack.what, attack.refused_with, status, body)
        })
        .collect()
}

#[test]
#[ignore = "needs kubectl (bash .ci/test)"]
fn every_attack_a_stolen_token_could_make_is_refused_by_the_policy_even_with_wider_rbac() {
    for variant in ["", "namespaced"] {
        let rendered = render(variant, true);
        // The shipped RBAC refuses what it can: a delete, a ServiceAccount create, a core
        // Event, a namespaced install outside its namespaces. The policy refuses the rest. With
        // RBAC granting everything on Secrets and ServiceAccounts, the policy alone
        // refuses them all.
        for (rbac, extra) in [("the manifests' RBAC", ""), ("wide RBAC", WIDE_RBAC)] {
            for (what, rule, status, body) in launch(&rendered, extra, variant) {
                let by_policy = message(&body).contains(DENIED);
                let by_rbac = message(&body).contains("cannot ");
                assert_eq!(status, 403, "{variant:?}, {rbac}: {what}: {body}");
                assert!(
                    by_policy || (extra.is_empty() && by_rbac),
                    "{variant:?}, {rbac}: {what} refused by neither: {body}"
                );
                assert!(
                    !by_policy || message(&body).contains(rule),
                    "{variant:?}, {rbac}: {what} refused for another reason than {rule:?}: {body}"
                );
                if extra.is_empty() {
                    // The shipped RBAC grants create and patch there: only delete and
                    // ServiceAccount create are left to it.
                    assert_eq!(
                        by_rbac,
                        what == "a delete of our Secret"
                            || what == "a ServiceAccount create"
                            || what == "a core/v1 Event",
                        "{what}: {body}"
                    );
                }
            }
        }
    }
}

#[test]
#[ignore = "needs kubectl (bash .ci/test)"]
fn a_denial_is_the_apiservers_status_with_the_policys_message() {
    let rendered = render("", true);
    let cluster = cluster(&rendered, "");
    seed_targets(&cluster, targets(""));

    let attack = &attacks("victim", "ours")[0];
    let (status, body) = send(
        &cluster,
        attack.method,
        &attack.path,
        attack.content_type,
        &attack.body,
    );

    assert_eq!(status, 403);
    assert_eq!(body["reason"], "Forbidden");
    assert_eq!(
        message(&body),
        format!(
            "secrets \"{SECRET}\" is forbidden: {DENIED}ecr-refresh may only create Secrets of type kubernetes.io/dockerconfigjson"
        )
    );
    assert_eq!(body["details"]["kind"], "secrets");
    assert_eq!(body["details"]["name"], SECRET);
    assert!(cluster.get(Resource::Secrets, "victim", SECRET).is_none());

    // A dry run is admitted the same way.
    let (status, body) = send(
        &cluster,
        "POST",
        "/api/v1/namespaces/victim/secrets?dryRun=All",
        "application/json",
        &attack.body,
    );
    assert_eq!(status, 403, "{body}");
    assert!(message(&body).contains(DENIED));
}

#[test]
#[ignore = "needs kubectl (bash .ci/test)"]
fn without_the_binding_the_attacks_go_through_as_on_a_real_cluster() {
    let rendered = without_binding(&render("", true));
    for (what, _, status, body) in launch(&rendered, WIDE_RBAC, "") {
        assert!(
            (200..300).contains(&status),
            "without the binding, {what} is admitted: {status} {body}"
        );
    }
    // The first of them with the shipped RBAC alone: a token for any ServiceAccount.
    let cluster = cluster(&rendered, "");
    seed_targets(&cluster, targets(""));
    let attack = &attacks("victim", "ours")[0];
    let (status, body) = send(
        &cluster,
        attack.method,
        &attack.path,
        attack.content_type,
        &attack.body,
    );
    assert_eq!(status, 201, "{body}");
    assert_eq!(
        cluster.get(Resource::Secrets, "victim", SECRET).unwrap()["type"],
        "kubernetes.io/service-account-token"
    );
}

/// A previous run's Secret (`updated`), a Secret from `kubectl create secret
/// docker-registry | kubectl apply` holding a copy of the old password (`adopted`), and a
/// namespace with none (`fresh`); every namespace's `default` ServiceAccount with
/// someone else's imagePullSecrets entry.
fn seed_run(h: &Harness, namespaces: [&str; 3]) {
    let [updated, adopted, fresh] = namespaces;
    for ns in namespaces {
        h.cluster.add_namespace(ns, &[]);
        h.cluster.seed(
            Resource::ServiceAccounts,
            json!({ "metadata": { "name": "default", "namespace": ns },
                    "imagePullSecrets": [{ "name": "team-creds" }] }),
            "kube-controller-manager",
        );
    }
    let _ = fresh;
    h.seed_secret(
        updated,
        "ecr-refresh",
        json!({
            "metadata": {
                "labels": { "app.kubernetes.io/managed-by": "ecr-refresh" },
                "annotations": { "ecr-refresh/registries": REGISTRY, "ecr-refresh/token-expires-at": "2020-01-01T00:00:00Z" }
            },
            "type": "kubernetes.io/dockerconfigjson",
            "data": { ".dockerconfigjson": b64(r#"{"auths":{}}"#) }
        }),
    );
    let value = format!(
        r#"{{"auths":{{"{REGISTRY}":{{"username":"AWS","password":"OLD","auth":"{}"}}}}}}"#,
        b64("AWS:OLD")
    );
    let last_applied = json!({
        "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/dockerconfigjson",
        "metadata": { "name": SECRET, "namespace": adopted },
        "data": { ".dockerconfigjson": b64(&value) }
    })
    .to_string();
    h.seed_secret(
        adopted,
        "kubectl-client-side-apply",
        json!({
            "metadata": { "annotations": { "kubectl.kubernetes.io/last-applied-configuration": last_applied } },
            "type": "kubernetes.io/dockerconfigjson",
            "data": { ".dockerconfigjson": b64(&value) }
        }),
    );
}

/// Requests answered with anything but success or a 404 read.
fn refused(h: &Harness) -> Vec<String> {
    h.cluster
        .requests()
        .into_iter()
        .filter(|r| r.status >= 400 && !(r.status == 404 && r.method == "GET"))
        .map(|r| format!("{} {} {}: {}", r.status, r.method, r.path, r.body))
        .collect()
}

fn full_run_passes(variant: &str, namespaces: [&str; 3]) {
    let rendered = render(variant, true);
    let h = Harness::with(cluster(&rendered, ""));
    seed_run(&h, namespaces);
    let env = cronjob_env(&rendered);
    assert!(
        env.iter()
            .any(|(k, v)| k == "ECR_REFRESH_SERVICE_ACCOUNTS" && v == "default"),
        "the component sets ECR_REFRESH_SERVICE_ACCOUNTS: {env:?}"
    );
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let mut dry_env = env.clone();
    dry_env.push(("ECR_REFRESH_DRY_RUN", "true"));

    let dry = h.run(&dry_env);
    let first = h.run(&env);
    let second = h.run(&env);

    dry.expect_code(0);
    first.expect_code(0);
    second.expect_code(0);
    assert_eq!(
        refused(&h),
        Vec::<String>::new(),
        "{variant:?}: refused requests"
    );
    let [updated, adopted, fresh] = namespaces;
    assert_eq!(dry.outcome(fresh), "would-create");
    assert_eq!(first.outcome(updated), "updated");
    assert_eq!(first.outcome(adopted), "updated");
    assert_eq!(first.outcome(fresh), "created");
    assert_eq!(second.outcome(fresh), "updated");
    let annotations = h.secret(adopted).unwrap()["metadata"]["annotations"].clone();
    assert!(
        annotations
            .get("kubectl.kubernetes.io/last-applied-configuration")
            .is_none(),
        "the copy of the old password is gone: {annotations}"
    );
    for ns in namespaces {
        let account = h
            .cluster
            .get(Resource::ServiceAccounts, ns, "default")
            .unwrap();
        assert_eq!(
            account["imagePullSecrets"],
            json!([{ "name": "team-creds" }, { "name": SECRET }]),
            "{ns}"
        );
    }
    // Every kind of write the run makes went through admission.
    let requests = h.cluster.requests();
    for (method, part) in [
        ("POST", "/secrets"),
        ("PATCH", "/secrets/"),
        ("PATCH", "/serviceaccounts/default"),
    ] {
        assert!(
            requests.iter().any(|r| r.method == method
                && r.path.contains(part)
                && r.query.contains("dryRun=All")),
            "{variant:?}: a dry-run {method} {part}"
        );
        assert!(
            requests.iter().any(|r| r.method == method
                && r.path.contains(part)
                && !r.query.contains("dryRun")),
            "{variant:?}: a {method} {part}"
        );
    }
    assert!(
        requests.iter().any(
            |r| r.content_type.as_deref() == Some("application/json-patch+json")
                && r.path.ends_with(&format!("/secrets/{SECRET}"))
        ),
        "the last-applied removal"
    );
}

#[test]
#[ignore = "needs kubectl (bash .ci/test)"]
fn a_full_run_passes_under_the_cluster_wide_manifests_and_policy() {
    full_run_passes("", ["team-updated", "team-adopted", "team-fresh"]);
}

#[test]
#[ignore = "needs kubectl (bash .ci/test)"]
fn a_full_run_passes_under_the_namespaced_manifests_and_policy() {
    let rendered = render("namespaced", true);
    let namespaces = cronjob_env(&rendered)
        .into_iter()
        .find(|(k, _)| k == "ECR_REFRESH_NAMESPACES")
        .map(|(_, v)| v)
        .expect("the namespaced overlay names its namespaces");
    assert_eq!(namespaces, "team-a,team-b");
    // The overlay's two namespaces, and a third only the cluster-wide variant could reach.
    let h = Harness::with(cluster(&rendered, ""));
    seed_run(&h, ["team-a", "team-b", "team-c"]);
    let env: Vec<(String, String)> = cronjob_env(&rendered);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let mut dry_env = env.clone();
    dry_env.push(("ECR_REFRESH_DRY_RUN", "true"));

    let dry = h.run(&dry_env);
    let first = h.run(&env);

    dry.expect_code(0);
    first.expect_code(0);
    assert_eq!(refused(&h), Vec::<String>::new(), "refused requests");
    assert_eq!(first.outcome("team-a"), "updated");
    assert_eq!(first.outcome("team-b"), "updated");
    let annotations = h.secret("team-b").unwrap()["metadata"]["annotations"].clone();
    assert!(
        annotations
            .get("kubectl.kubernetes.io/last-applied-configuration")
            .is_none()
    );
    for ns in ["team-a", "team-b"] {
        let account = h
            .cluster
            .get(Resource::ServiceAccounts, ns, "default")
            .unwrap();
        assert_eq!(
            account["imagePullSecrets"],
            json!([{ "name": "team-creds" }, { "name": SECRET }]),
            "{ns}"
        );
    }
    // A create in a namespace of the overlay, under both.
    h.cluster.delete(Resource::Secrets, "team-a", SECRET);
    let again = h.run(&env);
    again.expect_code(0);
    assert_eq!(again.outcome("team-a"), "created");
    assert_eq!(refused(&h), Vec::<String>::new(), "refused requests");
}

#[test]
#[ignore = "needs kubectl (bash .ci/test)"]
fn without_the_component_a_run_sends_no_service_account_request_and_nothing_is_refused() {
    for variant in ["", "namespaced"] {
        let rendered = render(variant, false);
        let granted_accounts = documents(&rendered).iter().any(|d| {
            d["rules"].as_array().is_some_and(|rules| {
                rules
                    .iter()
                    .any(|r| r.to_string().contains("serviceaccounts"))
            })
        });
        assert!(
            !granted_accounts,
            "{variant:?}: no ServiceAccount rights by default"
        );
        let env = cronjob_env(&rendered);
        assert!(
            env.iter()
                .any(|(k, v)| k == "ECR_REFRESH_SERVICE_ACCOUNTS" && v.is_empty()),
            "{env:?}"
        );
        let h = Harness::with(cluster(&rendered, ""));
        seed_run(&h, ["team-a", "team-b", "team-c"]);
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();

        let run = h.run(&env);

        run.expect_code(0);
        assert_eq!(refused(&h), Vec::<String>::new(), "{variant:?}");
        let account_requests: Vec<String> = h
            .cluster
            .requests()
            .into_iter()
            .filter(|r| r.path.contains("serviceaccounts"))
            .map(|r| format!("{} {}", r.method, r.path))
            .collect();
        assert_eq!(account_requests, Vec::<String>::new(), "{variant:?}");
        assert_eq!(run.outcome("team-a"), "updated");
    }
}

#[test]
#[ignore = "needs kubectl (bash .ci/test)"]
fn a_renamed_secret_and_namespace_are_followed_by_the_rbac_and_the_policy() {
    // As the book's kustomize page renames it: from an overlay of the user's, with the
    // component secret-name and a ConfigMap of the overlay's own; the clone is untouched.
    let copy = copy_of_manifests();
    let overlay = copy.path().join("overlay");
    std::fs::create_dir_all(&overlay).unwrap();
    write(
        &overlay.join("kustomization.yaml"),
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n\
         namespace: platform\n\
         resources: [../manifests, secret-name.yaml]\n\
         components: [../manifests/components/service-accounts, ../manifests/components/secret-name]\n",
    );
    write(
        &overlay.join("secret-name.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ecr-refresh-secret-name}\n\
         data: {name: team-pull}\n",
    );

    let renamed = common::manifests::kustomize(&overlay);
    let held = documents(&renamed)
        .into_iter()
        .find(|d| {
            d["kind"] == "ClusterRoleBinding" && d["metadata"]["name"] == "ecr-refresh-admission"
        })
        .expect("the binding that puts the ServiceAccount under the policy");
    assert_eq!(
        held["subjects"],
        json!([{ "kind": "ServiceAccount", "name": "ecr-refresh", "namespace": "platform" }])
    );
    let policy = documents(&renamed)
        .into_iter()
        .find(|d| d["kind"] == "ValidatingAdmissionPolicy")
        .expect("a policy");
    assert_eq!(policy["spec"]["variables"][0]["expression"], "'team-pull'");
    let role = documents(&renamed)
        .into_iter()
        .find(|d| d["kind"] == "ClusterRole" && d["metadata"]["name"] == "ecr-refresh")
        .unwrap();
    assert_eq!(role["rules"][0]["resourceNames"], json!(["team-pull"]));

    let rendered = renamed;
    let h = Harness::with(cluster_as(&rendered, "", ("platform", "ecr-refresh")));
    h.namespaces(&["team-a"]);
    let env = cronjob_env(&rendered);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    assert!(env.contains(&("ECR_REFRESH_SECRET_NAME", "team-pull")));

    let run = h.run(&env);

    run.expect_code(0);
    assert_eq!(run.outcome("team-a"), "created");
    assert!(
        h.cluster
            .get(Resource::Secrets, "team-a", "team-pull")
            .is_some()
    );
    assert_eq!(refused(&h), Vec::<String>::new());
    // The old name is now one the policy refuses.
    let (status, body) = send(
        &h.cluster,
        "POST",
        "/api/v1/namespaces/team-a/secrets",
        "application/json",
        &pull_secret_body(SECRET),
    );
    assert_eq!(status, 403, "{body}");
    assert!(
        message(&body).contains("may only write the Secret named team-pull"),
        "{body}"
    );
}

/// The overlays a user writes to install elsewhere, and the ServiceAccount each makes:
/// (kustomization lines, namespace, name).
const OVERLAYS: [(&str, &str, &str); 4] = [
    ("namespace: platform", "platform", "ecr-refresh"),
    ("namePrefix: prod-", "ecr-refresh", "prod-ecr-refresh"),
    ("nameSuffix: -blue", "ecr-refresh", "ecr-refresh-blue"),
    (
        "namespace: platform\nnamePrefix: prod-\nnameSuffix: -blue",
        "platform",
        "prod-ecr-refresh-blue",
    ),
];

/// The rendered ServiceAccount (namespace, name), and the policy's denial prefix under the
/// names the overlay gave the policy and its binding.
fn renamed(rendered: &str) -> ((String, String), String) {
    let docs = documents(rendered);
    let of = |kind: &str| {
        docs.iter()
            .find(|d| d["kind"] == kind)
            .unwrap_or_else(|| panic!("a {kind}"))
            .clone()
    };
    let account = of("ServiceAccount");
    let binding = of("ValidatingAdmissionPolicyBinding");
    let policy = of("ValidatingAdmissionPolicy");
    assert_eq!(
        binding["spec"]["policyName"], policy["metadata"]["name"],
        "the binding names the policy"
    );
    let denied = format!(
        "ValidatingAdmissionPolicy '{}' with binding '{}' denied request: ",
        policy["metadata"]["name"].as_str().unwrap(),
        binding["metadata"]["name"].as_str().unwrap()
    );
    let who = (
        account["metadata"]["namespace"]
            .as_str()
            .unwrap()
            .to_owned(),
        account["metadata"]["name"].as_str().unwrap().to_owned(),
    );
    (who, denied)
}

#[test]
#[ignore = "needs kubectl (bash .ci/test)"]
fn every_attack_as_the_service_account_an_overlay_renames_is_refused_by_the_policy() {
    for variant in ["", "namespaced"] {
        for (fields, namespace, name) in OVERLAYS {
            // The namespaced variant's Roles live in the target namespaces: kustomize refuses
            // to move them all into one (an ID conflict), loudly.
            if variant == "namespaced" && fields.contains("namespace:") {
                continue;
            }
            let rendered = render_overlay(variant, fields, true);
            let ((ns, sa), denied) = renamed(&rendered);
            assert_eq!((ns.as_str(), sa.as_str()), (namespace, name), "{fields}");
            let who = (namespace, name);
            // RBAC granting everything on what the policy guards: the policy alone refuses.
            for (what, rule, status, body) in launch_as(&rendered, &wide_rbac(who), variant, who) {
                assert_eq!(status, 403, "{variant:?}, {fields:?}: {what}: {body}");
                assert!(
                    message(&body).contains(&denied) && message(&body).contains(rule),
                    "{variant:?}, {fields:?}: {what} not refused by the policy for {rule:?}: {body}"
                );
            }
        }
    }
}

#[test]
#[ignore = "needs kubectl (bash .ci/test)"]
fn a_full_run_as_the_renamed_service_account_passes_and_its_warning_event_is_admitted() {
    for (fields, namespace, name) in OVERLAYS {
        let rendered = render_overlay("", fields, true);
        let h = Harness::with(cluster_as(&rendered, "", (namespace, name)));
        seed_run(&h, ["team-updated", "team-adopted", "team-fresh"]);
        // A namespace that fails (someone's Opaque Secret under our name): its Event.
        h.cluster.add_namespace("team-broken", &[]);
        h.seed_secret(
            "team-broken",
            "kubectl-create",
            json!({ "type": "Opaque", "data": { "token": b64("someone else's") } }),
        );
        let env = cronjob_env(&rendered);
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let mut dry_env = env.clone();
        dry_env.push(("ECR_REFRESH_DRY_RUN", "true"));

        let dry = h.run(&dry_env);
        let run = h.run(&env);

        dry.expect_code(1);
        run.expect_code(1);
        assert_eq!(
            refused(&h),
            Vec::<String>::new(),
            "{fields:?}: refused requests"
        );
        assert_eq!(run.outcome("team-fresh"), "created", "{fields:?}");
        assert_eq!(run.outcome("team-updated"), "updated", "{fields:?}");
        assert_eq!(run.outcome("team-broken"), "failed", "{fields:?}");
        let events = h.cluster.events("team-broken");
        assert_eq!(
            events.len(),
            1,
            "{fields:?}: the real run's Event only: {events:?}"
        );
        assert_eq!(events[0]["reason"], "WrongSecretType");
        let posts: Vec<String> = h
            .cluster
            .requests()
            .into_iter()
            .filter(|r| r.method == "POST" && r.path.contains("/events"))
            .map(|r| format!("{} {}", r.status, r.query.contains("dryRun=All")))
            .collect();
        assert_eq!(posts, ["201 true", "201 false"], "{fields:?}");
        assert_eq!(
            h.cluster
                .get(Resource::ServiceAccounts, "team-fresh", "default")
                .unwrap()["imagePullSecrets"],
            json!([{ "name": "team-creds" }, { "name": SECRET }])
        );
    }
}

// Whom the policy holds (another ServiceAccount with the same rights; one granted
// everything, which is exempt): on the real server, tests/real/admission.rs,
// `the_policy_holds_no_other_service_account_and_not_one_granted_everything`.

// ---- Argo CD's repository credentials (components/argocd) ----

const ARGOCD_DENIED: &str = "ValidatingAdmissionPolicy 'ecr-refresh-argocd' with binding 'ecr-refresh-argocd' denied request: ";

#[test]
#[ignore = "needs kubectl (bash .ci/test)"]
fn every_argo_cd_attack_is_refused_by_the_argocd_policy_even_with_wider_rbac() {
    use common::attacks::{
        ARGOCD_NAMESPACE, ARGOCD_SECRET, argocd_attacks, argocd_refused_by_rbac,
        argocd_target_objects,
    };
    for variant in ["", "namespaced"] {
        let rendered = common::manifests::render_component(variant, Some("argocd"));
        for (rbac, extra) in [("the manifests' RBAC", ""), ("wide RBAC", WIDE_RBAC)] {
            for attack in argocd_attacks(ARGOCD_NAMESPACE, ARGOCD_SECRET) {
                let cluster = cluster(&rendered, extra);
                seed_objects(
                    &cluster,
                    argocd_target_objects(ARGOCD_NAMESPACE, ARGOCD_SECRET, attack.method != "POST"),
                );
                let (status, body) = send(
                    &cluster,
                    attack.method,
                    &attack.path,
                    attack.content_type,
                    &attack.body,
                );
                let what = attack.what;
                assert_eq!(status, 403, "{variant:?}, {rbac}: {what}: {body}");
                if extra.is_empty() && argocd_refused_by_rbac(what) {
                    assert!(
                        message(&body).contains("cannot "),
                        "{variant:?}, {rbac}: {what} is RBAC's to refuse: {body}"
                    );
                } else {
                    assert!(
                        message(&body).contains(ARGOCD_DENIED)
                            && message(&body).contains(attack.refused_with),
                        "{variant:?}, {rbac}: {what} refused by the Argo CD policy for {:?}: {body}",
                        attack.refused_with
                    );
                }
            }
        }
    }
}

#[test]
#[ignore = "needs kubectl (bash .ci/test)"]
fn a_full_run_with_argo_cd_passes_under_the_component_and_both_policies() {
    use common::attacks::{ARGOCD_NAMESPACE, ARGOCD_SECRET, argocd_target_objects};
    for variant in ["", "namespaced"] {
        let rendered = common::manifests::render_component(variant, Some("argocd"));
        let h = Harness::with(cluster(&rendered, ""));
        seed_run(&h, ["team-a", "team-b", "team-c"]);
        seed_objects(
            &h.cluster,
            argocd_target_objects(ARGOCD_NAMESPACE, ARGOCD_SECRET, false),
        );
        let env: Vec<(String, String)> = cronjob_env(&rendered);
        assert!(
            env.iter()
                .any(|(k, v)| k == "ECR_REFRESH_ARGOCD_NAMESPACE" && v == ARGOCD_NAMESPACE),
            "the component sets ECR_REFRESH_ARGOCD_NAMESPACE: {env:?}"
        );
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let mut dry_env = env.clone();
        dry_env.push(("ECR_REFRESH_DRY_RUN", "true"));
        let mut every_run = env.clone();
        every_run.push(("ECR_REFRESH_RENEW_BEFORE", "12h"));

        let dry = h.run(&dry_env);
        let first = h.run(&env);
        let second = h.run(&every_run);

        for run in [&dry, &first, &second] {
            run.expect_code(0);
        }
        assert_eq!(
            refused(&h),
            Vec::<String>::new(),
            "{variant:?}: refused requests"
        );
        let outcome = |run: &Run| -> String {
            run.lines
                .iter()
                .find(|l| l["secret"] == ARGOCD_SECRET && l["argocd"] == true)
                .and_then(|l| l["outcome"].as_str())
                .unwrap_or_else(|| panic!("no line for {ARGOCD_SECRET}:\n{}", run.stdout))
                .to_owned()
        };
        assert_eq!(outcome(&dry), "would-create", "{variant:?}");
        assert_eq!(outcome(&first), "created", "{variant:?}");
        assert_eq!(outcome(&second), "updated", "{variant:?}");
        let secret = h
            .cluster
            .get(Resource::Secrets, ARGOCD_NAMESPACE, ARGOCD_SECRET)
            .expect("the Argo CD Secret");
        assert_eq!(
            secret["metadata"]["labels"]["argocd.argoproj.io/secret-type"],
            "repo-creds"
        );
        // Argo CD's own Secrets are as they were.
        for name in ["argocd-secret", "cluster-prod"] {
            assert_eq!(
                h.cluster
                    .history(Resource::Secrets, ARGOCD_NAMESPACE, name)
                    .len(),
                1,
                "{name} untouched"
            );
        }
    }
}
