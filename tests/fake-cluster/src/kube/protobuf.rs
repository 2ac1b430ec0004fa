//! Just enough of the API server's protobuf encoding to read what kubectl sends.
//!
//! kubectl's typed clients (`kubectl create namespace`, `kubectl create secret ...` without
//! `--dry-run=client`) POST `application/vnd.kubernetes.protobuf`, not JSON, and a real
//! kube-apiserver accepts it. The body is the envelope of k8s.io/apimachinery's
//! runtime/serializer/protobuf: the magic `k8s\0`, then a `runtime.Unknown` message
//! (1: typeMeta {1: apiVersion, 2: kind}, 2: raw, 3: contentEncoding, 4: contentType) whose
//! `raw` is the object's own message, field numbers as in k8s.io/api/core/v1/generated.proto
//! and k8s.io/apimachinery/pkg/apis/meta/v1/generated.proto. Namespace and Secret are read
//! into the JSON the rest of the fake works on; other kinds, and ObjectMeta fields a create
//! does not carry (uid, resourceVersion, timestamps, ownerReferences, managedFields), are
//! refused or ignored: the fake answers such a body 415 rather than guess.

use base64::Engine as _;
use serde_json::{Map, Value, json};

/// The four bytes every protobuf body starts with.
const MAGIC: &[u8] = b"k8s\0";

/// The body as the JSON object it encodes, or why it can't be read.
pub(crate) fn decode(body: &[u8]) -> Result<Value, String> {
    let unknown = body
        .strip_prefix(MAGIC)
        .ok_or("the body does not start with the protobuf magic k8s\\0")?;
    let (mut api_version, mut kind, mut raw) = (String::new(), String::new(), &[][..]);
    for field in fields(unknown)? {
        match field {
            (1, Wire::Bytes(type_meta)) => {
                for f in fields(type_meta)? {
                    match f {
                        (1, Wire::Bytes(b)) => api_version = text(b)?,
                        (2, Wire::Bytes(b)) => kind = text(b)?,
                        _ => {}
                    }
                }
            }
            (2, Wire::Bytes(b)) => raw = b,
            (3, Wire::Bytes(b)) if !b.is_empty() => {
                return Err(format!("contentEncoding {:?} is not read", text(b)?));
            }
            _ => {}
        }
    }
    let mut object = match (api_version.as_str(), kind.as_str()) {
        ("v1", "Namespace") => namespace(raw)?,
        ("v1", "Secret") => secret(raw)?,
        _ => return Err(format!("{api_version}/{kind} in protobuf is not read")),
    };
    object.insert("apiVersion".into(), api_version.into());
    object.insert("kind".into(), kind.into());
    Ok(Value::Object(object))
}

fn namespace(raw: &[u8]) -> Result<Map<String, Value>, String> {
    let mut object = Map::new();
    for field in fields(raw)? {
        match field {
            (1, Wire::Bytes(b)) => {
                object.insert("metadata".into(), object_meta(b)?);
            }
            (2, Wire::Bytes(b)) => {
                let mut finalizers = Vec::new();
                for f in fields(b)? {
                    if let (1, Wire::Bytes(s)) = f {
                        finalizers.push(Value::from(text(s)?));
                    }
                }
                if !finalizers.is_empty() {
                    object.insert("spec".into(), json!({ "finalizers": finalizers }));
                }
            }
            _ => {}
        }
    }
    Ok(object)
}

fn secret(raw: &[u8]) -> Result<Map<String, Value>, String> {
    let b64 = base64::engine::general_purpose::STANDARD;
    let mut object = Map::new();
    let (mut data, mut string_data) = (Map::new(), Map::new());
    for field in fields(raw)? {
        match field {
            (1, Wire::Bytes(b)) => {
                object.insert("metadata".into(), object_meta(b)?);
            }
            (2, Wire::Bytes(b)) => {
                let (k, v) = entry(b)?;
                data.insert(text(k)?, b64.encode(v).into());
            }
            (3, Wire::Bytes(b)) => set(&mut object, "type", b)?,
            (4, Wire::Bytes(b)) => {
                let (k, v) = entry(b)?;
                string_data.insert(text(k)?, text(v)?.into());
            }
            (5, Wire::Varint(v)) => {
                object.insert("immutable".into(), (v != 0).into());
            }
            _ => {}
        }
    }
    if !data.is_empty() {
        object.insert("data".into(), data.into());
    }
    if !string_data.is_empty() {
        object.insert("stringData".into(), string_data.into());
    }
    Ok(object)
}

/// ObjectMeta's fields a create request carries: name, generateName, namespace, labels,
/// annotations, finalizers. Go's protobuf writes every string field, empty ones too, where its
/// JSON leaves them out (`omitempty`): an empty string here is a field not set.
fn object_meta(raw: &[u8]) -> Result<Value, String> {
    let mut meta = Map::new();
    let (mut labels, mut annotations, mut finalizers) = (Map::new(), Map::new(), Vec::new());
    for field in fields(raw)? {
        match field {
            (1, Wire::Bytes(b)) => {
                set(&mut meta, "name", b)?;
            }
            (2, Wire::Bytes(b)) => {
                set(&mut meta, "generateName", b)?;
            }
            (3, Wire::Bytes(b)) => {
                set(&mut meta, "namespace", b)?;
            }
            (11, Wire::Bytes(b)) => {
                let (k, v) = entry(b)?;
                labels.insert(text(k)?, text(v)?.into());
            }
            (12, Wire::Bytes(b)) => {
                let (k, v) = entry(b)?;
                annotations.insert(text(k)?, text(v)?.into());
            }
            (14, Wire::Bytes(b)) => finalizers.push(Value::from(text(b)?)),
            _ => {}
        }
    }
    for (key, value) in [
        ("labels", Value::Object(labels)),
        ("annotations", Value::Object(annotations)),
        ("finalizers", Value::Array(finalizers)),
    ] {
        if value.as_object().is_some_and(|m| !m.is_empty())
            || value.as_array().is_some_and(|a| !a.is_empty())
        {
            meta.insert(key.into(), value);
        }
    }
    Ok(Value::Object(meta))
}

