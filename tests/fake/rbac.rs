//! The RBAC in manifests/ grants everything a run needs and nothing it doesn't use: a full
//! refresh passes with the fake API server enforcing it, and fails when any verb is taken out.
//! ServiceAccount rights come only from the service-accounts component; pod rights only to
//! the check's own ServiceAccount, from the check components. The fake grants only
//! roles bound to ecr-refresh's ServiceAccount, so every test loads the bindings with the
//! roles, as `kubectl kustomize` renders them. (The admission policy: tests/real/admission.rs and overlays.rs.)

use crate::common;

use common::manifests::{as_env, cronjob_env, documents, render, render_with_components, yaml};
use common::*;
use fake_cluster::{FakeCluster, Resource};
use serde_json::{Value, json};

/// The rendered documents of these kinds.
fn of_kinds(rendered: &str, kinds: &[&str]) -> Vec<Value> {
    documents(rendered)
        .into_iter()
        .filter(|d| kinds.iter().any(|k| d["kind"] == *k))
        .collect()
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(str::to_owned)
        .collect()
}

/// Every verb a role grants, as (resource, verb).
fn grants(role: &Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for rule in role["rules"].as_array().expect("rules") {
        for resource in strings(&rule["resources"]) {
            for verb in strings(&rule["verbs"]) {
                out.push((resource.clone(), verb));
            }
        }
    }
    out
}

/// The role with one verb taken out of every rule on one resource.
fn without(role: &Value, resource: &str, verb: &str) -> Value {
    let mut role = role.clone();
    for rule in role["rules"].as_array_mut().expect("rules") {
        if strings(&rule["resources"]).iter().any(|r| r == resource) {
            let kept: Vec<String> = strings(&rule["verbs"])
                .into_iter()
                .filter(|v| v != verb)
                .collect();
            rule["verbs"] = json!(kept);
        }
    }
    role
}

fn rbac_cluster(docs: &[Value]) -> Harness {
    Harness::with(FakeCluster::builder().rbac_from_yaml(&yaml(docs)).start())
}

/// A cluster where a full run uses every verb: a namespace to create in, one whose Secret
/// exists (patch), and a ServiceAccount to attach to. `role` is bound as in manifests/.
fn scenario(role: &Value, binding: &Value) -> Harness {
    let h = rbac_cluster(&[role.clone(), binding.clone()]);
    seed(&h, &["team-b", "team-a"]);
    h
}

/// The cluster-wide variant with the service-accounts component: its ClusterRole and
/// ClusterRoleBinding, and the CronJob's variables.
fn cluster_wide_with_accounts() -> (Value, Value, Vec<(String, String)>) {
    let rendered = render("", true);
    let role = of_kinds(&rendered, &["ClusterRole"]).remove(0);
    let binding = of_kinds(&rendered, &["ClusterRoleBinding"]).remove(0);
    (role, binding, cronjob_env(&rendered))
}

#[test]
#[ignore = "needs kubectl (bash .ci/test)"]
fn the_cluster_role_reads_and_patches_no_secret_but_ours() {
    let rendered = render("", false);
    let h = rbac_cluster(&of_kinds(&rendered, &["ClusterRole", "ClusterRoleBinding"]));
    seed(&h, &["team-b", "team-a"]);

    let run = h.run(&[("ECR_REFRESH_SECRET_NAME", "other-pull-secret")]);

    run.expect_code(1);
    assert_eq!(run.outcome("team-a"), "failed");
    assert!(
        run.line("team-a")["error"]
            .as_str()
            .unwrap()
            .contains("forbidden")
    );
    let refused: Vec<_> = h
        .cluster
        .requests()
        .into_iter()
        .filter(|r| r.status == 403)
        .map(|r| r.path)
        .collect();
    // The one list of that name is refused too (the run then reads by name, refused again).
    assert_eq!(refused[0], "/api/v1/secrets", "{refused:?}");
    assert!(
        refused[1..]
            .iter()
            .all(|p| p.ends_with("/secrets/other-pull-secret")),
        "{refused:?}"
    );
}

