//! ECR_REFRESH_ARGOCD_NAMESPACE: one Argo CD `repo-creds` Secret per private registry, written
//! in place as the pull Secret is (uid kept, others' keys kept, due-aware, dry run honoured,
//! never deleted), counted in the summary and the termination message; and `check`'s report
//! of their expiry.

use crate::common;

use common::*;
use fake_cluster::{Fault, Resource};
use serde_json::{Value, json};

const ARGOCD: &str = "argocd";
/// A second private registry, in another region and account.
const OTHER: &str = "210987654321.dkr.ecr.eu-west-1.amazonaws.com";
const FIRST_NAME: &str = "aws-ecr-token-123456789012-us-east-1";
const OTHER_NAME: &str = "aws-ecr-token-210987654321-eu-west-1";
const FIRST_REPOSITORY: &str = "aws-ecr-token-123456789012-us-east-1-repository";
const OTHER_REPOSITORY: &str = "aws-ecr-token-210987654321-eu-west-1-repository";

fn on(registries: &str) -> Vec<(&'static str, String)> {
    vec![
        ("ECR_REFRESH_NAMESPACES", "app".to_owned()),
        ("ECR_REFRESH_ARGOCD_NAMESPACE", ARGOCD.to_owned()),
        ("ECR_REFRESH_REGISTRIES", registries.to_owned()),
    ]
}

fn env<'a>(
    vars: &'a [(&'static str, String)],
    more: &[(&'a str, &'a str)],
) -> Vec<(&'a str, &'a str)> {
    vars.iter()
        .map(|(k, v)| (*k, v.as_str()))
        .chain(more.iter().copied())
        .collect()
}

fn argo_secret(h: &Harness, name: &str) -> Option<Value> {
    h.cluster.get(Resource::Secrets, ARGOCD, name)
}

fn data(secret: &Value, key: &str) -> Option<String> {
    secret["data"][key].as_str().map(|v| {
        String::from_utf8(
            base64::Engine::decode(&base64::engine::general_purpose::STANDARD, v).expect("base64"),
        )
        .expect("UTF-8")
    })
}

/// The one log line about the Argo CD Secret `name`.
fn line<'r>(run: &'r Run, name: &str) -> &'r Value {
    let lines: Vec<&Value> = run
        .lines
        .iter()
        .filter(|l| l["secret"] == name && l["argocd"] == true && l.get("outcome").is_some())
        .collect();
    assert_eq!(lines.len(), 1, "one line for {name}:\n{}", run.stdout);
    lines[0]
}

fn termination(h: &Harness) -> Value {
    serde_json::from_str(&std::fs::read_to_string(h.termination_log()).unwrap()).unwrap()
}

