//! The admission attacks (one list, tests/common/attacks.rs) sent to a
//! real kube-apiserver (tests/control-plane) as ecr-refresh's ServiceAccount, with a real
//! TokenRequest token, after `kubectl apply -k manifests/` with the service-accounts
//! component: each is refused, by the real RBAC (a delete, a ServiceAccount create, a
//! TokenRequest) or by the policy, evaluated by the real CEL; with RBAC widened to everything
//! on Secrets and ServiceAccounts (their tokens too) and Events, by the policy alone. The
//! TokenRequests, a subresource, are sent here only: the fake serves none. With the binding deleted, each goes through: the
//! policy is what stops them.
//!
//! The denials are told by the shape of the apiserver's message (`ValidatingAdmissionPolicy
//! 'P' with binding 'B' denied request: ...`) and by the rule each attack breaks, as the
//! list words it, not by the policy's or binding's name.

use crate::common;

use common::attacks::{
    Attack, OPAQUE_UPDATE, WIDE_POD_RBAC, WIDE_RBAC, attacks, opaque_under_our_name, pod_attacks,
    refused_by_rbac, subresource_attacks, target_objects, victim_pod,
};
use common::manifests::copy;
use common::real::{
    RealHarness, RefusedBy, SERVICE_ACCOUNT, admin, create, denied_by_policy, eventually, get,
    install, install_with, installs, message, namespaces, send, wait_until_delete_refused_by,
    wait_until_enforced, wait_until_enforced_for,
};
use common::*;
use control_plane::ControlPlane;
use serde_json::{Value, json};

/// The attack targets as another user left them, created by the admin.
pub(crate) fn seed(cp: &ControlPlane, targets: (&str, &str)) {
    let objects: Vec<Value> = target_objects(targets)
        .into_iter()
        .map(|(_, o)| o)
        .collect();
    create(cp, &objects);
}

/// The one list and the subresource attacks, which only a real server serves.
fn every_attack(victim: &str, ours: &str) -> Vec<Attack> {
    let mut all = attacks(victim, ours);
    all.extend(subresource_attacks(ours));
    all
}

/// Sends every attack aimed at `targets` as `token`: (what, rule, status, body).
pub(crate) fn launch(
    cp: &ControlPlane,
    token: &str,
    (victim, ours): (&str, &str),
) -> Vec<(&'static str, &'static str, u16, Value)> {
    every_attack(victim, ours)
        .into_iter()
        .map(|a| {
            // Someone else's Opaque Secret under our name, for this one attack only: the
            // creates aim at the same name in `victim`.
            let opaque = a.what == OPAQUE_UPDATE;
            if opaque {
                create(cp, &[opaque_under_our_name(victim).1]);
            }
            let (status, body) = send(cp, token, a.method, &a.path, a.content_type, &a.body);
            if opaque {
                admin(cp, &["delete", "secret", SECRET, "-n", victim], "");
            }
            (a.what, a.refused_with, status, body)
        })
        .collect()
}

/// Sends one attack as `token`: (status, body).
fn send_attack(cp: &ControlPlane, token: &str, attack: &Attack) -> (u16, Value) {
    send(
        cp,
        token,
        attack.method,
        &attack.path,
        attack.content_type,
        &attack.body,
    )
}

/// Each attack of `list`, aimed at fresh targets of its own (`<prefix>victim-<i>`,
/// `<prefix>ours-<i>`: they change things), sent as `token`, is admitted (`why`). A refusal
/// by RBAC (`cannot …`) is waited out, for a grant just made.
fn each_attack_goes_through(
    cp: &ControlPlane,
    token: &str,
    list: fn(&str, &str) -> Vec<Attack>,
    prefix: &str,
    why: &str,
) {
    let count = list("victim", "ours").len();
    for i in 0..count {
        let (victim, ours) = (format!("{prefix}victim-{i}"), format!("{prefix}ours-{i}"));
        seed(cp, (&victim, &ours));
        let attack = list(&victim, &ours).remove(i);
        if attack.what == OPAQUE_UPDATE {
            create(cp, &[opaque_under_our_name(&victim).1]);
        }
        let (status, body) = eventually("RBAC's grants in force", || {
            let (status, body) = send_attack(cp, token, &attack);
            if status == 403 && message(&body).contains("cannot ") {
                Err(format!("{status} {body}"))
            } else {
                Ok((status, body))
            }
        });
        assert!(
            (200..300).contains(&status),
            "{why}, {} is admitted: {status} {body}",
            attack.what
        );
    }
}