#[test]
#[ignore = "needs kubectl (bash .ci/test)"]
fn every_verb_the_cluster_role_grants_is_one_a_run_needs() {
    let (role, binding, env) = cluster_wide_with_accounts();
    let granted = grants(&role);
    assert_eq!(
        granted.len(),
        9,
        "secrets get, list, patch, create; namespaces list; events create; with the component, \
         serviceaccounts get, list, patch: {granted:?}"
    );
    for (resource, verb) in granted {
        // Events are best effort: without create on them a run passes and warns once
        // (tests/fake/events.rs).
        if resource == "events" {
            continue;
        }
        let h = scenario(&without(&role, &resource, &verb), &binding);
        // get is the per-namespace path's read (literal names, or a refused list), and the
        // re-read after a conflict: a run by the list needs none where nothing conflicts.
        let mut run_env = as_env(&env);
        if verb == "get" {
            run_env.retain(|(k, _)| *k != "ECR_REFRESH_NAMESPACES");
            run_env.push(("ECR_REFRESH_NAMESPACES", "team-a,team-b"));
        }

        let run = h.run(&run_env);

        // Without list on the Secrets or the ServiceAccounts, a run reads them one namespace
        // at a time: it passes, after the one refused list.
        if verb == "list" && resource != "namespaces" {
            run.expect_code(0);
            assert_eq!(
                refused(&h),
                [format!("GET /api/v1/{resource}")],
                "without list on {resource}"
            );
            let by_name = h
                .cluster
                .requests()
                .iter()
                .filter(|r| r.method == "GET" && r.path.starts_with("/api/v1/namespaces/"))
                .filter(|r| r.path.contains(&format!("/{resource}/")))
                .count();
            assert!(by_name > 0, "{resource} read by name");
            continue;
        }

        assert_ne!(
            run.code, 0,
            "the run passed without {verb} on {resource}:\n{}",
            run.stdout
        );
        let refused = h
            .cluster
            .requests()
            .into_iter()
            .filter(|r| r.status == 403)
            .count();
        assert!(
            refused > 0,
            "without {verb} on {resource}, a request was refused"
        );
    }
}

#[test]
#[ignore = "needs kubectl (bash .ci/test)"]
fn without_the_component_no_service_account_is_granted_and_with_it_only_default() {
    for variant in ["", "namespaced"] {
        let plain = render(variant, false);
        let roles = of_kinds(&plain, &["ClusterRole", "Role"]);
        assert!(!roles.is_empty());
        for role in &roles {
            assert!(
                grants(role).iter().all(|(r, _)| r != "serviceaccounts"),
                "{variant:?}: {role}"
            );
        }
        assert!(
            cronjob_env(&plain)
                .iter()
                .any(|(k, v)| k == "ECR_REFRESH_SERVICE_ACCOUNTS" && v.is_empty())
        );

        let with = render(variant, true);
        // The roles of the target namespaces (and the ClusterRole), not the policy's marker
        // role (manifests/policy/clusterrole.yaml) nor the namespaced variant's Role for the
        // summary Event in its own namespace.
        let granting: Vec<Value> = of_kinds(&with, &["ClusterRole", "Role"])
            .into_iter()
            .filter(|r| r["metadata"]["name"] == "ecr-refresh")
            .collect();
        assert_eq!(granting.len(), if variant.is_empty() { 1 } else { 2 });
        for role in granting {
            let rules: Vec<&Value> = role["rules"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|r| strings(&r["resources"]).contains(&"serviceaccounts".to_owned()))
                .collect();
            assert_eq!(rules.len(), 1, "{variant:?}: {role}");
            assert_eq!(strings(&rules[0]["resourceNames"]), ["default"]);
            // The ClusterRole lists them too: each name's in one list.
            let verbs: &[&str] = if role["kind"] == "ClusterRole" {
                &["get", "list", "patch"]
            } else {
                &["get", "patch"]
            };
            assert_eq!(strings(&rules[0]["verbs"]), verbs);
        }
        assert!(
            cronjob_env(&with)
                .iter()
                .any(|(k, v)| k == "ECR_REFRESH_SERVICE_ACCOUNTS" && v == "default")
        );
    }
}

