//! ECR_REFRESH_RENEW_BEFORE: a Secret is written only when it is due, and tokens are fetched
//! only when some Secret is.

use crate::common;

use std::time::{Duration, SystemTime};

use common::*;
use fake_cluster::{EcrFault, Recorded, Resource};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Patch, PatchParams};
use serde_json::{Value, json};

const RENEW_8H: (&str, &str) = ("ECR_REFRESH_RENEW_BEFORE", "8h");
/// A second registry, in another region: its token is another GetAuthorizationToken call.
const OTHER: &str = "210987654321.dkr.ecr.eu-west-1.amazonaws.com";

/// The requests the fake served since `mark` (an index into its request log).
fn since(h: &Harness, mark: usize) -> Vec<Recorded> {
    h.cluster.requests().split_off(mark)
}

/// The requests that may store something: not the reads, and not the SelfSubjectReview a run
/// with no install name asks before its first write (a review stores nothing).
fn is_write(r: &Recorded) -> bool {
    r.method != "GET" && !r.path.ends_with("/selfsubjectreviews")
}

fn writes(requests: &[Recorded]) -> Vec<String> {
    requests
        .iter()
        .filter(|r| is_write(r))
        .map(|r| format!("{} {}", r.method, r.path))
        .collect()
}

fn annotation(secret: &Value, key: &str) -> String {
    secret["metadata"]["annotations"][key]
        .as_str()
        .unwrap_or_else(|| panic!("no annotation {key} in {secret}"))
        .to_owned()
}

fn time(rfc3339: &str) -> SystemTime {
    humantime::parse_rfc3339(rfc3339).unwrap_or_else(|e| panic!("{rfc3339}: {e}"))
}

/// Edits a Secret as a person would with `kubectl edit` (a merge patch through the API).
fn edit(h: &Harness, namespace: &str, patch: Value) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        let kubeconfig = kube::config::Kubeconfig::read_from(h.kubeconfig()).expect("kubeconfig");
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
            .await
            .expect("a kube config");
        let client = kube::Client::try_from(config).expect("a client");
        let api: kube::Api<Secret> = kube::Api::namespaced(client, namespace);
        let params = PatchParams {
            field_manager: Some("kubectl-edit".into()),
            ..PatchParams::default()
        };
        api.patch(SECRET, &params, &Patch::Merge(&patch))
            .await
            .expect("the edit is accepted");
    });
}

/// The Secret's `.dockerconfigjson` after replacing `from` with `to` in it.
fn edited_value(secret: &Value, from: &str, to: &str) -> String {
    let text = String::from_utf8(docker_config_bytes(secret)).unwrap();
    assert!(text.contains(from), "{text}");
    b64(&text.replace(from, to))
}

#[test]
fn a_second_run_with_renew_before_8h_writes_nothing_and_calls_ecr_0_times() {
    let h = Harness::new();
    h.namespaces(&["a", "b", "c"]);
    h.run(&[RENEW_8H]).expect_code(0);
    assert_eq!(h.ecr.calls().len(), 1);
    let mark = h.cluster.requests().len();

    let run = h.run(&[RENEW_8H]);

    run.expect_code(0);
    assert_eq!(h.ecr.calls().len(), 1, "no ECR call when nothing is due");
    let requests = since(&h, mark);
    assert_eq!(writes(&requests), Vec::<String>::new());
    let secret_gets = requests
        .iter()
        .filter(|r| r.path.ends_with(&format!("/secrets/{SECRET}")))
        .count();
    assert_eq!(secret_gets, 0, "no read per namespace");
    let secret_lists: Vec<&Recorded> = requests
        .iter()
        .filter(|r| r.path == "/api/v1/secrets")
        .collect();
    assert_eq!(secret_lists.len(), 1, "every Secret read in one list");
    assert_eq!(
        secret_lists[0].query,
        format!("&fieldSelector=metadata.name%3D{SECRET}&limit=500")
    );
    assert_eq!(
        requests.len(),
        3,
        "one Secret list, one namespace page and /version: {:?}",
        requests.iter().map(|r| &r.path).collect::<Vec<_>>()
    );
    for ns in ["a", "b", "c"] {
        let secret = h.secret(ns).unwrap();
        let line = run.line(ns);
        assert_eq!(line["outcome"], "fresh");
        assert_eq!(line["level"], "INFO");
        assert_eq!(line["uid_before"], uid(&secret));
        assert_eq!(line["uid_after"], uid(&secret));
        let expires_at = annotation(&secret, "ecr-refresh/token-expires-at");
        assert_eq!(line["expires_at"], expires_at.as_str());
        let due_at = time(line["due_at"].as_str().unwrap());
        assert_eq!(
            time(&expires_at).duration_since(due_at).unwrap(),
            Duration::from_secs(8 * 3600),
            "due 8h before the expiry"
        );
        assert_eq!(h.cluster.history(Resource::Secrets, ns, SECRET).len(), 1);
    }
    let summary = run.summary();
    assert_eq!(summary["fresh"], 3);
    assert_eq!(summary["created"], 0);
    assert_eq!(summary["updated"], 0);
    assert_eq!(summary["tokens_fetched"], false);
    assert!(summary.get("registries").is_none(), "{summary}");
    let message: Value =
        serde_json::from_str(&std::fs::read_to_string(h.termination_log()).unwrap()).unwrap();
    assert_eq!(message["outcomes"]["fresh"], 3);
    assert_eq!(message["exit_code"], 0);
}

