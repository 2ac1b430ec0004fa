//! Namespace globs: `*` matches any run of characters, `?` any one character.

use std::fmt;
use std::str::FromStr;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Glob(String);

impl Glob {
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// No wildcard: the glob names one namespace.
    pub fn is_literal(&self) -> bool {
        !self.0.contains(['*', '?'])
    }

    /// Only `*`s: the glob selects every namespace.
    pub fn matches_everything(&self) -> bool {
        self.0.chars().all(|c| c == '*')
    }

    pub fn matches(&self, name: &str) -> bool {
        matches(self.0.as_bytes(), name.as_bytes())
    }
}

/// Iterative wildcard matching with single-star backtracking: linear in practice, no recursion.
fn matches(pattern: &[u8], text: &[u8]) -> bool {
    let (mut p, mut t) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        if p < pattern.len() && (pattern[p] == b'?' || pattern[p] == text[t]) {
            p += 1;
            t += 1;
        } else if p < pattern.len() && pattern[p] == b'*' {
            star = Some((p, t));
            p += 1;
        } else if let Some((sp, st)) = star {
            p = sp + 1;
            t = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    pattern[p..].iter().all(|&c| c == b'*')
}

impl FromStr for Glob {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let ok = !s.is_empty()
            && s.len() <= 253
            && s.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "-*?".contains(c));
        ok.then(|| Self(s.to_owned())).ok_or_else(|| {
            "must be a namespace name (a DNS label) or a glob of lowercase letters, digits, '-', '*' and '?'".into()
        })
    }
}

impl fmt::Display for Glob {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_as_a_shell_would() {
        let cases = [
            ("team-*", "team-a", true),
            ("team-*", "team-", true),
            ("team-*", "team", false),
            ("*-prod", "shop-prod", true),
            ("*-prod", "shop-prod-old", false),
            ("t?am", "team", true),
            ("t?am", "tam", false),
            ("*a*b*", "xxaxxbxx", true),
            ("*a*b*", "xxbxxaxx", false),
            ("ops", "ops", true),
            ("ops", "opsx", false),
            ("*", "", true),
            ("a*a*a*a*b", &"a".repeat(60), false),
        ];
        for (glob, name, want) in cases {
            assert_eq!(
                Glob::from_str(glob).unwrap().matches(name),
                want,
                "{glob} ~ {name}"
            );
        }
    }

    #[test]
    fn literal_and_catch_all_globs_are_recognised() {
        assert!(Glob::from_str("ops").unwrap().is_literal());
        assert!(!Glob::from_str("ops-*").unwrap().is_literal());
        assert!(Glob::from_str("**").unwrap().matches_everything());
        assert!(Glob::from_str("Ops").is_err());
        assert!(Glob::from_str("ops/x").is_err());
    }
}
