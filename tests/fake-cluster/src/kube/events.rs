//! Events, served as the real API server serves them: one store, two APIs. An Event is kept
//! in its core/v1 form (as etcd holds it) and read or written through `/api/v1` or
//! `/apis/events.k8s.io/v1`, with the field mapping of pkg/apis/events/v1/conversion.go:
//! note ↔ message, regarding ↔ involvedObject, reportingController ↔ reportingComponent,
//! deprecatedSource ↔ source, deprecatedFirstTimestamp ↔ firstTimestamp,
//! deprecatedLastTimestamp ↔ lastTimestamp, deprecatedCount ↔ count. So `kubectl get events`,
//! which asks for core/v1, shows what ecr-refresh wrote through events.k8s.io/v1.
//!
//! What a create must pass, as verified in the Kubernetes source:
//!
//! - pkg/registry/core/event/strategy.go: `Validate` calls
//!   `validation.ValidateEventCreate(event, requestGroupVersion(ctx))`.
//! - pkg/apis/core/validation/events.go, `ValidateEventCreate`: `legacyValidateEvent` for
//!   every version; core/v1 (and events.k8s.io/v1beta1) stop there. events.k8s.io/v1 adds:
//!   ObjectMeta (name a DNS subdomain), series (count ≥ 2, lastObservedTime required),
//!   `eventTime` required, `type` Normal or Warning (`type: Invalid value: "": has invalid
//!   value: X`), and firstTimestamp, lastTimestamp, count and source unset ("needs to be unset").
//! - `legacyValidateEvent`, with eventTime set: a `regarding` (involvedObject) without a
//!   namespace, i.e. a cluster-scoped object such as the Namespace, is refused unless the
//!   Event is in `default` or `kube-system`: `involvedObject.namespace: Invalid value: "":
//!   does not match event.namespace`. A namespaced `regarding` in another namespace is NOT
//!   refused on this path (only without eventTime, where the namespaces must be equal).
//!   reportingController required and a qualified name; reportingInstance, action and reason
//!   required, at most 128 characters each; the note (message) at most 1024 (NoteLengthLimit,
//!   Go `len`: bytes). The event's namespace must be a DNS subdomain.
//!   Field paths name the internal type's fields (`involvedObject`, `message`,
//!   `reportingController`) whatever version was posted.
//! - The 422 names the request's group: `Event.events.k8s.io "NAME" is invalid: ...`
//!   (details group events.k8s.io, kind Event), `Event "NAME" is invalid: ...` for core/v1.
//! - staging/src/k8s.io/apiserver/pkg/admission/plugin/namespace/lifecycle/admission.go:
//!   Events get no exemption: a create in a missing namespace is 404, in a terminating one
//!   403 `events.events.k8s.io "NAME" is forbidden: unable to create new content in
//!   namespace X because it is being terminated` (cause NamespaceTerminating).

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::status::{self, ApiError, FieldError};
use super::store::{Store, now};

pub(crate) const GROUP: &str = "events.k8s.io";
const REPORTING_INSTANCE_LIMIT: usize = 128;
const ACTION_LIMIT: usize = 128;
const REASON_LIMIT: usize = 128;
const NOTE_LIMIT: usize = 1024;

/// Which API a request went through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EventApi {
    /// `/api/v1`
    Core,
    /// `/apis/events.k8s.io/v1`
    Events,
}

impl EventApi {
    pub(super) fn group(self) -> &'static str {
        match self {
            EventApi::Core => "",
            EventApi::Events => GROUP,
        }
    }

    /// The resource as errors name it: `events`, `events.events.k8s.io`.
    fn qualified_resource(self) -> String {
        match self {
            EventApi::Core => "events".to_owned(),
            EventApi::Events => format!("events.{GROUP}"),
        }
    }
}

/// What an events path names.
#[derive(Debug, Clone)]
pub(crate) enum EventRoute {
    /// `/apis/events.k8s.io` or `/apis/events.k8s.io/v1`
    Discovery { version: bool },
    Collection {
        api: EventApi,
        namespace: Option<String>,
    },
    Item {
        api: EventApi,
        namespace: String,
        name: String,
    },
}