#[test]
#[ignore = "needs KUBEBUILDER_ASSETS (bash .ci/test)"]
fn every_attack_is_refused_on_a_real_server_and_goes_through_without_the_binding() {
    let turn = installs();
    let cp: &ControlPlane = &turn;
    let manifests = copy();
    let root = manifests.path().join("manifests");
    install(cp, &cp.assets().join("kubectl"), &root, "", true);
    wait_until_enforced(cp, "default");
    let token = cp.service_account_token(SERVICE_ACCOUNT.0, SERVICE_ACCOUNT.1);
    seed(cp, ("victim", "ours"));
    let ours_before = get(cp, "secret", "ours", SECRET).unwrap();

    // The shipped RBAC refuses a delete, a ServiceAccount create, a core/v1 Event and the
    // TokenRequests; the policy the rest.
    for (what, rule, status, body) in launch(cp, &token, ("victim", "ours")) {
        assert_eq!(status, 403, "{what}: {body}");
        if refused_by_rbac(what) {
            assert!(
                message(&body).contains("cannot "),
                "{what}: by RBAC: {body}"
            );
        } else {
            assert!(denied_by_policy(&body), "{what}: by the policy: {body}");
            assert!(
                message(&body).contains(rule),
                "{what}: for {rule:?}: {body}"
            );
            assert_eq!(body["reason"], "Forbidden", "{body}");
        }
    }

    // A denial is the apiserver's Status with the policy's message; a dry run is admitted
    // the same way, and nothing is stored.
    let first = &attacks("victim", "ours")[0];
    let (status, body) = send_attack(cp, &token, first);
    assert_eq!(status, 403, "{body}");
    assert_eq!(body["kind"], "Status", "{body}");
    assert_eq!(body["reason"], "Forbidden", "{body}");
    assert_eq!(
        message(&body),
        format!(
            "secrets \"{SECRET}\" is forbidden: ValidatingAdmissionPolicy 'ecr-refresh' with \
             binding 'ecr-refresh' denied request: ecr-refresh may only create Secrets of type \
             kubernetes.io/dockerconfigjson"
        )
    );
    assert_eq!(body["details"]["kind"], "secrets", "{body}");
    assert_eq!(body["details"]["name"], SECRET, "{body}");
    let (status, body) = send(
        cp,
        &token,
        "POST",
        "/api/v1/namespaces/victim/secrets?dryRun=All",
        first.content_type,
        &first.body,
    );
    assert_eq!(status, 403, "{body}");
    assert!(
        denied_by_policy(&body),
        "a dry run, admitted the same way: {body}"
    );
    assert!(get(cp, "secret", "victim", SECRET).is_none());

    // RBAC granting everything on Secrets, ServiceAccounts, their tokens and Events: the
    // policy alone.
    admin(cp, &["apply", "-f", "-"], WIDE_RBAC);
    let delete = &attacks("victim", "ours")
        .into_iter()
        .find(|a| a.method == "DELETE")
        .unwrap();
    wait_until_delete_refused_by(cp, &token, &delete.path, RefusedBy::Policy);
    for (what, rule, status, body) in launch(cp, &token, ("victim", "ours")) {
        assert_eq!(status, 403, "wide RBAC: {what}: {body}");
        assert!(denied_by_policy(&body), "wide RBAC: {what}: {body}");
        assert!(
            message(&body).contains(rule),
            "wide RBAC: {what}: for {rule:?}: {body}"
        );
    }
    let ours_after = get(cp, "secret", "ours", SECRET).unwrap();
    assert_eq!(
        ours_after["metadata"]["resourceVersion"], ours_before["metadata"]["resourceVersion"],
        "nothing refused changed anything"
    );
    assert!(get(cp, "secret", "victim", SECRET).is_none());

    // Without the binding, each goes through (fresh targets for each: they change things).
    admin(
        cp,
        &["delete", "validatingadmissionpolicybinding", "ecr-refresh"],
        "",
    );
    let first = &attacks("victim", "ours")[0];
    eventually("the binding gone from the server's view", || {
        let path = format!("{}?dryRun=All", first.path);
        let (status, body) = send(cp, &token, "POST", &path, first.content_type, &first.body);
        if status == 201 {
            Ok(())
        } else {
            Err(format!("{status} {body}"))
        }
    });
    each_attack_goes_through(cp, &token, every_attack, "", "without the binding");
    // The first, a service-account-token Secret under our name, is stored as sent.
    assert_eq!(
        get(cp, "secret", "victim-0", SECRET).unwrap()["type"],
        "kubernetes.io/service-account-token"
    );
}

