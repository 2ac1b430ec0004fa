//! Configuration: read once from the environment into typed values.
//!
//! Every value is parsed here, so the rest of the code cannot hold an invalid one. A bad
//! value, or an `ECR_REFRESH_*` variable we do not know, is an error naming the variable, the
//! value and what is accepted; the run then sends no request.

mod selection;
mod values;
pub mod variables;

use std::ffi::OsString;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use serde::Deserialize;

use crate::glob::Glob;
use crate::metrics::{GroupingLabels, Pushgateway, PushgatewayUrl};
use crate::names::{NamespaceName, SecretName, ServiceAccountName};
use crate::registry::RegistryHost;

pub use selection::{Include, LabelSelector, Selection};
use values::{first_of_each, parse_bool, parse_concurrency, parse_list, parse_timeout};
pub use variables::{VARIABLES, Variable};

const PREFIX: &str = "ECR_REFRESH_";

const DEFAULT_SECRET_NAME: &str = "aws-ecr-token";
const DEFAULT_CONCURRENCY: usize = 16;
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);
/// An ECR token's whole life: by default every run renews every Secret.
const DEFAULT_RENEW_BEFORE: Duration = Duration::from_secs(12 * 3600);
/// Where Kubernetes reads a container's termination message from.
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
}

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    Text,
    Json,
}

impl FromStr for LogFormat {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "text" => Ok(Self::Text),
            "json" => Ok(Self::Json),
            _ => Err("must be 'text' or 'json'".into()),
        }
    }
}

/// The run's whole configuration.
#[derive(Debug, Clone)]
pub struct Config {
    pub secret_name: SecretName,
    pub selection: Selection,
    /// Empty: the caller's own registry in the AWS region of the default chain.
    pub registries: Vec<RegistryHost>,
    /// Write each registry's dual-stack host too, from the same token.
    pub dual_stack: bool,
    pub dry_run: bool,
    pub concurrency: usize,
    pub timeout: Duration,
    pub log_format: LogFormat,
    pub service_accounts: Vec<ServiceAccountName>,
    pub verify_login: bool,
    pub termination_log: PathBuf,
    /// Where the run's metrics are pushed; None pushes nothing.
    pub pushgateway: Option<Pushgateway>,
    /// Whether a failed namespace gets a Warning Event.
    pub events: bool,
    /// A Secret whose token has less than this left is due; one that is not due is not written.
    pub renew_before: Duration,
}

/// The variables as envy reads them, before parsing.
#[derive(Debug, Deserialize, Default)]
struct Raw {
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
}

impl Config {
    /// Reads the configuration from the process environment.
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_vars(text_vars(std::env::vars_os())?)
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
            None => Vec::new(),
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
        let dual_stack = parse_or("ECR_REFRESH_DUAL_STACK", raw.dual_stack, parse_bool, || {
            false
        })?;
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
        let termination_log = raw
            .termination_log
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(DEFAULT_TERMINATION_LOG));
        Ok(Self {
            secret_name,
            selection: Selection {
                include,
                exclude,
                label_selector,
            },
            registries,
            dual_stack,
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
        })
    }
}

/// Variables whose values must be text, by prefix: ours, and the AWS SDK's, whose errors print
/// a value that is not (its credentials provider's "environment variable was not valid unicode:
/// \"...\""), an AWS_SECRET_ACCESS_KEY included. Caught here, before the SDK reads them.
const MUST_BE_TEXT: [&str; 2] = [PREFIX, "AWS_"];

/// The variables that are text. One that must be and is not is an error naming it, never
/// showing its value. Any other is not ours to read: `envFrom` over a Secret with binary data
/// puts such values in the environment, and they are skipped unread (`std::env::vars` would
/// panic and print them).
fn text_vars(
    vars: impl IntoIterator<Item = (OsString, OsString)>,
) -> Result<Vec<(String, String)>, ConfigError> {
    let mut text = Vec::new();
    for (name, value) in vars {
        let ours = MUST_BE_TEXT
            .iter()
            .any(|prefix| name.as_encoded_bytes().starts_with(prefix.as_bytes()));
        match (name.to_str(), value.into_string()) {
            (Some(name), Ok(value)) => text.push((name.to_owned(), value)),
            _ if ours => {
                return Err(ConfigError::NotUtf8 {
                    variable: name.to_string_lossy().into_owned(),
                });
            }
            _ => {}
        }
    }
    Ok(text)
}

/// A positive duration. Above 12h (an ECR token's life) every Secret is due on every run.
fn parse_renew_before(s: &str) -> Result<Duration, String> {
    match humantime::parse_duration(s) {
        Ok(d) if !d.is_zero() => Ok(d),
        _ => Err(
            "must be a duration above zero, like '8h' or '90m'; 12h or more renews on every run"
                .into(),
        ),
    }
}

