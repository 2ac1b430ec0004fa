//! Stamps the version `ecr-refresh --version` prints.
//!
//! `ECR_REFRESH_VERSION`: `RELEASE_VERSION` when set (a release build), else the crate's.
//! `ECR_REFRESH_COMMIT`: `GIT_COMMIT` when set (the image build: .git is not in its
//! context), else the checkout's HEAD, else empty.

use std::path::Path;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=RELEASE_VERSION");
    println!("cargo:rerun-if-env-changed=GIT_COMMIT");

    let version = non_empty_env("RELEASE_VERSION")
        .or_else(|| non_empty_env("CARGO_PKG_VERSION"))
        .unwrap_or_default();
    println!("cargo:rustc-env=ECR_REFRESH_VERSION={version}");

    let commit = non_empty_env("GIT_COMMIT")
        .or_else(head_commit)
        .unwrap_or_default();
    println!("cargo:rustc-env=ECR_REFRESH_COMMIT={commit}");
}

fn non_empty_env(name: &str) -> Option<String> {
    std::env::var(name)
        .ok()
        .map(|v| v.trim().to_owned())
        .filter(|v| !v.is_empty())
}

/// `git rev-parse --short=12 HEAD`, rerun when HEAD or its branch moves. In a worktree
/// `.git` is a file naming the real git dir, so git says where those files live.
fn head_commit() -> Option<String> {
    if !Path::new(".git").exists() {
        return None;
    }
    let branch = git(&["symbolic-ref", "-q", "HEAD"]);
    for file in ["HEAD", "packed-refs"].into_iter().chain(branch.as_deref()) {
        // A missing path would rerun this script on every build.
        if let Some(path) =
            git(&["rev-parse", "--git-path", file]).filter(|p| Path::new(p).exists())
        {
            println!("cargo:rerun-if-changed={path}");
        }
    }
    git(&["rev-parse", "--short=12", "HEAD"])
}

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    let text = text.trim();
    (out.status.success() && !text.is_empty()).then(|| text.to_owned())
}
