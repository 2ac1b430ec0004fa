//! Every host a pull can name: dual-stack ECR hosts and ECR Public, from one run.
//!
//! The kubelet looks credentials up by the exact host of the image reference, so each host is its
//! own `auths` entry. These runs point the binary's ECR Public client at the fake ECR with
//! `AWS_ENDPOINT_URL_ECR_PUBLIC`, the SDK's service-specific endpoint variable.

use crate::common;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, SystemTime};

use common::registry::Registry;
use common::*;
use fake_cluster::{EcrFault, FakeTokenRegistry};
use serde_json::{Value, json};

const TWIN: &str = "123456789012.dkr-ecr.us-east-1.on.aws";
const PUBLIC: &str = "public.ecr.aws";
const PUBLIC_TWIN: &str = "ecr-public.aws.com";
const DUAL_STACK: (&str, &str) = ("ECR_REFRESH_DUAL_STACK", "true");

/// The run's environment plus the ECR Public endpoint of this harness's fake.
fn run(h: &Harness, env: &[(&str, &str)]) -> Run {
    let url = h.ecr.url();
    let mut env = env.to_vec();
    env.push(("AWS_ENDPOINT_URL_ECR_PUBLIC", &url));
    h.run(&env)
}

fn registries_annotation(secret: &Value) -> String {
    secret["metadata"]["annotations"]["ecr-refresh/registries"]
        .as_str()
        .expect("the registries annotation")
        .to_owned()
}

fn auths_keys(secret: &Value) -> Vec<String> {
    docker_config(secret)["auths"]
        .as_object()
        .expect("an auths object")
        .keys()
        .cloned()
        .collect()
}

#[test]
fn a_private_registry_its_dual_stack_host_and_ecr_public_are_written_from_two_token_calls() {
    let h = Harness::new();
    h.namespaces(&["team-a"]);
    h.ecr.set_password(REGION, "private-pw");
    h.ecr.set_public_password("public-pw");

    let run = run(
        &h,
        &[(
            "ECR_REFRESH_REGISTRIES",
            &format!("{REGISTRY},{TWIN},{PUBLIC}"),
        )],
    );

    run.expect_code(0);
    assert_eq!(run.outcome("team-a"), "created");
    let secret = h.secret("team-a").expect("the Secret is written");
    assert_eq!(auths_keys(&secret), [REGISTRY, TWIN, PUBLIC]);
    assert_eq!(password(&secret, REGISTRY), "private-pw");
    assert_eq!(
        password(&secret, TWIN),
        "private-pw",
        "the dual-stack host is served by its region's token"
    );
    assert_eq!(password(&secret, PUBLIC), "public-pw");
    assert_eq!(
        registries_annotation(&secret),
        format!("{REGISTRY},{TWIN},{PUBLIC}")
    );
    assert_eq!(
        h.ecr.calls(),
        [(REGION.to_owned(), vec!["123456789012".to_owned()])],
        "one ECR call for the region, naming the account once"
    );
    assert_eq!(
        h.ecr.public_calls(),
        ["us-east-1"],
        "one ECR Public call, in us-east-1"
    );
}

