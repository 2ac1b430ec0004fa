//! Field ownership (managedFields) and server-side apply, at the granularity the
//! real schemas give the fields ecr-refresh touches: one field per key of
//! `data`/`stringData`/`binaryData`, of `metadata.labels` and of `metadata.annotations`;
//! every other top-level field (`type`, `immutable`, `imagePullSecrets`, `secrets`,
//! `automountServiceAccountToken`, `spec`, ...) is one atomic field.

use std::collections::BTreeSet;

use serde_json::{Map, Value, json};

/// A field, as the segments of its path (`["data", ".dockerconfigjson"]`).
pub(crate) type FieldPath = Vec<String>;
pub(crate) type FieldSet = BTreeSet<FieldPath>;

/// Maps whose keys are owned one by one.
const GRANULAR_TOP: &[&str] = &["data", "stringData", "binaryData"];
const GRANULAR_META: &[&str] = &["labels", "annotations"];
/// Metadata fields that are owned as a whole.
const ATOMIC_META: &[&str] = &["finalizers", "ownerReferences"];
/// Top-level keys that are never owned.
const UNOWNED_TOP: &[&str] = &["apiVersion", "kind", "metadata", "status"];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Operation {
    Apply,
    Update,
}

/// One managedFields entry.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ManagerEntry {
    pub manager: String,
    pub operation: Operation,
    pub time: String,
    pub fields: FieldSet,
}

impl ManagerEntry {
    fn is(&self, manager: &str, operation: Operation) -> bool {
        self.manager == manager && self.operation == operation
    }

    /// How a conflict names this manager (apiserver's `printManager`, without the time,
    /// which the manager identifier never carries).
    pub(super) fn conflict_name(&self) -> String {
        match self.operation {
            Operation::Apply => json!(self.manager).to_string(),
            Operation::Update => format!("{} using v1", json!(self.manager)),
        }
    }

    pub(super) fn to_json(&self) -> Value {
        json!({
            "manager": self.manager,
            "operation": match self.operation {
                Operation::Apply => "Apply",
                Operation::Update => "Update",
            },
            "apiVersion": "v1",
            "time": self.time,
            "fieldsType": "FieldsV1",
            "fieldsV1": render(&self.fields),
        })
    }
}

/// Every owned field present in `obj`.
pub(crate) fn fields_of(obj: &Value) -> FieldSet {
    let mut set = FieldSet::new();
    let Some(top) = obj.as_object() else {
        return set;
    };
    for (key, value) in top {
        if UNOWNED_TOP.contains(&key.as_str()) || value.is_null() {
            continue;
        }
        match value.as_object() {
            Some(map) if GRANULAR_TOP.contains(&key.as_str()) => {
                for (sub, v) in map {
                    if !v.is_null() {
                        set.insert(vec![key.clone(), sub.clone()]);
                    }
                }
            }
            _ => {
                set.insert(vec![key.clone()]);
            }
        }
    }
    if let Some(meta) = obj.get("metadata").and_then(Value::as_object) {
        for (key, value) in meta {
            if value.is_null() {
                continue;
            }
            if GRANULAR_META.contains(&key.as_str()) {
                for (sub, v) in value.as_object().into_iter().flatten() {
                    if !v.is_null() {
                        set.insert(vec!["metadata".into(), key.clone(), sub.clone()]);
                    }
                }
            } else if ATOMIC_META.contains(&key.as_str()) {
                set.insert(vec!["metadata".into(), key.clone()]);
            }
        }
    }
    set
}

pub(crate) fn value_at<'a>(obj: &'a Value, path: &[String]) -> Option<&'a Value> {
    path.iter()
        .try_fold(obj, |v, seg| v.get(seg.as_str()))
        .filter(|v| !v.is_null())
}

pub(crate) fn set_at(obj: &mut Value, path: &[String], value: Value) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut cur = obj;
    for seg in parents {
        if !cur.is_object() {
            *cur = Value::Object(Map::new());
        }
        let map = cur.as_object_mut().expect("made an object just above");
        cur = map
            .entry(seg.clone())
            .or_insert_with(|| Value::Object(Map::new()));
        if !cur.is_object() {
            *cur = Value::Object(Map::new());
        }
    }
    if let Some(map) = cur.as_object_mut() {
        map.insert(last.clone(), value);
    }
}

