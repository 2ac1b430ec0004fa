//! The optional login (ECR_REFRESH_VERIFY_LOGIN=true): a HEAD of one image's manifest with the
//! credentials stored in the Secret, as a kubelet's runtime sends them, through the refresh's
//! own registry client (`aws::login::authenticate`): anonymous first, then Basic with the stored
//! username and password, or the Bearer token the challenge's realm gives for them.
//!
//! Namespaces whose Secrets hold the same credentials for a host share one login: a run
//! tries each (host, credentials) pair once. The credentials never reach a log.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::Secret;
use reqwest::header::WWW_AUTHENTICATE;
use reqwest::{Client, Method, Url};
use secrecy::{ExposeSecret, SecretString};
use sha2::{Digest as _, Sha256};
use tokio::sync::OnceCell;

use super::findings::Finding;
use crate::aws::login::{self, AuthError, Authenticated, Credentials, Request};
use crate::logging::error_chain;
use crate::pull_secret::DATA_KEY;
use crate::pull_secret::{docker_config, keyring};

/// What a container runtime accepts for a manifest (containerd's resolver sends these).
const MANIFEST_TYPES: &str = "application/vnd.docker.distribution.manifest.v2+json, \
    application/vnd.docker.distribution.manifest.list.v2+json, \
    application/vnd.oci.image.manifest.v1+json, application/vnd.oci.image.index.v1+json, */*";
/// How much of a registry's answer a finding quotes.
const ANSWER_CHARS: usize = 300;

