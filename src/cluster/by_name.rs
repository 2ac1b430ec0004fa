//! Every object of one name, in every namespace: one list, field-selected by `metadata.name`,
//! paged, a page at a time as it arrives.
//!
//! RBAC allows it without a wider grant: for a list (or watch) kube-apiserver takes a
//! `metadata.name` field selector as the request's resource name (k8s.io/apiserver
//! `pkg/endpoints/request/requestinfo.go`: `FieldSelector.RequiresExactMatch("metadata.name")`),
//! so `list` with `resourceNames: [<name>]` lists exactly the objects of that name, and a list
//! without the selector, or for another name, is refused.

use std::fmt::Debug;

use kube::api::ListParams;
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;
use tracing::{debug, warn};

use crate::cluster::retry::{self, RequestError};

/// Objects asked for per page; the server may answer fewer.
const PAGE_SIZE: u32 = 500;
/// How often an expired continue token may restart the list.
const MAX_RESTARTS: u32 = 3;

#[derive(Debug, thiserror::Error)]
pub enum ListError {
    /// No `list` on this name, cluster-wide: the caller reads each namespace's by name instead.
    #[error("forbidden to list {what} named {name} in every namespace: {source}")]
    Forbidden {
        what: &'static str,
        name: String,
        source: RequestError,
    },
    #[error("could not list {what} named {name}: {source}")]
    Request {
        what: &'static str,
        name: String,
        source: RequestError,
    },
    #[error("the list of {what} named {name} kept expiring (410) after {MAX_RESTARTS} restarts")]
    Expiring { what: &'static str, name: String },
}

impl ListError {
    pub fn is_forbidden(&self) -> bool {
        matches!(self, Self::Forbidden { .. })
    }
}

/// The pages of one field-selected list across every namespace. A list restarted after an
/// expired continue token shows again what it showed before: the caller visits each namespace
/// once.
pub struct ByName<K> {
    api: Api<K>,
    /// What the log and errors call the objects: "secrets", "serviceaccounts".
    what: &'static str,
    name: String,
    state: State,
    restarts: u32,
}

enum State {
    First,
    Continue(String),
    Done,
}

impl<K> ByName<K>
where
    K: Resource<Scope = kube::core::NamespaceResourceScope> + Clone + DeserializeOwned + Debug,
    K::DynamicType: Default,
{
    pub fn new(client: Client, what: &'static str, name: &str) -> Self {
        Self {
            api: Api::all(client),
            what,
            name: name.to_owned(),
            state: State::First,
            restarts: 0,
        }
    }

    /// Whether pages remain unread.
    pub fn has_more(&self) -> bool {
        !matches!(self.state, State::Done)
    }

    /// The next page; None when there are no more.
    pub async fn next(&mut self) -> Option<Result<Vec<K>, ListError>> {
        loop {
            let token = match std::mem::replace(&mut self.state, State::Done) {
                State::Done => return None,
                State::First => None,
                State::Continue(token) => Some(token),
            };
            let mut params = ListParams::default()
                .fields(&format!("metadata.name={}", self.name))
                .limit(PAGE_SIZE);
            if let Some(token) = &token {
                params = params.continue_token(token);
            }
            let what = self.what;
            let list = match retry::send("list by name", || self.api.list(&params)).await {
                Ok(list) => list,
                Err(RequestError::Api(s)) if s.code == 410 && token.is_some() => {
                    self.restarts += 1;
                    if self.restarts > MAX_RESTARTS {
                        return Some(Err(ListError::Expiring {
                            what,
                            name: self.name.clone(),
                        }));
                    }
                    warn!(
                        what,
                        name = self.name,
                        restart = self.restarts,
                        "list continue token expired (410); listing again from the start"
                    );
                    self.state = State::First;
                    continue;
                }
                Err(source) => {
                    let name = self.name.clone();
                    return Some(Err(if source.code() == Some(403) {
                        ListError::Forbidden { what, name, source }
                    } else {
                        ListError::Request { what, name, source }
                    }));
                }
            };
            self.state = match list.metadata.continue_.filter(|t| !t.is_empty()) {
                Some(next) => State::Continue(next),
                None => State::Done,
            };
            debug!(
                what,
                items = list.items.len(),
                more = self.has_more(),
                "list page"
            );
            return Some(Ok(list.items));
        }
    }

    /// Every page, kept as `keep` makes each object: for a list read whole before the run's
    /// first namespace (the ServiceAccounts), where `keep` holds only what is needed.
    pub async fn all<T>(
        mut self,
        mut keep: impl FnMut(K) -> Option<T>,
    ) -> Result<Vec<T>, ListError> {
        let mut kept = Vec::new();
        while let Some(page) = self.next().await {
            kept.extend(page?.into_iter().filter_map(&mut keep));
        }
        Ok(kept)
    }
}