pub(crate) fn route(path: &str) -> Option<EventRoute> {
    let path = path.trim_end_matches('/');
    match path {
        "/apis/events.k8s.io" => return Some(EventRoute::Discovery { version: false }),
        "/apis/events.k8s.io/v1" => return Some(EventRoute::Discovery { version: true }),
        _ => {}
    }
    let (api, rest) = if let Some(rest) = path.strip_prefix("/api/v1/") {
        (EventApi::Core, rest)
    } else if let Some(rest) = path.strip_prefix("/apis/events.k8s.io/v1/") {
        (EventApi::Events, rest)
    } else {
        return None;
    };
    let parts: Vec<&str> = rest.split('/').collect();
    match parts.as_slice() {
        ["events"] => Some(EventRoute::Collection {
            api,
            namespace: None,
        }),
        ["namespaces", ns, "events"] => Some(EventRoute::Collection {
            api,
            namespace: Some((*ns).to_owned()),
        }),
        ["namespaces", ns, "events", name] => Some(EventRoute::Item {
            api,
            namespace: (*ns).to_owned(),
            name: (*name).to_owned(),
        }),
        _ => None,
    }
}

const VERBS: [&str; 8] = [
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

/// The entry `/api/v1` lists for core Events.
pub(crate) fn core_resource() -> Value {
    json!({"name": "events", "singularName": "event", "namespaced": true, "kind": "Event",
           "verbs": VERBS, "shortNames": ["ev"]})
}

/// The group `/apis` lists.
pub(crate) fn api_group() -> Value {
    let version = json!({"groupVersion": "events.k8s.io/v1", "version": "v1"});
    json!({"name": GROUP, "versions": [version], "preferredVersion": version})
}

pub(crate) fn discovery(version: bool) -> Value {
    if version {
        json!({
            "kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "events.k8s.io/v1",
            "resources": [{"name": "events", "singularName": "event", "namespaced": true,
                           "kind": "Event", "verbs": VERBS, "shortNames": ["ev"]}]
        })
    } else {
        let mut group = api_group();
        group["kind"] = json!("APIGroup");
        group["apiVersion"] = json!("v1");
        group
    }
}

/// The Events, in their core/v1 form, by (namespace, name).
#[derive(Default)]
pub(crate) struct Events {
    items: BTreeMap<(String, String), Value>,
}

fn str_of<'a>(v: &'a Value, field: &str) -> &'a str {
    v.get(field).and_then(Value::as_str).unwrap_or_default()
}

/// Whether a time field is set (Go's zero time serialises as null or is left out).
fn is_set(v: &Value, field: &str) -> bool {
    !str_of(v, field).is_empty()
}

/// The field mapping of pkg/apis/events/v1/conversion.go, both ways.
const RENAMED: [(&str, &str); 7] = [
    ("note", "message"),
    ("regarding", "involvedObject"),
    ("reportingController", "reportingComponent"),
    ("deprecatedSource", "source"),
    ("deprecatedFirstTimestamp", "firstTimestamp"),
    ("deprecatedLastTimestamp", "lastTimestamp"),
    ("deprecatedCount", "count"),
];

fn rename(obj: &Value, to_core: bool, api_version: &str) -> Value {
    let mut out = Map::new();
    out.insert("kind".into(), json!("Event"));
    out.insert("apiVersion".into(), json!(api_version));
    for (k, v) in obj.as_object().into_iter().flatten() {
        if k == "kind" || k == "apiVersion" {
            continue;
        }
        let renamed = RENAMED
            .iter()
            .find_map(|(events, core)| match to_core {
                true if k == events => Some(*core),
                false if k == core => Some(*events),
                _ => None,
            })
            .unwrap_or(k.as_str());
        out.insert(renamed.to_owned(), v.clone());
    }
    Value::Object(out)
}

/// An Event as `api` shows it.
fn shown(core: &Value, api: EventApi) -> Value {
    match api {
        EventApi::Core => core.clone(),
        EventApi::Events => rename(core, false, "events.k8s.io/v1"),
    }
}

