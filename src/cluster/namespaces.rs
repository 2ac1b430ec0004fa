//! Namespace selection: the literal names configured, or the namespace list (paged, narrowed
//! by the label selector on the server), filtered by globs and exclusions.

use std::collections::HashSet;

use k8s_openapi::api::core::v1::Namespace;
use kube::api::ListParams;
use kube::{Api, Client};
use tracing::warn;

use crate::cluster::pager::{MAX_RESTARTS, PageError, Pager};
use crate::cluster::retry::{self, RequestError};
use crate::cluster::selection::Selection;

/// A selected namespace, as the list showed it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    pub name: String,
    pub terminating: bool,
    pub origin: Origin,
}

/// How a namespace came to be selected, which says what a missing one means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// Named in ECR_REFRESH_NAMESPACES and visited without a list: it may not exist.
    Named,
    /// Shown by the list: gone later only if deleted during the run.
    Listed,
    /// Named in ECR_REFRESH_NAMESPACES, and the list, read to its end, has no such namespace.
    Missing,
}

#[derive(Debug, thiserror::Error)]
pub enum NamespaceError {
    #[error(
        "forbidden to list namespaces: {0}; grant ecr-refresh's ServiceAccount list on namespaces (see \
         manifests/), or name the namespaces literally in ECR_REFRESH_NAMESPACES so no list is needed"
    )]
    Forbidden(#[source] RequestError),
    #[error("could not list namespaces: {0}")]
    Request(#[source] RequestError),
    #[error("the namespace list kept expiring (410) after {MAX_RESTARTS} restarts")]
    Expiring,
}

/// The selected namespaces, a page at a time, as they arrive.
pub struct Pages {
    api: Api<Namespace>,
    /// Its own copy: the pages are read by a task of their own (run/reads.rs).
    selection: Selection,
    state: State,
    /// The namespace list's pages (`cluster::pager`), read in `State::Listing`.
    pager: Pager,
    /// Each namespace shown, by name: a restarted list shows them again, handed out once.
    seen: HashSet<String>,
}

enum State {
    Literal,
    Listing,
    /// The list is read: the names given literally that it did not show are left.
    Missing,
    Done,
}

impl Pages {
    pub fn new(client: Client, selection: &Selection) -> Self {
        let state = if selection.literal_names().is_some() {
            State::Literal
        } else {
            State::Listing
        };
        Self {
            api: Api::all(client),
            selection: selection.clone(),
            state,
            pager: Pager::new("namespaces", "list namespaces"),
            seen: HashSet::new(),
        }
    }

    /// Whether pages remain unread.
    pub fn has_more(&self) -> bool {
        !matches!(self.state, State::Done | State::Missing)
    }

    /// The next page of selected namespaces; None when there are no more.
    pub async fn next(&mut self) -> Option<Result<Vec<Candidate>, NamespaceError>> {
        match std::mem::replace(&mut self.state, State::Done) {
            State::Done => None,
            State::Literal => {
                let names = self.selection.literal_names().unwrap_or_default();
                let page = names
                    .into_iter()
                    .map(|n| Candidate {
                        name: n.as_str().to_owned(),
                        terminating: false,
                        origin: Origin::Named,
                    })
                    .collect();
                Some(Ok(page))
            }
            State::Missing => Some(Ok(self.missing().await)),
            State::Listing => {
                let mut params = ListParams::default();
                if let Some(selector) = &self.selection.label_selector {
                    params = params.labels(selector.as_str());
                }
                let api = &self.api;
                let page = self
                    .pager
                    .next(&params, |params| async move { api.list(&params).await })
                    .await;
                // After an error the state stays Done: the list is over as broken off.
                let items = match page? {
                    Ok(items) => items,
                    Err(PageError::Request(e)) if e.code() == Some(403) => {
                        return Some(Err(NamespaceError::Forbidden(e)));
                    }
                    Err(PageError::Request(e)) => return Some(Err(NamespaceError::Request(e))),
                    Err(PageError::Expiring { .. }) => return Some(Err(NamespaceError::Expiring)),
                };
                self.state = if self.pager.has_more() {
                    State::Listing
                } else {
                    State::Missing
                };
                let page: Vec<Candidate> = items
                    .into_iter()
                    .filter_map(|ns| {
                        let name = ns.metadata.name?;
                        // A restarted list returns what we already have: visit each namespace once.
                        (self.selection.matches(&name) && self.seen.insert(name.clone())).then(
                            || Candidate {
                                terminating: ns.metadata.deletion_timestamp.is_some()
                                    || ns.status.and_then(|s| s.phase).as_deref()
                                        == Some("Terminating"),
                                name,
                                origin: Origin::Listed,
                            },
                        )
                    })
                    .collect();
                Some(Ok(page))
            }
        }
    }

    /// The names given literally (beside globs, or with a label selector) that the list did
    /// not show, and that do not exist. Without a selector the whole list was read, so a name
    /// it did not show does not exist. With one, a name may exist without the labels: it is
    /// looked up by name (a list by metadata.name, one request per name not shown; nothing
    /// when every name was shown), and reported only if there is no such namespace.
    async fn missing(&mut self) -> Vec<Candidate> {
        let mut missing = Vec::new();
        for name in self.selection.named() {
            if self.seen.contains(name) {
                continue;
            }
            if self.selection.label_selector.is_some() {
                let params = ListParams::default()
                    .fields(&format!("metadata.name={name}"))
                    .limit(1);
                match retry::send("look up namespace", || self.api.list(&params)).await {
                    Ok(list) if list.items.is_empty() => {}
                    Ok(_) => continue,
                    Err(e) => {
                        warn!(namespace = name, error = %e, "could not tell whether a namespace named in ECR_REFRESH_NAMESPACES exists");
                        continue;
                    }
                }
            }
            missing.push(Candidate {
                name: name.to_owned(),
                terminating: false,
                origin: Origin::Missing,
            });
        }
        missing
    }
}