fn invalid(variable: &'static str, value: &str, accepted: String) -> ConfigError {
    ConfigError::Invalid {
        variable,
        value: value.to_owned(),
        accepted,
    }
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
mod tests {
    use super::*;

    fn config(vars: &[(&str, &str)]) -> Result<Config, ConfigError> {
        Config::from_vars(vars.iter().map(|(k, v)| (k.to_string(), v.to_string())))
    }

    fn error(vars: &[(&str, &str)]) -> String {
        config(vars)
            .expect_err("the configuration should be refused")
            .to_string()
    }

    #[test]
    fn defaults_apply_when_nothing_is_set() {
        let c = config(&[("HOME", "/root")]).unwrap();
        assert_eq!(c.secret_name.as_str(), "aws-ecr-token");
        assert_eq!(c.selection.include, Include::All);
        assert!(c.registries.is_empty());
        assert!(!c.dry_run);
        assert_eq!(c.concurrency, 16);
        assert_eq!(c.timeout, Duration::from_secs(300));
        assert_eq!(c.log_format, LogFormat::Text);
        assert_eq!(c.termination_log, PathBuf::from("/dev/termination-log"));
        assert_eq!(c.renew_before, Duration::from_secs(12 * 3600));
        assert_eq!(c.pushgateway, None);
        assert!(c.events);
    }

    #[test]
    fn the_pushgateway_takes_a_url_and_grouping_labels() {
        let c = config(&[
            (
                "ECR_REFRESH_PUSHGATEWAY_URL",
                "http://pushgateway.monitoring:9091",
            ),
            ("ECR_REFRESH_PUSHGATEWAY_LABELS", "cluster=prod-eu"),
            ("ECR_REFRESH_EVENTS", "false"),
        ])
        .unwrap();
        let gateway = c.pushgateway.expect("a gateway");
        assert_eq!(
            gateway.group_url(),
            "http://pushgateway.monitoring:9091/metrics/job/ecr-refresh/cluster/prod-eu"
        );
        assert!(!c.events);
        for (vars, accepted) in [
            (
                &[("ECR_REFRESH_PUSHGATEWAY_LABELS", "cluster=a")][..],
                "only used with ECR_REFRESH_PUSHGATEWAY_URL",
            ),
            (
                &[("ECR_REFRESH_PUSHGATEWAY_URL", "pushgateway:9091")][..],
                "base URL",
            ),
            (
                &[
                    ("ECR_REFRESH_PUSHGATEWAY_URL", "http://gw:9091"),
                    ("ECR_REFRESH_PUSHGATEWAY_LABELS", "cluster-name=a"),
                ][..],
                "not a Prometheus label name",
            ),
        ] {
            let message = error(vars);
            assert!(message.contains(accepted), "{message}");
        }
    }

    #[test]
    fn empty_values_mean_the_default() {
        let c = config(&[
            ("ECR_REFRESH_CONCURRENCY", ""),
            ("ECR_REFRESH_NAMESPACES", " "),
        ])
        .unwrap();
        assert_eq!(c.concurrency, 16);
        assert_eq!(c.selection.include, Include::All);
    }

    #[test]
    fn bad_values_name_the_variable_the_value_and_what_is_accepted() {
        let cases: &[(&str, &str, &str)] = &[
            (
                "ECR_REFRESH_CONCURRENCY",
                "lots",
                "must be a whole number from 1 to 1024",
            ),
            ("ECR_REFRESH_CONCURRENCY", "0", "from 1 to 1024"),
            (
                "ECR_REFRESH_TIMEOUT",
                "5 minutes please",
                "like '90s', '5m'",
            ),
            ("ECR_REFRESH_LOG_FORMAT", "yaml", "must be 'text' or 'json'"),
            ("ECR_REFRESH_DRY_RUN", "maybe", "must be true or false"),
            ("ECR_REFRESH_SECRET_NAME", "Bad_Name", "DNS subdomain"),
            (
                "ECR_REFRESH_REGISTRIES",
                "docker.io",
                "<account>.dkr.ecr.<region>.amazonaws.com",
            ),
            ("ECR_REFRESH_NAMESPACES", "team_a", "DNS label"),
            (
                "ECR_REFRESH_NAMESPACE_SELECTOR",
                "team in a,b",
                "label selector",
            ),
            ("ECR_REFRESH_SERVICE_ACCOUNTS", "Default", "DNS subdomain"),
            ("ECR_REFRESH_RENEW_BEFORE", "abc", "a duration above zero"),
            ("ECR_REFRESH_RENEW_BEFORE", "-1h", "a duration above zero"),
            ("ECR_REFRESH_RENEW_BEFORE", "0s", "a duration above zero"),
        ];
        for (variable, value, accepted) in cases {
            let message = error(&[(variable, value)]);
            assert!(message.starts_with(&format!("{variable}=")), "{message}");
            assert!(message.contains(value), "{message}");
            assert!(message.contains(accepted), "{variable}: {message}");
        }
    }

    #[test]
    fn an_unknown_variable_is_refused_with_the_nearest_known_name() {
        let message = error(&[("ECR_REFRESH_NAMESPACE", "a")]);
        assert!(
            message.contains("ECR_REFRESH_NAMESPACE is not a variable"),
            "{message}"
        );
        assert!(
            message.contains("did you mean ECR_REFRESH_NAMESPACES?"),
            "{message}"
        );
        let message = error(&[("ECR_REFRESH_ZZZ", "a")]);
        assert!(!message.contains("did you mean"), "{message}");
    }

    #[test]
    fn a_value_that_is_not_text_is_named_not_shown_and_only_ours_count() {
        use std::os::unix::ffi::OsStringExt;
        let bytes = |b: &[u8]| OsString::from_vec(b.to_vec());
        let theirs = text_vars([
            (bytes(b"APP_KEY"), bytes(b"hunter2\xff")),
            (bytes(b"APP_\xff"), bytes(b"x")),
            (bytes(b"HOME"), bytes(b"/root")),
        ])
        .unwrap();
        assert_eq!(theirs, [("HOME".to_owned(), "/root".to_owned())]);
        for (name, value) in [
            (&b"ECR_REFRESH_SECRET_NAME"[..], &b"hunter2\xff"[..]),
            (b"ECR_REFRESH_\xff", b"hunter2"),
            (b"AWS_SECRET_ACCESS_KEY", b"hunter2\xff"),
        ] {
            let message = text_vars([(bytes(name), bytes(value))])
                .unwrap_err()
                .to_string();
            let name = String::from_utf8_lossy(name);
            assert!(message.starts_with(name.as_ref()), "{message}");
            assert!(!message.contains("hunter2"), "{message}");
        }
    }

    #[test]
    fn the_test_lane_variable_is_tolerated() {
        assert!(config(&[("ECR_REFRESH_E2E_KUBECONFIG", "/tmp/k")]).is_ok());
    }

    #[test]
    fn a_namespace_named_twice_is_visited_once() {
        let c = config(&[("ECR_REFRESH_NAMESPACES", "a,b,a")]).unwrap();
        let names: Vec<&str> = c
            .selection
            .literal_names()
            .unwrap()
            .iter()
            .map(|n| n.as_str())
            .collect();
        assert_eq!(names, ["a", "b"]);
    }

    #[test]
    fn literal_names_need_no_list_unless_a_selector_is_set() {
        let c = config(&[
            ("ECR_REFRESH_NAMESPACES", "team-a, team-b,team-c"),
            ("ECR_REFRESH_EXCLUDE_NAMESPACES", "team-c"),
        ])
        .unwrap();
        let names: Vec<&str> = c
            .selection
            .literal_names()
            .unwrap()
            .iter()
            .map(|n| n.as_str())
            .collect();
        assert_eq!(names, ["team-a", "team-b"]);

        let c = config(&[
            ("ECR_REFRESH_NAMESPACES", "team-a"),
            ("ECR_REFRESH_NAMESPACE_SELECTOR", "env=prod"),
        ])
        .unwrap();
        assert!(c.selection.literal_names().is_none());

        let c = config(&[("ECR_REFRESH_NAMESPACES", "team-*")]).unwrap();
        assert!(c.selection.literal_names().is_none());
    }

    #[test]
    fn selection_includes_globs_and_takes_out_exclusions() {
        let c = config(&[
            ("ECR_REFRESH_NAMESPACES", "team-*,ops"),
            ("ECR_REFRESH_EXCLUDE_NAMESPACES", "team-?-old"),
        ])
        .unwrap();
        for (namespace, selected) in [
            ("team-a", true),
            ("ops", true),
            ("team-b-old", false),
            ("kube-system", false),
        ] {
            assert_eq!(c.selection.matches(namespace), selected, "{namespace}");
        }
        let all = config(&[("ECR_REFRESH_NAMESPACES", "*")]).unwrap();
        assert_eq!(all.selection.include, Include::All);
    }

    #[test]
    fn registries_are_deduplicated_in_order() {
        let c = config(&[(
            "ECR_REFRESH_REGISTRIES",
            "111111111111.dkr.ecr.eu-west-1.amazonaws.com,https://111111111111.dkr.ecr.eu-west-1.amazonaws.com/,222222222222.dkr.ecr.us-east-1.amazonaws.com",
        )])
        .unwrap();
        let hosts: Vec<&str> = c.registries.iter().map(|r| r.host()).collect();
        assert_eq!(
            hosts,
            [
                "111111111111.dkr.ecr.eu-west-1.amazonaws.com",
                "222222222222.dkr.ecr.us-east-1.amazonaws.com"
            ]
        );
    }
}