/// Two installs side by side, as a platform team runs one per Secret name: manifests/ as
/// shipped, and a copy writing `team-pull` through an overlay with `namespace: platform`
/// and `namePrefix: b-`. Each ServiceAccount writes its own Secret in the same namespace,
/// and each is held by its own install's policy only: the other's Secret name is refused
/// to it by its own policy.
#[test]
#[ignore = "needs KUBEBUILDER_ASSETS (bash .ci/test)"]
fn two_installs_writing_secrets_of_different_names_are_each_held_by_their_own_policy_only() {
    let cp = installs();
    let kubectl = cp.assets().join("kubectl");
    let shipped = copy();
    install(&cp, &kubectl, &shipped.path().join("manifests"), "", false);
    let second = copy();
    let root = second.path().join("manifests");
    let cronjob = root.join("base/cronjob.yaml");
    let text = std::fs::read_to_string(&cronjob).expect("the CronJob");
    assert!(text.contains("value: aws-ecr-token"));
    write(
        &cronjob,
        &text.replace("value: aws-ecr-token", "value: team-pull"),
    );
    install_with(
        &cp,
        &kubectl,
        &root,
        "",
        "namespace: platform\nnamePrefix: b-",
        None,
    );
    let b = ("platform", "b-ecr-refresh");
    namespaces(&cp, &["team-x", "team-y"]);
    wait_until_enforced(&cp, "team-y");
    wait_until_enforced_for(&cp, "team-y", b, "team-pull");

    // The shipped install is without the service-accounts component: its run sends no
    // ServiceAccount request, and nothing it sends is refused.
    let first = RealHarness::new(&cp);
    let run = first.run(&[("ECR_REFRESH_NAMESPACES", "team-x")]);
    run.expect_code(0);
    assert_eq!(run.outcome("team-x"), "created", "{}", run.stdout);
    assert_eq!(first.refused(), Vec::<String>::new());
    assert_eq!(first.statuses("serviceaccounts"), Vec::new());
    let run = RealHarness::as_account(&cp, b).run(&[
        ("ECR_REFRESH_NAMESPACES", "team-x"),
        ("ECR_REFRESH_SECRET_NAME", "team-pull"),
    ]);
    run.expect_code(0);
    assert_eq!(
        run.outcome("team-x"),
        "created",
        "the second install's run, not held by the first's policy: {}",
        run.stdout
    );
    for name in [SECRET, "team-pull"] {
        assert!(get(&cp, "secret", "team-x", name).is_some(), "{name}");
    }

    for ((namespace, account), policy, theirs, ours) in [
        (SERVICE_ACCOUNT, "ecr-refresh", "team-pull", SECRET),
        (b, "b-ecr-refresh", SECRET, "team-pull"),
    ] {
        let token = cp.service_account_token(namespace, account);
        let pull_secret = json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": theirs}, "type": "kubernetes.io/dockerconfigjson",
            "data": {".dockerconfigjson": b64(r#"{"auths":{}}"#)}});
        let (status, body) = send(
            &cp,
            &token,
            "POST",
            "/api/v1/namespaces/team-y/secrets?dryRun=All",
            "application/json",
            &pull_secret,
        );
        assert_eq!(status, 403, "{account} creating {theirs}: {body}");
        assert!(
            message(&body).contains(&format!(
                ": ValidatingAdmissionPolicy '{policy}' with binding"
            )) && message(&body).contains(&format!("may only write the Secret named {ours}")),
            "{account} creating {theirs}, refused by its own install's policy: {body}"
        );
    }
}

// ---- Argo CD's repository credentials (components/argocd) ----

/// The Argo CD attacks of tests/common/attacks.rs on a real server, under the manifests with
/// components/argocd: each refused by the real RBAC (a delete, a patch of another Secret) or
/// by the policy ecr-refresh-argocd's real CEL; with RBAC widened to everything on Secrets,
/// by the policy alone. Argo CD's own Secrets and ours are left as they were.
#[test]
#[ignore = "needs KUBEBUILDER_ASSETS (bash .ci/test)"]
fn every_argo_cd_attack_is_refused_on_a_real_server_under_the_component() {
    use common::attacks::{
        ARGOCD_NAMESPACE, ARGOCD_SECRET, argocd_attacks, argocd_refused_by_rbac,
        argocd_target_objects,
    };
    let turn = installs();
    let cp: &ControlPlane = &turn;
    // kube-apiserver never fills in a policy's status (its type check): this controller does.
    cp.start_policy_status_controller();
    namespaces(cp, &[ARGOCD_NAMESPACE]);
    let manifests = copy();
    let root = manifests.path().join("manifests");
    install_with(
        cp,
        &cp.assets().join("kubectl"),
        &root,
        "",
        "",
        Some("argocd"),
    );
    wait_until_enforced(cp, "default");
    // The server type-checks the Argo CD policy without a warning.
    let policy = common::real::checked_policy(cp, "ecr-refresh-argocd");
    let warnings = &policy["status"]["typeChecking"]["expressionWarnings"];
    assert!(
        warnings.is_null() || warnings.as_array().is_some_and(|w| w.is_empty()),
        "the server's type check warns: {warnings:#}"
    );
    let objects: Vec<Value> = argocd_target_objects(ARGOCD_NAMESPACE, ARGOCD_SECRET, true)
        .into_iter()
        .filter(|(_, o)| o["kind"] == "Secret")
        .map(|(_, o)| o)
        .collect();
    create(cp, &objects);
    let before: Vec<Value> = ["argocd-secret", "cluster-prod", ARGOCD_SECRET]
        .iter()
        .map(|n| get(cp, "secret", ARGOCD_NAMESPACE, n).unwrap())
        .collect();
    let token = cp.service_account_token(SERVICE_ACCOUNT.0, SERVICE_ACCOUNT.1);
    let launch = |wide: bool| {
        for attack in argocd_attacks(ARGOCD_NAMESPACE, ARGOCD_SECRET) {
            // The creates aim at our Secret's name: it must not exist for them.
            let creates = attack.method == "POST";
            if creates {
                admin(
                    cp,
                    &[
                        "delete",
                        "secret",
                        ARGOCD_SECRET,
                        "-n",
                        ARGOCD_NAMESPACE,
                        "--ignore-not-found",
                    ],
                    "",
                );
            }
            let (status, body) = send(
                cp,
                &token,
                attack.method,
                &attack.path,
                attack.content_type,
                &attack.body,
            );
            if creates {
                create(cp, &objects[2..]);
            }
            let what = attack.what;
            assert_eq!(status, 403, "wide {wide}: {what}: {body}");
            if !wide && argocd_refused_by_rbac(what) {
                assert!(
                    message(&body).contains("cannot "),
                    "{what}: by RBAC: {body}"
                );
            } else {
                assert!(
                    denied_by_policy(&body),
                    "wide {wide}: {what}: by the policy: {body}"
                );
                assert!(
                    message(&body).contains(attack.refused_with),
                    "wide {wide}: {what}: for {:?}: {body}",
                    attack.refused_with
                );
            }
        }
    };
    launch(false);
    admin(cp, &["apply", "-f", "-"], WIDE_RBAC);
    wait_until_delete_refused_by(
        cp,
        &token,
        &format!("/api/v1/namespaces/{ARGOCD_NAMESPACE}/secrets/argocd-secret"),
        RefusedBy::Policy,
    );
    launch(true);
    for (i, name) in ["argocd-secret", "cluster-prod"].iter().enumerate() {
        let after = get(cp, "secret", ARGOCD_NAMESPACE, name).unwrap();
        assert_eq!(
            after["metadata"]["resourceVersion"], before[i]["metadata"]["resourceVersion"],
            "{name}: nothing refused changed it"
        );
    }
    // Runs as the ServiceAccount under the component's own RBAC and both policies: a dry
    // run, ours updated in place, created once it is gone, and updated again; nothing
    // refused, Argo CD's own Secrets untouched.
    admin(cp, &["delete", "-f", "-"], WIDE_RBAC);
    wait_until_delete_refused_by(
        cp,
        &token,
        &format!("/api/v1/namespaces/{ARGOCD_NAMESPACE}/secrets/argocd-secret"),
        RefusedBy::Rbac,
    );
    let h = RealHarness::new(cp);
    let env = [
        ("ECR_REFRESH_NAMESPACES", "default"),
        ("ECR_REFRESH_ARGOCD_NAMESPACE", ARGOCD_NAMESPACE),
    ];
    let outcome = |run: &Run| -> String {
        run.lines
            .iter()
            .find(|l| l["secret"] == ARGOCD_SECRET && l["argocd"] == true)
            .and_then(|l| l["outcome"].as_str())
            .unwrap_or_else(|| panic!("no line for {ARGOCD_SECRET}:\n{}", run.stdout))
            .to_owned()
    };
    let dry = h.run(&[env[0], env[1], ("ECR_REFRESH_DRY_RUN", "true")]);
    let first = h.run(&env);
    dry.expect_code(0);
    first.expect_code(0);
    assert_eq!(outcome(&dry), "would-update");
    assert_eq!(outcome(&first), "updated");
    let secret = get(cp, "secret", ARGOCD_NAMESPACE, ARGOCD_SECRET).unwrap();
    assert_eq!(
        secret["metadata"]["labels"]["team"], "platform",
        "others' label kept"
    );
    admin(
        cp,
        &["delete", "secret", ARGOCD_SECRET, "-n", ARGOCD_NAMESPACE],
        "",
    );
    let created = h.run(&env);
    let again = h.run(&[env[0], env[1], ("ECR_REFRESH_RENEW_BEFORE", "12h")]);
    created.expect_code(0);
    again.expect_code(0);
    assert_eq!(outcome(&created), "created");
    assert_eq!(outcome(&again), "updated");
    assert_eq!(h.refused(), Vec::<String>::new(), "refused requests");
    let secret = get(cp, "secret", ARGOCD_NAMESPACE, ARGOCD_SECRET).unwrap();
    assert_eq!(
        secret["metadata"]["labels"]["argocd.argoproj.io/secret-type"],
        "repo-creds"
    );
    for (i, name) in ["argocd-secret", "cluster-prod"].iter().enumerate() {
        let after = get(cp, "secret", ARGOCD_NAMESPACE, name).unwrap();
        assert_eq!(
            after["metadata"]["resourceVersion"], before[i]["metadata"]["resourceVersion"],
            "{name}: untouched by the runs"
        );
    }
}

/// ECR_REFRESH_EVICT_STUCK_PODS's rights (the component evict-stuck-pods): the token may
/// evict a pod with its own grace period, and nothing else of pods; runs with the option
/// evict stuck pods as the ServiceAccount, at most ECR_REFRESH_EVICT_LIMIT a run. The RBAC refuses a
/// delete, a create and an update; with RBAC widened to everything on pods, the policy
/// refuses them, and an eviction that brings its own grace period or propagation policy.
#[test]
#[ignore = "needs KUBEBUILDER_ASSETS (bash .ci/test)"]
fn with_the_evict_rights_a_token_may_evict_a_pod_and_nothing_else() {
    let turn = installs();
    let cp: &ControlPlane = &turn;
    let manifests = copy();
    let root = manifests.path().join("manifests");
    install_with(
        cp,
        &cp.assets().join("kubectl"),
        &root,
        "",
        "",
        Some("evict-stuck-pods"),
    );
    wait_until_enforced(cp, "default");
    let token = cp.service_account_token(SERVICE_ACCOUNT.0, SERVICE_ACCOUNT.1);
    namespaces(cp, &["ours"]);
    create(cp, &[victim_pod("ours")]);
    let pod_before = get(cp, "pod", "ours", "web-0").expect("the pod");

    let (status, body) = send(
        cp,
        &token,
        "GET",
        "/api/v1/namespaces/ours/pods",
        "application/json",
        &Value::Null,
    );
    assert_eq!(status, 200, "the component grants pods list: {body}");
    let by_rbac = ["a pod delete", "a pod create", "a pod update"];
    for a in pod_attacks("ours") {
        let (status, body) = send(cp, &token, a.method, &a.path, a.content_type, &a.body);
        assert_eq!(status, 403, "{}: {body}", a.what);
        if by_rbac.contains(&a.what) {
            assert!(
                message(&body).contains("cannot "),
                "{}: by RBAC: {body}",
                a.what
            );
        } else {
            assert!(denied_by_policy(&body), "{}: by the policy: {body}", a.what);
            assert!(
                message(&body).contains(a.refused_with),
                "{}: {body}",
                a.what
            );
        }
    }

    // Runs as the ServiceAccount with the option, under the component's RBAC and the
    // policy: ReplicaSet pods that list no imagePullSecrets, created before their
    // ServiceAccount listed the Secret, stuck on a pull for want of credentials, are evicted
    // (no kubelet here: their status is the one a kubelet writes). Two of them, and
    // ECR_REFRESH_EVICT_LIMIT=1: one is evicted, the other left for the next run, which
    // evicts it (decided from the pod's state, not from what a run wrote). The ServiceAccount
    // is read with the rights the service-accounts component grants (get on `default`).
    admin(
        cp,
        &["apply", "-f", "-"],
        &json!({"apiVersion": "v1", "kind": "List", "items": [
            {"apiVersion": "v1", "kind": "ServiceAccount",
             "metadata": {"name": "default", "namespace": "ours"},
             "imagePullSecrets": [{"name": SECRET}]},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
             "metadata": {"name": "read-default", "namespace": "ours"},
             "rules": [{"apiGroups": [""], "resources": ["serviceaccounts"],
                        "resourceNames": ["default"], "verbs": ["get"]}]},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
             "metadata": {"name": "read-default", "namespace": "ours"},
             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                         "name": "read-default"},
             "subjects": [{"kind": "ServiceAccount", "name": SERVICE_ACCOUNT.1,
                           "namespace": SERVICE_ACCOUNT.0}]},
        ]})
        .to_string(),
    );
    let image = format!("{REGISTRY}/web:1");
    let mut status = pods::back_off_status(&image);
    status["containerStatuses"][0]["state"]["waiting"]["message"] = json!(format!(
        "Back-off pulling image \"{image}\": ErrImagePull: failed to pull and unpack image: \
         authorization failed: no basic auth credentials"
    ));
    let patch = json!({ "status": status }).to_string();
    for name in ["web-1", "web-2"] {
        create(cp, &[pods::pod("ours", name, &image, Some("web-7d9f8"))]);
        admin(
            cp,
            &[
                "patch",
                "pod",
                name,
                "-n",
                "ours",
                "--subresource=status",
                "--type=merge",
                "-p",
                &patch,
            ],
            "",
        );
    }
    let gone = |name: &str| match get(cp, "pod", "ours", name) {
        None => Ok(()),
        Some(p) if !p["metadata"]["deletionTimestamp"].is_null() => Ok(()),
        Some(p) => Err(p["metadata"].to_string()),
    };
    let mut evicted = Vec::new();
    for (round, expected_left) in [(1, 1), (2, 0)] {
        let h = RealHarness::new(cp);
        let run = h.run(&[
            ("ECR_REFRESH_NAMESPACES", "ours"),
            ("ECR_REFRESH_EVICT_STUCK_PODS", "true"),
            ("ECR_REFRESH_EVICT_LIMIT", "1"),
        ]);
        run.expect_code(0);
        let lines: Vec<&Value> = run
            .lines
            .iter()
            .filter(|l| l.get("pod").is_some())
            .collect();
        let of = |outcome: &str| -> Vec<&Value> {
            lines
                .iter()
                .copied()
                .filter(|l| l["outcome"] == outcome)
                .collect()
        };
        assert_eq!(of("evicted").len(), 1, "round {round}: {}", run.stdout);
        assert_eq!(
            of("left").len(),
            expected_left,
            "round {round}: {}",
            run.stdout
        );
        for left in of("left") {
            assert!(
                left["reason"]
                    .as_str()
                    .is_some_and(|r| r.contains("ECR_REFRESH_EVICT_LIMIT=1")),
                "round {round}: {left}"
            );
        }
        let line = of("evicted")[0];
        assert_eq!(line["owner"], "ReplicaSet/web-7d9f8", "{line}");
        assert_eq!(h.statuses("/eviction"), [("POST".to_owned(), 201)]);
        assert!(
            lines.iter().all(|l| l["pod"] != "web-0"),
            "a pod that is not stuck gets no line: {}",
            run.stdout
        );
        let name = line["pod"].as_str().expect("a pod name").to_owned();
        eventually("the evicted pod gone", || gone(&name));
        evicted.push(name);
    }
    evicted.sort();
    assert_eq!(evicted, ["web-1", "web-2"]);

    admin(cp, &["apply", "-f", "-"], WIDE_POD_RBAC);
    let delete = &pod_attacks("ours")[0];
    eventually("the wide pod RBAC in force", || {
        let path = format!("{}?dryRun=All", delete.path);
        let (status, body) = send(
            cp,
            &token,
            "DELETE",
            &path,
            "application/json",
            &Value::Null,
        );
        if denied_by_policy(&body) {
            Ok(())
        } else {
            Err(format!("{status} {body}"))
        }
    });
    for a in pod_attacks("ours") {
        let (status, body) = send(cp, &token, a.method, &a.path, a.content_type, &a.body);
        assert_eq!(status, 403, "wide RBAC: {}: {body}", a.what);
        assert!(denied_by_policy(&body), "wide RBAC: {}: {body}", a.what);
        assert!(
            message(&body).contains(a.refused_with),
            "wide RBAC: {}: for {:?}: {body}",
            a.what,
            a.refused_with
        );
    }
    let pod_after = get(cp, "pod", "ours", "web-0").expect("the pod is still there");
    assert_eq!(
        pod_after["metadata"]["resourceVersion"], pod_before["metadata"]["resourceVersion"],
        "nothing refused changed the pod"
    );

    // The eviction a run sends, pinned to the pod's uid, goes through.
    let uid = pod_before["metadata"]["uid"].as_str().expect("a uid");
    let eviction = json!({
        "apiVersion": "policy/v1", "kind": "Eviction",
        "metadata": { "name": "web-0", "namespace": "ours" },
        "deleteOptions": { "preconditions": { "uid": uid } }
    });
    let (status, body) = send(
        cp,
        &token,
        "POST",
        "/api/v1/namespaces/ours/pods/web-0/eviction",
        "application/json",
        &eviction,
    );
    assert_eq!(status, 201, "the run's eviction is admitted: {body}");
    eventually("the evicted pod gone", || {
        match get(cp, "pod", "ours", "web-0") {
            None => Ok(()),
            Some(p) if !p["metadata"]["deletionTimestamp"].is_null() => Ok(()),
            Some(p) => Err(p["metadata"].to_string()),
        }
    });
}

