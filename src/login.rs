//! The login check: each token tried against its registry before anything is written.

use std::time::Duration;

use secrecy::ExposeSecret;
use tracing::info;

use crate::ecr::Tokens;
use crate::logging::error_chain;

const LOGIN_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, thiserror::Error)]
pub enum LoginError {
    #[error(
        "registry {endpoint} refused the ECR token (HTTP {status}); check that the credentials' account can \
         pull from that registry (repository policy, ecr:BatchGetImage) and that the registry host is right"
    )]
    Refused { endpoint: String, status: u16 },
    #[error("registry {endpoint} answered HTTP {status} to the login check; expected 200")]
    Unexpected { endpoint: String, status: u16 },
    #[error(
        "registry {endpoint} could not be reached for the login check: {reason}; check DNS, egress and proxies"
    )]
    Unreachable { endpoint: String, reason: String },
    #[error("could not build the HTTP client for the login check: {0}")]
    Client(String),
}

/// `GET <proxyEndpoint>/v2/` with basic auth `AWS:<password>`, for every endpoint ECR returned.
pub async fn verify(tokens: &Tokens) -> Result<(), LoginError> {
    let client = reqwest::Client::builder()
        .timeout(LOGIN_TIMEOUT)
        .build()
        .map_err(|e| LoginError::Client(e.to_string()))?;
    for token in &tokens.0 {
        let mut endpoints = token.proxy_endpoints.clone();
        if endpoints.is_empty() {
            endpoints = token
                .registries
                .iter()
                .map(|r| format!("https://{}", r.host()))
                .collect();
        }
        endpoints.dedup();
        for endpoint in endpoints {
            let url = format!("{}/v2/", endpoint.trim_end_matches('/'));
            let response = client
                .get(&url)
                .basic_auth("AWS", Some(token.password.expose_secret()))
                .send()
                .await
                .map_err(|e| LoginError::Unreachable {
                    endpoint: endpoint.clone(),
                    reason: error_chain(&e),
                })?;
            match response.status().as_u16() {
                200 => info!(registry = %endpoint, region = %token.region, "login check passed"),
                status @ (401 | 403) => return Err(LoginError::Refused { endpoint, status }),
                status => return Err(LoginError::Unexpected { endpoint, status }),
            }
        }
    }
    Ok(())
}
