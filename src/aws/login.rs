//! The login check: each token tried against its registry before anything is written.
//!
//! It authenticates the way a registry client (docker, containerd) does, so it covers both kinds
//! of registry ECR has:
//! - private ECR answers an anonymous `GET /v2/` with `401` and
//!   `WWW-Authenticate: Basic realm="https://<host>/",service="ecr.amazonaws.com"`: the check sends
//!   basic auth `AWS:<password>`;
//! - ECR Public (`public.ecr.aws`) answers with
//!   `WWW-Authenticate: Bearer realm="https://public.ecr.aws/token/",service="public.ecr.aws",scope="aws"`:
//!   the token auth of the distribution spec (distribution/distribution docs/spec/auth/token.md).
//!   The check asks the realm for a bearer token with basic auth `AWS:<password>`
//!   (`GET <realm>?service=..&scope=..`, answered `{"token": ..}` or `{"access_token": ..}`) and
//!   retries `GET /v2/` with `Authorization: Bearer <token>`.

use std::time::Duration;

use reqwest::header::{AUTHORIZATION, WWW_AUTHENTICATE};
use reqwest::{Client, StatusCode, Url};
use secrecy::{ExposeSecret, SecretString};
use tracing::info;

use crate::aws::ecr::{RegionToken, Tokens};
use crate::logging::error_chain;

const LOGIN_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, thiserror::Error)]
pub enum LoginError {
    #[error(
        "registry {endpoint} refused the ECR token (HTTP {status}); check that the credentials' account can \
         pull from that registry (repository policy, ecr:BatchGetImage) and that the registry host is right"
    )]
    Refused { endpoint: String, status: u16 },
    #[error(
        "the token service {realm} of registry {endpoint} refused the ECR token (HTTP {status}); check that \
         the token came from the registry's own API (ECR Public's for public.ecr.aws)"
    )]
    TokenRefused {
        endpoint: String,
        realm: String,
        status: u16,
    },
    #[error("registry {endpoint} answered HTTP {status} to the login check; expected 200")]
    Unexpected { endpoint: String, status: u16 },
    #[error("registry {endpoint} asked for authentication the login check cannot give: {reason}")]
    Challenge { endpoint: String, reason: String },
    #[error(
        "registry {endpoint} could not be reached for the login check: {reason}; check DNS, egress and proxies"
    )]
    Unreachable { endpoint: String, reason: String },
    #[error("could not build the HTTP client for the login check: {0}")]
    Client(String),
}

/// Tries every token at its registry: the endpoints ECR returned, or, where an API returns none
/// (ECR Public), the registry hosts themselves.
pub async fn verify(tokens: &Tokens) -> Result<(), LoginError> {
    let client = reqwest::Client::builder()
        .timeout(LOGIN_TIMEOUT)
        .build()
        .map_err(|e| LoginError::Client(e.to_string()))?;
    for token in &tokens.0 {
        for endpoint in endpoints(token) {
            let auth = login(&client, &endpoint, &token.password).await?;
            info!(registry = %endpoint, region = %token.region, api = %token.api, auth, "login check passed");
        }
    }
    Ok(())
}

/// Where a token is tried: ECR's proxyEndpoints, else `https://<host>` of each host the token is
/// written under, the dual-stack twins left out (the same registry behind another address).
pub fn endpoints(token: &RegionToken) -> Vec<String> {
    let mut endpoints = token.proxy_endpoints.clone();
    if endpoints.is_empty() {
        let hosts: Vec<_> = token
            .registries
            .iter()
            .filter(|r| !r.is_dual_stack())
            .collect();
        let hosts = if hosts.is_empty() {
            token.registries.iter().collect()
        } else {
            hosts
        };
        endpoints = hosts
            .into_iter()
            .map(|r| format!("https://{}", r.host()))
            .collect();
    }
    endpoints.dedup();
    endpoints
}