/// One value of a protobuf field.
#[derive(Debug, PartialEq)]
enum Wire<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
    /// Fixed 32- or 64-bit: skipped, nothing read here uses them.
    Fixed,
}

/// A message's fields in order, as (field number, value).
fn fields(mut buf: &[u8]) -> Result<Vec<(u64, Wire<'_>)>, String> {
    let mut out = Vec::new();
    while !buf.is_empty() {
        let key = varint(&mut buf)?;
        let value = match key & 7 {
            0 => Wire::Varint(varint(&mut buf)?),
            1 | 5 => {
                let n = if key & 7 == 1 { 8 } else { 4 };
                buf = buf
                    .get(n..)
                    .ok_or("a fixed-width field runs past the end")?;
                Wire::Fixed
            }
            2 => {
                let len = usize::try_from(varint(&mut buf)?).map_err(|e| e.to_string())?;
                let (bytes, rest) = buf
                    .split_at_checked(len)
                    .ok_or("a length-delimited field runs past the end")?;
                buf = rest;
                Wire::Bytes(bytes)
            }
            other => return Err(format!("wire type {other} is not read")),
        };
        out.push((key >> 3, value));
    }
    Ok(out)
}

fn varint(buf: &mut &[u8]) -> Result<u64, String> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let (&byte, rest) = buf.split_first().ok_or("a varint runs past the end")?;
        *buf = rest;
        value |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Ok(value);
        }
    }
    Err("a varint longer than 64 bits".into())
}

/// A map entry: 1 key, 2 value.
fn entry(raw: &[u8]) -> Result<(&[u8], &[u8]), String> {
    let (mut key, mut value) = (&[][..], &[][..]);
    for field in fields(raw)? {
        match field {
            (1, Wire::Bytes(b)) => key = b,
            (2, Wire::Bytes(b)) => value = b,
            _ => {}
        }
    }
    Ok((key, value))
}

/// A string field, left out when empty.
fn set(object: &mut Map<String, Value>, key: &str, bytes: &[u8]) -> Result<(), String> {
    if !bytes.is_empty() {
        object.insert(key.into(), text(bytes)?.into());
    }
    Ok(())
}

fn text(bytes: &[u8]) -> Result<String, String> {
    String::from_utf8(bytes.to_vec()).map_err(|_| "a string field is not UTF-8".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes_field(number: u64, bytes: &[u8]) -> Vec<u8> {
        let mut out = vec![(number << 3 | 2) as u8, bytes.len() as u8];
        out.extend_from_slice(bytes);
        out
    }

    fn envelope(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
        let type_meta = [
            bytes_field(1, api_version.as_bytes()),
            bytes_field(2, kind.as_bytes()),
        ]
        .concat();
        let unknown = [bytes_field(1, &type_meta), bytes_field(2, raw)].concat();
        [MAGIC, &unknown].concat()
    }

    #[test]
    fn a_namespace_with_a_label_reads_as_its_json() {
        let label = [bytes_field(1, b"team"), bytes_field(2, b"a")].concat();
        let meta = [
            bytes_field(1, b"team-a"),
            bytes_field(2, b""),
            bytes_field(11, &label),
        ]
        .concat();
        let body = envelope("v1", "Namespace", &bytes_field(1, &meta));
        assert_eq!(
            decode(&body).unwrap(),
            json!({
                "metadata": { "name": "team-a", "labels": { "team": "a" } },
                "apiVersion": "v1",
                "kind": "Namespace",
            })
        );
    }

    #[test]
    fn a_secret_reads_with_its_data_in_base64() {
        let meta = [bytes_field(1, b"s"), bytes_field(3, b"team-a")].concat();
        let data = [bytes_field(1, b"k"), bytes_field(2, b"\x00v")].concat();
        let raw = [
            bytes_field(1, &meta),
            bytes_field(2, &data),
            bytes_field(3, b"Opaque"),
        ]
        .concat();
        let body = envelope("v1", "Secret", &raw);
        let secret = decode(&body).unwrap();
        assert_eq!(secret["data"]["k"], "AHY=");
        assert_eq!(secret["type"], "Opaque");
        assert_eq!(secret["metadata"]["namespace"], "team-a");
    }

    #[test]
    fn other_kinds_and_broken_bodies_are_refused() {
        for (body, why) in [
            (envelope("v1", "Pod", &[]), "v1/Pod"),
            (b"{}".to_vec(), "magic"),
            ([MAGIC, &[0x0a, 0x05, 0x01]].concat(), "past the end"),
        ] {
            let error = decode(&body).unwrap_err();
            assert!(error.contains(why), "{error}");
        }
    }
}
