//! The core scenarios, written once, run against any backend: the fake API server
//! (tests/fake/e2e.rs), the real kube-apiserver (tests/real/e2e.rs), or a cluster of yours
//! (`ECR_REFRESH_E2E_KUBECONFIG`, tests/fake/e2e.rs). Each goes through a plain Kubernetes
//! client for its setup and reads, and runs the built binary with a fake ECR.
//!
//! Each scenario makes its own randomly named namespaces and deletes them afterwards; the
//! binary is pointed at them by name, so it touches nothing else in the cluster.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{DeleteParams, PostParams};
use kube::{Api, Client};

use super::{Binary, Run, SECRET};

/// A cluster (the fake, the real control plane, or yours) with namespaces of our own,
/// removed on drop.
struct LaneCluster {
    runtime: tokio::runtime::Runtime,
    client: Client,
    kubeconfig: String,
    namespaces: Vec<String>,
}

impl LaneCluster {
    fn connect(kubeconfig: &str) -> Self {
        let kubeconfig = kubeconfig.to_owned();
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

    fn run(&self, h: &Binary, namespaces: &[&str], env: &[(&str, &str)]) -> Run {
        let names = namespaces.join(",");
        let mut all = vec![
            ("KUBECONFIG", self.kubeconfig.as_str()),
            ("ECR_REFRESH_NAMESPACES", names.as_str()),
        ];
        all.extend_from_slice(env);
        let output = h
            .command(&all)
            .env_remove("ECR_REFRESH_E2E_KUBECONFIG")
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

/// Two runs keep the Secret's uid and rotate its password.
pub(crate) fn two_runs_keep_the_uid_and_rotate_the_password(h: &Binary, kubeconfig: &str) {
    let mut cluster = LaneCluster::connect(kubeconfig);
    let ns = cluster.namespace();

    cluster.run(h, &[&ns], &[]).expect_code(0);
    let first = cluster.secret(&ns).expect("created");
    let run = cluster.run(h, &[&ns], &[]);

    run.expect_code(0);
    assert_eq!(run.outcome(&ns), "updated");
    let second = cluster.secret(&ns).expect("still there");
    assert_eq!(uid_of(&second), uid_of(&first));
    assert_ne!(second.data, first.data, "the password rotated");
}

/// Another registry's entry survives a write byte for byte; a Secret of another type under
/// our name fails its namespace and is left as it was.
pub(crate) fn foreign_entries_survive_and_wrong_types_are_refused(h: &Binary, kubeconfig: &str) {
    let mut cluster = LaneCluster::connect(kubeconfig);
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

    let run = cluster.run(h, &[&mixed, &opaque], &[]);

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

/// A dry run stores nothing.
pub(crate) fn a_dry_run_stores_nothing(h: &Binary, kubeconfig: &str) {
    let mut cluster = LaneCluster::connect(kubeconfig);
    let ns = cluster.namespace();

    let run = cluster.run(h, &[&ns], &[("ECR_REFRESH_DRY_RUN", "true")]);

    run.expect_code(0);
    assert_eq!(run.outcome(&ns), "would-create");
    assert!(cluster.secret(&ns).is_none());
}

/// A run with no install name of its own (by hand, from a kubeconfig) never erases the install
/// record (issue 49, item 7): install A adopts a Secret made by hand, a by-hand run rewrites it, and
/// install B, writing another account's registry, is still refused instead of taking A's entry
/// over; A's next run is not refused.
pub(crate) fn a_run_with_no_install_name_keeps_the_recorded_install(h: &Binary, kubeconfig: &str) {
    const A: &str = "111111111111.dkr.ecr.eu-west-1.amazonaws.com";
    const B: &str = "222222222222.dkr.ecr.eu-west-1.amazonaws.com";
    let mut cluster = LaneCluster::connect(kubeconfig);
    let ns = cluster.namespace();
    // A Secret made by hand, which install A adopts: its applies then own the record alone.
    cluster.create_secret(
        &ns,
        "kubernetes.io/dockerconfigjson",
        BTreeMap::from([(
            ".dockerconfigjson".into(),
            ByteString(br#"{"auths":{}}"#.to_vec()),
        )]),
    );
    let install_a = [
        ("ECR_REFRESH_INSTALL", "team-a/ecr-refresh"),
        ("ECR_REFRESH_REGISTRIES", A),
    ];
    let adopted = cluster.run(h, &[&ns], &install_a);
    adopted.expect_code(0);
    assert_eq!(adopted.outcome(&ns), "updated");

    // By hand: the same registry, no ECR_REFRESH_INSTALL, no pod token.
    let by_hand = cluster.run(h, &[&ns], &[("ECR_REFRESH_REGISTRIES", A)]);
    by_hand.expect_code(0);
    assert_eq!(by_hand.outcome(&ns), "updated");
    let record = |secret: &Secret| {
        secret
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get("ecr-refresh/install"))
            .cloned()
    };
    let after_by_hand = cluster.secret(&ns).expect("still there");
    assert!(
        record(&after_by_hand).is_some_and(|r| !r.is_empty()),
        "a by-hand run leaves an install recorded: {:?}",
        after_by_hand.metadata.annotations
    );

    let b = cluster.run(
        h,
        &[&ns],
        &[
            ("ECR_REFRESH_INSTALL", "team-b/ecr-refresh"),
            ("ECR_REFRESH_REGISTRIES", B),
        ],
    );
    b.expect_code(1);
    assert_eq!(b.outcome(&ns), "failed", "install B is refused");
    let kept = cluster.secret(&ns).expect("still there");
    assert_eq!(
        kept.metadata.resource_version, after_by_hand.metadata.resource_version,
        "left untouched by B"
    );
    let value = String::from_utf8(kept.data.unwrap()[".dockerconfigjson"].0.clone()).unwrap();
    assert!(value.contains(A), "A's entry kept: {value}");

    let again = cluster.run(h, &[&ns], &install_a);
    again.expect_code(0);
    assert_eq!(again.outcome(&ns), "updated");
}
