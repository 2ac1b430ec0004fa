//! Every object of one name, in every namespace: one list, field-selected by `metadata.name`,
//! paged, a page at a time as it arrives.
//!
//! RBAC allows it without a wider grant: for a list (or watch) kube-apiserver takes a
//! `metadata.name` field selector as the request's resource name (k8s.io/apiserver
//! `pkg/endpoints/request/requestinfo.go`: `FieldSelector.RequiresExactMatch("metadata.name")`),
//! so `list` with `resourceNames: [<name>]` lists exactly the objects of that name, and a list
//! without the selector, or for another name, is refused.

use std::collections::BTreeMap;
use std::marker::PhantomData;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{LocalObjectReference, Secret, ServiceAccount};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::Client;
use kube::api::ListParams;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use tracing::{debug, warn};

use crate::cluster::retry::{self, RequestError};

/// Objects asked for per page; the server may answer fewer.
const PAGE_SIZE: u32 = 500;
/// How often an expired continue token may restart the list.
///
/// kube-apiserver answers a continue token whose snapshot etcd has compacted away (every 5
/// minutes by default) with 410 Gone, reason `Expired`. The list starts again from its first
/// page, rather than falling back to a GET per namespace: the whole list is a few dozen pages
/// where the GETs would be thousands, and a list of 10,000 Secrets takes seconds, far inside
/// the compaction interval, so a restart succeeds. (The 410's own "inconsistent" continue
/// token is not used: a restart is as cheap to reason about and costs only the pages read
/// again.) The caller hands each namespace out once, so the pages shown again change nothing.
/// After MAX_RESTARTS the list is over as broken off, and the caller reads by name the
/// namespaces it had not shown.
const MAX_RESTARTS: u32 = 3;

#[derive(Debug, thiserror::Error)]
pub enum ListError {
    /// No `list` on this name, cluster-wide: the caller reads each namespace's by name instead.
    #[error("forbidden to list {what} named {name} in every namespace: {source}")]
    Forbidden {
        what: &'static str,
        name: String,
        source: RequestError,
    },
    #[error("could not list {what} named {name}: {source}")]
    Request {
        what: &'static str,
        name: String,
        source: RequestError,
    },
    #[error("the list of {what} named {name} kept expiring (410) after {MAX_RESTARTS} restarts")]
    Expiring { what: &'static str, name: String },
}

impl ListError {
    pub fn is_forbidden(&self) -> bool {
        matches!(self, Self::Forbidden { .. })
    }
}

/// The pages of one field-selected list across every namespace. A list restarted after an
/// expired continue token shows again what it showed before: the caller visits each namespace
/// once.
pub struct ByName<T> {
    client: Client,
    /// The core v1 resource, as the log and errors call the objects and as its path says it:
    /// "secrets", "serviceaccounts".
    what: &'static str,
    name: String,
    state: State,
    restarts: u32,
    item: PhantomData<fn() -> T>,
}

enum State {
    First,
    Continue(String),
    Done,
}

impl<T: Listed> ByName<T> {
    /// `what`: a core v1 resource ("secrets"); `T`: what each item is read as (a [`Listed`]
    /// type, which keeps only what a run needs), handed out as its `Object`.
    pub fn new(client: Client, what: &'static str, name: &str) -> Self {
        Self {
            client,
            what,
            name: name.to_owned(),
            state: State::First,
            restarts: 0,
            item: PhantomData,
        }
    }

    /// Whether pages remain unread.
    pub fn has_more(&self) -> bool {
        !matches!(self.state, State::Done)
    }

