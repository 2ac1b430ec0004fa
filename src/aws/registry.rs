//! Registry hosts: the names a pull can give an ECR registry, and which token serves each.
//!
//! A private registry's host is `<account>.dkr.ecr[-fips].<region>.<dnsSuffix>`, and its
//! dual-stack host `<account>.dkr-ecr[-fips].<region>.<dual-stack suffix>`, where the suffixes
//! are those of the region's partition in the AWS SDK's partition data ([`crate::aws::partition`]):
//! a partition the data names is accepted without a change here. The kubelet matches `auths`
//! keys to the image's host exactly, so each spelling is its own entry.
//!
//! | form | where it is documented |
//! |---|---|
//! | `<account>.dkr.ecr.<region>.amazonaws.com` | AWS General Reference, "Amazon ECR endpoints and quotas" (docs.aws.amazon.com/general/latest/gr/ecr.html) |
//! | `<account>.dkr.ecr-fips.<region>.amazonaws.com` | same page (`dkr.ecr-fips.us-east-2.amazonaws.com`) |
//! | `<account>.dkr.ecr.<region>.<dnsSuffix>` in the other partitions (`amazonaws.com.cn`, `amazonaws.eu`, `c2s.ic.gov`, ...) | the same form as ECR's API host `api.ecr.<region>.<dnsSuffix>`, which the SDK's ECR endpoint rules build from the partition's dnsSuffix; kubernetes/cloud-provider-aws cmd/ecr-credential-provider accepts these hosts for aws-cn, aws-eusc and the four ISO partitions |
//! | `<account>.dkr-ecr.<region>.on.aws` (dual-stack) | ECR User Guide, "Making requests to Amazon ECR registries" (docs.aws.amazon.com/AmazonECR/latest/userguide/ecr-requests.html): `<registry-id>.dkr-ecr.<aws-region>.on.aws`, beside the API's `ecr.<aws-region>.api.aws`; General Reference lists `dkr-ecr.us-east-2.on.aws` |
//! | `<account>.dkr-ecr-fips.<region>.on.aws` (dual-stack FIPS) | General Reference, ecr.html (`dkr-ecr-fips.us-east-2.on.aws`) |
//! | `<account>.dkr-ecr.<region>.on.<X>` where the partition's dualStackDnsSuffix is `api.<X>` | aws/amazon-ecs-agent ecs-agent/utils/uri/uri.go (ECRDualStackImagePattern) lists `on.amazonwebservices.com.cn`, `on.aws.ic.gov`, `on.aws.scloud`, `on.aws.hci.ic.gov`, `on.cloud-aws.adc-e.uk`, each its partition's `api.` suffix with `on.`; it writes the aws-eusc one as `dkr-ecr.eusc-de-east-1.amazonwebservices.eu`, without `on.`, the one exception, which we take for a slip; kubernetes/cloud-provider-aws's tests use `on.amazonwebservices.com.cn` |
//! | `public.ecr.aws` (ECR Public) | ECR Public User Guide, registry authentication (`docker login ... public.ecr.aws`) |
//! | `ecr-public.aws.com` (ECR Public, dual-stack) | ECR Public User Guide, "Making requests to Amazon ECR Public registries" (public-ecr-requests.html) |

use std::fmt;
use std::str::FromStr;

use crate::aws::partition::{Partition, Partitions};

/// ECR Public's only token region: its GetAuthorizationToken is served in us-east-1.
pub const PUBLIC_REGION: &str = "us-east-1";
/// ECR Public's registry host.
pub const PUBLIC_HOST: &str = "public.ecr.aws";
/// ECR Public's dual-stack registry host.
pub const PUBLIC_DUAL_STACK_HOST: &str = "ecr-public.aws.com";

