//! Label selectors (`a=b`, `a==b`, `a!=b`, `a`, `!a`, `a in (x,y)`, `a notin (x)`;
//! a comma is AND) and the `metadata.name`/`metadata.namespace` field selectors.

use serde_json::Value;

use super::{Resource, pods};

#[derive(Debug, Clone, PartialEq)]
enum Requirement {
    Equals(String, String),
    NotEquals(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    DoesNotExist(String),
}

/// A parsed label selector; the empty one matches everything.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct LabelSelector(Vec<Requirement>);

/// Splits on commas outside parentheses.
fn split_terms(s: &str) -> Vec<&str> {
    let mut terms = Vec::new();
    let (mut depth, mut start) = (0usize, 0usize);
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                terms.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    terms.push(&s[start..]);
    terms
}

fn valid_key(k: &str) -> bool {
    !k.is_empty()
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'))
}

fn set_values(rest: &str) -> Option<Vec<String>> {
    let inner = rest.trim().strip_prefix('(')?.strip_suffix(')')?;
    Some(
        inner
            .split(',')
            .map(|v| v.trim().to_owned())
            .filter(|v| !v.is_empty())
            .collect(),
    )
}

impl LabelSelector {
    pub(super) fn parse(s: &str) -> Result<Self, String> {
        let mut reqs = Vec::new();
        if s.trim().is_empty() {
            return Ok(LabelSelector(reqs));
        }
        for term in split_terms(s) {
            let term = term.trim();
            let bad =
                || format!("unable to parse requirement: found '{term}', expected: identifier");
            let req = if let Some(key) = term.strip_prefix('!') {
                Requirement::DoesNotExist(key.trim().to_owned())
            } else if let Some((k, v)) = term.split_once("!=") {
                Requirement::NotEquals(k.trim().to_owned(), v.trim().to_owned())
            } else if let Some((k, v)) = term.split_once("==") {
                Requirement::Equals(k.trim().to_owned(), v.trim().to_owned())
            } else if let Some((k, v)) = term.split_once('=') {
                Requirement::Equals(k.trim().to_owned(), v.trim().to_owned())
            } else if let Some((k, rest)) = term.split_once(" notin ") {
                Requirement::NotIn(k.trim().to_owned(), set_values(rest).ok_or_else(bad)?)
            } else if let Some((k, rest)) = term.split_once(" in ") {
                Requirement::In(k.trim().to_owned(), set_values(rest).ok_or_else(bad)?)
            } else {
                Requirement::Exists(term.to_owned())
            };
            let key = match &req {
                Requirement::Equals(k, _)
                | Requirement::NotEquals(k, _)
                | Requirement::In(k, _)
                | Requirement::NotIn(k, _)
                | Requirement::Exists(k)
                | Requirement::DoesNotExist(k) => k,
            };
            if !valid_key(key) {
                return Err(bad());
            }
            reqs.push(req);
        }
        Ok(LabelSelector(reqs))
    }

    pub(super) fn matches(&self, obj: &Value) -> bool {
        let labels = &obj["metadata"]["labels"];
        let get = |k: &str| labels.get(k).and_then(Value::as_str);
        self.0.iter().all(|r| match r {
            Requirement::Equals(k, v) => get(k) == Some(v),
            Requirement::NotEquals(k, v) => get(k) != Some(v),
            Requirement::In(k, vs) => get(k).is_some_and(|x| vs.iter().any(|v| v == x)),
            Requirement::NotIn(k, vs) => get(k).is_none_or(|x| vs.iter().all(|v| v != x)),
            Requirement::Exists(k) => get(k).is_some(),
            Requirement::DoesNotExist(k) => get(k).is_none(),
        })
    }
}

/// A field selector over `metadata.name`, `metadata.namespace` and, for pods, the fields the
/// real server makes selectable (pods.rs); `=`, `==`, `!=`, a comma is AND.
#[derive(Debug, Clone, Default)]
pub(crate) struct FieldSelector(Vec<(String, bool, String)>);

impl FieldSelector {
    pub(super) fn parse(s: &str, resource: Resource) -> Result<Self, String> {
        let mut out = Vec::new();
        for term in s.split(',').map(str::trim).filter(|t| !t.is_empty()) {
            let (field, equal, value) = if let Some((f, v)) = term.split_once("!=") {
                (f, false, v)
            } else if let Some((f, v)) = term.split_once("==") {
                (f, true, v)
            } else if let Some((f, v)) = term.split_once('=') {
                (f, true, v)
            } else {
                return Err(format!(
                    "invalid selector: '{s}'; can't understand '{term}'"
                ));
            };
            let field = field.trim();
            let supported = field == "metadata.name"
                || field == "metadata.namespace"
                || (resource == Resource::Pods && pods::SELECTABLE.contains(&field));
            if !supported {
                return Err(format!("field label not supported: {field}"));
            }
            out.push((field.to_owned(), equal, value.trim().to_owned()));
        }
        Ok(FieldSelector(out))
    }

    /// The name a `metadata.name=` (or `==`) term requires, as Go's `RequiresExactMatch`
    /// finds it in a selector's text; None when the text does not parse or has no such term.
    pub(super) fn exact_name(s: &str) -> Option<&str> {
        s.split(',').map(str::trim).find_map(|term| {
            let (field, value) = term
                .split_once("==")
                .or_else(|| term.split_once('=').filter(|(f, _)| !f.ends_with('!')))?;
            (field.trim() == "metadata.name").then(|| value.trim())
        })
    }

    pub(super) fn matches(&self, obj: &Value) -> bool {
        self.0.iter().all(|(field, equal, value)| {
            let actual = match field.strip_prefix("metadata.") {
                Some(key) => obj["metadata"][key].as_str().unwrap_or_default().to_owned(),
                None => pods::selectable(obj, field),
            };
            (actual == *value) == *equal
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_operator_matches_as_the_apiserver() {
        let obj = json!({"metadata":{"labels":{"env":"prod","team":"a"}}});
        let cases = [
            ("env=prod", true),
            ("env==prod", true),
            ("env!=prod", false),
            ("env", true),
            ("!env", false),
            ("!missing", true),
            ("env in (dev,prod)", true),
            ("env notin (prod)", false),
            ("missing notin (x)", true),
            ("env=prod,team=b", false),
            ("env=prod,team in (a, b)", true),
            ("", true),
        ];
        for (sel, want) in cases {
            assert_eq!(
                LabelSelector::parse(sel).unwrap().matches(&obj),
                want,
                "{sel}"
            );
        }
    }

    #[test]
    fn pods_select_by_phase_and_other_kinds_refuse_it() {
        let pending = json!({"metadata":{"name":"p"},"status":{"phase":"Pending"}});
        let sel = FieldSelector::parse(
            "status.phase!=Succeeded,status.phase!=Failed",
            Resource::Pods,
        )
        .unwrap();
        assert!(sel.matches(&pending));
        let sel = FieldSelector::parse("status.phase=Running", Resource::Pods).unwrap();
        assert!(!sel.matches(&pending));
        assert_eq!(
            FieldSelector::parse("status.phase=Running", Resource::Secrets).unwrap_err(),
            "field label not supported: status.phase"
        );
        assert_eq!(
            FieldSelector::parse("status.hostIP=1.2.3.4", Resource::Pods).unwrap_err(),
            "field label not supported: status.hostIP"
        );
    }

    #[test]
    fn garbage_is_refused() {
        assert!(LabelSelector::parse("a in x").is_err());
        assert!(LabelSelector::parse("a b").is_err());
    }
}
