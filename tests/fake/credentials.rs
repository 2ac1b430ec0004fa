//! Where the run's AWS credentials come from: assume-role over static keys and over web
//! identity, web identity with a token the fake STS verifies for real (signed by an issuer of
//! the test's own, and by a real kube-apiserver for the installed ServiceAccount), and the
//! refusals, each exit 3 with one line that names the source and what STS refused, and
//! nothing written. The fake ECR answers only calls signed with the credentials STS issued.

use crate::common;

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use common::*;
use fake_cluster::FakeSts;
use fake_cluster::sts::{Issued, RoleTrust, Signer, StsCall, TestIssuer, WebIdentityTrust};
use serde_json::Value;

const READER: &str = "arn:aws:iam::210987654321:role/ecr-reader";
const FEDERATED: &str = "arn:aws:iam::123456789012:role/ecr-refresh-federated";
const EXTERNAL_ID: &str = "tenant-42";
const AUDIENCE: &str = "sts.amazonaws.com";
/// The static keys every run of tests/common gets (Binary::command).
const STATIC_KEY: &str = "AKIDFAKE";

fn static_keys() -> Signer {
    Signer {
        access_key_id: STATIC_KEY.into(),
        session_token: None,
    }
}

/// The binary's command with the fake STS, and without the static keys when `keyless`.
fn command(binary: &Binary, sts: &FakeSts, keyless: bool, env: &[(&str, &str)]) -> Command {
    let mut command = binary.command(env);
    command.env("AWS_ENDPOINT_URL_STS", sts.url());
    if keyless {
        command
            .env_remove("AWS_ACCESS_KEY_ID")
            .env_remove("AWS_SECRET_ACCESS_KEY");
    }
    command
}

/// The web identity variables for a token written to the run's directory.
fn web_identity_env(binary: &Binary, token: &str) -> (String, PathBuf) {
    let path = binary.dir.path().join("web-identity-token");
    write(&path, token);
    (FEDERATED.to_owned(), path)
}

/// The run's one error line: the last line, and the only one at WARN or ERROR (the SDK's own
/// warnings, which dump STS's whole response, are not shown).
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

/// The line that says the tokens were fetched, and with which credentials.
fn tokens_line(run: &Run) -> &Value {
    let lines = run.messages_starting("ECR tokens fetched");
    assert_eq!(lines.len(), 1, "{}", run.stdout);
    lines[0]
}

/// No Secret was written: none stored, no POST or PATCH to secrets.
fn nothing_written(h: &Harness, namespaces: &[&str]) {
    for ns in namespaces {
        assert!(h.secret(ns).is_none(), "a Secret in {ns}");
    }
    assert_eq!(h.statuses("POST", "/secrets"), Vec::<u16>::new());
    assert_eq!(h.statuses("PATCH", "/secrets"), Vec::<u16>::new());
}

fn actions(calls: &[StsCall]) -> Vec<(&str, &str)> {
    calls
        .iter()
        .map(|c| (c.action.as_str(), c.outcome.as_str()))
        .collect()
}

// ---- Assume-role over static keys --------------------------------------------------------

#[test]
fn assume_role_over_static_keys_calls_ecr_with_the_assumed_credentials() {
    let h = Harness::new();
    h.namespaces(&["team-a"]);
    let sts = FakeSts::start();
    let assumed = sts.trust_assume_role(RoleTrust {
        role_arn: READER.into(),
        caller: static_keys(),
        external_id: Some(EXTERNAL_ID.into()),
    });
    h.ecr.require_signer(assumed.signer());

    let output = command(
        &h,
        &sts,
        false,
        &[
            ("ECR_REFRESH_ASSUME_ROLE_ARN", READER),
            ("ECR_REFRESH_ASSUME_ROLE_EXTERNAL_ID", EXTERNAL_ID),
        ],
    )
    .output()
    .expect("ecr-refresh runs");
    let run = h.checked(output);

    run.expect_code(0);
    assert_eq!(run.outcome("team-a"), "created");
    let calls = sts.calls();
    assert_eq!(actions(&calls), [("AssumeRole", "OK")]);
    let call = &calls[0];
    assert_eq!(call.role_arn.as_deref(), Some(READER));
    assert_eq!(call.external_id.as_deref(), Some(EXTERNAL_ID));
    assert_eq!(call.role_session_name.as_deref(), Some("ecr-refresh"));
    assert_eq!(call.access_key_id.as_deref(), Some(STATIC_KEY));
    assert_eq!(
        h.ecr.signers(),
        [assumed.signer()],
        "ECR signed as the role"
    );
    assert_eq!(
        tokens_line(&run)["credentials"],
        format!("assume role {READER} over static keys")
    );
    no_credential_in(&run, &assumed);
}