#[test]
fn a_namespace_created_between_two_runs_gets_its_secret_on_the_next_run_and_is_the_only_one_written()
 {
    let h = Harness::new();
    h.namespaces(&["a", "b"]);
    h.run(&[RENEW_8H]).expect_code(0);
    h.namespaces(&["new"]);
    let mark = h.cluster.requests().len();

    let run = h.run(&[RENEW_8H]);

    run.expect_code(0);
    assert_eq!(run.outcome("new"), "created");
    assert_eq!(run.line("new")["due"], "missing");
    assert_eq!(run.outcome("a"), "fresh");
    assert_eq!(run.outcome("b"), "fresh");
    assert_eq!(
        writes(&since(&h, mark)),
        ["POST /api/v1/namespaces/new/secrets"]
    );
    assert_eq!(
        h.ecr.calls().len(),
        2,
        "one token call, for the due namespace"
    );
    let secret = h.secret("new").expect("the new namespace has its Secret");
    assert_eq!(
        password(&secret, REGISTRY),
        h.ecr.passwords_issued().last().unwrap().as_str()
    );
    assert_eq!(run.summary()["created"], 1);
    assert_eq!(run.summary()["fresh"], 2);
    assert_eq!(run.summary()["registries"], REGISTRY);
}

#[test]
fn a_secret_whose_recorded_expiry_falls_inside_the_window_is_rewritten_in_place() {
    let h = Harness::new();
    h.namespaces(&["soon", "later"]);
    h.run(&[RENEW_8H]).expect_code(0);
    let before = h.secret("soon").unwrap();
    let six_hours =
        humantime::format_rfc3339_seconds(SystemTime::now() + Duration::from_secs(6 * 3600))
            .to_string();
    edit(
        &h,
        "soon",
        json!({ "metadata": { "annotations": { "ecr-refresh/token-expires-at": six_hours } } }),
    );
    let mark = h.cluster.requests().len();

    let run = h.run(&[RENEW_8H]);

    run.expect_code(0);
    assert_eq!(run.outcome("soon"), "updated");
    assert_eq!(run.line("soon")["due"], "expires-soon");
    assert_eq!(run.outcome("later"), "fresh");
    let after = h.secret("soon").unwrap();
    assert_eq!(uid(&after), uid(&before), "in place");
    assert_eq!(run.line("soon")["uid_before"], uid(&before));
    assert_eq!(run.line("soon")["uid_after"], uid(&before));
    assert_ne!(password(&after, REGISTRY), password(&before, REGISTRY));
    assert_ne!(
        annotation(&after, "ecr-refresh/token-expires-at"),
        six_hours,
        "the new token's expiry is recorded"
    );
    assert_eq!(
        writes(&since(&h, mark)),
        ["PATCH /api/v1/namespaces/soon/secrets/aws-ecr-token"]
    );
}

#[test]
fn a_secret_whose_entry_of_ours_was_edited_by_hand_is_rewritten_though_its_expiry_is_far_off() {
    let h = Harness::new();
    h.namespaces(&["edited", "untouched"]);
    h.run(&[RENEW_8H]).expect_code(0);
    let before = h.secret("edited").unwrap();
    let ours = password(&before, REGISTRY);
    edit(
        &h,
        "edited",
        json!({ "data": { ".dockerconfigjson": edited_value(&before, &ours, "typed-by-hand") } }),
    );

    let run = h.run(&[RENEW_8H]);

    run.expect_code(0);
    assert_eq!(run.outcome("edited"), "updated");
    assert_eq!(run.line("edited")["due"], "entries-changed");
    assert_eq!(run.outcome("untouched"), "fresh");
    let after = h.secret("edited").unwrap();
    assert_eq!(uid(&after), uid(&before));
    assert_eq!(
        password(&after, REGISTRY),
        h.ecr.passwords_issued().last().unwrap().as_str()
    );
}

