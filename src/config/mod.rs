//! Configuration: read once from the environment into typed values.
//!
//! Every value is parsed here, so the rest of the code cannot hold an invalid one. A bad
//! value, or an `ECR_REFRESH_*` variable we do not know, is an error naming the variable, the
//! value and what is accepted; the run then sends no request.

mod environment;
pub mod pushgateway;
mod roles_anywhere;
mod values;
pub mod variables;

use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use serde::Deserialize;

use crate::argocd::{self, ArgoCd, RepoType};
use crate::aws::credentials::roles_anywhere::{Identity, IdentityError};
use crate::aws::credentials::{AssumeRole, ExternalId, RoleArn, RolesAnywhere, SessionName};
use crate::aws::registry::{RegistryHost, with_twins};
use crate::cluster::names::{NamespaceName, ProjectName, SecretName, ServiceAccountName};
use crate::glob::Glob;
use crate::logging::LogFormat;
use crate::pull_secret::install::Install;

use crate::cluster::selection::{Include, LabelSelector, Selection};
use pushgateway::{GroupingLabels, Pushgateway, PushgatewayUrl};
use values::{
    first_of_each, parse_bool, parse_concurrency, parse_list, parse_renew_before, parse_timeout,
};
pub use variables::{VARIABLES, Variable};

/// Every variable of ours starts with this.
pub const PREFIX: &str = "ECR_REFRESH_";

const DEFAULT_SECRET_NAME: &str = "aws-ecr-token";
const DEFAULT_CONCURRENCY: usize = 16;
/// Taken out of the selection unless ECR_REFRESH_EXCLUDE_NAMESPACES is set: no pod pulls an
/// image in them (kube-public holds the cluster-info ConfigMap, kube-node-lease the kubelets'
/// Leases), so a Secret there is one more object with a token to keep and nothing to serve.
pub const DEFAULT_EXCLUDED_NAMESPACES: [&str; 2] = ["kube-public", "kube-node-lease"];
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);
/// An ECR token's whole life: by default every run renews every Secret.
const DEFAULT_RENEW_BEFORE: Duration = crate::aws::ecr::TOKEN_LIFETIME;
/// Where Kubernetes reads a container's termination message from (terminationMessagePath's
/// default), when ECR_REFRESH_TERMINATION_LOG is not set.
pub const DEFAULT_TERMINATION_LOG: &str = "/dev/termination-log";

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
    #[error("could not read the environment: {0}")]
    Environment(String),
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

/// The run's whole configuration.
#[derive(Debug, Clone)]
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
}

/// The variables as envy reads them, before parsing.
#[derive(Debug, Deserialize, Default)]
struct Raw {
    mode: Option<String>,
    secret_name: Option<String>,
    namespaces: Option<String>,
    exclude_namespaces: Option<String>,
    namespace_selector: Option<String>,
    registries: Option<String>,
    dual_stack: Option<String>,
    dry_run: Option<String>,
    concurrency: Option<String>,
    timeout: Option<String>,
    log_format: Option<String>,
    service_accounts: Option<String>,
    verify_login: Option<String>,
    termination_log: Option<String>,
    pushgateway_url: Option<String>,
    pushgateway_labels: Option<String>,
    events: Option<String>,
    renew_before: Option<String>,
    assume_role_arn: Option<String>,
    assume_role_external_id: Option<String>,
    assume_role_session_name: Option<String>,
    install: Option<String>,
    argocd_namespace: Option<String>,
    argocd_type: Option<String>,
    argocd_project: Option<String>,
    evict_stuck_pods: Option<String>,
    evict_limit: Option<String>,
    #[serde(flatten)]
    roles_anywhere: roles_anywhere::Raw,
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