/// Which token serves a registry host.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Service {
    /// A private registry: ECR's GetAuthorizationToken in its region.
    Private {
        account: String,
        region: String,
        fips: bool,
        /// The region's partition (`aws`, `aws-eusc`...).
        partition: String,
        /// What its IPv4 hosts end with (the partition's dnsSuffix).
        suffix: String,
        /// What its dual-stack hosts end with; None where the partition has none.
        dual_stack_suffix: Option<String>,
    },
    /// ECR Public: its own GetAuthorizationToken, in us-east-1.
    Public,
}

/// A parsed registry host; its service, account and region decide which token serves it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RegistryHost {
    host: String,
    service: Service,
    dual_stack: bool,
}

/// A registry whose partition has no dual-stack hosts, asked for its dual-stack twin.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the registry {host} is in partition {partition}, which has no dual-stack registry hosts \
     in the AWS SDK's partition data: set ECR_REFRESH_DUAL_STACK=false"
)]
pub struct NoDualStack {
    pub host: String,
    pub partition: String,
}

impl RegistryHost {
    /// The bare host: the key written into `auths`.
    pub fn host(&self) -> &str {
        &self.host
    }
    /// The account of a private registry; None for ECR Public.
    pub fn account(&self) -> Option<&str> {
        match &self.service {
            Service::Private { account, .. } => Some(account),
            Service::Public => None,
        }
    }
    /// The region whose token serves this host (us-east-1 for ECR Public).
    pub fn region(&self) -> &str {
        match &self.service {
            Service::Private { region, .. } => region,
            Service::Public => PUBLIC_REGION,
        }
    }
    /// The partition of the host's region (`aws` for ECR Public).
    pub fn partition(&self) -> &str {
        match &self.service {
            Service::Private { partition, .. } => partition,
            Service::Public => "aws",
        }
    }
    pub fn is_public(&self) -> bool {
        self.service == Service::Public
    }
    pub fn is_dual_stack(&self) -> bool {
        self.dual_stack
    }

    /// The same registry under its dual-stack host: None for a host that is already one, an
    /// error where the partition has none.
    pub fn dual_stack_twin(&self) -> Result<Option<RegistryHost>, NoDualStack> {
        if self.dual_stack {
            return Ok(None);
        }
        let host = match &self.service {
            Service::Public => PUBLIC_DUAL_STACK_HOST.to_owned(),
            Service::Private {
                account,
                region,
                fips,
                partition,
                dual_stack_suffix,
                ..
            } => {
                let Some(suffix) = dual_stack_suffix else {
                    return Err(NoDualStack {
                        host: self.host.clone(),
                        partition: partition.clone(),
                    });
                };
                format!(
                    "{account}.dkr-ecr{fips}.{region}.{suffix}",
                    fips = if *fips { "-fips" } else { "" },
                )
            }
        };
        Ok(Some(RegistryHost {
            host,
            service: self.service.clone(),
            dual_stack: true,
        }))
    }

    /// Parses the `proxyEndpoint` ECR returns (`https://<host>`).
    pub fn from_proxy_endpoint(endpoint: &str) -> Result<Self, String> {
        Self::from_str(&normalize(endpoint))
    }

