//! IAM Roles Anywhere as the run's credentials: certificates of a PKI the test makes (RSA 2048
//! and P-256, each straight from the anchor and through an intermediate) exchanged for a role's
//! credentials at a fake endpoint that verifies the signature against the certificate and the
//! chain against the trust anchor (tests/fake-cluster/src/roles_anywhere.rs); the fake ECR
//! answers only those credentials. The refusals exit 2 (found before anything is sent) or 3,
//! name the cause, and write nothing. The reference check: AWS's own helper signs against the
//! same fake, and it accepts it.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::pki::{Ca, Key};
use common::*;
use fake_cluster::FakeSts;
use fake_cluster::roles_anywhere::{FakeRolesAnywhere, Profile, SessionCall, TrustAnchor};
use fake_cluster::sts::{Issued, RoleTrust};
use serde_json::Value;

const ANCHOR: &str = "arn:aws:rolesanywhere:eu-west-1:123456789012:trust-anchor/0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0";
const PROFILE: &str =
    "arn:aws:rolesanywhere:eu-west-1:123456789012:profile/9a8b7c6d-5e4f-3a2b-1c0d-efcdab987654";
const ROLE: &str = "arn:aws:iam::123456789012:role/ecr-refresh-on-prem";
const READER: &str = "arn:aws:iam::210987654321:role/ecr-reader";

/// The fake endpoint trusting `ca` under ANCHOR, with PROFILE listing ROLE; ROLE's credentials.
fn endpoint(ca: &Ca) -> (FakeRolesAnywhere, Issued) {
    let fake = FakeRolesAnywhere::start();
    fake.add_trust_anchor(TrustAnchor {
        arn: ANCHOR.into(),
        ca: ca.der.clone(),
    });
    let issued = fake.add_profile(Profile {
        arn: PROFILE.into(),
        roles: vec![ROLE.into()],
    });
    (fake, issued[0].clone())
}

/// What the run is given.
struct Files {
    certificate: PathBuf,
    key: PathBuf,
    chain: Option<PathBuf>,
}

fn files(dir: &Path, certificate: &str, key: &str, chain: Option<&str>) -> Files {
    let certificate_path = dir.join("tls.crt");
    let key_path = dir.join("tls.key");
    write(&certificate_path, certificate);
    write(&key_path, key);
    let chain = chain.map(|chain| {
        let path = dir.join("chain.pem");
        write(&path, chain);
        path
    });
    Files {
        certificate: certificate_path,
        key: key_path,
        chain,
    }
}

/// The binary with Roles Anywhere configured and no static keys.
fn command(
    h: &Harness,
    fake: &FakeRolesAnywhere,
    files: &Files,
    extra: &[(&str, &str)],
) -> Command {
    let mut env: Vec<(&str, String)> = vec![
        ("AWS_ENDPOINT_URL_ROLESANYWHERE", fake.url()),
        ("ECR_REFRESH_ROLES_ANYWHERE_TRUST_ANCHOR_ARN", ANCHOR.into()),
        ("ECR_REFRESH_ROLES_ANYWHERE_PROFILE_ARN", PROFILE.into()),
        ("ECR_REFRESH_ROLES_ANYWHERE_ROLE_ARN", ROLE.into()),
        (
            "ECR_REFRESH_ROLES_ANYWHERE_CERTIFICATE",
            files.certificate.display().to_string(),
        ),
        (
            "ECR_REFRESH_ROLES_ANYWHERE_PRIVATE_KEY",
            files.key.display().to_string(),
        ),
    ];
    if let Some(chain) = &files.chain {
        env.push((
            "ECR_REFRESH_ROLES_ANYWHERE_CHAIN",
            chain.display().to_string(),
        ));
    }
    let env: Vec<(&str, &str)> = env
        .iter()
        .map(|(k, v)| (*k, v.as_str()))
        .chain(extra.iter().copied())
        .collect();
    let mut command = h.command(&env);
    command
        .env_remove("AWS_ACCESS_KEY_ID")
        .env_remove("AWS_SECRET_ACCESS_KEY");
    command
}

fn run(h: &Harness, fake: &FakeRolesAnywhere, files: &Files, extra: &[(&str, &str)]) -> Run {
    let output = command(h, fake, files, extra)
        .output()
        .expect("ecr-refresh runs");
    let run = h.checked(output);
    for issued in fake.issued() {
        assert!(
            !run.stdout.contains(&issued.secret_access_key)
                && !run.stdout.contains(&issued.session_token),
            "credentials reached the output:\n{}",
            run.stdout
        );
    }
    run
}

