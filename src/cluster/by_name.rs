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

use crate::cluster::pager::{Listing, MAX_RESTARTS, PageError, Pager};
use crate::cluster::retry::RequestError;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{LocalObjectReference, Secret, ServiceAccount};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::Client;
use kube::api::ListParams;
use serde::Deserialize;
use serde::de::DeserializeOwned;

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

/// The pages of one field-selected list across every namespace (`cluster::pager`). A list
/// restarted after an expired continue token shows again what it showed before: the caller
/// visits each namespace once.
pub struct ByName<T> {
    client: Client,
    /// The core v1 resource, as the log and errors call the objects and as its path says it:
    /// "secrets", "serviceaccounts".
    what: &'static str,
    name: String,
    pager: Pager,
    item: PhantomData<fn() -> T>,
}

impl<T: Listed> ByName<T> {
    /// `what`: a core v1 resource ("secrets"); `T`: what each item is read as (a [`Listed`]
    /// type, which keeps only what a run needs), handed out as its `Object`.
    pub fn new(client: Client, what: &'static str, name: &str) -> Self {
        Self {
            client,
            what,
            name: name.to_owned(),
            pager: Pager::new(what, "list by name").named(name),
            item: PhantomData,
        }
    }

    /// The next page; None when there are no more.
    pub async fn next(&mut self) -> Option<Result<Vec<T::Object>, ListError>> {
        let what = self.what;
        let path = format!("/api/v1/{what}");
        let params = ListParams::default().fields(&format!("metadata.name={}", self.name));
        let client = &self.client;
        let page = self
            .pager
            .next(&params, |params| {
                let path = &path;
                async move {
                    let request = kube::core::Request::new(path)
                        .list(&params)
                        .map_err(kube::Error::BuildRequest)?;
                    client.request::<Page<T>>(request).await
                }
            })
            .await?;
        let name = self.name.clone();
        Some(match page {
            Ok(items) => Ok(items.into_iter().map(Listed::into_object).collect()),
            Err(PageError::Request(source)) if source.code() == Some(403) => {
                Err(ListError::Forbidden { what, name, source })
            }
            Err(PageError::Request(source)) => Err(ListError::Request { what, name, source }),
            Err(PageError::Expiring { .. }) => Err(ListError::Expiring { what, name }),
        })
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

impl<T> From<Page<T>> for Listing<T> {
    fn from(page: Page<T>) -> Self {
        Self {
            items: page.items.unwrap_or_default(),
            continue_token: page.metadata.continue_,
        }
    }
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
