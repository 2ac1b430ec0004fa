//! Outcome bookkeeping: what happened in each namespace, the summary and the exit code.

use std::collections::BTreeMap;
use std::fmt;
use std::time::SystemTime;

use serde::Serialize;

/// What a run did to one namespace's Secret.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    Created,
    /// Updated in place: same uid, always.
    Updated,
    /// Deleted by someone between our read and our write, then created fresh.
    Recreated,
    Skipped,
    Failed,
    WouldCreate,
    WouldUpdate,
    /// Not due (ECR_REFRESH_RENEW_BEFORE): left as it is, not written.
    Fresh,
}

impl Outcome {
    /// Every outcome, for code that reports each (the metrics, with zeros).
    pub const ALL: [Outcome; 8] = [
        Self::Created,
        Self::Updated,
        Self::Recreated,
        Self::Skipped,
        Self::Failed,
        Self::WouldCreate,
        Self::WouldUpdate,
        Self::Fresh,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Created => "created",
            Self::Updated => "updated",
            Self::Recreated => "recreated",
            Self::Skipped => "skipped",
            Self::Failed => "failed",
            Self::WouldCreate => "would-create",
            Self::WouldUpdate => "would-update",
            Self::Fresh => "fresh",
        }
    }
}

impl Outcome {
    /// What the outcome means, for the reference page of log outcomes.
    pub fn meaning(self) -> &'static str {
        match self {
            Self::Created => "the Secret did not exist and was created",
            Self::Updated => "the Secret was updated in place: the same uid before and after",
            Self::Recreated => {
                "the Secret was deleted by someone between our read and our write, and created fresh"
            }
            Self::Skipped => {
                "nothing to write, with a reason (`reason`), such as a namespace that does not exist"
            }
            Self::Failed => "the Secret could not be refreshed (`error` says why and what to do)",
            Self::WouldCreate => "dry run: the Secret would be created",
            Self::WouldUpdate => "dry run: the Secret would be updated in place",
            Self::Fresh => "not due (`ECR_REFRESH_RENEW_BEFORE`): left as it is, not written",
        }
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What happened to one listed ServiceAccount.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum AccountOutcome {
    /// Our entry was appended to imagePullSecrets.
    Added,
    /// Our entry was already there: nothing written.
    Present,
    /// The ServiceAccount does not exist (yet): the next run covers it.
    Missing,
    WouldAdd,
    Failed,
}

impl AccountOutcome {
    /// Every outcome, for the reference page.
    pub const ALL: [AccountOutcome; 5] = [
        Self::Added,
        Self::Present,
        Self::Missing,
        Self::WouldAdd,
        Self::Failed,
    ];

    /// What the outcome means, for the reference page of log outcomes.
    pub fn meaning(self) -> &'static str {
        match self {
            Self::Added => "our Secret was appended to the ServiceAccount's imagePullSecrets",
            Self::Present => "our Secret was listed already: nothing written",
            Self::Missing => "the ServiceAccount does not exist (yet): the next run covers it",
            Self::WouldAdd => "dry run: our Secret would be appended",
            Self::Failed => "the ServiceAccount could not be given our Secret",
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Added => "added",
            Self::Present => "present",
            Self::Missing => "missing",
            Self::WouldAdd => "would-add",
            Self::Failed => "failed",
        }
    }
}

/// Process exit codes: one table for every mode and credential source (`--help` and the
/// book's reference page print it from `cli::EXIT_CODES`).
/// What became of a pod stuck on a pull that ECR_REFRESH_EVICT_STUCK_PODS looked at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PodOutcome {
    Evicted,
    WouldEvict,
    Left,
}

impl PodOutcome {
    pub const ALL: [PodOutcome; 3] = [Self::Evicted, Self::WouldEvict, Self::Left];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Evicted => "evicted",
            Self::WouldEvict => "would-evict",
            Self::Left => "left",
        }
    }

    pub fn meaning(self) -> &'static str {
        match self {
            Self::Evicted => {
                "evicted through the Eviction API: its controller recreates it, with the Secret"
            }
            Self::WouldEvict => "dry run: it would be evicted",
            Self::Left => {
                "not evicted (`reason` says why and what to do): a bare pod, a replacement that would \
                 not carry the Secret, a PodDisruptionBudget's 429, an eviction that got no answer \
                 (counted against ECR_REFRESH_EVICT_LIMIT), or ECR_REFRESH_EVICT_LIMIT reached; \
                 the exit code is unchanged"
            }
        }
    }
}