#[test]
fn a_run_writes_a_repo_creds_and_a_repository_secret_per_private_registry_in_the_argocd_namespace_it_does_not_select()
 {
    let h = Harness::new();
    h.namespaces(&["app", ARGOCD]);
    let vars = on(&format!("{REGISTRY},{OTHER},public.ecr.aws"));
    let public = h.ecr.url();

    let run = h.run(&env(&vars, &[("AWS_ENDPOINT_URL_ECR_PUBLIC", &public)]));

    run.expect_code(0);
    let pull = h.secret("app").expect("the pull Secret");
    for (name, host, kind, url) in [
        (FIRST_NAME, REGISTRY, "repo-creds", format!("{REGISTRY}/")),
        (
            FIRST_REPOSITORY,
            REGISTRY,
            "repository",
            REGISTRY.to_owned(),
        ),
        (OTHER_NAME, OTHER, "repo-creds", format!("{OTHER}/")),
        (OTHER_REPOSITORY, OTHER, "repository", OTHER.to_owned()),
    ] {
        let secret = argo_secret(&h, name).unwrap_or_else(|| panic!("no {name}"));
        assert_eq!(secret["type"], "Opaque");
        assert_eq!(
            secret["metadata"]["labels"]["argocd.argoproj.io/secret-type"],
            kind
        );
        assert_eq!(
            data(&secret, "url"),
            Some(url),
            "helm: the host ended by a / for repo-creds, the bare host for the repository"
        );
        assert_eq!(data(&secret, "project"), None, "no project set");
        assert_eq!(data(&secret, "username").as_deref(), Some("AWS"));
        assert_eq!(data(&secret, "type").as_deref(), Some("helm"));
        assert_eq!(data(&secret, "enableOCI").as_deref(), Some("true"));
        assert_eq!(
            data(&secret, "password").unwrap(),
            password(&pull, host),
            "the token the pull Secret holds for {host}"
        );
        let l = line(&run, name);
        assert_eq!(l["outcome"], "created");
        assert_eq!(l["namespace"], ARGOCD);
        assert_eq!(l["registry"], host);
        assert_eq!(l["uid_before"], "-");
        assert_eq!(l["uid_after"], uid(&secret));
        assert_eq!(l["due"], "missing");
    }
    assert!(
        h.secret(ARGOCD).is_none(),
        "the Argo CD namespace is not selected: no pull Secret there"
    );
    let summary = run.summary();
    assert_eq!(
        summary["argocd_written"], 4,
        "none for ECR Public: {summary}"
    );
    assert_eq!(summary["namespaces"], 1);
    let message = termination(&h);
    assert_eq!(message["argocd"], json!({"created": 4}));
    assert_eq!(message["argocd_failed"], json!([]));
    assert_eq!(
        h.ecr.calls().len(),
        2,
        "one ECR call per region, shared with the pull Secrets"
    );
}

#[test]
fn a_secret_someone_made_under_our_name_is_updated_in_place_keeping_their_keys_labels_and_annotations()
 {
    let h = Harness::new();
    h.namespaces(&["app", ARGOCD]);
    let seeded = h.cluster.seed(
        Resource::Secrets,
        json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {
                "name": FIRST_NAME, "namespace": ARGOCD,
                "labels": {"argocd.argoproj.io/secret-type": "repo-creds", "team": "platform"},
                "annotations": {"note": "made by hand"},
            },
            "type": "Opaque",
            "stringData": {"url": REGISTRY, "username": "AWS", "password": "stale", "type": "helm", "enableOCI": "true", "proxy": "http://proxy:3128"},
        }),
        "kubectl-client-side-apply",
    );
    let vars = on(REGISTRY);

    let run = h.run(&env(&vars, &[]));

    run.expect_code(0);
    let secret = argo_secret(&h, FIRST_NAME).unwrap();
    assert_eq!(uid(&secret), uid(&seeded), "in place");
    let l = line(&run, FIRST_NAME);
    assert_eq!(l["outcome"], "updated");
    assert_eq!(l["uid_before"], uid(&seeded));
    assert_eq!(l["uid_after"], uid(&seeded));
    assert_eq!(l["due"], "no-expiry");
    assert_ne!(data(&secret, "password").as_deref(), Some("stale"));
    assert_eq!(data(&secret, "proxy").as_deref(), Some("http://proxy:3128"));
    assert_eq!(secret["metadata"]["labels"]["team"], "platform");
    assert_eq!(
        secret["metadata"]["labels"]["app.kubernetes.io/managed-by"],
        "ecr-refresh"
    );
    assert_eq!(secret["metadata"]["annotations"]["note"], "made by hand");
    assert!(
        h.cluster
            .history(Resource::Secrets, ARGOCD, FIRST_NAME)
            .iter()
            .all(Option::is_some),
        "never absent"
    );
}

