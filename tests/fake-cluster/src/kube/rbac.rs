//! RBAC as the real authorizer resolves it, for the one identity the fake authenticates
//! every request as (a ServiceAccount, ecr-refresh's unless a test names another):
//! ClusterRole, Role, ClusterRoleBinding and RoleBinding documents; only the rules of roles
//! bound to that identity are granted (k8s.io/kubernetes/pkg/registry/rbac/validation:
//! DefaultRuleResolver.VisitRulesFor).

use std::collections::HashMap;

use serde::Deserialize;
use serde_json::Value;

/// The ServiceAccount every request is made as: ecr-refresh's own
/// (`system:serviceaccount:ecr-refresh:ecr-refresh`) unless a test names another.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Identity {
    pub namespace: String,
    pub name: String,
}

impl Default for Identity {
    fn default() -> Self {
        Identity {
            namespace: "ecr-refresh".into(),
            name: "ecr-refresh".into(),
        }
    }
}

impl Identity {
    /// The user name a ServiceAccount token authenticates as
    /// (k8s.io/apiserver/pkg/authentication/serviceaccount: MakeUsername).
    pub(super) fn username(&self) -> String {
        format!("system:serviceaccount:{}:{}", self.namespace, self.name)
    }

    /// The groups it authenticates with (MakeGroupNames, and system:authenticated).
    pub(super) fn groups(&self) -> Vec<String> {
        vec![
            "system:serviceaccounts".into(),
            format!("system:serviceaccounts:{}", self.namespace),
            "system:authenticated".into(),
        ]
    }
}

#[derive(Debug, Clone, Default)]
struct Rule {
    api_groups: Vec<String>,
    resources: Vec<String>,
    verbs: Vec<String>,
    resource_names: Vec<String>,
}

/// The granted rules, each with the namespace it applies in (None: cluster-wide), and the
/// errors met resolving the bindings that name the user (a roleRef to no role), which a
/// refusal reports as the real authorizer does.
#[derive(Debug, Clone, Default)]
pub(crate) struct Rbac {
    user: String,
    rules: Vec<(Option<String>, Rule)>,
    errors: Vec<(Option<String>, String)>,
}

/// What a resource request asks to do, as the apiserver's RequestInfo sees it.
#[derive(Debug, Clone)]
pub(crate) struct Attributes<'a> {
    pub verb: &'a str,
    /// The API group: "" for core v1, `events.k8s.io` for its Events.
    pub group: &'a str,
    pub resource: &'a str,
    /// Empty for cluster-scoped requests (a namespace's own name for namespaces/NAME).
    pub namespace: &'a str,
    /// Empty for collections and creates (POST); a create-on-apply names its object.
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

fn rules_of(doc: &Value) -> Vec<Rule> {
    doc["rules"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|rule| Rule {
            api_groups: strings(&rule["apiGroups"]),
            resources: strings(&rule["resources"]),
            verbs: strings(&rule["verbs"]),
            resource_names: strings(&rule["resourceNames"]),
        })
        .collect()
}

/// A binding read from YAML: its namespace (None for a ClusterRoleBinding), roleRef and subjects.
struct Binding {
    namespace: Option<String>,
    role_kind: String,
    role_name: String,
    subjects: Vec<Value>,
}

/// `appliesToUser`: whether a subject of a binding in `namespace` ("" for a
/// ClusterRoleBinding) names the identity's user.
fn applies_to_user(subject: &Value, namespace: &str, who: &Identity) -> bool {
    let name = subject["name"].as_str().unwrap_or_default();
    match subject["kind"].as_str().unwrap_or_default() {
        "User" => name == who.username(),
        "Group" => who.groups().iter().any(|g| g == name),
        "ServiceAccount" => {
            // A subject without a namespace means the binding's own namespace.
            let sa_namespace = subject["namespace"]
                .as_str()
                .filter(|ns| !ns.is_empty())
                .unwrap_or(namespace);
            !sa_namespace.is_empty() && sa_namespace == who.namespace && name == who.name
        }
        _ => false,
    }
}