/// The run's one error line (the last, and the only WARN or ERROR).
fn error_line(run: &Run) -> String {
    let last = run.lines.last().expect("a log line");
    assert_eq!(last["level"], "ERROR", "{}", run.stdout);
    let problems = run
        .lines
        .iter()
        .filter(|l| l["level"] == "WARN" || l["level"] == "ERROR")
        .count();
    assert_eq!(problems, 1, "one line says what failed:\n{}", run.stdout);
    last["error"].as_str().unwrap_or_default().to_owned()
}

fn nothing_written(h: &Harness) {
    assert!(h.secret("team-a").is_none(), "a Secret was written");
    assert_eq!(h.statuses("POST", "/secrets"), Vec::<u16>::new());
    assert_eq!(h.statuses("PATCH", "/secrets"), Vec::<u16>::new());
}

fn outcomes(calls: &[SessionCall]) -> Vec<String> {
    calls.iter().map(|c| c.outcome.clone()).collect()
}

/// One certificate of `kind`, with or without an intermediate, in `form`: a full run.
fn a_session_writes_the_secret(
    kind: Key,
    through_intermediate: bool,
    chain_in_tls_crt: bool,
    pkcs8: bool,
) {
    let h = Harness::new();
    h.namespaces(&["team-a"]);
    let root = Ca::root("ecr-refresh test root");
    let (fake, issued) = endpoint(&root);
    h.ecr.require_signer(issued.signer());
    let (leaf, intermediate) = if through_intermediate {
        let intermediate = root.intermediate("ecr-refresh test intermediate");
        (
            intermediate.leaf(kind, "ecr-refresh.on-prem", false),
            Some(intermediate),
        )
    } else {
        (root.leaf(kind, "ecr-refresh.on-prem", false), None)
    };
    let key = if pkcs8 {
        leaf.pkcs8_pem()
    } else {
        leaf.traditional_pem()
    };
    let dir = tempfile::tempdir().unwrap();
    let files = match &intermediate {
        Some(i) if chain_in_tls_crt => {
            files(dir.path(), &format!("{}{}", leaf.pem, i.pem), &key, None)
        }
        Some(i) => files(dir.path(), &leaf.pem, &key, Some(&i.pem)),
        None => files(dir.path(), &leaf.pem, &key, None),
    };

    let run = run(&h, &fake, &files, &[]);

    run.expect_code(0);
    assert_eq!(run.outcome("team-a"), "created");
    let calls = fake.calls();
    assert_eq!(outcomes(&calls), ["OK"]);
    let call = &calls[0];
    assert_eq!(call.trust_anchor_arn.as_deref(), Some(ANCHOR));
    assert_eq!(call.profile_arn.as_deref(), Some(PROFILE));
    assert_eq!(call.role_arn.as_deref(), Some(ROLE));
    assert_eq!(
        call.region.as_deref(),
        Some("eu-west-1"),
        "the trust anchor's region"
    );
    assert_eq!(call.serial.as_deref(), Some(leaf.serial_decimal().as_str()));
    assert_eq!(call.duration_seconds, Some(3600));
    assert_eq!(call.content_type.as_deref(), Some("application/json"));
    let algorithm = match kind {
        Key::Rsa2048 => "AWS4-X509-RSA-SHA256",
        Key::P256 | Key::P384 => "AWS4-X509-ECDSA-SHA256",
    };
    assert_eq!(call.algorithm.as_deref(), Some(algorithm));
    let (signed, intermediates) = if through_intermediate {
        (
            "content-type;host;x-amz-date;x-amz-x509;x-amz-x509-chain",
            1,
        )
    } else {
        ("content-type;host;x-amz-date;x-amz-x509", 0)
    };
    assert_eq!(call.signed_headers.as_deref(), Some(signed));
    assert_eq!(
        call.intermediates, intermediates,
        "the intermediates, never the root"
    );
    assert_eq!(h.ecr.signers(), [issued.signer()], "ECR signed as the role");
    let tokens = run.messages_starting("ECR tokens fetched");
    assert_eq!(tokens[0]["credentials"], "roles anywhere");
    let session = run.messages_starting("Roles Anywhere session created");
    assert_eq!(session.len(), 1, "{}", run.stdout);
    assert_eq!(session[0]["serial"], leaf.serial_decimal());
    assert_eq!(session[0]["certificate_expires_at"], "2100-01-01T00:00:00Z");
    let key_body: String = key.lines().filter(|l| !l.starts_with("-----")).collect();
    for line in key.lines().filter(|l| !l.starts_with("-----")) {
        assert!(
            !run.stdout.contains(line),
            "a line of the key reached the output"
        );
    }
    assert!(!key_body.is_empty());
}

