//! Writing the pull Secret in one namespace, in place.
//!
//! Never delete-then-create: a Secret that exists is updated with server-side apply, so it is
//! never absent. Every write derived from a read is pinned to what it read: the apply names the
//! uid read (so it can only update that object, never create a replacement of a Secret deleted
//! meanwhile) and the resourceVersion read (its value keeps others' auths entries as they were
//! read, so a change made since is re-read, never overwritten). A create is a POST, which cannot
//! overwrite a Secret that appeared meanwhile.

use std::collections::BTreeMap;
use std::time::SystemTime;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use tracing::debug;

use crate::aws::ecr::Credential;
use crate::aws::registry::RegistryHost;
use crate::cluster::events;
use crate::cluster::names::SecretName;
use crate::cluster::retry::{self, RequestError};
use crate::pull_secret::docker_config::{self, UnreadableDockerConfig};
use crate::pull_secret::due::{self, Decision, Policy, Registries};
use crate::pull_secret::install::{self, INSTALL_ANNOTATION, Install, OtherInstall};
use crate::report::Outcome;

pub use crate::pull_secret::{
    CREATED_LABEL, DATA_KEY, DIGEST_ANNOTATION, EXPIRES_ANNOTATION, FIELD_MANAGER,
    LAST_APPLIED_ANNOTATION, MANAGED_BY_LABEL, REGISTRIES_ANNOTATION, SECRET_TYPE,
    last_applied_holds_ours,
};

/// Reads, conflicts and deletions survived before a namespace is given up.
const ATTEMPTS: usize = 5;

/// What every namespace's Secret should hold after this run.
pub struct Desired<'a> {
    pub name: &'a SecretName,
    pub credentials: Vec<Credential<'a>>,
    /// RFC 3339, the earliest expiry of the tokens written.
    pub expires_at: String,
    /// The same moment as a time, for the metrics (None if ECR gave none we can read).
    pub expiry: Option<SystemTime>,
    pub dry_run: bool,
    /// The name recorded in `ecr-refresh/install`.
    pub install: Option<&'a Install>,
}

/// Why a namespace was not written, when that is not a failure.
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

impl Desired<'_> {
    /// The registry hosts whose entries we write.
    fn hosts(&self) -> Vec<&str> {
        self.credentials.iter().map(|c| c.registry.host()).collect()
    }
}

/// What happened to one namespace's Secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    pub outcome: Outcome,
    pub uid_before: Option<String>,
    pub uid_after: Option<String>,
    /// Why the namespace was skipped.
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

impl Written {
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

    /// What our create came to: `uid` is the created Secret's, `deleted_uid` the one deleted
    /// between our read and our write (then it was `recreated`). A dry run's create stores
    /// nothing: the uid in its answer belongs to no Secret.
    pub fn created(
        dry_run: bool,
        uid: Option<String>,
        deleted_uid: Option<String>,
        expires_at: Option<SystemTime>,
    ) -> Self {
        let outcome = match (dry_run, &deleted_uid) {
            (true, _) => Outcome::WouldCreate,
            (false, Some(_)) => Outcome::Recreated,
            (false, None) => Outcome::Created,
        };
        Self {
            expires_at,
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
    fn warn(&mut self, warning: String) {
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

#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    #[error(
        "the Secret has type {found}, not {SECRET_TYPE}; type is immutable, so ecr-refresh left it untouched: \
         delete or rename that Secret yourself, or set ECR_REFRESH_SECRET_NAME to another name"
    )]
    WrongType {
        found: String,
        /// The uid of the Secret that is in the way.
        uid: Option<String>,
    },
    #[error(
        "the Secret is immutable (immutable: true), so its token cannot be refreshed; ecr-refresh left it untouched: \
         delete that Secret yourself so the next run creates it, or set ECR_REFRESH_SECRET_NAME to another name"
    )]
    Immutable { uid: Option<String> },
    #[error("the Secret was left untouched: {0}; fix or remove that value")]
    Unreadable(#[from] UnreadableDockerConfig),
    #[error(
        "forbidden to {action} the Secret: {source}; grant ecr-refresh's ServiceAccount create, and get and \
         patch on this Secret's name (resourceNames in manifests/), in this namespace"
    )]
    Forbidden {
        action: &'static str,
        source: RequestError,
    },
    #[error("could not {action} the Secret: {source}")]
    Request {
        action: &'static str,
        source: RequestError,
    },
    #[error(
        "the Secret holds entries for {hosts} that install {install} wrote (annotation {INSTALL_ANNOTATION}), \
         registries this install does not write; two installs writing one Secret name undo each other's entries, \
         so ecr-refresh left it untouched: give each install its own ECR_REFRESH_SECRET_NAME, or, if {install} \
         is gone for good, remove that annotation (kubectl annotate secret <name> {INSTALL_ANNOTATION}-) so \
         this install takes the Secret over and drops those entries",
        hosts = .hosts.join(",")
    )]
    OtherInstall {
        install: String,
        hosts: Vec<String>,
        uid: Option<String>,
    },
    #[error(
        "the Secret kept changing under us: gave up after {ATTEMPTS} attempts; the next run tries again"
    )]
    Contended,
}

