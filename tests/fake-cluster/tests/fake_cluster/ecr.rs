//! The fake ECR endpoint, driven by the real aws-sdk-ecr client the way ecr-refresh drives
//! the real one.

use std::io::{Read, Write};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aws_config::BehaviorVersion;
use aws_sdk_ecr::config::{Credentials, Region};
use aws_sdk_ecr::error::ProvideErrorMetadata;
use aws_sdk_ecr::operation::get_authorization_token::GetAuthorizationTokenOutput;
use aws_sdk_ecr::types::AuthorizationData;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use fake_cluster::{EcrFault, FakeEcr};

/// A client configured as ecr-refresh's would be from AWS_ENDPOINT_URL_ECR, AWS_REGION and
/// static keys: aws-config's defaults, so the standard retry strategy is in place.
async fn client(ecr: &FakeEcr, region: &str) -> aws_sdk_ecr::Client {
    let config = aws_config::defaults(BehaviorVersion::latest())
        .endpoint_url(ecr.url())
        .region(Region::new(region.to_owned()))
        .credentials_provider(Credentials::new("fake", "fake", None, None, "test"))
        .load()
        .await;
    aws_sdk_ecr::Client::new(&config)
}

async fn get_token(
    ecr: &FakeEcr,
    region: &str,
    registry_ids: &[&str],
) -> Result<
    GetAuthorizationTokenOutput,
    aws_sdk_ecr::error::SdkError<
        aws_sdk_ecr::operation::get_authorization_token::GetAuthorizationTokenError,
    >,
> {
    let mut request = client(ecr, region).await.get_authorization_token();
    // Deprecated in the SDK (the token is good for every registry anyway), but still sent by
    // clients that want one proxyEndpoint per registry; the fake must answer it.
    #[allow(deprecated)]
    for id in registry_ids {
        request = request.registry_ids(*id);
    }
    request.send().await
}

fn decoded_token(data: &AuthorizationData) -> String {
    let token = data.authorization_token().expect("a token");
    String::from_utf8(BASE64.decode(token).expect("base64")).expect("utf-8")
}

fn only(output: &GetAuthorizationTokenOutput) -> &AuthorizationData {
    let data = output.authorization_data();
    assert_eq!(data.len(), 1, "{data:?}");
    &data[0]
}