#[test]
fn rsa_2048_straight_from_the_anchor_with_a_pkcs1_key_gets_the_role_and_writes_the_secret() {
    a_session_writes_the_secret(Key::Rsa2048, false, false, false);
}

#[test]
fn rsa_2048_through_an_intermediate_in_tls_crt_with_a_pkcs8_key_writes_the_secret() {
    a_session_writes_the_secret(Key::Rsa2048, true, true, true);
}

#[test]
fn p256_straight_from_the_anchor_with_a_sec1_key_gets_the_role_and_writes_the_secret() {
    a_session_writes_the_secret(Key::P256, false, false, false);
}

#[test]
fn p256_through_an_intermediate_in_the_chain_file_with_a_pkcs8_key_writes_the_secret() {
    a_session_writes_the_secret(Key::P256, true, false, true);
}

#[test]
fn p384_straight_from_the_anchor_with_a_sec1_key_signs_sha256_and_writes_the_secret() {
    a_session_writes_the_secret(Key::P384, false, false, false);
}

#[test]
fn p384_through_an_intermediate_with_a_pkcs8_key_writes_the_secret() {
    a_session_writes_the_secret(Key::P384, true, true, true);
}

#[test]
fn assume_role_chains_on_top_of_roles_anywhere() {
    let h = Harness::new();
    h.namespaces(&["team-a"]);
    let root = Ca::root("root");
    let (fake, issued) = endpoint(&root);
    let sts = FakeSts::start();
    let assumed = sts.trust_assume_role(RoleTrust {
        role_arn: READER.into(),
        caller: issued.signer(),
        external_id: Some("tenant-42".into()),
    });
    h.ecr.require_signer(assumed.signer());
    let leaf = root.leaf(Key::P256, "cluster-1", false);
    let dir = tempfile::tempdir().unwrap();
    let files = files(dir.path(), &leaf.pem, &leaf.traditional_pem(), None);

    let sts_url = sts.url();
    let run = run(
        &h,
        &fake,
        &files,
        &[
            ("AWS_ENDPOINT_URL_STS", &sts_url),
            ("ECR_REFRESH_ASSUME_ROLE_ARN", READER),
            ("ECR_REFRESH_ASSUME_ROLE_EXTERNAL_ID", "tenant-42"),
        ],
    );

    run.expect_code(0);
    assert_eq!(run.outcome("team-a"), "created");
    assert_eq!(outcomes(&fake.calls()), ["OK"]);
    let calls = sts.calls();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].outcome, "OK");
    assert_eq!(
        calls[0].access_key_id.as_deref(),
        Some(issued.access_key_id.as_str())
    );
    assert_eq!(h.ecr.signers(), [assumed.signer()]);
    assert_eq!(
        run.messages_starting("ECR tokens fetched")[0]["credentials"],
        format!("assume role {READER} over roles anywhere")
    );
}

// ---- Refusals ------------------------------------------------------------------------------

#[test]
fn an_expired_certificate_exits_3_naming_it_and_nothing_is_sent_or_written() {
    let h = Harness::new();
    h.namespaces(&["team-a"]);
    let root = Ca::root("root");
    let (fake, _) = endpoint(&root);
    let leaf = root.leaf(Key::P256, "cluster-1", true);
    let dir = tempfile::tempdir().unwrap();
    let files = files(dir.path(), &leaf.pem, &leaf.traditional_pem(), None);

    let run = run(&h, &fake, &files, &[]);

    run.expect_code(3);
    let error = error_line(&run);
    assert!(
        error.contains(&format!(
            "roles anywhere: the certificate in {} (ECR_REFRESH_ROLES_ANYWHERE_CERTIFICATE, serial {}",
            files.certificate.display(),
            leaf.serial_decimal()
        )),
        "{error}"
    );
    assert!(error.contains("expired at 2021-12-31T00:00:00Z"), "{error}");
    assert_eq!(fake.calls(), [], "an expired certificate is not sent");
    nothing_written(&h);
}

