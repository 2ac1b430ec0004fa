//! A Secret we own, and the one protocol every write of one follows: the pull Secret
//! (`pull_secret::write`) and the Argo CD Secrets (`argocd::secret`) are its two implementations
//! of `Owned`, which says what differs between them (the name, whether the Secret found may be
//! written, the bodies, the errors); the next Secret we own is one more.
//!
//! Never delete-then-create: a Secret that exists is updated with server-side apply, so it is
//! never absent. Every apply is pinned to what was read: it names the uid read (so it can only
//! update that object, never create a replacement of a Secret deleted meanwhile) and the
//! resourceVersion read (a value derived from the one read is only written over that version; a
//! change made since is re-read, never overwritten). A create is a POST, which cannot overwrite
//! a Secret that appeared meanwhile; one whose answer was lost is recognised by what it sent.

use std::collections::BTreeMap;
use std::time::SystemTime;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use tracing::debug;

use crate::cluster::retry::{self, RequestError};
use crate::report::Outcome;

/// The field manager of every write of ours.
pub const FIELD_MANAGER: &str = "ecr-refresh";

/// Reads, conflicts and deletions survived before a Secret is given up.
pub const ATTEMPTS: usize = 5;

/// What differs between the Secrets we own, for the one write protocol (`write`).
pub trait Owned {
    type Error: OwnedError;
    /// The Secret's name.
    fn name(&self) -> &str;
    /// Whether the writes are dry runs (sent with dryRun=All: admitted, never stored).
    fn dry_run(&self) -> bool;
    /// The expiry the Secret holds once written.
    fn expiry(&self) -> Option<SystemTime>;
    /// Whether the Secret found may be written over (Err: it is not ours to write).
    fn may_write(&self, current: &Secret) -> Result<(), Self::Error>;
    /// The object a create sends.
    fn create_body(&self) -> Result<Secret, Self::Error>;
    /// The object an apply over `current` sends, unpinned (`write` pins it to the uid and
    /// resourceVersion read); what the body keeps or drops of `current` is noted in `settled`,
    /// which is what the write comes to if the apply lands.
    fn apply_body(&self, current: &Secret, settled: &mut Settled) -> Result<Secret, Self::Error>;
    /// After an apply landed: anything more the Secret needs (the pull Secret's kubectl copy of
    /// the old password removed). A failure here is noted in `settled`, not made one.
    fn applied(
        &self,
        _api: &Api<Secret>,
        _applied: Secret,
        _settled: &mut Settled,
    ) -> impl Future<Output = ()> + Send {
        async {}
    }
    /// What a create meeting no namespace comes to: by default, the namespace is skipped.
    fn no_namespace(&self) -> Result<Settled, Self::Error> {
        Ok(Settled::skipped(SkipReason::NamespaceNotFound))
    }
}

/// A kind's error, which holds the protocol's own (`WriteError`), worded for the kind.
pub trait OwnedError: From<WriteError> {
    /// The Secret, as a message names it: `the Secret`, `the Argo CD Secret`.
    const SECRET: &'static str;
    /// Where a forbidden request's rights are granted: the end of `grant ecr-refresh's
    /// ServiceAccount create, and get and patch on this Secret's name`.
    const GRANTED: &'static str;
}

/// What goes wrong in the protocol itself, for any kind of Secret.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    #[error(
        "forbidden to {action} {secret}: {source}; grant ecr-refresh's ServiceAccount create, and get and patch \
         on this Secret's name{granted}"
    )]
    Forbidden {
        secret: &'static str,
        granted: &'static str,
        action: &'static str,
        source: RequestError,
    },
    #[error("could not {action} {secret}: {source}")]
    Request {
        secret: &'static str,
        action: &'static str,
        source: RequestError,
    },
    #[error(
        "{secret} kept changing under us: gave up after {ATTEMPTS} attempts; the next run tries again"
    )]
    Contended { secret: &'static str },
}

/// A request of a write failed; `action` says what it was to do (`read`, `create`, `apply`).
pub fn failed<E: OwnedError>(action: &'static str, source: RequestError) -> E {
    let secret = E::SECRET;
    E::from(if source.code() == Some(403) {
        WriteError::Forbidden {
            secret,
            granted: E::GRANTED,
            action,
            source,
        }
    } else {
        WriteError::Request {
            secret,
            action,
            source,
        }
    })
}

/// The Secret kept changing under us: `ATTEMPTS` were not enough.
pub fn contended<E: OwnedError>() -> E {
    E::from(WriteError::Contended { secret: E::SECRET })
}

/// Why a Secret was not written, when that is not a failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SkipReason {
    NamespaceTerminating,
    /// A namespace named literally in the configuration that does not exist.
    NamespaceNotFound,
    /// A namespace the list showed, deleted before its Secret was created: nothing to do.
    NamespaceDeleted,
}

impl SkipReason {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::NamespaceTerminating => "namespace is terminating",
            Self::NamespaceNotFound => "namespace not found",
            Self::NamespaceDeleted => "namespace deleted during the run",
        }
    }
}

