//! CreateSession's signature: SigV4 with the certificate's key in place of a secret key.
//!
//! From the Roles Anywhere User Guide, "Signing process for IAM Roles Anywhere"
//! (authentication-sign-process.html): the canonical request and the string to sign are
//! SigV4's; the algorithm is `AWS4-X509-RSA-SHA256` or `AWS4-X509-ECDSA-SHA256`; the
//! certificate travels base64 DER in `X-Amz-X509` and its intermediates, comma-separated, in
//! `X-Amz-X509-Chain`, both signed; `Credential=` names the certificate's serial number in
//! decimal over the scope `<yyyymmdd>/<region>/rolesanywhere/aws4_request`; the signature is
//! the key's signature over the string to sign, hex. Matched against AWS's helper,
//! aws/rolesanywhere-credential-helper v1.4.0, aws_signing_helper/signer.go:
//! `CreateRequestSignFunction` (the headers set, `signer.Sign(.., []byte(stringToSign),
//! crypto.SHA256)`), `createCanonicalRequest`, `CreateStringToSign` and
//! `BuildAuthorizationHeader`; and against its requests, which the test endpoint verifies
//! with the same code as ours (tests/fake-cluster/src/roles_anywhere.rs).

use std::fmt::Write as _;
use std::time::SystemTime;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use sha2::{Digest as _, Sha256};

use super::identity::Identity;

/// The service name of the credential scope.
pub const SERVICE: &str = "rolesanywhere";

/// The content type CreateSession's JSON body is sent with (AWS's helper sends the same).
pub const CONTENT_TYPE: &str = "application/json";

/// One request to sign: `POST <path>?<query>` to `host`, with `body`.
#[derive(Debug, Clone, Copy)]
pub struct Unsigned<'a> {
    /// The Host header: the endpoint's host, and its port when not the scheme's default.
    pub host: &'a str,
    pub path: &'a str,
    /// Name and value pairs, not encoded.
    pub query: &'a [(&'a str, &'a str)],
    pub body: &'a [u8],
    pub region: &'a str,
    pub at: SystemTime,
}

/// The headers to send, Authorization last.
pub fn sign(identity: &Identity, request: &Unsigned<'_>) -> Vec<(&'static str, String)> {
    let date_time = amz_date(request.at);
    let mut headers: Vec<(&'static str, String)> = vec![
        ("content-type", CONTENT_TYPE.to_owned()),
        ("host", request.host.to_owned()),
        ("x-amz-date", date_time.clone()),
        ("x-amz-x509", BASE64.encode(&identity.certificate)),
    ];
    if !identity.chain.is_empty() {
        let chain: Vec<String> = identity.chain.iter().map(|c| BASE64.encode(c)).collect();
        headers.push(("x-amz-x509-chain", chain.join(",")));
    }
    let scope = format!(
        "{}/{}/{SERVICE}/aws4_request",
        &date_time[..8],
        request.region
    );
    let (canonical, signed_headers) = canonical_request(request, &headers);
    let to_sign = string_to_sign(identity.algorithm(), &date_time, &scope, &canonical);
    let signature = hex(&identity.key.sign(to_sign.as_bytes()));
    headers.push((
        "authorization",
        format!(
            "{} Credential={}/{scope}, SignedHeaders={signed_headers}, Signature={signature}",
            identity.algorithm(),
            identity.serial
        ),
    ));
    // Host is the client's to send (reqwest writes it from the URL, as signed here).
    headers.retain(|(name, _)| *name != "host");
    headers
}

/// SigV4's canonical request and its signed headers' names. `headers` are lower-case names
/// with their values.
pub fn canonical_request(request: &Unsigned<'_>, headers: &[(&str, String)]) -> (String, String) {
    let mut sorted: Vec<&(&str, String)> = headers.iter().collect();
    sorted.sort_by_key(|(name, _)| *name);
    let canonical_headers: String = sorted
        .iter()
        .map(|(name, value)| format!("{name}:{}\n", value.trim()))
        .collect();
    let signed: Vec<&str> = sorted.iter().map(|(name, _)| *name).collect();
    let signed = signed.join(";");
    let canonical = format!(
        "POST\n{}\n{}\n{canonical_headers}\n{signed}\n{}",
        request.path,
        canonical_query(request.query),
        hex(&Sha256::digest(request.body))
    );
    (canonical, signed)
}