/// What ECR_REFRESH_EVICT_STUCK_PODS did in a run, by outcome.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Evictions {
    pub evicted: usize,
    pub would_evict: usize,
    pub left: usize,
    /// Of the `left`, evictions sent whose answer never came: they may have gone through, so
    /// they count against ECR_REFRESH_EVICT_LIMIT.
    #[serde(skip)]
    pub unanswered: usize,
}

impl Evictions {
    /// The evictions that count against ECR_REFRESH_EVICT_LIMIT: done, previewed, or sent
    /// without an answer.
    pub fn spent(&self) -> usize {
        self.evicted + self.would_evict + self.unanswered
    }
}

impl Evictions {
    pub fn count(&mut self, outcome: PodOutcome) {
        match outcome {
            PodOutcome::Evicted => self.evicted += 1,
            PodOutcome::WouldEvict => self.would_evict += 1,
            PodOutcome::Left => self.left += 1,
        }
    }
}

pub mod exit {

    /// All done.
    pub const OK: u8 = 0;
    /// Something asked for was not done: a namespace failed or was left undone, nothing was
    /// selected, a named namespace does not exist, the listing broke off; a check's finding.
    pub const FAILED: u8 = 1;
    /// The configuration is wrong, found before anything is sent.
    pub const CONFIG: u8 = 2;
    /// Credentials could not be had or were refused, or the cluster is unreachable: nothing
    /// written.
    pub const UNAVAILABLE: u8 = 3;
}

/// Room for the list of failed namespaces in the termination message, which the kubelet
/// truncates at 4096 bytes.
const TERMINATION_MESSAGE_LIMIT: usize = 4096;

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

    /// Keeps the earliest of the Secrets' expiries (`secret::Written::expires_at`).
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
        let mut failed: Vec<&str> = self.failed.iter().map(String::as_str).collect();
        let mut not_found: Vec<&str> = self.not_found.iter().map(String::as_str).collect();
        let mut registries: Vec<&str> = extra.registries.iter().map(String::as_str).collect();
        loop {
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
            let message = message.to_string();
            if message.len() < TERMINATION_MESSAGE_LIMIT {
                return message;
            }
            // Cut the longest list, geometrically: 10,000 names take a handful of passes.
            let longest = [&mut failed, &mut not_found, &mut registries]
                .into_iter()
                .max_by_key(|list| list.iter().map(|s| s.len() + 3).sum::<usize>())
                .expect("three lists");
            if longest.is_empty() {
                return message;
            }
            let keep = longest.len() * (TERMINATION_MESSAGE_LIMIT - 512) / message.len();
            let keep = keep.min(longest.len() - 1);
            longest.truncate(keep);
        }
    }
}

/// The termination message of a run that ended before any namespace: its exit code and why.
pub fn termination_error(exit_code: u8, error: &str) -> String {
    let mut error = error.to_owned();
    loop {
        let message = serde_json::json!({ "exit_code": exit_code, "error": error }).to_string();
        if message.len() < TERMINATION_MESSAGE_LIMIT {
            return message;
        }
        // Escapes can make the JSON longer than the text: cut a tenth, on a character boundary.
        let mut cut = error.len() * 9 / 10;
        while !error.is_char_boundary(cut) {
            cut -= 1;
        }
        error.truncate(cut);
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
    fn every_outcome_is_listed_once_with_its_own_name() {
        let names: std::collections::BTreeSet<&str> =
            Outcome::ALL.iter().map(|o| o.as_str()).collect();
        assert_eq!(names.len(), Outcome::ALL.len());
        assert!(names.contains("fresh"));
        let json = serde_json::to_value(Outcome::ALL).unwrap();
        assert_eq!(json[7], "fresh", "serialised as it is logged");
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
    fn an_early_failure_is_a_short_termination_message() {
        let message = termination_error(exit::UNAVAILABLE, &"\u{1}é".repeat(5000));
        assert!(message.len() < 4096, "{} bytes", message.len());
        let value: serde_json::Value = serde_json::from_str(&message).unwrap();
        assert_eq!(value["exit_code"], 3);
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
