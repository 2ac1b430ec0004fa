//! A spoke's kubeconfig made into the client configuration the hub reaches it with, and what a
//! kubeconfig may not hold.
//!
//! The hub sends one request with this credential (the TokenRequest, or impersonation), so the
//! kubeconfig must carry it as data: the image runs no exec or auth-provider plugin (there is
//! none in it), and a kubeconfig read from a Secret may not name files (a path in a Secret
//! names a file of the hub's pod, not of the cluster's owner). A kubeconfig mounted as a file
//! (`dir:`) may name its neighbours. Skipping the server's certificate check is refused: the
//! hub would hand its credential to whoever answers.
//!
//! What is refused is said without the credential: no message here quotes the kubeconfig.

use kube::config::{AuthInfo, Cluster, KubeConfigOptions, Kubeconfig};

/// What a plugin refusal tells the operator to do instead.
const GIVE_DATA: &str = "give a token or client certificate";

/// Whether the kubeconfig may name files of the hub's pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Paths {
    /// Read from a Secret: data fields only.
    Refused,
    /// Read from a file (`dir:`): a path is the file's neighbour.
    Allowed,
}

/// The client configuration of a kubeconfig read from a Secret (Cluster API's `value`, or
/// Argo CD's config made into a kubeconfig), by its current context. `origin` says where the
/// kubeconfig is, as the refusal names it (`Secret fleet/prod-kubeconfig, key value`).
/// Refused (the message says why and what to do): an exec or auth-provider user, a file path,
/// `insecure-skip-tls-verify: true`, no credential at all.
pub async fn config(origin: &str, kubeconfig: Kubeconfig) -> Result<kube::Config, String> {
    build(origin, kubeconfig, Paths::Refused).await
}

/// As [`config`], for a kubeconfig read from a file (`dir:`), whose paths
/// (`certificate-authority`, `client-certificate`, `client-key`, `tokenFile`) name files of
/// the hub's pod, resolved from the file's directory (`Kubeconfig::read_from` does).
pub async fn config_from_file(
    origin: &str,
    kubeconfig: Kubeconfig,
) -> Result<kube::Config, String> {
    build(origin, kubeconfig, Paths::Allowed).await
}

async fn build(origin: &str, kubeconfig: Kubeconfig, paths: Paths) -> Result<kube::Config, String> {
    let (cluster, user) = chosen(&kubeconfig).map_err(|e| format!("{origin}: {e}"))?;
    refusal(cluster, &user, paths).map_err(|e| format!("{origin}: {e}"))?;
    kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .map_err(|e| format!("{origin}: {}", crate::logging::error_chain(&e)))
}

/// The cluster and user of the kubeconfig's current context, as kube loads them (a context
/// without a user, or naming none there is, is anonymous).
fn chosen(kubeconfig: &Kubeconfig) -> Result<(&Cluster, AuthInfo), String> {
    let context_name = kubeconfig
        .current_context
        .as_deref()
        .filter(|c| !c.is_empty())
        .ok_or("the kubeconfig has no current-context: set it to the context of this cluster")?;
    let context = kubeconfig
        .contexts
        .iter()
        .find(|c| c.name == context_name)
        .and_then(|c| c.context.as_ref())
        .ok_or_else(|| {
            format!("the kubeconfig's current-context {context_name:?} is not among its contexts")
        })?;
    let cluster = kubeconfig
        .clusters
        .iter()
        .find(|c| c.name == context.cluster)
        .and_then(|c| c.cluster.as_ref())
        .ok_or_else(|| {
            format!(
                "the kubeconfig's context {context_name:?} names the cluster {:?}, which it does not hold",
                context.cluster
            )
        })?;
    let user = context
        .user
        .as_deref()
        .and_then(|u| kubeconfig.auth_infos.iter().find(|a| a.name == u))
        .and_then(|a| a.auth_info.clone())
        .unwrap_or_default();
    Ok((cluster, user))
}