#[test]
fn the_session_name_is_sent_as_configured() {
    let h = Harness::new();
    h.namespaces(&["team-a"]);
    let sts = FakeSts::start();
    let assumed = sts.trust_assume_role(RoleTrust {
        role_arn: READER.into(),
        caller: static_keys(),
        external_id: None,
    });
    h.ecr.require_signer(assumed.signer());

    let output = command(
        &h,
        &sts,
        false,
        &[
            ("ECR_REFRESH_ASSUME_ROLE_ARN", READER),
            ("ECR_REFRESH_ASSUME_ROLE_SESSION_NAME", "cluster-eu-1"),
        ],
    )
    .output()
    .expect("ecr-refresh runs");
    h.checked(output).expect_code(0);

    let calls = sts.calls();
    assert_eq!(calls[0].role_session_name.as_deref(), Some("cluster-eu-1"));
    assert_eq!(calls[0].external_id, None);
}

#[test]
fn a_wrong_external_id_is_refused_with_exit_3_naming_the_role_and_nothing_is_written() {
    let h = Harness::new();
    h.namespaces(&["team-a"]);
    let sts = FakeSts::start();
    let assumed = sts.trust_assume_role(RoleTrust {
        role_arn: READER.into(),
        caller: static_keys(),
        external_id: Some(EXTERNAL_ID.into()),
    });
    h.ecr.require_signer(assumed.signer());

    let output = command(
        &h,
        &sts,
        false,
        &[
            ("ECR_REFRESH_ASSUME_ROLE_ARN", READER),
            ("ECR_REFRESH_ASSUME_ROLE_EXTERNAL_ID", "tenant-41"),
        ],
    )
    .output()
    .expect("ecr-refresh runs");
    let run = h.checked(output);

    run.expect_code(3);
    let error = error_line(&run);
    assert!(
        error.contains(&format!(
            "assume role {READER} (with an external id) over static keys: STS refused: AccessDenied: \
             User: arn:aws:iam::123456789012:user/{STATIC_KEY} is not authorized to perform: sts:AssumeRole"
        )),
        "{error}"
    );
    assert!(
        !error.contains("tenant-41"),
        "the external id stays out of the log: {error}"
    );
    assert_eq!(actions(&sts.calls()), [("AssumeRole", "AccessDenied")]);
    assert!(
        h.ecr.calls().is_empty(),
        "ECR is not asked without credentials"
    );
    nothing_written(&h, &["team-a"]);
}

#[test]
fn a_malformed_role_arn_exits_2_naming_the_variable_before_anything_is_sent() {
    let h = Harness::new();
    h.namespaces(&["team-a"]);
    let sts = FakeSts::start();

    let output = command(
        &h,
        &sts,
        false,
        &[(
            "ECR_REFRESH_ASSUME_ROLE_ARN",
            "arn:aws:iam::2109876543:role/ecr-reader",
        )],
    )
    .output()
    .expect("ecr-refresh runs");
    let run = h.checked(output);

    run.expect_code(2);
    let error = error_line(&run);
    assert!(
        error.starts_with(
            "ECR_REFRESH_ASSUME_ROLE_ARN=\"arn:aws:iam::2109876543:role/ecr-reader\" is invalid: \
             must be an IAM role ARN"
        ),
        "{error}"
    );
    assert!(sts.calls().is_empty());
    assert!(h.ecr.calls().is_empty());
    assert!(
        h.cluster.requests().is_empty(),
        "the cluster is asked nothing"
    );
}

/// A role is assumed at STS in the run's region: with named registries a refresh needs no
/// region for ECR, so a role without one was found only when a namespace was due (exit 3). It
/// is the configuration's: exit 2, before the cluster or STS is asked anything.
#[test]
fn assume_role_with_no_region_exits_2_before_anything_is_sent() {
    let h = Harness::new();
    h.namespaces(&["team-a"]);
    let sts = FakeSts::start();

    let output = command(&h, &sts, false, &[("ECR_REFRESH_ASSUME_ROLE_ARN", READER)])
        .env_remove("AWS_REGION")
        .env_remove("AWS_DEFAULT_REGION")
        .output()
        .expect("ecr-refresh runs");
    let run = h.checked(output);

    run.expect_code(2);
    let error = error_line(&run);
    assert!(
        error.starts_with("ECR_REFRESH_ASSUME_ROLE_ARN is set, but no AWS region is"),
        "{error}"
    );
    assert!(sts.calls().is_empty());
    assert!(h.ecr.calls().is_empty());
    assert!(
        h.cluster.requests().is_empty(),
        "the cluster is asked nothing"
    );
}

