//! Configuration: read once from the environment into typed values.
//!
//! Every value is parsed here, so the rest of the code cannot hold an invalid one: each by its
//! own entry in [`VARIABLES`] (`variables.rs`, which also holds its default and documentation).
//! A variable whose value is one field of [`Config`] is that entry and that field: its parse
//! writes the field. Variables that go together (a role and its external id, the fleet's
//! source and its namespaces) are parsed into slots of the `Builder`, and `Builder::finish`
//! puts them together, as it makes every decision that reads more than one variable. A bad
//! value, or an `ECR_REFRESH_*` variable we do not know, is an error naming the variable, the
//! value and what is accepted; the run then sends no request.

mod environment;
pub mod pushgateway;
mod roles_anywhere;
mod values;
pub mod variables;

use std::collections::HashMap;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use crate::argocd::{self, ArgoCd, RepoType};
use crate::aws::credentials::roles_anywhere::{Identity, IdentityError};
use crate::aws::credentials::{AssumeRole, ExternalId, RoleArn, RolesAnywhere, SessionName};
use crate::aws::registry::{RegistryHost, with_twins};
use crate::cluster::names::{NamespaceName, ProjectName, SecretName, ServiceAccountName};
use crate::fleet::{Auth, Clusters, Source, SpokeAccount};
use crate::glob::Glob;
use crate::logging::LogFormat;
use crate::pull_secret::install::Install;
use crate::pull_secret::rules::Rules;

use crate::cluster::selection::{Include, LabelSelector, Selection};
use pushgateway::{GroupingLabels, Pushgateway, PushgatewayUrl};
pub use variables::{VARIABLES, Variable};

/// Every variable of ours starts with this.
pub const PREFIX: &str = "ECR_REFRESH_";

/// Where Kubernetes reads a container's termination message from (terminationMessagePath's
/// default), when ECR_REFRESH_TERMINATION_LOG is not set.
pub const DEFAULT_TERMINATION_LOG: &str = "/dev/termination-log";

/// The pull Secret's name when ECR_REFRESH_SECRET_NAME is not set: its entry's default, and
/// `SecretName::default()`, written once.
const DEFAULT_SECRET_NAME: &str = "aws-ecr-token";

/// A configuration error: the variable, the value given and what is accepted.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ConfigError {
    #[error("{variable}={value:?} is invalid: {accepted}")]
    Invalid {
        variable: &'static str,
        value: String,
        accepted: String,
    },
    #[error(
        "{variable} is not a variable ecr-refresh knows{suggestion}; known variables: {known}",
        suggestion = .suggestion.as_ref().map(|s| format!(" (did you mean {s}?)")).unwrap_or_default(),
        known = variables::names()
    )]
    Unknown {
        variable: String,
        suggestion: Option<&'static str>,
    },
    #[error(
        "{variable} is not valid UTF-8 text (its value is not shown: it may hold a credential); set it to text"
    )]
    NotUtf8 { variable: String },
    /// Some of a group of variables that go together are set, not all.
    #[error("{given} is set, but not {missing}; set all of them, or none")]
    Incomplete {
        given: &'static str,
        missing: String,
    },
    /// The Roles Anywhere certificate or key can't be used (read by a refresh before anything
    /// is sent: [`Config::identity`]).
    #[error(transparent)]
    Certificate(IdentityError),
}

/// What a run does: refresh the Secrets, or only check them (ECR_REFRESH_MODE, or the `check`
/// argument), writing nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    #[default]
    Refresh,
    Check,
}

impl FromStr for Mode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        // Any letter case, as the booleans take.
        match s.to_ascii_lowercase().as_str() {
            "refresh" => Ok(Self::Refresh),
            "check" => Ok(Self::Check),
            _ => Err("must be 'refresh' or 'check' (any letter case)".into()),
        }
    }
}

