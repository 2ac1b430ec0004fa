//! What an Argo CD Secret of ours holds, whether one as read may be written and is due (by the
//! pull Secret's rules of expiry, `due::expiry`, then by its content), and its write: one
//! implementation of `owned::Owned`, written by `owned::write` as the pull Secret is
//! (server-side apply pinned to the uid and resourceVersion read; a create is a POST, which
//! never overwrites; never a delete). What others put in it (keys, labels, annotations) stays:
//! an apply only touches the fields its manager sends.

use std::collections::BTreeMap;
use std::time::SystemTime;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use secrecy::{ExposeSecret as _, SecretString};
use sha2::{Digest as _, Sha256};

use crate::argocd::{
    ArgoCd, Kind, PASSWORD_DIGEST_ANNOTATION, RepoType, SECRET_TYPE_LABEL, Target, USERNAME,
};
use crate::cluster::names::ProjectName;
use crate::owned::{Owned, OwnedError, Settled, WriteError};
use crate::pull_secret::due::{self, Decision, Due, Judged, Policy};
use crate::pull_secret::{
    EXPIRES_ANNOTATION, FIELD_MANAGER, MANAGED_BY_LABEL, REGISTRIES_ANNOTATION, annotation,
    data_value as value,
};

/// The Secret's type: Argo CD reads its repository Secrets by label, whatever their type.
pub const OPAQUE: &str = "Opaque";
/// The data keys a write owns. `enableOCI` only for `helm`; `oci` ignores it, and a switch
/// from `helm` leaves the one we wrote: the Secret's create was a POST, whose fields are owned
/// by an update, which an apply that no longer sends them does not remove.
pub const URL: &str = "url";
pub const USERNAME_KEY: &str = "username";
pub const PASSWORD: &str = "password";
pub const TYPE: &str = "type";
pub const ENABLE_OCI: &str = "enableOCI";
/// The Argo CD project a `repository` Secret is for (ECR_REFRESH_ARGOCD_PROJECT); written
/// only when set, and never on repo-creds, where Argo CD does not read it.
pub const PROJECT: &str = "project";

/// What one Argo CD Secret should hold after this run.
pub struct Desired<'a> {
    pub target: &'a Target,
    pub repo_type: RepoType,
    pub project: Option<&'a ProjectName>,
    pub password: &'a SecretString,
    /// RFC 3339, the token's expiry.
    pub expires_at: String,
    pub expiry: Option<SystemTime>,
    pub dry_run: bool,
}