    /// Parses a host against these partitions (the SDK's, for [`FromStr`]).
    pub fn parse_in(s: &str, partitions: &Partitions) -> Result<Self, String> {
        let host = normalize(s);
        if host == PUBLIC_HOST || host == PUBLIC_DUAL_STACK_HOST {
            return Ok(Self {
                dual_stack: host == PUBLIC_DUAL_STACK_HOST,
                service: Service::Public,
                host,
            });
        }
        let refused = || accepted(partitions);
        let labels: Vec<&str> = host.split('.').collect();
        // <account>.dkr.ecr[-fips].<region>.<suffix> or <account>.dkr-ecr[-fips].<region>.<suffix>
        let (account, fips, dual_stack, region, suffix) = match labels[..] {
            [account, "dkr", "ecr", region, ref suffix @ ..] => {
                (account, false, false, region, suffix)
            }
            [account, "dkr", "ecr-fips", region, ref suffix @ ..] => {
                (account, true, false, region, suffix)
            }
            [account, "dkr-ecr", region, ref suffix @ ..] => (account, false, true, region, suffix),
            [account, "dkr-ecr-fips", region, ref suffix @ ..] => {
                (account, true, true, region, suffix)
            }
            _ => return Err(refused()),
        };
        let suffix = suffix.join(".");
        if account.len() != 12 || !account.bytes().all(|b| b.is_ascii_digit()) {
            return Err(format!("{} (the account is 12 digits)", refused()));
        }
        if !valid_region(region) {
            return Err(format!("{} (the region looks like eu-west-1)", refused()));
        }
        let partition = partitions
            .of_region(region)
            .ok_or_else(|| format!("{} (no partition holds the region {region})", refused()))?;
        let ipv4_suffix = partition.dns_suffix.clone();
        let dual_stack_suffix = dual_stack_suffix(&partition);
        let expected = if dual_stack {
            dual_stack_suffix.clone()
        } else {
            Some(ipv4_suffix.clone())
        };
        if expected.as_deref() != Some(suffix.as_str()) {
            return Err(mismatch(
                partitions,
                &partition,
                region,
                &suffix,
                dual_stack,
                expected.as_deref(),
            )
            .unwrap_or_else(refused));
        }
        if fips && !partition.supports_fips {
            return Err(format!(
                "is a FIPS host, but its region {region} is in partition {}, which has no FIPS \
                 endpoints in the AWS SDK's partition data: use <account>.dkr.ecr.{region}.{ipv4_suffix}",
                partition.id
            ));
        }
        Ok(Self {
            service: Service::Private {
                account: account.to_owned(),
                region: region.to_owned(),
                fips,
                partition: partition.id,
                suffix: ipv4_suffix,
                dual_stack_suffix,
            },
            dual_stack,
            host,
        })
    }
}

/// ECR's dual-stack registry suffix in a partition: `on.<X>` where the partition's dual-stack
/// API suffix is `api.<X>` (`api.aws` -> `on.aws`, `api.amazonwebservices.com.cn` ->
/// `on.amazonwebservices.com.cn`; see the module's table). None where the partition has no
/// dual-stack endpoints, or a dual-stack suffix of another shape, of which we know no host.
pub fn dual_stack_suffix(partition: &Partition) -> Option<String> {
    if !partition.supports_dual_stack {
        return None;
    }
    partition
        .dual_stack_dns_suffix
        .strip_prefix("api.")
        .map(|rest| format!("on.{rest}"))
}

/// The error for a suffix that belongs to another partition than the region's; None for a
/// suffix no other partition has, or the region's own (the accepted forms say the rest).
fn mismatch(
    partitions: &Partitions,
    partition: &Partition,
    region: &str,
    suffix: &str,
    dual_stack: bool,
    expected: Option<&str>,
) -> Option<String> {
    // The region's own suffix in the other form (`….dkr.ecr.<region>.on.aws`): the forms say it.
    if partition.dns_suffix == suffix || dual_stack_suffix(partition).as_deref() == Some(suffix) {
        return None;
    }
    let (ipv4, dual): (Vec<&Partition>, Vec<&Partition>) = (
        partitions
            .all()
            .filter(|p| p.id != partition.id && p.dns_suffix == suffix)
            .collect(),
        partitions
            .all()
            .filter(|p| p.id != partition.id && dual_stack_suffix(p).as_deref() == Some(suffix))
            .collect(),
    );
    let (owners, kind) = match (ipv4.is_empty(), dual.is_empty()) {
        (false, _) => (ipv4, "suffix"),
        (true, false) => (dual, "dual-stack suffix"),
        (true, true) => return None,
    };
    let ids: Vec<&str> = owners.iter().map(|p| p.id.as_str()).collect();
    let plural = if ids.len() > 1 { "s" } else { "" };
    let form = if dual_stack { "dual-stack " } else { "" };
    let wanted = match expected {
        Some(expected) => format!("whose {form}registry hosts end in .{expected}"),
        None => format!("which has no {form}registry hosts"),
    };
    Some(format!(
        "ends in .{suffix}, the {kind} of partition{plural} {ids}, but its region {region} is in \
         partition {id}, {wanted}",
        ids = ids.join(" and "),
        id = partition.id,
    ))
}