/// The run's whole configuration, from [`Config::from_vars`] or [`Config::from_env`].
///
/// Its `Default` is only where parsing starts, not a configuration to run with: every variable
/// whose default is a value is parsed over it before the values set (`Builder::parse`), so a
/// field's placeholder (a zero timeout, say) is never observed.
#[derive(Debug, Clone, Default)]
pub struct Config {
    pub mode: Mode,
    pub secret_name: SecretName,
    pub selection: Selection,
    /// Empty: the caller's own registry in the AWS region of the default chain.
    pub registries: Vec<RegistryHost>,
    /// Write each registry's dual-stack host too, from the same token.
    pub dual_stack: bool,
    /// The hosts a write puts in `auths` for `registries`: each followed by its dual-stack
    /// twin with `dual_stack` (empty with no registries: the caller's own is known from ECR).
    pub written: Vec<RegistryHost>,
    pub dry_run: bool,
    pub concurrency: usize,
    pub timeout: Duration,
    pub log_format: LogFormat,
    pub service_accounts: Vec<ServiceAccountName>,
    pub verify_login: bool,
    /// ECR_REFRESH_TERMINATION_LOG; None: the kubelet's DEFAULT_TERMINATION_LOG, in a pod only.
    pub termination_log: Option<PathBuf>,
    /// Where the run's metrics are pushed; None pushes nothing.
    pub pushgateway: Option<Pushgateway>,
    /// Whether a failed namespace gets a Warning Event.
    pub events: bool,
    /// A Secret whose token has less than this left is due; one that is not due is not written.
    pub renew_before: Duration,
    /// A role assumed over the base credentials; None: the base credentials call ECR.
    pub assume_role: Option<AssumeRole>,
    /// IAM Roles Anywhere as the base credentials; None: the SDK's default sources.
    pub roles_anywhere: Option<RolesAnywhere>,
    /// ECR_REFRESH_INSTALL: the name this install records on the Secrets it writes; None: the
    /// pod's ServiceAccount, found at run time (`Install::in_cluster`).
    pub install: Option<Install>,
    /// Argo CD's repository credentials (ECR_REFRESH_ARGOCD_*); None: off.
    pub argocd: Option<ArgoCd>,
    /// ECR_REFRESH_EVICT_STUCK_PODS and ECR_REFRESH_EVICT_LIMIT: None, no pod is evicted;
    /// Some(limit), at most `limit` stuck pods are evicted at the end of a refresh.
    pub evict_stuck_pods: Option<usize>,
    /// ECR_REFRESH_CLUSTERS_*: the fleet; None: only the cluster the run runs in.
    pub clusters: Option<Clusters>,
}

/// What the variables say, each parsed by its own entry in [`VARIABLES`]: straight into its
/// field of `config`, or into a slot here when it goes together with others;
/// [`Builder::finish`] then puts those together into the configuration.
#[derive(Debug, Default)]
pub(super) struct Builder {
    given: Given,
    config: Config,
    evict_stuck_pods: Option<bool>,
    evict_limit: Option<usize>,
    pushgateway_url: Option<PushgatewayUrl>,
    pushgateway_labels: Option<GroupingLabels>,
    assume_role: AssumeRoleSlots,
    argocd: ArgoCdSlots,
    roles_anywhere: roles_anywhere::Slots,
    clusters: ClustersSlots,
}

/// ECR_REFRESH_CLUSTERS_*, parsed.
#[derive(Debug, Default)]
struct ClustersSlots {
    source: Option<Source>,
    namespaces: Option<Vec<NamespaceName>>,
    selector: Option<LabelSelector>,
    concurrency: Option<usize>,
    include_local: Option<bool>,
    service_account: Option<SpokeAccount>,
    check_service_account: Option<SpokeAccount>,
    auth: Option<Auth>,
}

