//! How the selected namespaces' pull Secrets, and the ServiceAccounts ECR_REFRESH_SERVICE_ACCOUNTS
//! names, are read: one path per run, said by the `read` field of its first log line.
//!
//! - `list`: one list of the Secret's name across every namespace, field-selected by
//!   `metadata.name` and paged (`cluster::by_name`), and one list per ServiceAccount name. The
//!   namespace pages and the Secret pages are read side by side, each by a task of its own
//!   (the two lists are independent), and joined per namespace: a namespace is handed out once
//!   the namespace list has shown it and the Secret list has shown its Secret, or has ended
//!   without one. A selected namespace the Secret list did not show has no Secret: it is created
//!   with no read first. 10,000 namespaces with nothing due cost about 40 requests instead of
//!   10,000.
//! - `per-namespace`: a GET of the Secret (and of each ServiceAccount) in each namespace, as the
//!   namespace pages arrive. Taken when ECR_REFRESH_NAMESPACES gives literal names only (no
//!   namespace list, the namespaced install's case: a list's cost grows with the cluster, the
//!   GETs' with the names given), and when the API server refuses the list (403: RBAC without
//!   `list` on the Secret's name, as in a ClusterRole from before the list).
//!
//! Never both for one namespace, and none left out. A Secret list that breaks off after its
//! first page (a 403, a 5xx after its retries, a continue token that kept expiring) leaves the
//! namespaces it had not shown to GETs, and only those: the ones it showed are judged on what
//! it showed. A continue token that expires (410 Gone, `Expired`: the list's snapshot was
//! compacted away in etcd) restarts the list from its first page (`cluster::by_name`): the
//! whole list is a few dozen pages where the GETs would be thousands, and the namespaces
//! already handed out are not handed out again.

use std::collections::{BTreeMap, HashMap, HashSet};

use k8s_openapi::api::core::v1::{Secret, ServiceAccount};
use kube::Client;
use tokio::sync::mpsc;
use tokio::task::AbortHandle;
use tracing::{Instrument as _, error, warn};

use crate::cluster::by_name::{ByName, ListError, ListedSecret, ListedServiceAccount};
use crate::cluster::names::{SecretName, ServiceAccountName};
use crate::cluster::namespaces::{Candidate, NamespaceError, Pages};
use crate::cluster::retry;
use crate::cluster::selection::Selection;

/// Namespace pages read ahead of their use (a page is 500 names, a few tens of kB).
const NAMESPACE_PAGES_AHEAD: usize = 4;
/// Secret pages read ahead of their use: the next page is on its way while this one is
/// judged. A page is 500 Secrets, up to about 5 MB with real-length tokens.
const SECRET_PAGES_AHEAD: usize = 1;
/// Secrets the list showed for namespaces the namespace list has not shown yet, at most
/// (about two pages): beyond it the Secret pages wait for the namespace pages, so memory
/// stays bounded whichever list runs ahead.
const UNMATCHED_LIMIT: usize = 1_000;

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

/// A namespace page as its task hands it over, with whether more pages follow.
type NamespacePage = (Result<Vec<Candidate>, NamespaceError>, bool);

/// The run's namespaces, a batch at a time, each with what was read of it.
pub struct Reads<'a> {
    client: Client,
    selection: &'a Selection,
    accounts: &'a [ServiceAccountName],
    path: Path,
    /// The namespace pages, read by a task of their own (both paths).
    namespaces: mpsc::Receiver<NamespacePage>,
    /// Whether the namespace pages are still to be received from.
    namespaces_open: bool,
    /// Whether namespace pages remain unread, as the last one received said.
    namespaces_more: bool,
    listed: Option<Listed>,
    /// The namespace list broke off after its first page.
    incomplete: bool,
    /// The reading tasks: stopped when the reads are dropped (the run ended or stopped).
    tasks: Vec<AbortHandle>,
}

