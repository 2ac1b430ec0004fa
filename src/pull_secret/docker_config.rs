//! The `.dockerconfigjson` value: built from fresh tokens, merged into what a Secret holds.
//!
//! Pure functions. Entries for registries we do not manage are kept byte for byte; entries we
//! wrote for registries no longer configured are dropped; ours are written fresh.

use std::collections::HashSet;
use std::fmt;

use base64::Engine as _;
use secrecy::{ExposeSecret, SecretString};
use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;

use crate::aws::ecr::Credential;
use crate::aws::registry::normalize;

/// The merged `.dockerconfigjson` bytes. They hold passwords: `Debug` does not print them.
pub struct DockerConfigJson {
    bytes: Vec<u8>,
    /// `auths` keys kept from the Secret, as they were.
    pub kept: Vec<String>,
    /// `auths` keys we had written for registries no longer configured.
    pub dropped: Vec<String>,
}

impl DockerConfigJson {
    pub fn into_bytes(self) -> Vec<u8> {
        self.bytes
    }
}

impl fmt::Debug for DockerConfigJson {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DockerConfigJson")
            .field("bytes", &"[redacted]")
            .field("kept", &self.kept)
            .field("dropped", &self.dropped)
            .finish()
    }
}

/// Why a value can't be used, in words ("is not JSON", "`auths` is a string, not an object"),
/// never quoting it: it holds someone's credentials.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("its .dockerconfigjson{0}")]
pub struct UnreadableDockerConfig(String);

/// Whether an `auths` key is the entry for `host` (a bare host, as we write it): the key is
/// exactly `host`, optionally after `https://` and before one trailing `/`.
///
/// The kubelet's keyring (pkg/credentialprovider/keyring.go) keys an entry by the URL's host
/// plus its path, a path of `/` counting as none, and compares hosts as written. So
/// `https://HOST` is the very entry `HOST` is: `kubectl create secret docker-registry
/// --docker-server=https://HOST` writes that key, and a Secret adopted from such a loop would
/// otherwise keep the loop's old token beside ours under the same kubelet key, for pulls to
/// try and fail on. That key is ours, replaced by the bare host. Any other key is someone
/// else's and kept byte for byte: `HOST/team-x` (the kubelet matches it before `HOST` for
/// images under that path), `HOST` in another letter case, or another scheme (`http://`: ECR
/// serves only HTTPS, so no tool writes it for an ECR host).
pub fn is_entry_for(key: &str, host: &str) -> bool {
    let rest = key.strip_prefix("https://").unwrap_or(key);
    rest.strip_suffix('/').unwrap_or(rest) == host
}