#[test]
fn an_entry_someone_else_adds_and_an_annotation_leave_the_secret_fresh() {
    let h = Harness::new();
    h.namespaces(&["shared"]);
    h.run(&[RENEW_8H]).expect_code(0);
    let before = h.secret("shared").unwrap();
    edit(
        &h,
        "shared",
        json!({
            "metadata": { "annotations": { "team.example/owner": "platform" } },
            "data": { ".dockerconfigjson": edited_value(
                &before,
                r#"{"auths":{"#,
                r#"{"auths":{"ghcr.io":{"auth":"Zm9vOmJhcg=="},"#,
            ) }
        }),
    );

    let run = h.run(&[RENEW_8H]);

    run.expect_code(0);
    assert_eq!(
        run.outcome("shared"),
        "fresh",
        "the digest covers our entries only"
    );
    assert_eq!(h.ecr.calls().len(), 1);
}

#[test]
fn a_secret_missing_one_configured_registry_is_rewritten() {
    let h = Harness::new();
    h.namespaces(&["a"]);
    h.run(&[RENEW_8H]).expect_code(0);
    let before = h.secret("a").unwrap();
    let both = format!("{REGISTRY},{OTHER}");

    let run = h.run(&[RENEW_8H, ("ECR_REFRESH_REGISTRIES", &both)]);

    run.expect_code(0);
    assert_eq!(run.outcome("a"), "updated");
    assert_eq!(run.line("a")["due"], format!("missing-registry {OTHER}"));
    let after = h.secret("a").unwrap();
    assert_eq!(uid(&after), uid(&before));
    let auths = &docker_config(&after)["auths"];
    assert!(
        auths.get(REGISTRY).is_some() && auths.get(OTHER).is_some(),
        "{auths}"
    );
    assert_eq!(annotation(&after, "ecr-refresh/registries"), both);
}

#[test]
fn a_secret_holding_our_entry_for_a_registry_no_longer_configured_is_rewritten() {
    let h = Harness::new();
    h.namespaces(&["a"]);
    let both = format!("{REGISTRY},{OTHER}");
    h.run(&[RENEW_8H, ("ECR_REFRESH_REGISTRIES", &both)])
        .expect_code(0);

    let run = h.run(&[RENEW_8H]);

    run.expect_code(0);
    assert_eq!(run.outcome("a"), "updated");
    assert_eq!(run.line("a")["due"], format!("stale-registry {OTHER}"));
    let after = h.secret("a").unwrap();
    assert!(docker_config(&after)["auths"].get(OTHER).is_none());
}

#[test]
fn a_secret_whose_last_applied_annotation_holds_our_old_password_is_rewritten() {
    let h = Harness::new();
    h.namespaces(&["applied"]);
    h.run(&[RENEW_8H]).expect_code(0);
    let before = h.secret("applied").unwrap();
    // Someone applied a copy of the Secret with kubectl: the annotation holds our password.
    let copy = json!({
        "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/dockerconfigjson",
        "metadata": { "name": SECRET, "namespace": "applied" },
        "data": { ".dockerconfigjson": before["data"][".dockerconfigjson"] }
    })
    .to_string();
    edit(
        &h,
        "applied",
        json!({ "metadata": { "annotations": {
            "kubectl.kubernetes.io/last-applied-configuration": copy
        } } }),
    );

    let run = h.run(&[RENEW_8H]);

    run.expect_code(0);
    assert_eq!(run.outcome("applied"), "updated");
    assert_eq!(run.line("applied")["due"], "last-applied-holds-password");
    let after = h.secret("applied").unwrap();
    assert_eq!(uid(&after), uid(&before));
    assert!(
        after["metadata"]["annotations"]
            .get("kubectl.kubernetes.io/last-applied-configuration")
            .is_none(),
        "the copy of the password is gone: {after}"
    );
}

#[test]
fn a_dry_run_counts_only_the_due_secrets() {
    let h = Harness::new();
    h.namespaces(&["a", "b"]);
    h.run(&[RENEW_8H]).expect_code(0);
    h.namespaces(&["new"]);
    let mark = h.cluster.requests().len();

    let run = h.run(&[RENEW_8H, ("ECR_REFRESH_DRY_RUN", "true")]);

    run.expect_code(0);
    assert_eq!(run.outcome("new"), "would-create");
    assert_eq!(run.outcome("a"), "fresh");
    assert_eq!(run.outcome("b"), "fresh");
    let summary = run.summary();
    assert_eq!(summary["would_write"], 1);
    assert_eq!(summary["fresh"], 2);
    assert!(h.secret("new").is_none());
    let writes: Vec<Recorded> = since(&h, mark).into_iter().filter(is_write).collect();
    assert_eq!(writes.len(), 1);
    assert!(
        writes[0].query.contains("dryRun=All"),
        "{}",
        writes[0].query
    );
}