/// `IsQualifiedName`: an optional DNS-subdomain prefix and `/`, then a name of at most 63
/// characters matching `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`.
fn qualified_name_errors(value: &str) -> Vec<String> {
    let (prefix, name) = match value.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, value),
    };
    let mut errors = Vec::new();
    if let Some(p) = prefix {
        let ok = !p.is_empty()
            && p.len() <= 253
            && p.split('.').all(|l| {
                !l.is_empty()
                    && l.bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                    && !l.starts_with('-')
                    && !l.ends_with('-')
            });
        if !ok {
            errors.push("prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')".to_owned());
        }
    }
    let b = name.as_bytes();
    if b.is_empty() {
        errors.push("name part must be non-empty".to_owned());
    } else if b.len() > 63 {
        errors.push("name part must be no more than 63 characters".to_owned());
    } else if !(b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.')))
    {
        errors.push("name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')".to_owned());
    }
    errors
}

fn is_dns_subdomain(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s.split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && l.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !l.starts_with('-')
                && !l.ends_with('-')
        })
}

const DNS1123_SUBDOMAIN: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

fn invalid(field: &str, value: &str, detail: impl Into<String>) -> FieldError {
    FieldError::Invalid {
        field: field.into(),
        value: value.into(),
        detail: detail.into(),
    }
}

fn required(field: &str) -> FieldError {
    FieldError::Required {
        field: field.into(),
        detail: String::new(),
    }
}

/// `legacyValidateEvent`, on the core form.
fn legacy_errors(e: &Value, namespace: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let involved_ns = e["involvedObject"]["namespace"]
        .as_str()
        .unwrap_or_default();
    if !is_set(e, "eventTime") {
        let matches = if involved_ns.is_empty() {
            namespace.is_empty() || namespace == "default"
        } else {
            namespace == involved_ns
        };
        if !matches {
            errors.push(invalid(
                "involvedObject.namespace",
                involved_ns,
                "does not match event.namespace",
            ));
        }
    } else {
        if involved_ns.is_empty() && namespace != "default" && namespace != "kube-system" {
            errors.push(invalid(
                "involvedObject.namespace",
                involved_ns,
                "does not match event.namespace",
            ));
        }
        let controller = str_of(e, "reportingComponent");
        if controller.is_empty() {
            errors.push(required("reportingController"));
        }
        for msg in qualified_name_errors(controller) {
            errors.push(invalid("reportingController", controller, msg));
        }
        for (field, value, limit) in [
            (
                "reportingInstance",
                str_of(e, "reportingInstance"),
                REPORTING_INSTANCE_LIMIT,
            ),
            ("action", str_of(e, "action"), ACTION_LIMIT),
            ("reason", str_of(e, "reason"), REASON_LIMIT),
        ] {
            if value.is_empty() {
                errors.push(required(field));
            }
            if value.len() > limit {
                errors.push(invalid(
                    field,
                    "",
                    format!("can have at most {limit} characters"),
                ));
            }
        }
        if str_of(e, "message").len() > NOTE_LIMIT {
            errors.push(invalid(
                "message",
                "",
                format!("can have at most {NOTE_LIMIT} characters"),
            ));
        }
    }
    if !is_dns_subdomain(namespace) {
        errors.push(invalid("namespace", namespace, DNS1123_SUBDOMAIN));
    }
    errors
}

/// What events.k8s.io/v1 adds (strict validation), on the core form.
fn strict_errors(e: &Value, name: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if name.is_empty() {
        errors.push(FieldError::Required {
            field: "metadata.name".into(),
            detail: "name or generateName is required".into(),
        });
    } else if !is_dns_subdomain(name) {
        errors.push(invalid("metadata.name", name, DNS1123_SUBDOMAIN));
    }
    if let Some(series) = e.get("series").filter(|s| !s.is_null()) {
        if series["count"].as_i64().unwrap_or(0) < 2 {
            errors.push(invalid("series.count", "", "should be at least 2"));
        }
        if !is_set(series, "lastObservedTime") {
            errors.push(required("series.lastObservedTime"));
        }
    }
    if !is_set(e, "eventTime") {
        errors.push(required("eventTime"));
    }
    let kind = str_of(e, "type");
    if kind != "Normal" && kind != "Warning" {
        errors.push(invalid("type", "", format!("has invalid value: {kind}")));
    }
    for field in ["firstTimestamp", "lastTimestamp"] {
        if is_set(e, field) {
            errors.push(invalid(field, "", "needs to be unset"));
        }
    }
    if e["count"].as_i64().unwrap_or(0) != 0 {
        errors.push(invalid("count", "", "needs to be unset"));
    }
    if !str_of(&e["source"], "component").is_empty() || !str_of(&e["source"], "host").is_empty() {
        errors.push(invalid("source", "", "needs to be unset"));
    }
    errors
}