/// Merges fresh credentials into the current value (None: a new Secret).
///
/// `previously_ours` are the hosts our last write recorded: entries for them that are no longer
/// configured are dropped. Entries for a configured registry (`is_entry_for`) are replaced by
/// ours; every other entry is kept as it is.
pub fn merge(
    current: Option<&[u8]>,
    ours: &[Credential<'_>],
    previously_ours: &[String],
) -> Result<DockerConfigJson, UnreadableDockerConfig> {
    let (top, auths) = match current {
        None => (Vec::new(), Vec::new()),
        Some(bytes) => split(bytes)?,
    };
    let ours_now: Vec<&str> = ours.iter().map(|c| c.registry.host()).collect();
    // Recorded by our own writes: bare hosts, normalized only in case someone edited the record.
    let ours_before: HashSet<String> = previously_ours.iter().map(|h| normalize(h)).collect();

    // Under `auths` or a variant of it: an entry for a host we write now is replaced by ours;
    // one for a host we wrote before and no longer do is dropped (and said); any other stays.
    let mut dropped = Vec::new();
    let mut stays = |key: &str| {
        if ours_now.iter().any(|host| is_entry_for(key, host)) {
            false
        } else if ours_before.iter().any(|host| is_entry_for(key, host)) {
            dropped.push(key.to_owned());
            false
        } else {
            true
        }
    };
    let mut entries: Entries = auths.into_iter().filter(|(key, _)| stays(key)).collect();
    let kept = entries.iter().map(|(key, _)| key.clone()).collect();
    for credential in ours {
        entries.push((
            credential.registry.host().to_owned(),
            entry(credential.password),
        ));
    }

    let mut out = String::from("{\"auths\":");
    write_object(&mut out, &entries);
    for (key, value) in &top {
        let mut value = value.get().to_owned();
        if is_variant(key) {
            // Another letter case of `auths`: the kubelet reads its entries into the same map
            // as ours, after them when it comes later. Ours are taken out of it (they are
            // written above), every other entry stays as it is; a null (which would empty
            // the map, ours included) or a variant left empty goes.
            let Some(entries) = members(value.as_bytes()) else {
                continue;
            };
            let others: Entries = entries.into_iter().filter(|(k, _)| stays(k)).collect();
            if others.is_empty() {
                continue;
            }
            value.clear();
            write_object(&mut value, &others);
        }
        out.push(',');
        out.push_str(&serde_json::to_string(key).expect("a string serialises"));
        out.push(':');
        out.push_str(&value);
    }
    out.push('}');
    Ok(DockerConfigJson {
        bytes: out.into_bytes(),
        kept,
        dropped,
    })
}

/// The `auths` entries of a value, by key, without their credentials.
pub fn auths_keys(bytes: &[u8]) -> Result<Vec<String>, UnreadableDockerConfig> {
    Ok(split(bytes)?.1.into_iter().map(|(k, _)| k).collect())
}

/// The `auths` entries of a value, by key, each value exactly as it is written.
pub fn auths(bytes: &[u8]) -> Result<Vec<(String, Box<RawValue>)>, UnreadableDockerConfig> {
    Ok(split(bytes)?.1)
}

/// The keys of the entries under another letter case of `auths` (`Auths`, `AUTHS`): the
/// kubelet reads them as `auths` entries; only a write under `auths` keeps them apart.
pub fn variant_keys(bytes: &[u8]) -> Result<Vec<String>, UnreadableDockerConfig> {
    Ok(split(bytes)?
        .0
        .into_iter()
        .filter(|(k, _)| is_variant(k))
        .flat_map(|(_, v)| members(v.get().as_bytes()).unwrap_or_default())
        .map(|(k, _)| k)
        .collect())
}

/// The `auths` entries as the kubelet reads them: Go's encoding/json decodes every member
/// whose name is `auths` in any letter case into the one map of `DockerConfigJSON.Auths`
/// (pkg/credentialprovider/config.go), in document order: an object adds its entries, a
/// later entry replacing an earlier one of the same key, and a null empties the map.
pub fn kubelet_auths(bytes: &[u8]) -> Result<Entries, UnreadableDockerConfig> {
    split(bytes)?;
    let mut map: Entries = Vec::new();
    for (key, value) in members(bytes).unwrap_or_default() {
        if !go_fold_eq(&key, "auths") {
            continue;
        }
        if value.get() == "null" {
            map.clear();
            continue;
        }
        for (k, v) in members(value.get().as_bytes()).unwrap_or_default() {
            map.retain(|(existing, _)| *existing != k);
            map.push((k, v));
        }
    }
    Ok(map)
}

/// The members of a JSON object in document order, duplicates included, each value as it is
/// written (None: not a JSON object).
pub fn members(bytes: &[u8]) -> Option<Entries> {
    serde_json::from_slice::<Ordered>(bytes).ok().map(|o| o.0)
}

/// A top-level name the kubelet reads as `auths`, other than `auths` itself.
fn is_variant(key: &str) -> bool {
    key != "auths" && go_fold_eq(key, "auths")
}

fn entry(password: &SecretString) -> Box<RawValue> {
    let password = password.expose_secret();
    let auth = base64::engine::general_purpose::STANDARD.encode(format!("AWS:{password}"));
    let json = serde_json::json!({ "username": "AWS", "password": password, "auth": auth });
    RawValue::from_string(json.to_string()).expect("serde_json writes valid JSON")
}

pub type Entries = Vec<(String, Box<RawValue>)>;

/// Splits a docker config into its other top-level keys and its `auths` entries, in order.
/// `"auths": null` is no entries, as a missing `auths` is: Go writes a nil map as null.
fn split(bytes: &[u8]) -> Result<(Entries, Entries), UnreadableDockerConfig> {
    let unreadable = |what: String| UnreadableDockerConfig(what);
    // serde_json's messages can quote the value: only the kind of value, and where, are said.
    let value = serde_json::from_slice::<serde_json::Value>(bytes).map_err(|e| {
        unreadable(if bytes.iter().all(u8::is_ascii_whitespace) {
            " is empty".to_owned()
        } else if e.is_eof() {
            " is not JSON: it ends before the JSON is complete".to_owned()
        } else {
            format!(
                " is not JSON: it breaks off at line {} column {}",
                e.line(),
                e.column()
            )
        })
    })?;
    if !value.is_object() {
        return Err(unreadable(format!(
            " is {}, not an object",
            kind_of(&value)
        )));
    }
    // Read again for the order, the bytes of each value, and every member the kubelet reads as
    // `auths` (a JSON object may repeat a name; serde_json's object above keeps the last).
    let unexpected = |_| unreadable(" could not be read as a JSON object".to_owned());
    let Ordered(top) = serde_json::from_slice::<Ordered>(bytes).map_err(unexpected)?;
    for (key, value) in &top {
        if !go_fold_eq(key, "auths") {
            continue;
        }
        let value: serde_json::Value = serde_json::from_str(value.get()).map_err(unexpected)?;
        if !matches!(
            value,
            serde_json::Value::Null | serde_json::Value::Object(_)
        ) {
            let kind = kind_of(&value);
            return Err(unreadable(if key == "auths" {
                format!("'s `auths` is {kind}, not an object")
            } else {
                format!(
                    "'s `{key}` is {kind}, not an object, and the kubelet reads every letter \
                     case of `auths` as `auths`, so it can't read this Secret: remove `{key}` \
                     or make it an object"
                )
            }));
        }
    }
    // `auths` as the kubelet merges its repeats (a null empties it); other letter cases are
    // kept among the other members, for `merge` to take our entries out of.
    let mut auths: Entries = Vec::new();
    let mut rest = Vec::new();
    for (key, value) in top {
        if key == "auths" {
            if value.get() == "null" {
                auths.clear();
            } else {
                for (k, v) in serde_json::from_str::<Ordered>(value.get())
                    .map_err(unexpected)?
                    .0
                {
                    auths.retain(|(existing, _)| *existing != k);
                    auths.push((k, v));
                }
            }
        } else {
            rest.push((key, value));
        }
    }
    Ok((rest, auths))
}

/// A JSON value's kind, as the errors name it.
fn kind_of(value: &serde_json::Value) -> &'static str {
    match value {
        serde_json::Value::Null => "JSON null",
        serde_json::Value::Bool(_) => "a JSON boolean",
        serde_json::Value::Number(_) => "a JSON number",
        serde_json::Value::String(_) => "a JSON string",
        serde_json::Value::Array(_) => "a JSON array",
        serde_json::Value::Object(_) => "a JSON object",
    }
}

