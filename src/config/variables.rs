//! Every variable the binary reads, with its default and meaning: the one list that the
//! unknown-variable check, `--help` and the tests of README and manifests/ all read.

/// One environment variable ecr-refresh reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Variable {
    pub name: &'static str,
    /// The default, as a reader would write it.
    pub default: &'static str,
    /// What it does, in one line.
    pub meaning: &'static str,
    /// The values it takes, as its error says: `--help` prints it, and README's Configuration
    /// table must carry it word for word (tests/fake/cli.rs).
    pub accepted: &'static str,
}

/// Every `ECR_REFRESH_*` variable the binary reads. One not listed here is refused.
pub const VARIABLES: &[Variable] = &[
    Variable {
        name: "ECR_REFRESH_MODE",
        default: "refresh",
        meaning: "refresh, or check: read-only, report per namespace what keeps its pods from pulling from ECR, write nothing (the same as `ecr-refresh check`)",
        accepted: "refresh or check, in any letter case",
    },
    Variable {
        name: "ECR_REFRESH_SECRET_NAME",
        default: "aws-ecr-token",
        meaning: "the pull Secret's name in every namespace (a DNS subdomain name)",
        accepted: "a DNS subdomain name (lowercase letters, digits, '-' and '.', at most 253 characters)",
    },
    Variable {
        name: "ECR_REFRESH_INSTALL",
        default: "the pod's ServiceAccount, as <namespace>/<name>; off-cluster, the user the API server says the run is (a ServiceAccount's as <namespace>/<name>)",
        meaning: "this install's name, recorded on each Secret it writes (ecr-refresh/install); a Secret another install wrote, holding registries this one does not write, is refused and left as it is (give each install its own ECR_REFRESH_SECRET_NAME); a write never removes a recorded name",
        accepted: "1 to 253 characters without spaces",
    },
    Variable {
        name: "ECR_REFRESH_NAMESPACES",
        default: "all",
        meaning: "comma-separated namespace names and globs (* and ?); literal names need no namespace list, and their Secrets are read by name (per-namespace)",
        accepted: "all, or comma-separated names and globs",
    },
    Variable {
        name: "ECR_REFRESH_EXCLUDE_NAMESPACES",
        default: "kube-public,kube-node-lease",
        meaning: "comma-separated globs taken out of the selection; setting it replaces the default (no pod pulls in those two), and a namespace named literally in ECR_REFRESH_NAMESPACES is never taken out by the default",
        accepted: "comma-separated globs",
    },
    Variable {
        name: "ECR_REFRESH_NAMESPACE_SELECTOR",
        default: "none",
        meaning: "label selector for namespaces, evaluated by the API server",
        accepted: "a label selector, like team=a,env!=prod,tier in (web,api),!legacy",
    },
    Variable {
        name: "ECR_REFRESH_REGISTRIES",
        default: "the caller's own registry in AWS_REGION",
        meaning: "comma-separated registry hosts: <account>.dkr.ecr[-fips].<region>.<suffix>, the dual-stack <account>.dkr-ecr[-fips].<region>.<suffix>, with the suffixes of the region's partition (below), public.ecr.aws, ecr-public.aws.com",
        accepted: "the host forms listed, each suffix in its region's partition; anything else is refused",
    },
    Variable {
        name: "ECR_REFRESH_DUAL_STACK",
        default: "false",
        meaning: "true: write each registry's dual-stack host too (<account>.dkr-ecr.<region>.on.aws, ecr-public.aws.com), from the same token",
        accepted: "true or false",
    },
    Variable {
        name: "ECR_REFRESH_DRY_RUN",
        default: "false",
        meaning: "true: server-side dry run (dryRun=All); the API server validates every write and stores nothing",
        accepted: "true or false",
    },
    Variable {
        name: "ECR_REFRESH_CONCURRENCY",
        default: "16",
        meaning: "how many namespaces are written at once",
        accepted: "a whole number from 1 to 1024",
    },
    Variable {
        name: "ECR_REFRESH_TIMEOUT",
        default: "5m",
        meaning: "deadline for the whole run (90s, 5m); then nothing new starts and the run reports what it left",
        accepted: "a duration of at least 1s",
    },
    Variable {
        name: "ECR_REFRESH_LOG_FORMAT",
        default: "text",
        meaning: "text or json",
        accepted: "text or json, in any letter case",
    },
    Variable {
        name: "ECR_REFRESH_SERVICE_ACCOUNTS",
        default: "none",
        meaning: "comma-separated ServiceAccounts (usually default) that get the Secret added to imagePullSecrets",
        accepted: "comma-separated ServiceAccount names (DNS subdomain names)",
    },
    Variable {
        name: "ECR_REFRESH_VERIFY_LOGIN",
        default: "false",
        meaning: "true: try each token against its registry before writing; refused means exit 3, nothing written",
        accepted: "true or false",
    },
    Variable {
        name: "ECR_REFRESH_EVICT_STUCK_PODS",
        default: "false",
        meaning: "true: at the end of a refresh, evict pods stuck in ImagePullBackOff on a covered registry whose replacement will pull with the Secret (needs the evict-stuck-pods rights)",
        accepted: "true or false",
    },
    Variable {
        name: "ECR_REFRESH_EVICT_LIMIT",
        default: "50",
        meaning: "the most pods one run evicts with ECR_REFRESH_EVICT_STUCK_PODS=true; the rest wait for the next run",
        accepted: "a whole number from 1 to 10000",
    },
    Variable {
        name: "ECR_REFRESH_RENEW_BEFORE",
        default: "12h",
        meaning: "a Secret is rewritten once its token has less than this left (or it is missing, incomplete or edited); 12h or more: every run rewrites every Secret",
        accepted: "a duration above zero",
    },
    Variable {
        name: "ECR_REFRESH_TERMINATION_LOG",
        default: "/dev/termination-log",
        meaning: "where the run's summary is written as JSON, for kubectl describe pod; the default only in a pod, a path set here always",
        accepted: "a file path",
    },
    Variable {
        name: "ECR_REFRESH_PUSHGATEWAY_URL",
        default: "none",
        meaning: "Prometheus Pushgateway base URL; the run's metrics are pushed there under job ecr-refresh",
        accepted: "an http or https base URL with a host, no query or credentials",
    },
    Variable {
        name: "ECR_REFRESH_PUSHGATEWAY_LABELS",
        default: "none",
        meaning: "grouping labels for the push, comma-separated name=value (cluster=prod-eu)",
        accepted: "name=value pairs with Prometheus label names; only with ECR_REFRESH_PUSHGATEWAY_URL",
    },
    Variable {
        name: "ECR_REFRESH_ASSUME_ROLE_ARN",
        default: "none",
        meaning: "an IAM role assumed (STS AssumeRole) over the base credentials, whichever source gave them (static keys, a profile, web identity, container, instance metadata); ECR is then called as that role",
        accepted: "an IAM role ARN, arn:<partition>:iam::<12-digit account>:role/<name>",
    },
    Variable {
        name: "ECR_REFRESH_ASSUME_ROLE_EXTERNAL_ID",
        default: "none",
        meaning: "the external id sent with AssumeRole, as the role's trust policy requires (sts:ExternalId)",
        accepted: "2 to 1224 letters, digits and _+=,.@:/-; only with ECR_REFRESH_ASSUME_ROLE_ARN",
    },
    Variable {
        name: "ECR_REFRESH_ASSUME_ROLE_SESSION_NAME",
        default: "ecr-refresh",
        meaning: "the assumed role's session name, as CloudTrail records it",
        accepted: "2 to 64 letters, digits and _+=,.@-; used only with ECR_REFRESH_ASSUME_ROLE_ARN",
    },
    Variable {
        name: "ECR_REFRESH_ARGOCD_NAMESPACE",
        default: "none",
        meaning: "Argo CD's namespace (typically argocd): there, two Secrets per private registry in ECR_REFRESH_REGISTRIES hold its token for Argo CD's Helm-OCI or OCI repositories: repo-creds <secret name>-<account>-<region> (url <host>/, every repository under the host) and repository <secret name>-<account>-<region>-repository (url <host>, the host itself); unset: none",
        accepted: "a namespace name (a DNS label); needs private registries named in ECR_REFRESH_REGISTRIES",
    },
    Variable {
        name: "ECR_REFRESH_ARGOCD_TYPE",
        default: "helm",
        meaning: "how Argo CD reads the registry: helm (type helm, enableOCI \"true\", urls <host>/ and <host>) or oci (type oci, urls oci://<host>/ and oci://<host>)",
        accepted: "helm or oci, in any letter case; only with ECR_REFRESH_ARGOCD_NAMESPACE",
    },
    Variable {
        name: "ECR_REFRESH_ARGOCD_PROJECT",
        default: "none",
        meaning: "the Argo CD project the repository Secrets are for: only that project's Applications get the token for the bare host (Argo CD reads no project on repo-creds, which serve <host>/ in every project); unset: every project",
        accepted: "an Argo CD project name (a DNS subdomain); only with ECR_REFRESH_ARGOCD_NAMESPACE",
    },
    Variable {
        name: "ECR_REFRESH_ROLES_ANYWHERE_TRUST_ANCHOR_ARN",
        default: "none",
        meaning: "IAM Roles Anywhere: the trust anchor holding the CA that issued the certificate; with the other four ROLES_ANYWHERE values set, Roles Anywhere gives the base credentials (the SDK's sources are not tried), CreateSession asked in the trust anchor's region",
        accepted: "a Roles Anywhere trust-anchor ARN, arn:<partition>:rolesanywhere:<region>:<12-digit account>:trust-anchor/<id>",
    },
    Variable {
        name: "ECR_REFRESH_ROLES_ANYWHERE_PROFILE_ARN",
        default: "none",
        meaning: "IAM Roles Anywhere: the profile that lists the role",
        accepted: "a Roles Anywhere profile ARN, arn:<partition>:rolesanywhere:<region>:<12-digit account>:profile/<id>",
    },
    Variable {
        name: "ECR_REFRESH_ROLES_ANYWHERE_ROLE_ARN",
        default: "none",
        meaning: "IAM Roles Anywhere: the role whose credentials CreateSession answers (it trusts rolesanywhere.amazonaws.com)",
        accepted: "an IAM role ARN, arn:<partition>:iam::<12-digit account>:role/<name>",
    },
    Variable {
        name: "ECR_REFRESH_ROLES_ANYWHERE_CERTIFICATE",
        default: "none",
        meaning: "IAM Roles Anywhere: the certificate's PEM file, read at each run; PEM blocks after the first are intermediates, sent with it (cert-manager's tls.crt)",
        accepted: "a readable PEM file whose first block is an X.509 certificate",
    },
    Variable {
        name: "ECR_REFRESH_ROLES_ANYWHERE_PRIVATE_KEY",
        default: "none",
        meaning: "IAM Roles Anywhere: the certificate's private key's PEM file, read at each run, never logged (cert-manager's tls.key)",
        accepted: "a readable PEM file with the certificate's unencrypted RSA (2048 bits or more), EC P-256 or EC P-384 key, PKCS#8, PKCS#1 or SEC 1",
    },
    Variable {
        name: "ECR_REFRESH_ROLES_ANYWHERE_CHAIN",
        default: "none",
        meaning: "IAM Roles Anywhere: a PEM bundle of more intermediates, sent after those of the certificate file (never the CA: the trust anchor holds it)",
        accepted: "a readable PEM file of certificates; only with the other ROLES_ANYWHERE values",
    },
    Variable {
        name: "ECR_REFRESH_ROLES_ANYWHERE_SESSION_DURATION",
        default: "1h",
        meaning: "IAM Roles Anywhere: how long the session's credentials live (CreateSession's durationSeconds; the profile may allow less)",
        accepted: "a duration from 15m to 12h; only with the other ROLES_ANYWHERE values",
    },
    Variable {
        name: "ECR_REFRESH_EVENTS",
        default: "true",
        meaning: "true: a Warning Event (events.k8s.io/v1) in each namespace that failed, regarding its Secret; at most 100 per run, then one in the run's own namespace that counts the rest",
        accepted: "true or false",
    },
];

/// Variables with our prefix that belong to the test suite, not the binary: tolerated so that
/// a shell that exports them can still run the binary.
pub const TEST_VARIABLES: &[&str] = &["ECR_REFRESH_E2E_KUBECONFIG", "ECR_REFRESH_SIGNING_HELPER"];

/// Whether the binary reads this variable.
pub fn is_known(name: &str) -> bool {
    VARIABLES.iter().any(|v| v.name == name)
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