impl Drop for Reads<'_> {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// The list path's state: the join of the two lists.
struct Listed {
    /// The Secret pages after the first, read by a task of their own; None once the list is
    /// read to its end or broke off.
    secrets: Option<mpsc::Receiver<Result<Vec<Secret>, ListError>>>,
    /// The Secret list's first page, read before anything else (it decides the path).
    first: Option<Vec<Secret>>,
    state: SecretList,
    /// Selected namespaces the namespace list showed, whose Secret the list has not shown yet.
    pending: BTreeMap<String, Candidate>,
    /// Secrets the list showed whose namespace the namespace list has not shown yet.
    unmatched: HashMap<String, Secret>,
    /// Every selected namespace shown so far, handed out or pending: a Secret list restarted
    /// after a 410 shows the handed-out ones again, and they are not handed out twice.
    known: HashSet<String>,
    /// Per ServiceAccount name: its objects by namespace, or None when that list was refused.
    accounts: Vec<Option<HashMap<String, ServiceAccount>>>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum SecretList {
    Reading,
    /// Read to its end: a namespace it did not show has no Secret.
    Read,
    /// Broke off: a namespace it did not show is read by name.
    Broken,
}

impl<'a> Reads<'a> {
    /// Starts the namespace pages, and decides the path: literal names are read per
    /// namespace; otherwise the Secret list's first page is asked for (beside the first
    /// namespace page), and a refusal (or any failure) means per namespace. Returns the
    /// reason when the list was tried and not taken, for the log after the first line.
    pub async fn open(
        client: Client,
        selection: &'a Selection,
        secret: &SecretName,
        accounts: &'a [ServiceAccountName],
    ) -> (Self, Option<ListError>) {
        let (tx, namespaces) = mpsc::channel(NAMESPACE_PAGES_AHEAD);
        let mut pages = Pages::new(client.clone(), selection);
        let task = spawn(async move {
            while let Some(page) = pages.next().await {
                if tx.send((page, pages.has_more())).await.is_err() {
                    break;
                }
            }
        });
        let mut reads = Self {
            client: client.clone(),
            selection,
            accounts,
            path: Path::PerNamespace,
            namespaces,
            namespaces_open: true,
            namespaces_more: true,
            listed: None,
            incomplete: false,
            tasks: vec![task],
        };
        if selection.literal_names().is_some() {
            return (reads, None);
        }
        let mut secrets = ByName::<ListedSecret>::new(client, "secrets", secret.as_str());
        match secrets.next().await {
            Some(Ok(first)) => {
                let (tx, rx) = mpsc::channel(SECRET_PAGES_AHEAD);
                reads.tasks.push(spawn(async move {
                    while let Some(page) = secrets.next().await {
                        if tx.send(page).await.is_err() {
                            break;
                        }
                    }
                }));
                reads.path = Path::List;
                reads.listed = Some(Listed {
                    secrets: Some(rx),
                    first: Some(first),
                    state: SecretList::Reading,
                    pending: BTreeMap::new(),
                    unmatched: HashMap::new(),
                    known: HashSet::new(),
                    accounts: Vec::new(),
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

    /// The next namespace page from its task; None when there are no more.
    async fn namespace_page(&mut self) -> Option<Result<Vec<Candidate>, NamespaceError>> {
        if !self.namespaces_open {
            return None;
        }
        match self.namespaces.recv().await {
            Some((page, more)) => {
                self.namespaces_more = more;
                Some(page)
            }
            None => {
                self.namespaces_open = false;
                self.namespaces_more = false;
                None
            }
        }
    }

    /// The first batch. An error on the namespace list's first page ends the run, as it would
    /// without the list: nothing has been written.
    pub async fn first(&mut self) -> Result<Vec<Work>, NamespaceError> {
        let accounts = self.accounts.len();
        let first = self.namespace_page().await.transpose()?.unwrap_or_default();
        let Some(listed) = self.listed.as_mut() else {
            return Ok(by_name(first, accounts));
        };
        for account in self.accounts {
            let list = ByName::<ListedServiceAccount>::new(
                self.client.clone(),
                "serviceaccounts",
                account.as_str(),
            );
            let selection = self.selection;
            // Only what a write needs (its resourceVersion and imagePullSecrets), of the
            // namespaces the selection can take.
            let kept = list
                .all(|sa: ServiceAccount| {
                    let namespace = sa.metadata.namespace.clone()?;
                    selection.matches(&namespace).then_some((namespace, sa))
                })
                .await;
            listed.accounts.push(match kept {
                Ok(kept) => Some(kept.into_iter().collect()),
                Err(e) => {
                    warn!(service_account = account.as_str(), error = %e,
                        "ServiceAccounts of this name are read one namespace at a time: grant list on \
                         them by name (resourceNames; see manifests/) to read them in one list");
                    None
                }
            });
        }
        let mut work = listed.namespace_page(first);
        if let Some(page) = listed.first.take() {
            work.extend(listed.secret_page(page, self.namespaces_open));
        }
        Ok(work)
    }

    /// The next batch; None when there are no more. An empty batch is not the end.
    pub async fn next(&mut self) -> Option<Result<Vec<Work>, NamespaceError>> {
        let accounts = self.accounts.len();
        if self.listed.is_none() {
            return self
                .namespace_page()
                .await
                .map(|page| page.map(|page| by_name(page, accounts)));
        }
        let listed = self.listed.as_mut()?;
        if !self.namespaces_open && listed.secrets.is_none() && listed.pending.is_empty() {
            return None;
        }
        // The namespace pages first: they are small, and a Secret waits for its namespace.
        // The Secret pages are taken while few Secrets wait so (or once the namespace list
        // is over).
        let take_secrets = listed.secrets.is_some()
            && (listed.unmatched.len() < UNMATCHED_LIMIT || !self.namespaces_open);
        tokio::select! {
            biased;
            page = self.namespaces.recv(), if self.namespaces_open => {
                match page {
                    Some((Ok(page), more)) => {
                        self.namespaces_more = more;
                        return Some(Ok(listed.namespace_page(page)));
                    }
                    Some((Err(e), _)) => {
                        error!(error = %e, "namespace list stopped: namespaces on later pages are left out of this run");
                        self.incomplete = true;
                    }
                    None => {}
                }
                // The namespace list is over, read to its end or broken off: a Secret whose
                // namespace it did not show is not this run's.
                self.namespaces_open = false;
                self.namespaces_more = false;
                listed.unmatched.clear();
                Some(Ok(Vec::new()))
            }
            page = next_page(&mut listed.secrets), if take_secrets => match page {
                Some(Ok(page)) => Some(Ok(listed.secret_page(page, self.namespaces_open))),
                Some(Err(e)) => {
                    warn!(error = %e, "the Secret list stopped: the namespaces it had not shown yet are read one at a time");
                    Some(Ok(listed.end(SecretList::Broken)))
                }
                None => Some(Ok(listed.end(SecretList::Read))),
            },
            else => None,
        }
    }

    /// Whether namespace pages remain unread, or namespaces known and not handed out.
    pub fn has_more(&self) -> bool {
        self.namespaces_more
            || self
                .listed
                .as_ref()
                .is_some_and(|l| l.secrets.is_some() || !l.pending.is_empty())
    }

    /// Whether the namespace list broke off.
    pub fn incomplete(&self) -> bool {
        self.incomplete
    }

    /// The selected namespaces known and not handed out: the run stopped before them. The
    /// per-namespace path knows none beyond the pages read; namespace pages still unread are
    /// told by `has_more`.
    pub fn left(&mut self) -> Vec<String> {
        self.namespaces_open = false;
        match self.listed.as_mut() {
            Some(listed) => {
                listed.secrets = None;
                listed.unmatched.clear();
                std::mem::take(&mut listed.pending).into_keys().collect()
            }
            None => Vec::new(),
        }
    }
}

/// A list's reading task, in the caller's span and cluster (a fleet's lines name their
/// cluster): stopped by its handle.
fn spawn(read: impl Future<Output = ()> + Send + 'static) -> AbortHandle {
    tokio::spawn(retry::in_current_cluster(read).in_current_span()).abort_handle()
}

/// The next page of a list still being read.
async fn next_page<T>(pages: &mut Option<mpsc::Receiver<T>>) -> Option<T> {
    match pages {
        Some(pages) => pages.recv().await,
        None => None,
    }
}

impl Listed {
    /// A namespace page: each namespace whose Secret is known is handed out, the others wait
    /// for the Secret list (or, when it is over, are handed out as it left them).
    fn namespace_page(&mut self, page: Vec<Candidate>) -> Vec<Work> {
        let mut work = Vec::new();
        for candidate in page {
            if !self.known.insert(candidate.name.clone()) {
                continue;
            }
            let secret = match self.unmatched.remove(&candidate.name) {
                Some(secret) => Read::Listed(Some(secret)),
                None => match self.state {
                    SecretList::Reading => {
                        self.pending.insert(candidate.name.clone(), candidate);
                        continue;
                    }
                    SecretList::Read => Read::Listed(None),
                    SecretList::Broken => Read::ByName,
                },
            };
            work.push(self.work(candidate, secret));
        }
        work
    }

    /// A Secret page: each Secret to its namespace if the namespace list showed it, kept for
    /// it if that list may still show it (`namespaces_open`), else dropped (not selected, or
    /// handed out already by a list restarted after a 410).
    fn secret_page(&mut self, page: Vec<Secret>, namespaces_open: bool) -> Vec<Work> {
        let mut work = Vec::new();
        for secret in page {
            let Some(namespace) = secret.metadata.namespace.clone() else {
                continue;
            };
            if let Some(candidate) = self.pending.remove(&namespace) {
                work.push(self.work(candidate, Read::Listed(Some(secret))));
            } else if namespaces_open && !self.known.contains(&namespace) {
                self.unmatched.insert(namespace, secret);
            }
        }
        work
    }

    /// The Secret list is over, read to its end or broken off: the namespaces waiting for it
    /// are handed out, with no Secret or to be read by name.
    fn end(&mut self, state: SecretList) -> Vec<Work> {
        self.state = state;
        self.secrets = None;
        let secret = match state {
            SecretList::Broken => Read::ByName,
            _ => Read::Listed(None),
        };
        std::mem::take(&mut self.pending)
            .into_values()
            .map(|candidate| self.work(candidate, secret.clone()))
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