#[test]
fn the_default_writes_every_secret_on_every_run_as_before() {
    let h = Harness::new();
    h.namespaces(&["a", "b"]);
    h.run(&[]).expect_code(0);

    let run = h.run(&[]);

    run.expect_code(0);
    for ns in ["a", "b"] {
        assert_eq!(run.outcome(ns), "updated");
        assert_eq!(run.line(ns)["due"], "expires-soon");
        assert_eq!(h.cluster.history(Resource::Secrets, ns, SECRET).len(), 2);
    }
    assert_eq!(run.summary()["fresh"], 0);
    assert_eq!(h.ecr.calls().len(), 2);
}

#[test]
fn a_renew_before_above_12h_renews_on_every_run() {
    let h = Harness::new();
    h.namespaces(&["a"]);
    let day = ("ECR_REFRESH_RENEW_BEFORE", "24h");
    h.run(&[day]).expect_code(0);

    let run = h.run(&[day]);

    run.expect_code(0);
    assert_eq!(run.outcome("a"), "updated");
    assert_eq!(h.ecr.calls().len(), 2);
}

#[test]
fn a_bad_renew_before_exits_2_naming_the_variable() {
    let h = Harness::new();
    h.namespaces(&["a"]);
    for value in ["abc", "-1h", "0s"] {
        let run = h.run(&[("ECR_REFRESH_RENEW_BEFORE", value)]);
        run.expect_code(2);
        let error = run.lines.last().unwrap()["error"].as_str().unwrap();
        assert!(
            error.contains("ECR_REFRESH_RENEW_BEFORE") && error.contains(value),
            "{error}"
        );
    }
    assert_eq!(h.cluster.request_count(), 0);
    assert!(h.ecr.calls().is_empty());
}

#[test]
fn no_token_for_the_due_namespaces_means_nothing_is_written_and_exit_3() {
    let h = Harness::new();
    h.namespaces(&["a", "b"]);
    h.run(&[RENEW_8H]).expect_code(0);
    let names: Vec<String> = (0..20).map(|i| format!("new-{i:02}")).collect();
    for name in &names {
        h.cluster.add_namespace(name, &[]);
    }
    h.ecr.add_fault(EcrFault::AccessDenied, None);
    let mark = h.cluster.requests().len();

    let run = h.run(&[RENEW_8H, ("ECR_REFRESH_CONCURRENCY", "4")]);

    run.expect_code(3);
    let error = run.lines.last().unwrap()["error"].as_str().unwrap();
    assert!(error.contains("AccessDeniedException"), "{error}");
    assert_eq!(writes(&since(&h, mark)), Vec::<String>::new());
    assert!(names.iter().all(|n| h.secret(n).is_none()));
    assert_eq!(h.ecr.calls().len(), 2, "one call, not one per namespace");
    let message: Value =
        serde_json::from_str(&std::fs::read_to_string(h.termination_log()).unwrap()).unwrap();
    assert_eq!(message["exit_code"], 3);
}

#[test]
fn with_nothing_due_an_ecr_outage_does_not_fail_the_run() {
    let h = Harness::new();
    h.namespaces(&["a"]);
    h.run(&[RENEW_8H]).expect_code(0);
    h.ecr.add_fault(EcrFault::AccessDenied, None);

    let run = h.run(&[RENEW_8H]);

    run.expect_code(0);
    assert_eq!(run.outcome("a"), "fresh");
    assert_eq!(h.ecr.calls().len(), 1);
}

#[test]
fn without_configured_registries_the_callers_own_registry_stays_fresh() {
    let h = Harness::new();
    h.namespaces(&["a"]);
    let own = ("ECR_REFRESH_REGISTRIES", "");
    h.run(&[RENEW_8H, own]).expect_code(0);
    assert_eq!(
        annotation(&h.secret("a").unwrap(), "ecr-refresh/registries"),
        REGISTRY
    );

    let fresh = h.run(&[RENEW_8H, own]);
    let moved = h.run(&[RENEW_8H, own, ("AWS_REGION", "eu-west-1")]);

    fresh.expect_code(0);
    assert_eq!(fresh.outcome("a"), "fresh");
    moved.expect_code(0);
    assert_eq!(moved.outcome("a"), "updated", "AWS_REGION changed");
    assert_eq!(moved.line("a")["due"], format!("stale-registry {REGISTRY}"));
    assert_eq!(h.ecr.calls().len(), 2);
}

