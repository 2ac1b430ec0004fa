//! The AWS region a run works in: looked up once, and checked before anything is sent.
//!
//! The lookup is the SDK's default region chain (AWS_REGION, AWS_DEFAULT_REGION, the profile's
//! `region`, instance metadata), except that an empty variable is skipped, as if unset, and the
//! chain goes on: manifests often carry `value: ""`, and the SDK would take the empty text as
//! the region and fail on the first call. The region found, from any source, must have the
//! form of a region of the SDK's partition data (a region it lists, or one its partitions'
//! `regionRegex` matches): a typo such as `eu-west1` is a configuration error, exit 2, naming
//! the nearest region, instead of a failure at the first AWS call.

use aws_config::Region;
use aws_config::imds::region::ImdsRegionProvider;
use aws_config::meta::region::RegionProviderChain;
use aws_config::profile::ProfileFileRegionProvider;

use crate::aws::partition::Partitions;

/// A region the partition data does not know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "AWS region {region:?} is not a region of any AWS partition{}; set AWS_REGION (or the \
     profile's region) to a region such as eu-west-1",
    .suggestion.as_ref().map(|s| format!(" (did you mean {s}?)")).unwrap_or_default()
)]
pub struct UnknownRegion {
    pub region: String,
    pub suggestion: Option<String>,
}

/// The region of the default chain, empty variables skipped; None when no source has one.
pub async fn lookup() -> Option<Region> {
    let from_env = ["AWS_REGION", "AWS_DEFAULT_REGION"]
        .iter()
        .find_map(|v| std::env::var(v).ok().filter(|r| !r.trim().is_empty()))
        .map(Region::new);
    RegionProviderChain::first_try(from_env)
        .or_else(ProfileFileRegionProvider::new())
        .or_else(ImdsRegionProvider::builder().build())
        .region()
        .await
}

/// Whether `region` is a region of the partition data: listed by a partition, or matched by
/// one's `regionRegex`. Otherwise the error names the nearest listed region, when one is close.
pub fn known(partitions: &Partitions, region: &str) -> Result<(), UnknownRegion> {
    if partitions.is_region(region) {
        return Ok(());
    }
    let suggestion = partitions
        .all()
        .flat_map(|p| partitions.listed_regions(&p.id))
        .filter(|r| partitions.is_region(r) && !r.ends_with("-global"))
        .map(|r| (strsim::levenshtein(region, r), r))
        .filter(|(distance, _)| *distance <= 2)
        .min()
        .map(|(_, r)| r.to_owned());
    Err(UnknownRegion {
        region: region.to_owned(),
        suggestion,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regions_of_every_partition_are_known_and_a_typo_names_the_nearest() {
        let sdk = Partitions::sdk();
        for ok in [
            "eu-west-1",
            "us-east-1",
            "cn-north-1",
            "us-gov-west-1",
            "eusc-de-east-1",
            // Not listed yet, but of the form a partition's regionRegex matches.
            "ap-southeast-9",
        ] {
            assert_eq!(known(sdk, ok), Ok(()), "{ok}");
        }
        for (typo, nearest) in [
            ("eu-west1", Some("eu-west-1")),
            ("euwest-1", Some("eu-west-1")),
            ("us-east-l", Some("us-east-1")),
            ("mars-1", None),
            ("", None),
            (" eu-west-1", Some("eu-west-1")),
        ] {
            let err = known(sdk, typo).expect_err(typo);
            assert_eq!(err.suggestion.as_deref(), nearest, "{typo}");
            let message = err.to_string();
            assert!(message.contains(&format!("{typo:?}")), "{message}");
            if let Some(nearest) = nearest {
                assert!(
                    message.contains(&format!("(did you mean {nearest}?)")),
                    "{message}"
                );
            }
        }
    }
}