#[test]
fn a_certificate_from_a_ca_the_anchor_does_not_hold_exits_3_naming_the_anchor() {
    let h = Harness::new();
    h.namespaces(&["team-a"]);
    let (fake, _) = endpoint(&Ca::root("the anchor's CA"));
    let other = Ca::root("another CA");
    let leaf = other.leaf(Key::Rsa2048, "cluster-1", false);
    let dir = tempfile::tempdir().unwrap();
    let files = files(dir.path(), &leaf.pem, &leaf.pkcs8_pem(), None);

    let run = run(&h, &fake, &files, &[]);

    run.expect_code(3);
    let error = error_line(&run);
    assert!(
        error.contains(
            "roles anywhere: CreateSession refused: HTTP 403 AccessDeniedException: Untrusted signing certificate"
        ),
        "{error}"
    );
    assert!(error.contains(&format!("trust anchor {ANCHOR}")), "{error}");
    assert!(
        error.contains("the trust anchor must hold the CA"),
        "{error}"
    );
    assert_eq!(fake.calls().len(), 1);
    assert_eq!(h.ecr.calls().len(), 0, "ECR is never asked");
    nothing_written(&h);
}

#[test]
fn an_intermediate_left_out_exits_3_as_the_chain_does_not_reach_the_anchor() {
    let h = Harness::new();
    h.namespaces(&["team-a"]);
    let root = Ca::root("root");
    let (fake, _) = endpoint(&root);
    let leaf = root
        .intermediate("intermediate")
        .leaf(Key::P256, "cluster-1", false);
    let dir = tempfile::tempdir().unwrap();
    let files = files(dir.path(), &leaf.pem, &leaf.pkcs8_pem(), None);

    let run = run(&h, &fake, &files, &[]);

    run.expect_code(3);
    let error = error_line(&run);
    assert!(error.contains("Untrusted signing certificate"), "{error}");
    assert!(error.contains("with the intermediates sent"), "{error}");
    nothing_written(&h);
}

#[test]
fn the_key_of_another_certificate_exits_2_before_anything_is_sent() {
    // Caught locally: the key's public half is compared with the certificate's, so the wrong key
    // is a configuration error (exit 2) and CreateSession is never sent.
    let h = Harness::new();
    h.namespaces(&["team-a"]);
    let root = Ca::root("root");
    let (fake, _) = endpoint(&root);
    let leaf = root.leaf(Key::P256, "cluster-1", false);
    let other = root.leaf(Key::P256, "cluster-2", false);
    let dir = tempfile::tempdir().unwrap();
    let files = files(dir.path(), &leaf.pem, &other.traditional_pem(), None);

    let run = run(&h, &fake, &files, &[]);

    run.expect_code(2);
    let error = error_line(&run);
    assert!(
        error.contains(&format!(
            "ECR_REFRESH_ROLES_ANYWHERE_PRIVATE_KEY: the key in {} is not the key of the certificate in {}",
            files.key.display(),
            files.certificate.display()
        )),
        "{error}"
    );
    assert_eq!(fake.calls(), []);
    assert!(
        h.cluster.requests().is_empty(),
        "nothing was sent to the API server"
    );
    nothing_written(&h);
}

#[test]
fn a_role_the_profile_does_not_list_exits_3_naming_the_role() {
    let h = Harness::new();
    h.namespaces(&["team-a"]);
    let root = Ca::root("root");
    let (fake, _) = endpoint(&root);
    let leaf = root.leaf(Key::Rsa2048, "cluster-1", false);
    let dir = tempfile::tempdir().unwrap();
    let files = files(dir.path(), &leaf.pem, &leaf.traditional_pem(), None);
    let other_role = "arn:aws:iam::123456789012:role/not-in-the-profile";

    let run = run(
        &h,
        &fake,
        &files,
        &[("ECR_REFRESH_ROLES_ANYWHERE_ROLE_ARN", other_role)],
    );

    run.expect_code(3);
    let error = error_line(&run);
    assert!(
        error.contains("HTTP 403 AccessDeniedException: Unable to assume role"),
        "{error}"
    );
    assert!(error.contains(&format!("role {other_role}")), "{error}");
    nothing_written(&h);
}

