//! `cargo bench --bench fleet`: the release binary as a fleet's hub (ECR_REFRESH_CLUSTERS=dir:)
//! against 100 fake API servers of 100 namespaces each (`FLEET_CLUSTERS`, `FLEET_NAMESPACES`
//! to change them), 5 ms added per request, at ECR_REFRESH_CLUSTERS_CONCURRENCY 4 (the
//! default) and 16. Each spoke is what the spoke install leaves: the ServiceAccount
//! `ecr-refresh` and a kubeconfig whose credential is the hub's (tests/fake-cluster's
//! kube/auth.rs answers the TokenRequest).
//!
//! For each concurrency, on fresh spokes: a run where everything is due (every Secret
//! created: GetAuthorizationToken calls per region for the whole fleet), then a run with
//! ECR_REFRESH_RENEW_BEFORE=8h where nothing is due (the budget: at most 5 requests
//! per spoke). Each row: wall time, requests per spoke (max and min), ECR calls, the binary's
//! CPU time and peak RSS (target under 100 MB: the hub's memory limit is 128Mi), through
//! scale.rs's launcher (common/launcher.rs).

use std::path::{Path, PathBuf};
use std::time::Duration;

use fake_cluster::{FakeCluster, FakeEcr, Resource};

#[path = "common/launcher.rs"]
mod launcher;
use launcher::launcher;

const LATENCY: Duration = Duration::from_millis(5);
const REGISTRY: &str = "123456789012.dkr.ecr.us-east-1.amazonaws.com";
const REGION: &str = "us-east-1";
const SECRET: &str = "aws-ecr-token";
const HUB: &str = "system:serviceaccount:ecr-refresh:ecr-refresh-hub";
const CONCURRENCIES: [usize; 2] = [4, 16];
/// The budget with nothing due: TokenRequest, /version, the namespace and Secret lists.
const BUDGET: usize = 5;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("--measure") {
        launcher(&args[2..]);
        return;
    }
    let clusters = count("FLEET_CLUSTERS", 100);
    let namespaces = count("FLEET_NAMESPACES", 100);
    println!(
        "ecr-refresh fleet bench: {} cores, {clusters} spokes of {namespaces} namespaces, {} ms added per API request",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        LATENCY.as_millis()
    );
    println!("binary: {}\n", env!("CARGO_BIN_EXE_ecr-refresh"));
    println!(
        "| clusters | namespaces each | c | run | exit | wall s | requests/spoke max | requests/spoke min | ECR calls | CPU s | peak RSS MB |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    let mut over_budget = Vec::new();
    for c in CONCURRENCIES {
        let fleet = Fleet::new(clusters, namespaces);
        let due = fleet.run(c, "12h");
        due.print_row(clusters, namespaces, c, "everything due");
        assert_eq!(due.code, 0, "everything due exits 0:\n{}", due.log);
        fleet.check_written();
        assert_eq!(
            due.ecr_calls, 1,
            "one GetAuthorizationToken for the region, for the whole fleet"
        );
        let fresh = fleet.run(c, "8h");
        fresh.print_row(clusters, namespaces, c, "nothing due (8h)");
        assert_eq!(fresh.code, 0, "nothing due exits 0:\n{}", fresh.log);
        if fresh.max() > BUDGET {
            over_budget.push((c, fresh.max()));
        }
    }
    assert!(
        over_budget.is_empty(),
        "requests per spoke with nothing due over the budget of {BUDGET}: {over_budget:?} (c, max)"
    );
    println!(
        "\nThe hub's own cluster (KUBECONFIG, not a target without ECR_REFRESH_CLUSTERS_INCLUDE_LOCAL): {} requests in all runs.",
        HUB_REQUESTS.load(std::sync::atomic::Ordering::Relaxed)
    );
}

/// Requests the hub's own fake received, over every fleet of the bench.
static HUB_REQUESTS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

fn count(variable: &str, default: usize) -> usize {
    std::env::var(variable).map_or(default, |v| {
        v.trim()
            .parse()
            .unwrap_or_else(|_| panic!("{variable}: {v:?} is not a count"))
    })
}

/// The spokes, their kubeconfigs in one directory, the hub's own (empty) fake and the fake ECR.
struct Fleet {
    spokes: Vec<FakeCluster>,
    hub: FakeCluster,
    ecr: FakeEcr,
    dir: tempfile::TempDir,
    clusters: PathBuf,
    hub_kubeconfig: PathBuf,
    namespaces: usize,
}

