//! Warning Events where namespace owners look: one per failed namespace per run, in that
//! namespace, regarding the Secret. Namespace owners usually cannot read the CronJob's logs;
//! `kubectl get events -n NS` and `kubectl describe secret` show these.
//!
//! At most LIMIT per run, and then one summary in the run's own namespace that counts the
//! rest: when something systemic breaks (a renamed Secret, RBAC) every namespace fails, and an
//! Event each would be thousands of objects per run for etcd to hold for an hour. Events are
//! created, never patched: a later run can't add to an earlier run's Event, since the API
//! server keeps `reportingInstance` (the pod) and `note` immutable (ValidateEventUpdate).
//!
//! Best effort: an Event that cannot be written is one warning line per run (one for
//! refusals, one for anything else), never a failure of the run.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime};

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::PostParams;
use kube::{Api, Client};
use tracing::{debug, warn};

use crate::cluster::retry;

/// `reportingController`: who wrote the Event (a qualified name).
pub const REPORTING_CONTROLLER: &str = "ecr-refresh";
/// `action`: what we were doing.
pub const ACTION: &str = "Refresh";
/// Events per run for failed namespaces; the failures past it are counted in one summary.
/// A Job's two tries then leave at most 202 Events, where 10,000 failing namespaces would
/// leave 20,000.
pub const LIMIT: usize = 100;
/// The summary's `reason`.
pub const MORE_FAILED: &str = "MoreNamespacesFailed";
/// How long the summary may take. It is sent after the last namespace, so after the stop's
/// grace at worst: with the grace and the metrics push, what a try can last past
/// ECR_REFRESH_TIMEOUT (tests/fake/manifests.rs adds them up against activeDeadlineSeconds).
pub const SUMMARY_TIMEOUT: Duration = Duration::from_secs(5);
/// The API server refuses a longer note (pkg/apis/core/validation/events.go: NoteLengthLimit).
const NOTE_LIMIT: usize = 1024;
/// Refused longer: ReportingInstanceLengthLimit.
const INSTANCE_LIMIT: usize = 128;
/// Object names are DNS subdomains, at most 253 characters.
const NAME_LIMIT: usize = 253;

/// `reason` when the Secret was written but a ServiceAccount could not be given it.
pub const SERVICE_ACCOUNT_FAILED: &str = "ServiceAccountFailed";
/// `reason`s for a Secret that could not be refreshed (`SecretError::event_reason`).
pub const WRONG_TYPE: &str = "WrongSecretType";
pub const IMMUTABLE: &str = "ImmutableSecret";
pub const UNREADABLE: &str = "UnreadableSecret";
pub const FORBIDDEN: &str = "Forbidden";
pub const REFRESH_FAILED: &str = "RefreshFailed";
pub const CONTENDED: &str = "RefreshContended";
pub const OTHER_INSTALL: &str = "WrittenByOtherInstall";

/// Every `reason` a run's Events carry, with what it means: the reference page is made from it.
pub const REASONS: &[(&str, &str)] = &[
    (
        WRONG_TYPE,
        "a Secret of our name exists with another type than kubernetes.io/dockerconfigjson: it \
         is someone else's, and left as it is",
    ),
    (
        IMMUTABLE,
        "the Secret is marked immutable: it can't be updated in place, and is never deleted",
    ),
    (
        UNREADABLE,
        "the Secret's .dockerconfigjson is not a docker config we can merge into without losing \
         entries: fix or remove it",
    ),
    (
        FORBIDDEN,
        "the API server (RBAC or the admission policy) refused the write",
    ),
    (
        REFRESH_FAILED,
        "the write failed for another reason, after its retries",
    ),
    (
        CONTENDED,
        "someone else kept changing the Secret between our read and our write",
    ),
    (
        OTHER_INSTALL,
        "another install of ecr-refresh wrote the Secret, with registries this one does not write; it was left untouched",
    ),
    (
        SERVICE_ACCOUNT_FAILED,
        "the Secret was written, but a ServiceAccount in ECR_REFRESH_SERVICE_ACCOUNTS could \
         not be given it",
    ),
    (
        MORE_FAILED,
        "the summary, in the run's own namespace, of the failed namespaces past the first LIMIT",
    ),
];

