//! The process environment as text: the variables configuration may read, and an error for
//! one of ours (or the AWS SDK's) that is not UTF-8, naming it and never its value.

use std::ffi::OsString;

use super::{ConfigError, PREFIX};

/// Variables whose values must be text, by prefix: ours, and the AWS SDK's, whose errors print
/// a value that is not (its credentials provider's "environment variable was not valid unicode:
/// \"...\""), an AWS_SECRET_ACCESS_KEY included. Caught here, before the SDK reads them.
const MUST_BE_TEXT: [&str; 2] = [PREFIX, "AWS_"];

/// The variables that are text. One that must be and is not is an error naming it, never
/// showing its value. Any other is not ours to read: `envFrom` over a Secret with binary data
/// puts such values in the environment, and they are skipped unread (`std::env::vars` would
/// panic and print them).
pub(super) fn text_vars(
    vars: impl IntoIterator<Item = (OsString, OsString)>,
) -> Result<Vec<(String, String)>, ConfigError> {
    let mut text = Vec::new();
    for (name, value) in vars {
        let ours = MUST_BE_TEXT
            .iter()
            .any(|prefix| name.as_encoded_bytes().starts_with(prefix.as_bytes()));
        match (name.to_str(), value.into_string()) {
            (Some(name), Ok(value)) => text.push((name.to_owned(), value)),
            _ if ours => {
                return Err(ConfigError::NotUtf8 {
                    variable: name.to_string_lossy().into_owned(),
                });
            }
            _ => {}
        }
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_that_is_not_text_is_named_not_shown_and_only_ours_count() {
        use std::os::unix::ffi::OsStringExt;
        let bytes = |b: &[u8]| OsString::from_vec(b.to_vec());
        let theirs = text_vars([
            (bytes(b"APP_KEY"), bytes(b"hunter2\xff")),
            (bytes(b"APP_\xff"), bytes(b"x")),
            (bytes(b"HOME"), bytes(b"/root")),
        ])
        .unwrap();
        assert_eq!(theirs, [("HOME".to_owned(), "/root".to_owned())]);
        for (name, value) in [
            (&b"ECR_REFRESH_SECRET_NAME"[..], &b"hunter2\xff"[..]),
            (b"ECR_REFRESH_\xff", b"hunter2"),
            (b"AWS_SECRET_ACCESS_KEY", b"hunter2\xff"),
        ] {
            let message = text_vars([(bytes(name), bytes(value))])
                .unwrap_err()
                .to_string();
            let name = String::from_utf8_lossy(name);
            assert!(message.starts_with(name.as_ref()), "{message}");
            assert!(!message.contains("hunter2"), "{message}");
        }
    }
}
