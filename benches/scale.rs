//! `cargo bench --bench scale`: the release binary against the fake API server at scale.
//!
//! For each namespace count N (1,000 and 10,000; `SCALE_NAMESPACES=1000` for a quick run,
//! a comma list for several) and concurrency c (16 and 64), a fresh fake with 5 ms added
//! per request gets a create run, then an update run. Each run reports wall time, requests
//! per namespace, list pages, ECR calls, the child's CPU time and peak RSS, and how far the
//! wall time is from the lower bound requests × latency / c. Then two runs with
//! ECR_REFRESH_RENEW_BEFORE=8h at the largest N and c=16, after a create run: nothing due,
//! and 1% of namespaces new since; nothing due with ECR_REFRESH_DUAL_STACK=true. Then: the
//! request mix of one create and one update run (request log on), the fake's throughput with
//! no added latency, and the common `kubectl create --dry-run | kubectl apply` loop on the
//! same fake.
//!
//! Peak RSS comes from `wait4`, but not on a child of this process: Linux folds the hiwater
//! RSS of the memory the child was spawned from into the child's `ru_maxrss` at exec, and
//! this process holds the fake's store (tens of MB at 10,000 namespaces). So each run goes
//! through this same executable started as `--measure`, a launcher of a few MB, which
//! spawns the binary, waits for it with `wait4` and prints what it measured.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use fake_cluster::{FakeCluster, FakeEcr, Resource};

#[path = "common/launcher.rs"]
mod launcher;
use launcher::launcher;

const LATENCY: Duration = Duration::from_millis(5);
/// The page size ecr-refresh asks for, and the fake's default maximum.
const PAGE: usize = 500;
const REGISTRY: &str = "123456789012.dkr.ecr.us-east-1.amazonaws.com";
const REGION: &str = "us-east-1";
const SECRET: &str = "aws-ecr-token";
const CONCURRENCIES: [usize; 2] = [16, 64];
const KUBECTL_SAMPLE: usize = 20;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("--measure") {
        launcher(&args[2..]);
        return;
    }
    let sizes = namespace_counts();
    let largest = *sizes.iter().max().expect("at least one namespace count");
    println!(
        "ecr-refresh scale bench: {} cores, {} ms added per API request, pages of {PAGE}",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        LATENCY.as_millis()
    );
    println!("binary: {}\n", env!("CARGO_BIN_EXE_ecr-refresh"));

    request_mix(sizes[0].min(1000));

    println!("\n## Runs (request log off)\n");
    println!(
        "| N | c | run | wall s | requests/ns | list pages | ECR calls | CPU s | fake CPU s | peak RSS MB | lower bound s | wall / bound |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|");
    let mut per_namespace: Vec<(usize, &str, f64)> = Vec::new();
    for &n in &sizes {
        for c in CONCURRENCIES {
            let fixture = Fixture::new(n, LATENCY, false);
            for kind in [RunKind::Create, RunKind::Update] {
                let run = fixture.run(c, kind);
                run.print_row(n, c, kind.name(), LATENCY);
                if n == largest {
                    per_namespace.push((c, kind.name(), run.wall.as_secs_f64() / n as f64));
                }
            }
        }
    }

    renew_before_runs(largest);
    fixed_cost();
    fake_throughput(largest);
    kubectl_comparison(&per_namespace, largest);
}

/// `SCALE_NAMESPACES` (comma-separated), or 1,000 and 10,000.
fn namespace_counts() -> Vec<usize> {
    match std::env::var("SCALE_NAMESPACES") {
        Ok(v) => {
            let mut counts: Vec<usize> = v
                .split(',')
                .map(|s| {
                    s.trim().parse().unwrap_or_else(|_| {
                        panic!("SCALE_NAMESPACES: {s:?} is not a count; e.g. 1000 or 1000,10000")
                    })
                })
                .collect();
            counts.sort_unstable();
            counts
        }
        Err(_) => vec![1_000, 10_000],
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum RunKind {
    Create,
    Update,
    /// ECR_REFRESH_RENEW_BEFORE=8h right after a run: every Secret is fresh.
    NothingDue,
    /// ECR_REFRESH_RENEW_BEFORE=8h with 1% of namespaces added since the last run.
    OnePercentNew,
}

impl RunKind {
    fn name(self) -> &'static str {
        match self {
            Self::Create => "create",
            Self::Update => "update",
            Self::NothingDue => "nothing due (8h)",
            Self::OnePercentNew => "1% new (8h)",
        }
    }

    /// ECR_REFRESH_RENEW_BEFORE for this run; the default (12h) renews every Secret.
    fn renew_before(self) -> &'static str {
        match self {
            Self::Create | Self::Update => "12h",
            Self::NothingDue | Self::OnePercentNew => "8h",
        }
    }
}

