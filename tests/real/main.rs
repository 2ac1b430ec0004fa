//! The real tier: the binary, kubectl and Helm against a real kube-apiserver and etcd
//! (tests/control-plane, from `KUBEBUILDER_ASSETS`). Every test here needs a tool, so each
//! is `#[ignore]`d, naming it; `bash .ci/test` runs them. tests/README.md lists every
//! module with its backend and tools, and which control plane each test uses.

// A test's unwrap is its assertion, in the helpers as in the #[test]s (clippy.toml allows
// the latter; the product refuses unwrap_used).
#![allow(clippy::unwrap_used)]

#[path = "../common/mod.rs"]
mod common;
#[path = "../common/real_scale.rs"]
mod real_scale;

// While ecr-refresh rewrites a Secret, no reader finds it missing; with delete-and-create one does.
mod absence;
// The admission attacks refused by the real RBAC and the real CEL policy.
mod admission;
// Argo CD's repo-creds Secret written as the ServiceAccount, and real Helm pulling with it.
mod argocd;
// A fleet from one run: a hub and two spokes, the clusters as Cluster API and Argo CD Secrets.
mod fleet;
// The core scenarios of tests/common/lane.rs, written once, on the real server.
mod e2e;
// Every `kubectl run` in the docs, accepted by the real server under restricted Pod Security;
// README's Helm install and the book's upgrade and uninstall, run as written.
mod docs;
// ECR_REFRESH_EVICT_STUCK_PODS: what it never evicts, on the real server's pods.
mod evict;
// The Helm chart: renders as the kustomize manifests, installs, upgrades, holds and runs.
mod chart;
// The chart's install, upgrades, first run and uninstall, with the job and cronjob controllers.
mod chart_lifecycle;
// `ecr-refresh check` as the ServiceAccount, under the manifests' RBAC.
mod check;
// manifests/ installed as shipped with `kubectl apply -k`, type-checked by the server.
mod manifests;
// The policy follows the ServiceAccount an overlay moves or renames, and the Secret it renames.
mod overlays;
// kube-apiserver and etcd restarted in the middle of a 500-namespace run.
mod restarts;
// The binary as the ServiceAccount, under the manifests' RBAC and policy.
mod runs;
