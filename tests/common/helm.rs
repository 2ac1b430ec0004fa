//! Helm, for the tiers that render or install the chart.

use std::path::PathBuf;

/// Helm: `HELM`, else `helm` on PATH. Missing, the test fails and says how to build it.
pub(crate) fn helm_binary() -> PathBuf {
    const BUILD: &str = "build it with `.ci/go-tool helm` and set HELM=\"$(.ci/go-tool helm | tail -1)/helm\" (or put that directory on PATH)";
    if let Some(path) = std::env::var_os("HELM").filter(|v| !v.is_empty()) {
        let path = PathBuf::from(path);
        assert!(
            path.is_file(),
            "HELM={} is not a file: {BUILD}",
            path.display()
        );
        return path;
    }
    std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .map(|dir| dir.join("helm"))
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("Helm not found (HELM unset, no helm on PATH): {BUILD}"))
}