#[test]
fn dual_stack_writes_every_registrys_twin_from_the_same_token_and_records_the_earliest_expiry() {
    let h = Harness::new();
    h.namespaces(&["team-a"]);
    let eu = "210987654321.dkr.ecr-fips.eu-west-1.amazonaws.com";
    let eu_twin = "210987654321.dkr-ecr-fips.eu-west-1.on.aws";
    let hour = Duration::from_secs(3600);
    let now = SystemTime::now();
    h.ecr.set_expires_at(now + 12 * hour);
    h.ecr.set_public_expires_at(now + 2 * hour);

    let run = run(
        &h,
        &[
            DUAL_STACK,
            (
                "ECR_REFRESH_REGISTRIES",
                &format!("{REGISTRY},{eu},{PUBLIC}"),
            ),
            ("AWS_REGION", "ap-south-2"),
        ],
    );

    run.expect_code(0);
    let secret = h.secret("team-a").expect("the Secret is written");
    let hosts = [REGISTRY, TWIN, eu, eu_twin, PUBLIC, PUBLIC_TWIN];
    assert_eq!(auths_keys(&secret), hosts);
    assert_eq!(registries_annotation(&secret), hosts.join(","));
    assert_eq!(password(&secret, REGISTRY), password(&secret, TWIN));
    assert_eq!(password(&secret, eu), password(&secret, eu_twin));
    assert_eq!(password(&secret, PUBLIC), password(&secret, PUBLIC_TWIN));
    assert_ne!(password(&secret, REGISTRY), password(&secret, eu));
    assert_ne!(password(&secret, REGISTRY), password(&secret, PUBLIC));
    assert_eq!(h.ecr.calls().len(), 2, "one ECR call per region");
    assert_eq!(h.ecr.public_calls(), ["us-east-1"]);

    let recorded = secret["metadata"]["annotations"]["ecr-refresh/token-expires-at"]
        .as_str()
        .expect("the expiry annotation");
    let recorded = humantime::parse_rfc3339(recorded).expect("RFC 3339");
    let earliest = now + 2 * hour;
    let off = recorded
        .duration_since(earliest)
        .unwrap_or_else(|e| e.duration());
    assert!(
        off < Duration::from_secs(2),
        "the earliest expiry (ECR Public's) is recorded: {recorded:?} vs {earliest:?}"
    );
}

#[test]
fn a_later_run_without_dual_stack_removes_only_the_dual_stack_entries_we_wrote() {
    let h = Harness::new();
    h.namespaces(&["team-a"]);
    let foreign = json!({ "auth": b64("robot:s3cret") });
    h.seed_secret(
        "team-a",
        "kubectl-create",
        json!({
            "type": "kubernetes.io/dockerconfigjson",
            "data": { ".dockerconfigjson": b64(&json!({ "auths": { "ghcr.io": foreign } }).to_string()) },
        }),
    );
    let registries = ("ECR_REFRESH_REGISTRIES", &*format!("{REGISTRY},{PUBLIC}"));
    run(&h, &[DUAL_STACK, registries]).expect_code(0);
    let first = h.secret("team-a").unwrap();
    assert_eq!(
        auths_keys(&first),
        ["ghcr.io", REGISTRY, TWIN, PUBLIC, PUBLIC_TWIN]
    );

    let run = run(&h, &[registries]);

    run.expect_code(0);
    assert_eq!(run.outcome("team-a"), "updated");
    let secret = h.secret("team-a").unwrap();
    assert_eq!(auths_keys(&secret), ["ghcr.io", REGISTRY, PUBLIC]);
    assert_eq!(docker_config(&secret)["auths"]["ghcr.io"], foreign);
    assert_eq!(
        registries_annotation(&secret),
        format!("{REGISTRY},{PUBLIC}")
    );
    assert_ne!(
        password(&secret, REGISTRY),
        password(&first, REGISTRY),
        "the entries still configured carry the new token"
    );
    assert_eq!(
        run.line("team-a")["dropped_entries"],
        format!("{TWIN},{PUBLIC_TWIN}")
    );
}

#[test]
fn a_host_that_is_no_registry_exits_2_naming_it() {
    for (variable, value, named) in [
        (
            "ECR_REFRESH_REGISTRIES",
            "123456789012.dkr-ecr.us-east-1.on.aws.evil.io",
            "123456789012.dkr-ecr.us-east-1.on.aws.evil.io",
        ),
        (
            "ECR_REFRESH_REGISTRIES",
            "public.ecr.aws,gallery.ecr.aws",
            "gallery.ecr.aws",
        ),
        ("ECR_REFRESH_DUAL_STACK", "maybe", "must be true or false"),
    ] {
        let h = Harness::new();
        h.namespaces(&["team-a"]);

        let run = run(&h, &[(variable, value)]);

        run.expect_code(2);
        let error = run.lines.last().unwrap()["error"]
            .as_str()
            .unwrap()
            .to_owned();
        assert!(error.contains(variable) && error.contains(named), "{error}");
        assert!(h.ecr.calls().is_empty() && h.ecr.public_calls().is_empty());
        assert_eq!(h.cluster.request_count(), 0);
    }
}

