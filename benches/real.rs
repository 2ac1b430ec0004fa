//! `cargo bench --bench real`: ecr-refresh and the loops it replaces, on one fresh real
//! kube-apiserver and etcd (tests/control-plane, binaries from `KUBEBUILDER_ASSETS`).
//!
//! N namespaces (`REAL_NAMESPACES`, default 1,000; 10,000 takes about ten times as long), in
//! this order on the same server:
//! 1. ecr-refresh creating every Secret (no readers: there is nothing to read yet);
//! 2. ecr-refresh updating every Secret with a new token;
//! 3. ecr-refresh with `ECR_REFRESH_RENEW_BEFORE=8h`, nothing due; then the same with no
//!    readers beside it (the run alone on the server);
//! 4. and 5. the same two with the Secrets read one namespace at a time (the namespaces
//!    named literally, as the namespaced install does), for the ratio to the one list;
//! 6. the seed's cron loop, `kubectl delete secret --ignore-not-found` then `kubectl create
//!    secret docker-registry`, namespace after namespace;
//! 7. the seed's fix, `kubectl create secret docker-registry --dry-run=client -o yaml |
//!    kubectl apply -f -`, over the Secrets the loop made.
//!
//! ECR's tokens are 2,700 characters long (about the longest real ECR password reported).
//! The kubectl loops run `REAL_KUBECTL_PARALLEL` namespaces at a time (default 4: serially,
//! 1,000 namespaces of two kubectl processes each take many minutes on 2 shared cores); each
//! worker takes the namespaces in the script's order. Above 1,000 namespaces they run only
//! with `REAL_KUBECTL_LOOPS=1` (at 10,000 they would take well over an hour here).
//!
//! `REAL_ONLY=nothing-due` runs only 1 and the two nothing-due rows of 3 (the second
//! `REAL_REPEAT` times, default 1), then reads the same pages with a plain client: the
//! namespace pages and the Secret list's pages, bodies read and not parsed, one list after the
//! other and the two side by side (the server's own time to serve them, the floor of a run).
//! `REAL_HOLD=<file>` (with it) writes the environment of a nothing-due run to `<file>` after
//! the create, and keeps the server up until the file is deleted: for timing builds of the
//! binary by hand.
//!
//! During 2 to 5 (but the nothing-due row without readers), readers in 20 namespaces GET the Secret in a tight loop and WATCH it, and
//! count 404s, DELETED events and uid changes. Requests are the server's own
//! `apiserver_request_total` from /metrics before and after, less the readers' (counted by
//! them: a WATCH is counted when it ends, so the count may lag by one per reader) and the
//! scrape's, and only on Secrets, namespaces and non-resource paths (discovery, OpenAPI):
//! kube-apiserver's own lease renewals and informer re-watches are not the tools'; peak RSS is GNU time's (`/usr/bin/time`, needed); etcd's size is
//! its own `etcd_mvcc_db_total_size_in_bytes` (and `…_in_use_…`) after each run.

// A test's unwrap is its assertion, in the helpers as in the #[test]s (clippy.toml allows
// the latter; the product refuses unwrap_used).
#![allow(clippy::unwrap_used)]

#[path = "../tests/common/real_scale.rs"]
mod real;

use std::process::Command;
use std::time::{Duration, Instant};

use real::{Readers, Real, Requests, Seen, gnu_time};

const READERS: usize = 20;

struct Row {
    name: String,
    wall: Duration,
    requests: Requests,
    peak_rss_kb: u64,
    /// The binary's user and system CPU, s (None for the kubectl loops).
    cpu_s: Option<f64>,
    etcd: (u64, u64),
    seen: Option<Seen>,
    n: usize,
}

impl Row {
    /// Requests on the namespaces' Secrets per namespace (list pages and discovery apart).
    fn secret_requests_per_namespace(&self) -> f64 {
        let secrets: u64 = self
            .requests
            .0
            .iter()
            .filter(|((_, r), _)| r == "secrets")
            .map(|(_, v)| v)
            .sum();
        secrets as f64 / self.n as f64
    }
}

