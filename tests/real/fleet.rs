//! A fleet from one run (issue 51), on real control planes: a hub (the shared one) holding
//! two spokes of their own as Cluster API or Argo CD Secrets, each spoke with the spoke
//! install and an audit log (tests/common/fleet.rs). The binary runs on the host against the
//! hub, as a hub ServiceAccount that may read its clusters' Secrets only. Each selected
//! namespace of each spoke gets the Secret, written as the spoke's own ServiceAccount by its
//! audit log; the hub's credential asks for that token and can do nothing else; a token it
//! mints is held by the spoke's own policy; a spoke that is down fails alone.

use crate::common;

use common::fleet::{
    HUB_ACCOUNT, HUB_USER, SELECTED, SPOKE_ACCOUNT, Source, Spoke, assert_each_cluster_reported,
    fleet_summary, start_spokes,
};
use common::real::{admin, create, denied_by_policy, get, message, send};
use common::{Run, SECRET};
use control_plane::ControlPlane;
use serde_json::{Value, json};

/// The termination message the run wrote, as JSON.
fn termination(hub: &common::fleet::Hub<'_>) -> Value {
    let text =
        std::fs::read_to_string(hub.harness.termination_log()).expect("a termination message");
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

/// No credential of the spokes' reached the output.
fn no_spoke_token(run: &Run, spokes: &[&Spoke]) {
    for spoke in spokes {
        assert!(
            !run.stdout.contains(&spoke.hub_token) && !run.stderr.contains(&spoke.hub_token),
            "{}'s hub token reached the output",
            spoke.name
        );
    }
}

/// A run that reached every spoke: exit 0, one line per cluster and namespace, the fleet
/// summary and termination message counting them, one ECR call for the fleet.
fn assert_fleet_done(hub: &common::fleet::Hub<'_>, run: &Run, spokes: &[&Spoke]) {
    run.expect_code(0);
    no_spoke_token(run, spokes);
    let names: Vec<String> = spokes.iter().map(|s| hub.cluster_name(s)).collect();
    assert_each_cluster_reported(run, &names);
    let summary = fleet_summary(run);
    assert_eq!(summary["clusters"], 2, "{summary}");
    assert_eq!(summary["clusters_reached"], 2, "{summary}");
    assert_eq!(summary["clusters_failed"], 0, "{summary}");
    assert_eq!(
        summary["created"],
        2 * SELECTED.len(),
        "the totals: every selected namespace of both: {summary}"
    );
    let message = termination(hub);
    assert_eq!(message["exit_code"], 0, "{message}");
    assert_eq!(message["clusters"], 2, "{message}");
    assert_eq!(message["clusters_reached"], 2, "{message}");
    assert_eq!(
        hub.harness.ecr.calls().len(),
        1,
        "one GetAuthorizationToken for the whole fleet: {:?}",
        hub.harness.ecr.calls()
    );
    for spoke in spokes {
        spoke.assert_refreshed_as_its_service_account();
    }
}

/// What the hub's credential may not do in a spoke, each refused by RBAC: read or list
/// Secrets, write one, delete ours, change the ServiceAccount, or get a token for another
/// ServiceAccount (itself included).
fn hub_credential_attacks(spoke: &Spoke) {
    let token = &spoke.hub_token;
    let cp = &spoke.cp;
    let ns = SELECTED[0];
    let (sa_ns, sa) = SPOKE_ACCOUNT;
    let secret = format!("/api/v1/namespaces/{ns}/secrets/{SECRET}");
    let token_request = json!({ "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
        "spec": { "expirationSeconds": 600 } });
    let attacks: Vec<(&str, &str, String, &str, Value)> = vec![
        (
            "read our Secret",
            "GET",
            secret.clone(),
            "application/json",
            Value::Null,
        ),
        (
            "list the Secrets",
            "GET",
            format!("/api/v1/namespaces/{ns}/secrets"),
            "application/json",
            Value::Null,
        ),
        (
            "write a Secret of another name",
            "POST",
            format!("/api/v1/namespaces/{ns}/secrets"),
            "application/json",
            common::attacks::pull_secret_body("argocd-repo-creds"),
        ),
        (
            "write our Secret",
            "PATCH",
            format!("{secret}?fieldManager=ecr-refresh&force=true"),
            "application/apply-patch+yaml",
            common::attacks::pull_secret_body(SECRET),
        ),
        (
            "delete our Secret",
            "DELETE",
            secret.clone(),
            "application/json",
            Value::Null,
        ),
        (
            "change the spoke's ServiceAccount",
            "PATCH",
            format!("/api/v1/namespaces/{sa_ns}/serviceaccounts/{sa}"),
            "application/merge-patch+json",
            json!({ "automountServiceAccountToken": true }),
        ),
        (
            "a token for itself",
            "POST",
            format!(
                "/api/v1/namespaces/{}/serviceaccounts/{}/token",
                HUB_ACCOUNT.0, HUB_ACCOUNT.1
            ),
            "application/json",
            token_request.clone(),
        ),
        (
            "a token for a ServiceAccount of a team",
            "POST",
            format!("/api/v1/namespaces/{ns}/serviceaccounts/default/token"),
            "application/json",
            token_request,
        ),
    ];
    for (what, method, path, content_type, body) in attacks {
        let (status, answer) = send(cp, token, method, &path, content_type, &body);
        assert_eq!(
            status, 403,
            "{}: the hub's credential: {what}: {answer}",
            spoke.name
        );
        assert!(
            message(&answer).contains(&format!("\"{HUB_USER}\" cannot ")),
            "{}: {what}: refused by RBAC: {answer}",
            spoke.name
        );
    }
}

/// A token of the spoke's ServiceAccount, minted with the hub's credential (the one request
/// the hub may send).
fn token_minted_by_the_hub(spoke: &Spoke) -> String {
    let (ns, sa) = SPOKE_ACCOUNT;
    let (status, answer) = send(
        &spoke.cp,
        &spoke.hub_token,
        "POST",
        &format!("/api/v1/namespaces/{ns}/serviceaccounts/{sa}/token"),
        "application/json",
        &json!({ "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
            "spec": { "expirationSeconds": 600 } }),
    );
    assert_eq!(status, 201, "{}: the hub's one right: {answer}", spoke.name);
    answer["status"]["token"]
        .as_str()
        .expect("a token")
        .to_owned()
}

/// Every admission attack (tests/common/attacks.rs) made as the spoke's ServiceAccount with
/// a token the hub minted, refused: by the spoke's RBAC, or by its policy for the rule it
/// breaks; a Secret of another name, which RBAC lets it create, by the policy.
pub(crate) fn attacks_as_the_spoke_account_refused(spoke: &Spoke) {
    let cp = &spoke.cp;
    let token = token_minted_by_the_hub(spoke);
    crate::admission::seed(cp, ("victim", "ours"));
    let ours_before = get(cp, "secret", "ours", SECRET).unwrap();
    let mut by_policy = Vec::new();
    for (what, rule, status, body) in crate::admission::launch(cp, &token, ("victim", "ours")) {
        assert_eq!(status, 403, "{}: {what}: {body}", spoke.name);
        if denied_by_policy(&body) {
            assert!(
                message(&body).contains(rule),
                "{}: {what}: for {rule:?}: {body}",
                spoke.name
            );
            by_policy.push(what);
        } else {
            assert!(
                message(&body).contains("cannot "),
                "{}: {what}: by RBAC: {body}",
                spoke.name
            );
        }
    }
    assert!(
        by_policy.contains(&"a Secret under another name"),
        "{}: the spoke's policy refuses a Secret of another name: {by_policy:?}",
        spoke.name
    );
    let ours_after = get(cp, "secret", "ours", SECRET).unwrap();
    assert_eq!(
        ours_after["metadata"]["resourceVersion"], ours_before["metadata"]["resourceVersion"],
        "{}: nothing refused changed anything",
        spoke.name
    );
}

#[test]
#[ignore = "needs KUBEBUILDER_ASSETS (bash .ci/test)"]
fn cluster_api_secrets_give_one_run_both_spokes_written_as_each_spokes_service_account_and_the_hub_credential_only_a_token()
 {
    let spokes = start_spokes(&[("spoke-1", None), ("spoke-2", None)]);
    let both: Vec<&Spoke> = spokes.iter().collect();
    let hub_cp = ControlPlane::shared();
    let hub = common::fleet::Hub::new(hub_cp, Source::Capi, &both);
    // What Cluster API keeps beside a cluster's kubeconfig, under the same label and type:
    // not a cluster.
    create(
        hub_cp,
        &[json!({ "apiVersion": "v1", "kind": "Secret",
            "metadata": { "name": "spoke-1-ca", "namespace": hub.namespaces[0],
                          "labels": { "cluster.x-k8s.io/cluster-name": "spoke-1" } },
            "type": "cluster.x-k8s.io/secret",
            "data": { "tls.crt": common::b64("not a kubeconfig") } })],
    );

    let run = hub.run(&[]);
    assert_fleet_done(&hub, &run, &both);
    assert_eq!(
        hub.cluster_name(&spokes[0]),
        format!("{}/spoke-1", hub.namespaces[0])
    );

    for spoke in &spokes {
        hub_credential_attacks(spoke);
    }
    attacks_as_the_spoke_account_refused(&spokes[0]);
}

#[test]
#[ignore = "needs KUBEBUILDER_ASSETS (bash .ci/test)"]
fn argo_cd_cluster_secrets_give_the_same_run_and_a_spoke_that_stopped_fails_alone_named_in_the_output_and_termination_message()
 {
    let spokes = start_spokes(&[("spoke-1", None), ("spoke-2", None)]);
    let both: Vec<&Spoke> = spokes.iter().collect();
    let hub = common::fleet::Hub::new(ControlPlane::shared(), Source::ArgoCd, &both);

    let run = hub.run(&[]);
    assert_fleet_done(&hub, &run, &both);
    assert_eq!(hub.cluster_name(&spokes[1]), "spoke-2");

    // spoke-2 goes down after the first run; spoke-1 has work to do in the next: a Secret
    // its team deleted.
    let (up, down) = (&spokes[0], &spokes[1]);
    down.cp.kill_apiserver();
    let gone = SELECTED[1];
    admin(&up.cp, &["delete", "secret", SECRET, "-n", gone], "");

    let run = hub.run(&[]);
    run.expect_code(1);
    no_spoke_token(&run, &both);
    let failed = run.messages_starting("cluster failed");
    assert_eq!(failed.len(), 1, "one cluster failed:\n{}", run.stdout);
    assert_eq!(failed[0]["cluster"], "spoke-2", "{}", failed[0]);
    assert_eq!(failed[0]["level"], "ERROR", "{}", failed[0]);
    assert!(
        failed[0]["error"].as_str().is_some_and(|e| !e.is_empty()),
        "the failure says why: {}",
        failed[0]
    );
    let summary = fleet_summary(&run);
    assert_eq!(summary["clusters"], 2, "{summary}");
    assert_eq!(summary["clusters_reached"], 1, "{summary}");
    assert_eq!(summary["clusters_failed"], 1, "{summary}");
    assert_eq!(summary["failed_clusters"], "spoke-2", "{summary}");
    let message = termination(&hub);
    assert_eq!(message["exit_code"], 1, "{message}");
    assert_eq!(message["clusters_failed"], 1, "{message}");
    assert_eq!(message["failed_clusters"], json!(["spoke-2"]), "{message}");

    // spoke-1 done: the deleted Secret is back, every namespace reported under its name.
    assert!(up.secret(gone).is_some(), "spoke-1's {gone} written again");
    assert_each_cluster_reported(&run, &["spoke-1".to_owned()]);
    up.assert_refreshed_as_its_service_account();
    assert!(
        !run.lines
            .iter()
            .any(|l| l["cluster"] == "spoke-2" && l.get("outcome").is_some()),
        "nothing reported done in spoke-2:\n{}",
        run.stdout
    );
}
