//! The core scenarios of tests/common/lane.rs against the fake API server, or against a real
//! cluster when `ECR_REFRESH_E2E_KUBECONFIG` names a kubeconfig (ECR stays the fake, so no
//! AWS account is needed). tests/real/e2e.rs runs the same scenarios on the real
//! kube-apiserver in CI.

use crate::common;

use common::Harness;
use common::lane;

const VARIABLE: &str = "ECR_REFRESH_E2E_KUBECONFIG";

/// The fake's harness, and the kubeconfig to run against.
fn lane() -> (Harness, String) {
    let h = Harness::new();
    let kubeconfig = std::env::var(VARIABLE).unwrap_or_else(|_| {
        println!("{VARIABLE} is not set: against the fake API server");
        h.kubeconfig().display().to_string()
    });
    (h, kubeconfig)
}

#[test]
fn on_the_lanes_cluster_two_runs_keep_the_uid_and_rotate_the_password() {
    let (h, kubeconfig) = lane();
    lane::two_runs_keep_the_uid_and_rotate_the_password(&h, &kubeconfig);
}

#[test]
fn on_the_lanes_cluster_foreign_entries_survive_and_wrong_types_are_refused() {
    let (h, kubeconfig) = lane();
    lane::foreign_entries_survive_and_wrong_types_are_refused(&h, &kubeconfig);
}

#[test]
fn on_the_lanes_cluster_a_dry_run_stores_nothing() {
    let (h, kubeconfig) = lane();
    lane::a_dry_run_stores_nothing(&h, &kubeconfig);
}

#[test]
fn on_the_lanes_cluster_a_run_with_no_install_name_keeps_the_recorded_install() {
    let (h, kubeconfig) = lane();
    lane::a_run_with_no_install_name_keeps_the_recorded_install(&h, &kubeconfig);
}