#[test]
fn bad_input_exits_2_naming_the_variable_before_anything_is_sent() {
    let root = Ca::root("root");
    let leaf = root.leaf(Key::P256, "cluster-1", false);
    for (extra, expected) in [
        (
            vec![(
                "ECR_REFRESH_ROLES_ANYWHERE_TRUST_ANCHOR_ARN",
                "arn:aws:rolesanywhere:eu-west-1:123456789012:profile/0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0",
            )],
            "ECR_REFRESH_ROLES_ANYWHERE_TRUST_ANCHOR_ARN=\"arn:aws:rolesanywhere:eu-west-1:123456789012:profile/",
        ),
        (
            vec![(
                "ECR_REFRESH_ROLES_ANYWHERE_CERTIFICATE",
                "/nonexistent/tls.crt",
            )],
            "ECR_REFRESH_ROLES_ANYWHERE_CERTIFICATE: cannot read /nonexistent/tls.crt",
        ),
        (
            vec![("ECR_REFRESH_ROLES_ANYWHERE_ROLE_ARN", "")],
            "ECR_REFRESH_ROLES_ANYWHERE_TRUST_ANCHOR_ARN is set, but not ECR_REFRESH_ROLES_ANYWHERE_ROLE_ARN",
        ),
        (
            vec![("ECR_REFRESH_ROLES_ANYWHERE_SESSION_DURATION", "13h")],
            "ECR_REFRESH_ROLES_ANYWHERE_SESSION_DURATION=\"13h\" is invalid: must be a duration from 15m to 12h",
        ),
    ] {
        let h = Harness::new();
        let (fake, _) = endpoint(&root);
        let dir = tempfile::tempdir().unwrap();
        let files = files(dir.path(), &leaf.pem, &leaf.traditional_pem(), None);
        let run = run(&h, &fake, &files, &extra);
        run.expect_code(2);
        let error = error_line(&run);
        assert!(error.contains(expected), "{expected}\n{error}");
        assert_eq!(fake.calls(), []);
        assert!(h.cluster.requests().is_empty());
    }
}

/// A 1024-bit RSA key, as `openssl genrsa 1024` writes it (PKCS#8) and in PKCS#1: aws-lc-rs
/// refuses it as too small, said as such, not as a key of another kind.
#[test]
fn a_1024_bit_rsa_key_exits_2_as_shorter_than_2048_bits() {
    let root = Ca::root("root");
    let leaf = root.leaf(Key::Rsa2048, "cluster-1", false);
    for key in [common::pki::RSA_1024_PKCS8, common::pki::RSA_1024_PKCS1] {
        let h = Harness::new();
        let (fake, _) = endpoint(&root);
        let dir = tempfile::tempdir().unwrap();
        let files = files(dir.path(), &leaf.pem, key, None);
        let run = run(&h, &fake, &files, &[]);
        run.expect_code(2);
        let error = error_line(&run);
        assert!(
            error.contains(&format!(
                "ECR_REFRESH_ROLES_ANYWHERE_PRIVATE_KEY: {} holds an RSA key shorter than 2048 bits",
                files.key.display()
            )),
            "{}\n{error}",
            &key[..31]
        );
        assert_eq!(fake.calls(), []);
    }
}

#[test]
fn an_encrypted_or_ed25519_key_exits_2_as_unsupported() {
    let root = Ca::root("root");
    let leaf = root.leaf(Key::P256, "cluster-1", false);
    let ed25519 = rcgen::KeyPair::generate_for(&rcgen::PKCS_ED25519)
        .unwrap()
        .serialize_pem();
    for (key, why) in [
        (
            "-----BEGIN ENCRYPTED PRIVATE KEY-----\nMIIB\n-----END ENCRYPTED PRIVATE KEY-----\n"
                .to_owned(),
            "holds an encrypted key",
        ),
        (ed25519, "neither RSA nor EC P-256 or P-384"),
        (leaf.pem.clone(), "holds no PRIVATE KEY"),
    ] {
        let h = Harness::new();
        let (fake, _) = endpoint(&root);
        let dir = tempfile::tempdir().unwrap();
        let files = files(dir.path(), &leaf.pem, &key, None);
        let run = run(&h, &fake, &files, &[]);
        run.expect_code(2);
        let error = error_line(&run);
        assert!(
            error.contains("ECR_REFRESH_ROLES_ANYWHERE_PRIVATE_KEY"),
            "{error}"
        );
        assert!(error.contains(why), "{why}\n{error}");
        assert_eq!(fake.calls(), []);
    }
}

