//! The admission attacks of tests/admission.rs (one list, tests/common/attacks.rs) sent to a
//! real kube-apiserver (tests/control-plane) as ecr-refresh's ServiceAccount, with a real
//! TokenRequest token, after `kubectl apply -k manifests/` with the service-accounts
//! component: each is refused, by the real RBAC (a delete, a ServiceAccount create) or by
//! the policy, evaluated by the real CEL; with RBAC widened to everything on Secrets and
//! ServiceAccounts and Events, by the policy alone. With the binding deleted, each goes through: the
//! policy is what stops them.
//!
//! The denials are told by the shape of the apiserver's message (`ValidatingAdmissionPolicy
//! 'P' with binding 'B' denied request: ...`) and by the rule each attack breaks, as the
//! list words it, not by the policy's or binding's name.

mod common;

use common::attacks::{OPAQUE_UPDATE, WIDE_RBAC, attacks, opaque_under_our_name, target_objects};
use common::manifests::copy;
use common::real::{
    SERVICE_ACCOUNT, admin, create, denied_by_policy, eventually, get, install, message, send,
    wait_until_enforced,
};
use common::*;
use control_plane::ControlPlane;
use serde_json::Value;

/// The attack targets as another user left them, created by the admin.
fn seed(cp: &ControlPlane, targets: (&str, &str)) {
    let objects: Vec<Value> = target_objects(targets)
        .into_iter()
        .map(|(_, o)| o)
        .collect();
    create(cp, &objects);
}

/// Sends every attack aimed at `targets` as `token`: (what, rule, status, body).
fn launch(
    cp: &ControlPlane,
    token: &str,
    (victim, ours): (&str, &str),
) -> Vec<(&'static str, &'static str, u16, Value)> {
    attacks(victim, ours)
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

#[test]
fn every_attack_is_refused_on_a_real_server_and_goes_through_without_the_binding() {
    let cp = ControlPlane::shared();
    let manifests = copy();
    let root = manifests.path().join("manifests");
    install(cp, &cp.assets().join("kubectl"), &root, "", true);
    wait_until_enforced(cp, "default");
    let token = cp.service_account_token(SERVICE_ACCOUNT.0, SERVICE_ACCOUNT.1);
    seed(cp, ("victim", "ours"));
    let ours_before = get(cp, "secret", "ours", SECRET).unwrap();

    // The shipped RBAC refuses a delete, a ServiceAccount create and a core/v1 Event; the
    // policy the rest.
    for (what, rule, status, body) in launch(cp, &token, ("victim", "ours")) {
        assert_eq!(status, 403, "{what}: {body}");
        let by_rbac = what == "a delete of our Secret"
            || what == "a ServiceAccount create"
            || what == "a core/v1 Event";
        if by_rbac {
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

    // RBAC granting everything on Secrets, ServiceAccounts and Events: the policy alone.
    admin(cp, &["apply", "-f", "-"], WIDE_RBAC);
    let delete = &attacks("victim", "ours")
        .into_iter()
        .find(|a| a.method == "DELETE")
        .unwrap();
    eventually("the wide RBAC in force", || {
        let path = format!("{}?dryRun=All", delete.path);
        let (status, body) = send(
            cp,
            &token,
            "DELETE",
            &path,
            delete.content_type,
            &Value::Null,
        );
        if denied_by_policy(&body) {
            Ok(())
        } else {
            Err(format!("{status} {body}"))
        }
    });
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
    let count = attacks("victim", "ours").len();
    for i in 0..count {
        let victim = format!("victim-{i}");
        let ours = format!("ours-{i}");
        seed(cp, (&victim, &ours));
        let attack = attacks(&victim, &ours).remove(i);
        if attack.what == OPAQUE_UPDATE {
            create(cp, &[opaque_under_our_name(&victim).1]);
        }
        let (status, body) = send(
            cp,
            &token,
            attack.method,
            &attack.path,
            attack.content_type,
            &attack.body,
        );
        assert!(
            (200..300).contains(&status),
            "without the binding, {} is admitted: {status} {body}",
            attack.what
        );
    }
    // The first, a service-account-token Secret under our name, is stored as sent.
    assert_eq!(
        get(cp, "secret", "victim-0", SECRET).unwrap()["type"],
        "kubernetes.io/service-account-token"
    );
}