/// SHA-256 of the password, hex: see `due::digest` for why a digest of a token gives nothing
/// away.
pub fn password_digest(password: &[u8]) -> String {
    Sha256::digest(password)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The project a write puts in this Secret: only a `repository` Secret's.
fn project(kind: Kind, project: Option<&ProjectName>) -> Option<&ProjectName> {
    project.filter(|_| kind == Kind::Repository)
}

/// The data keys and values a write puts in (the password among them).
fn data(
    kind: Kind,
    repo_type: RepoType,
    project: Option<&ProjectName>,
    host: &str,
    password: &[u8],
) -> BTreeMap<String, ByteString> {
    let mut data = BTreeMap::from([
        (
            URL.to_owned(),
            ByteString(kind.url(repo_type, host).into_bytes()),
        ),
        (
            USERNAME_KEY.to_owned(),
            ByteString(USERNAME.as_bytes().to_vec()),
        ),
        (PASSWORD.to_owned(), ByteString(password.to_vec())),
        (
            TYPE.to_owned(),
            ByteString(repo_type.as_str().as_bytes().to_vec()),
        ),
    ]);
    if repo_type == RepoType::Helm {
        data.insert(ENABLE_OCI.to_owned(), ByteString(b"true".to_vec()));
    }
    if let Some(project) = self::project(kind, project) {
        data.insert(
            PROJECT.to_owned(),
            ByteString(project.as_str().as_bytes().to_vec()),
        );
    }
    data
}

/// The object we apply or create: only the fields we own.
pub fn body(desired: &Desired<'_>) -> Secret {
    let host = desired.target.registry.host();
    let password = desired.password.expose_secret().as_bytes();
    Secret {
        metadata: ObjectMeta {
            name: Some(desired.target.name.as_str().to_owned()),
            labels: Some(BTreeMap::from([
                (
                    SECRET_TYPE_LABEL.to_owned(),
                    desired.target.kind.label().to_owned(),
                ),
                (MANAGED_BY_LABEL.to_owned(), FIELD_MANAGER.to_owned()),
            ])),
            annotations: Some(BTreeMap::from([
                (REGISTRIES_ANNOTATION.to_owned(), host.to_owned()),
                (EXPIRES_ANNOTATION.to_owned(), desired.expires_at.clone()),
                (
                    PASSWORD_DIGEST_ANNOTATION.to_owned(),
                    password_digest(password),
                ),
            ])),
            ..ObjectMeta::default()
        },
        type_: Some(OPAQUE.to_owned()),
        data: Some(data(
            desired.target.kind,
            desired.repo_type,
            desired.project,
            host,
            password,
        )),
        ..Secret::default()
    }
}

/// The Argo CD Secret as one `owned` Secret: written by `owned::write` in the Argo CD namespace.
impl Owned for Desired<'_> {
    type Error = ArgoError;

    fn name(&self) -> &str {
        self.target.name.as_str()
    }

    fn dry_run(&self) -> bool {
        self.dry_run
    }

    fn expiry(&self) -> Option<SystemTime> {
        self.expiry
    }

    fn may_write(&self, current: &Secret) -> Result<(), ArgoError> {
        Ok(can_write(current, self.target.kind)?)
    }

    fn create_body(&self) -> Result<Secret, ArgoError> {
        Ok(body(self))
    }

    fn apply_body(&self, _current: &Secret, _settled: &mut Settled) -> Result<Secret, ArgoError> {
        Ok(body(self))
    }

    /// The Argo CD namespace is configured, not listed: one that does not exist is a failure.
    fn no_namespace(&self) -> Result<Settled, ArgoError> {
        Err(ArgoError::NoNamespace)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ArgoError {
    #[error(transparent)]
    NotOurs(#[from] NotOurs),
    #[error("the Argo CD namespace does not exist: create it, or fix ECR_REFRESH_ARGOCD_NAMESPACE")]
    NoNamespace,
    #[error(transparent)]
    Write(#[from] WriteError),
}

impl OwnedError for ArgoError {
    const SECRET: &'static str = "the Argo CD Secret";
    const GRANTED: &'static str = ", in the Argo CD namespace (the chart's argocd.namespace, or the \
         kustomize component components/argocd: a ClusterRole and ClusterRoleBinding ecr-refresh-argocd, \
         whose binding names this ServiceAccount; a Role of an earlier components/argocd is moved out of \
         the Argo CD namespace by an overlay's namespace: and grants nothing there)";
}

/// Decides whether the Secret as read (None: there is none) is due; one no write could fix
/// fails here, before any token is fetched for it.
pub fn judge(
    current: Option<Secret>,
    target: &Target,
    argocd: &ArgoCd,
    policy: &Policy<'_>,
    now: SystemTime,
) -> Result<Judged, ArgoError> {
    if let Some(current) = &current {
        can_write(current, target.kind)?;
    }
    let (repo_type, project) = (argocd.repo_type, argocd.project.as_ref());
    let decision = decide(current.as_ref(), target, repo_type, project, policy, now);
    Ok(Judged { current, decision })
}

/// Why a Secret found under our name is not ours to write.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotOurs {
    #[error(
        "the Secret has type {0}, not Opaque; type is immutable, so ecr-refresh left it untouched: \
         delete or rename that Secret yourself"
    )]
    WrongType(String),
    #[error(
        "the Secret is immutable (immutable: true), so its token cannot be refreshed; ecr-refresh left it \
         untouched: delete it yourself so the next run creates it"
    )]
    Immutable,
    #[error(
        "the Secret is labelled {SECRET_TYPE_LABEL}: {found}, not {expected}: it is another Argo CD Secret, \
         and ecr-refresh left it untouched; rename it, or set ECR_REFRESH_SECRET_NAME to another name"
    )]
    OtherArgoSecret {
        found: String,
        expected: &'static str,
    },
    #[error(
        "the Secret is not labelled {SECRET_TYPE_LABEL}: {0}: it is someone else's, and ecr-refresh \
         left it untouched (the admission policy would refuse to label it); rename it, or set \
         ECR_REFRESH_SECRET_NAME to another name"
    )]
    Unlabelled(&'static str),
}

