//! The non-apply patch types: JSON patch (RFC 6902), merge patch (RFC 7386) and a
//! strategic merge patch reduced to a recursive merge (every list the fake serves is
//! atomic or replaced whole, as `imagePullSecrets` is).

use serde_json::{Map, Value};

/// Why a JSON patch did not apply. The real server drops this text and answers a
/// generic 422, and so does the fake; the unit tests read it.
#[derive(Debug)]
#[allow(dead_code)]
pub(crate) struct PatchFailed(pub String);

/// A JSON patch document that is not a list of operations (400 on the real server).
#[derive(Debug)]
pub(crate) struct BadPatch(pub String);

pub(crate) fn json_patch(
    doc: &Value,
    patch: &Value,
) -> Result<Result<Value, PatchFailed>, BadPatch> {
    let ops = patch.as_array().ok_or_else(|| {
        BadPatch("json: cannot unmarshal object into Go value of type jsonpatch.Patch".into())
    })?;
    let mut doc = doc.clone();
    for op in ops {
        let kind = op.get("op").and_then(Value::as_str).unwrap_or_default();
        let path = op
            .get("path")
            .and_then(Value::as_str)
            .ok_or_else(|| BadPatch(format!("operation missing path: {op}")))?;
        let value = op.get("value");
        let result = match kind {
            "add" => value
                .ok_or_else(|| BadPatch(format!("add operation missing value: {op}")))
                .map(|v| add(&mut doc, path, v.clone())),
            "remove" => Ok(remove(&mut doc, path).map(drop)),
            "replace" => value
                .ok_or_else(|| BadPatch(format!("replace operation missing value: {op}")))
                .map(|v| replace(&mut doc, path, v.clone())),
            "test" => Ok(test(&doc, path, value.unwrap_or(&Value::Null))),
            "move" | "copy" => {
                let from = op
                    .get("from")
                    .and_then(Value::as_str)
                    .ok_or_else(|| BadPatch(format!("{kind} operation missing from: {op}")))?;
                Ok(move_or_copy(&mut doc, from, path, kind == "move"))
            }
            other => return Err(BadPatch(format!("Unexpected kind: {other}"))),
        }?;
        if let Err(e) = result {
            return Ok(Err(e));
        }
    }
    Ok(Ok(doc))
}

fn segments(path: &str) -> Result<Vec<String>, PatchFailed> {
    if path.is_empty() {
        return Ok(Vec::new());
    }
    let rest = path
        .strip_prefix('/')
        .ok_or_else(|| PatchFailed(format!("invalid path {path:?}")))?;
    Ok(rest
        .split('/')
        .map(|s| s.replace("~1", "/").replace("~0", "~"))
        .collect())
}

fn missing(op: &str, path: &str) -> PatchFailed {
    PatchFailed(format!(
        "{op} operation does not apply: doc is missing path: \"{path}\": missing value"
    ))
}

/// The container holding the last segment of `path`.
fn parent<'a>(
    doc: &'a mut Value,
    segs: &[String],
    op: &str,
    path: &str,
) -> Result<&'a mut Value, PatchFailed> {
    let mut cur = doc;
    for seg in &segs[..segs.len().saturating_sub(1)] {
        cur = match cur {
            Value::Object(m) => m.get_mut(seg),
            Value::Array(a) => seg.parse::<usize>().ok().and_then(|i| a.get_mut(i)),
            _ => None,
        }
        .ok_or_else(|| missing(op, path))?;
    }
    Ok(cur)
}

fn add(doc: &mut Value, path: &str, value: Value) -> Result<(), PatchFailed> {
    let segs = segments(path)?;
    let Some(last) = segs.last().cloned() else {
        *doc = value;
        return Ok(());
    };
    match parent(doc, &segs, "add", path)? {
        Value::Object(m) => {
            m.insert(last, value);
            Ok(())
        }
        Value::Array(a) if last == "-" => {
            a.push(value);
            Ok(())
        }
        Value::Array(a) => match last.parse::<usize>() {
            Ok(i) if i <= a.len() => {
                a.insert(i, value);
                Ok(())
            }
            _ => Err(PatchFailed(format!(
                "add operation does not apply: index out of bounds: {path}"
            ))),
        },
        _ => Err(missing("add", path)),
    }
}

fn remove(doc: &mut Value, path: &str) -> Result<Value, PatchFailed> {
    let segs = segments(path)?;
    let last = segs
        .last()
        .cloned()
        .ok_or_else(|| missing("remove", path))?;
    match parent(doc, &segs, "remove", path)? {
        Value::Object(m) => m.shift_remove(&last).ok_or_else(|| missing("remove", path)),
        Value::Array(a) => match last.parse::<usize>() {
            Ok(i) if i < a.len() => Ok(a.remove(i)),
            _ => Err(missing("remove", path)),
        },
        _ => Err(missing("remove", path)),
    }
}

