//! AWS: the SDK's configuration and credential chain, ECR tokens, partitions, registry hosts and the registry login.

pub mod credentials;
pub mod ecr;
pub mod login;
pub mod partition;
pub mod region;
pub mod registry;
pub mod sdk;
