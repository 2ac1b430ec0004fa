//! A refresh's report: the tally of what each namespace and Argo CD Secret came to, the
//! run-wide facts beside it, the exit code and the termination message. Its log lines are in
//! `lines`, its metrics in `metrics`.

use std::collections::BTreeMap;
use std::time::SystemTime;

use crate::report::{AccountOutcome, Evictions, Outcome, exit};
use crate::termination;

/// The run's tally.
#[derive(Debug, Default)]
pub struct Report {
    pub outcomes: BTreeMap<Outcome, usize>,
    pub service_accounts: BTreeMap<AccountOutcome, usize>,
    /// Failed namespaces, in the order they failed.
    pub failed: Vec<String>,
    /// The namespace list could not be completed; some namespaces may not have been seen.
    pub listing_incomplete: bool,
    /// Namespaces named in ECR_REFRESH_NAMESPACES that do not exist (skipped): a typo, or a
    /// namespace gone, either way the configuration names something that is not there.
    pub not_found: Vec<String>,
    /// The earliest expiry among the Secrets as they stand after the run: when the first pull
    /// fails unless a run refreshes it. Every Secret whose expiry the run knows counts: written,
    /// fresh, and read but not written (a failed write leaves it as it was read).
    pub earliest_expiry: Option<SystemTime>,
    /// Selected namespaces whose Secret the run never read (left undone at a stop, a read that
    /// failed) or whose write it abandoned: what they hold, and when it expires, is not known.
    pub unknown: usize,
    /// The Argo CD Secrets (ECR_REFRESH_ARGOCD_NAMESPACE), by outcome; empty when that is off.
    pub argocd: BTreeMap<Outcome, usize>,
    /// The Argo CD Secrets that failed, by name: the run exits 1, as for a failed namespace.
    pub argocd_failed: Vec<String>,
    /// ECR_REFRESH_EVICT_STUCK_PODS's pods; None when the option is off. Never changes the
    /// exit code.
    pub evictions: Option<Evictions>,
}

impl Report {
    pub fn record(&mut self, namespace: &str, outcome: Outcome, accounts: &[AccountOutcome]) {
        *self.outcomes.entry(outcome).or_default() += 1;
        for account in accounts {
            *self.service_accounts.entry(*account).or_default() += 1;
        }
        if outcome == Outcome::Failed || accounts.contains(&AccountOutcome::Failed) {
            self.failed.push(namespace.to_owned());
        }
    }

    /// Keeps the earliest of the Secrets' expiries (`owned::Settled::expires_at`).
    pub fn record_expiry(&mut self, expires_at: Option<SystemTime>) {
        if let Some(at) = expires_at {
            self.earliest_expiry = Some(self.earliest_expiry.map_or(at, |e| e.min(at)));
        }
    }

    /// One Argo CD Secret's outcome.
    pub fn record_argocd(&mut self, name: &str, outcome: Outcome) {
        *self.argocd.entry(outcome).or_default() += 1;
        if outcome == Outcome::Failed {
            self.argocd_failed.push(name.to_owned());
        }
    }

    pub fn argocd_count(&self, outcome: Outcome) -> usize {
        self.argocd.get(&outcome).copied().unwrap_or(0)
    }

    pub fn count(&self, outcome: Outcome) -> usize {
        self.outcomes.get(&outcome).copied().unwrap_or(0)
    }

    pub fn total(&self) -> usize {
        self.outcomes.values().sum()
    }

    /// No namespace was selected at all: a typo in a selector or glob selects nothing, and
    /// that is something asked for and not done (exit 1), not a quiet success.
    pub fn nothing_selected(&self) -> bool {
        self.total() == 0 && self.not_found.is_empty() && !self.listing_incomplete
    }

    pub fn exit_code(&self) -> u8 {
        if self.failed.is_empty()
            && self.argocd_failed.is_empty()
            && !self.listing_incomplete
            && self.not_found.is_empty()
            && !self.nothing_selected()
        {
            exit::OK
        } else {
            exit::FAILED
        }
    }

    /// The summary as compact JSON under the kubelet's 4096-byte limit: the counts always,
    /// then as many names of failed and missing namespaces and of registries as fit, with
    /// `truncated` set when any list was cut (each list's `_total` says how long it was).
    pub fn termination_message(&self, extra: &Summary) -> String {
        let lists = [&self.failed[..], &self.not_found, &extra.registries];
        termination::fit(lists, |[failed, not_found, registries]| {
            let truncated = failed.len() < self.failed.len()
                || not_found.len() < self.not_found.len()
                || registries.len() < extra.registries.len();
            let mut message = serde_json::json!({
                "exit_code": self.exit_code(),
                "outcomes": self.outcomes,
                "service_accounts": self.service_accounts,
                "failed": failed,
                "failed_total": self.failed.len(),
                "failed_truncated": failed.len() < self.failed.len(),
                "listing_incomplete": self.listing_incomplete,
                "not_found": not_found,
                "not_found_total": self.not_found.len(),
                "registries": registries,
                "registries_total": extra.registries.len(),
                "truncated": truncated,
                "token_expires_at": extra.token_expires_at,
                "elapsed_ms": extra.elapsed_ms,
            });
            // Only with the option on: a few Secrets, named in full.
            if !self.argocd.is_empty() {
                message["argocd"] = serde_json::json!(self.argocd);
                message["argocd_failed"] = serde_json::json!(self.argocd_failed);
            }

            if let Some(pods) = &self.evictions {
                message["pods"] = serde_json::json!(pods);
            }
            message.to_string()
        })
    }
}

