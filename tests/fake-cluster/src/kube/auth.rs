//! Who a request is made as: the user its credential authenticates, or the one it
//! impersonates; and the TokenRequest that mints a ServiceAccount's token
//! (`POST /api/v1/namespaces/NS/serviceaccounts/NAME/token`), so a fleet's hub can act in
//! a spoke as the spoke's own ServiceAccount.
//!
//! The fake authenticates as the real server's authenticators do for what ecr-refresh sends:
//! - `Authorization: Bearer T`, T a token this server's TokenRequest issued: that
//!   ServiceAccount (`system:serviceaccount:NS:NAME`, k8s.io/apiserver
//!   pkg/authentication/serviceaccount MakeUsername; its groups by MakeGroupNames).
//! - any other credential, or none: the kubeconfig's user ([`super::FakeCluster::kubeconfig`]
//!   hands out `fake-token`). Unlike the real server, an unknown token is not refused 401:
//!   the fake has one credential of its own and takes every other as it.
//! - `Impersonate-User: U` (and `Impersonate-Group`): the request acts as U, as the real
//!   server's impersonation filter (k8s.io/apiserver pkg/endpoints/filters/impersonation.go)
//!   makes it; a ServiceAccount's user gets its ServiceAccount groups added, as that filter
//!   adds them. Impersonating is authorized (verb `impersonate` on `serviceaccounts` in the
//!   ServiceAccount's namespace, named; on `users` otherwise) only where RBAC holds the caller.

use serde_json::{Value, json};

use super::rbac::Identity;
use super::status::{self, ApiError, Details};

/// A user as the authenticators hand it on: a name and groups.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct User {
    pub name: String,
    pub groups: Vec<String>,
}

impl User {
    pub(crate) fn of(identity: &Identity) -> Self {
        User {
            name: identity.username(),
            groups: identity.groups(),
        }
    }

    /// A user by name: a ServiceAccount's user gets its ServiceAccount groups, any other
    /// `system:authenticated` alone.
    pub(crate) fn named(name: &str) -> Self {
        match service_account_of(name) {
            Some(identity) => User::of(&identity),
            None => User {
                name: name.to_owned(),
                groups: vec!["system:authenticated".into()],
            },
        }
    }
}

/// The ServiceAccount a user name `system:serviceaccount:NS:NAME` names.
pub(crate) fn service_account_of(username: &str) -> Option<Identity> {
    let rest = username.strip_prefix("system:serviceaccount:")?;
    let (namespace, name) = rest.split_once(':')?;
    (!namespace.is_empty() && !name.is_empty() && !name.contains(':')).then(|| Identity {
        namespace: namespace.to_owned(),
        name: name.to_owned(),
    })
}

/// One token a TokenRequest issued, as a test reads it back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenRequested {
    /// The ServiceAccount's namespace and name.
    pub namespace: String,
    pub service_account: String,
    /// The spec's `expirationSeconds` as sent (None: not sent, the server's default 3600).
    pub expiration_seconds: Option<i64>,
    /// The user who asked (the credential's user, or the one it impersonated).
    pub requested_by: String,
    /// The token handed out.
    pub token: String,
}

/// The default of `TokenRequestSpec.expirationSeconds` (pkg/apis/authentication/v1
/// SetDefaults_TokenRequestSpec), and its bounds (pkg/apis/authentication/validation:
/// MinTokenAgeSec, MaxTokenAgeSec).
const DEFAULT_EXPIRATION: i64 = 3600;
const MIN_EXPIRATION: i64 = 600;
const MAX_EXPIRATION: i64 = 1 << 32;

/// The audience kube-apiserver's tokens carry by default (its --api-audiences, from
/// --service-account-issuer as tests/control-plane starts it).
const AUDIENCE: &str = "https://kubernetes.default.svc.cluster.local";