/// Removes the field, and the map holding it when that map is left empty.
pub(crate) fn remove_at(obj: &mut Value, path: &[String]) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut cur = &mut *obj;
    for seg in parents {
        match cur.get_mut(seg.as_str()) {
            Some(next) => cur = next,
            None => return,
        }
    }
    let now_empty = match cur.as_object_mut() {
        Some(map) => {
            map.remove(last);
            map.is_empty()
        }
        None => false,
    };
    if now_empty && !parents.is_empty() && parents != ["metadata"] {
        remove_at(obj, parents);
    }
}

/// `.data..dockerconfigjson`, as structured-merge-diff prints paths.
pub(crate) fn path_string(path: &[String]) -> String {
    path.iter().map(|seg| format!(".{seg}")).collect()
}

/// A fieldsV1 document (`{"f:data":{"f:key":{}}}`).
pub(crate) fn render(set: &FieldSet) -> Value {
    let mut root = Value::Object(Map::new());
    for path in set {
        let prefixed: Vec<String> = path.iter().map(|s| format!("f:{s}")).collect();
        set_at(&mut root, &prefixed, json!({}));
    }
    root
}

/// The order structured-merge-diff's `Set.Iterate` visits paths in: at each level the
/// fields that end there (members) before those that go deeper (children), each by name.
/// So `.type` comes before `.data.x` (seen on kube-apiserver v1.37.2, CONFORMANCE.md).
fn set_order(a: &[String], b: &[String]) -> std::cmp::Ordering {
    match (a, b) {
        ([], []) => std::cmp::Ordering::Equal,
        ([], _) => std::cmp::Ordering::Less,
        (_, []) => std::cmp::Ordering::Greater,
        ([x], [y]) => x.cmp(y),
        ([_], _) => std::cmp::Ordering::Less,
        (_, [_]) => std::cmp::Ordering::Greater,
        ([x, xs @ ..], [y, ys @ ..]) => x.cmp(y).then_with(|| set_order(xs, ys)),
    }
}

/// One field another manager owns with a different value than the apply sets.
#[derive(Debug, Clone)]
pub(crate) struct Conflict {
    pub manager: String,
    pub path: FieldPath,
}

/// `Apply failed with N conflict(s): ...`, as apiserver's `getConflictMessage`.
pub(crate) fn conflict_message(conflicts: &[Conflict]) -> String {
    if let [only] = conflicts {
        return format!(
            "Apply failed with 1 conflict: conflict with {}: {}",
            only.manager,
            path_string(&only.path)
        );
    }
    let managers: BTreeSet<&str> = conflicts.iter().map(|c| c.manager.as_str()).collect();
    let mut lines = Vec::new();
    for manager in managers {
        lines.push(format!("conflicts with {manager}:"));
        for c in conflicts.iter().filter(|c| c.manager == manager) {
            lines.push(format!("- {}", path_string(&c.path)));
        }
    }
    format!(
        "Apply failed with {} conflicts: {}",
        conflicts.len(),
        lines.join("\n")
    )
}

/// The result of merging an applied configuration into the live object.
pub(crate) struct Applied {
    pub obj: Value,
    pub managers: Vec<ManagerEntry>,
}

/// Server-side apply of `config` by `manager` onto `live` (owned as `managers`).
pub(crate) fn apply(
    live: &Value,
    managers: &[ManagerEntry],
    config: &Value,
    manager: &str,
    force: bool,
    now: &str,
) -> Result<Applied, Vec<Conflict>> {
    let applied = fields_of(config);
    fn others<'a>(
        managers: &'a [ManagerEntry],
        manager: &'a str,
        path: &'a FieldPath,
    ) -> impl Iterator<Item = &'a ManagerEntry> {
        managers
            .iter()
            .filter(move |m| !m.is(manager, Operation::Apply) && m.fields.contains(path))
    }

    let changed: Vec<&FieldPath> = applied
        .iter()
        .filter(|p| {
            let live_value = value_at(live, p);
            live_value.is_some() && live_value != value_at(config, p)
        })
        .collect();
    let mut conflicts: Vec<Conflict> = changed
        .iter()
        .flat_map(|p| {
            others(managers, manager, p).map(|m| Conflict {
                manager: m.conflict_name(),
                path: (*p).clone(),
            })
        })
        .collect();
    conflicts.sort_by(|a, b| {
        a.manager
            .cmp(&b.manager)
            .then_with(|| set_order(&a.path, &b.path))
    });
    if !conflicts.is_empty() && !force {
        return Err(conflicts);
    }

    let previous: FieldSet = managers
        .iter()
        .find(|m| m.is(manager, Operation::Apply))
        .map(|m| m.fields.clone())
        .unwrap_or_default();
    let mut obj = live.clone();
    for path in previous.difference(&applied) {
        if others(managers, manager, path).next().is_none() {
            remove_at(&mut obj, path);
        }
    }
    for path in &applied {
        if let Some(v) = value_at(config, path) {
            set_at(&mut obj, path, v.clone());
        }
    }

    let mut out: Vec<ManagerEntry> = managers.to_vec();
    for entry in out.iter_mut() {
        if !entry.is(manager, Operation::Apply) {
            for path in &changed {
                entry.fields.remove(*path);
            }
        }
    }
    match out.iter_mut().find(|m| m.is(manager, Operation::Apply)) {
        Some(entry) => {
            if entry.fields != applied {
                entry.time = now.to_owned();
            }
            entry.fields = applied;
        }
        None => out.push(ManagerEntry {
            manager: manager.to_owned(),
            operation: Operation::Apply,
            time: now.to_owned(),
            fields: applied,
        }),
    }
    out.retain(|m| !m.fields.is_empty());
    Ok(Applied { obj, managers: out })
}

