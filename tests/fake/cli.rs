//! The command line and the first thing a newcomer sees: --help, --version and a mistyped
//! flag never reach the cluster, ECR or instance metadata; a run with no region says in one
//! line what to set.

use crate::common;

use std::net::TcpListener;
use std::process::{Command, Output};

use common::Harness;
use ecr_refresh::cli::EXIT_CODES;
use ecr_refresh::config::VARIABLES;

/// A loopback port standing in for instance metadata (169.254.169.254), to see whether
/// anything calls it. Nothing here ever reaches the real address.
struct Metadata(TcpListener);

impl Metadata {
    fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("a loopback port");
        listener
            .set_nonblocking(true)
            .expect("a fresh socket can be made non-blocking");
        Self(listener)
    }

    fn url(&self) -> String {
        format!(
            "http://{}",
            self.0.local_addr().expect("a bound socket has an address")
        )
    }

    /// Whether anyone connected (the kernel queues connections until accepted).
    fn was_called(&self) -> bool {
        self.0.accept().is_ok()
    }
}

/// The binary with `args`, its environment set up to reach the fakes and a watched stand-in
/// for instance metadata, which is not disabled: nothing may call it.
fn run_with_args(h: &Harness, metadata: &Metadata, args: &[&str]) -> Output {
    h.command(&[])
        .args(args)
        .env_remove("AWS_EC2_METADATA_DISABLED")
        .env("AWS_EC2_METADATA_SERVICE_ENDPOINT", metadata.url())
        .output()
        .expect("ecr-refresh runs")
}

