//! Every variable the binary reads, each defined once: its name, default, meaning, the values
//! it takes and how it is parsed. The parser (`Config::from_vars`), the unknown-variable check,
//! `--help`, the book's reference page and the tests of manifests and docs all read this one
//! table. Adding a variable whose value is one field of `Config` is two edits: its entry here,
//! whose parse writes that field (`b.config.<field>`), and the field. One that goes together
//! with others writes a slot of the `Builder` instead, and `Builder::finish` puts the group
//! into its field.

use std::path::PathBuf;
use std::str::FromStr;

use super::Builder;
use super::values::{
    first_of_each, parse_bool, parse_concurrency, parse_evict_limit, parse_include, parse_list,
    parse_renew_before, parse_timeout,
};
use crate::aws::credentials::roles_anywhere::parse_session_duration;
use crate::aws::registry::RegistryHost;
use crate::cluster::names::{NamespaceName, ServiceAccountName};
use crate::glob::Glob;

/// One environment variable ecr-refresh reads.
#[derive(Debug, Clone, Copy)]
pub struct Variable {
    pub name: &'static str,
    /// The default, as a reader would write it.
    pub default: &'static str,
    /// What it does, in one line.
    pub meaning: &'static str,
    /// The values it takes, as its error says: `--help` prints it, and README's Configuration
    /// table must carry it word for word (tests/fake/cli.rs).
    pub accepted: &'static str,
    /// true: `default` is a value, parsed as though it were set whenever the variable is not
    /// (the default is written here only). false: `default` says what leaving it unset means.
    pub(super) default_parses: bool,
    /// Reads a value that is set (as given, not blank) into its field of the configuration, or
    /// its slot of the builder; the error says what is accepted, and is shown beside the
    /// variable's name and the value.
    pub(super) parse: fn(&str, &mut Builder) -> Result<(), String>,
}

/// Stores a parsed value in its field of the configuration (or its slot of the builder).
fn set<T>(field: &mut T, parsed: Result<T, String>) -> Result<(), String> {
    *field = parsed?;
    Ok(())
}

/// Stores a parsed value in a field (or slot) that is None while its variable is not set.
fn put<T>(field: &mut Option<T>, parsed: Result<T, String>) -> Result<(), String> {
    set(field, parsed.map(Some))
}

/// A value read by its type's `FromStr`, around blanks trimmed.
fn text<T: FromStr<Err = String>>(value: &str) -> Result<T, String> {
    value.trim().parse()
}

