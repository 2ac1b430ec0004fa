//! Argo CD's repository credentials: one `repo-creds` Secret per private registry, in the
//! Argo CD namespace (ECR_REFRESH_ARGOCD_NAMESPACE), holding the registry's token as the
//! password Argo CD's repo-server logs in to Helm-OCI (or OCI) repositories with.
//!
//! What one holds, by name (`secret`), whether it is due (`due`, by the pull Secret's own
//! rules of expiry), and its write (`write`: uid-pinned server-side apply, never a delete).
//! Argo CD matches a `repo-creds` Secret to a repository by the longest `url` prefix, so one
//! per registry host serves every chart in that registry.

pub mod secret;
pub mod write;

use std::fmt;
use std::str::FromStr;

use crate::aws::registry::RegistryHost;
use crate::cluster::names::{NamespaceName, SecretName};

/// The label Argo CD reads a Secret's role from.
pub const SECRET_TYPE_LABEL: &str = "argocd.argoproj.io/secret-type";
/// Credentials for every repository whose URL starts with the Secret's `url`.
pub const REPO_CREDS: &str = "repo-creds";
/// The username an ECR token goes with.
pub const USERNAME: &str = "AWS";
/// A digest of the password our last write put in (SHA-256, hex): a password changed since
/// makes the Secret due, as the pull Secret's `ecr-refresh/auths-sha256` does.
pub const PASSWORD_DIGEST_ANNOTATION: &str = "ecr-refresh/password-sha256";

/// How Argo CD is to read the registry (ECR_REFRESH_ARGOCD_TYPE).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RepoType {
    /// A Helm repository served over OCI: `type: helm`, `enableOCI: "true"`, `url` the bare
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

    /// The `url` Argo CD matches repositories against, for this host.
    pub fn url(self, host: &str) -> String {
        match self {
            Self::Helm => host.to_owned(),
            Self::Oci => format!("oci://{host}"),
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
    /// One per private registry configured, in the configured order.
    pub targets: Vec<Target>,
}

/// One Argo CD Secret: its name and the registry it holds the token of.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub name: SecretName,
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

/// The Argo CD Secrets for these registries: one per private registry, ECR Public left out.
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
        let name = SecretName::from_str(&name).map_err(|e| {
            format!("gives the Argo CD Secret name '{name}' for {registry}, which {e}: shorten ECR_REFRESH_SECRET_NAME")
        })?;
        if let Some(other) = targets.iter().find(|t| t.name == name) {
            return Err(format!(
                "{} and {} would share the Argo CD Secret {name} (one per account and region): \
                 list only one of them in ECR_REFRESH_REGISTRIES",
                other.registry, registry
            ));
        }
        targets.push(Target {
            name,
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
    fn one_secret_per_private_registry_named_after_the_pull_secret_account_and_region() {
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
                "aws-ecr-token-210987654321-eu-west-1"
            ]
        );
        assert_eq!(targets[1].registry, registries[2]);
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
    fn the_url_is_the_bare_host_for_helm_and_an_oci_url_for_oci() {
        let h = "123456789012.dkr.ecr.us-east-1.amazonaws.com";
        assert_eq!(RepoType::Helm.url(h), h);
        assert_eq!(RepoType::Oci.url(h), format!("oci://{h}"));
        assert_eq!("OCI".parse::<RepoType>(), Ok(RepoType::Oci));
        assert!("git".parse::<RepoType>().unwrap_err().contains("helm"));
    }
}