// ---- The verifier ----------------------------------------------------------------------------

/// Sends CreateSession signed by ecr-refresh's signer, with `tamper` applied to the headers.
fn send_signed(
    fake: &FakeRolesAnywhere,
    files: &Files,
    tamper: impl Fn(&mut Vec<(&'static str, String)>),
) -> (u16, Value) {
    use ecr_refresh::aws::credentials::roles_anywhere::{
        DEFAULT_SESSION_DURATION, Identity, RolesAnywhere, signing,
    };
    let config = RolesAnywhere {
        trust_anchor_arn: ANCHOR.parse().unwrap(),
        profile_arn: PROFILE.parse().unwrap(),
        role_arn: ROLE.parse().unwrap(),
        certificate: files.certificate.clone(),
        private_key: files.key.clone(),
        chain: files.chain.clone(),
        session_duration: DEFAULT_SESSION_DURATION,
    };
    let identity = Identity::load(&config).expect("the test's files");
    let query = [
        ("profileArn", PROFILE),
        ("roleArn", ROLE),
        ("trustAnchorArn", ANCHOR),
    ];
    let url = format!(
        "{}/sessions?{}",
        fake.url(),
        signing::canonical_query(&query)
    );
    let host = fake.url().trim_start_matches("http://").to_owned();
    let body = br#"{"durationSeconds":3600}"#;
    let mut headers = signing::sign(
        &identity,
        &signing::Unsigned {
            host: &host,
            path: "/sessions",
            query: &query,
            body,
            region: "eu-west-1",
            at: std::time::SystemTime::now(),
        },
    );
    tamper(&mut headers);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let mut request = reqwest::Client::new().post(&url).body(body.to_vec());
        for (name, value) in headers {
            request = request.header(name, value);
        }
        let response = request.send().await.expect("the fake answers");
        let status = response.status().as_u16();
        let text = response.text().await.unwrap_or_default();
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    })
}

#[test]
fn one_byte_of_the_signature_changed_is_refused_and_the_unchanged_request_accepted() {
    let root = Ca::root("root");
    let intermediate = root.intermediate("intermediate");
    for leaf in [
        intermediate.leaf(Key::Rsa2048, "cluster-1", false),
        intermediate.leaf(Key::P256, "cluster-1", false),
        intermediate.leaf(Key::P384, "cluster-1", false),
    ] {
        let (fake, issued) = endpoint(&root);
        let dir = tempfile::tempdir().unwrap();
        let files = files(
            dir.path(),
            &leaf.pem,
            &leaf.pkcs8_pem(),
            Some(&intermediate.pem),
        );

        let (status, answer) = send_signed(&fake, &files, |_| {});
        assert_eq!(status, 201, "{answer}");
        assert_eq!(
            answer["credentialSet"][0]["credentials"]["accessKeyId"],
            issued.access_key_id
        );

        let (status, answer) = send_signed(&fake, &files, |headers| {
            let (_, authorization) = headers
                .iter_mut()
                .find(|(name, _)| *name == "authorization")
                .expect("an Authorization header");
            // The signature's last hex digit, changed: one byte of the signature differs.
            let last = authorization.pop().unwrap();
            authorization.push(if last == '0' { '1' } else { '0' });
        });
        assert_eq!(status, 403, "{answer}");
        assert_eq!(
            answer["message"],
            "The request signature we calculated does not match the signature you provided"
        );

        let (status, answer) = send_signed(&fake, &files, |headers| {
            // The chain, dropped after signing: the signed headers no longer match.
            headers.retain(|(name, _)| *name != "x-amz-x509-chain");
        });
        assert_eq!(status, 403, "{answer}");
    }
}

// ---- The reference check: AWS's own helper -----------------------------------------------------

