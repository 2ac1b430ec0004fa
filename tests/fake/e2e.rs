//! The real-cluster lane: the core scenarios through a plain Kubernetes client, against a real
//! API server when `ECR_REFRESH_E2E_KUBECONFIG` names a kubeconfig, and against the fake one
//! when it is unset (so they always run). ECR stays the fake (no AWS account needed).
//!
//! Each test makes its own randomly named namespaces and deletes them afterwards; the binary
//! is pointed at them by name, so it touches nothing else in the cluster.

use crate::common;

use std::collections::BTreeMap;

use common::*;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{DeleteParams, PostParams};
use kube::{Api, Client};

const VARIABLE: &str = "ECR_REFRESH_E2E_KUBECONFIG";

/// A cluster (real, or the harness's fake) with namespaces of our own, removed on drop.
struct LaneCluster {
    runtime: tokio::runtime::Runtime,
    client: Client,
    kubeconfig: String,
    namespaces: Vec<String>,
}

impl LaneCluster {
    fn connect(h: &Harness) -> Self {
        let kubeconfig = std::env::var(VARIABLE).unwrap_or_else(|_| {
            println!("{VARIABLE} is not set: against the fake API server");
            h.kubeconfig().display().to_string()
        });
        let runtime = tokio::runtime::Runtime::new().expect("a runtime");
        let client = runtime.block_on(async {
            let config =
                kube::config::Kubeconfig::read_from(&kubeconfig).expect("the e2e kubeconfig");
            let options = kube::config::KubeConfigOptions::default();
            let config = kube::Config::from_custom_kubeconfig(config, &options)
                .await
                .expect("a kube config");
            Client::try_from(config).expect("a client")
        });
        Self {
            runtime,
            client,
            kubeconfig,
            namespaces: Vec::new(),
        }
    }

    fn namespace(&mut self) -> String {
        let name = format!("ecr-refresh-e2e-{:08x}", fastrand::u32(..));
        let ns = Namespace {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                ..ObjectMeta::default()
            },
            ..Namespace::default()
        };
        let api: Api<Namespace> = Api::all(self.client.clone());
        self.runtime
            .block_on(api.create(&PostParams::default(), &ns))
            .expect("create a test namespace");
        self.namespaces.push(name.clone());
        name
    }

    fn secret(&self, namespace: &str) -> Option<Secret> {
        let api: Api<Secret> = Api::namespaced(self.client.clone(), namespace);
        self.runtime
            .block_on(api.get_opt(SECRET))
            .expect("read the Secret")
    }

    fn create_secret(
        &self,
        namespace: &str,
        type_: &str,
        data: BTreeMap<String, ByteString>,
    ) -> Secret {
        let api: Api<Secret> = Api::namespaced(self.client.clone(), namespace);
        let secret = Secret {
            metadata: ObjectMeta {
                name: Some(SECRET.into()),
                ..ObjectMeta::default()
            },
            type_: Some(type_.into()),
            data: Some(data),
            ..Secret::default()
        };
        self.runtime
            .block_on(api.create(&PostParams::default(), &secret))
            .expect("seed a Secret")
    }

    fn run(&self, h: &Harness, namespaces: &[&str], env: &[(&str, &str)]) -> Run {
        let names = namespaces.join(",");
        let mut all = vec![
            ("KUBECONFIG", self.kubeconfig.as_str()),
            ("ECR_REFRESH_NAMESPACES", names.as_str()),
        ];
        all.extend_from_slice(env);
        let output = h
            .command(&all)
            .env_remove(VARIABLE)
            .output()
            .expect("ecr-refresh runs");
        h.checked(output)
    }
}

impl Drop for LaneCluster {
    fn drop(&mut self) {
        let api: Api<Namespace> = Api::all(self.client.clone());
        for name in &self.namespaces {
            let _ = self
                .runtime
                .block_on(api.delete(name, &DeleteParams::default()));
        }
    }
}

fn uid_of(secret: &Secret) -> String {
    secret.metadata.uid.clone().expect("a uid")
}

#[test]
fn on_the_lanes_cluster_two_runs_keep_the_uid_and_rotate_the_password() {
    let h = Harness::new();
    let mut cluster = LaneCluster::connect(&h);
    let ns = cluster.namespace();

    cluster.run(&h, &[&ns], &[]).expect_code(0);
    let first = cluster.secret(&ns).expect("created");
    let run = cluster.run(&h, &[&ns], &[]);

    run.expect_code(0);
    assert_eq!(run.outcome(&ns), "updated");
    let second = cluster.secret(&ns).expect("still there");
    assert_eq!(uid_of(&second), uid_of(&first));
    assert_ne!(second.data, first.data, "the password rotated");
}

#[test]
fn on_the_lanes_cluster_foreign_entries_survive_and_wrong_types_are_refused() {
    let h = Harness::new();
    let mut cluster = LaneCluster::connect(&h);
    let (mixed, opaque) = (cluster.namespace(), cluster.namespace());
    let foreign = r#"{"auths":{"ghcr.io":{"auth":"dXNlcjpwYXNz"}}}"#;
    cluster.create_secret(
        &mixed,
        "kubernetes.io/dockerconfigjson",
        BTreeMap::from([(
            ".dockerconfigjson".into(),
            ByteString(foreign.as_bytes().to_vec()),
        )]),
    );
    let before = cluster.create_secret(
        &opaque,
        "Opaque",
        BTreeMap::from([("x".into(), ByteString(b"y".to_vec()))]),
    );

    let run = cluster.run(&h, &[&mixed, &opaque], &[]);

    run.expect_code(1);
    assert_eq!(run.outcome(&mixed), "updated");
    assert_eq!(run.outcome(&opaque), "failed");
    let value = cluster.secret(&mixed).unwrap().data.unwrap()[".dockerconfigjson"]
        .0
        .clone();
    let text = String::from_utf8(value).unwrap();
    assert!(
        text.contains(r#""ghcr.io":{"auth":"dXNlcjpwYXNz"}"#),
        "{text}"
    );
    assert_eq!(
        cluster.secret(&opaque).unwrap().metadata.resource_version,
        before.metadata.resource_version
    );
}

#[test]
fn on_the_lanes_cluster_a_dry_run_stores_nothing() {
    let h = Harness::new();
    let mut cluster = LaneCluster::connect(&h);
    let ns = cluster.namespace();

    let run = cluster.run(&h, &[&ns], &[("ECR_REFRESH_DRY_RUN", "true")]);

    run.expect_code(0);
    assert_eq!(run.outcome(&ns), "would-create");
    assert!(cluster.secret(&ns).is_none());
}
