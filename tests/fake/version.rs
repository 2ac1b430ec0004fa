//! One version everywhere: the image tag the manifests render (`kubectl kustomize`), what
//! `--version` prints, CHANGELOG.md's top section and README's image references are all
//! Cargo.toml's version. A bump that misses one fails here, before anyone pins an image
//! that cannot run the manifests shipped with it.

use crate::common;

use std::path::Path;
use std::process::Command;

const VERSION: &str = env!("CARGO_PKG_VERSION");
const IMAGE: &str = "ghcr.io/ecr-refresh/ecr-refresh";

fn read(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
#[ignore = "needs kubectl (bash .ci/test)"]
fn every_variant_of_the_manifests_runs_the_image_of_this_version() {
    for variant in ["", "namespaced"] {
        for with_service_accounts in [false, true] {
            let rendered = common::manifests::render(variant, with_service_accounts);
            let images: Vec<&str> = rendered
                .lines()
                .filter_map(|l| l.trim_start().strip_prefix("image: "))
                .collect();
            assert!(!images.is_empty(), "no image in manifests/{variant}");
            for image in images {
                assert_eq!(
                    image,
                    format!("{IMAGE}:{VERSION}"),
                    "manifests/{variant} (service accounts: {with_service_accounts})"
                );
            }
        }
    }
}

#[test]
fn the_binary_reports_the_crate_version() {
    let out = Command::new(env!("CARGO_BIN_EXE_ecr-refresh"))
        .arg("--version")
        .env_remove("ECR_REFRESH_VERSION")
        .output()
        .expect("run ecr-refresh --version");
    let printed = String::from_utf8_lossy(&out.stdout);
    // A release build (build.rs) sets ECR_REFRESH_VERSION from the tag, checked against this
    // same version by .ci/release-version.
    let expected = option_env!("ECR_REFRESH_VERSION").unwrap_or(VERSION);
    assert_eq!(expected, VERSION, "the build's ECR_REFRESH_VERSION");
    assert!(
        printed.starts_with(&format!("ecr-refresh {VERSION}\n"))
            || printed.starts_with(&format!("ecr-refresh {VERSION} (commit ")),
        "{printed}"
    );
}

#[test]
fn the_changelogs_top_section_is_this_version() {
    let changelog = read("CHANGELOG.md");
    let top = changelog
        .lines()
        .find(|l| l.starts_with("## "))
        .expect("CHANGELOG.md has a section");
    // `## [X.Y.Z] - unreleased` while work goes on, `## [X.Y.Z] - YYYY-MM-DD` once released
    // (.ci/release-version refuses a tag without the date).
    let version = top
        .strip_prefix("## [")
        .and_then(|rest| rest.split_once(']'))
        .map(|(version, _)| version);
    assert_eq!(version, Some(VERSION), "CHANGELOG.md's top section: {top}");
}

#[test]
fn the_docs_name_the_image_and_tag_of_this_version() {
    let mut seen = 0;
    for (file, doc) in common::docs::texts() {
        for (at, _) in doc.match_indices("ecr-refresh:") {
            let before = &doc[..at];
            // Image references only: `ghcr.io/ecr-refresh/ecr-refresh:TAG`, `REGISTRY/ecr-refresh:TAG`.
            if !(before.ends_with('/')) {
                continue;
            }
            let tag: String = doc[at + "ecr-refresh:".len()..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '.')
                .collect();
            if tag.starts_with(|c: char| c.is_ascii_digit()) {
                assert_eq!(
                    tag,
                    VERSION,
                    "{file}: ...{}",
                    &doc[at.saturating_sub(40)..at + 20]
                );
                seen += 1;
            }
        }
        for (at, _) in doc.match_indices("refs/tags/v") {
            let tag: String = doc[at + "refs/tags/v".len()..]
                .chars()
                .take_while(|c| c.is_ascii_digit() || *c == '.')
                .collect();
            // `refs/tags/v` alone is the regexp form, for any release.
            if !tag.is_empty() {
                assert_eq!(tag, VERSION, "{file}'s cosign identity");
            }
        }
    }
    assert!(seen > 0, "the docs name no versioned image");
}