/// One raw HTTP/1.1 request, for what the SDK never sends.
fn raw_post(ecr: &FakeEcr, headers: &[(&str, &str)], body: &str) -> (u16, String, String) {
    let host = ecr.url().trim_start_matches("http://").to_owned();
    let mut stream = std::net::TcpStream::connect(&host).expect("connect");
    let mut request = format!(
        "POST / HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    request.push_str(body);
    stream.write_all(request.as_bytes()).expect("write");
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("read");
    let (head, body) = response.split_once("\r\n\r\n").expect("a head and a body");
    let status = head[9..12].parse().expect("a status code");
    (status, head.to_ascii_lowercase(), body.to_owned())
}

const SIGNED: &str = "AWS4-HMAC-SHA256 Credential=fake/20250101/us-east-1/ecr/aws4_request, \
                      SignedHeaders=host;x-amz-date;x-amz-target, Signature=00";

#[tokio::test]
async fn a_token_decodes_to_aws_and_a_password_for_the_region_and_the_call() {
    let ecr = FakeEcr::start();
    let first = get_token(&ecr, "us-east-1", &[]).await.expect("a token");
    let second = get_token(&ecr, "us-east-1", &[]).await.expect("a token");
    assert_eq!(decoded_token(only(&first)), "AWS:pw-us-east-1-1");
    assert_eq!(decoded_token(only(&second)), "AWS:pw-us-east-1-2");
    assert_eq!(
        only(&first).proxy_endpoint(),
        Some("https://123456789012.dkr.ecr.us-east-1.amazonaws.com")
    );
    assert_eq!(
        ecr.passwords_issued(),
        vec!["pw-us-east-1-1", "pw-us-east-1-2"]
    );
}

#[tokio::test]
async fn each_registry_id_gets_its_own_proxy_endpoint_with_the_same_token() {
    let ecr = FakeEcr::start();
    let output = get_token(&ecr, "eu-west-1", &["111111111111", "222222222222"])
        .await
        .expect("a token");
    let data = output.authorization_data();
    let endpoints: Vec<_> = data.iter().map(|d| d.proxy_endpoint().unwrap()).collect();
    assert_eq!(
        endpoints,
        vec![
            "https://111111111111.dkr.ecr.eu-west-1.amazonaws.com",
            "https://222222222222.dkr.ecr.eu-west-1.amazonaws.com",
        ]
    );
    assert_eq!(decoded_token(&data[0]), "AWS:pw-eu-west-1-1");
    assert_eq!(decoded_token(&data[1]), "AWS:pw-eu-west-1-1");
    assert_eq!(
        ecr.calls(),
        vec![(
            "eu-west-1".to_owned(),
            vec!["111111111111".to_owned(), "222222222222".to_owned()]
        )]
    );
    assert_eq!(ecr.passwords_issued(), vec!["pw-eu-west-1-1"]);
}

#[tokio::test]
async fn the_region_comes_from_the_signature_and_each_is_recorded_apart() {
    let ecr = FakeEcr::start();
    let east = get_token(&ecr, "us-east-1", &[]).await.expect("a token");
    let china = get_token(&ecr, "cn-north-1", &["333333333333"])
        .await
        .expect("a token");
    assert_eq!(decoded_token(only(&east)), "AWS:pw-us-east-1-1");
    assert_eq!(decoded_token(only(&china)), "AWS:pw-cn-north-1-1");
    assert_eq!(
        only(&china).proxy_endpoint(),
        Some("https://333333333333.dkr.ecr.cn-north-1.amazonaws.com.cn")
    );
    assert_eq!(
        ecr.calls(),
        vec![
            ("us-east-1".to_owned(), vec![]),
            ("cn-north-1".to_owned(), vec!["333333333333".to_owned()]),
        ]
    );
}

#[tokio::test]
async fn expires_at_is_twelve_hours_away_by_default_and_parses_to_the_millisecond() {
    let ecr = FakeEcr::start();
    let now = SystemTime::now();
    let output = get_token(&ecr, "us-east-1", &[]).await.expect("a token");
    let expires = SystemTime::try_from(*only(&output).expires_at().expect("an expiry"))
        .expect("a SystemTime");
    let lifetime = expires.duration_since(now).expect("in the future");
    assert!(
        lifetime > Duration::from_secs(12 * 3600 - 60)
            && lifetime < Duration::from_secs(12 * 3600 + 60),
        "{lifetime:?}"
    );

    let at = UNIX_EPOCH + Duration::from_millis(1_738_598_491_500);
    ecr.set_expires_at(at);
    let output = get_token(&ecr, "us-east-1", &[]).await.expect("a token");
    let expires = only(&output).expires_at().expect("an expiry");
    assert_eq!(expires.secs(), 1_738_598_491);
    assert_eq!(expires.subsec_nanos(), 500_000_000);
}

#[tokio::test]
async fn set_password_and_set_proxy_endpoint_apply_to_later_calls() {
    let ecr = FakeEcr::start();
    ecr.set_password("us-west-2", "s3cret");
    ecr.set_proxy_endpoint("http://127.0.0.1:5000");
    let west = get_token(&ecr, "us-west-2", &["111111111111", "222222222222"])
        .await
        .expect("a token");
    for data in west.authorization_data() {
        assert_eq!(decoded_token(data), "AWS:s3cret");
        assert_eq!(data.proxy_endpoint(), Some("http://127.0.0.1:5000"));
    }
    let east = get_token(&ecr, "us-east-1", &[]).await.expect("a token");
    assert_eq!(decoded_token(only(&east)), "AWS:pw-us-east-1-1");
    assert_eq!(ecr.passwords_issued(), vec!["s3cret", "pw-us-east-1-1"]);
}

#[tokio::test]
async fn one_throttled_call_is_retried_by_the_sdk_and_then_succeeds() {
    let ecr = FakeEcr::start();
    ecr.add_fault(EcrFault::Throttling, Some(1));
    let output = get_token(&ecr, "us-east-1", &[]).await.expect("a token");
    assert_eq!(decoded_token(only(&output)), "AWS:pw-us-east-1-2");
    assert_eq!(ecr.calls().len(), 2);
    assert_eq!(ecr.passwords_issued(), vec!["pw-us-east-1-2"]);
}

#[tokio::test]
async fn lasting_throttling_fails_after_the_sdks_three_attempts() {
    let ecr = FakeEcr::start();
    ecr.add_fault(EcrFault::Throttling, None);
    let err = get_token(&ecr, "us-east-1", &[])
        .await
        .expect_err("throttled");
    let err = err.into_service_error();
    assert_eq!(err.code(), Some("ThrottlingException"));
    assert_eq!(err.message(), Some("Rate exceeded"));
    assert_eq!(ecr.calls().len(), 3);
    assert!(ecr.passwords_issued().is_empty());
}

#[tokio::test]
async fn access_denied_surfaces_with_its_code_and_is_not_retried() {
    let ecr = FakeEcr::start();
    ecr.add_fault(EcrFault::AccessDenied, Some(1));
    let err = get_token(&ecr, "us-east-1", &[])
        .await
        .expect_err("denied")
        .into_service_error();
    assert_eq!(err.code(), Some("AccessDeniedException"));
    assert!(
        err.message()
            .unwrap()
            .contains("not authorized to perform: ecr:GetAuthorizationToken"),
        "{err:?}"
    );
    assert_eq!(ecr.calls().len(), 1);
}

#[tokio::test]
async fn expired_credentials_surface_as_expired_token_exception_and_are_not_retried() {
    let ecr = FakeEcr::start();
    ecr.add_fault(EcrFault::ExpiredCredentials, None);
    let err = get_token(&ecr, "us-east-1", &[])
        .await
        .expect_err("expired")
        .into_service_error();
    assert_eq!(err.code(), Some("ExpiredTokenException"));
    assert_eq!(
        err.message(),
        Some("The security token included in the request is expired")
    );
    assert_eq!(ecr.calls().len(), 1);
}

#[tokio::test]
async fn a_lasting_server_error_is_a_server_exception_after_three_attempts() {
    let ecr = FakeEcr::start();
    ecr.add_fault(EcrFault::ServerError, None);
    let err = get_token(&ecr, "us-east-1", &[])
        .await
        .expect_err("500")
        .into_service_error();
    assert!(err.is_server_exception(), "{err:?}");
    assert_eq!(ecr.calls().len(), 3);
}

#[tokio::test]
async fn one_server_error_is_retried_by_the_sdk_and_then_succeeds() {
    let ecr = FakeEcr::start();
    ecr.add_fault(EcrFault::ServerError, Some(1));
    let output = get_token(&ecr, "us-east-1", &[]).await.expect("a token");
    assert_eq!(decoded_token(only(&output)), "AWS:pw-us-east-1-2");
}

#[tokio::test]
async fn a_malformed_token_lacks_the_aws_prefix_and_later_calls_are_well_formed() {
    let ecr = FakeEcr::start();
    ecr.add_fault(EcrFault::MalformedToken, Some(1));
    let bad = get_token(&ecr, "us-east-1", &[]).await.expect("a 200");
    assert!(!decoded_token(only(&bad)).starts_with("AWS:"));
    let good = get_token(&ecr, "us-east-1", &[]).await.expect("a token");
    assert_eq!(decoded_token(only(&good)), "AWS:pw-us-east-1-2");
    assert_eq!(
        ecr.passwords_issued(),
        vec!["pw-us-east-1-1", "pw-us-east-1-2"]
    );
}

#[tokio::test]
async fn faults_apply_in_the_order_they_were_added() {
    let ecr = FakeEcr::start();
    ecr.add_fault(EcrFault::AccessDenied, Some(1));
    ecr.add_fault(EcrFault::ExpiredCredentials, Some(1));
    let first = get_token(&ecr, "us-east-1", &[]).await.expect_err("denied");
    let second = get_token(&ecr, "us-east-1", &[])
        .await
        .expect_err("expired");
    assert_eq!(
        first.into_service_error().code(),
        Some("AccessDeniedException")
    );
    assert_eq!(
        second.into_service_error().code(),
        Some("ExpiredTokenException")
    );
    get_token(&ecr, "us-east-1", &[]).await.expect("a token");
}

#[tokio::test]
async fn an_invalid_registry_id_is_an_invalid_parameter_exception() {
    let ecr = FakeEcr::start();
    let err = get_token(&ecr, "us-east-1", &["not-an-account"])
        .await
        .expect_err("invalid")
        .into_service_error();
    assert!(err.is_invalid_parameter_exception(), "{err:?}");
    assert!(ecr.calls().is_empty());
}

#[test]
fn an_unknown_target_is_unknown_operation_exception() {
    let ecr = FakeEcr::start();
    let (status, head, body) = raw_post(
        &ecr,
        &[
            (
                "X-Amz-Target",
                "AmazonEC2ContainerRegistry_V20150921.DescribeRepositories",
            ),
            ("Content-Type", "application/x-amz-json-1.1"),
            ("Authorization", SIGNED),
        ],
        "{}",
    );
    assert_eq!(status, 400);
    assert!(
        head.contains("x-amzn-errortype: unknownoperationexception"),
        "{head}"
    );
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&body).unwrap()["__type"],
        "UnknownOperationException"
    );
    assert!(ecr.calls().is_empty());
}

