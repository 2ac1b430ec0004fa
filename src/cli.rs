//! The command line. ecr-refresh is configured by its environment; its only flags print the
//! help or the version, and neither reads a kubeconfig, AWS configuration or the network.
//! Anything else on the command line is refused, so a mistyped flag never starts a run.

use std::ffi::OsString;
use std::fmt::Write as _;

use crate::aws::partition::{self, Partitions};
use crate::aws::registry;
use crate::config::VARIABLES;
use crate::report::exit;

/// What the command line asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    /// No arguments: one run, configured by the environment.
    Run,
    /// `check`: a read-only run that reports what keeps pods from pulling (ECR_REFRESH_MODE=check).
    Check,
    /// `uninstall`: deletes the Secrets ecr-refresh created, takes its entries out of the
    /// others and its entry out of the ServiceAccounts' imagePullSecrets (src/uninstall).
    Uninstall,
    Help,
    Version,
}

/// A command line we refuse: exit 2, nothing sent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ArgError {
    #[error(
        "unknown argument {0:?}: ecr-refresh takes no arguments but check, uninstall, --help and --version, \
         and is configured by ECR_REFRESH_* environment variables (see --help)"
    )]
    Unknown(String),
    #[error("unexpected argument {extra:?} after {flag}: give one flag at a time")]
    Extra { flag: String, extra: String },
}

/// Reads the arguments after the program name.
pub fn parse(args: impl IntoIterator<Item = OsString>) -> Result<Command, ArgError> {
    let mut args = args.into_iter().map(|a| a.to_string_lossy().into_owned());
    let Some(first) = args.next() else {
        return Ok(Command::Run);
    };
    let command = match first.as_str() {
        "--help" | "-h" => Command::Help,
        "--version" | "-V" => Command::Version,
        "check" => Command::Check,
        "uninstall" => Command::Uninstall,
        _ => return Err(ArgError::Unknown(first)),
    };
    match args.next() {
        None => Ok(command),
        Some(extra) => Err(ArgError::Extra { flag: first, extra }),
    }
}

/// The version a build reports. A release build sets ECR_REFRESH_VERSION and
/// ECR_REFRESH_COMMIT (build.rs); a plain `cargo build` knows only the crate's version.
pub fn version() -> String {
    let version = option_env!("ECR_REFRESH_VERSION").unwrap_or(env!("CARGO_PKG_VERSION"));
    match option_env!("ECR_REFRESH_COMMIT").filter(|c| !c.is_empty()) {
        Some(commit) => format!("ecr-refresh {version} (commit {commit})"),
        None => format!("ecr-refresh {version}"),
    }
}

/// Variables without our prefix that the binary, the AWS SDK or the Kubernetes client read.
pub const OTHER_VARIABLES: &[(&str, &str)] = &[
    (
        "AWS_REGION, AWS_PROFILE",
        "the region (needed unless ECR_REFRESH_REGISTRIES names the registries) and profile, \
         as the AWS CLI reads them; on EC2, the instance's region is asked of instance metadata",
    ),
    (
        "AWS_ROLE_ARN, AWS_WEB_IDENTITY_TOKEN_FILE, AWS_ACCESS_KEY_ID, ...",
        "credentials by the AWS default chain: IRSA, EKS Pod Identity, a profile, keys or \
         instance metadata",
    ),
    (
        "AWS_EC2_METADATA_DISABLED",
        "true: never ask instance metadata (169.254.169.254), e.g. outside AWS",
    ),
    (
        "AWS_ENDPOINT_URL_ECR, AWS_ENDPOINT_URL_ECR_PUBLIC",
        "another ECR or ECR Public endpoint (a test double), as the AWS SDK reads them",
    ),
    (
        "KUBECONFIG",
        "the kubeconfig used outside a pod (default ~/.kube/config); in a pod, the \
         ServiceAccount's token",
    ),
    (
        "RUST_LOG",
        "a log filter replacing the default (e.g. debug, or info,aws_config=debug)",
    ),
];

/// What each exit code means: `--help` prints it, and README's exit-code table must say the
/// same (tests/fake/cli.rs).
pub const EXIT_CODES: &[(u8, &str)] = &[
    (
        exit::OK,
        "all done: every selected namespace is fresh, refreshed, or skipped with a reason; in \
         check mode, no finding",
    ),
    (
        exit::FAILED,
        "something asked for was not done: a namespace failed or was left undone (deadline \
         reached or SIGTERM), no namespace was selected, namespaces named in \
         ECR_REFRESH_NAMESPACES do not exist, or the namespace listing was incomplete; in check \
         mode, any finding; in uninstall, Secrets of more than one install and none named; with \
         ECR_REFRESH_CLUSTERS, a cluster not reached or with any of these",
    ),
    (
        exit::CONFIG,
        "the configuration is wrong (an invalid value or argument, no AWS region, a region no AWS \
         partition has, a role to assume and no region, a Roles Anywhere certificate or key a \
         refresh can't use), found before anything is sent",
    ),
    (
        exit::UNAVAILABLE,
        "credentials could not be had or were refused (no ECR token, the registry refused the \
         login), or the cluster is unreachable or refuses us: no Secret was written (the error \
         names any ServiceAccount given the Secret before the token failed); with \
         ECR_REFRESH_CLUSTERS, the clusters' source can't be read or no cluster was reached",
    ),
];

