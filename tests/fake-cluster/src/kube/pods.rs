//! Pods, as far as a reader of them needs: what the server fills in on create, what it
//! validates, which fields a field selector may name, and the status subresource (the
//! kubelet's way in; there is no kubelet here, so tests write statuses as the admin).
//! Where each rule comes from is in PODS.md.

use serde_json::{Map, Value, json};

use super::status::FieldError;

/// The field selectors the real server accepts for pods (pkg/registry/core/pod/strategy.go,
/// PodToSelectableFields; pkg/apis/core/v1/conversion.go), besides metadata.name and
/// metadata.namespace.
pub(crate) const SELECTABLE: &[&str] = &[
    "spec.nodeName",
    "spec.restartPolicy",
    "spec.schedulerName",
    "spec.serviceAccountName",
    "spec.hostNetwork",
    "status.phase",
    "status.podIP",
    "status.podIPs",
    "status.nominatedNodeName",
];

/// The value a selectable field has in `pod`, as the server compares it (a missing string is
/// "", hostNetwork is "true" or "false").
pub(crate) fn selectable(pod: &Value, field: &str) -> String {
    let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
    match field {
        "spec.hostNetwork" => (pod["spec"]["hostNetwork"].as_bool() == Some(true)).to_string(),
        // Only the first IP is selectable (the field set holds podIPs[0]).
        "status.podIPs" => text(&pod["status"]["podIPs"][0]["ip"]),
        _ => {
            let (top, key) = field.split_once('.').unwrap_or((field, ""));
            text(&pod[top][key])
        }
    }
}

/// What PrepareForCreate and the defaulting and ServiceAccount admission set: the status is
/// the server's (Pending, whatever the body said), the ServiceAccount defaults to `default`.
pub(crate) fn prepare_create(top: &mut Map<String, Value>) {
    top.insert(
        "status".into(),
        json!({"phase": "Pending", "qosClass": "BestEffort"}),
    );
    let spec = top.entry("spec").or_insert_with(|| json!({}));
    if !spec.is_object() {
        *spec = json!({});
    }
    for (field, default) in [
        ("restartPolicy", "Always"),
        ("schedulerName", "default-scheduler"),
        ("dnsPolicy", "ClusterFirst"),
        ("serviceAccountName", "default"),
    ] {
        if spec
            .get(field)
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
        {
            spec[field] = json!(default);
        }
    }
    // The deprecated alias the server keeps in step.
    spec["serviceAccount"] = spec["serviceAccountName"].clone();
}

/// ValidatePodCreate, the part a test can trip over: containers, each named, each with an image.
pub(crate) fn validate(pod: &Value, errors: &mut Vec<FieldError>) {
    let containers = pod["spec"]["containers"].as_array();
    if containers.is_none_or(Vec::is_empty) {
        errors.push(FieldError::Required {
            field: "spec.containers".into(),
            detail: String::new(),
        });
    }
    for list in ["initContainers", "containers", "ephemeralContainers"] {
        for (i, c) in pod["spec"][list]
            .as_array()
            .into_iter()
            .flatten()
            .enumerate()
        {
            for key in ["name", "image"] {
                if c[key].as_str().is_none_or(str::is_empty) {
                    errors.push(FieldError::Required {
                        field: format!("spec.{list}[{i}].{key}"),
                        detail: String::new(),
                    });
                }
            }
        }
    }
}

/// An update of the pod itself keeps the status it had (PrepareForUpdate); an update of the
/// status subresource keeps everything else (podStatusStrategy.PrepareForUpdate).
pub(crate) fn keep_on_update(new: &mut Value, old: &Value, status_only: bool) {
    if status_only {
        let status = new["status"].take();
        let mut kept = old.clone();
        kept["status"] = status;
        // The body's resourceVersion (a precondition) stays with it.
        if let Some(rv) = new["metadata"].get("resourceVersion").cloned() {
            kept["metadata"]["resourceVersion"] = rv;
        } else if let Some(meta) = kept["metadata"].as_object_mut() {
            meta.shift_remove("resourceVersion");
        }
        *new = kept;
    } else {
        new["status"] = old["status"].clone();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selectable_fields_read_as_the_server_compares_them() {
        let pod = json!({
            "spec": {"nodeName": "n1", "serviceAccountName": "builder"},
            "status": {"phase": "Running", "podIPs": [{"ip": "10.0.0.1"}]}
        });
        assert_eq!(selectable(&pod, "spec.nodeName"), "n1");
        assert_eq!(selectable(&pod, "spec.serviceAccountName"), "builder");
        assert_eq!(selectable(&pod, "spec.hostNetwork"), "false");
        assert_eq!(selectable(&pod, "status.phase"), "Running");
        assert_eq!(selectable(&pod, "status.podIPs"), "10.0.0.1");
        assert_eq!(selectable(&pod, "status.nominatedNodeName"), "");
    }
}