/// Every `ECR_REFRESH_*` variable the binary reads. One not listed here is refused.
pub const VARIABLES: &[Variable] = &[
    Variable {
        name: "ECR_REFRESH_MODE",
        default: "refresh",
        meaning: "refresh, or check: read-only, report per namespace what keeps its pods from pulling from ECR, write nothing (the same as `ecr-refresh check`)",
        accepted: "refresh or check, in any letter case",
        default_parses: true,
        parse: |v, b| set(&mut b.config.mode, text(v)),
    },
    Variable {
        name: "ECR_REFRESH_SECRET_NAME",
        default: super::DEFAULT_SECRET_NAME,
        meaning: "the pull Secret's name in every namespace (a DNS subdomain name)",
        accepted: "a DNS subdomain name (lowercase letters, digits, '-' and '.', at most 253 characters)",
        default_parses: true,
        parse: |v, b| set(&mut b.config.secret_name, text(v)),
    },
    Variable {
        name: "ECR_REFRESH_INSTALL",
        default: "the pod's ServiceAccount, as <namespace>/<name>; off-cluster, the user the API server says the run is (a ServiceAccount's as <namespace>/<name>)",
        meaning: "this install's name, recorded on each Secret it writes (ecr-refresh/install); a Secret another install wrote, holding registries this one does not write, is refused and left as it is (give each install its own ECR_REFRESH_SECRET_NAME); a write never removes a recorded name",
        accepted: "1 to 253 characters without spaces",
        default_parses: false,
        parse: |v, b| put(&mut b.config.install, text(v)),
    },
    Variable {
        name: "ECR_REFRESH_NAMESPACES",
        default: "all",
        meaning: "comma-separated namespace names and globs (* and ?); literal names need no namespace list, and their Secrets are read by name (per-namespace)",
        accepted: "all, or comma-separated names and globs",
        default_parses: true,
        parse: |v, b| set(&mut b.config.selection.include, parse_include(v)),
    },
    // No pod pulls an image in kube-public (the cluster-info ConfigMap) or kube-node-lease (the
    // kubelets' Leases): a Secret there is one more object with a token to keep, serving nothing.
    Variable {
        name: "ECR_REFRESH_EXCLUDE_NAMESPACES",
        default: "kube-public,kube-node-lease",
        meaning: "comma-separated globs taken out of the selection; setting it replaces the default (no pod pulls in those two), and a namespace named literally in ECR_REFRESH_NAMESPACES is never taken out by the default",
        accepted: "comma-separated globs",
        default_parses: true,
        parse: |v, b| {
            set(
                &mut b.config.selection.exclude,
                parse_list(v, Glob::from_str),
            )
        },
    },
    Variable {
        name: "ECR_REFRESH_NAMESPACE_SELECTOR",
        default: "none",
        meaning: "label selector for namespaces, evaluated by the API server",
        accepted: "a label selector, like team=a,env!=prod,tier in (web,api),!legacy",
        default_parses: false,
        parse: |v, b| put(&mut b.config.selection.label_selector, text(v)),
    },
    Variable {
        name: "ECR_REFRESH_REGISTRIES",
        default: "the caller's own registry in AWS_REGION",
        meaning: "comma-separated registry hosts: <account>.dkr.ecr[-fips].<region>.<suffix>, the dual-stack <account>.dkr-ecr[-fips].<region>.<suffix>, with the suffixes of the region's partition (below), public.ecr.aws, ecr-public.aws.com",
        accepted: "the host forms listed, each suffix in its region's partition; anything else is refused",
        default_parses: false,
        parse: |v, b| {
            set(
                &mut b.config.registries,
                parse_list(v, RegistryHost::from_str).map(first_of_each),
            )
        },
    },
    Variable {
        name: "ECR_REFRESH_DUAL_STACK",
        default: "false",
        meaning: "true: write each registry's dual-stack host too (<account>.dkr-ecr.<region>.on.aws, ecr-public.aws.com), from the same token",
        accepted: "true or false",
        default_parses: true,
        parse: |v, b| set(&mut b.config.dual_stack, parse_bool(v.trim())),
    },
    Variable {
        name: "ECR_REFRESH_DRY_RUN",
        default: "false",
        meaning: "true: server-side dry run (dryRun=All); the API server validates every write and stores nothing",
        accepted: "true or false",
        default_parses: true,
        parse: |v, b| set(&mut b.config.dry_run, parse_bool(v.trim())),
    },
    Variable {
        name: "ECR_REFRESH_CONCURRENCY",
        default: "16",
        meaning: "how many namespaces are written at once",
        accepted: "a whole number from 1 to 1024",
        default_parses: true,
        parse: |v, b| set(&mut b.config.concurrency, parse_concurrency(v.trim())),
    },
    Variable {
        name: "ECR_REFRESH_TIMEOUT",
        default: "5m",
        meaning: "deadline for the whole run (90s, 5m); then nothing new starts and the run reports what it left",
        accepted: "a duration of at least 1s",
        default_parses: true,
        parse: |v, b| set(&mut b.config.timeout, parse_timeout(v.trim())),
    },
    Variable {
        name: "ECR_REFRESH_LOG_FORMAT",
        default: "text",
        meaning: "text or json",
        accepted: "text or json, in any letter case",
        default_parses: true,
        parse: |v, b| set(&mut b.config.log_format, text(v)),
    },
    Variable {
        name: "ECR_REFRESH_SERVICE_ACCOUNTS",
        default: "none",
        meaning: "comma-separated ServiceAccounts (usually default) that get the Secret added to imagePullSecrets",
        accepted: "comma-separated ServiceAccount names (DNS subdomain names)",
        default_parses: false,
        parse: |v, b| {
            set(
                &mut b.config.service_accounts,
                parse_list(v, ServiceAccountName::from_str).map(first_of_each),
            )
        },
    },
    Variable {
        name: "ECR_REFRESH_VERIFY_LOGIN",
        default: "false",
        meaning: "true: try each token against its registry before writing; refused means exit 3, nothing written",
        accepted: "true or false",
        default_parses: true,
        parse: |v, b| set(&mut b.config.verify_login, parse_bool(v.trim())),
    },
    Variable {
        name: "ECR_REFRESH_EVICT_STUCK_PODS",
        default: "false",
        meaning: "true: at the end of a refresh, evict pods stuck in ImagePullBackOff on a covered registry whose replacement will pull with the Secret (needs the evict-stuck-pods rights)",
        accepted: "true or false",
        default_parses: true,
        parse: |v, b| put(&mut b.evict_stuck_pods, parse_bool(v.trim())),
    },
    Variable {
        name: "ECR_REFRESH_EVICT_LIMIT",
        default: "50",
        meaning: "the most pods one run evicts with ECR_REFRESH_EVICT_STUCK_PODS=true; the rest wait for the next run",
        accepted: "a whole number from 1 to 10000",
        default_parses: true,
        parse: |v, b| put(&mut b.evict_limit, parse_evict_limit(v.trim())),
    },
    Variable {
        name: "ECR_REFRESH_RENEW_BEFORE",
        default: "12h",
        meaning: "a Secret is rewritten once its token has less than this left (or it is missing, incomplete or edited); 12h or more: every run rewrites every Secret",
        accepted: "a duration above zero",
        default_parses: true,
        parse: |v, b| set(&mut b.config.renew_before, parse_renew_before(v.trim())),
    },
    Variable {
        name: "ECR_REFRESH_TERMINATION_LOG",
        default: super::DEFAULT_TERMINATION_LOG,
        meaning: "where the run's summary is written as JSON, for kubectl describe pod; the default only in a pod, a path set here always",
        accepted: "a file path",
        default_parses: false,
        parse: |v, b| put(&mut b.config.termination_log, Ok(PathBuf::from(v))),
    },
    Variable {
        name: "ECR_REFRESH_PUSHGATEWAY_URL",
        default: "none",
        meaning: "Prometheus Pushgateway base URL; the run's metrics are pushed there under job ecr-refresh",
        accepted: "an http or https base URL with a host, no query or credentials",
        default_parses: false,
        parse: |v, b| put(&mut b.pushgateway_url, text(v)),
    },
    Variable {
        name: "ECR_REFRESH_PUSHGATEWAY_LABELS",
        default: "none",
        meaning: "grouping labels for the push, comma-separated name=value (cluster=prod-eu)",
        accepted: "name=value pairs with Prometheus label names; only with ECR_REFRESH_PUSHGATEWAY_URL",
        default_parses: false,
        parse: |v, b| put(&mut b.pushgateway_labels, text(v)),
    },
    Variable {
        name: "ECR_REFRESH_ASSUME_ROLE_ARN",
        default: "none",
        meaning: "an IAM role assumed (STS AssumeRole) over the base credentials, whichever source gave them (static keys, a profile, web identity, container, instance metadata); ECR is then called as that role",
        accepted: "an IAM role ARN, arn:<partition>:iam::<12-digit account>:role/<name>",
        default_parses: false,
        parse: |v, b| put(&mut b.assume_role.arn, text(v)),
    },
    Variable {
        name: "ECR_REFRESH_ASSUME_ROLE_EXTERNAL_ID",
        default: "none",
        meaning: "the external id sent with AssumeRole, as the role's trust policy requires (sts:ExternalId)",
        accepted: "2 to 1224 letters, digits and _+=,.@:/-; only with ECR_REFRESH_ASSUME_ROLE_ARN",
        default_parses: false,
        parse: |v, b| put(&mut b.assume_role.external_id, text(v)),
    },
    Variable {
        name: "ECR_REFRESH_ASSUME_ROLE_SESSION_NAME",
        default: "ecr-refresh",
        meaning: "the assumed role's session name, as CloudTrail records it",
        accepted: "2 to 64 letters, digits and _+=,.@-; used only with ECR_REFRESH_ASSUME_ROLE_ARN",
        default_parses: true,
        parse: |v, b| put(&mut b.assume_role.session_name, text(v)),
    },
    Variable {
        name: "ECR_REFRESH_ARGOCD_NAMESPACE",
        default: "none",
        meaning: "Argo CD's namespace (typically argocd): there, two Secrets per private registry in ECR_REFRESH_REGISTRIES hold its token for Argo CD's Helm-OCI or OCI repositories: repo-creds <secret name>-<account>-<region> (url <host>/, every repository under the host) and repository <secret name>-<account>-<region>-repository (url <host>, the host itself); unset: none",
        accepted: "a namespace name (a DNS label); needs private registries named in ECR_REFRESH_REGISTRIES",
        default_parses: false,
        parse: |v, b| put(&mut b.argocd.namespace, text(v)),
    },
    Variable {
        name: "ECR_REFRESH_ARGOCD_TYPE",
        default: "helm",
        meaning: "how Argo CD reads the registry: helm (type helm, enableOCI \"true\", urls <host>/ and <host>) or oci (type oci, urls oci://<host>/ and oci://<host>)",
        accepted: "helm or oci, in any letter case; only with ECR_REFRESH_ARGOCD_NAMESPACE",
        default_parses: true,
        parse: |v, b| put(&mut b.argocd.repo_type, text(v)),
    },
    Variable {
        name: "ECR_REFRESH_ARGOCD_PROJECT",
        default: "none",
        meaning: "the Argo CD project the repository Secrets are for: only that project's Applications get the token for the bare host (Argo CD reads no project on repo-creds, which serve <host>/ in every project); unset: every project",
        accepted: "an Argo CD project name (a DNS subdomain); only with ECR_REFRESH_ARGOCD_NAMESPACE",
        default_parses: false,
        parse: |v, b| put(&mut b.argocd.project, text(v)),
    },
    Variable {
        name: "ECR_REFRESH_CLUSTERS",
        default: "none",
        meaning: "a fleet from one run: the clusters to refresh besides (or instead of) this one, each written as its own ServiceAccount (ECR_REFRESH_CLUSTERS_SERVICE_ACCOUNT): capi (Cluster API's <cluster>-kubeconfig Secrets), argocd (Argo CD's cluster Secrets) or dir:<path> (a directory of kubeconfig files, one cluster each); unset: only the cluster it runs in",
        accepted: "capi, argocd or dir:<path>",
        default_parses: false,
        parse: |v, b| put(&mut b.clusters.source, text(v)),
    },
    Variable {
        name: "ECR_REFRESH_CLUSTERS_NAMESPACE",
        default: "argocd with ECR_REFRESH_CLUSTERS=argocd; none otherwise",
        meaning: "comma-separated namespaces holding the cluster Secrets (the run may get and list Secrets there only); required with capi",
        accepted: "comma-separated namespace names; only with ECR_REFRESH_CLUSTERS=capi or argocd",
        default_parses: false,
        parse: |v, b| {
            put(
                &mut b.clusters.namespaces,
                parse_list(v, NamespaceName::from_str).map(first_of_each),
            )
        },
    },
    Variable {
        name: "ECR_REFRESH_CLUSTERS_SELECTOR",
        default: "none",
        meaning: "a label selector on the cluster Secrets, evaluated by the API server",
        accepted: "a label selector, like fleet=prod; only with ECR_REFRESH_CLUSTERS=capi or argocd",
        default_parses: false,
        parse: |v, b| put(&mut b.clusters.selector, text(v)),
    },
    Variable {
        name: "ECR_REFRESH_CLUSTERS_CONCURRENCY",
        default: "4",
        meaning: "how many clusters are worked on at once (each with ECR_REFRESH_CONCURRENCY namespaces at once)",
        accepted: "a whole number from 1 to 1024",
        default_parses: true,
        parse: |v, b| put(&mut b.clusters.concurrency, parse_concurrency(v.trim())),
    },
    Variable {
        name: "ECR_REFRESH_CLUSTERS_INCLUDE_LOCAL",
        default: "false",
        meaning: "with ECR_REFRESH_CLUSTERS: the cluster the run runs in is refreshed too (as cluster local, with the run's own ServiceAccount)",
        accepted: "true or false, in any letter case",
        default_parses: true,
        parse: |v, b| put(&mut b.clusters.include_local, parse_bool(v)),
    },
    Variable {
        name: "ECR_REFRESH_CLUSTERS_SERVICE_ACCOUNT",
        default: "ecr-refresh/ecr-refresh",
        meaning: "the ServiceAccount in each spoke (the spoke install's) that a refresh's requests there are made as, and that its Secrets record as their install; the kubeconfig's own credential is used for one TokenRequest for it (or to impersonate it)",
        accepted: "<namespace>/<name>",
        default_parses: true,
        parse: |v, b| put(&mut b.clusters.service_account, text(v)),
    },
    Variable {
        name: "ECR_REFRESH_CLUSTERS_CHECK_SERVICE_ACCOUNT",
        default: "ecr-refresh/ecr-refresh-check",
        meaning: "the ServiceAccount in each spoke that `check`'s requests there are made as",
        accepted: "<namespace>/<name>",
        default_parses: true,
        parse: |v, b| put(&mut b.clusters.check_service_account, text(v)),
    },
    Variable {
        name: "ECR_REFRESH_CLUSTERS_AUTH",
        default: "token-request",
        meaning: "how a run acts as the spoke's ServiceAccount: token-request (one TokenRequest, ten minutes, per spoke; the spoke grants create on serviceaccounts/token for it) or impersonate (every request impersonates it; the spoke grants impersonate on it)",
        accepted: "token-request or impersonate, in any letter case",
        default_parses: true,
        parse: |v, b| put(&mut b.clusters.auth, text(v)),
    },
    Variable {
        name: "ECR_REFRESH_ROLES_ANYWHERE_TRUST_ANCHOR_ARN",
        default: "none",
        meaning: "IAM Roles Anywhere: the trust anchor holding the CA that issued the certificate; with the other four ROLES_ANYWHERE values set, Roles Anywhere gives the base credentials (the SDK's sources are not tried), CreateSession asked in the trust anchor's region",
        accepted: "a Roles Anywhere trust-anchor ARN, arn:<partition>:rolesanywhere:<region>:<12-digit account>:trust-anchor/<id>",
        default_parses: false,
        parse: |v, b| put(&mut b.roles_anywhere.trust_anchor_arn, text(v)),
    },
    Variable {
        name: "ECR_REFRESH_ROLES_ANYWHERE_PROFILE_ARN",
        default: "none",
        meaning: "IAM Roles Anywhere: the profile that lists the role",
        accepted: "a Roles Anywhere profile ARN, arn:<partition>:rolesanywhere:<region>:<12-digit account>:profile/<id>",
        default_parses: false,
        parse: |v, b| put(&mut b.roles_anywhere.profile_arn, text(v)),
    },
    Variable {
        name: "ECR_REFRESH_ROLES_ANYWHERE_ROLE_ARN",
        default: "none",
        meaning: "IAM Roles Anywhere: the role whose credentials CreateSession answers (it trusts rolesanywhere.amazonaws.com)",
        accepted: "an IAM role ARN, arn:<partition>:iam::<12-digit account>:role/<name>",
        default_parses: false,
        parse: |v, b| put(&mut b.roles_anywhere.role_arn, text(v)),
    },
    Variable {
        name: "ECR_REFRESH_ROLES_ANYWHERE_CERTIFICATE",
        default: "none",
        meaning: "IAM Roles Anywhere: the certificate's PEM file, read at each run; PEM blocks after the first are intermediates, sent with it (cert-manager's tls.crt)",
        accepted: "a readable PEM file whose first block is an X.509 certificate",
        default_parses: false,
        parse: |v, b| put(&mut b.roles_anywhere.certificate, Ok(PathBuf::from(v))),
    },
    Variable {
        name: "ECR_REFRESH_ROLES_ANYWHERE_PRIVATE_KEY",
        default: "none",
        meaning: "IAM Roles Anywhere: the certificate's private key's PEM file, read at each run, never logged (cert-manager's tls.key)",
        accepted: "a readable PEM file with the certificate's unencrypted RSA (2048 bits or more), EC P-256 or EC P-384 key, PKCS#8, PKCS#1 or SEC 1",
        default_parses: false,
        parse: |v, b| put(&mut b.roles_anywhere.private_key, Ok(PathBuf::from(v))),
    },
    Variable {
        name: "ECR_REFRESH_ROLES_ANYWHERE_CHAIN",
        default: "none",
        meaning: "IAM Roles Anywhere: a PEM bundle of more intermediates, sent after those of the certificate file (never the CA: the trust anchor holds it)",
        accepted: "a readable PEM file of certificates; only with the other ROLES_ANYWHERE values",
        default_parses: false,
        parse: |v, b| put(&mut b.roles_anywhere.chain, Ok(PathBuf::from(v))),
    },
    Variable {
        name: "ECR_REFRESH_ROLES_ANYWHERE_SESSION_DURATION",
        default: "1h",
        meaning: "IAM Roles Anywhere: how long the session's credentials live (CreateSession's durationSeconds; the profile may allow less)",
        accepted: "a duration from 15m to 12h; only with the other ROLES_ANYWHERE values",
        default_parses: true,
        parse: |v, b| {
            put(
                &mut b.roles_anywhere.session_duration,
                parse_session_duration(v.trim()),
            )
        },
    },
    Variable {
        name: "ECR_REFRESH_EVENTS",
        default: "true",
        meaning: "true: a Warning Event (events.k8s.io/v1) in each namespace that failed, regarding its Secret; at most 100 per run, then one in the run's own namespace that counts the rest",
        accepted: "true or false",
        default_parses: true,
        parse: |v, b| set(&mut b.config.events, parse_bool(v.trim())),
    },
];

