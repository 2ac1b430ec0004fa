//! The demo README's "Try it" starts with (`cargo run -p fake-cluster -- demo`), run here with
//! this build's binary instead of the one it builds itself.

use crate::common;

use std::path::Path;

use fake_cluster::demo::{self, EDITED, LEGACY, NEW, RUNS, TERMINATING};

/// The demo runs with the environment the shipped CronJob sets (as `kubectl kustomize`
/// renders it), but for the registry, the log format and the termination log.
#[test]
#[ignore = "needs kubectl (bash .ci/test)"]
fn the_demo_runs_with_the_shipped_cronjobs_settings() {
    let settings = demo::cronjob_settings().expect("the CronJob's settings");
    let rendered = common::manifests::render("", false);
    let cronjob = common::manifests::documents(&rendered)
        .into_iter()
        .find(|d| d["kind"] == "CronJob")
        .expect("a CronJob in manifests/");
    let rendered: Vec<(String, String)> =
        cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["env"]
            .as_array()
            .expect("the container's env")
            .iter()
            .filter_map(|e| {
                Some((
                    e["name"].as_str()?.to_owned(),
                    e["value"].as_str()?.to_owned(),
                ))
            })
            .collect();
    let own: Vec<&str> = demo::DEMO_SETS.iter().map(|(name, _)| *name).collect();
    let mut expected: Vec<(String, String)> = rendered
        .into_iter()
        .filter(|(name, _)| name.starts_with("ECR_REFRESH_") || name.starts_with("AWS_"))
        .filter(|(name, _)| name != "ECR_REFRESH_TERMINATION_LOG" && !own.contains(&name.as_str()))
        .collect();
    expected.extend(
        demo::DEMO_SETS
            .iter()
            .map(|(name, value)| ((*name).to_owned(), (*value).to_owned())),
    );
    let (mut got, mut want) = (settings.clone(), expected);
    got.sort();
    want.sort();
    assert_eq!(got, want);
    assert!(
        settings.contains(&("ECR_REFRESH_RENEW_BEFORE".into(), "8h".into())),
        "{settings:?}"
    );
}

/// Run 1 writes every Secret; run 2, as every later CronJob run, finds them all fresh and
/// writes nothing, asking ECR nothing; after one Secret is edited by hand, run 3 writes only
/// that one.
#[test]
fn the_demo_writes_once_then_nothing_then_only_the_secret_edited_by_hand() {
    let mut out = Vec::new();
    let result = demo::run(Path::new(env!("CARGO_BIN_EXE_ecr-refresh")), &mut out);
    let printed = String::from_utf8(out).expect("the demo prints text");
    let demo = result.unwrap_or_else(|e| panic!("the demo failed: {e}\n{printed}"));
    assert!(demo.succeeded(), "{printed}");
    let (first, second, third) = (&demo.runs[0], &demo.runs[1], &demo.runs[2]);
    let outcome = |run: &demo::Run, namespace: &str| {
        run.rows
            .iter()
            .find(|r| r.namespace == namespace)
            .map(|r| r.outcome.clone())
            .unwrap_or_else(|| panic!("no row for {namespace}:\n{printed}"))
    };

    assert_eq!((first.secret_writes, first.ecr_calls), (3, 1), "{printed}");
    assert_eq!(
        (second.secret_writes, second.ecr_calls),
        (0, 0),
        "{printed}"
    );
    for namespace in NEW.iter().chain([&LEGACY]) {
        assert_eq!(outcome(second, namespace), "fresh", "{printed}");
    }
    assert_eq!((third.secret_writes, third.ecr_calls), (1, 1), "{printed}");
    for namespace in NEW.iter().chain([&LEGACY]) {
        let expected = if *namespace == EDITED {
            "updated"
        } else {
            "fresh"
        };
        assert_eq!(
            outcome(third, namespace),
            expected,
            "{namespace}:\n{printed}"
        );
    }
    for (n, run) in demo.runs.iter().enumerate() {
        let line = format!("run {}: exit 0 in ", n + 1);
        let printed_line = printed
            .lines()
            .find(|l| l.starts_with(&line))
            .unwrap_or_else(|| panic!("{line:?} not printed:\n{printed}"));
        assert!(
            printed_line.ends_with(&format!(
                "Secrets written: {}; ECR calls: {}",
                run.secret_writes, run.ecr_calls
            )),
            "{printed_line}"
        );
    }
    assert!(
        printed.contains("Run 2 wrote nothing and asked ECR nothing"),
        "{printed}"
    );
}

