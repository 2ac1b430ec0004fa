//! Who a request is made as: a TokenRequest's token authenticates as its ServiceAccount,
//! `Impersonate-User` acts as the user it names, and every recorded request says which, so a
//! fleet test can tell the kubeconfig's credential from the spoke's ServiceAccount.

use crate::common::*;

use fake_cluster::{FakeCluster, Resource};
use serde_json::{Value, json};

const HUB: &str = "system:serviceaccount:ecr-refresh:ecr-refresh-hub";
const SPOKE: &str = "system:serviceaccount:ecr-refresh:ecr-refresh";
const TOKEN_PATH: &str = "/api/v1/namespaces/ecr-refresh/serviceaccounts/ecr-refresh/token";

fn spoke() -> FakeCluster {
    let c = FakeCluster::builder().kubeconfig_user(HUB).start();
    c.add_namespace("ecr-refresh", &[]);
    c.seed(
        Resource::ServiceAccounts,
        json!({"metadata": {"name": "ecr-refresh", "namespace": "ecr-refresh"}}),
        "kubectl-create",
    );
    c
}

fn token_request(expiration: Option<i64>) -> String {
    let mut body =
        json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}});
    if let Some(e) = expiration {
        body["spec"]["expirationSeconds"] = json!(e);
    }
    body.to_string()
}

fn as_token(c: &FakeCluster, method: &str, target: &str, token: &str, body: &str) -> Response {
    let bearer = format!("Bearer {token}");
    let content_type = (!body.is_empty()).then_some("application/json");
    send_with(
        &c.url(),
        method,
        target,
        &[("Authorization", &bearer)],
        content_type,
        body,
    )
}

fn who(c: &FakeCluster, headers: &[(&str, &str)]) -> Value {
    let r = send_with(
        &c.url(),
        "POST",
        "/apis/authentication.k8s.io/v1/selfsubjectreviews",
        headers,
        Some("application/json"),
        r#"{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}"#,
    );
    assert_eq!(r.status, 201, "{:?}", r.body);
    r.body["status"]["userInfo"].clone()
}

#[test]
fn a_token_request_mints_a_token_that_authenticates_as_the_service_account() {
    let c = spoke();

    let r = as_token(
        &c,
        "POST",
        TOKEN_PATH,
        "fake-token",
        &token_request(Some(600)),
    );

    assert_eq!(r.status, 201, "{:?}", r.body);
    assert_eq!(r.body["kind"], "TokenRequest");
    assert_eq!(r.body["apiVersion"], "authentication.k8s.io/v1");
    assert_eq!(r.body["metadata"]["name"], "ecr-refresh");
    assert_eq!(r.body["metadata"]["namespace"], "ecr-refresh");
    assert_eq!(r.body["spec"]["expirationSeconds"], 600);
    let token = r.body["status"]["token"].as_str().unwrap().to_owned();
    assert!(!token.is_empty());
    let expires = chrono::DateTime::parse_from_rfc3339(
        r.body["status"]["expirationTimestamp"].as_str().unwrap(),
    )
    .unwrap()
    .timestamp();
    let now = chrono::Utc::now().timestamp();
    assert!(
        (now + 590..=now + 610).contains(&expires),
        "expires in about 600 s: {}",
        r.body["status"]["expirationTimestamp"]
    );

    let asked = c.token_requests();
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0].namespace, "ecr-refresh");
    assert_eq!(asked[0].service_account, "ecr-refresh");
    assert_eq!(asked[0].expiration_seconds, Some(600));
    assert_eq!(asked[0].requested_by, HUB);
    assert_eq!(asked[0].token, token);

    assert_eq!(
        as_token(&c, "GET", "/api/v1/namespaces", &token, "").status,
        200
    );
    let bearer = format!("Bearer {token}");
    let info = who(&c, &[("Authorization", &bearer)]);
    assert_eq!(info["username"], SPOKE);
    assert!(
        info["groups"]
            .as_array()
            .unwrap()
            .contains(&json!("system:serviceaccounts:ecr-refresh")),
        "{info}"
    );
    assert_eq!(
        who(&c, &[])["username"],
        HUB,
        "no token: the kubeconfig's user"
    );

    let log = c.requests();
    let users: Vec<(&str, &str, &str)> = log
        .iter()
        .map(|r| (r.path.as_str(), r.user.as_str(), r.credential_user.as_str()))
        .collect();
    assert_eq!(
        users,
        [
            (TOKEN_PATH, HUB, HUB),
            ("/api/v1/namespaces", SPOKE, SPOKE),
            (
                "/apis/authentication.k8s.io/v1/selfsubjectreviews",
                SPOKE,
                SPOKE
            ),
            (
                "/apis/authentication.k8s.io/v1/selfsubjectreviews",
                HUB,
                HUB
            ),
        ]
    );
    assert_eq!(c.kubeconfig_user(), HUB);
}