/// One registry: an anonymous `GET /v2/` learns how it authenticates, then the token is used that
/// way. Returns how it authenticated ("basic", "bearer", or "none" for a registry that asks for
/// no credentials).
pub async fn login(
    client: &Client,
    endpoint: &str,
    password: &SecretString,
) -> Result<&'static str, LoginError> {
    let v2 = Url::parse(&format!("{}/v2/", endpoint.trim_end_matches('/'))).map_err(|e| {
        LoginError::Unreachable {
            endpoint: endpoint.to_owned(),
            reason: format!("not a URL: {e}"),
        }
    })?;
    let unreachable = |e: reqwest::Error| LoginError::Unreachable {
        endpoint: endpoint.to_owned(),
        reason: error_chain(&e),
    };
    let anonymous = client.get(v2.clone()).send().await.map_err(unreachable)?;
    match anonymous.status() {
        StatusCode::OK => return Ok("none"),
        StatusCode::UNAUTHORIZED => {}
        status => {
            return Err(LoginError::Unexpected {
                endpoint: endpoint.to_owned(),
                status: status.as_u16(),
            });
        }
    }
    let challenge = anonymous
        .headers()
        .get(WWW_AUTHENTICATE)
        .and_then(|v| v.to_str().ok())
        .map(Challenge::parse)
        .unwrap_or_default();
    let (request, auth) = if challenge.scheme.eq_ignore_ascii_case("bearer") {
        let token = bearer_token(client, endpoint, &v2, &challenge, password).await?;
        (
            client
                .get(v2)
                .header(AUTHORIZATION, format!("Bearer {}", token.expose_secret())),
            "bearer",
        )
    } else {
        // Basic, or no challenge at all: basic auth is what ECR and docker login send.
        (
            client
                .get(v2)
                .basic_auth("AWS", Some(password.expose_secret())),
            "basic",
        )
    };
    let response = request.send().await.map_err(unreachable)?;
    match response.status().as_u16() {
        200 => Ok(auth),
        status @ (401 | 403) => Err(LoginError::Refused {
            endpoint: endpoint.to_owned(),
            status,
        }),
        status => Err(LoginError::Unexpected {
            endpoint: endpoint.to_owned(),
            status,
        }),
    }
}

/// `GET <realm>?service=..&scope=..` with basic auth `AWS:<password>`: the bearer token.
async fn bearer_token(
    client: &Client,
    endpoint: &str,
    v2: &Url,
    challenge: &Challenge,
    password: &SecretString,
) -> Result<SecretString, LoginError> {
    let refuse = |reason: String| LoginError::Challenge {
        endpoint: endpoint.to_owned(),
        reason,
    };
    let realm = challenge
        .param("realm")
        .ok_or_else(|| refuse("a Bearer challenge without a realm".into()))?;
    let mut url = Url::parse(realm)
        .or_else(|_| v2.join(realm))
        .map_err(|e| refuse(format!("realm {realm:?} is not a URL: {e}")))?;
    // The password goes to the realm: only over TLS, or to the registry's own host and port.
    let same_origin = url.scheme() == v2.scheme()
        && url.host_str() == v2.host_str()
        && url.port_or_known_default() == v2.port_or_known_default();
    if url.scheme() != "https" && !same_origin {
        return Err(refuse(format!(
            "realm {realm} is neither https nor the registry itself; the token is not sent there"
        )));
    }
    {
        let mut query = url.query_pairs_mut();
        for key in ["service", "scope"] {
            if let Some(value) = challenge.param(key) {
                query.append_pair(key, value);
            }
        }
    }
    let realm_text = url.to_string();
    let response = client
        .get(url)
        .basic_auth("AWS", Some(password.expose_secret()))
        .send()
        .await
        .map_err(|e| LoginError::Unreachable {
            endpoint: realm_text.clone(),
            reason: error_chain(&e),
        })?;
    let status = response.status().as_u16();
    if status != 200 {
        return Err(LoginError::TokenRefused {
            endpoint: endpoint.to_owned(),
            realm: realm.to_owned(),
            status,
        });
    }
    let body = response
        .bytes()
        .await
        .map_err(|e| LoginError::Unreachable {
            endpoint: realm_text,
            reason: error_chain(&e),
        })?;
    #[derive(serde::Deserialize)]
    struct TokenResponse {
        token: Option<String>,
        access_token: Option<String>,
    }
    let parsed: TokenResponse = serde_json::from_slice(&body)
        .map_err(|_| refuse(format!("the token service {realm} answered no JSON token")))?;
    // The spec names it `token`; OAuth2-style services send `access_token`.
    parsed
        .token
        .or(parsed.access_token)
        .filter(|t| !t.is_empty())
        .map(SecretString::from)
        .ok_or_else(|| refuse(format!("the token service {realm} answered no token")))
}

/// A `WWW-Authenticate` challenge: its scheme and its parameters.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Challenge {
    pub scheme: String,
    pub params: Vec<(String, String)>,
}

