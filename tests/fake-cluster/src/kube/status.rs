//! `Status` bodies shaped like the ones k8s.io/apimachinery/pkg/api/errors builds.

use serde_json::{Map, Value, json};

/// A refusal: the HTTP status, the `Status` body, and an optional Retry-After.
#[derive(Debug, Clone)]
pub(crate) struct ApiError {
    pub code: u16,
    pub body: Value,
    pub retry_after: Option<u64>,
}

/// One `metav1.StatusCause` (`type` serialises as `reason`).
#[derive(Debug, Clone)]
pub(crate) struct Cause {
    pub reason: &'static str,
    pub message: String,
    pub field: String,
}

impl Cause {
    fn to_json(&self) -> Value {
        let mut m = Map::new();
        if !self.reason.is_empty() {
            m.insert("reason".into(), json!(self.reason));
        }
        m.insert("message".into(), json!(self.message));
        if !self.field.is_empty() {
            m.insert("field".into(), json!(self.field));
        }
        Value::Object(m)
    }
}

/// The parts of `metav1.StatusDetails` the fake fills (all `omitempty`).
#[derive(Debug, Default, Clone)]
pub(crate) struct Details {
    pub name: String,
    pub group: String,
    pub kind: String,
    pub causes: Vec<Cause>,
    pub retry_after_seconds: Option<u64>,
}

impl Details {
    pub(super) fn named(kind: &str, name: &str) -> Self {
        Details {
            name: name.to_owned(),
            kind: kind.to_owned(),
            ..Details::default()
        }
    }

    fn to_json(&self) -> Value {
        let mut m = Map::new();
        if !self.name.is_empty() {
            m.insert("name".into(), json!(self.name));
        }
        if !self.group.is_empty() {
            m.insert("group".into(), json!(self.group));
        }
        if !self.kind.is_empty() {
            m.insert("kind".into(), json!(self.kind));
        }
        if !self.causes.is_empty() {
            let causes = self.causes.iter().map(Cause::to_json).collect();
            m.insert("causes".into(), Value::Array(causes));
        }
        if let Some(s) = self.retry_after_seconds.filter(|s| *s > 0) {
            m.insert("retryAfterSeconds".into(), json!(s));
        }
        Value::Object(m)
    }
}

impl ApiError {
    pub(super) fn new(
        code: u16,
        reason: &str,
        message: impl Into<String>,
        details: Option<Details>,
    ) -> Self {
        let mut body = Map::new();
        body.insert("kind".into(), json!("Status"));
        body.insert("apiVersion".into(), json!("v1"));
        body.insert("metadata".into(), json!({}));
        body.insert("status".into(), json!("Failure"));
        body.insert("message".into(), json!(message.into()));
        if !reason.is_empty() {
            body.insert("reason".into(), json!(reason));
        }
        let retry_after = details.as_ref().and_then(|d| d.retry_after_seconds);
        if let Some(d) = details {
            body.insert("details".into(), d.to_json());
        }
        body.insert("code".into(), json!(code));
        ApiError {
            code,
            body: Value::Object(body),
            retry_after,
        }
    }
}

pub(crate) fn not_found(plural: &str, name: &str) -> ApiError {
    ApiError::new(
        404,
        "NotFound",
        format!("{plural} \"{name}\" not found"),
        Some(Details::named(plural, name)),
    )
}

/// The 404 for a path the server does not serve.
pub(crate) fn no_such_path() -> ApiError {
    ApiError::new(
        404,
        "NotFound",
        "the server could not find the requested resource",
        Some(Details::default()),
    )
}

pub(crate) fn already_exists(plural: &str, name: &str) -> ApiError {
    ApiError::new(
        409,
        "AlreadyExists",
        format!("{plural} \"{name}\" already exists"),
        Some(Details::named(plural, name)),
    )
}

/// `errors.NewConflict`: "Operation cannot be fulfilled on ...".
pub(crate) fn conflict(plural: &str, name: &str, why: &str) -> ApiError {
    ApiError::new(
        409,
        "Conflict",
        format!("Operation cannot be fulfilled on {plural} \"{name}\": {why}"),
        Some(Details::named(plural, name)),
    )
}

pub(crate) const MODIFIED: &str =
    "the object has been modified; please apply your changes to the latest version and try again";

pub(crate) fn bad_request(message: impl Into<String>) -> ApiError {
    ApiError::new(400, "BadRequest", message, None)
}

pub(crate) fn method_not_allowed() -> ApiError {
    ApiError::new(
        405,
        "MethodNotAllowed",
        "the server does not allow this method on the requested resource",
        Some(Details::default()),
    )
}

pub(crate) fn unsupported_media_type(content_type: &str) -> ApiError {
    ApiError::new(
        415,
        "UnsupportedMediaType",
        format!(
            "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/apply-patch+yaml (got {content_type:?})"
        ),
        None,
    )
}

