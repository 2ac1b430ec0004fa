//! The AWS SDK's shared configuration: its default chains, with the region looked up once.

use aws_config::default_provider::credentials::DefaultCredentialsChain;
use aws_config::default_provider::region::DefaultRegionChain;
use aws_config::{BehaviorVersion, Region, SdkConfig};

/// The SDK configuration of the default chains (environment, profile, instance metadata).
///
/// Left to itself, aws-config looks the region up again for the credential and token chains
/// whenever the first lookup found none: outside EC2 each lookup asks instance metadata
/// (169.254.169.254) and waits up to its 1 s connect timeout, three in all. So the region is
/// looked up first and handed to the loader, which passes a region it is given on to its
/// chains; when there is none, the credential chain is told so. The token chain (SSO bearer
/// tokens, which ECR does not use) can't be told without naming aws-config's `sso` feature,
/// so it still asks once more: two lookups at most.
pub async fn load() -> SdkConfig {
    let region = DefaultRegionChain::builder().build().region().await;
    let loader = aws_config::defaults(BehaviorVersion::latest()).region(region.clone());
    if region.is_some() {
        return loader.load().await;
    }
    let credentials = DefaultCredentialsChain::builder()
        .region(None::<Region>)
        .build()
        .await;
    loader.credentials_provider(credentials).load().await
}

/// The region of the default chain alone, for a run that asks AWS nothing (a check).
pub async fn region() -> Option<String> {
    DefaultRegionChain::builder()
        .build()
        .region()
        .await
        .map(|r| r.as_ref().to_owned())
}
