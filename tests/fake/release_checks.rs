//! The release path's own checks fail when they should.
//!
//! `.ci/check-base-images` keeps the Containerfile's base images (ARG defaults, which
//! Dependabot can't read) equal to `.github/base-images/Containerfile` (literal FROM
//! lines, which it updates). `.ci/check-crate-list` decides whether a CycloneDX SBOM
//! (`.ci/sbom`) or a binary's cargo-auditable data (`.ci/image`) lists ecr-refresh's
//! crates. Each is run here as CI runs it, on copies and on made-up documents: .ci/run
//! only ever shows them passing on the real files.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{Value, json};

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

fn run(program: &str, args: &[&str]) -> Output {
    Command::new(repo().join(program))
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("running {program} (needs bash and python3): {e}"))
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Copies of the Containerfile and of the Dependabot file in a temporary directory.
struct BaseImages {
    dir: tempfile::TempDir,
}

impl BaseImages {
    fn copied() -> Self {
        let dir = tempfile::tempdir().expect("a temporary directory");
        fs::copy(
            repo().join("Containerfile"),
            dir.path().join("Containerfile"),
        )
        .expect("copying Containerfile");
        fs::create_dir(dir.path().join("dependabot")).expect("a directory");
        fs::copy(
            repo().join(".github/base-images/Containerfile"),
            dir.path().join("dependabot/Containerfile"),
        )
        .expect("copying .github/base-images/Containerfile");
        Self { dir }
    }

    fn containerfile(&self) -> PathBuf {
        self.dir.path().join("Containerfile")
    }

    fn dependabot_file(&self) -> PathBuf {
        self.dir.path().join("dependabot/Containerfile")
    }

    /// Replaces `from` with `to` in the Dependabot file, as its pull request would.
    fn edit_dependabot_file(&self, from: &str, to: &str) {
        let text = read(&self.dependabot_file());
        assert!(text.contains(from), "the Dependabot file has no {from:?}");
        fs::write(self.dependabot_file(), text.replacen(from, to, 1)).expect("writing");
    }

    fn check(&self, extra: &[&str]) -> Output {
        let containerfile = self.containerfile();
        let dependabot = self.dependabot_file();
        let mut args = extra.to_vec();
        args.extend([
            "--containerfile",
            containerfile.to_str().expect("a UTF-8 path"),
            "--base-images",
            dependabot.to_str().expect("a UTF-8 path"),
        ]);
        run(".ci/check-base-images", &args)
    }
}

/// The `ARG NAME=` default of a Containerfile.
fn arg_default(containerfile: &str, name: &str) -> String {
    let prefix = format!("ARG {name}=");
    containerfile
        .lines()
        .find_map(|line| line.strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("no {prefix} line"))
        .to_owned()
}

/// The builder's digest, as the Containerfile pins it (64 hex digits).
fn build_digest() -> String {
    let reference = arg_default(&read(&repo().join("Containerfile")), "BUILD_IMAGE");
    let (_, digest) = reference
        .split_once("@sha256:")
        .expect("BUILD_IMAGE pinned by digest");
    digest.to_owned()
}

const NEW_DIGEST: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

#[test]
fn the_containerfile_pins_the_base_images_dependabot_updates() {
    let output = run(".ci/check-base-images", &[]);
    assert!(output.status.success(), "{}", stderr(&output));
}

#[test]
fn a_builder_digest_changed_only_in_the_dependabot_file_fails_naming_the_image_and_both_references()
{
    let files = BaseImages::copied();
    files.edit_dependabot_file(&build_digest(), NEW_DIGEST);

    let output = files.check(&[]);

    assert!(
        !output.status.success(),
        "the check passed with different digests"
    );
    let err = stderr(&output);
    assert!(err.contains("BUILD_IMAGE differs"), "{err}");
    assert!(
        err.contains(&build_digest()),
        "the Containerfile's digest is not named: {err}"
    );
    assert!(
        err.contains(NEW_DIGEST),
        "the Dependabot file's digest is not named: {err}"
    );
    assert!(err.contains("--write"), "the fix is not named: {err}");
}

#[test]
fn a_runtime_image_without_a_digest_fails_the_check() {
    let files = BaseImages::copied();
    let runtime = arg_default(&read(&files.containerfile()), "RUNTIME_IMAGE");
    let (unpinned, _) = runtime
        .split_once('@')
        .expect("RUNTIME_IMAGE pinned by digest");
    files.edit_dependabot_file(&runtime, unpinned);

    let output = files.check(&[]);

    assert!(
        !output.status.success(),
        "the check passed with an unpinned runtime image"
    );
    let err = stderr(&output);
    assert!(
        err.contains("RUNTIME_IMAGE") && err.contains("not pinned by digest"),
        "{err}"
    );
}

#[test]
fn write_copies_the_dependabot_references_into_the_containerfile_and_nothing_else() {
    let files = BaseImages::copied();
    let before = read(&files.containerfile());
    files.edit_dependabot_file(&build_digest(), NEW_DIGEST);

    let output = files.check(&["--write"]);

    assert!(output.status.success(), "{}", stderr(&output));
    let after = read(&files.containerfile());
    assert_eq!(
        arg_default(&after, "BUILD_IMAGE"),
        arg_default(&before, "BUILD_IMAGE").replace(&build_digest(), NEW_DIGEST)
    );
    assert_eq!(
        after.replace(NEW_DIGEST, &build_digest()),
        before,
        "--write changed more than the builder's digest"
    );
    assert!(
        files.check(&[]).status.success(),
        "the check fails after --write"
    );
}

