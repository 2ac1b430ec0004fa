//! Argo CD's repository credentials on a real kube-apiserver (tests/control-plane), written
//! by the binary as ecr-refresh's ServiceAccount under the manifests' RBAC and admission
//! policy with the component components/argocd, and used as Argo CD's repo-server uses them:
//! real Helm (`HELM`, `.ci/go-tool helm`) logs in to a TLS registry under an ECR host name
//! (tests/common/registry.rs) with only the `url`, `username` and `password` read back from
//! the Secret, and pulls a chart, before and after a token rotation that keeps the Secret's
//! uid. The stale password is refused by the registry: the pull proves the credential.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use base64::Engine as _;
use common::manifests::copy;
use common::real::{RealHarness, get, install_with, installs, namespaces, wait_until_enforced};
use common::registry::{ConnectProxy, TlsRegistry};
use common::*;
use control_plane::ControlPlane;
use serde_json::Value;

const ARGOCD: &str = "argocd";
const NAME: &str = "aws-ecr-token-123456789012-us-east-1";

/// Helm with its own configuration, cache and registry logins, reaching the registry under
/// its ECR host name through `proxy`, trusting its certificate.
struct Helm {
    binary: PathBuf,
    home: tempfile::TempDir,
    proxy: String,
    certificate: PathBuf,
}

impl Helm {
    fn new(proxy: &ConnectProxy, registry: &TlsRegistry) -> Self {
        Self {
            binary: crate::chart::helm_binary(),
            home: tempfile::tempdir().expect("a temporary directory"),
            proxy: proxy.url.clone(),
            certificate: registry.certificate.clone(),
        }
    }

    fn command(&self, args: &[&str]) -> Command {
        let home = self.home.path();
        let mut command = Command::new(&self.binary);
        command
            .args(args)
            .env_clear()
            .env("HOME", home)
            .env("HELM_CACHE_HOME", home.join("cache"))
            .env("HELM_CONFIG_HOME", home.join("config"))
            .env("HELM_DATA_HOME", home.join("data"))
            .env("HELM_REGISTRY_CONFIG", home.join("registry.json"))
            .env("HTTPS_PROXY", &self.proxy)
            .env("SSL_CERT_FILE", &self.certificate)
            .current_dir(home);
        command
    }