/// ECR_REFRESH_RENEW_BEFORE=8h at N namespaces, c=16: after a create run, a run where nothing
/// is due, then one where 1% of namespaces are new.
fn renew_before_runs(n: usize) {
    println!("\n## Runs with ECR_REFRESH_RENEW_BEFORE=8h (request log off)\n");
    println!(
        "| N | c | run | wall s | requests/ns | list pages | ECR calls | CPU s | fake CPU s | peak RSS MB | lower bound s | wall / bound |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|");
    let mut fixture = Fixture::new(n, LATENCY, false);
    fixture.run(16, RunKind::Create);
    let run = fixture.run(16, RunKind::NothingDue);
    run.print_row(n, 16, RunKind::NothingDue.name(), LATENCY);
    assert_eq!(run.ecr_calls, 0, "nothing due: no ECR call");
    assert_eq!(
        run.requests,
        2 * run.pages() + 1,
        "nothing due: the namespace pages, the Secret list's pages and /version; no write"
    );
    let new = n / 100;
    fixture.add_namespaces(new);
    let run = fixture.run(16, RunKind::OnePercentNew);
    run.print_row(
        fixture.namespaces,
        16,
        RunKind::OnePercentNew.name(),
        LATENCY,
    );
    assert_eq!(run.ecr_calls, 1, "1% new: one ECR call");
    // The last + 1: a run by hand (no ECR_REFRESH_INSTALL, no pod ServiceAccount) asks the API
    // server who it is (SelfSubjectReview) once, before its first write (src/refresh/install_name.rs).
    assert_eq!(
        run.requests,
        run.pages() + (fixture.namespaces - new).div_ceil(PAGE) + new + 1 + 1,
        "1% new: the pages of both lists, /version, a create per new one and one SelfSubjectReview"
    );

    // The same with ECR_REFRESH_DUAL_STACK=true: each Secret holds the registry and its
    // dual-stack twin, and a run where nothing is due is as cheap as without.
    let mut fixture = Fixture::new(n, LATENCY, false);
    fixture.dual_stack = true;
    fixture.run(16, RunKind::Create);
    let run = fixture.run(16, RunKind::NothingDue);
    run.print_row(n, 16, "nothing due (8h), dual-stack", LATENCY);
    assert_eq!(run.ecr_calls, 0, "nothing due with dual-stack: no ECR call");
    assert_eq!(
        run.requests,
        2 * run.pages() + 1,
        "nothing due with dual-stack: the pages of both lists and /version; no write"
    );

    // What a metadata-only read would save: the same number of requests (the digest needs the
    // data), so only bytes. Nothing due again, with tokens as long as real ECR passwords.
    let mut fixture = Fixture::new(n, LATENCY, false);
    fixture.long_passwords(REAL_PASSWORD_LENGTH);
    fixture.run(16, RunKind::Create);
    let run = fixture.run(16, RunKind::NothingDue);
    run.print_row(n, 16, "nothing due (8h), real-length tokens", LATENCY);
    let secret = fixture
        .cluster
        .get(Resource::Secrets, &namespace(0), SECRET)
        .expect("a Secret");
    let whole = serde_json::to_vec(&secret).expect("JSON").len();
    let metadata = serde_json::to_vec(&secret["metadata"]).expect("JSON").len();
    println!(
        "\nWith {REAL_PASSWORD_LENGTH}-character passwords (last row): a Secret is {whole} bytes of JSON, its \
         metadata {metadata} bytes; a run where nothing is due reads {:.0} MB of Secrets at N={n}.",
        (whole * n) as f64 / 1e6
    );
}

/// About the longest ECR password reported (aws/containers-roadmap#1589: 2,714 characters).
const REAL_PASSWORD_LENGTH: usize = 2700;

/// A fresh fake API server with N namespaces, a fake ECR, and a kubeconfig for them.
struct Fixture {
    cluster: FakeCluster,
    ecr: FakeEcr,
    dir: tempfile::TempDir,
    kubeconfig: PathBuf,
    namespaces: usize,
    /// The first namespace `add_namespaces` added (`namespaces` until it is called).
    first_new: usize,
    /// The password the fake ECR hands out, if not its own short `pw-<region>-<n>`.
    password: Option<String>,
    /// ECR_REFRESH_DUAL_STACK=true: each registry's dual-stack host is written too.
    dual_stack: bool,
}

