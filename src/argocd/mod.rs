//! Argo CD's repository credentials: two Secrets per private registry, in the Argo CD
//! namespace (ECR_REFRESH_ARGOCD_NAMESPACE), holding the registry's token as the password
//! Argo CD's repo-server logs in to Helm-OCI (or OCI) repositories with.
//!
//! What one holds, by name, whether it is due (by the pull Secret's own rules of expiry), and
//! its write (`secret`: one implementation of `owned::Owned`, the uid-pinned server-side apply
//! the pull Secret's write is too, never a delete).
//!
//! How Argo CD picks credentials for an Application's `repoURL` (argo-cd's
//! util/db/repository_secrets.go and util/git/git.go, `NormalizeGitURL`): both URLs are
//! normalised (trimmed, lowercased, a trailing `.git` stripped, a trailing `/` KEPT); a
//! `repository` Secret serves the repoURL equal to its `url`, a `repo-creds` Secret every
//! repoURL its `url` is a string prefix of (the longest wins), in every project (Argo CD
//! ignores `project` on repo-creds). A repo-creds `url` that is the bare host would hand the
//! token to `<host>.attacker.example/…` too, so ours ends at a delimiter, `<host>/` (or
//! `oci://<host>/`), and the one repoURL that prefix misses, the bare host itself, gets the
//! `repository` Secret, matched exactly, and scoped to ECR_REFRESH_ARGOCD_PROJECT when set.
//! Never touched: any Argo CD Secret we did not write (another name, or another label under
//! our name: `secret::can_write`).

pub mod secret;

use std::fmt;
use std::str::FromStr;

use crate::aws::registry::RegistryHost;
use crate::cluster::names::{NamespaceName, ProjectName, SecretName};

/// The label Argo CD reads a Secret's role from.
pub const SECRET_TYPE_LABEL: &str = "argocd.argoproj.io/secret-type";
/// Credentials for every repository whose URL starts with the Secret's `url`.
pub const REPO_CREDS: &str = "repo-creds";
/// Credentials for the one repository whose URL is the Secret's `url`.
pub const REPOSITORY: &str = "repository";
/// What the `repository` Secret's name adds to the `repo-creds` one's.
pub const REPOSITORY_SUFFIX: &str = "-repository";
/// The username an ECR token goes with.
pub const USERNAME: &str = "AWS";
/// A digest of the password our last write put in (SHA-256, hex): a password changed since
/// makes the Secret due, as the pull Secret's `ecr-refresh/auths-sha256` does.
pub const PASSWORD_DIGEST_ANNOTATION: &str = "ecr-refresh/password-sha256";

/// How Argo CD is to read the registry (ECR_REFRESH_ARGOCD_TYPE).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RepoType {
    /// A Helm repository served over OCI: `type: helm`, `enableOCI: "true"`, `url` the
    /// host (what Argo CD's Helm-OCI repositories name).
    #[default]
    Helm,
    /// Argo CD's OCI source type (3.1 and later): `type: oci`, `url` `oci://<host>`.
    Oci,
}

impl RepoType {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Helm => "helm",
            Self::Oci => "oci",
        }
    }

    /// The repository URL of the registry itself: the bare host, or `oci://<host>`.
    pub fn url(self, host: &str) -> String {
        match self {
            Self::Helm => host.to_owned(),
            Self::Oci => format!("oci://{host}"),
        }
    }
}

/// Which of the two Argo CD Secrets of a registry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// `repo-creds`, `url` `<host>/`: every repository under the host, in every project.
    RepoCreds,
    /// `repository`, `url` `<host>`: the host itself, in ECR_REFRESH_ARGOCD_PROJECT if set.
    Repository,
}

impl Kind {
    /// The value of the label Argo CD reads the Secret's role from.
    pub fn label(self) -> &'static str {
        match self {
            Self::RepoCreds => REPO_CREDS,
            Self::Repository => REPOSITORY,
        }
    }

    /// The `url` this Secret holds for the host: for repo-creds, the registry's URL ended by
    /// a `/`, so that Argo CD's prefix match stops at the host (`<host>.attacker.example`
    /// does not start with `<host>/`); for a repository, the registry's URL, matched exactly.
    pub fn url(self, repo_type: RepoType, host: &str) -> String {
        match self {
            Self::RepoCreds => format!("{}/", repo_type.url(host)),
            Self::Repository => repo_type.url(host),
        }
    }
}

impl FromStr for RepoType {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "helm" => Ok(Self::Helm),
            "oci" => Ok(Self::Oci),
            _ => {
                Err("must be 'helm' (Helm over OCI, the default) or 'oci' (any letter case)".into())
            }
        }
    }
}

impl fmt::Display for RepoType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The option, when it is on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArgoCd {
    pub namespace: NamespaceName,
    pub repo_type: RepoType,
    /// The Argo CD project the `repository` Secrets are for (ECR_REFRESH_ARGOCD_PROJECT);
    /// None: every project.
    pub project: Option<ProjectName>,
    /// Two per private registry configured (repo-creds, then repository), in the configured
    /// order.
    pub targets: Vec<Target>,
}

/// One Argo CD Secret: its name, which of the two it is, and the registry it holds the
/// token of.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub name: SecretName,
    pub kind: Kind,
    pub registry: RegistryHost,
}