#[test]
fn a_recorded_expiry_further_ahead_than_a_token_lives_is_not_believed() {
    let h = Harness::new();
    h.namespaces(&["frozen", "skewed"]);
    h.run(&[RENEW_8H]).expect_code(0);
    // What anyone who may edit the Secret (ecr-refresh's own token included) can write to
    // freeze it, and an expiry just inside the clock-skew allowance, which is believed.
    edit(
        &h,
        "frozen",
        json!({ "metadata": { "annotations": { "ecr-refresh/token-expires-at": "9999-12-31T23:59:59Z" } } }),
    );
    let inside_skew = humantime::format_rfc3339_seconds(
        SystemTime::now() + Duration::from_secs(12 * 3600 + 3 * 60),
    )
    .to_string();
    edit(
        &h,
        "skewed",
        json!({ "metadata": { "annotations": { "ecr-refresh/token-expires-at": inside_skew } } }),
    );

    let run = h.run(&[RENEW_8H]);

    run.expect_code(0);
    assert_eq!(run.outcome("frozen"), "updated");
    assert_eq!(
        run.line("frozen")["due"],
        "implausible-expiry 9999-12-31T23:59:59Z (a token lives 12h)"
    );
    assert_ne!(
        annotation(&h.secret("frozen").unwrap(), "ecr-refresh/token-expires-at"),
        "9999-12-31T23:59:59Z"
    );
    assert_eq!(run.outcome("skewed"), "fresh");
}

#[test]
fn the_default_renew_before_writes_every_secret_whatever_its_recorded_expiry() {
    let h = Harness::new();
    h.namespaces(&["frozen", "skewed"]);
    h.run(&[]).expect_code(0);
    edit(
        &h,
        "frozen",
        json!({ "metadata": { "annotations": { "ecr-refresh/token-expires-at": "9999-12-31T23:59:59Z" } } }),
    );
    // Believed (inside the clock-skew allowance), and 12h ahead: still written.
    let inside_skew = humantime::format_rfc3339_seconds(
        SystemTime::now() + Duration::from_secs(12 * 3600 + 3 * 60),
    )
    .to_string();
    edit(
        &h,
        "skewed",
        json!({ "metadata": { "annotations": { "ecr-refresh/token-expires-at": inside_skew } } }),
    );

    let run = h.run(&[]);

    run.expect_code(0);
    assert_eq!(run.outcome("frozen"), "updated");
    assert_eq!(run.outcome("skewed"), "updated");
    assert_eq!(run.line("skewed")["due"], "expires-soon");
    assert_eq!(run.summary()["fresh"], 0);
}

#[test]
fn an_exit_3_run_names_the_service_accounts_it_patched_before_the_token_failed() {
    let h = Harness::new();
    h.namespaces(&["fresh"]);
    let accounts = ("ECR_REFRESH_SERVICE_ACCOUNTS", "default");
    h.run(&[RENEW_8H]).expect_code(0);
    // Since that run: a ServiceAccount without our entry where the Secret is fresh, and a
    // new namespace whose Secret is due, when ECR refuses.
    h.cluster.seed(
        Resource::ServiceAccounts,
        json!({ "metadata": { "name": "default", "namespace": "fresh" } }),
        "kube-controller-manager",
    );
    h.cluster.add_namespace("new", &[]);
    h.ecr.add_fault(EcrFault::AccessDenied, None);

    let run = h.run(&[RENEW_8H, accounts, ("ECR_REFRESH_CONCURRENCY", "1")]);

    run.expect_code(3);
    let account = h
        .cluster
        .get(Resource::ServiceAccounts, "fresh", "default")
        .unwrap();
    assert_eq!(account["imagePullSecrets"], json!([{ "name": SECRET }]));
    let last = run.lines.last().unwrap();
    assert_ne!(last["message"], "nothing was written", "{last}");
    assert_eq!(last["service_accounts_added"], "fresh/default", "{last}");
    let error = last["error"].as_str().unwrap();
    assert!(error.contains("AccessDeniedException"), "{error}");
    assert!(error.contains("no Secret was written"), "{error}");
    let message: Value =
        serde_json::from_str(&std::fs::read_to_string(h.termination_log()).unwrap()).unwrap();
    assert!(
        message["error"].as_str().unwrap().contains("fresh/default"),
        "{message}"
    );
    assert!(h.secret("new").is_none());
}

