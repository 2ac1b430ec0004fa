//! Which `auths` entry serves an image, and with what credentials, as the kubelet decides it
//! (k8s.io/kubernetes v1.37.2, pkg/credentialprovider). Pure functions: a check asks them, so
//! that what it reports is what the kubelet will do.

use base64::Engine as _;

use super::docker_config::go_fold_eq;

/// The keyring's key for an `auths` key (None: the kubelet ignores the entry).
///
/// keyring.go `BasicDockerKeyring.Add`: `https://` is put before a key without a scheme, the
/// URL parsed (`url.Parse`), and the key is its host plus its path, a leading `/v1` or `/v2`
/// dropped and a path of `/` counting as none: `https://HOST/v2/` is `HOST`,
/// `HOST/team-x` is `HOST/team-x`. Hosts are compared as written, without folding case.
pub fn key(auths_key: &str) -> Option<String> {
    let url = if auths_key.starts_with("https://") || auths_key.starts_with("http://") {
        auths_key.to_owned()
    } else {
        format!("https://{auths_key}")
    };
    let (host, path) = parse(&url)?;
    let path = match path
        .strip_prefix("/v2/")
        .or_else(|| path.strip_prefix("/v1/"))
    {
        Some(rest) => &path[path.len() - rest.len() - 1..],
        None => path,
    };
    Some(if path.is_empty() || path == "/" {
        host.to_owned()
    } else {
        format!("{host}{path}")
    })
}

/// Whether the keyring's `key` serves `target` (an image's repository, `HOST/web`, or a bare
/// host for "every image on it").
///
/// keyring.go `URLsMatchStr` and `URLsMatch`: both are parsed as URLs after `https://`; the
/// ports must be equal, the hosts have as many dot-separated parts, each of the key's parts
/// matches the target's as a `filepath.Match` glob (`*.dkr.ecr.us-east-1.amazonaws.com`), and
/// the key's path is a prefix of the target's, as strings (`HOST/web` serves `HOST/webapp`).
pub fn matches(key: &str, target: &str) -> bool {
    let (key_url, target_url) = (format!("https://{key}"), format!("https://{target}"));
    let (Some((key_host, key_path)), Some((target_host, target_path))) =
        (parse(&key_url), parse(&target_url))
    else {
        return false;
    };
    let (key_parts, key_port) = split_host(key_host);
    let (target_parts, target_port) = split_host(target_host);
    key_port == target_port
        && key_parts.len() == target_parts.len()
        && target_path.starts_with(key_path)
        && key_parts
            .iter()
            .zip(&target_parts)
            .all(|(glob, part)| glob_match(glob, part) == Some(true))
}

/// The repository the kubelet looks an image up by: the reference without its tag or digest
/// (pkg/util/parsers `ParseImageName`, the name of `ParseNormalizedNamed`).
pub fn repository(image: &str) -> &str {
    let image = image.split_once('@').map_or(image, |(name, _)| name);
    match image.rsplit_once(':') {
        Some((name, tag)) if !tag.contains('/') => name,
        _ => image,
    }
}

/// An entry's username and password as the kubelet reads them (config.go
/// `DockerConfigEntry.UnmarshalJSON`): `auth`, when present and not empty, decoded as
/// base64 of `username:password` replaces `username` and `password`. Field names are matched
/// in any letter case, as Go's encoding/json does, the last one winning. Err: the kubelet can't
/// read the entry (and so refuses the whole Secret), with why.
pub fn credentials(entry: &str) -> Result<(String, String), String> {
    let members = super::docker_config::members(entry.as_bytes())
        .ok_or_else(|| "its entry is not a JSON object".to_owned())?;
    let (mut username, mut password, mut auth) = (String::new(), String::new(), String::new());
    for (name, value) in &members {
        let slot = if go_fold_eq(name, "username") {
            &mut username
        } else if go_fold_eq(name, "password") {
            &mut password
        } else if go_fold_eq(name, "auth") {
            &mut auth
        } else {
            continue;
        };
        match serde_json::from_str::<serde_json::Value>(value.get()) {
            // encoding/json leaves a field as it was for a null.
            Ok(serde_json::Value::Null) => {}
            Ok(serde_json::Value::String(s)) => *slot = s,
            _ => return Err(format!("its entry's `{name}` is not a string")),
        }
    }
    if auth.is_empty() {
        return Ok((username, password));
    }
    decode_auth(&auth)
}