#[test]
fn an_external_id_without_a_role_exits_2() {
    let h = Harness::new();
    let sts = FakeSts::start();

    let output = command(
        &h,
        &sts,
        false,
        &[("ECR_REFRESH_ASSUME_ROLE_EXTERNAL_ID", EXTERNAL_ID)],
    )
    .output()
    .expect("ecr-refresh runs");
    let run = h.checked(output);

    run.expect_code(2);
    assert!(
        error_line(&run).starts_with(
            "ECR_REFRESH_ASSUME_ROLE_EXTERNAL_ID=\"tenant-42\" is invalid: is only used with \
             ECR_REFRESH_ASSUME_ROLE_ARN"
        ),
        "{}",
        run.stdout
    );
    assert!(sts.calls().is_empty());
    assert!(h.cluster.requests().is_empty());
}

#[test]
fn no_credential_source_at_all_exits_3_naming_every_source_tried() {
    let h = Harness::new();
    h.namespaces(&["team-a"]);
    let sts = FakeSts::start();

    let output = command(&h, &sts, true, &[])
        .output()
        .expect("ecr-refresh runs");
    let run = h.checked(output);

    run.expect_code(3);
    let error = error_line(&run);
    for source in [
        "static keys: AWS_ACCESS_KEY_ID",
        "web identity: AWS_ROLE_ARN and AWS_WEB_IDENTITY_TOKEN_FILE",
        "instance metadata",
    ] {
        assert!(
            error.contains("no AWS credentials: none of the sources is set up")
                && error.contains(source),
            "{source}: {error}"
        );
    }
    assert!(h.ecr.calls().is_empty());
    nothing_written(&h, &["team-a"]);
}

#[test]
fn a_profile_that_assumes_a_role_with_an_external_id_works_as_the_sdk_reads_it() {
    let h = Harness::new();
    h.namespaces(&["team-a"]);
    let sts = FakeSts::start();
    let assumed = sts.trust_assume_role(RoleTrust {
        role_arn: READER.into(),
        caller: Signer {
            access_key_id: "AKIDPROFILE".into(),
            session_token: None,
        },
        external_id: Some(EXTERNAL_ID.into()),
    });
    h.ecr.require_signer(assumed.signer());
    let config = h.dir.path().join("aws-config");
    write(
        &config,
        &format!(
            "[profile base]\naws_access_key_id = AKIDPROFILE\naws_secret_access_key = profile-secret\n\n\
             [profile ecr]\nrole_arn = {READER}\nsource_profile = base\nexternal_id = {EXTERNAL_ID}\n"
        ),
    );
    let config = config.to_string_lossy().into_owned();

    let output = command(
        &h,
        &sts,
        true,
        &[("AWS_CONFIG_FILE", config.as_str()), ("AWS_PROFILE", "ecr")],
    )
    .output()
    .expect("ecr-refresh runs");
    let run = h.checked(output);

    run.expect_code(0);
    let calls = sts.calls();
    assert_eq!(actions(&calls), [("AssumeRole", "OK")]);
    assert_eq!(calls[0].access_key_id.as_deref(), Some("AKIDPROFILE"));
    assert_eq!(calls[0].external_id.as_deref(), Some(EXTERNAL_ID));
    assert_eq!(h.ecr.signers(), [assumed.signer()]);
    assert_eq!(tokens_line(&run)["credentials"], "profile");
}

// ---- Web identity with a token of the test's own issuer ------------------------------------

/// An issuer, and the fake STS trusting it for FEDERATED with `sub` = the installed
/// ServiceAccount.
fn federation() -> (TestIssuer, FakeSts, Issued) {
    let issuer = TestIssuer::new("https://issuer.ecr-refresh.test");
    let sts = FakeSts::start();
    let issued = sts.trust_web_identity(WebIdentityTrust {
        role_arn: FEDERATED.into(),
        issuer: issuer.issuer.clone(),
        jwks: issuer.jwks(),
        audience: AUDIENCE.into(),
        subject: "system:serviceaccount:ecr-refresh:ecr-refresh".into(),
    });
    (issuer, sts, issued)
}