/// `--help`: what ecr-refresh does, then every variable it reads, with default and meaning.
pub fn help() -> String {
    let mut text = format!(
        "{version}

ecr-refresh fetches an AWS ECR token and writes it as an image-pull Secret (type
kubernetes.io/dockerconfigjson) in every selected namespace, then exits. The shipped
CronJob runs it every 10 minutes with ECR_REFRESH_RENEW_BEFORE=8h: a token lasts 12 hours,
and a run rewrites only the Secrets that are due, so most runs write nothing and ask ECR
nothing. It updates each Secret in place
with server-side apply, pinned to the uid and resourceVersion it read, and never deletes
one: a pod that starts during a refresh never finds the Secret missing. Each namespace
gets one log line with its outcome and the Secret's uid before and after; the exit code
says how the run went.

Usage:
  ecr-refresh              one run against the current kube context (or the pod's
                           ServiceAccount), configured by the environment below
  ecr-refresh check        read-only: report per namespace what keeps pods from pulling
                           from ECR (the Secret, its entries and expiry, pods not wired
                           or on registries not covered); writes nothing. The same as
                           ECR_REFRESH_MODE=check; exit 0 all ok, 1 findings, 2 config,
                           3 cluster unreachable or refusing
  ecr-refresh uninstall    after uninstalling: in the namespaces the install selected,
                           delete the Secrets it created that hold only its entries, take
                           its entries out of the others, and, there only, its entry out of
                           the imagePullSecrets of the ServiceAccounts in
                           ECR_REFRESH_SERVICE_ACCOUNTS; another install's Secrets are kept
                           (two recorded: name one in ECR_REFRESH_INSTALL); run with an
                           admin's kubeconfig; ECR_REFRESH_DRY_RUN=true shows what would go;
                           exit 0 done, 1 something failed or more than one install
                           (run it again), 3 cluster unreachable
  ecr-refresh --help, -h   this text
  ecr-refresh --version, -V

Environment (an ECR_REFRESH_* variable not listed here is refused):
",
        version = version()
    );
    for v in VARIABLES {
        // Writing to a String cannot fail.
        let _ = writeln!(
            text,
            "  {} (default: {})\n      {}\n      accepted: {}",
            v.name, v.default, v.meaning, v.accepted
        );
    }
    text.push_str(&partitions_help(Partitions::sdk()));
    text.push_str("\nAlso read:\n");
    for (names, meaning) in OTHER_VARIABLES {
        let _ = writeln!(text, "  {names}\n      {meaning}");
    }
    text.push_str("\nExit codes:\n");
    for (code, meaning) in EXIT_CODES {
        let _ = writeln!(text, "  {code}  {meaning}");
    }
    text
}

/// The registry hosts of each partition, from the partition data the registries are parsed with.
fn partitions_help(partitions: &Partitions) -> String {
    let mut text = format!(
        "\nRegistry hosts by partition (the AWS SDK's partition data, from {}):\n",
        partition::SOURCE
    );
    for forms in registry::host_forms(partitions) {
        let dual_stack = forms
            .dual_stack_host
            .map(|h| format!("dual-stack {h}"))
            .unwrap_or_else(|| "no dual-stack hosts".to_owned());
        let _ = writeln!(
            text,
            "  {} (e.g. {})\n      {}; {dual_stack}",
            forms.partition, forms.region, forms.host
        );
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_strs(args: &[&str]) -> Result<Command, ArgError> {
        parse(args.iter().map(OsString::from))
    }

    #[test]
    fn the_command_line_is_read_exactly() {
        let cases: &[(&[&str], Result<Command, ArgError>)] = &[
            (&[], Ok(Command::Run)),
            (&["--help"], Ok(Command::Help)),
            (&["-h"], Ok(Command::Help)),
            (&["--version"], Ok(Command::Version)),
            (&["-V"], Ok(Command::Version)),
            (&["check"], Ok(Command::Check)),
            (&["help"], Err(ArgError::Unknown("help".into()))),
            (
                &["check", "now"],
                Err(ArgError::Extra {
                    flag: "check".into(),
                    extra: "now".into(),
                }),
            ),
            (&["--dry-run"], Err(ArgError::Unknown("--dry-run".into()))),
            (&["-v"], Err(ArgError::Unknown("-v".into()))),
            (&[""], Err(ArgError::Unknown(String::new()))),
            (
                &["--help", "--version"],
                Err(ArgError::Extra {
                    flag: "--help".into(),
                    extra: "--version".into(),
                }),
            ),
        ];
        for (args, expected) in cases {
            assert_eq!(&parse_strs(args), expected, "{args:?}");
        }
    }

    #[test]
    fn help_names_every_variable_with_its_default_and_meaning() {
        let help = help();
        for v in VARIABLES {
            let line = format!(
                "  {} (default: {})\n      {}\n      accepted: {}\n",
                v.name, v.default, v.meaning, v.accepted
            );
            assert!(help.contains(&line), "{} missing:\n{help}", v.name);
        }
    }

    #[test]
    fn help_lists_every_partitions_registry_hosts() {
        let help = help();
        for forms in registry::host_forms(Partitions::sdk()) {
            let line = format!(
                "  {} (e.g. {})\n      {}; dual-stack {}\n",
                forms.partition,
                forms.region,
                forms.host,
                forms.dual_stack_host.as_deref().unwrap_or_default()
            );
            assert!(help.contains(&line), "{} missing:\n{help}", forms.partition);
        }
        let none = partitions_help(&crate::aws::partition::with_new_partition(false, false));
        assert!(
            none.contains(
                "  aws-new (e.g. nw-north-1)\n      <account>.dkr.ecr.<region>.amazonaws.new; no dual-stack hosts\n"
            ),
            "{none}"
        );
    }

    #[test]
    fn the_version_names_the_crate_version_when_the_build_sets_none() {
        let expected = option_env!("ECR_REFRESH_VERSION").unwrap_or(env!("CARGO_PKG_VERSION"));
        assert!(version().starts_with(&format!("ecr-refresh {expected}")));
    }
}
