//! Restarts a real control plane goes through, in the middle of a 500-namespace run:
//! kube-apiserver killed (SIGKILL) and started again at once; stopped (SIGTERM) and started
//! again 5 s later; etcd stopped for 5 s with kube-apiserver up. Every namespace's Secret is
//! seeded first (as `kubectl create secret docker-registry` makes it), so a kept uid proves
//! it was updated in place.
//!
//! The three tests take turns (one lock) on one control plane of their own
//! (`ControlPlane::one_at_a_time("restarts")`), each in namespaces under a prefix of its own;
//! two at once on a 2-core CI machine would only slow each other. Each prints what the server answered
//! while it was away, from the binary's retry lines (tests/fake-cluster/REAL-SERVER.md has
//! what was seen).

use crate::real_scale as real;

use std::collections::BTreeMap;
use std::io::{BufRead as _, BufReader};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use control_plane::ControlPlane;
use real::{Real, json_lines, outcome_lines};
use serde_json::Value;

const NAMESPACES: usize = 500;
const SEED_PASSWORD: &str = "pw-seeded-by-kubectl";
/// The default filter, with the retry module's per-attempt lines: what the server answered.
const WITH_RETRIES: &str = "info,aws_config=warn,aws_smithy_runtime=warn,kube=warn,kube_client::client::builder=off,hyper=warn,ecr_refresh::cluster::retry=debug";

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

struct Outcome {
    code: i32,
    lines: Vec<Value>,
    seeded: BTreeMap<String, String>,
    done_before: usize,
    real: Real,
}

/// Seeds 500 Secrets, starts a run at concurrency 4, and once 100 namespaces have their line
/// calls `disrupt`; then waits for the run to end.
fn run_through(prefix: &str, disrupt: impl FnOnce(&Real)) -> Outcome {
    let _turn = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let cp = ControlPlane::one_at_a_time("restarts");
    // A test before this one that failed may have left a daemon stopped.
    if cp.etcd_pid().is_none() {
        cp.start_etcd();
    }
    if cp.apiserver_pid().is_none() {
        cp.start_apiserver();
    }
    let real = Real::on(cp, prefix, NAMESPACES);
    let seeded = real.seed_secrets(SEED_PASSWORD);
    assert_eq!(seeded.len(), NAMESPACES);

    let mut child = real
        .ecr_refresh(&[("RUST_LOG", WITH_RETRIES), ("ECR_REFRESH_CONCURRENCY", "4")])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("ecr-refresh starts");
    let stdout = child.stdout.take().expect("piped");
    let lines = Arc::new(Mutex::new(Vec::<String>::new()));
    let reader = {
        let lines = lines.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                lines.lock().unwrap().push(line);
            }
        })
    };
    let done = |lines: &Mutex<Vec<String>>| {
        lines
            .lock()
            .unwrap()
            .iter()
            .filter(|l| l.contains("\"outcome\""))
            .count()
    };
    let started = Instant::now();
    while done(&lines) < 100 {
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "the run never got to 100 namespaces:\n{}",
            lines.lock().unwrap().join("\n")
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let done_before = done(&lines);
    let disrupted_at = Instant::now();
    disrupt(&real);
    eprintln!(
        "disrupted after {done_before} namespaces; server back after {:.1?}",
        disrupted_at.elapsed()
    );
    let output = child.wait_with_output().expect("ecr-refresh exits");
    reader.join().expect("the reader thread");
    let stdout = lines.lock().unwrap().join("\n");
    for password in real.ecr.passwords_issued() {
        assert!(
            !stdout.contains(&password),
            "a token reached the log:\n{stdout}"
        );
    }
    Outcome {
        code: output.status.code().unwrap_or(-1),
        lines: json_lines(&stdout),
        seeded,
        done_before,
        real,
    }
}

impl Outcome {
    /// What the server answered while it was away: each distinct error of a retry or a
    /// failed line, with how often it came (numbers and names taken out).
    fn answers(&self) -> BTreeMap<String, usize> {
        let mut answers = BTreeMap::new();
        for l in &self.lines {
            let error = if l["message"] == "retrying" || l["outcome"] == "failed" {
                l["error"].as_str()
            } else {
                None
            };
            if let Some(e) = error {
                let shape: String = e
                    .split(' ')
                    .map(|w| {
                        if w.contains("killed-")
                            || w.contains("stopped-")
                            || w.contains("etcd-")
                            || w.chars().any(|c| c.is_ascii_digit())
                                && !w.starts_with("HTTP")
                                && w.len() > 3
                        {
                            "…"
                        } else {
                            w
                        }
                    })
                    .collect::<Vec<_>>()
                    .join(" ");
                let what = if l["outcome"] == "failed" {
                    "failed"
                } else {
                    "retrying"
                };
                *answers
                    .entry(format!(
                        "{what} {} ({})",
                        shape,
                        l["request"].as_str().unwrap_or("-")
                    ))
                    .or_insert(0) += 1;
            }
        }
        answers
    }

