//! The manifests installed on a real kube-apiserver (tests/control-plane): manifests/ and
//! manifests/namespaced/, each as shipped and with the service-accounts component (the
//! combinations .ci/validate-manifests renders), as the admin with `kubectl apply -k` of the
//! control plane's kubectl and of the one on PATH (on CI's machine /usr/bin/kubectl, 1.32,
//! kustomize v5.5; the control plane's own where none is installed). Every
//! object is created, and the server's type check of the admission policy finds nothing.
//!
//! The policy's type check is kube-controller-manager's
//! (validatingadmissionpolicy-status-controller), which runs for this test alone.
//!
//! One control plane: between installs everything is removed again, the namespace by hand
//! (no kube-controller-manager runs to finalize it).
//!
//! Not installed: components/monitoring, whose PrometheusRule needs the Prometheus
//! Operator's CRD (its alerts are tested by .ci/check-alerts).

use crate::common;

use std::path::PathBuf;

use common::manifests::{copy, yaml};
use common::real::{
    admin, checked_policy, eventually, install, installs, kubectl, kubectl_on_path, ok,
};
use control_plane::ControlPlane;
use serde_json::Value;

/// Everything `rendered` made gone again: the objects, then namespace ecr-refresh, which the
/// installs' control plane's namespace controller empties and removes.
fn uninstall(cp: &ControlPlane, rendered: &[Value]) {
    let (namespaces, others): (Vec<Value>, Vec<Value>) = rendered
        .iter()
        .cloned()
        .partition(|d| d["kind"] == "Namespace");
    admin(cp, &["delete", "-f", "-", "--wait=true"], &yaml(&others));
    for namespace in &namespaces {
        let name = namespace["metadata"]["name"].as_str().unwrap();
        admin(cp, &["delete", "namespace", name, "--wait=false"], "");
    }
    eventually("the install removed", || {
        let left = admin(
            cp,
            &["get", "-f", "-", "--ignore-not-found", "-o", "name"],
            &yaml(rendered),
        );
        if left.trim().is_empty() {
            Ok(())
        } else {
            Err(left)
        }
    });
}

fn service_account_rule(role: &Value) -> bool {
    role["rules"]
        .as_array()
        .unwrap()
        .iter()
        .any(|r| r["resources"] == serde_json::json!(["serviceaccounts"]))
}

