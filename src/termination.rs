//! The termination message: the run's outcome where `kubectl describe pod` shows it, fitted
//! under the kubelet's limit (one fit for every mode) and written where the kubelet reads it.

use std::io;
use std::path::Path;

use crate::config::DEFAULT_TERMINATION_LOG;

/// The kubelet keeps at most this many bytes of a termination message.
pub const LIMIT: usize = 4096;

/// A mode's message under `LIMIT`: `build` renders it from a prefix of each of `lists` (the
/// names a summary lists: failed namespaces, registries, ...); while it is too long, the
/// longest list is cut, geometrically, so 10,000 names take a handful of passes. The counts a
/// message carries are `build`'s: it sees how much of each list it was given. When every list is
/// empty and the message is still too long, it is returned as it is.
pub fn fit<const N: usize>(
    lists: [&[String]; N],
    build: impl Fn([&[String]; N]) -> String,
) -> String {
    let mut kept = lists.map(<[String]>::len);
    loop {
        let message = build(std::array::from_fn(|i| &lists[i][..kept[i]]));
        if message.len() < LIMIT {
            return message;
        }
        let longest = (0..N)
            .max_by_key(|&i| {
                lists[i][..kept[i]]
                    .iter()
                    .map(|s| s.len() + 3)
                    .sum::<usize>()
            })
            .filter(|&i| kept[i] > 0);
        let Some(i) = longest else { return message };
        let keep = kept[i] * (LIMIT - 512) / message.len();
        kept[i] = keep.min(kept[i] - 1);
    }
}

/// The termination message of a run that ended before anything was done: its exit code and why.
pub fn error_message(exit_code: u8, error: &str) -> String {
    let mut error = error.to_owned();
    loop {
        let message = serde_json::json!({ "exit_code": exit_code, "error": error }).to_string();
        if message.len() < LIMIT {
            return message;
        }
        // Escapes can make the JSON longer than the text: cut a tenth, on a character boundary.
        let mut cut = error.len() * 9 / 10;
        while !error.is_char_boundary(cut) {
            cut -= 1;
        }
        error.truncate(cut);
    }
}

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
    fn an_early_failure_is_a_short_termination_message() {
        let message = error_message(crate::report::exit::UNAVAILABLE, &"\u{1}é".repeat(5000));
        assert!(message.len() < 4096, "{} bytes", message.len());
        let value: serde_json::Value = serde_json::from_str(&message).unwrap();
        assert_eq!(value["exit_code"], 3);
    }

    #[test]
    fn the_longest_list_is_cut_first_and_a_short_message_is_left_whole() {
        let long: Vec<String> = (0..1_000).map(|i| format!("namespace-{i:05}")).collect();
        let short: Vec<String> = vec!["registry".into()];
        let build = |[a, b]: [&[String]; 2]| serde_json::json!({ "a": a, "b": b }).to_string();
        let message = fit([&long, &short], build);
        assert!(message.len() < LIMIT, "{} bytes", message.len());
        let value: serde_json::Value = serde_json::from_str(&message).unwrap();
        assert!(value["a"].as_array().unwrap().len() > 100);
        assert_eq!(value["b"], serde_json::json!(["registry"]));
        assert_eq!(fit([&short, &short], build), build([&short, &short]));
    }

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
