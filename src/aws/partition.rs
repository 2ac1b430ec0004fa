//! AWS partitions: which partition a region belongs to, and that partition's DNS suffixes.
//!
//! The data is the partitions file the AWS SDK for Rust resolves endpoints with. The SDK
//! embeds it in each service crate's private `endpoint_lib` and exposes only the resolver
//! built on it (`aws_sdk_ecr::config::endpoint::DefaultResolver`), which answers API endpoints,
//! not partitions. So `partitions.json` beside this file is a copy of it, from [`SOURCE`];
//! tests/fake/partitions.rs fails when the SDK in Cargo.lock embeds other data, and checks that for
//! every partition the SDK's resolver puts ECR's endpoints under the suffixes read here.
//!
//! Resolution follows the SDK's `PartitionResolver` exactly: a region listed by a partition,
//! else the first partition whose `regionRegex` matches, else `aws`.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use regex_lite::Regex;
use serde::Deserialize;

/// Where `partitions.json` was copied from: the SDK crate, its file, and the data's version.
pub const SOURCE: &str = "aws-sdk-ecr 1.138.0, src/endpoint_lib.rs (partitions version 1.1)";

/// The copy of the SDK's partitions file.
pub const SDK_PARTITIONS_JSON: &str = include_str!("partitions.json");

/// The partition a region resolves to, with any overrides its region entry carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Partition {
    /// `aws`, `aws-cn`, `aws-eusc`...
    pub id: String,
    /// What API hosts end with: `amazonaws.com`, `amazonaws.eu`, `c2s.ic.gov`...
    pub dns_suffix: String,
    /// What dual-stack API hosts end with: `api.aws`, `api.amazonwebservices.com.cn`...
    pub dual_stack_dns_suffix: String,
    pub supports_fips: bool,
    pub supports_dual_stack: bool,
    /// The partition's region for global services: one region it certainly holds.
    pub implicit_global_region: String,
}

/// Every partition in a partitions file, in its order.
#[derive(Debug)]
pub struct Partitions {
    entries: Vec<Entry>,
}

#[derive(Debug)]
struct Entry {
    id: String,
    region_regex: Regex,
    regions: BTreeMap<String, Overrides>,
    outputs: Partition,
}