impl Events {
    /// POST to a namespace's events: decode, admit (namespace lifecycle), validate, store.
    pub(super) fn create(
        &mut self,
        store: &mut Store,
        api: EventApi,
        namespace: &str,
        body: Value,
        dry_run: bool,
    ) -> Result<Value, ApiError> {
        let mut core = match api {
            EventApi::Events => rename(&body, true, "v1"),
            EventApi::Core => {
                let mut core = body;
                core["apiVersion"] = json!("v1");
                core["kind"] = json!("Event");
                core
            }
        };
        let meta_ns = core["metadata"]["namespace"].as_str().unwrap_or_default();
        if !meta_ns.is_empty() && meta_ns != namespace {
            return Err(status::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            ));
        }
        let name = core["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        if let Some(time) = core.get("eventTime").and_then(Value::as_str)
            && chrono::DateTime::parse_from_rfc3339(time).is_err()
        {
            return Err(status::bad_request(format!(
                "parsing time {} as \"2006-01-02T15:04:05.000000Z07:00\": cannot parse",
                json!(time)
            )));
        }
        self.admit(store, api, namespace, &name)?;
        let mut errors = legacy_errors(&core, namespace);
        if api == EventApi::Events {
            errors.extend(strict_errors(&core, &name));
        } else if name.is_empty() {
            errors.push(FieldError::Required {
                field: "metadata.name".into(),
                detail: "name or generateName is required".into(),
            });
        }
        if !errors.is_empty() {
            return Err(status::invalid("Event", api.group(), &name, &errors));
        }
        let key = (namespace.to_owned(), name.clone());
        if self.items.contains_key(&key) {
            return Err(status::already_exists(&api.qualified_resource(), &name));
        }
        let meta = core["metadata"].as_object_mut().map(std::mem::take);
        let mut meta = meta.unwrap_or_default();
        meta.insert("namespace".into(), json!(namespace));
        meta.insert("uid".into(), json!(uuid::Uuid::new_v4().to_string()));
        meta.insert("creationTimestamp".into(), json!(now()));
        meta.insert(
            "resourceVersion".into(),
            json!(store.next_resource_version().to_string()),
        );
        core["metadata"] = Value::Object(meta);
        if !dry_run {
            self.items.insert(key, core.clone());
        }
        Ok(shown(&core, api))
    }

    /// The namespace lifecycle admission plugin: Events get no exemption.
    fn admit(
        &self,
        store: &Store,
        api: EventApi,
        namespace: &str,
        name: &str,
    ) -> Result<(), ApiError> {
        store.admit_namespace_content(&api.qualified_resource(), namespace, name)
    }

    pub(super) fn get(
        &self,
        api: EventApi,
        namespace: &str,
        name: &str,
    ) -> Result<Value, ApiError> {
        self.items
            .get(&(namespace.to_owned(), name.to_owned()))
            .map(|e| shown(e, api))
            .ok_or_else(|| status::not_found(&api.qualified_resource(), name))
    }

    pub(super) fn list(
        &self,
        api: EventApi,
        namespace: Option<&str>,
        resource_version: u64,
    ) -> Value {
        let items: Vec<Value> = self
            .items
            .iter()
            .filter(|((ns, _), _)| namespace.is_none_or(|want| ns == want))
            .map(|(_, e)| shown(e, api))
            .collect();
        let api_version = match api {
            EventApi::Core => "v1",
            EventApi::Events => "events.k8s.io/v1",
        };
        json!({
            "kind": "EventList",
            "apiVersion": api_version,
            "metadata": {"resourceVersion": resource_version.to_string()},
            "items": items,
        })
    }

