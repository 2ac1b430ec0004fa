//! RBAC from ClusterRole and Role documents, for the one identity ecr-refresh runs as.

use serde::Deserialize;
use serde_json::Value;

/// The user every request is made as when RBAC is on.
pub(crate) const USER: &str = "system:serviceaccount:ecr-refresh:ecr-refresh";

#[derive(Debug, Clone, Default)]
struct Rule {
    api_groups: Vec<String>,
    resources: Vec<String>,
    verbs: Vec<String>,
    resource_names: Vec<String>,
}

/// The granted rules: ClusterRole rules everywhere, Role rules in their namespace.
#[derive(Debug, Clone, Default)]
pub(crate) struct Rbac {
    rules: Vec<(Option<String>, Rule)>,
}

/// What a resource request asks to do, as the apiserver's RequestInfo sees it.
#[derive(Debug, Clone)]
pub(crate) struct Attributes<'a> {
    pub verb: &'a str,
    pub resource: &'a str,
    /// Empty for cluster-scoped requests (a namespace's own name for namespaces/NAME).
    pub namespace: &'a str,
    /// Empty for collections and creates.
    pub name: &'a str,
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(str::to_owned)
        .collect()
}

fn allows(list: &[String], want: &str) -> bool {
    list.iter().any(|x| x == "*" || x == want)
}

impl Rbac {
    /// Reads every ClusterRole and Role in a multi-document YAML; other kinds are ignored.
    pub fn from_yaml(yaml: &str) -> Result<Rbac, String> {
        let mut rbac = Rbac::default();
        for doc in serde_yaml_ng::Deserializer::from_str(yaml) {
            let value = Value::deserialize(doc).map_err(|e| format!("RBAC YAML: {e}"))?;
            let scope = match value["kind"].as_str() {
                Some("ClusterRole") => None,
                Some("Role") => Some(
                    value["metadata"]["namespace"]
                        .as_str()
                        .unwrap_or("default")
                        .to_owned(),
                ),
                _ => continue,
            };
            for rule in value["rules"].as_array().into_iter().flatten() {
                let rule = Rule {
                    api_groups: strings(&rule["apiGroups"]),
                    resources: strings(&rule["resources"]),
                    verbs: strings(&rule["verbs"]),
                    resource_names: strings(&rule["resourceNames"]),
                };
                rbac.rules.push((scope.clone(), rule));
            }
        }
        Ok(rbac)
    }

    pub fn allows(&self, a: &Attributes<'_>) -> bool {
        self.rules.iter().any(|(scope, rule)| {
            scope.as_deref().is_none_or(|ns| ns == a.namespace)
                && allows(&rule.api_groups, "")
                && allows(&rule.resources, a.resource)
                && allows(&rule.verbs, a.verb)
                && (rule.resource_names.is_empty()
                    || (!a.name.is_empty() && rule.resource_names.iter().any(|n| n == a.name)))
        })
    }

    /// The reason part of the 403: `User "..." cannot VERB resource "R" in API group "" ...`.
    pub fn refusal(a: &Attributes<'_>) -> String {
        let scope = if a.namespace.is_empty() {
            "at the cluster scope".to_owned()
        } else {
            format!("in the namespace \"{}\"", a.namespace)
        };
        format!(
            "User \"{USER}\" cannot {} resource \"{}\" in API group \"\" {scope}",
            a.verb, a.resource
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const YAML: &str = "
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: ecr-refresh}
rules:
- apiGroups: [\"\"]
  resources: [namespaces]
  verbs: [list]
- apiGroups: [\"\"]
  resources: [secrets]
  resourceNames: [aws-ecr-token]
  verbs: [get, patch]
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: ecr-refresh}
---
kind: Role
metadata: {name: r, namespace: team-a}
rules:
- apiGroups: [\"\"]
  resources: [serviceaccounts]
  verbs: [\"*\"]
";

    fn attrs<'a>(
        verb: &'a str,
        resource: &'a str,
        namespace: &'a str,
        name: &'a str,
    ) -> Attributes<'a> {
        Attributes {
            verb,
            resource,
            namespace,
            name,
        }
    }

    #[test]
    fn cluster_roles_apply_everywhere_and_roles_in_their_namespace() {
        let rbac = Rbac::from_yaml(YAML).unwrap();
        assert!(rbac.allows(&attrs("list", "namespaces", "", "")));
        assert!(!rbac.allows(&attrs("get", "namespaces", "", "")));
        assert!(rbac.allows(&attrs("patch", "secrets", "x", "aws-ecr-token")));
        assert!(!rbac.allows(&attrs("patch", "secrets", "x", "other")));
        assert!(!rbac.allows(&attrs("create", "secrets", "x", "")));
        assert!(rbac.allows(&attrs("patch", "serviceaccounts", "team-a", "default")));
        assert!(!rbac.allows(&attrs("patch", "serviceaccounts", "team-b", "default")));
    }
}