/// The stored credentials the kubelet pulls `image` with: of the entries whose keyring key
/// serves the image's repository (`keyring::matches`), the most specific, as the keyring's
/// reverse-sorted index tries them first (keyring.go `BasicDockerKeyring.Add`); read as the
/// kubelet reads an entry, `auth` before `username` and `password` (`keyring::credentials`).
/// Ok(None): no entry serves it. Err: the kubelet can't read the entry, with why.
pub(super) fn credentials(secret: &Secret, image: &str) -> Result<Option<Credentials>, String> {
    let Some(value) = secret.data.as_ref().and_then(|d| d.get(DATA_KEY)) else {
        return Ok(None);
    };
    let entries = docker_config::kubelet_auths(&value.0).map_err(|e| e.to_string())?;
    let repository = keyring::repository(image);
    let mut serving: Vec<(String, &str)> = entries
        .iter()
        .filter_map(|(k, v)| Some((keyring::key(k)?, v.get())))
        .filter(|(key, _)| keyring::matches(key, repository))
        .collect();
    // Stable: for one key, the first entry in the document.
    serving.sort_by(|a, b| b.0.cmp(&a.0));
    let Some((_, entry)) = serving.first() else {
        return Ok(None);
    };
    let (username, password) = keyring::credentials(entry)?;
    Ok(Some(Credentials {
        username,
        password: SecretString::from(password),
    }))
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
pub(super) struct Logins {
    client: Result<Client, String>,
    /// Each (host, digest of the credentials)'s result, tried once.
    results: Mutex<HashMap<LoginKey, Outcome>>,
}

impl Logins {
    pub(super) fn new() -> Self {
        let client = login::client().map_err(|e| error_chain(&e));
        Self {
            client,
            results: Mutex::new(HashMap::new()),
        }
    }

    /// Tries `image` on `host` with these credentials, once per (host, credentials) in a run.
    /// None: the registry let the manifest be read.
    pub(super) async fn try_image(
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

fn refused(host: &str, image: &str, status: u16, answer: String) -> Finding {
    Finding::LoginRefused {
        host: host.to_owned(),
        image: image.to_owned(),
        status,
        answer,
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
    let error = match login::authenticate(client, &request, credentials).await {
        Ok(Authenticated::Ok(_)) => return Ok(()),
        Ok(Authenticated::Refused {
            status,
            authorization,
        }) => {
            // A HEAD answer has no body: a GET asks for the registry's words.
            let answer = match request
                .send_as(client, Method::GET, Some(&authorization))
                .await
            {
                Ok(r) => answer(r).await,
                Err(e) => error_chain(&e),
            };
            return Err(refused(host, image, status, answer));
        }
        Err(AuthError::TokenRefused { realm, response }) => {
            let status = response.status().as_u16();
            let answer = format!("token service {realm}: {}", answer(response).await);
            return Err(refused(host, image, status, answer));
        }
        Ok(Authenticated::Unexpected {
            status,
            anonymous: true,
        }) => format!("answered HTTP {status} to an anonymous HEAD"),
        Ok(Authenticated::Unexpected { status, .. }) => {
            format!("answered HTTP {status} to the HEAD with the Secret's credentials")
        }
        Err(AuthError::Unreachable {
            token_service: None,
            reason,
        }) => format!("could not be reached: {reason}"),
        Err(AuthError::Unreachable {
            token_service: Some(realm),
            reason,
        }) => format!("token service {realm}: {reason}"),
        Err(AuthError::Challenge(reason)) => reason,
    };
    Err(failed(host, image, error))
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
    use std::collections::BTreeMap;

    use base64::Engine as _;
    use k8s_openapi::ByteString;

    use super::*;

    const HOST: &str = "123456789012.dkr.ecr.us-east-1.amazonaws.com";

    fn secret(value: &str) -> Secret {
        Secret {
            data: Some(BTreeMap::from([(
                DATA_KEY.to_owned(),
                ByteString(value.as_bytes().to_vec()),
            )])),
            ..Secret::default()
        }
    }

    fn password(secret: &Secret, image: &str) -> Option<String> {
        credentials(secret, image)
            .unwrap()
            .map(|c| c.password.expose_secret().to_owned())
    }

    /// The login is tried with what the kubelet pulls with: `auth` before `password`
    /// (config.go `DockerConfigEntry.UnmarshalJSON`), the most specific entry serving the
    /// image (keyring.go), under any letter case of `auths` (Go's encoding/json).
    #[test]
    fn the_login_uses_the_credentials_the_kubelet_pulls_with() {
        let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
        let image = format!("{HOST}/web:1");
        let stale_auth = secret(&format!(
            r#"{{"auths":{{"{HOST}":{{"username":"AWS","password":"fresh","auth":"{}"}}}}}}"#,
            b64("AWS:stale")
        ));
        assert_eq!(password(&stale_auth, &image).as_deref(), Some("stale"));
        let only_password = secret(&format!(
            r#"{{"auths":{{"{HOST}":{{"username":"AWS","password":"p"}}}}}}"#
        ));
        assert_eq!(password(&only_password, &image).as_deref(), Some("p"));
        let scoped = secret(&format!(
            r#"{{"auths":{{"{HOST}":{{"auth":"{}"}},"{HOST}/team-x":{{"auth":"{}"}}}}}}"#,
            b64("AWS:host"),
            b64("AWS:team")
        ));
        assert_eq!(password(&scoped, &image).as_deref(), Some("host"));
        assert_eq!(
            password(&scoped, &format!("{HOST}/team-x/web:1")).as_deref(),
            Some("team")
        );
        let only_scoped = secret(&format!(
            r#"{{"auths":{{"{HOST}/team-x":{{"auth":"{}"}}}}}}"#,
            b64("AWS:team")
        ));
        assert_eq!(password(&only_scoped, &image), None);
        let folded = secret(&format!(
            r#"{{"auths":{{"{HOST}":{{"password":"ours"}}}},"Auths":{{"{HOST}":{{"PASSWORD":"later"}}}}}}"#
        ));
        assert_eq!(password(&folded, &image).as_deref(), Some("later"));
        let undecodable = secret(&format!(r#"{{"auths":{{"{HOST}":{{"auth":"%%%"}}}}}}"#));
        assert!(credentials(&undecodable, &image).is_err());
    }

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
