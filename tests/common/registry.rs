//! A real registry on loopback: Debian's `docker-registry` (the CNCF distribution registry)
//! with one htpasswd user, standing in for an ECR registry: plain HTTP for the login-check
//! and authfile tests, TLS under an ECR host name for the login tests, and TLS on
//! 127.0.0.1 for the node of tests/node/kubelet_pull.rs, which pushes to it with skopeo and
//! rotates its password.

use std::fs;
use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub(crate) const REGISTRY_BIN: &str = "/usr/bin/docker-registry";

/// A loopback address nothing listens on once this returns.
pub(crate) fn free_port() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
    listener.local_addr().expect("a bound address")
}

/// A `docker-registry serve` process on loopback, its state in a temporary directory; killed
/// on drop.
struct Served {
    child: Child,
    addr: SocketAddr,
    htpasswd: PathBuf,
    user: String,
    dir: tempfile::TempDir,
}

impl Served {
    /// Starts the registry with one user, once `ready` says it answers: serving TLS with a
    /// self-signed certificate for `tls` (its common name and subjectAltName), or plain
    /// HTTP (None).
    fn start(
        user: &str,
        password: &str,
        tls: Option<(&str, &str)>,
        ready: fn(&mut Child, SocketAddr) -> bool,
    ) -> Self {
        assert!(
            Path::new(REGISTRY_BIN).exists(),
            "{REGISTRY_BIN} is missing: these tests need a real registry; install it with \
             `apt-get install docker-registry` (.ci/test does)"
        );
        let dir = tempfile::tempdir().expect("a temporary directory");
        let tls = tls.map(|(common_name, alt_name)| self_signed(dir.path(), common_name, alt_name));
        let htpasswd = dir.path().join("htpasswd");
        write_htpasswd(&htpasswd, user, password);
        let config = dir.path().join("config.yml");
        let log = dir.path().join("registry.log");
        let tls_lines = tls
            .as_ref()
            .map(|(key, cert)| {
                format!(
                    "  tls:\n    certificate: {}\n    key: {}\n",
                    cert.display(),
                    key.display()
                )
            })
            .unwrap_or_default();
        // Another process can take the free port before the registry binds it: try again.
        for _ in 0..3 {
            let addr = free_port();
            fs::write(
                &config,
                format!(
                    "version: 0.1\n\
                     log:\n  level: info\n\
                     storage:\n  filesystem:\n    rootdirectory: {root}\n\
                     http:\n  addr: {addr}\n{tls_lines}\
                     auth:\n  htpasswd:\n    realm: test\n    path: {htpasswd}\n",
                    root = dir.path().join("storage").display(),
                    htpasswd = htpasswd.display(),
                ),
            )
            .expect("write the registry's config");
            let log_file = fs::File::create(&log).expect("create the registry log");
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
                    addr,
                    htpasswd,
                    user: user.to_owned(),
                    dir,
                };
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        panic!(
            "{REGISTRY_BIN} did not answer on loopback after 3 tries; its log:\n{}",
            fs::read_to_string(&log).unwrap_or_default()
        );
    }

    /// From now on the registry accepts `password` alone. The file is replaced whole
    /// (rename), so the registry, which rereads it when its modification time changes
    /// (registry/auth/htpasswd/access.go), never reads half of it.
    fn set_password(&self, password: &str) {
        write_htpasswd(&self.htpasswd, &self.user, password);
    }
}