/// The file's shape (smithy's `partitions.json`), as the SDK reads it.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct File {
    partitions: Vec<RawPartition>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawPartition {
    id: String,
    region_regex: String,
    #[serde(default)]
    regions: BTreeMap<String, Overrides>,
    outputs: Outputs,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Outputs {
    name: String,
    dns_suffix: String,
    dual_stack_dns_suffix: String,
    #[serde(rename = "supportsFIPS")]
    supports_fips: bool,
    supports_dual_stack: bool,
    implicit_global_region: String,
}

/// A region entry may override any output of its partition (none in the SDK's data today).
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Overrides {
    name: Option<String>,
    dns_suffix: Option<String>,
    dual_stack_dns_suffix: Option<String>,
    #[serde(rename = "supportsFIPS")]
    supports_fips: Option<bool>,
    supports_dual_stack: Option<bool>,
    implicit_global_region: Option<String>,
}

static SDK: LazyLock<Partitions> = LazyLock::new(|| {
    Partitions::parse(SDK_PARTITIONS_JSON)
        .expect("partitions.json parses (the unit test sdk_data_parses proves it)")
});

impl Partitions {
    /// The SDK's partitions, as copied into `partitions.json`.
    pub fn sdk() -> &'static Partitions {
        &SDK
    }

    /// Reads a partitions file (smithy's `partitions.json` format).
    pub fn parse(json: &str) -> Result<Self, String> {
        let file: File = serde_json::from_str(json).map_err(|e| e.to_string())?;
        let entries = file
            .partitions
            .into_iter()
            .map(|p| {
                let region_regex = Regex::new(&p.region_regex)
                    .map_err(|e| format!("partition {}: regionRegex: {e}", p.id))?;
                let o = p.outputs;
                Ok(Entry {
                    id: p.id,
                    region_regex,
                    regions: p.regions,
                    outputs: Partition {
                        id: o.name,
                        dns_suffix: o.dns_suffix,
                        dual_stack_dns_suffix: o.dual_stack_dns_suffix,
                        supports_fips: o.supports_fips,
                        supports_dual_stack: o.supports_dual_stack,
                        implicit_global_region: o.implicit_global_region,
                    },
                })
            })
            .collect::<Result<_, String>>()?;
        Ok(Self { entries })
    }

    /// The partition of a region, as the SDK resolves it: listed, else matched, else `aws`.
    /// None only for data without an `aws` partition.
    pub fn of_region(&self, region: &str) -> Option<Partition> {
        let listed = self
            .entries
            .iter()
            .find_map(|e| e.regions.get(region).map(|o| (e, Some(o))));
        let matched = || {
            self.entries
                .iter()
                .find(|e| e.region_regex.is_match(region))
                .map(|e| (e, None))
        };
        let fallback = || {
            self.entries
                .iter()
                .find(|e| e.id == "aws")
                .map(|e| (e, None))
        };
        let (entry, overrides) = listed.or_else(matched).or_else(fallback)?;
        let base = &entry.outputs;
        let Some(o) = overrides else {
            return Some(base.clone());
        };
        Some(Partition {
            id: o.name.clone().unwrap_or_else(|| base.id.clone()),
            dns_suffix: o
                .dns_suffix
                .clone()
                .unwrap_or_else(|| base.dns_suffix.clone()),
            dual_stack_dns_suffix: o
                .dual_stack_dns_suffix
                .clone()
                .unwrap_or_else(|| base.dual_stack_dns_suffix.clone()),
            supports_fips: o.supports_fips.unwrap_or(base.supports_fips),
            supports_dual_stack: o.supports_dual_stack.unwrap_or(base.supports_dual_stack),
            implicit_global_region: o
                .implicit_global_region
                .clone()
                .unwrap_or_else(|| base.implicit_global_region.clone()),
        })
    }

    /// Whether `region` is a region of this data: listed by a partition, or matched by one's
    /// `regionRegex` (a region the SDK's data does not list yet has that form).
    pub fn is_region(&self, region: &str) -> bool {
        self.entries
            .iter()
            .any(|e| e.regions.contains_key(region) || e.region_regex.is_match(region))
    }

    /// Each partition's own outputs, in the file's order.
    pub fn all(&self) -> impl Iterator<Item = &Partition> {
        self.entries.iter().map(|e| &e.outputs)
    }

    /// The regions a partition lists by name (its pseudo-regions such as `aws-global` too).
    pub fn listed_regions(&self, id: &str) -> Vec<&str> {
        self.entries
            .iter()
            .filter(|e| e.id == id)
            .flat_map(|e| e.regions.keys().map(String::as_str))
            .collect()
    }
}

