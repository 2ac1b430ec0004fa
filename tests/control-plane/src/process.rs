//! The two daemons as child processes: spawned so that they die with the test process,
//! their output in a log file, stopped with a signal and waited for.

use std::fs::{File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::OnceLock;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

/// A running etcd or kube-apiserver.
pub(crate) struct Daemon {
    name: &'static str,
    child: Child,
    log: PathBuf,
}

impl Daemon {
    /// Starts `command` with stdin closed and stdout and stderr appended to `log` (appended,
    /// so that a restart keeps the earlier run's lines).
    pub(crate) fn spawn(
        name: &'static str,
        mut command: Command,
        log: &Path,
    ) -> Result<Self, String> {
        let out = OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .map_err(|e| format!("cannot open {}: {e}", log.display()))?;
        let err = out
            .try_clone()
            .map_err(|e| format!("cannot reopen {}: {e}", log.display()))?;
        command
            .stdin(Stdio::null())
            .stdout(Stdio::from(out))
            .stderr(Stdio::from(err));
        let child =
            spawn_tied_to_this_process(command).map_err(|e| format!("cannot start {name}: {e}"))?;
        Ok(Self {
            name,
            child,
            log: log.to_owned(),
        })
    }

    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Its exit status, if it has exited.
    pub(crate) fn exited(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// "etcd exited with signal 9" and the log's last lines, for a failure message.
    pub(crate) fn exit_report(&self, status: ExitStatus) -> String {
        format!(
            "{} exited ({status}); the last lines of {}:\n{}",
            self.name,
            self.log.display(),
            log_tail(&self.log, 40)
        )
    }

    /// SIGKILL, then waits: nothing of it is left when this returns.
    pub(crate) fn kill(mut self) {
        // An error here means it has exited already; wait reaps it either way.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGTERM, then up to `grace` for it to exit, then SIGKILL.
    pub(crate) fn terminate(mut self, grace: Duration) -> Result<ExitStatus, String> {
        let pid = libc::pid_t::try_from(self.pid()).map_err(|e| format!("pid: {e}"))?;
        // SAFETY: kill(2) with a pid we spawned and have not reaped yet (Child::wait was not
        // called), so the pid can't belong to another process.
        if unsafe { libc::kill(pid, libc::SIGTERM) } != 0 {
            return Err(format!(
                "SIGTERM to {} (pid {pid}): {}",
                self.name,
                io::Error::last_os_error()
            ));
        }
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            if let Some(status) = self.exited() {
                return Ok(status);
            }
            thread::sleep(Duration::from_millis(50));
        }
        let name = self.name;
        self.kill();
        Err(format!(
            "{name} did not exit within {grace:?} of SIGTERM; it was killed"
        ))
    }
}

/// The last `lines` lines of a log file (a missing file reads as empty).
pub(crate) fn log_tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read(path).unwrap_or_default();
    let text = String::from_utf8_lossy(&text);
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

type SpawnRequest = (Command, mpsc::Sender<io::Result<Child>>);

/// Spawns `command` so that the child gets SIGKILL when this process dies, however it
/// dies (a panic that aborts, SIGKILL, the harness timing out).
///
/// PR_SET_PDEATHSIG fires when the *thread* that forked the child exits, not the process.
/// Tests run on short-lived threads, and the shared control plane outlives the test that
/// started it, so every child is forked by one thread that lives as long as the process
/// (it blocks on its channel until the process exits).
fn spawn_tied_to_this_process(mut command: Command) -> io::Result<Child> {
    static SPAWNER: OnceLock<mpsc::Sender<SpawnRequest>> = OnceLock::new();
    let spawner = SPAWNER.get_or_init(|| {
        let (requests, incoming) = mpsc::channel::<SpawnRequest>();
        thread::Builder::new()
            .name("control-plane-spawner".into())
            .spawn(move || {
                for (mut command, reply) in incoming {
                    let _ = reply.send(command.spawn());
                }
            })
            .expect("a thread to spawn the control plane's processes from");
        requests
    });

    let parent = libc::pid_t::try_from(std::process::id()).expect("a pid fits pid_t");
    // SAFETY: the closure runs in the child between fork and exec, where only
    // async-signal-safe calls are allowed: prctl(2) and getppid(2) are system calls, and the
    // error is built from an errno without allocating.
    unsafe {
        use std::os::unix::process::CommandExt as _;
        command.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(io::Error::last_os_error());
            }
            // The parent may have died between fork and prctl; then no signal would come.
            if libc::getppid() != parent {
                return Err(io::Error::from_raw_os_error(libc::ESRCH));
            }
            Ok(())
        });
    }
    let (reply, answer) = mpsc::channel();
    spawner
        .send((command, reply))
        .map_err(|_| io::Error::other("the control plane's spawner thread is gone"))?;
    answer
        .recv()
        .map_err(|_| io::Error::other("the control plane's spawner thread is gone"))?
}

/// Runs a short command to completion, failing with its stderr.
pub(crate) fn run(command: &mut Command, what: &str) -> Result<String, String> {
    let output = command
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("{what}: cannot run {:?}: {e}", command.get_program()))?;
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    } else {
        Err(format!(
            "{what}: {:?} failed ({}): {}",
            command.get_program(),
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        ))
    }
}

/// Opens `path` for writing with mode 0600 (keys and tokens).
pub(crate) fn private_file(path: &Path) -> io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt as _;
    OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
}
