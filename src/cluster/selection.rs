//! Namespace selection: what to include, what to take out, and the label selector.

use std::fmt;
use std::str::FromStr;

use crate::cluster::names::NamespaceName;
use crate::glob::Glob;

/// Which namespaces a run covers, before the API server's label selector narrows them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Include {
    /// Every namespace the list returns.
    All,
    /// Only these names: no namespace LIST is needed (with no selector).
    Names(Vec<NamespaceName>),
    /// Names and globs, matched against the list.
    Patterns(Vec<Glob>),
}

/// The namespace selection: what to include, what to take out, and the label selector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selection {
    pub include: Include,
    pub exclude: Vec<Glob>,
    pub label_selector: Option<LabelSelector>,
}

impl Selection {
    /// The literal names to visit when no LIST is needed, or None when the run must list.
    pub fn literal_names(&self) -> Option<Vec<&NamespaceName>> {
        match (&self.include, &self.label_selector) {
            (Include::Names(names), None) => Some(
                names
                    .iter()
                    .filter(|n| !self.exclude.iter().any(|g| g.matches(n.as_str())))
                    .collect(),
            ),
            _ => None,
        }
    }

    /// The names given literally, not taken out by an exclusion: each must exist.
    pub fn named(&self) -> Vec<&str> {
        let names: Vec<&str> = match &self.include {
            Include::All => Vec::new(),
            Include::Names(names) => names.iter().map(NamespaceName::as_str).collect(),
            Include::Patterns(globs) => globs
                .iter()
                .filter(|g| g.is_literal())
                .map(Glob::as_str)
                .collect(),
        };
        names
            .into_iter()
            .filter(|n| !self.exclude.iter().any(|g| g.matches(n)))
            .collect()
    }

    /// Whether a namespace the list returned is selected.
    pub fn matches(&self, namespace: &str) -> bool {
        let included = match &self.include {
            Include::All => true,
            Include::Names(names) => names.iter().any(|n| n.as_str() == namespace),
            Include::Patterns(globs) => globs.iter().any(|g| g.matches(namespace)),
        };
        included && !self.exclude.iter().any(|g| g.matches(namespace))
    }
}

/// A label selector, passed to the API server as it is, after a syntax check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabelSelector(String);

impl LabelSelector {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for LabelSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl FromStr for LabelSelector {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let accepted = "must be a label selector like 'team=a,env!=prod,tier in (web,api),!legacy'";
        for requirement in split_requirements(s) {
            if !valid_requirement(requirement.trim()) {
                return Err(format!(
                    "{accepted} ('{}' is not a requirement)",
                    requirement.trim()
                ));
            }
        }
        Ok(Self(s.trim().to_owned()))
    }
}

/// Splits on commas outside parentheses.
fn split_requirements(s: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0usize, 0usize);
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                parts.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&s[start..]);
    parts
}

fn valid_requirement(r: &str) -> bool {
    let is_key = |k: &str| {
        let k = k.trim();
        let name = k.rsplit('/').next().unwrap_or_default();
        !name.is_empty()
            && name.len() <= 63
            && k.chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c))
    };
    let is_value = |v: &str| {
        let v = v.trim();
        v.len() <= 63
            && v.chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
    };
    if let Some(key) = r.strip_prefix('!') {
        return is_key(key);
    }
    for op in ["!=", "==", "="] {
        if let Some((k, v)) = r.split_once(op) {
            return is_key(k) && is_value(v);
        }
    }
    for op in [" notin ", " in "] {
        if let Some((k, set)) = r.split_once(op) {
            let set = set.trim();
            return is_key(k)
                && set.starts_with('(')
                && set.ends_with(')')
                && set[1..set.len() - 1].split(',').all(is_value);
        }
    }
    is_key(r) && !r.is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_selectors_are_checked_for_syntax() {
        for ok in [
            "team=a",
            "team==a,env!=prod",
            "tier in (web,api)",
            "!legacy",
            "app.kubernetes.io/part-of",
            "x notin (a)",
        ] {
            assert!(LabelSelector::from_str(ok).is_ok(), "{ok}");
        }
        for bad in ["team=a b", "tier in web", "=a", "a=(b)"] {
            assert!(LabelSelector::from_str(bad).is_err(), "{bad}");
        }
    }
}