/// What a run came to for one Secret: written, or fresh, or skipped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settled {
    pub outcome: Outcome,
    pub uid_before: Option<String>,
    pub uid_after: Option<String>,
    /// Why the Secret was skipped.
    pub reason: Option<SkipReason>,
    /// The kubectl last-applied annotation (a copy of the old password) was removed.
    pub removed_last_applied: bool,
    /// Written, but something to tell the operator (the annotation could not be removed).
    pub warning: Option<String>,
    /// auths entries of other registries, kept as they were.
    pub kept_entries: usize,
    /// auths entries we had written for registries no longer configured, removed.
    pub dropped_entries: Vec<String>,
    /// The expiry the Secret holds after this run: the token's for a write (or a dry run's
    /// would-be write), the recorded one for `fresh`; None when skipped or failed.
    pub expires_at: Option<SystemTime>,
    /// When a `fresh` Secret becomes due: its expiry less ECR_REFRESH_RENEW_BEFORE.
    pub due_at: Option<SystemTime>,
    /// Why a written Secret was due (`expires-soon`, `missing`, …).
    pub due: Option<String>,
}

impl Settled {
    pub fn new(outcome: Outcome, uid_before: Option<String>, uid_after: Option<String>) -> Self {
        Self {
            outcome,
            uid_before,
            uid_after,
            reason: None,
            removed_last_applied: false,
            warning: None,
            kept_entries: 0,
            dropped_entries: Vec::new(),
            expires_at: None,
            due_at: None,
            due: None,
        }
    }

    /// What our create of `owned` came to: `uid` is the created Secret's, `deleted_uid` the one
    /// deleted between our read and our write (then it was `recreated`). A dry run's create
    /// stores nothing: the uid in its answer belongs to no Secret.
    fn created(owned: &impl Owned, uid: Option<String>, deleted_uid: Option<String>) -> Self {
        let dry_run = owned.dry_run();
        let outcome = match (dry_run, &deleted_uid) {
            (true, _) => Outcome::WouldCreate,
            (false, Some(_)) => Outcome::Recreated,
            (false, None) => Outcome::Created,
        };
        Self {
            expires_at: owned.expiry(),
            ..Self::new(outcome, deleted_uid, uid.filter(|_| !dry_run))
        }
    }

    /// Not due: left as it is, uid unchanged.
    pub fn fresh(uid: Option<String>, expires_at: SystemTime, due_at: SystemTime) -> Self {
        Self {
            expires_at: Some(expires_at),
            due_at: Some(due_at),
            ..Self::new(Outcome::Fresh, uid.clone(), uid)
        }
    }

    /// Adds a warning; several are joined with `; `.
    pub fn warn(&mut self, warning: String) {
        self.warning = Some(match self.warning.take() {
            Some(before) => format!("{before}; {warning}"),
            None => warning,
        });
    }

    pub fn skipped(reason: SkipReason) -> Self {
        Self {
            reason: Some(reason),
            ..Self::new(Outcome::Skipped, None, None)
        }
    }
}

/// Reads the Secret named `name` (None: there is none).
pub async fn read<E: OwnedError>(api: &Api<Secret>, name: &str) -> Result<Option<Secret>, E> {
    retry::send("get secret", || api.get_opt(name))
        .await
        .map_err(|e| failed("read", e))
}

/// Writes `owned` in `namespace`, the one `api` is scoped to, starting from `first`, what a read
/// found: no second read unless a write is refused for a change meanwhile.
pub async fn write<O: Owned>(
    api: &Api<Secret>,
    namespace: &str,
    owned: &O,
    first: Option<Secret>,
) -> Result<Settled, O::Error> {
    let name = owned.name();
    // The uid of a Secret that was deleted between our read and our apply.
    let mut deleted_uid: Option<String> = None;
    // What our create sent, when its answer may have been lost (an earlier attempt of the POST
    // failed): a Secret found holding exactly that is the one this run created.
    let mut maybe_ours: Option<Data> = None;
    let mut read = Some(first);
    for _ in 0..ATTEMPTS {
        let current = match read.take() {
            Some(current) => current,
            None => self::read::<O::Error>(api, name).await?,
        };
        let Some(current) = current else {
            match create(api, owned, deleted_uid.clone()).await? {
                Created::Settled(settled) => return Ok(settled),
                Created::AppearedMeanwhile(lost_answer) => {
                    maybe_ours = lost_answer;
                    continue;
                }
            }
        };
        if let Some(sent) = maybe_ours.take()
            && holds_what_was_sent(&current, &sent)
        {
            // The password in it is this run's: no one else could have written it.
            debug!(
                namespace,
                secret = name,
                "our create's answer was lost; the Secret found is the one it created"
            );
            return Ok(Settled::created(owned, current.metadata.uid, deleted_uid));
        }
        let uid = current.metadata.uid.clone();
        match apply(api, owned, &current).await? {
            Applied::Landed(settled) => return Ok(settled),
            Applied::Deleted => {
                debug!(
                    namespace,
                    secret = name,
                    uid = uid.as_deref().unwrap_or("-"),
                    "deleted between our read and our apply"
                );
                deleted_uid = uid;
            }
            Applied::Changed => {
                debug!(
                    namespace,
                    secret = name,
                    "changed between our read and our apply; reading it again"
                );
            }
        }
    }
    Err(contended())
}

