//! ValidatingAdmissionPolicies (admissionregistration.k8s.io/v1), evaluated with a real CEL
//! interpreter (cel-rust) the way the apiserver's validating policy plugin does, for the
//! requests of the one user the fake authenticates (rbac.rs: ecr-refresh's ServiceAccount
//! unless a test names another), on Secrets, ServiceAccounts and Events.
//! Seeding and the test hooks bypass admission, as they bypass RBAC: they stand for other
//! users and controllers.
//!
//! What was checked in the Kubernetes source, and what the fake does about it, is written
//! down in ../../ADMISSION.md. In short:
//! - a policy applies when its `matchConstraints.resourceRules` match the request (group,
//!   version, resource, operation) and none of `excludeResourceRules` does; it does nothing
//!   without a binding naming it;
//! - per binding: `matchConditions` all true (a false one skips the binding; an error with
//!   failurePolicy Fail denies), then every validation; a validation that is false denies
//!   with its messageExpression, message or "failed expression: EXPR", and its reason
//!   (default Invalid); one that errors denies with failurePolicy Fail;
//! - the first denial, if the binding's validationActions hold Deny, refuses the request:
//!   `ValidatingAdmissionPolicy 'P' with binding 'B' denied request: MESSAGE`, in an
//!   `errors.NewForbidden` Status whose reason and code are then the decision's.
//!
//! - `authorizer` (k8s.io/apiserver/pkg/cel/library/authz.go): `group(g).resource(r)`, then
//!   optionally `subresource`, `namespace`, `name`, then `check(verb)`, whose `allowed()`,
//!   `reason()`, `errored()` and `error()` are answered by the fake's RBAC for the request's
//!   user (everything allowed when the fake enforces no RBAC, as AlwaysAllow would).
//!
//! Not supported (loading such a policy panics, so a test can't silently pass without it):
//! paramKind/paramRef, namespaceSelector and objectSelector that select anything less than
//! everything, a binding's matchResources, auditAnnotations; `authorizer.path` and
//! `authorizer.serviceAccount` (a call fails the expression).

use std::collections::HashMap;
use std::sync::Arc;

use serde::Deserialize;
use serde_json::{Value, json};

use super::Resource;
use super::rbac::{Attributes, Identity, Rbac};
use super::status::{self, ApiError, Cause};

/// The operation an admission request is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Operation {
    Create,
    Update,
    Delete,
}

impl Operation {
    fn as_str(self) -> &'static str {
        match self {
            Operation::Create => "CREATE",
            Operation::Update => "UPDATE",
            Operation::Delete => "DELETE",
        }
    }
}

/// What a request is for: the group, version and resource it was sent to, and the kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Kind {
    pub group: &'static str,
    pub version: &'static str,
    pub resource: &'static str,
    pub kind: &'static str,
}

impl Kind {
    /// A resource of the core v1 API.
    pub fn core(resource: Resource) -> Kind {
        Kind {
            group: "",
            version: "v1",
            resource: resource.plural(),
            kind: resource.kind(),
        }
    }

    /// Events, through `group` ("" for core/v1, `events.k8s.io` for events.k8s.io/v1).
    pub fn events(group: &'static str) -> Kind {
        Kind {
            group,
            version: "v1",
            resource: "events",
            kind: "Event",
        }
    }

    /// `events.events.k8s.io`, `secrets`: the GroupResource as errors name it.
    fn qualified(&self) -> String {
        if self.group.is_empty() {
            self.resource.to_owned()
        } else {
            format!("{}.{}", self.resource, self.group)
        }
    }
}

/// One write as admission sees it: the object as it would be stored (None for DELETE) and
/// the stored one (None for CREATE), in the version the request was sent to.
pub(crate) struct Request<'a> {
    pub operation: Operation,
    pub kind: Kind,
    /// Empty for cluster-scoped resources.
    pub namespace: &'a str,
    pub name: &'a str,
    pub object: Option<&'a Value>,
    pub old_object: Option<&'a Value>,
    pub dry_run: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FailurePolicy {
    Fail,
    Ignore,
}

/// One compiled CEL expression and its source (for messages).
struct Expression {
    source: String,
    program: cel::Program,
}

impl Expression {
    fn compile(source: &str, what: &str) -> Result<Expression, String> {
        let program = cel::Program::compile(source)
            .map_err(|e| format!("{what}: CEL expression {source:?} does not compile: {e}"))?;
        Ok(Expression {
            source: source.to_owned(),
            program,
        })
    }

