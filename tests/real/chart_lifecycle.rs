//! The chart's life as an operator lives it (issue 36): install, upgrades refused and
//! applied, null values, a first run that fails, the PrometheusRule before and after its CRD,
//! and uninstall with what it leaves. Real Helm against a real kube-apiserver on which
//! kube-controller-manager's `job-controller` and `cronjob-controller` act on what the chart
//! installs.
//!
//! There is no scheduler and no kubelet: the job controller creates each Job's pod, which
//! stays Pending, so a Job ends only at its `activeDeadlineSeconds`, failed by the real
//! controller (`DeadlineExceeded`); the cronjob controller starts a Job at each slot of the
//! schedule. The releases here set a deadline of 10 s or less and `backoffLimit: 0` (but the
//! one whose deadline is null, which only waits for its Job to start), and a schedule of
//! every minute (or `suspend`), so a test waits at most about a minute, for the next slot.
//!
//! One control plane of the module's own (`ControlPlane::shared_by("chart-lifecycle")`): on
//! the binary's shared one the controllers would act on chart.rs's CronJobs, and on the Job
//! whose status that module writes by hand. Cluster-scoped objects are named per test (each
//! release has its own name); the CRD of `PrometheusRule` is created by one test only. The
//! Fleets page's `spoke-helm` recipe (issue 51) installs the shipped names, so its test starts
//! a control plane of its own (`ControlPlane::start`).
//!
//! Needs Helm and `KUBEBUILDER_ASSETS` (with kube-controller-manager).

use std::io::Write as _;
use std::process::Stdio;
use std::time::{Duration, Instant};

use control_plane::ControlPlane;
use serde_json::{Value, json};

use crate::chart::{
    Helm, PROMETHEUS_RULE_API, chart_path, env_of, get, run_as_the_charts_service_account,
};
use crate::common::real::{message, send};
use crate::common::{REGISTRY, docker_config};

/// The module's control plane, with the job and cronjob controllers running.
fn control_plane() -> &'static ControlPlane {
    let cp = ControlPlane::shared_by("chart-lifecycle");
    cp.start_controllers(&["job-controller", "cronjob-controller"]);
    cp
}

/// `f` until it gives something, every 250 ms, for at most `timeout`; then a panic that says
/// what was awaited and what `state` shows.
fn wait_for<T>(
    what: &str,
    timeout: Duration,
    mut f: impl FnMut() -> Option<T>,
    state: impl Fn() -> String,
) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(found) = f() {
            return found;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: not within {timeout:?}; now: {}",
            state()
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// The release's revisions, oldest first, with their status (`helm history -o json`).
fn revisions(helm: &Helm, release: &str, ns: &str) -> Vec<(u64, String)> {
    let out = helm.expect(&["history", release, "-n", ns, "-o", "json"], None);
    let history: Value = serde_json::from_str(&out).expect("helm history prints JSON");
    history
        .as_array()
        .expect("a list of revisions")
        .iter()
        .map(|r| {
            (
                r["revision"].as_u64().expect("a revision number"),
                r["status"].as_str().expect("a status").to_owned(),
            )
        })
        .collect()
}

/// `[(1, "superseded"), …, (n, "deployed")]`: what a history of `n` good revisions shows.
fn deployed_at(n: u64) -> Vec<(u64, String)> {
    (1..=n)
        .map(|r| (r, if r == n { "deployed" } else { "superseded" }.to_owned()))
        .collect()
}

/// The Jobs of a namespace, as the admin reads them.
fn jobs(cp: &ControlPlane, ns: &str) -> Vec<Value> {
    let out = cp.kubectl_run(&["get", "jobs", "-n", ns, "-o", "json"]);
    let list: Value = serde_json::from_str(&out).expect("kubectl prints JSON");
    list["items"].as_array().expect("items").clone()
}

fn job_summary(cp: &ControlPlane, ns: &str) -> String {
    jobs(cp, ns)
        .iter()
        .map(|j| format!("{} {}", j["metadata"]["name"], j["status"]))
        .collect::<Vec<_>>()
        .join("; ")
}

/// The value of `name` in a Job's (or a Job template's) container, if set.
fn job_env(job_spec: &Value, name: &str) -> Option<String> {
    job_spec["template"]["spec"]["containers"][0]["env"]
        .as_array()?
        .iter()
        .find(|e| e["name"] == name)
        .map(|e| e["value"].as_str().unwrap_or_default().to_owned())
}

/// Jobs the CronJob `cronjob` owns: the ones the cronjob controller started.
fn started_by(job: &Value, cronjob: &str) -> bool {
    job["metadata"]["ownerReferences"]
        .as_array()
        .is_some_and(|owners| {
            owners
                .iter()
                .any(|o| o["kind"] == "CronJob" && o["name"] == cronjob)
        })
}

/// The condition of `kind` (`Failed`, `Complete`, …) a Job's status holds as true.
fn condition<'a>(job: &'a Value, kind: &str) -> Option<&'a Value> {
    job["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind && c["status"] == "True")
}

