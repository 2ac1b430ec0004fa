//! The registry the node pulls from: Debian's `docker-registry` (the CNCF distribution
//! registry) with TLS and one htpasswd user, on loopback. Its password can be rotated: the
//! registry rereads the htpasswd file when its modification time changes
//! (registry/auth/htpasswd/access.go), so from then on only the new password is accepted.

use std::fs;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub const REGISTRY_BIN: &str = "/usr/bin/docker-registry";

pub struct Registry {
    child: Child,
    pub addr: SocketAddr,
    /// The self-signed certificate (IP SAN 127.0.0.1), which containerd and skopeo trust.
    pub certificate: PathBuf,
    /// A directory with the certificate as `ca.crt`, for skopeo's `--dest-cert-dir`.
    pub cert_dir: PathBuf,
    htpasswd: PathBuf,
    user: String,
    _dir: tempfile::TempDir,
}

impl Registry {
    pub fn start(user: &str, password: &str) -> Self {
        for (path, package) in [
            (REGISTRY_BIN, "docker-registry"),
            ("/usr/bin/skopeo", "skopeo"),
        ] {
            assert!(
                Path::new(path).exists(),
                "{path} is missing: tests/kubelet_pull.rs needs it; install it with \
                 `apt-get install {package}` (.ci/run does)"
            );
        }
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
            .args(["-nodes", "-days", "1", "-subj", "/CN=127.0.0.1"])
            // containerd reaches it as 127.0.0.1:PORT (hosts.toml), so that is the name checked.
            .args(["-addext", "subjectAltName=IP:127.0.0.1"])
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
        let cert_dir = dir.path().join("certs");
        fs::create_dir(&cert_dir).expect("create the certificate directory");
        fs::copy(&certificate, cert_dir.join("ca.crt")).expect("copy the certificate");
        let htpasswd = dir.path().join("htpasswd");
        let config = dir.path().join("config.yml");
        let log = dir.path().join("registry.log");
        let mut registry = None;
        for _ in 0..3 {
            let addr = TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .expect("a free loopback port");
            fs::write(
                &config,
                format!(
                    "version: 0.1\n\
                     log:\n  level: info\n\
                     storage:\n  filesystem:\n    rootdirectory: {root}\n\
                     http:\n  addr: {addr}\n  tls:\n    certificate: {cert}\n    key: {key}\n\
                     auth:\n  htpasswd:\n    realm: test\n    path: {htpasswd}\n",
                    root = dir.path().join("storage").display(),
                    cert = certificate.display(),
                    key = key.display(),
                    htpasswd = htpasswd.display(),
                ),
            )
            .expect("write the registry's config");
            let mut this = Self {
                child: spawn(&config, &log),
                addr,
                certificate: certificate.clone(),
                cert_dir: cert_dir.clone(),
                htpasswd: htpasswd.clone(),
                user: user.to_owned(),
                _dir: tempfile::tempdir().expect("a temporary directory"),
            };
            this.set_password(password);
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline && matches!(this.child.try_wait(), Ok(None)) {
                if TcpStream::connect_timeout(&addr, Duration::from_secs(1)).is_ok() {
                    registry = Some(this);
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            if registry.is_some() {
                break;
            }
        }
        let Some(mut registry) = registry else {
            panic!(
                "{REGISTRY_BIN} (TLS) did not listen after 3 tries; its log:\n{}",
                fs::read_to_string(&log).unwrap_or_default()
            );
        };
        registry._dir = dir;
        registry
    }

    /// `127.0.0.1:PORT`.
    pub fn host(&self) -> String {
        self.addr.to_string()
    }

    /// From now on the registry accepts `password` alone. The file is replaced whole
    /// (rename), and its modification time moved on, so the registry rereads it.
    pub fn set_password(&self, password: &str) {
        // The registry reads bcrypt entries only; cost 4 keeps each check in milliseconds.
        let hash = bcrypt::hash(password, 4).expect("bcrypt a password");
        let next = self.htpasswd.with_extension("next");
        fs::write(&next, format!("{}:{hash}\n", self.user)).expect("write htpasswd");
        fs::rename(&next, &self.htpasswd).expect("replace htpasswd");
    }

    /// Pushes the OCI layout at `layout` (tag `tag`) as `repository:tag`, with `password`.
    pub fn push(&self, layout: &Path, tag: &str, repository: &str, password: &str) {
        let out = Command::new("skopeo")
            .args(["--insecure-policy", "copy", "--quiet"])
            .arg("--dest-cert-dir")
            .arg(&self.cert_dir)
            .arg("--dest-creds")
            .arg(format!("{}:{password}", self.user))
            .arg(format!("oci:{}:{tag}", layout.display()))
            .arg(format!("docker://{}/{repository}:{tag}", self.host()))
            .env("HOME", layout)
            .output()
            .expect("skopeo runs");
        assert!(
            out.status.success(),
            "skopeo copy to the registry: {}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

fn spawn(config: &Path, log: &Path) -> Child {
    let log_file = fs::File::create(log).expect("create the registry log");
    Command::new(REGISTRY_BIN)
        .arg("serve")
        .arg(config)
        .stdin(Stdio::null())
        .stdout(log_file.try_clone().expect("clone the log handle"))
        .stderr(log_file)
        .spawn()
        .unwrap_or_else(|e| panic!("start {REGISTRY_BIN}: {e}"))
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
