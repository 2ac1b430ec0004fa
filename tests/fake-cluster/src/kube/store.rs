//! The objects, their history and the write rules (preconditions, validation,
//! field ownership) of the fake API server. Everything here runs under the lock.

use std::collections::{BTreeMap, HashMap};

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use serde_json::{Map, Value, json};

use super::Resource;
use super::fields::{self, ManagerEntry};
use super::gojson;
use super::pods;
use super::selector::{FieldSelector, LabelSelector};
use super::status::{self, ApiError, Cause, Details, FieldError};

type Key = (String, String);

/// One stored object and who owns which of its fields.
#[derive(Debug, Clone)]
pub(crate) struct Stored {
    pub obj: Value,
    pub managers: Vec<ManagerEntry>,
}

/// What a hook does right after the next GET of an object is answered (or a list page that
/// covers it: `after_list`).
pub(crate) enum Hook {
    Delete,
    /// Delete the object's namespace, and everything in it.
    DeleteNamespace,
    /// Create this object (as `seed` does, by this manager) if it is absent.
    Create(Value, String),
    Change(Box<dyn FnOnce(&mut Value) + Send>),
}

/// The patch types the server accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PatchType {
    Apply,
    Json,
    Merge,
    Strategic,
}

/// Options common to writes.
#[derive(Debug, Clone)]
pub(crate) struct WriteOptions {
    pub manager: String,
    pub dry_run: bool,
}

/// Options of a list request.
#[derive(Debug, Clone, Default)]
pub(crate) struct ListOptions {
    pub limit: Option<usize>,
    pub continue_token: Option<String>,
    pub labels: LabelSelector,
    pub fields: FieldSelector,
}

#[derive(Default)]
pub(crate) struct Store {
    namespaces: BTreeMap<Key, Stored>,
    secrets: BTreeMap<Key, Stored>,
    service_accounts: BTreeMap<Key, Stored>,
    pods: BTreeMap<Key, Stored>,
    history: HashMap<(Resource, Key), Vec<Option<Value>>>,
    resource_version: u64,
    hooks: Vec<(Resource, Key, Hook)>,
    pub expire_next_continue: bool,
    /// The next continue token presented to a list of this resource is answered 410.
    pub expire_next_continue_of: Option<Resource>,
}

pub(crate) fn now() -> String {
    chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

fn key(resource: Resource, namespace: &str, name: &str) -> Key {
    let ns = if resource == Resource::Namespaces {
        ""
    } else {
        namespace
    };
    (ns.to_owned(), name.to_owned())
}

fn meta_str<'a>(obj: &'a Value, field: &str) -> Option<&'a str> {
    obj.get("metadata")?
        .get(field)?
        .as_str()
        .filter(|s| !s.is_empty())
}

fn metadata_mut(obj: &mut Value) -> &mut Map<String, Value> {
    if !obj.is_object() {
        *obj = json!({});
    }
    let top = obj.as_object_mut().expect("made an object just above");
    let meta = top.entry("metadata").or_insert_with(|| json!({}));
    if !meta.is_object() {
        *meta = json!({});
    }
    meta.as_object_mut().expect("made an object just above")
}

/// The object without the fields that change on every write, to detect no-op writes.
fn comparable(obj: &Value) -> Value {
    let mut c = obj.clone();
    let meta = metadata_mut(&mut c);
    meta.shift_remove("managedFields");
    meta.shift_remove("resourceVersion");
    c
}

const DNS1123_SUBDOMAIN: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
const DNS1123_LABEL: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
const CONFIG_KEY: &str = "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')";

fn is_dns_label(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b[0] != b'-'
        && b[b.len() - 1] != b'-'
}

fn is_dns_subdomain(s: &str) -> bool {
    s.len() <= 253 && s.split('.').all(is_dns_label)
}

