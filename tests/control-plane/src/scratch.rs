//! The control plane's temporary directory, and the sweep of those a killed run left.
//!
//! Its name records the owning process, `ecr-refresh-control-plane-<pid>-<start time>-<n>`,
//! so that a later run can tell a directory whose owner is gone (SIGKILL runs no Drop and
//! no exit handler) from one in use by a test binary running beside it.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

const PREFIX: &str = "ecr-refresh-control-plane-";

/// Creates a fresh directory under the system's temporary directory (`TMPDIR`), after
/// removing those whose owning process has exited.
pub(crate) fn create() -> Result<PathBuf, String> {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let base = std::env::temp_dir();
    sweep(&base);
    let pid = std::process::id();
    let started = start_time(pid)
        .ok_or_else(|| format!("cannot read this process's start time from /proc/{pid}/stat"))?;
    loop {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir = base.join(format!("{PREFIX}{pid}-{started}-{n}"));
        match std::fs::create_dir(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(format!("cannot create {}: {e}", dir.display())),
        }
    }
}

/// Removes every `ecr-refresh-control-plane-*` directory in `base` whose owner (pid and
/// start time, so that a reused pid does not count) is no longer running.
pub(crate) fn sweep(base: &Path) {
    let Ok(entries) = std::fs::read_dir(base) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(owner) = name.to_str().and_then(|n| n.strip_prefix(PREFIX)) else {
            continue;
        };
        let mut parts = owner.split('-');
        let (Some(pid), Some(started)) = (
            parts.next().and_then(|p| p.parse::<u32>().ok()),
            parts.next().and_then(|s| s.parse::<u64>().ok()),
        ) else {
            continue;
        };
        if start_time(pid) != Some(started) {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// A process's start time in clock ticks since boot (field 22 of /proc/PID/stat), which
/// with the pid names one process for the machine's uptime.
fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold spaces: count from the
    // last ')'. After it come field 3 (state) onwards, so field 22 is the 20th.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_whose_owner_is_gone_is_swept_and_one_in_use_is_kept() {
        let base = std::env::temp_dir().join(format!("scratch-sweep-test-{}", std::process::id()));
        std::fs::create_dir_all(&base).unwrap();
        let me = std::process::id();
        let mine = base.join(format!("{PREFIX}{me}-{}-0", start_time(me).unwrap()));
        // The same pid with another start time: a dead process whose pid was reused.
        let reused = base.join(format!("{PREFIX}{me}-1-0"));
        let unrelated = base.join("something-else");
        for dir in [&mine, &reused, &unrelated] {
            std::fs::create_dir(dir).unwrap();
        }
        sweep(&base);
        assert!(mine.exists(), "a live owner's directory was removed");
        assert!(!reused.exists(), "a dead owner's directory was kept");
        assert!(
            unrelated.exists(),
            "a directory that is not ours was removed"
        );
        std::fs::remove_dir_all(&base).unwrap();
    }
}