fn namespace(i: usize) -> String {
    format!("ns-{i:05}")
}

impl Fixture {
    /// Every later token is this long (a real ECR password is about 2,000 to 2,700 characters).
    fn long_passwords(&mut self, length: usize) {
        let password: String = std::iter::repeat_with(fastrand::alphanumeric)
            .take(length)
            .collect();
        self.ecr.set_password(REGION, &password);
        self.password = Some(password);
    }

    /// Adds `count` namespaces after the last one.
    fn add_namespaces(&mut self, count: usize) {
        self.first_new = self.namespaces;
        for i in self.namespaces..self.namespaces + count {
            self.cluster.add_namespace(&namespace(i), &[]);
        }
        self.namespaces += count;
    }

    fn new(namespaces: usize, latency: Duration, log_requests: bool) -> Self {
        let builder = FakeCluster::builder().latency(latency).max_page(PAGE);
        let builder = if log_requests {
            builder
        } else {
            builder.without_request_log()
        };
        let cluster = builder.start();
        for i in 0..namespaces {
            cluster.add_namespace(&namespace(i), &[]);
        }
        let dir = tempfile::tempdir().expect("a temporary directory");
        let kubeconfig = cluster.write_kubeconfig(dir.path());
        Self {
            cluster,
            ecr: FakeEcr::start(),
            dir,
            kubeconfig,
            namespaces,
            first_new: namespaces,
            password: None,
            dual_stack: false,
        }
    }

    /// One run of the binary through the launcher; checks it refreshed every namespace.
    fn run(&self, concurrency: usize, kind: RunKind) -> Measured {
        let requests_before = self.cluster.request_count();
        let cpu_before = own_cpu();
        let ecr_before = self.ecr.calls().len();
        let log = self.dir.path().join("ecr-refresh.log");
        let output = launcher::measure(
            self.dir.path(),
            &self.kubeconfig,
            REGISTRY,
            self.ecr.client_env(REGION),
        )
        .env("ECR_REFRESH_CONCURRENCY", concurrency.to_string())
        .env("ECR_REFRESH_RENEW_BEFORE", kind.renew_before())
        .env("ECR_REFRESH_DUAL_STACK", self.dual_stack.to_string())
        .env("RUST_LOG", "warn")
        .output()
        .expect("the launcher runs");
        let [wall_us, maxrss_kb, cpu_us, code] = launcher::measured(&output);
        let log_text = std::fs::read_to_string(&log).unwrap_or_default();
        assert_eq!(code, 0, "ecr-refresh exited {code}:\n{log_text}");
        self.check_refreshed(kind);
        Measured {
            wall: Duration::from_micros(wall_us),
            requests: self.cluster.request_count() - requests_before,
            ecr_calls: self.ecr.calls().len() - ecr_before,
            cpu: Duration::from_micros(cpu_us),
            fake_cpu: own_cpu() - cpu_before,
            peak_rss_kb: maxrss_kb,
            namespaces: self.namespaces,
            concurrency,
        }
    }

    /// The first, middle and last namespace hold the password of the latest ECR call (after a
    /// run that renews every Secret), or the Secret they held (after one where nothing was
    /// due); every new namespace (1% new) holds the latest.
    fn check_refreshed(&self, kind: RunKind) {
        let calls = self.ecr.calls().len();
        let expected = self
            .password
            .clone()
            .unwrap_or_else(|| format!("pw-{REGION}-{calls}"));
        let sample = [0, self.namespaces / 2, self.namespaces - 1];
        let checked: Vec<usize> = match kind {
            RunKind::Create | RunKind::Update => sample.to_vec(),
            RunKind::NothingDue | RunKind::OnePercentNew => {
                for i in sample {
                    let history = self
                        .cluster
                        .history(Resource::Secrets, &namespace(i), SECRET);
                    let new = kind == RunKind::OnePercentNew && i >= self.first_new;
                    if !new {
                        assert_eq!(
                            history.len(),
                            1,
                            "{}: {} was written",
                            kind.name(),
                            namespace(i)
                        );
                    }
                }
                if kind == RunKind::NothingDue {
                    return;
                }
                (self.first_new..self.namespaces).collect()
            }
        };
        for i in checked {
            let ns = namespace(i);
            let secret = self
                .cluster
                .get(Resource::Secrets, &ns, SECRET)
                .unwrap_or_else(|| panic!("{} run: no Secret in {ns}", kind.name()));
            let encoded = secret["data"][".dockerconfigjson"]
                .as_str()
                .expect("a .dockerconfigjson");
            let config: serde_json::Value = serde_json::from_slice(
                &base64::engine::general_purpose::STANDARD
                    .decode(encoded)
                    .expect("base64"),
            )
            .expect("docker config JSON");
            assert_eq!(
                config["auths"][REGISTRY]["password"],
                expected.as_str(),
                "{} run: {ns} does not hold the fresh token",
                kind.name()
            );
        }
    }
}

