//! The node tier: a real kubelet and containerd on this machine pull with the Secret
//! ecr-refresh wrote. Needs root and tools, so `#[ignore]`d, naming them; `bash .ci/test`
//! runs it.

// A test's unwrap is its assertion, in the helpers as in the #[test]s (clippy.toml allows
// the latter; the product refuses unwrap_used).
#![allow(clippy::unwrap_used)]

#[path = "../common/mod.rs"]
mod common;

// A kubelet pulls before, after and during a refresh.
mod kubelet_pull;

// ECR_REFRESH_EVICT_STUCK_PODS on a real node, and the kubelet's record of pulls (KEP-2535)
// measured: in place against delete-and-create.
mod evict;

// Self-hosting from ECR: ecr-refresh's own pod pulls its image with the Secret the bootstrap
// wrote, and after a refresh.
mod self_hosting;
