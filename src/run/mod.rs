//! What the two modes share: the rules a Secret is judged by (a refresh writes a Secret they
//! call due; a check reports it), the stop, the namespace driver over the list pages
//! (`cluster::reads` reads them), the ServiceAccounts a namespace's pods are judged against,
//! and the end of a run.

pub mod accounts;
pub mod end;
pub mod fleet;
pub mod pages;
pub mod stop;

use crate::aws::registry::RegistryHost;
use crate::config::Config;
use crate::pull_secret::due::{Policy, Registries};
use crate::pull_secret::install::Install;

/// The configuration's rules for a Secret, as both modes judge it.
pub struct Rules<'a> {
    config: &'a Config,
    /// Every host a write puts in `auths`: a Secret holding exactly these is not due for them.
    written: Vec<RegistryHost>,
    /// AWS_REGION: where the caller's own registry is, when none is configured.
    region: Option<String>,
    /// ECR_REFRESH_INSTALL, or the pod's ServiceAccount.
    install: Option<Install>,
}

impl<'a> Rules<'a> {
    pub fn new(config: &'a Config, region: Option<String>) -> Self {
        let install = config.install.clone().or_else(Install::in_cluster);
        Self::with_install(config, region, install)
    }

    /// The rules of a run whose writes record `install` (a fleet's spoke: its ServiceAccount).
    pub fn with_install(
        config: &'a Config,
        region: Option<String>,
        install: Option<Install>,
    ) -> Self {
        let written = config.written.clone();
        Self {
            config,
            written,
            region,
            install,
        }
    }

    pub fn policy(&self) -> Policy<'_> {
        let registries = if self.config.registries.is_empty() {
            Registries::Own {
                region: self.region.as_deref(),
                dual_stack: self.config.dual_stack,
            }
        } else {
            Registries::Configured(&self.written)
        };
        Policy {
            renew_before: self.config.renew_before,
            registries,
            install: self.install.as_ref(),
        }
    }

    /// The name this install records on the Secrets it writes.
    pub fn install(&self) -> Option<&Install> {
        self.install.as_ref()
    }
}
