//! Debian's real Prometheus Pushgateway, started on loopback per test (tests/fake/metrics.rs
//! for a refresh's metrics, tests/fake/check.rs for a check's), and a plain HTTP client for it.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A Pushgateway on 127.0.0.1, killed on drop. Every piece of state it keeps is named by a flag:
/// Debian's build has `--persistence.file=/var/lib/prometheus/pushgateway.data` compiled in
/// (`prometheus-pushgateway --help`), so a gateway started without the flag loads whatever series
/// any earlier gateway on the machine left there (issue 27).
pub(crate) struct Gateway {
    pub child: Child,
    pub port: u16,
}

/// Debian's compiled-in default for `--persistence.file`.
pub(crate) const DEBIAN_PERSISTENCE_FILE: &str = "/var/lib/prometheus/pushgateway.data";

pub(crate) fn gateway_binary() -> PathBuf {
    for candidate in ["prometheus-pushgateway", "pushgateway"] {
        if let Some(path) = std::env::var_os("PATH")
            .iter()
            .flat_map(std::env::split_paths)
            .map(|dir| dir.join(candidate))
            .find(|p| p.is_file())
        {
            return path;
        }
    }
    panic!(
        "the Prometheus Pushgateway is not installed: these tests need Debian's \
         prometheus-pushgateway package (apt-get install prometheus-pushgateway; .ci/test does)"
    );
}

impl Gateway {
    /// Series in memory only: `--persistence.file=` (empty) turns persistence off.
    pub(crate) fn start() -> Self {
        Self::start_with(&["--persistence.file="])
    }

    /// A gateway with these flags besides its listen address.
    pub(crate) fn start_with(flags: &[&str]) -> Self {
        let binary = gateway_binary();
        // A free port can be taken between our probe and the gateway's bind: try again.
        for _ in 0..5 {
            let port = TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .expect("a free port")
                .port();
            let child = Command::new(&binary)
                .arg(format!("--web.listen-address=127.0.0.1:{port}"))
                .args(flags)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap_or_else(|e| panic!("starting {}: {e}", binary.display()));
            let mut gateway = Gateway { child, port };
            let deadline = Instant::now() + Duration::from_secs(20);
            while Instant::now() < deadline {
                if gateway.child.try_wait().ok().flatten().is_some() {
                    break;
                }
                if http_get(port, "/-/ready").is_some_and(|(status, _)| status == 200) {
                    return gateway;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = gateway.child.kill();
        }
        panic!("the Pushgateway did not become ready on a loopback port");
    }

    pub(crate) fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Every sample of the gateway's /metrics.
    pub(crate) fn samples(&self) -> Vec<Sample> {
        let (status, body) = http_get(self.port, "/metrics").expect("the gateway answers");
        assert_eq!(status, 200, "{body}");
        body.lines()
            .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
            .map(Sample::parse)
            .collect()
    }

    /// A refresh's samples named `name` (job `ecr-refresh`; the gateway's own metrics left
    /// out).
    pub(crate) fn ours(&self, name: &str) -> Vec<Sample> {
        self.of_job("ecr-refresh", name)
    }

    /// The samples named `name` pushed under `job`.
    pub(crate) fn of_job(&self, job: &str, name: &str) -> Vec<Sample> {
        self.samples()
            .into_iter()
            .filter(|s| s.name == name && s.labels.get("job").map(String::as_str) == Some(job))
            .collect()
    }

    /// The one value of a refresh's `name` whose labels include `labels`.
    pub(crate) fn value(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        self.value_of_job("ecr-refresh", name, labels)
    }

    /// The one value of `name` under `job` whose labels include `labels`.
    pub(crate) fn value_of_job(
        &self,
        job: &str,
        name: &str,
        labels: &[(&str, &str)],
    ) -> Option<f64> {
        let found: Vec<f64> = self
            .of_job(job, name)
            .into_iter()
            .filter(|s| {
                labels
                    .iter()
                    .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
            })
            .map(|s| s.value)
            .collect();
        assert!(found.len() <= 1, "{name} {labels:?}: {found:?}");
        found.first().copied()
    }

    pub(crate) fn text(&self) -> String {
        http_get(self.port, "/metrics")
            .expect("the gateway answers")
            .1
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[derive(Debug)]
pub(crate) struct Sample {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

impl Sample {
    /// `name{a="1",b="2"} value`: the gateway writes no escapes in our labels' values.
    pub(crate) fn parse(line: &str) -> Sample {
        let (series, value) = line.rsplit_once(' ').expect("a sample line");
        let (name, labels) = match series.split_once('{') {
            Some((name, rest)) => (name, rest.trim_end_matches('}')),
            None => (series, ""),
        };
        let labels = labels
            .split("\",")
            .filter(|p| !p.is_empty())
            .map(|pair| {
                let (k, v) = pair.split_once('=').expect("name=value");
                (k.to_owned(), v.trim_matches('"').to_owned())
            })
            .collect();
        Sample {
            name: name.to_owned(),
            labels,
            value: value.parse().unwrap_or_else(|e| panic!("{line}: {e}")),
        }
    }
}

/// A plain HTTP/1.0 GET (no chunked answer to decode); None when nothing listens.
pub(crate) fn http_get(port: u16, path: &str) -> Option<(u16, String)> {
    http(port, "GET", path, "")
}

/// One HTTP/1.0 request with a body; None when nothing listens.
pub(crate) fn http(port: u16, method: &str, path: &str, body: &str) -> Option<(u16, String)> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .ok()?;
    write!(
        stream,
        "{method} {path} HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .ok()?;
    let mut raw = String::new();
    stream.read_to_string(&mut raw).ok()?;
    let (head, body) = raw.split_once("\r\n\r\n")?;
    let status = head.split_whitespace().nth(1)?.parse().ok()?;
    Some((status, body.to_owned()))
}
