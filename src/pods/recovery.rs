//! Whether evicting a pod stuck on a pull would let it pull: the one decision, shared by the
//! eviction (ECR_REFRESH_EVICT_STUCK_PODS) and by `check`, which says when the option would
//! recover a pod.
//!
//! Decided from the pod's state alone, not from what this run wrote: pods past one run's
//! ECR_REFRESH_EVICT_LIMIT are evicted by the next, which writes nothing. Nor from when the
//! Secret was written: only a pod that lists no imagePullSecrets, whose ServiceAccount now
//! lists the Secret, needs an eviction (a pod listing the Secret pulls with it at its next
//! retry), so check reads nothing more on either of its read paths than the eviction does.

use std::collections::HashMap;

use k8s_openapi::api::core::v1::Pod;

use super::{
    Account, Managed, controller, ecr_images, not_wired, own_pull_secrets, references_directly,
    service_account, serving, stuck_in_template,
};

/// The owners whose controllers recreate an evicted pod, as it was. A Job recreates one too,
/// but counts the eviction as a failed pod against its backoffLimit: its pods are left.
pub(super) const CONTROLLERS: &[&str] = &["ReplicaSet", "StatefulSet", "DaemonSet"];

/// Why a pull failed, read from the kubelet's message (`waiting.message`). The kubelet quotes
/// the runtime's error (containerd's resolver: `authorization failed: no basic auth
/// credentials` when it had none, `... 401 Unauthorized` for a password refused, `...: not
/// found`), also in ImagePullBackOff (`Back-off pulling image "x": ErrImagePull: ...`, kubelet
/// 1.37's pkg/kubelet/images/image_manager.go). As the login check tells a registry's answers apart
/// (src/check/login.rs): 401 is the credentials; 404 (a missing tag or repository) and 403 (a
/// repository the credentials may not read) are not, and no Secret fixes them. ECR answers an
/// expired token with 403 "Your authorization token has expired": the credentials.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cause {
    /// No credentials, or credentials the registry no longer takes.
    Credentials,
    /// The image is not there: a missing tag, digest or repository.
    NotFound,
    /// The credentials were taken, and may not read the repository.
    Denied,
    /// The message says neither (a network error, a back-off without the error quoted).
    Unknown,
}

/// Why the kubelet's message says a pull failed: by the registry's answer, never by the
/// references the message quotes. The image reference and the URL the runtime asked hold
/// numbers (an account id such as 140123456789, a tag `v1.401.0`, a digest) but no space, so
/// only a word of its own (`401`, `Unauthorized`, trimmed of the punctuation around it) or a
/// phrase of words (`no basic auth credentials`) is read as the answer.
fn cause(message: &str) -> Cause {
    let lower = message.to_ascii_lowercase();
    let words: Vec<&str> = lower
        .split_whitespace()
        .map(|w| w.trim_matches(|c: char| !c.is_ascii_alphanumeric()))
        .filter(|w| !w.is_empty())
        .collect();
    let text = format!(" {} ", words.join(" "));
    let says = |phrases: &[&str]| phrases.iter().any(|p| text.contains(&format!(" {p} ")));
    if says(&[
        "401",
        "unauthorized",
        "no basic auth credentials",
        "authorization token has expired",
        "authentication required",
    ]) {
        Cause::Credentials
    } else if says(&["404", "not found", "manifest unknown", "name unknown"]) {
        Cause::NotFound
    } else if says(&["403", "denied", "forbidden"]) {
        Cause::Denied
    } else {
        Cause::Unknown
    }
}

/// What a pod's recovery is held against.
pub struct RecoveryContext<'a> {
    pub secret_name: &'a str,
    pub managed: &'a Managed,
    pub accounts: &'a HashMap<String, Account>,
}

/// What to do about a pod stuck on our registry for want of credentials.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Recovery {
    /// Evict it: its controller recreates it, and the new pod pulls with the Secret.
    Evict { reason: String },
    /// An eviction would not help, or nothing would bring the pod back: why, and what to do.
    Left { reason: String },
}