    /// Reads the configuration from these variables (the environment, or a test's).
    pub fn from_vars(
        vars: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Self, ConfigError> {
        let vars: Vec<(String, String)> = vars.into_iter().collect();
        if let Some(unknown) = vars.iter().map(|(k, _)| k).find(|k| {
            k.starts_with(PREFIX)
                && !variables::is_known(k)
                && !variables::TEST_VARIABLES.contains(&k.as_str())
        }) {
            return Err(ConfigError::Unknown {
                variable: unknown.clone(),
                suggestion: variables::nearest(unknown),
            });
        }
        // An empty value means the default, as an unset one does: manifests often carry `value: ""`.
        let raw: Raw = envy::prefixed(PREFIX)
            .from_iter(vars.into_iter().filter(|(_, v)| !v.trim().is_empty()))
            .map_err(|e| ConfigError::Environment(e.to_string()))?;
        Self::parse(raw)
    }

    fn parse(raw: Raw) -> Result<Self, ConfigError> {
        let mode = parse_or("ECR_REFRESH_MODE", raw.mode, Mode::from_str, Mode::default)?;
        let secret_name = parse_or(
            "ECR_REFRESH_SECRET_NAME",
            raw.secret_name,
            SecretName::from_str,
            || SecretName::from_str(DEFAULT_SECRET_NAME).expect("the default name is valid"),
        )?;
        let include = match raw.namespaces {
            None => Include::All,
            Some(v) => parse_include(&v)
                .map_err(|accepted| invalid("ECR_REFRESH_NAMESPACES", &v, accepted))?,
        };
        let exclude = match raw.exclude_namespaces {
            None => default_exclusions(&include),
            Some(v) => parse_list(&v, Glob::from_str)
                .map_err(|accepted| invalid("ECR_REFRESH_EXCLUDE_NAMESPACES", &v, accepted))?,
        };
        let label_selector = parse_opt(
            "ECR_REFRESH_NAMESPACE_SELECTOR",
            raw.namespace_selector,
            LabelSelector::from_str,
        )?;
        let registries = match raw.registries {
            None => Vec::new(),
            Some(v) => first_of_each(
                parse_list(&v, RegistryHost::from_str)
                    .map_err(|accepted| invalid("ECR_REFRESH_REGISTRIES", &v, accepted))?,
            ),
        };
        let dual_stack = parse_or(
            "ECR_REFRESH_DUAL_STACK",
            raw.dual_stack.clone(),
            parse_bool,
            || false,
        )?;
        let written = twins(&registries, dual_stack, raw.dual_stack.as_deref())?;
        let dry_run = parse_or("ECR_REFRESH_DRY_RUN", raw.dry_run, parse_bool, || false)?;
        let concurrency = parse_or(
            "ECR_REFRESH_CONCURRENCY",
            raw.concurrency,
            parse_concurrency,
            || DEFAULT_CONCURRENCY,
        )?;
        let timeout = parse_or("ECR_REFRESH_TIMEOUT", raw.timeout, parse_timeout, || {
            DEFAULT_TIMEOUT
        })?;
        let log_format = parse_or(
            "ECR_REFRESH_LOG_FORMAT",
            raw.log_format,
            LogFormat::from_str,
            || LogFormat::Text,
        )?;
        let service_accounts = match raw.service_accounts {
            None => Vec::new(),
            Some(v) => {
                let names = parse_list(&v, ServiceAccountName::from_str)
                    .map_err(|accepted| invalid("ECR_REFRESH_SERVICE_ACCOUNTS", &v, accepted))?;
                first_of_each(names)
            }
        };
        let verify_login = parse_or(
            "ECR_REFRESH_VERIFY_LOGIN",
            raw.verify_login,
            parse_bool,
            || false,
        )?;
        let pushgateway_url = parse_opt(
            "ECR_REFRESH_PUSHGATEWAY_URL",
            raw.pushgateway_url,
            PushgatewayUrl::from_str,
        )?;
        let labels = parse_opt(
            "ECR_REFRESH_PUSHGATEWAY_LABELS",
            raw.pushgateway_labels.clone(),
            GroupingLabels::from_str,
        )?;
        let pushgateway = match (pushgateway_url, labels) {
            (Some(url), labels) => Some(Pushgateway {
                url,
                labels: labels.unwrap_or_default(),
            }),
            (None, None) => None,
            (None, Some(_)) => {
                return Err(invalid(
                    "ECR_REFRESH_PUSHGATEWAY_LABELS",
                    raw.pushgateway_labels.as_deref().unwrap_or_default(),
                    "is only used with ECR_REFRESH_PUSHGATEWAY_URL, which is not set".into(),
                ));
            }
        };
        let events = parse_or("ECR_REFRESH_EVENTS", raw.events, parse_bool, || true)?;
        let renew_before = parse_or(
            "ECR_REFRESH_RENEW_BEFORE",
            raw.renew_before,
            parse_renew_before,
            || DEFAULT_RENEW_BEFORE,
        )?;
        let termination_log = raw.termination_log.map(PathBuf::from);
        let install = parse_opt("ECR_REFRESH_INSTALL", raw.install, Install::from_str)?;
        let assume_role = parse_assume_role(
            raw.assume_role_arn,
            raw.assume_role_external_id,
            raw.assume_role_session_name,
        )?;
        let argocd = parse_argocd(
            raw.argocd_namespace,
            raw.argocd_type,
            raw.argocd_project,
            &secret_name,
            &registries,
        )?;
        let evict_stuck_pods = parse_evict(raw.evict_stuck_pods, raw.evict_limit)?;
        let roles_anywhere = roles_anywhere::parse(raw.roles_anywhere)?;
        Ok(Self {
            mode,
            secret_name,
            selection: Selection {
                include,
                exclude,
                label_selector,
            },
            registries,
            dual_stack,
            written,
            dry_run,
            concurrency,
            timeout,
            log_format,
            service_accounts,
            verify_login,
            termination_log,
            pushgateway,
            events,
            renew_before,
            assume_role,
            roles_anywhere,
            install,
            argocd,
            evict_stuck_pods,
        })
    }
}

/// ECR_REFRESH_ARGOCD_*: the namespace turns it on; the Secrets' names come from the pull
/// Secret's name and the private registries configured, so those must be named (a refused
/// name, or two registries that would share one, is an error of ECR_REFRESH_REGISTRIES). A
/// type or project without the namespace is refused: whoever set it expects Argo CD Secrets.
fn parse_argocd(
    namespace: Option<String>,
    repo_type: Option<String>,
    project: Option<String>,
    secret_name: &SecretName,
    registries: &[RegistryHost],
) -> Result<Option<ArgoCd>, ConfigError> {
    let namespace = parse_opt(
        "ECR_REFRESH_ARGOCD_NAMESPACE",
        namespace,
        NamespaceName::from_str,
    )?;
    let parsed_type = parse_opt(
        "ECR_REFRESH_ARGOCD_TYPE",
        repo_type.clone(),
        RepoType::from_str,
    )?;
    let parsed_project = parse_opt(
        "ECR_REFRESH_ARGOCD_PROJECT",
        project.clone(),
        ProjectName::from_str,
    )?;
    let Some(namespace) = namespace else {
        let without = |variable, value: &str| {
            Err(invalid(
                variable,
                value,
                "is only used with ECR_REFRESH_ARGOCD_NAMESPACE, which is not set".into(),
            ))
        };
        return match (repo_type, project) {
            (Some(t), _) => without("ECR_REFRESH_ARGOCD_TYPE", &t),
            (None, Some(p)) => without("ECR_REFRESH_ARGOCD_PROJECT", &p),
            (None, None) => Ok(None),
        };
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
        repo_type: parsed_type.unwrap_or_default(),
        project: parsed_project,
        targets,
    }))
}

