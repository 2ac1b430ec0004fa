//! Pod requests: the unfinished pods of a namespace, and an eviction.

use k8s_openapi::api::core::v1::{Pod, ServiceAccount};
use kube::Api;
use kube::api::{EvictParams, ListParams};

use crate::cluster::retry::{self, RequestError};

/// Pods asked for per page; the server may answer fewer.
const POD_PAGE: u32 = 500;
/// Pods that still run or wait to: finished pods pull nothing.
const UNFINISHED: &str = "status.phase!=Succeeded,status.phase!=Failed";

/// The namespace's unfinished pods, every page (one LIST per 500 pods).
pub async fn unfinished(api: &Api<Pod>) -> Result<Vec<Pod>, RequestError> {
    let mut all = Vec::new();
    let mut token: Option<String> = None;
    loop {
        let mut params = ListParams::default().fields(UNFINISHED).limit(POD_PAGE);
        if let Some(t) = &token {
            params = params.continue_token(t);
        }
        let list = retry::send("list pods", || api.list(&params)).await?;
        all.extend(list.items);
        match list.metadata.continue_.filter(|t| !t.is_empty()) {
            Some(next) => token = Some(next),
            None => return Ok(all),
        }
    }
}

/// Evicts a pod through the Eviction API (POST pods/NAME/eviction), pinned to the uid read so
/// that a pod recreated under the same name (a StatefulSet's) is not evicted in its place.
/// Sent once: a 429 (a PodDisruptionBudget) is the answer, not a reason to retry, and the API
/// server's Retry-After of 10s is the next run's business. The client given must not retry
/// 429 itself (`client::connect_without_throttle_retries`).
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
