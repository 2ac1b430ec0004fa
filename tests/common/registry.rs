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

/// A real registry serving TLS under an ECR host name (a self-signed certificate made with
/// `openssl`), reached through [`ConnectProxy`]: the binary sends `https://<ECR host>/v2/...`
/// as it would in a cluster, and trusts the certificate through SSL_CERT_FILE.
pub struct TlsRegistry {
    child: Child,
    pub addr: SocketAddr,
    /// The certificate, for SSL_CERT_FILE.
    pub certificate: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

impl TlsRegistry {
    pub fn start(host: &str, user: &str, password: &str) -> Self {
        assert!(
            Path::new(REGISTRY_BIN).exists(),
            "{REGISTRY_BIN} is missing: the login tests need a real registry; install it with \
             `apt-get install docker-registry` (.ci/run does)"
        );
        let dir = tempfile::tempdir().expect("a temporary directory");
        let (key, certificate) = (dir.path().join("key.pem"), dir.path().join("cert.pem"));
        let made = Command::new("openssl")
            .args([
                "req",
                "-x509",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:P-256",
            ])
            .args(["-nodes", "-days", "1", "-subj"])
            .arg(format!("/CN={host}"))
            .arg("-addext")
            .arg(format!("subjectAltName=DNS:{host}"))
            // Its own trust anchor, but no CA: webpki refuses a CA certificate as a server's.
            .args(["-addext", "basicConstraints=critical,CA:FALSE"])
            .args(["-addext", "extendedKeyUsage=serverAuth"])
            .arg("-keyout")
            .arg(&key)
            .arg("-out")
            .arg(&certificate)
            .output()
            .unwrap_or_else(|e| {
                panic!("openssl is needed to make the registry's certificate: {e}")
            });
        assert!(
            made.status.success(),
            "openssl: {}",
            String::from_utf8_lossy(&made.stderr)
        );
        let htpasswd = dir.path().join("htpasswd");
        let hash = bcrypt::hash(password, 4).expect("bcrypt a password");
        write(&htpasswd, &format!("{user}:{hash}\n"));
        let config = dir.path().join("config.yml");
        let log = dir.path().join("registry.log");
        for _ in 0..3 {
            let addr = free_port();
            write(
                &config,
                &format!(
                    "version: 0.1\n\
                     log:\n  level: warn\n\
                     storage:\n  filesystem:\n    rootdirectory: {root}\n\
                     http:\n  addr: {addr}\n  tls:\n    certificate: {cert}\n    key: {key}\n\
                     auth:\n  htpasswd:\n    realm: test\n    path: {htpasswd}\n",
                    root = dir.path().join("storage").display(),
                    cert = certificate.display(),
                    key = key.display(),
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
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline && matches!(child.try_wait(), Ok(None)) {
                if TcpStream::connect_timeout(&addr, Duration::from_secs(1)).is_ok() {
                    return Self {
                        child,
                        addr,
                        certificate,
                        _dir: dir,
                    };
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        panic!(
            "{REGISTRY_BIN} (TLS) did not listen after 3 tries; its log:\n{}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
    }
}

impl Drop for TlsRegistry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An HTTP CONNECT proxy on loopback that tunnels every CONNECT to one address, as a
/// corporate proxy tunnels to the registry: the binary reaches it through HTTPS_PROXY.
pub struct ConnectProxy {
    pub url: String,
    /// The `host:port` of each CONNECT, in order.
    pub targets: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl ConnectProxy {
    pub fn start(to: SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
        let url = format!("http://{}", listener.local_addr().expect("an address"));
        let targets = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let seen = std::sync::Arc::clone(&targets);
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                let seen = std::sync::Arc::clone(&seen);
                std::thread::spawn(move || tunnel(client, to, &seen));
            }
        });
        Self { url, targets }
    }
}

fn tunnel(mut client: TcpStream, to: SocketAddr, seen: &std::sync::Mutex<Vec<String>>) {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match client.read(&mut byte) {
            Ok(1) => head.push(byte[0]),
            _ => return,
        }
    }
    let head = String::from_utf8_lossy(&head).into_owned();
    let target = head
        .split_whitespace()
        .nth(1)
        .unwrap_or_default()
        .to_owned();
    seen.lock().expect("the proxy's log").push(target);
    let Ok(mut server) = TcpStream::connect(to) else {
        let _ = client.write_all(b"HTTP/1.1 502 Bad Gateway\r\n\r\n");
        return;
    };
    if client
        .write_all(b"HTTP/1.1 200 Connection Established\r\n\r\n")
        .is_err()
    {
        return;
    }
    let (mut client_read, mut server_write) = (
        client.try_clone().expect("clone a socket"),
        server.try_clone().expect("clone a socket"),
    );
    let up = std::thread::spawn(move || {
        let _ = std::io::copy(&mut client_read, &mut server_write);
        let _ = server_write.shutdown(std::net::Shutdown::Write);
    });
    let _ = std::io::copy(&mut server, &mut client);
    let _ = client.shutdown(std::net::Shutdown::Write);
    let _ = up.join();
}
