//! Starts the shared control plane outside a test, to poke at by hand or to prove that it
//! goes with its process:
//!
//! ```text
//! cargo run -p control-plane -- hold    # until killed; prints the admin kubeconfig
//! cargo run -p control-plane -- exit    # starts, prints, and exits at once
//! ```
//!
//! The first line on stdout is `etcd=PID apiserver=PID dir=DIR kubeconfig=PATH`.

use std::io::Write as _;

use control_plane::ControlPlane;

fn main() {
    let mode = std::env::args().nth(1).unwrap_or_default();
    if mode != "hold" && mode != "exit" {
        eprintln!("usage: control-plane hold|exit (got '{mode}')");
        std::process::exit(2);
    }
    let cp = ControlPlane::shared();
    println!(
        "etcd={} apiserver={} dir={} kubeconfig={}",
        cp.etcd_pid().unwrap_or(0),
        cp.apiserver_pid().unwrap_or(0),
        cp.dir().display(),
        cp.admin_kubeconfig().display()
    );
    std::io::stdout().flush().expect("stdout");
    if mode == "hold" {
        eprintln!(
            "control plane {} at {}; KUBECONFIG={} ; stop with Ctrl-C",
            cp.version(),
            cp.server_url(),
            cp.admin_kubeconfig().display()
        );
        loop {
            std::thread::park();
        }
    }
    // Returning runs the exit handler, which stops both daemons and removes the directory.
}