impl Fleet {
    fn new(clusters: usize, namespaces: usize) -> Self {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let dir_of_clusters = dir.path().join("clusters");
        std::fs::create_dir(&dir_of_clusters).expect("the clusters directory");
        let spokes: Vec<FakeCluster> = (0..clusters)
            .map(|i| {
                let spoke = FakeCluster::builder()
                    .latency(LATENCY)
                    .kubeconfig_user(HUB)
                    .without_request_log()
                    .start();
                spoke.add_namespace("ecr-refresh", &[]);
                for n in 1..namespaces {
                    spoke.add_namespace(&format!("ns-{n:04}"), &[]);
                }
                spoke.seed(
                    Resource::ServiceAccounts,
                    serde_json::json!({"metadata": {"name": "ecr-refresh", "namespace": "ecr-refresh"}}),
                    "kubectl-create",
                );
                spoke.write_kubeconfig_to(&dir_of_clusters.join(format!("spoke-{i:04}")));
                spoke
            })
            .collect();
        let hub = FakeCluster::builder().without_request_log().start();
        let hub_kubeconfig = hub.write_kubeconfig(dir.path());
        Self {
            spokes,
            hub,
            ecr: FakeEcr::start(),
            dir,
            clusters: dir_of_clusters,
            hub_kubeconfig,
            namespaces,
        }
    }

    fn run(&self, concurrency: usize, renew_before: &str) -> Measured {
        let before: Vec<usize> = self.spokes.iter().map(FakeCluster::request_count).collect();
        let ecr_before = self.ecr.calls().len();
        let hub_before = self.hub.request_count();
        let log = self.dir.path().join("ecr-refresh.log");
        let output = launcher::measure(
            self.dir.path(),
            &self.hub_kubeconfig,
            REGISTRY,
            self.ecr.client_env(REGION),
        )
        .env(
            "ECR_REFRESH_CLUSTERS",
            format!("dir:{}", self.clusters.display()),
        )
        .env("ECR_REFRESH_CLUSTERS_CONCURRENCY", concurrency.to_string())
        .env("ECR_REFRESH_RENEW_BEFORE", renew_before)
        .env("RUST_LOG", "warn")
        .output()
        .expect("the launcher runs");
        let [wall_us, maxrss_kb, cpu_us, code] = launcher::measured(&output);
        HUB_REQUESTS.fetch_add(
            self.hub.request_count() - hub_before,
            std::sync::atomic::Ordering::Relaxed,
        );
        let per_spoke = self
            .spokes
            .iter()
            .zip(before)
            .map(|(spoke, before)| spoke.request_count() - before)
            .collect();
        Measured {
            wall: Duration::from_micros(wall_us),
            per_spoke,
            ecr_calls: self.ecr.calls().len() - ecr_before,
            cpu: Duration::from_micros(cpu_us),
            peak_rss_kb: maxrss_kb,
            code,
            log: read_tail(&log),
        }
    }

    /// The first, middle and last namespace of the first and last spoke hold the Secret.
    fn check_written(&self) {
        let last = self.namespaces - 1;
        let namespaces = [
            "ecr-refresh".to_owned(),
            format!("ns-{:04}", (last / 2).max(1)),
            format!("ns-{last:04}"),
        ];
        for (i, spoke) in [self.spokes.first(), self.spokes.last()]
            .into_iter()
            .flatten()
            .enumerate()
        {
            for ns in &namespaces {
                let secret = spoke
                    .get(Resource::Secrets, ns, SECRET)
                    .unwrap_or_else(|| panic!("spoke {i}: no Secret in {ns}"));
                assert_eq!(
                    secret["metadata"]["annotations"]["ecr-refresh/install"],
                    "ecr-refresh/ecr-refresh",
                    "spoke {i}/{ns}"
                );
            }
        }
    }
}

/// The last 40 lines of the binary's log, for a failure's message.
fn read_tail(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(40)..].join("\n")
}

struct Measured {
    wall: Duration,
    per_spoke: Vec<usize>,
    ecr_calls: usize,
    cpu: Duration,
    peak_rss_kb: u64,
    code: u64,
    log: String,
}

impl Measured {
    fn max(&self) -> usize {
        self.per_spoke.iter().copied().max().unwrap_or(0)
    }

    fn min(&self) -> usize {
        self.per_spoke.iter().copied().min().unwrap_or(0)
    }

    fn print_row(&self, clusters: usize, namespaces: usize, c: usize, run: &str) {
        println!(
            "| {clusters} | {namespaces} | {c} | {run} | {} | {:.2} | {} | {} | {} | {:.2} | {:.1} |",
            self.code,
            self.wall.as_secs_f64(),
            self.max(),
            self.min(),
            self.ecr_calls,
            self.cpu.as_secs_f64(),
            self.peak_rss_kb as f64 / 1024.0
        );
    }
}
