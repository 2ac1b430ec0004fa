//! A fake Kubernetes API server and a fake ECR endpoint that behave like the real ones
//! (tests/fake-cluster/REAL-SERVER.md: what the real server answers, with sources), for ecr-refresh's tests.
//!
//! Both serve plain HTTP on 127.0.0.1 from a background thread with its own tokio runtime,
//! so tests drive them with a synchronous API and can run many side by side.
//!
//! What only a fake can do is why it exists: faults on demand, 10,000 namespaces in a test,
//! every request recorded, and the demo. Beside the real control plane of tests/real/ it
//! keeps only what a fast-tier test needs:
//! - RBAC from Role YAML (kube/rbac.rs): the forbidden-namespace scenarios of
//!   tests/fake/ (events, check, refresh, rbac) need a 403 in one namespace and not the next;
//! - kubectl's protobuf (kube/protobuf.rs): `kubectl create namespace` and `create secret`
//!   send nothing else, and the demo and the kubectl tests drive the fake with kubectl;
//! - Go's error texts (kube/gojson.rs, kube/status.rs): the binary logs them and kubectl
//!   prints them, and the fast tier asserts what an operator reads.
//!
//! It evaluates no admission policy: the policy's CEL is tested on the real server only
//! (tests/real/admission.rs, tests/real/overlays.rs).

pub mod demo;
pub mod ecr;
pub mod kube;
pub mod roles_anywhere;
mod serve;
pub mod sts;
pub mod token_registry;

pub use ecr::{EcrFault, FakeEcr};
pub use kube::{
    FakeCluster, FakeClusterBuilder, Fault, Recorded, Resource, TokenRequested, yaml_documents,
};
pub use roles_anywhere::FakeRolesAnywhere;
pub use sts::FakeSts;
pub use token_registry::FakeTokenRegistry;