/// `utilerrors.NewAggregate(errs).Error()`: one message alone, several deduplicated in brackets.
fn aggregate(messages: &[&str]) -> String {
    let mut seen: Vec<&str> = Vec::new();
    for m in messages {
        if !seen.contains(m) {
            seen.push(m);
        }
    }
    if seen.len() == 1 {
        seen[0].to_owned()
    } else {
        format!("[{}]", seen.join(", "))
    }
}

impl Rbac {
    /// Reads every ClusterRole, Role, ClusterRoleBinding and RoleBinding in a multi-document
    /// YAML (other kinds are ignored) and keeps the rules bound to `who`.
    pub(super) fn from_yaml(yaml: &str, who: &Identity) -> Result<Rbac, String> {
        let mut cluster_roles: HashMap<String, Vec<Rule>> = HashMap::new();
        let mut roles: HashMap<(String, String), Vec<Rule>> = HashMap::new();
        let mut bindings = Vec::new();
        for doc in serde_yaml_ng::Deserializer::from_str(yaml) {
            let value = Value::deserialize(doc).map_err(|e| format!("RBAC YAML: {e}"))?;
            let name = value["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            let namespace = value["metadata"]["namespace"]
                .as_str()
                .filter(|ns| !ns.is_empty())
                .unwrap_or("default")
                .to_owned();
            let kind = value["kind"].as_str().unwrap_or_default();
            match kind {
                "ClusterRole" => {
                    cluster_roles.insert(name, rules_of(&value));
                }
                "Role" => {
                    roles.insert((namespace, name), rules_of(&value));
                }
                "ClusterRoleBinding" | "RoleBinding" => bindings.push(Binding {
                    namespace: (kind == "RoleBinding").then_some(namespace),
                    role_kind: value["roleRef"]["kind"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned(),
                    role_name: value["roleRef"]["name"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned(),
                    subjects: value["subjects"].as_array().cloned().unwrap_or_default(),
                }),
                _ => {}
            }
        }
        // ClusterRoleBindings are visited before RoleBindings, as the resolver does.
        bindings.sort_by_key(|b| b.namespace.is_some());
        let mut rbac = Rbac {
            user: who.username(),
            ..Rbac::default()
        };
        for b in &bindings {
            let ns = b.namespace.as_deref().unwrap_or_default();
            if !b.subjects.iter().any(|s| applies_to_user(s, ns, who)) {
                continue;
            }
            // GetRoleReferenceRules: a Role is looked up in the binding's namespace ("" for
            // a ClusterRoleBinding, where none can be).
            let found = match b.role_kind.as_str() {
                "ClusterRole" => cluster_roles.get(&b.role_name).ok_or_else(|| {
                    format!(
                        "clusterrole.rbac.authorization.k8s.io \"{}\" not found",
                        b.role_name
                    )
                }),
                "Role" => roles
                    .get(&(ns.to_owned(), b.role_name.clone()))
                    .ok_or_else(|| {
                        format!(
                            "role.rbac.authorization.k8s.io \"{}\" not found",
                            b.role_name
                        )
                    }),
                other => Err(format!("unsupported role reference kind: \"{other}\"")),
            };
            match found {
                Ok(rules) => rbac
                    .rules
                    .extend(rules.iter().map(|rule| (b.namespace.clone(), rule.clone()))),
                Err(e) => rbac.errors.push((b.namespace.clone(), e)),
            }
        }
        Ok(rbac)
    }

    fn in_scope(scope: Option<&str>, a: &Attributes<'_>) -> bool {
        // RoleBindings are only consulted for requests in their namespace.
        scope.is_none_or(|ns| ns == a.namespace)
    }

    /// Allowed, or refused with the authorizer's reason (empty, or `RBAC: ...` naming the
    /// roles some binding of the user refers to but that do not exist).
    pub(super) fn authorize(&self, a: &Attributes<'_>) -> Result<(), String> {
        let allowed = self.rules.iter().any(|(scope, rule)| {
            Self::in_scope(scope.as_deref(), a)
                && allows(&rule.api_groups, a.group)
                && allows(&rule.resources, a.resource)
                && allows(&rule.verbs, a.verb)
                && (rule.resource_names.is_empty()
                    || (!a.name.is_empty() && rule.resource_names.iter().any(|n| n == a.name)))
        });
        if allowed {
            return Ok(());
        }
        let errors: Vec<&str> = self
            .errors
            .iter()
            .filter(|(scope, _)| Self::in_scope(scope.as_deref(), a))
            .map(|(_, e)| e.as_str())
            .collect();
        if errors.is_empty() {
            Err(String::new())
        } else {
            Err(format!("RBAC: {}", aggregate(&errors)))
        }
    }

    #[cfg(test)]
    fn allows(&self, a: &Attributes<'_>) -> bool {
        self.authorize(a).is_ok()
    }

    /// The reason part of the filter's 403: `User "..." cannot VERB resource "R" in API
    /// group "" ...`, with the authorizer's reason after a colon when it gave one.
    pub(super) fn refusal(&self, a: &Attributes<'_>, reason: &str) -> String {
        Self::refusal_as(&self.user, a, reason)
    }

    /// The same for `user`, when no roles are loaded to name one (a server just back from an
    /// outage refuses everyone).
    pub(super) fn refusal_as(user: &str, a: &Attributes<'_>, reason: &str) -> String {
        let scope = if a.namespace.is_empty() {
            "at the cluster scope".to_owned()
        } else {
            format!("in the namespace \"{}\"", a.namespace)
        };
        let message = format!(
            "User \"{}\" cannot {} resource \"{}\" in API group \"{}\" {scope}",
            user, a.verb, a.resource, a.group
        );
        if reason.is_empty() {
            message
        } else {
            format!("{message}: {reason}")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROLES: &str = "
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

    const CLUSTER_BINDING: &str = "
kind: ClusterRoleBinding
metadata: {name: ecr-refresh}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: ecr-refresh}
subjects:
- {kind: ServiceAccount, name: ecr-refresh, namespace: ecr-refresh}
";

    const ROLE_BINDING: &str = "
kind: RoleBinding
metadata: {name: r, namespace: team-a}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: r}
subjects:
- {kind: ServiceAccount, name: ecr-refresh, namespace: ecr-refresh}
";

    fn attrs<'a>(
        verb: &'a str,
        resource: &'a str,
        namespace: &'a str,
        name: &'a str,
    ) -> Attributes<'a> {
        Attributes {
            verb,
            group: "",
            resource,
            namespace,
            name,
        }
    }

    fn parse(docs: &[&str]) -> Rbac {
        Rbac::from_yaml(&docs.join("\n---\n"), &Identity::default()).unwrap()
    }

    #[test]
    fn bound_cluster_roles_apply_everywhere_and_bound_roles_in_their_namespace() {
        let rbac = parse(&[ROLES, CLUSTER_BINDING, ROLE_BINDING]);
        assert!(rbac.allows(&attrs("list", "namespaces", "", "")));
        assert!(!rbac.allows(&attrs("get", "namespaces", "", "")));
        assert!(rbac.allows(&attrs("patch", "secrets", "x", "aws-ecr-token")));
        assert!(!rbac.allows(&attrs("patch", "secrets", "x", "other")));
        assert!(!rbac.allows(&attrs("create", "secrets", "x", "")));
        assert!(rbac.allows(&attrs("patch", "serviceaccounts", "team-a", "default")));
        assert!(!rbac.allows(&attrs("patch", "serviceaccounts", "team-b", "default")));
    }

    #[test]
    fn roles_without_a_binding_grant_nothing() {
        let rbac = parse(&[ROLES]);
        assert!(!rbac.allows(&attrs("list", "namespaces", "", "")));
        assert!(!rbac.allows(&attrs("patch", "secrets", "x", "aws-ecr-token")));
        assert!(!rbac.allows(&attrs("patch", "serviceaccounts", "team-a", "default")));
        assert_eq!(
            rbac.authorize(&attrs("list", "namespaces", "", "")),
            Err(String::new())
        );
    }

    #[test]
    fn only_subjects_naming_the_service_account_or_its_groups_count() {
        let binding = |subject: &str| {
            format!(
                "kind: ClusterRoleBinding\nmetadata: {{name: b}}\nroleRef: {{kind: ClusterRole, name: ecr-refresh}}\nsubjects:\n- {subject}\n"
            )
        };
        for (subject, granted) in [
            (
                "{kind: ServiceAccount, name: ecr-refresh, namespace: ecr-refresh}",
                true,
            ),
            (
                "{kind: ServiceAccount, name: ecr-refresh, namespace: default}",
                false,
            ),
            // A ClusterRoleBinding has no namespace to default the subject's to.
            ("{kind: ServiceAccount, name: ecr-refresh}", false),
            (
                "{kind: ServiceAccount, name: other, namespace: ecr-refresh}",
                false,
            ),
            (
                "{kind: User, name: \"system:serviceaccount:ecr-refresh:ecr-refresh\"}",
                true,
            ),
            ("{kind: User, name: ecr-refresh}", false),
            ("{kind: Group, name: \"system:serviceaccounts\"}", true),
            (
                "{kind: Group, name: \"system:serviceaccounts:ecr-refresh\"}",
                true,
            ),
            ("{kind: Group, name: \"system:authenticated\"}", true),
            (
                "{kind: Group, name: \"system:serviceaccounts:default\"}",
                false,
            ),
            ("{kind: Group, name: \"system:masters\"}", false),
        ] {
            let rbac = parse(&[ROLES, &binding(subject)]);
            assert_eq!(
                rbac.allows(&attrs("list", "namespaces", "", "")),
                granted,
                "{subject}"
            );
        }
    }

    #[test]
    fn a_role_binding_grants_a_cluster_role_in_its_namespace_only() {
        let rbac = parse(&[
            ROLES,
            // The subject's namespace defaults to the binding's.
            "kind: RoleBinding\nmetadata: {name: b, namespace: ecr-refresh}\nroleRef: {kind: ClusterRole, name: ecr-refresh}\nsubjects: [{kind: ServiceAccount, name: ecr-refresh}]",
        ]);
        assert!(rbac.allows(&attrs("get", "secrets", "ecr-refresh", "aws-ecr-token")));
        assert!(!rbac.allows(&attrs("get", "secrets", "team-a", "aws-ecr-token")));
        assert!(!rbac.allows(&attrs("list", "namespaces", "", "")));
    }

    #[test]
    fn role_refs_must_match_kind_name_and_namespace() {
        // A Role named by a RoleBinding in another namespace, a ClusterRole ref naming a Role,
        // and a ClusterRoleBinding naming a Role: none grants, and the refusal says why.
        let rbac = parse(&[
            ROLES,
            "kind: RoleBinding\nmetadata: {name: b, namespace: team-b}\nroleRef: {kind: Role, name: r}\nsubjects: [{kind: ServiceAccount, name: ecr-refresh, namespace: ecr-refresh}]",
            "kind: RoleBinding\nmetadata: {name: c, namespace: team-a}\nroleRef: {kind: ClusterRole, name: r}\nsubjects: [{kind: ServiceAccount, name: ecr-refresh, namespace: ecr-refresh}]",
        ]);
        assert!(!rbac.allows(&attrs("get", "serviceaccounts", "team-a", "default")));
        assert_eq!(
            rbac.authorize(&attrs("get", "serviceaccounts", "team-b", "default")),
            Err("RBAC: role.rbac.authorization.k8s.io \"r\" not found".into())
        );
        assert_eq!(
            rbac.authorize(&attrs("get", "serviceaccounts", "team-a", "default")),
            Err("RBAC: clusterrole.rbac.authorization.k8s.io \"r\" not found".into())
        );
        assert_eq!(
            rbac.authorize(&attrs("get", "serviceaccounts", "team-c", "default")),
            Err(String::new())
        );
        let cluster = parse(&[
            ROLES,
            "kind: ClusterRoleBinding\nmetadata: {name: b}\nroleRef: {kind: ClusterRole, name: missing}\nsubjects: [{kind: Group, name: \"system:authenticated\"}]",
            "kind: ClusterRoleBinding\nmetadata: {name: c}\nroleRef: {kind: Role, name: r}\nsubjects: [{kind: Group, name: \"system:authenticated\"}]",
        ]);
        assert_eq!(
            cluster.authorize(&attrs("get", "serviceaccounts", "team-a", "default")),
            Err("RBAC: [clusterrole.rbac.authorization.k8s.io \"missing\" not found, role.rbac.authorization.k8s.io \"r\" not found]".into())
        );
    }
}