/// The Argo CD Secret's name for a registry: the pull Secret's name, the account and the
/// region (`aws-ecr-token-123456789012-us-east-1`). Two installs with different pull Secret
/// names never write the same one. None for ECR Public, which has no account (Argo CD pulls
/// its public charts without credentials).
pub fn secret_name(pull_secret: &SecretName, registry: &RegistryHost) -> Option<String> {
    let account = registry.account()?;
    Some(format!(
        "{}-{account}-{}",
        pull_secret.as_str(),
        registry.region()
    ))
}

/// The `repository` Secret's name for a registry: the `repo-creds` one's and `-repository`.
pub fn repository_name(pull_secret: &SecretName, registry: &RegistryHost) -> Option<String> {
    secret_name(pull_secret, registry).map(|name| format!("{name}{REPOSITORY_SUFFIX}"))
}

/// The Argo CD Secrets for these registries: two per private registry, ECR Public left out.
/// Two hosts of one account and region (a FIPS host beside the plain one, a dual-stack host
/// named beside its IPv4 one) would share a name: refused, with what to do.
pub fn targets(
    pull_secret: &SecretName,
    registries: &[RegistryHost],
) -> Result<Vec<Target>, String> {
    let mut targets: Vec<Target> = Vec::new();
    for registry in registries {
        let Some(name) = secret_name(pull_secret, registry) else {
            continue;
        };
        let parse = |name: String| {
            SecretName::from_str(&name).map_err(|e| {
                format!("gives the Argo CD Secret name '{name}' for {registry}, which {e}: shorten ECR_REFRESH_SECRET_NAME")
            })
        };
        let repository = parse(format!("{name}{REPOSITORY_SUFFIX}"))?;
        let name = parse(name)?;
        if let Some(other) = targets.iter().find(|t| t.name == name) {
            return Err(format!(
                "{} and {} would share the Argo CD Secret {name} (one per account and region): \
                 list only one of them in ECR_REFRESH_REGISTRIES",
                other.registry, registry
            ));
        }
        targets.push(Target {
            name,
            kind: Kind::RepoCreds,
            registry: registry.clone(),
        });
        targets.push(Target {
            name: repository,
            kind: Kind::Repository,
            registry: registry.clone(),
        });
    }
    if targets.is_empty() {
        return Err(
            "needs the private registries named in ECR_REFRESH_REGISTRIES (the Argo CD Secrets are \
             named after each one's account and region, known before any ECR call): name them there"
                .into(),
        );
    }
    Ok(targets)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(s: &str) -> RegistryHost {
        RegistryHost::from_str(s).unwrap()
    }

    fn name(s: &str) -> SecretName {
        SecretName::from_str(s).unwrap()
    }

    #[test]
    fn two_secrets_per_private_registry_named_after_the_pull_secret_account_and_region() {
        let registries = [
            host("123456789012.dkr.ecr.us-east-1.amazonaws.com"),
            host("public.ecr.aws"),
            host("210987654321.dkr.ecr.eu-west-1.amazonaws.com"),
        ];
        let targets = targets(&name("aws-ecr-token"), &registries).unwrap();
        let names: Vec<&str> = targets.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "aws-ecr-token-123456789012-us-east-1",
                "aws-ecr-token-123456789012-us-east-1-repository",
                "aws-ecr-token-210987654321-eu-west-1",
                "aws-ecr-token-210987654321-eu-west-1-repository",
            ]
        );
        let kinds: Vec<Kind> = targets.iter().map(|t| t.kind).collect();
        assert_eq!(
            kinds,
            [
                Kind::RepoCreds,
                Kind::Repository,
                Kind::RepoCreds,
                Kind::Repository
            ]
        );
        assert_eq!(targets[2].registry, registries[2]);
        assert_eq!(targets[3].registry, registries[2]);
    }

    #[test]
    fn two_hosts_of_one_account_and_region_are_refused_naming_both() {
        let registries = [
            host("123456789012.dkr.ecr.us-east-1.amazonaws.com"),
            host("123456789012.dkr.ecr-fips.us-east-1.amazonaws.com"),
        ];
        let e = targets(&name("aws-ecr-token"), &registries).unwrap_err();
        assert!(
            e.contains("123456789012.dkr.ecr-fips.us-east-1.amazonaws.com"),
            "{e}"
        );
        assert!(e.contains("aws-ecr-token-123456789012-us-east-1"), "{e}");
    }

    #[test]
    fn no_private_registry_is_refused_with_what_to_set() {
        let e = targets(&name("aws-ecr-token"), &[host("public.ecr.aws")]).unwrap_err();
        assert!(e.contains("ECR_REFRESH_REGISTRIES"), "{e}");
        assert!(targets(&name("aws-ecr-token"), &[]).is_err());
    }

    #[test]
    fn repo_creds_end_the_url_at_a_slash_and_the_repository_holds_the_registrys_url() {
        let h = "123456789012.dkr.ecr.us-east-1.amazonaws.com";
        assert_eq!(Kind::RepoCreds.url(RepoType::Helm, h), format!("{h}/"));
        assert_eq!(Kind::RepoCreds.url(RepoType::Oci, h), format!("oci://{h}/"));
        assert_eq!(Kind::Repository.url(RepoType::Helm, h), h);
        assert_eq!(Kind::Repository.url(RepoType::Oci, h), format!("oci://{h}"));
        assert_eq!("OCI".parse::<RepoType>(), Ok(RepoType::Oci));
        assert!("git".parse::<RepoType>().unwrap_err().contains("helm"));
    }
}
