//! The end of a run, for either mode: the summary line, the termination message and the metrics
//! push, in that order; or, when nothing could be done, one error line that says why.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tracing::error;

use crate::aws::{ecr, login};
use crate::cluster::client::ClusterError;
use crate::cluster::namespaces::NamespaceError;
use crate::config::Config;
use crate::config::pushgateway::Pushgateway;
use crate::report::exit;
use crate::termination::{error_message, write_termination_message};

/// The summary's message when the selection matched no namespace, in either mode.
pub const NOTHING_SELECTED: &str = "no namespace was selected, so nothing was done: check ECR_REFRESH_NAMESPACES, \
     ECR_REFRESH_EXCLUDE_NAMESPACES and ECR_REFRESH_NAMESPACE_SELECTOR against the cluster's \
     namespaces and their labels (a typo selects nothing)";

/// Why a run's tokens could not be had: then no namespace is written.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    #[error("no ECR token: {0}")]
    Token(#[from] ecr::EcrError),
    #[error("login check failed: {0}")]
    Login(#[from] login::LoginError),
}

/// Why a run could do nothing at all: no namespace was written or checked.
#[derive(Debug, thiserror::Error)]
pub enum Unavailable {
    /// Stopped (deadline or SIGTERM) before the first namespace: exit 1, as any stop.
    #[error("stopped before any namespace was {done}: {reason}; the next run covers them")]
    Stopped {
        reason: &'static str,
        /// "written", "checked".
        done: &'static str,
    },
    /// No registry to judge or write a Secret for: none configured, and no region to find the
    /// caller's own in.
    #[error("{}", ecr::EcrError::NoRegion)]
    NoRegion,
    /// The region found is not one of the partition data's.
    #[error(transparent)]
    UnknownRegion(#[from] crate::aws::region::UnknownRegion),
    /// A role to assume, and no region to ask STS in.
    #[error("{}", crate::aws::credentials::CredentialError::AssumeRoleNoRegion)]
    AssumeRoleNoRegion,
    /// No tokens. ServiceAccounts of namespaces that needed none (fresh Secrets) may have
    /// been given the Secret before the failure: `accounts_added` says which, so that the
    /// summary says what was written.
    #[error("{error}{}", accounts_note(.accounts_added))]
    Tokens {
        error: Arc<TokenError>,
        accounts_added: Vec<String>,
    },
    #[error(transparent)]
    Cluster(#[from] ClusterError),
    /// ECR_REFRESH_CLUSTERS: the source of the clusters could not be read.
    #[error("the fleet's clusters could not be read: {0}")]
    Clusters(String),
    /// ECR_REFRESH_CLUSTERS: a cluster the source names but refuses (that cluster's failure).
    #[error("refused: {0}")]
    Refused(String),
    /// ECR_REFRESH_CLUSTERS: a spoke not reached as its ServiceAccount (that cluster's failure).
    #[error(transparent)]
    Spoke(#[from] crate::fleet::connect::SpokeError),
    /// ECR_REFRESH_CLUSTERS: not one cluster was reached (each one's line says why).
    #[error("no cluster of the fleet was reached ({}): each cluster's `cluster failed` line says why", some_of(.failed))]
    NoClusterReached { failed: Vec<String> },
    #[error(transparent)]
    Namespaces(#[from] NamespaceError),
}

/// The first names of a long list, and how many more.
fn some_of(names: &[String]) -> String {
    const SHOWN: usize = 20;
    let mut text = names
        .iter()
        .take(SHOWN)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if names.len() > SHOWN {
        text.push_str(&format!(" and {} more", names.len() - SHOWN));
    }
    text
}

/// What the exit-3 message adds when ServiceAccounts were written before the tokens failed.
fn accounts_note(added: &[String]) -> String {
    if added.is_empty() {
        String::new()
    } else {
        format!(
            "; no Secret was written, but the Secret was already added to the imagePullSecrets of \
             these ServiceAccounts (their namespaces' Secrets were fresh): {}",
            added.join(", ")
        )
    }
}

impl Unavailable {
    pub fn exit_code(&self) -> u8 {
        match self {
            Self::Stopped { .. } => exit::FAILED,
            // A missing region is the configuration's: found before anything is sent.
            Self::NoRegion | Self::UnknownRegion(_) | Self::AssumeRoleNoRegion => exit::CONFIG,
            _ => exit::UNAVAILABLE,
        }
    }

    /// The run's one error line. `nothing_done`: the message, "nothing was written".
    fn log(&self, nothing_done: &str) {
        let code = self.exit_code();
        match self {
            Self::Tokens { accounts_added, .. } if !accounts_added.is_empty() => error!(
                error = %self,
                exit_code = code,
                service_accounts_added = %accounts_added.join(","),
                "no Secret was written; ServiceAccounts were"
            ),
            _ => error!(error = %self, exit_code = code, "{nothing_done}"),
        }
    }
}

/// What a mode's run came to, as its end reports it.
pub trait Finished {
    fn exit_code(&self) -> u8;
    fn log_summary(&self, elapsed_ms: u64);
    /// The termination message (compact JSON within the kubelet's limit).
    fn termination_message(&self, elapsed_ms: u64) -> String;
}

/// The end of a run: its summary (or error) line, termination message and metrics push, and
/// its exit code. `push` sends the mode's metrics (None: nothing could be done).
pub async fn end<F: Finished>(
    config: &Config,
    started: Instant,
    result: Result<F, Unavailable>,
    nothing_done: &str,
    push: impl AsyncFnOnce(&Pushgateway, u8, Duration, Option<&F>),
) -> u8 {
    let elapsed_ms = started.elapsed().as_millis() as u64;
    let (code, message, finished) = match result {
        Ok(finished) => {
            finished.log_summary(elapsed_ms);
            (
                finished.exit_code(),
                finished.termination_message(elapsed_ms),
                Some(finished),
            )
        }
        Err(e) => {
            e.log(nothing_done);
            let code = e.exit_code();
            (code, error_message(code, &e.to_string()), None)
        }
    };
    write_termination_message(config.termination_log.as_deref(), &message).await;
    if let Some(gateway) = &config.pushgateway {
        push(gateway, code, started.elapsed(), finished.as_ref()).await;
    }
    code
}