/// What the request's body asks, checked as token.go's Create and ValidateTokenRequest check
/// it: the expiry (defaulted, then at least 10 minutes and at most 2^32 seconds) and the
/// audiences. `Ok` carries the expiry as sent (None when not sent) and the one to answer.
pub(crate) fn read_request(body: &Value) -> Result<(Option<i64>, i64, Vec<String>), ApiError> {
    if !body.is_object() {
        return Err(status::bad_request(
            "the body of the request must be an object",
        ));
    }
    let kind = body["kind"].as_str().unwrap_or_default();
    if !kind.is_empty() && kind != "TokenRequest" {
        return Err(status::bad_request(format!(
            "the API version in the data ({}) does not match the expected API version (authentication.k8s.io/v1)",
            body["apiVersion"].as_str().unwrap_or_default()
        )));
    }
    let sent = match &body["spec"]["expirationSeconds"] {
        Value::Null => None,
        v => Some(v.as_i64().ok_or_else(|| {
            status::bad_request(format!(
                "TokenRequest in version \"v1\" cannot be handled as a TokenRequest: json: cannot unmarshal {v} into Go struct field TokenRequestSpec.spec.expirationSeconds of type int64"
            ))
        })?),
    };
    let expiration = sent.unwrap_or(DEFAULT_EXPIRATION);
    let too = if expiration < MIN_EXPIRATION {
        Some("may not specify a duration less than 10 minutes")
    } else if expiration > MAX_EXPIRATION {
        Some("may not specify a duration larger than 2^32 seconds")
    } else {
        None
    };
    if let Some(detail) = too {
        // errors.NewInvalid(TokenRequest.authentication.k8s.io, "", ...): an int64 value.
        let mut details = Details::named("TokenRequest", "");
        details.group = "authentication.k8s.io".into();
        details.causes = vec![status::Cause {
            reason: "FieldValueInvalid",
            message: format!("Invalid value: {expiration}: {detail}"),
            field: "spec.expirationSeconds".into(),
        }];
        return Err(ApiError::new(
            422,
            "Invalid",
            format!(
                "TokenRequest.authentication.k8s.io \"\" is invalid: spec.expirationSeconds: Invalid value: {expiration}: {detail}"
            ),
            Some(details),
        ));
    }
    let audiences: Vec<String> = body["spec"]["audiences"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(str::to_owned)
        .collect();
    let audiences = if audiences.is_empty() {
        vec![AUDIENCE.to_owned()]
    } else {
        audiences
    };
    Ok((sent, expiration, audiences))
}

/// The TokenRequest answered (201): the request's spec, defaulted, and the token in `status`
/// with its expiry (token.go: `out.Status = TokenRequestStatus{Token, ExpirationTimestamp}`).
pub(crate) fn answer(
    namespace: &str,
    name: &str,
    expiration: i64,
    audiences: &[String],
    token: &str,
) -> Value {
    let expires = chrono::Utc::now() + chrono::Duration::seconds(expiration);
    json!({
        "kind": "TokenRequest",
        "apiVersion": "authentication.k8s.io/v1",
        "metadata": {"name": name, "namespace": namespace, "creationTimestamp": null},
        "spec": {
            "audiences": audiences,
            "expirationSeconds": expiration,
            "boundObjectRef": null,
        },
        "status": {
            "token": token,
            "expirationTimestamp": expires.format("%Y-%m-%dT%H:%M:%SZ").to_string(),
        }
    })
}

/// The bearer token of an `Authorization` header value.
pub(crate) fn bearer(authorization: Option<&str>) -> Option<&str> {
    let value = authorization?.trim();
    let (scheme, token) = value.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim())
        .filter(|t| !t.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_service_account_user_name_names_its_service_account() {
        let sa = service_account_of("system:serviceaccount:ecr-refresh:ecr-refresh").unwrap();
        assert_eq!(
            (sa.namespace.as_str(), sa.name.as_str()),
            ("ecr-refresh", "ecr-refresh")
        );
        for not in [
            "admin",
            "system:serviceaccount:ns",
            "system:serviceaccount::x",
            "system:serviceaccount:ns:",
            "system:serviceaccount:a:b:c",
        ] {
            assert_eq!(service_account_of(not), None, "{not}");
        }
        assert_eq!(User::named("admin").groups, vec!["system:authenticated"]);
        assert!(
            User::named("system:serviceaccount:a:b")
                .groups
                .contains(&"system:serviceaccounts:a".to_owned())
        );
    }

    #[test]
    fn the_expiry_is_defaulted_then_bounded_as_the_real_server_bounds_it() {
        let ok = |body: Value| read_request(&body).map(|(sent, e, _)| (sent, e));
        assert_eq!(ok(json!({"spec": {}})).unwrap(), (None, 3600));
        assert_eq!(
            ok(json!({"spec": {"expirationSeconds": 600}})).unwrap(),
            (Some(600), 600)
        );
        let refused = ok(json!({"spec": {"expirationSeconds": 599}})).unwrap_err();
        assert_eq!(refused.code, 422);
        assert_eq!(
            refused.body["message"],
            "TokenRequest.authentication.k8s.io \"\" is invalid: spec.expirationSeconds: Invalid value: 599: may not specify a duration less than 10 minutes"
        );
        assert_eq!(
            ok(json!({"spec": {"expirationSeconds": (1i64 << 32) + 1}}))
                .unwrap_err()
                .code,
            422
        );
    }

    #[test]
    fn only_a_bearer_scheme_carries_a_token() {
        assert_eq!(bearer(Some("Bearer abc")), Some("abc"));
        assert_eq!(bearer(Some("bearer abc ")), Some("abc"));
        assert_eq!(bearer(Some("Basic YTpi")), None);
        assert_eq!(bearer(Some("Bearer ")), None);
        assert_eq!(bearer(None), None);
    }
}
