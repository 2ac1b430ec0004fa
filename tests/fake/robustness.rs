//! What clusters really do to a run, and odd inputs: an API server that goes away and comes
//! back, environment values that are not text, half-broken Secrets. Nothing is lost in any of
//! them: no Secret deleted (the Harness checks every run for a DELETE), no foreign entry
//! dropped, no stale password written.

use crate::common;

use std::process::Stdio;
use std::time::{Duration, Instant};

use common::*;
use fake_cluster::{FakeCluster, Fault, Resource};
use serde_json::{Value, json};

/// The default log filter with the retry module's per-attempt lines.
const WITH_RETRIES: &str = "info,aws_config=warn,aws_smithy_runtime=warn,kube=warn,kube_client::client::builder=off,hyper=warn,ecr_refresh::cluster::retry=debug";

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
    // Back from the outage, the fake refuses 403 for a while, as a restarted kube-apiserver
    // does before its RBAC authorizer has synced (tests/real/restarts.rs saw it): retried too.
    let forbidden = h
        .cluster
        .requests()
        .iter()
        .filter(|r| r.status == 403)
        .count();
    assert!(forbidden > 0, "the fake refused 403 after it came back");
    assert!(
        wall < Duration::from_secs(60),
        "a 10 s outage costs about 10 s, not minutes: {wall:?}"
    );
    eprintln!(
        "outage of {outage:?} after {written_before} namespaces: run took {wall:?}, {retries} retries"
    );
}

/// The binary's environment with `extra` set as raw bytes (names and values need not be text).
fn run_with_bytes(h: &Harness, extra: &[(&[u8], &[u8])]) -> std::process::Output {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    let mut command = h.command(&[]);
    for (name, value) in extra {
        command.env(OsStr::from_bytes(name), OsStr::from_bytes(value));
    }
    command.output().expect("ecr-refresh runs")
}

#[test]
fn another_programs_variable_that_is_not_utf8_is_ignored_and_never_printed() {
    let h = Harness::new();
    h.namespaces(&["team-a"]);

    // What `envFrom` over a Secret with binary data puts in the environment.
    let output = run_with_bytes(
        &h,
        &[
            (b"APP_SIGNING_KEY", b"hunter2-\xff\xfe-key"),
            (b"APP_\xff", b"hunter2-under-a-strange-name"),
        ],
    );
    let run = h.checked(output);

    run.expect_code(0);
    assert_eq!(run.outcome("team-a"), "created");
    assert!(
        !run.stdout.contains("hunter2") && !run.stderr.contains("hunter2"),
        "{}{}",
        run.stdout,
        run.stderr
    );
}