/// `algorithm \n date-time \n scope \n hex(sha256(canonical request))`.
pub fn string_to_sign(algorithm: &str, date_time: &str, scope: &str, canonical: &str) -> String {
    format!(
        "{algorithm}\n{date_time}\n{scope}\n{}",
        hex(&Sha256::digest(canonical.as_bytes()))
    )
}

/// The query as SigV4 canonicalises it, and as it is sent: pairs sorted by name, each part
/// percent-encoded but for the unreserved characters.
pub fn canonical_query(query: &[(&str, &str)]) -> String {
    let mut pairs: Vec<(String, String)> = query
        .iter()
        .map(|(name, value)| (uri_encode(name), uri_encode(value)))
        .collect();
    pairs.sort();
    pairs
        .iter()
        .map(|(name, value)| format!("{name}={value}"))
        .collect::<Vec<_>>()
        .join("&")
}

/// RFC 3986 percent-encoding of all but `A-Z a-z 0-9 - _ . ~`, upper-case hex (SigV4's `UriEncode`).
pub fn uri_encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || b"-_.~".contains(&byte) {
            out.push(byte as char);
        } else {
            let _ = write!(out, "%{byte:02X}");
        }
    }
    out
}

/// `20261202T103000Z`.
pub fn amz_date(at: SystemTime) -> String {
    humantime::format_rfc3339_seconds(at)
        .to_string()
        .replace(['-', ':'], "")
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().fold(String::new(), |mut out, b| {
        let _ = write!(out, "{b:02x}");
        out
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    #[test]
    fn the_query_is_sorted_and_encoded_as_sigv4_and_go_s_query_escape_write_it() {
        let query = [
            (
                "trustAnchorArn",
                "arn:aws:rolesanywhere:eu-west-1:123456789012:trust-anchor/a-b",
            ),
            (
                "profileArn",
                "arn:aws:rolesanywhere:eu-west-1:123456789012:profile/c",
            ),
            ("roleArn", "arn:aws:iam::123456789012:role/ci/ecr reader"),
        ];
        assert_eq!(
            canonical_query(&query),
            "profileArn=arn%3Aaws%3Arolesanywhere%3Aeu-west-1%3A123456789012%3Aprofile%2Fc&\
             roleArn=arn%3Aaws%3Aiam%3A%3A123456789012%3Arole%2Fci%2Fecr%20reader&\
             trustAnchorArn=arn%3Aaws%3Arolesanywhere%3Aeu-west-1%3A123456789012%3Atrust-anchor%2Fa-b"
        );
    }

    #[test]
    fn the_date_is_sigv4_s_basic_format_in_utc() {
        let at = UNIX_EPOCH + Duration::from_secs(1_796_212_200);
        assert_eq!(amz_date(at), "20261202T115000Z");
    }

    #[test]
    fn the_canonical_request_lists_the_headers_sorted_and_signs_their_names() {
        let request = Unsigned {
            host: "rolesanywhere.eu-west-1.amazonaws.com",
            path: "/sessions",
            query: &[("b", "2"), ("a", "1")],
            body: b"{\"durationSeconds\":3600}",
            region: "eu-west-1",
            at: UNIX_EPOCH,
        };
        let headers = [
            ("x-amz-x509", "MIIB".to_owned()),
            ("content-type", CONTENT_TYPE.to_owned()),
            ("host", request.host.to_owned()),
            ("x-amz-date", "19700101T000000Z".to_owned()),
        ];
        let (canonical, signed) = canonical_request(&request, &headers);
        assert_eq!(signed, "content-type;host;x-amz-date;x-amz-x509");
        assert_eq!(
            canonical,
            format!(
                "POST\n/sessions\na=1&b=2\ncontent-type:application/json\n\
                 host:rolesanywhere.eu-west-1.amazonaws.com\nx-amz-date:19700101T000000Z\n\
                 x-amz-x509:MIIB\n\ncontent-type;host;x-amz-date;x-amz-x509\n{}",
                hex(&Sha256::digest(b"{\"durationSeconds\":3600}"))
            )
        );
    }
}