    fn run(&self, args: &[&str], stdin: &str) -> Output {
        use std::io::Write as _;
        let mut child = self
            .command(args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("helm runs");
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(stdin.as_bytes())
            .expect("write helm's stdin");
        child.wait_with_output().expect("helm ends")
    }

    fn ok(&self, args: &[&str], stdin: &str) -> String {
        let out = self.run(args, stdin);
        assert!(
            out.status.success(),
            "helm {args:?}: {}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// `helm registry login` as Argo CD's repo-server does for a Helm-OCI repository: the
    /// Secret's url as the host, its username and password.
    fn login(&self, creds: &Creds) -> Output {
        self.run(
            &[
                "registry",
                "login",
                &creds.url,
                "--username",
                &creds.username,
                "--password-stdin",
            ],
            &creds.password,
        )
    }

    /// `helm pull oci://<url>/charts/demo`, into `dir`.
    fn pull(&self, creds: &Creds, dir: &Path) -> Output {
        self.run(
            &[
                "pull",
                &format!("oci://{}/charts/demo", creds.url),
                "--version",
                "0.1.0",
                "--destination",
                dir.to_str().expect("a UTF-8 path"),
            ],
            "",
        )
    }
}

/// What Argo CD reads from a repo-creds Secret to log in.
struct Creds {
    url: String,
    username: String,
    password: String,
    uid: String,
}

fn creds(cp: &ControlPlane) -> Creds {
    let secret = get(cp, "secret", ARGOCD, NAME).expect("the Argo CD Secret");
    let field = |key: &str| -> String {
        let b64 = secret["data"][key]
            .as_str()
            .unwrap_or_else(|| panic!("no {key} in {secret}"));
        String::from_utf8(
            base64::engine::general_purpose::STANDARD
                .decode(b64)
                .expect("base64"),
        )
        .expect("UTF-8")
    };
    assert_eq!(
        secret["metadata"]["labels"]["argocd.argoproj.io/secret-type"],
        "repo-creds"
    );
    assert_eq!(field("type"), "helm");
    assert_eq!(field("enableOCI"), "true");
    Creds {
        url: field("url"),
        username: field("username"),
        password: field("password"),
        uid: uid(&secret),
    }
}

/// A chart of its own, packaged, pushed to the registry with `password` as a publisher would.
fn push_chart(helm: &Helm, password: &str) {
    let src = helm.home.path().join("demo");
    std::fs::create_dir_all(src.join("templates")).expect("a chart directory");
    write(
        &src.join("Chart.yaml"),
        "apiVersion: v2\nname: demo\nversion: 0.1.0\n",
    );
    write(
        &src.join("templates/configmap.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: demo}\n",
    );
    helm.ok(
        &[
            "package",
            src.to_str().unwrap(),
            "--destination",
            helm.home.path().to_str().unwrap(),
        ],
        "",
    );
    let publisher = Creds {
        url: REGISTRY.to_owned(),
        username: "AWS".to_owned(),
        password: password.to_owned(),
        uid: String::new(),
    };
    let login = helm.login(&publisher);
    assert!(
        login.status.success(),
        "{}",
        String::from_utf8_lossy(&login.stderr)
    );
    helm.ok(
        &[
            "push",
            helm.home.path().join("demo-0.1.0.tgz").to_str().unwrap(),
            &format!("oci://{REGISTRY}/charts"),
        ],
        "",
    );
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
#[ignore = "needs KUBEBUILDER_ASSETS, helm, docker-registry and openssl (bash .ci/test)"]
fn helm_pulls_a_chart_with_the_argo_cd_secrets_credentials_before_and_after_a_rotation_and_the_stale_password_is_refused()
 {
    let cp = installs();
    namespaces(&cp, &["app", ARGOCD]);
    let manifests = copy();
    let root = manifests.path().join("manifests");
    install_with(
        &cp,
        &cp.assets().join("kubectl"),
        &root,
        "",
        "",
        Some("argocd"),
    );
    wait_until_enforced(&cp, ARGOCD);
    let h = RealHarness::new(&cp);
    let env = [
        ("ECR_REFRESH_NAMESPACES", "app"),
        ("ECR_REFRESH_ARGOCD_NAMESPACE", ARGOCD),
    ];
    h.ecr.set_password(REGION, "first-token");
    let registry = TlsRegistry::start(REGISTRY, "AWS", "first-token");
    let proxy = ConnectProxy::start(registry.addr);
    let publisher = Helm::new(&proxy, &registry);
    push_chart(&publisher, "first-token");

    // The first run, as the ServiceAccount under the RBAC and the policy: created.
    let run = h.run(&env);
    run.expect_code(0);
    let first = creds(&cp);
    assert_eq!(first.url, REGISTRY, "helm: the bare host");
    assert_eq!(first.username, "AWS");
    assert_eq!(first.password, "first-token");
    let argo = Helm::new(&proxy, &registry);
    let login = argo.login(&first);
    assert!(
        login.status.success(),
        "login with the Secret's credentials: {}",
        stderr(&login)
    );
    let pulled = tempfile::tempdir().unwrap();
    let pull = argo.pull(&first, pulled.path());
    assert!(pull.status.success(), "pull: {}", stderr(&pull));
    assert!(pulled.path().join("demo-0.1.0.tgz").is_file());

    // ECR rotates: the registry takes only the new token, and Helm's stored login, the old
    // one, is refused. The registry checks the password.
    h.ecr.set_password(REGION, "second-token");
    registry.set_password("second-token");
    let stale_dir = tempfile::tempdir().unwrap();
    let stale = argo.pull(&first, stale_dir.path());
    assert!(
        !stale.status.success(),
        "a pull with the stale password must fail"
    );
    assert!(
        stderr(&stale).contains("401") || stderr(&stale).to_lowercase().contains("unauthorized"),
        "{}",
        stderr(&stale)
    );

    // The next run rewrites the Secret in place; its credentials pull again.
    let run = h.run(&env);
    run.expect_code(0);
    let second = creds(&cp);
    assert_eq!(second.uid, first.uid, "updated in place");
    assert_eq!(second.password, "second-token");
    let lines: Vec<&Value> = run
        .lines
        .iter()
        .filter(|l| l["secret"] == NAME && l["argocd"] == true)
        .collect();
    assert_eq!(lines.len(), 1, "{}", run.stdout);
    assert_eq!(lines[0]["outcome"], "updated");
    assert_eq!(lines[0]["uid_before"], first.uid.as_str());
    assert_eq!(lines[0]["uid_after"], first.uid.as_str());
    let login = argo.login(&second);
    assert!(
        login.status.success(),
        "login after the rotation: {}",
        stderr(&login)
    );
    let again = tempfile::tempdir().unwrap();
    let pull = argo.pull(&second, again.path());
    assert!(
        pull.status.success(),
        "pull after the rotation: {}",
        stderr(&pull)
    );
    assert!(again.path().join("demo-0.1.0.tgz").is_file());
    // And the old password, tried afresh, is still refused at login.
    let fresh = Helm::new(&proxy, &registry);
    assert!(
        !fresh.login(&first).status.success(),
        "the stale password logs in"
    );
}
