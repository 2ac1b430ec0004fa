//! A registry stand-in that authenticates the way ECR Public (`public.ecr.aws`) does: the token
//! auth of the distribution spec (distribution/distribution docs/spec/auth/token.md), not basic
//! auth. For ecr-refresh's login-check tests; Debian's docker-registry only does token auth with
//! signed JWTs, which would need a certificate authority in the test.
//!
//! What public.ecr.aws does, from public sources (client code and tests that record its answers,
//! e.g. kreuzwerker/terraform-provider-docker#666, and many registry clients' test fixtures):
//! - `GET /v2/` unauthenticated: `401` with
//!   `WWW-Authenticate: Bearer realm="https://public.ecr.aws/token/",service="public.ecr.aws",scope="aws"`;
//! - `GET /token/?service=public.ecr.aws&scope=aws` with basic auth `AWS:<password of ECR Public's
//!   GetAuthorizationToken>`: `200 {"token": ..}`;
//! - `GET /v2/...` with `Authorization: Bearer <that token>`: served;
//! - basic auth sent straight to `/v2/`: refused, `{"errors":[{"code":"DENIED","message":"Your
//!   Authorization Token is invalid."}]}` (the status of that refusal is not recorded in what we
//!   found; 403 here).
//!
//! Here the realm is this stand-in's own `/token/` (plain HTTP on loopback).

use crate::serve::{self, Served};
use std::sync::{Arc, Mutex, MutexGuard};

use axum::extract::{RawQuery, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;

/// The `service` of the challenge, as public.ecr.aws names itself.
pub const SERVICE: &str = "public.ecr.aws";
/// The `scope` of the challenge: public.ecr.aws asks for `aws`.
pub const SCOPE: &str = "aws";

#[derive(Debug, Default)]
struct Inner {
    user: String,
    password: String,
    realm: String,
    issued: Vec<String>,
    /// Every request: method, path and query, and the Authorization scheme sent (or "-").
    requests: Vec<(String, String)>,
}

type Shared = Arc<Mutex<Inner>>;

fn lock(state: &Shared) -> MutexGuard<'_, Inner> {
    state
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A running token-auth registry stand-in. Dropping it stops it.
pub struct FakeTokenRegistry {
    url: String,
    state: Shared,
    _served: Served,
}

impl FakeTokenRegistry {
    /// Issues bearer tokens to basic auth `user:password` only.
    pub fn start(user: &str, password: &str) -> Self {
        let bound = serve::bind();
        let url = bound.url.clone();
        let state = Shared::new(Mutex::new(Inner {
            user: user.to_owned(),
            password: password.to_owned(),
            realm: format!("{url}/token/"),
            ..Inner::default()
        }));
        let app = axum::Router::new()
            .fallback(handle)
            .with_state(Arc::clone(&state));
        Self {
            url,
            state,
            _served: Served::start("token registry stand-in", bound, app),
        }
    }

    /// `http://127.0.0.1:PORT`
    pub fn url(&self) -> String {
        self.url.clone()
    }

    /// Every request seen: `METHOD path?query` and the Authorization scheme sent ("-": none).
    pub fn requests(&self) -> Vec<(String, String)> {
        lock(&self.state).requests.clone()
    }
}

async fn handle(
    State(state): State<Shared>,
    method: axum::http::Method,
    uri: Uri,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> Response {
    let authorization = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let (scheme, credentials) = authorization.split_once(' ').unwrap_or(("-", ""));
    let mut state = lock(&state);
    state.requests.push((
        format!(
            "{method} {}{}",
            uri.path(),
            query
                .as_deref()
                .map(|q| format!("?{q}"))
                .unwrap_or_default()
        ),
        scheme.to_owned(),
    ));
    let path = uri.path();
    if path == "/token/" {
        let wanted = BASE64.encode(format!("{}:{}", state.user, state.password));
        let asks_for_us = query.as_deref().is_some_and(|q| {
            q.split('&').any(|p| p == format!("service={SERVICE}"))
                && q.split('&').any(|p| p == format!("scope={SCOPE}"))
        });
        if !scheme.eq_ignore_ascii_case("basic") || credentials != wanted || !asks_for_us {
            return errors(
                StatusCode::UNAUTHORIZED,
                "UNAUTHORIZED",
                "authentication required",
            );
        }
        let token = uuid::Uuid::new_v4().to_string();
        state.issued.push(token.clone());
        return (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "application/json")],
            serde_json::json!({ "token": token }).to_string(),
        )
            .into_response();
    }
    if !path.starts_with("/v2/") {
        return errors(StatusCode::NOT_FOUND, "NOT_FOUND", "not found");
    }
    if scheme.eq_ignore_ascii_case("bearer") && state.issued.iter().any(|t| t == credentials) {
        return (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "application/json")],
            "{}",
        )
            .into_response();
    }
    if scheme.eq_ignore_ascii_case("basic") {
        return errors(
            StatusCode::FORBIDDEN,
            "DENIED",
            "Your Authorization Token is invalid.",
        );
    }
    let mut response = errors(
        StatusCode::UNAUTHORIZED,
        "UNAUTHORIZED",
        "authentication required",
    );
    let challenge = format!(
        r#"Bearer realm="{}",service="{SERVICE}",scope="{SCOPE}""#,
        state.realm
    );
    if let Ok(value) = HeaderValue::from_str(&challenge) {
        response
            .headers_mut()
            .insert(header::WWW_AUTHENTICATE, value);
    }
    response
}

/// A distribution-spec error body.
fn errors(status: StatusCode, code: &str, message: &str) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        serde_json::json!({ "errors": [{ "code": code, "message": message }] }).to_string(),
    )
        .into_response()
}
