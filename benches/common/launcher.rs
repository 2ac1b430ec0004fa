//! The `--measure` launcher both benches run the binary through: peak RSS from `wait4`
//! taken on a child of a process of a few MB (scale.rs says why not on a child of the bench).

use std::fs::File;
use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Instant;

/// The launcher measuring one run of the binary, as every bench run has it: a clean
/// environment but PATH, HOME in `dir`, the cluster's kubeconfig, the fake ECR's `ecr_env`,
/// `registry`, JSON logs, the termination log and the log file in `dir`. The caller adds its
/// own variables, runs it and reads the numbers with [`measured`].
pub(crate) fn measure(
    dir: &Path,
    kubeconfig: &Path,
    registry: &str,
    ecr_env: impl IntoIterator<Item = (&'static str, String)>,
) -> Command {
    let mut command = Command::new(std::env::current_exe().expect("the bench's own path"));
    command
        .arg("--measure")
        .arg(dir.join("ecr-refresh.log"))
        .arg(env!("CARGO_BIN_EXE_ecr-refresh"))
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", dir)
        .env("KUBECONFIG", kubeconfig)
        .envs(ecr_env)
        .env("ECR_REFRESH_REGISTRIES", registry)
        .env("ECR_REFRESH_LOG_FORMAT", "json")
        .env("ECR_REFRESH_TERMINATION_LOG", dir.join("termination-log"));
    command
}

/// What the launcher printed: `[wall_us, maxrss_kb, cpu_us, exit_code]`.
pub(crate) fn measured(output: &Output) -> [u64; 4] {
    let stdout = String::from_utf8_lossy(&output.stdout);
    let fields: Vec<u64> = stdout
        .split_whitespace()
        .map(|f| f.parse().expect("the launcher prints numbers"))
        .collect();
    let Ok(fields) = <[u64; 4]>::try_from(fields) else {
        panic!(
            "launcher failed:\n{stdout}{}",
            String::from_utf8_lossy(&output.stderr)
        );
    };
    fields
}

/// `--measure LOG PROGRAM`: runs PROGRAM (this process's environment, output to LOG),
/// waits for it with `wait4`, and prints `wall_us maxrss_kb cpu_us exit_code`.
pub(crate) fn launcher(args: &[String]) {
    let [log, program] = args else {
        panic!("usage: --measure LOG PROGRAM");
    };
    let log = File::create(log).expect("the log file can be created");
    let started = Instant::now();
    #[expect(
        clippy::zombie_processes,
        reason = "reaped by wait4, which also returns its resource usage"
    )]
    let child = Command::new(program)
        .stdin(Stdio::null())
        .stdout(log.try_clone().expect("a second handle on the log"))
        .stderr(log)
        .spawn()
        .unwrap_or_else(|e| panic!("{program} does not start: {e}"));
    let (status, usage) = wait4(child.id());
    let wall = started.elapsed();
    let code = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status) as u64
    } else {
        // Killed by a signal: 128 + the signal, as a shell reports it.
        128 + libc::WTERMSIG(status) as u64
    };
    let micros = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "{} {} {} {code}",
        wall.as_micros(),
        usage.ru_maxrss,
        micros(usage.ru_utime) + micros(usage.ru_stime)
    )
    .expect("stdout is writable");
}

/// Waits for our child `pid` and returns its wait status and resource usage.
#[allow(unsafe_code)]
fn wait4(pid: u32) -> (i32, libc::rusage) {
    let pid = libc::pid_t::try_from(pid).expect("a pid fits pid_t");
    let mut status = 0;
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    loop {
        // SAFETY: `pid` is a child of this process that nothing else waits for (its `Child`
        // handle is never waited on), and both pointers are to live, writable locals.
        let rc = unsafe { libc::wait4(pid, &mut status, 0, usage.as_mut_ptr()) };
        if rc == pid {
            break;
        }
        let error = std::io::Error::last_os_error();
        assert_eq!(
            error.kind(),
            std::io::ErrorKind::Interrupted,
            "wait4({pid}): {error}"
        );
    }
    // SAFETY: wait4 returned the pid, so it filled in the rusage (and zeroed is valid anyway).
    (status, unsafe { usage.assume_init() })
}