#[test]
fn ecr_publics_token_failing_exits_3_with_nothing_written() {
    let h = Harness::new();
    h.namespaces(&["team-a"]);
    h.ecr.add_public_fault(EcrFault::AccessDenied, None);

    let run = run(
        &h,
        &[("ECR_REFRESH_REGISTRIES", &format!("{REGISTRY},{PUBLIC}"))],
    );

    run.expect_code(3);
    let error = run.lines.last().unwrap()["error"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        error.contains("ECR Public GetAuthorizationToken in us-east-1 failed")
            && error.contains("AccessDeniedException")
            && error
                .contains("allow ecr-public:GetAuthorizationToken and sts:GetServiceBearerToken"),
        "{error}"
    );
    assert_no_write(&h, "no write before every token is in hand");
    assert!(h.secret("team-a").is_none());
}

/// The login check against a registry that authenticates as public.ecr.aws does: a Bearer
/// challenge, a token from the realm for basic auth `AWS:<password>`, then the bearer token.
#[test]
fn the_login_check_follows_a_bearer_challenge_to_its_token_service() {
    let standin = FakeTokenRegistry::start("AWS", "the-token");
    let h = Harness::new();
    h.namespaces(&["team-a"]);
    h.ecr.set_password(REGION, "the-token");
    h.ecr.set_proxy_endpoint(&standin.url());

    let run = run(&h, &[("ECR_REFRESH_VERIFY_LOGIN", "true")]);

    run.expect_code(0);
    let passed = run
        .lines
        .iter()
        .find(|l| l["message"] == "login check passed")
        .unwrap_or_else(|| panic!("no login check line:\n{}", run.stdout));
    assert_eq!(passed["auth"], "bearer");
    assert_eq!(
        standin.requests(),
        [
            ("GET /v2/".to_owned(), "-".to_owned()),
            (
                "GET /token/?service=public.ecr.aws&scope=aws".to_owned(),
                "Basic".to_owned()
            ),
            ("GET /v2/".to_owned(), "Bearer".to_owned()),
        ]
    );
    assert!(h.secret("team-a").is_some());
}

#[test]
fn a_token_the_token_service_refuses_exits_3_and_writes_nothing() {
    let standin = FakeTokenRegistry::start("AWS", "a-password-never-handed-out");
    let h = Harness::new();
    h.namespaces(&["team-a"]);
    h.ecr.set_proxy_endpoint(&standin.url());

    let run = run(&h, &[("ECR_REFRESH_VERIFY_LOGIN", "true")]);

    run.expect_code(3);
    let error = run.lines.last().unwrap()["error"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        error.contains(&format!("token service {}/token/", standin.url()))
            && error.contains("HTTP 401"),
        "{error}"
    );
    assert_no_write(&h, "a refused login writes nothing");
}

/// The Secret was read (it is due), never written: tokens are fetched once a namespace is due.
fn assert_no_write(h: &Harness, why: &str) {
    let writes: Vec<_> = h
        .cluster
        .requests()
        .into_iter()
        .filter(|r| r.method != "GET")
        .map(|r| format!("{} {}", r.method, r.path))
        .collect();
    assert!(writes.is_empty(), "{why}: {writes:?}");
    assert!(h.secret("team-a").is_none(), "{why}");
}

