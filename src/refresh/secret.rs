//! The one per-Secret refresh, for every Secret we own: judged as read, left as it is when it is
//! fresh, else written from the run's tokens (fetched by the first Secret that is due). The
//! namespaces' pull Secrets (`refresh`) and the Argo CD Secrets (`refresh::argocd`) are its two
//! kinds; what differs between them is a `SecretKind`.

use std::sync::Arc;
use std::time::SystemTime;

use k8s_openapi::api::core::v1::Secret;
use kube::Api;

use crate::cluster::reads::Read;
use crate::owned::{self, OwnedError, Settled, SkipReason};
use crate::pull_secret::due::{self, Decision, Judged};
use crate::report::Outcome;

use super::tokens::{Fetched, OnDemand, TokenError};

/// What differs between the kinds of Secret a refresh writes.
pub(super) trait SecretKind {
    type Error: OwnedError;
    /// Whether the Secret as read (None: there is none) may be written, and is due.
    async fn judge(&mut self, current: Option<Secret>) -> Result<Judged, Self::Error>;
    /// Before the first token is fetched: whether a due Secret (`current` as read) is skipped
    /// after all.
    async fn skip(&self, _current: Option<&Secret>) -> Option<SkipReason> {
        None
    }
    /// Writes the due Secret with the run's tokens, over `current`, what was read.
    async fn write(
        &mut self,
        fetched: &Fetched,
        current: Option<Secret>,
    ) -> Result<Settled, Self::Error>;
}

/// Why a Secret was not refreshed.
pub(super) enum NotRefreshed<E> {
    /// With what the run had read of the Secret before it failed.
    Failed(E, Seen),
    /// No tokens: the whole run ends.
    Tokens(Arc<TokenError>),
}

/// What a Secret's read showed, kept for when a later step fails: the Secret is then as it was
/// read, its expiry still the one that says when its pulls fail.
#[derive(Debug, Clone, Default)]
pub(super) struct Seen {
    pub read: bool,
    pub uid: Option<String>,
    pub expires_at: Option<SystemTime>,
}

/// Reads the Secret named `name` (unless the list did: `read`) and judges it; if it is due,
/// gets the tokens and writes it.
pub(super) async fn refresh<K: SecretKind>(
    kind: &mut K,
    tokens: &OnDemand<'_>,
    api: &Api<Secret>,
    name: &str,
    read: Read<Secret>,
) -> Result<Settled, NotRefreshed<K::Error>> {
    let current = match read {
        Read::Listed(listed) => listed,
        Read::ByName => owned::read(api, name)
            .await
            .map_err(|e| NotRefreshed::Failed(e, Seen::default()))?,
    };
    let seen = Seen {
        read: true,
        uid: current.as_ref().and_then(|s| s.metadata.uid.clone()),
        expires_at: current.as_ref().and_then(due::recorded_expiry),
    };
    let failed = |e| NotRefreshed::Failed(e, seen.clone());
    let judged = kind.judge(current).await.map_err(failed)?;
    let due = match judged.decision {
        Decision::Fresh { expires_at, due_at } => {
            return Ok(Settled::fresh(seen.uid.clone(), expires_at, due_at));
        }
        Decision::Due(due) => due,
    };
    if let Some(reason) = kind.skip(judged.current.as_ref()).await {
        return Ok(Settled::skipped(reason));
    }
    // A Secret in flight when the run stops still gets its tokens and its write, within the
    // shutdown grace, as any write in flight.
    let fetched = tokens.get().await.map_err(NotRefreshed::Tokens)?;
    let mut settled = kind.write(fetched, judged.current).await.map_err(failed)?;
    if settled.outcome != Outcome::Skipped {
        settled.due = Some(due.to_string());
    }
    Ok(settled)
}