/// The most pods a run evicts when ECR_REFRESH_EVICT_LIMIT is not set.
pub const DEFAULT_EVICT_LIMIT: usize = 50;

/// ECR_REFRESH_EVICT_STUCK_PODS and its ECR_REFRESH_EVICT_LIMIT. A limit without the option is
/// accepted and unused, so that manifests may carry its default.
fn parse_evict(
    enabled: Option<String>,
    limit: Option<String>,
) -> Result<Option<usize>, ConfigError> {
    let enabled = parse_or("ECR_REFRESH_EVICT_STUCK_PODS", enabled, parse_bool, || {
        false
    })?;
    let limit = parse_or(
        "ECR_REFRESH_EVICT_LIMIT",
        limit,
        values::parse_evict_limit,
        || DEFAULT_EVICT_LIMIT,
    )?;
    Ok(enabled.then_some(limit))
}

/// ECR_REFRESH_ASSUME_ROLE_*: the role, with its external id and session name. An external id
/// without a role is refused: whoever set it expects a role to be assumed. A session name
/// alone is accepted and unused, so that manifests may carry its default beside an empty ARN.
fn parse_assume_role(
    arn: Option<String>,
    external_id: Option<String>,
    session_name: Option<String>,
) -> Result<Option<AssumeRole>, ConfigError> {
    let role_arn = parse_opt("ECR_REFRESH_ASSUME_ROLE_ARN", arn, RoleArn::from_str)?;
    let external_id = parse_opt(
        "ECR_REFRESH_ASSUME_ROLE_EXTERNAL_ID",
        external_id,
        ExternalId::from_str,
    )?;
    let session_name = parse_opt(
        "ECR_REFRESH_ASSUME_ROLE_SESSION_NAME",
        session_name,
        SessionName::from_str,
    )?;
    let Some(role_arn) = role_arn else {
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
        session_name: session_name.unwrap_or_default(),
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

fn parse_or<T>(
    variable: &'static str,
    value: Option<String>,
    parse: impl Fn(&str) -> Result<T, String>,
    default: impl FnOnce() -> T,
) -> Result<T, ConfigError> {
    match value {
        None => Ok(default()),
        Some(v) => parse(v.trim()).map_err(|accepted| invalid(variable, &v, accepted)),
    }
}

fn parse_opt<T>(
    variable: &'static str,
    value: Option<String>,
    parse: impl Fn(&str) -> Result<T, String>,
) -> Result<Option<T>, ConfigError> {
    value
        .map(|v| parse(v.trim()).map_err(|accepted| invalid(variable, &v, accepted)))
        .transpose()
}

/// The default exclusions, less any namespace named literally in ECR_REFRESH_NAMESPACES: a
/// name someone wrote out wins over a default they may not know of.
fn default_exclusions(include: &Include) -> Vec<Glob> {
    DEFAULT_EXCLUDED_NAMESPACES
        .iter()
        .filter(|name| match include {
            Include::All => true,
            Include::Names(names) => !names.iter().any(|n| n.as_str() == **name),
            Include::Patterns(globs) => {
                !globs.iter().any(|g| g.is_literal() && g.as_str() == **name)
            }
        })
        .map(|name| Glob::from_str(name).expect("the default exclusions are valid globs"))
        .collect()
}

/// `all` (or `*`), or names and globs; literal names only allow the run to skip listing.
fn parse_include(value: &str) -> Result<Include, String> {
    if value.trim() == "all" {
        return Ok(Include::All);
    }
    let globs = parse_list(value, Glob::from_str)?;
    if globs.iter().any(|g| g.matches_everything()) {
        return Ok(Include::All);
    }
    if globs.iter().all(Glob::is_literal) {
        let names: Vec<NamespaceName> = globs
            .iter()
            .map(|g| NamespaceName::from_str(g.as_str()).map_err(|e| format!("'{g}' {e}")))
            .collect::<Result<_, _>>()?;
        return Ok(Include::Names(first_of_each(names)));
    }
    Ok(Include::Patterns(globs))
}

#[cfg(test)]
mod tests;