impl SecretError {
    /// The CamelCase `reason` of the Event for a Secret that could not be refreshed.
    pub fn event_reason(&self) -> &'static str {
        match self {
            Self::WrongType { .. } => events::WRONG_TYPE,
            Self::Immutable { .. } => events::IMMUTABLE,
            Self::Unreadable(_) => events::UNREADABLE,
            Self::Forbidden { .. } => events::FORBIDDEN,
            Self::Request { .. } => events::REFRESH_FAILED,
            Self::Contended => events::CONTENDED,
            Self::OtherInstall { .. } => events::OTHER_INSTALL,
        }
    }

    /// The uid of the Secret the error is about, when it was read.
    pub fn uid(&self) -> Option<&str> {
        match self {
            Self::WrongType { uid, .. }
            | Self::Immutable { uid }
            | Self::OtherInstall { uid, .. } => uid.as_deref(),
            _ => None,
        }
    }

    fn request(action: &'static str, source: RequestError) -> Self {
        if source.code() == Some(403) {
            Self::Forbidden { action, source }
        } else {
            Self::Request { action, source }
        }
    }
}

/// The Secret as read, and whether it is due.
pub struct Read {
    pub current: Option<Secret>,
    pub decision: Decision,
}

/// Reads the pull Secret (None: there is none).
pub async fn get(api: &Api<Secret>, name: &SecretName) -> Result<Option<Secret>, SecretError> {
    retry::send("get secret", || api.get_opt(name.as_str()))
        .await
        .map_err(|e| SecretError::request("read", e))
}

/// Decides whether the Secret as read is due. A Secret no write could fix (another type,
/// immutable, an unreadable value) fails here, before any token is fetched for it.
pub fn judge(
    current: Option<Secret>,
    policy: &Policy<'_>,
    now: SystemTime,
) -> Result<Read, SecretError> {
    if let Some(current) = &current {
        can_write(current, policy)?;
    }
    let decision = due::decide(current.as_ref(), policy, now);
    Ok(Read { current, decision })
}

/// Whether a write could fix the Secret: not if it has another type, is immutable, holds a
/// value that does not read, or holds another install's entries for registries the policy's
/// configuration does not write. A refresh fails such a namespace; a check reports it. (With no
/// registries configured, the hosts are known from ECR's answer: the write asks again then.)
pub fn can_write(current: &Secret, policy: &Policy<'_>) -> Result<(), SecretError> {
    writable(current)?;
    if let Some(value) = current.data.as_ref().and_then(|d| d.get(DATA_KEY)) {
        docker_config::auths_keys(&value.0)?;
    }
    if let Registries::Configured(hosts) = policy.registries {
        let hosts: Vec<&str> = hosts.iter().map(RegistryHost::host).collect();
        not_another_installs(current, policy.install, &hosts)?;
    }
    Ok(())
}

/// Refuses a Secret holding another install's entries for registries outside `writes`.
fn not_another_installs(
    current: &Secret,
    ours: Option<&Install>,
    writes: &[&str],
) -> Result<(), SecretError> {
    match install::other_install(current, ours, writes) {
        None => Ok(()),
        Some(OtherInstall { install, hosts }) => Err(SecretError::OtherInstall {
            install,
            hosts,
            uid: current.metadata.uid.clone(),
        }),
    }
}

