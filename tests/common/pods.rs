//! The pods a check reads (tests/fake/check.rs on the fake, tests/real/check.rs on a real
//! kube-apiserver): one with a container on an image, as a ReplicaSet makes them or bare,
//! and the status a kubelet writes when it can't pull that image.

use serde_json::{Value, json};

/// A pod in `ns` with one container `app` on `image`, owned by ReplicaSet `owner` when
/// given.
pub(crate) fn pod(ns: &str, name: &str, image: &str, owner: Option<&str>) -> Value {
    let mut body = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"containers": [{"name": "app", "image": image}]}
    });
    if let Some(owner) = owner {
        body["metadata"]["ownerReferences"] = json!([{
            "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": owner,
            "uid": "0b6e4c7a-0000-4000-8000-000000000001", "controller": true
        }]);
    }
    body
}

/// The status a kubelet writes for [`pod`]'s container when it can't pull `image`.
pub(crate) fn back_off_status(image: &str) -> Value {
    json!({
        "phase": "Pending",
        "containerStatuses": [{
            "name": "app", "image": image, "imageID": "", "ready": false, "restartCount": 0,
            "state": {"waiting": {
                "reason": "ImagePullBackOff",
                "message": format!("Back-off pulling image \"{image}\"")
            }}
        }]
    })
}