#[test]
fn a_run_where_nothing_is_due_writes_no_argo_cd_secret_and_asks_ecr_nothing_then_one_that_is_due_writes_it_in_place()
 {
    let h = Harness::new();
    h.namespaces(&["app", ARGOCD]);
    let vars = on(REGISTRY);
    h.run(&env(&vars, &[])).expect_code(0);
    let first = argo_secret(&h, FIRST_NAME).unwrap();
    let calls = h.ecr.calls().len();

    let quiet = h.run(&env(&vars, &[("ECR_REFRESH_RENEW_BEFORE", "8h")]));

    quiet.expect_code(0);
    assert_eq!(h.ecr.calls().len(), calls, "nothing due: no ECR call");
    assert_eq!(line(&quiet, FIRST_NAME)["outcome"], "fresh");
    assert_eq!(
        h.cluster
            .history(Resource::Secrets, ARGOCD, FIRST_NAME)
            .len(),
        1,
        "not written"
    );
    assert_eq!(quiet.summary()["argocd_fresh"], 2);

    // Someone edits the password: due, rewritten in place, though the pull Secret is not due.
    h.cluster.seed(
        Resource::Secrets,
        {
            let mut edited = first.clone();
            edited["data"]["password"] = json!(b64("edited"));
            edited
        },
        "someone",
    );
    let edited_uid = uid(&argo_secret(&h, FIRST_NAME).unwrap());
    let due = h.run(&env(&vars, &[("ECR_REFRESH_RENEW_BEFORE", "8h")]));
    due.expect_code(0);
    assert_eq!(due.outcome("app"), "fresh");
    let l = line(&due, FIRST_NAME);
    assert_eq!(l["outcome"], "updated");
    assert_eq!(l["due"], "entries-changed");
    assert_eq!(l["uid_before"], edited_uid.as_str());
    assert_eq!(l["uid_after"], edited_uid.as_str());
    assert_ne!(
        data(&argo_secret(&h, FIRST_NAME).unwrap(), "password").as_deref(),
        Some("edited")
    );
}

#[test]
fn a_dry_run_stores_no_argo_cd_secret() {
    let h = Harness::new();
    h.namespaces(&["app", ARGOCD]);
    let vars = on(REGISTRY);

    let run = h.run(&env(&vars, &[("ECR_REFRESH_DRY_RUN", "true")]));

    run.expect_code(0);
    assert_eq!(line(&run, FIRST_NAME)["outcome"], "would-create");
    assert_eq!(line(&run, FIRST_NAME)["uid_after"], "-");
    assert!(argo_secret(&h, FIRST_NAME).is_none());
    assert!(argo_secret(&h, FIRST_REPOSITORY).is_none());
    assert_eq!(termination(&h)["argocd"], json!({"would-create": 2}));
}

#[test]
fn another_argo_cd_secret_under_our_name_is_left_untouched_and_fails_the_run() {
    let h = Harness::new();
    h.namespaces(&["app", ARGOCD]);
    let seeded = h.cluster.seed(
        Resource::Secrets,
        json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": FIRST_NAME, "namespace": ARGOCD,
                         "labels": {"argocd.argoproj.io/secret-type": "cluster"}},
            "type": "Opaque",
            "stringData": {"server": "https://prod.example", "config": "{}"},
        }),
        "argocd-server",
    );
    let vars = on(REGISTRY);

    let run = h.run(&env(&vars, &[]));

    run.expect_code(1);
    assert_eq!(argo_secret(&h, FIRST_NAME).unwrap(), seeded, "untouched");
    let l = line(&run, FIRST_NAME);
    assert_eq!(l["outcome"], "failed");
    assert!(l["error"].as_str().unwrap().contains("cluster"), "{l}");
    assert_eq!(
        run.outcome("app"),
        "created",
        "the namespaces are written all the same"
    );
    assert_eq!(termination(&h)["argocd_failed"], json!([FIRST_NAME]));
}