fn write_object(out: &mut String, entries: &[(String, Box<RawValue>)]) {
    out.push('{');
    for (i, (key, value)) in entries.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&serde_json::to_string(key).expect("a string serialises"));
        out.push(':');
        out.push_str(value.get());
    }
    out.push('}');
}

/// A JSON object's members in document order, values untouched.
struct Ordered(Entries);

impl<'de> Deserialize<'de> for Ordered {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct OrderedVisitor;
        impl<'de> Visitor<'de> for OrderedVisitor {
            type Value = Ordered;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Ordered, A::Error> {
                let mut entries = Vec::new();
                while let Some((key, value)) = map.next_entry::<String, Box<RawValue>>()? {
                    entries.push((key, value));
                }
                Ok(Ordered(entries))
            }
        }
        deserializer.deserialize_map(OrderedVisitor)
    }
}

/// Whether a JSON object's member name is read into the field `field` (ASCII, lower case) by
/// Go's encoding/json: equal under Unicode simple case folding, where `ſ` (U+017F) folds to
/// `s` and the Kelvin sign (U+212A) to `k`.
pub fn go_fold_eq(name: &str, field: &str) -> bool {
    let fold = |c: char| match c {
        '\u{17f}' => 's',
        '\u{212a}' => 'k',
        c => c.to_ascii_lowercase(),
    };
    name.chars().map(fold).eq(field.chars())
}