/// What is accepted, from the partition data: the forms, then each partition's suffixes.
fn accepted(partitions: &Partitions) -> String {
    let suffixes: Vec<String> = partitions
        .all()
        .map(|p| match dual_stack_suffix(p) {
            Some(dual) => format!("{} .{} (dual-stack .{dual})", p.id, p.dns_suffix),
            None => format!("{} .{}", p.id, p.dns_suffix),
        })
        .collect();
    format!(
        "must be an ECR registry host, like <account>.dkr.ecr.<region>.amazonaws.com: \
         <account>.dkr.ecr[-fips].<region>.<suffix> or the dual-stack \
         <account>.dkr-ecr[-fips].<region>.<dual-stack suffix>, with the suffixes of the region's \
         partition ({}), or ECR Public's public.ecr.aws or ecr-public.aws.com",
        suffixes.join(", ")
    )
}

/// One partition's registry host forms, as `--help` and README's Registry hosts list them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostForms {
    pub partition: String,
    /// One region of the partition (its implicit global region).
    pub region: String,
    /// `<account>.dkr.ecr[-fips].<region>.<dnsSuffix>`, `[-fips]` where it has FIPS endpoints.
    pub host: String,
    /// `<account>.dkr-ecr[-fips].<region>.<dual-stack suffix>`; None where it has none.
    pub dual_stack_host: Option<String>,
}

/// Every partition's host forms, in the data's order.
pub fn host_forms(partitions: &Partitions) -> Vec<HostForms> {
    partitions
        .all()
        .map(|p| {
            let fips = if p.supports_fips { "[-fips]" } else { "" };
            HostForms {
                partition: p.id.clone(),
                region: p.implicit_global_region.clone(),
                host: format!("<account>.dkr.ecr{fips}.<region>.{}", p.dns_suffix),
                dual_stack_host: dual_stack_suffix(p)
                    .map(|suffix| format!("<account>.dkr-ecr{fips}.<region>.{suffix}")),
            }
        })
        .collect()
}

/// A registry named in ECR_REFRESH_REGISTRIES, or ECR's `proxyEndpoint`, as a bare host: scheme
/// and path dropped, case folded, so `https://HOST/` and `HOST` configure the same registry.
///
/// Not how the kubelet reads an `auths` key: its keyring keys an entry by host plus path
/// (`HOST/team-x` is its own entry, matched before `HOST` for images under that path) and
/// compares hosts as written, without folding case. So `auths` keys are never normalized to
/// decide what is ours: see `docker_config::is_entry_for`.
pub fn normalize(key: &str) -> String {
    let key = key.trim();
    let without_scheme = key
        .strip_prefix("https://")
        .or_else(|| key.strip_prefix("http://"))
        .unwrap_or(key);
    without_scheme
        .split('/')
        .next()
        .unwrap_or_default()
        .to_ascii_lowercase()
}

impl FromStr for RegistryHost {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse_in(s, Partitions::sdk())
    }
}

/// `eu-west-1`, `us-gov-west-1`, `cn-north-1`, `eusc-de-east-1`, `us-isob-east-1`...
fn valid_region(region: &str) -> bool {
    let parts: Vec<&str> = region.split('-').collect();
    parts.len() >= 3
        && parts[..parts.len() - 1]
            .iter()
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_lowercase()))
        && parts[parts.len() - 1].bytes().all(|b| b.is_ascii_digit())
        && !parts[parts.len() - 1].is_empty()
}

impl fmt::Display for RegistryHost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.host)
    }
}