/// A keyless run with the web identity token `token`, and `extra`.
fn federated_run(h: &Harness, sts: &FakeSts, token: &str, extra: &[(&str, &str)]) -> Run {
    let (role, path) = web_identity_env(h, token);
    let path = path.to_string_lossy().into_owned();
    let mut env = vec![
        ("AWS_ROLE_ARN", role.as_str()),
        ("AWS_WEB_IDENTITY_TOKEN_FILE", path.as_str()),
        ("AWS_ROLE_SESSION_NAME", "ecr-refresh"),
    ];
    env.extend_from_slice(extra);
    let output = command(h, sts, true, &env)
        .output()
        .expect("ecr-refresh runs");
    h.checked(output)
}

#[test]
fn web_identity_with_a_verified_token_calls_ecr_with_the_role_s_credentials() {
    let (issuer, sts, issued) = federation();
    let h = Harness::new();
    h.namespaces(&["team-a"]);
    h.ecr.require_signer(issued.signer());
    let token = issuer.service_account_token(
        "ecr-refresh",
        "ecr-refresh",
        AUDIENCE,
        Duration::from_secs(3600),
    );

    let run = federated_run(&h, &sts, &token, &[]);

    run.expect_code(0);
    assert_eq!(run.outcome("team-a"), "created");
    let calls = sts.calls();
    assert_eq!(actions(&calls), [("AssumeRoleWithWebIdentity", "OK")]);
    assert_eq!(calls[0].role_arn.as_deref(), Some(FEDERATED));
    assert_eq!(calls[0].access_key_id, None, "the call is not signed");
    assert_eq!(
        calls[0].role_session_name.as_deref(),
        Some("ecr-refresh"),
        "AWS_ROLE_SESSION_NAME"
    );
    assert_eq!(h.ecr.signers(), [issued.signer()]);
    assert_eq!(tokens_line(&run)["credentials"], "web identity");
    assert!(
        !run.stdout.contains(&token),
        "the token stays out of the log"
    );
    no_credential_in(&run, &issued);
}

#[test]
fn web_identity_refusals_exit_3_naming_the_role_and_what_sts_said() {
    let (issuer, sts, issued) = federation();
    let other_issuer = TestIssuer::new(&issuer.issuer);
    let hour = Duration::from_secs(3600);
    let cases = [
        (
            "another audience",
            issuer.service_account_token("ecr-refresh", "ecr-refresh", "vault", hour),
            "InvalidIdentityToken: Incorrect token audience",
        ),
        (
            "another ServiceAccount",
            issuer.service_account_token("ecr-refresh", "default", AUDIENCE, hour),
            "AccessDenied: Not authorized to perform sts:AssumeRoleWithWebIdentity",
        ),
        (
            "a key the issuer does not publish",
            other_issuer.service_account_token("ecr-refresh", "ecr-refresh", AUDIENCE, hour),
            "InvalidIdentityToken: Couldn't verify the token's signature",
        ),
    ];
    for (what, token, refused) in cases {
        let h = Harness::new();
        h.namespaces(&["team-a"]);
        h.ecr.require_signer(issued.signer());

        let run = federated_run(&h, &sts, &token, &[]);

        run.expect_code(3);
        let error = error_line(&run);
        assert!(
            error.contains(&format!(
                "web identity: STS refused the token for role {FEDERATED}: {refused}"
            )),
            "{what}: {error}"
        );
        assert!(h.ecr.calls().is_empty(), "{what}");
        nothing_written(&h, &["team-a"]);
    }
}

#[test]
fn a_missing_web_identity_token_file_exits_3_naming_the_file() {
    let (_, sts, _) = federation();
    let h = Harness::new();
    h.namespaces(&["team-a"]);
    let missing = h.dir.path().join("no-such-token");
    let missing = missing.to_string_lossy().into_owned();

    let output = command(
        &h,
        &sts,
        true,
        &[
            ("AWS_ROLE_ARN", FEDERATED),
            ("AWS_WEB_IDENTITY_TOKEN_FILE", missing.as_str()),
        ],
    )
    .output()
    .expect("ecr-refresh runs");
    let run = h.checked(output);

    run.expect_code(3);
    let error = error_line(&run);
    assert!(
        error.contains(&format!(
            "web identity: cannot read the token file {missing} (AWS_WEB_IDENTITY_TOKEN_FILE): "
        )),
        "{error}"
    );
    assert!(sts.calls().is_empty());
    nothing_written(&h, &["team-a"]);
}

