//! The one pager of every paged list (the Secrets and ServiceAccounts of one name, the
//! namespaces, a namespace's pods): the page size, the continue token, and a restart when the
//! token has expired.
//!
//! kube-apiserver answers a continue token whose snapshot etcd has compacted away (every 5
//! minutes by default) with 410 Gone, reason `Expired`. The list starts again from its first
//! page, rather than falling back to one GET per object: the whole list is a few dozen pages
//! where the GETs would be thousands, and a list of 10,000 objects takes seconds, far inside
//! the compaction interval, so a restart succeeds. (The 410's own "inconsistent" continue
//! token is not used: a restart is as cheap to reason about and costs only the pages read
//! again.) A restart is logged (`list continue token expired (410); listing again from the
//! start`, with `what` and `restart`), and the restarted list shows again what it showed
//! before: each consumer hands out an object once (the namespaces by name, the Secrets and
//! ServiceAccounts by namespace, the pods by uid). After MAX_RESTARTS the list is over as
//! broken off, and the consumer says what it does without the rest.

use std::future::Future;

use kube::api::{ListParams, ObjectList};
use tracing::{debug, warn};

use crate::cluster::retry::{self, RequestError};

/// Objects asked for per page; the server may answer fewer.
pub const PAGE_SIZE: u32 = 500;
/// How often an expired continue token may restart a list.
pub const MAX_RESTARTS: u32 = 3;

/// One answer to a list request: its items and the next page's continue token.
pub struct Listing<T> {
    pub items: Vec<T>,
    pub continue_token: Option<String>,
}

impl<K: Clone> From<ObjectList<K>> for Listing<K> {
    fn from(list: ObjectList<K>) -> Self {
        Self {
            items: list.items,
            continue_token: list.metadata.continue_,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum PageError {
    #[error(transparent)]
    Request(RequestError),
    #[error("the list of {what} kept expiring (410) after {MAX_RESTARTS} restarts")]
    Expiring { what: &'static str },
}

impl PageError {
    /// The HTTP status of the request that failed (None: no answer, or the list kept expiring).
    pub fn code(&self) -> Option<u16> {
        match self {
            Self::Request(e) => e.code(),
            Self::Expiring { .. } => None,
        }
    }
}

/// Where a list stands: which page comes next, and how often it started again.
pub struct Pager {
    /// The resource as its path names it ("secrets", "pods"), for the log and errors.
    what: &'static str,
    /// The request, as a retry's log line names it ("list pods").
    request: &'static str,
    /// Named on the restart's log line: the namespace of a namespaced list, the name of a list
    /// by name.
    namespace: Option<String>,
    name: Option<String>,
    state: State,
    restarts: u32,
}

enum State {
    First,
    Continue(String),
    Done,
}

impl Pager {
    /// `what`: the resource as its path names it; `request`: the request, as a retry's log
    /// line names it.
    pub fn new(what: &'static str, request: &'static str) -> Self {
        Self {
            what,
            request,
            namespace: None,
            name: None,
            state: State::First,
            restarts: 0,
        }
    }

    /// A list of one namespace's objects.
    pub fn in_namespace(mut self, namespace: &str) -> Self {
        self.namespace = Some(namespace.to_owned());
        self
    }

    /// A list of the objects of one name.
    pub fn named(mut self, name: &str) -> Self {
        self.name = Some(name.to_owned());
        self
    }

    /// Whether pages remain unread.
    pub fn has_more(&self) -> bool {
        !matches!(self.state, State::Done)
    }

    /// The next page (None: there are no more): `params` with the page size and the continue
    /// token, sent by `fetch` (through `retry::send`).
    pub async fn next<T, L, F, Fut>(
        &mut self,
        params: &ListParams,
        mut fetch: F,
    ) -> Option<Result<Vec<T>, PageError>>
    where
        F: FnMut(ListParams) -> Fut,
        Fut: Future<Output = Result<L, kube::Error>>,
        L: Into<Listing<T>>,
    {
        loop {
            let token = match std::mem::replace(&mut self.state, State::Done) {
                State::Done => return None,
                State::First => None,
                State::Continue(token) => Some(token),
            };
            let mut page_params = params.clone().limit(PAGE_SIZE);
            if let Some(token) = &token {
                page_params = page_params.continue_token(token);
            }
            let what = self.what;
            let listing = match retry::send(self.request, || fetch(page_params.clone())).await {
                Ok(listing) => listing.into(),
                Err(RequestError::Api(s)) if s.code == 410 && token.is_some() => {
                    self.restarts += 1;
                    if self.restarts > MAX_RESTARTS {
                        return Some(Err(PageError::Expiring { what }));
                    }
                    warn!(
                        what,
                        namespace = self.namespace.as_deref(),
                        name = self.name.as_deref(),
                        restart = self.restarts,
                        "list continue token expired (410); listing again from the start"
                    );
                    self.state = State::First;
                    continue;
                }
                Err(e) => return Some(Err(PageError::Request(e))),
            };
            self.state = match listing.continue_token.filter(|t| !t.is_empty()) {
                Some(next) => State::Continue(next),
                None => State::Done,
            };
            debug!(
                what,
                items = listing.items.len(),
                more = self.has_more(),
                "list page"
            );
            return Some(Ok(listing.items));
        }
    }
}
