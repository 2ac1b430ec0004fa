//! `fake-cluster`: serves the fake Kubernetes API server and the fake ECR endpoint on
//! 127.0.0.1 until killed, for trying ecr-refresh (or kubectl) by hand.
//!
//! Usage: fake-cluster [--namespaces N] [--port P] [--kubeconfig PATH] [--latency 5ms]

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use fake_cluster::{FakeCluster, FakeEcr};

const USAGE: &str =
    "usage: fake-cluster [--namespaces N] [--port P] [--kubeconfig PATH] [--latency DURATION]
  --namespaces N     seed N namespaces ns-00001 ... (default 0)
  --port P           API server port on 127.0.0.1 (default 0: any free port)
  --kubeconfig PATH  where to write the kubeconfig (default ./fake-cluster.kubeconfig)
  --latency D        added latency per API request, e.g. 5ms, 1s (default 0)";

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

fn main() -> ExitCode {
    let args = match parse_args(std::env::args().skip(1)) {
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
    fn bad_values_name_the_flag() {
        assert!(args("--latency 5h").unwrap_err().contains("--latency"));
        assert!(args("--port x").unwrap_err().contains("--port"));
        assert!(args("--bogus 1").unwrap_err().contains("--bogus"));
    }
}