/// Cargo.lock's version of a crate (the one version it pins).
fn locked(name: &str) -> String {
    let lock = read(&repo().join("Cargo.lock"));
    let wanted = format!("name = \"{name}\"");
    let mut lines = lock.lines();
    while let Some(line) = lines.next() {
        if line == wanted {
            let version = lines.next().expect("a version line after the name");
            return version
                .strip_prefix("version = \"")
                .and_then(|v| v.strip_suffix('"'))
                .unwrap_or_else(|| panic!("unexpected line after {wanted}: {version}"))
                .to_owned();
        }
    }
    panic!("Cargo.lock has no {name}");
}

fn cyclonedx(root: &str, crates: &[(&str, &str)]) -> Value {
    json!({
        "bomFormat": "CycloneDX",
        "specVersion": "1.5",
        "metadata": { "component": { "type": "application", "name": root, "version": "0.1.0" } },
        "components": crates
            .iter()
            .map(|(name, version)| json!({ "type": "library", "name": name, "version": version }))
            .collect::<Vec<_>>(),
    })
}

fn audit(root: &str, crates: &[(&str, &str)]) -> Value {
    let mut packages =
        vec![json!({ "name": root, "version": "0.1.0", "source": "local", "root": true })];
    packages.extend(
        crates.iter().map(
            |(name, version)| json!({ "name": name, "version": version, "source": "crates.io" }),
        ),
    );
    json!({ "packages": packages })
}

fn check_crate_list(kind: &str, document: &Value) -> Output {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let file = dir.path().join(format!("{kind}.json"));
    fs::write(&file, document.to_string()).expect("writing the document");
    run(
        ".ci/check-crate-list",
        &[kind, file.to_str().expect("a UTF-8 path")],
    )
}

#[test]
fn an_sbom_listing_kube_and_aws_sdk_ecr_at_the_locked_versions_passes() {
    let (kube, ecr) = (locked("kube"), locked("aws-sdk-ecr"));
    let sbom = cyclonedx(
        "ecr-refresh",
        &[("kube", &kube), ("aws-sdk-ecr", &ecr), ("tokio", "1.0.0")],
    );

    let output = check_crate_list("cyclonedx", &sbom);

    assert!(output.status.success(), "{}", stderr(&output));
}

#[test]
fn an_sbom_without_aws_sdk_ecr_fails_naming_it() {
    let sbom = cyclonedx("ecr-refresh", &[("kube", &locked("kube"))]);

    let output = check_crate_list("cyclonedx", &sbom);

    assert!(
        !output.status.success(),
        "an SBOM without aws-sdk-ecr passed"
    );
    assert!(
        stderr(&output).contains("aws-sdk-ecr is not listed"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn an_sbom_listing_kube_at_another_version_fails_naming_both_versions() {
    let kube = locked("kube");
    let sbom = cyclonedx(
        "ecr-refresh",
        &[("kube", "0.0.1"), ("aws-sdk-ecr", &locked("aws-sdk-ecr"))],
    );

    let output = check_crate_list("cyclonedx", &sbom);

    assert!(!output.status.success(), "an SBOM with another kube passed");
    let err = stderr(&output);
    assert!(
        err.contains("kube is listed at 0.0.1") && err.contains(&kube),
        "{err}"
    );
}

#[test]
fn an_sbom_of_another_package_fails() {
    let sbom = cyclonedx(
        "fake-cluster",
        &[
            ("kube", &locked("kube")),
            ("aws-sdk-ecr", &locked("aws-sdk-ecr")),
        ],
    );

    let output = check_crate_list("cyclonedx", &sbom);

    assert!(!output.status.success(), "another package's SBOM passed");
    assert!(
        stderr(&output).contains("'fake-cluster', not ecr-refresh"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn audit_data_listing_both_crates_passes_and_without_kube_fails() {
    let (kube, ecr) = (locked("kube"), locked("aws-sdk-ecr"));
    let both = check_crate_list(
        "audit",
        &audit("ecr-refresh", &[("kube", &kube), ("aws-sdk-ecr", &ecr)]),
    );
    assert!(both.status.success(), "{}", stderr(&both));

    let without = check_crate_list("audit", &audit("ecr-refresh", &[("aws-sdk-ecr", &ecr)]));
    assert!(!without.status.success(), "audit data without kube passed");
    assert!(
        stderr(&without).contains("kube is not listed"),
        "{}",
        stderr(&without)
    );
}

#[test]
fn a_file_that_is_no_audit_data_fails() {
    let output = check_crate_list("audit", &json!({ "bomFormat": "CycloneDX" }));

    assert!(
        !output.status.success(),
        "a document without packages passed"
    );
    assert!(
        stderr(&output).contains("no 'packages' list"),
        "{}",
        stderr(&output)
    );
}
