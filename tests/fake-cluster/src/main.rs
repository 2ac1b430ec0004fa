//! `fake-cluster`: serves the fake Kubernetes API server and the fake ECR endpoint on
//! 127.0.0.1 until killed, for trying ecr-refresh (or kubectl) by hand; or, with `demo`, runs
//! ecr-refresh (built with the dev profile, as `cargo test` builds it) three times against them with the
//! shipped CronJob's settings and prints what each run did.
//!
//! Usage: fake-cluster [--namespaces N] [--port P] [--kubeconfig PATH] [--latency 5ms]
//!        fake-cluster demo [--binary PATH]

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::Duration;

use fake_cluster::{FakeCluster, FakeEcr, demo};

const USAGE: &str =
    "usage: fake-cluster [--namespaces N] [--port P] [--kubeconfig PATH] [--latency DURATION]
       fake-cluster demo [--binary PATH]
  --namespaces N     seed N namespaces ns-00001 ... (default 0)
  --port P           API server port on 127.0.0.1 (default 0: any free port)
  --kubeconfig PATH  where to write the kubeconfig (default ./fake-cluster.kubeconfig)
  --latency D        added latency per API request, e.g. 5ms, 1s (default 0)
  demo               run ecr-refresh three times against a few seeded namespaces with the
                     shipped CronJob's settings and print each run's outcomes, writes and
                     ECR calls; builds the binary first (cargo build -p ecr-refresh)
  --binary PATH      the ecr-refresh binary the demo runs instead";

#[derive(Debug)]
struct Args {
    namespaces: usize,
    port: u16,
    kubeconfig: PathBuf,
    latency: Duration,
}

/// `5ms`, `2s`, `150us`, or a bare number of milliseconds.
fn parse_duration(s: &str) -> Result<Duration, String> {
    let digits_end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (number, unit) = s.split_at(digits_end);
    let n: u64 = number
        .parse()
        .map_err(|_| format!("--latency {s:?}: must be a number with a unit: us, ms or s"))?;
    match unit {
        "us" => Ok(Duration::from_micros(n)),
        "" | "ms" => Ok(Duration::from_millis(n)),
        "s" => Ok(Duration::from_secs(n)),
        _ => Err(format!("--latency {s:?}: the unit must be us, ms or s")),
    }
}

fn parse_args(mut args: impl Iterator<Item = String>) -> Result<Args, String> {
    let mut parsed = Args {
        namespaces: 0,
        port: 0,
        kubeconfig: PathBuf::from("fake-cluster.kubeconfig"),
        latency: Duration::ZERO,
    };
    while let Some(flag) = args.next() {
        if flag == "-h" || flag == "--help" {
            return Err(String::new());
        }
        let (name, inline) = match flag.split_once('=') {
            Some((n, v)) => (n.to_owned(), Some(v.to_owned())),
            None => (flag.clone(), None),
        };
        let value = match inline.or_else(|| args.next()) {
            Some(v) => v,
            None => return Err(format!("{name} needs a value")),
        };
        match name.as_str() {
            "--namespaces" => {
                parsed.namespaces = value
                    .parse()
                    .map_err(|_| format!("--namespaces {value:?}: must be a whole number"))?;
            }
            "--port" => {
                parsed.port = value
                    .parse()
                    .map_err(|_| format!("--port {value:?}: must be a port number (0-65535)"))?;
            }
            "--kubeconfig" => parsed.kubeconfig = PathBuf::from(value),
            "--latency" => parsed.latency = parse_duration(&value)?,
            other => return Err(format!("unknown flag {other:?}")),
        }
    }
    Ok(parsed)
}

/// `demo [--binary PATH]`: the binary to run, if given.
fn parse_demo_args(mut args: impl Iterator<Item = String>) -> Result<Option<PathBuf>, String> {
    let mut binary = None;
    while let Some(flag) = args.next() {
        match flag.split_once('=') {
            Some(("--binary", value)) => binary = Some(PathBuf::from(value)),
            None if flag == "--binary" => match args.next() {
                Some(value) => binary = Some(PathBuf::from(value)),
                None => return Err("--binary needs a value".into()),
            },
            _ => return Err(format!("unknown demo flag {flag:?}")),
        }
    }
    Ok(binary)
}