    /// The list as a server-side Table, as kubectl asks for it (`Accept: ...;as=Table`): the
    /// columns and cells of pkg/printers/internalversion/printers.go, printEvent (the server
    /// fills every column; kubectl shows those of priority 0 unless `-o wide`).
    pub(super) fn table(&self, namespace: Option<&str>, resource_version: u64) -> Value {
        let column = |name: &str, priority: u8| {
            json!({"name": name, "type": if name == "Count" { "integer" } else { "string" },
                   "format": "", "description": "", "priority": priority})
        };
        let columns = vec![
            column("Last Seen", 0),
            column("Type", 0),
            column("Reason", 0),
            column("Object", 0),
            column("Subobject", 1),
            column("Source", 1),
            column("Message", 0),
            column("First Seen", 1),
            column("Count", 1),
            column("Name", 1),
        ];
        let rows: Vec<Value> = self
            .items
            .iter()
            .filter(|((ns, _), _)| namespace.is_none_or(|want| ns == want))
            .map(|(_, e)| {
                let involved = &e["involvedObject"];
                let kind = str_of(involved, "kind").to_lowercase();
                let target = match str_of(involved, "name") {
                    "" => kind,
                    name => format!("{kind}/{name}"),
                };
                let seen = since(if is_set(e, "lastTimestamp") {
                    str_of(e, "lastTimestamp")
                } else if is_set(e, "firstTimestamp") {
                    str_of(e, "firstTimestamp")
                } else {
                    str_of(e, "eventTime")
                });
                let source = [
                    str_of(e, "reportingComponent"),
                    str_of(e, "reportingInstance"),
                ]
                .into_iter()
                .filter(|s| !s.is_empty())
                .collect::<Vec<_>>()
                .join(", ");
                json!({
                    "cells": [seen, str_of(e, "type"), str_of(e, "reason"), target,
                              str_of(involved, "fieldPath"), source, str_of(e, "message").trim(),
                              seen, e["count"].as_i64().unwrap_or(1), e["metadata"]["name"]],
                    "object": {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                               "metadata": e["metadata"]},
                })
            })
            .collect();
        json!({
            "kind": "Table",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": {"resourceVersion": resource_version.to_string()},
            "columnDefinitions": columns,
            "rows": rows,
        })
    }

    /// Every Event in `namespace`, in events.k8s.io/v1 form.
    pub(super) fn in_namespace(&self, namespace: &str) -> Vec<Value> {
        self.items
            .iter()
            .filter(|((ns, _), _)| ns == namespace)
            .map(|(_, e)| shown(e, EventApi::Events))
            .collect()
    }
}

/// `duration.HumanDuration` since an RFC 3339 time, roughly: `42s`, `3m12s`, `25m`, `5h`.
fn since(time: &str) -> String {
    let Ok(at) = chrono::DateTime::parse_from_rfc3339(time) else {
        return "<unknown>".to_owned();
    };
    let s = (chrono::Utc::now() - at.with_timezone(&chrono::Utc))
        .num_seconds()
        .max(0);
    match s {
        0..120 => format!("{s}s"),
        120..600 => format!("{}m{}s", s / 60, s % 60),
        600..10800 => format!("{}m", s / 60),
        _ => format!("{}h", s / 3600),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_two_apis_show_one_event_with_renamed_fields() {
        let v1 = json!({"apiVersion": "events.k8s.io/v1", "kind": "Event", "note": "n",
                        "regarding": {"kind": "Secret"}, "reportingController": "c", "reason": "R"});
        let core = rename(&v1, true, "v1");
        assert_eq!(core["message"], "n");
        assert_eq!(core["involvedObject"]["kind"], "Secret");
        assert_eq!(core["reportingComponent"], "c");
        assert_eq!(core["reason"], "R");
        assert_eq!(shown(&core, EventApi::Events), v1);
    }

    #[test]
    fn qualified_names_allow_a_prefix() {
        assert!(qualified_name_errors("ecr-refresh").is_empty());
        assert!(qualified_name_errors("example.com/ecr-refresh").is_empty());
        assert!(!qualified_name_errors("-bad").is_empty());
        assert!(!qualified_name_errors("").is_empty());
    }
}
