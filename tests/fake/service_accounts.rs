//! ECR_REFRESH_SERVICE_ACCOUNTS: our entry in imagePullSecrets, once, without losing others'.

use crate::common;

use common::*;
use fake_cluster::Resource;
use serde_json::{Value, json};

fn pull_secrets(h: &Harness, namespace: &str, account: &str) -> Vec<Value> {
    let sa = h
        .cluster
        .get(Resource::ServiceAccounts, namespace, account)
        .expect("the ServiceAccount");
    sa["imagePullSecrets"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

fn seed_account(h: &Harness, namespace: &str, name: &str, pull_secrets: Value) {
    h.cluster.seed(
        Resource::ServiceAccounts,
        json!({
            "apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": { "name": name, "namespace": namespace },
            "imagePullSecrets": pull_secrets
        }),
        "kubectl-edit",
    );
}

#[test]
fn our_entry_is_added_once_and_only_once_over_several_runs() {
    let h = Harness::new();
    h.namespaces(&["a", "b"]);
    let env = [("ECR_REFRESH_SERVICE_ACCOUNTS", "default")];

    let first = h.run(&env);
    first.expect_code(0);
    assert_eq!(first.line("a")["service_accounts"], "default:added");
    assert_eq!(first.summary()["sa_added"], 2);
    for _ in 0..2 {
        let again = h.run(&env);
        again.expect_code(0);
        assert_eq!(again.line("a")["service_accounts"], "default:present");
        assert_eq!(again.summary()["sa_present"], 2);
    }

    for ns in ["a", "b"] {
        assert_eq!(pull_secrets(&h, ns, "default"), [json!({ "name": SECRET })]);
        let versions = h.cluster.history(Resource::ServiceAccounts, ns, "default");
        assert_eq!(
            versions.len(),
            2,
            "{ns}: created by the namespace, patched once, never again"
        );
    }
    let patches = h
        .cluster
        .requests()
        .into_iter()
        .filter(|r| r.method == "PATCH" && r.path.contains("/serviceaccounts/"))
        .collect::<Vec<_>>();
    assert_eq!(patches.len(), 2, "one write per namespace over three runs");
    for p in patches {
        assert_eq!(
            p.content_type.as_deref(),
            Some("application/json-patch+json")
        );
        assert!(
            p.body.contains(r#""op":"test""#) && p.body.contains("/metadata/resourceVersion"),
            "{}",
            p.body
        );
    }
}

#[test]
fn entries_of_others_stay_in_order_and_content() {
    let h = Harness::new();
    h.namespaces(&["a"]);
    let others = json!([{ "name": "docker-hub" }, { "name": "quay" }]);
    seed_account(&h, "a", "builder", others.clone());

    h.run(&[("ECR_REFRESH_SERVICE_ACCOUNTS", "builder")])
        .expect_code(0);

    let after = pull_secrets(&h, "a", "builder");
    assert_eq!(
        after,
        [
            others[0].clone(),
            others[1].clone(),
            json!({ "name": SECRET })
        ]
    );
}

#[test]
fn a_change_to_the_service_account_between_our_read_and_write_is_not_lost() {
    let h = Harness::new();
    h.namespaces(&["a"]);
    seed_account(&h, "a", "builder", json!([{ "name": "docker-hub" }]));
    h.cluster
        .change_after_next_get(Resource::ServiceAccounts, "a", "builder", |sa| {
            sa["imagePullSecrets"] =
                json!([{ "name": "docker-hub" }, { "name": "added-meanwhile" }]);
        });

    let run = h.run(&[("ECR_REFRESH_SERVICE_ACCOUNTS", "builder")]);

    run.expect_code(0);
    assert_eq!(
        pull_secrets(&h, "a", "builder"),
        [
            json!({ "name": "docker-hub" }),
            json!({ "name": "added-meanwhile" }),
            json!({ "name": SECRET })
        ]
    );
    let statuses = h.statuses("PATCH", "/serviceaccounts/");
    assert_eq!(
        statuses,
        [422, 200],
        "the stale patch failed its test, then a fresh read succeeded"
    );
}

#[test]
fn a_service_account_that_does_not_exist_is_skipped_and_never_created() {
    let h = Harness::new();
    h.namespaces(&["a"]);

    let run = h.run(&[("ECR_REFRESH_SERVICE_ACCOUNTS", "default,builder")]);

    run.expect_code(0);
    assert_eq!(
        run.line("a")["service_accounts"],
        "default:added,builder:missing"
    );
    assert_eq!(run.summary()["sa_missing"], 1);
    assert!(
        h.cluster
            .get(Resource::ServiceAccounts, "a", "builder")
            .is_none()
    );
    assert_eq!(h.requests_to("POST", "/serviceaccounts"), 0);
}

#[test]
fn a_service_account_without_the_list_gets_the_list() {
    let h = Harness::new();
    h.namespaces(&["a"]);
    h.cluster.seed(
        Resource::ServiceAccounts,
        json!({ "apiVersion": "v1", "kind": "ServiceAccount", "metadata": { "name": "bare", "namespace": "a" } }),
        "kubectl-create",
    );

    h.run(&[("ECR_REFRESH_SERVICE_ACCOUNTS", "bare")])
        .expect_code(0);

    assert_eq!(pull_secrets(&h, "a", "bare"), [json!({ "name": SECRET })]);
}

#[test]
fn each_named_service_account_is_read_in_one_list_or_by_name_where_the_list_is_refused() {
    let h = Harness::new();
    h.namespaces(&["a", "b", "c"]);
    for ns in ["a", "b", "c"] {
        seed_account(&h, ns, "builder", json!([]));
    }
    h.cluster
        .add_fault(fake_cluster::Fault::new("GET", "^/api/v1/serviceaccounts$", 403).times(1));
    let env = [("ECR_REFRESH_SERVICE_ACCOUNTS", "default,builder")];

    let run = h.run(&env);

    run.expect_code(0);
    for ns in ["a", "b", "c"] {
        assert_eq!(
            run.line(ns)["service_accounts"],
            "default:added,builder:added",
            "{ns}"
        );
        assert_eq!(pull_secrets(&h, ns, "builder"), [json!({ "name": SECRET })]);
    }
    let lists: Vec<(String, u16)> = h
        .cluster
        .requests()
        .iter()
        .filter(|r| r.path == "/api/v1/serviceaccounts")
        .map(|r| (r.query.clone(), r.status))
        .collect();
    // default's list refused: its accounts read by name; builder's in one list.
    assert_eq!(
        lists,
        [
            (
                "&fieldSelector=metadata.name%3Ddefault&limit=500".to_owned(),
                403
            ),
            (
                "&fieldSelector=metadata.name%3Dbuilder&limit=500".to_owned(),
                200
            )
        ]
    );
    assert_eq!(h.requests_to("GET", "/serviceaccounts/default"), 3);
    assert_eq!(h.requests_to("GET", "/serviceaccounts/builder"), 0);
}