    /// The next page; None when there are no more.
    pub async fn next(&mut self) -> Option<Result<Vec<T::Object>, ListError>> {
        loop {
            let token = match std::mem::replace(&mut self.state, State::Done) {
                State::Done => return None,
                State::First => None,
                State::Continue(token) => Some(token),
            };
            let mut params = ListParams::default()
                .fields(&format!("metadata.name={}", self.name))
                .limit(PAGE_SIZE);
            if let Some(token) = &token {
                params = params.continue_token(token);
            }
            let what = self.what;
            let path = format!("/api/v1/{what}");
            let client = &self.client;
            let send = || async {
                let request = kube::core::Request::new(&path)
                    .list(&params)
                    .map_err(kube::Error::BuildRequest)?;
                client.request::<Page<T>>(request).await
            };
            let list = match retry::send("list by name", send).await {
                Ok(list) => list,
                Err(RequestError::Api(s)) if s.code == 410 && token.is_some() => {
                    self.restarts += 1;
                    if self.restarts > MAX_RESTARTS {
                        return Some(Err(ListError::Expiring {
                            what,
                            name: self.name.clone(),
                        }));
                    }
                    warn!(
                        what,
                        name = self.name,
                        restart = self.restarts,
                        "list continue token expired (410); listing again from the start"
                    );
                    self.state = State::First;
                    continue;
                }
                Err(source) => {
                    let name = self.name.clone();
                    return Some(Err(if source.code() == Some(403) {
                        ListError::Forbidden { what, name, source }
                    } else {
                        ListError::Request { what, name, source }
                    }));
                }
            };
            let items = list.items.unwrap_or_default();
            self.state = match list.metadata.continue_.filter(|t| !t.is_empty()) {
                Some(next) => State::Continue(next),
                None => State::Done,
            };
            debug!(
                what,
                items = items.len(),
                more = self.has_more(),
                "list page"
            );
            return Some(Ok(items.into_iter().map(Listed::into_object).collect()));
        }
    }

    /// Every page, kept as `keep` makes each object: for a list read whole before the run's
    /// first namespace (the ServiceAccounts), where `keep` holds only what is needed.
    pub async fn all<U>(
        mut self,
        mut keep: impl FnMut(T::Object) -> Option<U>,
    ) -> Result<Vec<U>, ListError> {
        let mut kept = Vec::new();
        while let Some(page) = self.next().await {
            kept.extend(page?.into_iter().filter_map(&mut keep));
        }
        Ok(kept)
    }
}

/// One page of a list, as read: its items and the token for the next.
#[derive(Deserialize)]
struct Page<T> {
    #[serde(default)]
    metadata: PageMeta,
    /// Null in an empty list, as some servers send it.
    items: Option<Vec<T>>,
}

#[derive(Deserialize, Default)]
struct PageMeta {
    #[serde(rename = "continue")]
    continue_: Option<String>,
}

/// What a run reads of an object's metadata. Everything else (managedFields above all, a
/// FieldsV1 tree per manager) is skipped unparsed: at 10,000 namespaces a list carries
/// 10,000 of them.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct ListedMeta {
    name: Option<String>,
    namespace: Option<String>,
    uid: Option<String>,
    resource_version: Option<String>,
    annotations: Option<BTreeMap<String, String>>,
    labels: Option<BTreeMap<String, String>>,
    deletion_timestamp: Option<Time>,
    /// Named by the warning on a Secret being deleted.
    finalizers: Option<Vec<String>>,
}

impl From<ListedMeta> for ObjectMeta {
    fn from(m: ListedMeta) -> Self {
        Self {
            name: m.name,
            namespace: m.namespace,
            uid: m.uid,
            resource_version: m.resource_version,
            annotations: m.annotations,
            labels: m.labels,
            deletion_timestamp: m.deletion_timestamp,
            finalizers: m.finalizers,
            ..Self::default()
        }
    }
}

/// A list item as read: what judging and writing the object needs, nothing else.
pub trait Listed: DeserializeOwned {
    type Object;
    fn into_object(self) -> Self::Object;
}

/// A Secret as the list shows it, without its managedFields: what `judge` reads (type,
/// immutable, data, the annotations), a write pins (uid, resourceVersion) and its warnings
/// name (deletionTimestamp, finalizers). A field of the metadata read anywhere in src/ must
/// be kept here, or a listed Secret lacks it where a Secret read by name has it.
#[derive(Deserialize)]
pub struct ListedSecret {
    #[serde(default)]
    metadata: ListedMeta,
    #[serde(rename = "type")]
    type_: Option<String>,
    immutable: Option<bool>,
    data: Option<BTreeMap<String, ByteString>>,
}

impl Listed for ListedSecret {
    type Object = Secret;
    fn into_object(self) -> Secret {
        Secret {
            metadata: self.metadata.into(),
            type_: self.type_,
            immutable: self.immutable,
            data: self.data,
            string_data: None,
        }
    }
}

