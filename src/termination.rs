//! The termination message: the run's outcome where `kubectl describe pod` shows it.

use std::io;
use std::path::Path;

use crate::config::DEFAULT_TERMINATION_LOG;

/// Writes the outcome where `kubectl describe pod` shows it (see `destination`).
pub async fn write_termination_message(set: Option<&Path>, message: &str) {
    let Some(path) = target(set) else { return };
    report(path, tokio::fs::write(path, message).await);
}

/// The same, before the async runtime exists (a configuration error).
pub fn write_termination_message_now(set: Option<&Path>, message: &str) {
    let Some(path) = target(set) else { return };
    report(path, std::fs::write(path, message));
}

fn target(set: Option<&Path>) -> Option<&Path> {
    let default = Path::new(DEFAULT_TERMINATION_LOG);
    let found = destination(set, in_pod(), || mounted(default));
    if found.is_none() {
        tracing::debug!(
            path = DEFAULT_TERMINATION_LOG,
            "no termination message: not in a pod, and ECR_REFRESH_TERMINATION_LOG is not set"
        );
    }
    found
}

/// Whether this process runs in a Kubernetes pod: the kubelet gives every container the
/// API server's address, as it gives it a termination-log mount.
fn in_pod() -> bool {
    std::env::var_os("KUBERNETES_SERVICE_HOST").is_some_and(|v| !v.is_empty())
}

/// Whether `path` is a mount point of this process (/proc/self/mountinfo, field 5), as the
/// kubelet's bind mount of the termination log is. A plain file there is not enough: an older
/// version run by hand as root may have left one in /dev, and it is nobody's to write.
fn mounted(path: &Path) -> bool {
    let Ok(mounts) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return false;
    };
    mounts
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .any(|point| Path::new(point) == path)
}

/// Where the message goes: a path set in ECR_REFRESH_TERMINATION_LOG, always. The default,
/// /dev/termination-log, is the kubelet's: written in a pod, or where the kubelet mounted
/// it, never created (or overwritten) in /dev on a workstation or CI machine the binary is
/// run on by hand (as root, it could be).
fn destination(
    set: Option<&Path>,
    in_pod: bool,
    default_mounted: impl FnOnce() -> bool,
) -> Option<&Path> {
    match set {
        Some(path) => Some(path),
        None if in_pod || default_mounted() => Some(Path::new(DEFAULT_TERMINATION_LOG)),
        None => None,
    }
}

/// A failed write is worth a warning: the file was expected, in a pod (the kubelet mounts it)
/// or wherever ECR_REFRESH_TERMINATION_LOG names it.
fn report(path: &Path, written: io::Result<()>) {
    let Err(error) = written else { return };
    tracing::warn!(
        path = %path.display(),
        %error,
        "termination message not written, so kubectl describe pod will not show this run's \
         outcome: make the path writable, or set ECR_REFRESH_TERMINATION_LOG to a writable file"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_path_is_written_only_in_a_pod_or_where_it_is_mounted() {
        let default = Some(Path::new(DEFAULT_TERMINATION_LOG));
        let chosen = Path::new("/var/run/ecr-refresh/termination");
        let cases = [
            (None, true, false, default),
            (None, false, true, default),
            (None, false, false, None),
            (Some(chosen), false, false, Some(chosen)),
            (Some(chosen), true, true, Some(chosen)),
        ];
        for (set, in_pod, mounted, expected) in cases {
            assert_eq!(
                destination(set, in_pod, || mounted),
                expected,
                "set={set:?} in_pod={in_pod} mounted={mounted}"
            );
        }
    }

    #[test]
    fn a_mount_point_is_told_from_a_plain_file() {
        assert!(mounted(Path::new("/proc")));
        let file =
            std::env::temp_dir().join(format!("ecr-refresh-not-mounted-{}", std::process::id()));
        std::fs::write(&file, "").expect("a plain file");
        assert!(!mounted(&file));
        let _ = std::fs::remove_file(&file);
    }
}
