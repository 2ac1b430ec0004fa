//! ECR_REFRESH_VERIFY_LOGIN against a real registry: Debian's `docker-registry` (the CNCF
//! distribution registry) with htpasswd auth on loopback, standing in for ECR's proxyEndpoint.

mod common;

use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::*;

const REGISTRY_BIN: &str = "/usr/bin/docker-registry";
const VERIFY: (&str, &str) = ("ECR_REFRESH_VERIFY_LOGIN", "true");

#[test]
fn a_token_the_registry_accepts_passes_the_login_check_and_the_run_writes() {
    let registry = Registry::start("AWS", "the-token-ecr-hands-out");
    let h = Harness::new();
    h.namespaces(&["team-a"]);
    h.ecr.set_password(REGION, "the-token-ecr-hands-out");
    h.ecr.set_proxy_endpoint(&registry.endpoint);

    let run = h.run(&[VERIFY]);

    run.expect_code(0);
    let passed = run
        .lines
        .iter()
        .find(|l| l["message"] == "login check passed")
        .unwrap_or_else(|| panic!("no \"login check passed\" line:\n{}", run.stdout));
    assert_eq!(passed["registry"], registry.endpoint);
    assert_eq!(passed["region"], REGION);
    assert_eq!(run.outcome("team-a"), "created");
    let secret = h.secret("team-a").expect("the Secret is written");
    assert_eq!(password(&secret, REGISTRY), "the-token-ecr-hands-out");
}

#[test]
fn a_token_the_registry_refuses_exits_3_and_writes_nothing() {
    let registry = Registry::start("AWS", "a-password-ecr-never-hands-out");
    let h = Harness::new();
    h.namespaces(&["team-a"]);
    h.ecr.set_password(REGION, "the-token-ecr-hands-out");
    h.ecr.set_proxy_endpoint(&registry.endpoint);

    let run = h.run(&[VERIFY]);

    run.expect_code(3);
    let error = last_error(&run);
    assert!(
        error.contains(&format!("registry {} refused", registry.endpoint))
            && error.contains("HTTP 401"),
        "{error}"
    );
    assert_eq!(
        h.statuses("POST", "/secrets"),
        Vec::<u16>::new(),
        "nothing is written once the login check fails"
    );
    assert!(h.secret("team-a").is_none());
}

#[test]
fn an_unreachable_registry_exits_3_naming_the_host() {
    let closed = free_port();
    let h = Harness::new();
    h.namespaces(&["team-a"]);
    h.ecr.set_proxy_endpoint(&format!("http://{closed}"));

    let run = h.run(&[VERIFY]);

    run.expect_code(3);
    let error = last_error(&run);
    assert!(
        error.contains(&closed.to_string()) && error.contains("could not be reached"),
        "{error}"
    );
    assert_eq!(h.statuses("POST", "/secrets"), Vec::<u16>::new());
    assert!(h.secret("team-a").is_none());
}

fn last_error(run: &Run) -> String {
    run.lines
        .last()
        .and_then(|l| l["error"].as_str())
        .unwrap_or_else(|| panic!("the last line carries an error:\n{}", run.stdout))
        .to_owned()
}

/// A loopback address nothing listens on once this returns.
fn free_port() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
    listener.local_addr().expect("a bound address")
}

/// A `docker-registry serve` process with one htpasswd user, killed on drop.
struct Registry {
    child: Child,
    /// `http://127.0.0.1:PORT`, as ECR's proxyEndpoint would name it.
    endpoint: String,
    _dir: tempfile::TempDir,
}

impl Registry {
    fn start(user: &str, password: &str) -> Self {
        assert!(
            Path::new(REGISTRY_BIN).exists(),
            "{REGISTRY_BIN} is missing: the login-check tests need a real registry; install it \
             with `apt-get install docker-registry` (.ci/run does)"
        );
        let dir = tempfile::tempdir().expect("a temporary directory");
        let htpasswd = dir.path().join("htpasswd");
        // The registry reads bcrypt entries only; cost 4 keeps each check in milliseconds.
        let hash = bcrypt::hash(password, 4).expect("bcrypt a password");
        write(&htpasswd, &format!("{user}:{hash}\n"));
        let config = dir.path().join("config.yml");
        let log = dir.path().join("registry.log");
        // Another process can take the free port before the registry binds it: try again.
        for _ in 0..3 {
            let addr = free_port();
            write(
                &config,
                &format!(
                    "version: 0.1\n\
                     log:\n  level: warn\n\
                     storage:\n  filesystem:\n    rootdirectory: {root}\n\
                     http:\n  addr: {addr}\n\
                     auth:\n  htpasswd:\n    realm: test\n    path: {htpasswd}\n",
                    root = dir.path().join("storage").display(),
                    htpasswd = htpasswd.display(),
                ),
            );
            let log_file = std::fs::File::create(&log).expect("create the registry log");
            let mut child = Command::new(REGISTRY_BIN)
                .arg("serve")
                .arg(&config)
                .stdin(Stdio::null())
                .stdout(log_file.try_clone().expect("clone the log handle"))
                .stderr(log_file)
                .spawn()
                .unwrap_or_else(|e| panic!("start {REGISTRY_BIN}: {e}"));
            if ready(&mut child, addr) {
                return Self {
                    child,
                    endpoint: format!("http://{addr}"),
                    _dir: dir,
                };
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        panic!(
            "{REGISTRY_BIN} did not answer on loopback after 3 tries; its log:\n{}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Waits for an unauthenticated `GET /v2/` to answer 401; false if the process exits or ten
/// seconds pass.
fn ready(child: &mut Child, addr: SocketAddr) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return false;
        }
        if status_of_v2(addr) == Some(401) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

/// The status code of an unauthenticated `GET /v2/`, or None if nothing answers yet.
fn status_of_v2(addr: SocketAddr) -> Option<u16> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(1)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(
        stream,
        "GET /v2/ HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut head = [0u8; 12];
    stream.read_exact(&mut head).ok()?;
    // "HTTP/1.1 401"
    std::str::from_utf8(&head[9..12]).ok()?.parse().ok()
}
