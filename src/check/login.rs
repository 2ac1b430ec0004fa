//! The optional login (ECR_REFRESH_VERIFY_LOGIN=true): a HEAD of one image's manifest with the
//! credentials stored in the Secret, as a kubelet's runtime sends them, through the refresh's
//! own registry client (`aws::login::authenticate`): anonymous first, then Basic with the stored
//! username and password, or the Bearer token the challenge's realm gives for them.
//!
//! Namespaces whose Secrets hold the same credentials for a host share one login: a run
//! tries each (host, credentials) pair once. The credentials never reach a log.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use base64::Engine as _;
use k8s_openapi::api::core::v1::Secret;
use reqwest::header::WWW_AUTHENTICATE;
use reqwest::{Client, Method, Url};
use secrecy::{ExposeSecret, SecretString};
use sha2::{Digest as _, Sha256};
use tokio::sync::OnceCell;

use super::findings::Finding;
use crate::aws::login::{self, AuthError, Authenticated, Credentials, Request};
use crate::aws::registry::normalize;
use crate::logging::error_chain;
use crate::pull_secret::DATA_KEY;
use crate::pull_secret::docker_config;

/// What a container runtime accepts for a manifest (containerd's resolver sends these).
const MANIFEST_TYPES: &str = "application/vnd.docker.distribution.manifest.v2+json, \
    application/vnd.docker.distribution.manifest.list.v2+json, \
    application/vnd.oci.image.manifest.v1+json, application/vnd.oci.image.index.v1+json, */*";
/// How much of a registry's answer a finding quotes.
const ANSWER_CHARS: usize = 300;

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
        let client = login::client().map_err(|e| error_chain(&e));
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
    let request = Request {
        method: Method::HEAD,
        url: &url,
        accept: Some(MANIFEST_TYPES),
    };
    let sent = match login::authenticate(client, &request, credentials).await {
        Ok(sent) => sent,
        Err(AuthError::Unreachable {
            token_service: None,
            reason,
        }) => {
            return Err(failed(
                host,
                image,
                format!("could not be reached: {reason}"),
            ));
        }
        Err(AuthError::Unreachable {
            token_service: Some(realm),
            reason,
        }) => {
            return Err(failed(
                host,
                image,
                format!("token service {realm}: {reason}"),
            ));
        }
        Err(AuthError::Challenge(reason)) => return Err(failed(host, image, reason)),
        Err(AuthError::TokenRefused { realm, response }) => {
            return Err(Finding::LoginRefused {
                host: host.to_owned(),
                image: image.to_owned(),
                status: response.status().as_u16(),
                answer: format!("token service {realm}: {}", answer(response).await),
            });
        }
    };
    let (response, authorization) = match sent {
        Authenticated::Anonymous => return Ok(()),
        Authenticated::Unexpected(status) => {
            return Err(failed(
                host,
                image,
                format!("answered HTTP {} to an anonymous HEAD", status.as_u16()),
            ));
        }
        Authenticated::Sent {
            response,
            authorization,
            ..
        } => (response, authorization),
    };
    match response.status().as_u16() {
        200 => Ok(()),
        status @ (401 | 403) => {
            // A HEAD answer has no body: a GET asks for the registry's words.
            let answer = match request
                .send_as(client, Method::GET, Some(&authorization))
                .await
            {
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