#[test]
fn an_expired_web_identity_token_exits_3() {
    let (issuer, sts, _) = federation();
    let h = Harness::new();
    h.namespaces(&["team-a"]);
    let token = issuer.service_account_token(
        "ecr-refresh",
        "ecr-refresh",
        AUDIENCE,
        Duration::from_secs(600),
    );
    sts.set_clock_ahead(Duration::from_secs(3600));

    let run = federated_run(&h, &sts, &token, &[]);

    run.expect_code(3);
    let error = error_line(&run);
    assert!(
        error.contains(&format!(
            "web identity: STS refused the token for role {FEDERATED}: ExpiredTokenException: Token expired"
        )),
        "{error}"
    );
    nothing_written(&h, &["team-a"]);
}

#[test]
fn assume_role_over_web_identity_signs_assume_role_with_the_federated_credentials() {
    let (issuer, sts, federated) = federation();
    let assumed = sts.trust_assume_role(RoleTrust {
        role_arn: READER.into(),
        caller: federated.signer(),
        external_id: Some(EXTERNAL_ID.into()),
    });
    let h = Harness::new();
    h.namespaces(&["team-a"]);
    h.ecr.require_signer(assumed.signer());
    let token = issuer.service_account_token(
        "ecr-refresh",
        "ecr-refresh",
        AUDIENCE,
        Duration::from_secs(3600),
    );

    let run = federated_run(
        &h,
        &sts,
        &token,
        &[
            ("ECR_REFRESH_ASSUME_ROLE_ARN", READER),
            ("ECR_REFRESH_ASSUME_ROLE_EXTERNAL_ID", EXTERNAL_ID),
        ],
    );

    run.expect_code(0);
    let calls = sts.calls();
    assert_eq!(
        actions(&calls),
        [("AssumeRoleWithWebIdentity", "OK"), ("AssumeRole", "OK")]
    );
    assert_eq!(
        calls[1].access_key_id,
        Some(federated.access_key_id.clone())
    );
    assert_eq!(calls[1].external_id.as_deref(), Some(EXTERNAL_ID));
    assert_eq!(h.ecr.signers(), [assumed.signer()]);
}

#[test]
fn assume_role_over_a_refused_web_identity_names_the_web_identity_refusal() {
    let (issuer, sts, federated) = federation();
    sts.trust_assume_role(RoleTrust {
        role_arn: READER.into(),
        caller: federated.signer(),
        external_id: None,
    });
    let h = Harness::new();
    h.namespaces(&["team-a"]);
    let token = issuer.service_account_token(
        "ecr-refresh",
        "ecr-refresh",
        "vault",
        Duration::from_secs(3600),
    );

    let run = federated_run(&h, &sts, &token, &[("ECR_REFRESH_ASSUME_ROLE_ARN", READER)]);

    run.expect_code(3);
    let error = error_line(&run);
    assert!(
        error.contains(&format!(
            "web identity: STS refused the token for role {FEDERATED}: InvalidIdentityToken"
        )),
        "{error}"
    );
    assert_eq!(
        actions(&sts.calls()),
        [("AssumeRoleWithWebIdentity", "InvalidIdentityToken")]
    );
    nothing_written(&h, &["team-a"]);
}

/// None of the temporary credentials reached the output.
fn no_credential_in(run: &Run, issued: &Issued) {
    for secret in [&issued.secret_access_key, &issued.session_token] {
        assert!(
            !run.stdout.contains(secret.as_str()) && !run.stderr.contains(secret.as_str()),
            "a credential reached the output"
        );
    }
}

// ---- On the real kube-apiserver: a token it minted, verified against the keys it publishes -

mod real {
    use super::*;
    use common::manifests::{copy, cronjob_env};
    use common::real::{RealHarness, install, namespaces, wait_until_enforced};
    use control_plane::ControlPlane;