#[test]
fn the_wire_format_matches_real_ecr() {
    let ecr = FakeEcr::start();
    ecr.set_expires_at(UNIX_EPOCH + Duration::from_millis(1_738_598_491_500));
    let (status, head, body) = raw_post(
        &ecr,
        &[
            (
                "X-Amz-Target",
                "AmazonEC2ContainerRegistry_V20150921.GetAuthorizationToken",
            ),
            ("Content-Type", "application/x-amz-json-1.1"),
            ("Authorization", SIGNED),
        ],
        "{}",
    );
    assert_eq!(status, 200);
    assert!(
        head.contains("content-type: application/x-amz-json-1.1"),
        "{head}"
    );
    assert!(head.contains("x-amzn-requestid: "), "{head}");
    assert_eq!(
        body,
        format!(
            r#"{{"authorizationData":[{{"authorizationToken":"{}","expiresAt":1.7385984915E9,"proxyEndpoint":"https://123456789012.dkr.ecr.us-east-1.amazonaws.com"}}]}}"#,
            BASE64.encode("AWS:pw-us-east-1-1")
        )
    );
}

#[test]
fn a_throttling_fault_is_sent_as_ecr_sends_it() {
    let ecr = FakeEcr::start();
    ecr.add_fault(EcrFault::Throttling, None);
    let (status, head, body) = raw_post(
        &ecr,
        &[
            (
                "X-Amz-Target",
                "AmazonEC2ContainerRegistry_V20150921.GetAuthorizationToken",
            ),
            ("Authorization", SIGNED),
        ],
        "{}",
    );
    assert_eq!(status, 400);
    assert!(
        head.contains("x-amzn-errortype: throttlingexception"),
        "{head}"
    );
    assert_eq!(
        body,
        r#"{"__type":"ThrottlingException","message":"Rate exceeded"}"#
    );
}

#[test]
fn many_fakes_run_side_by_side_and_stop_when_dropped() {
    let fakes: Vec<FakeEcr> = (0..4).map(|_| FakeEcr::start()).collect();
    let mut urls: Vec<String> = fakes.iter().map(FakeEcr::url).collect();
    urls.sort();
    urls.dedup();
    assert_eq!(urls.len(), 4);
    let url = fakes[0].url();
    drop(fakes);
    let host = url.trim_start_matches("http://");
    assert!(std::net::TcpStream::connect(host).is_err());
}
