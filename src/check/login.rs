//! The optional login (ECR_REFRESH_VERIFY_LOGIN=true): a HEAD of one image's manifest with the
//! credentials stored in the Secret, as a kubelet's runtime sends them. An anonymous request
//! learns how the registry authenticates (its `WWW-Authenticate` challenge, as aws/login.rs reads
//! it): Basic gets the stored username and password; Bearer gets them sent to the challenge's
//! realm for a token (the distribution spec's token auth), which the HEAD then carries.
//!
//! Namespaces whose Secrets hold the same credentials for a host share one login: a run
//! tries each (host, credentials) pair once. The credentials never reach a log.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine as _;
use k8s_openapi::api::core::v1::Secret;
use reqwest::header::{ACCEPT, AUTHORIZATION, WWW_AUTHENTICATE};
use reqwest::{Client, Method, StatusCode, Url};
use secrecy::{ExposeSecret, SecretString};
use sha2::{Digest as _, Sha256};
use tokio::sync::OnceCell;

use super::findings::Finding;
use crate::aws::login::Challenge;
use crate::aws::registry::normalize;
use crate::logging::error_chain;
use crate::pull_secret::DATA_KEY;
use crate::pull_secret::docker_config;

const LOGIN_TIMEOUT: Duration = Duration::from_secs(10);
/// What a container runtime accepts for a manifest (containerd's resolver sends these).
const MANIFEST_TYPES: &str = "application/vnd.docker.distribution.manifest.v2+json, \
    application/vnd.docker.distribution.manifest.list.v2+json, \
    application/vnd.oci.image.manifest.v1+json, application/vnd.oci.image.index.v1+json, */*";
/// How much of a registry's answer a finding quotes.
const ANSWER_CHARS: usize = 300;

/// A username and password from a Secret's `auths` entry.
pub struct Credentials {
    username: String,
    password: SecretString,
}

/// The stored credentials for `host`: `username` and `password`, or `auth` (base64 of
/// `user:password`), of the first entry whose key names the host as the kubelet matches it.
pub fn credentials(secret: &Secret, host: &str) -> Option<Credentials> {
    let value = secret.data.as_ref()?.get(DATA_KEY)?;
    let entries = docker_config::auths(&value.0).ok()?;
    let (_, entry) = entries.iter().find(|(k, _)| normalize(k) == host)?;
    #[derive(serde::Deserialize)]
    struct Entry {
        username: Option<String>,
        password: Option<String>,
        auth: Option<String>,
    }
    let entry: Entry = serde_json::from_str(entry.get()).ok()?;
    if let (Some(username), Some(password)) = (entry.username, entry.password) {
        return Some(Credentials {
            username,
            password: SecretString::from(password),
        });
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(entry.auth?.trim())
        .ok()?;
    let text = String::from_utf8(decoded).ok()?;
    let (username, password) = text.split_once(':')?;
    Some(Credentials {
        username: username.to_owned(),
        password: SecretString::from(password.to_owned()),
    })
}

/// `repository` and `reference` (tag or digest) of an image on `host`.
fn manifest_path(image: &str, host: &str) -> (String, String) {
    let rest = image
        .strip_prefix(host)
        .and_then(|r| r.strip_prefix('/'))
        .unwrap_or(image);
    if let Some((repo, digest)) = rest.split_once('@') {
        return (repo.to_owned(), digest.to_owned());
    }
    match rest.rsplit_once(':') {
        Some((repo, tag)) if !tag.contains('/') => (repo.to_owned(), tag.to_owned()),
        _ => (rest.to_owned(), "latest".to_owned()),
    }
}

/// A login's result (None: the manifest could be read), filled once.
type Outcome = Arc<OnceCell<Option<Finding>>>;
/// A registry host and the SHA-256 of the credentials tried there.
type LoginKey = (String, [u8; 32]);

/// Login results shared by every namespace of a run.
pub struct Logins {
    client: Result<Client, String>,
    /// Each (host, digest of the credentials)'s result, tried once.
    results: Mutex<HashMap<LoginKey, Outcome>>,
}

impl Default for Logins {
    fn default() -> Self {
        Self::new()
    }
}

impl Logins {
    pub fn new() -> Self {
        let client = Client::builder()
            .timeout(LOGIN_TIMEOUT)
            .build()
            .map_err(|e| error_chain(&e));
        Self {
            client,
            results: Mutex::new(HashMap::new()),
        }
    }

    /// Tries `image` on `host` with these credentials, once per (host, credentials) in a run.
    /// None: the registry let the manifest be read.
    pub async fn try_image(
        &self,
        host: &str,
        image: &str,
        credentials: &Credentials,
    ) -> Option<Finding> {
        let mut hasher = Sha256::new();
        hasher.update(credentials.username.as_bytes());
        hasher.update([0]);
        hasher.update(credentials.password.expose_secret().as_bytes());
        let key = (host.to_owned(), hasher.finalize().into());
        let cell = {
            // Held only to look the cell up; a panic elsewhere cannot leave it half-written.
            let mut results = self
                .results
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            Arc::clone(results.entry(key).or_default())
        };
        cell.get_or_init(|| async {
            let client = match &self.client {
                Ok(client) => client,
                Err(e) => {
                    return Some(failed(host, image, format!("no HTTP client: {e}")));
                }
            };
            head_manifest(client, host, image, credentials).await.err()
        })
        .await
        .clone()
    }
}

fn failed(host: &str, image: &str, error: String) -> Finding {
    Finding::LoginFailed {
        host: host.to_owned(),
        image: image.to_owned(),
        error,
    }
}

/// A HEAD of the image's manifest as a runtime sends it: anonymous, then with the credentials
/// the challenge asks for.
async fn head_manifest(
    client: &Client,
    host: &str,
    image: &str,
    credentials: &Credentials,
) -> Result<(), Finding> {
    let (repository, reference) = manifest_path(image, host);
    let url = Url::parse(&format!(
        "https://{host}/v2/{repository}/manifests/{reference}"
    ))
    .map_err(|e| failed(host, image, format!("not a URL: {e}")))?;
    let unreachable = |e: reqwest::Error| {
        failed(
            host,
            image,
            format!("could not be reached: {}", error_chain(&e)),
        )
    };
    let anonymous = client
        .head(url.clone())
        .header(ACCEPT, MANIFEST_TYPES)
        .send()
        .await
        .map_err(unreachable)?;
    match anonymous.status() {
        StatusCode::OK => return Ok(()),
        StatusCode::UNAUTHORIZED => {}
        status => {
            return Err(failed(
                host,
                image,
                format!("answered HTTP {} to an anonymous HEAD", status.as_u16()),
            ));
        }
    }
    let challenge = anonymous
        .headers()
        .get(WWW_AUTHENTICATE)
        .and_then(|v| v.to_str().ok())
        .map(Challenge::parse)
        .unwrap_or_default();
    let authorization = if challenge.scheme.eq_ignore_ascii_case("bearer") {
        let token = bearer_token(client, host, image, &url, &challenge, credentials).await?;
        format!("Bearer {}", token.expose_secret())
    } else {
        let pair = format!(
            "{}:{}",
            credentials.username,
            credentials.password.expose_secret()
        );
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(pair)
        )
    };
    let send = |method: Method| {
        client
            .request(method, url.clone())
            .header(ACCEPT, MANIFEST_TYPES)
            .header(AUTHORIZATION, &authorization)
            .send()
    };
    let response = send(Method::HEAD).await.map_err(unreachable)?;
    match response.status().as_u16() {
        200 => Ok(()),
        status @ (401 | 403) => {
            // A HEAD answer has no body: a GET asks for the registry's words.
            let answer = match send(Method::GET).await {
                Ok(r) => answer(r).await,
                Err(e) => error_chain(&e),
            };
            Err(Finding::LoginRefused {
                host: host.to_owned(),
                image: image.to_owned(),
                status,
                answer,
            })
        }
        status => Err(failed(
            host,
            image,
            format!("answered HTTP {status} to the HEAD with the Secret's credentials"),
        )),
    }
}