    /// The shared control plane with manifests/ installed, the CronJob's environment, and the
    /// issuer's two documents as the server serves them.
    struct Installed<'a> {
        cp: &'a ControlPlane,
        env: Vec<(String, String)>,
        issuer: String,
        jwks: Value,
    }

    fn installed() -> &'static Installed<'static> {
        static INSTALLED: OnceLock<Installed<'static>> = OnceLock::new();
        INSTALLED.get_or_init(|| install_on(ControlPlane::shared()))
    }

    /// manifests/ installed on `cp` and in force, and the issuer's two documents read back.
    fn install_on(cp: &ControlPlane) -> Installed<'_> {
        let manifests = copy();
        let root = manifests.path().join("manifests");
        let rendered = install(cp, &cp.assets().join("kubectl"), &root, "", false);
        wait_until_enforced(cp, "default");
        // The two documents AWS fetches from a cluster's issuer, as `kubectl get --raw` reads
        // them.
        let discovery: Value =
            serde_json::from_str(&cp.get_raw("/.well-known/openid-configuration"))
                .expect("the discovery document is JSON");
        let issuer = discovery["issuer"].as_str().expect("an issuer").to_owned();
        assert!(
            discovery["jwks_uri"]
                .as_str()
                .is_some_and(|uri| uri.ends_with("/openid/v1/jwks")),
            "{discovery}"
        );
        assert!(
            discovery["id_token_signing_alg_values_supported"]
                .as_array()
                .is_some_and(|algs| algs.iter().any(|a| a == "ES256")),
            "{discovery}"
        );
        let jwks: Value =
            serde_json::from_str(&cp.get_raw("/openid/v1/jwks")).expect("the JWKS is JSON");
        Installed {
            cp,
            env: cronjob_env(&common::manifests::yaml(&rendered)),
            issuer,
            jwks,
        }
    }

    /// A token the server mints for `namespace/name` with `audience` (TokenRequest).
    fn minted(cp: &ControlPlane, namespace: &str, name: &str, audience: &str) -> String {
        cp.service_account_token(namespace, name); // creates the ServiceAccount if missing
        cp.kubectl_run(&[
            "create",
            "token",
            name,
            "-n",
            namespace,
            "--audience",
            audience,
            "--duration=10m",
        ])
        .trim()
        .to_owned()
    }

    /// The fake STS trusting the real issuer for FEDERATED, for the installed ServiceAccount.
    fn sts_for(installed: &Installed<'_>) -> (FakeSts, Issued) {
        let sts = FakeSts::start();
        let (namespace, name) = common::real::SERVICE_ACCOUNT;
        let issued = sts.trust_web_identity(WebIdentityTrust {
            role_arn: FEDERATED.into(),
            issuer: installed.issuer.clone(),
            jwks: installed.jwks.clone(),
            audience: AUDIENCE.into(),
            subject: format!("system:serviceaccount:{namespace}:{name}"),
        });
        (sts, issued)
    }

    /// A keyless run as the installed ServiceAccount in `namespace`, with the web identity
    /// token `token` and `extra`.
    fn run(
        h: &RealHarness,
        installed: &Installed<'_>,
        sts: &FakeSts,
        namespace: &str,
        token: &str,
        extra: &[(&str, &str)],
    ) -> Run {
        let (role, path) = web_identity_env(h, token);
        let path = path.to_string_lossy().into_owned();
        let mut env: Vec<(&str, &str)> = installed
            .env
            .iter()
            .filter(|(k, _)| k != "ECR_REFRESH_NAMESPACES")
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        env.extend([
            ("ECR_REFRESH_NAMESPACES", namespace),
            ("AWS_ROLE_ARN", role.as_str()),
            ("AWS_WEB_IDENTITY_TOKEN_FILE", path.as_str()),
            ("AWS_ROLE_SESSION_NAME", "ecr-refresh"),
        ]);
        env.extend_from_slice(extra);
        let output = command(h, sts, true, &env)
            .output()
            .expect("ecr-refresh runs");
        let run = h.checked(output);
        common::no_delete(h.proxy.exchanges().into_iter().map(|e| (e.method, e.path)));
        run
    }

    /// Writes to Secrets that the server may store: every request but reads and dry runs (a
    /// run that names its namespaces probes one it can't read a Secret in with a dry-run
    /// create, which is never stored).
    fn secret_writes(h: &RealHarness) -> Vec<(String, String, u16)> {
        h.proxy
            .exchanges()
            .into_iter()
            .filter(|e| e.path.contains("/secrets") && e.method != "GET")
            .filter(|e| !e.query.contains("dryRun=All"))
            .map(|e| (e.method, e.path, e.status))
            .collect()
    }

    #[test]
    #[ignore = "needs KUBEBUILDER_ASSETS (bash .ci/test)"]
    fn a_token_the_real_apiserver_minted_for_the_service_account_gets_the_role() {
        let installed = installed();
        let cp = installed.cp;
        namespaces(cp, &["keyless-a"]);
        let (sts, issued) = sts_for(installed);
        let h = RealHarness::new(cp);
        h.ecr.require_signer(issued.signer());
        let (namespace, name) = common::real::SERVICE_ACCOUNT;
        let token = minted(cp, namespace, name, AUDIENCE);

        let run = run(&h, installed, &sts, "keyless-a", &token, &[]);

        run.expect_code(0);
        assert_eq!(run.outcome("keyless-a"), "created");
        assert_eq!(actions(&sts.calls()), [("AssumeRoleWithWebIdentity", "OK")]);
        assert_eq!(h.ecr.signers(), [issued.signer()]);
        assert!(h.secret("keyless-a").is_some());
        assert!(!run.stdout.contains(&token));
    }

    #[test]
    #[ignore = "needs KUBEBUILDER_ASSETS (bash .ci/test)"]
    fn tokens_of_another_service_account_another_audience_or_expired_are_refused() {
        let installed = installed();
        let cp = installed.cp;
        namespaces(cp, &["keyless-refused"]);
        let (namespace, name) = common::real::SERVICE_ACCOUNT;
        let cases = [
            (
                "another ServiceAccount",
                minted(cp, namespace, "not-ecr-refresh", AUDIENCE),
                Duration::ZERO,
                "AccessDenied: Not authorized to perform sts:AssumeRoleWithWebIdentity",
            ),
            (
                "another audience",
                minted(cp, namespace, name, "vault"),
                Duration::ZERO,
                "InvalidIdentityToken: Incorrect token audience",
            ),
            (
                // TokenRequest's shortest life is 10 minutes: STS judges it an hour on.
                "expired",
                minted(cp, namespace, name, AUDIENCE),
                Duration::from_secs(3600),
                "ExpiredTokenException: Token expired",
            ),
        ];
        for (what, token, ahead, refused) in cases {
            let (sts, issued) = sts_for(installed);
            sts.set_clock_ahead(ahead);
            let h = RealHarness::new(cp);
            h.ecr.require_signer(issued.signer());

            let run = run(&h, installed, &sts, "keyless-refused", &token, &[]);

            run.expect_code(3);
            let error = error_line(&run);
            assert!(
                error.contains(&format!(
                    "web identity: STS refused the token for role {FEDERATED}: {refused}"
                )),
                "{what}: {error}"
            );
            assert!(h.ecr.calls().is_empty(), "{what}");
            assert!(h.secret("keyless-refused").is_none(), "{what}");
            assert_eq!(secret_writes(&h), [], "{what}: nothing is written");
        }
    }

    #[test]
    #[ignore = "needs KUBEBUILDER_ASSETS (bash .ci/test)"]
    fn assume_role_over_the_real_web_identity_calls_ecr_as_the_assumed_role() {
        let installed = installed();
        let cp = installed.cp;
        namespaces(cp, &["keyless-chain"]);
        let (sts, federated) = sts_for(installed);
        let assumed = sts.trust_assume_role(RoleTrust {
            role_arn: READER.into(),
            caller: federated.signer(),
            external_id: Some(EXTERNAL_ID.into()),
        });
        let h = RealHarness::new(cp);
        h.ecr.require_signer(assumed.signer());
        let (namespace, name) = common::real::SERVICE_ACCOUNT;
        let token = minted(cp, namespace, name, AUDIENCE);

        let run = run(
            &h,
            installed,
            &sts,
            "keyless-chain",
            &token,
            &[
                ("ECR_REFRESH_ASSUME_ROLE_ARN", READER),
                ("ECR_REFRESH_ASSUME_ROLE_EXTERNAL_ID", EXTERNAL_ID),
            ],
        );

        run.expect_code(0);
        let calls = sts.calls();
        assert_eq!(
            actions(&calls),
            [("AssumeRoleWithWebIdentity", "OK"), ("AssumeRole", "OK")]
        );
        assert_eq!(calls[1].role_arn.as_deref(), Some(READER));
        assert_eq!(calls[1].external_id.as_deref(), Some(EXTERNAL_ID));
        assert_eq!(
            calls[1].access_key_id,
            Some(federated.access_key_id.clone())
        );
        assert_eq!(h.ecr.signers(), [assumed.signer()]);
        assert!(h.secret("keyless-chain").is_some());
        assert_eq!(
            tokens_line(&run)["credentials"],
            format!("assume role {READER} over web identity")
        );
    }

    /// The recipe's setup: the server names a public issuer (`--service-account-issuer`, with
    /// `--service-account-jwks-uri` under it), its two documents are copied there, and the IAM
    /// OIDC provider is that URL. Here the fake STS is given the documents the server serves.
    #[test]
    #[ignore = "needs KUBEBUILDER_ASSETS (bash .ci/test)"]
    fn a_public_issuer_named_by_the_server_signs_tokens_sts_verifies_against_its_documents() {
        const PUBLIC: &str = "https://oidc.ecr-refresh.test/cluster-1";
        let own = ControlPlane::start_with_issuer(PUBLIC);
        let cp = &own;
        let installed = install_on(cp);
        assert_eq!(
            installed.issuer, PUBLIC,
            "the discovery document names the public issuer"
        );
        let discovery: Value =
            serde_json::from_str(&cp.get_raw("/.well-known/openid-configuration")).unwrap();
        assert_eq!(discovery["jwks_uri"], format!("{PUBLIC}/openid/v1/jwks"));
        namespaces(cp, &["keyless-public"]);
        let (sts, issued) = sts_for(&installed);
        let h = RealHarness::new(cp);
        h.ecr.require_signer(issued.signer());
        let (namespace, name) = common::real::SERVICE_ACCOUNT;
        let token = minted(cp, namespace, name, AUDIENCE);

        let run = run(&h, &installed, &sts, "keyless-public", &token, &[]);

        run.expect_code(0);
        assert_eq!(run.outcome("keyless-public"), "created");
        assert_eq!(actions(&sts.calls()), [("AssumeRoleWithWebIdentity", "OK")]);
        assert!(h.secret("keyless-public").is_some());
    }
}