#[test]
fn the_oci_type_writes_an_oci_url_and_a_switch_from_helm_rewrites_it_in_place() {
    let h = Harness::new();
    h.namespaces(&["app", ARGOCD]);
    let vars = on(REGISTRY);
    h.run(&env(&vars, &[])).expect_code(0);
    let before = argo_secret(&h, FIRST_NAME).unwrap();

    let run = h.run(&env(
        &vars,
        &[
            ("ECR_REFRESH_ARGOCD_TYPE", "oci"),
            ("ECR_REFRESH_RENEW_BEFORE", "8h"),
        ],
    ));

    run.expect_code(0);
    let after = argo_secret(&h, FIRST_NAME).unwrap();
    assert_eq!(uid(&after), uid(&before));
    assert_eq!(line(&run, FIRST_NAME)["due"], "entries-changed");
    assert_eq!(data(&after, "url"), Some(format!("oci://{REGISTRY}/")));
    assert_eq!(data(&after, "type").as_deref(), Some("oci"));
    let repository = argo_secret(&h, FIRST_REPOSITORY).unwrap();
    assert_eq!(data(&repository, "url"), Some(format!("oci://{REGISTRY}")));
    // Created by a POST, its fields are owned by an update: an apply that no longer sends
    // enableOCI leaves it (Argo CD reads it for helm only).
    assert_eq!(data(&after, "enableOCI").as_deref(), Some("true"));
    let again = h.run(&env(
        &vars,
        &[
            ("ECR_REFRESH_ARGOCD_TYPE", "oci"),
            ("ECR_REFRESH_RENEW_BEFORE", "8h"),
        ],
    ));
    again.expect_code(0);
    assert_eq!(
        line(&again, FIRST_NAME)["outcome"],
        "fresh",
        "and then it is fresh as an oci Secret"
    );
}

#[test]
fn a_registry_removed_from_the_configuration_leaves_its_argo_cd_secret_alone_and_says_so() {
    let h = Harness::new();
    h.namespaces(&["app", ARGOCD]);
    h.run(&env(&on(&format!("{REGISTRY},{OTHER}")), &[]))
        .expect_code(0);
    let left = argo_secret(&h, OTHER_NAME).unwrap();
    let left_repository = argo_secret(&h, OTHER_REPOSITORY).unwrap();

    let run = h.run(&env(&on(REGISTRY), &[]));

    run.expect_code(0);
    assert_eq!(argo_secret(&h, OTHER_NAME).unwrap(), left, "left as it was");
    assert_eq!(
        argo_secret(&h, OTHER_REPOSITORY).unwrap(),
        left_repository,
        "left as it was"
    );
    let said = run.messages_starting("registry no longer configured");
    assert_eq!(said.len(), 2, "{}", run.stdout);
    assert_eq!(said[0]["secret"], OTHER_NAME);
    assert_eq!(said[1]["secret"], OTHER_REPOSITORY);
    assert_eq!(said[0]["registry"], OTHER);
    assert_eq!(line(&run, FIRST_NAME)["outcome"], "updated");
}

#[test]
fn the_argo_cd_variables_are_refused_before_anything_is_sent_when_they_cannot_work() {
    let h = Harness::new();
    for (vars, says) in [
        (
            vec![("ECR_REFRESH_ARGOCD_TYPE", "oci")],
            "ECR_REFRESH_ARGOCD_TYPE",
        ),
        (
            vec![
                ("ECR_REFRESH_ARGOCD_NAMESPACE", ARGOCD),
                ("ECR_REFRESH_ARGOCD_TYPE", "git"),
            ],
            "ECR_REFRESH_ARGOCD_TYPE",
        ),
        (
            vec![("ECR_REFRESH_ARGOCD_NAMESPACE", "Argo CD")],
            "ECR_REFRESH_ARGOCD_NAMESPACE",
        ),
        (
            vec![("ECR_REFRESH_ARGOCD_PROJECT", "team-a")],
            "ECR_REFRESH_ARGOCD_PROJECT",
        ),
        (
            vec![
                ("ECR_REFRESH_ARGOCD_NAMESPACE", ARGOCD),
                ("ECR_REFRESH_ARGOCD_PROJECT", "Team A"),
            ],
            "ECR_REFRESH_ARGOCD_PROJECT",
        ),
        (
            vec![
                ("ECR_REFRESH_ARGOCD_NAMESPACE", ARGOCD),
                ("ECR_REFRESH_REGISTRIES", "public.ecr.aws"),
            ],
            "ECR_REFRESH_REGISTRIES",
        ),
    ] {
        let run = h.run(&vars);
        run.expect_code(2);
        assert!(run.stdout.contains(says), "{vars:?}: {}", run.stdout);
    }
    assert_eq!(h.cluster.request_count(), 0, "nothing sent");
}