/// `user` with `password`, alone in the htpasswd file at `path`, replaced whole.
fn write_htpasswd(path: &Path, user: &str, password: &str) {
    // The registry reads bcrypt entries only; cost 4 keeps each check in milliseconds.
    let hash = bcrypt::hash(password, 4).expect("bcrypt a password");
    let next = path.with_extension("next");
    fs::write(&next, format!("{user}:{hash}\n")).expect("write htpasswd");
    fs::rename(&next, path).expect("replace htpasswd");
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A plain-HTTP registry with one htpasswd user.
pub(crate) struct Registry {
    _served: Served,
    /// `http://127.0.0.1:PORT`, as ECR's proxyEndpoint would name it.
    pub endpoint: String,
}

impl Registry {
    pub(crate) fn start(user: &str, password: &str) -> Self {
        let served = Served::start(user, password, None, answers_401);
        Self {
            endpoint: format!("http://{}", served.addr),
            _served: served,
        }
    }
}

/// A registry serving TLS with a self-signed certificate (`openssl`): under an ECR host name,
/// reached through [`ConnectProxy`], so the binary sends `https://<ECR host>/v2/...` as it
/// would in a cluster and trusts the certificate through SSL_CERT_FILE; or on 127.0.0.1,
/// for containerd and skopeo.
pub(crate) struct TlsRegistry {
    served: Served,
    pub addr: SocketAddr,
    /// The certificate, for SSL_CERT_FILE or containerd's hosts.toml.
    pub certificate: PathBuf,
    /// A directory with the certificate as `ca.crt`, for skopeo's `--dest-cert-dir`.
    pub cert_dir: PathBuf,
}

impl TlsRegistry {
    /// Its certificate names `host` (a DNS name).
    pub(crate) fn start(host: &str, user: &str, password: &str) -> Self {
        Self::with_name(host, &format!("DNS:{host}"), user, password)
    }

    /// Its certificate names 127.0.0.1 (an IP SAN), as containerd reaches it.
    pub(crate) fn on_loopback(user: &str, password: &str) -> Self {
        Self::with_name("127.0.0.1", "IP:127.0.0.1", user, password)
    }

    fn with_name(common_name: &str, alt_name: &str, user: &str, password: &str) -> Self {
        let served = Served::start(user, password, Some((common_name, alt_name)), listens);
        let certificate = served.dir.path().join("cert.pem");
        let cert_dir = served.dir.path().join("certs");
        fs::create_dir(&cert_dir).expect("create the certificate directory");
        fs::copy(&certificate, cert_dir.join("ca.crt")).expect("copy the certificate");
        Self {
            addr: served.addr,
            certificate,
            cert_dir,
            served,
        }
    }

    /// Every request the registry answered so far, from its own access log (one Apache
    /// combined-format line per request, 401s included): (method, path, status, user agent).
    pub(crate) fn requests(&self) -> Vec<Request> {
        let log =
            fs::read_to_string(self.served.dir.path().join("registry.log")).unwrap_or_default();
        log.lines().filter_map(Request::parse).collect()
    }

    /// `127.0.0.1:PORT`.
    pub(crate) fn host(&self) -> String {
        self.addr.to_string()
    }

    /// From now on the registry accepts `password` alone.
    pub(crate) fn set_password(&self, password: &str) {
        self.served.set_password(password);
    }

    /// Pushes the OCI layout at `layout` (tag `tag`) as `repository:tag` with skopeo, with
    /// `password`.
    pub(crate) fn push(&self, layout: &Path, tag: &str, repository: &str, password: &str) {
        let out = Command::new("skopeo")
            .args(["--insecure-policy", "copy", "--quiet"])
            .arg("--dest-cert-dir")
            .arg(&self.cert_dir)
            .arg("--dest-creds")
            .arg(format!("{}:{password}", self.served.user))
            .arg(format!("oci:{}:{tag}", layout.display()))
            .arg(format!("docker://{}/{repository}:{tag}", self.host()))
            .env("HOME", layout)
            .output()
            .unwrap_or_else(|e| {
                panic!("skopeo pushes to the registry: {e}; install it with `apt-get install skopeo` (.ci/test does)")
            });
        assert!(
            out.status.success(),
            "skopeo copy to the registry: {}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// One request in the registry's access log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Request {
    pub method: String,
    pub path: String,
    pub status: u16,
    pub user_agent: String,
}

impl Request {
    /// A combined-format line: `127.0.0.1 - - [date] "GET /v2/ HTTP/1.1" 401 87 "" "containerd/2.1"`.
    fn parse(line: &str) -> Option<Self> {
        let (_, rest) = line.split_once("] \"")?;
        let (request, rest) = rest.split_once('"')?;
        let mut parts = request.split(' ');
        let method = parts.next()?.to_owned();
        let path = parts.next()?.to_owned();
        parts.next()?.strip_prefix("HTTP/")?;
        let status = rest.split_whitespace().next()?.parse().ok()?;
        let user_agent = rest.rsplit('"').nth(1).unwrap_or_default().to_owned();
        Some(Self {
            method,
            path,
            status,
            user_agent,
        })
    }
}

/// A self-signed server certificate (no CA: webpki refuses a CA certificate as a server's)
/// and its key, in `dir`: (key, certificate).
fn self_signed(dir: &Path, common_name: &str, alt_name: &str) -> (PathBuf, PathBuf) {
    let (key, certificate) = (dir.join("key.pem"), dir.join("cert.pem"));
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
        .arg(format!("/CN={common_name}"))
        .arg("-addext")
        .arg(format!("subjectAltName={alt_name}"))
        .args(["-addext", "basicConstraints=critical,CA:FALSE"])
        .args(["-addext", "extendedKeyUsage=serverAuth"])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&certificate)
        .output()
        .unwrap_or_else(|e| panic!("openssl is needed to make the registry's certificate: {e}"));
    assert!(
        made.status.success(),
        "openssl: {}",
        String::from_utf8_lossy(&made.stderr)
    );
    (key, certificate)
}

/// Until the process exits or ten seconds pass, whether `probe` succeeds.
fn until(child: &mut Child, addr: SocketAddr, probe: impl Fn(SocketAddr) -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return false;
        }
        if probe(addr) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

/// An unauthenticated `GET /v2/` answers 401.
fn answers_401(child: &mut Child, addr: SocketAddr) -> bool {
    until(child, addr, |addr| status_of_v2(addr) == Some(401))
}

/// It accepts connections (TLS: no plain request to read a status from).
fn listens(child: &mut Child, addr: SocketAddr) -> bool {
    until(child, addr, |addr| {
        TcpStream::connect_timeout(&addr, Duration::from_secs(1)).is_ok()
    })
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

/// An HTTP CONNECT proxy on loopback that tunnels every CONNECT to one address, as a
/// corporate proxy tunnels to the registry: the binary reaches it through HTTPS_PROXY.
pub(crate) struct ConnectProxy {
    pub url: String,
    /// The `host:port` of each CONNECT, in order.
    pub targets: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl ConnectProxy {
    pub(crate) fn start(to: SocketAddr) -> Self {
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