/// skopeo, a registry client independent of ecr-refresh, reads the written `.dockerconfigjson` as
/// its authfile: each host's entry, re-keyed to a loopback registry that wants that token's
/// password, logs in; an entry with another token's password is refused.
#[test]
#[ignore = "needs docker-registry and skopeo (bash .ci/test)"]
fn skopeo_authenticates_with_every_entry_written() {
    let private = Registry::start("AWS", "private-pw");
    let public = Registry::start("AWS", "public-pw");
    let h = Harness::new();
    h.namespaces(&["team-a"]);
    h.ecr.set_password(REGION, "private-pw");
    h.ecr.set_public_password("public-pw");
    run(
        &h,
        &[
            DUAL_STACK,
            ("ECR_REFRESH_REGISTRIES", &format!("{REGISTRY},{PUBLIC}")),
        ],
    )
    .expect_code(0);
    let config = docker_config(&h.secret("team-a").unwrap());
    for registry in [&private, &public] {
        let password = if std::ptr::eq(registry, &private) {
            "private-pw"
        } else {
            "public-pw"
        };
        push(address(registry), password);
    }

    for (host, registry) in [
        (REGISTRY, &private),
        (TWIN, &private),
        (PUBLIC, &public),
        (PUBLIC_TWIN, &public),
    ] {
        let authfile = rekeyed(&h, &config, host, address(registry));
        let inspect = skopeo_inspect(&authfile, address(registry));
        assert!(
            inspect.status.success(),
            "skopeo with the entry for {host}: {}",
            String::from_utf8_lossy(&inspect.stderr)
        );
    }

    // The public token's entry at the private registry: the password is wrong there.
    let authfile = rekeyed(&h, &config, PUBLIC, address(&private));
    let refused = skopeo_inspect(&authfile, address(&private));
    let stderr = String::from_utf8_lossy(&refused.stderr).to_lowercase();
    assert!(
        !refused.status.success()
            && (stderr.contains("unauthorized") || stderr.contains("authentication required")),
        "a wrong password is refused: {stderr}"
    );
}

/// `127.0.0.1:PORT` of a loopback registry.
fn address(registry: &Registry) -> &str {
    registry
        .endpoint
        .strip_prefix("http://")
        .expect("an http endpoint")
}

/// An authfile holding only `host`'s entry, as written, under the loopback registry's address.
fn rekeyed(h: &Harness, config: &Value, host: &str, address: &str) -> std::path::PathBuf {
    let entry = config["auths"][host].clone();
    assert!(entry.is_object(), "an entry for {host} in {config}");
    let path = h
        .dir
        .path()
        .join(format!("auth-{host}-{address}.json").replace(':', "_"));
    write(&path, &json!({ "auths": { address: entry } }).to_string());
    path
}

fn skopeo(args: &[&str]) -> std::process::Output {
    let output = Command::new("skopeo")
        .args(args)
        .env_remove("REGISTRY_AUTH_FILE")
        .output();
    output.unwrap_or_else(|e| {
        panic!("run skopeo ({e}): install it with `apt-get install skopeo` (.ci/run does)")
    })
}

fn skopeo_inspect(authfile: &Path, address: &str) -> std::process::Output {
    skopeo(&[
        "inspect",
        "--raw",
        "--tls-verify=false",
        "--authfile",
        authfile.to_str().expect("a UTF-8 path"),
        &format!("docker://{address}/probe:v1"),
    ])
}

/// Pushes the test image with the registry's own credentials, so inspecting it can succeed:
/// its config blob, then its manifest, over the registry API. Not `skopeo copy`: as root that
/// keeps a blob-info cache in /var/lib/containers/cache, machine state no test may write.
fn push(address: &str, password: &str) {
    let auth = format!("Basic {}", b64(&format!("AWS:{password}")));
    let (config, manifest) = probe_image();
    let (status, location) =
        registry_request(address, "POST", "/v2/probe/blobs/uploads/", &auth, "", "");
    assert_eq!(status, 202, "start the config blob's upload");
    let location = location.expect("an upload Location");
    let path = location
        .strip_prefix(&format!("http://{address}"))
        .unwrap_or(&location)
        .to_owned();
    let separator = if path.contains('?') { '&' } else { '?' };
    let digest = format!("sha256:{}", sha256(&config));
    let (status, _) = registry_request(
        address,
        "PUT",
        &format!("{path}{separator}digest={digest}"),
        &auth,
        "application/octet-stream",
        &config,
    );
    assert_eq!(status, 201, "upload the config blob");
    let (status, _) = registry_request(
        address,
        "PUT",
        "/v2/probe/manifests/v1",
        &auth,
        "application/vnd.oci.image.manifest.v1+json",
        &manifest,
    );
    assert_eq!(status, 201, "put the manifest");
}