/// What one run cost.
struct Measured {
    wall: Duration,
    /// Requests the fake served during the run.
    requests: usize,
    ecr_calls: usize,
    /// User + system CPU of the binary.
    cpu: Duration,
    /// User + system CPU of this process (the fakes) during the run.
    fake_cpu: Duration,
    peak_rss_kb: u64,
    namespaces: usize,
    concurrency: usize,
}

impl Measured {
    fn pages(&self) -> usize {
        self.namespaces.div_ceil(PAGE).max(1)
    }

    /// Requests per namespace, without the list pages and the one /version check
    /// (`request_mix` shows every request of a run by kind).
    fn per_namespace(&self) -> f64 {
        (self.requests - self.pages() - 1) as f64 / self.namespaces as f64
    }

    fn lower_bound(&self, latency: Duration) -> Duration {
        latency * self.requests as u32 / self.concurrency as u32
    }

    fn print_row(&self, n: usize, c: usize, name: &str, latency: Duration) {
        let bound = self.lower_bound(latency).as_secs_f64();
        let wall = self.wall.as_secs_f64();
        println!(
            "| {n} | {c} | {name} | {wall:.2} | {:.3} | {} | {} | {:.2} | {:.2} | {:.1} | {bound:.2} | {:.2} |",
            self.per_namespace(),
            self.pages(),
            self.ecr_calls,
            self.cpu.as_secs_f64(),
            self.fake_cpu.as_secs_f64(),
            self.peak_rss_kb as f64 / 1024.0,
            wall / bound,
        );
    }
}

