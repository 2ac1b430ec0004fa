//! Kubernetes object names, checked once where they enter.

use std::fmt;
use std::str::FromStr;

/// An RFC 1123 label's characters: lowercase letters, digits and '-', with a letter or digit
/// at either end.
fn is_label(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// A DNS subdomain (RFC 1123): what Secret and ServiceAccount names must be.
fn check_subdomain(s: &str) -> Result<(), String> {
    let ok = s.len() <= 253 && s.split('.').all(is_label);
    ok.then_some(()).ok_or_else(|| {
        "must be a DNS subdomain name: lowercase letters, digits, '-' and '.', at most 253 characters, \
         starting and ending with a letter or digit"
            .into()
    })
}

/// A DNS label (RFC 1123): what namespace names must be.
fn check_label(s: &str) -> Result<(), String> {
    let ok = s.len() <= 63 && is_label(s);
    ok.then_some(()).ok_or_else(|| {
        "must be a DNS label: lowercase letters, digits and '-', at most 63 characters, \
         starting and ending with a letter or digit"
            .into()
    })
}

macro_rules! name_type {
    ($(#[$doc:meta])* $name:ident, $check:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(String);

        impl $name {
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl FromStr for $name {
            type Err = String;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                $check(s).map(|()| Self(s.to_owned()))
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }
    };
}

name_type!(
    /// The pull Secret's name, the same in every namespace.
    SecretName,
    check_subdomain
);
name_type!(
    /// A ServiceAccount that should carry the pull Secret.
    ServiceAccountName,
    check_subdomain
);
name_type!(
    /// An Argo CD project (an AppProject's name) the `repository` Secrets are scoped to.
    ProjectName,
    check_subdomain
);
name_type!(
    /// A namespace named literally in the configuration.
    NamespaceName,
    check_label
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_api_servers_rules() {
        let cases = [
            ("aws-ecr-token", true, true),
            ("ecr.pull", true, false),
            ("a", true, true),
            ("", false, false),
            ("Upper", false, false),
            ("-lead", false, false),
            ("trail-", false, false),
            ("under_score", false, false),
            ("a..b", false, false),
        ];
        for (name, subdomain, label) in cases {
            assert_eq!(
                SecretName::from_str(name).is_ok(),
                subdomain,
                "{name:?} as a Secret name"
            );
            assert_eq!(
                NamespaceName::from_str(name).is_ok(),
                label,
                "{name:?} as a namespace"
            );
        }
        assert!(NamespaceName::from_str(&"a".repeat(64)).is_err());
        assert!(SecretName::from_str(&"a".repeat(254)).is_err());
    }
}
