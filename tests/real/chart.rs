//! The Helm chart (charts/ecr-refresh/), with real Helm: its values reach the objects they
//! name; its schema refuses bad values, naming them; and against a real kube-apiserver (tests/control-plane) it installs, upgrades and
//! uninstalls to the objects the values say, its admission policy refuses a stolen token's
//! requests, and a run of the binary as its ServiceAccount writes the Secrets.
//!
//! Needs Helm (`HELM`, or `helm` on PATH: `.ci/go-tool helm` builds it) and
//! `KUBEBUILDER_ASSETS` (`.ci/kube-binaries`). `.ci/check-chart` adds `helm lint --strict`
//! and kubernetes-validate of the rendered output; `.ci/render-manifests --check` proves
//! that the kustomize manifests, rendered from the chart, install what it installs, for
//! both scopes and each component; `.ci/render-chart-docs --check` that values.schema.json
//! and README.md are generated from values.yaml.

use crate::common;

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::manifests::documents;
use common::{REGISTRY, b64, docker_config};
use control_plane::ControlPlane;
use fake_cluster::FakeEcr;
use serde_json::{Value, json};

fn chart_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("charts/ecr-refresh")
}

/// `key: value` of a top-level scalar in Chart.yaml.
fn chart_field(key: &str) -> String {
    let text = std::fs::read_to_string(chart_dir().join("Chart.yaml")).expect("Chart.yaml");
    let doc = &documents(&text)[0];
    doc[key]
        .as_str()
        .unwrap_or_else(|| panic!("Chart.yaml has no string {key}"))
        .to_owned()
}

pub(crate) use common::helm::helm_binary;

/// Helm with its cache, configuration and data in a directory of its own (no state of the
/// developer's read or written), talking to `kubeconfig` or to nothing.
pub(crate) struct Helm {
    binary: PathBuf,
    home: tempfile::TempDir,
    kubeconfig: Option<PathBuf>,
}

impl Helm {
    pub(crate) fn offline() -> Self {
        Self {
            binary: helm_binary(),
            home: tempfile::tempdir().expect("a temporary directory"),
            kubeconfig: None,
        }
    }

    pub(crate) fn against(cp: &ControlPlane) -> Self {
        Self {
            kubeconfig: Some(cp.admin_kubeconfig().to_owned()),
            ..Self::offline()
        }
    }

    fn command(&self) -> Command {
        let home = self.home.path();
        let mut command = Command::new(&self.binary);
        command
            .env_clear()
            .env("HOME", home)
            .env("HELM_CACHE_HOME", home.join("cache"))
            .env("HELM_CONFIG_HOME", home.join("config"))
            .env("HELM_DATA_HOME", home.join("data"))
            .env(
                "KUBECONFIG",
                self.kubeconfig
                    .clone()
                    .unwrap_or_else(|| home.join("no-kubeconfig")),
            );
        command
    }

    /// A values file holding `values` (JSON is YAML).
    fn values_file(&self, values: &Value) -> PathBuf {
        let path = self
            .home
            .path()
            .join(format!("values-{:08x}.json", fastrand::u32(..)));
        std::fs::write(&path, values.to_string()).expect("writing a values file");
        path
    }

    /// `helm ARGS`, with `values` as a values file when given.
    pub(crate) fn run(&self, args: &[&str], values: Option<&Value>) -> Output {
        let mut command = self.command();
        command.args(args);
        if let Some(values) = values {
            command.arg("--values").arg(self.values_file(values));
        }
        command.output().expect("helm runs")
    }

    /// `helm template RELEASE chart -n NAMESPACE`: the output, or Helm's error.
    fn template(&self, release: &str, namespace: &str, values: &Value) -> Result<String, String> {
        self.template_with(release, namespace, values, &[])
    }

    /// `helm template RELEASE chart -n NAMESPACE ARGS`: the output, or Helm's error.
    fn template_with(
        &self,
        release: &str,
        namespace: &str,
        values: &Value,
        args: &[&str],
    ) -> Result<String, String> {
        let chart = chart_dir();
        let mut all = vec![
            "template",
            release,
            chart.to_str().expect("a UTF-8 path"),
            "--namespace",
            namespace,
        ];
        all.extend(args);
        let out = self.run(&all, Some(values));
        if out.status.success() {
            Ok(String::from_utf8(out.stdout).expect("helm writes UTF-8"))
        } else {
            Err(String::from_utf8_lossy(&out.stderr).into_owned())
        }
    }

    /// `helm install|upgrade|uninstall|list …`, which must succeed.
    /// `helm install RELEASE <the chart> -n NAMESPACE --create-namespace` with `values`,
    /// which must succeed.
    pub(crate) fn install(&self, release: &str, namespace: &str, values: &Value) -> String {
        let chart = chart_path();
        self.expect(
            &[
                "install",
                release,
                &chart,
                "-n",
                namespace,
                "--create-namespace",
            ],
            Some(values),
        )
    }

    pub(crate) fn expect(&self, args: &[&str], values: Option<&Value>) -> String {
        let out = self.run(args, values);
        assert!(
            out.status.success(),
            "helm {}: {}{}",
            args.join(" "),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

fn render(values: &Value) -> Vec<Value> {
    render_as("ecr-refresh", "ecr-refresh", values)
}

fn render_as(release: &str, namespace: &str, values: &Value) -> Vec<Value> {
    let yaml = Helm::offline()
        .template(release, namespace, values)
        .unwrap_or_else(|e| panic!("helm template: {e}"));
    documents(&yaml)
}

/// The kind the Prometheus Operator's CRD serves, as Helm's `.Capabilities.APIVersions` names
/// it (group/version/kind), and as `--api-versions` declares it.
pub(crate) const PROMETHEUS_RULE_API: &str = "monitoring.coreos.com/v1/PrometheusRule";

/// [`render_as`] for a cluster that serves PrometheusRules (`--api-versions`), as
/// .ci/render-manifests renders.
fn render_with_prometheus_rules(release: &str, namespace: &str, values: &Value) -> Vec<Value> {
    let yaml = Helm::offline()
        .template_with(
            release,
            namespace,
            values,
            &["--api-versions", PROMETHEUS_RULE_API],
        )
        .unwrap_or_else(|e| panic!("helm template --api-versions {PROMETHEUS_RULE_API}: {e}"));
    documents(&yaml)
}

/// `Kind namespace/name`, for messages.
fn identity(doc: &Value) -> String {
    format!(
        "{} {}/{}",
        doc["kind"].as_str().unwrap_or("?"),
        doc["metadata"]["namespace"].as_str().unwrap_or("-"),
        doc["metadata"]["name"].as_str().unwrap_or("?")
    )
}

// ---- Values --------------------------------------------------------------------------

fn of_kind<'a>(docs: &'a [Value], kind: &str) -> Vec<&'a Value> {
    docs.iter().filter(|d| d["kind"] == kind).collect()
}

fn named<'a>(docs: &'a [Value], kind: &str, name: &str) -> &'a Value {
    let found: Vec<&Value> = of_kind(docs, kind)
        .into_iter()
        .filter(|d| d["metadata"]["name"] == name)
        .collect();
    assert_eq!(found.len(), 1, "one {kind} {name} in {docs:#?}");
    found[0]
}

fn one<'a>(docs: &'a [Value], kind: &str) -> &'a Value {
    let found = of_kind(docs, kind);
    assert_eq!(found.len(), 1, "one {kind} in {docs:#?}");
    found[0]
}