#[test]
fn check_reports_each_argo_cd_secrets_expiry_and_a_missing_one_as_a_finding() {
    let h = Harness::new();
    h.namespaces(&["app", ARGOCD]);
    let vars = on(&format!("{REGISTRY},{OTHER}"));
    h.run(&env(&vars, &[])).expect_code(0);
    let expires = argo_secret(&h, FIRST_NAME).unwrap()["metadata"]["annotations"]
        ["ecr-refresh/token-expires-at"]
        .as_str()
        .unwrap()
        .to_owned();
    let ok = h.run(&env(
        &vars,
        &[
            ("ECR_REFRESH_MODE", "check"),
            ("ECR_REFRESH_RENEW_BEFORE", "8h"),
        ],
    ));
    ok.expect_code(0);
    let first = ok
        .lines
        .iter()
        .find(|l| l["secret"] == FIRST_NAME && l["argocd"] == true)
        .unwrap();
    assert_eq!(first["outcome"], "ok");
    assert_eq!(first["expires_at"], expires.as_str());

    // Without its second registry's Secret: a finding, exit 1.
    let writes_before = h
        .cluster
        .requests()
        .iter()
        .filter(|r| r.method != "GET")
        .count();
    let vars = on(&format!(
        "{REGISTRY},{OTHER},999999999999.dkr.ecr.us-west-2.amazonaws.com"
    ));
    let missing = h.run(&env(
        &vars,
        &[
            ("ECR_REFRESH_MODE", "check"),
            ("ECR_REFRESH_RENEW_BEFORE", "8h"),
        ],
    ));
    missing.expect_code(1);
    let line = missing
        .lines
        .iter()
        .find(|l| l["secret"] == "aws-ecr-token-999999999999-us-west-2")
        .unwrap();
    assert_eq!(line["outcome"], "findings");
    assert_eq!(
        h.cluster
            .requests()
            .iter()
            .filter(|r| r.method != "GET")
            .count(),
        writes_before,
        "a check writes nothing"
    );
}

#[test]
fn an_argo_cd_secret_deleted_between_our_read_and_our_apply_is_created_fresh_and_one_changed_is_read_again()
 {
    let h = Harness::new();
    h.namespaces(&["app", ARGOCD]);
    let vars = on(REGISTRY);
    h.run(&env(&vars, &[])).expect_code(0);
    let first = uid(&argo_secret(&h, FIRST_NAME).unwrap());

    // Changed by someone after our read: the apply pinned to the resourceVersion read is
    // refused, the Secret read again, and their change kept.
    h.cluster
        .change_after_next_get(Resource::Secrets, ARGOCD, FIRST_NAME, |secret| {
            secret["metadata"]["labels"]["changed"] = json!("meanwhile");
        });
    let changed = h.run(&env(&vars, &[]));
    changed.expect_code(0);
    let after = argo_secret(&h, FIRST_NAME).unwrap();
    assert_eq!(line(&changed, FIRST_NAME)["outcome"], "updated");
    assert_eq!(uid(&after), first);
    assert_eq!(after["metadata"]["labels"]["changed"], "meanwhile");
    let patches: Vec<u16> = h
        .cluster
        .requests()
        .iter()
        .filter(|r| r.method == "PATCH" && r.path.ends_with(&format!("/{FIRST_NAME}")))
        .map(|r| r.status)
        .collect();
    assert_eq!(
        patches,
        [409, 200],
        "the stale apply refused, then one over what was read again"
    );

    // Deleted after our read: the apply pinned to its uid cannot resurrect it; it is
    // created fresh, and the line says so.
    h.cluster
        .delete_after_next_get(Resource::Secrets, ARGOCD, FIRST_NAME);
    let deleted = h.run(&env(&vars, &[]));
    deleted.expect_code(0);
    let l = line(&deleted, FIRST_NAME);
    assert_eq!(l["outcome"], "recreated");
    assert_eq!(l["uid_before"], first.as_str());
    let fresh = uid(&argo_secret(&h, FIRST_NAME).unwrap());
    assert_ne!(fresh, first);
    assert_eq!(l["uid_after"], fresh.as_str());
}