/// Variables with our prefix that belong to the test suite, not the binary: tolerated so that
/// a shell that exports them can still run the binary.
pub const TEST_VARIABLES: &[&str] = &["ECR_REFRESH_E2E_KUBECONFIG", "ECR_REFRESH_SIGNING_HELPER"];

/// The variable of this name, if the binary reads it.
pub fn named(name: &str) -> Option<&'static Variable> {
    VARIABLES.iter().find(|v| v.name == name)
}

/// The known variable closest to a misspelt one, if any is close.
pub fn nearest(unknown: &str) -> Option<&'static str> {
    VARIABLES
        .iter()
        .map(|known| (strsim::levenshtein(unknown, known.name), known.name))
        .filter(|(distance, _)| *distance <= 4)
        .min()
        .map(|(_, known)| known)
}

/// Every variable's name, comma-separated, for error messages.
pub fn names() -> String {
    VARIABLES
        .iter()
        .map(|v| v.name)
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aws::credentials::SessionName;
    use crate::aws::credentials::roles_anywhere::DEFAULT_SESSION_DURATION;
    use crate::config::{Config, PREFIX};

    #[test]
    fn each_variable_is_defined_once_with_our_prefix() {
        let mut names: Vec<&str> = VARIABLES.iter().map(|v| v.name).collect();
        assert!(names.iter().all(|n| n.starts_with(PREFIX)), "{names:?}");
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), VARIABLES.len(), "a name defined twice");
    }

    #[test]
    fn a_default_that_is_a_value_is_one_its_own_parse_accepts() {
        for v in VARIABLES.iter().filter(|v| v.default_parses) {
            let mut builder = Builder::default();
            assert_eq!((v.parse)(v.default, &mut builder), Ok(()), "{}", v.name);
        }
    }

    /// Where other code names a default too, the table's is the same.
    #[test]
    fn the_defaults_agree_with_the_constants_elsewhere() {
        let c = Config::from_vars([]).expect("the defaults are a configuration");
        assert_eq!(c.renew_before, crate::aws::ecr::TOKEN_LIFETIME);
        assert_eq!(c.concurrency, 16);
        let with_role = Config::from_vars([(
            "ECR_REFRESH_ASSUME_ROLE_ARN".to_owned(),
            "arn:aws:iam::210987654321:role/ecr-reader".to_owned(),
        )])
        .expect("a role to assume");
        assert_eq!(
            with_role.assume_role.map(|r| r.session_name),
            Some(SessionName::default())
        );
        let parsed = |name: &str| {
            let v = named(name).expect("a variable");
            let mut builder = Builder::default();
            (v.parse)(v.default, &mut builder).expect("its default parses");
            builder
        };
        assert_eq!(
            parsed("ECR_REFRESH_ROLES_ANYWHERE_SESSION_DURATION")
                .roles_anywhere
                .session_duration,
            Some(DEFAULT_SESSION_DURATION)
        );
        assert_eq!(
            parsed("ECR_REFRESH_ARGOCD_TYPE").argocd.repo_type,
            Some(crate::argocd::RepoType::default())
        );
    }
}
