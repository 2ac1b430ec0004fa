//! The run's ECR tokens, fetched once, when the first namespace turns out to be due.

use std::sync::Arc;
use std::time::SystemTime;

use aws_config::SdkConfig;
use tokio::sync::OnceCell;
use tracing::info;

use super::report::Summary;
use crate::aws::{ecr, login};
use crate::config::Config;
use crate::pull_secret::install::Install;
use crate::pull_secret::write::Desired;
pub(super) use crate::run::end::TokenError;

/// The run's tokens, fetched when the first namespace turns out to be due: a run where nothing
/// is due asks ECR nothing. Every due namespace waits on the one fetch, so it is still one call
/// per region per run, and no namespace is written before the tokens (and the login check)
/// are in hand. A failure is kept: every namespace waiting sees it, and the run ends, having
/// written nothing.
pub(super) struct OnDemand<'a> {
    pub sdk: &'a SdkConfig,
    pub config: &'a Config,
    pub cell: OnceCell<Result<Fetched, Arc<TokenError>>>,
}

pub(super) struct Fetched {
    pub tokens: ecr::Tokens,
    /// RFC 3339, the earliest expiry of the tokens.
    pub expires_at: String,
}

impl<'a> OnDemand<'a> {
    pub(super) fn new(sdk: &'a SdkConfig, config: &'a Config) -> Self {
        Self {
            sdk,
            config,
            cell: OnceCell::new(),
        }
    }

    pub(super) async fn get(&self) -> Result<&Fetched, Arc<TokenError>> {
        self.cell
            .get_or_init(|| async { self.fetch().await.map_err(Arc::new) })
            .await
            .as_ref()
            .map_err(Arc::clone)
    }

    async fn fetch(&self) -> Result<Fetched, TokenError> {
        let tokens = ecr::fetch(self.sdk, &self.config.registries, self.config.dual_stack).await?;
        let expires_at = tokens.expires_at();
        info!(
            registries = %tokens.registries().join(","),
            token_expires_at = %expires_at,
            regions = tokens.regions.len(),
            credentials = %tokens.source,
            "ECR tokens fetched"
        );
        if self.config.verify_login {
            login::verify(&tokens).await?;
        }
        Ok(Fetched { tokens, expires_at })
    }

    /// The run-wide facts of the summary: the registries and the tokens' expiry; none when no
    /// token was fetched (nothing was due).
    pub(super) fn summary(&self) -> Summary {
        self.fetched()
            .map(|f| Summary {
                registries: f.tokens.registries(),
                token_expires_at: f.expires_at.clone(),
                elapsed_ms: 0,
                token_expiry: f.tokens.expiry_by_token(),
            })
            .unwrap_or_default()
    }

    /// The tokens, if this run fetched them.
    pub(super) fn fetched(&self) -> Option<&Fetched> {
        self.cell.get().and_then(|r| r.as_ref().ok())
    }
}

impl Fetched {
    pub(super) fn desired<'a>(
        &'a self,
        config: &'a Config,
        install: Option<&'a Install>,
    ) -> Desired<'a> {
        Desired {
            name: &config.secret_name,
            credentials: self.tokens.credentials(),
            expires_at: self.expires_at.clone(),
            expiry: self
                .tokens
                .expiry_by_token()
                .values()
                .min()
                .map(|at| whole_seconds(*at)),
            dry_run: config.dry_run,
            install,
        }
    }
}

/// The time to the second, as the Secret records it (`ecr-refresh/token-expires-at`): what a
/// later run reads back is then what this one reports.
pub(super) fn whole_seconds(at: SystemTime) -> SystemTime {
    let secs = at
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(secs)
}