/// The token fails while the next namespace page is still being read: that read is given up,
/// and the run ends at once (exit 3) instead of waiting for a list it will not use.
#[test]
fn a_token_failure_does_not_wait_for_the_namespace_page_being_read() {
    let h = Harness::new();
    for i in 0..600 {
        h.cluster.add_namespace(&format!("team-{i:04}"), &[]);
    }
    h.run(&[RENEW_8H, ("RUST_LOG", "warn")]).expect_code(0);
    // The first page's last namespace is the one due: every other one of its page is handed out
    // by then, and the second page is being read.
    h.cluster.delete(Resource::Secrets, "team-0499", SECRET);
    h.ecr.add_fault(EcrFault::AccessDenied, None);
    h.cluster.add_fault(
        fake_cluster::Fault::slow(Some("GET"), "^/api/v1/namespaces$", Duration::from_secs(30))
            .query("(^|&)continue="),
    );

    let started = std::time::Instant::now();
    let run = h.run(&[RENEW_8H]);

    run.expect_code(3);
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "the run waited {:?} for a namespace page after the token failed",
        started.elapsed()
    );
}

/// The token fails while another namespace is still giving its ServiceAccount the Secret: that
/// namespace's patch is seen through, not dropped in flight, and named in the exit-3 message.
#[test]
fn an_exit_3_run_names_the_service_accounts_patched_by_a_namespace_in_flight_when_the_token_failed()
{
    let h = Harness::new();
    h.namespaces(&["fresh"]);
    let accounts = ("ECR_REFRESH_SERVICE_ACCOUNTS", "default");
    h.run(&[RENEW_8H]).expect_code(0);
    h.cluster.seed(
        Resource::ServiceAccounts,
        json!({ "metadata": { "name": "default", "namespace": "fresh" } }),
        "kube-controller-manager",
    );
    h.cluster.add_namespace("new", &[]);
    h.ecr.add_fault(EcrFault::AccessDenied, None);
    // The patch is in flight, both namespaces at once, when the new namespace's token fails.
    h.cluster.add_fault(fake_cluster::Fault::slow(
        Some("PATCH"),
        "^/api/v1/namespaces/fresh/serviceaccounts/default$",
        Duration::from_millis(1500),
    ));

    let run = h.run(&[RENEW_8H, accounts, ("ECR_REFRESH_CONCURRENCY", "2")]);

    run.expect_code(3);
    let account = h
        .cluster
        .get(Resource::ServiceAccounts, "fresh", "default")
        .unwrap();
    assert_eq!(account["imagePullSecrets"], json!([{ "name": SECRET }]));
    let last = run.lines.last().unwrap();
    assert_eq!(last["service_accounts_added"], "fresh/default", "{last}");
    let message: Value =
        serde_json::from_str(&std::fs::read_to_string(h.termination_log()).unwrap()).unwrap();
    assert!(
        message["error"].as_str().unwrap().contains("fresh/default"),
        "{message}"
    );
    assert!(h.secret("new").is_none());
}

/// The reads of a run with nothing due, by kind: the one Secret list's pages, the
/// namespace pages, the GETs of single Secrets, and every other request.
fn read_counts(requests: &[Recorded]) -> (usize, usize, usize, usize) {
    let lists = requests
        .iter()
        .filter(|r| r.path == "/api/v1/secrets")
        .count();
    let pages = requests
        .iter()
        .filter(|r| r.path == "/api/v1/namespaces")
        .count();
    let gets = requests
        .iter()
        .filter(|r| r.path.ends_with(&format!("/secrets/{SECRET}")))
        .count();
    (lists, pages, gets, requests.len() - lists - pages - gets)
}

#[test]
fn nothing_due_in_1200_namespaces_costs_the_pages_of_two_lists_and_version() {
    let h = Harness::new();
    let names: Vec<String> = (0..1200).map(|i| format!("team-{i:04}")).collect();
    for name in &names {
        h.cluster.add_namespace(name, &[]);
    }
    h.run(&[RENEW_8H, ("RUST_LOG", "warn")]).expect_code(0);
    let mark = h.cluster.requests().len();

    let run = h.run(&[RENEW_8H]);

    run.expect_code(0);
    assert_eq!(run.lines[0]["message"], "connected");
    assert_eq!(run.lines[0]["read"], "list", "the first line says the path");
    assert_eq!(run.summary()["fresh"], 1200);
    let requests = since(&h, mark);
    assert_eq!(writes(&requests), Vec::<String>::new());
    // 3 pages of 500 of each list, and /version: 10,000 namespaces are 21 and 20 pages.
    assert_eq!(read_counts(&requests), (3, 3, 0, 1));
}