/// config.go `decodeDockerConfigFieldAuth`: padded base64 when it ends in `=`, unpadded
/// otherwise (Go's decoder skips `\r` and `\n`), then split at the first `:`.
fn decode_auth(field: &str) -> Result<(String, String), String> {
    let cleaned: String = field
        .chars()
        .filter(|c| !matches!(c, '\r' | '\n'))
        .collect();
    let engine = if field.trim().ends_with('=') {
        &base64::engine::general_purpose::STANDARD
    } else {
        &base64::engine::general_purpose::STANDARD_NO_PAD
    };
    let undecodable = || "its entry's `auth` is not base64 of username:password".to_owned();
    let decoded = engine.decode(cleaned).map_err(|_| undecodable())?;
    let text = String::from_utf8_lossy(&decoded);
    let (username, password) = text.split_once(':').ok_or_else(undecodable)?;
    Ok((username.to_owned(), password.to_owned()))
}

/// Go's `url.Parse` of `scheme://authority/path`, the parts the keyring uses: the host (with
/// its port, after any `user@`) and the path (None: a host the kubelet's parse refuses).
fn parse(url: &str) -> Option<(&str, &str)> {
    let rest = url.split_once("://")?.1;
    let rest = rest.split(['#', '?']).next().unwrap_or_default();
    let (authority, path) = match rest.find('/') {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    // url.go `parseHost`: a port is digits; a host holds no space or control character.
    if let Some((_, port)) = host.rsplit_once(':')
        && !host.starts_with('[')
        && !port.bytes().all(|b| b.is_ascii_digit())
    {
        return None;
    }
    if host.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return None;
    }
    Some((host, path))
}

/// keyring.go `splitURL`: the host's dot-separated parts, and the port (empty when there is
/// none, as `net.SplitHostPort` fails then).
fn split_host(host: &str) -> (Vec<&str>, &str) {
    let (name, port) = match host.rsplit_once(':') {
        Some((name, port)) if !name.contains(':') || name.starts_with('[') => {
            (name.trim_start_matches('[').trim_end_matches(']'), port)
        }
        _ => (host, ""),
    };
    (name.split('.').collect(), port)
}

/// Go's `filepath.Match` on one host part (no separator in it): `*`, `?`, `[...]` classes
/// (`^` negates, `a-z` ranges) and `\` escapes. None: a malformed pattern, which the keyring
/// counts as no match.
fn glob_match(pattern: &str, name: &str) -> Option<bool> {
    let pattern: Vec<char> = pattern.chars().collect();
    let name: Vec<char> = name.chars().collect();
    glob_at(&pattern, &name)
}

fn glob_at(pattern: &[char], name: &[char]) -> Option<bool> {
    match pattern.first() {
        None => Some(name.is_empty()),
        Some('*') => {
            let rest = &pattern[1..];
            for i in 0..=name.len() {
                if glob_at(rest, &name[i..])? {
                    return Some(true);
                }
            }
            Some(false)
        }
        Some('?') => match name.first() {
            Some(_) => glob_at(&pattern[1..], &name[1..]),
            None => Some(false),
        },
        Some('[') => {
            let (matched, used) = class(&pattern[1..], name.first().copied())?;
            if !matched {
                return Some(false);
            }
            glob_at(&pattern[1 + used..], &name[1..])
        }
        Some('\\') => {
            let c = *pattern.get(1)?;
            Some(name.first() == Some(&c) && glob_at(&pattern[2..], &name[1..])?)
        }
        Some(c) => Some(name.first() == Some(c) && glob_at(&pattern[1..], &name[1..])?),
    }
}

/// A `[...]` class after its `[`: whether `c` is in it, and how many pattern characters it
/// took (its `]` included). None: malformed.
fn class(pattern: &[char], c: Option<char>) -> Option<(bool, usize)> {
    let mut i = 0;
    let negated = pattern.first() == Some(&'^');
    if negated {
        i += 1;
    }
    let mut found = false;
    let mut ranges = 0;
    loop {
        let ch = *pattern.get(i)?;
        if ch == ']' && ranges > 0 {
            i += 1;
            break;
        }
        ranges += 1;
        let (lo, next) = escaped(pattern, i)?;
        i = next;
        let mut hi = lo;
        if pattern.get(i) == Some(&'-') && pattern.get(i + 1).is_some_and(|&c| c != ']') {
            let (h, next) = escaped(pattern, i + 1)?;
            hi = h;
            i = next;
            if hi < lo {
                return None;
            }
        }
        if c.is_some_and(|c| lo <= c && c <= hi) {
            found = true;
        }
    }
    Some((c.is_some() && found != negated, i))
}