impl Challenge {
    /// Parses `Scheme k1="v1",k2=v2` (RFC 7235 auth-params, quoted strings with `\` escapes).
    /// Only the first challenge of the header is read: registries send one.
    pub fn parse(header: &str) -> Self {
        let header = header.trim();
        let (scheme, rest) = header.split_once(' ').unwrap_or((header, ""));
        let mut params = Vec::new();
        let mut chars = rest.chars().peekable();
        loop {
            while chars.next_if(|c| *c == ',' || c.is_whitespace()).is_some() {}
            let key: String = std::iter::from_fn(|| chars.next_if(|c| *c != '=' && *c != ','))
                .collect::<String>()
                .trim()
                .to_ascii_lowercase();
            if key.is_empty() {
                break;
            }
            if chars.next_if_eq(&'=').is_none() {
                // A bare token where a parameter should be: the start of another challenge.
                break;
            }
            while chars.next_if(|c| c.is_whitespace()).is_some() {}
            let mut value = String::new();
            if chars.next_if_eq(&'"').is_some() {
                while let Some(c) = chars.next() {
                    match c {
                        '"' => break,
                        '\\' => value.extend(chars.next()),
                        c => value.push(c),
                    }
                }
            } else {
                value = std::iter::from_fn(|| chars.next_if(|c| *c != ','))
                    .collect::<String>()
                    .trim()
                    .to_owned();
            }
            params.push((key, value));
        }
        Self {
            scheme: scheme.to_owned(),
            params,
        }
    }

    pub fn param(&self, key: &str) -> Option<&str> {
        self.params
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

#[cfg(test)]
mod tests {
    use std::str::FromStr;

    use aws_sdk_ecr::primitives::DateTime;

    use super::*;
    use crate::aws::ecr::TokenApi;
    use crate::aws::registry::RegistryHost;

    fn token(api: TokenApi, hosts: &[&str], proxy_endpoints: &[&str]) -> RegionToken {
        RegionToken {
            region: "us-east-1".into(),
            api,
            registries: hosts
                .iter()
                .map(|h| RegistryHost::from_str(h).unwrap())
                .collect(),
            password: SecretString::from("p"),
            expires_at: DateTime::from_secs(0),
            proxy_endpoints: proxy_endpoints.iter().map(|e| e.to_string()).collect(),
        }
    }

    #[test]
    fn ecr_public_is_checked_at_public_ecr_aws_and_private_registries_at_their_proxy_endpoint() {
        let public = token(
            TokenApi::EcrPublic,
            &["public.ecr.aws", "ecr-public.aws.com"],
            &[],
        );
        assert_eq!(endpoints(&public), ["https://public.ecr.aws"]);
        let twin_only = token(TokenApi::EcrPublic, &["ecr-public.aws.com"], &[]);
        assert_eq!(endpoints(&twin_only), ["https://ecr-public.aws.com"]);
        let private = token(
            TokenApi::Ecr {
                region: "us-east-1".into(),
            },
            &[
                "123456789012.dkr.ecr.us-east-1.amazonaws.com",
                "123456789012.dkr-ecr.us-east-1.on.aws",
            ],
            &["https://123456789012.dkr.ecr.us-east-1.amazonaws.com"],
        );
        assert_eq!(
            endpoints(&private),
            ["https://123456789012.dkr.ecr.us-east-1.amazonaws.com"]
        );
    }

    #[test]
    fn challenges_of_ecr_ecr_public_and_others_parse() {
        let public = Challenge::parse(
            r#"Bearer realm="https://public.ecr.aws/token/",service="public.ecr.aws",scope="aws""#,
        );
        assert_eq!(public.scheme, "Bearer");
        assert_eq!(public.param("realm"), Some("https://public.ecr.aws/token/"));
        assert_eq!(public.param("service"), Some("public.ecr.aws"));
        assert_eq!(public.param("scope"), Some("aws"));

        let private = Challenge::parse(
            r#"Basic realm="https://123456789012.dkr.ecr.eu-west-1.amazonaws.com/",service="ecr.amazonaws.com""#,
        );
        assert_eq!(private.scheme, "Basic");
        assert_eq!(private.param("service"), Some("ecr.amazonaws.com"));

        // Unquoted values, spaces, case and escapes.
        let odd = Challenge::parse(
            r#"bearer  REALM="https://r.example/t" , service=gcr.io, scope="a\"b,c""#,
        );
        assert_eq!(odd.param("realm"), Some("https://r.example/t"));
        assert_eq!(odd.param("service"), Some("gcr.io"));
        assert_eq!(odd.param("scope"), Some(r#"a"b,c"#));

        assert_eq!(Challenge::parse("").param("realm"), None);
    }
}
