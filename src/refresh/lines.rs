//! The log lines an operator reads: one per namespace, and the summary.

use std::fmt::Display;
use std::time::SystemTime;

use tracing::{Level, error, warn};

use super::report::{Report, Summary};
use crate::config::Config;
use crate::owned::{Settled, SkipReason};
use crate::report::{AccountOutcome, Outcome, exit};
use crate::run::end::NOTHING_SELECTED;

/// A Secret the run stopped before: `registry` is an Argo CD Secret's (None: a namespace's).
pub(super) fn log_left_undone(namespace: &str, secret: &str, registry: Option<&str>, reason: &str) {
    let error = format!("left undone: {reason}; the next run covers it");
    log_failed(namespace, secret, registry, &error);
}

/// The one line for a Secret that failed: a namespace's pull Secret, or (with the `registry` it
/// holds the token of) an Argo CD Secret.
pub(super) fn log_failed(
    namespace: &str,
    secret: &str,
    registry: Option<&str>,
    error: &dyn Display,
) {
    let (argocd, message) = match registry {
        Some(_) => (Some(true), "Argo CD Secret failed"),
        None => (None, "namespace failed"),
    };
    // `as_str`, not `%`: a &str field is quoted in text logs, as every other line's outcome is.
    error!(namespace, secret, argocd, registry, outcome = Outcome::Failed.as_str(), uid_before = "-", uid_after = "-", %error, "{message}");
}

/// One line per registry whose entry this run removed from the pull Secrets, because an earlier
/// write of ours recorded it and this run's configuration no longer names it: pods that pull
/// from it lose their token. Two setups sharing one identity with different registries undo
/// each other this way; the line says so, once per run.
pub(super) fn log_dropped(dropped: &std::collections::BTreeMap<String, usize>, dry_run: bool) {
    for (registry, &namespaces) in dropped {
        if dry_run {
            warn!(
                registry = registry.as_str(),
                namespaces,
                "dry run: would remove this registry's entry from the pull Secret: it is no longer configured \
                 (ECR_REFRESH_REGISTRIES), but an earlier run wrote it"
            );
        } else {
            warn!(
                registry = registry.as_str(),
                namespaces,
                "removed this registry's entry from the pull Secret: it is no longer configured \
                 (ECR_REFRESH_REGISTRIES), but an earlier run wrote it; pods pulling from it now fail. If \
                 another setup with the same identity writes it, give each its own ECR_REFRESH_SECRET_NAME"
            );
        }
    }
}

/// What an Argo CD Secret's line says besides a pull Secret's.
pub(super) struct ArgoCdFields<'a> {
    pub registry: &'a str,
    pub repo_type: &'a str,
}

/// A Secret's one line, a namespace's pull Secret's or (`argocd`) an Argo CD Secret's: the
/// level says how it went, the fields what happened.
pub(super) fn log_written(
    namespace: &str,
    secret: &str,
    argocd: Option<ArgoCdFields<'_>>,
    w: &Settled,
    accounts: &str,
    account_error: &str,
) {
    let uid_before = w.uid_before.as_deref().unwrap_or("-");
    let uid_after = w.uid_after.as_deref().unwrap_or("-");
    let outcome = w.outcome.as_str();
    let reason = w.reason.map(SkipReason::as_str);
    let what = if argocd.is_some() {
        "Argo CD Secret"
    } else {
        "Secret"
    };
    let message = match (w.outcome, w.reason) {
        (Outcome::Created, _) => format!("{what} created"),
        (Outcome::Updated, _) if w.removed_last_applied => format!(
            "{what} updated in place; removed kubectl's last-applied-configuration annotation, which held a copy of the old password"
        ),
        (Outcome::Updated, _) => format!("{what} updated in place"),
        (Outcome::Recreated, _) => {
            format!("{what} was deleted during the run; created it fresh with the new token")
        }
        (Outcome::WouldCreate, _) => format!("dry run: {what} would be created"),
        (Outcome::WouldUpdate, _) => format!("dry run: {what} would be updated in place"),
        (Outcome::Fresh, _) => format!("{what} is fresh: not due, not written"),
        (Outcome::Skipped | Outcome::Failed, _) if argocd.is_some() => {
            "Argo CD Secret not written".to_owned()
        }
        (Outcome::Skipped, Some(SkipReason::NamespaceNotFound)) => {
            "namespace skipped: it does not exist; check ECR_REFRESH_NAMESPACES for a typo"
                .to_owned()
        }
        (Outcome::Skipped, Some(SkipReason::NamespaceDeleted)) => {
            "namespace skipped: it was deleted during the run".to_owned()
        }
        (Outcome::Skipped, _) => "namespace skipped".to_owned(),
        (Outcome::Failed, _) => "namespace failed".to_owned(),
    };
    let (argocd, registry, repo_type) = match argocd {
        Some(a) => (Some(true), Some(a.registry), Some(a.repo_type)),
        None => (None, None, None),
    };
    // Fields that say nothing in the common case are left out of the line.
    let service_accounts = (!accounts.is_empty()).then_some(accounts);
    let kept_entries = (w.kept_entries > 0).then_some(w.kept_entries);
    let dropped = w.dropped_entries.join(",");
    let dropped_entries = (!dropped.is_empty()).then_some(dropped.as_str());
    let warning = w.warning.as_deref();
    let error = (!account_error.is_empty()).then_some(account_error);
    let due = w.due.as_deref();
    let rfc3339 =
        |t: Option<SystemTime>| t.map(|t| humantime::format_rfc3339_seconds(t).to_string());
    let (expires_at, due_at) = (rfc3339(w.expires_at), rfc3339(w.due_at));
    let (expires_at, due_at) = (expires_at.as_deref(), due_at.as_deref());
    macro_rules! line {
        ($level:expr) => {
            tracing::event!(
                $level,
                namespace,
                secret,
                argocd,
                registry,
                repo_type,
                outcome,
                uid_before,
                uid_after,
                reason,
                due,
                expires_at,
                due_at,
                service_accounts,
                kept_entries,
                dropped_entries,
                warning,
                error,
                "{message}"
            )
        };
    }
    if error.is_some() {
        line!(Level::ERROR);
    } else if warning.is_some() || w.reason == Some(SkipReason::NamespaceNotFound) {
        line!(Level::WARN);
    } else {
        line!(Level::INFO);
    }
}