/// One namespace's failure, as its Event tells it.
#[derive(Debug)]
pub struct Failure<'a> {
    pub namespace: &'a str,
    pub secret: &'a str,
    /// The Secret's uid, when it exists and was read.
    pub uid: Option<&'a str>,
    pub reason: &'static str,
    /// What failed and what to do; never a credential.
    pub note: String,
}

/// One run's Events: the failures' up to LIMIT, then the summary of the rest.
pub struct Events {
    client: Client,
    enabled: bool,
    /// ECR_REFRESH_DRY_RUN: every Event is sent with `dryRun=All`, as every other write:
    /// validated and admitted, not stored.
    dry_run: bool,
    /// The run's own namespace (the ServiceAccount's, or the kubeconfig context's), where the
    /// summary goes: its operators look there, and the namespaces past the limit are theirs
    /// to fix, not their owners'.
    home: String,
    secret: String,
    instance: String,
    /// Events claimed so far; a failure past LIMIT gets none.
    claimed: AtomicUsize,
    /// The failed namespaces past LIMIT.
    unreported: Mutex<Vec<String>>,
    /// Each kind of failure to write an Event is logged once per run, not once per namespace.
    warned_forbidden: AtomicBool,
    warned_other: AtomicBool,
}

impl Events {
    /// `enabled` is ECR_REFRESH_EVENTS; `secret` the Secret the summary regards, in the run's
    /// own namespace.
    pub fn new(client: &Client, enabled: bool, dry_run: bool, secret: &str) -> Self {
        Self {
            client: client.clone(),
            enabled,
            dry_run,
            home: client.default_namespace().to_owned(),
            secret: secret.to_owned(),
            instance: instance(),
            claimed: AtomicUsize::new(0),
            unreported: Mutex::new(Vec::new()),
            warned_forbidden: AtomicBool::new(false),
            warned_other: AtomicBool::new(false),
        }
    }

    /// Writes the failure's Warning Event, unless LIMIT were written this run.
    pub async fn failed(&self, failure: Failure<'_>) {
        if !self.enabled {
            return;
        }
        if self.claimed.fetch_add(1, Ordering::Relaxed) >= LIMIT {
            self.unreported().push(failure.namespace.to_owned());
            return;
        }
        let event = event(&failure, SystemTime::now(), &self.instance);
        self.create(failure.namespace, &event).await;
    }

    /// The summary of the failures past LIMIT, if there were any: one Event in the run's
    /// own namespace, regarding the Secret there, that counts and names them.
    pub async fn summarize(&self) {
        let mut unreported = std::mem::take(&mut *self.unreported());
        if unreported.is_empty() {
            return;
        }
        unreported.sort();
        warn!(
            namespaces_without_event = unreported.len(),
            events_limit = LIMIT,
            namespace = %self.home,
            "more namespaces failed than get an Event of their own; one summary Event counts the \
             rest, and this log has a line for each"
        );
        let failure = Failure {
            namespace: &self.home,
            secret: &self.secret,
            uid: None,
            reason: MORE_FAILED,
            note: summary_note(&unreported),
        };
        let event = event(&failure, SystemTime::now(), &self.instance);
        if tokio::time::timeout(SUMMARY_TIMEOUT, self.create(&self.home, &event))
            .await
            .is_err()
        {
            self.warn_other(
                &self.home,
                &format!("no answer within {}s", SUMMARY_TIMEOUT.as_secs()),
            );
        }
    }

