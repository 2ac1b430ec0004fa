//! kube-rs, as ecr-refresh uses it, works against the fake: apply with force, get_opt,
//! create, paged lists, JSON patch, and `kube::Error::Api` carrying the fake's Status.

use std::collections::BTreeMap;

use fake_cluster::{FakeCluster, Resource};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{Namespace, Secret, ServiceAccount};
use kube::api::{Api, ListParams, ObjectMeta, Patch, PatchParams, PostParams};

async fn client(cluster: &FakeCluster) -> kube::Client {
    let config = kube::Config::new(cluster.url().parse().expect("the fake's URL parses"));
    kube::Client::try_from(config).expect("a client for the fake")
}

fn docker_secret(name: &str, config: &str) -> Secret {
    Secret {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..ObjectMeta::default()
        },
        type_: Some("kubernetes.io/dockerconfigjson".to_owned()),
        data: Some(BTreeMap::from([(
            ".dockerconfigjson".to_owned(),
            ByteString(config.as_bytes().to_vec()),
        )])),
        ..Secret::default()
    }
}

fn api_error(err: kube::Error) -> Box<kube::core::Status> {
    match err {
        kube::Error::Api(status) => status,
        other => panic!("expected an API error, got {other:?}"),
    }
}

#[tokio::test]
async fn kube_rs_applies_gets_and_creates_against_the_fake() {
    let cluster = FakeCluster::start();
    cluster.add_namespace("a", &[]);
    let secrets: Api<Secret> = Api::namespaced(client(&cluster).await, "a");

    assert!(
        secrets
            .get_opt("aws-ecr-token")
            .await
            .expect("get_opt")
            .is_none()
    );
    let params = PatchParams::apply("ecr-refresh").force();
    let created = secrets
        .patch(
            "aws-ecr-token",
            &params,
            &Patch::Apply(&docker_secret("aws-ecr-token", "{}")),
        )
        .await
        .expect("apply creates");
    let uid = created.metadata.uid.clone().expect("a uid");
    let fields = created
        .metadata
        .managed_fields
        .clone()
        .expect("managedFields");
    assert_eq!(fields[0].manager.as_deref(), Some("ecr-refresh"));
    assert_eq!(fields[0].operation.as_deref(), Some("Apply"));

    let updated = secrets
        .patch(
            "aws-ecr-token",
            &params,
            &Patch::Apply(&docker_secret("aws-ecr-token", "{\"auths\":{}}")),
        )
        .await
        .expect("apply updates");
    assert_eq!(updated.metadata.uid.as_deref(), Some(uid.as_str()));
    let got = secrets
        .get_opt("aws-ecr-token")
        .await
        .expect("get_opt")
        .expect("present");
    assert_eq!(got.data, updated.data);

    // A stale resourceVersion is a 409 that kube surfaces as Error::Api.
    let mut stale = docker_secret("aws-ecr-token", "{}");
    stale.metadata.resource_version = Some("1".to_owned());
    let status = api_error(
        secrets
            .patch("aws-ecr-token", &params, &Patch::Apply(&stale))
            .await
            .unwrap_err(),
    );
    assert_eq!(status.code, 409);
    assert!(status.is_conflict());
    assert!(status.message.contains("the object has been modified"));

    // POST of an existing name: 409 AlreadyExists.
    let status = api_error(
        secrets
            .create(
                &PostParams::default(),
                &docker_secret("aws-ecr-token", "{}"),
            )
            .await
            .unwrap_err(),
    );
    assert!(status.is_already_exists());
    assert_eq!(status.message, "secrets \"aws-ecr-token\" already exists");

    // Changing the type is refused as invalid, with causes.
    let mut opaque = docker_secret("aws-ecr-token", "{}");
    opaque.type_ = Some("Opaque".to_owned());
    let status = api_error(
        secrets
            .patch("aws-ecr-token", &params, &Patch::Apply(&opaque))
            .await
            .unwrap_err(),
    );
    assert!(status.is_invalid());
    let causes = status.details.expect("details").causes;
    assert_eq!(causes[0].field, "type");

    // Dry run answers the new object and stores nothing.
    let before = cluster
        .history(Resource::Secrets, "a", "aws-ecr-token")
        .len();
    secrets
        .patch(
            "aws-ecr-token",
            &params.clone().dry_run(),
            &Patch::Apply(&docker_secret("aws-ecr-token", r#"{"auths":{"x":{}}}"#)),
        )
        .await
        .expect("dry run");
    assert_eq!(
        cluster
            .history(Resource::Secrets, "a", "aws-ecr-token")
            .len(),
        before
    );
}

#[tokio::test]
async fn kube_rs_pages_namespaces_and_patches_service_accounts() {
    let cluster = FakeCluster::builder().max_page(2).start();
    for i in 0..5 {
        cluster.add_namespace(&format!("ns-{i}"), &[]);
    }
    let client = client(&cluster).await;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let mut names = Vec::new();
    let mut token: Option<String> = None;
    loop {
        let mut lp = ListParams::default().limit(10);
        if let Some(t) = &token {
            lp = lp.continue_token(t);
        }
        let page = namespaces.list(&lp).await.expect("list");
        assert!(page.items.len() <= 2);
        names.extend(page.items.into_iter().filter_map(|n| n.metadata.name));
        token = page.metadata.continue_.filter(|t| !t.is_empty());
        if token.is_none() {
            break;
        }
    }
    assert_eq!(names, ["ns-0", "ns-1", "ns-2", "ns-3", "ns-4"]);

    let accounts: Api<ServiceAccount> = Api::namespaced(client, "ns-0");
    let sa = accounts
        .get("default")
        .await
        .expect("the default service account");
    let rv = sa.metadata.resource_version.expect("a resourceVersion");
    let ops: json_patch::Patch = serde_json::from_value(serde_json::json!([
        {"op": "test", "path": "/metadata/resourceVersion", "value": rv},
        {"op": "add", "path": "/imagePullSecrets", "value": [{"name": "aws-ecr-token"}]}
    ]))
    .expect("a JSON patch");
    let patched = accounts
        .patch(
            "default",
            &PatchParams::default(),
            &Patch::Json::<()>(ops.clone()),
        )
        .await
        .expect("json patch");
    let pull = patched.image_pull_secrets.expect("imagePullSecrets");
    assert_eq!(pull[0].name, "aws-ecr-token");
    let status = api_error(
        accounts
            .patch("default", &PatchParams::default(), &Patch::Json::<()>(ops))
            .await
            .unwrap_err(),
    );
    assert_eq!(status.code, 422, "the test op now fails");
    assert!(status.is_invalid());
}