/// Writes the pull Secret in `namespace`, the one `api` is scoped to, starting from `first`,
/// what `read` found: no second read unless a write is refused for a change meanwhile.
pub async fn write(
    api: &Api<Secret>,
    namespace: &str,
    desired: &Desired<'_>,
    first: Option<Secret>,
) -> Result<Written, SecretError> {
    let name = desired.name.as_str();
    // The uid of a Secret that was deleted between our read and our apply.
    let mut deleted_uid: Option<String> = None;
    // What our create sent, when its answer may have been lost (an earlier attempt of the POST
    // failed): a Secret found holding exactly that is the one this run created.
    let mut maybe_ours: Option<Vec<u8>> = None;
    let created =
        |uid, deleted_uid| Written::created(desired.dry_run, uid, deleted_uid, desired.expiry);
    let mut read = Some(first);
    for _ in 0..ATTEMPTS {
        let current = match read.take() {
            Some(current) => current,
            None => retry::send("get secret", || api.get_opt(name))
                .await
                .map_err(|e| SecretError::request("read", e))?,
        };
        let Some(current) = current else {
            match create(api, desired).await? {
                Created::Done(uid) => return Ok(created(uid, deleted_uid)),
                Created::AppearedMeanwhile { lost_answer } => {
                    maybe_ours = lost_answer;
                    continue;
                }
                Created::Skipped(reason) => return Ok(Written::skipped(reason)),
            }
        };
        if let Some(sent) = maybe_ours.take()
            && data_value(&current) == Some(sent.as_slice())
        {
            // The password in it is this run's: no one else could have written it.
            debug!(
                namespace,
                secret = name,
                "our create's answer was lost; the Secret found is the one it created"
            );
            return Ok(created(current.metadata.uid, deleted_uid));
        }
        let uid = current.metadata.uid.clone();
        match update(api, desired, &current).await? {
            Updated::Done(written) => return Ok(written),
            Updated::Deleted => {
                debug!(
                    namespace,
                    secret = name,
                    uid = uid.as_deref().unwrap_or("-"),
                    "deleted between our read and our apply"
                );
                deleted_uid = uid;
            }
            Updated::Changed => {
                debug!(
                    namespace,
                    secret = name,
                    "changed between our read and our apply; reading it again"
                );
            }
        }
    }
    Err(SecretError::Contended)
}

enum Created {
    Done(Option<String>),
    /// 409 AlreadyExists. When an earlier attempt of the POST failed (its answer may have
    /// been lost after the server stored it), what it sent.
    AppearedMeanwhile {
        lost_answer: Option<Vec<u8>>,
    },
    Skipped(SkipReason),
}

/// POST: fails with 409 AlreadyExists, never overwrites, if a Secret appeared since our read.
async fn create(api: &Api<Secret>, desired: &Desired<'_>) -> Result<Created, SecretError> {
    let merged = docker_config::merge(None, &desired.credentials, &[])?;
    let install = desired.install.map(Install::as_str);
    let mut secret = body(desired, merged.into_bytes(), None, None, install);
    // Only a create records that we made it (uninstall may delete what we made, no other);
    // the applies that follow leave the label as it is, since they don't name it.
    secret
        .metadata
        .labels
        .get_or_insert_with(BTreeMap::new)
        .insert(CREATED_LABEL.to_owned(), "true".to_owned());
    let params = PostParams {
        dry_run: desired.dry_run,
        field_manager: Some(FIELD_MANAGER.to_owned()),
    };
    let mut tries = 0;
    let sent = retry::send("create secret", || {
        tries += 1;
        api.create(&params, &secret)
    })
    .await;
    match sent {
        Ok(created) => Ok(Created::Done(created.metadata.uid)),
        Err(RequestError::Api(s)) if s.is_already_exists() => Ok(Created::AppearedMeanwhile {
            lost_answer: (tries > 1).then(|| data_value(&secret).unwrap_or_default().to_vec()),
        }),
        Err(RequestError::Api(s)) if is_namespace_terminating(&s) => {
            Ok(Created::Skipped(SkipReason::NamespaceTerminating))
        }
        Err(RequestError::Api(s)) if is_namespace_not_found(&s) => {
            Ok(Created::Skipped(SkipReason::NamespaceNotFound))
        }
        Err(e) => Err(SecretError::request("create", e)),
    }
}

enum Updated {
    Done(Written),
    /// The Secret we read is gone (409 uid mismatch): read again, create it fresh.
    Deleted,
    /// The Secret changed since we read it (resourceVersion 409, or another uid): read again.
    Changed,
}

