//! Argo CD's repository credentials on a real kube-apiserver (tests/control-plane), written
//! by the binary as ecr-refresh's ServiceAccount under the manifests' RBAC and admission
//! policy with the component components/argocd, and used as Argo CD's repo-server uses them:
//! real Helm (`HELM`, `.ci/go-tool helm`) logs in to a TLS registry under an ECR host name
//! (tests/common/registry.rs) with only the `url`, `username` and `password` read back from
//! the Secret, and pulls a chart, before and after a token rotation that keeps the Secret's
//! uid. The stale password is refused by the registry: the pull proves the credential.
//! Which Secret's credentials Argo CD would use for a repoURL is its own rule, written out in
//! tests/common/argocd.rs; a repo-creds Secret an earlier build wrote with the bare host
//! (which that rule hands to `<host>.attacker.example`) is rewritten in place to `<host>/`.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use base64::Engine as _;
use common::manifests::copy;
use common::real::{
    RealHarness, get, install_with, installs, namespaces, wait_until_enforced,
    wait_until_enforced_for,
};
use common::registry::{ConnectProxy, TlsRegistry};
use common::*;
use control_plane::ControlPlane;
use serde_json::Value;

const ARGOCD: &str = "argocd";
const NAME: &str = "aws-ecr-token-123456789012-us-east-1";
const REPOSITORY: &str = "aws-ecr-token-123456789012-us-east-1-repository";

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

/// What Argo CD's repo-server logs in with: the registry host of the Application's repoURL,
/// and the username and password of the Secret Argo CD picks for that repoURL.
struct Creds {
    url: String,
    username: String,
    password: String,
    uid: String,
}