    /// The failed namespaces past LIMIT, whatever a task that panicked holding them left.
    fn unreported(&self) -> MutexGuard<'_, Vec<String>> {
        self.unreported
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    async fn create(&self, namespace: &str, event: &Event) {
        let api: Api<Event> = Api::namespaced(self.client.clone(), namespace);
        let params = PostParams {
            dry_run: self.dry_run,
            ..PostParams::default()
        };
        match retry::send("create event", || api.create(&params, event)).await {
            Ok(_) => debug!(
                namespace,
                reason = event.reason.as_deref().unwrap_or_default(),
                "Warning Event written"
            ),
            Err(e) if e.code() == Some(403) => {
                if !self.warned_forbidden.swap(true, Ordering::Relaxed) {
                    let error = e.to_string();
                    if refused_by_admission_policy(&error) {
                        warn!(
                            namespace,
                            error,
                            "an admission policy refused the Event for a failed namespace (warned once \
                             per run): RBAC allowed it, so there is nothing to grant; the error names the \
                             policy and what it checks, or set ECR_REFRESH_EVENTS=false"
                        );
                    } else {
                        warn!(
                            namespace,
                            error,
                            "not allowed to write Events for failed namespaces (warned once per run); grant \
                             create on events.k8s.io events (see manifests/), or set ECR_REFRESH_EVENTS=false"
                        );
                    }
                }
            }
            Err(e) => self.warn_other(namespace, &e.to_string()),
        }
    }

    fn warn_other(&self, namespace: &str, error: &str) {
        if !self.warned_other.swap(true, Ordering::Relaxed) {
            warn!(
                namespace,
                error,
                "could not write the Event for a failed namespace (warned once per run); the \
                 namespace's own log line says what failed"
            );
        }
    }
}

/// Whether a 403 came from an admission policy rather than RBAC. kube-apiserver 1.37 words a
/// policy's denial `<kind> "<name>" is forbidden: ValidatingAdmissionPolicy '<name>' with
/// binding '<binding>' denied request: ...` (as tests/real/admission.rs sees it), and an RBAC
/// denial `... is forbidden: User "..." cannot create resource ...`.
fn refused_by_admission_policy(error: &str) -> bool {
    error.contains("ValidatingAdmissionPolicy '") && error.contains("denied request")
}

/// What the summary says: how many, and as many of their names (in order) as fit the note.
pub fn summary_note(unreported: &[String]) -> String {
    let mut note = format!(
        "{} more namespaces failed in this run and got no Event of their own (ecr-refresh writes \
         at most {LIMIT} per run, so that a failure everywhere cannot flood etcd); the run's log \
         has a line for each with its error:",
        unreported.len()
    );
    const MORE: &str = " ...";
    for (i, name) in unreported.iter().enumerate() {
        let separator = if i == 0 { " " } else { ", " };
        let last = i + 1 == unreported.len();
        let room = if last { 0 } else { MORE.len() };
        if note.len() + separator.len() + name.len() + room > NOTE_LIMIT {
            note.push_str(MORE);
            break;
        }
        note.push_str(separator);
        note.push_str(name);
    }
    note
}

/// The pod's name (the kubelet sets HOSTNAME to it), else our name.
fn instance() -> String {
    let mut name = std::env::var("HOSTNAME")
        .ok()
        .filter(|h| !h.trim().is_empty())
        .unwrap_or_else(|| REPORTING_CONTROLLER.to_owned());
    truncate(&mut name, INSTANCE_LIMIT);
    name
}

/// Cuts `text` to at most `limit` bytes, on a character boundary.
fn truncate(text: &mut String, limit: usize) {
    if text.len() > limit {
        let mut cut = limit;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
    }
}

