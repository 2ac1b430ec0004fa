//! ecr-refresh: refreshes an AWS ECR image-pull Secret in place, in every selected namespace.
#![forbid(unsafe_code)]

pub mod check;
pub mod cli;
pub mod cluster;
pub mod config;
pub mod docker_config;
pub mod due;
pub mod ecr;
pub mod events;
pub mod glob;
pub mod logging;
pub mod login;
pub mod metrics;
pub mod names;
pub mod namespaces;
pub mod partition;
pub mod pull_secret;
pub mod registry;
pub mod report;
pub mod retry;
pub mod run;
pub mod sdk;
pub mod secret;
pub mod service_accounts;
pub mod termination;
