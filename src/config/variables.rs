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
}

/// Every `ECR_REFRESH_*` variable the binary reads. One not listed here is refused.
pub const VARIABLES: &[Variable] = &[
    Variable {
        name: "ECR_REFRESH_SECRET_NAME",
        default: "aws-ecr-token",
        meaning: "the pull Secret's name in every namespace (a DNS subdomain name)",
    },
    Variable {
        name: "ECR_REFRESH_NAMESPACES",
        default: "all",
        meaning: "comma-separated namespace names and globs (* and ?); literal names need no namespace list",
    },
    Variable {
        name: "ECR_REFRESH_EXCLUDE_NAMESPACES",
        default: "none",
        meaning: "comma-separated globs taken out of the selection",
    },
    Variable {
        name: "ECR_REFRESH_NAMESPACE_SELECTOR",
        default: "none",
        meaning: "label selector for namespaces, evaluated by the API server",
    },
    Variable {
        name: "ECR_REFRESH_REGISTRIES",
        default: "the caller's own registry in AWS_REGION",
        meaning: "comma-separated registry hosts: <account>.dkr.ecr.<region>.amazonaws.com, its FIPS, China and dual-stack forms, public.ecr.aws",
    },
    Variable {
        name: "ECR_REFRESH_DUAL_STACK",
        default: "false",
        meaning: "true: write each registry's dual-stack host too (<account>.dkr-ecr.<region>.on.aws, ecr-public.aws.com), from the same token",
    },
    Variable {
        name: "ECR_REFRESH_DRY_RUN",
        default: "false",
        meaning: "true: server-side dry run (dryRun=All); the API server validates every write and stores nothing",
    },
    Variable {
        name: "ECR_REFRESH_CONCURRENCY",
        default: "16",
        meaning: "how many namespaces are written at once (1 to 1024)",
    },
    Variable {
        name: "ECR_REFRESH_TIMEOUT",
        default: "5m",
        meaning: "deadline for the whole run (90s, 5m); then nothing new starts and the run reports what it left",
    },
    Variable {
        name: "ECR_REFRESH_LOG_FORMAT",
        default: "text",
        meaning: "text or json",
    },
    Variable {
        name: "ECR_REFRESH_SERVICE_ACCOUNTS",
        default: "none",
        meaning: "comma-separated ServiceAccounts (usually default) that get the Secret added to imagePullSecrets",
    },
    Variable {
        name: "ECR_REFRESH_VERIFY_LOGIN",
        default: "false",
        meaning: "true: try each token against its registry before writing; refused means exit 3, nothing written",
    },
    Variable {
        name: "ECR_REFRESH_RENEW_BEFORE",
        default: "12h",
        meaning: "a Secret is rewritten once its token has less than this left (or it is missing, incomplete or edited); 12h or more: every run rewrites every Secret",
    },
    Variable {
        name: "ECR_REFRESH_TERMINATION_LOG",
        default: "/dev/termination-log",
        meaning: "where the run's summary is written as JSON, for kubectl describe pod; the default only in a pod, a path set here always",
    },
    Variable {
        name: "ECR_REFRESH_PUSHGATEWAY_URL",
        default: "none",
        meaning: "Prometheus Pushgateway base URL; the run's metrics are pushed there under job ecr-refresh",
    },
    Variable {
        name: "ECR_REFRESH_PUSHGATEWAY_LABELS",
        default: "none",
        meaning: "grouping labels for the push, comma-separated name=value (cluster=prod-eu)",
    },
    Variable {
        name: "ECR_REFRESH_EVENTS",
        default: "true",
        meaning: "true: a Warning Event (events.k8s.io/v1) in each namespace that failed, regarding its Secret",
    },
];

/// Variables with our prefix that belong to the test suite, not the binary: tolerated so that
/// a shell that exports them can still run the binary.
pub const TEST_VARIABLES: &[&str] = &["ECR_REFRESH_E2E_KUBECONFIG"];

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