#[test]
fn the_demo_shows_secrets_created_then_kept_in_place_and_the_kubectl_one_adopted() {
    let mut out = Vec::new();

    let result = demo::run(Path::new(env!("CARGO_BIN_EXE_ecr-refresh")), &mut out);

    let printed = String::from_utf8(out).expect("the demo prints text");
    let demo = result.unwrap_or_else(|e| panic!("the demo failed: {e}\n{printed}"));
    assert!(demo.succeeded(), "{printed}");
    assert_eq!(demo.runs.len(), RUNS);
    let first = &demo.runs[0];
    let mut namespaces: Vec<&str> = NEW.iter().copied().chain([LEGACY, TERMINATING]).collect();
    namespaces.sort();
    for run in &demo.runs {
        let listed: Vec<&str> = run.rows.iter().map(|r| r.namespace.as_str()).collect();
        assert_eq!(listed, namespaces, "{printed}");
        assert_eq!(run.requests.get("DELETE"), None, "{printed}");
    }
    let row = |run: &demo::Run, namespace: &str| {
        run.rows
            .iter()
            .find(|r| r.namespace == namespace)
            .cloned()
            .unwrap_or_else(|| panic!("no row for {namespace}:\n{printed}"))
    };
    for namespace in NEW {
        let created = row(first, namespace);
        assert_eq!(
            (created.outcome.as_str(), created.uid_before.as_str()),
            ("created", "-")
        );
        for later in &demo.runs[1..] {
            let after = row(later, namespace);
            assert_eq!(
                after.uid_before, created.uid_after,
                "{namespace}: same Secret"
            );
            assert_eq!(
                after.uid_after, created.uid_after,
                "{namespace}: same Secret"
            );
        }
    }
    assert_eq!(row(first, LEGACY).outcome, "updated", "{printed}");
    for run in &demo.runs {
        let legacy = row(run, LEGACY);
        assert_eq!(legacy.uid_before, demo.legacy_uid);
        assert_eq!(legacy.uid_after, demo.legacy_uid);
        assert_eq!(row(run, TERMINATING).outcome, "skipped");
    }
    // The table as printed: a header and one row per namespace, per run.
    for run in &demo.runs {
        for r in &run.rows {
            let printed_row = printed.lines().find(|l| {
                l.split_whitespace().collect::<Vec<_>>()
                    == [
                        r.namespace.as_str(),
                        &r.outcome,
                        &r.uid_before,
                        &r.uid_after,
                    ]
            });
            assert!(printed_row.is_some(), "{r:?} not printed:\n{printed}");
        }
    }
    assert_eq!(
        printed
            .lines()
            .filter(|l| l.split_whitespace().eq([
                "NAMESPACE",
                "OUTCOME",
                "UID",
                "BEFORE",
                "UID",
                "AFTER"
            ]))
            .count(),
        RUNS,
        "{printed}"
    );
    assert!(
        printed.contains(&format!("kept uid {}", demo.legacy_uid)),
        "{printed}"
    );
}

#[test]
fn the_demo_reports_a_failed_run_and_a_binary_it_cannot_start() {
    let mut out = Vec::new();
    let demo = demo::run(Path::new("/bin/false"), &mut out).expect("/bin/false starts");
    assert!(!demo.succeeded());
    assert!(
        demo.runs
            .iter()
            .all(|r| r.exit_code == 1 && r.rows.is_empty())
    );
    let printed = String::from_utf8(out).expect("the demo prints text");
    assert!(printed.contains("run 1: exit 1"), "{printed}");
    assert!(printed.contains("the run's output"), "{printed}");

    let missing = Path::new("/nonexistent/ecr-refresh");
    let error = demo::run(missing, &mut Vec::new()).expect_err("no such binary");
    assert!(
        error.to_string().contains("/nonexistent/ecr-refresh"),
        "{error}"
    );
}
