//! How the selected namespaces' pull Secrets, and the ServiceAccounts ECR_REFRESH_SERVICE_ACCOUNTS
//! names, are read: one path per run, said by the `read` field of its first log line.
//!
//! - `list`: one list of the Secret's name across every namespace, field-selected by
//!   `metadata.name` and paged (`cluster::by_name`), and one list per ServiceAccount name. The
//!   namespace list is read first, whole (names only); then each Secret page is handed out as it
//!   arrives, to the namespaces it shows. A selected namespace the list did not show has no
//!   Secret: it is created with no read first. 10,000 namespaces with nothing due cost about 40
//!   requests instead of 10,000.
//! - `per-namespace`: a GET of the Secret (and of each ServiceAccount) in each namespace, as the
//!   namespace pages arrive. Taken when ECR_REFRESH_NAMESPACES gives literal names only (no
//!   namespace list, the namespaced install's case: a list's cost grows with the cluster, the
//!   GETs' with the names given), and when the API server refuses the list (403: RBAC without
//!   `list` on the Secret's name, as in a ClusterRole from before the list).
//!
//! Never both for one namespace: a Secret list that breaks off after its first page leaves the
//! namespaces it had not shown to GETs, and only those.

use std::collections::{BTreeMap, HashMap};

use k8s_openapi::api::core::v1::{Secret, ServiceAccount};
use kube::Client;
use tracing::{error, warn};

use crate::cluster::by_name::{ByName, ListError};
use crate::cluster::names::{SecretName, ServiceAccountName};
use crate::cluster::namespaces::{Candidate, NamespaceError, Pages};
use crate::cluster::selection::Selection;

/// What a namespace's object is known to be before its visit.
#[derive(Debug, Clone)]
pub enum Read<T> {
    /// Shown by the list (Some), or not there (None): no read needed.
    Listed(Option<T>),
    /// Not known: read it by name.
    ByName,
}

/// One namespace to visit, with what the lists showed of it.
#[derive(Debug, Clone)]
pub struct Work {
    pub candidate: Candidate,
    pub secret: Read<Secret>,
    /// One per ServiceAccount name, in ECR_REFRESH_SERVICE_ACCOUNTS's order.
    pub accounts: Vec<Read<ServiceAccount>>,
}

/// Which path the run reads by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Path {
    List,
    PerNamespace,
}

impl Path {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::List => "list",
            Self::PerNamespace => "per-namespace",
        }
    }
}

/// The run's namespaces, a batch at a time, each with what was read of it.
pub struct Reads<'a> {
    pages: Pages<'a>,
    client: Client,
    accounts: &'a [ServiceAccountName],
    path: Path,
    listed: Option<Listed>,
    /// The namespace list broke off after its first page.
    incomplete: bool,
}

/// The list path's state.
struct Listed {
    secrets: ByName<Secret>,
    /// The Secret list's first page, read before the namespaces (it decides the path).
    held: Option<Vec<Secret>>,
    /// Selected namespaces not handed out yet.
    pending: BTreeMap<String, Candidate>,
    /// Per ServiceAccount name: its objects by namespace, or None when that list was refused.
    accounts: Vec<Option<HashMap<String, ServiceAccount>>>,
    state: ListState,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum ListState {
    Secrets,
    /// The Secret list is read to its end: the namespaces left have none.
    Rest,
    /// The Secret list broke off: the namespaces left are read by name.
    RestByName,
    Done,
}

impl<'a> Reads<'a> {
    /// Decides the path: literal names are read per namespace; otherwise the Secret list's
    /// first page is asked for, and a refusal (or any failure) means per namespace. Returns the
    /// reason when the list was tried and not taken, for the log after the first line.
    pub async fn open(
        client: Client,
        selection: &'a Selection,
        secret: &SecretName,
        accounts: &'a [ServiceAccountName],
    ) -> (Self, Option<ListError>) {
        let mut reads = Self {
            pages: Pages::new(client.clone(), selection),
            client: client.clone(),
            accounts,
            path: Path::PerNamespace,
            listed: None,
            incomplete: false,
        };
        if selection.literal_names().is_some() {
            return (reads, None);
        }
        let mut secrets = ByName::new(client, "secrets", secret.as_str());
        match secrets.next().await {
            Some(Ok(first)) => {
                reads.path = Path::List;
                reads.listed = Some(Listed {
                    secrets,
                    held: Some(first),
                    pending: BTreeMap::new(),
                    accounts: Vec::new(),
                    state: ListState::Secrets,
                });
                (reads, None)
            }
            Some(Err(e)) => (reads, Some(e)),
            None => (reads, None),
        }
    }

    pub fn path(&self) -> Path {
        self.path
    }

