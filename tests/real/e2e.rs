//! The core scenarios of tests/common/lane.rs, written once for every backend, on the real
//! kube-apiserver and etcd, as the admin (tests/fake/e2e.rs runs them on the fake).

use crate::common;

use common::{Binary, lane};
use control_plane::ControlPlane;

fn admin(cp: &ControlPlane) -> (Binary, String) {
    let kubeconfig = cp.admin_kubeconfig().to_owned();
    let path = kubeconfig.display().to_string();
    (Binary::new(|_| kubeconfig), path)
}

#[test]
#[ignore = "needs KUBEBUILDER_ASSETS (bash .ci/test)"]
fn on_the_real_server_two_runs_keep_the_uid_and_rotate_the_password() {
    let (binary, kubeconfig) = admin(ControlPlane::shared());
    lane::two_runs_keep_the_uid_and_rotate_the_password(&binary, &kubeconfig);
}

#[test]
#[ignore = "needs KUBEBUILDER_ASSETS (bash .ci/test)"]
fn on_the_real_server_foreign_entries_survive_and_wrong_types_are_refused() {
    let (binary, kubeconfig) = admin(ControlPlane::shared());
    lane::foreign_entries_survive_and_wrong_types_are_refused(&binary, &kubeconfig);
}

#[test]
#[ignore = "needs KUBEBUILDER_ASSETS (bash .ci/test)"]
fn on_the_real_server_a_dry_run_stores_nothing() {
    let (binary, kubeconfig) = admin(ControlPlane::shared());
    lane::a_dry_run_stores_nothing(&binary, &kubeconfig);
}

#[test]
#[ignore = "needs KUBEBUILDER_ASSETS (bash .ci/test)"]
fn on_the_real_server_a_run_with_no_install_name_keeps_the_recorded_install() {
    let (binary, kubeconfig) = admin(ControlPlane::shared());
    lane::a_run_with_no_install_name_keeps_the_recorded_install(&binary, &kubeconfig);
}
