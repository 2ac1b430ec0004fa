//! The rules a Secret is judged by, as both modes judge it (a refresh writes a Secret they call
//! due; a check reports it): which hosts a write puts in `auths`, when a token is due, and the
//! install a write records. The configuration fills them in (`Config::rules`), once per cluster.

use std::time::Duration;

use super::due::{Policy, Registries};
use super::install::Install;
use crate::aws::registry::RegistryHost;

/// A run's rules for a Secret.
pub struct Rules<'a> {
    /// ECR_REFRESH_REGISTRIES; empty: the caller's own registry, in `region`.
    pub registries: &'a [RegistryHost],
    /// Every host a write puts in `auths` for `registries` (twins included): a Secret holding
    /// exactly these is not due for them.
    pub written: &'a [RegistryHost],
    pub dual_stack: bool,
    pub renew_before: Duration,
    /// AWS_REGION: where the caller's own registry is, when none is configured.
    pub region: Option<String>,
    /// The name the Secrets written record: ECR_REFRESH_INSTALL, the pod's ServiceAccount, or a
    /// fleet's spoke ServiceAccount.
    pub install: Option<Install>,
}

impl Rules<'_> {
    pub fn policy(&self) -> Policy<'_> {
        let registries = if self.registries.is_empty() {
            Registries::Own {
                region: self.region.as_deref(),
                dual_stack: self.dual_stack,
            }
        } else {
            Registries::Configured(self.written)
        };
        Policy {
            renew_before: self.renew_before,
            registries,
            install: self.install.as_ref(),
        }
    }

    /// The name this install records on the Secrets it writes.
    pub fn install(&self) -> Option<&Install> {
        self.install.as_ref()
    }
}