fn stderr_of(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Install; an upgrade whose extraEnv names a variable the chart sets is refused and leaves
/// the release deployed at its revision; an extraEnv entry of its own added and removed; a
/// changed value (concurrency) reaches the CronJob and the next Job the cronjob controller
/// starts (issue 36 item 1).
#[test]
#[ignore = "needs helm and KUBEBUILDER_ASSETS (bash .ci/test)"]
fn an_extra_env_override_is_refused_and_a_changed_value_reaches_the_next_scheduled_job() {
    let cp = control_plane();
    let helm = Helm::against(cp);
    let (release, ns) = ("upgrades-ecr-refresh", "upgrades");
    let chart = chart_path();
    let values = |concurrency: u32, extra_env: Value| {
        json!({"schedule": "* * * * *", "backoffLimit": 0, "activeDeadlineSeconds": 10,
               "concurrency": concurrency, "extraEnv": extra_env})
    };
    let upgrade = |values: &Value| helm.run(&["upgrade", release, &chart, "-n", ns], Some(values));
    let cronjob = || get(cp, "cronjob", Some(ns), release).expect("the CronJob");
    let all = |name: &str| -> Vec<String> {
        env_of(&cronjob())
            .into_iter()
            .filter(|(n, _)| n == name)
            .map(|(_, v)| v)
            .collect()
    };

    let started = Instant::now();
    helm.install(release, ns, &values(4, json!([])));
    println!("helm install: {:.1?}", started.elapsed());
    assert_eq!(revisions(&helm, release, ns), deployed_at(1));
    assert_eq!(all("ECR_REFRESH_CONCURRENCY"), ["4"]);

    let out = upgrade(&values(
        4,
        json!([{"name": "ECR_REFRESH_CONCURRENCY", "value": "8"}]),
    ));
    let stderr = stderr_of(&out);
    assert!(!out.status.success(), "the override was taken: {stderr}");
    assert!(
        stderr.contains(
            "extraEnv sets ECR_REFRESH_CONCURRENCY, which the chart sets itself from its values: \
             set that value instead"
        ),
        "says which variable and what to set: {stderr}"
    );
    assert_eq!(
        revisions(&helm, release, ns),
        deployed_at(1),
        "the refused upgrade left the release deployed at revision 1, no failed revision"
    );
    assert_eq!(
        all("ECR_REFRESH_CONCURRENCY"),
        ["4"],
        "one entry, as installed"
    );

    // A variable of its own is added, then removed: Helm's patch, keyed by name, takes both.
    let rust_log = json!([{"name": "RUST_LOG", "value": "debug"}]);
    let out = upgrade(&values(4, rust_log));
    assert!(out.status.success(), "{}", stderr_of(&out));
    assert_eq!(all("RUST_LOG"), ["debug"]);
    let out = upgrade(&values(4, json!([])));
    assert!(out.status.success(), "{}", stderr_of(&out));
    assert!(all("RUST_LOG").is_empty(), "removed with the entry");
    assert_eq!(revisions(&helm, release, ns), deployed_at(3));

    let started = Instant::now();
    let out = upgrade(&values(8, json!([])));
    assert!(out.status.success(), "{}", stderr_of(&out));
    println!("helm upgrade: {:.1?}", started.elapsed());
    assert_eq!(revisions(&helm, release, ns), deployed_at(4));
    assert_eq!(all("ECR_REFRESH_CONCURRENCY"), ["8"]);
    // The cronjob controller starts the next slot's Job from the template as upgraded. A
    // Job started before the upgrade says 4, and is over within its 10 s deadline, so the
    // Forbid policy lets the next one start.
    let job = wait_for(
        "a Job the cronjob controller starts after the upgrade, with ECR_REFRESH_CONCURRENCY 8",
        Duration::from_secs(100),
        || {
            jobs(cp, ns).into_iter().find(|j| {
                started_by(j, release)
                    && job_env(&j["spec"], "ECR_REFRESH_CONCURRENCY").as_deref() == Some("8")
            })
        },
        || job_summary(cp, ns),
    );
    println!(
        "the upgraded value in the Job {} {:.1?} after the upgrade",
        job["metadata"]["name"],
        started.elapsed()
    );
    helm.expect(&["uninstall", release, "-n", ns], None);
    assert!(get(cp, "cronjob", Some(ns), release).is_none());
}

/// A first run that fails (its pod never runs: the job controller fails the Job at its
/// deadline) leaves the release deployed; Helm removes the failed Job with the next revision,
/// the next one when firstRun is turned off, and the last at uninstall (issue 36 item 4).
/// Only an operator who asks Helm to wait for Jobs (`--wait --wait-for-jobs`) gets a failed
/// release from a failed run, as Helm fails on any failed Job it waits for.
#[test]
#[ignore = "needs helm and KUBEBUILDER_ASSETS (bash .ci/test)"]
fn a_first_run_that_fails_leaves_the_release_deployed_and_goes_with_the_next_revision() {
    let cp = control_plane();
    let helm = Helm::against(cp);
    let (release, ns) = ("first-run-ecr-refresh", "first-run");
    let chart = chart_path();
    let values = |first_run: bool| {
        json!({"firstRun": {"enabled": first_run}, "backoffLimit": 0,
               "activeDeadlineSeconds": 5, "suspend": true})
    };
    let first_run = |revision: u32| format!("{release}-first-run-{revision}");
    let failed_by_the_job_controller = |revision: u32| -> Value {
        let job = wait_for(
            &format!("first run {revision} failed by the job controller at its 5 s deadline"),
            Duration::from_secs(60),
            || {
                get(cp, "job", Some(ns), &first_run(revision))
                    .filter(|j| condition(j, "Failed").is_some())
            },
            || job_summary(cp, ns),
        );
        assert_eq!(
            condition(&job, "Failed").unwrap()["reason"],
            "DeadlineExceeded",
            "{job}"
        );
        job
    };

    let started = Instant::now();
    helm.install(release, ns, &values(true));
    failed_by_the_job_controller(1);
    println!(
        "the first run failed {:.1?} after the install",
        started.elapsed()
    );
    assert_eq!(
        revisions(&helm, release, ns),
        deployed_at(1),
        "the failed run left the release deployed"
    );

    helm.expect(&["upgrade", release, &chart, "-n", ns], Some(&values(true)));
    assert_eq!(revisions(&helm, release, ns), deployed_at(2));
    assert!(
        get(cp, "job", Some(ns), &first_run(1)).is_none(),
        "the failed Job went with revision 2"
    );
    assert!(get(cp, "job", Some(ns), &first_run(2)).is_some());

    helm.expect(
        &["upgrade", release, &chart, "-n", ns],
        Some(&values(false)),
    );
    assert!(
        get(cp, "job", Some(ns), &first_run(2)).is_none(),
        "firstRun turned off: its Job is gone"
    );
    assert!(get(cp, "job", Some(ns), &first_run(3)).is_none());

    // Asked to wait for Jobs, Helm fails the release on the failed run. Helm 3.22 retries
    // its "job is failed" (pkg/kube/wait.go takes any error but an API status as one to
    // retry, 30 times 2 s), so the upgrade fails at --timeout, a short one here.
    let started = Instant::now();
    let out = helm.run(
        &[
            "upgrade",
            release,
            &chart,
            "-n",
            ns,
            "--wait",
            "--wait-for-jobs",
            "--timeout=15s",
        ],
        Some(&values(true)),
    );
    let stderr = stderr_of(&out);
    assert!(
        !out.status.success(),
        "--wait-for-jobs took a failed run: {stderr}"
    );
    println!(
        "helm upgrade --wait-for-jobs failed {:.1?} after it began: {}",
        started.elapsed(),
        stderr.trim()
    );
    let job = failed_by_the_job_controller(4);
    println!("the failed first run's status: {}", job["status"]);
    assert_eq!(
        revisions(&helm, release, ns).last(),
        Some(&(4, "failed".to_owned()))
    );

    helm.expect(&["uninstall", release, "-n", ns], None);
    assert!(
        get(cp, "job", Some(ns), &first_run(4)).is_none(),
        "the first run goes at uninstall"
    );
    assert!(
        jobs(cp, ns).is_empty(),
        "no Job left: {}",
        job_summary(cp, ns)
    );
}

/// Null integers (Helm's "unset") install with their fields left out, Kubernetes' defaults,
/// and the CronJob still starts its Jobs, which a starting deadline of 0 would never do
/// (issue 36 item 2).
#[test]
#[ignore = "needs helm and KUBEBUILDER_ASSETS (bash .ci/test)"]
fn null_integers_install_as_kubernetes_defaults_and_the_cronjob_starts_its_jobs() {
    let cp = control_plane();
    let helm = Helm::against(cp);
    let (release, ns) = ("nulls-ecr-refresh", "nulls");
    let started = Instant::now();
    helm.install(
        release,
        ns,
        &json!({
            "schedule": "* * * * *",
            "startingDeadlineSeconds": null,
            "activeDeadlineSeconds": null,
            "ttlSecondsAfterFinished": null,
            "concurrency": null,
        }),
    );
    let cronjob = get(cp, "cronjob", Some(ns), release).expect("the CronJob");
    let spec = &cronjob["spec"];
    assert!(spec.get("startingDeadlineSeconds").is_none(), "{spec}");
    let job_spec = &spec["jobTemplate"]["spec"];
    assert!(
        job_spec.get("activeDeadlineSeconds").is_none(),
        "{job_spec}"
    );
    assert!(
        job_spec.get("ttlSecondsAfterFinished").is_none(),
        "{job_spec}"
    );
    assert_eq!(
        job_env(job_spec, "ECR_REFRESH_CONCURRENCY").as_deref(),
        Some(""),
        "empty: ecr-refresh's own default"
    );

    let job = wait_for(
        "a Job the cronjob controller starts at the next minute",
        Duration::from_secs(100),
        || jobs(cp, ns).into_iter().find(|j| started_by(j, release)),
        || format!("{} {}", cronjob["status"], job_summary(cp, ns)),
    );
    println!(
        "the cronjob controller started {} {:.1?} after the install",
        job["metadata"]["name"],
        started.elapsed()
    );
    assert!(job["spec"].get("activeDeadlineSeconds").is_none(), "{job}");
    helm.expect(&["uninstall", release, "-n", ns], None);
}

/// `helm uninstall` removes the release's objects and leaves what the runs wrote, as
/// docs/src/install/index.md's Uninstall section says: each pull Secret (labelled
/// `app.kubernetes.io/managed-by: ecr-refresh`, its writer in `ecr-refresh/install`) and
/// the entry in the ServiceAccounts' `imagePullSecrets` (issue 36 item 8).
#[test]
#[ignore = "needs helm and KUBEBUILDER_ASSETS (bash .ci/test)"]
fn uninstall_removes_the_releases_objects_and_leaves_the_written_secrets_and_entries() {
    let cp = control_plane();
    let helm = Helm::against(cp);
    let (release, ns) = ("leftovers-ecr-refresh", "leftovers");
    let targets = ["leftovers-a", "leftovers-b"];
    for target in targets {
        cp.create_namespace(target);
        // No controller here makes the `default` ServiceAccount.
        cp.kubectl_run(&["create", "serviceaccount", "default", "-n", target]);
    }
    helm.install(
        release,
        ns,
        &json!({"namespaces": targets, "serviceAccounts": ["default"], "suspend": true}),
    );
    let cronjob = get(cp, "cronjob", Some(ns), release).expect("the CronJob");
    let install = format!("{ns}/{release}");
    run_as_the_charts_service_account(cp, ns, release, &cronjob, &install);

    helm.expect(&["uninstall", release, "-n", ns], None);
    let admission = format!("{release}-admission");
    for (kind, namespace, name) in [
        ("cronjob", Some(ns), release),
        ("serviceaccount", Some(ns), release),
        ("clusterrole", None, release),
        ("clusterrolebinding", None, release),
        ("validatingadmissionpolicy", None, release),
        ("validatingadmissionpolicybinding", None, release),
        ("clusterrole", None, &admission),
        ("clusterrolebinding", None, &admission),
    ] {
        assert!(
            get(cp, kind, namespace, name).is_none(),
            "{kind} {name} outlived the release"
        );
    }
    let left = helm.expect(&["list", "-n", ns, "-a", "-q"], None);
    assert_eq!(left.trim(), "", "no release record left");

    // What stays, found as the docs find it: the Secret's name, the label.
    let out = cp.kubectl_run(&[
        "get",
        "secret",
        "-A",
        "--field-selector",
        "metadata.name=aws-ecr-token",
        "-l",
        "app.kubernetes.io/managed-by=ecr-refresh",
        "-o",
        "json",
    ]);
    let found: Value = serde_json::from_str(&out).expect("kubectl prints JSON");
    let mut namespaces: Vec<&str> = found["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|s| s["metadata"]["namespace"].as_str().unwrap())
        .collect();
    namespaces.sort_unstable();
    assert_eq!(
        namespaces, targets,
        "the written Secrets stay, found by label"
    );
    for secret in found["items"].as_array().unwrap() {
        assert_eq!(
            secret["metadata"]["annotations"]["ecr-refresh/install"],
            install
        );
        assert!(
            docker_config(secret)["auths"][REGISTRY].is_object(),
            "{secret}"
        );
    }
    for target in targets {
        let account = get(cp, "serviceaccount", Some(target), "default").expect("default");
        assert_eq!(
            account["imagePullSecrets"],
            json!([{"name": "aws-ecr-token"}]),
            "{target}: the entry stays"
        );
    }
}

/// The PrometheusRule on a real server (issue 36 item 9): without the Prometheus Operator's
/// CRD the install is refused, naming the value, and leaves no release; once the CRD is
/// served, the same install puts the rule in place, and uninstall takes it away.
#[test]
#[ignore = "needs helm and KUBEBUILDER_ASSETS (bash .ci/test)"]
fn the_prometheus_rule_installs_only_once_the_cluster_serves_its_crd() {
    let cp = control_plane();
    let helm = Helm::against(cp);
    let (release, ns) = ("alerts-ecr-refresh", "alerts");
    let chart = chart_path();
    let values = json!({"suspend": true, "pushgateway": {"url": "http://gw.monitoring:9091"},
                        "monitoring": {"prometheusRule": {"enabled": true}}});
    let install: [&str; 6] = ["install", release, &chart, "-n", ns, "--create-namespace"];

    let out = helm.run(&install, Some(&values));
    let stderr = stderr_of(&out);
    assert!(!out.status.success(), "installed without the CRD: {stderr}");
    for said in [
        "monitoring.prometheusRule.enabled is true, but the cluster serves no PrometheusRule",
        "install the Prometheus Operator's CRDs first",
        "or set monitoring.prometheusRule.enabled=false",
    ] {
        assert!(stderr.contains(said), "says {said:?}: {stderr}");
    }
    let left = helm.expect(&["list", "-n", ns, "-a", "-q"], None);
    assert_eq!(left.trim(), "", "the refused install left a release record");

    // The CRD as the Prometheus Operator's names it, without its schema.
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "prometheusrules.monitoring.coreos.com"},
        "spec": {"group": "monitoring.coreos.com", "scope": "Namespaced",
                 "names": {"kind": "PrometheusRule", "listKind": "PrometheusRuleList",
                           "plural": "prometheusrules", "singular": "prometheusrule"},
                 "versions": [{"name": "v1", "served": true, "storage": true,
                               "schema": {"openAPIV3Schema": {"type": "object",
                                          "x-kubernetes-preserve-unknown-fields": true}}}]}
    });
    let mut create = cp.kubectl();
    create
        .args(["create", "-f", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null());
    let mut child = create.spawn().expect("kubectl runs");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(crd.to_string().as_bytes())
        .expect("writing the CRD");
    assert!(child.wait().expect("kubectl ends").success(), "the CRD");
    cp.kubectl_run(&[
        "wait",
        "--for=condition=Established",
        "crd/prometheusrules.monitoring.coreos.com",
        "--timeout=30s",
    ]);
    let (group_version, kind) = PROMETHEUS_RULE_API.rsplit_once('/').unwrap();
    wait_for(
        "discovery serves the PrometheusRule kind",
        Duration::from_secs(30),
        || {
            cp.kubectl_run(&[
                "api-resources",
                "--api-group=monitoring.coreos.com",
                "-o",
                "wide",
            ])
            .lines()
            .any(|l| l.contains(group_version) && l.contains(kind))
            .then_some(())
        },
        || cp.kubectl_run(&["api-resources", "--api-group=monitoring.coreos.com"]),
    );

    helm.expect(&install, Some(&values));
    let rule = get(cp, "prometheusrule", Some(ns), release).expect("the PrometheusRule");
    let groups: Vec<&str> = rule["spec"]["groups"]
        .as_array()
        .expect("groups")
        .iter()
        .map(|g| g["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        groups,
        ["ecr-refresh-pushgateway", "ecr-refresh-kube-state-metrics"]
    );
    helm.expect(&["uninstall", release, "-n", ns], None);
    assert!(get(cp, "prometheusrule", Some(ns), release).is_none());
}

// ---- Fleet (issue 51): the Fleets page's `spoke-helm` recipe ----------------------------

/// The namespace as the book's Helm page creates it (the Fleets page installs the spoke "in
/// the namespace created as With Helm shows"): the lines of that page's block before its
/// `helm install`.
fn the_namespace_as_the_helm_page_creates_it() -> String {
    let page = crate::common::docs::page("install/helm.md");
    let fence = "```sh\n";
    let start = page
        .find(&format!("{fence}kubectl create namespace ecr-refresh\n"))
        .expect("docs/src/install/helm.md creates the namespace in a block of its own");
    let commands: String = page[start + fence.len()..]
        .lines()
        .take_while(|l| !l.starts_with("helm ") && *l != "```")
        .map(|l| format!("{l}\n"))
        .collect();
    assert!(
        commands.contains("kubectl label namespace ecr-refresh"),
        "the Helm page labels the namespace for Pod Security: {commands}"
    );
    commands
}

/// What the Fleets page says the spoke's NOTES print: the value in its sentence "Its notes
/// print the hub's `ECR_REFRESH_CLUSTERS_SERVICE_ACCOUNT` (`…`".
fn the_service_account_the_fleets_page_says_the_notes_print() -> String {
    let page = crate::common::docs::page("fleets.md");
    let said = "Its notes print the hub's `ECR_REFRESH_CLUSTERS_SERVICE_ACCOUNT` (`";
    let start = page
        .find(said)
        .unwrap_or_else(|| panic!("docs/src/fleets.md says what the notes print: {said}"))
        + said.len();
    let end = page[start..]
        .find('`')
        .expect("the value's closing backquote");
    page[start..start + end].to_owned()
}

/// A TokenRequest for `namespace/name` sent with `token`: the status and the answer.
fn token_request(cp: &ControlPlane, token: &str, (namespace, name): (&str, &str)) -> (u16, Value) {
    send(
        cp,
        token,
        "POST",
        &format!("/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token"),
        "application/json",
        &json!({ "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                 "spec": { "expirationSeconds": 600 } }),
    )
}

/// The Fleets page's `spoke-helm` recipe, run as the page shows it with real Helm on a control
/// plane of its own (the release takes the shipped names, ecr-refresh in ecr-refresh, whose
/// cluster-wide objects and admission policy would meet other releases' on a shared one), in
/// the namespace the Helm page creates: no CronJob and no Job; the ServiceAccounts
/// `ecr-refresh` and `ecr-refresh-hub`; the Role `ecr-refresh-hub` granting `create` on
/// `serviceaccounts/token` for `ecr-refresh` alone; a token of `ecr-refresh-hub` gets a token
/// of `ecr-refresh` and is refused one of `default`; the NOTES print the hub's value the page
/// says.
#[test]
#[ignore = "needs helm and KUBEBUILDER_ASSETS (bash .ci/test)"]
fn the_fleets_pages_spoke_helm_recipe_installs_the_hubs_one_right_and_no_run() {
    let helm = crate::chart::helm_binary();
    let cp = ControlPlane::start();
    let recipe = crate::common::fleet::recipe("spoke-helm", "sh");
    // The page's `helm` is Helm as the tier finds it (HELM, or helm on PATH), put first on
    // PATH under that name. The recipe's text is run unchanged: in the checkout, its
    // `charts/ecr-refresh` is the repository's chart.
    let bin = tempfile::tempdir().expect("a directory for helm");
    std::os::unix::fs::symlink(&helm, bin.path().join("helm")).expect("linking helm");
    let script = format!(
        "export PATH=\"{}:$PATH\"\n{}{recipe}",
        bin.path().display(),
        the_namespace_as_the_helm_page_creates_it()
    );
    let out = crate::common::fleet::shell(
        &cp,
        cp.admin_kubeconfig(),
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")),
        &script,
    );

    let notes = out
        .split_once("NOTES:\n")
        .unwrap_or_else(|| panic!("helm printed no NOTES: {out}"))
        .1;
    let said = the_service_account_the_fleets_page_says_the_notes_print();
    assert_eq!(said, "ecr-refresh/ecr-refresh", "the page's default");
    assert!(
        notes.contains(&format!("ECR_REFRESH_CLUSTERS_SERVICE_ACCOUNT={said}\n")),
        "the NOTES print the hub's value as the Fleets page says: {notes}"
    );

    let ns = "ecr-refresh";
    let runs = cp.kubectl_run(&["get", "cronjobs,jobs", "-A", "-o", "json"]);
    let runs: Value = serde_json::from_str(&runs).expect("kubectl prints JSON");
    assert_eq!(
        runs["items"],
        json!([]),
        "a spoke runs nothing: no CronJob, no Job"
    );
    for account in ["ecr-refresh", "ecr-refresh-hub"] {
        assert!(
            get(&cp, "serviceaccount", Some(ns), account).is_some(),
            "the ServiceAccount {account} in {ns}"
        );
    }
    let role = get(&cp, "role", Some(ns), "ecr-refresh-hub").expect("the Role ecr-refresh-hub");
    assert_eq!(
        role["rules"],
        json!([{ "apiGroups": [""], "resources": ["serviceaccounts/token"],
                 "verbs": ["create"], "resourceNames": ["ecr-refresh"] }]),
        "the hub's one right: a token for ecr-refresh, nothing more: {role}"
    );

    let hub_token = cp
        .kubectl_run(&["create", "token", "ecr-refresh-hub", "-n", ns])
        .trim()
        .to_owned();
    let (status, answer) = token_request(&cp, &hub_token, (ns, "ecr-refresh"));
    assert_eq!(status, 201, "the hub gets a token of ecr-refresh: {answer}");
    let minted = answer["status"]["token"].as_str().expect("a token");
    let (status, review) = send(
        &cp,
        minted,
        "POST",
        "/apis/authentication.k8s.io/v1/selfsubjectreviews",
        "application/json",
        &json!({ "apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview" }),
    );
    assert_eq!(status, 201, "{review}");
    assert_eq!(
        review["status"]["userInfo"]["username"], "system:serviceaccount:ecr-refresh:ecr-refresh",
        "the minted token is ecr-refresh's: {review}"
    );

    // No kube-controller-manager makes `default` here: made as it would be, so that the
    // refusal is RBAC's, not a missing ServiceAccount's.
    if get(&cp, "serviceaccount", Some(ns), "default").is_none() {
        cp.kubectl_run(&["create", "serviceaccount", "default", "-n", ns]);
    }
    let (status, answer) = token_request(&cp, &hub_token, (ns, "default"));
    assert_eq!(
        status, 403,
        "the hub is refused a token of default: {answer}"
    );
    assert!(
        message(&answer).contains(
            "\"system:serviceaccount:ecr-refresh:ecr-refresh-hub\" cannot create resource \
             \"serviceaccounts/token\""
        ),
        "refused by RBAC: {answer}"
    );
}
