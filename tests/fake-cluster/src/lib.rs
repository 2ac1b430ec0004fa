//! A fake Kubernetes API server and a fake ECR endpoint that behave like the real ones
//! (tests/fake-cluster/REAL-SERVER.md: what the real server answers, with sources), for ecr-refresh's tests.
//!
//! Both serve plain HTTP on 127.0.0.1 from a background thread with its own tokio runtime,
//! so tests drive them with a synchronous API and can run many side by side.

pub mod demo;
pub mod ecr;
pub mod kube;
pub mod roles_anywhere;
mod serve;
pub mod sts;
pub mod token_registry;

pub use ecr::{EcrFault, FakeEcr};
pub use kube::{FakeCluster, FakeClusterBuilder, Fault, Recorded, Resource, yaml_documents};
pub use roles_anywhere::FakeRolesAnywhere;
pub use sts::FakeSts;
pub use token_registry::FakeTokenRegistry;