#[test]
fn a_refused_secret_list_reads_each_namespace_once_by_name_and_says_so() {
    let h = Harness::new();
    h.namespaces(&["a", "b", "c"]);
    h.run(&[RENEW_8H]).expect_code(0);
    h.cluster
        .add_fault(fake_cluster::Fault::new("GET", "^/api/v1/secrets$", 403));
    let mark = h.cluster.requests().len();

    let run = h.run(&[RENEW_8H]);

    run.expect_code(0);
    assert_eq!(run.lines[0]["read"], "per-namespace", "{:?}", run.lines[0]);
    assert!(
        run.lines.iter().any(|l| l["level"] == "WARN"
            && l["message"]
                .as_str()
                .unwrap()
                .contains("one namespace at a time")),
        "the refusal is said once"
    );
    for ns in ["a", "b", "c"] {
        assert_eq!(run.outcome(ns), "fresh");
    }
    let requests = since(&h, mark);
    // One refused list (403 is not retried), then one GET per namespace: never both.
    assert_eq!(read_counts(&requests), (1, 1, 3, 1));
}

#[test]
fn literal_namespace_names_are_read_by_name_without_the_list() {
    let h = Harness::new();
    h.namespaces(&["a", "b"]);
    h.run(&[RENEW_8H]).expect_code(0);
    let mark = h.cluster.requests().len();

    let run = h.run(&[RENEW_8H, ("ECR_REFRESH_NAMESPACES", "a,b")]);

    run.expect_code(0);
    assert_eq!(run.lines[0]["read"], "per-namespace");
    assert_eq!(read_counts(&since(&h, mark)), (0, 0, 2, 1));
}

#[test]
fn a_secret_list_whose_continue_token_expires_is_read_again_and_each_namespace_visited_once() {
    let h = Harness::with(fake_cluster::FakeCluster::builder().max_page(2).start());
    let names: Vec<String> = (0..5).map(|i| format!("ns-{i}")).collect();
    for name in &names {
        h.cluster.add_namespace(name, &[]);
    }
    h.run(&[]).expect_code(0);
    h.cluster.expire_next_continue_of(Resource::Secrets);
    let mark = h.cluster.requests().len();

    let run = h.run(&[]);

    run.expect_code(0);
    for name in &names {
        assert_eq!(run.outcome(name), "updated", "{name}");
        let history = h.cluster.history(Resource::Secrets, name, SECRET);
        assert_eq!(history.len(), 2, "{name}: created, then written once");
    }
    let requests = since(&h, mark);
    let statuses: Vec<u16> = requests
        .iter()
        .filter(|r| r.path == "/api/v1/secrets")
        .map(|r| r.status)
        .collect();
    // Pages of 2: the second meets the 410, and the list starts again, 3 pages.
    assert_eq!(statuses, [200, 410, 200, 200, 200]);
}

/// The GETs of single Secrets, by namespace.
/// The three namespaces past the list's first page (ns-2 to ns-4) were each read by name
/// once, and no other; the statuses of the Secret list's requests, in order.
fn read_by_name_once_after_the_break(requests: &[Recorded]) -> Vec<u16> {
    let expected: std::collections::BTreeMap<String, usize> = ["ns-2", "ns-3", "ns-4"]
        .into_iter()
        .map(|n| (n.to_owned(), 1))
        .collect();
    assert_eq!(gets_by_namespace(requests), expected);
    requests
        .iter()
        .filter(|r| r.path == "/api/v1/secrets")
        .map(|r| r.status)
        .collect()
}

fn gets_by_namespace(requests: &[Recorded]) -> std::collections::BTreeMap<String, usize> {
    let mut gets = std::collections::BTreeMap::new();
    for r in requests {
        if r.method == "GET"
            && let Some(namespace) = r
                .path
                .strip_prefix("/api/v1/namespaces/")
                .and_then(|rest| rest.strip_suffix(&format!("/secrets/{SECRET}")))
        {
            *gets.entry(namespace.to_owned()).or_insert(0) += 1;
        }
    }
    gets
}

/// Five namespaces with fresh Secrets, on a fake that pages by two: the Secret list's first
/// page shows ns-0 and ns-1, and its later pages are answered `status` (forever).
fn a_secret_list_failing_after_its_first_page(status: u16) -> (Harness, Run, Vec<Recorded>) {
    let h = Harness::with(fake_cluster::FakeCluster::builder().max_page(2).start());
    let names: Vec<String> = (0..5).map(|i| format!("ns-{i}")).collect();
    for name in &names {
        h.cluster.add_namespace(name, &[]);
    }
    h.run(&[RENEW_8H]).expect_code(0);
    h.cluster.add_fault(
        fake_cluster::Fault::new("GET", "^/api/v1/secrets$", status).query("(^|&)continue="),
    );
    let mark = h.cluster.requests().len();

    let run = h.run(&[RENEW_8H]);

    run.expect_code(0);
    assert_eq!(run.lines[0]["read"], "list", "{:?}", run.lines[0]);
    for name in &names {
        // One line each (`outcome` asserts it): judged once, on the list or on a GET.
        assert_eq!(run.outcome(name), "fresh", "{name}");
    }
    assert_eq!(run.summary()["fresh"], 5);
    let requests = since(&h, mark);
    assert_eq!(writes(&requests), Vec::<String>::new());
    assert!(
        run.lines.iter().any(|l| l["level"] == "WARN"
            && l["message"]
                .as_str()
                .unwrap()
                .starts_with("the Secret list stopped")),
        "the break is said:\n{}",
        run.stdout
    );
    (h, run, requests)
}