fn main() {
    let n: usize = std::env::var("REAL_NAMESPACES").map_or(1_000, |v| {
        v.parse()
            .unwrap_or_else(|_| panic!("REAL_NAMESPACES: {v:?} is not a count; e.g. 1000"))
    });
    let parallel: usize = std::env::var("REAL_KUBECTL_PARALLEL").map_or(4, |v| {
        v.parse()
            .ok()
            .filter(|&p| p > 0)
            .unwrap_or_else(|| panic!("REAL_KUBECTL_PARALLEL: {v:?} is not a count above 0"))
    });
    let loops = n <= 1_000 || std::env::var("REAL_KUBECTL_LOOPS").is_ok_and(|v| v == "1");
    let only_nothing_due = match std::env::var("REAL_ONLY").as_deref() {
        Err(_) => false,
        Ok("nothing-due") => true,
        Ok(other) => panic!("REAL_ONLY: {other:?} is not a row set; e.g. nothing-due"),
    };
    let repeat: usize = std::env::var("REAL_REPEAT").map_or(1, |v| {
        v.parse()
            .ok()
            .filter(|&r| r > 0)
            .unwrap_or_else(|| panic!("REAL_REPEAT: {v:?} is not a count above 0"))
    });
    gnu_time();
    let started = Instant::now();
    let real = Real::start(n);
    let password: String = (0..2700)
        .map(|i| char::from(b"abcdefghijklmnopqrstuvwxyz0123456789"[i * 7 % 36]))
        .collect();
    real.ecr.set_password(real::REGION, &password);
    let literal = real.namespaces.join(",");
    println!(
        "ecr-refresh real-server bench: {n} namespaces, {} cores, load average {} at the start, kube-apiserver {}, kubectl loops {parallel} at a time",
        std::thread::available_parallelism().map_or(0, |c| c.get()),
        loadavg(),
        real.cp.version(),
    );
    println!(
        "set up in {:.1?} (control plane, RBAC, {n} namespaces)\n",
        started.elapsed()
    );
    let watched: Vec<String> = real.namespaces.iter().take(READERS).cloned().collect();
    let mut rows = Vec::new();

    rows.push(phase(&real, "ecr-refresh create", None, || {
        ecr_refresh(&real, &[])
    }));
    check_passwords(&real, &last_issued(&real));
    if let Ok(hold) = std::env::var("REAL_HOLD") {
        hold_for_hand_runs(&real, &hold);
    }
    if !only_nothing_due {
        rows.push(phase(&real, "ecr-refresh update", Some(&watched), || {
            ecr_refresh(&real, &[])
        }));
        check_passwords(&real, &last_issued(&real));
    }
    let calls = real.ecr.calls().len();
    let nothing_due = [("ECR_REFRESH_RENEW_BEFORE", "8h")];
    rows.push(phase(
        &real,
        "ecr-refresh RENEW_BEFORE=8h, nothing due",
        Some(&watched),
        || ecr_refresh(&real, &nothing_due),
    ));
    for _ in 0..repeat {
        rows.push(phase(
            &real,
            "ecr-refresh RENEW_BEFORE=8h, nothing due, no readers",
            None,
            || ecr_refresh(&real, &nothing_due),
        ));
    }
    assert_eq!(real.ecr.calls().len(), calls, "nothing due: no ECR call");
    if only_nothing_due {
        print_table(&rows, n);
        plain_client_pages(&real);
        println!(
            "\nwhole bench: {:.1?}; load average {} at the end",
            started.elapsed(),
            loadavg()
        );
        return;
    }
    rows.push(phase(
        &real,
        "ecr-refresh update, per namespace",
        Some(&watched),
        || ecr_refresh(&real, &[("ECR_REFRESH_NAMESPACES", &literal)]),
    ));
    check_passwords(&real, &last_issued(&real));
    let calls = real.ecr.calls().len();
    rows.push(phase(
        &real,
        "ecr-refresh RENEW_BEFORE=8h, nothing due, per namespace",
        Some(&watched),
        || {
            ecr_refresh(
                &real,
                &[
                    ("ECR_REFRESH_RENEW_BEFORE", "8h"),
                    ("ECR_REFRESH_NAMESPACES", &literal),
                ],
            )
        },
    ));
    assert_eq!(real.ecr.calls().len(), calls, "nothing due: no ECR call");
    if !loops {
        print_table(&rows, n);
        println!(
            "\nwhole bench: {:.1?} (kubectl loops not run above 1,000 namespaces: REAL_KUBECTL_LOOPS=1); load average {} at the end",
            started.elapsed(),
            loadavg()
        );
        return;
    }
    rows.push(phase(
        &real,
        "1: kubectl delete; kubectl create",
        Some(&watched),
        || kubectl_loop(&real, parallel, "pw-loop-1", Real::delete_and_create),
    ));
    check_passwords(&real, "pw-loop-1");
    rows.push(phase(
        &real,
        "2: kubectl create --dry-run | kubectl apply",
        Some(&watched),
        || kubectl_loop(&real, parallel, "pw-loop-2", Real::create_apply),
    ));
    check_passwords(&real, "pw-loop-2");

    print_table(&rows, n);
    println!(
        "\nwhole bench: {:.1?}; load average {} at the end",
        started.elapsed(),
        loadavg()
    );
}