/// A Secret's data: its keys and values.
type Data = BTreeMap<String, ByteString>;

/// Whether `found` holds every data value a create sent, as sent.
fn holds_what_was_sent(found: &Secret, sent: &Data) -> bool {
    let found = found.data.as_ref();
    sent.iter()
        .all(|(key, value)| found.and_then(|d| d.get(key)) == Some(value))
}

enum Created {
    /// What the write comes to: created (`deleted_uid`: recreated), or skipped.
    Settled(Settled),
    /// 409 AlreadyExists: read it again. When an earlier attempt of the POST failed (its answer
    /// may have been lost after the server stored it), what it sent.
    AppearedMeanwhile(Option<Data>),
}

/// POST: fails with 409 AlreadyExists, never overwrites, if a Secret appeared since our read.
async fn create<O: Owned>(
    api: &Api<Secret>,
    owned: &O,
    deleted_uid: Option<String>,
) -> Result<Created, O::Error> {
    let body = owned.create_body()?;
    let params = PostParams {
        dry_run: owned.dry_run(),
        field_manager: Some(FIELD_MANAGER.to_owned()),
    };
    let mut tries = 0;
    let sent = retry::send("create secret", || {
        tries += 1;
        api.create(&params, &body)
    })
    .await;
    let settled = match sent {
        Ok(created) => Settled::created(owned, created.metadata.uid, deleted_uid),
        Err(RequestError::Api(s)) if s.is_already_exists() => {
            let sent = (tries > 1).then(|| body.data.unwrap_or_default());
            return Ok(Created::AppearedMeanwhile(sent));
        }
        // A namespace being deleted takes its Secrets with it: nothing to write.
        Err(RequestError::Api(s)) if is_namespace_terminating(&s) => {
            Settled::skipped(SkipReason::NamespaceTerminating)
        }
        Err(RequestError::Api(s)) if is_namespace_not_found(&s) => owned.no_namespace()?,
        Err(e) => return Err(failed("create", e)),
    };
    Ok(Created::Settled(settled))
}

enum Applied {
    Landed(Settled),
    /// The Secret we read is gone (409 uid mismatch): read again, create it fresh.
    Deleted,
    /// The Secret changed since we read it (resourceVersion 409, or another uid): read again.
    Changed,
}

/// Server-side apply pinned to the uid and the resourceVersion read.
async fn apply<O: Owned>(
    api: &Api<Secret>,
    owned: &O,
    current: &Secret,
) -> Result<Applied, O::Error> {
    owned.may_write(current)?;
    let uid = current.metadata.uid.clone();
    let outcome = if owned.dry_run() {
        Outcome::WouldUpdate
    } else {
        Outcome::Updated
    };
    let mut settled = Settled {
        expires_at: owned.expiry(),
        ..Settled::new(outcome, uid.clone(), None)
    };
    let mut body = owned.apply_body(current, &mut settled)?;
    body.metadata.uid = uid;
    body.metadata.resource_version = current.metadata.resource_version.clone();

    let mut params = PatchParams::apply(FIELD_MANAGER).force();
    params.dry_run = owned.dry_run();
    let patch = Patch::Apply(&body);
    let name = owned.name();
    let applied = match retry::send("apply secret", || api.patch(name, &params, &patch)).await {
        Ok(applied) => applied,
        Err(RequestError::Api(s)) if s.is_conflict() && s.message.contains("uid mismatch") => {
            return Ok(Applied::Deleted);
        }
        Err(RequestError::Api(s)) if s.is_conflict() || (s.is_invalid() && is_uid_field(&s)) => {
            return Ok(Applied::Changed);
        }
        Err(e) => return Err(failed("apply", e)),
    };
    settled.uid_after = applied.metadata.uid.clone();
    owned.applied(api, applied, &mut settled).await;
    Ok(Applied::Landed(settled))
}

/// A create's 404 for the namespace itself (not for the object).
pub fn is_namespace_not_found(s: &kube::core::Status) -> bool {
    s.is_not_found() && s.details.as_ref().is_some_and(|d| d.kind == "namespaces")
}

/// A create refused because the namespace is being deleted.
pub fn is_namespace_terminating(s: &kube::core::Status) -> bool {
    s.is_forbidden()
        && s.details
            .as_ref()
            .is_some_and(|d| d.causes.iter().any(|c| c.reason == "NamespaceTerminating"))
}

/// A 422 on `metadata.uid`: the object was replaced since our read.
pub fn is_uid_field(s: &kube::core::Status) -> bool {
    s.details
        .as_ref()
        .is_some_and(|d| d.causes.iter().any(|c| c.field == "metadata.uid"))
}