/// Builds ecr-refresh with the dev profile, as `cargo test` does (a no-op when it is up to
/// date: the demo sends a dozen requests and needs no optimiser), and returns its path, as
/// cargo reports it, so a custom target directory is found too.
fn build_demo_binary() -> Result<PathBuf, String> {
    // `cargo run` tells the program which cargo ran it.
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    // This crate lives in the workspace: build from there, wherever the command was started.
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    eprintln!("building ecr-refresh (a few minutes the first time)...");
    let output = Command::new(&cargo)
        .current_dir(&workspace)
        .args(["build", "-p", "ecr-refresh", "--bin", "ecr-refresh"])
        .arg("--message-format=json-render-diagnostics")
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("could not run {}: {e}", Path::new(&cargo).display()))?;
    if !output.status.success() {
        return Err("cargo build -p ecr-refresh failed".into());
    }
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|m| m["reason"] == "compiler-artifact" && m["target"]["name"] == "ecr-refresh")
        .find_map(|m| m["executable"].as_str().map(PathBuf::from))
        .ok_or_else(|| "cargo built no ecr-refresh executable".into())
}

fn run_demo(args: impl Iterator<Item = String>) -> ExitCode {
    let binary = match parse_demo_args(args) {
        Ok(Some(binary)) => binary,
        Ok(None) => match build_demo_binary() {
            Ok(binary) => binary,
            Err(message) => {
                eprintln!("fake-cluster demo: {message}");
                return ExitCode::FAILURE;
            }
        },
        Err(message) => {
            eprintln!("fake-cluster demo: {message}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    match demo::run(&binary, &mut std::io::stdout().lock()) {
        Ok(demo) if demo.succeeded() => ExitCode::SUCCESS,
        Ok(_) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("fake-cluster demo: {e}");
            ExitCode::FAILURE
        }
    }
}

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1).peekable();
    if args.peek().map(String::as_str) == Some("demo") {
        return run_demo(args.skip(1));
    }
    let args = match parse_args(args) {
        Ok(args) => args,
        Err(message) => {
            if !message.is_empty() {
                eprintln!("fake-cluster: {message}");
            }
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    let cluster = FakeCluster::builder()
        .port(args.port)
        .latency(args.latency)
        .start();
    for i in 1..=args.namespaces {
        cluster.add_namespace(&format!("ns-{i:05}"), &[]);
    }
    cluster.write_kubeconfig_to(&args.kubeconfig);
    let ecr = FakeEcr::start();
    let kubeconfig = std::path::absolute(&args.kubeconfig).unwrap_or(args.kubeconfig);
    println!("API server: {}", cluster.url());
    println!("kubeconfig: {}", kubeconfig.display());
    println!("ECR: {}", ecr.url());
    println!(
        "export KUBECONFIG={} AWS_ENDPOINT_URL_ECR={} AWS_REGION=us-east-1 AWS_ACCESS_KEY_ID=fake AWS_SECRET_ACCESS_KEY=fake",
        kubeconfig.display(),
        ecr.url()
    );
    loop {
        std::thread::park();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Result<Args, String> {
        parse_args(s.split_whitespace().map(str::to_owned))
    }

    #[test]
    fn flags_parse_with_spaces_or_equals() {
        let a = args("--namespaces 3 --port=8080 --latency 5ms --kubeconfig /tmp/k").unwrap();
        assert_eq!(a.namespaces, 3);
        assert_eq!(a.port, 8080);
        assert_eq!(a.latency, Duration::from_millis(5));
        assert_eq!(a.kubeconfig, PathBuf::from("/tmp/k"));
    }

    #[test]
    fn the_demo_takes_an_optional_binary() {
        let demo = |s: &str| parse_demo_args(s.split_whitespace().map(str::to_owned));
        assert_eq!(demo(""), Ok(None));
        assert_eq!(demo("--binary /b"), Ok(Some(PathBuf::from("/b"))));
        assert_eq!(demo("--binary=/b"), Ok(Some(PathBuf::from("/b"))));
        assert!(demo("--binary").unwrap_err().contains("--binary"));
        assert!(demo("--fast").unwrap_err().contains("--fast"));
    }

    #[test]
    fn bad_values_name_the_flag() {
        assert!(args("--latency 5h").unwrap_err().contains("--latency"));
        assert!(args("--port x").unwrap_err().contains("--port"));
        assert!(args("--bogus 1").unwrap_err().contains("--bogus"));
    }
}
