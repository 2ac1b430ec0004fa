//! The fast tier: the built binary against the fake API server and fake ECR
//! (tests/fake-cluster), and checks of the files that ship. `cargo test --workspace` runs
//! what needs nothing but Rust; a test that needs a tool (kubectl, docker-registry, the
//! Pushgateway) is `#[ignore]`d, naming it, and `bash .ci/test` runs it. tests/README.md
//! lists every module with its backend and tools.

// A test's unwrap is its assertion, in the helpers as in the #[test]s (clippy.toml allows
// the latter; the product refuses unwrap_used).
#![allow(clippy::unwrap_used)]

#[path = "../common/mod.rs"]
mod common;

// ECR_REFRESH_ARGOCD_NAMESPACE: Argo CD's repo-creds Secrets, written in place, and checked.
mod argocd;
// `ecr-refresh check`: its findings, exit codes and request count, read-only.
mod check;
// The command line: --help, --version, a mistyped flag, a run with no region.
mod cli;
// AWS credentials: assume-role with an external id, web identity verified by a fake STS (its
// real-server cases need KUBEBUILDER_ASSETS), refusals that name the source.
mod credentials;
// The demo README's "Try it" starts with, with this build's binary.
mod demo;
// The book's recipes, read as a test reads them; the Fleets page's in their applied shape.
mod docs;
// ECR_REFRESH_RENEW_BEFORE: a Secret is written only when it is due.
mod due;
// ECR_REFRESH_CLUSTERS: one run, many clusters, each written as its own ServiceAccount.
mod fleet;
// The core scenarios through a plain client; against a real cluster when one is named.
mod e2e;
// Warning Events: one per failed namespace, in it, regarding the Secret.
mod events;
// ECR_REFRESH_VERIFY_LOGIN against a real docker-registry.
mod login;
// manifests/ matches the binary: its variables, deadlines and components.
mod manifests;
// The run's metrics, pushed to a real Prometheus Pushgateway.
mod metrics;
// Every AWS partition's registry hosts, checked against the SDK's data.
mod partitions;
// The RBAC of manifests/ grants what a run needs and nothing more, enforced by the fake.
mod rbac;
// The book's reference pages say what the code does (UPDATE_DOCS=1 rewrites them).
mod reference;
// IAM Roles Anywhere: certificates of the test's own PKI exchanged at a fake endpoint that
// verifies; refusals; AWS's own helper accepted by the same verifier (needs aws_signing_helper).
mod roles_anywhere;
// A refresh against the fake: each test one behaviour.
mod refresh;
// Every host a pull can name: dual-stack ECR and ECR Public.
mod registries;
// The release path's own checks fail when they should.
mod release_checks;
// API servers that go away, odd environment values, half-broken Secrets.
mod robustness;
// ECR_REFRESH_SERVICE_ACCOUNTS: our entry in imagePullSecrets, once.
mod service_accounts;
// The termination message, when it can't be written.
mod termination;
// `ecr-refresh uninstall`: one install's Secrets, in its selection, and the ServiceAccount
// entries only where the Secret went.
mod uninstall;
// One version in the manifests, --version, CHANGELOG.md and README.
mod version;
// The readers the book's "works with" page names: OpenShift's global pull secret.
mod works_with;