/// Every request of one create and one update run, by kind (request log on).
fn request_mix(n: usize) {
    println!("## Request mix: N={n}, c=64, request log on\n");
    println!(
        "| run | requests | /version | list pages | GET secret | POST secret | PATCH secret | other |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    let fixture = Fixture::new(n, LATENCY, true);
    let mut seen = 0;
    for kind in [RunKind::Create, RunKind::Update] {
        fixture.run(64, kind);
        let requests = fixture.cluster.requests();
        let run = &requests[seen..];
        seen = requests.len();
        let count =
            |f: &dyn Fn(&fake_cluster::Recorded) -> bool| run.iter().filter(|r| f(r)).count();
        let secret = |r: &fake_cluster::Recorded| {
            r.path.ends_with(&format!("/secrets/{SECRET}"))
                || (r.path.ends_with("/secrets") && r.path != "/api/v1/secrets")
        };
        let version = count(&|r| r.path == "/version");
        let pages = count(&|r| {
            r.method == "GET" && (r.path == "/api/v1/namespaces" || r.path == "/api/v1/secrets")
        });
        let get = count(&|r| r.method == "GET" && secret(r));
        let post = count(&|r| r.method == "POST" && secret(r));
        let patch = count(&|r| r.method == "PATCH" && secret(r));
        let other = run.len() - version - pages - get - post - patch;
        println!(
            "| {} | {} | {version} | {pages} | {get} | {post} | {patch} | {other} |",
            kind.name(),
            run.len()
        );
        // The Secret list has a page less when the create run finds no Secret at all.
        assert!(
            pages > n.div_ceil(PAGE).max(1) && pages <= 2 * n.div_ceil(PAGE).max(1),
            "ceil(N / {PAGE}) pages of each list: {pages}"
        );
        assert_eq!(version, 1, "the runs table assumes one /version check");
    }
}

/// A run over one namespace: what every run pays before and after its namespaces (AWS
/// config, the ECR call, the client, /version, the first page; then the summary).
fn fixed_cost() {
    let fixture = Fixture::new(1, LATENCY, false);
    fixture.run(16, RunKind::Create);
    let run = fixture.run(16, RunKind::Update);
    println!(
        "\nFixed cost of a run: {:.3} s wall for an update run over 1 namespace ({} requests at {} ms).",
        run.wall.as_secs_f64(),
        run.requests,
        LATENCY.as_millis()
    );
}

/// The update run with no added latency: the fake's throughput (with the binary on the
/// same 2 cores, so a floor of what the fake alone can serve).
fn fake_throughput(n: usize) {
    println!("\n## Fake API server throughput, no added latency\n");
    println!("| N | c | run | wall s | requests | requests/s | CPU s | fake CPU s |");
    println!("|---|---|---|---|---|---|---|---|");
    let fixture = Fixture::new(n, Duration::ZERO, false);
    for kind in [RunKind::Create, RunKind::Update] {
        let run = fixture.run(64, kind);
        println!(
            "| {n} | 64 | {} | {:.2} | {} | {:.0} | {:.2} | {:.2} |",
            kind.name(),
            run.wall.as_secs_f64(),
            run.requests,
            run.requests as f64 / run.wall.as_secs_f64(),
            run.cpu.as_secs_f64(),
            run.fake_cpu.as_secs_f64()
        );
    }
}

/// The common script's loop, one namespace after another, on a fake with the same latency.
fn kubectl_comparison(per_namespace: &[(usize, &str, f64)], n: usize) {
    println!("\n## kubectl create | kubectl apply loop, {KUBECTL_SAMPLE} namespaces\n");
    let available = Command::new("kubectl")
        .args(["version", "--client"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !available {
        println!("kubectl is not on PATH: skipped");
        return;
    }
    let fixture = Fixture::new(KUBECTL_SAMPLE, LATENCY, false);
    println!(
        "| run | s/namespace kubectl | requests/ns kubectl | ecr-refresh s/namespace (N={n}) c=16 | c=64 | kubectl / ecr-refresh c=16 | c=64 |"
    );
    println!("|---|---|---|---|---|---|---|");
    for (pass, kind) in [RunKind::Create, RunKind::Update].into_iter().enumerate() {
        let before = fixture.cluster.request_count();
        let started = Instant::now();
        for i in 0..KUBECTL_SAMPLE {
            kubectl_create_apply(&fixture, &namespace(i), &format!("pw-{pass}"));
        }
        let kubectl = started.elapsed().as_secs_f64() / KUBECTL_SAMPLE as f64;
        let requests = (fixture.cluster.request_count() - before) as f64 / KUBECTL_SAMPLE as f64;
        let ours = |c: usize| {
            per_namespace
                .iter()
                .find(|(cc, k, _)| *cc == c && *k == kind.name())
                .map_or(f64::NAN, |(_, _, s)| *s)
        };
        let (c16, c64) = (ours(16), ours(64));
        println!(
            "| {} | {kubectl:.3} | {requests:.1} | {c16:.5} | {c64:.5} | {:.0}× | {:.0}× |",
            kind.name(),
            kubectl / c16,
            kubectl / c64
        );
    }
}

fn kubectl_create_apply(fixture: &Fixture, ns: &str, password: &str) {
    let kubectl = |args: &[&str]| {
        let mut command = Command::new("kubectl");
        command
            .args(args)
            .env("KUBECONFIG", &fixture.kubeconfig)
            .env("HOME", fixture.dir.path())
            .stderr(Stdio::piped());
        command
    };
    let server = format!("--docker-server=https://{REGISTRY}");
    let password = format!("--docker-password={password}");
    let mut create = kubectl(&[
        "create",
        "secret",
        "docker-registry",
        SECRET,
        "-n",
        ns,
        &server,
        "--docker-username=AWS",
        &password,
        "--dry-run=client",
        "-o",
        "yaml",
    ])
    .stdout(Stdio::piped())
    .spawn()
    .expect("kubectl starts");
    let manifest = create.stdout.take().expect("piped stdout");
    let apply = kubectl(&["apply", "--validate=false", "-f", "-"])
        .stdin(manifest)
        .stdout(Stdio::null())
        .output()
        .expect("kubectl starts");
    let created = create.wait_with_output().expect("kubectl create finishes");
    assert!(
        created.status.success() && apply.status.success(),
        "kubectl loop failed in {ns}:\n{}{}",
        String::from_utf8_lossy(&created.stderr),
        String::from_utf8_lossy(&apply.stderr)
    );
}

/// User + system CPU of this process so far, from /proc/self/stat (in USER_HZ ticks, which
/// Linux fixes at 100 per second).
fn own_cpu() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").expect("/proc/self/stat");
    // Fields after the command name, which is in parentheses and may hold spaces.
    let fields: Vec<&str> = stat[stat.rfind(')').expect("a (comm) field") + 2..]
        .split(' ')
        .collect();
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the command name.
    let ticks: u64 =
        fields[11].parse::<u64>().expect("utime") + fields[12].parse::<u64>().expect("stime");
    Duration::from_millis(ticks * 10)
}