/// The values set, as given, by variable: what a group's error quotes, and whether a variable
/// with a default was set at all.
#[derive(Debug, Default)]
struct Given(HashMap<&'static str, String>);

impl Given {
    fn get(&self, name: &str) -> Option<&str> {
        self.0.get(name).map(String::as_str)
    }

    /// The first of `variables` set is refused: each is only used with what `needed` names
    /// (`X, which is not set`), and whoever set it expects that on.
    fn only_with(&self, variables: &[&'static str], needed: &str) -> Result<(), ConfigError> {
        match variables.iter().find_map(|&v| Some((v, self.get(v)?))) {
            Some((variable, value)) => Err(invalid(
                variable,
                value,
                format!("is only used with {needed}"),
            )),
            None => Ok(()),
        }
    }
}

/// ECR_REFRESH_ASSUME_ROLE_*, parsed.
#[derive(Debug, Default)]
struct AssumeRoleSlots {
    arn: Option<RoleArn>,
    external_id: Option<ExternalId>,
    session_name: Option<SessionName>,
}

/// ECR_REFRESH_ARGOCD_*, parsed.
#[derive(Debug, Default)]
struct ArgoCdSlots {
    namespace: Option<NamespaceName>,
    repo_type: Option<RepoType>,
    project: Option<ProjectName>,
}

/// A slot whose variable's default is a value: it was parsed before any value set.
fn defaulted<T>(slot: Option<T>) -> T {
    slot.expect("a default that is a value is parsed before the values set (Builder::parse)")
}

impl Builder {
    /// Every variable's default that is a value, then the values set (`vars` holds only ours,
    /// known and not blank), each by its entry's parse; a value refused is an error naming its
    /// variable, the value and what is accepted.
    fn parse(vars: HashMap<&'static str, String>) -> Result<Self, ConfigError> {
        let mut builder = Self::default();
        for v in VARIABLES.iter().filter(|v| v.default_parses) {
            (v.parse)(v.default, &mut builder)
                .unwrap_or_else(|e| panic!("{}'s default {:?}: {e}", v.name, v.default));
        }
        for v in VARIABLES {
            if let Some(value) = vars.get(v.name) {
                (v.parse)(value, &mut builder)
                    .map_err(|accepted| invalid(v.name, value, accepted))?;
            }
        }
        builder.given = Given(vars);
        Ok(builder)
    }

    /// The configuration: each variable of one field is in it already; this puts in those
    /// that go together (a group's values must agree, and one given without what it needs is
    /// refused) and the fields that read more than one variable; a field of one variable is
    /// not listed here.
    fn finish(self) -> Result<Config, ConfigError> {
        let mut config = self.config;
        if self.given.get("ECR_REFRESH_EXCLUDE_NAMESPACES").is_none() {
            let selection = &mut config.selection;
            selection.exclude =
                default_exclusions(std::mem::take(&mut selection.exclude), &selection.include);
        }
        config.written = twins(
            &config.registries,
            config.dual_stack,
            self.given.get("ECR_REFRESH_DUAL_STACK"),
        )?;
        config.pushgateway = match (self.pushgateway_url, self.pushgateway_labels) {
            (Some(url), labels) => Some(Pushgateway {
                url,
                labels: labels.unwrap_or_default(),
            }),
            (None, _) => {
                let labels = ["ECR_REFRESH_PUSHGATEWAY_LABELS"];
                let needed = "ECR_REFRESH_PUSHGATEWAY_URL, which is not set";
                self.given.only_with(&labels, needed)?;
                None
            }
        };
        config.assume_role = assume_role(self.assume_role)?;
        config.argocd = argocd(
            self.argocd,
            &self.given,
            &config.secret_name,
            &config.registries,
        )?;
        // A limit without the option is accepted and unused, so that manifests may carry its default.
        config.evict_stuck_pods =
            defaulted(self.evict_stuck_pods).then_some(defaulted(self.evict_limit));
        config.roles_anywhere = roles_anywhere::finish(self.roles_anywhere, &self.given)?;
        config.clusters = clusters(self.clusters, &self.given)?;
        Ok(config)
    }
}

/// A placeholder for [`Config`]'s `Default`, never observed: ECR_REFRESH_LOG_FORMAT's entry
/// parses its default over it.
impl Default for LogFormat {
    fn default() -> Self {
        Self::Text
    }
}

/// A placeholder for [`Config`]'s `Default`, never observed: the entries of
/// ECR_REFRESH_NAMESPACES and ECR_REFRESH_EXCLUDE_NAMESPACES parse their defaults over it.
impl Default for Selection {
    fn default() -> Self {
        Self {
            include: Include::All,
            exclude: Vec::new(),
            label_selector: None,
        }
    }
}

/// [`DEFAULT_SECRET_NAME`], which is also ECR_REFRESH_SECRET_NAME's default.
impl Default for SecretName {
    fn default() -> Self {
        DEFAULT_SECRET_NAME
            .parse()
            .expect("aws-ecr-token is a DNS subdomain name")
    }
}

impl Config {
    /// Reads the configuration from the process environment.
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_vars(environment::text_vars(std::env::vars_os())?)
    }

    /// The Roles Anywhere certificate and key read and checked against each other, as a refresh
    /// does before anything is sent (None: Roles Anywhere is not configured). Only a refresh
    /// calls it: a check reports the same error as a finding, and an uninstall asks AWS nothing.
    pub fn identity(&self) -> Result<Option<Identity>, ConfigError> {
        self.roles_anywhere
            .as_ref()
            .map(|ra| Identity::load(ra).map_err(ConfigError::Certificate))
            .transpose()
    }

    /// The rules a Secret is judged by in one cluster: `region` is where the caller's own
    /// registry is (none configured), `install` the name its writes record.
    pub fn rules(&self, region: Option<String>, install: Option<Install>) -> Rules<'_> {
        Rules {
            registries: &self.registries,
            written: &self.written,
            dual_stack: self.dual_stack,
            renew_before: self.renew_before,
            region,
            install,
        }
    }

    /// Reads the configuration from these variables (the environment, or a test's).
    pub fn from_vars(
        vars: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Self, ConfigError> {
        let mut ours = HashMap::new();
        for (name, value) in vars {
            if !name.starts_with(PREFIX) || variables::TEST_VARIABLES.contains(&name.as_str()) {
                continue;
            }
            let Some(variable) = variables::named(&name) else {
                return Err(ConfigError::Unknown {
                    suggestion: variables::nearest(&name),
                    variable: name,
                });
            };
            // An empty value means the default, as an unset one does: manifests often carry
            // `value: ""`.
            if value.trim().is_empty() {
                ours.remove(variable.name);
            } else {
                ours.insert(variable.name, value);
            }
        }
        Builder::parse(ours)?.finish()
    }
}

/// ECR_REFRESH_ARGOCD_*: the namespace turns it on; the Secrets' names come from the pull
/// Secret's name and the private registries configured, so those must be named (a refused
/// name, or two registries that would share one, is an error of ECR_REFRESH_REGISTRIES). A
/// type or project without the namespace is refused: whoever set it expects Argo CD Secrets.
fn argocd(
    slots: ArgoCdSlots,
    given: &Given,
    secret_name: &SecretName,
    registries: &[RegistryHost],
) -> Result<Option<ArgoCd>, ConfigError> {
    let Some(namespace) = slots.namespace else {
        let others = ["ECR_REFRESH_ARGOCD_TYPE", "ECR_REFRESH_ARGOCD_PROJECT"];
        given.only_with(&others, "ECR_REFRESH_ARGOCD_NAMESPACE, which is not set")?;
        return Ok(None);
    };
    let targets = argocd::targets(secret_name, registries).map_err(|accepted| {
        invalid(
            "ECR_REFRESH_REGISTRIES",
            &registries
                .iter()
                .map(|r| r.host())
                .collect::<Vec<_>>()
                .join(","),
            format!("with ECR_REFRESH_ARGOCD_NAMESPACE={namespace}: {accepted}"),
        )
    })?;
    Ok(Some(ArgoCd {
        namespace,
        repo_type: defaulted(slots.repo_type),
        project: slots.project,
        targets,
    }))
}

/// ECR_REFRESH_CLUSTERS_*: the source turns the fleet on. capi needs the namespaces its
/// Secrets are in (the run is granted get and list there only); argocd's are Argo CD's
/// namespace by default; a directory has none. The others, given without a source, are
/// refused, except those with a default a manifest may carry.
fn clusters(slots: ClustersSlots, given: &Given) -> Result<Option<Clusters>, ConfigError> {
    const NAMESPACE: &str = "ECR_REFRESH_CLUSTERS_NAMESPACE";
    const SELECTOR: &str = "ECR_REFRESH_CLUSTERS_SELECTOR";
    let Some(source) = slots.source else {
        given.only_with(
            &[NAMESPACE, SELECTOR],
            "ECR_REFRESH_CLUSTERS, which is not set",
        )?;
        return Ok(None);
    };
    let namespaces = match (&source, slots.namespaces) {
        (Source::Capi, None) => {
            return Err(invalid(
                NAMESPACE,
                "",
                "must name the namespaces holding Cluster API's <cluster>-kubeconfig Secrets with \
                 ECR_REFRESH_CLUSTERS=capi (the run is granted get and list on Secrets there only)"
                    .into(),
            ));
        }
        (Source::ArgoCd, None) => vec!["argocd".parse().expect("argocd is a namespace name")],
        (Source::Dir(_), Some(_)) | (Source::Dir(_), None) if slots.selector.is_some() => {
            return Err(invalid(
                SELECTOR,
                given.get(SELECTOR).unwrap_or_default(),
                "is not used with ECR_REFRESH_CLUSTERS=dir:<path>, whose clusters are files".into(),
            ));
        }
        (Source::Dir(_), Some(_)) => {
            return Err(invalid(
                NAMESPACE,
                given.get(NAMESPACE).unwrap_or_default(),
                "is not used with ECR_REFRESH_CLUSTERS=dir:<path>, whose clusters are files".into(),
            ));
        }
        (Source::Dir(_), None) => Vec::new(),
        (_, Some(namespaces)) => namespaces,
    };
    Ok(Some(Clusters {
        source,
        namespaces,
        selector: slots.selector,
        concurrency: defaulted(slots.concurrency),
        include_local: defaulted(slots.include_local),
        service_account: defaulted(slots.service_account),
        check_service_account: defaulted(slots.check_service_account),
        auth: defaulted(slots.auth),
    }))
}

/// The most pods a run evicts when ECR_REFRESH_EVICT_LIMIT is not set, as its entry in
/// VARIABLES says.
#[cfg(test)]
const DEFAULT_EVICT_LIMIT: usize = 50;

/// ECR_REFRESH_ASSUME_ROLE_*: the role, with its external id and session name. An external id
/// without a role is refused: whoever set it expects a role to be assumed. A session name
/// alone is accepted and unused, so that manifests may carry its default beside an empty ARN.
fn assume_role(slots: AssumeRoleSlots) -> Result<Option<AssumeRole>, ConfigError> {
    let AssumeRoleSlots {
        arn,
        external_id,
        session_name,
    } = slots;
    let Some(role_arn) = arn else {
        return match &external_id {
            Some(id) => Err(invalid(
                "ECR_REFRESH_ASSUME_ROLE_EXTERNAL_ID",
                id.as_str(),
                "is only used with ECR_REFRESH_ASSUME_ROLE_ARN, which is not set".into(),
            )),
            None => Ok(None),
        };
    };
    Ok(Some(AssumeRole {
        role_arn,
        external_id,
        session_name: defaulted(session_name),
    }))
}

/// The hosts a write puts in `auths` for the configured registries (`with_twins`). With
/// ECR_REFRESH_DUAL_STACK=true every registry configured must have a dual-stack host, which a
/// registry in a partition without dual-stack endpoints has not.
fn twins(
    registries: &[RegistryHost],
    dual_stack: bool,
    value: Option<&str>,
) -> Result<Vec<RegistryHost>, ConfigError> {
    with_twins(registries.to_vec(), dual_stack).map_err(|e| {
        invalid(
            "ECR_REFRESH_DUAL_STACK",
            value.unwrap_or_default(),
            format!("cannot be true here: {e}"),
        )
    })
}

fn invalid(variable: &'static str, value: &str, accepted: String) -> ConfigError {
    ConfigError::Invalid {
        variable,
        value: redact_userinfo(value),
        // The reason may quote the value (a list's item), so it is redacted as well.
        accepted: redact_userinfo(&accepted),
    }
}

/// The value as an error may show it, in a log line and in the termination message: the
/// userinfo of every URL in it (`scheme://user:password@host`) is replaced, since a refused
/// URL can carry a credential.
pub fn redact_userinfo(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    let mut rest = value;
    while let Some(scheme_end) = rest.find("://") {
        let authority_start = scheme_end + 3;
        out.push_str(&rest[..authority_start]);
        rest = &rest[authority_start..];
        let authority_end = rest
            .find(|c: char| matches!(c, '/' | '?' | '#') || c.is_whitespace())
            .unwrap_or(rest.len());
        if let Some(at) = rest[..authority_end].rfind('@') {
            out.push_str("[redacted]@");
            rest = &rest[at + 1..];
        }
    }
    out.push_str(rest);
    out
}

/// The default exclusions, less any namespace named literally in ECR_REFRESH_NAMESPACES: a
/// name someone wrote out wins over a default they may not know of.
fn default_exclusions(mut defaults: Vec<Glob>, include: &Include) -> Vec<Glob> {
    defaults.retain(|glob| match include {
        Include::All => true,
        Include::Names(names) => !names.iter().any(|n| n.as_str() == glob.as_str()),
        Include::Patterns(globs) => !globs
            .iter()
            .any(|g| g.is_literal() && g.as_str() == glob.as_str()),
    });
    defaults
}

#[cfg(test)]
mod tests;
