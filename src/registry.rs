//! ECR registry hosts: `<account>.dkr.ecr.<region>.amazonaws.com`, the `dkr.ecr-fips`
//! form, and `.amazonaws.com.cn` in China.

use std::fmt;
use std::str::FromStr;

/// A parsed ECR registry host; its account and region decide which token serves it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RegistryHost {
    host: String,
    account: String,
    region: String,
}

impl RegistryHost {
    /// The bare host: the key written into `auths`.
    pub fn host(&self) -> &str {
        &self.host
    }
    pub fn account(&self) -> &str {
        &self.account
    }
    pub fn region(&self) -> &str {
        &self.region
    }

    /// Parses the `proxyEndpoint` ECR returns (`https://<host>`).
    pub fn from_proxy_endpoint(endpoint: &str) -> Result<Self, String> {
        Self::from_str(&normalize(endpoint))
    }
}

/// How the kubelet sees an `auths` key: scheme and path dropped, case folded. A Secret made with
/// `--docker-server=https://HOST/` and one keyed by the bare HOST name the same registry.
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
    <account>.dkr.ecr-fips.<region>.amazonaws.com or <account>.dkr.ecr.<region>.amazonaws.com.cn";

impl FromStr for RegistryHost {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let host = normalize(s);
        let rest = host
            .strip_suffix(".amazonaws.com.cn")
            .or_else(|| host.strip_suffix(".amazonaws.com"))
            .ok_or(ACCEPTED)?;
        let mut parts = rest.split('.');
        let (Some(account), Some("dkr"), Some("ecr" | "ecr-fips"), Some(region), None) = (
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
        ) else {
            return Err(ACCEPTED.into());
        };
        if account.len() != 12 || !account.bytes().all(|b| b.is_ascii_digit()) {
            return Err(format!("{ACCEPTED} (the account is 12 digits)"));
        }
        if !valid_region(region) {
            return Err(format!("{ACCEPTED} (the region looks like eu-west-1)"));
        }
        Ok(Self {
            account: account.to_owned(),
            region: region.to_owned(),
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
        ];
        for (input, account, region) in cases {
            let host = RegistryHost::from_str(input).unwrap();
            assert_eq!(
                (host.account(), host.region()),
                (account, region),
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
        ] {
            let err = RegistryHost::from_str(bad).unwrap_err();
            assert!(
                err.contains("<account>.dkr.ecr.<region>.amazonaws.com"),
                "{bad}: {err}"
            );
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