/// One HTTP/1.1 request to a loopback registry: its status and Location header.
fn registry_request(
    address: &str,
    method: &str,
    path: &str,
    authorization: &str,
    content_type: &str,
    body: &str,
) -> (u16, Option<String>) {
    use std::io::{Read as _, Write as _};
    let mut stream = std::net::TcpStream::connect(address).expect("connect to the registry");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("a read timeout");
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {address}\r\nAuthorization: {authorization}\r\n\
         Content-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .expect("send to the registry");
    let mut answer = String::new();
    stream
        .read_to_string(&mut answer)
        .expect("read the registry's answer");
    let head = answer.split("\r\n\r\n").next().unwrap_or_default();
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status in {answer:?}"));
    let location = head.lines().find_map(|l| {
        let (name, value) = l.split_once(':')?;
        name.eq_ignore_ascii_case("location")
            .then(|| value.trim().to_owned())
    });
    (status, location)
}

/// The smallest image a registry stores: a config and a manifest with no layers.
fn probe_image() -> (String, String) {
    let config =
        json!({ "architecture": "amd64", "os": "linux", "rootfs": { "type": "layers", "diff_ids": [] } })
            .to_string();
    let manifest = json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {
            "mediaType": "application/vnd.oci.image.config.v1+json",
            "digest": format!("sha256:{}", sha256(&config)),
            "size": config.len(),
        },
        "layers": [],
    })
    .to_string();
    (config, manifest)
}

/// The hex SHA-256 of a string, by coreutils' sha256sum.
fn sha256(text: &str) -> String {
    use std::io::Write as _;
    let mut child = Command::new("sha256sum")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("run sha256sum");
    child
        .stdin
        .take()
        .expect("a piped stdin")
        .write_all(text.as_bytes())
        .expect("write to sha256sum");
    let out = child.wait_with_output().expect("sha256sum finishes");
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .expect("a digest")
        .to_owned()
}

const RENEW_8H: (&str, &str) = ("ECR_REFRESH_RENEW_BEFORE", "8h");