/// The run's summary: INFO when it succeeded, WARN when only names in the list are wrong,
/// ERROR when namespaces failed or were not reached.
pub(super) fn log_summary(report: &Report, summary: &Summary, config: &Config) {
    let (level, message) = if report.exit_code() == exit::OK {
        (Level::INFO, "run complete")
    } else if report.nothing_selected() {
        (Level::WARN, NOTHING_SELECTED)
    } else if report.failed.is_empty()
        && report.argocd_failed.is_empty()
        && !report.listing_incomplete
    {
        (
            Level::WARN,
            "run finished: namespaces named in ECR_REFRESH_NAMESPACES do not exist; fix the list",
        )
    } else {
        (Level::ERROR, "run finished with failures")
    };
    let not_found = report.not_found.join(",");
    let registries = summary.registries.join(",");
    let registries = (!registries.is_empty()).then_some(registries.as_str());
    let token_expires_at =
        (!summary.token_expires_at.is_empty()).then_some(summary.token_expires_at.as_str());
    let sa = |outcome| report.service_accounts.get(&outcome).copied().unwrap_or(0);
    // Absent without ECR_REFRESH_EVICT_STUCK_PODS.
    let pods = report.evictions;
    let pods_evicted = pods.map(|p| p.evicted);
    let pods_would_evict = pods.map(|p| p.would_evict);
    let pods_left = pods.map(|p| p.left);
    macro_rules! summary {
        ($level:expr) => {
            tracing::event!($level,
        namespaces = report.total(),
        created = report.count(Outcome::Created),
        updated = report.count(Outcome::Updated),
        fresh = report.count(Outcome::Fresh),
        recreated = report.count(Outcome::Recreated),
        skipped = report.count(Outcome::Skipped),
        failed = report.count(Outcome::Failed),
        // Namespaces whose Secret was written but a ServiceAccount failed count here too.
        namespaces_failed = report.failed.len(),
        would_write = report.count(Outcome::WouldCreate) + report.count(Outcome::WouldUpdate),
        sa_added = sa(AccountOutcome::Added),
        sa_present = sa(AccountOutcome::Present),
        sa_missing = sa(AccountOutcome::Missing),
        sa_would_add = sa(AccountOutcome::WouldAdd),
        sa_failed = sa(AccountOutcome::Failed),
        listing_incomplete = report.listing_incomplete,
        // Argo CD Secrets (ECR_REFRESH_ARGOCD_NAMESPACE): 0 when that is off.
        argocd_written = report.argocd_count(Outcome::Created) + report.argocd_count(Outcome::Updated) + report.argocd_count(Outcome::Recreated),
        argocd_fresh = report.argocd_count(Outcome::Fresh),
        argocd_would_write = report.argocd_count(Outcome::WouldCreate) + report.argocd_count(Outcome::WouldUpdate),
        argocd_failed = report.argocd_failed.len(),
        not_found = report.not_found.len(),
        not_found_namespaces = %not_found,
        // Secrets never read, or whose write was abandoned: their expiry is not known.
        unknown = report.unknown,
        pods_evicted,
        pods_would_evict,
        pods_left,
        dry_run = config.dry_run,
        // Left out when nothing was due: no token was fetched.
        tokens_fetched = !summary.token_expires_at.is_empty(),
        registries,
        token_expires_at,
        elapsed_ms = summary.elapsed_ms,
        "{message}"
            )
        };
    }
    // The level must be a constant at each call site.
    match level {
        Level::ERROR => summary!(Level::ERROR),
        Level::WARN => summary!(Level::WARN),
        _ => summary!(Level::INFO),
    }
}