/// Whether a write could fix the Secret: Opaque, mutable, and already the Argo CD Secret of
/// this kind (its label `repo-creds`, or `repository`): anything else under our name is
/// someone else's, and the admission policy refuses to change that label, as this refuses
/// to try.
pub fn can_write(current: &Secret, kind: Kind) -> Result<(), NotOurs> {
    let found = current.type_.as_deref().unwrap_or(OPAQUE);
    if found != OPAQUE {
        return Err(NotOurs::WrongType(found.to_owned()));
    }
    if current.immutable == Some(true) {
        return Err(NotOurs::Immutable);
    }
    match label(current) {
        Some(found) if found == kind.label() => Ok(()),
        Some(found) => Err(NotOurs::OtherArgoSecret {
            found: found.to_owned(),
            expected: kind.label(),
        }),
        None => Err(NotOurs::Unlabelled(kind.label())),
    }
}

fn label(secret: &Secret) -> Option<&str> {
    crate::pull_secret::label(secret, SECRET_TYPE_LABEL)
}

/// Whether the Secret (None: there is none) is due at `now`: missing, by its recorded expiry
/// as a pull Secret is, or because what we own in it is not what we wrote (the label, `url`,
/// `username`, `type`, `enableOCI`, `project` when one is set, or a password that no longer
/// matches our digest). A repo-creds Secret an older ecr-refresh wrote with `url: <host>` is
/// due for its url, and rewritten in place as `<host>/`.
pub fn decide(
    secret: Option<&Secret>,
    target: &Target,
    repo_type: RepoType,
    project: Option<&ProjectName>,
    policy: &Policy<'_>,
    now: SystemTime,
) -> Decision {
    match reasons(secret, target, repo_type, project, policy, now)
        .into_iter()
        .next()
    {
        Some(due) => Decision::Due(due),
        None => {
            let secret = secret.expect("a missing Secret is due");
            let (expires_at, due_at) =
                due::expiry(secret, policy, now).expect("no reason: the expiry is not due");
            Decision::Fresh { expires_at, due_at }
        }
    }
}

/// Every reason the Secret is due, the expiry's first (a check reports each).
pub fn reasons(
    secret: Option<&Secret>,
    target: &Target,
    repo_type: RepoType,
    project: Option<&ProjectName>,
    policy: &Policy<'_>,
    now: SystemTime,
) -> Vec<Due> {
    let Some(secret) = secret else {
        return vec![Due::Missing];
    };
    let mut reasons: Vec<Due> = due::expiry(secret, policy, now).err().into_iter().collect();
    // Every key a write puts in, as it puts it; the password, as found, only if our digest
    // says it is the one we wrote (a missing one is not: the key is in what a write puts in).
    let host = target.registry.host();
    let password = value(secret, PASSWORD).unwrap_or_default();
    let written = data(target.kind, repo_type, project, host, password);
    let digest = annotation(secret, PASSWORD_DIGEST_ANNOTATION);
    let ours_as_written = label(secret) == Some(target.kind.label())
        && written
            .iter()
            .all(|(key, v)| value(secret, key) == Some(v.0.as_slice()))
        && digest == Some(password_digest(password).as_str());
    if !ours_as_written {
        reasons.push(Due::EntriesChanged);
    }
    reasons
}

#[cfg(test)]
mod tests {
    use std::str::FromStr;
    use std::time::Duration;

    use super::*;
    use crate::aws::registry::RegistryHost;
    use crate::cluster::names::{ProjectName, SecretName};
    use crate::pull_secret::due::Registries;

    const HOST: &str = "123456789012.dkr.ecr.us-east-1.amazonaws.com";

    fn target() -> Target {
        Target {
            name: SecretName::from_str("aws-ecr-token-123456789012-us-east-1").unwrap(),
            kind: Kind::RepoCreds,
            registry: RegistryHost::from_str(HOST).unwrap(),
        }
    }

    fn repository() -> Target {
        Target {
            name: SecretName::from_str("aws-ecr-token-123456789012-us-east-1-repository").unwrap(),
            kind: Kind::Repository,
            registry: RegistryHost::from_str(HOST).unwrap(),
        }
    }

