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

use reqwest::header::{ACCEPT, AUTHORIZATION, WWW_AUTHENTICATE};
use reqwest::{Client, Method, Response, StatusCode, Url};
use secrecy::{ExposeSecret, SecretString};
use tracing::info;

use base64::Engine as _;

use crate::aws::ecr::{RegionToken, Tokens};
use crate::logging::error_chain;

const LOGIN_TIMEOUT: Duration = Duration::from_secs(10);

/// The HTTP client of every login, the refresh's and the check's.
pub fn client() -> Result<Client, reqwest::Error> {
    Client::builder().timeout(LOGIN_TIMEOUT).build()
}

/// A username and password for a registry: `AWS` and an ECR token, or what a Secret stores.
pub struct Credentials {
    pub username: String,
    pub password: SecretString,
}

/// One request to a registry, as a container runtime sends it.
pub struct Request<'a> {
    pub method: Method,
    pub url: &'a Url,
    /// The `Accept` header, if any.
    pub accept: Option<&'static str>,
}

impl Request<'_> {
    /// Sends it, with `authorization` (the header's value) if given.
    pub async fn send(
        &self,
        client: &Client,
        authorization: Option<&SecretString>,
    ) -> Result<Response, reqwest::Error> {
        self.send_as(client, self.method.clone(), authorization)
            .await
    }

    /// Sends it with another method (a GET for the body a HEAD's answer lacks).
    pub async fn send_as(
        &self,
        client: &Client,
        method: Method,
        authorization: Option<&SecretString>,
    ) -> Result<Response, reqwest::Error> {
        let mut request = client.request(method, self.url.clone());
        if let Some(accept) = self.accept {
            request = request.header(ACCEPT, accept);
        }
        if let Some(authorization) = authorization {
            request = request.header(AUTHORIZATION, authorization.expose_secret());
        }
        request.send().await
    }
}

/// What a registry answered to a request sent the way it asked.
pub enum Authenticated {
    /// Answered 200: "none" to the anonymous request (the registry asks for no credentials),
    /// else "basic" or "bearer", how the credentials went.
    Ok(&'static str),
    /// The credentials were refused (401 or 403); `authorization` is the header they went in,
    /// for a second request.
    Refused {
        status: u16,
        authorization: SecretString,
    },
    /// Neither: the anonymous request answered neither 200 nor 401 (`anonymous`), or the one
    /// with the credentials neither 200 nor a refusal.
    Unexpected { status: u16, anonymous: bool },
}

/// Why a request could not be sent the way the registry asked.
#[derive(Debug)]
pub enum AuthError {
    /// The registry (None) or its token service (the URL asked) could not be reached.
    Unreachable {
        token_service: Option<String>,
        reason: String,
    },
    /// A challenge that cannot be answered, or a token service that answered no token.
    Challenge(String),
    /// The token service (the challenge's realm) refused the credentials.
    TokenRefused { realm: String, response: Response },
}

/// Sends `request` as docker and containerd do: anonymous first, to learn how the registry
/// authenticates (its `WWW-Authenticate` challenge); on 401, again with `credentials` as the
/// challenge asks: Basic, or a Bearer token from the challenge's realm (the distribution spec's
/// token auth). What came of it is judged here, once for both modes' logins.
pub async fn authenticate(
    client: &Client,
    request: &Request<'_>,
    credentials: &Credentials,
) -> Result<Authenticated, AuthError> {
    let unreachable = |e: reqwest::Error| AuthError::Unreachable {
        token_service: None,
        reason: error_chain(&e),
    };
    let anonymous = request.send(client, None).await.map_err(unreachable)?;
    match anonymous.status() {
        StatusCode::OK => return Ok(Authenticated::Ok("none")),
        StatusCode::UNAUTHORIZED => {}
        status => {
            return Ok(Authenticated::Unexpected {
                status: status.as_u16(),
                anonymous: true,
            });
        }
    }
    let challenge = anonymous
        .headers()
        .get(WWW_AUTHENTICATE)
        .and_then(|v| v.to_str().ok())
        .map(Challenge::parse)
        .unwrap_or_default();
    let (scheme, authorization) = if challenge.scheme.eq_ignore_ascii_case("bearer") {
        let token = bearer_token(client, request.url, &challenge, credentials).await?;
        ("bearer", format!("Bearer {}", token.expose_secret()))
    } else {
        // Basic, or no challenge at all: basic auth is what ECR and docker login send.
        let pair = format!(
            "{}:{}",
            credentials.username,
            credentials.password.expose_secret()
        );
        (
            "basic",
            format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(pair)
            ),
        )
    };
    let authorization = SecretString::from(authorization);
    let response = request
        .send(client, Some(&authorization))
        .await
        .map_err(unreachable)?;
    Ok(match response.status().as_u16() {
        200 => Authenticated::Ok(scheme),
        status @ (401 | 403) => Authenticated::Refused {
            status,
            authorization,
        },
        status => Authenticated::Unexpected {
            status,
            anonymous: false,
        },
    })
}