#[test]
#[ignore = "needs KUBEBUILDER_ASSETS (bash .ci/test)"]
fn every_variant_is_installed_by_both_kubectls_and_the_policy_type_checks_without_warnings() {
    // It installs and removes the shipped names; the installs' control plane type-checks
    // the policy (its status controller).
    let turn = installs();
    let cp: &ControlPlane = &turn;
    // The namespaced variant's target namespaces are the cluster owner's: they exist first.
    cp.create_namespace("team-a");
    cp.create_namespace("team-b");
    let manifests = copy();
    let root = manifests.path().join("manifests");
    let built = cp.assets().join("kubectl");
    let mut kubectls: Vec<PathBuf> = vec![built.clone()];
    let on_path = kubectl_on_path().expect("a kubectl on PATH (.ci/test puts the built one there)");
    let same = |a: &PathBuf, b: &PathBuf| a.canonicalize().ok() == b.canonicalize().ok();
    if same(&on_path, &built) {
        println!(
            "the kubectl on PATH is the control plane's own ({}): no other installed",
            on_path.display()
        );
    } else {
        kubectls.push(on_path);
    }
    for program in &kubectls {
        let version = ok(
            kubectl(cp, program, cp.admin_kubeconfig()).args(["version", "--client", "-o", "json"]),
            "",
        );
        let version: Value = serde_json::from_str(&version).unwrap();
        println!(
            "{}: kubectl {}, kustomize {}; server {}",
            program.display(),
            version["clientVersion"]["gitVersion"],
            version["kustomizeVersion"],
            cp.version()
        );
        for (variant, with_service_accounts) in [
            ("", false),
            ("", true),
            ("namespaced", false),
            ("namespaced", true),
        ] {
            let what = format!(
                "{} {variant:?} with_service_accounts={with_service_accounts}",
                program.display()
            );
            let rendered = install(cp, program, &root, variant, with_service_accounts);
            // What the server stored is what was rendered.
            let stored = admin(cp, &["get", "-f", "-", "-o", "json"], &yaml(&rendered));
            let stored: Value = serde_json::from_str(&stored).unwrap();
            let stored = stored["items"]
                .as_array()
                .cloned()
                .unwrap_or_else(|| vec![stored]);
            assert_eq!(stored.len(), rendered.len(), "{what}");
            // The run's rights in its target namespaces; not the grant that puts it under
            // the admission policy, nor the namespaced variant's Role for the summary Event.
            let roles: Vec<&Value> = stored
                .iter()
                .filter(|d| d["kind"] == "ClusterRole" || d["kind"] == "Role")
                .filter(|d| d["metadata"]["name"] == "ecr-refresh")
                .collect();
            assert_eq!(
                roles.len(),
                if variant.is_empty() { 1 } else { 2 },
                "{what}"
            );
            for role in roles {
                assert_eq!(
                    service_account_rule(role),
                    with_service_accounts,
                    "{what}: {role}"
                );
            }

            let policy = checked_policy(cp, "ecr-refresh");
            let warnings = &policy["status"]["typeChecking"]["expressionWarnings"];
            assert!(
                warnings.is_null() || warnings.as_array().is_some_and(|w| w.is_empty()),
                "{what}: the server's type check warns: {warnings:#}"
            );
            assert!(
                policy["status"]["conditions"]
                    .as_array()
                    .is_none_or(|c| c.iter().all(|c| c["status"] != "False")),
                "{what}: {:#}",
                policy["status"]
            );
            uninstall(cp, &rendered);
        }
    }

    // The check can fail: a policy reading a field Secrets don't have gets its warning.
    let probe = serde_json::json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
        "metadata": { "name": "type-check-probe" },
        "spec": {
            "matchConstraints": { "resourceRules": [{ "apiGroups": [""], "apiVersions": ["v1"],
                "resources": ["secrets"], "operations": ["CREATE"] }] },
            "validations": [{ "expression": "object.spec.replicas > 0" }]
        }
    });
    admin(cp, &["create", "-f", "-"], &probe.to_string());
    let checked = checked_policy(cp, "type-check-probe");
    let warnings = checked["status"]["typeChecking"]["expressionWarnings"].to_string();
    assert!(
        warnings.contains("undefined field 'spec'"),
        "{:#}",
        checked["status"]
    );
    admin(
        cp,
        &["delete", "validatingadmissionpolicy", "type-check-probe"],
        "",
    );
}