/// Whom the policy holds, on a real server: another ServiceAccount with the same wide rights
/// (`ci/builder`, not bound to `ecr-refresh-admission`) is RBAC's alone, and every attack it
/// sends goes through; and ecr-refresh's own ServiceAccount, once granted everything (as
/// cluster-admin is), is `exempt`: a user who may delete the policy is not one it can hold.
#[test]
#[ignore = "needs KUBEBUILDER_ASSETS (bash .ci/test)"]
fn the_policy_holds_no_other_service_account_and_not_one_granted_everything() {
    let turn = installs();
    let cp: &ControlPlane = &turn;
    let manifests = copy();
    install(
        cp,
        &cp.assets().join("kubectl"),
        &manifests.path().join("manifests"),
        "",
        true,
    );
    wait_until_enforced(cp, "default");
    let builder = ("ci", "builder");
    cp.create_namespace(builder.0);
    admin(
        cp,
        &["create", "serviceaccount", builder.1, "-n", builder.0],
        "",
    );
    admin(
        cp,
        &["apply", "-f", "-"],
        &common::attacks::wide_rbac(builder),
    );
    let token = cp.service_account_token(builder.0, builder.1);
    each_attack_goes_through(
        cp,
        &token,
        attacks,
        "b-",
        "as another ServiceAccount with the same rights (RBAC's alone)",
    );

    // ecr-refresh's ServiceAccount granted everything: exempt, so not held.
    admin(
        cp,
        &["apply", "-f", "-"],
        "
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: admin-ish}
rules:
- {apiGroups: ['*'], resources: ['*'], verbs: ['*']}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: admin-ish}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: admin-ish}
subjects:
- {kind: ServiceAccount, name: ecr-refresh, namespace: ecr-refresh}
",
    );
    let ours = cp.service_account_token(SERVICE_ACCOUNT.0, SERVICE_ACCOUNT.1);
    seed(cp, ("x-victim", "x-ours"));
    let attack = &attacks("x-victim", "x-ours")[1];
    eventually("the grant of everything in force", || {
        let (status, body) = send_attack(cp, &ours, attack);
        if status == 201 {
            Ok(())
        } else {
            Err(format!("{}: {status} {body}", attack.what))
        }
    });
}
