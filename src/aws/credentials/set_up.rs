//! Which base source a run would sign with, judged from the environment alone: the first
//! source of the chain's order that is set up, as each of aws-config's providers decides
//! before it calls anything (aws-config 1.13: the environment provider reads
//! AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, the profile provider the profile files, the
//! web identity provider AWS_ROLE_ARN and AWS_WEB_IDENTITY_TOKEN_FILE, the container
//! provider AWS_CONTAINER_CREDENTIALS_{RELATIVE,FULL}_URI, instance metadata
//! AWS_EC2_METADATA_DISABLED). `ecr-refresh check` names it without asking AWS; a refresh
//! still takes its source from the chain itself ([`super::Chain`]).

use std::fmt;
use std::path::{Path, PathBuf};

use super::Source;

/// A source that is set up, and what set it up (variables, or a file).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetUp {
    pub source: Source,
    /// `AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY`, `~/.aws/config`: for the reader.
    pub by: String,
    /// The profile's name, for the profile source.
    profile: Option<String>,
}

impl fmt::Display for SetUp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.profile {
            Some(name) => write!(f, "{} {name} ({})", self.source, self.by),
            None => write!(f, "{} ({})", self.source, self.by),
        }
    }
}

/// The source set up in this process's environment and home directory, if any.
pub fn here() -> Option<SetUp> {
    first_set_up(|name| std::env::var(name).ok(), |path| path.is_file())
}

/// The first source set up, in the chain's order: `var` reads a variable (empty counts as
/// unset, as the SDK's providers count it), `exists` tells whether a profile file is there.
pub fn first_set_up(
    var: impl Fn(&str) -> Option<String>,
    exists: impl Fn(&Path) -> bool,
) -> Option<SetUp> {
    let var = |name: &str| var(name).filter(|v| !v.trim().is_empty());
    let set_up = |source, by: &str| SetUp {
        source,
        by: by.to_owned(),
        profile: None,
    };
    // The environment provider: the key pair (or its older names).
    for (id, secret) in [
        ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"),
        ("AWS_ACCESS_KEY", "AWS_SECRET_KEY"),
    ] {
        if var(id).is_some() && var(secret).is_some() {
            return Some(set_up(Source::Environment, &format!("{id}, {secret}")));
        }
    }
    // The profile provider: a profile named, or a profile file present (then the default
    // profile, which the chain passes over when it holds no credentials).
    if let Some(name) = var("AWS_PROFILE") {
        return Some(SetUp {
            source: Source::Profile,
            by: "AWS_PROFILE".to_owned(),
            profile: Some(name),
        });
    }
    let home = var("HOME").map(PathBuf::from);
    let files = [
        ("AWS_CONFIG_FILE", ".aws/config"),
        ("AWS_SHARED_CREDENTIALS_FILE", ".aws/credentials"),
    ];
    for (variable, default) in files {
        let path = var(variable)
            .map(PathBuf::from)
            .or_else(|| home.as_ref().map(|h| h.join(default)));
        if let Some(path) = path.filter(|p| exists(p)) {
            return Some(SetUp {
                source: Source::Profile,
                by: format!(
                    "{}; the next source if it holds no credentials",
                    path.display()
                ),
                profile: Some("default".to_owned()),
            });
        }
    }
    if var("AWS_ROLE_ARN").is_some() && var("AWS_WEB_IDENTITY_TOKEN_FILE").is_some() {
        return Some(set_up(
            Source::WebIdentity,
            "AWS_ROLE_ARN, AWS_WEB_IDENTITY_TOKEN_FILE",
        ));
    }
    for uri in [
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    ] {
        if var(uri).is_some() {
            return Some(set_up(Source::Container, uri));
        }
    }
    let imds_off = var("AWS_EC2_METADATA_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true"));
    (!imds_off).then(|| set_up(Source::InstanceMetadata, "no other source set up"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The variables, the profile files present, and what is expected.
    type Case<'a> = (&'a [(&'a str, &'a str)], &'a [&'a str], Option<&'a str>);

    fn judged(vars: &[(&str, &str)], files: &[&str]) -> Option<String> {
        first_set_up(
            |name| {
                vars.iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| (*v).to_owned())
            },
            |path| files.iter().any(|f| Path::new(f) == path),
        )
        .map(|s| s.to_string())
    }

    #[test]
    fn the_first_source_set_up_in_the_chains_order_is_named_with_what_set_it_up() {
        let keys = [
            ("AWS_ACCESS_KEY_ID", "AKID"),
            ("AWS_SECRET_ACCESS_KEY", "secret"),
        ];
        let web = [
            ("AWS_ROLE_ARN", "arn:aws:iam::1:role/r"),
            ("AWS_WEB_IDENTITY_TOKEN_FILE", "/var/run/token"),
        ];
        let off = ("AWS_EC2_METADATA_DISABLED", "true");
        let cases: &[Case<'_>] = &[
            (
                &keys,
                &[],
                Some("static keys (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY)"),
            ),
            (
                &[keys[0], keys[1], web[0], web[1]],
                &[],
                Some("static keys (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY)"),
            ),
            (
                &[("AWS_ACCESS_KEY_ID", "AKID"), web[0], web[1]],
                &[],
                Some("web identity (AWS_ROLE_ARN, AWS_WEB_IDENTITY_TOKEN_FILE)"),
            ),
            (
                &[
                    ("AWS_ACCESS_KEY_ID", ""),
                    ("AWS_SECRET_ACCESS_KEY", ""),
                    off,
                ],
                &[],
                None,
            ),
            (
                &[("AWS_PROFILE", "dev"), web[0], web[1]],
                &[],
                Some("profile dev (AWS_PROFILE)"),
            ),
            (
                &[("HOME", "/home/me"), web[0], web[1]],
                &["/home/me/.aws/credentials"],
                Some(
                    "profile default (/home/me/.aws/credentials; the next source if it holds no credentials)",
                ),
            ),
            (
                &[("HOME", "/home/me"), ("AWS_CONFIG_FILE", "/etc/aws")],
                &["/etc/aws", "/home/me/.aws/config"],
                Some("profile default (/etc/aws; the next source if it holds no credentials)"),
            ),
            (
                &[
                    web[0],
                    (
                        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
                        "http://169.254.170.23/v1",
                    ),
                ],
                &[],
                Some("container credentials (AWS_CONTAINER_CREDENTIALS_FULL_URI)"),
            ),
            (&[], &[], Some("instance metadata (no other source set up)")),
            (&[("AWS_EC2_METADATA_DISABLED", "TRUE")], &[], None),
        ];
        for (vars, files, expected) in cases {
            assert_eq!(
                judged(vars, files).as_deref(),
                *expected,
                "{vars:?} {files:?}"
            );
        }
    }
}