/// Whether evicting `pod` would let it pull. None: it is not ours to touch (not stuck, stuck on
/// another registry or for another reason than the credentials, or it lists the Secret itself
/// and pulls with it at its next retry).
///
/// Never touched, whatever the rest says: a pod whose regular containers all run (it serves;
/// a sidecar's or a debug container's pull is no reason to stop it), and a pod stuck only in
/// an ephemeral container (`kubectl debug`: a replacement has none, so evicting it would only
/// stop the app). Both stay in check's findings (`super::stuck`).
pub fn recovery(pod: &Pod, cx: &RecoveryContext<'_>) -> Option<Recovery> {
    if serving(pod) {
        return None;
    }
    let images = ecr_images(pod);
    let waiting = stuck_in_template(pod);
    if waiting.is_empty() {
        return None;
    }
    // Every stuck container on a host we cover, for want of credentials: any other, and the
    // replacement would stay stuck for it.
    let ours = waiting.iter().all(|(container, _, message)| {
        images
            .iter()
            .find(|i| &i.container == container)
            .is_some_and(|i| cx.managed.covers(&i.host))
            && cause(message) == Cause::Credentials
    });
    if !ours {
        return None;
    }
    let secret = cx.secret_name;
    // Never touched: a pod that lists the Secret itself. The kubelet reads a pod's pull Secrets
    // at every sync, so it pulls with the Secret as it is now at its next retry (the image
    // back-off: 10 s, doubling to 300 s; tests/node/evict.rs times it). An eviction would save
    // at most that back-off, and a Job counts it as a failure.
    if references_directly(pod, secret) {
        return None;
    }
    // The one case nothing else recovers: a ServiceAccount's list reaches a pod only when it is
    // created and lists none of its own (the ServiceAccount admission plugin), so a pod created
    // before its ServiceAccount listed the Secret never gets it; a replacement does.
    let wired_by_account = own_pull_secrets(pod).next().is_none()
        && matches!(
            cx.accounts.get(service_account(pod)),
            Some(Account::Found { lists_secret: true })
        );
    if !wired_by_account {
        let why = not_wired(pod, secret, cx.accounts)
            .unwrap_or_else(|| format!("it does not pull with {secret}"));
        return Some(Recovery::Left {
            reason: format!("a replacement would not carry {secret}: {why}"),
        });
    }
    let evict = format!(
        "it lists no imagePullSecrets and was created before its ServiceAccount {} listed \
         {secret}; a replacement gets {secret} from the ServiceAccount",
        service_account(pod)
    );
    match controller(pod) {
        Some(o) if CONTROLLERS.contains(&o.kind.as_str()) => {
            Some(Recovery::Evict { reason: evict })
        }
        Some(o) if o.kind == "Job" => Some(Recovery::Left {
            reason: format!(
                "its controller is a Job ({}), which counts an evicted or deleted pod as a \
                 failure against its backoffLimit (with backoffLimit: 0 the Job fails instead of \
                 recovering); a new pod would pull ({evict}): if the Job may fail once more, \
                 delete the pod (kubectl delete pod); else run the Job again (a CronJob's next \
                 run creates pods that carry {secret})",
                o.name
            ),
        }),
        Some(o) => Some(Recovery::Left {
            reason: format!(
                "its controller is a {} ({}), which ecr-refresh does not count on to recreate \
                 it; created again it would pull ({evict}): delete the pod yourself if its \
                 controller recreates it",
                o.kind, o.name
            ),
        }),
        None => Some(Recovery::Left {
            reason: format!(
                "a bare pod, which nothing would recreate after an eviction; created again it \
                 would pull ({evict}): delete it and create it again (kubectl replace --force -f)"
            ),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pull_failure_is_told_apart_by_the_registry_s_answer() {
        let cases = [
            (
                r#"failed to pull and unpack image "h/app:1": failed to resolve reference "h/app:1": pulling from host h failed with status code [manifests 1]: 401 Unauthorized"#,
                Cause::Credentials,
            ),
            (
                r#"Back-off pulling image "h/app:1": ErrImagePull: failed to resolve reference "h/app:1": unexpected status from HEAD request to https://h/v2/app/manifests/1: 401 Unauthorized"#,
                Cause::Credentials,
            ),
            (
                "denied: Your authorization token has expired. Reauthenticate and try again.",
                Cause::Credentials,
            ),
            (
                r#"failed to pull and unpack image "h/app:2": failed to resolve reference "h/app:2": h/app:2: not found"#,
                Cause::NotFound,
            ),
            (
                "unexpected status from HEAD request: 403 Forbidden: denied: User: arn:aws:sts::1:assumed-role/x is not authorized to perform: ecr:BatchGetImage",
                Cause::Denied,
            ),
            // containerd 2.4 with no credentials at all, as kubelet 1.37 quotes it
            // (tests/node/evict.rs).
            (
                r#"Back-off pulling image "h/app:1": ErrImagePull: failed to pull and unpack image "h/app:1": failed to resolve image: pull access denied, repository does not exist or may require authorization: authorization failed: no basic auth credentials"#,
                Cause::Credentials,
            ),
            (r#"Back-off pulling image "h/app:1""#, Cause::Unknown),
            ("dial tcp 10.0.0.1:443: i/o timeout", Cause::Unknown),
        ];
        for (message, expected) in cases {
            assert_eq!(cause(message), expected, "{message}");
        }
    }

    /// The kubelet's message quotes the image reference (in the message, and in the URL the
    /// runtime asked): an account id, a tag or a digest holding 401 (or 403, 404) says nothing
    /// about the registry's answer. Each message containerd 2 gives (core/remotes/docker:
    /// resolver.go, authorizer.go, fetcher.go, errcode.go; internal/cri/server/images), as
    /// ErrImagePull and as kubelet 1.37 quotes it in ImagePullBackOff, with such references.
    #[test]
    fn numbers_in_the_quoted_reference_are_not_the_registry_s_answer() {
        let digest = "sha256:4010401040104010401040104010401040104010401040104010401040104010";
        // (host, repository, tag or digest, how the reference joins them)
        let references = [
            (
                "140123456789.dkr.ecr.us-east-1.amazonaws.com",
                "app",
                "1",
                ":",
            ),
            (
                "123456789012.dkr.ecr.us-east-1.amazonaws.com",
                "app",
                "v1.401.0",
                ":",
            ),
            (
                "123456789012.dkr.ecr.us-east-1.amazonaws.com",
                "app",
                digest,
                "@",
            ),
            (
                "140140140140.dkr.ecr.us-east-1.amazonaws.com",
                "api-401",
                "v1.401.0-rc.403",
                ":",
            ),
            (
                "140140140140.dkr.ecr.us-east-1.amazonaws.com",
                "x403/y404",
                digest,
                "@",
            ),
        ];
        // containerd 2's messages: `{ref}` the image, `{url}` a manifest's URL, `{blob}` a blob's.
        let messages = [
            (
                r#"failed to pull and unpack image "{ref}": failed to resolve image: {ref}: not found"#,
                Cause::NotFound,
            ),
            (
                r#"failed to pull and unpack image "{ref}": failed to resolve reference "{ref}": {ref}: not found"#,
                Cause::NotFound,
            ),
            (
                r#"failed to pull and unpack image "{ref}": failed to resolve image: pull access denied, repository does not exist or may require authorization: authorization failed: no basic auth credentials"#,
                Cause::Credentials,
            ),
            (
                r#"failed to pull and unpack image "{ref}": failed to resolve image: unexpected status from HEAD request to {url}: 401 Unauthorized"#,
                Cause::Credentials,
            ),
            (
                r#"failed to pull and unpack image "{ref}": failed to copy: httpReadSeeker: failed open: unexpected status code {blob}: 401 Unauthorized"#,
                Cause::Credentials,
            ),
            (
                "failed to pull and unpack image \"{ref}\": failed to resolve image: unexpected status from HEAD request to {url}: 403 Forbidden\ndenied: Your authorization token has expired. Reauthenticate and try again.",
                Cause::Credentials,
            ),
            (
                "failed to pull and unpack image \"{ref}\": failed to resolve image: unexpected status from HEAD request to {url}: 403 Forbidden\ndenied: User: arn:aws:sts::140123456789:assumed-role/node/i-1 is not authorized to perform: ecr:BatchGetImage on resource",
                Cause::Denied,
            ),
            (
                r#"failed to pull and unpack image "{ref}": failed to copy: httpReadSeeker: failed open: could not fetch content descriptor sha256:4010 (application/vnd.oci.image.layer.v1.tar+gzip) from remote: not found"#,
                Cause::NotFound,
            ),
            (
                r#"failed to pull and unpack image "{ref}": failed to resolve image: failed to do request: Head "{url}": dial tcp 10.0.40.1:443: i/o timeout"#,
                Cause::Unknown,
            ),
        ];
        for (host, repository, tag, join) in references {
            let reference = format!("{host}/{repository}{join}{tag}");
            let url = format!("https://{host}/v2/{repository}/manifests/{tag}");
            let blob = format!("https://{host}/v2/{repository}/blobs/{digest}");
            for (template, expected) in &messages {
                let pulled = template
                    .replace("{ref}", &reference)
                    .replace("{url}", &url)
                    .replace("{blob}", &blob);
                let backoff =
                    format!("Back-off pulling image \"{reference}\": ErrImagePull: {pulled}");
                for message in [pulled, backoff] {
                    assert_eq!(cause(&message), *expected, "{message}");
                }
            }
        }
    }

    const HOST: &str = "123456789012.dkr.ecr.us-east-1.amazonaws.com";
    const SECRET: &str = "aws-ecr-token";
    const UNAUTHORIZED: &str = "failed to resolve reference: 401 Unauthorized";

    fn managed() -> Managed {
        Managed {
            hosts: vec![HOST.into()],
            any_in_region: None,
            dual_stack: false,
        }
    }

    /// A pod created at `created`, its one container on `image` waiting with `message`.
    fn pod(image: &str, message: &str, own: &[&str], owner: Option<&str>, created: &str) -> Pod {
        let owners: Vec<serde_json::Value> = owner
            .map(|kind| {
                serde_json::json!({"apiVersion": "apps/v1", "kind": kind, "name": "web-1",
                    "uid": "u", "controller": true})
            })
            .into_iter()
            .collect();
        let secrets: Vec<serde_json::Value> =
            own.iter().map(|n| serde_json::json!({"name": n})).collect();
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "web-1-abc", "namespace": "team", "ownerReferences": owners,
                "creationTimestamp": created},
            "spec": {"containers": [{"name": "app", "image": image}], "imagePullSecrets": secrets},
            "status": {"phase": "Pending", "containerStatuses": [{"name": "app", "image": image,
                "imageID": "", "ready": false, "restartCount": 0,
                "state": {"waiting": {"reason": "ImagePullBackOff", "message": message}}}]},
        }))
        .unwrap()
    }

    fn decide(pod: &Pod, account_lists: Option<bool>) -> Option<Recovery> {
        let accounts = account_lists
            .map(|lists_secret| (String::from("default"), Account::Found { lists_secret }))
            .into_iter()
            .collect();
        let managed = managed();
        let cx = RecoveryContext {
            secret_name: SECRET,
            managed: &managed,
            accounts: &accounts,
        };
        recovery(pod, &cx)
    }

    fn evicts(r: &Option<Recovery>) -> bool {
        matches!(r, Some(Recovery::Evict { .. }))
    }

    fn left(r: &Option<Recovery>) -> bool {
        matches!(r, Some(Recovery::Left { .. }))
    }

    const T0: &str = "2026-01-01T00:00:00Z";

    #[test]
    fn a_controlled_pod_without_a_list_is_evicted_once_its_service_account_lists_the_secret() {
        let image = format!("{HOST}/app:1");
        let p = pod(&image, UNAUTHORIZED, &[], Some("ReplicaSet"), T0);
        assert!(evicts(&decide(&p, Some(true))));
        // Its ServiceAccount does not list the Secret: a replacement would not carry it.
        assert!(left(&decide(&p, Some(false))));
        for kind in CONTROLLERS {
            let p = pod(&image, UNAUTHORIZED, &[], Some(kind), T0);
            assert!(evicts(&decide(&p, Some(true))), "{kind}");
        }
    }

    /// A pod that lists the Secret recovers on its own: the kubelet reads its pull Secrets at
    /// every retry (tests/node/evict.rs). Never evicted, and no line, whatever its owner,
    /// ServiceAccount or age.
    #[test]
    fn a_pod_listing_the_secret_is_never_evicted() {
        let image = format!("{HOST}/app:1");
        for kind in CONTROLLERS.iter().chain(&["Job"]) {
            for lists in [None, Some(true), Some(false)] {
                let p = pod(&image, UNAUTHORIZED, &[SECRET], Some(kind), T0);
                assert_eq!(decide(&p, lists), None, "{kind} {lists:?}");
                let both = pod(&image, UNAUTHORIZED, &["theirs", SECRET], Some(kind), T0);
                assert_eq!(decide(&both, lists), None, "{kind} {lists:?}");
            }
        }
    }

    /// A Job counts an evicted pod as a failure against its backoffLimit (a Job with
    /// backoffLimit: 0 fails instead of recovering): its pod is left, with what to do.
    #[test]
    fn a_job_s_pod_is_left_with_what_to_do() {
        let image = format!("{HOST}/app:1");
        let p = pod(&image, UNAUTHORIZED, &[], Some("Job"), T0);
        match decide(&p, Some(true)) {
            Some(Recovery::Left { reason }) => assert!(
                reason.contains("backoffLimit") && reason.contains("kubectl delete pod"),
                "{reason}"
            ),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn pods_an_eviction_would_not_recover_are_left_with_why() {
        let image = format!("{HOST}/app:1");
        let own = pod(&image, UNAUTHORIZED, &["theirs"], Some("ReplicaSet"), T0);
        match decide(&own, Some(true)) {
            Some(Recovery::Left { reason }) => {
                assert!(
                    reason.contains("theirs") && reason.contains("pod template"),
                    "{reason}"
                )
            }
            other => panic!("{other:?}"),
        }
        let bare = pod(&image, UNAUTHORIZED, &[], None, T0);
        match decide(&bare, Some(true)) {
            Some(Recovery::Left { reason }) => assert!(reason.contains("bare pod"), "{reason}"),
            other => panic!("{other:?}"),
        }
        let node = pod(&image, UNAUTHORIZED, &[], Some("Node"), T0);
        assert!(left(&decide(&node, Some(true))));
    }

    #[test]
    fn pods_stuck_for_other_reasons_or_on_other_registries_are_not_touched() {
        let image = format!("{HOST}/app:1");
        let missing_tag = pod(&image, "h/app:1: not found", &[], Some("ReplicaSet"), T0);
        assert_eq!(decide(&missing_tag, Some(true)), None);
        let denied = pod(&image, "403 Forbidden: denied", &[], Some("ReplicaSet"), T0);
        assert_eq!(decide(&denied, Some(true)), None);
        let other = "210987654321.dkr.ecr.us-east-1.amazonaws.com/app:1";
        let elsewhere = pod(other, UNAUTHORIZED, &[], Some("ReplicaSet"), T0);
        assert_eq!(decide(&elsewhere, Some(true)), None);
        let hub = pod(
            "docker.io/library/nginx:1",
            UNAUTHORIZED,
            &[],
            Some("ReplicaSet"),
            T0,
        );
        assert_eq!(decide(&hub, Some(true)), None);
        let mut running = pod(&image, UNAUTHORIZED, &[], Some("ReplicaSet"), T0);
        running
            .status
            .as_mut()
            .unwrap()
            .container_statuses
            .as_mut()
            .unwrap()[0]
            .state = None;
        assert_eq!(decide(&running, Some(true)), None);
    }

    /// A `kubectl debug` container on our registry, stuck for want of credentials, beside an
    /// app that runs: a replacement never has ephemeral containers, so an eviction only stops
    /// the app. And a native sidecar (a restartable init container) stuck on its restart's
    /// pull while the app runs: an eviction would stop a pod that serves. Neither is evicted;
    /// `stuck` still names the containers, for check's findings.
    #[test]
    fn a_pod_whose_regular_containers_run_is_never_evicted_for_a_debug_or_sidecar_container() {
        let image = format!("{HOST}/app:1");
        let tools = format!("{HOST}/tools:1");
        let running = serde_json::json!({"running": {"startedAt": T0}});
        let waiting = serde_json::json!({"waiting": {"reason": "ImagePullBackOff",
            "message": UNAUTHORIZED}});
        let status = |name: &str, image: &str, state: &serde_json::Value| {
            serde_json::json!({"name": name, "image": image, "imageID": "", "ready": false,
                "restartCount": 0, "state": state})
        };

        let mut debugged = pod(&image, UNAUTHORIZED, &[], Some("ReplicaSet"), T0);
        let spec = debugged.spec.as_mut().unwrap();
        spec.ephemeral_containers = Some(vec![
            serde_json::from_value(serde_json::json!({"name": "debugger", "image": tools,
                "targetContainerName": "app"}))
            .unwrap(),
        ]);
        let pod_status = debugged.status.as_mut().unwrap();
        pod_status.phase = Some("Running".into());
        pod_status.container_statuses = Some(vec![
            serde_json::from_value(status("app", &image, &running)).unwrap(),
        ]);
        pod_status.ephemeral_container_statuses = Some(vec![
            serde_json::from_value(status("debugger", &tools, &waiting)).unwrap(),
        ]);
        assert_eq!(decide(&debugged, Some(true)), None, "{debugged:?}");
        assert_eq!(
            super::super::stuck(&debugged)
                .into_iter()
                .map(|(c, ..)| c)
                .collect::<Vec<_>>(),
            ["debugger"],
            "check still reports the debug container"
        );
        // The app itself stuck as well: the pod is evicted for the app, not the debugger.
        let pod_status = debugged.status.as_mut().unwrap();
        pod_status.phase = Some("Pending".into());
        pod_status.container_statuses = Some(vec![
            serde_json::from_value(status("app", &image, &waiting)).unwrap(),
        ]);
        assert!(evicts(&decide(&debugged, Some(true))));

        let mut sidecar = pod(&image, UNAUTHORIZED, &[], Some("ReplicaSet"), T0);
        sidecar.spec.as_mut().unwrap().init_containers = Some(vec![
            serde_json::from_value(serde_json::json!({"name": "proxy", "image": tools,
                "restartPolicy": "Always"}))
            .unwrap(),
        ]);
        let pod_status = sidecar.status.as_mut().unwrap();
        pod_status.phase = Some("Running".into());
        pod_status.container_statuses = Some(vec![
            serde_json::from_value(status("app", &image, &running)).unwrap(),
        ]);
        pod_status.init_container_statuses = Some(vec![
            serde_json::from_value(status("proxy", &tools, &waiting)).unwrap(),
        ]);
        assert_eq!(decide(&sidecar, Some(true)), None, "{sidecar:?}");
    }
}