/// One variable of a run's environment.
type Env<'a> = (&'a str, &'a str);
/// A run's environment, then the outcome, the `due` field and the `auths` keys it must leave.
type Step<'a> = (&'a [Env<'a>], &'a str, Option<String>, Vec<&'a str>);

/// Requests since `mark` that are not reads.
fn writes_since(h: &Harness, mark: usize) -> Vec<String> {
    h.cluster
        .requests()
        .split_off(mark)
        .into_iter()
        .filter(|r| r.method != "GET")
        .map(|r| format!("{} {}", r.method, r.path))
        .collect()
}

#[test]
fn with_every_host_option_on_a_second_run_finds_nothing_due_writes_nothing_and_calls_ecr_0_times() {
    let h = Harness::new();
    h.namespaces(&["team-a", "team-b"]);
    let fips = "123456789012.dkr.ecr-fips.us-east-1.amazonaws.com";
    let eu = "210987654321.dkr.ecr.eu-west-1.amazonaws.com";
    let china = "123456789012.dkr.ecr.cn-north-1.amazonaws.com.cn";
    let registries = format!("{REGISTRY},{fips},{eu},{china},{PUBLIC}");
    let env = [
        DUAL_STACK,
        RENEW_8H,
        ("ECR_REFRESH_REGISTRIES", registries.as_str()),
    ];
    run(&h, &env).expect_code(0);
    let secret = h.secret("team-a").unwrap();
    assert_eq!(auths_keys(&secret).len(), 10, "each host and its twin");
    let (calls, public_calls) = (h.ecr.calls().len(), h.ecr.public_calls().len());
    assert_eq!((calls, public_calls), (3, 1));
    let mark = h.cluster.requests().len();

    let run = run(&h, &env);

    run.expect_code(0);
    for ns in ["team-a", "team-b"] {
        assert_eq!(run.outcome(ns), "fresh", "{}", run.line(ns));
        assert!(run.line(ns).get("due").is_none());
    }
    assert_eq!(writes_since(&h, mark), Vec::<String>::new());
    assert_eq!(
        (h.ecr.calls().len(), h.ecr.public_calls().len()),
        (calls, public_calls),
        "no ECR call when nothing is due"
    );
    assert_eq!(run.summary()["tokens_fetched"], false);
}

#[test]
fn turning_dual_stack_on_or_off_makes_each_secret_due_once() {
    for configured in [Some(REGISTRY), None] {
        let h = Harness::new();
        h.namespaces(&["team-a"]);
        // None: the caller's own registry, named by ECR's proxyEndpoint.
        let registries = ("ECR_REFRESH_REGISTRIES", configured.unwrap_or(""));
        let off = [RENEW_8H, registries, ("ECR_REFRESH_DUAL_STACK", "false")];
        let on = [RENEW_8H, registries, DUAL_STACK];
        let steps: [Step; 5] = [
            (&off, "created", Some("missing".into()), vec![REGISTRY]),
            (
                &on,
                "updated",
                Some(format!("missing-registry {TWIN}")),
                vec![REGISTRY, TWIN],
            ),
            (&on, "fresh", None, vec![REGISTRY, TWIN]),
            (
                &off,
                "updated",
                Some(format!("stale-registry {TWIN}")),
                vec![REGISTRY],
            ),
            (&off, "fresh", None, vec![REGISTRY]),
        ];
        for (i, (env, outcome, due, keys)) in steps.into_iter().enumerate() {
            let run = run(&h, env);
            run.expect_code(0);
            let line = run.line("team-a");
            assert_eq!(line["outcome"], outcome, "step {i}, {configured:?}: {line}");
            assert_eq!(
                line["due"].as_str().map(str::to_owned),
                due,
                "step {i}: {line}"
            );
            assert_eq!(auths_keys(&h.secret("team-a").unwrap()), keys, "step {i}");
        }
        assert_eq!(
            h.ecr.calls().len(),
            3,
            "a token for each write only: {configured:?}"
        );
    }
}

#[test]
fn ecr_publics_expiry_is_kept_apart_from_a_private_us_east_1_registrys() {
    let h = Harness::new();
    h.namespaces(&["team-a"]);
    let hour = Duration::from_secs(3600);
    let now = SystemTime::now();
    h.ecr.set_expires_at(now + 12 * hour);
    h.ecr.set_public_expires_at(now + hour);

    // ECR Public first, the private us-east-1 registry second: both tokens are issued in
    // us-east-1, and each expiry must count.
    let run = run(
        &h,
        &[("ECR_REFRESH_REGISTRIES", &format!("{PUBLIC},{REGISTRY}"))],
    );

    run.expect_code(0);
    let secret = h.secret("team-a").unwrap();
    let recorded = secret["metadata"]["annotations"]["ecr-refresh/token-expires-at"]
        .as_str()
        .expect("the expiry annotation")
        .to_owned();
    let public_expiry = humantime::parse_rfc3339(&recorded).unwrap();
    let off = public_expiry
        .duration_since(now + hour)
        .unwrap_or_else(|e| e.duration());
    assert!(
        off < Duration::from_secs(2),
        "the Secret records ECR Public's expiry"
    );
    assert_eq!(
        run.line("team-a")["expires_at"],
        recorded.as_str(),
        "the line says the expiry the Secret records"
    );
}
