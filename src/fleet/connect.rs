//! Reaching a spoke as its own ecr-refresh ServiceAccount. The kubeconfig's credential (often a
//! cluster's admin) sends one request, a TokenRequest for that ServiceAccount (ten minutes,
//! the API server's least), or, with ECR_REFRESH_CLUSTERS_AUTH=impersonate, none: every request
//! impersonates it. Everything the run sends there after is the ServiceAccount's, held by the
//! spoke's own RBAC and admission policy.

use std::time::Duration;

use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use kube::config::AuthInfo;
use secrecy::{ExposeSecret as _, SecretString};

use super::{Auth, SpokeAccount};
use crate::cluster::client::{ClusterError, Target};
use crate::cluster::retry::{self, RequestError};

/// The token's life: the API server's least. A run ends within it (ECR_REFRESH_TIMEOUT's most
/// is lower), so it is never renewed.
pub const TOKEN_SECONDS: i64 = 600;

/// How long the TokenRequest, a spoke's first request, may take with its retries: a spoke that
/// is down fails its cluster in this, not in a restart's minute.
pub const FIRST_CONTACT: Duration = Duration::from_secs(15);

/// Why a spoke could not be reached as its ServiceAccount: that cluster's failure.
#[derive(Debug, thiserror::Error)]
pub enum SpokeError {
    #[error(transparent)]
    Cluster(#[from] ClusterError),
    #[error(
        "the spoke refused a token for ServiceAccount {account}: {source}; install the spoke \
         there (manifests/spoke, or the chart with spoke.enabled=true) and grant the hub's \
         credential create on serviceaccounts/token for it (Role ecr-refresh-hub), or set \
         ECR_REFRESH_CLUSTERS_SERVICE_ACCOUNT to the spoke's"
    )]
    TokenRefused {
        account: SpokeAccount,
        source: RequestError,
    },
    #[error("the spoke is unreachable at {url}: {source}")]
    Unreachable { url: String, source: RequestError },
    #[error("the spoke answered a TokenRequest for {account} without a token")]
    NoToken { account: SpokeAccount },
}

/// The spoke, as `account`: with `auth`'s TokenRequest, the one request the kubeconfig's
/// credential sends; with impersonation, none yet.
pub async fn as_account(
    cluster: &str,
    mut kubeconfig: kube::Config,
    account: &SpokeAccount,
    auth: Auth,
) -> Result<Target, SpokeError> {
    kubeconfig.auth_info = match auth {
        Auth::Impersonate => AuthInfo {
            impersonate: Some(account.username()),
            impersonate_groups: None,
            ..kubeconfig.auth_info
        },
        // The kubeconfig's user goes whole (a client certificate too): only the token is sent.
        Auth::TokenRequest => AuthInfo {
            token: Some(request_token(cluster, &kubeconfig, account).await?),
            ..AuthInfo::default()
        },
    };
    Ok(Target::new(kubeconfig).named(cluster))
}

async fn request_token(
    cluster: &str,
    kubeconfig: &kube::Config,
    account: &SpokeAccount,
) -> Result<SecretString, SpokeError> {
    let target = Target::new(kubeconfig.clone()).named(cluster);
    let (client, url) = target.client(true)?;
    let body = TokenRequest {
        spec: TokenRequestSpec {
            audiences: Vec::new(),
            expiration_seconds: Some(TOKEN_SECONDS),
            bound_object_ref: None,
        },
        ..TokenRequest::default()
    };
    let body = serde_json::to_vec(&body).expect("a TokenRequest serializes");
    let path = format!(
        "/api/v1/namespaces/{}/serviceaccounts/{}/token",
        account.namespace, account.name
    );
    let what = "request a token for the spoke's ServiceAccount";
    let sent = retry::send_within(what, FIRST_CONTACT, || {
        let request = http::Request::post(&path)
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(body.clone())
            .expect("a TokenRequest request builds");
        client.request::<TokenRequest>(request)
    })
    .await;
    match sent {
        Ok(answer) => answer
            .status
            .map(|status| SecretString::from(status.token))
            .filter(|token| !token.expose_secret().is_empty())
            .ok_or_else(|| SpokeError::NoToken {
                account: account.clone(),
            }),
        Err(e) if e.code().is_some() => Err(SpokeError::TokenRefused {
            account: account.clone(),
            source: e,
        }),
        Err(e) => Err(SpokeError::Unreachable { url, source: e }),
    }
}
