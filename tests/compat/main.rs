//! Kubernetes 1.30, the oldest the manifests support, in a fleet beside today's: a hub on
//! today's control plane (`KUBEBUILDER_ASSETS`) runs one refresh over a spoke on 1.30
//! (`ECR_REFRESH_KUBE_1_30_ASSETS`) and a spoke on today's. Not part of `cargo test` or
//! `.ci/test` (`test = false` in Cargo.toml): `bash .ci/compat` builds the 1.30 binaries
//! (`.ci/kube-binaries 1.30`) and runs it, and so does the CI workflow's job `compat`.

// A test's unwrap is its assertion, in the helpers as in the #[test]s (clippy.toml allows
// the latter; the product refuses unwrap_used).
#![allow(clippy::unwrap_used)]

#[path = "../common/mod.rs"]
mod common;

use std::path::PathBuf;

use common::fleet::{Hub, SELECTED, Source, Spoke, fleet_summary, start_spokes};
use common::real::{denied_by_policy, message, send};
use control_plane::ControlPlane;
use serde_json::json;

/// The directory of Kubernetes 1.30's kube-apiserver and etcd (with today's kubectl beside
/// them: kubectl 1.30 can't read the JSON the harness pipes to it), as `.ci/compat` makes it.
const ASSETS_1_30: &str = "ECR_REFRESH_KUBE_1_30_ASSETS";

fn assets_1_30() -> PathBuf {
    match std::env::var_os(ASSETS_1_30) {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => panic!(
            "{ASSETS_1_30} is not set: this test needs Kubernetes 1.30's kube-apiserver and etcd; \
             run it with `bash .ci/compat`, which builds them (.ci/kube-binaries 1.30) and sets it"
        ),
    }
}

#[test]
#[ignore = "needs Kubernetes 1.30 binaries (bash .ci/compat)"]
fn a_hub_on_todays_kubernetes_refreshes_a_spoke_on_1_30_beside_one_on_todays_in_one_run() {
    let old = assets_1_30();
    let spokes = start_spokes(&[("spoke-1-30", Some(old)), ("spoke-today", None)]);
    let (oldest, newest) = (&spokes[0], &spokes[1]);
    assert!(
        oldest.cp.version().starts_with("v1.30."),
        "{ASSETS_1_30} holds Kubernetes 1.30: {}",
        oldest.cp.version()
    );
    let hub_cp = ControlPlane::shared();
    assert_eq!(
        hub_cp.version(),
        newest.cp.version(),
        "the hub and the other spoke run today's"
    );
    let both: Vec<&Spoke> = spokes.iter().collect();
    let hub = Hub::new(hub_cp, Source::Capi, &both);

    let run = hub.run(&[]);
    run.expect_code(0);
    let summary = fleet_summary(&run);
    assert_eq!(summary["clusters_reached"], 2, "{summary}");
    assert_eq!(summary["clusters_failed"], 0, "{summary}");
    common::fleet::assert_each_cluster_reported(
        &run,
        &spokes
            .iter()
            .map(|s| hub.cluster_name(s))
            .collect::<Vec<_>>(),
    );
    for spoke in &spokes {
        spoke.assert_refreshed_as_its_service_account();
    }

    // The 1.30 spoke's own policy holds its ServiceAccount, with a token the hub minted.
    let (ns, sa) = common::fleet::SPOKE_ACCOUNT;
    let (status, answer) = send(
        &oldest.cp,
        &oldest.hub_token,
        "POST",
        &format!("/api/v1/namespaces/{ns}/serviceaccounts/{sa}/token"),
        "application/json",
        &json!({ "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
            "spec": { "expirationSeconds": 600 } }),
    );
    assert_eq!(status, 201, "{answer}");
    let token = answer["status"]["token"].as_str().unwrap();
    let (status, answer) = send(
        &oldest.cp,
        token,
        "POST",
        &format!("/api/v1/namespaces/{}/secrets", SELECTED[0]),
        "application/json",
        &common::attacks::pull_secret_body("argocd-repo-creds"),
    );
    assert_eq!(status, 403, "{answer}");
    assert!(
        denied_by_policy(&answer),
        "by the 1.30 spoke's policy: {answer}"
    );
    assert!(
        message(&answer).contains("may only write the Secret named aws-ecr-token"),
        "{answer}"
    );
}
