//! A tiny blocking HTTP/1.1 client over std's TcpStream, so the fake's tests send
//! exactly the requests they mean without pulling in an HTTP client crate.

#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::TcpStream;

use serde_json::Value;

pub(crate) const APPLY: &str = "application/apply-patch+yaml";
pub(crate) const JSON_PATCH: &str = "application/json-patch+json";
pub(crate) const MERGE_PATCH: &str = "application/merge-patch+json";
pub(crate) const STRATEGIC: &str = "application/strategic-merge-patch+json";

/// One answer: status, headers (lower-cased names) and the body as JSON (Null if none).
#[derive(Debug)]
pub(crate) struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Value,
}

impl Response {
    /// An HTTP/1.1 answer as it came off the wire: the status line, the headers, and the
    /// body as JSON (a string when it is not JSON, Null when empty).
    pub(crate) fn parse(text: &str) -> Self {
        let (head, body) = text.split_once("\r\n\r\n").expect("a head and a body");
        let mut lines = head.lines();
        let status: u16 = lines
            .next()
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|s| s.parse().ok())
            .expect("a status line");
        let headers = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
            .collect();
        let body = if body.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(body).unwrap_or_else(|_| Value::String(body.to_owned()))
        };
        Self {
            status,
            headers,
            body,
        }
    }

    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
    pub(crate) fn message(&self) -> &str {
        self.body["message"].as_str().unwrap_or_default()
    }
    pub(crate) fn reason(&self) -> &str {
        self.body["reason"].as_str().unwrap_or_default()
    }
}

/// Sends one request to `base` (`http://127.0.0.1:PORT`); `target` is path plus query.
pub(crate) fn send(
    base: &str,
    method: &str,
    target: &str,
    content_type: Option<&str>,
    body: &str,
) -> Response {
    send_with(base, method, target, &[], content_type, body)
}

/// [`send`] with these extra headers (`Authorization`, `Impersonate-User`).
pub(crate) fn send_with(
    base: &str,
    method: &str,
    target: &str,
    headers: &[(&str, &str)],
    content_type: Option<&str>,
    body: &str,
) -> Response {
    let addr = base.strip_prefix("http://").expect("http base URL");
    let mut stream = TcpStream::connect(addr).expect("connect to the fake");
    let mut head = format!(
        "{method} {target} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nUser-Agent: fake-test/1.0\r\nContent-Length: {}\r\n",
        body.len()
    );
    if let Some(ct) = content_type {
        head.push_str(&format!("Content-Type: {ct}\r\n"));
    }
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).expect("write request");
    stream.write_all(body.as_bytes()).expect("write body");
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).expect("read response");
    let text = String::from_utf8(raw).expect("utf-8 response");
    Response::parse(&text)
}

pub(crate) fn get(base: &str, target: &str) -> Response {
    send(base, "GET", target, None, "")
}

pub(crate) fn post(base: &str, target: &str, body: &Value) -> Response {
    send(
        base,
        "POST",
        target,
        Some("application/json"),
        &body.to_string(),
    )
}

pub(crate) fn patch(base: &str, target: &str, content_type: &str, body: &Value) -> Response {
    send(base, "PATCH", target, Some(content_type), &body.to_string())
}

/// Server-side apply as `manager`, with or without force.
pub(crate) fn apply(base: &str, path: &str, manager: &str, force: bool, body: &Value) -> Response {
    let target = format!(
        "{path}?fieldManager={manager}{}",
        if force { "&force=true" } else { "" }
    );
    patch(base, &target, APPLY, body)
}

pub(crate) fn secret_path(ns: &str, name: &str) -> String {
    format!("/api/v1/namespaces/{ns}/secrets/{name}")
}

/// A dockerconfigjson Secret body as ecr-refresh applies it.
pub(crate) fn docker_secret(ns: &str, name: &str, config: &str) -> Value {
    use base64::Engine;
    serde_json::json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": ns},
        "type": "kubernetes.io/dockerconfigjson",
        "data": {".dockerconfigjson": base64::engine::general_purpose::STANDARD.encode(config)},
    })
}

/// The managers owning `field` (fieldsV1 path like `["f:data", "f:.dockerconfigjson"]`).
pub(crate) fn owners(obj: &Value, field: &[&str]) -> Vec<String> {
    obj["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| {
            field
                .iter()
                .try_fold(&m["fieldsV1"], |v, seg| v.get(*seg))
                .is_some()
        })
        .map(|m| {
            format!(
                "{}/{}",
                m["manager"].as_str().unwrap_or_default(),
                m["operation"].as_str().unwrap_or_default()
            )
        })
        .collect()
}
