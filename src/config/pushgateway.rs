//! Where the run's metrics are pushed: the Pushgateway's URL (ECR_REFRESH_PUSHGATEWAY_URL) and
//! the grouping labels (ECR_REFRESH_PUSHGATEWAY_LABELS), parsed once.

use std::fmt;
use std::str::FromStr;

use base64::Engine as _;

/// The Pushgateway job every run pushes under.
pub const JOB: &str = "ecr-refresh";
/// Labels ecr-refresh's own metrics carry: a grouping label of the same name would clash.
pub const METRIC_LABELS: [&str; 3] = ["outcome", "region", "method"];

/// ECR_REFRESH_PUSHGATEWAY_URL: the gateway's base URL, `http(s)://host[:port][/path]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PushgatewayUrl(reqwest::Url);

impl FromStr for PushgatewayUrl {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        const ACCEPTED: &str =
            "must be the Pushgateway's base URL, like 'http://pushgateway.monitoring:9091'";
        let url = reqwest::Url::parse(s).map_err(|e| format!("{ACCEPTED} ({e})"))?;
        if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
            return Err(format!("{ACCEPTED} (http or https, with a host)"));
        }
        if url.query().is_some()
            || url.fragment().is_some()
            || !url.username().is_empty()
            || url.password().is_some()
        {
            return Err(format!(
                "{ACCEPTED}, without a query, fragment or credentials"
            ));
        }
        Ok(Self(url))
    }
}

impl fmt::Display for PushgatewayUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0.as_str())
    }
}

/// ECR_REFRESH_PUSHGATEWAY_LABELS: grouping labels, `name=value` pairs separated by commas,
/// so that several clusters can push to one gateway.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GroupingLabels(Vec<(String, String)>);

impl GroupingLabels {
    pub fn pairs(&self) -> &[(String, String)] {
        &self.0
    }
}

/// The grouping label a fleet's run pushes each cluster's metrics under (ECR_REFRESH_CLUSTERS):
/// one group per cluster, `ecr_refresh_cluster=<name>`.
pub const CLUSTER_LABEL: &str = "ecr_refresh_cluster";

/// Prometheus' label name rule, `[a-zA-Z_][a-zA-Z0-9_]*`, less the names it reserves.
fn check_label_name(name: &str) -> Result<(), String> {
    let mut chars = name.chars();
    let valid = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !valid {
        return Err(format!(
            "'{name}' is not a Prometheus label name ([a-zA-Z_][a-zA-Z0-9_]*)"
        ));
    }
    if name.starts_with("__") {
        return Err(format!(
            "'{name}': names starting with __ are reserved by Prometheus"
        ));
    }
    if name == CLUSTER_LABEL {
        return Err(format!(
            "'{name}' is set by a fleet's run (ECR_REFRESH_CLUSTERS) to each cluster's name; choose another name"
        ));
    }
    if name == "job" {
        return Err(format!("'job' is set already: it is always '{JOB}'"));
    }
    if METRIC_LABELS.contains(&name) {
        return Err(format!(
            "'{name}' is a label of ecr-refresh's own metrics; choose another name"
        ));
    }
    Ok(())
}

impl FromStr for GroupingLabels {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut pairs: Vec<(String, String)> = Vec::new();
        for item in s.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let Some((name, value)) = item.split_once('=') else {
                return Err(format!(
                    "'{item}' must be name=value, like 'cluster=prod-eu'"
                ));
            };
            let (name, value) = (name.trim(), value.trim());
            check_label_name(name)?;
            if value.is_empty() {
                return Err(format!("'{name}' has an empty value"));
            }
            if pairs.iter().any(|(n, _)| n == name) {
                return Err(format!("'{name}' is given twice"));
            }
            pairs.push((name.to_owned(), value.to_owned()));
        }
        if pairs.is_empty() {
            return Err("must hold at least one name=value pair, like 'cluster=prod-eu'".into());
        }
        Ok(Self(pairs))
    }
}