/// `GET <realm>?service=..&scope=..` with the credentials as basic auth: the bearer token.
async fn bearer_token(
    client: &Client,
    url: &Url,
    challenge: &Challenge,
    credentials: &Credentials,
) -> Result<SecretString, AuthError> {
    let refuse = |reason: String| AuthError::Challenge(reason);
    let realm = challenge
        .param("realm")
        .ok_or_else(|| refuse("a Bearer challenge without a realm".into()))?;
    let mut token_url = Url::parse(realm)
        .or_else(|_| url.join(realm))
        .map_err(|e| refuse(format!("realm {realm:?} is not a URL: {e}")))?;
    // The password goes to the realm: only over TLS, or to the registry's own host and port.
    if token_url.scheme() != "https" && token_url.origin() != url.origin() {
        return Err(refuse(format!(
            "realm {realm} is neither https nor the registry itself; no credentials were sent there"
        )));
    }
    {
        let mut query = token_url.query_pairs_mut();
        for key in ["service", "scope"] {
            if let Some(value) = challenge.param(key) {
                query.append_pair(key, value);
            }
        }
    }
    let asked = token_url.to_string();
    let unreachable = |e: reqwest::Error| AuthError::Unreachable {
        token_service: Some(asked.clone()),
        reason: error_chain(&e),
    };
    let response = client
        .get(token_url)
        .basic_auth(
            &credentials.username,
            Some(credentials.password.expose_secret()),
        )
        .send()
        .await
        .map_err(unreachable)?;
    if response.status() != StatusCode::OK {
        return Err(AuthError::TokenRefused {
            realm: realm.to_owned(),
            response,
        });
    }
    let body = response.bytes().await.map_err(unreachable)?;
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
    let client = client().map_err(|e| LoginError::Client(e.to_string()))?;
    for token in &tokens.regions {
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

/// One registry: `GET /v2/` with basic auth `AWS:<password>`, or the bearer token its challenge
/// asks for. Returns how it authenticated ("basic", "bearer", or "none" for a registry that asks
/// for no credentials).
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
    let request = Request {
        method: Method::GET,
        url: &v2,
        accept: None,
    };
    let credentials = Credentials {
        username: "AWS".to_owned(),
        password: password.clone(),
    };
    let endpoint = endpoint.to_owned();
    match authenticate(client, &request, &credentials).await {
        Ok(Authenticated::Ok(scheme)) => Ok(scheme),
        Ok(Authenticated::Refused { status, .. }) => Err(LoginError::Refused { endpoint, status }),
        Ok(Authenticated::Unexpected { status, .. }) => {
            Err(LoginError::Unexpected { endpoint, status })
        }
        Err(AuthError::Unreachable {
            token_service,
            reason,
        }) => Err(LoginError::Unreachable {
            endpoint: token_service.unwrap_or(endpoint),
            reason,
        }),
        Err(AuthError::Challenge(reason)) => Err(LoginError::Challenge { endpoint, reason }),
        Err(AuthError::TokenRefused { realm, response }) => Err(LoginError::TokenRefused {
            endpoint,
            realm,
            status: response.status().as_u16(),
        }),
    }
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
