//! What clusters really do to a run, and odd inputs: an API server that goes away and comes
//! back, environment values that are not text, half-broken Secrets. Nothing is lost in any of
//! them: no Secret deleted (the Harness checks every run for a DELETE), no foreign entry
//! dropped, no stale password written.

mod common;

use std::process::Stdio;
use std::time::{Duration, Instant};

use common::*;
use fake_cluster::{FakeCluster, Fault, Resource};
use serde_json::{Value, json};

/// The default log filter with the retry module's per-attempt lines.
const WITH_RETRIES: &str = "info,aws_config=warn,aws_smithy_runtime=warn,kube=warn,kube_client::client::builder=off,hyper=warn,ecr_refresh::retry=debug";

#[test]
fn a_ten_second_api_server_outage_mid_run_is_ridden_out() {
    // A little latency per request, so 200 namespaces take long enough to stop in the middle.
    let h = Harness::with(
        FakeCluster::builder()
            .latency(Duration::from_millis(20))
            .start(),
    );
    let names: Vec<String> = (0..200).map(|i| format!("team-{i:03}")).collect();
    for name in &names {
        h.cluster.add_namespace(name, &[]);
    }
    let started = Instant::now();
    let child = h
        .command(&[("RUST_LOG", WITH_RETRIES)])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("ecr-refresh starts");

    // Version, the namespace list, then a read and a create per namespace: about a third of
    // the way through.
    while h.cluster.request_count() < 150 {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the run never got going"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    let written_before = names.iter().filter(|n| h.secret(n).is_some()).count();
    let served_before = h.cluster.request_count();
    let outage = Duration::from_secs(10);
    h.cluster.outage(outage);
    let down_at = Instant::now();
    let output = child.wait_with_output().expect("ecr-refresh exits");
    let wall = started.elapsed();
    let run = h.checked(output);

    run.expect_code(0);
    assert!(
        0 < written_before && written_before < names.len(),
        "the outage began mid-run: {written_before} of {} written",
        names.len()
    );
    assert!(
        down_at.elapsed() >= outage,
        "the run ended while the server was still away"
    );
    assert!(
        h.cluster.request_count() > served_before,
        "requests were served after the outage"
    );
    let issued = h.ecr.passwords_issued();
    for name in &names {
        let secret = h
            .secret(name)
            .unwrap_or_else(|| panic!("{name} has its Secret"));
        assert!(issued.contains(&password(&secret, REGISTRY)), "{name}");
        assert_eq!(run.outcome(name), "created", "{name}: {}", run.line(name));
    }
    assert_eq!(run.summary()["failed"], 0);
    let retries = run
        .lines
        .iter()
        .filter(|l| l["message"] == "retrying")
        .count();
    assert!(retries > 0, "the outage was retried through");
    assert!(
        wall < Duration::from_secs(60),
        "a 10 s outage costs about 10 s, not minutes: {wall:?}"
    );
    eprintln!(
        "outage of {outage:?} after {written_before} namespaces: run took {wall:?}, {retries} retries"
    );
}