pub(crate) fn env_of(cronjob: &Value) -> Vec<(String, String)> {
    cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["env"]
        .as_array()
        .expect("env")
        .iter()
        .map(|e| {
            (
                e["name"].as_str().unwrap().to_owned(),
                e["value"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

pub(crate) fn env_value(cronjob: &Value, name: &str) -> String {
    env_of(cronjob)
        .into_iter()
        .find(|(n, _)| n == name)
        .unwrap_or_else(|| panic!("no {name}"))
        .1
}

#[test]
#[ignore = "needs helm (bash .ci/test)"]
fn the_policy_and_rbac_follow_the_release_namespace_service_account_and_secret_name() {
    let docs = render_as(
        "ecr-refresh",
        "tools",
        &json!({"serviceAccount": {"name": "refresher"}, "secretName": "ecr-pull",
                "serviceAccounts": ["default", "builder"]}),
    );
    let policy = one(&docs, "ValidatingAdmissionPolicy");
    // The policy names no user: it holds whoever the admission binding grants `subject-to`.
    let condition = policy["spec"]["matchConditions"][0]["expression"]
        .as_str()
        .unwrap();
    assert!(
        !condition.contains("refresher") && !condition.contains("tools"),
        "{condition}"
    );
    assert_eq!(
        named(&docs, "ClusterRoleBinding", "ecr-refresh-admission")["subjects"],
        json!([{"kind": "ServiceAccount", "name": "refresher", "namespace": "tools"}])
    );
    assert_eq!(
        policy["spec"]["variables"][0],
        json!({"name": "secretName", "expression": "'ecr-pull'"})
    );
    let role = named(&docs, "ClusterRole", "ecr-refresh");
    assert_eq!(role["rules"][0]["resourceNames"], json!(["ecr-pull"]));
    assert_eq!(
        role["rules"][4],
        json!({"apiGroups": [""], "resources": ["serviceaccounts"],
               "resourceNames": ["default", "builder"], "verbs": ["get", "list", "patch"]})
    );
    assert_eq!(
        named(&docs, "ClusterRoleBinding", "ecr-refresh")["subjects"],
        json!([{"kind": "ServiceAccount", "name": "refresher", "namespace": "tools"}])
    );
    assert_eq!(
        one(&docs, "ServiceAccount")["metadata"]["name"],
        "refresher"
    );
    let cronjob = one(&docs, "CronJob");
    assert_eq!(cronjob["metadata"]["namespace"], "tools");
    assert_eq!(
        cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["serviceAccountName"],
        "refresher"
    );
    assert_eq!(env_value(cronjob, "ECR_REFRESH_SECRET_NAME"), "ecr-pull");
    assert_eq!(
        env_value(cronjob, "ECR_REFRESH_SERVICE_ACCOUNTS"),
        "default,builder"
    );
}

#[test]
#[ignore = "needs helm (bash .ci/test)"]
fn another_release_name_renames_every_object_and_the_policy_binding() {
    let docs = render_as("prod", "tools", &json!({}));
    for doc in &docs {
        let name = doc["metadata"]["name"].as_str().unwrap();
        assert!(
            ["prod-ecr-refresh", "prod-ecr-refresh-admission"].contains(&name),
            "{}",
            identity(doc)
        );
        assert_eq!(
            doc["metadata"]["labels"]["app.kubernetes.io/instance"],
            "prod"
        );
    }
    assert_eq!(
        one(&docs, "ValidatingAdmissionPolicyBinding")["spec"]["policyName"],
        "prod-ecr-refresh"
    );
    assert_eq!(
        named(&docs, "ClusterRoleBinding", "prod-ecr-refresh")["roleRef"]["name"],
        "prod-ecr-refresh"
    );
    assert_eq!(
        named(&docs, "ClusterRoleBinding", "prod-ecr-refresh-admission")["roleRef"]["name"],
        "prod-ecr-refresh-admission"
    );
    let without = render_as(
        "prod",
        "tools",
        &json!({"admissionPolicy": {"enabled": false}}),
    );
    assert!(
        without.iter().all(|d| {
            d["metadata"]["name"] != "prod-ecr-refresh-admission"
                && !d["kind"]
                    .as_str()
                    .unwrap()
                    .starts_with("ValidatingAdmissionPolicy")
        }),
        "admissionPolicy.enabled false renders no policy and no admission binding"
    );
}

#[test]
#[ignore = "needs helm (bash .ci/test)"]
fn the_policy_holds_the_service_accounts_granted_subject_to_for_the_releases_secret_name_only() {
    // Two releases writing Secrets of different names: each policy asks `subject-to` for
    // its own name, and each release's ClusterRole grants only that one, so neither policy
    // holds the other release's ServiceAccount (tests/real/admission.rs shows it on a real
    // server for two kustomize installs).
    for (release, fullname, secret) in [
        ("ecr-refresh", "ecr-refresh", "aws-ecr-token"),
        ("team", "team-ecr-refresh", "team-pull"),
    ] {
        let docs = render_as(release, "tools", &json!({"secretName": secret}));
        let role = named(&docs, "ClusterRole", &format!("{fullname}-admission"));
        assert_eq!(
            role["rules"],
            json!([{"apiGroups": ["ecr-refresh"], "resources": ["admission-policy"],
                    "resourceNames": [secret], "verbs": ["subject-to"]}]),
            "{release}"
        );
        let policy = one(&docs, "ValidatingAdmissionPolicy");
        let condition = policy["spec"]["matchConditions"][0]["expression"]
            .as_str()
            .unwrap();
        assert!(
            condition.contains(&format!(
                "resource('admission-policy').name('{secret}').check('subject-to')"
            )),
            "{release}: {condition}"
        );
    }
}

#[test]
#[ignore = "needs helm (bash .ci/test)"]
fn the_first_run_job_is_a_run_of_the_cronjob_of_the_release_not_a_hook() {
    let docs = render(&json!({"firstRun": {"enabled": true}}));
    let job = one(&docs, "Job");
    // helm template renders revision 1.
    assert_eq!(job["metadata"]["name"], "ecr-refresh-first-run-1");
    assert!(
        job["metadata"]["annotations"].is_null(),
        "a hook's failure would fail the release: {}",
        job["metadata"]["annotations"]
    );
    let long = "a-release-name-of-fifty-three-characters-for-the-test";
    let long_docs = render_as(long, "ecr-refresh", &json!({"firstRun": {"enabled": true}}));
    let name = one(&long_docs, "Job")["metadata"]["name"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        name.len() + "99999".len() - 1 <= 63,
        "{name}: room for its job-name label"
    );
    assert_eq!(
        job["spec"],
        one(&docs, "CronJob")["spec"]["jobTemplate"]["spec"]
    );
    assert!(of_kind(&render(&json!({})), "Job").is_empty());
}

#[test]
#[ignore = "needs helm (bash .ci/test)"]
fn a_digest_replaces_the_tag_and_the_tag_defaults_to_the_app_version() {
    let image = |values: Value| {
        one(&render(&values), "CronJob")["spec"]["jobTemplate"]["spec"]["template"]["spec"]
            ["containers"][0]["image"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    assert_eq!(
        image(json!({})),
        format!(
            "ghcr.io/ecr-refresh/ecr-refresh:{}",
            chart_field("appVersion")
        )
    );
    assert_eq!(
        image(json!({"image": {"repository": "registry.example/ecr-refresh", "tag": "9.9.9"}})),
        "registry.example/ecr-refresh:9.9.9"
    );
    let digest = format!("sha256:{}", "ab".repeat(32));
    assert_eq!(
        image(json!({"image": {"tag": "9.9.9", "digest": digest}})),
        format!("ghcr.io/ecr-refresh/ecr-refresh@{digest}")
    );
}

#[test]
#[ignore = "needs helm (bash .ci/test)"]
fn static_keys_extra_env_and_pushgateway_labels_reach_the_container() {
    let docs = render(&json!({
        "aws": {"existingSecret": "ecr-refresh-aws", "region": "eu-west-1"},
        "extraEnv": [{"name": "RUST_LOG", "value": "debug"}],
        "pushgateway": {"groupingLabels": {"cluster": "prod-eu", "az": "a"}},
        "suspend": true,
        "mode": "check",
    }));
    let cronjob = one(&docs, "CronJob");
    let container = &cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(
        container["envFrom"],
        json!([{"secretRef": {"name": "ecr-refresh-aws"}}])
    );
    let env = env_of(cronjob);
    assert_eq!(env.last().unwrap(), &("RUST_LOG".into(), "debug".into()));
    assert_eq!(env_value(cronjob, "AWS_REGION"), "eu-west-1");
    assert_eq!(env_value(cronjob, "ECR_REFRESH_MODE"), "check");
    assert_eq!(
        env_value(cronjob, "ECR_REFRESH_PUSHGATEWAY_LABELS"),
        "az=a,cluster=prod-eu"
    );
    assert_eq!(cronjob["spec"]["suspend"], true);
}

/// Two releases sharing one Pushgateway (issue 36 item 6): each pushes its own group, named by
/// an `install` label, and its alerts select only that.
#[test]
#[ignore = "needs helm (bash .ci/test)"]
fn each_release_pushes_its_own_group_and_its_alerts_select_it() {
    let values = json!({
        "pushgateway": {"url": "http://gw.monitoring:9091", "groupingLabels": {"cluster": "prod-eu"}},
        "monitoring": {"prometheusRule": {"enabled": true}},
    });
    let docs = render_with_prometheus_rules("ecr-refresh", "team-b", &values);
    assert_eq!(
        env_value(one(&docs, "CronJob"), "ECR_REFRESH_PUSHGATEWAY_LABELS"),
        "install=team-b/ecr-refresh,cluster=prod-eu"
    );
    let rule = one(&docs, "PrometheusRule");
    let groups = rule["spec"]["groups"].as_array().unwrap();
    let pushed = groups
        .iter()
        .find(|g| g["name"] == "ecr-refresh-pushgateway")
        .expect("the Pushgateway group");
    for alert in pushed["rules"].as_array().unwrap() {
        let expr = alert["expr"].as_str().unwrap();
        // Our metrics, and the gateway's push_time_seconds of our groups; not the fleet's
        // grouping label ecr_refresh_cluster.
        let metrics = expr.matches("ecr_refresh_").count()
            - expr.matches("ecr_refresh_cluster").count()
            + expr.matches("push_time_seconds").count();
        assert!(metrics > 0, "{expr}");
        assert_eq!(
            expr.matches(r#"install="team-b/ecr-refresh""#).count(),
            metrics,
            "every series {} reads is the release's own: {expr}",
            alert["alert"]
        );
    }

    let own = render(&json!({
        "pushgateway": {"url": "http://gw.monitoring:9091", "groupingLabels": {"install": "platform"}},
    }));
    assert_eq!(
        env_value(one(&own, "CronJob"), "ECR_REFRESH_PUSHGATEWAY_LABELS"),
        "install=platform",
        "an install label of the operator's replaces the chart's"
    );
    let quiet = render(&json!({}));
    assert_eq!(
        env_value(one(&quiet, "CronJob"), "ECR_REFRESH_PUSHGATEWAY_LABELS"),
        "",
        "no gateway, no label: the binary refuses labels without a gateway"
    );
}

/// The PrometheusRule only where the cluster serves its kind (issue 36 item 9). With the
/// Prometheus Operator's CRD declared it renders; without it the chart refuses to render,
/// naming the value and both ways out, rather than installing without the alerts that were
/// asked for (or failing later on Helm's "no matches for kind"). Off, it asks nothing of the
/// cluster. tests/real/chart_lifecycle.rs proves the same on a real kube-apiserver, before
/// and after the CRD is created.
#[test]
#[ignore = "needs helm (bash .ci/test)"]
fn the_prometheus_rule_renders_only_where_the_cluster_serves_its_kind() {
    let values = json!({"monitoring": {"prometheusRule": {"enabled": true}}});
    let served = render_with_prometheus_rules("ecr-refresh", "ecr-refresh", &values);
    let rule = one(&served, "PrometheusRule");
    assert_eq!(rule["apiVersion"], "monitoring.coreos.com/v1");
    assert_eq!(rule["metadata"]["namespace"], "ecr-refresh");

    let error = Helm::offline()
        .template("ecr-refresh", "ecr-refresh", &values)
        .expect_err("no PrometheusRule kind served: refused");
    for said in [
        "monitoring.prometheusRule.enabled is true, but the cluster serves no PrometheusRule",
        "install the Prometheus Operator's CRDs first",
        "or set monitoring.prometheusRule.enabled=false",
        "--api-versions monitoring.coreos.com/v1/PrometheusRule",
    ] {
        assert!(error.contains(said), "says {said:?}: {error}");
    }
    // Another version of the group is not the kind the rule is written for.
    let other = Helm::offline()
        .template_with(
            "ecr-refresh",
            "ecr-refresh",
            &values,
            &[
                "--api-versions",
                "monitoring.coreos.com/v1alpha1/PrometheusRule",
            ],
        )
        .expect_err("v1alpha1 is not v1");
    assert!(other.contains("serves no PrometheusRule"), "{other}");

    let off = json!({"monitoring": {"prometheusRule": {"enabled": false}}});
    assert!(of_kind(&render(&off), "PrometheusRule").is_empty());
    assert!(
        of_kind(
            &render_with_prometheus_rules("ecr-refresh", "ecr-refresh", &off),
            "PrometheusRule"
        )
        .is_empty(),
        "served but off: none"
    );
}

/// ci/every-value-values.yaml (which .ci/check-chart lints and validates) sets every key
/// values.schema.json describes, and no other. (The schema itself is generated from
/// values.yaml by .ci/render-chart-docs, whose check fails on any drift.)
#[test]
fn the_every_value_file_sets_every_key_the_schema_describes() {
    fn keys(schema: &Value, path: &str, out: &mut Vec<String>) {
        let Some(properties) = schema["properties"].as_object() else {
            return;
        };
        for (k, sub) in properties {
            let p = format!("{path}.{k}");
            out.push(p.clone());
            keys(sub, &p, out);
        }
    }
    fn present(values: &Value, schema: &Value, path: &str, out: &mut Vec<String>) {
        let (Some(map), Some(properties)) = (values.as_object(), schema["properties"].as_object())
        else {
            return;
        };
        for (k, v) in map {
            let p = format!("{path}.{k}");
            out.push(p.clone());
            if let Some(sub) = properties.get(k) {
                present(v, sub, &p, out);
            }
        }
    }
    let schema: Value = serde_json::from_str(
        &std::fs::read_to_string(chart_dir().join("values.schema.json")).unwrap(),
    )
    .expect("the schema is JSON");
    // The values' own schema, beside the bundled rule across two values (allOf[1]).
    let schema = &schema["allOf"][0];
    assert_eq!(schema["additionalProperties"], false);
    let mut described = Vec::new();
    keys(schema, "", &mut described);
    // Helm's own key, for parent charts: described, never set here.
    described.retain(|k| k != ".global");
    assert!(described.len() > 50, "{described:?}");
    let every = documents(
        &std::fs::read_to_string(chart_dir().join("ci/every-value-values.yaml")).expect("readable"),
    )
    .remove(0);
    let mut set = Vec::new();
    present(&every, schema, "", &mut set);
    // Below the schema's depth (free-form maps such as resources.requests) keys are the
    // user's: only those the schema describes are compared.
    let unset: Vec<&String> = described.iter().filter(|k| !set.contains(k)).collect();
    assert!(
        unset.is_empty(),
        "ci/every-value-values.yaml leaves out {unset:?}"
    );
    let mut undescribed = Vec::new();
    present(&every, &json!({}), "", &mut undescribed);
    let undescribed: Vec<&String> = undescribed
        .iter()
        .filter(|k| !described.contains(k))
        .collect();
    assert!(
        undescribed.is_empty(),
        "values.schema.json does not describe {undescribed:?} of ci/every-value-values.yaml"
    );
}

#[test]
fn the_chart_version_and_app_version_are_one_and_the_kustomize_image_tag() {
    let version = chart_field("version");
    assert_eq!(chart_field("appVersion"), version);
    let kustomization = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("manifests/base/kustomization.yaml"),
    )
    .unwrap();
    assert_eq!(
        documents(&kustomization)[0]["images"][0]["newTag"],
        version,
        "the chart and the manifests install the same image"
    );
}

#[test]
#[ignore = "needs helm (bash .ci/test)"]
fn bad_values_are_refused_with_a_message_naming_the_value() {
    let helm = Helm::offline();
    let cases = [
        (
            json!({"scpe": "cluster"}),
            "additional properties 'scpe' not allowed",
        ),
        (
            json!({"image": {"pullpolicy": "Always"}}),
            "at '/image': additional properties 'pullpolicy' not allowed",
        ),
        (
            json!({"concurrency": "many"}),
            "at '/concurrency': got string, want integer",
        ),
        (
            json!({"dualStack": "yes"}),
            "at '/dualStack': got string, want boolean",
        ),
        (
            json!({"namespaces": "all"}),
            "at '/namespaces': got string, want array",
        ),
        (
            json!({"scope": "everywhere"}),
            "at '/scope': value must be one of 'cluster', 'namespaced'",
        ),
        (
            json!({"secretName": "Aws_Token"}),
            "at '/secretName': 'Aws_Token' does not match",
        ),
        (
            json!({"scope": "namespaced", "namespaces": ["team-*"]}),
            "at '/namespaces/0': 'team-*' does not match",
        ),
        (
            json!({"scope": "namespaced", "namespaces": ["team-a"], "namespaceSelector": "tier=web"}),
            "at '/namespaceSelector': value must be ''",
        ),
        (
            json!({"scope": "namespaced"}),
            "namespaces: \"all\" is not a literal namespace name",
        ),
        (
            json!({"renewBefore": "soon"}),
            "at '/renewBefore': 'soon' does not match",
        ),
        (
            json!({"mode": "fix"}),
            "at '/mode': value must be one of 'refresh', 'check'",
        ),
        (
            json!({"check": {"podrights": true}}),
            "at '/check': additional properties 'podrights' not allowed",
        ),
        (
            json!({"aws": {"assumeRole": {"roleArn": "ecr-pull"}}}),
            "at '/aws/assumeRole/roleArn': 'ecr-pull' does not match",
        ),
        (
            json!({"aws": {"webIdentity": {"roleArn": "arn:aws:iam::111122223333:role/x", "expirationSeconds": 599}}}),
            "at '/aws/webIdentity/expirationSeconds': minimum: got 599, want 600",
        ),
        (
            json!({"extraVolumeMounts": [{"name": "ca"}]}),
            "at '/extraVolumeMounts/0': missing property 'mountPath'",
        ),
        (
            json!({"serviceAccount": {"create": false}}),
            "serviceAccount.create is false and serviceAccount.name is empty",
        ),
        (
            json!({"aws": {"assumeRole": {"externalId": "platform-7f3a"}}}),
            "at '/aws/assumeRole/roleArn': minLength: got 0, want 1",
        ),
        (
            json!({"aws": {"rolesAnywhere": roles_anywhere_values()["aws"]["rolesAnywhere"].as_object().map(|v| {
                let mut v = v.clone();
                v.remove("certificateSecret");
                v
            })}}),
            "at '/aws/rolesAnywhere/certificateSecret': minLength: got 0, want 1",
        ),
        (
            json!({"aws": {"rolesAnywhere": {"trustAnchorArn": "arn:aws:iam::111122223333:role/x"}}}),
            "at '/aws/rolesAnywhere/trustAnchorArn': 'arn:aws:iam::111122223333:role/x' does not match",
        ),
        (
            json!({"pushgateway": {"url": "http://gw:9091", "groupingLabels": {"cluster": "eu,us"}}}),
            "at '/pushgateway/groupingLabels/cluster': 'eu,us' does not match",
        ),
        // Kubernetes objects, closed as the API server's strict validation is (issue 36 item 7):
        // a mistyped toleration used to become {operator: Exists}, tolerating every taint.
        (
            json!({"tolerations": [{"keyy": "dedicated", "operator": "Equal", "value": "ops"}]}),
            "at '/tolerations/0': additional properties 'keyy' not allowed",
        ),
        (
            json!({"affinity": {"nodeAfinity": {}}}),
            "additional properties 'nodeAfinity' not allowed",
        ),
        (
            json!({"podSecurityContext": {"runAsNonroot": true}}),
            "additional properties 'runAsNonroot' not allowed",
        ),
        (
            json!({"extraEnv": [{"name": "A", "valuefrom": {}}]}),
            "at '/extraEnv/0': additional properties 'valuefrom' not allowed",
        ),
        (
            json!({"extraEnv": [{"name": "ECR_REFRESH_CONCURRENCY", "value": "4"}]}),
            "extraEnv sets ECR_REFRESH_CONCURRENCY, which the chart sets itself",
        ),
        (
            json!({"aws": {"webIdentity": {"roleArn": "arn:aws:iam::111122223333:role/x"}},
                   "extraEnv": [{"name": "AWS_ROLE_SESSION_NAME", "value": "mine"}]}),
            "extraEnv sets AWS_ROLE_SESSION_NAME",
        ),
        // Self-hosting from ECR: the pod lists the Secret the runs would never write there.
        (
            json!({"imagePullSecrets": [{"name": "aws-ecr-token"}], "namespaces": ["team-a"]}),
            "imagePullSecrets lists aws-ecr-token, the pull Secret, but namespaces does not select the release's namespace ecr-refresh",
        ),
        (
            json!({"scope": "namespaced", "namespaces": ["team-a"], "imagePullSecrets": [{"name": "aws-ecr-token"}]}),
            "imagePullSecrets lists aws-ecr-token, the pull Secret, but namespaces does not select the release's namespace ecr-refresh",
        ),
        (
            json!({"imagePullSecrets": [{"name": "ecr-pull"}], "secretName": "ecr-pull", "excludeNamespaces": ["ecr-refresh"]}),
            "imagePullSecrets lists ecr-pull, the pull Secret, but excludeNamespaces takes the release's namespace ecr-refresh out",
        ),
    ];
    for (values, message) in cases {
        match helm.template("ecr-refresh", "ecr-refresh", &values) {
            Ok(_) => panic!("{values} was accepted"),
            Err(e) => assert!(e.contains(message), "{values}: {e}"),
        }
    }
}

#[test]
#[ignore = "needs helm (bash .ci/test)"]
fn web_identity_renders_the_projected_token_and_the_sdks_variables() {
    let rendered =
        render(&json!({"aws": {"webIdentity": {"roleArn": "arn:aws:iam::111122223333:role/ecr"}}}));
    let cronjob = rendered
        .iter()
        .find(|d| d["kind"] == "CronJob")
        .expect("a CronJob");
    let pod = &cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"];
    let source = &pod["volumes"][0]["projected"]["sources"][0]["serviceAccountToken"];
    assert_eq!(source["audience"], "sts.amazonaws.com");
    assert_eq!(source["expirationSeconds"], 3600);
    let container = &pod["containers"][0];
    assert_eq!(container["volumeMounts"][0]["readOnly"], true);
    let env = |name: &str| {
        container["env"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["name"] == name)
            .map(|e| e["value"].clone())
    };
    assert_eq!(
        env("AWS_ROLE_ARN"),
        Some(json!("arn:aws:iam::111122223333:role/ecr"))
    );
    assert_eq!(
        env("AWS_WEB_IDENTITY_TOKEN_FILE"),
        Some(json!(format!(
            "{}/{}",
            container["volumeMounts"][0]["mountPath"].as_str().unwrap(),
            source["path"].as_str().unwrap()
        )))
    );
    assert_eq!(env("AWS_ROLE_SESSION_NAME"), Some(json!("ecr-refresh")));
    // The pod stays as the restricted profile wants it: the root filesystem read-only.
    assert_eq!(container["securityContext"]["readOnlyRootFilesystem"], true);
}

/// aws.rolesAnywhere, on, with a certificate Secret.
fn roles_anywhere_values() -> Value {
    json!({"aws": {"rolesAnywhere": {
        "trustAnchorArn": "arn:aws:rolesanywhere:eu-west-1:111122223333:trust-anchor/0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0",
        "profileArn": "arn:aws:rolesanywhere:eu-west-1:111122223333:profile/9a8b7c6d-5e4f-3a2b-1c0d-efcdab987654",
        "roleArn": "arn:aws:iam::111122223333:role/ecr-refresh-on-prem",
        "certificateSecret": "ecr-refresh-certificate",
    }}})
}

/// What aws.rolesAnywhere puts in the CronJob's pod: the Secret's tls.crt and tls.key (never
/// ca.crt) mounted read-only, the variables naming the mounted files.
fn assert_roles_anywhere_pod(cronjob: &Value) {
    let pod = &cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"];
    let volume = pod["volumes"]
        .as_array()
        .expect("volumes")
        .iter()
        .find(|v| v["name"] == "aws-roles-anywhere")
        .expect("the certificate's volume");
    assert_eq!(volume["secret"]["secretName"], "ecr-refresh-certificate");
    assert_eq!(
        volume["secret"]["items"],
        json!([
            {"key": "tls.crt", "path": "tls.crt"},
            {"key": "tls.key", "path": "tls.key"},
        ]),
        "only the certificate and its key: the CA stays out"
    );
    let container = &pod["containers"][0];
    let mount = container["volumeMounts"]
        .as_array()
        .expect("volumeMounts")
        .iter()
        .find(|m| m["name"] == "aws-roles-anywhere")
        .expect("the certificate's mount");
    assert_eq!(mount["readOnly"], true);
    let dir = mount["mountPath"].as_str().unwrap();
    assert_eq!(
        env_value(cronjob, "ECR_REFRESH_ROLES_ANYWHERE_CERTIFICATE"),
        format!("{dir}/tls.crt")
    );
    assert_eq!(
        env_value(cronjob, "ECR_REFRESH_ROLES_ANYWHERE_PRIVATE_KEY"),
        format!("{dir}/tls.key")
    );
    assert_eq!(
        env_value(cronjob, "ECR_REFRESH_ROLES_ANYWHERE_TRUST_ANCHOR_ARN"),
        "arn:aws:rolesanywhere:eu-west-1:111122223333:trust-anchor/0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"
    );
    assert_eq!(
        env_value(cronjob, "ECR_REFRESH_ROLES_ANYWHERE_SESSION_DURATION"),
        "1h"
    );
    assert_eq!(container["securityContext"]["readOnlyRootFilesystem"], true);
}

#[test]
#[ignore = "needs helm (bash .ci/test)"]
fn roles_anywhere_mounts_the_certificate_read_only_and_leaves_policy_and_rbac_as_they_are() {
    let plain = render(&json!({}));
    let rendered = render(&roles_anywhere_values());
    assert_roles_anywhere_pod(one(&rendered, "CronJob"));
    // Off, every Roles Anywhere variable is empty: the binary reads them as unset.
    for (name, value) in env_of(one(&plain, "CronJob")) {
        if name.starts_with("ECR_REFRESH_ROLES_ANYWHERE_") {
            assert_eq!(value, "", "{name}");
        }
    }
    // Everything but the CronJob is the same object: RBAC and the admission policy unchanged.
    let others = |docs: &[Value]| -> Vec<Value> {
        docs.iter()
            .filter(|d| d["kind"] != "CronJob")
            .cloned()
            .collect()
    };
    assert_eq!(others(&rendered), others(&plain));
}

#[test]
#[ignore = "needs helm (bash .ci/test)"]
fn null_means_unset_never_zero() {
    // Helm drops a null key before the template sees it; `| int64` of nothing is 0, which
    // would start no Job (startingDeadlineSeconds), fail every Job at once
    // (activeDeadlineSeconds), delete each Job and its log as it ends (ttlSecondsAfterFinished)
    // or exit 2 on every run (concurrency).
    let rendered = render(&json!({
        "startingDeadlineSeconds": null,
        "activeDeadlineSeconds": null,
        "ttlSecondsAfterFinished": null,
        "concurrency": null,
    }));
    let cronjob = rendered
        .iter()
        .find(|d| d["kind"] == "CronJob")
        .expect("a CronJob");
    assert!(
        cronjob["spec"].get("startingDeadlineSeconds").is_none(),
        "{cronjob}"
    );
    let job = &cronjob["spec"]["jobTemplate"]["spec"];
    assert!(job.get("activeDeadlineSeconds").is_none(), "{job}");
    assert!(job.get("ttlSecondsAfterFinished").is_none(), "{job}");
    let concurrency = job["template"]["spec"]["containers"][0]["env"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "ECR_REFRESH_CONCURRENCY")
        .expect("the variable is there");
    assert_eq!(concurrency["value"], "", "empty: ecr-refresh's default");
    // A starting deadline under the CronJob controller's 10 s check is refused.
    let error = Helm::offline()
        .template(
            "ecr-refresh",
            "ecr-refresh",
            &json!({"startingDeadlineSeconds": 5}),
        )
        .expect_err("5 s is refused");
    assert!(error.contains("minimum: got 5, want 10"), "{error}");
}

// ---- On the real API server ------------------------------------------------------------

/// An object as the admin reads it, or None when the server says NotFound.
pub(crate) fn get(
    cp: &ControlPlane,
    kind: &str,
    namespace: Option<&str>,
    name: &str,
) -> Option<Value> {
    let mut command = cp.kubectl();
    command.args(["get", kind, name, "-o", "json"]);
    if let Some(ns) = namespace {
        command.args(["-n", ns]);
    }
    let out = command.output().expect("kubectl runs");
    if out.status.success() {
        return Some(serde_json::from_slice(&out.stdout).expect("kubectl prints JSON"));
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("NotFound"),
        "kubectl get {kind} {name}: {stderr}"
    );
    None
}

/// Held by each test that installs a release with the admission policy. Every release's
/// policy holds every ServiceAccount granted `subject-to` (one made-up permission for all),
/// so two releases with different `secretName`s refuse each other's Secret writes (README,
/// With Helm): these tests install one at a time.
fn one_policy_release_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

pub(crate) fn chart_path() -> String {
    chart_dir().to_str().expect("a UTF-8 path").to_owned()
}

/// The same release name in two namespaces (issue 36 item 5): the cluster-wide objects are
/// named by the full name, so the second install is refused, saying why and what to set, and
/// installs with fullnameOverride.
#[test]
#[ignore = "needs helm and KUBEBUILDER_ASSETS (bash .ci/test)"]
fn one_full_name_per_cluster_is_said_plainly_and_fullname_override_lifts_it() {
    let cp = ControlPlane::shared();
    let _one = one_policy_release_at_a_time();
    for ns in ["twice-a", "twice-b"] {
        cp.create_namespace(ns);
    }
    let helm = Helm::against(cp);
    let chart = chart_path();
    helm.expect(&["install", "twice", &chart, "-n", "twice-a"], None);

    let out = helm.run(&["install", "twice", &chart, "-n", "twice-b"], None);

    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "a second twice-ecr-refresh installed"
    );
    for said in [
        "ClusterRole twice-ecr-refresh already belongs to a release in namespace twice-a",
        "fullnameOverride",
    ] {
        assert!(stderr.contains(said), "says {said:?}: {stderr}");
    }
    // Refused before anything was written: no release record, no failed release to clean up.
    let left = helm.expect(&["list", "-n", "twice-b", "-a", "-q"], None);
    assert_eq!(left.trim(), "", "the refused install left a release record");
    assert!(get(cp, "cronjob", Some("twice-b"), "twice-ecr-refresh").is_none());
    helm.expect(
        &["install", "twice", &chart, "-n", "twice-b"],
        Some(&json!({"fullnameOverride": "twice-b-ecr-refresh"})),
    );
    assert!(get(cp, "clusterrole", None, "twice-b-ecr-refresh").is_some());
    for ns in ["twice-a", "twice-b"] {
        helm.expect(&["uninstall", "twice", "-n", ns, "--wait"], None);
    }
}

/// commonLabels on every object; global.imageRegistry and global.imagePullSecrets, as
/// umbrella charts set them; extraObjects rendered as templates (issue 36 item 9).
#[test]
#[ignore = "needs helm (bash .ci/test)"]
fn common_labels_globals_and_extra_objects_render() {
    let docs = render_as(
        "ecr-refresh",
        "platform",
        &json!({
            "commonLabels": {"team": "platform"},
            "global": {"imageRegistry": "mirror.example:5000", "imagePullSecrets": ["mirror-pull"]},
            "imagePullSecrets": [{"name": "own-pull"}],
            "extraObjects": [{"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "extra", "namespace": "{{ .Release.Namespace }}"}}],
        }),
    );
    // extraObjects are the operator's, as written: every other object carries the labels.
    for doc in docs.iter().filter(|d| d["metadata"]["name"] != "extra") {
        assert_eq!(
            doc["metadata"]["labels"]["team"],
            "platform",
            "{} has commonLabels",
            identity(doc)
        );
        assert!(
            doc["metadata"]["labels"]["app.kubernetes.io/component"].is_string(),
            "{} names its part in app.kubernetes.io/component",
            identity(doc)
        );
    }
    let pod = &one(&docs, "CronJob")["spec"]["jobTemplate"]["spec"]["template"]["spec"];
    assert_eq!(
        pod["containers"][0]["image"],
        "mirror.example:5000/ecr-refresh/ecr-refresh:0.2.0"
            .replace("0.2.0", &chart_field("appVersion"))
    );
    assert_eq!(
        pod["imagePullSecrets"],
        json!([{"name": "own-pull"}, {"name": "mirror-pull"}])
    );
    let extra = named(&docs, "ConfigMap", "extra");
    assert_eq!(extra["metadata"]["namespace"], "platform");
}

/// Values the schema refused though Kubernetes and EKS take them (issue 36 item 7): a
/// sha512 digest, resources.claims, and an empty region, which leaves AWS_REGION to EKS's webhook.
#[test]
#[ignore = "needs helm (bash .ci/test)"]
fn a_sha512_digest_resource_claims_and_an_empty_region_are_taken() {
    let digest = format!("sha512:{}", "ab".repeat(64));
    let docs = render(&json!({"image": {"digest": digest}, "aws": {"region": ""},
        "resources": {"claims": [{"name": "gpu"}]}}));
    let cronjob = one(&docs, "CronJob");
    let container = &cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0];
    assert!(container["image"].as_str().unwrap().ends_with(&digest));
    assert!(
        env_of(cronjob).iter().all(|(name, _)| name != "AWS_REGION"),
        "no AWS_REGION of ours to shadow the webhook's"
    );
}

#[test]
#[ignore = "needs helm and KUBEBUILDER_ASSETS (bash .ci/test)"]
fn install_upgrade_and_uninstall_leave_the_objects_the_values_say() {
    let cp = ControlPlane::shared();
    let _one = one_policy_release_at_a_time();
    for ns in ["lifecycle-a", "lifecycle-b"] {
        cp.create_namespace(ns);
    }
    let helm = Helm::against(cp);
    let (release, ns) = ("lifecycle-ecr-refresh", "lifecycle");
    let chart = chart_path();
    let arn = "arn:aws:iam::111122223333:role/lifecycle";

    let started = Instant::now();
    helm.install(
        release,
        ns,
        &json!({"serviceAccount": {"annotations": {"eks.amazonaws.com/role-arn": arn}}}),
    );
    println!("helm install: {:.1?}", started.elapsed());
    let account = get(cp, "serviceaccount", Some(ns), release).expect("the ServiceAccount");
    assert_eq!(
        account["metadata"]["annotations"]["eks.amazonaws.com/role-arn"],
        arn
    );
    let role = get(cp, "clusterrole", None, release).expect("the ClusterRole");
    assert_eq!(role["rules"].as_array().unwrap().len(), 4);
    assert!(get(cp, "clusterrolebinding", None, release).is_some());
    let cronjob = get(cp, "cronjob", Some(ns), release).expect("the CronJob");
    assert_eq!(cronjob["spec"]["schedule"], "*/10 * * * *");
    assert_eq!(env_value(&cronjob, "ECR_REFRESH_NAMESPACES"), "all");
    assert!(get(cp, "validatingadmissionpolicy", None, release).is_some());
    assert!(get(cp, "validatingadmissionpolicybinding", None, release).is_some());
    let admission = format!("{release}-admission");
    let binding = get(cp, "clusterrolebinding", None, &admission).expect("the admission binding");
    assert_eq!(
        binding["subjects"],
        json!([{"kind": "ServiceAccount", "name": release, "namespace": ns}])
    );
    assert!(get(cp, "role", Some("lifecycle-a"), release).is_none());

    let started = Instant::now();
    helm.expect(
        &["upgrade", release, &chart, "-n", ns],
        Some(&json!({
            "scope": "namespaced",
            "namespaces": ["lifecycle-a", "lifecycle-b"],
            "serviceAccounts": ["default"],
            "secretName": "lifecycle-pull",
            "schedule": "*/30 * * * *",
            "suspend": true,
            "admissionPolicy": {"enabled": false},
        })),
    );
    println!("helm upgrade: {:.1?}", started.elapsed());
    let account = get(cp, "serviceaccount", Some(ns), release).expect("the ServiceAccount");
    assert!(
        account["metadata"]["annotations"]
            .get("eks.amazonaws.com/role-arn")
            .is_none(),
        "the annotation the new values leave out is gone: {account}"
    );
    assert!(get(cp, "clusterrole", None, release).is_none());
    assert!(get(cp, "clusterrolebinding", None, release).is_none());
    assert!(get(cp, "validatingadmissionpolicy", None, release).is_none());
    assert!(get(cp, "validatingadmissionpolicybinding", None, release).is_none());
    assert!(get(cp, "clusterrole", None, &admission).is_none());
    assert!(get(cp, "clusterrolebinding", None, &admission).is_none());
    for target in ["lifecycle-a", "lifecycle-b"] {
        let role = get(cp, "role", Some(target), release).expect("a Role in each namespace");
        assert_eq!(role["rules"][0]["resourceNames"], json!(["lifecycle-pull"]));
        assert_eq!(role["rules"][3]["resourceNames"], json!(["default"]));
        let binding = get(cp, "rolebinding", Some(target), release).expect("its binding");
        assert_eq!(
            binding["subjects"],
            json!([{"kind": "ServiceAccount", "name": release, "namespace": ns}])
        );
    }
    let cronjob = get(cp, "cronjob", Some(ns), release).expect("the CronJob");
    assert_eq!(cronjob["spec"]["schedule"], "*/30 * * * *");
    assert_eq!(cronjob["spec"]["suspend"], true);
    assert_eq!(
        env_value(&cronjob, "ECR_REFRESH_NAMESPACES"),
        "lifecycle-a,lifecycle-b"
    );
    assert_eq!(
        env_value(&cronjob, "ECR_REFRESH_SECRET_NAME"),
        "lifecycle-pull"
    );

    let started = Instant::now();
    helm.expect(&["uninstall", release, "-n", ns], None);
    println!("helm uninstall: {:.1?}", started.elapsed());
    assert!(get(cp, "serviceaccount", Some(ns), release).is_none());
    assert!(get(cp, "cronjob", Some(ns), release).is_none());
    for target in ["lifecycle-a", "lifecycle-b"] {
        assert!(get(cp, "role", Some(target), release).is_none());
        assert!(get(cp, "rolebinding", Some(target), release).is_none());
    }
    let releases = helm.expect(&["list", "-n", ns, "-q"], None);
    assert_eq!(releases.trim(), "", "no release left");
}

#[test]
#[ignore = "needs helm and KUBEBUILDER_ASSETS (bash .ci/test)"]
fn roles_anywhere_installs_with_the_certificate_secret_mounted_read_only() {
    let cp = ControlPlane::shared();
    let _one = one_policy_release_at_a_time();
    let helm = Helm::against(cp);
    let (release, ns) = ("roles-anywhere-ecr-refresh", "roles-anywhere");

    helm.install(release, ns, &roles_anywhere_values());
    let cronjob = get(cp, "cronjob", Some(ns), release).expect("the CronJob");
    assert_roles_anywhere_pod(&cronjob);
    // The same four rules as without Roles Anywhere (the lifecycle test's install).
    let role = get(cp, "clusterrole", None, release).expect("the ClusterRole");
    assert_eq!(role["rules"].as_array().unwrap().len(), 4, "{role}");
    helm.expect(&["uninstall", release, "-n", ns], None);
    assert!(get(cp, "cronjob", Some(ns), release).is_none());
}

/// `kubectl create -f -` with `body`, as whoever `kubeconfig` names.
fn create_as(cp: &ControlPlane, kubeconfig: &Path, namespace: &str, body: &Value) -> Output {
    let mut child = cp
        .kubectl_as(kubeconfig)
        .args(["create", "-n", namespace, "-f", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kubectl runs");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(body.to_string().as_bytes())
        .expect("writing to kubectl");
    child.wait_with_output().expect("kubectl ends")
}

/// A Warning Event as src/cluster/events.rs writes it, regarding Secret `secret` in `namespace`.
fn warning_event(namespace: &str, name: &str, secret: &str) -> Value {
    json!({"apiVersion": "events.k8s.io/v1", "kind": "Event",
           "metadata": {"name": name, "namespace": namespace},
           "eventTime": "2026-12-01T08:00:00.000000Z",
           "type": "Warning", "reason": "RefreshFailed", "action": "Refresh",
           "note": "ecr-refresh could not refresh its image-pull Secret",
           "reportingController": "ecr-refresh", "reportingInstance": "ecr-refresh-29400050-x7k2p",
           "regarding": {"apiVersion": "v1", "kind": "Secret", "namespace": namespace, "name": secret}})
}

/// The policy holds the chart's ServiceAccount through the `-admission` ClusterRoleBinding's
/// grant, so this installs it under a name of its own: a binding naming anyone else would
/// leave the attacks to RBAC, which admits them.
#[test]
#[ignore = "needs helm and KUBEBUILDER_ASSETS (bash .ci/test)"]
fn the_charts_admission_policy_refuses_a_stolen_tokens_secrets_and_events() {
    let cp = ControlPlane::shared();
    let _one = one_policy_release_at_a_time();
    let (release, ns, victim) = ("policy-ecr-refresh", "policy", "policy-victim");
    let account = "policy-runner";
    cp.create_namespace(victim);
    let helm = Helm::against(cp);
    helm.install(
        release,
        ns,
        &json!({"secretName": "policy-pull", "serviceAccount": {"name": account}}),
    );
    let token = cp.kubeconfig_for_service_account(ns, account);
    let denied =
        format!("ValidatingAdmissionPolicy '{release}' with binding '{release}' denied request");
    let pull_secret = |name: &str| {
        json!({"apiVersion": "v1", "kind": "Secret",
               "metadata": {"name": name, "labels": {"app.kubernetes.io/managed-by": "ecr-refresh"}},
               "type": "kubernetes.io/dockerconfigjson",
               "data": {".dockerconfigjson": b64(r#"{"auths":{}}"#)}})
    };
    // (what, the resource kubectl deletes an admitted one as, its body, the denial).
    let attacks = [
        (
            "a service-account-token Secret under our name",
            "secret",
            json!({"apiVersion": "v1", "kind": "Secret",
                   "metadata": {"name": "policy-pull",
                                "annotations": {"kubernetes.io/service-account.name": "default"}},
                   "type": "kubernetes.io/service-account-token"}),
            "may only create Secrets of type kubernetes.io/dockerconfigjson",
        ),
        (
            "a pull Secret under another name",
            "secret",
            pull_secret("argocd-repo-creds"),
            "may only write the Secret named policy-pull",
        ),
        (
            "a Warning Event regarding another Secret",
            "events.events.k8s.io",
            warning_event(victim, "argocd-repo-creds.1", "argocd-repo-creds"),
            "may only write Events regarding its Secret policy-pull",
        ),
    ];
    for (what, resource, body, message) in attacks {
        // A new policy takes a moment to be enforced: until then an attack gets through, and
        // is undone and tried again.
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let out = create_as(cp, &token, victim, &body);
            let stderr = String::from_utf8_lossy(&out.stderr);
            if !out.status.success() {
                assert!(
                    stderr.contains(&denied) && stderr.contains(message),
                    "{what}: refused, but not by the chart's policy: {stderr}"
                );
                break;
            }
            let name = body["metadata"]["name"].as_str().unwrap();
            cp.kubectl_run(&["delete", resource, name, "-n", victim]);
            assert!(
                Instant::now() < deadline,
                "{what}: still admitted 30 s after the policy was installed"
            );
            std::thread::sleep(Duration::from_millis(250));
        }
    }
    // What a run does is admitted: the policy refuses the attack, not the ServiceAccount.
    let ours = [
        ("our own Secret", pull_secret("policy-pull")),
        (
            "a Warning Event regarding our Secret",
            warning_event(victim, "policy-pull.1", "policy-pull"),
        ),
    ];
    for (what, body) in ours {
        let out = create_as(cp, &token, victim, &body);
        assert!(
            out.status.success(),
            "{what}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    helm.expect(&["uninstall", release, "-n", ns], None);
}

/// A run of the binary, outside a pod, as the release's ServiceAccount `account` (a token
/// from the TokenRequest API): the CronJob's environment, with a fake ECR's endpoint and keys,
/// the registry [`REGISTRY`], JSON logs, a termination log of its own and `install` as
/// `ECR_REFRESH_INSTALL` (in a pod the token names it). It must exit 0.
pub(crate) fn run_as_the_charts_service_account(
    cp: &ControlPlane,
    ns: &str,
    account: &str,
    cronjob: &Value,
    install: &str,
) {
    let kubeconfig = cp.kubeconfig_for_service_account(ns, account);
    let ecr = FakeEcr::start();
    let dir = tempfile::tempdir().expect("a temporary directory");
    let mut command = Command::new(env!("CARGO_BIN_EXE_ecr-refresh"));
    command.env_clear().env("HOME", dir.path());
    for (name, value) in env_of(cronjob) {
        command.env(name, value);
    }
    let out = command
        .env("KUBECONFIG", &kubeconfig)
        .env("AWS_ENDPOINT_URL_ECR", ecr.url())
        .env("AWS_ACCESS_KEY_ID", "AKIDFAKE")
        .env("AWS_SECRET_ACCESS_KEY", "fake-secret")
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .env("ECR_REFRESH_REGISTRIES", REGISTRY)
        .env("ECR_REFRESH_LOG_FORMAT", "json")
        .env("ECR_REFRESH_INSTALL", install)
        .env(
            "ECR_REFRESH_TERMINATION_LOG",
            dir.path().join("termination-log"),
        )
        .output()
        .expect("ecr-refresh runs");
    assert_eq!(
        out.status.code(),
        Some(0),
        "the run as the chart's ServiceAccount {ns}/{account}:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
#[ignore = "needs helm and KUBEBUILDER_ASSETS (bash .ci/test)"]
fn a_run_as_the_charts_service_account_writes_the_secrets_and_the_pull_secret_entries() {
    let cp = ControlPlane::shared();
    let _one = one_policy_release_at_a_time();
    let (release, ns) = ("run-ecr-refresh", "run");
    let targets = ["run-a", "run-b"];
    for target in targets {
        cp.create_namespace(target);
        // No controller-manager here to make the `default` ServiceAccount.
        cp.kubectl_run(&["create", "serviceaccount", "default", "-n", target]);
    }
    let helm = Helm::against(cp);
    helm.install(
        release,
        ns,
        &json!({"namespaces": targets, "serviceAccounts": ["default"]}),
    );
    let cronjob = get(cp, "cronjob", Some(ns), release).expect("the CronJob");
    // As in a pod, where the ServiceAccount's token names the install: the record is
    // written under the chart's policy too.
    run_as_the_charts_service_account(cp, ns, release, &cronjob, "writes-by-sa/chart-ecr-refresh");
    for target in targets {
        let secret = get(cp, "secret", Some(target), "aws-ecr-token").expect("the Secret");
        assert_eq!(secret["type"], "kubernetes.io/dockerconfigjson");
        assert!(
            docker_config(&secret)["auths"][REGISTRY].is_object(),
            "{target}: {secret}"
        );
        assert_eq!(
            secret["metadata"]["annotations"]["ecr-refresh/install"],
            "writes-by-sa/chart-ecr-refresh"
        );
        let account = get(cp, "serviceaccount", Some(target), "default").expect("default");
        assert_eq!(
            account["imagePullSecrets"],
            json!([{"name": "aws-ecr-token"}]),
            "{target}"
        );
    }
    helm.expect(&["uninstall", release, "-n", ns], None);
}

/// A release in mode check runs as the check's own ServiceAccount, granted reads only: no
/// refresh ServiceAccount or role, nothing that creates or patches a Secret. In mode
/// refresh, check.podRights adds the check's account beside the refresh's, whose role
/// reads no pod.
#[test]
#[ignore = "needs helm (bash .ci/test)"]
fn a_check_release_runs_as_the_check_account_granted_reads_only() {
    let writes = [
        "create",
        "update",
        "patch",
        "delete",
        "deletecollection",
        "*",
    ];
    for values in [
        json!({"mode": "check", "check": {"podRights": true}}),
        json!({"mode": "check", "check": {"podRights": true}, "scope": "namespaced",
               "namespaces": ["team-a", "team-b"]}),
        json!({"mode": "check"}),
    ] {
        let docs = render(&values);
        let cronjob = one(&docs, "CronJob");
        assert_eq!(
            cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["serviceAccountName"],
            "ecr-refresh-check",
            "{values}"
        );
        assert_eq!(env_value(cronjob, "ECR_REFRESH_MODE"), "check");
        let accounts: Vec<&Value> = of_kind(&docs, "ServiceAccount");
        assert_eq!(
            accounts.len(),
            1,
            "{values}: only the check's: {accounts:#?}"
        );
        assert_eq!(accounts[0]["metadata"]["name"], "ecr-refresh-check");
        let roles: Vec<&Value> = docs
            .iter()
            .filter(|d| d["kind"] == "ClusterRole" || d["kind"] == "Role")
            .filter(|d| d["metadata"]["name"] != "ecr-refresh-admission")
            .collect();
        assert!(!roles.is_empty(), "{values}");
        for role in roles {
            assert_eq!(role["metadata"]["name"], "ecr-refresh-check", "{role}");
            for rule in role["rules"].as_array().expect("rules") {
                let verbs = rule["verbs"].as_array().expect("verbs");
                assert!(
                    verbs
                        .iter()
                        .all(|v| !writes.contains(&v.as_str().unwrap_or("*"))),
                    "{values}: {} grants a write: {rule}",
                    identity(role)
                );
            }
            let pods = role["rules"]
                .as_array()
                .unwrap()
                .iter()
                .any(|r| r["resources"] == json!(["pods"]));
            assert_eq!(pods, values["check"]["podRights"] == true, "{role}");
        }
    }

    let docs = render(&json!({"check": {"podRights": true}}));
    let refresh = named(&docs, "ClusterRole", "ecr-refresh");
    assert!(
        !refresh["rules"].to_string().contains("pods"),
        "the refresh's role reads no pod: {refresh}"
    );
    named(&docs, "ServiceAccount", "ecr-refresh-check");
    named(&docs, "ClusterRole", "ecr-refresh-check");
    assert_eq!(
        one(&docs, "CronJob")["spec"]["jobTemplate"]["spec"]["template"]["spec"]["serviceAccountName"],
        "ecr-refresh"
    );
}

/// The NOTES (issue 36 item 8): a check release says it writes nothing; the first-run Job's
/// name fits the 63 characters of the `job-name` label its pods get, whatever the release's
/// name; and uninstalling is said to leave the Secrets, with where to read how to remove them.
#[test]
#[ignore = "needs helm and KUBEBUILDER_ASSETS (bash .ci/test)"]
fn the_notes_say_what_the_release_does_and_what_uninstall_leaves() {
    let cp = ControlPlane::shared();
    let ns = "notes-words";
    cp.create_namespace(ns);
    let chart = chart_path();
    let notes = |release: &str, values: &[&str]| {
        let mut args = vec!["install", release, &chart, "-n", ns, "--dry-run=client"];
        for v in values {
            args.extend(["--set", v]);
        }
        let out = Helm::against(cp).expect(&args, None);
        out.split_once("NOTES:\n")
            .unwrap_or_else(|| panic!("no NOTES in: {out}"))
            .1
            .to_owned()
    };

    let refresh = notes("words", &[]);
    assert!(
        refresh.contains("writing Secret aws-ecr-token"),
        "{refresh}"
    );
    assert!(
        refresh.contains("Uninstalling leaves the Secrets"),
        "{refresh}"
    );
    let check = notes("words", &["mode=check"]);
    assert!(check.contains("checking Secret aws-ecr-token"), "{check}");
    assert!(check.contains("writing nothing"), "{check}");
    assert!(!check.contains("writing Secret"), "{check}");

    let first = notes("words", &["firstRun.enabled=true"]);
    assert!(
        first.contains("job=words-ecr-refresh-first-run-1"),
        "names the release's first-run Job: {first}"
    );
    let long = "a-release-name-of-fifty-three-characters-for-the-test";
    assert_eq!(long.len(), 53);
    let text = notes(long, &["firstRun.enabled=false"]);
    let job = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("job="))
        .unwrap_or_else(|| panic!("no job= line: {text}"));
    let name = job.replace("$(date +%s)", "1764576000");
    assert!(name.len() <= 63, "{name} is {} characters", name.len());
    assert!(name.starts_with("a-release-name"), "{name}");
    assert!(!name.contains("--"), "{name}");
}

/// The NOTES' first-run lines: the wait they print returns for a failed run as for a done
/// one, on a real kube-apiserver (no Job controller runs: the admin writes each Job's
/// status as the controller would, through the status subresource).
#[test]
#[ignore = "needs helm and KUBEBUILDER_ASSETS (bash .ci/test)"]
fn the_notes_wait_returns_when_the_first_run_fails_as_when_it_is_done() {
    let cp = ControlPlane::shared();
    let ns = "notes-wait";
    cp.create_namespace(ns);
    let out = Helm::against(cp).expect(
        &[
            "install",
            "notes",
            &chart_path(),
            "-n",
            ns,
            "--dry-run=client",
        ],
        None,
    );
    let notes = out
        .split_once("NOTES:\n")
        .unwrap_or_else(|| panic!("no NOTES in: {out}"))
        .1;
    let wait = notes
        .lines()
        .find(|l| l.trim_start().starts_with("kubectl wait "))
        .unwrap_or_else(|| panic!("no kubectl wait in the NOTES: {notes}"))
        .trim();
    assert!(wait.contains("--timeout=10m"), "{wait}");

    let now = "2026-12-01T08:00:00Z";
    let later = "2026-12-01T08:01:00Z";
    let condition =
        |kind: &str| json!({"type": kind, "status": "True", "lastTransitionTime": later});
    for (job, status) in [
        (
            "notes-failed",
            json!({"startTime": now, "failed": 2,
                   "conditions": [condition("FailureTarget"), condition("Failed")]}),
        ),
        (
            "notes-done",
            json!({"startTime": now, "completionTime": later, "succeeded": 1,
                   "conditions": [condition("SuccessCriteriaMet"), condition("Complete")]}),
        ),
    ] {
        let body = json!({
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": job, "namespace": ns},
            "spec": {"template": {"spec": {"restartPolicy": "Never",
                "containers": [{"name": "run", "image": "example.com/run:1"}]}}}
        });
        let mut create = cp.kubectl();
        create.args(["create", "-f", "-"]).stdin(Stdio::piped());
        let mut child = create.stdout(Stdio::null()).spawn().expect("kubectl runs");
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(body.to_string().as_bytes())
            .expect("writing the Job");
        assert!(child.wait().expect("kubectl ends").success(), "{job}");
        cp.kubectl_run(&[
            "patch",
            "job",
            job,
            "-n",
            ns,
            "--subresource=status",
            "--type=merge",
            "-p",
            &json!({ "status": status }).to_string(),
        ]);

        // The NOTES' line as printed, the shell's `job` set, a short timeout instead of 10m.
        let script = format!(
            "job={job}\n{}",
            wait.replace("--timeout=10m", "--timeout=20s")
        );
        let path = format!(
            "{}:{}",
            cp.assets().display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let started = Instant::now();
        let out = Command::new("sh")
            .arg("-c")
            .arg(&script)
            .env("PATH", path)
            .env("KUBECONFIG", cp.admin_kubeconfig())
            .env("KUBERC", "off")
            .output()
            .expect("sh runs");
        assert!(
            out.status.success(),
            "{job}: {script}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(started.elapsed() < Duration::from_secs(15), "{job}");
    }
}

// ---- Argo CD's repository credentials (argocd.namespace) -----------------------------------

#[test]
#[ignore = "needs helm (bash .ci/test)"]
fn argocd_renders_a_cluster_role_by_name_held_to_its_namespace_by_its_own_policy_only_when_set() {
    let other = "210987654321.dkr.ecr-fips.us-gov-west-1.amazonaws.com";
    let values = json!({
        "argocd": {"namespace": "gitops", "type": "oci", "project": "team-a"},
        "registries": [REGISTRY, "public.ecr.aws", other],
    });
    let docs = render(&values);
    // A ClusterRole: a kustomize overlay's namespace: would move a Role out of gitops.
    let role = named(&docs, "ClusterRole", "ecr-refresh-argocd");
    assert!(role["metadata"]["namespace"].is_null());
    assert_eq!(
        role["rules"][0]["resourceNames"],
        json!([
            "aws-ecr-token-123456789012-us-east-1",
            "aws-ecr-token-123456789012-us-east-1-repository",
            "aws-ecr-token-210987654321-us-gov-west-1",
            "aws-ecr-token-210987654321-us-gov-west-1-repository"
        ]),
        "two per private registry, as src/argocd/mod.rs names them"
    );
    assert_eq!(role["rules"][0]["verbs"], json!(["get", "patch"]));
    named(&docs, "ClusterRoleBinding", "ecr-refresh-argocd");
    let policy = named(&docs, "ValidatingAdmissionPolicy", "ecr-refresh-argocd");
    assert_eq!(
        policy["spec"]["validations"][0]["expression"], "request.namespace == 'gitops'",
        "the names it grants everywhere, written only in gitops"
    );
    let urls = policy["spec"]["variables"][0]["expression"]
        .as_str()
        .unwrap();
    assert!(
        urls.contains(&format!(
            "'aws-ecr-token-123456789012-us-east-1': 'oci://{REGISTRY}/'"
        )) && urls.contains(&format!(
            "'aws-ecr-token-123456789012-us-east-1-repository': 'oci://{REGISTRY}'"
        )) && urls.contains(&format!(
            "'aws-ecr-token-210987654321-us-gov-west-1': 'oci://{other}/'"
        )),
        "{urls}"
    );
    // As a Secret's data reaches CEL: base64 text.
    let encoded = policy["spec"]["variables"][1]["expression"]
        .as_str()
        .unwrap();
    assert!(
        encoded.contains(&b64(&format!("oci://{REGISTRY}/")))
            && encoded.contains(&b64(&format!("oci://{REGISTRY}"))),
        "{encoded}"
    );
    let kinds = policy["spec"]["variables"][2]["expression"]
        .as_str()
        .unwrap();
    assert!(
        kinds.contains("'aws-ecr-token-123456789012-us-east-1': 'repo-creds'")
            && kinds.contains("'aws-ecr-token-123456789012-us-east-1-repository': 'repository'"),
        "{kinds}"
    );
    named(
        &docs,
        "ValidatingAdmissionPolicyBinding",
        "ecr-refresh-argocd",
    );
    let main = named(&docs, "ValidatingAdmissionPolicy", "ecr-refresh");
    assert_eq!(
        main["spec"]["matchConditions"][1]["name"],
        "not-an-argocd-secret"
    );
    let cronjob = one(&docs, "CronJob");
    assert_eq!(env_value(cronjob, "ECR_REFRESH_ARGOCD_NAMESPACE"), "gitops");
    assert_eq!(env_value(cronjob, "ECR_REFRESH_ARGOCD_TYPE"), "oci");
    assert_eq!(env_value(cronjob, "ECR_REFRESH_ARGOCD_PROJECT"), "team-a");

    // Off: none of it, and the type not sent (ecr-refresh refuses it alone).
    let off = render(&json!({}));
    assert!(
        of_kind(&off, "ClusterRole")
            .iter()
            .all(|r| r["metadata"]["name"] != "ecr-refresh-argocd")
    );
    let main = named(&off, "ValidatingAdmissionPolicy", "ecr-refresh");
    assert_eq!(main["spec"]["matchConditions"].as_array().unwrap().len(), 1);
    assert_eq!(
        env_value(one(&off, "CronJob"), "ECR_REFRESH_ARGOCD_TYPE"),
        ""
    );
    let with_project = render(&json!({"argocd": {"project": "team-a"}}));
    assert_eq!(
        env_value(one(&with_project, "CronJob"), "ECR_REFRESH_ARGOCD_PROJECT"),
        "",
        "no project without the namespace"
    );

    // No private registry: refused, as ecr-refresh would refuse it.
    let refused = Helm::offline()
        .template(
            "ecr-refresh",
            "ecr-refresh",
            &json!({"argocd": {"namespace": "argocd"}, "registries": ["public.ecr.aws"]}),
        )
        .unwrap_err();
    assert!(
        refused.contains("argocd.namespace needs the private registries"),
        "{refused}"
    );
}

/// The Argo CD attacks of tests/common/attacks.rs against the chart's policies, on the
/// shared control plane under a release, namespace and Secret name of their own.
#[test]
#[ignore = "needs helm and KUBEBUILDER_ASSETS (bash .ci/test)"]
fn the_charts_argocd_policy_refuses_the_argo_cd_attacks() {
    use common::attacks::{argocd_attacks, argocd_refused_by_rbac, argocd_target_objects};
    let cp = ControlPlane::shared();
    let _one = one_policy_release_at_a_time();
    let (release, ns, argo, account) = ("argo-ecr-refresh", "argo", "argo-cd", "argo-runner");
    let name = "argo-pull-123456789012-us-east-1";
    cp.create_namespace(argo);
    let helm = Helm::against(cp);
    helm.install(
        release,
        ns,
        &json!({
            "secretName": "argo-pull",
            "serviceAccount": {"name": account},
            "registries": [REGISTRY],
            "argocd": {"namespace": argo},
        }),
    );
    let token = cp.service_account_token(ns, account);
    let files = tempfile::tempdir().unwrap();
    let create = |object: &Value| {
        let path = files.path().join("object.json");
        std::fs::write(&path, object.to_string()).unwrap();
        cp.kubectl_run(&["create", "-f", path.to_str().unwrap()]);
    };
    for (_, object) in argocd_target_objects(argo, name, true) {
        if object["kind"] == "Secret" {
            create(&object);
        }
    }
    let denied = format!(
        "ValidatingAdmissionPolicy '{release}-argocd' with binding '{release}-argocd' denied request"
    );
    for attack in argocd_attacks(argo, name) {
        if attack.method == "POST" {
            cp.kubectl_run(&["delete", "secret", name, "-n", argo, "--ignore-not-found"]);
        }
        // A new policy takes a moment to be enforced: until then an attack may get through.
        let deadline = Instant::now() + Duration::from_secs(30);
        let (status, body) = loop {
            let (status, body) = common::real::send(
                cp,
                &token,
                attack.method,
                &attack.path,
                attack.content_type,
                &attack.body,
            );
            if status == 403 || Instant::now() > deadline {
                break (status, body);
            }
            std::thread::sleep(Duration::from_millis(250));
        };
        let message = body["message"].as_str().unwrap_or_default();
        assert_eq!(status, 403, "{}: {body}", attack.what);
        if argocd_refused_by_rbac(attack.what) {
            assert!(
                message.contains("cannot "),
                "{}: by RBAC: {body}",
                attack.what
            );
        } else {
            assert!(
                message.contains(&denied) && message.contains(attack.refused_with),
                "{}: by the chart's Argo CD policy for {:?}: {body}",
                attack.what,
                attack.refused_with
            );
        }
        if attack.method == "POST" {
            // Ours again, with someone else's label, annotation and key, as seeded.
            let (_, ours) = argocd_target_objects(argo, name, true).pop().unwrap();
            create(&ours);
        }
    }
    helm.expect(&["uninstall", release, "-n", ns], None);
}

/// The `--set` values of a shell command, as Helm reads them: `a.b\.c=v` is `{a: {"b.c": v}}`;
/// `true`, `false` and numbers are typed unless given with `--set-string`.
fn set_values(command: &str) -> Value {
    let mut values = json!({});
    let words: Vec<&str> = command.split_whitespace().collect();
    for pair in words.windows(2) {
        let typed = match pair[0] {
            "--set" => true,
            "--set-string" => false,
            _ => continue,
        };
        let arg = pair[1].trim_matches('\'').trim_matches('"');
        let (key, value) = arg
            .split_once('=')
            .unwrap_or_else(|| panic!("--set {arg}: no ="));
        let keys: Vec<String> = key
            .replace("\\\\", "\\")
            .replace("\\.", "\u{0}")
            .split('.')
            .map(|k| k.replace('\u{0}', "."))
            .collect();
        let value = match value {
            "true" if typed => json!(true),
            "false" if typed => json!(false),
            v if typed && v.parse::<i64>().is_ok() => json!(v.parse::<i64>().unwrap()),
            v => json!(v),
        };
        let mut at = &mut values;
        for k in &keys {
            // `name[N]`: the Nth item of the list `name`, as Helm's --set reads it.
            let (name, index) = match k.strip_suffix(']').and_then(|k| k.split_once('[')) {
                Some((name, n)) => (name, Some(n.parse::<usize>().expect("a list index"))),
                None => (k.as_str(), None),
            };
            at = at
                .as_object_mut()
                .expect("a map")
                .entry(name.to_owned())
                .or_insert_with(|| {
                    if index.is_some() {
                        json!([])
                    } else {
                        json!({})
                    }
                });
            if let Some(n) = index {
                let list = at.as_array_mut().expect("a list");
                list.resize(list.len().max(n + 1), json!({}));
                at = &mut list[n];
            }
        }
        *at = value;
    }
    values
}

/// The chart chooses no region: rendered without one, the CronJob has no AWS_REGION entry at
/// all. And every `helm install` or `helm upgrade --install` that README, the chart's README
/// and the book show sets `aws.region`, which the CronJob then renders.
#[test]
#[ignore = "needs helm (bash .ci/test)"]
fn no_default_region_and_every_helm_recipe_renders_the_region_it_sets() {
    let defaults = render(&json!({}));
    assert!(
        env_of(one(&defaults, "CronJob"))
            .iter()
            .all(|(name, _)| name != "AWS_REGION"),
        "the chart's defaults set AWS_REGION"
    );
    let mut texts = common::docs::texts();
    for extra in ["README.md", "charts/ecr-refresh/README.md"] {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(extra);
        texts.push((
            extra.to_owned(),
            std::fs::read_to_string(&path).expect("a README"),
        ));
    }
    let mut recipes = 0;
    for (page, text) in &texts {
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            let line = line.trim();
            if !(line.starts_with("helm install ") || line.starts_with("helm upgrade --install ")) {
                continue;
            }
            let mut command = String::new();
            for part in &lines[i..] {
                let part = part.trim();
                match part.strip_suffix('\\') {
                    Some(p) => {
                        command.push_str(p);
                        command.push(' ');
                    }
                    None => {
                        command.push_str(part);
                        break;
                    }
                }
            }
            // A spoke (docs/src/fleets.md) runs nothing, so it has no region: its recipe,
            // `spoke-helm`, is applied by name (common::docs::recipes) in chart_lifecycle.rs.
            if command.contains("--set spoke.enabled=true") {
                continue;
            }
            // The one placeholder the book leaves in a value: a Roles Anywhere id.
            let values =
                set_values(&command.replace("<id>", "00000000-0000-0000-0000-000000000000"));
            let region = values["aws"]["region"]
                .as_str()
                .unwrap_or_else(|| panic!("{page}: `{command}` sets no aws.region"))
                .to_owned();
            let mut values = values;
            // The image is not pulled here; a registry of your own is not needed to render.
            values["image"]["repository"] = json!("registry.example/ecr-refresh");
            let docs = render(&values);
            let env = env_of(one(&docs, "CronJob"));
            let set: Vec<&str> = env
                .iter()
                .filter(|(n, _)| n == "AWS_REGION")
                .map(|(_, v)| v.as_str())
                .collect();
            assert_eq!(set, [region.as_str()], "{page}: `{command}`");
            recipes += 1;
        }
    }
    assert!(recipes >= 3, "found only {recipes} Helm recipes");
}

// ---- Fleet (issue 51): the spoke install and the hub's values --------------------------

/// The one rule of the Role `<name>` (namespace `ns`): (resources, verbs, resourceNames).
fn one_rule(docs: &[Value], name: &str, ns: &str) -> (Value, Value, Value) {
    let roles: Vec<&Value> = of_kind(docs, "Role")
        .into_iter()
        .filter(|d| d["metadata"]["name"] == name && d["metadata"]["namespace"] == ns)
        .collect();
    assert_eq!(roles.len(), 1, "one Role {ns}/{name} in {docs:#?}");
    let role = roles[0];
    let rules = role["rules"].as_array().expect("rules");
    assert_eq!(rules.len(), 1, "one rule: {role}");
    assert_eq!(rules[0]["apiGroups"], json!([""]), "{role}");
    (
        rules[0]["resources"].clone(),
        rules[0]["verbs"].clone(),
        rules[0]["resourceNames"].clone(),
    )
}

/// `spoke.enabled`: the ServiceAccount, its RBAC and the admission policy, with no CronJob and
/// no Job; the hub's one right (create on serviceaccounts/token for that ServiceAccount only,
/// or impersonate with spoke.auth) in a Role bound to `<fullname>-hub` alone, or to the
/// subjects of spoke.hub.subjects; the check's ServiceAccount its second name with
/// check.podRights. What a spoke can't be is refused, saying why.
#[test]
#[ignore = "needs helm (bash .ci/test)"]
fn spoke_mode_renders_the_install_without_a_run_and_the_hubs_one_right() {
    let spoke = render(&json!({"spoke": {"enabled": true}, "firstRun": {"enabled": true}}));
    for kind in ["CronJob", "Job"] {
        assert!(of_kind(&spoke, kind).is_empty(), "no {kind}: {spoke:#?}");
    }
    let normal = render(&json!({}));
    for (kind, name) in [
        ("ServiceAccount", "ecr-refresh"),
        ("ClusterRole", "ecr-refresh"),
        ("ClusterRoleBinding", "ecr-refresh"),
        ("ClusterRole", "ecr-refresh-admission"),
        ("ClusterRoleBinding", "ecr-refresh-admission"),
        ("ValidatingAdmissionPolicy", "ecr-refresh"),
        ("ValidatingAdmissionPolicyBinding", "ecr-refresh"),
    ] {
        let strip = |d: &Value| {
            let mut d = d.clone();
            d["metadata"]["labels"] = Value::Null;
            d
        };
        assert_eq!(
            strip(named(&spoke, kind, name)),
            strip(named(&normal, kind, name)),
            "the spoke's {kind} {name} is the install's"
        );
    }
    assert_eq!(
        one_rule(&spoke, "ecr-refresh-hub", "ecr-refresh"),
        (
            json!(["serviceaccounts/token"]),
            json!(["create"]),
            json!(["ecr-refresh"])
        )
    );
    let account = named(&spoke, "ServiceAccount", "ecr-refresh-hub");
    assert_eq!(account["metadata"]["namespace"], "ecr-refresh");
    let binding = named(&spoke, "RoleBinding", "ecr-refresh-hub");
    assert_eq!(
        binding["roleRef"],
        json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "ecr-refresh-hub"})
    );
    assert_eq!(
        binding["subjects"],
        json!([{"kind": "ServiceAccount", "name": "ecr-refresh-hub", "namespace": "ecr-refresh"}])
    );
    assert_eq!(
        spoke.len(),
        10,
        "the install's 7 objects and the hub's 3: {:?}",
        spoke.iter().map(identity).collect::<Vec<_>>()
    );

    let impersonate = render(&json!({"spoke": {"enabled": true, "auth": "impersonate"}}));
    assert_eq!(
        one_rule(&impersonate, "ecr-refresh-hub", "ecr-refresh"),
        (
            json!(["serviceaccounts"]),
            json!(["impersonate"]),
            json!(["ecr-refresh"])
        )
    );

    let with_check = render(&json!({"spoke": {"enabled": true}, "check": {"podRights": true}}));
    assert_eq!(
        one_rule(&with_check, "ecr-refresh-hub", "ecr-refresh").2,
        json!(["ecr-refresh", "ecr-refresh-check"])
    );
    named(&with_check, "ServiceAccount", "ecr-refresh-check");
    assert!(of_kind(&with_check, "CronJob").is_empty());

    // Another release, namespace and ServiceAccount name: the rule follows them.
    let team = render_as(
        "team",
        "platform",
        &json!({"spoke": {"enabled": true}, "serviceAccount": {"name": "refresher"}}),
    );
    assert_eq!(
        one_rule(&team, "team-ecr-refresh-hub", "platform"),
        (
            json!(["serviceaccounts/token"]),
            json!(["create"]),
            json!(["refresher"])
        )
    );

    // The hub's own identity instead of, or beside, the chart's ServiceAccount.
    let subjects =
        json!([{"kind": "User", "name": "hub-admin", "apiGroup": "rbac.authorization.k8s.io"}]);
    let theirs = render(
        &json!({"spoke": {"enabled": true, "hub": {"serviceAccount": {"create": false}, "subjects": subjects}}}),
    );
    assert!(
        of_kind(&theirs, "ServiceAccount")
            .iter()
            .all(|d| d["metadata"]["name"] != "ecr-refresh-hub")
    );
    assert_eq!(
        named(&theirs, "RoleBinding", "ecr-refresh-hub")["subjects"],
        subjects
    );
    let both = render(&json!({"spoke": {"enabled": true, "hub": {"subjects": subjects}}}));
    assert_eq!(
        named(&both, "RoleBinding", "ecr-refresh-hub")["subjects"]
            .as_array()
            .unwrap()
            .len(),
        2
    );

    // Off: no hub Role.
    assert!(
        normal
            .iter()
            .all(|d| d["metadata"]["name"] != "ecr-refresh-hub")
    );

    let helm = Helm::offline();
    for (values, message) in [
        (
            json!({"spoke": {"enabled": true, "hub": {"serviceAccount": {"create": false}}}}),
            "spoke.hub.serviceAccount.create is false and spoke.hub.subjects is empty",
        ),
        (
            json!({"spoke": {"enabled": true}, "mode": "check"}),
            "spoke.enabled renders no CronJob",
        ),
        (
            json!({"spoke": {"enabled": true}, "clusters": {"source": "argocd"}}),
            "spoke.enabled and clusters.source",
        ),
        (
            json!({"spoke": {"enabled": true, "auth": "exec"}}),
            "at '/spoke/auth': value must be one of 'token-request', 'impersonate'",
        ),
    ] {
        match helm.template("ecr-refresh", "ecr-refresh", &values) {
            Ok(_) => panic!("{values} was accepted"),
            Err(e) => assert!(e.contains(message), "{values}: {e}"),
        }
    }
}

/// The hub's values: clusters.* set the ECR_REFRESH_CLUSTERS variables, get and list on
/// Secrets in each namespace of clusters.namespaces only (a Role and RoleBinding each, for
/// the run's ServiceAccount), the memory limit 128Mi; capi with no namespace is refused,
/// argocd defaults to the namespace argocd, dir: grants no Secret read. Unset: every
/// variable empty (the binary's default), no Role, 64Mi.
#[test]
#[ignore = "needs helm (bash .ci/test)"]
fn the_hubs_values_set_its_variables_and_grant_secret_reads_in_its_namespaces_only() {
    let container = |docs: &[Value]| {
        one(docs, "CronJob")["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]
            .clone()
    };
    let hub = render(&json!({"clusters": {
        "source": "capi",
        "namespaces": ["fleet-a", "fleet-b"],
        "selector": "env=prod",
        "concurrency": 8,
        "includeLocal": true,
        "serviceAccount": "platform/ecr-refresh",
        "checkServiceAccount": "platform/ecr-refresh-check",
        "auth": "impersonate",
    }}));
    let cronjob = one(&hub, "CronJob");
    for (name, value) in [
        ("ECR_REFRESH_CLUSTERS", "capi"),
        ("ECR_REFRESH_CLUSTERS_NAMESPACE", "fleet-a,fleet-b"),
        ("ECR_REFRESH_CLUSTERS_SELECTOR", "env=prod"),
        ("ECR_REFRESH_CLUSTERS_CONCURRENCY", "8"),
        ("ECR_REFRESH_CLUSTERS_INCLUDE_LOCAL", "true"),
        (
            "ECR_REFRESH_CLUSTERS_SERVICE_ACCOUNT",
            "platform/ecr-refresh",
        ),
        (
            "ECR_REFRESH_CLUSTERS_CHECK_SERVICE_ACCOUNT",
            "platform/ecr-refresh-check",
        ),
        ("ECR_REFRESH_CLUSTERS_AUTH", "impersonate"),
    ] {
        assert_eq!(env_value(cronjob, name), value, "{name}");
    }
    assert_eq!(container(&hub)["resources"]["limits"]["memory"], "128Mi");
    let roles = of_kind(&hub, "Role");
    assert_eq!(roles.len(), 2, "{roles:#?}");
    for ns in ["fleet-a", "fleet-b"] {
        assert_eq!(
            one_rule(&hub, "ecr-refresh-clusters", ns),
            (json!(["secrets"]), json!(["get", "list"]), Value::Null)
        );
        let binding = of_kind(&hub, "RoleBinding")
            .into_iter()
            .find(|b| b["metadata"]["namespace"] == ns)
            .unwrap_or_else(|| panic!("a RoleBinding in {ns}"));
        assert_eq!(binding["metadata"]["name"], "ecr-refresh-clusters");
        assert_eq!(
            binding["subjects"],
            json!([{"kind": "ServiceAccount", "name": "ecr-refresh", "namespace": "ecr-refresh"}])
        );
    }
    // The cluster-wide rights are the install's: nothing more on Secrets elsewhere.
    let normal = render(&json!({}));
    assert_eq!(
        named(&hub, "ClusterRole", "ecr-refresh"),
        named(&normal, "ClusterRole", "ecr-refresh")
    );

    let argocd = render(&json!({"clusters": {"source": "argocd"}}));
    assert_eq!(
        env_value(one(&argocd, "CronJob"), "ECR_REFRESH_CLUSTERS_NAMESPACE"),
        "argocd"
    );
    one_rule(&argocd, "ecr-refresh-clusters", "argocd");

    let dir = render(&json!({"clusters": {"source": "dir:/var/run/clusters"}}));
    assert_eq!(
        env_value(one(&dir, "CronJob"), "ECR_REFRESH_CLUSTERS"),
        "dir:/var/run/clusters"
    );
    assert_eq!(
        env_value(one(&dir, "CronJob"), "ECR_REFRESH_CLUSTERS_NAMESPACE"),
        ""
    );
    assert!(of_kind(&dir, "Role").is_empty());
    assert_eq!(container(&dir)["resources"]["limits"]["memory"], "128Mi");

    // A check release reads them as the check's account.
    let check = render(&json!({"mode": "check", "clusters": {"source": "argocd"}}));
    assert_eq!(
        of_kind(&check, "RoleBinding")[0]["subjects"][0]["name"],
        "ecr-refresh-check"
    );

    let unset = container(&normal);
    assert_eq!(unset["resources"]["limits"]["memory"], "64Mi");
    for (name, value) in env_of(one(&normal, "CronJob")) {
        if name.starts_with("ECR_REFRESH_CLUSTERS") {
            assert_eq!(
                value, "",
                "{name} is empty (the binary's default) with no clusters.source"
            );
        }
    }
    assert!(of_kind(&normal, "Role").is_empty());

    let helm = Helm::offline();
    for (values, message) in [
        (
            json!({"clusters": {"source": "capi"}}),
            "clusters.source capi needs clusters.namespaces",
        ),
        (
            json!({"clusters": {"source": "dir:/clusters", "namespaces": ["x"]}}),
            "clusters.namespaces is for capi and argocd",
        ),
        (
            json!({"clusters": {"source": "rancher"}}),
            "at '/clusters/source': 'rancher' does not match",
        ),
        (
            json!({"clusters": {"source": "capi", "namespaces": ["fleet"], "auth": "exec"}}),
            "at '/clusters/auth': value must be one of 'token-request', 'impersonate'",
        ),
    ] {
        match helm.template("ecr-refresh", "ecr-refresh", &values) {
            Ok(_) => panic!("{values} was accepted"),
            Err(e) => assert!(e.contains(message), "{values}: {e}"),
        }
    }
}

/// The spoke's NOTES print the value the hub sets, ECR_REFRESH_CLUSTERS_SERVICE_ACCOUNT
/// (and the check's and the auth when they are not the defaults), and how to make the hub's
/// kubeconfig from <fullname>-hub.
#[test]
#[ignore = "needs helm and KUBEBUILDER_ASSETS (bash .ci/test)"]
fn the_spoke_notes_print_the_value_for_the_hub() {
    let cp = ControlPlane::shared();
    let notes = |release: &str, ns: &str, values: &[&str]| {
        let chart = chart_path();
        let mut args = vec!["install", release, &chart, "-n", ns, "--dry-run=client"];
        for v in values {
            args.extend(["--set", v]);
        }
        let out = Helm::against(cp).expect(&args, None);
        out.split_once("NOTES:\n")
            .unwrap_or_else(|| panic!("no NOTES in: {out}"))
            .1
            .to_owned()
    };
    let spoke = notes("ecr-refresh", "ecr-refresh", &["spoke.enabled=true"]);
    assert!(
        spoke.contains("ECR_REFRESH_CLUSTERS_SERVICE_ACCOUNT=ecr-refresh/ecr-refresh\n"),
        "{spoke}"
    );
    assert!(
        spoke.contains("kubectl create token ecr-refresh-hub -n ecr-refresh"),
        "{spoke}"
    );
    assert!(!spoke.contains("create job"), "no run to start: {spoke}");
    assert!(!spoke.contains("ECR_REFRESH_CLUSTERS_AUTH"), "{spoke}");

    let team = notes(
        "team",
        "platform",
        &[
            "spoke.enabled=true",
            "spoke.auth=impersonate",
            "check.podRights=true",
        ],
    );
    assert!(
        team.contains("ECR_REFRESH_CLUSTERS_SERVICE_ACCOUNT=platform/team-ecr-refresh\n"),
        "{team}"
    );
    assert!(
        team.contains(
            "ECR_REFRESH_CLUSTERS_CHECK_SERVICE_ACCOUNT=platform/team-ecr-refresh-check\n"
        ),
        "{team}"
    );
    assert!(
        team.contains("ECR_REFRESH_CLUSTERS_AUTH=impersonate\n"),
        "{team}"
    );
}