/// Server-side apply pinned to the uid and the resourceVersion read.
async fn update(
    api: &Api<Secret>,
    desired: &Desired<'_>,
    current: &Secret,
) -> Result<Updated, SecretError> {
    writable(current)?;
    not_another_installs(current, desired.install, &desired.hosts())?;
    let previously_ours: Vec<String> = current
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(REGISTRIES_ANNOTATION))
        .map(|v| {
            v.split(',')
                .filter(|h| !h.is_empty())
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    let merged = docker_config::merge(data_value(current), &desired.credentials, &previously_ours)?;
    let (kept_entries, dropped_entries) = (merged.kept.len(), merged.dropped.clone());
    // The new value is derived from the one read (what it keeps, and what it leaves out): it is
    // only written over that version. An entry added since our read is re-read, not erased.
    let resource_version = current.metadata.resource_version.clone();
    let uid = current.metadata.uid.clone();
    // A run with no name of its own never removes the recorded one: an apply that left the
    // annotation out would take it away (our manager owns it), and another install could then
    // take the Secret over. It sends the recorded name back.
    let install = desired
        .install
        .map(Install::as_str)
        .or_else(|| install::recorded(current));
    let secret = body(
        desired,
        merged.into_bytes(),
        uid.clone(),
        resource_version,
        install,
    );

    let mut params = PatchParams::apply(FIELD_MANAGER).force();
    params.dry_run = desired.dry_run;
    let name = desired.name.as_str();
    let patch = Patch::Apply(&secret);
    let applied = match retry::send("apply secret", || api.patch(name, &params, &patch)).await {
        Ok(applied) => applied,
        Err(RequestError::Api(s)) if s.is_conflict() && s.message.contains("uid mismatch") => {
            return Ok(Updated::Deleted);
        }
        Err(RequestError::Api(s)) if s.is_conflict() || (s.is_invalid() && is_uid_field(&s)) => {
            return Ok(Updated::Changed);
        }
        Err(e) => return Err(SecretError::request("apply", e)),
    };

    let mut written = Written::new(
        if desired.dry_run {
            Outcome::WouldUpdate
        } else {
            Outcome::Updated
        },
        uid,
        applied.metadata.uid.clone(),
    );
    written.kept_entries = kept_entries;
    written.dropped_entries = dropped_entries;
    written.expires_at = desired.expiry;
    if current.metadata.deletion_timestamp.is_some() {
        let held_by = current
            .metadata
            .finalizers
            .as_deref()
            .unwrap_or_default()
            .join(",");
        written.warn(format!(
            "the Secret is being deleted (deletionTimestamp set; held by finalizers: {held_by}): it was \
             written, but disappears once those finalizers are removed; the next run then creates it fresh"
        ));
    }
    if !desired.dry_run && last_applied_holds_ours(&applied, &desired.hosts()) {
        // The refresh itself is done: a failure here is reported, not turned into one.
        match remove_last_applied(api, name, desired, applied).await {
            Ok(removed) => written.removed_last_applied = removed,
            Err(e) => written.warn(format!(
                "kubectl's last-applied-configuration annotation, which holds a copy of the old \
                 password, could not be removed: {e}"
            )),
        }
    }
    Ok(Updated::Done(written))
}

/// A Secret of another type, or an immutable one, is not ours to change.
fn writable(current: &Secret) -> Result<(), SecretError> {
    let found = current.type_.as_deref().unwrap_or("Opaque");
    if found != SECRET_TYPE {
        return Err(SecretError::WrongType {
            found: found.to_owned(),
            uid: current.metadata.uid.clone(),
        });
    }
    if current.immutable == Some(true) {
        return Err(SecretError::Immutable {
            uid: current.metadata.uid.clone(),
        });
    }
    Ok(())
}

/// Removes kubectl's last-applied annotation, which holds a copy of the old password.
///
/// Another manager owns it, so an apply cannot remove it: a JSON patch does, pinned with
/// `test` ops to the uid and resourceVersion it was seen at. On a failed test, read again.
async fn remove_last_applied(
    api: &Api<Secret>,
    name: &str,
    desired: &Desired<'_>,
    mut seen: Secret,
) -> Result<bool, SecretError> {
    for _ in 0..ATTEMPTS {
        if !last_applied_holds_ours(&seen, &desired.hosts()) {
            return Ok(false);
        }
        let patch: json_patch::Patch = serde_json::from_value(serde_json::json!([
            { "op": "test", "path": "/metadata/uid", "value": seen.metadata.uid },
            { "op": "test", "path": "/metadata/resourceVersion", "value": seen.metadata.resource_version },
            { "op": "remove", "path": "/metadata/annotations/kubectl.kubernetes.io~1last-applied-configuration" },
        ]))
        .expect("a JSON patch of test and remove ops");
        let patch = Patch::<()>::Json(patch);
        let params = PatchParams {
            field_manager: Some(FIELD_MANAGER.to_owned()),
            ..PatchParams::default()
        };
        match retry::send("remove last-applied", || api.patch(name, &params, &patch)).await {
            Ok(_) => return Ok(true),
            Err(RequestError::Api(s)) if s.is_invalid() || s.is_conflict() => {}
            Err(e) => {
                return Err(SecretError::request(
                    "remove the last-applied annotation of",
                    e,
                ));
            }
        }
        match retry::send("get secret", || api.get_opt(name)).await {
            Ok(Some(again)) => seen = again,
            Ok(None) => return Ok(false),
            Err(e) => return Err(SecretError::request("read", e)),
        }
    }
    Err(SecretError::Contended)
}

/// The object we apply or create: only the fields we own; `install` is the name recorded.
fn body(
    desired: &Desired<'_>,
    value: Vec<u8>,
    uid: Option<String>,
    resource_version: Option<String>,
    install: Option<&str>,
) -> Secret {
    let registries = desired.hosts();
    // Our own bytes: they parse. The record is of exactly what this write stores.
    let digest = due::value_digest(&value, &registries).unwrap_or_default();
    Secret {
        metadata: ObjectMeta {
            name: Some(desired.name.as_str().to_owned()),
            uid,
            resource_version,
            labels: Some(BTreeMap::from([(
                MANAGED_BY_LABEL.to_owned(),
                FIELD_MANAGER.to_owned(),
            )])),
            annotations: Some(
                [
                    (REGISTRIES_ANNOTATION.to_owned(), registries.join(",")),
                    (EXPIRES_ANNOTATION.to_owned(), desired.expires_at.clone()),
                    (DIGEST_ANNOTATION.to_owned(), digest),
                ]
                .into_iter()
                .chain(install.map(|i| (INSTALL_ANNOTATION.to_owned(), i.to_owned())))
                .collect(),
            ),
            ..ObjectMeta::default()
        },
        type_: Some(SECRET_TYPE.to_owned()),
        data: Some(BTreeMap::from([(DATA_KEY.to_owned(), ByteString(value))])),
        ..Secret::default()
    }
}

/// The Secret's `.dockerconfigjson` bytes.
fn data_value(secret: &Secret) -> Option<&[u8]> {
    secret
        .data
        .as_ref()
        .and_then(|d| d.get(DATA_KEY))
        .map(|b| b.0.as_slice())
}

/// Whether the namespace `api` is scoped to is known not to exist, asked without a token: a
/// dry-run create (dryRun=All: admitted, never stored) of the Secret with no entries. A read of
/// a Secret in a namespace that does not exist is a plain 404 for the Secret; only a create
/// meets the namespace's own 404 (`namespaces "X" not found`). Any other answer leaves the
/// question to the real create.
pub async fn namespace_missing(api: &Api<Secret>, name: &SecretName) -> bool {
    let probe = Secret {
        metadata: ObjectMeta {
            name: Some(name.as_str().to_owned()),
            labels: Some(BTreeMap::from([(
                MANAGED_BY_LABEL.to_owned(),
                FIELD_MANAGER.to_owned(),
            )])),
            ..ObjectMeta::default()
        },
        type_: Some(SECRET_TYPE.to_owned()),
        data: Some(BTreeMap::from([(
            DATA_KEY.to_owned(),
            ByteString(br#"{"auths":{}}"#.to_vec()),
        )])),
        ..Secret::default()
    };
    let params = PostParams {
        dry_run: true,
        field_manager: Some(FIELD_MANAGER.to_owned()),
    };
    match retry::send("check the namespace", || api.create(&params, &probe)).await {
        Err(RequestError::Api(s)) => is_namespace_not_found(&s),
        _ => false,
    }
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