    fn policy() -> Policy<'static> {
        Policy {
            renew_before: Duration::from_secs(3600),
            registries: Registries::Configured(&[]),
            install: None,
        }
    }

    fn written(
        target: &Target,
        repo_type: RepoType,
        password: &SecretString,
        now: SystemTime,
    ) -> Secret {
        written_for(target, repo_type, None, password, now)
    }

    fn written_for(
        target: &Target,
        repo_type: RepoType,
        project: Option<&ProjectName>,
        password: &SecretString,
        now: SystemTime,
    ) -> Secret {
        let expiry = now + Duration::from_secs(11 * 3600);
        body(&Desired {
            target,
            repo_type,
            project,
            password,
            expires_at: humantime::format_rfc3339_seconds(expiry).to_string(),
            expiry: Some(expiry),
            dry_run: false,
        })
    }

    #[test]
    fn a_helm_secret_holds_the_host_ended_by_a_slash_and_enable_oci() {
        let (t, p) = (target(), SecretString::from("token"));
        let s = written(&t, RepoType::Helm, &p, SystemTime::now());
        assert_eq!(value(&s, URL), Some(format!("{HOST}/").as_bytes()));
        assert_eq!(value(&s, USERNAME_KEY), Some(b"AWS".as_slice()));
        assert_eq!(value(&s, PASSWORD), Some(b"token".as_slice()));
        assert_eq!(value(&s, TYPE), Some(b"helm".as_slice()));
        assert_eq!(value(&s, ENABLE_OCI), Some(b"true".as_slice()));
        assert_eq!(label(&s), Some(crate::argocd::REPO_CREDS));
        assert_eq!(s.type_.as_deref(), Some("Opaque"));
        let oci = written(&t, RepoType::Oci, &p, SystemTime::now());
        assert_eq!(value(&oci, URL), Some(format!("oci://{HOST}/").as_bytes()));
        assert_eq!(value(&oci, TYPE), Some(b"oci".as_slice()));
        assert_eq!(value(&oci, ENABLE_OCI), None);
        // One written for helm, then judged for oci: due for its url and type only.
        let helm = written(&t, RepoType::Helm, &p, SystemTime::now());
        let mut switched = oci.clone();
        switched
            .data
            .as_mut()
            .unwrap()
            .insert(ENABLE_OCI.into(), ByteString(b"true".to_vec()));
        assert!(matches!(
            decide(
                Some(&switched),
                &t,
                RepoType::Oci,
                None,
                &policy(),
                SystemTime::now()
            ),
            Decision::Fresh { .. }
        ));
        assert_eq!(
            decide(
                Some(&helm),
                &t,
                RepoType::Oci,
                None,
                &policy(),
                SystemTime::now()
            ),
            Decision::Due(Due::EntriesChanged)
        );
    }

    #[test]
    fn as_written_it_is_fresh_and_each_change_to_what_we_own_makes_it_due() {
        let (t, p, now) = (target(), SecretString::from("token"), SystemTime::now());
        let ours = written(&t, RepoType::Helm, &p, now);
        assert!(matches!(
            decide(Some(&ours), &t, RepoType::Helm, None, &policy(), now),
            Decision::Fresh { .. }
        ));
        assert_eq!(
            decide(None, &t, RepoType::Helm, None, &policy(), now),
            Decision::Due(Due::Missing)
        );
        // The other type asked for: due, to be rewritten as that type.
        assert_eq!(
            decide(Some(&ours), &t, RepoType::Oci, None, &policy(), now),
            Decision::Due(Due::EntriesChanged)
        );
        for (key, edited) in [
            (PASSWORD, "edited"),
            (URL, "ghcr.io"),
            (USERNAME_KEY, "admin"),
            (TYPE, "git"),
            (ENABLE_OCI, "false"),
        ] {
            let mut s = ours.clone();
            s.data
                .as_mut()
                .unwrap()
                .insert(key.to_owned(), ByteString(edited.as_bytes().to_vec()));
            assert_eq!(
                decide(Some(&s), &t, RepoType::Helm, None, &policy(), now),
                Decision::Due(Due::EntriesChanged),
                "{key}"
            );
        }
        // Others' keys and labels are theirs: no reason to write.
        let mut s = ours.clone();
        s.data
            .as_mut()
            .unwrap()
            .insert("proxy".into(), ByteString(b"http://proxy:3128".to_vec()));
        s.metadata
            .labels
            .as_mut()
            .unwrap()
            .insert("team".into(), "a".into());
        assert!(matches!(
            decide(Some(&s), &t, RepoType::Helm, None, &policy(), now),
            Decision::Fresh { .. }
        ));
        // Its expiry within RENEW_BEFORE: due by the pull Secret's rule.
        let later = now + Duration::from_secs(10 * 3600 + 60);
        assert!(matches!(
            decide(Some(&ours), &t, RepoType::Helm, None, &policy(), later),
            Decision::Due(Due::ExpiresSoon { .. })
        ));
    }

    #[test]
    fn another_argo_cd_secret_or_type_under_our_name_is_not_ours() {
        let (t, p) = (target(), SecretString::from("token"));
        let ours = written(&t, RepoType::Helm, &p, SystemTime::now());
        assert_eq!(can_write(&ours, Kind::RepoCreds), Ok(()));
        assert_eq!(
            can_write(&ours, Kind::Repository),
            Err(NotOurs::OtherArgoSecret {
                found: "repo-creds".into(),
                expected: "repository"
            })
        );
        let mut cluster = ours.clone();
        cluster
            .metadata
            .labels
            .as_mut()
            .unwrap()
            .insert(SECRET_TYPE_LABEL.into(), "cluster".into());
        assert_eq!(
            can_write(&cluster, Kind::RepoCreds),
            Err(NotOurs::OtherArgoSecret {
                found: "cluster".into(),
                expected: "repo-creds"
            })
        );
        let mut tls = ours.clone();
        tls.type_ = Some("kubernetes.io/tls".into());
        assert!(matches!(
            can_write(&tls, Kind::RepoCreds),
            Err(NotOurs::WrongType(_))
        ));
        let mut frozen = ours.clone();
        frozen.immutable = Some(true);
        assert_eq!(can_write(&frozen, Kind::RepoCreds), Err(NotOurs::Immutable));
        let mut unlabelled = ours;
        unlabelled.metadata.labels = None;
        assert_eq!(
            can_write(&unlabelled, Kind::RepoCreds),
            Err(NotOurs::Unlabelled("repo-creds"))
        );
    }

    #[test]
    fn the_repository_secret_holds_the_bare_url_and_the_project_and_repo_creds_never_a_project() {
        let (r, c, p, now) = (
            repository(),
            target(),
            SecretString::from("token"),
            SystemTime::now(),
        );
        let team = ProjectName::from_str("team-a").unwrap();
        let s = written_for(&r, RepoType::Helm, Some(&team), &p, now);
        assert_eq!(label(&s), Some("repository"));
        assert_eq!(value(&s, URL), Some(HOST.as_bytes()));
        assert_eq!(value(&s, PROJECT), Some(b"team-a".as_slice()));
        let oci = written_for(&r, RepoType::Oci, None, &p, now);
        assert_eq!(value(&oci, URL), Some(format!("oci://{HOST}").as_bytes()));
        assert_eq!(value(&oci, PROJECT), None);
        let creds = written_for(&c, RepoType::Helm, Some(&team), &p, now);
        assert_eq!(
            value(&creds, PROJECT),
            None,
            "Argo CD ignores it on repo-creds"
        );
        assert!(matches!(
            decide(
                Some(&creds),
                &c,
                RepoType::Helm,
                Some(&team),
                &policy(),
                now
            ),
            Decision::Fresh { .. }
        ));
        assert!(matches!(
            decide(Some(&s), &r, RepoType::Helm, Some(&team), &policy(), now),
            Decision::Fresh { .. }
        ));
        // Another project asked for, or one set where none was: due.
        let other = ProjectName::from_str("team-b").unwrap();
        assert_eq!(
            decide(Some(&s), &r, RepoType::Helm, Some(&other), &policy(), now),
            Decision::Due(Due::EntriesChanged)
        );
        let unscoped = written_for(&r, RepoType::Helm, None, &p, now);
        assert_eq!(
            decide(
                Some(&unscoped),
                &r,
                RepoType::Helm,
                Some(&team),
                &policy(),
                now
            ),
            Decision::Due(Due::EntriesChanged)
        );
    }

    #[test]
    fn a_repo_creds_secret_an_older_version_wrote_with_the_bare_host_is_due_for_its_url() {
        let (t, p, now) = (target(), SecretString::from("token"), SystemTime::now());
        let mut old = written(&t, RepoType::Helm, &p, now);
        old.data
            .as_mut()
            .unwrap()
            .insert(URL.into(), ByteString(HOST.as_bytes().to_vec()));
        assert_eq!(
            decide(Some(&old), &t, RepoType::Helm, None, &policy(), now),
            Decision::Due(Due::EntriesChanged)
        );
    }
}