/// Each host followed by its dual-stack twin (with `dual_stack`), each once: the hosts a write
/// puts in `auths`, which the due decision expects a Secret that is not due to hold.
/// A host whose partition has no dual-stack hosts is an error: configured ones are refused
/// when the configuration is read, so this is the caller's own registry, known once ECR names it.
pub fn with_twins(
    hosts: Vec<RegistryHost>,
    dual_stack: bool,
) -> Result<Vec<RegistryHost>, NoDualStack> {
    let mut out: Vec<RegistryHost> = Vec::with_capacity(hosts.len() * 2);
    for host in hosts {
        let twin = if dual_stack {
            host.dual_stack_twin()?
        } else {
            None
        };
        for h in std::iter::once(host).chain(twin) {
            if !out.contains(&h) {
                out.push(h);
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ecr_hosts_parse_into_account_and_region() {
        let cases = [
            (
                "123456789012.dkr.ecr.eu-west-1.amazonaws.com",
                "123456789012",
                "eu-west-1",
            ),
            (
                "123456789012.dkr.ecr-fips.us-gov-west-1.amazonaws.com",
                "123456789012",
                "us-gov-west-1",
            ),
            (
                "123456789012.dkr.ecr.cn-north-1.amazonaws.com.cn",
                "123456789012",
                "cn-north-1",
            ),
            (
                "https://123456789012.dkr.ecr.eu-west-1.amazonaws.com/",
                "123456789012",
                "eu-west-1",
            ),
            (
                "123456789012.DKR.ECR.EU-WEST-1.AMAZONAWS.COM",
                "123456789012",
                "eu-west-1",
            ),
            (
                "123456789012.dkr-ecr.eu-west-1.on.aws",
                "123456789012",
                "eu-west-1",
            ),
            (
                "123456789012.dkr-ecr-fips.us-gov-west-1.on.aws",
                "123456789012",
                "us-gov-west-1",
            ),
            (
                "123456789012.dkr-ecr.cn-north-1.on.amazonwebservices.com.cn",
                "123456789012",
                "cn-north-1",
            ),
            (
                "123456789012.dkr.ecr.eusc-de-east-1.amazonaws.eu",
                "123456789012",
                "eusc-de-east-1",
            ),
            (
                "123456789012.dkr.ecr-fips.us-iso-east-1.c2s.ic.gov",
                "123456789012",
                "us-iso-east-1",
            ),
            (
                "123456789012.dkr.ecr.us-isob-east-1.sc2s.sgov.gov",
                "123456789012",
                "us-isob-east-1",
            ),
            (
                "123456789012.dkr.ecr.eu-isoe-west-1.cloud.adc-e.uk",
                "123456789012",
                "eu-isoe-west-1",
            ),
            (
                "123456789012.dkr.ecr.us-isof-east-1.csp.hci.ic.gov",
                "123456789012",
                "us-isof-east-1",
            ),
        ];
        for (input, account, region) in cases {
            let host = RegistryHost::from_str(input).unwrap();
            assert_eq!(
                (host.account(), host.region()),
                (Some(account), region),
                "{input}"
            );
            assert!(!host.host().contains("https"), "{input}");
        }
    }

    #[test]
    fn other_hosts_are_refused_with_the_accepted_forms() {
        for bad in [
            "docker.io",
            "12345.dkr.ecr.eu-west-1.amazonaws.com",
            "123456789012.dkr.ecr.amazonaws.com",
            "123456789012.dkr.ecr.eu-west-1.amazonaws.com.evil.io",
            "123456789012.ecr.eu-west-1.amazonaws.com",
            "123456789012.dkr.ecr.westeurope.amazonaws.com",
            "123456789012.dkr.ecr.eu-west-1.on.aws",
            "123456789012.dkr-ecr.eu-west-1.amazonaws.com",
            "123456789012.dkr-ecr.eu-west-1.on.aws.evil.io",
            "123456789012.dkr-ecr-x.eu-west-1.on.aws",
            "dkr-ecr.eu-west-1.on.aws",
            "ecr.aws",
            "public.ecr.aws.evil.io",
            "gallery.ecr.aws",
        ] {
            let err = RegistryHost::from_str(bad).unwrap_err();
            assert!(
                err.contains("<account>.dkr.ecr.<region>.amazonaws.com"),
                "{bad}: {err}"
            );
        }
    }

    #[test]
    fn every_ipv4_host_has_its_dual_stack_twin_with_the_same_token() {
        for (ipv4, twin) in [
            (
                "123456789012.dkr.ecr.eu-west-1.amazonaws.com",
                "123456789012.dkr-ecr.eu-west-1.on.aws",
            ),
            (
                "123456789012.dkr.ecr-fips.us-gov-west-1.amazonaws.com",
                "123456789012.dkr-ecr-fips.us-gov-west-1.on.aws",
            ),
            (
                "123456789012.dkr.ecr.cn-north-1.amazonaws.com.cn",
                "123456789012.dkr-ecr.cn-north-1.on.amazonwebservices.com.cn",
            ),
            (
                "123456789012.dkr.ecr.eusc-de-east-1.amazonaws.eu",
                "123456789012.dkr-ecr.eusc-de-east-1.on.amazonwebservices.eu",
            ),
            (
                "123456789012.dkr.ecr-fips.us-iso-east-1.c2s.ic.gov",
                "123456789012.dkr-ecr-fips.us-iso-east-1.on.aws.ic.gov",
            ),
            (
                "123456789012.dkr.ecr.us-isob-east-1.sc2s.sgov.gov",
                "123456789012.dkr-ecr.us-isob-east-1.on.aws.scloud",
            ),
            (
                "123456789012.dkr.ecr.eu-isoe-west-1.cloud.adc-e.uk",
                "123456789012.dkr-ecr.eu-isoe-west-1.on.cloud-aws.adc-e.uk",
            ),
            (
                "123456789012.dkr.ecr.us-isof-south-1.csp.hci.ic.gov",
                "123456789012.dkr-ecr.us-isof-south-1.on.aws.hci.ic.gov",
            ),
            ("public.ecr.aws", "ecr-public.aws.com"),
        ] {
            let host = RegistryHost::from_str(ipv4).unwrap();
            let twin_host = host.dual_stack_twin().unwrap().unwrap();
            assert_eq!(twin_host.host(), twin);
            assert!(twin_host.is_dual_stack() && !host.is_dual_stack());
            // The twin parses back to the same registry, so either spelling is served alike.
            assert_eq!(RegistryHost::from_str(twin).unwrap(), twin_host);
            assert_eq!(
                (
                    twin_host.account(),
                    twin_host.region(),
                    twin_host.is_public()
                ),
                (host.account(), host.region(), host.is_public())
            );
            assert_eq!(twin_host.dual_stack_twin(), Ok(None));
        }
    }

    #[test]
    fn ecr_public_hosts_are_served_from_us_east_1_without_an_account() {
        for public in [
            "public.ecr.aws",
            "https://PUBLIC.ECR.AWS/",
            "ecr-public.aws.com",
        ] {
            let host = RegistryHost::from_str(public).unwrap();
            assert!(host.is_public(), "{public}");
            assert_eq!((host.account(), host.region()), (None, "us-east-1"));
        }
    }

    #[test]
    fn a_suffix_of_another_partition_is_refused_naming_the_regions_partition() {
        for (bad, named) in [
            (
                "123456789012.dkr.ecr.us-east-1.amazonaws.eu",
                "ends in .amazonaws.eu, the suffix of partition aws-eusc, but its region \
                 us-east-1 is in partition aws, whose registry hosts end in .amazonaws.com",
            ),
            (
                "123456789012.dkr.ecr.eusc-de-east-1.amazonaws.com",
                "the suffix of partitions aws and aws-us-gov, but its region eusc-de-east-1 is \
                 in partition aws-eusc, whose registry hosts end in .amazonaws.eu",
            ),
            (
                "123456789012.dkr.ecr.cn-north-1.amazonaws.com",
                "its region cn-north-1 is in partition aws-cn, whose registry hosts end in \
                 .amazonaws.com.cn",
            ),
            (
                "123456789012.dkr-ecr.us-iso-east-1.on.aws",
                "ends in .on.aws, the dual-stack suffix of partitions aws and aws-us-gov, but \
                 its region us-iso-east-1 is in partition aws-iso, whose dual-stack registry \
                 hosts end in .on.aws.ic.gov",
            ),
            (
                "123456789012.dkr.ecr.us-gov-west-1.c2s.ic.gov",
                "partition aws-us-gov, whose registry hosts end in .amazonaws.com",
            ),
        ] {
            let err = RegistryHost::from_str(bad).unwrap_err();
            assert!(err.contains(named), "{bad}: {err}");
        }
    }

    #[test]
    fn the_accepted_forms_name_every_partitions_suffixes() {
        let err = RegistryHost::from_str("docker.io").unwrap_err();
        for p in Partitions::sdk().all() {
            let dual = dual_stack_suffix(p).unwrap();
            assert!(
                err.contains(&format!("{} .{} (dual-stack .{dual})", p.id, p.dns_suffix)),
                "{}: {err}",
                p.id
            );
        }
    }

    #[test]
    fn a_partition_the_data_adds_is_accepted_with_its_suffixes() {
        // A partition from the data alone: what the next partition the SDK learns of needs.
        let partitions = crate::aws::partition::with_new_partition(true, true);
        let host = RegistryHost::parse_in(
            "123456789012.dkr.ecr-fips.nw-north-1.amazonaws.new",
            &partitions,
        )
        .unwrap();
        assert_eq!((host.region(), host.partition()), ("nw-north-1", "aws-new"));
        assert_eq!(
            host.dual_stack_twin().unwrap().unwrap().host(),
            "123456789012.dkr-ecr-fips.nw-north-1.on.aws.new"
        );
        let err =
            RegistryHost::parse_in("123456789012.dkr.ecr.us-east-1.amazonaws.new", &partitions)
                .unwrap_err();
        assert!(
            err.contains("partition aws-new, but its region us-east-1 is in partition aws"),
            "{err}"
        );
    }

    #[test]
    fn a_partition_without_dual_stack_or_fips_has_no_such_hosts() {
        let partitions = crate::aws::partition::with_new_partition(false, false);
        let host =
            RegistryHost::parse_in("123456789012.dkr.ecr.nw-north-1.amazonaws.new", &partitions)
                .unwrap();
        let err = host.dual_stack_twin().unwrap_err();
        assert_eq!(err.partition, "aws-new");
        assert!(
            err.to_string().contains(
                "the registry 123456789012.dkr.ecr.nw-north-1.amazonaws.new is in partition \
                 aws-new, which has no dual-stack registry hosts"
            ),
            "{err}"
        );
        let fips = RegistryHost::parse_in(
            "123456789012.dkr.ecr-fips.nw-north-1.amazonaws.new",
            &partitions,
        )
        .unwrap_err();
        assert!(
            fips.contains("partition aws-new, which has no FIPS endpoints"),
            "{fips}"
        );
        // The dual-stack spelling of its own partition's twin does not exist either.
        let dual =
            RegistryHost::parse_in("123456789012.dkr-ecr.nw-north-1.on.aws.new", &partitions)
                .unwrap_err();
        assert!(dual.contains("must be an ECR registry host"), "{dual}");
        // ECR Public is there whatever the partitions.
        assert!(RegistryHost::parse_in("public.ecr.aws", &partitions).is_ok());
    }

    #[test]
    fn auths_keys_normalise_to_the_host() {
        for (key, host) in [
            (
                "https://1.dkr.ecr.x-y-1.amazonaws.com",
                "1.dkr.ecr.x-y-1.amazonaws.com",
            ),
            (
                "https://1.dkr.ecr.x-y-1.amazonaws.com/",
                "1.dkr.ecr.x-y-1.amazonaws.com",
            ),
            ("http://Registry.Example:5000/v2/", "registry.example:5000"),
            ("ghcr.io", "ghcr.io"),
        ] {
            assert_eq!(normalize(key), host);
        }
    }
}