    fn report(&self, what: &str) {
        eprintln!(
            "{what}: exit {}, {} of {NAMESPACES} done before; what the client saw:",
            self.code, self.done_before
        );
        for (answer, n) in self.answers() {
            eprintln!("  {n:>5} × {answer}");
        }
    }

    /// One line per namespace, each Secret still the seeded object (same uid, nothing
    /// deleted or made twice); returns the outcome of each.
    fn checked(&self) -> BTreeMap<String, String> {
        let by = outcome_lines(&self.lines);
        let all = self
            .lines
            .iter()
            .map(Value::to_string)
            .collect::<Vec<_>>()
            .join("\n");
        assert_eq!(by.len(), NAMESPACES, "a line for every namespace:\n{all}");
        for (ns, lines) in &by {
            assert_eq!(lines.len(), 1, "one line for {ns}: {lines:?}");
        }
        assert_eq!(self.real.uids(), self.seeded, "every Secret kept its uid");
        assert!(
            self.done_before < NAMESPACES,
            "the disruption came after the run had done every namespace"
        );
        by.into_iter()
            .map(|(ns, l)| (ns, l[0]["outcome"].as_str().unwrap_or_default().to_owned()))
            .collect()
    }

    fn fresh_password(&self) -> String {
        self.real
            .ecr
            .passwords_issued()
            .last()
            .cloned()
            .expect("one ECR call")
    }
}

/// Every namespace updated, holding the fresh token, exit 0.
fn every_namespace_updated(outcome: &Outcome) {
    let outcomes = outcome.checked();
    for (ns, o) in &outcomes {
        assert_eq!(o, "updated", "{ns}");
    }
    assert_eq!(outcome.code, 0, "exit code");
    let fresh = outcome.fresh_password();
    for (ns, pw) in outcome.real.passwords() {
        assert_eq!(pw, fresh, "{ns} holds the fresh token");
    }
}

#[test]
#[ignore = "needs KUBEBUILDER_ASSETS (bash .ci/test)"]
fn apiserver_killed_mid_run_and_started_again_every_namespace_is_updated_in_place() {
    let outcome = run_through("killed", |real| {
        real.cp.kill_apiserver();
        real.cp.start_apiserver();
    });
    outcome.report("kube-apiserver SIGKILL, started again at once");
    every_namespace_updated(&outcome);
}

#[test]
#[ignore = "needs KUBEBUILDER_ASSETS (bash .ci/test)"]
fn apiserver_stopped_mid_run_and_started_5s_later_every_namespace_is_updated_in_place() {
    let outcome = run_through("stopped", |real| {
        let stopping = Instant::now();
        real.cp.stop_apiserver();
        eprintln!(
            "kube-apiserver shut down in {:.1?} after SIGTERM",
            stopping.elapsed()
        );
        std::thread::sleep(Duration::from_secs(5));
        real.cp.start_apiserver();
    });
    outcome.report("kube-apiserver SIGTERM, started again 5 s later");
    every_namespace_updated(&outcome);
}

#[test]
#[ignore = "needs KUBEBUILDER_ASSETS (bash .ci/test)"]
fn etcd_stopped_for_5s_mid_run_every_namespace_is_updated_or_clearly_failed_and_the_exit_code_says_which()
 {
    let outcome = run_through("etcd", |real| {
        real.cp.stop_etcd();
        std::thread::sleep(Duration::from_secs(5));
        real.cp.start_etcd();
    });
    outcome.report("etcd stopped for 5 s, kube-apiserver up");
    let outcomes = outcome.checked();
    let fresh = outcome.fresh_password();
    let passwords = outcome.real.passwords();
    let mut failed = 0;
    for (ns, o) in &outcomes {
        let line = &outcome_lines(&outcome.lines)[ns][0];
        match o.as_str() {
            "updated" => assert_eq!(passwords[ns], fresh, "{ns}: {line}"),
            "failed" => {
                failed += 1;
                assert!(
                    line["error"].as_str().is_some_and(|e| !e.is_empty()),
                    "{ns}: a failed line says why: {line}"
                );
                // Not lost: the seeded Secret, or ours if the write landed unheard.
                assert!(
                    passwords[ns] == SEED_PASSWORD || passwords[ns] == fresh,
                    "{ns}: {line}"
                );
            }
            other => panic!("{ns}: outcome {other}: {line}"),
        }
    }
    let summary = outcome
        .lines
        .iter()
        .rev()
        .find(|l| l.get("elapsed_ms").is_some())
        .expect("a summary line");
    assert_eq!(summary["failed"], failed, "{summary}");
    assert_eq!(
        outcome.code,
        if failed == 0 { 0 } else { 1 },
        "exit code with {failed} failed"
    );
    eprintln!(
        "etcd stopped for 5 s: {failed} failed, {} updated",
        NAMESPACES - failed
    );
}