/// One run: metrics and etcd before, readers on (if any), the run, readers off, metrics after.
fn phase(
    real: &Real,
    name: &str,
    watched: Option<&[String]>,
    run: impl FnOnce() -> (u64, Option<f64>),
) -> Row {
    // Readers start after the scrape, so every request of theirs is in the difference.
    let before = real.requests();
    let readers = watched.map(|w| Readers::start(real.cp.admin_kubeconfig(), w));
    let started = Instant::now();
    let (peak_rss_kb, cpu_s) = run();
    let wall = started.elapsed();
    let seen = readers.map(|r| {
        let mut total = Seen::default();
        for (_, s) in r.stop() {
            total.add(&s);
        }
        total
    });
    let mut requests = real.requests().since(&before).ours();
    // The scrape before is counted in the one after.
    requests.take_off("GET", "", 1);
    if let Some(s) = &seen {
        requests.take_off("GET", "secrets", s.reads);
        requests.take_off("LIST", "secrets", s.lists);
        requests.take_off("WATCH", "secrets", s.watches);
    }
    let etcd = real.etcd_db_size();
    eprintln!(
        "{name}: {:.1} s, {} requests ({}), peak RSS {} kB, etcd {} / {} bytes; readers {:?}",
        wall.as_secs_f64(),
        requests.total(),
        requests.describe(),
        peak_rss_kb,
        etcd.0,
        etcd.1,
        seen
    );
    Row {
        name: name.to_owned(),
        wall,
        requests,
        peak_rss_kb,
        cpu_s,
        etcd,
        seen,
        n: real.namespaces.len(),
    }
}

/// The release binary under GNU time; its peak RSS, kB, and its CPU, s. It must exit 0.
fn ecr_refresh(real: &Real, env: &[(&str, &str)]) -> (u64, Option<f64>) {
    let binary = real.ecr_refresh(env);
    let time_file = real.dir.path().join("time");
    let mut command = Command::new(gnu_time());
    command
        .args(["-f", "%M %U %S", "-o"])
        .arg(&time_file)
        .arg(binary.get_program())
        .env_clear();
    for (k, v) in binary.get_envs() {
        if let Some(v) = v {
            command.env(k, v);
        }
    }
    let output = command.output().expect("ecr-refresh runs");
    assert!(
        output.status.success(),
        "ecr-refresh failed:\n{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let text = std::fs::read_to_string(&time_file).expect("GNU time's output");
    let fields: Vec<f64> = text
        .trim()
        .lines()
        .last()
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|f| f.parse().ok())
        .collect();
    let [rss, user, system] = fields[..] else {
        panic!("GNU time's peak RSS and CPU: {text:?}");
    };
    (rss as u64, Some(user + system))
}