#[cfg(test)]
mod tests {
    use std::str::FromStr;

    use super::*;
    use crate::aws::registry::RegistryHost;

    const A: &str = "111111111111.dkr.ecr.eu-west-1.amazonaws.com";
    const B: &str = "222222222222.dkr.ecr.us-east-1.amazonaws.com";

    fn merged(
        current: Option<&str>,
        ours: &[(&str, &str)],
        before: &[&str],
    ) -> (serde_json::Value, DockerConfigJson) {
        let hosts: Vec<RegistryHost> = ours
            .iter()
            .map(|(h, _)| RegistryHost::from_str(h).unwrap())
            .collect();
        let passwords: Vec<SecretString> =
            ours.iter().map(|(_, p)| SecretString::from(*p)).collect();
        let credentials: Vec<Credential> = hosts
            .iter()
            .zip(&passwords)
            .map(|(registry, password)| Credential { registry, password })
            .collect();
        let before: Vec<String> = before.iter().map(|s| s.to_string()).collect();
        let out = merge(current.map(str::as_bytes), &credentials, &before).unwrap();
        let value = serde_json::from_slice(&out.bytes).unwrap();
        (value, out)
    }

    #[test]
    fn a_new_value_holds_one_entry_per_registry_with_auth() {
        let (value, _) = merged(None, &[(A, "pw-a"), (B, "pw-b")], &[]);
        assert_eq!(value["auths"][A]["username"], "AWS");
        assert_eq!(value["auths"][A]["password"], "pw-a");
        assert_eq!(
            value["auths"][A]["auth"],
            base64::engine::general_purpose::STANDARD.encode("AWS:pw-a")
        );
        assert_eq!(value["auths"][B]["password"], "pw-b");
    }

