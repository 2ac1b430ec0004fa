//! The demo README's "Try it" starts with (`cargo run -p fake-cluster -- demo`), run here with
//! this build's binary instead of the release one it builds.

use std::path::Path;

use fake_cluster::demo::{self, LEGACY, NEW, RUNS, TERMINATING};

#[test]
fn the_demo_shows_secrets_created_then_updated_in_place_and_the_kubectl_one_adopted() {
    let mut out = Vec::new();

    let result = demo::run(Path::new(env!("CARGO_BIN_EXE_ecr-refresh")), &mut out);

    let printed = String::from_utf8(out).expect("the demo prints text");
    let demo = result.unwrap_or_else(|e| panic!("the demo failed: {e}\n{printed}"));
    assert!(demo.succeeded(), "{printed}");
    assert_eq!(demo.runs.len(), RUNS);
    let (first, second) = (&demo.runs[0], &demo.runs[1]);
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
        let (before, after) = (row(first, namespace), row(second, namespace));
        assert_eq!(
            (before.outcome.as_str(), before.uid_before.as_str()),
            ("created", "-")
        );
        assert_eq!(after.outcome, "updated");
        assert_eq!(
            after.uid_before, before.uid_after,
            "{namespace}: same Secret"
        );
        assert_eq!(
            after.uid_after, before.uid_after,
            "{namespace}: same Secret"
        );
    }
    for run in &demo.runs {
        let legacy = row(run, LEGACY);
        assert_eq!(legacy.outcome, "updated", "{printed}");
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