/// A protobuf body the fake does not read (protobuf.rs): a real server would, so the fake says
/// it is the one falling short.
pub(crate) fn unreadable_protobuf(why: String) -> ApiError {
    ApiError::new(
        415,
        "UnsupportedMediaType",
        format!("the fake API server reads protobuf for v1 Namespace and Secret only: {why}"),
        None,
    )
}

/// `errors.NewForbidden`: `secrets "NAME" is forbidden: WHY` (or `secrets is forbidden` without a name).
pub(crate) fn forbidden(plural: &str, name: &str, why: &str, causes: Vec<Cause>) -> ApiError {
    let message = if name.is_empty() {
        format!("{plural} is forbidden: {why}")
    } else {
        format!("{plural} \"{name}\" is forbidden: {why}")
    };
    let mut details = Details::named(plural, name);
    details.causes = causes;
    ApiError::new(403, "Forbidden", message, Some(details))
}

pub(crate) const EXPIRED_CONTINUE: &str = "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.";

pub(crate) fn expired_continue() -> ApiError {
    ApiError::new(410, "Expired", EXPIRED_CONTINUE, None)
}

/// A `field.Error` as the validation code builds it.
#[derive(Debug, Clone)]
pub(crate) enum FieldError {
    Invalid {
        field: String,
        value: String,
        detail: String,
    },
    Forbidden {
        field: String,
        detail: String,
    },
    Required {
        field: String,
        detail: String,
    },
}

impl FieldError {
    /// The message without the field, as in a cause.
    fn body(&self) -> String {
        match self {
            FieldError::Invalid { value, detail, .. } => {
                format!("Invalid value: {}: {detail}", json!(value))
            }
            FieldError::Forbidden { detail, .. } => format!("Forbidden: {detail}"),
            FieldError::Required { detail, .. } if detail.is_empty() => "Required value".into(),
            FieldError::Required { detail, .. } => format!("Required value: {detail}"),
        }
    }

    fn field(&self) -> &str {
        match self {
            FieldError::Invalid { field, .. }
            | FieldError::Forbidden { field, .. }
            | FieldError::Required { field, .. } => field,
        }
    }

    fn reason(&self) -> &'static str {
        match self {
            FieldError::Invalid { .. } => "FieldValueInvalid",
            FieldError::Forbidden { .. } => "FieldValueForbidden",
            FieldError::Required { .. } => "FieldValueRequired",
        }
    }
}

/// `errors.NewInvalid`: `Secret "NAME" is invalid: field: ...` (aggregated as `[a, b]`).
pub(crate) fn invalid(kind: &str, group: &str, name: &str, errors: &[FieldError]) -> ApiError {
    let strings: Vec<String> = errors
        .iter()
        .map(|e| format!("{}: {}", e.field(), e.body()))
        .collect();
    let aggregate = if strings.len() == 1 {
        strings[0].clone()
    } else {
        format!("[{}]", strings.join(", "))
    };
    let qualified = if group.is_empty() {
        kind.to_owned()
    } else {
        format!("{kind}.{group}")
    };
    let details = Details {
        name: name.to_owned(),
        group: group.to_owned(),
        kind: kind.to_owned(),
        causes: errors
            .iter()
            .map(|e| Cause {
                reason: e.reason(),
                message: e.body(),
                field: e.field().to_owned(),
            })
            .collect(),
        retry_after_seconds: None,
    };
    ApiError::new(
        422,
        "Invalid",
        format!("{qualified} \"{name}\" is invalid: {aggregate}"),
        Some(details),
    )
}

/// The body the real server's `NewGenericServerResponse` makes for a failed JSON patch.
pub(crate) fn json_patch_failed() -> ApiError {
    ApiError::new(
        422,
        "Invalid",
        "the server rejected our request due to an error in our request",
        Some(Details::default()),
    )
}

/// A Status like the real server's for a bare status code (used by fault rules).
pub(crate) fn for_code(code: u16, retry_after: Option<u64>) -> ApiError {
    let (reason, message) = match code {
        400 => (
            "BadRequest",
            "the server rejected our request for an unknown reason",
        ),
        401 => ("Unauthorized", "Unauthorized"),
        403 => ("Forbidden", "forbidden"),
        404 => (
            "NotFound",
            "the server could not find the requested resource",
        ),
        409 => ("Conflict", "the server reported a conflict"),
        410 => ("Expired", EXPIRED_CONTINUE),
        422 => (
            "Invalid",
            "the server rejected our request due to an error in our request",
        ),
        429 => (
            "TooManyRequests",
            "Too many requests, please try again later.",
        ),
        500 => ("InternalError", "Internal error occurred: injected fault"),
        503 => ("ServiceUnavailable", "The service is unavailable."),
        504 => (
            "Timeout",
            "Timeout: request did not complete within the allotted timeout",
        ),
        _ => ("", "the server responded with an error"),
    };
    let mut details = Details {
        retry_after_seconds: retry_after,
        ..Details::default()
    };
    if code == 500 {
        details.causes.push(Cause {
            reason: "",
            message: "injected fault".into(),
            field: String::new(),
        });
    }
    let mut err = ApiError::new(code, reason, message, Some(details));
    err.retry_after = retry_after;
    err
}