/// Why this cluster and user can't be used, if they can't.
fn refusal(cluster: &Cluster, user: &AuthInfo, paths: Paths) -> Result<(), String> {
    if let Some(exec) = &user.exec {
        let command = exec.command.as_deref().unwrap_or("?");
        return Err(format!(
            "the user runs the exec plugin {command:?}: exec plugins are not run (the image has none); {GIVE_DATA}"
        ));
    }
    if let Some(provider) = &user.auth_provider {
        return Err(format!(
            "the user uses the auth-provider {:?}: auth-provider plugins are not run (the image has none); {GIVE_DATA}",
            provider.name
        ));
    }
    if cluster.insecure_skip_tls_verify == Some(true) {
        return Err(
            "insecure-skip-tls-verify is true: the hub would send its credential to \
             whoever answers; give the cluster's CA (certificate-authority-data) instead"
                .into(),
        );
    }
    if paths == Paths::Refused {
        let files = [
            (
                "certificate-authority",
                cluster.certificate_authority.as_ref(),
            ),
            ("client-certificate", user.client_certificate.as_ref()),
            ("client-key", user.client_key.as_ref()),
            ("tokenFile", user.token_file.as_ref()),
        ];
        if let Some((field, path)) = files.iter().find_map(|(f, p)| p.map(|p| (f, p))) {
            return Err(format!(
                "{field} names the file {path:?}: a kubeconfig in a Secret must hold its data \
                 (certificate-authority-data, client-certificate-data, client-key-data, token), \
                 not paths"
            ));
        }
    }
    let has_credential = user.token.is_some()
        || user.token_file.is_some()
        || user.password.is_some()
        || user.client_key_data.is_some()
        || user.client_key.is_some();
    if !has_credential {
        return Err(
            "the user has no credential: give a token, a client certificate and key, or a \
             username and password"
                .into(),
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use secrecy::ExposeSecret;

    /// A kubeconfig with one cluster and one user, `cluster` and `user` its YAML bodies.
    fn kubeconfig(cluster: &str, user: &str) -> Kubeconfig {
        let indent = |s: &str| s.lines().map(|l| format!("    {l}\n")).collect::<String>();
        Kubeconfig::from_yaml(&format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: c\n\
             contexts:\n- name: c\n  context:\n    cluster: k\n    user: u\n\
             clusters:\n- name: k\n  cluster:\n{}\
             users:\n- name: u\n  user:\n{}",
            indent(cluster),
            indent(user)
        ))
        .unwrap()
    }

    const SERVER: &str = "server: https://spoke.example:6443";

    async fn refused(cluster: &str, user: &str) -> String {
        config(
            "Secret fleet/a-kubeconfig, key value",
            kubeconfig(cluster, user),
        )
        .await
        .unwrap_err()
    }

    #[tokio::test]
    async fn a_token_user_becomes_the_config_of_its_current_context() {
        let config = config("x", kubeconfig(SERVER, "token: abc")).await.unwrap();
        assert_eq!(
            config.cluster_url.to_string(),
            "https://spoke.example:6443/"
        );
        assert_eq!(config.auth_info.token.unwrap().expose_secret(), "abc");
        assert!(!config.accept_invalid_certs);
    }

    #[tokio::test]
    async fn an_exec_user_is_refused_saying_no_plugin_runs() {
        let error = refused(SERVER, "exec:\n  apiVersion: client.authentication.k8s.io/v1\n  command: aws\n  args: [eks, get-token]").await;
        assert!(
            error.starts_with("Secret fleet/a-kubeconfig, key value: "),
            "{error}"
        );
        assert!(
            error.contains(
                "exec plugins are not run (the image has none); give a token or client certificate"
            ),
            "{error}"
        );
    }

    #[tokio::test]
    async fn an_auth_provider_user_is_refused() {
        let error = refused(SERVER, "auth-provider:\n  name: gcp\n  config: {}").await;
        assert!(
            error.contains("auth-provider plugins are not run"),
            "{error}"
        );
    }

    #[tokio::test]
    async fn an_exec_user_is_refused_from_a_file_too() {
        let kc = kubeconfig(
            SERVER,
            "exec:\n  apiVersion: client.authentication.k8s.io/v1\n  command: kubelogin",
        );
        let error = config_from_file("file prod", kc).await.unwrap_err();
        assert!(error.contains("exec plugins are not run"), "{error}");
    }

    #[tokio::test]
    async fn skipping_the_certificate_check_is_refused() {
        let error = refused(
            &format!("{SERVER}\ninsecure-skip-tls-verify: true"),
            "token: abc",
        )
        .await;
        assert!(
            error.contains("insecure-skip-tls-verify is true"),
            "{error}"
        );
        let kc = kubeconfig(
            &format!("{SERVER}\ninsecure-skip-tls-verify: true"),
            "token: abc",
        );
        assert!(config_from_file("f", kc).await.is_err());
    }

    #[tokio::test]
    async fn file_paths_are_refused_in_a_secret_and_followed_in_a_file() {
        for (cluster, user, field) in [
            (
                format!("{SERVER}\ncertificate-authority: /etc/ca.crt"),
                "token: abc",
                "certificate-authority",
            ),
            (SERVER.into(), "tokenFile: /var/run/token", "tokenFile"),
            (
                SERVER.into(),
                "client-certificate: /c.crt\nclient-key: /c.key",
                "client-certificate",
            ),
        ] {
            let error = refused(&cluster, user).await;
            assert!(
                error.contains(&format!("{field} names the file")),
                "{error}"
            );
        }
        let kc = kubeconfig(SERVER, "tokenFile: /var/run/token");
        let config = config_from_file("f", kc).await.unwrap();
        assert_eq!(
            config.auth_info.token_file.as_deref(),
            Some("/var/run/token")
        );
    }

    #[tokio::test]
    async fn a_user_without_a_credential_is_refused() {
        let error = refused(SERVER, "{}").await;
        assert!(error.contains("the user has no credential"), "{error}");
    }

    #[tokio::test]
    async fn a_kubeconfig_without_its_current_context_is_refused() {
        let mut kc = kubeconfig(SERVER, "token: abc");
        kc.current_context = None;
        let error = config("x", kc).await.unwrap_err();
        assert!(error.contains("no current-context"), "{error}");
    }

    #[tokio::test]
    async fn no_refusal_quotes_the_credential() {
        for user in [
            "token: s3cr3t\nexec:\n  command: x",
            "password: s3cr3t\nauth-provider:\n  name: oidc",
        ] {
            let error = refused(SERVER, user).await;
            assert!(!error.contains("s3cr3t"), "{error}");
        }
    }
}