#[test]
fn an_ecr_refresh_variable_that_is_not_utf8_exits_2_naming_it_without_its_value() {
    let h = Harness::new();
    h.namespaces(&["team-a"]);
    let odd_path = h.dir.path().join(std::ffi::OsStr::new(
        &<std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(b"log-\xff"),
    ));
    let termination_log = {
        use std::os::unix::ffi::OsStrExt;
        odd_path.as_os_str().as_bytes().to_vec()
    };
    for (name, value, says) in [
        (
            &b"ECR_REFRESH_SECRET_NAME"[..],
            &b"hunter2\xff"[..],
            "ECR_REFRESH_SECRET_NAME",
        ),
        // The two read before the configuration, for the log format and the termination
        // message of a configuration error.
        (
            b"ECR_REFRESH_LOG_FORMAT",
            b"hunter2\xff",
            "ECR_REFRESH_LOG_FORMAT",
        ),
        (
            b"ECR_REFRESH_TERMINATION_LOG",
            &termination_log,
            "ECR_REFRESH_TERMINATION_LOG",
        ),
        (b"ECR_REFRESH_\xff", b"hunter2", "ECR_REFRESH_\u{FFFD}"),
    ] {
        let output = run_with_bytes(&h, &[(name, value)]);
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{says}: {stdout}{stderr}");
        assert!(
            stdout.contains(&format!("{says} is not valid UTF-8")),
            "{says}: {stdout}"
        );
        assert!(
            !stdout.contains("hunter2") && !stderr.contains("hunter2"),
            "{stdout}{stderr}"
        );
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
    assert!(h.cluster.requests().is_empty(), "nothing was sent");
    // The termination message of that run went where it was asked, bytes and all.
    let message: Value =
        serde_json::from_slice(&std::fs::read(&odd_path).expect("written")).unwrap();
    assert_eq!(message["exit_code"], 2);
}

#[test]
fn a_dockerconfigjson_that_cant_be_used_fails_in_words_without_quoting_it() {
    let h = Harness::new();
    let cases = [
        ("not-json", "hunter2 {", "is not JSON"),
        (
            "cut-short",
            r#"{"auths":{"x":{"password":"hunter2"#,
            "is not JSON",
        ),
        ("array", r#"["hunter2"]"#, "is a JSON array, not an object"),
        (
            "auths-string",
            r#"{"auths":"hunter2"}"#,
            "`auths` is a JSON string, not an object",
        ),
        ("empty", "", "is empty"),
        // The kubelet reads `Auths` as `auths` (Go's encoding/json), and refuses this one.
        (
            "auths-folded",
            r#"{"auths":{},"Auths":["hunter2"]}"#,
            "`Auths` is a JSON array, not an object, and the kubelet reads every letter case \
             of `auths` as `auths`, so it can't read this Secret: remove `Auths` or make it an \
             object",
        ),
    ];
    for (ns, value, _) in &cases {
        h.cluster.add_namespace(ns, &[]);
        h.seed_secret(
            ns,
            "kubectl-create",
            json!({"type": "kubernetes.io/dockerconfigjson", "data": {".dockerconfigjson": b64(value)}}),
        );
    }

    let run = h.run(&[]);

    run.expect_code(1);
    for (ns, value, says) in &cases {
        assert_eq!(run.outcome(ns), "failed");
        let error = run.line(ns)["error"].as_str().unwrap();
        assert!(error.contains(says), "{ns}: {error}");
        assert!(!error.contains("error at line"), "{ns}: {error}");
        let secret = h.secret(ns).unwrap();
        assert_eq!(docker_config_bytes(&secret), value.as_bytes(), "untouched");
        assert_eq!(h.cluster.history(Resource::Secrets, ns, SECRET).len(), 1);
    }
    assert!(!run.stdout.contains("hunter2"), "{}", run.stdout);
}

#[test]
fn a_null_auths_is_written_like_a_missing_one_keeping_the_rest() {
    let h = Harness::new();
    for (ns, value) in [
        ("null", r#"{"auths":null,"credsStore":"desktop"}"#),
        ("missing", r#"{"credsStore":"desktop"}"#),
    ] {
        h.cluster.add_namespace(ns, &[]);
        h.seed_secret(
            ns,
            "kubectl-create",
            json!({"type": "kubernetes.io/dockerconfigjson", "data": {".dockerconfigjson": b64(value)}}),
        );
    }

    let run = h.run(&[]);

    run.expect_code(0);
    for ns in ["null", "missing"] {
        assert_eq!(run.outcome(ns), "updated", "{ns}");
        let secret = h.secret(ns).unwrap();
        let config = docker_config(&secret);
        assert_eq!(config["credsStore"], "desktop", "{ns}");
        assert!(
            h.ecr
                .passwords_issued()
                .contains(&password(&secret, REGISTRY))
        );
    }
}

#[test]
fn a_secret_being_deleted_is_written_with_a_warning_that_it_will_go() {
    let h = Harness::new();
    h.namespaces(&["going"]);
    let foreign = r#"{"auth":"Z2g6MQ=="}"#;
    let seeded = h.seed_secret(
        "going",
        "kubectl-create",
        json!({
            "metadata": {
                "finalizers": ["example.com/backup"],
                "deletionTimestamp": "2026-11-30T07:59:00Z"
            },
            "type": "kubernetes.io/dockerconfigjson",
            "data": {".dockerconfigjson": b64(&format!(r#"{{"auths":{{"ghcr.io":{foreign}}}}}"#))}
        }),
    );
    assert!(
        seeded["metadata"]["deletionTimestamp"].is_string(),
        "the fake keeps it"
    );

    let run = h.run(&[]);

    run.expect_code(0);
    let line = run.line("going");
    assert_eq!(line["outcome"], "updated");
    assert_eq!(line["level"], "WARN", "not a silent update: {line}");
    let warning = line["warning"].as_str().unwrap();
    assert!(warning.contains("being deleted"), "{warning}");
    assert!(warning.contains("example.com/backup"), "{warning}");
    assert!(warning.contains("next run"), "{warning}");
    let secret = h.secret("going").unwrap();
    assert_eq!(uid(&secret), uid(&seeded), "in place");
    assert!(secret["metadata"]["deletionTimestamp"].is_string());
    assert_eq!(
        secret["metadata"]["finalizers"],
        json!(["example.com/backup"])
    );
    assert!(
        h.ecr
            .passwords_issued()
            .contains(&password(&secret, REGISTRY))
    );
    let text = String::from_utf8(docker_config_bytes(&secret)).unwrap();
    assert!(text.contains(&format!(r#""ghcr.io":{foreign}"#)), "{text}");
}

#[test]
fn a_create_whose_answer_was_lost_is_reported_created_not_updated() {
    let h = Harness::new();
    h.namespaces(&["lost"]);
    h.cluster
        .add_fault(Fault::lose_answer("POST", "/secrets$").times(1));

    let run = h.run(&[]);

    run.expect_code(0);
    assert_eq!(
        h.statuses("POST", "/secrets"),
        [0, 409],
        "stored, unheard; the retry met it"
    );
    let line = run.line("lost");
    assert_eq!(line["outcome"], "created", "{line}");
    assert_eq!(line["uid_before"], "-");
    let secret = h.secret("lost").unwrap();
    assert_eq!(line["uid_after"], uid(&secret));
    assert_eq!(
        h.cluster.history(Resource::Secrets, "lost", SECRET).len(),
        1,
        "written once: our create, nothing over it"
    );
    assert!(
        h.ecr
            .passwords_issued()
            .contains(&password(&secret, REGISTRY))
    );
}

#[test]
fn a_create_that_lost_its_answer_and_meets_someone_elses_secret_updates_theirs() {
    let h = Harness::new();
    h.namespaces(&["race"]);
    // Our create is cut before it is served; meanwhile someone else creates the Secret.
    h.cluster
        .add_fault(Fault::hang_up("POST", "/secrets$").times(1));
    let theirs = r#"{"auths":{"ghcr.io":{"auth":"Z2g6MQ=="}}}"#;
    h.cluster.create_after_next_get(
        Resource::Secrets,
        "race",
        SECRET,
        json!({
            "type": "kubernetes.io/dockerconfigjson",
            "data": { ".dockerconfigjson": b64(theirs) }
        }),
        "someone-else",
    );

    let run = h.run(&[]);

    run.expect_code(0);
    assert_eq!(h.statuses("POST", "/secrets"), [0, 409]);
    let line = run.line("race");
    assert_eq!(line["outcome"], "updated", "theirs, not ours: {line}");
    let secret = h.secret("race").unwrap();
    assert_eq!(line["uid_before"], uid(&secret));
    assert_eq!(
        docker_config(&secret)["auths"]["ghcr.io"]["auth"],
        "Z2g6MQ=="
    );
}

#[test]
fn lines_of_namespaces_left_undone_or_interrupted_at_a_stop_carry_no_uids() {
    let h = Harness::new();
    let names = ["a-stuck", "b-undone", "c-undone"];
    h.namespaces(&names);
    h.cluster.add_fault(Fault::slow(
        Some("GET"),
        "/namespaces/a-stuck/secrets/",
        Duration::from_secs(40),
    ));

    // One at a time: a-stuck is in flight at the deadline, the others are never started;
    // a-stuck is abandoned when the shutdown grace runs out.
    let run = h.run(&[
        ("ECR_REFRESH_NAMESPACES", "a-stuck,b-undone,c-undone"),
        ("ECR_REFRESH_CONCURRENCY", "1"),
        ("ECR_REFRESH_TIMEOUT", "2s"),
    ]);

    run.expect_code(1);
    for (ns, error) in [
        ("a-stuck", "interrupted"),
        ("b-undone", "left undone"),
        ("c-undone", "left undone"),
    ] {
        let line = run.line(ns);
        assert_eq!(line["outcome"], "failed", "{ns}");
        assert!(line["error"].as_str().unwrap().contains(error), "{line}");
        assert_eq!(line["uid_before"], "-", "{line}");
        assert_eq!(line["uid_after"], "-", "{line}");
    }
}

#[test]
fn boolean_spellings_accepted_are_the_ones_the_error_names() {
    let h = Harness::new();
    h.namespaces(&["team-a"]);
    let refused = h.run(&[("ECR_REFRESH_DRY_RUN", "maybe")]);
    refused.expect_code(2);
    let message = refused.lines[0]["error"].as_str().unwrap().to_owned();
    let named: Vec<String> = message
        .split(|c: char| !c.is_ascii_alphanumeric())
        .map(str::to_ascii_lowercase)
        .collect();
    for spelling in [
        "true", "false", "yes", "no", "1", "0", "on", "off", "y", "n", "TRUE", "No", "enabled",
    ] {
        let run = h.run(&[("ECR_REFRESH_DRY_RUN", spelling)]);
        let accepted = run.code != 2;
        assert_eq!(
            accepted,
            named.contains(&spelling.to_ascii_lowercase()),
            "{spelling:?}: accepted={accepted}, the error says: {message}"
        );
        if accepted {
            let dry = ["true", "yes", "1"].contains(&spelling.to_ascii_lowercase().as_str());
            assert_eq!(
                run.outcome("team-a").starts_with("would-"),
                dry,
                "{spelling}: {}",
                run.outcome("team-a")
            );
        }
    }
}

#[test]
fn literal_names_that_do_not_exist_are_skipped_and_told_in_the_summary_and_exit_code() {
    let h = Harness::new();
    h.namespaces(&["team-a"]);

    let run = h.run(&[("ECR_REFRESH_NAMESPACES", "team-a,team-b-typo,gone")]);

    run.expect_code(1);
    assert_eq!(run.outcome("team-a"), "created");
    for ns in ["team-b-typo", "gone"] {
        assert_eq!(run.outcome(ns), "skipped");
        assert_eq!(run.line(ns)["reason"], "namespace not found");
    }
    let summary = run.summary();
    assert_eq!(summary["not_found"], 2);
    // In name order, whichever namespace finished first.
    assert_eq!(summary["not_found_namespaces"], "gone,team-b-typo");
    assert_eq!(summary["failed"], 0, "nothing failed: they are skipped");
    let message: Value =
        serde_json::from_slice(&std::fs::read(h.termination_log()).unwrap()).unwrap();
    assert_eq!(message["not_found"], json!(["gone", "team-b-typo"]));
    assert_eq!(message["exit_code"], 1);
}

#[test]
fn aws_variables_that_are_not_utf8_exit_2_before_the_sdk_can_print_them() {
    // The AWS SDK's credentials provider would print such a value in its error.
    for (name, exit) in [
        (&b"AWS_SECRET_ACCESS_KEY"[..], Some(2)),
        (b"AWS_ACCESS_KEY_ID", Some(2)),
        (b"AWS_SESSION_TOKEN", Some(2)),
        (b"AWS_PROFILE", Some(2)),
        // Read by tracing, which falls back to the default filter and prints nothing of it.
        // (KUBECONFIG is a path: kube names it when it can't be read, as it should.)
        (b"RUST_LOG", Some(0)),
    ] {
        let h = Harness::new();
        h.namespaces(&["team-a"]);
        let output = run_with_bytes(&h, &[(name, b"hunter2\xff")]);
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        let name = String::from_utf8_lossy(name);
        assert!(
            !stdout.contains("hunter2") && !stderr.contains("hunter2"),
            "{name}: {stdout}{stderr}"
        );
        assert!(!stderr.contains("panicked"), "{name}: {stderr}");
        assert_eq!(output.status.code(), exit, "{name}: {stdout}");
        if exit == Some(2) {
            assert!(
                stdout.contains(&format!("{name} is not valid UTF-8")),
                "{stdout}"
            );
            assert!(h.ecr.passwords_issued().is_empty(), "nothing was sent");
        }
    }
}

#[test]
fn an_answer_the_client_cannot_parse_is_never_printed() {
    // A proxy that mangles a Secret's answer: its text would hold the Secret's passwords.
    // kube's client warns with the whole text; ecr-refresh's line says the read failed.
    let h = Harness::new();
    h.namespaces(&["team-a"]);
    let leaked =
        "truncated {\"data\":{\".dockerconfigjson\":\"c2VjcmV0LXBhc3N3b3JkLWZyb20tYS1wcm94eQ==\"";
    h.cluster.add_fault(
        Fault::new("GET", "/namespaces/team-a/secrets/", 200).body(Value::String(leaked.into())),
    );
    // The same answer to the one list of every Secret: the run reads per namespace instead.
    h.cluster
        .add_fault(Fault::new("GET", "^/api/v1/secrets$", 200).body(Value::String(leaked.into())));

    // Named literally, the Secret is read by a GET; selected by a glob, by the list first.
    for namespaces in ["team-a", "team-*"] {
        let run = h.run(&[("ECR_REFRESH_NAMESPACES", namespaces)]);

        run.expect_code(1);
        assert_eq!(run.outcome("team-a"), "failed");
        assert!(
            !run.stdout.contains("c2VjcmV0LXBhc3N3b3Jk")
                && !run.stderr.contains("c2VjcmV0LXBhc3N3b3Jk"),
            "the unparsable answer reached the log:\n{}{}",
            run.stdout,
            run.stderr
        );
    }
    assert_eq!(
        h.statuses("GET", "/api/v1/secrets"),
        [200],
        "the list was tried once"
    );
}

#[test]
fn an_off_cluster_run_behind_a_proxy_sends_the_api_server_direct_when_no_proxy_names_it() {
    // Nothing listens on a port the OS just handed out and took back: a proxy that is down.
    let dead = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", listener.local_addr().unwrap())
    };
    let h = Harness::new();
    h.namespaces(&["team-a"]);

    // HTTPS_PROXY set for AWS, NO_PROXY naming the cluster: the API server is reached directly.
    let run = h.run(&[
        ("HTTPS_PROXY", &dead),
        ("HTTP_PROXY", &dead),
        ("NO_PROXY", "127.0.0.1,localhost"),
    ]);
    run.expect_code(0);
    assert_eq!(run.outcome("team-a"), "created");

    // Without NO_PROXY naming it, the API server is reached through the proxy.
    let cluster: std::net::SocketAddr = h
        .cluster
        .url()
        .trim_start_matches("http://")
        .parse()
        .expect("the fake cluster's loopback address");
    let proxy = common::registry::ConnectProxy::start(cluster);
    h.namespaces(&["team-b"]);
    // The fake ECR, by the name NO_PROXY holds: the AWS SDK reads the proxy variables too.
    let ecr = h.ecr.url().replace("127.0.0.1", "localhost");
    let run = h.run(&[
        ("HTTPS_PROXY", &proxy.url),
        ("HTTP_PROXY", &proxy.url),
        ("NO_PROXY", "localhost"),
        ("AWS_ENDPOINT_URL_ECR", &ecr),
    ]);
    run.expect_code(0);
    assert_eq!(run.outcome("team-b"), "created");
    assert!(
        !proxy.targets.lock().unwrap().is_empty(),
        "the API server was reached through the proxy"
    );
}