    /// The value, or the error as the apiserver's filter words it.
    fn eval(&self, context: &cel::Context<'_, '_>) -> Result<cel::Value, String> {
        self.program
            .execute(context)
            .map_err(|e| self.error(&e.to_string()))
    }

    fn error(&self, why: &str) -> String {
        format!("expression '{}' resulted in error: {why}", self.source)
    }

    fn eval_bool(&self, context: &cel::Context<'_, '_>) -> Result<bool, String> {
        match self.eval(context)? {
            cel::Value::Bool(b) => Ok(b),
            // The apiserver type-checks for bool when it compiles the policy.
            other => Err(self.error(&format!("not a bool: {other:?}"))),
        }
    }
}

struct ResourceRule {
    api_groups: Vec<String>,
    api_versions: Vec<String>,
    resources: Vec<String>,
    operations: Vec<String>,
}

impl ResourceRule {
    /// rules.Matcher: group, version, resource (without a subresource) and operation.
    fn matches(&self, req: &Request<'_>) -> bool {
        let any = |list: &[String], want: &str| list.iter().any(|x| x == "*" || x == want);
        any(&self.api_groups, req.kind.group)
            && any(&self.api_versions, req.kind.version)
            && any(&self.operations, req.operation.as_str())
            // "*" is every resource but no subresource; "*/*" both; "x/*" x's subresources.
            && self
                .resources
                .iter()
                .any(|r| r == "*" || r == "*/*" || r == req.kind.resource)
    }
}

struct Validation {
    expression: Expression,
    message: Option<String>,
    message_expression: Option<Expression>,
    reason: Option<String>,
}

struct Binding {
    name: String,
    actions: Vec<String>,
}

struct Policy {
    name: String,
    failure_policy: FailurePolicy,
    rules: Vec<ResourceRule>,
    exclude: Vec<ResourceRule>,
    match_conditions: Vec<Expression>,
    variables: Vec<(String, Expression)>,
    validations: Vec<Validation>,
    bindings: Vec<Binding>,
}

/// A decision to deny: the message and the Status reason.
struct Denial {
    message: String,
    reason: String,
}

/// The policies and bindings loaded from YAML, and who the requests come from.
pub(crate) struct Admission {
    policies: Vec<Policy>,
    user: Identity,
    /// What `authorizer` asks; None: everything is allowed (the fake enforces no RBAC).
    rbac: Option<Arc<Rbac>>,
}