/// One class character at `i`, a `\` escaping the next: the character and where the next
/// one starts. None: malformed (`-` or `]` unescaped where a character is due, or the end:
/// match.go `getEsc`).
fn escaped(pattern: &[char], i: usize) -> Option<(char, usize)> {
    match *pattern.get(i)? {
        '\\' => Some((*pattern.get(i + 1)?, i + 2)),
        '-' | ']' => None,
        c => Some((c, i + 1)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOST: &str = "123456789012.dkr.ecr.us-east-1.amazonaws.com";

    /// keyring.go `Add`: the key an `auths` key is indexed by.
    #[test]
    fn an_auths_key_is_indexed_as_the_keyring_indexes_it() {
        let cases = [
            (HOST.to_owned(), Some(HOST.to_owned())),
            (format!("https://{HOST}"), Some(HOST.to_owned())),
            (format!("https://{HOST}/"), Some(HOST.to_owned())),
            (format!("http://{HOST}"), Some(HOST.to_owned())),
            (format!("{HOST}/v2/"), Some(HOST.to_owned())),
            (format!("https://{HOST}/v1/"), Some(HOST.to_owned())),
            (format!("{HOST}/v2/team-x"), Some(format!("{HOST}/team-x"))),
            (format!("{HOST}/team-x"), Some(format!("{HOST}/team-x"))),
            (format!("{HOST}:443"), Some(format!("{HOST}:443"))),
            (format!("{HOST}:abc"), None),
            (format!("user@{HOST}/x"), Some(format!("{HOST}/x"))),
            (
                "index.docker.io/v1/".to_owned(),
                Some("index.docker.io".to_owned()),
            ),
        ];
        for (auths_key, expected) in cases {
            assert_eq!(key(&auths_key), expected, "{auths_key}");
        }
    }

    /// keyring.go `URLsMatch` (and the cases of its own keyring_test.go `TestURLsMatch`).
    #[test]
    fn a_key_serves_an_image_as_the_keyring_matches_it() {
        let web = format!("{HOST}/web");
        let cases = [
            (HOST.to_owned(), web.clone(), true),
            (HOST.to_owned(), HOST.to_owned(), true),
            // A path-scoped entry serves only repositories under its path, as string prefixes.
            (format!("{HOST}/team-x"), web.clone(), false),
            (format!("{HOST}/team-x"), HOST.to_owned(), false),
            (format!("{HOST}/team-x"), format!("{HOST}/team-x/web"), true),
            (format!("{HOST}/web"), format!("{HOST}/webapp"), true),
            // Globs per dot-separated part, never across a dot.
            (
                "*.dkr.ecr.us-east-1.amazonaws.com".to_owned(),
                web.clone(),
                true,
            ),
            ("*.amazonaws.com".to_owned(), web.clone(), false),
            (
                "123456789012.dkr.ecr.*.amazonaws.com".to_owned(),
                web.clone(),
                true,
            ),
            // `?` starts the URL's query: the host is cut there, as url.Parse cuts it.
            (
                "1234567890?2.dkr.ecr.us-east-1.amazonaws.com".to_owned(),
                web.clone(),
                false,
            ),
            (
                "12345678901[0-9].dkr.ecr.us-east-1.amazonaws.com".to_owned(),
                web.clone(),
                true,
            ),
            (
                "[0-9]23456789012.dkr.ecr.us-east-1.amazonaws.com".to_owned(),
                web.clone(),
                true,
            ),
            (
                "[^0-9]23456789012.dkr.ecr.us-east-1.amazonaws.com".to_owned(),
                web.clone(),
                false,
            ),
            (
                "[.dkr.ecr.us-east-1.amazonaws.com".to_owned(),
                web.clone(),
                false,
            ),
            (
                "[]23456789012.dkr.ecr.us-east-1.amazonaws.com".to_owned(),
                web.clone(),
                false,
            ),
            // Ports must be equal; hosts are compared as written.
            (format!("{HOST}:443"), web.clone(), false),
            (HOST.to_owned(), format!("{HOST}:443/web"), false),
            (HOST.to_ascii_uppercase(), web.clone(), false),
            (
                "*.kubernetes.io".to_owned(),
                "prefix.kubernetes.io".to_owned(),
                true,
            ),
            (
                "*.kubernetes.io".to_owned(),
                "kubernetes.io".to_owned(),
                false,
            ),
            (
                "*.*.kubernetes.io".to_owned(),
                "a.b.kubernetes.io".to_owned(),
                true,
            ),
            (
                "prefix.*.io".to_owned(),
                "prefix.kubernetes.io".to_owned(),
                true,
            ),
            (
                "*-good.kubernetes.io".to_owned(),
                "prefix-good.kubernetes.io".to_owned(),
                true,
            ),
            (
                "*-good.kubernetes.io".to_owned(),
                "prefix-bad.kubernetes.io".to_owned(),
                false,
            ),
            ("gcr.io/foo/bar".to_owned(), "gcr.io/foo".to_owned(), false),
        ];
        for (k, target, expected) in cases {
            assert_eq!(matches(&k, &target), expected, "{k} serving {target}");
        }
    }

    #[test]
    fn an_image_is_looked_up_by_its_repository() {
        for (image, repo) in [
            ("HOST/web:1", "HOST/web"),
            ("HOST/web", "HOST/web"),
            ("HOST:5000/team/web:1", "HOST:5000/team/web"),
            ("HOST:5000/web", "HOST:5000/web"),
            ("HOST/web:1@sha256:abc", "HOST/web"),
            ("HOST/web@sha256:abc", "HOST/web"),
        ] {
            assert_eq!(repository(image), repo, "{image}");
        }
    }

    /// config.go `DockerConfigEntry.UnmarshalJSON` and `decodeDockerConfigFieldAuth`.
    #[test]
    fn an_entrys_credentials_are_read_as_the_kubelet_reads_them() {
        let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
        let unpadded = |s: &str| base64::engine::general_purpose::STANDARD_NO_PAD.encode(s);
        let ok = |u: &str, p: &str| Ok((u.to_owned(), p.to_owned()));
        let cases = [
            (
                r#"{"username":"AWS","password":"fresh"}"#.to_owned(),
                ok("AWS", "fresh"),
            ),
            // `auth` wins over username and password, whichever comes first.
            (
                format!(
                    r#"{{"username":"AWS","password":"fresh","auth":"{}"}}"#,
                    b64("AWS:stale")
                ),
                ok("AWS", "stale"),
            ),
            (
                format!(r#"{{"auth":"{}","password":"fresh"}}"#, b64("AWS:stale")),
                ok("AWS", "stale"),
            ),
            // An empty `auth` is none.
            (
                r#"{"username":"AWS","password":"fresh","auth":""}"#.to_owned(),
                ok("AWS", "fresh"),
            ),
            // Unpadded base64, and a password holding `:`.
            (
                format!(r#"{{"auth":"{}"}}"#, unpadded("AWS:a:b")),
                ok("AWS", "a:b"),
            ),
            // Any letter case of a field name, the last one winning.
            (
                r#"{"Username":"AWS","password":"one","PASSWORD":"two"}"#.to_owned(),
                ok("AWS", "two"),
            ),
            (
                format!(r#"{{"AUTH":"{}","password":"x"}}"#, b64("AWS:auth")),
                ok("AWS", "auth"),
            ),
            (
                r#"{"username":"AWS","paſſword":"folded"}"#.to_owned(),
                ok("AWS", "folded"),
            ),
            // A null leaves the field as it was.
            (
                r#"{"password":"kept","Password":null}"#.to_owned(),
                ok("", "kept"),
            ),
        ];
        for (entry, expected) in cases {
            assert_eq!(credentials(&entry), expected, "{entry}");
        }
        for bad in [
            r#"{"auth":"not base64!"}"#.to_owned(),
            format!(r#"{{"auth":"{}"}}"#, b64("no-colon")),
            r#"{"password":7}"#.to_owned(),
            r#""a string""#.to_owned(),
        ] {
            assert!(credentials(&bad).is_err(), "{bad}");
        }
    }
}