/// Neither the cluster, nor ECR, nor instance metadata heard from the binary, and no Secret
/// or termination message was written.
fn assert_nothing_sent(h: &Harness, metadata: &Metadata) {
    assert_eq!(h.cluster.requests().len(), 0, "requests to the API server");
    assert_eq!(h.ecr.calls().len(), 0, "calls to ECR");
    assert!(!metadata.was_called(), "instance metadata was called");
    assert!(h.secret("a").is_none());
    assert!(!h.termination_log().exists());
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn help_describes_every_variable_and_sends_nothing() {
    for flag in ["--help", "-h"] {
        let h = Harness::new();
        h.namespaces(&["a"]);
        let metadata = Metadata::start();

        let output = run_with_args(&h, &metadata, &[flag]);

        assert_eq!(output.status.code(), Some(0), "{flag}");
        let help = text(&output.stdout);
        assert!(help.contains("image-pull Secret"), "{flag}:\n{help}");
        for v in VARIABLES {
            assert!(
                help.contains(&format!("  {} (default: {})\n", v.name, v.default)),
                "{flag}: {} and its default missing:\n{help}",
                v.name
            );
            assert!(
                help.contains(&format!(
                    "      {}\n      accepted: {}\n",
                    v.meaning, v.accepted
                )),
                "{flag}: {}'s meaning or accepted values missing",
                v.name
            );
        }
        for other in [
            "AWS_REGION",
            "KUBECONFIG",
            "RUST_LOG",
            "AWS_ENDPOINT_URL_ECR,",
            "AWS_ENDPOINT_URL_ECR_PUBLIC",
            "ecr-public.aws.com",
            "every 10 minutes with ECR_REFRESH_RENEW_BEFORE=8h",
        ] {
            assert!(help.contains(other), "{flag}: {other} missing");
        }
        assert_eq!(text(&output.stderr), "");
        assert_nothing_sent(&h, &metadata);
    }
}

#[test]
fn version_prints_the_version_and_sends_nothing() {
    for flag in ["--version", "-V"] {
        let h = Harness::new();
        h.namespaces(&["a"]);
        let metadata = Metadata::start();

        let output = run_with_args(&h, &metadata, &[flag]);

        assert_eq!(output.status.code(), Some(0), "{flag}");
        let version = text(&output.stdout);
        let expected = format!(
            "ecr-refresh {}",
            option_env!("ECR_REFRESH_VERSION").unwrap_or(env!("CARGO_PKG_VERSION"))
        );
        assert!(
            version.starts_with(&expected) && version.lines().count() == 1,
            "{flag}: {version:?}"
        );
        assert_nothing_sent(&h, &metadata);
    }
}

#[test]
fn any_other_argument_exits_2_naming_it_and_sends_nothing() {
    for args in [
        &["--dry-run"][..],
        &["help"],
        &["-v"],
        &["--help", "--bogus"],
    ] {
        let h = Harness::new();
        h.namespaces(&["a"]);
        let metadata = Metadata::start();

        let output = run_with_args(&h, &metadata, args);

        assert_eq!(output.status.code(), Some(2), "{args:?}");
        let stderr = text(&output.stderr);
        let named = args.last().expect("one argument at least");
        assert!(
            stderr.contains(&format!("{named:?}")) && stderr.lines().count() == 1,
            "{args:?}: {stderr}"
        );
        assert_eq!(text(&output.stdout), "");
        assert_nothing_sent(&h, &metadata);
    }
}

/// No AWS_REGION, no profile, no ECR_REFRESH_REGISTRIES; instance metadata refuses (a closed
/// loopback port), as it is absent outside AWS.
fn without_a_region(h: &Harness, extra: &[(&str, &str)]) -> Command {
    let mut command = h.command(extra);
    command
        .env_remove("AWS_REGION")
        .env_remove("ECR_REFRESH_REGISTRIES")
        .env_remove("ECR_REFRESH_LOG_FORMAT")
        .env_remove("AWS_EC2_METADATA_DISABLED")
        .env("AWS_EC2_METADATA_SERVICE_ENDPOINT", "http://127.0.0.1:1");
    command
}

#[test]
fn a_run_with_no_region_says_in_one_line_what_to_set() {
    let h = Harness::new();
    h.namespaces(&["a"]);

    let output = without_a_region(&h, &[])
        .output()
        .expect("ecr-refresh runs");

    assert_eq!(output.status.code(), Some(2), "a configuration error");
    let stdout = text(&output.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 1, "one line:\n{stdout}");
    assert!(lines[0].contains("ERROR"), "{stdout}");
    assert!(
        lines[0].contains(
            "no AWS region is configured: set AWS_REGION (or a profile's region), or name the \
             registries in ECR_REFRESH_REGISTRIES"
        ),
        "{stdout}"
    );
    assert!(!stdout.contains("IMDS"), "the SDK's lookups are not shown");
    assert_eq!(text(&output.stderr), "");
    assert_eq!(h.cluster.requests().len(), 0, "nothing reached the cluster");
    assert_eq!(h.ecr.calls().len(), 0);
}

#[test]
fn the_sdk_region_lookups_stay_visible_at_debug_and_are_not_repeated_for_the_credentials() {
    let h = Harness::new();

    let output = without_a_region(&h, &[("RUST_LOG", "debug")])
        .output()
        .expect("ecr-refresh runs");

    assert_eq!(output.status.code(), Some(2));
    let stdout = text(&output.stdout);
    let lookups = stdout.matches("failed to load region from IMDS").count();
    // aws-config alone asks three times (the config, then the credential and token chains),
    // each up to a second outside AWS; ecr-refresh hands its answer on to the credentials.
    assert!(
        (1..=2).contains(&lookups),
        "{lookups} IMDS region lookups:\n{stdout}"
    );
    assert!(stdout.contains("no AWS region is configured"));
}

/// `--help` prints every variable and exit code from the one table each
/// (ecr_refresh::config::VARIABLES, ecr_refresh::cli::EXIT_CODES), as the book's reference
/// pages do (tests/fake/reference.rs): a default, a limit or an exit code lives in one place.
#[test]
fn help_prints_every_variable_and_exit_code_from_the_one_table() {
    let h = Harness::new();
    let metadata = Metadata::start();
    let output = run_with_args(&h, &metadata, &["--help"]);
    assert_eq!(output.status.code(), Some(0));
    let help = text(&output.stdout);
    for v in VARIABLES {
        let shown = format!("  {} (default: {})\n", v.name, v.default);
        assert!(help.contains(&shown), "--help: {shown:?} missing");
        assert!(
            help.contains(&format!("      accepted: {}\n", v.accepted)),
            "--help: {}'s accepted values missing",
            v.name
        );
    }
    let help_codes: Vec<(String, String)> = help
        .split_once("\nExit codes:\n")
        .expect("--help has an exit code list")
        .1
        .lines()
        .filter_map(|l| l.trim().split_once("  "))
        .map(|(code, meaning)| (code.trim().to_owned(), meaning.trim().to_owned()))
        .collect();
    let codes: Vec<(String, String)> = EXIT_CODES
        .iter()
        .map(|(code, meaning)| (code.to_string(), meaning.to_string()))
        .collect();
    assert_eq!(help_codes, codes, "--help's exit codes:\n{help}");
}

#[test]
fn a_check_with_no_region_is_a_configuration_error_too() {
    let h = Harness::new();
    h.namespaces(&["a"]);
    let output = without_a_region(&h, &[])
        .arg("check")
        .output()
        .expect("ecr-refresh runs");
    assert_eq!(output.status.code(), Some(2), "{}", text(&output.stdout));
    assert!(text(&output.stdout).contains("no AWS region is configured"));
}

/// An empty AWS_REGION (a manifest's `value: ""`) is as unset: the SDK's chain goes on to
/// AWS_DEFAULT_REGION, and without any region it is the one-line configuration error, not
/// the SDK's dump at the first call.
#[test]
fn an_empty_aws_region_is_skipped_and_the_chain_goes_on() {
    let h = Harness::new();
    h.namespaces(&["a"]);
    let output = without_a_region(&h, &[])
        .env("ECR_REFRESH_LOG_FORMAT", "json")
        .env("AWS_REGION", "")
        .env("AWS_DEFAULT_REGION", common::REGION)
        .output()
        .expect("ecr-refresh runs");
    let run = h.checked(output);
    run.expect_code(0);
    assert_eq!(run.outcome("a"), "created", "{}", run.stdout);

    let h = Harness::new();
    h.namespaces(&["a"]);
    let output = without_a_region(&h, &[])
        .env("AWS_REGION", "")
        .output()
        .expect("ecr-refresh runs");
    assert_eq!(output.status.code(), Some(2), "{}", text(&output.stdout));
    assert!(
        text(&output.stdout).contains("no AWS region is configured"),
        "{}",
        text(&output.stdout)
    );
    assert_eq!(h.cluster.requests().len(), 0, "nothing reached the cluster");
}

/// A region no partition has, from the environment or a profile, in a refresh or a check,
/// is exit 2 before anything is sent, with the nearest region.
#[test]
fn a_mistyped_region_from_any_source_exits_2_naming_the_nearest() {
    for (source, mode) in [
        ("AWS_REGION", "run"),
        ("profile", "run"),
        ("AWS_REGION", "check"),
    ] {
        let h = Harness::new();
        h.namespaces(&["a"]);
        let profile = h.dir.path().join("aws-config");
        std::fs::write(&profile, "[default]\nregion = eu-west1\n").expect("written");
        let mut command = without_a_region(&h, &[]);
        if source == "AWS_REGION" {
            command.env("AWS_REGION", "eu-west1");
        } else {
            command.env("AWS_CONFIG_FILE", &profile);
        }
        if mode == "check" {
            command.arg("check");
        }
        let output = command.output().expect("ecr-refresh runs");
        let stdout = text(&output.stdout);
        assert_eq!(output.status.code(), Some(2), "{source} {mode}: {stdout}");
        assert!(
            stdout.contains("eu-west1")
                && stdout
                    .contains("is not a region of any AWS partition (did you mean eu-west-1?)"),
            "{source} {mode}: {stdout}"
        );
        assert_eq!(
            h.cluster.requests().len(),
            0,
            "{source} {mode}: nothing reached the cluster"
        );
        assert_eq!(h.ecr.calls().len(), 0);
    }
}