#[test]
#[ignore = "needs kubectl (bash .ci/test)"]
fn a_service_account_the_component_does_not_name_is_refused() {
    let (role, binding, _) = cluster_wide_with_accounts();
    let h = scenario(&role, &binding);
    h.cluster.seed(
        Resource::ServiceAccounts,
        json!({ "metadata": { "name": "builder", "namespace": "team-a" } }),
        "kubectl-create",
    );

    let run = h.run(&[("ECR_REFRESH_SERVICE_ACCOUNTS", "builder")]);

    assert_ne!(run.code, 0, "{}", run.stdout);
    assert_eq!(
        h.statuses("GET", "/serviceaccounts/builder"),
        [403, 403],
        "one refused read in each namespace"
    );
}

/// Namespaces with a `default` ServiceAccount; the first holds a Secret made by the
/// `kubectl create secret docker-registry ... | kubectl apply -f -` loop, to be adopted.
fn seed(h: &Harness, namespaces: &[&str]) {
    for ns in namespaces {
        h.cluster.add_namespace(ns, &[]);
        h.cluster.seed(
            Resource::ServiceAccounts,
            json!({ "metadata": { "name": "default", "namespace": ns } }),
            "kube-controller-manager",
        );
    }
    let old = r#"{"auths":{"https://123456789012.dkr.ecr.us-east-1.amazonaws.com":{"username":"AWS","password":"old"}}}"#;
    h.seed_secret(
        namespaces[0],
        "kubectl-client-side-apply",
        json!({
            "type": "kubernetes.io/dockerconfigjson",
            "metadata": { "annotations": {
                "kubectl.kubernetes.io/last-applied-configuration": "{\"data\":{\"password\":\"old\"}}"
            } },
            "data": { ".dockerconfigjson": b64(old) }
        }),
    );
}

fn refused(h: &Harness) -> Vec<String> {
    h.cluster
        .requests()
        .into_iter()
        .filter(|r| r.status == 403)
        .map(|r| format!("{} {}", r.method, r.path))
        .collect()
}

const RBAC_KINDS: &[&str] = &["ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"];