#[test]
fn a_missing_argo_cd_namespace_fails_its_secrets_and_says_what_to_do() {
    let h = Harness::new();
    h.namespaces(&["app"]);
    let vars = on(REGISTRY);

    let run = h.run(&env(&vars, &[]));

    run.expect_code(1);
    assert_eq!(run.outcome("app"), "created");
    let l = line(&run, FIRST_NAME);
    assert_eq!(l["outcome"], "failed");
    assert!(
        l["error"]
            .as_str()
            .unwrap()
            .contains("fix ECR_REFRESH_ARGOCD_NAMESPACE"),
        "{l}"
    );
    assert_eq!(run.summary()["argocd_failed"], 2);
}

/// argo-cd's `NormalizeGitURL` as written out in common/argocd.rs: a trailing `/` kept,
/// `.git` stripped, a port with no scheme a parse error (no URL at all).
#[test]
fn argo_cds_normalisation_keeps_a_trailing_slash_strips_git_and_fails_on_a_port_without_a_scheme() {
    use common::argocd::normalize_git_url;
    assert_eq!(
        normalize_git_url(" HOST.example/Charts.git "),
        "host.example/charts"
    );
    assert_eq!(normalize_git_url("host.example/"), "host.example/");
    assert_eq!(normalize_git_url("123.example:444/c"), "");
    assert_eq!(
        normalize_git_url("oci://123.example:444/c"),
        "oci://123.example:444/c"
    );
}

/// Argo CD picks repository credentials by prefix (common/argocd.rs, from argo-cd's
/// util/db/repository_secrets.go): what we write must serve our registry's repositories, the
/// bare host among them, and no host that merely starts with ours.
#[test]
fn argo_cd_hands_the_token_to_our_registrys_repositories_and_never_to_a_host_that_starts_with_ours()
{
    for (repo_type, scheme) in [("helm", ""), ("oci", "oci://")] {
        let h = Harness::new();
        h.namespaces(&["app", ARGOCD]);
        let vars = on(REGISTRY);
        let run = h.run(&env(&vars, &[("ECR_REFRESH_ARGOCD_TYPE", repo_type)]));
        run.expect_code(0);
        let secrets: Vec<Value> = [FIRST_NAME, FIRST_REPOSITORY]
            .iter()
            .filter_map(|name| argo_secret(&h, name))
            .collect();
        let token = password(&h.secret("app").expect("the pull Secret"), REGISTRY);
        for repo_url in [
            format!("{scheme}{REGISTRY}"),
            format!("{scheme}{REGISTRY}/charts"),
            format!("{scheme}{REGISTRY}/x"),
            format!("{scheme}{}/team/app.git", REGISTRY.to_uppercase()),
        ] {
            let found = common::argocd::credentials_for(&secrets, &repo_url, "default")
                .unwrap_or_else(|| panic!("{repo_type}: no credentials for {repo_url}"));
            let secret = argo_secret(&h, &found).unwrap();
            assert_eq!(
                data(&secret, "password").as_deref(),
                Some(token.as_str()),
                "{repo_type}: {repo_url} gets our token from {found}"
            );
        }
        for repo_url in [
            format!("{scheme}{REGISTRY}.attacker.example/c"),
            format!("{scheme}{REGISTRY}:444/c"),
            format!("{scheme}{REGISTRY}-attacker.example/c"),
            format!("{scheme}{REGISTRY}.attacker.example"),
        ] {
            assert_eq!(
                common::argocd::credentials_for(&secrets, &repo_url, "default"),
                None,
                "{repo_type}: Argo CD would send the token to {repo_url}; urls written: {:?}",
                secrets
                    .iter()
                    .map(|s| data(s, "url").unwrap_or_default())
                    .collect::<Vec<_>>()
            );
        }
    }
}

