//! A real registry on loopback: Debian's `docker-registry` (the CNCF distribution registry) with
//! one htpasswd user, standing in for an ECR registry in login-check and authfile tests.

use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::write;

pub const REGISTRY_BIN: &str = "/usr/bin/docker-registry";

/// A loopback address nothing listens on once this returns.
pub fn free_port() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
    listener.local_addr().expect("a bound address")
}

/// A `docker-registry serve` process with one htpasswd user, killed on drop.
pub struct Registry {
    child: Child,
    /// `http://127.0.0.1:PORT`, as ECR's proxyEndpoint would name it.
    pub endpoint: String,
    _dir: tempfile::TempDir,
}

impl Registry {
    pub fn start(user: &str, password: &str) -> Self {
        assert!(
            Path::new(REGISTRY_BIN).exists(),
            "{REGISTRY_BIN} is missing: the login-check tests need a real registry; install it \
             with `apt-get install docker-registry` (.ci/test does)"
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
            // Its whole configuration is the file: REGISTRY_* variables would override any
            // key of it, so none reach it.
            let mut child = Command::new(REGISTRY_BIN)
                .env_clear()
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