/// Where the run's metrics go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pushgateway {
    pub url: PushgatewayUrl,
    pub labels: GroupingLabels,
}

impl Pushgateway {
    /// `<base>/metrics/job/ecr-refresh{/<name>/<value>}`. A value that is not plain
    /// `[A-Za-z0-9._-]` goes in the gateway's `@base64` form (base64url), which carries
    /// any text, `/` included.
    /// The same gateway, one cluster's group of a fleet: `ecr_refresh_cluster=<name>` added.
    pub fn for_cluster(&self, cluster: &str) -> Self {
        let mut labels = self.labels.clone();
        labels
            .0
            .push((CLUSTER_LABEL.to_owned(), cluster.to_owned()));
        Self {
            url: self.url.clone(),
            labels,
        }
    }

    pub fn group_url(&self) -> String {
        self.group_url_for(JOB)
    }

    /// The same group under another job (a check pushes under its own, so it never
    /// replaces a refresh's metrics).
    pub fn group_url_for(&self, job: &str) -> String {
        let mut url = format!(
            "{}/metrics/job/{job}",
            self.url.0.as_str().trim_end_matches('/')
        );
        for (name, value) in self.labels.pairs() {
            let plain = value
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
            if plain {
                url.push_str(&format!("/{name}/{value}"));
            } else {
                let encoded = base64::engine::general_purpose::URL_SAFE.encode(value);
                url.push_str(&format!("/{name}@base64/{encoded}"));
            }
        }
        url
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gateway(url: &str, labels: &str) -> Pushgateway {
        Pushgateway {
            url: url.parse().unwrap(),
            labels: if labels.is_empty() {
                GroupingLabels::default()
            } else {
                labels.parse().unwrap()
            },
        }
    }

    #[test]
    fn the_group_url_carries_the_job_and_each_label() {
        for (url, labels, expected) in [
            (
                "http://gw:9091",
                "",
                "http://gw:9091/metrics/job/ecr-refresh",
            ),
            (
                "http://gw:9091/",
                "cluster=prod-eu,env=x",
                "http://gw:9091/metrics/job/ecr-refresh/cluster/prod-eu/env/x",
            ),
            (
                "https://gw.example/push/",
                "path=a/b",
                "https://gw.example/push/metrics/job/ecr-refresh/path@base64/YS9i",
            ),
            (
                "http://gw:9091",
                "team=ä b",
                "http://gw:9091/metrics/job/ecr-refresh/team@base64/w6QgYg==",
            ),
        ] {
            assert_eq!(gateway(url, labels).group_url(), expected, "{labels}");
        }
    }

    #[test]
    fn grouping_labels_follow_prometheus_label_name_rules() {
        let ok: GroupingLabels = " cluster = prod-eu , _x=1".parse().unwrap();
        assert_eq!(
            ok.pairs(),
            [
                ("cluster".to_owned(), "prod-eu".to_owned()),
                ("_x".to_owned(), "1".to_owned())
            ]
        );
        for (bad, why) in [
            ("cluster", "name=value"),
            ("1cluster=a", "not a Prometheus label name"),
            ("clu-ster=a", "not a Prometheus label name"),
            ("__name__=a", "reserved"),
            ("job=a", "always 'ecr-refresh'"),
            ("region=eu", "own metrics"),
            ("cluster=", "empty value"),
            ("a=1,a=2", "twice"),
            (" , ", "at least one"),
        ] {
            let error = bad.parse::<GroupingLabels>().unwrap_err();
            assert!(error.contains(why), "{bad}: {error}");
        }
    }

    #[test]
    fn the_url_must_be_a_plain_http_base_url() {
        for good in ["http://gw:9091", "https://gw.example/base/"] {
            assert!(good.parse::<PushgatewayUrl>().is_ok(), "{good}");
        }
        for bad in [
            "gw:9091",
            "ftp://gw",
            "http://gw/?x=1",
            "http://user:pw@gw/",
            "",
        ] {
            assert!(bad.parse::<PushgatewayUrl>().is_err(), "{bad}");
        }
    }
}