// The YAML shapes read (admissionregistration.k8s.io/v1), unknown fields refused so that a
// feature the fake doesn't implement can't be silently ignored.

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct PolicySpec {
    failure_policy: Option<String>,
    match_constraints: Option<MatchResources>,
    #[serde(default)]
    match_conditions: Vec<NamedExpression>,
    #[serde(default)]
    variables: Vec<NamedExpression>,
    #[serde(default)]
    validations: Vec<ValidationSpec>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct MatchResources {
    #[serde(default)]
    resource_rules: Vec<RuleSpec>,
    #[serde(default)]
    exclude_resource_rules: Vec<RuleSpec>,
    /// Equivalent or Exact: the fake serves one version of each resource, so both match alike.
    #[allow(dead_code)]
    match_policy: Option<String>,
    namespace_selector: Option<Value>,
    object_selector: Option<Value>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RuleSpec {
    #[serde(default)]
    api_groups: Vec<String>,
    #[serde(default)]
    api_versions: Vec<String>,
    #[serde(default)]
    resources: Vec<String>,
    #[serde(default)]
    operations: Vec<String>,
    /// "*" by default; the fake's resources are all namespaced or cluster-scoped alike.
    #[allow(dead_code)]
    scope: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NamedExpression {
    name: String,
    expression: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ValidationSpec {
    expression: String,
    message: Option<String>,
    message_expression: Option<String>,
    reason: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct BindingSpec {
    policy_name: String,
    #[serde(default)]
    validation_actions: Vec<String>,
}

fn rules(specs: Vec<RuleSpec>) -> Vec<ResourceRule> {
    specs
        .into_iter()
        .map(|r| ResourceRule {
            api_groups: r.api_groups,
            api_versions: r.api_versions,
            resources: r.resources,
            operations: r.operations,
        })
        .collect()
}

/// An empty selector (`{}`) selects everything; anything else the fake can't evaluate.
fn selects_everything(selector: &Option<Value>) -> bool {
    selector
        .as_ref()
        .is_none_or(|s| s.as_object().is_some_and(|m| m.values().all(is_empty)))
}

fn is_empty(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Array(a) => a.is_empty(),
        Value::Object(m) => m.is_empty(),
        _ => false,
    }
}

impl Policy {
    fn from_spec(name: String, spec: PolicySpec) -> Result<Policy, String> {
        let what = format!("ValidatingAdmissionPolicy {name}");
        let constraints = spec
            .match_constraints
            .ok_or_else(|| format!("{what}: matchConstraints is required"))?;
        if !selects_everything(&constraints.namespace_selector)
            || !selects_everything(&constraints.object_selector)
        {
            return Err(format!(
                "{what}: the fake evaluates no namespaceSelector or objectSelector"
            ));
        }
        let failure_policy = match spec.failure_policy.as_deref() {
            None | Some("Fail") => FailurePolicy::Fail,
            Some("Ignore") => FailurePolicy::Ignore,
            Some(other) => return Err(format!("{what}: failurePolicy {other:?}")),
        };
        let compile = |e: &NamedExpression| Expression::compile(&e.expression, &what);
        Ok(Policy {
            failure_policy,
            rules: rules(constraints.resource_rules),
            exclude: rules(constraints.exclude_resource_rules),
            match_conditions: spec
                .match_conditions
                .iter()
                .map(compile)
                .collect::<Result<_, _>>()?,
            variables: spec
                .variables
                .iter()
                .map(|v| Ok((v.name.clone(), compile(v)?)))
                .collect::<Result<_, String>>()?,
            validations: spec
                .validations
                .into_iter()
                .map(|v| {
                    Ok(Validation {
                        expression: Expression::compile(&v.expression, &what)?,
                        message_expression: v
                            .message_expression
                            .as_deref()
                            .map(|m| Expression::compile(m, &what))
                            .transpose()?,
                        message: v.message,
                        reason: v.reason,
                    })
                })
                .collect::<Result<_, String>>()?,
            bindings: Vec::new(),
            name,
        })
    }

    fn matches(&self, req: &Request<'_>) -> bool {
        self.rules.iter().any(|r| r.matches(req)) && !self.exclude.iter().any(|r| r.matches(req))
    }

    /// validator.Validate for one binding: the decisions to deny, in validation order.
    fn validate(&self, context: &mut cel::Context<'_, '_>) -> Vec<Denial> {
        let on_error = |message: String| match self.failure_policy {
            FailurePolicy::Fail => vec![Denial {
                message,
                reason: String::new(),
            }],
            FailurePolicy::Ignore => Vec::new(),
        };
        // matchconditions.Match: a false condition skips the binding, whatever errors
        // others gave; errors without a false deny under Fail.
        let mut errors = Vec::new();
        for condition in &self.match_conditions {
            match condition.eval_bool(context) {
                Ok(true) => {}
                Ok(false) => return Vec::new(),
                Err(e) => errors.push(e),
            }
        }
        if !errors.is_empty() {
            return on_error(aggregate(&errors));
        }
        // Variables are lazy in the apiserver: one that fails only fails the expressions
        // that read it. Here they are evaluated in order, the failed ones left out of
        // `variables`, and an expression stopped by a missing one reports that one's error.
        let mut values: HashMap<String, cel::Value> = HashMap::new();
        let mut failed: HashMap<String, String> = HashMap::new();
        for (name, expression) in &self.variables {
            context.add_variable_from_value("variables", values.clone());
            match expression.eval(context) {
                Ok(v) => {
                    values.insert(name.clone(), v);
                }
                Err(e) => {
                    failed.insert(name.clone(), e);
                }
            }
        }
        context.add_variable_from_value("variables", values);
        let explain = |result: Result<bool, String>| {
            result.map_err(|e| {
                failed
                    .iter()
                    .find(|(name, _)| e.contains(&format!("No such key: {name}")))
                    .map_or(e.clone(), |(_, why)| why.clone())
            })
        };
        let mut denials = Vec::new();
        for v in &self.validations {
            match explain(v.expression.eval_bool(context)) {
                Ok(true) => {}
                Ok(false) => denials.push(Denial {
                    message: v.message(context),
                    reason: v.reason.clone().unwrap_or_else(|| "Invalid".into()),
                }),
                Err(e) => denials.extend(on_error(e)),
            }
        }
        denials
    }
}

impl Validation {
    /// messageExpression if it gives a non-blank one-line string, else message, else the
    /// expression (validator.go).
    fn message(&self, context: &cel::Context<'_, '_>) -> String {
        let from_expression = self
            .message_expression
            .as_ref()
            .and_then(|m| match m.eval(context) {
                Ok(cel::Value::String(s)) => Some(s.trim().to_owned()),
                _ => None,
            })
            .filter(|m| !m.is_empty() && !m.contains('\n') && m.len() <= 5 * 1024);
        from_expression
            .or_else(|| {
                self.message
                    .as_deref()
                    .map(str::trim)
                    .filter(|m| !m.is_empty())
                    .map(str::to_owned)
            })
            .unwrap_or_else(|| format!("failed expression: {}", self.expression.source.trim()))
    }
}

/// `utilerrors.NewAggregate(errs).Error()`.
fn aggregate(errors: &[String]) -> String {
    if errors.len() == 1 {
        errors[0].clone()
    } else {
        format!("[{}]", errors.join(", "))
    }
}

/// reasonToCode (policy_decision.go).
fn code_for(reason: &str) -> u16 {
    match reason {
        "Forbidden" => 403,
        "Unauthorized" => 401,
        "RequestEntityTooLarge" => 413,
        _ => 422,
    }
}

/// A JSON value as CEL sees an unstructured object. A Secret's `data` values are its base64
/// text, as stored: CEL gets no bytes of them, and Kubernetes CEL has no base64 decode. The
/// real kube-apiserver (v1.37.2) said so: a policy's messageExpression
/// `string(object.data.url)` printed the base64 of the url the request held
/// (tests/real/argocd.rs; CONFORMANCE.md).
fn to_cel(v: &Value) -> cel::Value {
    match v {
        Value::Null => cel::Value::Null,
        Value::Bool(b) => cel::Value::Bool(*b),
        Value::Number(n) => n
            .as_i64()
            .map(cel::Value::Int)
            .unwrap_or_else(|| cel::Value::Float(n.as_f64().unwrap_or(f64::NAN))),
        Value::String(s) => cel::Value::String(Arc::new(s.clone())),
        Value::Array(items) => cel::Value::List(Arc::new(items.iter().map(to_cel).collect())),
        Value::Object(m) => {
            let map: HashMap<String, cel::Value> =
                m.iter().map(|(k, v)| (k.clone(), to_cel(v))).collect();
            cel::Value::Map(map.into())
        }
    }
}

fn object_to_cel(obj: Option<&Value>) -> cel::Value {
    obj.map_or(cel::Value::Null, to_cel)
}

/// The `request` variable: the AdmissionRequest, as CEL sees it (no object, oldObject or
/// options in it; empty `name`/`namespace` omitted).
fn request_to_cel(req: &Request<'_>, user: &Identity) -> cel::Value {
    let k = req.kind;
    let gvk = json!({"group": k.group, "version": k.version, "kind": k.kind});
    let gvr = json!({"group": k.group, "version": k.version, "resource": k.resource});
    let mut request = json!({
        "uid": uuid::Uuid::new_v4().to_string(),
        "kind": gvk, "resource": gvr, "requestKind": gvk, "requestResource": gvr,
        "operation": req.operation.as_str(),
        "userInfo": {"username": user.username(), "groups": user.groups()},
        "dryRun": req.dry_run,
    });
    if !req.name.is_empty() {
        request["name"] = json!(req.name);
    }
    if !req.namespace.is_empty() {
        request["namespace"] = json!(req.namespace);
    }
    to_cel(&request)
}

impl Admission {
    /// Reads every ValidatingAdmissionPolicy and ValidatingAdmissionPolicyBinding in a
    /// multi-document YAML (other kinds are ignored). A binding naming no policy binds
    /// nothing, as in the apiserver.
    pub fn from_yaml(yaml: &str) -> Result<Admission, String> {
        let mut policies = Vec::new();
        let mut bindings = Vec::new();
        for doc in serde_yaml_ng::Deserializer::from_str(yaml) {
            let value = Value::deserialize(doc).map_err(|e| format!("admission YAML: {e}"))?;
            let name = value["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            match value["kind"].as_str().unwrap_or_default() {
                "ValidatingAdmissionPolicy" => {
                    let spec = PolicySpec::deserialize(&value["spec"])
                        .map_err(|e| format!("ValidatingAdmissionPolicy {name}: {e}"))?;
                    policies.push(Policy::from_spec(name, spec)?);
                }
                "ValidatingAdmissionPolicyBinding" => {
                    let spec = BindingSpec::deserialize(&value["spec"])
                        .map_err(|e| format!("ValidatingAdmissionPolicyBinding {name}: {e}"))?;
                    bindings.push((name, spec));
                }
                _ => {}
            }
        }
        for (name, spec) in bindings {
            if let Some(policy) = policies.iter_mut().find(|p| p.name == spec.policy_name) {
                policy.bindings.push(Binding {
                    name,
                    actions: spec.validation_actions,
                });
            }
        }
        Ok(Admission {
            policies,
            user: Identity::default(),
            rbac: None,
        })
    }

    /// The same policies, for requests made as `user`, whose `authorizer` asks `rbac`.
    pub fn for_user(self, user: Identity, rbac: Option<Rbac>) -> Admission {
        Admission {
            user,
            rbac: rbac.map(Arc::new),
            ..self
        }
    }

    /// How many policies were loaded (for the builder's sanity check).
    pub fn policy_count(&self) -> usize {
        self.policies.len()
    }

    /// dispatcher.Dispatch: admitted, or refused by the first denial of a binding whose
    /// validationActions hold Deny (Warn and Audit deny nothing; the fake sends no warnings).
    pub fn admit(&self, req: &Request<'_>) -> Result<(), ApiError> {
        for policy in self.policies.iter().filter(|p| p.matches(req)) {
            for binding in &policy.bindings {
                let mut context = cel::Context::default();
                context.add_variable_from_value("object", object_to_cel(req.object));
                context.add_variable_from_value("oldObject", object_to_cel(req.old_object));
                context.add_variable_from_value("request", request_to_cel(req, &self.user));
                authorizer::declare(&mut context, self.rbac.clone());
                context.add_variable_from_value("params", cel::Value::Null);
                // The fake keeps no Namespace objects' details worth a policy's reading.
                context.add_variable_from_value("namespaceObject", cel::Value::Null);
                let denials = policy.validate(&mut context);
                if !binding.actions.iter().any(|a| a == "Deny") {
                    continue;
                }
                if let Some(denial) = denials.into_iter().next() {
                    return Err(refusal(req, &policy.name, &binding.name, denial));
                }
            }
        }
        Ok(())
    }
}

/// `admission.NewForbidden` with the decision's reason and code, and the message added as a
/// cause (dispatcher.go).
fn refusal(req: &Request<'_>, policy: &str, binding: &str, denial: Denial) -> ApiError {
    let message = format!(
        "ValidatingAdmissionPolicy '{policy}' with binding '{binding}' denied request: {}",
        denial.message
    );
    // extractResourceName: the request's name, else "Unknown".
    let name = if req.name.is_empty() {
        "Unknown"
    } else {
        req.name
    };
    let mut error = status::forbidden(
        &req.kind.qualified(),
        name,
        &message,
        vec![Cause {
            reason: "",
            message: message.clone(),
            field: String::new(),
        }],
    );
    let reason = if denial.reason.is_empty() {
        "Invalid".to_owned()
    } else {
        denial.reason
    };
    error.code = code_for(&reason);
    error.body["reason"] = json!(reason);
    error.body["code"] = json!(error.code);
    // Details name the group and the plain resource, as NewForbidden does.
    if !req.kind.group.is_empty() {
        error.body["details"]["kind"] = json!(req.kind.resource);
        error.body["details"]["group"] = json!(req.kind.group);
    }
    error
}

/// The `authorizer` variable and its receiver functions (cel/library/authz.go), asking the
/// fake's RBAC about the request's user. Its values are maps tagged with their CEL type
/// (`kubernetes.authorization.ResourceCheck`, ...); a policy reads them only through the
/// functions, as in the apiserver, where they expose no fields.
mod authorizer {
    use std::collections::HashMap;
    use std::sync::Arc;

    use cel::extractors::This;
    use cel::{ExecutionError, Value};

    use super::{Attributes, Rbac};

    const TYPE: &str = "@type";
    const AUTHORIZER: &str = "kubernetes.authorization.Authorizer";
    const GROUP_CHECK: &str = "kubernetes.authorization.GroupCheck";
    const RESOURCE_CHECK: &str = "kubernetes.authorization.ResourceCheck";
    const DECISION: &str = "kubernetes.authorization.Decision";
    const NOT_BUILTIN: &str = "the authorizer's functions are no CEL builtins";

    fn tagged(kind: &str, fields: &[(&str, Value)]) -> Value {
        let mut map: HashMap<String, Value> = fields
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.clone()))
            .collect();
        map.insert(TYPE.to_owned(), Value::String(Arc::new(kind.to_owned())));
        Value::Map(map.into())
    }

    /// The map's fields if it is a value of CEL type `kind`, else no such overload.
    fn fields(
        this: &Value,
        kind: &str,
        function: &str,
    ) -> Result<HashMap<String, Value>, ExecutionError> {
        let no_overload = || ExecutionError::function_error(function, "no such overload");
        let Value::Map(map) = this else {
            return Err(no_overload());
        };
        let fields: HashMap<String, Value> = map
            .map
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect();
        match fields.get(TYPE) {
            Some(Value::String(t)) if t.as_str() == kind => Ok(fields),
            _ => Err(no_overload()),
        }
    }

    fn text(fields: &HashMap<String, Value>, key: &str) -> String {
        match fields.get(key) {
            Some(Value::String(s)) => s.to_string(),
            _ => String::new(),
        }
    }

    /// A ResourceCheck with one field set (subresource, namespace, name).
    fn with(
        this: Value,
        field: &'static str,
        function: &'static str,
        value: Arc<String>,
    ) -> Result<Value, ExecutionError> {
        let mut f = fields(&this, RESOURCE_CHECK, function)?;
        f.insert(field.to_owned(), Value::String(value));
        let pairs: Vec<(&str, Value)> = f
            .iter()
            .filter(|(k, _)| k.as_str() != TYPE)
            .map(|(k, v)| (k.as_str(), v.clone()))
            .collect();
        Ok(tagged(RESOURCE_CHECK, &pairs))
    }

    pub(super) fn declare(context: &mut cel::Context<'_, '_>, rbac: Option<Arc<Rbac>>) {
        context.add_variable_from_value("authorizer", tagged(AUTHORIZER, &[]));
        context
            .add_function("group", |This(this): This<Value>, group: Arc<String>| {
                fields(&this, AUTHORIZER, "group")?;
                Ok::<_, ExecutionError>(tagged(GROUP_CHECK, &[("group", Value::String(group))]))
            })
            .expect(NOT_BUILTIN);
        context
            .add_function(
                "resource",
                |This(this): This<Value>, resource: Arc<String>| {
                    let f = fields(&this, GROUP_CHECK, "resource")?;
                    if resource.trim().is_empty() {
                        return Err(ExecutionError::function_error(
                            "resource",
                            "resource must not be empty",
                        ));
                    }
                    Ok(tagged(
                        RESOURCE_CHECK,
                        &[
                            ("group", f.get("group").cloned().unwrap_or(Value::Null)),
                            ("resource", Value::String(resource)),
                        ],
                    ))
                },
            )
            .expect(NOT_BUILTIN);
        context
            .add_function("subresource", |This(this): This<Value>, v: Arc<String>| {
                with(this, "subresource", "subresource", v)
            })
            .expect(NOT_BUILTIN);
        context
            .add_function("namespace", |This(this): This<Value>, v: Arc<String>| {
                with(this, "namespace", "namespace", v)
            })
            .expect(NOT_BUILTIN);
        context
            .add_function("name", |This(this): This<Value>, v: Arc<String>| {
                with(this, "name", "name", v)
            })
            .expect(NOT_BUILTIN);
        context
            .add_function(
                "check",
                move |This(this): This<Value>, verb: Arc<String>| {
                    let f = fields(&this, RESOURCE_CHECK, "check")?;
                    let (group, resource) = (text(&f, "group"), text(&f, "resource"));
                    let subresource = text(&f, "subresource");
                    // RBAC authorizes a subresource as `resource/subresource`.
                    let resource = if subresource.is_empty() {
                        resource
                    } else {
                        format!("{resource}/{subresource}")
                    };
                    let (namespace, name) = (text(&f, "namespace"), text(&f, "name"));
                    let attributes = Attributes {
                        verb: verb.as_str(),
                        group: &group,
                        resource: &resource,
                        namespace: &namespace,
                        name: &name,
                    };
                    let (allowed, reason) = match &rbac {
                        None => (true, String::new()),
                        Some(rbac) => match rbac.authorize(&attributes) {
                            Ok(()) => (true, String::new()),
                            Err(reason) => (false, reason),
                        },
                    };
                    Ok::<_, ExecutionError>(tagged(
                        DECISION,
                        &[
                            ("allowed", Value::Bool(allowed)),
                            ("reason", Value::String(Arc::new(reason))),
                        ],
                    ))
                },
            )
            .expect(NOT_BUILTIN);
        for (function, field) in [("allowed", "allowed"), ("reason", "reason")] {
            context
                .add_function(function, move |This(this): This<Value>| {
                    let f = fields(&this, DECISION, function)?;
                    Ok::<_, ExecutionError>(f.get(field).cloned().unwrap_or(Value::Null))
                })
                .expect(NOT_BUILTIN);
        }
        // The fake's RBAC gives no errors, only denials.
        context
            .add_function("errored", |This(this): This<Value>| {
                fields(&this, DECISION, "errored")?;
                Ok::<_, ExecutionError>(Value::Bool(false))
            })
            .expect(NOT_BUILTIN);
        context
            .add_function("error", |This(this): This<Value>| {
                fields(&this, DECISION, "error")?;
                Ok::<_, ExecutionError>(Value::String(Arc::new(String::new())))
            })
            .expect(NOT_BUILTIN);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const POLICY: &str = "
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: p}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - {apiGroups: [''], apiVersions: ['*'], resources: [secrets], operations: [CREATE, UPDATE]}
  matchConditions:
  - {name: me, expression: \"request.userInfo.username.startsWith('system:serviceaccount:')\"}
  variables:
  - {name: wanted, expression: \"'ok'\"}
  - {name: broken, expression: \"oldObject.metadata.name\"}
  validations:
  - expression: \"object.metadata.name != 'bad'\"
    message: no bad names
    reason: Forbidden
  - expression: \"object.metadata.name != 'plain'\"
  - expression: \"object.metadata.name != 'computed'\"
    messageExpression: \"'wanted ' + variables.wanted\"
  - expression: \"object.metadata.name != 'lazy' || variables.broken == 'x'\"
  - expression: \"!has(object.data) || object.data.all(k, k == 'a')\"
  - expression: \"!has(object.data) || !('a' in object.data) || object.data.a == 'eA=='\"
";

    const BINDING: &str = "
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: b}
spec: {policyName: p, validationActions: [Deny]}
";

    fn admission(docs: &[&str]) -> Admission {
        Admission::from_yaml(&docs.join("\n---\n")).unwrap()
    }

    fn create(a: &Admission, obj: Value) -> Result<(), ApiError> {
        let name = obj["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        a.admit(&Request {
            operation: Operation::Create,
            kind: Kind::core(Resource::Secrets),
            namespace: "ns",
            name: &name,
            object: Some(&obj),
            old_object: None,
            dry_run: false,
        })
    }

    fn message(e: &ApiError) -> &str {
        e.body["message"].as_str().unwrap()
    }

    #[test]
    fn a_false_validation_denies_with_its_message_reason_and_code() {
        let a = admission(&[POLICY, BINDING]);
        assert!(create(&a, json!({"metadata": {"name": "good"}})).is_ok());

        let e = create(&a, json!({"metadata": {"name": "bad"}})).unwrap_err();
        assert_eq!(e.code, 403);
        assert_eq!(e.body["reason"], "Forbidden");
        assert_eq!(
            message(&e),
            "secrets \"bad\" is forbidden: ValidatingAdmissionPolicy 'p' with binding 'b' denied request: no bad names"
        );
        assert_eq!(
            e.body["details"]["causes"][0]["message"],
            "ValidatingAdmissionPolicy 'p' with binding 'b' denied request: no bad names"
        );

        // No reason: Invalid, 422; no message: the expression.
        let e = create(&a, json!({"metadata": {"name": "plain"}})).unwrap_err();
        assert_eq!((e.code, e.body["reason"].as_str()), (422, Some("Invalid")));
        assert!(
            message(&e)
                .ends_with("denied request: failed expression: object.metadata.name != 'plain'"),
            "{}",
            message(&e)
        );
        let e = create(&a, json!({"metadata": {"name": "computed"}})).unwrap_err();
        assert!(
            message(&e).ends_with("denied request: wanted ok"),
            "{}",
            message(&e)
        );
    }

    #[test]
    fn an_error_denies_under_fail_only_where_it_is_read() {
        let a = admission(&[POLICY, BINDING]);
        // `broken` fails on every create (oldObject is null) but only `lazy` reads it.
        let e = create(&a, json!({"metadata": {"name": "lazy"}})).unwrap_err();
        assert_eq!(e.code, 422);
        assert!(
            message(&e).contains("expression 'oldObject.metadata.name' resulted in error"),
            "{}",
            message(&e)
        );
        let ignore = POLICY.replace("failurePolicy: Fail", "failurePolicy: Ignore");
        assert!(
            create(
                &admission(&[&ignore, BINDING]),
                json!({"metadata": {"name": "lazy"}})
            )
            .is_ok()
        );
    }

    #[test]
    fn secret_data_is_its_base64_text_and_maps_iterate_over_keys() {
        let a = admission(&[POLICY, BINDING]);
        assert!(
            create(
                &a,
                json!({"metadata": {"name": "s"}, "data": {"a": "eA=="}})
            )
            .is_ok()
        );
        assert!(
            create(
                &a,
                json!({"metadata": {"name": "s"}, "data": {"b": "eA=="}})
            )
            .is_err()
        );
        // The value CEL compares is the base64 text, not what it decodes to ("x").
        assert!(
            create(
                &a,
                json!({"metadata": {"name": "s"}, "data": {"a": "eQ=="}})
            )
            .is_err()
        );
    }

    #[test]
    fn only_matching_requests_with_a_binding_and_deny_are_refused() {
        let bad = json!({"metadata": {"name": "bad"}});
        assert!(
            create(&admission(&[POLICY]), bad.clone()).is_ok(),
            "no binding"
        );
        let warn = BINDING.replace("[Deny]", "[Warn, Audit]");
        assert!(
            create(&admission(&[POLICY, &warn]), bad.clone()).is_ok(),
            "no Deny"
        );
        let other_user = POLICY.replace("system:serviceaccount:", "system:node:");
        assert!(create(&admission(&[&other_user, BINDING]), bad.clone()).is_ok());
        let updates_only = POLICY.replace("[CREATE, UPDATE]", "[UPDATE]");
        assert!(create(&admission(&[&updates_only, BINDING]), bad.clone()).is_ok());
        assert!(create(&admission(&[POLICY, BINDING]), bad).is_err());
    }

    #[test]
    fn authorizer_checks_are_answered_by_rbac_for_the_requests_user() {
        let policy = POLICY.replace(
            "request.userInfo.username.startsWith('system:serviceaccount:')",
            "authorizer.group('g').resource('r').check('held').allowed() && \
             !authorizer.group('g').resource('r').check('exempt').allowed()",
        );
        let marker = "
kind: ClusterRole
metadata: {name: marker}
rules: [{apiGroups: [g], resources: [r], verbs: [held]}]
---
kind: ClusterRole
metadata: {name: everything}
rules: [{apiGroups: ['*'], resources: ['*'], verbs: ['*']}]
---
kind: ClusterRoleBinding
metadata: {name: marker}
roleRef: {kind: ClusterRole, name: marker}
subjects: [{kind: ServiceAccount, name: a, namespace: n}, {kind: ServiceAccount, name: root, namespace: n}]
---
kind: ClusterRoleBinding
metadata: {name: everything}
roleRef: {kind: ClusterRole, name: everything}
subjects: [{kind: ServiceAccount, name: root, namespace: n}]
";
        let as_user = |name: &str| {
            let who = Identity {
                namespace: "n".into(),
                name: name.into(),
            };
            let rbac = Rbac::from_yaml(marker, &who).unwrap();
            admission(&[&policy, BINDING]).for_user(who, Some(rbac))
        };
        let bad = json!({"metadata": {"name": "bad"}});
        assert!(create(&as_user("a"), bad.clone()).is_err(), "held");
        assert!(
            create(&as_user("b"), bad.clone()).is_ok(),
            "not granted held"
        );
        assert!(
            create(&as_user("root"), bad.clone()).is_ok(),
            "granted exempt too"
        );
        // No RBAC: the authorizer allows everything, exempt included.
        assert!(create(&admission(&[&policy, BINDING]), bad).is_ok());
    }

    #[test]
    fn what_the_fake_cannot_evaluate_is_refused_at_load() {
        let params = POLICY.replace(
            "failurePolicy: Fail",
            "failurePolicy: Fail\n  paramKind: {apiVersion: v1, kind: ConfigMap}",
        );
        assert!(Admission::from_yaml(&params).is_err());
        let selector = POLICY.replace(
            "  matchConstraints:\n",
            "  matchConstraints:\n    namespaceSelector: {matchLabels: {a: b}}\n",
        );
        assert!(Admission::from_yaml(&selector).is_err());
        assert!(Admission::from_yaml(&POLICY.replace("'ok'", "'ok' +")).is_err());
    }
}