/// Data for unit tests: aws (us-*, eu-*) and a partition `aws-new` of regions `nw-*`, suffix
/// `amazonaws.new`, dual-stack `api.aws.new`, as a partition the SDK adds would come.
#[cfg(test)]
pub(crate) fn with_new_partition(supports_fips: bool, supports_dual_stack: bool) -> Partitions {
    let json = r#"{"version":"1.1","partitions":[
        {"id":"aws","regionRegex":"^(us|eu)\\-\\w+\\-\\d+$","outputs":{"name":"aws",
          "dnsSuffix":"amazonaws.com","dualStackDnsSuffix":"api.aws","supportsFIPS":true,
          "supportsDualStack":true,"implicitGlobalRegion":"us-east-1"}},
        {"id":"aws-new","regionRegex":"^nw\\-\\w+\\-\\d+$","outputs":{"name":"aws-new",
          "dnsSuffix":"amazonaws.new","dualStackDnsSuffix":"api.aws.new","supportsFIPS":@FIPS@,
          "supportsDualStack":@DUAL@,"implicitGlobalRegion":"nw-north-1"}}]}"#;
    let json = json
        .replace("@FIPS@", &supports_fips.to_string())
        .replace("@DUAL@", &supports_dual_stack.to_string());
    Partitions::parse(&json).expect("the test partitions parse")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sdk_data_parses() {
        let partitions = Partitions::parse(SDK_PARTITIONS_JSON).unwrap();
        assert!(partitions.all().any(|p| p.id == "aws"));
    }

    #[test]
    fn regions_resolve_as_the_sdk_resolves_them() {
        let sdk = Partitions::sdk();
        for (region, id, suffix) in [
            ("us-east-1", "aws", "amazonaws.com"),
            ("eu-west-1", "aws", "amazonaws.com"),
            // Not listed, matched by the aws regex: a region launched after the copy.
            ("ap-east-9", "aws", "amazonaws.com"),
            ("cn-north-1", "aws-cn", "amazonaws.com.cn"),
            ("us-gov-west-1", "aws-us-gov", "amazonaws.com"),
            ("eusc-de-east-1", "aws-eusc", "amazonaws.eu"),
            ("us-iso-east-1", "aws-iso", "c2s.ic.gov"),
            ("us-isob-east-1", "aws-iso-b", "sc2s.sgov.gov"),
            ("eu-isoe-west-1", "aws-iso-e", "cloud.adc-e.uk"),
            ("us-isof-south-1", "aws-iso-f", "csp.hci.ic.gov"),
            // Matched by no partition: the SDK falls back to aws.
            ("xx-nowhere-1", "aws", "amazonaws.com"),
        ] {
            let p = sdk.of_region(region).unwrap();
            assert_eq!(
                (p.id.as_str(), p.dns_suffix.as_str()),
                (id, suffix),
                "{region}"
            );
        }
    }

    #[test]
    fn a_region_entry_overrides_its_partitions_outputs() {
        let json = r#"{"version":"1.1","partitions":[{"id":"aws","regionRegex":"^x\\-\\w+\\-\\d+$",
            "regions":{"x-old-1":{"supportsDualStack":false}},
            "outputs":{"name":"aws","dnsSuffix":"example.com","dualStackDnsSuffix":"api.example",
              "supportsFIPS":true,"supportsDualStack":true,"implicitGlobalRegion":"x-old-1"}}]}"#;
        let partitions = Partitions::parse(json).unwrap();
        assert!(!partitions.of_region("x-old-1").unwrap().supports_dual_stack);
        assert!(partitions.of_region("x-new-1").unwrap().supports_dual_stack);
    }

    #[test]
    fn data_without_an_aws_partition_resolves_only_its_own_regions() {
        let json = r#"{"version":"1.1","partitions":[{"id":"other","regionRegex":"^o\\-\\w+\\-\\d+$",
            "outputs":{"name":"other","dnsSuffix":"o.example","dualStackDnsSuffix":"api.o.example",
              "supportsFIPS":false,"supportsDualStack":false,"implicitGlobalRegion":"o-a-1"}}]}"#;
        let partitions = Partitions::parse(json).unwrap();
        assert_eq!(partitions.of_region("o-a-1").unwrap().id, "other");
        assert!(partitions.of_region("us-east-1").is_none());
    }

    #[test]
    fn a_bad_file_is_an_error_naming_what_is_wrong() {
        assert!(Partitions::parse("{}").is_err());
        let bad_regex = r#"{"version":"1","partitions":[{"id":"p","regionRegex":"(",
            "outputs":{"name":"p","dnsSuffix":"d","dualStackDnsSuffix":"api.d",
              "supportsFIPS":true,"supportsDualStack":true,"implicitGlobalRegion":"r"}}]}"#;
        let err = Partitions::parse(bad_regex).unwrap_err();
        assert!(err.contains("partition p: regionRegex"), "{err}");
    }
}
