//! Every `kubectl run` command the docs show is accepted by a real kube-apiserver as written
//! (`--dry-run=server`), in the namespace the manifests make, under its `restricted` Pod
//! Security: a reader who pastes one gets a pod, not a refusal.

use std::path::Path;

use control_plane::ControlPlane;

use crate::common::docs;
use crate::common::manifests::copy;
use crate::common::real::{install_with, installs, kubectl};

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
    let turn = installs();
    let cp: &ControlPlane = &turn;
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

/// The first shell command in `text` that starts with `start`, its continuation lines joined.
fn shell_command(text: &str, start: &str) -> Option<String> {
    let mut command = String::new();
    for line in text.lines() {
        let line = line.trim();
        if command.is_empty() && !line.starts_with(start) {
            continue;
        }
        match line.strip_suffix('\\') {
            Some(part) => {
                command.push_str(part.trim());
                command.push(' ');
            }
            None => {
                command.push_str(line);
                return Some(command);
            }
        }
    }
    None
}

/// README's Helm install, as written (the registry you pushed to standing for REGISTRY),
/// then the book's upgrade with a values file of your own, and its uninstall, each run with
/// real Helm against a real kube-apiserver: the release is deployed, the CronJob pulls the
/// image named and calls the region set, the upgrade's value reaches the CronJob, and the
/// uninstall removes the cluster-wide objects.
#[test]
#[ignore = "needs helm and KUBEBUILDER_ASSETS (bash .ci/test)"]
fn the_readmes_helm_install_and_the_books_upgrade_and_uninstall_run_as_written() {
    let cp = installs();
    let home = tempfile::tempdir().expect("a directory for Helm's state");
    let helm = |args: &[String]| {
        let out = std::process::Command::new(crate::chart::helm_binary())
            .args(args)
            .env("HOME", home.path())
            .env("HELM_CACHE_HOME", home.path().join("cache"))
            .env("HELM_CONFIG_HOME", home.path().join("config"))
            .env("HELM_DATA_HOME", home.path().join("data"))
            .env("KUBECONFIG", cp.admin_kubeconfig())
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output()
            .expect("helm runs");
        assert!(
            out.status.success(),
            "helm {args:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let readme = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md"))
        .expect("README.md");
    // The namespace first, with the Pod Security labels the manifests set, as the book's
    // Helm page creates it: one way everywhere.
    for start in [
        "kubectl create namespace ecr-refresh",
        "kubectl label namespace ecr-refresh",
    ] {
        let command = shell_command(&readme, start)
            .unwrap_or_else(|| panic!("README creates the namespace: `{start}`"));
        let args: Vec<String> = words(&command).into_iter().skip(1).collect();
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        crate::common::real::admin(&cp, &args, "");
    }
    let namespace =
        crate::common::real::get(&cp, "namespace", "", "ecr-refresh").expect("the namespace");
    assert_eq!(
        namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"], "restricted",
        "{namespace}"
    );
    let install = shell_command(&readme, "helm install ecr-refresh charts/ecr-refresh")
        .expect("README shows the Helm install from the checkout");
    let args: Vec<String> = words(&install.replace("REGISTRY", "registry.example"))
        .into_iter()
        .skip(1)
        .collect();
    helm(&args);
    let cronjob = || {
        crate::common::real::get(&cp, "cronjob", "ecr-refresh", "ecr-refresh")
            .expect("the release's CronJob")
    };
    let env = |cronjob: &serde_json::Value, name: &str| {
        cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["env"]
            .as_array()
            .expect("env")
            .iter()
            .find(|e| e["name"] == name)
            .map(|e| e["value"].clone())
    };
    let installed = cronjob();
    let container = &installed["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(
        container["image"],
        format!("registry.example/ecr-refresh:{}", env!("CARGO_PKG_VERSION"))
    );
    assert_eq!(env(&installed, "AWS_REGION"), Some("eu-west-1".into()));

    let book = docs::texts()
        .into_iter()
        .find(|(file, _)| file.ends_with("install/index.md"))
        .map(|(_, text)| text)
        .expect("the book's install chapter");
    let inline = |start: &str| {
        book.split('`')
            .find(|piece| piece.starts_with(start))
            .unwrap_or_else(|| panic!("the install chapter shows `{start}…`"))
            .to_owned()
    };
    let values = home.path().join("your-values.yaml");
    std::fs::write(
        &values,
        "image: {repository: registry.example/ecr-refresh}\naws: {region: eu-west-1}\nconcurrency: 8\n",
    )
    .expect("writing your-values.yaml");
    let upgrade = inline("helm upgrade ecr-refresh charts/ecr-refresh")
        .replace("your-values.yaml", values.to_str().expect("a UTF-8 path"));
    helm(&words(&upgrade).into_iter().skip(1).collect::<Vec<_>>());
    assert_eq!(env(&cronjob(), "ECR_REFRESH_CONCURRENCY"), Some("8".into()));

    let uninstall = inline("helm uninstall ecr-refresh");
    helm(&words(&uninstall).into_iter().skip(1).collect::<Vec<_>>());
    for (kind, namespace, name) in [
        ("cronjob", "ecr-refresh", "ecr-refresh"),
        ("clusterrole", "", "ecr-refresh"),
        ("validatingadmissionpolicy", "", "ecr-refresh"),
    ] {
        assert!(
            crate::common::real::get(&cp, kind, namespace, name).is_none(),
            "{kind} {name} uninstalled"
        );
    }
}