/// `each` over every namespace, `parallel` at a time; the largest kubectl peak RSS, kB.
fn kubectl_loop(
    real: &Real,
    parallel: usize,
    password: &str,
    each: fn(&Real, &str, &str) -> real::Measured,
) -> (u64, Option<f64>) {
    let next = std::sync::atomic::AtomicUsize::new(0);
    let peak = std::sync::atomic::AtomicU64::new(0);
    std::thread::scope(|s| {
        for _ in 0..parallel {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some(ns) = real.namespaces.get(i) else {
                        break;
                    };
                    let m = each(real, ns, password);
                    peak.fetch_max(m.max_rss_kb, std::sync::atomic::Ordering::Relaxed);
                }
            });
        }
    });
    (peak.into_inner(), None)
}

fn last_issued(real: &Real) -> String {
    real.ecr
        .passwords_issued()
        .last()
        .cloned()
        .expect("an ECR call")
}

/// Every namespace's Secret holds `password`.
fn check_passwords(real: &Real, password: &str) {
    let passwords = real.passwords();
    assert_eq!(passwords.len(), real.namespaces.len(), "a Secret in each");
    for (ns, pw) in passwords {
        assert_eq!(pw, password, "{ns}");
    }
}

fn print_table(rows: &[Row], n: usize) {
    println!("\n## {n} namespaces, one fresh real kube-apiserver and etcd\n");
    if !rows.iter().any(|r| r.name.starts_with("1: ")) {
        println!(
            "(kubectl loops not run: \"vs 1\" and \"vs 2\" are to the two per-namespace runs, or to the first row without them)\n"
        );
    }
    println!(
        "| run | wall s | API requests | requests/ns | on Secrets per ns | CPU s | peak RSS MB | etcd DB MB (in use) | reads | 404s | DELETED | uid changes | wall vs 1 | vs 2 | requests vs 1 | vs 2 |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    // The ratios are to the kubectl loops, or without them to the per-namespace runs (update,
    // nothing due), or without those to the first row.
    let named = |prefix: &str| rows.iter().find(|r| r.name.starts_with(prefix));
    let (loop1, loop2) = match (named("1: "), named("2: ")) {
        (Some(one), Some(two)) => (one, two),
        _ => match (
            named("ecr-refresh update, per namespace"),
            named("ecr-refresh RENEW_BEFORE=8h, nothing due, per namespace"),
        ) {
            (Some(one), Some(two)) => (one, two),
            _ => (&rows[0], &rows[0]),
        },
    };
    for row in rows {
        let (reads, missing, deleted, uids) = row.seen.as_ref().map_or_else(
            || ("-".into(), "-".into(), "-".into(), "-".into()),
            |s| {
                (
                    s.reads.to_string(),
                    s.not_found.to_string(),
                    s.deleted_events.to_string(),
                    (s.read_uid_changes + s.watch_uid_changes).to_string(),
                )
            },
        );
        let wall = row.wall.as_secs_f64();
        let requests = row.requests.total() as f64;
        println!(
            "| {} | {wall:.2} | {} | {:.4} | {:.3} | {} | {:.1} | {:.1} ({:.1}) | {reads} | {missing} | {deleted} | {uids} | {:.3} | {:.3} | {:.3} | {:.3} |",
            row.name,
            row.requests.total(),
            requests / row.n as f64,
            row.secret_requests_per_namespace(),
            row.cpu_s.map_or("-".into(), |c| format!("{c:.2}")),
            row.peak_rss_kb as f64 / 1024.0,
            row.etcd.0 as f64 / 1e6,
            row.etcd.1 as f64 / 1e6,
            wall / loop1.wall.as_secs_f64(),
            wall / loop2.wall.as_secs_f64(),
            requests / loop1.requests.total() as f64,
            requests / loop2.requests.total() as f64,
        );
    }
    println!("\nRequests by verb and resource:\n");
    for row in rows {
        println!("- {}: {}", row.name, row.requests.describe());
    }
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split(' ').take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

/// Writes the environment of a nothing-due run to `file` (a shell script of exports and the
/// binary's path), and waits until the file is deleted.
fn hold_for_hand_runs(real: &Real, file: &str) {
    let command = real.ecr_refresh(&[("ECR_REFRESH_RENEW_BEFORE", "8h")]);
    let mut script = String::new();
    for (k, v) in command.get_envs() {
        if let Some(v) = v {
            script.push_str(&format!(
                "export {}='{}'\n",
                k.to_string_lossy(),
                v.to_string_lossy()
            ));
        }
    }
    script.push_str(&format!(
        "# the bench's binary: {}\n",
        command.get_program().to_string_lossy()
    ));
    std::fs::write(file, script).expect("REAL_HOLD's file");
    eprintln!("REAL_HOLD: the server is up; source {file} to run by hand, delete it to go on");
    while std::path::Path::new(file).exists() {
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// The pages a nothing-due run reads, read by a plain client as ecr-refresh's user, bodies
/// not parsed (the continue token is cut out of the text): the server's own time to serve
/// them. The namespace list and the Secret list one after the other, then side by side.
fn plain_client_pages(real: &Real) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    runtime.block_on(async {
        let kubeconfig = kube::config::Kubeconfig::read_from(real.cp.ecr_refresh_kubeconfig())
            .expect("a kubeconfig");
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
            .await
            .expect("a kube config");
        let client = kube::Client::try_from(config).expect("a kube client");
        let namespaces = "/api/v1/namespaces?limit=500".to_owned();
        let secrets = format!("/api/v1/secrets?fieldSelector=metadata.name%3D{}&limit=500", real::SECRET);
        // Once to warm the connection and the server's caches, then measured.
        read_pages(&client, &namespaces).await;
        for round in 1..=2 {
            let started = Instant::now();
            let (n_pages, n_bytes) = read_pages(&client, &namespaces).await;
            let namespace_time = started.elapsed();
            let started = Instant::now();
            let (s_pages, s_bytes) = read_pages(&client, &secrets).await;
            let secret_time = started.elapsed();
            let started = Instant::now();
            futures::join!(read_pages(&client, &namespaces), read_pages(&client, &secrets));
            let both = started.elapsed();
            println!(
                "plain client, round {round}: {n_pages} namespace pages ({:.1} MB) {:.3} s, {s_pages} Secret pages ({:.1} MB) {:.3} s, one after the other {:.3} s, side by side {:.3} s; load average {}",
                n_bytes as f64 / 1e6,
                namespace_time.as_secs_f64(),
                s_bytes as f64 / 1e6,
                secret_time.as_secs_f64(),
                (namespace_time + secret_time).as_secs_f64(),
                both.as_secs_f64(),
                loadavg(),
            );
        }
    });
}

/// Every page of a list, bodies read whole; the pages and bytes read.
async fn read_pages(client: &kube::Client, first: &str) -> (usize, usize) {
    let (mut pages, mut bytes) = (0, 0);
    let mut token: Option<String> = None;
    loop {
        let uri = match &token {
            None => first.to_owned(),
            Some(t) => format!("{first}&continue={t}"),
        };
        let request = http::Request::get(uri).body(Vec::new()).expect("a request");
        let text = client.request_text(request).await.expect("a list page");
        pages += 1;
        bytes += text.len();
        // The list's metadata comes before its items: the token is near the start.
        let head = &text[..text.len().min(8192)];
        token = head.split_once("\"continue\":\"").and_then(|(_, rest)| {
            rest.split_once('"')
                .map(|(t, _)| t.to_owned())
                .filter(|t| !t.is_empty())
        });
        if token.is_none() {
            return (pages, bytes);
        }
    }
}