fn finalizers(obj: &Value) -> Vec<&str> {
    obj["metadata"]["finalizers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect()
}

fn secret_type(obj: &Value) -> &str {
    obj.get("type").and_then(Value::as_str).unwrap_or("Opaque")
}

/// Validation as the registry strategies run it (create when `old` is None).
fn validate(
    resource: Resource,
    name: &str,
    new: &Value,
    old: Option<&Value>,
) -> Result<(), ApiError> {
    let mut errors = Vec::new();
    match old {
        None => {
            let (ok, detail) = if resource == Resource::Namespaces {
                (is_dns_label(name), DNS1123_LABEL)
            } else {
                (is_dns_subdomain(name), DNS1123_SUBDOMAIN)
            };
            if !ok {
                errors.push(FieldError::Invalid {
                    field: "metadata.name".into(),
                    value: name.into(),
                    detail: detail.into(),
                });
            }
        }
        Some(old) => {
            // apimachinery/pkg/api/validation/objectmeta.go, ValidateObjectMetaUpdate calls
            // ValidateNoNewFinalizers when the old object has a deletionTimestamp.
            if !old["metadata"]["deletionTimestamp"].is_null() {
                let had = finalizers(old);
                let added: Vec<&str> = finalizers(new)
                    .into_iter()
                    .filter(|f| !had.contains(f))
                    .collect();
                if !added.is_empty() {
                    let listed: Vec<String> = added.iter().map(|f| format!("{f:?}")).collect();
                    errors.push(FieldError::Forbidden {
                        field: "metadata.finalizers".into(),
                        detail: format!(
                            "no new finalizers can be added if the object is being deleted, found new finalizers []string{{{}}}",
                            listed.join(", ")
                        ),
                    });
                }
            }
            let (new_uid, old_uid) = (meta_str(new, "uid"), meta_str(old, "uid"));
            if new_uid != old_uid {
                errors.push(FieldError::Invalid {
                    field: "metadata.uid".into(),
                    value: new_uid.unwrap_or_default().into(),
                    detail: "field is immutable".into(),
                });
            }
        }
    }
    if resource == Resource::Pods && old.is_none() {
        pods::validate(new, &mut errors);
    }
    if resource == Resource::Secrets {
        for k in new
            .get("data")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
            .map(|(k, _)| k)
        {
            let ok = !k.is_empty()
                && k.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
            if !ok {
                errors.push(FieldError::Invalid {
                    field: format!("data[{k}]"),
                    value: k.clone(),
                    detail: CONFIG_KEY.into(),
                });
            }
        }
        if secret_type(new) == "kubernetes.io/dockerconfigjson" {
            // ValidateSecret: the key must exist and unmarshal into a map[string]interface{}.
            match new.get("data").and_then(|d| d.get(".dockerconfigjson")) {
                None => errors.push(FieldError::Required {
                    field: "data[.dockerconfigjson]".into(),
                    detail: String::new(),
                }),
                Some(encoded) => {
                    // Bytes that are not base64 never get this far in the real server (the
                    // body fails to decode first); the fake lets them through unchecked.
                    let bytes = match encoded {
                        Value::Null => Some(Vec::new()),
                        Value::String(text) => B64.decode(text).ok(),
                        _ => None,
                    };
                    if let Some(Err(why)) = bytes.map(|b| gojson::unmarshal_into_map(&b)) {
                        errors.push(FieldError::Invalid {
                            field: "data[.dockerconfigjson]".into(),
                            value: "<secret contents redacted>".into(),
                            detail: why,
                        });
                    }
                }
            }
        }
        if let Some(old) = old {
            if secret_type(new) != secret_type(old) {
                errors.push(FieldError::Invalid {
                    field: "type".into(),
                    value: secret_type(new).into(),
                    detail: "field is immutable".into(),
                });
            }
            if old.get("immutable") == Some(&Value::Bool(true)) {
                const DETAIL: &str = "field is immutable when `immutable` is set";
                if new.get("immutable") != Some(&Value::Bool(true)) {
                    errors.push(FieldError::Forbidden {
                        field: "immutable".into(),
                        detail: DETAIL.into(),
                    });
                }
                if new.get("data") != old.get("data") {
                    errors.push(FieldError::Forbidden {
                        field: "data".into(),
                        detail: DETAIL.into(),
                    });
                }
            }
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(status::invalid(resource.kind(), "", name, &errors))
    }
}

/// Turns `stringData` into `data`, as the Secret conversion does.
fn fold_string_data(resource: Resource, obj: &mut Value) {
    if resource != Resource::Secrets {
        return;
    }
    let Some(top) = obj.as_object_mut() else {
        return;
    };
    let Some(Value::Object(string_data)) = top.shift_remove("stringData") else {
        return;
    };
    let data = top.entry("data").or_insert_with(|| json!({}));
    if let Some(data) = data.as_object_mut() {
        for (k, v) in string_data {
            let text = v.as_str().unwrap_or_default();
            data.insert(k, json!(B64.encode(text)));
        }
    }
}

/// The apiserver's continue tokens are base64.RawURLEncoding.
const CONTINUE_B64: base64::engine::GeneralPurpose =
    base64::engine::general_purpose::URL_SAFE_NO_PAD;

/// Continue tokens: opaque to clients, base64 of the list's version and the last key.
fn encode_continue(rv: u64, last: &Key) -> String {
    CONTINUE_B64.encode(json!({"rv": rv, "start": [last.0, last.1]}).to_string())
}

fn decode_continue(token: &str) -> Result<(u64, Key), ApiError> {
    // The etcd3 store's words: `invalid continue token: continue key is not valid: ...`, with
    // Go's base64 (RawURLEncoding) and json errors.
    let bad = |why: String| {
        status::bad_request(format!(
            "invalid continue token: continue key is not valid: {why}"
        ))
    };
    let bytes = CONTINUE_B64.decode(token).map_err(|e| bad(e.to_string()))?;
    gojson::unmarshal_into_map(&bytes).map_err(bad)?;
    let v: Value = serde_json::from_slice(&bytes).map_err(|e| bad(e.to_string()))?;
    let rv = v["rv"]
        .as_u64()
        .ok_or_else(|| bad("no resource version".into()))?;
    let ns = v["start"][0]
        .as_str()
        .ok_or_else(|| bad("no start key".into()))?;
    let name = v["start"][1]
        .as_str()
        .ok_or_else(|| bad("no start key".into()))?;
    Ok((rv, (ns.to_owned(), name.to_owned())))
}

impl Store {
    fn map(&self, resource: Resource) -> &BTreeMap<Key, Stored> {
        match resource {
            Resource::Namespaces => &self.namespaces,
            Resource::Secrets => &self.secrets,
            Resource::ServiceAccounts => &self.service_accounts,
            Resource::Pods => &self.pods,
        }
    }

    fn map_mut(&mut self, resource: Resource) -> &mut BTreeMap<Key, Stored> {
        match resource {
            Resource::Namespaces => &mut self.namespaces,
            Resource::Secrets => &mut self.secrets,
            Resource::ServiceAccounts => &mut self.service_accounts,
            Resource::Pods => &mut self.pods,
        }
    }

    pub(super) fn lookup(
        &self,
        resource: Resource,
        namespace: &str,
        name: &str,
    ) -> Option<&Stored> {
        self.map(resource).get(&key(resource, namespace, name))
    }

    /// A fresh resourceVersion, for objects kept outside this store (Events).
    pub(super) fn next_resource_version(&mut self) -> u64 {
        self.resource_version += 1;
        self.resource_version
    }

    /// The current resourceVersion, for lists of objects kept outside this store.
    pub(super) fn resource_version(&self) -> u64 {
        self.resource_version
    }

    pub(super) fn history(
        &self,
        resource: Resource,
        namespace: &str,
        name: &str,
    ) -> Vec<Option<Value>> {
        self.history
            .get(&(resource, key(resource, namespace, name)))
            .cloned()
            .unwrap_or_default()
    }

    pub(super) fn add_hook(&mut self, resource: Resource, namespace: &str, name: &str, hook: Hook) {
        self.hooks
            .push((resource, key(resource, namespace, name), hook));
    }

    /// Stores `obj` with a fresh resourceVersion and records it in the history.
    fn store(
        &mut self,
        resource: Resource,
        k: Key,
        mut obj: Value,
        managers: Vec<ManagerEntry>,
    ) -> Value {
        self.resource_version += 1;
        let rv = self.resource_version.to_string();
        let meta = metadata_mut(&mut obj);
        meta.insert("resourceVersion".into(), json!(rv));
        let rendered: Vec<Value> = managers.iter().map(ManagerEntry::to_json).collect();
        meta.insert("managedFields".into(), Value::Array(rendered));
        self.history
            .entry((resource, k.clone()))
            .or_default()
            .push(Some(obj.clone()));
        self.map_mut(resource).insert(
            k,
            Stored {
                obj: obj.clone(),
                managers,
            },
        );
        obj
    }

    /// What a dry run answers: the object as it would be stored, without storing it.
    fn dry(mut obj: Value, managers: &[ManagerEntry]) -> Value {
        let rendered: Vec<Value> = managers.iter().map(ManagerEntry::to_json).collect();
        metadata_mut(&mut obj).insert("managedFields".into(), Value::Array(rendered));
        obj
    }

    fn remove(&mut self, resource: Resource, k: &Key) -> Option<Stored> {
        let removed = self.map_mut(resource).remove(k);
        if removed.is_some() {
            self.history
                .entry((resource, k.clone()))
                .or_default()
                .push(None);
        }
        removed
    }

    /// Fills what the server sets on create: name, namespace, uid, creationTimestamp, defaults.
    fn prepare_create(resource: Resource, namespace: &str, name: &str, obj: &mut Value) {
        let top = obj
            .as_object_mut()
            .expect("bodies are checked to be objects");
        top.insert("apiVersion".into(), json!("v1"));
        top.insert("kind".into(), json!(resource.kind()));
        if resource == Resource::Secrets && !top.contains_key("type") {
            top.insert("type".into(), json!("Opaque"));
        }
        if resource == Resource::Pods {
            pods::prepare_create(top);
        }
        if resource == Resource::Namespaces {
            let spec = top.entry("spec").or_insert_with(|| json!({}));
            if spec.get("finalizers").is_none() {
                spec["finalizers"] = json!(["kubernetes"]);
            }
            let status = top.entry("status").or_insert_with(|| json!({}));
            if status.get("phase").is_none() {
                status["phase"] = json!("Active");
            }
        }
        let meta = metadata_mut(obj);
        meta.insert("name".into(), json!(name));
        if resource != Resource::Namespaces {
            meta.insert("namespace".into(), json!(namespace));
        }
        meta.insert("uid".into(), json!(uuid::Uuid::new_v4().to_string()));
        meta.insert("creationTimestamp".into(), json!(now()));
        meta.shift_remove("resourceVersion");
        meta.shift_remove("managedFields");
        meta.shift_remove("deletionTimestamp");
        if resource == Resource::Namespaces {
            let labels = meta.entry("labels").or_insert_with(|| json!({}));
            labels["kubernetes.io/metadata.name"] = json!(name);
        }
    }

    /// The namespace lifecycle admission plugin, for creates.
    fn admit_create(
        &self,
        resource: Resource,
        namespace: &str,
        name: &str,
    ) -> Result<(), ApiError> {
        if resource == Resource::Namespaces {
            return Ok(());
        }
        self.admit_namespace_content(resource.plural(), namespace, name)
    }

    /// The namespace lifecycle admission plugin: nothing new in a namespace that is missing
    /// or terminating. `qualified_resource` names what was refused (`secrets`,
    /// `events.events.k8s.io`).
    pub(crate) fn admit_namespace_content(
        &self,
        qualified_resource: &str,
        namespace: &str,
        name: &str,
    ) -> Result<(), ApiError> {
        let ns = self
            .lookup(Resource::Namespaces, "", namespace)
            .ok_or_else(|| status::not_found("namespaces", namespace))?;
        if ns.obj["status"]["phase"] == "Terminating" {
            let cause = Cause {
                reason: "NamespaceTerminating",
                message: format!("namespace {namespace} is being terminated"),
                field: "metadata.namespace".into(),
            };
            return Err(status::forbidden(
                qualified_resource,
                name,
                &format!(
                    "unable to create new content in namespace {namespace} because it is being terminated"
                ),
                vec![cause],
            ));
        }
        Ok(())
    }

    /// The ServiceAccount admission plugin's copy of the account's `imagePullSecrets` into a
    /// new pod that lists none (plugin/pkg/admission/serviceaccount/admission.go `Admit`): the
    /// only way an account's list reaches a pod, once, when it is created.
    fn pull_secrets_from_account(&self, resource: Resource, namespace: &str, obj: &mut Value) {
        if resource != Resource::Pods {
            return;
        }
        let spec = &obj["spec"];
        if spec["imagePullSecrets"]
            .as_array()
            .is_some_and(|l| !l.is_empty())
        {
            return;
        }
        let account = spec["serviceAccountName"].as_str().unwrap_or("default");
        let listed = self
            .lookup(Resource::ServiceAccounts, namespace, account)
            .map(|sa| sa.obj["imagePullSecrets"].clone())
            .filter(|l| l.as_array().is_some_and(|l| !l.is_empty()));
        if let Some(listed) = listed {
            obj["spec"]["imagePullSecrets"] = listed;
        }
    }

    /// The ServiceAccount controller's `default` account of a new namespace.
    fn add_default_service_account(&mut self, namespace: &str) {
        if self
            .lookup(Resource::ServiceAccounts, namespace, "default")
            .is_some()
        {
            return;
        }
        let mut sa = json!({"metadata": {"name": "default"}});
        Self::prepare_create(Resource::ServiceAccounts, namespace, "default", &mut sa);
        self.store(
            Resource::ServiceAccounts,
            key(Resource::ServiceAccounts, namespace, "default"),
            sa,
            Vec::new(),
        );
    }

    /// Stores `obj` as created by `manager` (replacing any object of that name).
    pub(super) fn seed(&mut self, resource: Resource, mut obj: Value, manager: &str) -> Value {
        let name = meta_str(&obj, "name")
            .expect("seeded objects need metadata.name")
            .to_owned();
        let namespace = meta_str(&obj, "namespace").unwrap_or_default().to_owned();
        assert!(
            resource == Resource::Namespaces || !namespace.is_empty(),
            "seeded {} need metadata.namespace",
            resource.plural()
        );
        fold_string_data(resource, &mut obj);
        let terminating = obj["status"]["phase"] == "Terminating";
        let deletion = obj["metadata"]["deletionTimestamp"].clone();
        Self::prepare_create(resource, &namespace, &name, &mut obj);
        self.pull_secrets_from_account(resource, &namespace, &mut obj);
        // An object being deleted and held by finalizers (the real server would refuse to
        // create one with a deletionTimestamp: BeforeCreate clears it; seeding is the way in).
        if resource != Resource::Namespaces && !deletion.is_null() && !finalizers(&obj).is_empty() {
            metadata_mut(&mut obj).insert("deletionTimestamp".into(), deletion.clone());
        }
        if terminating {
            metadata_mut(&mut obj).insert(
                "deletionTimestamp".into(),
                if deletion.is_null() {
                    json!(now())
                } else {
                    deletion
                },
            );
        }
        let managers = fields::update_ownership(None, &obj, &[], manager, &now());
        let stored = self.store(resource, key(resource, &namespace, &name), obj, managers);
        if resource == Resource::Namespaces {
            self.add_default_service_account(&name);
        }
        stored
    }

    /// Deletes an object (a namespace with everything in it).
    pub(super) fn delete_now(&mut self, resource: Resource, namespace: &str, name: &str) {
        if resource == Resource::Namespaces {
            for r in [Resource::Secrets, Resource::ServiceAccounts, Resource::Pods] {
                let keys: Vec<Key> = self
                    .map(r)
                    .keys()
                    .filter(|k| k.0 == name)
                    .cloned()
                    .collect();
                for k in keys {
                    self.remove(r, &k);
                }
            }
        }
        self.remove(resource, &key(resource, namespace, name));
    }

    pub(super) fn get(
        &self,
        resource: Resource,
        namespace: &str,
        name: &str,
    ) -> Result<Value, ApiError> {
        self.live(resource, namespace, name).map(|s| s.obj)
    }

    /// The stored object, or the 404 the real server answers for it.
    fn live(&self, resource: Resource, namespace: &str, name: &str) -> Result<Stored, ApiError> {
        self.lookup(resource, namespace, name)
            .cloned()
            .ok_or_else(|| status::not_found(resource.plural(), name))
    }

    /// Runs the hooks waiting for a read of objects this list page covered: those it showed,
    /// and those it would have shown had they existed (its namespace and field selector
    /// match, and the key lies within the page). A list is a read as a GET is: the hook
    /// fires between that read and the write that follows it.
    pub(super) fn after_list(
        &mut self,
        resource: Resource,
        namespace: Option<&str>,
        opts: &ListOptions,
        page: &Value,
    ) {
        let after = opts
            .continue_token
            .as_deref()
            .and_then(|t| decode_continue(t).ok())
            .map(|(_, k)| k);
        let upto = page["metadata"]["continue"]
            .as_str()
            .and_then(|t| decode_continue(t).ok())
            .map(|(_, k)| k);
        let covered: Vec<Key> = self
            .hooks
            .iter()
            .filter(|(r, k, _)| {
                let stub = json!({"metadata": {"namespace": k.0, "name": k.1}});
                *r == resource
                    && namespace.is_none_or(|ns| ns == k.0)
                    && opts.fields.matches(&stub)
                    && after.as_ref().is_none_or(|a| k > a)
                    && upto.as_ref().is_none_or(|u| k <= u)
            })
            .map(|(_, k, _)| k.clone())
            .collect();
        for (ns, name) in covered {
            self.after_get(resource, &ns, &name);
        }
    }

    /// Runs the hooks waiting for a GET of this object.
    pub(super) fn after_get(&mut self, resource: Resource, namespace: &str, name: &str) {
        let k = key(resource, namespace, name);
        let Some(i) = self
            .hooks
            .iter()
            .position(|(r, hk, _)| *r == resource && *hk == k)
        else {
            return;
        };
        let (_, _, hook) = self.hooks.remove(i);
        match hook {
            Hook::Delete => self.delete_now(resource, namespace, name),
            Hook::DeleteNamespace => self.delete_now(Resource::Namespaces, "", namespace),
            Hook::Create(mut obj, manager) => {
                if self.map(resource).contains_key(&k) {
                    return;
                }
                let meta = metadata_mut(&mut obj);
                meta.insert("name".into(), json!(name));
                if resource != Resource::Namespaces {
                    meta.insert("namespace".into(), json!(namespace));
                }
                self.seed(resource, obj, &manager);
            }
            Hook::Change(change) => {
                let Some(live) = self.map(resource).get(&k).cloned() else {
                    return;
                };
                let mut obj = live.obj.clone();
                change(&mut obj);
                fold_string_data(resource, &mut obj);
                let managers = fields::update_ownership(
                    Some(&live.obj),
                    &obj,
                    &live.managers,
                    "someone-else",
                    &now(),
                );
                self.store(resource, k, obj, managers);
            }
        }
    }

    pub(super) fn list(
        &mut self,
        resource: Resource,
        namespace: Option<&str>,
        opts: &ListOptions,
        max_page: usize,
    ) -> Result<Value, ApiError> {
        let (list_rv, after) = match &opts.continue_token {
            Some(token) => {
                let decoded = decode_continue(token)?;
                if std::mem::take(&mut self.expire_next_continue)
                    || self
                        .expire_next_continue_of
                        .take_if(|r| *r == resource)
                        .is_some()
                {
                    return Err(status::expired_continue());
                }
                (decoded.0, Some(decoded.1))
            }
            None => (self.resource_version, None),
        };
        let limit = opts.limit.filter(|l| *l > 0).map(|l| l.min(max_page));
        let map = self.map(resource);
        let start = match (&after, namespace) {
            (Some(k), _) => std::ops::Bound::Excluded(k.clone()),
            (None, Some(ns)) if resource != Resource::Namespaces => {
                std::ops::Bound::Included((ns.to_owned(), String::new()))
            }
            _ => std::ops::Bound::Unbounded,
        };
        let mut items = Vec::new();
        let mut last: Option<&Key> = None;
        let mut more = false;
        for (k, stored) in map.range((start, std::ops::Bound::Unbounded)) {
            if let Some(ns) = namespace.filter(|_| resource != Resource::Namespaces)
                && k.0 != ns
            {
                break;
            }
            // A full page has a continue token when any key follows, matching or not: the
            // real server's page stops at `limit` items and says there is more to read
            // (CONFORMANCE.md, field-selected-list), so a next page may be empty.
            if limit.is_some_and(|l| items.len() == l) {
                more = true;
                break;
            }
            if !opts.labels.matches(&stored.obj) || !opts.fields.matches(&stored.obj) {
                continue;
            }
            items.push(stored.obj.clone());
            last = Some(k);
        }
        let mut metadata = json!({"resourceVersion": list_rv.to_string()});
        if let (true, Some(last)) = (more, last) {
            metadata["continue"] = json!(encode_continue(list_rv, last));
        }
        Ok(json!({
            "kind": format!("{}List", resource.kind()),
            "apiVersion": "v1",
            "metadata": metadata,
            "items": items,
        }))
    }

    /// POST to a collection.
    pub(super) fn create(
        &mut self,
        resource: Resource,
        namespace: &str,
        mut body: Value,
        opts: &WriteOptions,
    ) -> Result<Value, ApiError> {
        if resource != Resource::Namespaces
            && meta_str(&body, "namespace").is_some_and(|ns| ns != namespace)
        {
            return Err(status::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            ));
        }
        if meta_str(&body, "resourceVersion").is_some() {
            return Err(ApiError::new(
                500,
                "InternalError",
                "Internal error occurred: resourceVersion should not be set on objects to be created",
                Some(Details {
                    causes: vec![Cause {
                        reason: "",
                        message: "resourceVersion should not be set on objects to be created"
                            .into(),
                        field: String::new(),
                    }],
                    ..Details::default()
                }),
            ));
        }
        let name = meta_str(&body, "name").unwrap_or_default().to_owned();
        self.admit_create(resource, namespace, &name)?;
        if name.is_empty() {
            return Err(status::invalid(
                resource.kind(),
                "",
                "",
                &[FieldError::Required {
                    field: "metadata.name".into(),
                    detail: "name or generateName is required".into(),
                }],
            ));
        }
        fold_string_data(resource, &mut body);
        Self::prepare_create(resource, namespace, &name, &mut body);
        self.pull_secrets_from_account(resource, namespace, &mut body);
        validate(resource, &name, &body, None)?;
        if self.lookup(resource, namespace, &name).is_some() {
            return Err(status::already_exists(resource.plural(), &name));
        }
        let managers = fields::update_ownership(None, &body, &[], &opts.manager, &now());
        if opts.dry_run {
            return Ok(Self::dry(body, &managers));
        }
        let stored = self.store(resource, key(resource, namespace, &name), body, managers);
        if resource == Resource::Namespaces {
            self.add_default_service_account(&name);
        }
        Ok(stored)
    }

    /// Writes `new` over the live object (PUT and non-apply patches).
    fn update_existing(
        &mut self,
        resource: Resource,
        namespace: &str,
        name: &str,
        mut new: Value,
        opts: &WriteOptions,
        status_only: bool,
    ) -> Result<Value, ApiError> {
        let k = key(resource, namespace, name);
        let live = self.live(resource, namespace, name)?;
        if !new.is_object() {
            return Err(status::bad_request(
                "the body of the request must be an object",
            ));
        }
        if resource == Resource::Pods {
            pods::keep_on_update(&mut new, &live.obj, status_only);
        }
        if let Some(rv) = meta_str(&new, "resourceVersion")
            && Some(rv) != meta_str(&live.obj, "resourceVersion")
        {
            return Err(status::conflict(resource.plural(), name, status::MODIFIED));
        }
        fold_string_data(resource, &mut new);
        {
            let top = new.as_object_mut().expect("checked to be an object above");
            top.insert("apiVersion".into(), json!("v1"));
            top.insert("kind".into(), json!(resource.kind()));
        }
        let live_meta = live.obj["metadata"].clone();
        let meta = metadata_mut(&mut new);
        meta.insert("name".into(), json!(name));
        if resource != Resource::Namespaces {
            meta.insert("namespace".into(), json!(namespace));
        }
        if !meta.contains_key("uid") {
            meta.insert("uid".into(), live_meta["uid"].clone());
        }
        for system in ["creationTimestamp", "deletionTimestamp", "resourceVersion"] {
            match live_meta.get(system) {
                Some(v) => meta.insert(system.into(), v.clone()),
                None => meta.shift_remove(system),
            };
        }
        meta.shift_remove("managedFields");
        validate(resource, name, &new, Some(&live.obj))?;
        let managers =
            fields::update_ownership(Some(&live.obj), &new, &live.managers, &opts.manager, &now());
        self.finish_update(resource, k, &live, new, managers, opts.dry_run)
    }

    /// Stores an update unless it changes nothing (the real server skips no-op writes).
    fn finish_update(
        &mut self,
        resource: Resource,
        k: Key,
        live: &Stored,
        new: Value,
        managers: Vec<ManagerEntry>,
        dry_run: bool,
    ) -> Result<Value, ApiError> {
        if comparable(&new) == comparable(&live.obj)
            && fields::same_ownership(&managers, &live.managers)
        {
            return Ok(live.obj.clone());
        }
        if dry_run {
            return Ok(Self::dry(new, &managers));
        }
        // registry/generic/registry/store.go (Update, shouldDeleteDuringUpdate): the last
        // finalizer gone from an object being deleted, the object goes.
        if resource != Resource::Namespaces
            && !live.obj["metadata"]["deletionTimestamp"].is_null()
            && finalizers(&new).is_empty()
        {
            self.remove(resource, &k);
            return Ok(new);
        }
        Ok(self.store(resource, k, new, managers))
    }

    /// PUT.
    pub(super) fn replace(
        &mut self,
        resource: Resource,
        namespace: &str,
        name: &str,
        body: Value,
        opts: &WriteOptions,
    ) -> Result<Value, ApiError> {
        if let Some(body_name) = meta_str(&body, "name").filter(|n| *n != name) {
            return Err(status::bad_request(format!(
                "the name of the object ({body_name}) does not match the name on the URL ({name})"
            )));
        }
        self.update_existing(resource, namespace, name, body, opts, false)
    }

    /// PUT, or a merge PATCH, of the status subresource (pods only): the status changes,
    /// nothing else does.
    pub(super) fn write_status(
        &mut self,
        resource: Resource,
        namespace: &str,
        name: &str,
        body: Value,
        merge: bool,
        opts: &WriteOptions,
    ) -> Result<Value, ApiError> {
        let new = if merge {
            super::patch::merge_patch(&self.get(resource, namespace, name)?, &body)
        } else {
            body
        };
        self.update_existing(resource, namespace, name, new, opts, true)
    }

    /// PATCH with a non-apply patch type.
    pub(super) fn patch(
        &mut self,
        resource: Resource,
        namespace: &str,
        name: &str,
        patch_type: PatchType,
        patch: &Value,
        opts: &WriteOptions,
    ) -> Result<Value, ApiError> {
        let live = self.get(resource, namespace, name)?;
        let patched = match patch_type {
            PatchType::Json => match super::patch::json_patch(&live, patch) {
                Err(bad) => return Err(status::bad_request(bad.0)),
                Ok(Err(_failed)) => return Err(status::json_patch_failed()),
                Ok(Ok(v)) => v,
            },
            PatchType::Merge => super::patch::merge_patch(&live, patch),
            PatchType::Strategic => super::patch::strategic_merge_patch(&live, patch),
            PatchType::Apply => unreachable!("apply patches go through Store::apply"),
        };
        self.update_existing(resource, namespace, name, patched, opts, false)
    }

    /// Server-side apply; answers 201 when it created the object. `authorize_create` is
    /// the `create` authorization an apply that creates needs besides `patch`.
    #[allow(clippy::too_many_arguments)] // the request's parts, as the handler has them
    pub(super) fn apply(
        &mut self,
        resource: Resource,
        namespace: &str,
        name: &str,
        mut config: Value,
        force: bool,
        opts: &WriteOptions,
        authorize_create: &dyn Fn() -> Result<(), ApiError>,
    ) -> Result<(u16, Value), ApiError> {
        if !config.is_object() {
            return Err(status::bad_request(
                "error decoding YAML: the apply body must be an object",
            ));
        }
        if config
            .get("metadata")
            .and_then(|m| m.get("managedFields"))
            .is_some_and(|v| !v.is_null())
        {
            return Err(status::bad_request("metadata.managedFields must be nil"));
        }
        if let Some(body_name) = meta_str(&config, "name").filter(|n| *n != name) {
            return Err(status::bad_request(format!(
                "the name of the object ({body_name}) does not match the name on the URL ({name})"
            )));
        }
        if resource != Resource::Namespaces
            && meta_str(&config, "namespace").is_some_and(|ns| ns != namespace)
        {
            return Err(status::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            ));
        }
        fold_string_data(resource, &mut config);
        let uid = meta_str(&config, "uid").map(str::to_owned);
        let rv = meta_str(&config, "resourceVersion").map(str::to_owned);
        let k = key(resource, namespace, name);
        let now = now();

        let Some(live) = self.map(resource).get(&k).cloned() else {
            // The order of patch.go and the registry's Update for a create: the patcher's
            // uid check, then mutating admission (namespace lifecycle), then validation,
            // then createValidation (the `create` authorization; the fake has no validating
            // admission: tests/real/ has the real server's).
            if let Some(uid) = uid {
                return Err(status::conflict(
                    resource.plural(),
                    name,
                    &format!(
                        "uid mismatch: the provided object specified uid {uid}, and no existing object was found"
                    ),
                ));
            }
            self.admit_create(resource, namespace, name)?;
            let applied = fields::apply(&json!({}), &[], &config, &opts.manager, force, &now)
                .expect("nothing to conflict with on create");
            let mut obj = config.clone();
            Self::prepare_create(resource, namespace, name, &mut obj);
            self.pull_secrets_from_account(resource, namespace, &mut obj);
            validate(resource, name, &obj, None)?;
            authorize_create()?;
            if opts.dry_run {
                return Ok((201, Self::dry(obj, &applied.managers)));
            }
            let stored = self.store(resource, k, obj, applied.managers);
            if resource == Resource::Namespaces {
                self.add_default_service_account(name);
            }
            return Ok((201, stored));
        };

        let applied = fields::apply(
            &live.obj,
            &live.managers,
            &config,
            &opts.manager,
            force,
            &now,
        )
        .map_err(|conflicts| {
            let causes = conflicts
                .iter()
                .map(|c| Cause {
                    reason: "FieldManagerConflict",
                    message: format!("conflict with {}", c.manager),
                    field: fields::path_string(&c.path),
                })
                .collect();
            let details = Details {
                causes,
                ..Details::default()
            };
            ApiError::new(
                409,
                "Conflict",
                fields::conflict_message(&conflicts),
                Some(details),
            )
        })?;
        if let Some(rv) = rv
            && Some(rv.as_str()) != meta_str(&live.obj, "resourceVersion")
        {
            return Err(status::conflict(resource.plural(), name, status::MODIFIED));
        }
        let mut obj = applied.obj;
        if let Some(uid) = uid {
            metadata_mut(&mut obj).insert("uid".into(), json!(uid));
        }
        validate(resource, name, &obj, Some(&live.obj))?;
        Ok((
            200,
            self.finish_update(resource, k, &live, obj, applied.managers, opts.dry_run)?,
        ))
    }

    /// DELETE: objects go at once unless finalizers hold them; a namespace turns Terminating
    /// (nothing finalizes it).
    pub(super) fn delete(
        &mut self,
        resource: Resource,
        namespace: &str,
        name: &str,
        preconditions: &Value,
        dry_run: bool,
    ) -> Result<Value, ApiError> {
        let k = key(resource, namespace, name);
        let live = self.live(resource, namespace, name)?;
        for (field, label) in [("uid", "UID"), ("resourceVersion", "ResourceVersion")] {
            if let Some(want) = preconditions.get(field).and_then(Value::as_str) {
                let have = meta_str(&live.obj, field).unwrap_or_default();
                if want != have {
                    return Err(status::conflict(
                        resource.plural(),
                        name,
                        &format!(
                            "Precondition failed: {label} in precondition: {want}, {label} in object meta: {have}"
                        ),
                    ));
                }
            }
        }
        if dry_run {
            return Ok(live.obj);
        }
        if resource == Resource::Namespaces {
            if live.obj["status"]["phase"] == "Terminating" {
                return Ok(live.obj);
            }
            let mut obj = live.obj.clone();
            obj["status"]["phase"] = json!("Terminating");
            metadata_mut(&mut obj).insert("deletionTimestamp".into(), json!(now()));
            return Ok(self.store(resource, k, obj, live.managers));
        }
        // registry/generic/registry/store.go (Delete, updateForGracefulDeletionAndFinalizers,
        // markAsDeleting): finalizers keep the object, marked with a deletionTimestamp and a
        // grace of 0, until they are removed. The answer is 200 with the object: 202 only when
        // the request set orphanDependents=false (endpoints/handlers/delete.go).
        if !finalizers(&live.obj).is_empty() {
            if !live.obj["metadata"]["deletionTimestamp"].is_null() {
                return Ok(live.obj);
            }
            let mut obj = live.obj.clone();
            let meta = metadata_mut(&mut obj);
            meta.insert("deletionTimestamp".into(), json!(now()));
            meta.insert("deletionGracePeriodSeconds".into(), json!(0));
            return Ok(self.store(resource, k, obj, live.managers));
        }
        self.remove(resource, &k);
        // An object gone at once is answered with a Success Status, unless its registry sets
        // ReturnDeletedObject (pods and serviceaccounts do, secrets don't): seen on
        // kube-apiserver v1.37.2 (CONFORMANCE.md).
        if resource == Resource::Secrets {
            return Ok(json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
                "status": "Success", "details": {"name": name, "kind": resource.plural(),
                "uid": meta_str(&live.obj, "uid").unwrap_or_default()}}));
        }
        Ok(live.obj)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_dns_subdomains() {
        assert!(is_dns_subdomain("aws-ecr.token"));
        assert!(!is_dns_subdomain("Bad_Name"));
        assert!(!is_dns_subdomain("-a"));
        assert!(!is_dns_label("a.b"));
    }

    #[test]
    fn continue_tokens_round_trip() {
        let k = ("ns".to_owned(), "name".to_owned());
        assert_eq!(decode_continue(&encode_continue(7, &k)).unwrap(), (7, k));
        assert_eq!(decode_continue("!!").unwrap_err().code, 400);
    }
}
