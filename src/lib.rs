//! ecr-refresh: refreshes an AWS ECR image-pull Secret in place, in every selected namespace.
//!
//! The layers, bottom up (a module imports only from its own layer or below):
//! - `logging`, `glob`, `report`: shared vocabulary (log setup, globs, outcomes, exit codes);
//! - `aws`: the SDK, ECR tokens, partitions, registry hosts and the registry login;
//! - `cluster`: the API server client, its retry, namespaces, names, Events, and how a run
//!   reads its Secrets (one list, or a GET per namespace); `owned`, beside it: the
//!   one write protocol of a Secret we own;
//! - `pull_secret`: the docker config, the rules and the due decision, the write and the
//!   ServiceAccounts;
//!   `argocd`, beside it: Argo CD's repository credentials, judged and written the same way;
//!   `pods`: what a pod pulls with, whether it is stuck, and whether an eviction recovers it;
//! - `config`, `metrics`, `termination`, `cli`: the run's inputs and outputs (the one
//!   Pushgateway push, the one termination-message fit and its write);
//! - `run`: what the two modes share (stop, namespace driver, the fleet's driver, end);
//! - `evict`: ECR_REFRESH_EVICT_STUCK_PODS, the evictions at the end of a refresh;
//! - `refresh` and `check`: the two modes, each with its report and metrics beside it;
//!   `uninstall`: what undoes the runs' writes.
#![forbid(unsafe_code)]

pub mod argocd;
pub mod aws;
pub mod check;
pub mod cli;
pub mod cluster;
pub mod config;
pub mod evict;
pub mod fleet;
pub mod glob;
pub mod logging;
pub mod metrics;
pub mod owned;
pub mod pods;
pub mod pull_secret;
pub mod refresh;
pub mod report;
pub mod run;
pub mod termination;
pub mod uninstall;