/// The registry's answer, one line of it.
async fn answer(response: reqwest::Response) -> String {
    let challenge = response
        .headers()
        .get(WWW_AUTHENTICATE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let body = response.text().await.unwrap_or_default();
    let mut text: String = body
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .chars()
        .take(ANSWER_CHARS)
        .collect();
    if let Some(challenge) = challenge {
        text = format!("{text} (WWW-Authenticate: {challenge})");
    }
    text.trim().to_owned()
}

/// `GET <realm>?service=..&scope=..` with the stored credentials: the bearer token.
async fn bearer_token(
    client: &Client,
    host: &str,
    image: &str,
    url: &Url,
    challenge: &Challenge,
    credentials: &Credentials,
) -> Result<SecretString, Finding> {
    let realm = challenge
        .param("realm")
        .ok_or_else(|| failed(host, image, "a Bearer challenge without a realm".into()))?;
    let mut token_url = Url::parse(realm)
        .or_else(|_| url.join(realm))
        .map_err(|e| failed(host, image, format!("realm {realm:?} is not a URL: {e}")))?;
    // The password goes to the realm only over TLS, or to the registry itself.
    let same_origin = token_url.origin() == url.origin();
    if token_url.scheme() != "https" && !same_origin {
        return Err(failed(
            host,
            image,
            format!(
                "realm {realm} is neither https nor the registry itself; no credentials were sent there"
            ),
        ));
    }
    {
        let mut query = token_url.query_pairs_mut();
        for key in ["service", "scope"] {
            if let Some(value) = challenge.param(key) {
                query.append_pair(key, value);
            }
        }
    }
    let response = client
        .get(token_url)
        .basic_auth(
            &credentials.username,
            Some(credentials.password.expose_secret()),
        )
        .send()
        .await
        .map_err(|e| {
            failed(
                host,
                image,
                format!("token service {realm}: {}", error_chain(&e)),
            )
        })?;
    let status = response.status().as_u16();
    if status != 200 {
        return Err(Finding::LoginRefused {
            host: host.to_owned(),
            image: image.to_owned(),
            status,
            answer: format!("token service {realm}: {}", answer(response).await),
        });
    }
    #[derive(serde::Deserialize)]
    struct TokenResponse {
        token: Option<String>,
        access_token: Option<String>,
    }
    let no_token = || {
        failed(
            host,
            image,
            format!("the token service {realm} answered no JSON token"),
        )
    };
    let body = response.bytes().await.map_err(|_| no_token())?;
    let parsed: TokenResponse = serde_json::from_slice(&body).map_err(|_| no_token())?;
    parsed
        .token
        .or(parsed.access_token)
        .filter(|t| !t.is_empty())
        .map(SecretString::from)
        .ok_or_else(|| {
            failed(
                host,
                image,
                format!("the token service {realm} answered no token"),
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_image_names_its_repository_and_tag_or_digest() {
        let host = "123456789012.dkr.ecr.us-east-1.amazonaws.com";
        let cases = [
            ("team/app:1.2", ("team/app", "1.2")),
            ("app", ("app", "latest")),
            ("app@sha256:abc", ("app", "sha256:abc")),
        ];
        for (image, (repo, reference)) in cases {
            let full = format!("{host}/{image}");
            assert_eq!(
                manifest_path(&full, host),
                (repo.to_owned(), reference.to_owned()),
                "{image}"
            );
        }
    }
}
