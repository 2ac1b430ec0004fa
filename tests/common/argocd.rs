//! Which Argo CD Secret Argo CD hands an Application's `repoURL` to, written out from argo-cd's
//! own code, so that a test can judge the Secrets ecr-refresh wrote as Argo CD will.
//!
//! From argo-cd (v2.8 to v3.x, unchanged in these parts):
//! - util/git/git.go, `NormalizeGitURL`: lowercase and trim the URL, rewrite an scp-like SSH
//!   URL (none of ours), strip one trailing `.git`, `url.Parse` it (an error gives `""`) and
//!   print it back. A trailing `/` is KEPT. `SameURL(a, b)` is
//!   `NormalizeGitURL(a) == NormalizeGitURL(b)`.
//! - util/db/repository_secrets.go, `getRepositorySecret`: a `repository` Secret serves the
//!   repoURL it is the `SameURL` of, for an Application whose project equals the Secret's
//!   `project`, or for any project when the Secret has none (the fallback).
//! - the same file, `getRepositoryCredentialIndex`: otherwise (or to fill a repository that
//!   has no credentials) the `repo-creds` Secret whose normalised `url` the normalised repoURL
//!   `strings.HasPrefix`es, the longest one winning; `project` is not read on repo-creds.

use serde_json::Value;

/// Go's `url.Parse(s).String()` for the URLs these tests name: the text back unchanged
/// (no escapes, no user info), or None where `url.Parse` fails. The one failure that
/// matters here: with no scheme (a scheme starts with a letter, so `123456789012.dkr…` has
/// none), a colon in the first path segment ("first path segment in URL cannot contain
/// colon"), as in `<host>:444/c`.
fn go_url_round_trip(s: &str) -> Option<String> {
    let scheme_end = s.find(':').filter(|&i| {
        let scheme = &s[..i];
        scheme.starts_with(|c: char| c.is_ascii_alphabetic())
            && scheme
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
    });
    if scheme_end.is_none() {
        let first_segment = s.split('/').next().unwrap_or("");
        if first_segment.contains(':') {
            return None;
        }
    }
    Some(s.to_owned())
}

/// argo-cd's `git.NormalizeGitURL`, for URLs with no SSH form.
pub(crate) fn normalize_git_url(url: &str) -> String {
    let url = url.trim().to_lowercase();
    let url = url.strip_suffix(".git").unwrap_or(&url);
    go_url_round_trip(url).unwrap_or_default()
}

fn data(secret: &Value, key: &str) -> Option<String> {
    secret["data"][key].as_str().map(|v| {
        String::from_utf8(
            base64::Engine::decode(&base64::engine::general_purpose::STANDARD, v).expect("base64"),
        )
        .expect("UTF-8")
    })
}

fn secret_type(secret: &Value) -> Option<&str> {
    secret["metadata"]["labels"]["argocd.argoproj.io/secret-type"].as_str()
}

fn name(secret: &Value) -> String {
    secret["metadata"]["name"]
        .as_str()
        .expect("a name")
        .to_owned()
}

/// The name of the Secret whose credentials Argo CD uses for `repo_url` in an Application of
/// `project`, among `secrets` (the Argo CD namespace's); None: it pulls without any.
pub(crate) fn credentials_for(secrets: &[Value], repo_url: &str, project: &str) -> Option<String> {
    let same_url = |s: &Value| {
        data(s, "url").is_some_and(|u| normalize_git_url(&u) == normalize_git_url(repo_url))
    };
    let repositories: Vec<&Value> = secrets
        .iter()
        .filter(|s| secret_type(s) == Some("repository") && same_url(s))
        .collect();
    let repository = repositories
        .iter()
        .find(|s| data(s, "project").unwrap_or_default() == project)
        .or_else(|| {
            repositories
                .iter()
                .find(|s| data(s, "project").unwrap_or_default().is_empty())
        });
    if let Some(repository) = repository
        && (data(repository, "username").is_some() || data(repository, "password").is_some())
    {
        return Some(name(repository));
    }
    let normalized = normalize_git_url(repo_url);
    let mut best: Option<(usize, &Value)> = None;
    for creds in secrets
        .iter()
        .filter(|s| secret_type(s) == Some("repo-creds"))
    {
        let url = normalize_git_url(&data(creds, "url").unwrap_or_default());
        if normalized.starts_with(&url) && best.is_none_or(|(len, _)| url.len() > len) {
            best = Some((url.len(), creds));
        }
    }
    best.map(|(_, creds)| name(creds))
}