/// A ServiceAccount as the list shows it, with only what adding our entry needs: its
/// resourceVersion and imagePullSecrets.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListedServiceAccount {
    #[serde(default)]
    metadata: ListedMeta,
    image_pull_secrets: Option<Vec<LocalObjectReference>>,
}

impl Listed for ListedServiceAccount {
    type Object = ServiceAccount;
    fn into_object(self) -> ServiceAccount {
        ServiceAccount {
            metadata: ObjectMeta {
                name: self.metadata.name,
                namespace: self.metadata.namespace,
                resource_version: self.metadata.resource_version,
                ..Default::default()
            },
            image_pull_secrets: self.image_pull_secrets,
            ..ServiceAccount::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A Secret as kube-apiserver lists it after a server-side apply.
    fn listed() -> serde_json::Value {
        json!({
            "metadata": {
                "name": "aws-ecr-token", "namespace": "team-a",
                "uid": "3f1c", "resourceVersion": "812",
                "creationTimestamp": "2026-12-02T10:00:00Z",
                "deletionTimestamp": "2026-12-02T11:00:00Z",
                "finalizers": ["example.com/hold"],
                "labels": {"app": "x"},
                "annotations": {"ecr-refresh/expires-at": "2026-12-02T22:00:00Z"},
                "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "o", "uid": "9"}],
                "managedFields": [{
                    "manager": "ecr-refresh", "operation": "Apply", "apiVersion": "v1",
                    "time": "2026-12-02T10:00:00Z", "fieldsType": "FieldsV1",
                    "fieldsV1": {"f:data": {".": {}, "f:.dockerconfigjson": {}}, "f:type": {}}
                }]
            },
            "type": "kubernetes.io/dockerconfigjson",
            "immutable": false,
            "data": {".dockerconfigjson": "eyJhdXRocyI6e319"}
        })
    }

    #[test]
    fn a_listed_secret_keeps_what_a_run_reads_and_drops_the_managed_fields() {
        let full: Secret = serde_json::from_value(listed()).unwrap();
        let lean = serde_json::from_value::<ListedSecret>(listed())
            .unwrap()
            .into_object();

        assert_eq!(lean.metadata.managed_fields, None);
        assert_eq!(lean.metadata.owner_references, None);
        let kept = |s: &Secret| {
            (
                s.metadata.name.clone(),
                s.metadata.namespace.clone(),
                s.metadata.uid.clone(),
                s.metadata.resource_version.clone(),
                s.metadata.annotations.clone(),
                s.metadata.labels.clone(),
                s.metadata.deletion_timestamp.clone(),
                s.metadata.finalizers.clone(),
                s.type_.clone(),
                s.immutable,
                s.data.clone(),
            )
        };
        assert_eq!(kept(&lean), kept(&full));
        assert_eq!(
            lean.data.unwrap()[".dockerconfigjson"].0,
            br#"{"auths":{}}"#
        );
    }

    #[test]
    fn a_listed_service_account_keeps_its_resource_version_and_pull_secrets() {
        let sa = serde_json::from_value::<ListedServiceAccount>(json!({
            "metadata": {"name": "default", "namespace": "team-a", "resourceVersion": "7",
                "managedFields": [{"manager": "kube-controller-manager"}]},
            "imagePullSecrets": [{"name": "other"}],
            "secrets": [{"name": "token"}]
        }))
        .unwrap()
        .into_object();

        assert_eq!(sa.metadata.resource_version.as_deref(), Some("7"));
        assert_eq!(sa.metadata.namespace.as_deref(), Some("team-a"));
        assert_eq!(
            sa.image_pull_secrets,
            Some(vec![LocalObjectReference {
                name: "other".into()
            }])
        );
        assert_eq!(sa.secrets, None);
        assert_eq!(sa.metadata.managed_fields, None);
    }

    #[test]
    fn a_page_without_items_or_token_is_an_empty_last_page() {
        let page: Page<ListedSecret> =
            serde_json::from_value(json!({"metadata": {"resourceVersion": "1"}, "items": null}))
                .unwrap();
        assert!(page.items.is_none() && page.metadata.continue_.is_none());
        let page: Page<ListedSecret> =
            serde_json::from_value(json!({"metadata": {"continue": "abc"}, "items": [listed()]}))
                .unwrap();
        assert_eq!(page.metadata.continue_.as_deref(), Some("abc"));
        assert_eq!(page.items.unwrap().len(), 1);
    }
}