/// The Event: in the Secret's namespace, regarding the Secret, so that it lands where the
/// namespace's owners look even when the Secret does not exist yet (an Event regarding the
/// Namespace, a cluster-scoped object, is refused outside `default` and `kube-system`).
pub fn event(failure: &Failure<'_>, now: SystemTime, instance: &str) -> Event {
    let nanos = now
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos();
    // As client-go names Events: the object's name and the time in hex, unique enough.
    let suffix = format!(".{nanos:x}");
    let mut base = failure.secret.to_owned();
    truncate(&mut base, NAME_LIMIT - suffix.len());
    let mut note = failure.note.clone();
    if note.len() > NOTE_LIMIT {
        truncate(&mut note, NOTE_LIMIT - 3);
        note.push_str("...");
    }
    let event_time = k8s_openapi::jiff::Timestamp::try_from(now)
        .ok()
        .map(MicroTime);
    Event {
        metadata: ObjectMeta {
            name: Some(format!("{}{suffix}", base.trim_end_matches(['.', '-']))),
            namespace: Some(failure.namespace.to_owned()),
            ..ObjectMeta::default()
        },
        event_time,
        type_: Some("Warning".to_owned()),
        reason: Some(failure.reason.to_owned()),
        action: Some(ACTION.to_owned()),
        note: Some(note),
        reporting_controller: Some(REPORTING_CONTROLLER.to_owned()),
        reporting_instance: Some(instance.to_owned()),
        regarding: Some(ObjectReference {
            api_version: Some("v1".to_owned()),
            kind: Some("Secret".to_owned()),
            namespace: Some(failure.namespace.to_owned()),
            name: Some(failure.secret.to_owned()),
            uid: failure.uid.map(str::to_owned),
            ..ObjectReference::default()
        }),
        ..Event::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_policys_denial_is_told_from_an_rbac_refusal() {
        let policy = "events.events.k8s.io \"x\" is forbidden: ValidatingAdmissionPolicy \
                      'ecr-refresh' with binding 'ecr-refresh' denied request: only Events about \
                      the Secret aws-ecr-token";
        let rbac = "events.events.k8s.io is forbidden: User \"system:serviceaccount:ecr-refresh:\
                    ecr-refresh\" cannot create resource \"events\" in API group \"events.k8s.io\"";
        assert!(refused_by_admission_policy(policy));
        assert!(!refused_by_admission_policy(rbac));
    }
    use std::time::{Duration, UNIX_EPOCH};

    fn failure(note: String) -> Failure<'static> {
        Failure {
            namespace: "team-a",
            secret: "aws-ecr-token",
            uid: Some("1234"),
            reason: "WrongSecretType",
            note,
        }
    }

    #[test]
    fn the_event_regards_the_secret_in_its_namespace() {
        let at = UNIX_EPOCH + Duration::from_micros(1_764_600_000_123_456);
        let e = event(&failure("x".into()), at, "ecr-refresh-29123-abcde");
        let json = serde_json::to_value(&e).unwrap();
        assert_eq!(json["metadata"]["namespace"], "team-a");
        assert!(
            json["metadata"]["name"]
                .as_str()
                .unwrap()
                .starts_with("aws-ecr-token.")
        );
        assert_eq!(json["eventTime"], "2025-12-01T14:40:00.123456Z");
        assert_eq!(json["type"], "Warning");
        assert_eq!(json["reportingController"], "ecr-refresh");
        assert_eq!(json["reportingInstance"], "ecr-refresh-29123-abcde");
        assert_eq!(json["action"], "Refresh");
        assert_eq!(
            json["regarding"],
            serde_json::json!({"apiVersion": "v1", "kind": "Secret", "name": "aws-ecr-token", "namespace": "team-a", "uid": "1234"})
        );
    }

    #[test]
    fn the_summary_counts_every_namespace_and_names_as_many_as_fit_in_order() {
        let few: Vec<String> = vec!["team-a".into(), "team-b".into()];
        let note = summary_note(&few);
        assert!(note.starts_with("2 more namespaces failed"), "{note}");
        assert!(note.ends_with(": team-a, team-b"), "{note}");

        let many: Vec<String> = (0..500).map(|i| format!("namespace-{i:03}")).collect();
        let note = summary_note(&many);
        assert!(note.len() <= NOTE_LIMIT, "{}", note.len());
        assert!(note.starts_with("500 more namespaces failed"), "{note}");
        assert!(note.contains(": namespace-000, namespace-001, "), "{note}");
        assert!(note.ends_with(" ..."), "{note}");
        assert!(!note.contains("namespace-499"), "{note}");
    }

    #[test]
    fn a_long_note_is_cut_to_the_api_servers_limit() {
        let e = event(&failure("é".repeat(2000)), SystemTime::now(), "x");
        let note = e.note.unwrap();
        assert!(note.len() <= NOTE_LIMIT, "{}", note.len());
        assert!(note.ends_with("..."));
    }
}
