//! Registry hosts: the names a pull can give an ECR registry, and which token serves each.
//!
//! Accepted (the kubelet matches `auths` keys to the image's host exactly, so each spelling is
//! its own entry):
//!
//! | form | where it is documented |
//! |---|---|
//! | `<account>.dkr.ecr.<region>.amazonaws.com` | AWS General Reference, "Amazon ECR endpoints and quotas" (docs.aws.amazon.com/general/latest/gr/ecr.html) |
//! | `<account>.dkr.ecr-fips.<region>.amazonaws.com` | same page (`dkr.ecr-fips.us-east-2.amazonaws.com`) |
//! | `<account>.dkr.ecr.<region>.amazonaws.com.cn` | same page on docs.amazonaws.cn; kubernetes/cloud-provider-aws cmd/ecr-credential-provider |
//! | `<account>.dkr-ecr.<region>.on.aws` (dual-stack) | ECR User Guide, "Making requests to Amazon ECR registries" (docs.aws.amazon.com/AmazonECR/latest/userguide/ecr-requests.html): `<registry-id>.dkr-ecr.<aws-region>.on.aws`; General Reference lists `dkr-ecr.us-east-2.on.aws` |
//! | `<account>.dkr-ecr-fips.<region>.on.aws` (dual-stack FIPS) | General Reference, ecr.html (`dkr-ecr-fips.us-east-2.on.aws`) |
//! | `<account>.dkr-ecr.<region>.on.amazonwebservices.com.cn` (dual-stack China) | kubernetes/cloud-provider-aws cmd/ecr-credential-provider/main_test.go ("IPv6 CN") and aws/amazon-ecs-agent ecs-agent/utils/uri/uri.go (ECRDualStackImagePattern); not in AWS's English docs we could find |
//! | `public.ecr.aws` (ECR Public) | ECR Public User Guide, registry authentication (`docker login ... public.ecr.aws`) |
//! | `ecr-public.aws.com` (ECR Public, dual-stack) | ECR Public User Guide, "Making requests to Amazon ECR Public registries" (public-ecr-requests.html) |
//!
//! The ISO partitions' hosts (`c2s.ic.gov` and others) are not accepted: nothing here was tested
//! against them.

use std::fmt;
use std::str::FromStr;

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
        china: bool,
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
    pub fn is_public(&self) -> bool {
        self.service == Service::Public
    }
    pub fn is_dual_stack(&self) -> bool {
        self.dual_stack
    }

    /// The same registry under its dual-stack host; None for a host that is already one.
    pub fn dual_stack_twin(&self) -> Option<RegistryHost> {
        if self.dual_stack {
            return None;
        }
        let host = match &self.service {
            Service::Public => PUBLIC_DUAL_STACK_HOST.to_owned(),
            Service::Private {
                account,
                region,
                fips,
                china,
            } => format!(
                "{account}.dkr-ecr{fips}.{region}.{suffix}",
                fips = if *fips { "-fips" } else { "" },
                suffix = if *china {
                    "on.amazonwebservices.com.cn"
                } else {
                    "on.aws"
                },
            ),
        };
        Some(RegistryHost {
            host,
            service: self.service.clone(),
            dual_stack: true,
        })
    }

    /// Parses the `proxyEndpoint` ECR returns (`https://<host>`).
    pub fn from_proxy_endpoint(endpoint: &str) -> Result<Self, String> {
        Self::from_str(&normalize(endpoint))
    }
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

const ACCEPTED: &str = "must be an ECR registry host: <account>.dkr.ecr.<region>.amazonaws.com, \
    <account>.dkr.ecr-fips.<region>.amazonaws.com, <account>.dkr.ecr.<region>.amazonaws.com.cn, \
    the dual-stack <account>.dkr-ecr.<region>.on.aws, <account>.dkr-ecr-fips.<region>.on.aws or \
    <account>.dkr-ecr.<region>.on.amazonwebservices.com.cn, or ECR Public's public.ecr.aws or ecr-public.aws.com";

impl FromStr for RegistryHost {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let host = normalize(s);
        if host == PUBLIC_HOST || host == PUBLIC_DUAL_STACK_HOST {
            return Ok(Self {
                dual_stack: host == PUBLIC_DUAL_STACK_HOST,
                service: Service::Public,
                host,
            });
        }
        // (suffix, dual-stack, China); the longer `.cn` suffix first.
        let (rest, dual_stack, china) = [
            (".amazonaws.com.cn", false, true),
            (".amazonaws.com", false, false),
            (".on.amazonwebservices.com.cn", true, true),
            (".on.aws", true, false),
        ]
        .into_iter()
        .find_map(|(suffix, dual, china)| host.strip_suffix(suffix).map(|rest| (rest, dual, china)))
        .ok_or(ACCEPTED)?;
        let mut parts = rest.split('.');
        let (account, service, region) = if dual_stack {
            // <account>.dkr-ecr[-fips].<region>
            let (Some(account), Some(service), Some(region), None) =
                (parts.next(), parts.next(), parts.next(), parts.next())
            else {
                return Err(ACCEPTED.into());
            };
            (account, service, region)
        } else {
            // <account>.dkr.ecr[-fips].<region>
            let (Some(account), Some("dkr"), Some(service), Some(region), None) = (
                parts.next(),
                parts.next(),
                parts.next(),
                parts.next(),
                parts.next(),
            ) else {
                return Err(ACCEPTED.into());
            };
            (account, service, region)
        };
        let fips = match (dual_stack, service) {
            (false, "ecr") | (true, "dkr-ecr") => false,
            (false, "ecr-fips") | (true, "dkr-ecr-fips") => true,
            _ => return Err(ACCEPTED.into()),
        };
        if account.len() != 12 || !account.bytes().all(|b| b.is_ascii_digit()) {
            return Err(format!("{ACCEPTED} (the account is 12 digits)"));
        }
        if !valid_region(region) {
            return Err(format!("{ACCEPTED} (the region looks like eu-west-1)"));
        }
        Ok(Self {
            service: Service::Private {
                account: account.to_owned(),
                region: region.to_owned(),
                fips,
                china,
            },
            dual_stack,
            host,
        })
    }
}

/// `eu-west-1`, `us-gov-west-1`, `cn-north-1`, `ap-southeast-5`...
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
            ("public.ecr.aws", "ecr-public.aws.com"),
        ] {
            let host = RegistryHost::from_str(ipv4).unwrap();
            let twin_host = host.dual_stack_twin().unwrap();
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
            assert!(twin_host.dual_stack_twin().is_none());
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
