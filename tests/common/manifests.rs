//! The manifests as `kubectl kustomize` renders them, for tests that load their RBAC and
//! admission policy into the fake. Needs `kubectl` on PATH, as .ci/validate-manifests does.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// `kubectl kustomize DIR`.
pub(crate) fn kustomize(dir: &Path) -> String {
    let out = Command::new("kubectl")
        .arg("kustomize")
        .arg(dir)
        .output()
        .unwrap_or_else(|e| panic!("running kubectl kustomize (kubectl must be on PATH): {e}"));
    assert!(
        out.status.success(),
        "kubectl kustomize {}: {}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("kustomize writes UTF-8")
}

/// A variant ("" for manifests/, "namespaced"), as shipped or with the service-accounts
/// component, rendered from `root` (a manifests directory: a copy, see [`copy`]).
pub(crate) fn render_from(root: &Path, variant: &str, with_service_accounts: bool) -> String {
    render_overlay_from(
        root,
        variant,
        "",
        with_service_accounts.then_some("service-accounts"),
    )
}

/// A variant, as shipped or with one component of manifests/components (by its directory).
pub(crate) fn render_from_with(root: &Path, variant: &str, component: Option<&str>) -> String {
    render_overlay_from(root, variant, "", component)
}

/// A variant rendered through an overlay of the user's: `fields` are its kustomization's
/// own lines (`namespace: platform`, `namePrefix: prod-`), with or without the
/// service-accounts component.
pub(crate) fn render_overlay(variant: &str, fields: &str, with_service_accounts: bool) -> String {
    let copy = copy();
    render_overlay_from(
        &copy.path().join("manifests"),
        variant,
        fields,
        with_service_accounts.then_some("service-accounts"),
    )
}

fn render_overlay_from(
    root: &Path,
    variant: &str,
    fields: &str,
    component: Option<&str>,
) -> String {
    let dir = kustomization_with(root, variant, fields, component);
    let rendered = kustomize(&dir);
    if dir != root.join(variant) {
        std::fs::remove_dir_all(&dir).expect("removing the overlay");
    }
    rendered
}

/// The directory to kustomize (or `kubectl apply -k`) for a variant ("" for manifests/,
/// "namespaced") of the manifests directory `root` (a copy, see [`copy`]): the variant's
/// own, or with the service-accounts component an overlay written next to `root`.
pub(crate) fn kustomization(root: &Path, variant: &str, with_service_accounts: bool) -> PathBuf {
    kustomization_with(
        root,
        variant,
        "",
        with_service_accounts.then_some("service-accounts"),
    )
}

/// The same with an overlay's own lines (`fields`) and one component of manifests/components.
pub(crate) fn kustomization_with(
    root: &Path,
    variant: &str,
    fields: &str,
    component: Option<&str>,
) -> PathBuf {
    let dir = root.join(variant);
    if component.is_none() && fields.is_empty() {
        return dir;
    }
    // An overlay next to the manifests directory: kustomize takes relative paths only,
    // and no overlay inside what it includes.
    let overlay = root
        .parent()
        .expect("manifests sit in a directory")
        .join(format!("overlay-{}", variant.replace('/', "-")));
    std::fs::create_dir_all(&overlay).expect("an overlay directory");
    let manifests = root
        .file_name()
        .and_then(|n| n.to_str())
        .expect("a directory name");
    let components = component
        .map(|c| format!("components: [\"../{manifests}/components/{c}\"]\n"))
        .unwrap_or_default();
    std::fs::write(
        overlay.join("kustomization.yaml"),
        format!(
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n{fields}\n\
             resources: [\"../{manifests}/{variant}\"]\n{components}"
        ),
    )
    .expect("writing the overlay");
    overlay
}

/// The repository's manifests rendered with one component (or none), from a copy.
pub(crate) fn render_component(variant: &str, component: Option<&str>) -> String {
    let copy = copy();
    render_from_with(&copy.path().join("manifests"), variant, component)
}

/// A variant ("" for manifests/, "namespaced") with components (paths under manifests/, such
/// as "components/monitoring"), rendered from a copy of the repository's manifests.
pub(crate) fn render_with_components(variant: &str, components: &[&str]) -> String {
    let copy = copy();
    let root = copy.path().join("manifests");
    if components.is_empty() {
        return kustomize(&root.join(variant));
    }
    let overlay = copy.path().join("overlay");
    std::fs::create_dir_all(&overlay).expect("an overlay directory");
    let components: Vec<String> = components
        .iter()
        .map(|c| format!("\"../manifests/{c}\""))
        .collect();
    std::fs::write(
        overlay.join("kustomization.yaml"),
        format!(
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n\
             resources: [\"../manifests/{variant}\"]\ncomponents: [{}]\n",
            components.join(", ")
        ),
    )
    .expect("writing the overlay");
    kustomize(&overlay)
}

/// The repository's manifests rendered (from a copy: nothing is written into the repository).
pub(crate) fn render(variant: &str, with_service_accounts: bool) -> String {
    let copy = copy();
    render_from(
        &copy.path().join("manifests"),
        variant,
        with_service_accounts,
    )
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("a directory");
    for entry in std::fs::read_dir(from).expect("a readable directory") {
        let path = entry.expect("a directory entry").path();
        let target = to.join(path.file_name().expect("a file name"));
        if path.is_dir() {
            copy_dir(&path, &target);
        } else {
            std::fs::copy(&path, &target).expect("copying a manifest");
        }
    }
}

/// A temporary directory holding a copy of manifests/ as `manifests`.
pub(crate) fn copy() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("a temporary directory");
    copy_dir(&repo().join("manifests"), &dir.path().join("manifests"));
    dir
}

/// The rendered documents.
pub(crate) fn documents(yaml: &str) -> Vec<Value> {
    fake_cluster::yaml_documents(yaml).unwrap_or_else(|e| panic!("{e}"))
}

/// Documents back into one YAML stream (JSON is YAML).
pub(crate) fn yaml(docs: &[Value]) -> String {
    docs.iter()
        .map(|d| serde_json::to_string(d).expect("a JSON value serialises"))
        .collect::<Vec<_>>()
        .join("\n---\n")
}

/// The variables a run takes from the rendered CronJob: the Secret's name, the namespaces,
/// the ServiceAccounts and Argo CD's namespace and type (the harness sets the log format,
/// registries and termination log).
pub(crate) fn cronjob_env(rendered: &str) -> Vec<(String, String)> {
    let cronjob = documents(rendered)
        .into_iter()
        .find(|d| d["kind"] == "CronJob")
        .expect("a CronJob");
    cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["env"]
        .as_array()
        .expect("env")
        .iter()
        .filter_map(|e| {
            Some((
                e["name"].as_str()?.to_owned(),
                e["value"].as_str()?.to_owned(),
            ))
        })
        .filter(|(name, _)| {
            [
                "ECR_REFRESH_SECRET_NAME",
                "ECR_REFRESH_NAMESPACES",
                "ECR_REFRESH_SERVICE_ACCOUNTS",
                "ECR_REFRESH_ARGOCD_NAMESPACE",
                "ECR_REFRESH_ARGOCD_TYPE",
            ]
            .contains(&name.as_str())
        })
        .collect()
}

/// `cronjob_env` as the harness takes it.
pub(crate) fn as_env(env: &[(String, String)]) -> Vec<(&str, &str)> {
    env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect()
}

/// An overlay a page of the book shows: the files captioned `` `ecr-refresh-install/FILE` ``,
/// each followed by its code block, under one heading. A caption of `kustomization.yaml`
/// starts a new overlay; `name` is its heading, with the caption's words after the file
/// name, if any (`Into another namespace, a new namespace`).
#[derive(Debug)]
pub(crate) struct BookOverlay {
    pub name: String,
    pub files: Vec<(String, String)>,
}

/// Every overlay of a page whose heading is one of `headings` or under one (`#`, `##` and
/// `###`).
pub(crate) fn book_overlays(page: &str, headings: &[&str]) -> Vec<BookOverlay> {
    let mut overlays: Vec<BookOverlay> = Vec::new();
    let (mut section, mut heading, mut wanted) = (String::new(), String::new(), false);
    let mut lines = page.lines().peekable();
    while let Some(line) = lines.next() {
        if let Some(title) = line.strip_prefix("## ").or_else(|| line.strip_prefix("# ")) {
            section = title.to_owned();
            heading = title.to_owned();
            wanted = headings.contains(&title);
            continue;
        }
        if let Some(title) = line.strip_prefix("### ") {
            heading = title.to_owned();
            wanted = headings.contains(&section.as_str()) || headings.contains(&title);
            continue;
        }
        let Some(caption) = line.strip_prefix("`ecr-refresh-install/") else {
            continue;
        };
        if !wanted || !line.ends_with(':') {
            continue;
        }
        let (file, rest) = caption
            .split_once('`')
            .unwrap_or_else(|| panic!("a caption with its closing backquote: {line}"));
        assert_eq!(lines.next(), Some(""), "a blank line after {line}");
        assert_eq!(lines.next(), Some("```yaml"), "a YAML block after {line}");
        let mut body = String::new();
        for line in lines.by_ref() {
            if line == "```" {
                break;
            }
            body.push_str(line);
            body.push('\n');
        }
        if file == "kustomization.yaml" {
            let words = rest.trim_start_matches(',').trim_end_matches(':').trim();
            let name = if words.is_empty() {
                heading.clone()
            } else {
                format!("{heading}, {words}")
            };
            overlays.push(BookOverlay {
                name,
                files: Vec::new(),
            });
        }
        overlays
            .last_mut()
            .unwrap_or_else(|| panic!("{line}: a file before its kustomization.yaml"))
            .files
            .push((file.to_owned(), body));
    }
    overlays
}

/// A book overlay written as the book says: `ecr-refresh-install/` beside a copy of the
/// repository's manifests as `ecr-refresh/manifests`. Returns the temporary directory (keep
/// it while you use the overlay) and the overlay's directory.
pub(crate) fn write_book_overlay(overlay: &BookOverlay) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    copy_dir(
        &repo().join("manifests"),
        &dir.path().join("ecr-refresh/manifests"),
    );
    let install = dir.path().join("ecr-refresh-install");
    std::fs::create_dir_all(&install).expect("the overlay's directory");
    for (file, body) in &overlay.files {
        let path = install.join(file);
        std::fs::create_dir_all(path.parent().expect("a file in the overlay"))
            .expect("the file's directory");
        std::fs::write(path, body).expect("writing the overlay");
    }
    (dir, install)
}
