//! The vocabulary every mode reports in: what happened to each object (a namespace's Secret, a
//! ServiceAccount, a stuck pod), the evictions' counts, and the exit codes. Each mode's own
//! report lives beside it (`refresh::report`, `check`).

use std::fmt;

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

    pub fn count(&mut self, outcome: PodOutcome) {
        match outcome {
            PodOutcome::Evicted => self.evicted += 1,
            PodOutcome::WouldEvict => self.would_evict += 1,
            PodOutcome::Left => self.left += 1,
        }
    }
}

/// Process exit codes: one table for every mode and credential source (`--help` and the
/// book's reference page print it from `cli::EXIT_CODES`).
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_outcome_is_listed_once_with_its_own_name() {
        let names: std::collections::BTreeSet<&str> =
            Outcome::ALL.iter().map(|o| o.as_str()).collect();
        assert_eq!(names.len(), Outcome::ALL.len());
        assert!(names.contains("fresh"));
        let json = serde_json::to_value(Outcome::ALL).unwrap();
        assert_eq!(json[7], "fresh", "serialised as it is logged");
    }
}
