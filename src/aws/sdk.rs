//! The AWS SDK's shared configuration: the region looked up once, and the run's credential
//! chain (src/aws/credentials).

use aws_config::{BehaviorVersion, SdkConfig};
use aws_credential_types::provider::SharedCredentialsProvider;

use crate::aws::credentials::{AssumeRole, Chain, RolesAnywhere};
use crate::aws::partition::Partitions;
use crate::aws::region::{self, UnknownRegion};

/// The SDK configuration: the default region chain (`aws::region`: empty variables skipped, the
/// region found checked against the partition data), and credentials from the default sources
/// (or Roles Anywhere, when it is configured), with `assume_role` over them when it is configured.
///
/// Left to itself, aws-config looks the region up again for the credential and token chains
/// whenever the first lookup found none: outside EC2 each lookup asks instance metadata
/// (169.254.169.254) and waits up to its 1 s connect timeout, three in all. So the region is
/// looked up first and handed to the loader and to the credential chain. The token chain (SSO
/// bearer tokens, which ECR does not use) can't be told without naming aws-config's `sso`
/// feature, so it still asks once more: two lookups at most.
pub async fn load(
    assume_role: Option<&AssumeRole>,
    roles_anywhere: Option<&RolesAnywhere>,
) -> Result<SdkConfig, UnknownRegion> {
    let region = region::lookup().await;
    if let Some(region) = &region {
        region::known(Partitions::sdk(), region.as_ref())?;
    }
    // Without credentials first: the chain's STS calls (assume-role) are made with this
    // configuration's region and endpoints (AWS_ENDPOINT_URL_STS).
    let base = aws_config::defaults(BehaviorVersion::latest())
        .region(region.clone())
        .no_credentials()
        .load()
        .await;
    let chain = Chain::new(region, assume_role.cloned(), roles_anywhere.cloned(), &base);
    Ok(base
        .into_builder()
        .credentials_provider(SharedCredentialsProvider::new(chain))
        .build())
}

/// The region of the default chain alone, checked, for a run that asks AWS nothing (a check).
pub async fn region() -> Result<Option<String>, UnknownRegion> {
    let Some(region) = region::lookup().await else {
        return Ok(None);
    };
    region::known(Partitions::sdk(), region.as_ref())?;
    Ok(Some(region.as_ref().to_owned()))
}
