//! Parsing one variable's value: lists, booleans, numbers, durations and the namespaces. Each parser returns
//! what is accepted as its error, for the caller to put beside the variable's name.

use std::str::FromStr;
use std::time::Duration;

use crate::cluster::names::NamespaceName;
use crate::cluster::selection::Include;
use crate::glob::Glob;

/// Namespaces written at once, at most.
pub(super) const MAX_CONCURRENCY: usize = 1024;

/// A comma-separated list; blanks between commas are ignored, an empty list is refused.
pub(super) fn parse_list<T>(
    value: &str,
    parse: impl Fn(&str) -> Result<T, String>,
) -> Result<Vec<T>, String> {
    let items: Vec<T> = value
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| parse(s).map_err(|e| format!("'{s}' {e}")))
        .collect::<Result<_, _>>()?;
    if items.is_empty() {
        return Err("must hold at least one comma-separated entry".into());
    }
    Ok(items)
}

/// The list without repeats, in order: a name given twice is one thing, done once.
pub(super) fn first_of_each<T: Eq + std::hash::Hash + Clone>(mut items: Vec<T>) -> Vec<T> {
    let mut seen = std::collections::HashSet::new();
    items.retain(|item| seen.insert(item.clone()));
    items
}

/// The spellings of true and false, in any letter case.
const TRUE: [&str; 3] = ["true", "yes", "1"];
const FALSE: [&str; 3] = ["false", "no", "0"];

pub(super) fn parse_bool(s: &str) -> Result<bool, String> {
    let s = s.to_ascii_lowercase();
    if TRUE.contains(&s.as_str()) {
        Ok(true)
    } else if FALSE.contains(&s.as_str()) {
        Ok(false)
    } else {
        // The message is built from the lists, so it names exactly what is accepted.
        Err(format!(
            "must be true or false (also accepted: {} for true, {} for false; any letter case)",
            TRUE[1..].join(", "),
            FALSE[1..].join(", ")
        ))
    }
}

pub(super) fn parse_concurrency(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(n) if (1..=MAX_CONCURRENCY).contains(&n) => Ok(n),
        _ => Err(format!(
            "must be a whole number from 1 to {MAX_CONCURRENCY}"
        )),
    }
}

/// ECR_REFRESH_EVICT_LIMIT: how many pods one run may evict.
pub(super) fn parse_evict_limit(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(n) if (1..=10_000).contains(&n) => Ok(n),
        _ => Err("must be a whole number from 1 to 10000".into()),
    }
}

pub(super) fn parse_timeout(s: &str) -> Result<Duration, String> {
    match humantime::parse_duration(s) {
        Ok(d) if d >= Duration::from_secs(1) => Ok(d),
        _ => Err("must be a duration of at least 1s, like '90s', '5m' or '1h'".into()),
    }
}

/// A positive duration. Above 12h (an ECR token's life) every Secret is due on every run.
pub(super) fn parse_renew_before(s: &str) -> Result<Duration, String> {
    match humantime::parse_duration(s) {
        Ok(d) if !d.is_zero() => Ok(d),
        _ => Err(
            "must be a duration above zero, like '8h' or '90m'; 12h or more renews on every run"
                .into(),
        ),
    }
}

/// ECR_REFRESH_NAMESPACES: `all` (or `*`), or names and globs; literal names only allow the run
/// to skip listing.
pub(super) fn parse_include(value: &str) -> Result<Include, String> {
    if value.trim() == "all" {
        return Ok(Include::All);
    }
    let globs = parse_list(value, Glob::from_str)?;
    if globs.iter().any(|g| g.matches_everything()) {
        return Ok(Include::All);
    }
    if globs.iter().all(Glob::is_literal) {
        let names: Vec<NamespaceName> = globs
            .iter()
            .map(|g| NamespaceName::from_str(g.as_str()).map_err(|e| format!("'{g}' {e}")))
            .collect::<Result<_, _>>()?;
        return Ok(Include::Names(first_of_each(names)));
    }
    Ok(Include::Patterns(globs))
}
