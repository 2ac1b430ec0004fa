//! Every `kubectl run` command the docs show is accepted by a real kube-apiserver as written
//! (`--dry-run=server`), in the namespace the manifests make, under its `restricted` Pod
//! Security: a reader who pastes one gets a pod, not a refusal.

use std::path::Path;

use control_plane::ControlPlane;

use crate::common::docs;
use crate::common::manifests::copy;
use crate::common::real::{install_with, kubectl};

/// The shell commands in the docs' `sh` blocks that start with `kubectl` and run a pod, each
/// with its continuation lines joined, and where it was found.
fn kubectl_runs() -> Vec<(String, String)> {
    let mut runs = Vec::new();
    for (file, text) in docs::texts() {
        let mut in_sh = false;
        let mut command = String::new();
        for line in text.lines() {
            if line.starts_with("```") {
                in_sh = !in_sh && (line == "```sh" || line == "```bash" || line == "```shell");
                continue;
            }
            if !in_sh {
                continue;
            }
            if command.is_empty() && !line.trim_start().starts_with("kubectl") {
                continue;
            }
            let (part, continues) = match line.trim_end().strip_suffix('\\') {
                Some(part) => (part, true),
                None => (line.trim_end(), false),
            };
            command.push_str(part.trim());
            command.push(' ');
            if !continues {
                let words: Vec<&str> = command.split_whitespace().collect();
                if words.contains(&"run") {
                    runs.push((file.clone(), command.trim().to_owned()));
                }
                command.clear();
            }
        }
    }
    runs
}

/// The command's words, as the shell splits them (single quotes only: the docs use no other
/// quoting in these commands).
fn words(command: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut quoted = false;
    let mut started = false;
    for c in command.chars() {
        match c {
            '\'' => {
                quoted = !quoted;
                started = true;
            }
            c if c.is_whitespace() && !quoted => {
                if started {
                    words.push(std::mem::take(&mut word));
                    started = false;
                }
            }
            c => {
                word.push(c);
                started = true;
            }
        }
    }
    if started {
        words.push(word);
    }
    words
}

#[test]
fn the_commands_are_found_and_split_as_the_shell_would() {
    let runs = kubectl_runs();
    assert!(
        runs.len() >= 2,
        "the docs show the once-off run and the check: {runs:?}"
    );
    assert_eq!(
        words("kubectl run x --overrides='{\"a\": 1}' --env=A=b"),
        ["kubectl", "run", "x", "--overrides={\"a\": 1}", "--env=A=b"]
    );
}

#[test]
#[ignore = "needs KUBEBUILDER_ASSETS (bash .ci/test)"]
fn every_kubectl_run_in_the_docs_passes_a_server_dry_run_under_restricted_pod_security() {
    let cp = &ControlPlane::start();
    let manifests = copy();
    let kubectl_program = cp.assets().join("kubectl");
    // With the check component: the check's command runs as its own ServiceAccount.
    install_with(
        cp,
        &kubectl_program,
        &manifests.path().join("manifests"),
        "",
        "",
        Some("check"),
    );
    let runs = kubectl_runs();
    assert!(!runs.is_empty(), "no kubectl run in the docs");
    for (file, command) in runs {
        // Attached and removed after: a dry run creates nothing to attach to.
        let args: Vec<String> = words(&command)
            .into_iter()
            .skip(1)
            .filter(|w| !matches!(w.as_str(), "--rm" | "-i" | "-it" | "--stdin"))
            .map(|w| w.replace(":VERSION", ":0.2.0"))
            .collect();
        let output = kubectl(cp, Path::new(&kubectl_program), cp.admin_kubeconfig())
            .args(&args)
            .args(["--dry-run=server", "-o", "name"])
            .output()
            .expect("kubectl runs");
        assert!(
            output.status.success(),
            "{file}: `{command}` is refused: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            !stderr.contains("violate PodSecurity"),
            "{file}: `{command}` warns: {stderr}"
        );
    }
}
