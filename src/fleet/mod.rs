//! A fleet from one run (ECR_REFRESH_CLUSTERS): where the clusters come from, and how a run
//! reaches each one as that cluster's own ecr-refresh ServiceAccount.
//!
//! The hub reads the clusters' kubeconfigs (Cluster API's, Argo CD's, or a directory's) with its
//! own client; with each kubeconfig's credential it sends one request, a TokenRequest for the
//! spoke's ServiceAccount (or, as the option, impersonates it), and everything else in that
//! cluster is sent as that ServiceAccount: the spoke's own RBAC and admission policy hold each
//! write, as they do for a local install.

pub mod kubeconfig;
pub mod source;

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

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
