//! ECR_REFRESH_VERIFY_LOGIN against a real registry: Debian's `docker-registry` (the CNCF
//! distribution registry) with htpasswd auth on loopback, standing in for ECR's proxyEndpoint.

use crate::common;

use common::registry::{Registry, free_port};
use common::*;

const VERIFY: (&str, &str) = ("ECR_REFRESH_VERIFY_LOGIN", "true");

#[test]
#[ignore = "needs docker-registry (bash .ci/test)"]
fn a_token_the_registry_accepts_passes_the_login_check_and_the_run_writes() {
    let registry = Registry::start("AWS", "the-token-ecr-hands-out");
    let h = Harness::new();
    h.namespaces(&["team-a"]);
    h.ecr.set_password(REGION, "the-token-ecr-hands-out");
    h.ecr.set_proxy_endpoint(&registry.endpoint);

    let run = h.run(&[VERIFY]);

    run.expect_code(0);
    let passed = run
        .lines
        .iter()
        .find(|l| l["message"] == "login check passed")
        .unwrap_or_else(|| panic!("no \"login check passed\" line:\n{}", run.stdout));
    assert_eq!(passed["registry"], registry.endpoint);
    assert_eq!(passed["region"], REGION);
    assert_eq!(run.outcome("team-a"), "created");
    let secret = h.secret("team-a").expect("the Secret is written");
    assert_eq!(password(&secret, REGISTRY), "the-token-ecr-hands-out");
}

#[test]
#[ignore = "needs docker-registry (bash .ci/test)"]
fn a_token_the_registry_refuses_exits_3_and_writes_nothing() {
    let registry = Registry::start("AWS", "a-password-ecr-never-hands-out");
    let h = Harness::new();
    h.namespaces(&["team-a"]);
    h.ecr.set_password(REGION, "the-token-ecr-hands-out");
    h.ecr.set_proxy_endpoint(&registry.endpoint);

    let run = h.run(&[VERIFY]);

    run.expect_code(3);
    let error = last_error(&run);
    assert!(
        error.contains(&format!("registry {} refused", registry.endpoint))
            && error.contains("HTTP 401"),
        "{error}"
    );
    assert_eq!(
        h.statuses("POST", "/secrets"),
        Vec::<u16>::new(),
        "nothing is written once the login check fails"
    );
    assert!(h.secret("team-a").is_none());
}

#[test]
fn an_unreachable_registry_exits_3_naming_the_host() {
    let closed = free_port();
    let h = Harness::new();
    h.namespaces(&["team-a"]);
    h.ecr.set_proxy_endpoint(&format!("http://{closed}"));

    let run = h.run(&[VERIFY]);

    run.expect_code(3);
    let error = last_error(&run);
    assert!(
        error.contains(&closed.to_string()) && error.contains("could not be reached"),
        "{error}"
    );
    assert_eq!(h.statuses("POST", "/secrets"), Vec::<u16>::new());
    assert!(h.secret("team-a").is_none());
}

fn last_error(run: &Run) -> String {
    run.lines
        .last()
        .and_then(|l| l["error"].as_str())
        .unwrap_or_else(|| panic!("the last line carries an error:\n{}", run.stdout))
        .to_owned()
}