/// The book's overlay into a namespace that already exists (the component
/// `existing-namespace`), applied and deleted with `kubectl -k` as written: the namespace's
/// own labels (a Pod Security level of `baseline`, a team label) are as they were after the
/// apply, the CronJob is there, and after `kubectl delete -k` everything the overlay made is
/// gone and the namespace is still there, not terminating. The overlay for a new namespace,
/// by contrast, carries the Namespace object (tests/fake/manifests.rs).
#[test]
#[ignore = "needs KUBEBUILDER_ASSETS (bash .ci/test)"]
fn the_books_overlay_into_an_existing_namespace_leaves_it_as_it_was() {
    // Not the shared one: the policy it installs would hold the chart tests' ServiceAccounts
    // there (every policy holds whoever is granted `subject-to` its Secret name).
    let turn = installs();
    let cp: &ControlPlane = &turn;
    let page = common::docs::page("install/kustomize.md");
    let overlay = common::manifests::book_overlays(&page, &["Into another namespace"])
        .into_iter()
        .find(|o| o.name.ends_with("a namespace you already have"))
        .expect("the book's overlay into a namespace you already have");
    let (_dir, install) = common::manifests::write_book_overlay(&overlay);
    let labels = serde_json::json!({
        "team": "platform",
        "pod-security.kubernetes.io/enforce": "baseline",
    });
    common::real::create(
        cp,
        &[serde_json::json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": "platform", "labels": labels}})],
    );
    let dir = install.to_str().expect("a UTF-8 path");
    admin(cp, &["apply", "-k", dir], "");
    let namespace = common::real::get(cp, "namespace", "", "platform").expect("platform");
    for (key, value) in labels.as_object().unwrap() {
        assert_eq!(&namespace["metadata"]["labels"][key], value, "label {key}");
    }
    assert!(
        namespace["metadata"]["labels"]
            .get("pod-security.kubernetes.io/warn")
            .is_none(),
        "the manifests' Pod Security labels were not applied: {namespace}"
    );
    assert!(common::real::get(cp, "cronjob", "platform", "prod-ecr-refresh").is_some());
    admin(cp, &["delete", "-k", dir, "--wait=true"], "");
    for (kind, namespace, name) in [
        ("cronjob", "platform", "prod-ecr-refresh"),
        ("serviceaccount", "platform", "prod-ecr-refresh"),
        ("clusterrole", "", "prod-ecr-refresh"),
        ("validatingadmissionpolicy", "", "prod-ecr-refresh"),
    ] {
        assert!(
            common::real::get(cp, kind, namespace, name).is_none(),
            "{kind} {name} deleted"
        );
    }
    let namespace = common::real::get(cp, "namespace", "", "platform").expect("platform stays");
    assert!(
        namespace["metadata"].get("deletionTimestamp").is_none(),
        "platform is not being deleted: {namespace}"
    );
    assert_eq!(namespace["status"]["phase"], "Active");
}

/// README's kustomize install, as the book writes it: the overlay `ecr-refresh-install/`
/// beside a clone, applied with `kubectl apply -k`; every object it renders is created, the
/// CronJob carries the overlay's region and registries, the book's first-run `kubectl create
/// job --from=cronjob/ecr-refresh` is accepted, and `kubectl delete -k` removes the
/// cluster-wide objects again.
#[test]
#[ignore = "needs KUBEBUILDER_ASSETS (bash .ci/test)"]
fn the_readmes_kustomize_install_applies_as_written() {
    let turn = installs();
    let cp: &ControlPlane = &turn;
    let page = common::docs::page("install/kustomize.md");
    let overlay = common::manifests::book_overlays(&page, &["With kustomize"])
        .into_iter()
        .next()
        .expect("the book's install overlay, under its first heading");
    let (_dir, install) = common::manifests::write_book_overlay(&overlay);
    let readme =
        std::fs::read_to_string(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("README.md"))
            .expect("README.md");
    assert!(
        readme.contains("kubectl apply -k ecr-refresh-install/"),
        "README installs the overlay of that name"
    );
    let dir = install.to_str().expect("a UTF-8 path");
    let rendered = common::manifests::documents(&admin(cp, &["kustomize", dir], ""));
    let applied = admin(cp, &["apply", "-k", dir], "");
    assert_eq!(
        applied.lines().filter(|l| l.ends_with(" created")).count(),
        rendered.len(),
        "every object created:\n{applied}"
    );
    let cronjob =
        common::real::get(cp, "cronjob", "ecr-refresh", "ecr-refresh").expect("the CronJob");
    let env = cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["env"]
        .to_string();
    assert!(env.contains("eu-west-1"), "{env}");
    assert!(
        env.contains("111122223333.dkr.ecr.eu-west-1.amazonaws.com"),
        "{env}"
    );
    let job = page
        .lines()
        .find(|l| l.starts_with("kubectl create job --from=cronjob/ecr-refresh \"$job\""))
        .expect("the book's first-run command");
    assert!(job.contains("-n ecr-refresh"), "{job}");
    admin(
        cp,
        &[
            "create",
            "job",
            "--from=cronjob/ecr-refresh",
            "ecr-refresh-first-1",
            "-n",
            "ecr-refresh",
        ],
        "",
    );
    assert!(common::real::get(cp, "job", "ecr-refresh", "ecr-refresh-first-1").is_some());
    admin(cp, &["delete", "-k", dir, "--wait=false"], "");
    for (kind, name) in [
        ("clusterrole", "ecr-refresh"),
        ("validatingadmissionpolicy", "ecr-refresh"),
        ("clusterrolebinding", "ecr-refresh-admission"),
    ] {
        assert!(
            common::real::get(cp, kind, "", name).is_none(),
            "{kind} {name} deleted"
        );
    }
}

/// The quick-path pages, each run top to bottom as far as a cluster goes: its overlay
/// `ecr-refresh-install/kustomization.yaml`, extracted from the page, is applied with
/// `kubectl apply -k` beside a copy of the manifests; the page's own `kubectl` commands
/// (the keys' Secret, the first-run Job) are accepted as written; the CronJob carries the
/// page's image, region and registry; and the binary, run as the ServiceAccount the overlay
/// installed with the CronJob's settings, writes the Secret.
///
/// Substitutions, and only these: `REGISTRY` (your registry) is `registry.example`; the run
/// is the binary on this machine, not the CronJob's pod, with the AWS endpoints and
/// credentials pointed at the fakes (the harness), its registry the fake ECR's, and its
/// namespaces one of this test's (the page's run selects all).
#[test]
#[ignore = "needs KUBEBUILDER_ASSETS (bash .ci/test)"]
fn the_quick_paths_install_as_written_and_their_run_writes_the_secret() {
    for (path, registry, irsa) in [
        (
            "quick/k3s.md",
            "111122223333.dkr.ecr.eu-west-1.amazonaws.com",
            false,
        ),
        (
            "quick/eks.md",
            "444455556666.dkr.ecr.eu-west-1.amazonaws.com",
            true,
        ),
    ] {
        let page = common::docs::page(path);
        assert!(
            page.lines().count() <= 150,
            "{path}: at most 150 lines, has {}",
            page.lines().count()
        );
        let turn = installs();
        let cp: &ControlPlane = &turn;
        let mut overlay = common::manifests::book_overlays(&page, &["3. Install"])
            .into_iter()
            .next()
            .unwrap_or_else(|| panic!("{path}: an overlay under `## 3. Install`"));
        for (_, body) in &mut overlay.files {
            *body = body.replace("REGISTRY/", "registry.example/");
        }
        let (_dir, install) = common::manifests::write_book_overlay(&overlay);
        let dir = install.to_str().expect("a UTF-8 path");
        assert!(
            page.contains("kubectl apply -k ecr-refresh-install/"),
            "{path}: applies the overlay"
        );
        let rendered = common::manifests::documents(&admin(cp, &["kustomize", dir], ""));
        admin(cp, &["apply", "-k", dir], "");

        // The page's other kubectl commands, as written.
        let mut commands: Vec<String> = Vec::new();
        let lines: Vec<&str> = page.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            if !(line.starts_with("kubectl -n ecr-refresh create secret")
                || line.starts_with("kubectl create job --from=cronjob/ecr-refresh"))
            {
                continue;
            }
            let mut command = String::new();
            for part in &lines[i..] {
                match part.trim().strip_suffix('\\') {
                    Some(p) => {
                        command.push_str(p);
                        command.push(' ');
                    }
                    None => {
                        command.push_str(part.trim());
                        break;
                    }
                }
            }
            commands.push(command);
        }
        assert!(!commands.is_empty(), "{path}: its first run");
        for command in &commands {
            let words: Vec<&str> = command
                .split('#')
                .next()
                .expect("a command")
                .split_whitespace()
                .skip(1)
                .collect();
            admin(cp, &words, "");
        }
        if !irsa {
            assert!(
                common::real::get(cp, "secret", "ecr-refresh", "ecr-refresh-aws").is_some(),
                "{path}: the keys' Secret"
            );
        }
        assert!(
            common::real::get(cp, "job", "ecr-refresh", "ecr-refresh-first").is_some(),
            "{path}: the first run's Job"
        );

        let cronjob =
            common::real::get(cp, "cronjob", "ecr-refresh", "ecr-refresh").expect("the CronJob");
        let container =
            &cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0];
        assert_eq!(
            container["image"],
            format!("registry.example/ecr-refresh:{}", env!("CARGO_PKG_VERSION")),
            "{path}"
        );
        let env = container["env"].to_string();
        assert!(
            env.contains(r#"{"name":"AWS_REGION","value":"eu-west-1"}"#),
            "{path}: {env}"
        );
        assert!(env.contains(registry), "{path}: {env}");
        let account =
            common::real::get(cp, "serviceaccount", "ecr-refresh", "ecr-refresh").expect("SA");
        assert_eq!(
            account["metadata"]["annotations"]
                .get("eks.amazonaws.com/role-arn")
                .is_some(),
            irsa,
            "{path}: the IRSA annotation only on EKS: {account}"
        );

        let namespace = "quick-path";
        common::real::namespaces(cp, &[namespace]);
        let shipped = common::manifests::cronjob_env(&yaml(&rendered));
        let env = common::real::env(&shipped, namespace, &[]);
        let h = common::real::RealHarness::new(cp);
        let run = h.run(&env);
        run.expect_code(0);
        assert_eq!(run.outcome(namespace), "created", "{path}");
        assert!(h.secret(namespace).is_some(), "{path}: the Secret written");
        assert_eq!(
            h.refused(),
            Vec::<String>::new(),
            "{path}: refused requests"
        );
    }
}