#[test]
fn a_secret_list_refused_after_its_first_page_reads_by_name_only_the_namespaces_it_had_not_shown() {
    let (_h, _run, requests) = a_secret_list_failing_after_its_first_page(403);

    // Never both: ns-0 and ns-1 were judged on the list's first page, and only the three it
    // had not shown are read by name, once each.
    let lists = read_by_name_once_after_the_break(&requests);
    assert_eq!(lists, [200, 403], "a 403 is not retried");
}

#[test]
fn a_secret_list_failing_with_500_after_its_first_page_is_retried_then_the_rest_read_by_name() {
    let (_h, _run, requests) = a_secret_list_failing_after_its_first_page(500);

    let lists = read_by_name_once_after_the_break(&requests);
    assert_eq!(
        lists,
        [200, 500, 500, 500, 500, 500],
        "five tries of page 2"
    );
}

#[test]
fn a_secret_list_whose_continue_token_keeps_expiring_restarts_three_times_then_reads_the_rest_by_name()
 {
    let (_h, run, requests) = a_secret_list_failing_after_its_first_page(410);

    let lists = read_by_name_once_after_the_break(&requests);
    // The first page, and a 410 for page 2, four times: three restarts, then the list is
    // over. The restarts showed ns-0 and ns-1 again: not judged again.
    assert_eq!(lists, [200, 410, 200, 410, 200, 410, 200, 410]);
    let restarts = run
        .messages_starting("list continue token expired (410)")
        .len();
    assert_eq!(restarts, 3);
}

#[test]
fn namespace_pages_slower_than_the_secret_pages_still_judge_each_namespace_once_on_the_list() {
    let h = Harness::new();
    let names: Vec<String> = (0..1200).map(|i| format!("team-{i:04}")).collect();
    for name in &names {
        h.cluster.add_namespace(name, &[]);
    }
    h.run(&[RENEW_8H, ("RUST_LOG", "warn")]).expect_code(0);
    // Every Secret page is read before the second namespace page: the Secrets wait for their
    // namespaces (at most about two pages of them), and none is read twice.
    h.cluster.add_fault(fake_cluster::Fault::slow(
        Some("GET"),
        "^/api/v1/namespaces$",
        Duration::from_millis(300),
    ));
    let mark = h.cluster.requests().len();

    let run = h.run(&[RENEW_8H]);

    run.expect_code(0);
    assert_eq!(run.lines[0]["read"], "list");
    assert_eq!(run.summary()["fresh"], 1200);
    for name in names.iter().step_by(97) {
        assert_eq!(run.outcome(name), "fresh", "{name}");
    }
    assert_eq!(read_counts(&since(&h, mark)), (3, 3, 0, 1));
}

#[test]
fn secret_pages_slower_than_the_namespace_pages_still_judge_each_namespace_once_on_the_list() {
    let h = Harness::new();
    let names: Vec<String> = (0..1200).map(|i| format!("team-{i:04}")).collect();
    for name in &names {
        h.cluster.add_namespace(name, &[]);
    }
    // One namespace without the Secret: created, on the list's word, with no GET.
    h.run(&[RENEW_8H, ("RUST_LOG", "warn")]).expect_code(0);
    h.cluster.add_namespace("zz-new", &[]);
    h.cluster.add_fault(fake_cluster::Fault::slow(
        Some("GET"),
        "^/api/v1/secrets$",
        Duration::from_millis(300),
    ));
    let mark = h.cluster.requests().len();

    let run = h.run(&[RENEW_8H]);

    run.expect_code(0);
    assert_eq!(run.summary()["fresh"], 1200);
    assert_eq!(run.outcome("zz-new"), "created");
    let requests = since(&h, mark);
    assert_eq!(
        writes(&requests),
        ["POST /api/v1/namespaces/zz-new/secrets"]
    );
    assert_eq!(gets_by_namespace(&requests).len(), 0);
}
