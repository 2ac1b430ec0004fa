//! The termination message, when it can't be written: one warning where the file was expected
//! (in a pod, or at a path someone set), silence outside a pod at the default path.

use crate::common;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::process::Command;

use common::{Harness, Run};
use ecr_refresh::config::DEFAULT_TERMINATION_LOG;
use serde_json::Value;

/// The lines of a run that mention the termination message.
fn termination_lines(run: &Run) -> Vec<&Value> {
    run.lines
        .iter()
        .filter(|l| {
            l["message"]
                .as_str()
                .is_some_and(|m| m.contains("termination message"))
        })
        .collect()
}

/// The binary at the default termination log path, as a user who can't write /dev: as
/// nobody when the tests run as root (root could create /dev/termination-log). Nobody must
/// reach the binary and the harness's files: the binary is copied into the harness's
/// directory, since the checkout may lie under one only root may enter (root's home, a
/// `mktemp -d`).
fn at_the_default_path(h: &Harness, env: &[(&str, &str)]) -> Command {
    let mut command = h.command(env);
    command.env_remove("ECR_REFRESH_TERMINATION_LOG");
    let root = std::fs::metadata("/proc/self").expect("/proc/self").uid() == 0;
    if !root {
        return command;
    }
    for path in [h.dir.path(), h.kubeconfig()] {
        let mode = if path.is_dir() { 0o755 } else { 0o644 };
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
            .expect("make the harness's files readable");
    }
    let copy = h.dir.path().join("ecr-refresh");
    if !copy.exists() {
        std::fs::copy(command.get_program(), &copy)
            .expect("copy the binary where nobody reaches it");
        std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o755))
            .expect("make the copy executable");
    }
    let mut as_nobody = Command::new(&copy);
    as_nobody.env_clear().args(command.get_args());
    for (key, value) in command.get_envs() {
        if let Some(value) = value {
            as_nobody.env(key, value);
        }
    }
    as_nobody.uid(65534).gid(65534);
    as_nobody
}

#[test]
fn outside_a_pod_an_unwritable_default_path_is_skipped_silently() {
    let h = Harness::new();
    h.namespaces(&["a"]);

    let output = at_the_default_path(&h, &[])
        .output()
        .expect("ecr-refresh runs");
    let run = h.checked(output);

    run.expect_code(0);
    assert_eq!(run.outcome("a"), "created");
    assert!(
        termination_lines(&run).is_empty(),
        "no line about the termination message:\n{}",
        run.stdout
    );
    assert!(
        run.lines.iter().all(|l| l["level"] != "WARN"),
        "{}",
        run.stdout
    );
    assert_eq!(run.stderr, "");
}

#[test]
fn in_a_pod_an_unwritable_termination_log_is_one_warning_naming_it() {
    let h = Harness::new();
    h.namespaces(&["a"]);

    // The kubelet sets this in every container; the kubeconfig still says where the API is.
    let output = at_the_default_path(&h, &[("KUBERNETES_SERVICE_HOST", "127.0.0.1")])
        .output()
        .expect("ecr-refresh runs");
    let run = h.checked(output);

    run.expect_code(0);
    assert_eq!(run.outcome("a"), "created");
    let lines = termination_lines(&run);
    assert_eq!(lines.len(), 1, "one line:\n{}", run.stdout);
    assert_eq!(lines[0]["level"], "WARN");
    assert_eq!(lines[0]["path"], DEFAULT_TERMINATION_LOG);
    assert!(
        !lines[0]["error"].as_str().unwrap_or_default().is_empty(),
        "says why: {}",
        lines[0]
    );
}

#[test]
fn a_termination_log_path_that_was_set_and_cannot_be_written_is_one_warning_naming_it() {
    let h = Harness::new();
    h.namespaces(&["a"]);
    let path = h
        .dir
        .path()
        .join("missing-directory")
        .join("termination-log");
    let path = path.to_str().expect("a UTF-8 path");

    let run = h.run(&[("ECR_REFRESH_TERMINATION_LOG", path)]);

    run.expect_code(0);
    assert_eq!(run.outcome("a"), "created");
    let lines = termination_lines(&run);
    assert_eq!(lines.len(), 1, "one line:\n{}", run.stdout);
    assert_eq!(lines[0]["level"], "WARN");
    assert_eq!(lines[0]["path"], path);
    assert!(
        lines[0]["error"]
            .as_str()
            .unwrap_or_default()
            .contains("No such file or directory"),
        "says why: {}",
        lines[0]
    );
}

#[test]
fn a_configuration_error_warns_when_its_termination_log_cannot_be_written() {
    let h = Harness::new();
    let path = h
        .dir
        .path()
        .join("missing-directory")
        .join("termination-log");
    let path = path.to_str().expect("a UTF-8 path");

    let run = h.run(&[
        ("ECR_REFRESH_TERMINATION_LOG", path),
        ("ECR_REFRESH_CONCURRENCY", "0"),
    ]);

    run.expect_code(2);
    let lines = termination_lines(&run);
    assert_eq!(lines.len(), 1, "one line:\n{}", run.stdout);
    assert_eq!(lines[0]["path"], path);
    assert_eq!(h.cluster.requests().len(), 0);
}

#[test]
fn outside_a_pod_the_default_path_is_not_written_at_all() {
    let h = Harness::new();
    h.namespaces(&["a"]);

    // Debug shows every attempt to write the termination message, and why one is not made.
    let output = at_the_default_path(&h, &[("RUST_LOG", "ecr_refresh=debug")])
        .output()
        .expect("ecr-refresh runs");
    let run = h.checked(output);

    run.expect_code(0);
    let lines = termination_lines(&run);
    assert_eq!(lines.len(), 1, "one line:\n{}", run.stdout);
    assert_eq!(lines[0]["level"], "DEBUG");
    assert!(
        lines[0]["message"]
            .as_str()
            .unwrap_or_default()
            .starts_with("no termination message: not in a pod"),
        "no write is tried: {}",
        lines[0]
    );
}

#[test]
fn a_termination_log_path_that_was_set_is_written_outside_a_pod() {
    let h = Harness::new();
    h.namespaces(&["a"]);

    let run = h.run(&[]);

    run.expect_code(0);
    let text = std::fs::read_to_string(h.termination_log()).expect("the termination log");
    let message: Value = serde_json::from_str(&text).expect("JSON");
    assert_eq!(message["exit_code"], 0);
}
