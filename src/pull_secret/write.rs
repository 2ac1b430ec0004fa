//! Writing the pull Secret in one namespace, in place: one implementation of `owned::Owned`,
//! written by `owned::write` (the uid- and resourceVersion-pinned apply, never a delete). What
//! is the pull Secret's own: whether one as read may be written and is due (`judge`), the
//! bodies (a create labels what it made; an apply merges into the value read, keeping others'
//! entries as they were read), and kubectl's copy of the old password, removed after an apply.

use std::collections::BTreeMap;
use std::time::SystemTime;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};

use crate::aws::ecr::Credential;
use crate::aws::registry::RegistryHost;
use crate::cluster::events;
use crate::cluster::names::SecretName;
use crate::cluster::retry::{self, RequestError};
use crate::owned::{
    self, ATTEMPTS, Owned, OwnedError, Settled, WriteError, is_namespace_not_found,
};
use crate::pull_secret::docker_config::{self, UnreadableDockerConfig};
use crate::pull_secret::due::{self, Judged, Policy, Registries};
use crate::pull_secret::install::{self, INSTALL_ANNOTATION, Install, OtherInstall};

pub use crate::pull_secret::{
    CREATED_LABEL, DATA_KEY, DIGEST_ANNOTATION, EXPIRES_ANNOTATION, FIELD_MANAGER,
    MANAGED_BY_LABEL, REGISTRIES_ANNOTATION, SECRET_TYPE, last_applied_holds_ours,
};
use crate::pull_secret::{annotation, data_value};

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

impl Desired<'_> {
    /// The registry hosts whose entries we write.
    fn hosts(&self) -> Vec<&str> {
        self.credentials.iter().map(|c| c.registry.host()).collect()
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
    #[error(transparent)]
    Write(#[from] WriteError),
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
}

impl SecretError {
    /// The CamelCase `reason` of the Event for a Secret that could not be refreshed.
    pub fn event_reason(&self) -> &'static str {
        match self {
            Self::WrongType { .. } => events::WRONG_TYPE,
            Self::Immutable { .. } => events::IMMUTABLE,
            Self::Unreadable(_) => events::UNREADABLE,
            Self::Write(WriteError::Forbidden { .. }) => events::FORBIDDEN,
            Self::Write(WriteError::Request { .. }) => events::REFRESH_FAILED,
            Self::Write(WriteError::Contended { .. }) => events::CONTENDED,
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
}

/// Decides whether the Secret as read is due. A Secret no write could fix (another type,
/// immutable, an unreadable value) fails here, before any token is fetched for it.
pub fn judge(
    current: Option<Secret>,
    policy: &Policy<'_>,
    now: SystemTime,
) -> Result<Judged, SecretError> {
    if let Some(current) = &current {
        can_write(current, policy)?;
    }
    let decision = due::decide(current.as_ref(), policy, now);
    Ok(Judged { current, decision })
}

/// Whether a write could fix the Secret: not if it has another type, is immutable, holds a
/// value that does not read, or holds another install's entries for registries the policy's
/// configuration does not write. A refresh fails such a namespace; a check reports it. (With no
/// registries configured, the hosts are known from ECR's answer: the write asks again then.)
pub fn can_write(current: &Secret, policy: &Policy<'_>) -> Result<(), SecretError> {
    writable(current)?;
    if let Some(value) = data_value(current, DATA_KEY) {
        docker_config::auths_keys(value)?;
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

/// The pull Secret as one `owned` Secret: written by `owned::write` in `namespace`.
impl Owned for Desired<'_> {
    type Error = SecretError;

    fn name(&self) -> &str {
        self.name.as_str()
    }

    fn dry_run(&self) -> bool {
        self.dry_run
    }

    fn expiry(&self) -> Option<SystemTime> {
        self.expiry
    }

    fn may_write(&self, current: &Secret) -> Result<(), SecretError> {
        writable(current)?;
        not_another_installs(current, self.install, &self.hosts())
    }

    fn create_body(&self) -> Result<Secret, SecretError> {
        let merged = docker_config::merge(None, &self.credentials, &[])?;
        let install = self.install.map(Install::as_str);
        let mut secret = body(self, merged.into_bytes(), install);
        // Only a create records that we made it (uninstall may delete what we made, no other);
        // the applies that follow leave the label as it is, since they don't name it.
        secret
            .metadata
            .labels
            .get_or_insert_with(BTreeMap::new)
            .insert(CREATED_LABEL.to_owned(), "true".to_owned());
        Ok(secret)
    }

    fn apply_body(&self, current: &Secret, settled: &mut Settled) -> Result<Secret, SecretError> {
        let previously_ours: Vec<String> = annotation(current, REGISTRIES_ANNOTATION)
            .map(|v| {
                v.split(',')
                    .filter(|h| !h.is_empty())
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default();
        // The new value is derived from the one read (what it keeps, and what it leaves out):
        // the apply is pinned to that version. An entry added since our read is re-read, not
        // erased.
        let merged = docker_config::merge(
            data_value(current, DATA_KEY),
            &self.credentials,
            &previously_ours,
        )?;
        settled.kept_entries = merged.kept.len();
        settled.dropped_entries = merged.dropped.clone();
        if current.metadata.deletion_timestamp.is_some() {
            let held_by = current
                .metadata
                .finalizers
                .as_deref()
                .unwrap_or_default()
                .join(",");
            settled.warn(format!(
                "the Secret is being deleted (deletionTimestamp set; held by finalizers: {held_by}): it was \
                 written, but disappears once those finalizers are removed; the next run then creates it fresh"
            ));
        }
        // A run with no name of its own never removes the recorded one: an apply that left the
        // annotation out would take it away (our manager owns it), and another install could
        // then take the Secret over. It sends the recorded name back.
        let install = self
            .install
            .map(Install::as_str)
            .or_else(|| install::recorded(current));
        Ok(body(self, merged.into_bytes(), install))
    }

    async fn applied(&self, api: &Api<Secret>, applied: Secret, settled: &mut Settled) {
        if self.dry_run || !last_applied_holds_ours(&applied, &self.hosts()) {
            return;
        }
        // The refresh itself is done: a failure here is reported, not turned into one.
        match remove_last_applied(api, self, applied).await {
            Ok(removed) => settled.removed_last_applied = removed,
            Err(e) => settled.warn(format!(
                "kubectl's last-applied-configuration annotation, which holds a copy of the old \
                 password, could not be removed: {e}"
            )),
        }
    }
}

impl OwnedError for SecretError {
    const SECRET: &'static str = "the Secret";
    const GRANTED: &'static str = " (resourceNames in manifests/), in this namespace";
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
    desired: &Desired<'_>,
    mut seen: Secret,
) -> Result<bool, SecretError> {
    let name = desired.name.as_str();
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
                return Err(owned::failed("remove the last-applied annotation of", e));
            }
        }
        match owned::read::<SecretError>(api, name).await? {
            Some(again) => seen = again,
            None => return Ok(false),
        }
    }
    Err(owned::contended())
}

/// The object we apply or create: only the fields we own; `install` is the name recorded.
fn body(desired: &Desired<'_>, value: Vec<u8>, install: Option<&str>) -> Secret {
    let registries = desired.hosts();
    // Our own bytes: they parse. The record is of exactly what this write stores.
    let digest = due::value_digest(&value, &registries).unwrap_or_default();
    Secret {
        metadata: ObjectMeta {
            name: Some(desired.name.as_str().to_owned()),
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