/// ECR_REFRESH_ARGOCD_PROJECT scopes the `repository` Secret (the bare host) to one project;
/// the repo-creds Secret, where Argo CD reads no project, serves the host's repositories in
/// every project, and never carries one.
#[test]
fn the_project_scopes_the_repository_secret_and_never_the_repo_creds() {
    let h = Harness::new();
    h.namespaces(&["app", ARGOCD]);
    let vars = on(REGISTRY);
    h.run(&env(&vars, &[])).expect_code(0);
    let unscoped = uid(&argo_secret(&h, FIRST_REPOSITORY).unwrap());

    let run = h.run(&env(
        &vars,
        &[
            ("ECR_REFRESH_ARGOCD_PROJECT", "team-a"),
            ("ECR_REFRESH_RENEW_BEFORE", "8h"),
        ],
    ));

    run.expect_code(0);
    let repository = argo_secret(&h, FIRST_REPOSITORY).unwrap();
    assert_eq!(uid(&repository), unscoped, "scoped in place");
    assert_eq!(line(&run, FIRST_REPOSITORY)["due"], "entries-changed");
    assert_eq!(data(&repository, "project").as_deref(), Some("team-a"));
    assert_eq!(line(&run, FIRST_NAME)["outcome"], "fresh");
    let creds = argo_secret(&h, FIRST_NAME).unwrap();
    assert_eq!(data(&creds, "project"), None);
    let secrets = [creds, repository];
    let found = |repo_url: &str, project: &str| {
        common::argocd::credentials_for(&secrets, repo_url, project)
    };
    assert_eq!(found(REGISTRY, "team-a").as_deref(), Some(FIRST_REPOSITORY));
    assert_eq!(
        found(REGISTRY, "team-b"),
        None,
        "another project's bare host"
    );
    assert_eq!(
        found(&format!("{REGISTRY}/charts"), "team-b").as_deref(),
        Some(FIRST_NAME),
        "repo-creds serve every project"
    );
}

/// The pull Secret's safeguard, now the Argo CD Secret's too (issue 52): a create whose answer
/// was lost (stored, unheard) is this run's create, not a Secret to apply over.
#[test]
fn an_argo_cd_create_whose_answer_was_lost_is_reported_created_not_updated() {
    let h = Harness::new();
    h.namespaces(&["app", ARGOCD]);
    h.cluster
        .add_fault(Fault::lose_answer("POST", &format!("/namespaces/{ARGOCD}/secrets$")).times(1));
    let vars = on(REGISTRY);

    let run = h.run(&env(&vars, &[]));

    run.expect_code(0);
    let l = line(&run, FIRST_NAME);
    assert_eq!(l["outcome"], "created", "{l}");
    let secret = argo_secret(&h, FIRST_NAME).expect("created");
    assert_eq!(l["uid_after"], uid(&secret));
    assert_eq!(
        h.cluster
            .history(Resource::Secrets, ARGOCD, FIRST_NAME)
            .len(),
        1,
        "written once: our create, nothing applied over it"
    );
}

/// The pull Secret's other safeguard (issue 52): an Argo CD namespace being deleted is skipped
/// with that reason, not a failure.
#[test]
fn an_argo_cd_namespace_being_deleted_is_skipped_with_that_reason() {
    let h = Harness::new();
    h.namespaces(&["app"]);
    h.cluster.add_terminating_namespace(ARGOCD);
    let vars = on(REGISTRY);

    let run = h.run(&env(&vars, &[]));

    run.expect_code(0);
    let l = line(&run, FIRST_NAME);
    assert_eq!(l["outcome"], "skipped", "{l}");
    assert_eq!(l["reason"], "namespace is terminating", "{l}");
    assert!(argo_secret(&h, FIRST_NAME).is_none());
}
