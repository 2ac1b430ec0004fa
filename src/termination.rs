//! The termination message: the run's outcome where `kubectl describe pod` shows it.

use std::io;
use std::path::Path;

use crate::config::DEFAULT_TERMINATION_LOG;

/// Writes the outcome where `kubectl describe pod` shows it.
pub async fn write_termination_message(path: &Path, message: &str) {
    let written = tokio::fs::write(path, message).await;
    report(path, written, in_pod());
}

/// The same, before the async runtime exists (a configuration error).
pub fn write_termination_message_now(path: &Path, message: &str) {
    report(path, std::fs::write(path, message), in_pod());
}

/// Whether this process runs in a Kubernetes pod: the kubelet gives every container the
/// API server's address, as it gives it a termination-log mount.
fn in_pod() -> bool {
    std::env::var_os("KUBERNETES_SERVICE_HOST").is_some_and(|v| !v.is_empty())
}

/// A failed write is worth a warning when the file was expected: in a pod (the kubelet mounts
/// it), or wherever ECR_REFRESH_TERMINATION_LOG names it. Outside a pod the default path
/// usually can't be written (`podman run --read-only`, a non-root user, no /dev mount): that
/// says nothing about the run, so it is left at debug.
fn report(path: &Path, written: io::Result<()>, in_pod: bool) {
    let Err(error) = written else { return };
    if expected(path, in_pod) {
        tracing::warn!(
            path = %path.display(),
            %error,
            "termination message not written, so kubectl describe pod will not show this run's \
             outcome: make the path writable, or set ECR_REFRESH_TERMINATION_LOG to a writable file"
        );
    } else {
        tracing::debug!(path = %path.display(), %error, "termination message not written");
    }
}

fn expected(path: &Path, in_pod: bool) -> bool {
    in_pod || path != Path::new(DEFAULT_TERMINATION_LOG)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_write_warns_in_a_pod_or_at_a_path_someone_chose() {
        let default = Path::new(DEFAULT_TERMINATION_LOG);
        let chosen = Path::new("/var/run/ecr-refresh/termination");
        let cases = [
            (default, true, true),
            (default, false, false),
            (chosen, true, true),
            (chosen, false, true),
        ];
        for (path, in_pod, warns) in cases {
            assert_eq!(
                expected(path, in_pod),
                warns,
                "{} in_pod={in_pod}",
                path.display()
            );
        }
    }
}