/// Run-wide facts for the summary.
#[derive(Debug, Clone, Default)]
pub struct Summary {
    pub registries: Vec<String>,
    pub token_expires_at: String,
    pub elapsed_ms: u64,
    /// Each token's expiry (by region; ECR Public's as `ecr-public`), empty when no token was
    /// fetched, for the metrics.
    pub token_expiry: BTreeMap<String, SystemTime>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_exit_code_is_zero_only_when_nothing_failed() {
        let mut r = Report::default();
        r.record("a", Outcome::Updated, &[]);
        r.record("b", Outcome::Skipped, &[AccountOutcome::Missing]);
        r.record("c", Outcome::Created, &[AccountOutcome::Added]);
        assert_eq!(r.exit_code(), exit::OK);
        r.record("d", Outcome::Updated, &[AccountOutcome::Failed]);
        assert_eq!(r.exit_code(), exit::FAILED);
        assert_eq!(r.failed, ["d"]);

        let incomplete = Report {
            listing_incomplete: true,
            ..Report::default()
        };
        assert_eq!(incomplete.exit_code(), exit::FAILED);

        let named_but_missing = Report {
            not_found: vec!["typo".into()],
            ..Report::default()
        };
        assert_eq!(named_but_missing.exit_code(), exit::FAILED);
    }

    #[test]
    fn counts_are_kept_per_outcome() {
        let mut r = Report::default();
        for (ns, o) in [
            ("a", Outcome::Updated),
            ("b", Outcome::Updated),
            ("c", Outcome::Failed),
        ] {
            r.record(ns, o, &[AccountOutcome::Present]);
        }
        assert_eq!(r.count(Outcome::Updated), 2);
        assert_eq!(r.total(), 3);
        assert_eq!(r.service_accounts[&AccountOutcome::Present], 3);
    }

    #[test]
    fn the_earliest_expiry_is_the_minimum_recorded() {
        use std::time::{Duration, UNIX_EPOCH};
        let at = |s| Some(UNIX_EPOCH + Duration::from_secs(s));
        let mut r = Report::default();
        r.record_expiry(None);
        assert_eq!(r.earliest_expiry, None);
        for s in [300, 100, 200] {
            r.record_expiry(at(s));
        }
        r.record_expiry(None);
        assert_eq!(r.earliest_expiry, at(100));
    }

    #[test]
    fn the_termination_message_fits_with_ten_thousand_failures() {
        let mut r = Report::default();
        for i in 0..10_000 {
            r.record(&format!("tenant-namespace-{i:05}"), Outcome::Failed, &[]);
        }
        let summary = Summary {
            registries: vec!["123456789012.dkr.ecr.eu-west-1.amazonaws.com".into()],
            token_expires_at: "2026-11-30T20:00:00Z".into(),
            elapsed_ms: 1234,
            ..Summary::default()
        };
        let message = r.termination_message(&summary);
        assert!(message.len() < 4096, "{} bytes", message.len());
        let value: serde_json::Value = serde_json::from_str(&message).unwrap();
        assert_eq!(value["outcomes"]["failed"], 10_000);
        assert_eq!(value["failed_total"], 10_000);
        assert_eq!(value["failed_truncated"], true);
        assert_eq!(value["truncated"], true);
        assert!(value["failed"].as_array().unwrap().len() > 50);
    }

    #[test]
    fn the_termination_message_fits_with_many_missing_namespaces_and_registries() {
        let r = Report {
            not_found: (0..2_000)
                .map(|i| format!("listed-but-missing-{i:05}"))
                .collect(),
            ..Report::default()
        };
        let summary = Summary {
            registries: (0..300)
                .map(|i| format!("{:012}.dkr.ecr.eu-west-1.amazonaws.com", i))
                .collect(),
            ..Summary::default()
        };
        let message = r.termination_message(&summary);
        assert!(message.len() < 4096, "{} bytes", message.len());
        let value: serde_json::Value =
            serde_json::from_str(&message).expect("JSON, not a cut prefix");
        assert_eq!(value["truncated"], true);
        assert_eq!(value["not_found_total"], 2_000);
        assert_eq!(value["registries_total"], 300);
        assert_eq!(value["failed_truncated"], false);
        let shown = value["not_found"].as_array().unwrap().len()
            + value["registries"].as_array().unwrap().len();
        assert!(shown > 40, "as many names as fit: {shown}");
        assert_eq!(value["exit_code"], 1);
    }

    #[test]
    fn a_short_message_is_not_marked_truncated() {
        let r = Report {
            not_found: vec!["team-x".into()],
            ..Report::default()
        };
        let value: serde_json::Value =
            serde_json::from_str(&r.termination_message(&Summary::default())).unwrap();
        assert_eq!(value["truncated"], false);
        assert_eq!(value["not_found"], serde_json::json!(["team-x"]));
    }

    #[test]
    fn a_failed_argo_cd_secret_fails_the_run_and_is_named_in_the_termination_message() {
        let mut r = Report::default();
        r.record("a", Outcome::Updated, &[]);
        let message = r.termination_message(&Summary::default());
        assert!(!message.contains("argocd"), "off: not mentioned: {message}");
        r.record_argocd("aws-ecr-token-123456789012-us-east-1", Outcome::Updated);
        assert_eq!(r.exit_code(), exit::OK);
        r.record_argocd("aws-ecr-token-210987654321-eu-west-1", Outcome::Failed);
        assert_eq!(r.exit_code(), exit::FAILED);
        let value: serde_json::Value =
            serde_json::from_str(&r.termination_message(&Summary::default())).unwrap();
        assert_eq!(
            value["argocd"],
            serde_json::json!({"updated": 1, "failed": 1})
        );
        assert_eq!(
            value["argocd_failed"],
            serde_json::json!(["aws-ecr-token-210987654321-eu-west-1"])
        );
        assert_eq!(
            value["failed"],
            serde_json::json!([]),
            "no namespace failed"
        );
    }
}