#[test]
#[ignore = "needs kubectl (bash .ci/test)"]
fn a_run_needs_no_right_the_cluster_wide_clusterrole_does_not_grant() {
    let rendered = render("", true);
    let h = rbac_cluster(&of_kinds(&rendered, RBAC_KINDS));
    seed(&h, &["adopted", "fresh", "gone-mid-run"]);
    h.seed_secret(
        "gone-mid-run",
        "ecr-refresh",
        json!({ "type": "kubernetes.io/dockerconfigjson", "data": { ".dockerconfigjson": b64(r#"{"auths":{}}"#) } }),
    );
    h.cluster
        .delete_after_next_get(Resource::Secrets, "gone-mid-run", SECRET);
    let env = cronjob_env(&rendered);
    let env = as_env(&env);
    let mut dry_env = env.clone();
    dry_env.push(("ECR_REFRESH_DRY_RUN", "true"));

    let dry = h.run(&dry_env);
    let run = h.run(&env);

    dry.expect_code(0);
    run.expect_code(0);
    assert_eq!(
        refused(&h),
        Vec::<String>::new(),
        "requests the ClusterRole refused"
    );
    assert_eq!(run.outcome("adopted"), "updated");
    assert_eq!(run.outcome("fresh"), "created");
    for ns in ["adopted", "fresh", "gone-mid-run"] {
        assert!(h.secret(ns).is_some(), "{ns}");
    }
}

#[test]
#[ignore = "needs kubectl (bash .ci/test)"]
fn a_run_over_the_namespaced_variants_namespaces_needs_only_their_roles() {
    let rendered = render("namespaced", true);
    let h = rbac_cluster(&of_kinds(&rendered, RBAC_KINDS));
    seed(&h, &["team-a", "team-b", "team-c"]);
    let env = cronjob_env(&rendered);
    assert!(env.contains(&("ECR_REFRESH_NAMESPACES".into(), "team-a,team-b".into())));
    let env = as_env(&env);
    let mut dry_env = env.clone();
    dry_env.push(("ECR_REFRESH_DRY_RUN", "true"));

    let dry = h.run(&dry_env);
    let run = h.run(&env);

    dry.expect_code(0);
    run.expect_code(0);
    assert_eq!(
        refused(&h),
        Vec::<String>::new(),
        "requests the Roles refused"
    );
    assert_eq!(run.outcome("team-a"), "updated");
    assert_eq!(run.outcome("team-b"), "created");
    assert!(h.secret("team-c").is_none());
}

#[test]
#[ignore = "needs kubectl (bash .ci/test)"]
fn with_only_the_namespaced_roles_a_glob_is_refused_before_anything_is_written() {
    let rendered = render("namespaced", false);
    let h = rbac_cluster(&of_kinds(&rendered, RBAC_KINDS));
    seed(&h, &["team-a", "team-b"]);

    let run = h.run(&[("ECR_REFRESH_NAMESPACES", "team-*")]);

    run.expect_code(3);
    assert!(h.secret("team-b").is_none());
}

#[test]
#[ignore = "needs kubectl (bash .ci/test)"]
fn a_run_fails_when_the_binding_is_missing_or_names_another_subject() {
    let (role, binding, env) = cluster_wide_with_accounts();
    assert_eq!(binding["subjects"][0]["namespace"], "ecr-refresh");
    let mut elsewhere = binding.clone();
    elsewhere["subjects"][0]["namespace"] = json!("default");
    for (case, rbac) in [
        ("the ClusterRole without its binding", vec![role.clone()]),
        (
            "a binding to the ServiceAccount of namespace default",
            vec![role.clone(), elsewhere],
        ),
    ] {
        let h = rbac_cluster(&rbac);
        seed(&h, &["adopted", "fresh"]);
        let before = h.secret("adopted");

        let run = h.run(&as_env(&env));

        assert_eq!(run.code, 3, "{case}:\n{}{}", run.stdout, run.stderr);
        // The two lists go out side by side (cluster::reads), in either order.
        let mut refused = refused(&h);
        refused.sort();
        assert_eq!(
            refused,
            ["GET /api/v1/namespaces", "GET /api/v1/secrets"],
            "{case}: the Secret list and the namespace list are refused, and nothing is tried after"
        );
        assert_eq!(h.secret("adopted"), before, "{case}");
        assert!(h.secret("fresh").is_none(), "{case}");
    }

    // The namespaced Roles without their RoleBindings grant nothing either.
    let h = rbac_cluster(&of_kinds(&render("namespaced", true), &["Role"]));
    seed(&h, &["team-a", "team-b"]);

    let run = h.run(&[("ECR_REFRESH_NAMESPACES", "team-a,team-b")]);

    assert_ne!(run.code, 0, "{}", run.stdout);
    assert!(!refused(&h).is_empty());
    assert!(h.secret("team-b").is_none());
}

/// The check components give the check its own ServiceAccount and roles, ecr-refresh-check:
/// reads only, and the refresh's roles gain no pod right (its token reads no pod spec).
#[test]
#[ignore = "needs kubectl (bash .ci/test)"]
fn the_check_components_give_the_check_its_own_read_only_account_and_the_refresh_none() {
    let reads = [
        ("secrets", "get"),
        ("secrets", "list"),
        ("pods", "get"),
        ("pods", "list"),
        ("serviceaccounts", "get"),
        ("namespaces", "list"),
    ];
    for (variant, component, roles) in [
        ("", "components/check", 1),
        ("namespaced", "components/check-namespaced", 2),
    ] {
        let rendered = render_with_components(variant, &[component]);
        let docs = documents(&rendered);
        let named = |kinds: &[&str], name: &str| -> Vec<Value> {
            docs.iter()
                .filter(|d| kinds.iter().any(|k| d["kind"] == *k))
                .filter(|d| d["metadata"]["name"] == name)
                .cloned()
                .collect()
        };
        for role in named(&["ClusterRole", "Role"], "ecr-refresh") {
            assert!(
                grants(&role).iter().all(|(r, _)| r != "pods"),
                "{component}: the refresh's role reads no pod: {role}"
            );
        }
        let check_roles = named(&["ClusterRole", "Role"], "ecr-refresh-check");
        assert_eq!(check_roles.len(), roles, "{component}: {rendered}");
        for role in &check_roles {
            let granted = grants(role);
            for (resource, verb) in &granted {
                assert!(
                    reads.contains(&(resource.as_str(), verb.as_str())),
                    "{component}: the check's role grants only reads, not {verb} {resource}: {role}"
                );
            }
            for pods in [("pods", "get"), ("pods", "list")] {
                assert!(
                    granted.contains(&(pods.0.to_owned(), pods.1.to_owned())),
                    "{component}: {role}"
                );
            }
            for rule in role["rules"].as_array().expect("rules") {
                if strings(&rule["resources"]).contains(&"secrets".to_owned()) {
                    assert_eq!(strings(&rule["resourceNames"]), [SECRET], "{role}");
                }
            }
        }
        let bindings = named(&["ClusterRoleBinding", "RoleBinding"], "ecr-refresh-check");
        assert_eq!(bindings.len(), roles, "{component}");
        for binding in &bindings {
            assert_eq!(
                binding["subjects"],
                json!([{"kind": "ServiceAccount", "name": "ecr-refresh-check", "namespace": "ecr-refresh"}]),
                "{component}"
            );
        }
        assert_eq!(named(&["ServiceAccount"], "ecr-refresh-check").len(), 1);
        // Nothing else binds the check's account: not the refresh's roles, not the
        // admission policy's marker (it writes nothing, so nothing of it is to narrow).
        for binding in docs
            .iter()
            .filter(|d| d["kind"] == "ClusterRoleBinding" || d["kind"] == "RoleBinding")
            .filter(|d| d["metadata"]["name"] != "ecr-refresh-check")
        {
            assert!(
                !binding["subjects"]
                    .to_string()
                    .contains("ecr-refresh-check"),
                "{component}: {binding}"
            );
        }
    }
}

/// The evict-stuck-pods component: ECR_REFRESH_EVICT_STUCK_PODS=true, and a ClusterRole of
/// its own, ecr-refresh-evict, bound to the refresh's ServiceAccount, with pods list and get,
/// pods/eviction create and serviceaccounts get only (a stuck pod is evicted only when its
/// ServiceAccount lists the Secret); the refresh's own ClusterRole gains nothing.
#[test]
#[ignore = "needs kubectl (bash .ci/test)"]
fn the_evict_component_grants_pod_reads_and_evictions_in_a_role_of_its_own() {
    let plain = documents(&render("", false));
    let rendered = render_with_components("", &["components/evict-stuck-pods"]);
    let docs = documents(&rendered);
    let named = |docs: &[Value], kind: &str, name: &str| -> Vec<Value> {
        docs.iter()
            .filter(|d| d["kind"] == kind && d["metadata"]["name"] == name)
            .cloned()
            .collect()
    };
    assert_eq!(
        named(&docs, "ClusterRole", "ecr-refresh"),
        named(&plain, "ClusterRole", "ecr-refresh"),
        "the refresh's ClusterRole is unchanged"
    );
    let role = named(&docs, "ClusterRole", "ecr-refresh-evict");
    assert_eq!(role.len(), 1, "{rendered}");
    let mut granted = grants(&role[0]);
    granted.sort();
    assert_eq!(
        granted,
        [
            ("pods".to_owned(), "get".to_owned()),
            ("pods".to_owned(), "list".to_owned()),
            ("pods/eviction".to_owned(), "create".to_owned()),
            ("serviceaccounts".to_owned(), "get".to_owned()),
        ],
        "{}",
        role[0]
    );
    let binding = named(&docs, "ClusterRoleBinding", "ecr-refresh-evict");
    assert_eq!(binding.len(), 1, "{rendered}");
    assert_eq!(
        binding[0]["subjects"],
        json!([{"kind": "ServiceAccount", "name": "ecr-refresh", "namespace": "ecr-refresh"}])
    );
    let evict = |rendered: &str| -> Value {
        let cronjob = documents(rendered)
            .into_iter()
            .find(|d| d["kind"] == "CronJob")
            .expect("a CronJob");
        cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["env"]
            .as_array()
            .expect("env")
            .iter()
            .find(|e| e["name"] == "ECR_REFRESH_EVICT_STUCK_PODS")
            .map(|e| e["value"].clone())
            .unwrap_or(Value::Null)
    };
    assert_eq!(evict(&rendered), "true");
    assert_eq!(
        evict(&render("", false)),
        "false",
        "off without the component"
    );
}

// ---- The spoke install (manifests/spoke, issue 51) --------------------------------------

/// The one document of `kind` named `name` in a rendering.
fn the<'a>(docs: &'a [Value], kind: &str, name: &str) -> &'a Value {
    let found: Vec<&Value> = docs
        .iter()
        .filter(|d| d["kind"] == kind && d["metadata"]["name"] == name)
        .collect();
    assert_eq!(found.len(), 1, "one {kind} {name} in {docs:#?}");
    found[0]
}

/// The spoke rendered through an overlay of the user's (`fields`, such as `namePrefix: team-`)
/// with components of manifests/components (by directory), from a copy of the manifests.
fn spoke_through(fields: &str, components: &[&str]) -> Vec<Value> {
    let copy = common::manifests::copy();
    let overlay = copy.path().join("overlay");
    std::fs::create_dir_all(&overlay).expect("an overlay directory");
    let components: Vec<String> = components
        .iter()
        .map(|c| format!("\"../manifests/components/{c}\""))
        .collect();
    std::fs::write(
        overlay.join("kustomization.yaml"),
        format!(
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n{fields}\n\
             resources: [\"../manifests/spoke\"]\ncomponents: [{}]\n",
            components.join(", ")
        ),
    )
    .expect("writing the overlay");
    documents(&common::manifests::kustomize(&overlay))
}

/// The hub's one right, as the spoke's Role ecr-refresh-hub grants it: (resources, verbs,
/// resourceNames) of its one rule.
fn hub_rule(
    docs: &[Value],
    prefix: &str,
    namespace: &str,
) -> (Vec<String>, Vec<String>, Vec<String>) {
    let role = the(docs, "Role", &format!("{prefix}ecr-refresh-hub"));
    assert_eq!(role["metadata"]["namespace"], namespace, "{role}");
    let rules = role["rules"].as_array().expect("rules");
    assert_eq!(rules.len(), 1, "the hub's Role holds one rule: {role}");
    assert_eq!(strings(&rules[0]["apiGroups"]), [""], "{role}");
    (
        strings(&rules[0]["resources"]),
        strings(&rules[0]["verbs"]),
        strings(&rules[0]["resourceNames"]),
    )
}

/// Only RoleBinding `<prefix>ecr-refresh-hub` names the hub's ServiceAccount, and it binds the
/// hub's Role to it alone: the narrowed hub credential holds that one rule and nothing else.
fn hub_bound_to_its_role_only(docs: &[Value], prefix: &str, namespace: &str) {
    let hub = format!("{prefix}ecr-refresh-hub");
    let account = the(docs, "ServiceAccount", &hub);
    assert_eq!(account["metadata"]["namespace"], namespace);
    let binding = the(docs, "RoleBinding", &hub);
    assert_eq!(binding["metadata"]["namespace"], namespace);
    assert_eq!(
        binding["roleRef"],
        json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": hub})
    );
    assert_eq!(
        binding["subjects"],
        json!([{"kind": "ServiceAccount", "name": hub, "namespace": namespace}])
    );
    for other in docs
        .iter()
        .filter(|d| d["kind"] == "RoleBinding" || d["kind"] == "ClusterRoleBinding")
        .filter(|d| d["metadata"]["name"] != hub.as_str())
    {
        assert!(
            !other["subjects"]
                .to_string()
                .contains(&format!("\"{hub}\"")),
            "only {hub} binds the hub's account: {other}"
        );
    }
}

/// manifests/spoke: the ServiceAccount ecr-refresh with exactly the RBAC and admission policy
/// of the cluster-wide install, no CronJob, no Job, no ConfigMap (the Secret's name is a
/// local-config source), and the hub's one right: create on serviceaccounts/token for
/// ecr-refresh only, bound to ecr-refresh-hub alone.
#[test]
#[ignore = "needs kubectl (bash .ci/test)"]
fn the_spoke_install_grants_the_hub_a_token_for_its_service_account_and_runs_nothing() {
    let spoke = documents(&render_with_components("spoke", &[]));
    let normal = documents(&render("", false));
    for kind in ["CronJob", "Job", "ConfigMap", "Pod", "Deployment"] {
        assert!(
            spoke.iter().all(|d| d["kind"] != kind),
            "the spoke renders no {kind}: {spoke:#?}"
        );
    }
    // The install's own objects, as the cluster-wide install has them.
    for (kind, name) in [
        ("Namespace", "ecr-refresh"),
        ("ServiceAccount", "ecr-refresh"),
        ("ClusterRole", "ecr-refresh"),
        ("ClusterRoleBinding", "ecr-refresh"),
        ("ClusterRole", "ecr-refresh-admission"),
        ("ClusterRoleBinding", "ecr-refresh-admission"),
        ("ValidatingAdmissionPolicy", "ecr-refresh"),
        ("ValidatingAdmissionPolicyBinding", "ecr-refresh"),
    ] {
        assert_eq!(
            the(&spoke, kind, name),
            the(&normal, kind, name),
            "the spoke's {kind} {name} is the install's"
        );
    }
    assert_eq!(
        hub_rule(&spoke, "", "ecr-refresh"),
        (
            vec!["serviceaccounts/token".to_owned()],
            vec!["create".to_owned()],
            vec!["ecr-refresh".to_owned()]
        )
    );
    hub_bound_to_its_role_only(&spoke, "", "ecr-refresh");
    let kinds: Vec<String> = spoke
        .iter()
        .map(|d| {
            format!(
                "{} {}",
                d["kind"].as_str().unwrap(),
                d["metadata"]["name"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(
        kinds.len(),
        11,
        "the install's 8 objects, and the hub's ServiceAccount, Role and RoleBinding: {kinds:?}"
    );
}

/// components/spoke-impersonate: the hub's rule is `impersonate` on serviceaccounts, the same
/// one name; with components/check the check's ServiceAccount is the rule's second name, in
/// both auths, and nothing else of the rule changes.
#[test]
#[ignore = "needs kubectl (bash .ci/test)"]
fn the_hub_rule_impersonates_with_the_component_and_names_the_check_account_with_check() {
    let names = |n: &[&str]| n.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    let impersonate = spoke_through("", &["spoke-impersonate"]);
    assert_eq!(
        hub_rule(&impersonate, "", "ecr-refresh"),
        (
            names(&["serviceaccounts"]),
            names(&["impersonate"]),
            names(&["ecr-refresh"])
        )
    );
    hub_bound_to_its_role_only(&impersonate, "", "ecr-refresh");

    let check = spoke_through("", &["check"]);
    assert_eq!(
        hub_rule(&check, "", "ecr-refresh"),
        (
            names(&["serviceaccounts/token"]),
            names(&["create"]),
            names(&["ecr-refresh", "ecr-refresh-check"])
        )
    );
    the(&check, "ServiceAccount", "ecr-refresh-check");
    hub_bound_to_its_role_only(&check, "", "ecr-refresh");

    let both = spoke_through("", &["check", "spoke-impersonate"]);
    assert_eq!(
        hub_rule(&both, "", "ecr-refresh"),
        (
            names(&["serviceaccounts"]),
            names(&["impersonate"]),
            names(&["ecr-refresh", "ecr-refresh-check"])
        )
    );

    // The cluster-wide install with the check component has no hub Role to patch.
    let normal = documents(&render_with_components("", &["components/check"]));
    assert!(
        normal
            .iter()
            .all(|d| d["metadata"]["name"] != "ecr-refresh-hub")
    );
}

/// Under an overlay's `namePrefix:` and `namespace:`, the hub's rule names the ServiceAccounts
/// as the overlay renamed them, in the namespace it moved them to, and its binding follows.
#[test]
#[ignore = "needs kubectl (bash .ci/test)"]
fn the_hub_rule_follows_the_service_account_under_an_overlays_prefix_and_namespace() {
    let names = |n: &[&str]| n.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    for (fields, prefix, namespace) in [
        ("namePrefix: team-", "team-", "ecr-refresh"),
        ("namespace: other", "", "other"),
        ("namePrefix: team-\nnamespace: other", "team-", "other"),
    ] {
        let docs = spoke_through(fields, &[]);
        let account = the(&docs, "ServiceAccount", &format!("{prefix}ecr-refresh"));
        assert_eq!(account["metadata"]["namespace"], namespace, "{fields}");
        assert_eq!(
            hub_rule(&docs, prefix, namespace),
            (
                names(&["serviceaccounts/token"]),
                names(&["create"]),
                vec![format!("{prefix}ecr-refresh")]
            ),
            "{fields}"
        );
        hub_bound_to_its_role_only(&docs, prefix, namespace);

        let docs = spoke_through(fields, &["check", "spoke-impersonate"]);
        assert_eq!(
            hub_rule(&docs, prefix, namespace),
            (
                names(&["serviceaccounts"]),
                names(&["impersonate"]),
                vec![
                    format!("{prefix}ecr-refresh"),
                    format!("{prefix}ecr-refresh-check")
                ]
            ),
            "{fields}, with check and impersonate"
        );
    }
}

/// The spoke takes the Secret's name from its local-config ConfigMap (not from a CronJob):
/// edited there, or given by an overlay with components/secret-name, it reaches the RBAC's
/// resourceNames and the admission policy, and the ConfigMap itself is never applied.
#[test]
#[ignore = "needs kubectl (bash .ci/test)"]
fn the_spokes_secret_name_comes_from_its_local_config_map_and_reaches_rbac_and_policy() {
    fn follows(docs: &[Value], secret: &str, what: &str) {
        let role = the(docs, "ClusterRole", "ecr-refresh");
        assert_eq!(
            strings(&role["rules"][0]["resourceNames"]),
            [secret],
            "{what}: {role}"
        );
        let marker = the(docs, "ClusterRole", "ecr-refresh-admission");
        assert_eq!(
            strings(&marker["rules"][0]["resourceNames"]),
            [secret],
            "{what}"
        );
        let policy = the(docs, "ValidatingAdmissionPolicy", "ecr-refresh").to_string();
        assert!(policy.contains(&format!("'{secret}'")), "{what}: {policy}");
        assert!(
            policy.contains(&format!("name('{secret}')")),
            "{what}: the matchCondition asks for {secret}: {policy}"
        );
        assert!(docs.iter().all(|d| d["kind"] != "ConfigMap"), "{what}");
        assert!(docs.iter().all(|d| d["kind"] != "CronJob"), "{what}");
    }
    let copy = common::manifests::copy();
    let root = copy.path().join("manifests");
    let source = root.join("spoke/secret-name.yaml");
    let text = std::fs::read_to_string(&source).expect("manifests/spoke/secret-name.yaml");
    assert!(
        text.contains("config.kubernetes.io/local-config: \"true\""),
        "{text}"
    );
    follows(
        &documents(&common::manifests::kustomize(&root.join("spoke"))),
        SECRET,
        "as shipped",
    );
    std::fs::write(
        &source,
        text.replace(&format!("secretName: {SECRET}"), "secretName: team-pull"),
    )
    .expect("editing the ConfigMap");
    follows(
        &documents(&common::manifests::kustomize(&root.join("spoke"))),
        "team-pull",
        "the ConfigMap edited",
    );

    let copy = common::manifests::copy();
    let overlay = copy.path().join("overlay");
    std::fs::create_dir_all(&overlay).unwrap();
    std::fs::write(
        overlay.join("kustomization.yaml"),
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n\
         resources: [../manifests/spoke, secret-name.yaml]\n\
         components: [../manifests/components/secret-name]\n",
    )
    .unwrap();
    std::fs::write(
        overlay.join("secret-name.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ecr-refresh-secret-name}\ndata: {name: ecr-pull}\n",
    )
    .unwrap();
    follows(
        &documents(&common::manifests::kustomize(&overlay)),
        "ecr-pull",
        "an overlay with components/secret-name",
    );
}
