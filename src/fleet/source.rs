//! Where a fleet's clusters come from (ECR_REFRESH_CLUSTERS). Interim: dir: only; capi and
//! argocd land with their refusals.

use std::path::Path;

use super::Source;

/// A cluster the source names, with its kubeconfig's server, TLS and credential.
pub struct Spoke {
    pub name: String,
    pub config: kube::Config,
}

/// A cluster the source names but that can't be used: that cluster's failure.
pub struct Refused {
    pub name: String,
    pub reason: String,
}

pub enum Found {
    Spoke(Spoke),
    Refused(Refused),
    /// The cluster the run runs in.
    Local,
}

#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error("{path}: {error}; mount the kubeconfig Secrets there, or fix ECR_REFRESH_CLUSTERS")]
    Dir { path: String, error: std::io::Error },
    #[error("ECR_REFRESH_CLUSTERS={0} is not read yet")]
    NotYet(String),
}

pub async fn read(
    _hub: &kube::Client,
    source: &Source,
    _namespaces: &[String],
    _selector: Option<&str>,
) -> Result<Vec<Found>, SourceError> {
    match source {
        Source::Dir(path) => dir(path).await,
        other => Err(SourceError::NotYet(other.to_string())),
    }
}

async fn dir(path: &Path) -> Result<Vec<Found>, SourceError> {
    let error = |error| SourceError::Dir {
        path: path.display().to_string(),
        error,
    };
    let mut names = Vec::new();
    for entry in std::fs::read_dir(path).map_err(error)? {
        let entry = entry.map_err(error)?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') || !entry.path().is_file() {
            continue;
        }
        names.push(name);
    }
    names.sort();
    let mut found = Vec::new();
    for name in names {
        let file = path.join(&name);
        let config = match kube::config::Kubeconfig::read_from(&file) {
            Ok(kubeconfig) => kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
                .await
                .map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        };
        found.push(match config {
            Ok(config) => Found::Spoke(Spoke { name, config }),
            Err(reason) => Found::Refused(Refused { name, reason }),
        });
    }
    Ok(found)
}