    #[test]
    fn merging_keeps_foreign_entries_byte_for_byte_and_replaces_ours() {
        let foreign = r#"{ "auth" : "Zm9vOmJhcg==",  "email":"x@y" }"#;
        let current = format!(
            r#"{{"auths":{{"ghcr.io":{foreign},"https://{A}/":{{"username":"AWS","password":"old"}}}},"credsStore":"desktop"}}"#
        );
        let (value, out) = merged(Some(&current), &[(A, "new")], &[]);
        let text = String::from_utf8(out.bytes.clone()).unwrap();
        assert!(text.contains(&format!(r#""ghcr.io":{foreign}"#)), "{text}");
        assert!(!text.contains("old"), "{text}");
        assert_eq!(value["auths"][A]["password"], "new");
        assert_eq!(value["credsStore"], "desktop");
        assert_eq!(out.kept, ["ghcr.io"]);
    }

    #[test]
    fn only_keys_naming_exactly_our_host_are_ours() {
        for (key, ours) in [
            (A.to_owned(), true),
            (format!("https://{A}"), true),
            (format!("https://{A}/"), true),
            (format!("{A}/team-x"), false),
            (format!("https://{A}/team-x"), false),
            (A.to_uppercase(), false),
            (format!("http://{A}"), false),
            (format!("{A}/"), true),
            (format!("https://{A}//"), false),
            (format!(" {A}"), false),
        ] {
            assert_eq!(is_entry_for(&key, A), ours, "{key}");
        }
    }

    #[test]
    fn others_path_scoped_and_differently_cased_entries_are_kept_byte_for_byte() {
        let upper = A.to_uppercase();
        let current = format!(
            r#"{{"auths":{{"{A}/team-x":{{ "auth":"dGVhbTp4" }},"{upper}":{{"auth":"dXA="}},"{A}":{{"auth":"b2xk"}}}}}}"#
        );
        let (value, out) = merged(Some(&current), &[(A, "new")], &[A]);
        let text = String::from_utf8(out.bytes.clone()).unwrap();
        assert!(
            text.contains(&format!(r#""{A}/team-x":{{ "auth":"dGVhbTp4" }}"#)),
            "{text}"
        );
        assert!(
            text.contains(&format!(r#""{upper}":{{"auth":"dXA="}}"#)),
            "{text}"
        );
        assert_eq!(value["auths"][A]["password"], "new");
        assert_eq!(out.kept, [format!("{A}/team-x"), upper]);
        assert!(out.dropped.is_empty());
    }

    #[test]
    fn entries_we_wrote_for_registries_no_longer_configured_are_dropped() {
        let current = format!(
            r#"{{"auths":{{"{A}":{{"auth":"x"}},"{B}":{{"auth":"y"}},"quay.io":{{"auth":"z"}}}}}}"#
        );
        let (value, out) = merged(Some(&current), &[(A, "new")], &[A, B]);
        assert!(value["auths"].get(B).is_none());
        assert_eq!(value["auths"]["quay.io"]["auth"], "z");
        assert_eq!(out.dropped, [B]);
        assert_eq!(out.kept, ["quay.io"]);
    }

    #[test]
    fn an_unreadable_value_is_refused_not_overwritten() {
        for bad in ["not json", "[]", r#"{"auths":[]}"#, r#"{"auths":"x"}"#] {
            let host = RegistryHost::from_str(A).unwrap();
            let password = SecretString::from("p");
            let ours = [Credential {
                registry: &host,
                password: &password,
            }];
            assert!(merge(Some(bad.as_bytes()), &ours, &[]).is_err(), "{bad}");
        }
    }

    #[test]
    fn an_unreadable_value_is_not_quoted_in_the_error() {
        let host = RegistryHost::from_str(A).unwrap();
        let password = SecretString::from("p");
        let ours = [Credential {
            registry: &host,
            password: &password,
        }];
        for bad in [
            r#"{"auths":"hunter2"}"#,
            r#""{\"auths\":{\"x\":{\"password\":\"hunter2\"}}}""#,
        ] {
            let error = merge(Some(bad.as_bytes()), &ours, &[])
                .unwrap_err()
                .to_string();
            assert!(!error.contains("hunter2"), "{error}");
        }
    }

    #[test]
    fn an_unusable_value_is_described_in_words() {
        let host = RegistryHost::from_str(A).unwrap();
        let password = SecretString::from("p");
        let ours = [Credential {
            registry: &host,
            password: &password,
        }];
        for (bad, said) in [
            ("not json", " is not JSON: it breaks off at line 1 column 2"),
            (
                "{\"auths\":{",
                " is not JSON: it ends before the JSON is complete",
            ),
            ("", " is empty"),
            ("[]", " is a JSON array, not an object"),
            ("\"x\"", " is a JSON string, not an object"),
            ("null", " is JSON null, not an object"),
            (
                r#"{"auths":"x"}"#,
                "'s `auths` is a JSON string, not an object",
            ),
            (
                r#"{"auths":[]}"#,
                "'s `auths` is a JSON array, not an object",
            ),
        ] {
            let error = merge(Some(bad.as_bytes()), &ours, &[]).unwrap_err();
            assert_eq!(
                error.to_string(),
                format!("its .dockerconfigjson{said}"),
                "{bad}"
            );
        }
    }

    #[test]
    fn a_null_auths_is_no_entries_like_a_missing_one() {
        for current in [
            r#"{"auths":null,"credsStore":"x"}"#,
            r#"{"credsStore":"x"}"#,
        ] {
            let (value, out) = merged(Some(current), &[(A, "pw")], &[]);
            assert_eq!(value["auths"][A]["password"], "pw", "{current}");
            assert_eq!(value["credsStore"], "x");
            assert!(out.kept.is_empty());
        }
    }

    /// The `auths` entries the kubelet reads, as Go's encoding/json decodes them into
    /// `DockerConfigJSON` (pkg/credentialprovider/config.go): every letter case of `auths`
    /// into one map, in document order, later keys winning, a null emptying it.
    #[test]
    fn the_kubelet_reads_every_letter_case_of_auths_into_one_map() {
        let view = |text: &str| -> Vec<(String, String)> {
            kubelet_auths(text.as_bytes())
                .unwrap()
                .into_iter()
                .map(|(k, v)| (k, v.get().to_owned()))
                .collect()
        };
        let pair = |k: &str, v: &str| (k.to_owned(), v.to_owned());
        assert_eq!(
            view(r#"{"auths":{"a":1,"b":2},"Auths":{"a":3}}"#),
            [pair("b", "2"), pair("a", "3")]
        );
        assert_eq!(
            view(r#"{"Auths":{"a":3},"auths":{"a":1}}"#),
            [pair("a", "1")]
        );
        assert_eq!(view(r#"{"auths":{"a":1},"AUTHS":null}"#), []);
        assert_eq!(
            view(r#"{"auths":{"a":1},"authſ":{"c":4},"credsStore":"x"}"#),
            [pair("a", "1"), pair("c", "4")]
        );
        assert_eq!(
            view(r#"{"auths":{"a":1},"auth":{"c":4}}"#),
            [pair("a", "1")]
        );
        assert!(kubelet_auths(br#"{"auths":{},"Auths":"x"}"#).is_err());
    }

    #[test]
    fn our_entries_under_another_letter_case_of_auths_are_taken_out_and_others_kept_as_they_are() {
        let foreign = r#"{ "auth" : "Zm9vOmJhcg==" }"#;
        let current = format!(
            r#"{{"auths":{{"quay.io":{{"auth":"eDp5"}}}},"Auths":{{"ghcr.io":{foreign},"{A}":{{"Password":"stale","username":"AWS"}}}},"AUTHS":{{"https://{B}":{{"auth":"b2xk"}}}},"auThs":null,"credsStore":"x"}}"#
        );
        let (value, out) = merged(Some(&current), &[(A, "new")], &[A, B]);
        let text = String::from_utf8(out.bytes.clone()).unwrap();
        // Another host's entry stays under its key, byte for byte.
        assert!(
            text.contains(&format!(r#""Auths":{{"ghcr.io":{foreign}}}"#)),
            "{text}"
        );
        assert!(!text.contains("stale") && !text.contains("b2xk"), "{text}");
        // A variant left empty, and a null one (which would empty the map), go.
        assert!(
            value.get("AUTHS").is_none() && value.get("auThs").is_none(),
            "{text}"
        );
        assert_eq!(value["credsStore"], "x");
        assert_eq!(out.dropped, [format!("https://{B}")]);
        // What the kubelet reads for our host is ours.
        let entries = kubelet_auths(&out.bytes).unwrap();
        let ours: Vec<&str> = entries
            .iter()
            .filter(|(k, _)| is_entry_for(k, A))
            .map(|(_, v)| v.get())
            .collect();
        assert_eq!(ours.len(), 1, "{text}");
        assert!(ours[0].contains(r#""password":"new""#), "{text}");
    }

    #[test]
    fn another_letter_case_of_auths_that_is_no_object_is_refused_saying_what_to_do() {
        let host = RegistryHost::from_str(A).unwrap();
        let password = SecretString::from("p");
        let ours = [Credential {
            registry: &host,
            password: &password,
        }];
        let error = merge(Some(br#"{"auths":{},"Auths":["hunter2"]}"#), &ours, &[])
            .unwrap_err()
            .to_string();
        assert_eq!(
            error,
            "its .dockerconfigjson's `Auths` is a JSON array, not an object, and the kubelet \
             reads every letter case of `auths` as `auths`, so it can't read this Secret: remove \
             `Auths` or make it an object"
        );
    }

    #[test]
    fn repeated_auths_are_read_as_the_kubelet_merges_them() {
        let current =
            r#"{"auths":{"quay.io":{"auth":"eDp5"}},"auths":{"ghcr.io":{"auth":"eg=="}}}"#;
        let (value, out) = merged(Some(current), &[(A, "new")], &[]);
        assert_eq!(value["auths"]["quay.io"]["auth"], "eDp5");
        assert_eq!(value["auths"]["ghcr.io"]["auth"], "eg==");
        assert_eq!(out.kept, ["quay.io", "ghcr.io"]);
    }

    #[test]
    fn debug_does_not_print_the_value() {
        let (_, out) = merged(None, &[(A, "hunter2")], &[]);
        assert!(!format!("{out:?}").contains("hunter2"));
    }
}
