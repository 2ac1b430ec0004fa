//! kubectl, pointed at the fake through a generated kubeconfig, reads and writes as it
//! would against a real cluster: `get`, and the common script's create|apply loop in
//! its client-side and server-side forms.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use fake_cluster::{FakeCluster, Resource};
use serde_json::Value;

const HOST: &str = "123456789012.dkr.ecr.us-east-1.amazonaws.com";

fn kubectl_available() -> bool {
    Command::new("kubectl")
        .arg("version")
        .arg("--client")
        .output()
        .is_ok_and(|o| o.status.success())
}

fn kubectl(kubeconfig: &Path, args: &[&str], stdin: Option<&[u8]>) -> Output {
    // kubectl caches discovery under ~/.kube/cache unless told otherwise: beside the
    // kubeconfig, so no test writes outside its own directory.
    let cache = kubeconfig
        .parent()
        .expect("a kubeconfig in a directory")
        .join("kube-cache");
    let mut child = Command::new("kubectl")
        .args(args)
        .env("KUBECONFIG", kubeconfig)
        .env("KUBECACHEDIR", cache)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kubectl starts");
    let mut input = child.stdin.take().expect("piped stdin");
    if let Some(bytes) = stdin {
        input.write_all(bytes).expect("write kubectl stdin");
    }
    drop(input);
    let out = child.wait_with_output().expect("kubectl finishes");
    assert!(
        out.status.success(),
        "kubectl {args:?} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// `kubectl create secret docker-registry ... --dry-run=client -o yaml | kubectl apply <apply_args> -f -`
fn create_and_apply(kubeconfig: &Path, ns: &str, password: &str, apply_args: &[&str]) -> String {
    let server = format!("--docker-server=https://{HOST}");
    let password = format!("--docker-password={password}");
    let manifest = kubectl(
        kubeconfig,
        &[
            "create",
            "secret",
            "docker-registry",
            "aws-ecr-token",
            "-n",
            ns,
            &server,
            "--docker-username=AWS",
            &password,
            "--dry-run=client",
            "-o",
            "yaml",
        ],
        None,
    )
    .stdout;
    let mut args = vec!["apply"];
    args.extend_from_slice(apply_args);
    args.extend_from_slice(&["--validate=false", "-f", "-"]);
    String::from_utf8(kubectl(kubeconfig, &args, Some(&manifest)).stdout).expect("utf-8")
}

fn stored_password(cluster: &FakeCluster, ns: &str) -> String {
    let secret = cluster
        .get(Resource::Secrets, ns, "aws-ecr-token")
        .expect("the secret exists");
    assert_eq!(secret["type"], "kubernetes.io/dockerconfigjson");
    let encoded = secret["data"][".dockerconfigjson"].as_str().expect("data");
    let config: Value =
        serde_json::from_slice(&B64.decode(encoded).expect("base64")).expect("json");
    config["auths"][format!("https://{HOST}")]["password"]
        .as_str()
        .expect("password under the https:// key")
        .to_owned()
}

#[test]
#[ignore = "needs kubectl (bash .ci/test)"]
fn kubectl_gets_and_applies_against_the_fake() {
    assert!(
        kubectl_available(),
        "kubectl is needed for this test: put it on PATH (.ci/test puts the one .ci/kube-binaries builds there)"
    );
    let cluster = FakeCluster::start();
    cluster.add_namespace("team-a", &[("env", "prod")]);
    cluster.add_namespace("team-b", &[]);
    let dir = std::env::temp_dir().join(format!("fake-cluster-kubectl-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let kubeconfig = cluster.write_kubeconfig(&dir);

    let listed =
        String::from_utf8(kubectl(&kubeconfig, &["get", "ns"], None).stdout).expect("utf-8");
    assert!(
        listed.contains("team-a") && listed.contains("team-b"),
        "{listed}"
    );
    let selected = kubectl(
        &kubeconfig,
        &["get", "ns", "-l", "env=prod", "-o", "name"],
        None,
    )
    .stdout;
    assert_eq!(
        String::from_utf8_lossy(&selected).trim(),
        "namespace/team-a"
    );

    // Client-side apply: GET (404), then POST with the last-applied annotation.
    let out = create_and_apply(&kubeconfig, "team-a", "first", &[]);
    assert!(out.contains("secret/aws-ecr-token created"), "{out}");
    assert_eq!(stored_password(&cluster, "team-a"), "first");
    let secret = cluster
        .get(Resource::Secrets, "team-a", "aws-ecr-token")
        .expect("created");
    let last_applied =
        secret["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"]
            .as_str()
            .expect("client-side apply stores the last-applied annotation");
    assert!(last_applied.contains(".dockerconfigjson"));
    let uid = secret["metadata"]["uid"].clone();

    // Again: GET, then a strategic merge PATCH of the same object.
    let out = create_and_apply(&kubeconfig, "team-a", "second", &[]);
    assert!(out.contains("configured"), "{out}");
    assert_eq!(stored_password(&cluster, "team-a"), "second");
    let secret = cluster
        .get(Resource::Secrets, "team-a", "aws-ecr-token")
        .expect("kept");
    assert_eq!(secret["metadata"]["uid"], uid, "updated in place");
    let requests = cluster.requests();
    assert!(requests.iter().any(|r| r.method == "PATCH"
        && r.content_type.as_deref() == Some("application/strategic-merge-patch+json")));

    // Server-side: one apply PATCH as manager "kubectl"; twice to update in place.
    let out = create_and_apply(&kubeconfig, "team-b", "third", &["--server-side"]);
    assert!(out.contains("serverside-applied"), "{out}");
    let out = create_and_apply(&kubeconfig, "team-b", "fourth", &["--server-side"]);
    assert!(out.contains("serverside-applied"), "{out}");
    assert_eq!(stored_password(&cluster, "team-b"), "fourth");
    assert_eq!(
        cluster
            .history(Resource::Secrets, "team-b", "aws-ecr-token")
            .len(),
        2
    );
    let applied = cluster.requests().into_iter().filter(|r| {
        r.path == "/api/v1/namespaces/team-b/secrets/aws-ecr-token"
            && r.content_type.as_deref() == Some("application/apply-patch+yaml")
    });
    assert_eq!(applied.map(|r| r.status).collect::<Vec<_>>(), [201, 200]);

    let yaml = kubectl(
        &kubeconfig,
        &[
            "get",
            "secret",
            "aws-ecr-token",
            "-n",
            "team-b",
            "-o",
            "yaml",
            "--show-managed-fields",
        ],
        None,
    )
    .stdout;
    let yaml = String::from_utf8(yaml).expect("utf-8");
    assert!(
        yaml.contains("type: kubernetes.io/dockerconfigjson"),
        "{yaml}"
    );
    assert!(yaml.contains("manager: kubectl"), "{yaml}");
    std::fs::remove_dir_all(&dir).ok();
}

/// `kubectl create namespace` and `kubectl create secret` POST protobuf
/// (application/vnd.kubernetes.protobuf), as kubectl's typed clients do; a real API server
/// reads it, and so does the fake (src/kube/protobuf.rs).
#[test]
#[ignore = "needs kubectl (bash .ci/test)"]
fn kubectl_create_namespace_and_secret_send_protobuf_which_the_fake_reads() {
    assert!(
        kubectl_available(),
        "kubectl is needed for this test: put it on PATH (.ci/test puts the one .ci/kube-binaries builds there)"
    );
    let cluster = FakeCluster::start();
    let dir = tempfile::tempdir().expect("a temporary directory");
    let kubeconfig = cluster.write_kubeconfig(dir.path());

    let out = kubectl(&kubeconfig, &["create", "namespace", "team-x"], None);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "namespace/team-x created"
    );
    let namespace = cluster
        .get(Resource::Namespaces, "", "team-x")
        .expect("the namespace was stored");
    assert_eq!(namespace["status"]["phase"], "Active", "{namespace}");
    kubectl(
        &kubeconfig,
        &[
            "create",
            "secret",
            "generic",
            "s",
            "-n",
            "team-x",
            "--from-literal=k=v",
        ],
        None,
    );
    let secret = cluster
        .get(Resource::Secrets, "team-x", "s")
        .expect("the Secret was stored");
    assert_eq!(secret["data"]["k"], B64.encode("v"), "{secret}");
    assert_eq!(secret["type"], "Opaque", "{secret}");

    let posts: Vec<_> = cluster
        .requests()
        .into_iter()
        .filter(|r| r.method == "POST")
        .collect();
    assert_eq!(posts.len(), 2, "{posts:?}");
    for post in &posts {
        assert!(
            post.content_type
                .as_deref()
                .is_some_and(|c| c.starts_with("application/vnd.kubernetes.protobuf")),
            "kubectl sent {:?} to {}: this test no longer covers protobuf",
            post.content_type,
            post.path
        );
        assert_eq!(post.status, 201, "{}", post.path);
    }
}
