//! The name a refresh records on the Secrets it writes (`ecr-refresh/install`): ECR_REFRESH_INSTALL,
//! or the pod's ServiceAccount, or else, for a run by hand from a kubeconfig, the user the API
//! server says it is. That last is asked once, and only when a Secret is due: a run with nothing
//! to write sends no more requests than before.

use kube::Client;
use tokio::sync::OnceCell;
use tracing::{info, warn};

use crate::cluster::whoami;
use crate::pull_secret::install::Install;

pub(super) struct InstallName<'a> {
    /// ECR_REFRESH_INSTALL, or the pod's ServiceAccount.
    known: Option<&'a Install>,
    client: &'a Client,
    asked: OnceCell<Option<Install>>,
}

impl<'a> InstallName<'a> {
    pub(super) fn new(known: Option<&'a Install>, client: &'a Client) -> Self {
        Self {
            known,
            client,
            asked: OnceCell::new(),
        }
    }

    /// The name, asking the API server the first time when none is configured. None: it could
    /// not be had; a write then keeps the name a Secret records, and a new Secret records none.
    pub(super) async fn get(&self) -> Option<&Install> {
        if let Some(known) = self.known {
            return Some(known);
        }
        self.asked.get_or_init(|| self.ask()).await.as_ref()
    }

    async fn ask(&self) -> Option<Install> {
        match whoami::username(self.client).await {
            Ok(Some(user)) => match Install::from_username(&user) {
                Some(install) => {
                    info!(
                        install = install.as_str(),
                        "no ECR_REFRESH_INSTALL and no pod ServiceAccount: the Secrets this run writes record \
                         the user the API server says it is (SelfSubjectReview)"
                    );
                    Some(install)
                }
                None => {
                    warn!(
                        user,
                        "the user the API server says this run is cannot be recorded as an install name \
                         (1 to 253 characters without spaces): set ECR_REFRESH_INSTALL; the Secrets written \
                         keep the install they record"
                    );
                    None
                }
            },
            Ok(None) => {
                warn!(
                    "the API server gave no user name for this run (SelfSubjectReview): set ECR_REFRESH_INSTALL; \
                     the Secrets written keep the install they record"
                );
                None
            }
            Err(e) => {
                warn!(
                    error = %e,
                    "could not ask the API server who this run is (SelfSubjectReview, Kubernetes 1.28 and later): \
                     set ECR_REFRESH_INSTALL; the Secrets written keep the install they record, and new ones record none"
                );
                None
            }
        }
    }
}
