//! Who the API server says this run is: a SelfSubjectReview (`authentication.k8s.io/v1`,
//! served from Kubernetes 1.28; what `kubectl auth whoami` asks). It stores nothing, and every
//! authenticated user may ask it (the `system:basic-user` ClusterRole).

use k8s_openapi::api::authentication::v1::SelfSubjectReview;
use kube::api::PostParams;
use kube::{Api, Client};

use crate::cluster::retry::{self, RequestError};

/// The user name this client authenticates as (None if the server gave none).
pub async fn username(client: &Client) -> Result<Option<String>, RequestError> {
    let api: Api<SelfSubjectReview> = Api::all(client.clone());
    let (params, review) = (PostParams::default(), SelfSubjectReview::default());
    let review = retry::send("ask who we are", || api.create(&params, &review)).await?;
    Ok(review
        .status
        .and_then(|s| s.user_info)
        .and_then(|u| u.username)
        .filter(|u| !u.is_empty()))
}