/// `ecr-refresh check` names the source a refresh with the same environment would sign
/// with, the first one set up in the chain's order, and what set it up; it asks AWS nothing.
/// With none set up, a refresh would fail: the check says so and exits 1.
#[test]
fn check_names_the_credential_source_a_refresh_would_use() {
    let h = Harness::new();
    h.namespaces(&["team-a"]);
    h.run(&[]).expect_code(0);
    let sts = FakeSts::start();
    let token = h.dir.path().join("token");
    write(&token, "a-token");
    let token = token.to_string_lossy().into_owned();
    let web_identity = [
        ("AWS_ROLE_ARN", FEDERATED),
        ("AWS_WEB_IDENTITY_TOKEN_FILE", token.as_str()),
    ];
    // What, keyless (the harness's keys removed), the variables added, what the check says.
    type Case<'a> = (&'a str, bool, Vec<(&'a str, &'a str)>, &'a str);
    let cases: Vec<Case<'_>> = vec![
        (
            "the harness's keys",
            false,
            vec![],
            "static keys (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY)",
        ),
        (
            "keys before web identity, as the chain orders them",
            false,
            web_identity.to_vec(),
            "static keys (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY)",
        ),
        (
            "web identity",
            true,
            web_identity.to_vec(),
            "web identity (AWS_ROLE_ARN, AWS_WEB_IDENTITY_TOKEN_FILE)",
        ),
        (
            "a profile",
            true,
            vec![("AWS_PROFILE", "ecr")],
            "profile ecr (AWS_PROFILE)",
        ),
        (
            "EKS Pod Identity",
            true,
            vec![(
                "AWS_CONTAINER_CREDENTIALS_FULL_URI",
                "http://169.254.170.23/v1/credentials",
            )],
            "container credentials (AWS_CONTAINER_CREDENTIALS_FULL_URI)",
        ),
        (
            "instance metadata",
            true,
            vec![("AWS_EC2_METADATA_DISABLED", "false")],
            "instance metadata (no other source set up)",
        ),
        (
            "assume role over keys",
            false,
            vec![("ECR_REFRESH_ASSUME_ROLE_ARN", READER)],
            "assume role arn:aws:iam::210987654321:role/ecr-reader over static keys (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY)",
        ),
    ];
    for (what, keyless, extra, said) in cases {
        let mut env = vec![("ECR_REFRESH_MODE", "check")];
        env.extend(extra);
        let run = h.checked(command(&h, &sts, keyless, &env).output().expect("runs"));
        run.expect_code(0);
        let lines = run.messages_starting("credentials");
        assert_eq!(
            lines.len(),
            1,
            "{what}: one credentials line: {}",
            run.stdout
        );
        assert_eq!(lines[0]["credentials"], said, "{what}");
    }
    assert_eq!(sts.calls(), [], "a check asks AWS nothing");

    // Nothing set up (instance metadata off, as the harness has it): a refresh would fail.
    let run = h.checked(
        command(&h, &sts, true, &[("ECR_REFRESH_MODE", "check")])
            .output()
            .expect("runs"),
    );
    run.expect_code(1);
    let lines = run.messages_starting("credentials: a refresh would fail");
    assert_eq!(lines.len(), 1, "{}", run.stdout);
    assert_eq!(lines[0]["credentials"], "none");
    assert!(
        lines[0]["error"]
            .as_str()
            .is_some_and(|e| e.starts_with("no AWS credentials: none of the sources is set up")),
        "{}",
        lines[0]
    );
}