#[test]
fn a_token_request_is_refused_as_the_real_server_refuses_it() {
    let c = spoke();

    let missing = as_token(
        &c,
        "POST",
        "/api/v1/namespaces/ecr-refresh/serviceaccounts/nobody/token",
        "fake-token",
        &token_request(Some(600)),
    );
    assert_eq!(missing.status, 404, "{:?}", missing.body);
    assert_eq!(missing.reason(), "NotFound");
    assert_eq!(missing.message(), "serviceaccounts \"nobody\" not found");
    assert_eq!(missing.body["details"]["kind"], "serviceaccounts");

    let short = as_token(
        &c,
        "POST",
        TOKEN_PATH,
        "fake-token",
        &token_request(Some(599)),
    );
    assert_eq!(short.status, 422, "{:?}", short.body);
    assert_eq!(
        short.message(),
        "TokenRequest.authentication.k8s.io \"\" is invalid: spec.expirationSeconds: Invalid value: 599: may not specify a duration less than 10 minutes"
    );

    assert_eq!(
        as_token(&c, "GET", TOKEN_PATH, "fake-token", "").status,
        405
    );

    let defaulted = as_token(&c, "POST", TOKEN_PATH, "fake-token", &token_request(None));
    assert_eq!(defaulted.status, 201, "{:?}", defaulted.body);
    assert_eq!(defaulted.body["spec"]["expirationSeconds"], 3600);
    let asked = c.token_requests();
    assert_eq!(asked.len(), 1, "only the token handed out is remembered");
    assert_eq!(asked[0].expiration_seconds, None);
}

#[test]
fn a_request_impersonating_a_service_account_is_made_as_it() {
    let c = spoke();
    let impersonate = [("Impersonate-User", SPOKE)];

    let r = send_with(
        &c.url(),
        "GET",
        "/api/v1/namespaces",
        &impersonate,
        None,
        "",
    );
    assert_eq!(r.status, 200);
    let info = who(&c, &impersonate);
    assert_eq!(info["username"], SPOKE);
    assert!(
        info["groups"]
            .as_array()
            .unwrap()
            .contains(&json!("system:serviceaccounts")),
        "a ServiceAccount's groups are added: {info}"
    );

    let log = c.requests();
    assert!(log.iter().all(|r| r.user == SPOKE), "{log:?}");
    assert!(log.iter().all(|r| r.credential_user == HUB), "{log:?}");
    assert!(c.token_requests().is_empty());
}

/// The hub's one right in a spoke, as the spoke install grants it: a token for (or the
/// impersonation of) the ServiceAccount `ecr-refresh`, nothing else.
const HUB_RBAC: &str = "
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: ecr-refresh-hub, namespace: ecr-refresh}
rules:
- apiGroups: [\"\"]
  resources: [serviceaccounts/token]
  verbs: [create]
  resourceNames: [ecr-refresh]
- apiGroups: [\"\"]
  resources: [serviceaccounts]
  verbs: [impersonate]
  resourceNames: [ecr-refresh]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: ecr-refresh-hub, namespace: ecr-refresh}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: ecr-refresh-hub}
subjects:
- {kind: ServiceAccount, name: ecr-refresh-hub, namespace: ecr-refresh}
";

#[test]
fn rbac_holds_the_token_request_and_the_impersonation_to_the_named_service_account() {
    let c = FakeCluster::builder()
        .service_account("ecr-refresh", "ecr-refresh-hub")
        .rbac_from_yaml(HUB_RBAC)
        .start();
    for name in ["ecr-refresh", "other"] {
        c.seed(
            Resource::ServiceAccounts,
            json!({"metadata": {"name": name, "namespace": "ecr-refresh"}}),
            "kubectl-create",
        );
    }

    let granted = as_token(
        &c,
        "POST",
        TOKEN_PATH,
        "fake-token",
        &token_request(Some(600)),
    );
    assert_eq!(granted.status, 201, "{:?}", granted.body);
    let refused = as_token(
        &c,
        "POST",
        "/api/v1/namespaces/ecr-refresh/serviceaccounts/other/token",
        "fake-token",
        &token_request(Some(600)),
    );
    assert_eq!(refused.status, 403, "{:?}", refused.body);
    assert_eq!(
        refused.message(),
        format!(
            "serviceaccounts \"other\" is forbidden: User \"{HUB}\" cannot create resource \"serviceaccounts/token\" in API group \"\" in the namespace \"ecr-refresh\""
        )
    );
    assert_eq!(
        as_token(&c, "GET", "/api/v1/namespaces", "fake-token", "").status,
        403,
        "the hub's credential can do nothing else"
    );

    let r = send_with(
        &c.url(),
        "GET",
        "/api/v1/namespaces",
        &[("Impersonate-User", SPOKE)],
        None,
        "",
    );
    assert_eq!(r.status, 200, "{:?}", r.body);
    let other = "system:serviceaccount:ecr-refresh:other";
    let r = send_with(
        &c.url(),
        "GET",
        "/api/v1/namespaces",
        &[("Impersonate-User", other)],
        None,
        "",
    );
    assert_eq!(r.status, 403, "{:?}", r.body);
    assert_eq!(
        r.message(),
        format!(
            "serviceaccounts \"other\" is forbidden: User \"{HUB}\" cannot impersonate resource \"serviceaccounts\" in API group \"\" in the namespace \"ecr-refresh\""
        )
    );
}