/// The Argo CD Secrets as they are, and the credentials Argo CD would use for an Application
/// whose repoURL is `repo_url` (in project `default`).
fn creds(cp: &ControlPlane, repo_url: &str) -> Creds {
    let secrets: Vec<Value> = [NAME, REPOSITORY]
        .iter()
        .filter_map(|name| get(cp, "secret", ARGOCD, name))
        .collect();
    let picked = common::argocd::credentials_for(&secrets, repo_url, "default")
        .unwrap_or_else(|| panic!("Argo CD finds no credentials for {repo_url}"));
    let secret = secrets
        .iter()
        .find(|s| s["metadata"]["name"] == picked.as_str())
        .expect("the Secret picked");
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
    assert_eq!(field("type"), "helm");
    assert_eq!(field("enableOCI"), "true");
    Creds {
        url: REGISTRY.to_owned(),
        username: field("username"),
        password: field("password"),
        uid: uid(secret),
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
    let url = |name: &str| {
        let secret = get(&cp, "secret", ARGOCD, name).expect("an Argo CD Secret");
        String::from_utf8(
            base64::engine::general_purpose::STANDARD
                .decode(secret["data"]["url"].as_str().expect("a url"))
                .expect("base64"),
        )
        .expect("UTF-8")
    };
    assert_eq!(
        url(NAME),
        format!("{REGISTRY}/"),
        "repo-creds: the host and /"
    );
    assert_eq!(url(REPOSITORY), REGISTRY, "the repository: the bare host");
    // An Application with repoURL <host> and chart charts/demo gets the repository Secret's.
    let bare = creds(&cp, REGISTRY);
    assert_eq!(bare.password, "first-token");
    let first = creds(&cp, &format!("{REGISTRY}/charts"));
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
    let second = creds(&cp, &format!("{REGISTRY}/charts"));
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

/// An earlier build wrote the repo-creds Secret with `url: <host>`, which Argo CD's prefix
/// match hands to `<host>.attacker.example/…` too. Under the new RBAC and policy, the next
/// run as the ServiceAccount rewrites it in place to `<host>/` (the policy admits that
/// update, and would refuse the old url on a create), and adds the repository Secret.
#[test]
#[ignore = "needs KUBEBUILDER_ASSETS (bash .ci/test)"]
fn a_repo_creds_secret_an_earlier_build_wrote_with_the_bare_host_is_rewritten_in_place_to_end_at_a_slash()
 {
    let cp = installs();
    namespaces(&cp, &["app", ARGOCD]);
    // As the earlier build wrote it (its data keys, labels and ecr-refresh/ annotations).
    let mut old = common::attacks::argocd_secret_body(NAME, REGISTRY);
    old["metadata"]["namespace"] = serde_json::json!(ARGOCD);
    old["metadata"]["annotations"] = serde_json::json!({
        "ecr-refresh/registries": REGISTRY,
        "ecr-refresh/token-expires-at": humantime::format_rfc3339_seconds(
            std::time::SystemTime::now() + std::time::Duration::from_secs(11 * 3600)
        )
        .to_string(),
    });
    common::real::create(&cp, &[old]);
    let before = get(&cp, "secret", ARGOCD, NAME).expect("the old Secret");
    let secrets = [before.clone()];
    assert_eq!(
        common::argocd::credentials_for(
            &secrets,
            &format!("{REGISTRY}.attacker.example/c"),
            "default"
        )
        .as_deref(),
        Some(NAME),
        "the old url is a prefix of the attacker's host"
    );
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

    let run = h.run(&[
        ("ECR_REFRESH_NAMESPACES", "app"),
        ("ECR_REFRESH_ARGOCD_NAMESPACE", ARGOCD),
        ("ECR_REFRESH_RENEW_BEFORE", "8h"),
    ]);

    run.expect_code(0);
    assert!(h.refused().is_empty(), "nothing refused: {:?}", h.refused());
    let after = get(&cp, "secret", ARGOCD, NAME).expect("the Secret");
    assert_eq!(uid(&after), uid(&before), "rewritten in place");
    let line = run
        .lines
        .iter()
        .find(|l| l["secret"] == NAME && l["argocd"] == true && l.get("outcome").is_some())
        .unwrap_or_else(|| panic!("no line for {NAME}:\n{}", run.stdout));
    assert_eq!(line["outcome"], "updated", "{line}");
    assert_eq!(line["due"], "entries-changed", "{line}");
    let repository = get(&cp, "secret", ARGOCD, REPOSITORY).expect("the repository Secret");
    let secrets = [after, repository];
    let url = |s: &Value| {
        String::from_utf8(
            base64::engine::general_purpose::STANDARD
                .decode(s["data"]["url"].as_str().expect("a url"))
                .expect("base64"),
        )
        .expect("UTF-8")
    };
    assert_eq!(url(&secrets[0]), format!("{REGISTRY}/"));
    assert_eq!(url(&secrets[1]), REGISTRY);
    for (repo_url, expected) in [
        (REGISTRY.to_owned(), Some(REPOSITORY)),
        (format!("{REGISTRY}/charts"), Some(NAME)),
        (format!("{REGISTRY}.attacker.example/c"), None),
        (format!("{REGISTRY}:444/c"), None),
    ] {
        assert_eq!(
            common::argocd::credentials_for(&secrets, &repo_url, "default").as_deref(),
            expected,
            "{repo_url}"
        );
    }
}

/// A user's overlay with `namespace: platform` moves every namespaced object of the install,
/// a Role in namespace argocd among them: the Argo CD rights must stay where Argo CD is,
/// and the run as the moved ServiceAccount writes the Argo CD Secrets with nothing refused.
/// And those rights, which name the Secrets in every namespace, write nothing outside the
/// Argo CD namespace: the Argo CD policy refuses it.
#[test]
#[ignore = "needs KUBEBUILDER_ASSETS (bash .ci/test)"]
fn an_overlays_namespace_leaves_the_argo_cd_rights_with_argo_cd_and_the_run_writes_its_secrets() {
    let cp = installs();
    namespaces(&cp, &["app", ARGOCD]);
    let manifests = copy();
    let root = manifests.path().join("manifests");
    let rendered = install_with(
        &cp,
        &cp.assets().join("kubectl"),
        &root,
        "",
        "namespace: platform",
        Some("argocd"),
    );
    let who = ("platform", "ecr-refresh");
    assert!(
        rendered.iter().any(|d| d["kind"] == "ServiceAccount"
            && d["metadata"]["namespace"] == who.0
            && d["metadata"]["name"] == who.1),
        "the overlay moves the ServiceAccount"
    );
    wait_until_enforced_for(&cp, "app", who, "aws-ecr-token");
    let h = RealHarness::as_account(&cp, who);

    let run = h.run(&[
        ("ECR_REFRESH_NAMESPACES", "app"),
        ("ECR_REFRESH_ARGOCD_NAMESPACE", ARGOCD),
    ]);

    assert_eq!(h.refused(), Vec::<String>::new(), "{}", run.stdout);
    run.expect_code(0);
    for name in [NAME, REPOSITORY] {
        let line = run
            .lines
            .iter()
            .find(|l| l["secret"] == name && l["argocd"] == true && l.get("outcome").is_some())
            .unwrap_or_else(|| panic!("no line for {name}:\n{}", run.stdout));
        assert_eq!(line["outcome"], "created", "{line}");
        assert!(get(&cp, "secret", ARGOCD, name).is_some(), "{name}");
    }

    // The same rights, outside the Argo CD namespace: refused by the Argo CD policy.
    let token = cp.service_account_token(who.0, who.1);
    let mut body = common::attacks::argocd_secret_body(NAME, &format!("{REGISTRY}/"));
    body["metadata"]["namespace"] = serde_json::json!("app");
    let attack = || {
        common::real::send(
            &cp,
            &token,
            "POST",
            "/api/v1/namespaces/app/secrets",
            "application/json",
            &body,
        )
    };
    let (status, answer) = attack();
    assert_eq!(status, 403, "{answer}");
    assert!(common::real::denied_by_policy(&answer), "{answer}");
    // The main policy refuses it too (not its name); without it, the Argo CD policy alone.
    common::real::admin(
        &cp,
        &["delete", "validatingadmissionpolicybinding", "ecr-refresh"],
        "",
    );
    common::real::eventually("the Argo CD policy alone refuses it", || {
        let (status, answer) = attack();
        let message = common::real::message(&answer);
        if status == 403
            && message.contains("ValidatingAdmissionPolicy 'ecr-refresh-argocd'")
            && message
                .contains("may only write its Argo CD Secrets in namespace argocd, not in app")
        {
            Ok(())
        } else {
            assert_ne!(
                status, 201,
                "created outside the Argo CD namespace: {answer}"
            );
            Err(format!("{status} {answer}"))
        }
    });
}
