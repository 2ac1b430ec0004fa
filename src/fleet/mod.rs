//! A fleet from one run (ECR_REFRESH_CLUSTERS): where the clusters come from, and how a run
//! reaches each one as that cluster's own ecr-refresh ServiceAccount.
//!
//! The hub reads the clusters' kubeconfigs (Cluster API's, Argo CD's, or a directory's) with its
//! own client; with each kubeconfig's credential it sends one request, a TokenRequest for the
//! spoke's ServiceAccount (or, as the option, impersonates it), and everything else in that
//! cluster is sent as that ServiceAccount: the spoke's own RBAC and admission policy hold each
//! write, as they do for a local install.

pub mod connect;
pub mod kubeconfig;
pub mod source;

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use crate::cluster::names::{NamespaceName, ServiceAccountName};
use crate::cluster::selection::LabelSelector;

/// Where the clusters come from: ECR_REFRESH_CLUSTERS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// Cluster API's `<cluster>-kubeconfig` Secrets.
    Capi,
    /// Argo CD's cluster Secrets.
    ArgoCd,
    /// A directory of kubeconfig files, one cluster per file.
    Dir(PathBuf),
}

impl FromStr for Source {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        const ACCEPTED: &str =
            "must be capi, argocd or dir:<path> (a directory of kubeconfig files)";
        match s {
            "capi" => Ok(Self::Capi),
            "argocd" => Ok(Self::ArgoCd),
            _ => match s.strip_prefix("dir:") {
                Some(path) if !path.trim().is_empty() => Ok(Self::Dir(PathBuf::from(path.trim()))),
                Some(_) => Err(format!("{ACCEPTED}: dir: needs a path")),
                None => Err(ACCEPTED.into()),
            },
        }
    }
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Capi => f.write_str("capi"),
            Self::ArgoCd => f.write_str("argocd"),
            Self::Dir(path) => write!(f, "dir:{}", path.display()),
        }
    }
}

/// How a run acts as the spoke's ServiceAccount: ECR_REFRESH_CLUSTERS_AUTH.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Auth {
    /// A TokenRequest for the ServiceAccount (ten minutes), sent with the kubeconfig's credential.
    #[default]
    TokenRequest,
    /// Every request impersonates the ServiceAccount, with the kubeconfig's credential.
    Impersonate,
}

impl FromStr for Auth {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "token-request" => Ok(Self::TokenRequest),
            "impersonate" => Ok(Self::Impersonate),
            _ => Err("must be token-request or impersonate".into()),
        }
    }
}

/// The name of the cluster a run runs in, when ECR_REFRESH_CLUSTERS names others too.
pub const LOCAL: &str = "local";

/// A ServiceAccount in a spoke, as `<namespace>/<name>`: the one a run's writes there are made
/// as (ECR_REFRESH_CLUSTERS_SERVICE_ACCOUNT), or a check's reads
/// (ECR_REFRESH_CLUSTERS_CHECK_SERVICE_ACCOUNT).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpokeAccount {
    pub namespace: NamespaceName,
    pub name: ServiceAccountName,
}

impl SpokeAccount {
    /// The user the API server knows it as.
    pub fn username(&self) -> String {
        format!("system:serviceaccount:{}:{}", self.namespace, self.name)
    }
}

impl FromStr for SpokeAccount {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        const ACCEPTED: &str = "must be <namespace>/<name>, a ServiceAccount in each spoke";
        let (namespace, name) = s.split_once('/').ok_or(ACCEPTED)?;
        Ok(Self {
            namespace: namespace.parse().map_err(|e| format!("{ACCEPTED}: {e}"))?,
            name: name.parse().map_err(|e| format!("{ACCEPTED}: {e}"))?,
        })
    }
}

impl fmt::Display for SpokeAccount {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// ECR_REFRESH_CLUSTERS_*: the fleet a run works on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Clusters {
    pub source: Source,
    /// Where the cluster Secrets are (capi, argocd); empty for dir:.
    pub namespaces: Vec<NamespaceName>,
    /// A label selector on the cluster Secrets.
    pub selector: Option<LabelSelector>,
    /// Clusters worked on at once.
    pub concurrency: usize,
    /// The cluster the run runs in is a target too.
    pub include_local: bool,
    /// What a refresh's requests in a spoke are made as.
    pub service_account: SpokeAccount,
    /// What a check's requests in a spoke are made as.
    pub check_service_account: SpokeAccount,
    pub auth: Auth,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_and_accounts_parse_as_the_variables_say() {
        assert_eq!("capi".parse(), Ok(Source::Capi));
        assert_eq!("argocd".parse(), Ok(Source::ArgoCd));
        assert_eq!(
            "dir:/etc/clusters".parse(),
            Ok(Source::Dir(PathBuf::from("/etc/clusters")))
        );
        assert!(
            "dir:"
                .parse::<Source>()
                .unwrap_err()
                .contains("needs a path")
        );
        assert!("rancher".parse::<Source>().is_err());
        let account: SpokeAccount = "ecr-refresh/ecr-refresh".parse().unwrap();
        assert_eq!(
            account.username(),
            "system:serviceaccount:ecr-refresh:ecr-refresh"
        );
        assert!("ecr-refresh".parse::<SpokeAccount>().is_err());
        assert!("Bad/name".parse::<SpokeAccount>().is_err());
        assert_eq!("IMPERSONATE".parse(), Ok(Auth::Impersonate));
        assert!("token".parse::<Auth>().is_err());
    }
}