/// AWS's helper, `aws_signing_helper` v1.4.0, built by `.ci/go-tool aws-signing-helper`;
/// `bash .ci/test` exports its path.
fn signing_helper() -> PathBuf {
    let path = std::env::var_os("ECR_REFRESH_SIGNING_HELPER").map(PathBuf::from);
    match path {
        Some(path) if path.is_file() => path,
        _ => panic!(
            "needs aws_signing_helper: set ECR_REFRESH_SIGNING_HELPER to the binary \
             (bash .ci/test builds it with .ci/go-tool aws-signing-helper)"
        ),
    }
}

#[test]
#[ignore = "needs aws_signing_helper (bash .ci/test)"]
fn aws_s_own_helper_signs_create_session_and_the_fake_verifier_accepts_it() {
    let helper = signing_helper();
    let root = Ca::root("root");
    let intermediate = root.intermediate("intermediate");
    for (leaf, chain) in [
        (root.leaf(Key::Rsa2048, "cluster-1", false), None),
        (root.leaf(Key::P256, "cluster-1", false), None),
        (
            intermediate.leaf(Key::Rsa2048, "cluster-1", false),
            Some(&intermediate.pem),
        ),
        (
            intermediate.leaf(Key::P256, "cluster-1", false),
            Some(&intermediate.pem),
        ),
        (root.leaf(Key::P384, "cluster-1", false), None),
        (
            intermediate.leaf(Key::P384, "cluster-1", false),
            Some(&intermediate.pem),
        ),
    ] {
        let (fake, issued) = endpoint(&root);
        let dir = tempfile::tempdir().unwrap();
        let files = files(
            dir.path(),
            &leaf.pem,
            &leaf.traditional_pem(),
            chain.map(String::as_str),
        );
        let mut command = Command::new(&helper);
        command.env_clear().args([
            "credential-process",
            "--endpoint",
            &fake.url(),
            "--certificate",
            &files.certificate.display().to_string(),
            "--private-key",
            &files.key.display().to_string(),
            "--trust-anchor-arn",
            ANCHOR,
            "--profile-arn",
            PROFILE,
            "--role-arn",
            ROLE,
        ]);
        if let Some(chain) = &files.chain {
            command.args(["--intermediates", &chain.display().to_string()]);
        }
        let output = command.output().expect("aws_signing_helper runs");
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success(),
            "the helper failed: {}\n{stdout}\nthe fake saw: {:#?}",
            String::from_utf8_lossy(&output.stderr),
            fake.calls()
        );
        let answer: Value = serde_json::from_str(&stdout).expect("credential_process JSON");
        assert_eq!(answer["AccessKeyId"], issued.access_key_id);
        assert_eq!(answer["SessionToken"], issued.session_token);

        // What ecr-refresh's own requests are checked against, the helper's too.
        let calls = fake.calls();
        assert_eq!(outcomes(&calls), ["OK"]);
        let call = &calls[0];
        assert_eq!(call.serial.as_deref(), Some(leaf.serial_decimal().as_str()));
        assert_eq!(call.region.as_deref(), Some("eu-west-1"));
        assert_eq!(call.duration_seconds, Some(3600));
        let signed = if chain.is_some() {
            "content-type;host;x-amz-date;x-amz-x509;x-amz-x509-chain"
        } else {
            "content-type;host;x-amz-date;x-amz-x509"
        };
        assert_eq!(call.signed_headers.as_deref(), Some(signed));
        assert_eq!(call.content_type.as_deref(), Some("application/json"));
        assert_eq!(call.intermediates, usize::from(chain.is_some()));
    }
}

#[test]
fn check_says_the_credentials_come_from_roles_anywhere_and_when_the_certificate_expires() {
    let h = Harness::new();
    h.namespaces(&["team-a"]);
    let root = Ca::root("root");
    let (fake, _) = endpoint(&root);
    let leaf = root.leaf(Key::P256, "cluster-1", false);
    let dir = tempfile::tempdir().unwrap();
    let files = files(dir.path(), &leaf.pem, &leaf.traditional_pem(), None);

    let run = run(&h, &fake, &files, &[("ECR_REFRESH_MODE", "check")]);

    let lines = run.messages_starting("credentials");
    assert_eq!(lines.len(), 1, "{}", run.stdout);
    assert_eq!(lines[0]["credentials"], "roles anywhere");
    assert_eq!(lines[0]["certificate_expires_at"], "2100-01-01T00:00:00Z");
    assert_eq!(
        lines[0]["certificate"],
        files.certificate.display().to_string()
    );
    assert_eq!(fake.calls(), [], "a check asks AWS nothing");
}