    /// The first batch. An error on the namespace list's first page ends the run, as it would
    /// without the list: nothing has been written.
    pub async fn first(&mut self) -> Result<Vec<Work>, NamespaceError> {
        let accounts = self.accounts.len();
        let Some(listed) = self.listed.as_mut() else {
            let first = self.pages.next().await.transpose()?.unwrap_or_default();
            return Ok(by_name(first, accounts));
        };
        // The names of every selected namespace: small beside their Secrets.
        let mut first_page = true;
        while let Some(page) = self.pages.next().await {
            match page {
                Ok(page) => {
                    listed
                        .pending
                        .extend(page.into_iter().map(|c| (c.name.clone(), c)));
                }
                Err(e) if first_page => return Err(e),
                Err(e) => {
                    error!(error = %e, "namespace list stopped: namespaces on later pages are left out of this run");
                    self.incomplete = true;
                    break;
                }
            }
            first_page = false;
        }
        for account in self.accounts {
            let list = ByName::<ServiceAccount>::new(
                self.client.clone(),
                "serviceaccounts",
                account.as_str(),
            );
            let pending = &listed.pending;
            // Only what a write needs (its resourceVersion and imagePullSecrets), of the
            // selected namespaces.
            let kept = list
                .all(|sa: ServiceAccount| {
                    let namespace = sa.metadata.namespace.clone()?;
                    pending
                        .contains_key(&namespace)
                        .then(|| (namespace, trimmed(sa)))
                })
                .await;
            listed.accounts.push(match kept {
                Ok(kept) => Some(kept.into_iter().collect()),
                Err(e) => {
                    warn!(serviceaccount = account.as_str(), error = %e,
                        "ServiceAccounts of this name are read one namespace at a time: grant list on \
                         them by name (resourceNames; see manifests/) to read them in one list");
                    None
                }
            });
        }
        Ok(self.next().await.transpose()?.unwrap_or_default())
    }

    /// The next batch; None when there are no more. An empty batch is not the end.
    pub async fn next(&mut self) -> Option<Result<Vec<Work>, NamespaceError>> {
        let accounts = self.accounts.len();
        let Some(listed) = self.listed.as_mut() else {
            return self
                .pages
                .next()
                .await
                .map(|page| page.map(|page| by_name(page, accounts)));
        };
        loop {
            if let Some(page) = listed.held.take() {
                return Some(Ok(listed.hand_out(page)));
            }
            match listed.state {
                ListState::Done => return None,
                ListState::Secrets => match listed.secrets.next().await {
                    None => listed.state = ListState::Rest,
                    Some(Ok(page)) => listed.held = Some(page),
                    Some(Err(e)) => {
                        warn!(error = %e, "the Secret list stopped: the namespaces it had not shown yet are read one at a time");
                        listed.state = ListState::RestByName;
                    }
                },
                ListState::Rest | ListState::RestByName => {
                    let by_name = listed.state == ListState::RestByName;
                    listed.state = ListState::Done;
                    let rest = std::mem::take(&mut listed.pending);
                    let work = rest
                        .into_values()
                        .map(|candidate| {
                            let secret = if by_name {
                                Read::ByName
                            } else {
                                Read::Listed(None)
                            };
                            listed.work(candidate, secret)
                        })
                        .collect();
                    return Some(Ok(work));
                }
            }
        }
    }

    /// Whether namespace pages remain unread.
    pub fn has_more(&self) -> bool {
        match &self.listed {
            None => self.pages.has_more(),
            Some(listed) => listed.state != ListState::Done,
        }
    }

    /// Whether the namespace list broke off.
    pub fn incomplete(&self) -> bool {
        self.incomplete
    }

    /// The selected namespaces known and not handed out: the run stopped before them. The
    /// per-namespace path knows none beyond the pages read.
    pub fn left(&mut self) -> Vec<String> {
        match self.listed.as_mut() {
            Some(listed) => {
                listed.state = ListState::Done;
                std::mem::take(&mut listed.pending).into_keys().collect()
            }
            None => Vec::new(),
        }
    }
}

impl Listed {
    /// The page's Secrets, to the selected namespaces not handed out yet.
    fn hand_out(&mut self, page: Vec<Secret>) -> Vec<Work> {
        page.into_iter()
            .filter_map(|secret| {
                let namespace = secret.metadata.namespace.as_deref()?;
                let candidate = self.pending.remove(namespace)?;
                Some(self.work(candidate, Read::Listed(Some(secret))))
            })
            .collect()
    }

    fn work(&mut self, candidate: Candidate, secret: Read<Secret>) -> Work {
        let accounts = self
            .accounts
            .iter_mut()
            .map(|by_namespace| match by_namespace {
                Some(found) => Read::Listed(found.remove(&candidate.name)),
                None => Read::ByName,
            })
            .collect();
        Work {
            candidate,
            secret,
            accounts,
        }
    }
}

fn by_name(page: Vec<Candidate>, accounts: usize) -> Vec<Work> {
    page.into_iter()
        .map(|candidate| Work {
            candidate,
            secret: Read::ByName,
            accounts: vec![Read::ByName; accounts],
        })
        .collect()
}

/// A ServiceAccount as a list showed it, with only what adding our entry needs.
fn trimmed(sa: ServiceAccount) -> ServiceAccount {
    let mut kept = ServiceAccount {
        image_pull_secrets: sa.image_pull_secrets,
        ..ServiceAccount::default()
    };
    kept.metadata.name = sa.metadata.name;
    kept.metadata.namespace = sa.metadata.namespace;
    kept.metadata.resource_version = sa.metadata.resource_version;
    kept
}
