//! The termination message: the run's outcome where `kubectl describe pod` shows it.

use std::path::Path;

/// The outcome where `kubectl describe pod` shows it; a run outside a pod has no such file.
pub async fn write_termination_message(path: &Path, message: &str) {
    if let Err(e) = tokio::fs::write(path, message).await {
        tracing::debug!(path = %path.display(), error = %e, "termination message not written");
    }
}