/// Ownership after a non-apply write of `new` over `old` by `manager`: the writer owns
/// what it changed or added; removed fields are owned by nobody.
pub(crate) fn update_ownership(
    old: Option<&Value>,
    new: &Value,
    managers: &[ManagerEntry],
    manager: &str,
    now: &str,
) -> Vec<ManagerEntry> {
    let new_fields = fields_of(new);
    let old_fields = old.map(fields_of).unwrap_or_default();
    let changed: FieldSet = new_fields
        .iter()
        .filter(|p| old.and_then(|o| value_at(o, p)) != value_at(new, p))
        .cloned()
        .collect();
    let mut out: Vec<ManagerEntry> = managers.to_vec();
    for entry in out.iter_mut() {
        entry
            .fields
            .retain(|p| new_fields.contains(p) || !old_fields.contains(p));
        if !entry.is(manager, Operation::Update) {
            entry.fields.retain(|p| !changed.contains(p));
        }
    }
    if !changed.is_empty() {
        match out.iter_mut().find(|m| m.is(manager, Operation::Update)) {
            Some(entry) => {
                entry.fields.extend(changed);
                entry.time = now.to_owned();
            }
            None => out.push(ManagerEntry {
                manager: manager.to_owned(),
                operation: Operation::Update,
                time: now.to_owned(),
                fields: changed,
            }),
        }
    }
    out.retain(|m| !m.fields.is_empty());
    out
}

/// True when two ownership lists differ in more than their timestamps.
pub(crate) fn same_ownership(a: &[ManagerEntry], b: &[ManagerEntry]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| {
            x.manager == y.manager && x.operation == y.operation && x.fields == y.fields
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &[&str]) -> FieldPath {
        s.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn fields_are_per_key_for_data_labels_and_annotations() {
        let obj = json!({"apiVersion":"v1","kind":"Secret","type":"Opaque",
            "metadata":{"name":"s","labels":{"a":"1"},"annotations":{"b":"2"}},
            "data":{"x":"eA==","y":"eQ=="}});
        let f = fields_of(&obj);
        assert!(f.contains(&p(&["data", "x"])));
        assert!(f.contains(&p(&["metadata", "labels", "a"])));
        assert!(f.contains(&p(&["metadata", "annotations", "b"])));
        assert!(f.contains(&p(&["type"])));
        assert_eq!(f.len(), 5);
    }

    #[test]
    fn render_prefixes_every_segment() {
        let set: FieldSet = [p(&["data", ".dockerconfigjson"]), p(&["type"])].into();
        assert_eq!(
            render(&set),
            json!({"f:data":{"f:.dockerconfigjson":{}},"f:type":{}})
        );
    }

    #[test]
    fn conflict_messages_match_the_apiserver() {
        let one = [Conflict {
            manager: "\"kubectl-create\" using v1".into(),
            path: p(&["type"]),
        }];
        assert_eq!(
            conflict_message(&one),
            "Apply failed with 1 conflict: conflict with \"kubectl-create\" using v1: .type"
        );
        let two = [
            Conflict {
                manager: "\"b\"".into(),
                path: p(&["data", "x"]),
            },
            Conflict {
                manager: "\"a\"".into(),
                path: p(&["type"]),
            },
        ];
        assert_eq!(
            conflict_message(&two),
            "Apply failed with 2 conflicts: conflicts with \"a\":\n- .type\nconflicts with \"b\":\n- .data.x"
        );
    }
}