// ---- Where the files are read ------------------------------------------------------------

/// Roles Anywhere configured with files this machine does not hold (an operator's laptop).
fn absent_files() -> Files {
    Files {
        certificate: PathBuf::from("/nonexistent/tls.crt"),
        key: PathBuf::from("/nonexistent/tls.key"),
        chain: None,
    }
}

/// `ecr-refresh uninstall` asks AWS nothing: it runs with the install's variables on a machine
/// without the certificate, and never reads it.
#[test]
fn uninstall_never_reads_the_certificate_files() {
    let h = Harness::new();
    h.namespaces(&["team-a"]);
    let (fake, _) = endpoint(&Ca::root("root"));
    let output = command(&h, &fake, &absent_files(), &[])
        .arg("uninstall")
        .output()
        .expect("ecr-refresh runs");
    let run = h.checked(output);
    run.expect_code(0);
    assert!(!run.stdout.contains("/nonexistent"), "{}", run.stdout);
    assert_eq!(fake.calls(), []);
}

/// A check with every namespace fresh, and the files of `files`: exit 1 all the same, with
/// one WARN line carrying what a refresh would say (`said`), never "every namespace can
/// pull". AWS is asked nothing. Returns the error the line gives.
fn check_finds(files: &Files, said: &str) -> String {
    let h = Harness::new();
    h.namespaces(&["team-a"]);
    h.run(&[]).expect_code(0);
    let (fake, _) = endpoint(&Ca::root("root"));

    let run = run(&h, &fake, files, &[("ECR_REFRESH_MODE", "check")]);

    run.expect_code(1);
    let lines = run.messages_starting("credentials: a refresh would fail");
    assert_eq!(lines.len(), 1, "{}", run.stdout);
    assert_eq!(lines[0]["level"], "WARN");
    let error = lines[0]["error"].as_str().unwrap_or_default().to_owned();
    assert!(error.contains(said), "{said}\n{error}");
    assert_eq!(run.outcome("team-a"), "ok", "{}", run.stdout);
    let summary = run.summary();
    assert_eq!(summary["message"], "check complete: findings reported");
    assert!(
        summary["credentials"]
            .as_str()
            .is_some_and(|c| c.contains(said)),
        "{summary}"
    );
    assert_eq!(fake.calls(), [], "a check asks AWS nothing");
    error
}

/// The check runs where the files are not (an operator's machine): absent files are a
/// finding, not a configuration error.
#[test]
fn check_reports_absent_certificate_files_as_a_finding() {
    check_finds(
        &absent_files(),
        "ECR_REFRESH_ROLES_ANYWHERE_CERTIFICATE: cannot read /nonexistent/tls.crt",
    );
}

/// An expired certificate: the next refresh with something due would exit 3.
#[test]
fn check_reports_an_expired_certificate_as_a_finding_with_its_date() {
    let leaf = Ca::root("root").leaf(Key::P256, "cluster-1", true);
    let dir = tempfile::tempdir().unwrap();
    let files = files(dir.path(), &leaf.pem, &leaf.traditional_pem(), None);
    let error = check_finds(
        &files,
        &format!(
            "the certificate in {} (ECR_REFRESH_ROLES_ANYWHERE_CERTIFICATE, serial {}",
            files.certificate.display(),
            leaf.serial_decimal()
        ),
    );
    assert!(
        error.contains("expired at 2021-12-31T00:00:00Z") && error.contains("renew it"),
        "{error}"
    );
}

/// A certificate not valid yet (its issuer's clock, or this node's, is off): a finding too.
#[test]
fn check_reports_a_certificate_not_yet_valid_as_a_finding_with_its_date() {
    let leaf = Ca::root("root").future_leaf(Key::P256, "cluster-1");
    let dir = tempfile::tempdir().unwrap();
    let files = files(dir.path(), &leaf.pem, &leaf.traditional_pem(), None);
    let error = check_finds(
        &files,
        &format!(
            "the certificate in {} (ECR_REFRESH_ROLES_ANYWHERE_CERTIFICATE, serial {}",
            files.certificate.display(),
            leaf.serial_decimal()
        ),
    );
    assert!(
        error.contains("is not valid before 2099-01-01T00:00:00Z")
            && error.contains("check the clocks"),
        "{error}"
    );
}
