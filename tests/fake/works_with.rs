//! The readers of our Secret that the book's "works with" page names, where the fake can show
//! what they need: OpenShift's global pull secret, which holds other registries' entries that
//! must come through our writes byte for byte.

use crate::common;

use common::*;
use fake_cluster::Resource;
use serde_json::json;

/// OpenShift's global pull secret as the installer leaves it: the Red Hat registries' entries
/// (each with `auth` and `email`, in the installer's spacing), and a mirror's.
fn openshift_entries() -> Vec<String> {
    [
        (
            "cloud.openshift.com",
            "b3BlbnNoaWZ0LXJlbGVhc2UtZGV2K29jbV9hY2Nlc3M6WFhYWA==",
            "ops@example.com",
        ),
        (
            "quay.io",
            "b3BlbnNoaWZ0LXJlbGVhc2UtZGV2K29jbV9hY2Nlc3M6WVlZWQ==",
            "ops@example.com",
        ),
        (
            "registry.connect.redhat.com",
            "fHVoYy1wb29sLTEyMzQ6WlpaWg==",
            "ops@example.com",
        ),
        (
            "registry.redhat.io",
            "fHVoYy1wb29sLTEyMzQ6V1dXVw==",
            "ops@example.com",
        ),
        (
            "mirror.internal.example:5000",
            "bWlycm9yOnNlY3JldA==",
            "mirror@example.com",
        ),
    ]
    .iter()
    // Each entry's value as the installer spaced it: a write keeps those bytes as they are.
    .map(|(host, auth, email)| format!(r#""{host}":{{ "auth": "{auth}", "email": "{email}" }}"#))
    .collect()
}

#[test]
fn openshifts_global_pull_secret_keeps_five_other_registries_entries_byte_for_byte() {
    let h = Harness::new();
    h.namespaces(&["openshift-config"]);
    let others = openshift_entries();
    let value = format!("{{\"auths\": {{{}}}}}", others.join(", "));
    let seeded = h.cluster.seed(
        Resource::Secrets,
        json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "pull-secret", "namespace": "openshift-config"},
            "type": "kubernetes.io/dockerconfigjson",
            "data": {".dockerconfigjson": b64(&value)},
        }),
        "openshift-installer",
    );
    let env = [
        ("ECR_REFRESH_NAMESPACES", "openshift-config"),
        ("ECR_REFRESH_SECRET_NAME", "pull-secret"),
    ];

    for round in 0..2 {
        let run = h.run(&env);

        run.expect_code(0);
        assert_eq!(run.outcome("openshift-config"), "updated", "round {round}");
        assert_eq!(run.line("openshift-config")["kept_entries"], 5);
        let secret = h
            .cluster
            .get(Resource::Secrets, "openshift-config", "pull-secret")
            .unwrap();
        assert_eq!(uid(&secret), uid(&seeded), "in place");
        let text = String::from_utf8(docker_config_bytes(&secret)).unwrap();
        for entry in &others {
            assert!(
                text.contains(entry.as_str()),
                "round {round}: {entry} kept as it was in {text}"
            );
        }
        let auths = docker_config(&secret)["auths"].clone();
        assert_eq!(
            auths.as_object().unwrap().len(),
            6,
            "theirs and ours: {auths}"
        );
        assert_eq!(
            auths[REGISTRY]["password"].as_str().unwrap(),
            h.ecr.passwords_issued().last().unwrap().as_str(),
            "only our entry changes"
        );
    }
}
