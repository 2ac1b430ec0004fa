//! Pod requests: the unfinished pods of a namespace, and an eviction.

use std::collections::HashSet;

use k8s_openapi::api::core::v1::{Pod, ServiceAccount};
use kube::Api;
use kube::api::{EvictParams, ListParams};

use crate::cluster::pager::{PageError, Pager};
use crate::cluster::retry::{self, RequestError};

/// Pods that still run or wait to: finished pods pull nothing.
const UNFINISHED: &str = "status.phase!=Succeeded,status.phase!=Failed";

/// The namespace's unfinished pods, every page (one LIST per 500 pods), each once: a list
/// restarted after its continue token expired shows pods again, kept by uid only the first
/// time, so that no pod is judged or evicted twice in a run.
pub async fn unfinished(api: &Api<Pod>) -> Result<Vec<Pod>, PageError> {
    let namespace = api.namespace().unwrap_or_default().to_owned();
    let mut pager = Pager::new("pods", "list pods").in_namespace(&namespace);
    let params = ListParams::default().fields(UNFINISHED);
    let mut seen = HashSet::new();
    let mut all = Vec::new();
    while let Some(page) = pager
        .next(&params, |params| async move { api.list(&params).await })
        .await
    {
        let page = page?;
        all.extend(page.into_iter().filter(|pod| {
            // A pod without a uid (never from an API server) is kept: nothing to tell it by.
            pod.metadata
                .uid
                .as_ref()
                .is_none_or(|uid| seen.insert(uid.clone()))
        }));
    }
    Ok(all)
}

/// Evicts a pod through the Eviction API (POST pods/NAME/eviction), pinned to the uid read so
/// that a pod recreated under the same name (a StatefulSet's) is not evicted in its place.
/// Sent once: a 429 (a PodDisruptionBudget) is the answer, not a reason to retry, and the API
/// server's Retry-After of 10s is the next run's business. The client given must not retry
/// 429 itself (`Target::client(false)`).
pub async fn evict(api: &Api<Pod>, name: &str, uid: Option<&str>) -> Result<(), RequestError> {
    let mut params = EvictParams::default();
    if let Some(uid) = uid {
        params.delete_options = Some(kube::api::DeleteParams {
            preconditions: Some(kube::api::Preconditions {
                uid: Some(uid.to_owned()),
                resource_version: None,
            }),
            ..kube::api::DeleteParams::default()
        });
    }
    match tokio::time::timeout(retry::CALL_TIMEOUT, api.evict(name, &params)).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(RequestError::from(e)),
        Err(_) => Err(RequestError::Timeout(retry::CALL_TIMEOUT)),
    }
}

/// Each named ServiceAccount of `api`'s namespace, one GET each (None: it does not exist), in
/// the order given.
pub async fn service_accounts<'a>(
    api: &Api<ServiceAccount>,
    names: impl IntoIterator<Item = &'a str>,
) -> Vec<(&'a str, Result<Option<ServiceAccount>, RequestError>)> {
    let mut read = Vec::new();
    for name in names {
        read.push((
            name,
            retry::send("get serviceaccount", || api.get_opt(name)).await,
        ));
    }
    read
}