fn replace(doc: &mut Value, path: &str, value: Value) -> Result<(), PatchFailed> {
    let segs = segments(path)?;
    let Some(last) = segs.last().cloned() else {
        *doc = value;
        return Ok(());
    };
    let slot = match parent(doc, &segs, "replace", path)? {
        Value::Object(m) => m.get_mut(&last),
        Value::Array(a) => last.parse::<usize>().ok().and_then(|i| a.get_mut(i)),
        _ => None,
    };
    let slot = slot.ok_or_else(|| missing("replace", path))?;
    *slot = value;
    Ok(())
}

fn get<'a>(doc: &'a Value, path: &str) -> Result<Option<&'a Value>, PatchFailed> {
    let segs = segments(path)?;
    let mut cur = doc;
    for seg in &segs {
        let next = match cur {
            Value::Object(m) => m.get(seg),
            Value::Array(a) => seg.parse::<usize>().ok().and_then(|i| a.get(i)),
            _ => None,
        };
        match next {
            Some(v) => cur = v,
            None => return Ok(None),
        }
    }
    Ok(Some(cur))
}

fn test(doc: &Value, path: &str, expected: &Value) -> Result<(), PatchFailed> {
    match get(doc, path)? {
        Some(v) if v == expected => Ok(()),
        None if expected.is_null() => Ok(()),
        Some(_) => Err(PatchFailed(format!(
            "testing value {path} failed: test failed"
        ))),
        None => Err(PatchFailed(format!(
            "test operation does not apply: doc is missing path: \"{path}\": missing value"
        ))),
    }
}

fn move_or_copy(doc: &mut Value, from: &str, path: &str, is_move: bool) -> Result<(), PatchFailed> {
    let value = if is_move {
        remove(doc, from)?
    } else {
        get(doc, from)?
            .cloned()
            .ok_or_else(|| missing("copy", from))?
    };
    add(doc, path, value)
}

/// RFC 7386: objects merge recursively, `null` deletes, anything else replaces.
pub(crate) fn merge_patch(doc: &Value, patch: &Value) -> Value {
    let Value::Object(patch_map) = patch else {
        return patch.clone();
    };
    let mut out = match doc {
        Value::Object(m) => m.clone(),
        _ => Map::new(),
    };
    for (key, value) in patch_map {
        if value.is_null() {
            out.shift_remove(key);
        } else {
            let merged = merge_patch(out.get(key).unwrap_or(&Value::Null), value);
            out.insert(key.clone(), merged);
        }
    }
    Value::Object(out)
}

/// A strategic merge patch without list merging: a merge patch that ignores the
/// `$patch`/`$retainKeys`/`$setElementOrder` directives.
pub(crate) fn strategic_merge_patch(doc: &Value, patch: &Value) -> Value {
    merge_patch(doc, &strip_directives(patch))
}

fn strip_directives(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| !k.starts_with('$'))
                .map(|(k, v)| (k.clone(), strip_directives(v)))
                .collect(),
        ),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn add_appends_with_dash_and_unescapes() {
        let doc = json!({"a":[1],"b/c":{}});
        let patch = json!([
            {"op":"add","path":"/a/-","value":2},
            {"op":"add","path":"/b~1c/x~0y","value":true}
        ]);
        let out = json_patch(&doc, &patch).unwrap().unwrap();
        assert_eq!(out, json!({"a":[1,2],"b/c":{"x~y":true}}));
    }

    #[test]
    fn append_to_a_missing_list_fails() {
        let patch = json!([{"op":"add","path":"/imagePullSecrets/-","value":{"name":"x"}}]);
        assert!(json_patch(&json!({}), &patch).unwrap().is_err());
    }

    #[test]
    fn failed_test_stops_the_patch() {
        let doc = json!({"metadata":{"resourceVersion":"5"}});
        let patch = json!([
            {"op":"test","path":"/metadata/resourceVersion","value":"4"},
            {"op":"remove","path":"/metadata"}
        ]);
        let err = json_patch(&doc, &patch).unwrap().unwrap_err();
        assert_eq!(
            err.0,
            "testing value /metadata/resourceVersion failed: test failed"
        );
    }

    #[test]
    fn merge_patch_deletes_with_null() {
        let out = merge_patch(
            &json!({"a":{"b":1,"c":2},"l":[1]}),
            &json!({"a":{"b":null},"l":[2]}),
        );
        assert_eq!(out, json!({"a":{"c":2},"l":[2]}));
    }
}
