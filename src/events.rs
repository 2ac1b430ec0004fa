//! Warning Events where namespace owners look: one per failed namespace per run, in that
//! namespace, regarding the Secret. Namespace owners usually cannot read the CronJob's logs;
//! `kubectl get events -n NS` and `kubectl describe secret` show these.
//!
//! Best effort: an Event that cannot be written is one warning line per run (one for
//! refusals, one for anything else), never a failure of the run.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::SystemTime;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::PostParams;
use kube::{Api, Client};
use tracing::{debug, warn};

use crate::retry;
use crate::secret::SecretError;

/// `reportingController`: who wrote the Event (a qualified name).
pub const REPORTING_CONTROLLER: &str = "ecr-refresh";
/// `action`: what we were doing.
pub const ACTION: &str = "Refresh";
/// The API server refuses a longer note (pkg/apis/core/validation/events.go: NoteLengthLimit).
const NOTE_LIMIT: usize = 1024;
/// Refused longer: ReportingInstanceLengthLimit.
const INSTANCE_LIMIT: usize = 128;
/// Object names are DNS subdomains, at most 253 characters.
const NAME_LIMIT: usize = 253;

/// Each kind of failure to write an Event is logged once per run, not once per namespace.
static WARNED_FORBIDDEN: AtomicBool = AtomicBool::new(false);
static WARNED_OTHER: AtomicBool = AtomicBool::new(false);

/// The CamelCase `reason` for a Secret that could not be refreshed.
pub fn reason(error: &SecretError) -> &'static str {
    match error {
        SecretError::WrongType { .. } => "WrongSecretType",
        SecretError::Immutable { .. } => "ImmutableSecret",
        SecretError::Unreadable(_) => "UnreadableSecret",
        SecretError::Forbidden { .. } => "Forbidden",
        SecretError::Request { .. } => "RefreshFailed",
        SecretError::Contended => "RefreshContended",
    }
}

/// `reason` when the Secret was written but a ServiceAccount could not be given it.
pub const SERVICE_ACCOUNT_FAILED: &str = "ServiceAccountFailed";

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

/// Writes the failure's Warning Event when Events are on (ECR_REFRESH_EVENTS). In a dry run
/// it is sent with `dryRun=All`, as every other write: validated and admitted, not stored.
pub async fn failed(client: &Client, enabled: bool, dry_run: bool, failure: Failure<'_>) {
    if !enabled {
        return;
    }
    let api: Api<Event> = Api::namespaced(client.clone(), failure.namespace);
    let event = event(&failure, SystemTime::now(), &instance());
    let params = PostParams {
        dry_run,
        ..PostParams::default()
    };
    match retry::send("create event", || api.create(&params, &event)).await {
        Ok(_) => debug!(
            namespace = failure.namespace,
            reason = failure.reason,
            "Warning Event written"
        ),
        Err(e) if e.code() == Some(403) => {
            if !WARNED_FORBIDDEN.swap(true, Ordering::Relaxed) {
                warn!(
                    namespace = failure.namespace,
                    error = %e,
                    "not allowed to write Events for failed namespaces (warned once per run); grant \
                     create on events.k8s.io events (see manifests/), or set ECR_REFRESH_EVENTS=false"
                );
            }
        }
        Err(e) => {
            if !WARNED_OTHER.swap(true, Ordering::Relaxed) {
                warn!(
                    namespace = failure.namespace,
                    error = %e,
                    "could not write the Event for a failed namespace (warned once per run); the \
                     namespace's own log line says what failed"
                );
            }
        }
    }
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
    fn a_long_note_is_cut_to_the_api_servers_limit() {
        let e = event(&failure("é".repeat(2000)), SystemTime::now(), "x");
        let note = e.note.unwrap();
        assert!(note.len() <= NOTE_LIMIT, "{}", note.len());
        assert!(note.ends_with("..."));
    }
}
