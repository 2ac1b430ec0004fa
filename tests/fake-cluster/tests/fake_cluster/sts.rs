//! The fake STS read by the AWS SDK's own AssumeRole provider (aws-config), the reference
//! client: what the fake answers must parse into the credentials it issued, with an expiry.

use std::time::{Duration, SystemTime};

use aws_config::BehaviorVersion;
use aws_config::sts::AssumeRoleProvider;
use aws_sdk_ecr::config::{Credentials, ProvideCredentials, Region};
use aws_sdk_ecr::error::DisplayErrorContext;
use fake_cluster::FakeSts;
use fake_cluster::sts::{RoleTrust, Signer};

const ROLE: &str = "arn:aws:iam::210987654321:role/ecr-reader";

async fn provider(sts: &FakeSts, external_id: &str) -> AssumeRoleProvider {
    let config = aws_config::defaults(BehaviorVersion::latest())
        .endpoint_url(sts.url())
        .region(Region::new("us-east-1"))
        .no_credentials()
        .load()
        .await;
    AssumeRoleProvider::builder(ROLE)
        .external_id(external_id)
        .session_name("ecr-refresh")
        .configure(&config)
        .build_from_provider(Credentials::new(
            "AKIDBASE",
            "base-secret",
            None,
            None,
            "test",
        ))
        .await
}

fn trust(sts: &FakeSts) -> fake_cluster::sts::Issued {
    sts.trust_assume_role(RoleTrust {
        role_arn: ROLE.into(),
        caller: Signer {
            access_key_id: "AKIDBASE".into(),
            session_token: None,
        },
        external_id: Some("tenant-42".into()),
    })
}

#[tokio::test]
async fn the_sdk_reads_the_credentials_assume_role_answers() {
    let sts = FakeSts::start();
    let issued = trust(&sts);

    let credentials = provider(&sts, "tenant-42")
        .await
        .provide_credentials()
        .await
        .expect("the SDK parses the answer");

    assert_eq!(credentials.access_key_id(), issued.access_key_id);
    assert_eq!(credentials.secret_access_key(), issued.secret_access_key);
    assert_eq!(
        credentials.session_token(),
        Some(issued.session_token.as_str())
    );
    let left = credentials
        .expiry()
        .expect("an expiry")
        .duration_since(SystemTime::now())
        .expect("in the future");
    assert!(
        left > Duration::from_secs(3500) && left <= Duration::from_secs(3600),
        "{left:?}"
    );
    let calls = sts.calls();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].access_key_id.as_deref(), Some("AKIDBASE"));
    assert_eq!(calls[0].external_id.as_deref(), Some("tenant-42"));
}

#[tokio::test]
async fn the_sdk_reads_a_refusal_as_sts_s_access_denied() {
    let sts = FakeSts::start();
    trust(&sts);

    let error = provider(&sts, "tenant-41")
        .await
        .provide_credentials()
        .await
        .expect_err("a wrong external id is refused");

    let text = DisplayErrorContext(&error).to_string();
    assert!(
        text.contains("AccessDenied")
            && text.contains("is not authorized to perform: sts:AssumeRole on resource: ")
            && text.contains(ROLE),
        "{text}"
    );
}
