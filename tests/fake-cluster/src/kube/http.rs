//! Routing, request decoding, faults, RBAC and the request log.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use axum::body::{Body, to_bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use serde_json::{Value, json};

use super::auth::{self, TokenRequested, User};
use super::events::{self, EventApi, EventRoute};
use super::protobuf;
use super::rbac::{Attributes, Identity, Rbac};
use super::selector::{FieldSelector, LabelSelector};
use super::status::{self, ApiError, FieldError};
use super::store::{ListOptions, PatchType, WriteOptions};
use super::{Inner, Recorded, Resource, Shared};

/// What a path names.
enum Route {
    Version,
    Api,
    ApiV1,
    Apis,
    Healthz,
    Collection {
        resource: Resource,
        namespace: Option<String>,
    },
    Item {
        resource: Resource,
        namespace: String,
        name: String,
    },
    /// A pod's status subresource.
    Status {
        namespace: String,
        name: String,
    },
    /// Events, core/v1 or events.k8s.io/v1 (events.rs).
    Events(EventRoute),
    /// `POST /apis/authentication.k8s.io/v1/selfsubjectreviews`: who the caller is
    /// (`kubectl auth whoami`; served from 1.28). It stores nothing.
    SelfSubjectReview,
    /// `POST /api/v1/namespaces/NS/serviceaccounts/NAME/token`: a token for that
    /// ServiceAccount (kube/auth.rs).
    TokenRequest {
        namespace: String,
        name: String,
    },
    Unknown,
}

fn resource_named(plural: &str) -> Option<Resource> {
    match plural {
        "namespaces" => Some(Resource::Namespaces),
        "secrets" => Some(Resource::Secrets),
        "serviceaccounts" => Some(Resource::ServiceAccounts),
        "pods" => Some(Resource::Pods),
        _ => None,
    }
}

fn route(path: &str) -> Route {
    if let Some(events) = events::route(path) {
        return Route::Events(events);
    }
    let path = path.trim_end_matches('/');
    match path {
        "/version" => return Route::Version,
        "/api" => return Route::Api,
        "/api/v1" => return Route::ApiV1,
        "/apis" => return Route::Apis,
        "/healthz" | "/livez" | "/readyz" => return Route::Healthz,
        "/apis/authentication.k8s.io/v1/selfsubjectreviews" => return Route::SelfSubjectReview,
        _ => {}
    }
    let Some(rest) = path.strip_prefix("/api/v1/") else {
        return Route::Unknown;
    };
    let parts: Vec<&str> = rest.split('/').collect();
    match parts.as_slice() {
        [plural] => match resource_named(plural) {
            Some(resource) => Route::Collection {
                resource,
                namespace: None,
            },
            None => Route::Unknown,
        },
        ["namespaces", name] => Route::Item {
            resource: Resource::Namespaces,
            namespace: String::new(),
            name: (*name).to_owned(),
        },
        ["namespaces", ns, plural] => match resource_named(plural) {
            Some(resource) if resource != Resource::Namespaces => Route::Collection {
                resource,
                namespace: Some((*ns).to_owned()),
            },
            _ => Route::Unknown,
        },
        ["namespaces", ns, plural, name] => match resource_named(plural) {
            Some(resource) if resource != Resource::Namespaces => Route::Item {
                resource,
                namespace: (*ns).to_owned(),
                name: (*name).to_owned(),
            },
            _ => Route::Unknown,
        },
        ["namespaces", ns, "serviceaccounts", name, "token"] => Route::TokenRequest {
            namespace: (*ns).to_owned(),
            name: (*name).to_owned(),
        },
        ["namespaces", ns, "pods", name, "status"] => Route::Status {
            namespace: (*ns).to_owned(),
            name: (*name).to_owned(),
        },
        _ => Route::Unknown,
    }
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                match s
                    .get(i + 1..i + 3)
                    .and_then(|h| u8::from_str_radix(h, 16).ok())
                    .ok_or(())
                {
                    Ok(b) => {
                        out.push(b);
                        i += 2;
                    }
                    Err(_) => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

struct Query(Vec<(String, String)>);

impl Query {
    fn parse(raw: &str) -> Query {
        Query(
            raw.split('&')
                .filter(|p| !p.is_empty())
                .map(|p| {
                    let (k, v) = p.split_once('=').unwrap_or((p, ""));
                    (percent_decode(k), percent_decode(v))
                })
                .collect(),
        )
    }

    fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// One request as the handler needs it.
struct Incoming<'a> {
    method: &'a str,
    query: Query,
    content_type: Option<&'a str>,
    user_agent: &'a str,
    /// What the client accepts: kubectl asks for a server-side Table.
    accept: &'a str,
    body: &'a [u8],
    /// The user the request is made as (kube/auth.rs).
    user: &'a User,
}

fn parse_body(body: &[u8], content_type: Option<&str>) -> Result<Value, ApiError> {
    if content_type.is_some_and(|c| c.contains("protobuf")) {
        // kubectl's typed clients (`kubectl create namespace`) send protobuf.
        return protobuf::decode(body).map_err(status::unreadable_protobuf);
    }
    if let Ok(v) = serde_json::from_slice::<Value>(body) {
        return Ok(v);
    }
    serde_yaml_ng::from_slice::<Value>(body)
        .map_err(|e| status::bad_request(format!("error decoding YAML: {e}")))
}

fn patch_type(content_type: Option<&str>) -> Result<PatchType, ApiError> {
    let media = content_type
        .unwrap_or_default()
        .split(';')
        .next()
        .unwrap_or_default()
        .trim();
    match media {
        "application/apply-patch+yaml" => Ok(PatchType::Apply),
        "application/json-patch+json" => Ok(PatchType::Json),
        "application/merge-patch+json" => Ok(PatchType::Merge),
        "application/strategic-merge-patch+json" => Ok(PatchType::Strategic),
        _ => Err(status::unsupported_media_type(media)),
    }
}

fn patch_options_invalid(error: FieldError) -> ApiError {
    status::invalid("PatchOptions", "meta.k8s.io", "", &[error])
}

impl Shared {
    /// The request's verb for RBAC, as the apiserver's RequestInfo names it.
    fn verb(method: &str, is_item: bool, query: &Query) -> &'static str {
        match (method, is_item) {
            ("GET" | "HEAD", true) => "get",
            ("GET" | "HEAD", false)
                if query.get("watch").is_some_and(|w| w == "true" || w == "1") =>
            {
                "watch"
            }
            ("GET" | "HEAD", false) => "list",
            ("POST", _) => "create",
            ("PUT", _) => "update",
            ("PATCH", _) => "patch",
            ("DELETE", true) => "delete",
            ("DELETE", false) => "deletecollection",
            _ => "unknown",
        }
    }

    /// `rbac` None: the authorizer has no roles yet (a server just back from an outage),
    /// so every resource request is refused, as a restarted kube-apiserver refuses them
    /// until its RBAC informers have synced (REAL-SERVER.md).
    fn authorize(
        &self,
        rbac: Option<&Rbac>,
        route: &Route,
        req: &Incoming<'_>,
    ) -> Result<(), ApiError> {
        if let Route::Events(events) = route {
            return Self::authorize_events(rbac, events, req);
        }
        let (resource, namespace, name) = match route {
            // A list or watch names the object its field selector requires by metadata.name:
            // RBAC's resourceNames then apply (k8s.io/apiserver pkg/endpoints/request/
            // requestinfo.go: `opts.FieldSelector.RequiresExactMatch("metadata.name")`, for
            // a name that is a valid path segment).
            Route::Collection {
                resource,
                namespace,
            } if req.method == "GET" => (
                *resource,
                namespace.as_deref().unwrap_or(""),
                FieldSelector::exact_name(req.query.get("fieldSelector").unwrap_or_default())
                    .unwrap_or(""),
            ),
            Route::Collection {
                resource,
                namespace,
            } => (*resource, namespace.as_deref().unwrap_or(""), ""),
            Route::Item {
                resource: Resource::Namespaces,
                name,
                ..
            } => (Resource::Namespaces, name.as_str(), name.as_str()),
            Route::Item {
                resource,
                namespace,
                name,
            } => (*resource, namespace.as_str(), name.as_str()),
            Route::Status { namespace, name } => {
                (Resource::Pods, namespace.as_str(), name.as_str())
            }
            Route::TokenRequest { namespace, name } => {
                (Resource::ServiceAccounts, namespace.as_str(), name.as_str())
            }
            _ => return Ok(()),
        };
        let is_item = matches!(
            route,
            Route::Item { .. } | Route::Status { .. } | Route::TokenRequest { .. }
        );
        let attrs = Attributes {
            verb: Self::verb(req.method, is_item, &req.query),
            group: "",
            resource: match route {
                Route::Status { .. } => "pods/status",
                Route::TokenRequest { .. } => "serviceaccounts/token",
                _ => resource.plural(),
            },
            namespace,
            name,
        };
        rbac.map_or(Err(String::new()), |r| r.authorize(&attrs))
            .map_err(|reason| {
                status::forbidden(
                    resource.plural(),
                    name,
                    &refusal(rbac, &attrs, &reason),
                    Vec::new(),
                )
            })
    }

    fn authorize_events(
        rbac: Option<&Rbac>,
        route: &EventRoute,
        req: &Incoming<'_>,
    ) -> Result<(), ApiError> {
        let (api, namespace, name) = match route {
            EventRoute::Discovery { .. } => return Ok(()),
            EventRoute::Collection { api, namespace } => {
                (*api, namespace.as_deref().unwrap_or(""), "")
            }
            EventRoute::Item {
                api,
                namespace,
                name,
            } => (*api, namespace.as_str(), name.as_str()),
        };
        let attrs = Attributes {
            verb: Self::verb(req.method, !name.is_empty(), &req.query),
            group: api.group(),
            resource: "events",
            namespace,
            name,
        };
        rbac.map_or(Err(String::new()), |r| r.authorize(&attrs))
            .map_err(|reason| {
                let qualified = match api {
                    EventApi::Core => "events".to_owned(),
                    EventApi::Events => format!("events.{}", events::GROUP),
                };
                let mut e = status::forbidden(
                    &qualified,
                    name,
                    &refusal(rbac, &attrs, &reason),
                    Vec::new(),
                );
                // Details name the group and the plain resource, as NewForbidden does.
                e.body["details"]["kind"] = json!("events");
                if api == EventApi::Events {
                    e.body["details"]["group"] = json!(events::GROUP);
                }
                e
            })
    }

    /// Serves Events (events.rs) under the lock.
    fn serve_events(
        &self,
        route: &EventRoute,
        req: &Incoming<'_>,
    ) -> Result<(u16, Value), ApiError> {
        let dry_run = req.query.get("dryRun") == Some("All");
        match (route, req.method) {
            (EventRoute::Discovery { version }, "GET") => Ok((200, events::discovery(*version))),
            (EventRoute::Collection { api, namespace }, "GET") => {
                let state = self.lock();
                let rv = state.store.resource_version();
                if req.accept.contains("as=Table") {
                    return Ok((200, state.events.table(namespace.as_deref(), rv)));
                }
                Ok((200, state.events.list(*api, namespace.as_deref(), rv)))
            }
            (
                EventRoute::Collection {
                    api,
                    namespace: Some(ns),
                },
                "POST",
            ) => {
                let body = parse_body(req.body, req.content_type)?;
                if !body.is_object() {
                    return Err(status::bad_request(
                        "the body of the request must be an object",
                    ));
                }
                let mut state = self.lock();
                let Inner { store, events, .. } = &mut *state;
                Ok((201, events.create(store, *api, ns, body, dry_run)?))
            }
            (
                EventRoute::Item {
                    api,
                    namespace,
                    name,
                },
                "GET",
            ) => Ok((200, self.lock().events.get(*api, namespace, name)?)),
            (EventRoute::Discovery { .. }, _) => Err(status::method_not_allowed()),
            _ => Err(status::method_not_allowed()),
        }
    }

    /// The `create` check of an apply that creates (patch.go: `withAuthorization` around
    /// createValidation): it names the object, and a refusal carries only the authorizer's
    /// reason, as `secrets "NAME" is forbidden: ` (the real RBAC gives none, mostly).
    fn authorize_create(
        &self,
        resource: Resource,
        namespace: &str,
        name: &str,
    ) -> Result<(), ApiError> {
        let Some(rbac) = &self.rbac else {
            return Ok(());
        };
        let attrs = Attributes {
            verb: "create",
            group: "",
            resource: resource.plural(),
            namespace,
            name,
        };
        rbac.authorize(&attrs)
            .map_err(|reason| status::forbidden(resource.plural(), name, &reason, Vec::new()))
    }

    /// The review k8s.io/kubernetes pkg/registry/authentication/selfsubjectreview answers: the
    /// caller's user info in `status`, nothing stored.
    fn self_subject_review(user: &User) -> Value {
        json!({
            "kind": "SelfSubjectReview",
            "apiVersion": "authentication.k8s.io/v1",
            "metadata": {"creationTimestamp": null},
            "status": {"userInfo": {
                "username": user.name,
                "groups": user.groups,
            }}
        })
    }

    /// A TokenRequest (pkg/registry/core/serviceaccount/storage/token.go): the body checked,
    /// the ServiceAccount read (404 as a GET of it answers when it does not exist), a token
    /// minted that authenticates as it from then on, and the request remembered for the test.
    fn token_request(
        &self,
        namespace: &str,
        name: &str,
        req: &Incoming<'_>,
    ) -> Result<(u16, Value), ApiError> {
        if req.method != "POST" {
            return Err(status::method_not_allowed());
        }
        let body = parse_body(req.body, req.content_type)?;
        let (sent, expiration, audiences) = auth::read_request(&body)?;
        let mut state = self.lock();
        if state
            .store
            .lookup(Resource::ServiceAccounts, namespace, name)
            .is_none()
        {
            return Err(status::not_found("serviceaccounts", name));
        }
        let token = format!("fake-sa-token-{}", uuid::Uuid::new_v4().simple());
        state.tokens.insert(
            token.clone(),
            Identity {
                namespace: namespace.to_owned(),
                name: name.to_owned(),
            },
        );
        state.token_requests.push(TokenRequested {
            namespace: namespace.to_owned(),
            service_account: name.to_owned(),
            expiration_seconds: sent,
            requested_by: req.user.name.clone(),
            token: token.clone(),
        });
        Ok((
            201,
            auth::answer(namespace, name, expiration, &audiences, &token),
        ))
    }

    /// The user a request is made as, and the one its credential authenticates (kube/auth.rs).
    fn authenticate(&self, headers: &axum::http::HeaderMap) -> (User, User) {
        let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
        let credential = auth::bearer(header("authorization"))
            .and_then(|token| self.lock().tokens.get(token).map(User::of))
            .unwrap_or_else(|| self.kubeconfig_user.clone());
        let acting = match header("impersonate-user").filter(|u| !u.is_empty()) {
            Some(name) => {
                let mut user = User::named(name);
                for group in headers.get_all("impersonate-group") {
                    if let Ok(group) = group.to_str()
                        && !user.groups.iter().any(|g| g == group)
                    {
                        user.groups.push(group.to_owned());
                    }
                }
                user
            }
            None => credential.clone(),
        };
        (acting, credential)
    }

    /// Whether RBAC holds this user: the ServiceAccount it was built for; any other user (a
    /// kubeconfig's admin set apart by `kubeconfig_user`) is served as an admin.
    fn held_by_rbac(&self, user: &User) -> bool {
        user.name == self.identity.username()
    }

    /// The impersonation filter's check, where RBAC holds the caller: `impersonate` on the
    /// ServiceAccount (in its namespace, by name) or on the user.
    fn authorize_impersonation(&self, credential: &User, acting: &User) -> Result<(), ApiError> {
        let Some(rbac) = self.rbac.as_ref().filter(|_| self.held_by_rbac(credential)) else {
            return Ok(());
        };
        if credential == acting {
            return Ok(());
        }
        let sa = auth::service_account_of(&acting.name);
        let attrs = match &sa {
            Some(sa) => Attributes {
                verb: "impersonate",
                group: "",
                resource: "serviceaccounts",
                namespace: &sa.namespace,
                name: &sa.name,
            },
            None => Attributes {
                verb: "impersonate",
                group: "",
                resource: "users",
                namespace: "",
                name: &acting.name,
            },
        };
        rbac.authorize(&attrs).map_err(|reason| {
            status::forbidden(
                attrs.resource,
                attrs.name,
                &rbac.refusal(&attrs, &reason),
                Vec::new(),
            )
        })
    }

    fn discovery(&self, route: &Route) -> Option<Value> {
        Some(match route {
            Route::Version => json!({
                "major": "1", "minor": "33", "gitVersion": "v1.33.0-fake",
                "gitCommit": "0000000000000000000000000000000000000000", "gitTreeState": "clean",
                "buildDate": "2025-04-23T00:00:00Z", "goVersion": "go1.24.2", "compiler": "gc",
                "platform": "linux/amd64"
            }),
            Route::Api => json!({
                "kind": "APIVersions", "versions": ["v1"],
                "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": format!("127.0.0.1:{}", self.port)}]
            }),
            Route::Apis => {
                json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": [events::api_group()]})
            }
            Route::ApiV1 => {
                let verbs = json!([
                    "create",
                    "delete",
                    "deletecollection",
                    "get",
                    "list",
                    "patch",
                    "update",
                    "watch"
                ]);
                json!({
                    "kind": "APIResourceList", "groupVersion": "v1",
                    "resources": [
                        {"name": "namespaces", "singularName": "namespace", "namespaced": false, "kind": "Namespace",
                         "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"], "shortNames": ["ns"]},
                        {"name": "secrets", "singularName": "secret", "namespaced": true, "kind": "Secret", "verbs": verbs},
                        {"name": "serviceaccounts", "singularName": "serviceaccount", "namespaced": true,
                         "kind": "ServiceAccount", "verbs": verbs, "shortNames": ["sa"]},
                        {"name": "pods", "singularName": "pod", "namespaced": true, "kind": "Pod",
                         "verbs": verbs, "shortNames": ["po"], "categories": ["all"]},
                        {"name": "pods/status", "singularName": "", "namespaced": true, "kind": "Pod",
                         "verbs": ["get", "patch", "update"]},
                        events::core_resource()
                    ]
                })
            }
            _ => return None,
        })
    }

    /// Serves one request under the lock; answers (status, body).
    fn serve(&self, route: &Route, req: &Incoming<'_>) -> Result<(u16, Value), ApiError> {
        if let Some(body) = self.discovery(route) {
            return Ok((200, body));
        }
        if let Route::Healthz = route {
            return Ok((200, Value::String("ok".into())));
        }
        if let Route::Events(events) = route {
            return self.serve_events(events, req);
        }
        if let Route::SelfSubjectReview = route {
            // Any authenticated user may ask (the system:basic-user ClusterRole).
            if req.method != "POST" {
                return Err(status::method_not_allowed());
            }
            return Ok((201, Self::self_subject_review(req.user)));
        }
        if let Route::TokenRequest { namespace, name } = route {
            return self.token_request(namespace, name, req);
        }
        let dry_run = match req.query.get("dryRun") {
            None | Some("") => false,
            Some("All") => true,
            Some(other) => {
                return Err(status::bad_request(format!(
                    "dryRun: Unsupported value: {}: supported values: \"All\"",
                    json!(other)
                )));
            }
        };
        let manager = match req.query.get("fieldManager").filter(|m| !m.is_empty()) {
            Some(m) => m.to_owned(),
            None => req
                .user_agent
                .split('/')
                .next()
                .unwrap_or_default()
                .to_owned(),
        };
        let opts = WriteOptions { manager, dry_run };
        match (route, req.method) {
            (
                Route::Collection {
                    resource,
                    namespace,
                },
                "GET",
            ) => {
                if Self::verb("GET", false, &req.query) == "watch" {
                    return Err(status::method_not_allowed());
                }
                let list_opts = ListOptions {
                    limit: match req.query.get("limit") {
                        Some(l) => Some(l.parse().map_err(|_| {
                            status::bad_request(format!("limit: invalid value {l:?}"))
                        })?),
                        None => None,
                    },
                    continue_token: req
                        .query
                        .get("continue")
                        .filter(|c| !c.is_empty())
                        .map(str::to_owned),
                    labels: LabelSelector::parse(
                        req.query.get("labelSelector").unwrap_or_default(),
                    )
                    .map_err(status::bad_request)?,
                    fields: FieldSelector::parse(
                        req.query.get("fieldSelector").unwrap_or_default(),
                        *resource,
                    )
                    .map_err(status::bad_request)?,
                };
                let mut state = self.lock();
                let list =
                    state
                        .store
                        .list(*resource, namespace.as_deref(), &list_opts, self.max_page)?;
                state
                    .store
                    .after_list(*resource, namespace.as_deref(), &list_opts, &list);
                Ok((200, list))
            }
            (
                Route::Collection {
                    resource,
                    namespace,
                },
                "POST",
            ) => {
                let body = parse_body(req.body, req.content_type)?;
                if !body.is_object() {
                    return Err(status::bad_request(
                        "the body of the request must be an object",
                    ));
                }
                let ns = namespace.clone().unwrap_or_default();
                let created = self.lock().store.create(*resource, &ns, body, &opts)?;
                Ok((201, created))
            }
            (
                Route::Item {
                    resource,
                    namespace,
                    name,
                },
                method,
            ) => self.serve_item(*resource, namespace, name, method, req, &opts),
            (Route::Status { namespace, name }, "GET") => {
                Ok((200, self.lock().store.get(Resource::Pods, namespace, name)?))
            }
            (Route::Status { namespace, name }, "PUT" | "PATCH") => {
                let merge = req.method == "PATCH";
                if merge && patch_type(req.content_type)? != PatchType::Merge {
                    return Err(status::unsupported_media_type(
                        req.content_type.unwrap_or_default(),
                    ));
                }
                let body = parse_body(req.body, req.content_type)?;
                let written = self.lock().store.write_status(
                    Resource::Pods,
                    namespace,
                    name,
                    body,
                    merge,
                    &opts,
                )?;
                Ok((200, written))
            }
            (Route::Collection { .. } | Route::Status { .. }, _) => {
                Err(status::method_not_allowed())
            }
            _ => Err(status::no_such_path()),
        }
    }

    fn serve_item(
        &self,
        resource: Resource,
        namespace: &str,
        name: &str,
        method: &str,
        req: &Incoming<'_>,
        opts: &WriteOptions,
    ) -> Result<(u16, Value), ApiError> {
        match method {
            "GET" => {
                let mut state = self.lock();
                let got = state.store.get(resource, namespace, name);
                state.store.after_get(resource, namespace, name);
                Ok((200, got?))
            }
            "PUT" => {
                let body = parse_body(req.body, req.content_type)?;
                let updated = self
                    .lock()
                    .store
                    .replace(resource, namespace, name, body, opts)?;
                Ok((200, updated))
            }
            "DELETE" => {
                let body = if req.body.is_empty() {
                    Value::Null
                } else {
                    parse_body(req.body, req.content_type)?
                };
                let dry_run = opts.dry_run
                    || body["dryRun"]
                        .as_array()
                        .is_some_and(|d| d.iter().any(|x| x == "All"));
                let deleted = self.lock().store.delete(
                    resource,
                    namespace,
                    name,
                    &body["preconditions"],
                    dry_run,
                )?;
                Ok((200, deleted))
            }
            "PATCH" => {
                let patch_type = patch_type(req.content_type)?;
                let force = req.query.get("force").map(|f| f == "true" || f == "1");
                if patch_type == PatchType::Apply {
                    if req.query.get("fieldManager").is_none_or(str::is_empty) {
                        return Err(patch_options_invalid(FieldError::Required {
                            field: "fieldManager".into(),
                            detail: "is required for apply patch".into(),
                        }));
                    }
                } else if force.is_some() {
                    return Err(patch_options_invalid(FieldError::Forbidden {
                        field: "force".into(),
                        detail: "may not be specified for non-apply patch".into(),
                    }));
                }
                let body = parse_body(req.body, req.content_type)?;
                let mut state = self.lock();
                if patch_type == PatchType::Apply {
                    state.store.apply(
                        resource,
                        namespace,
                        name,
                        body,
                        force.unwrap_or(false),
                        opts,
                        &|| self.authorize_create(resource, namespace, name),
                    )
                } else {
                    let patched = state
                        .store
                        .patch(resource, namespace, name, patch_type, &body, opts)?;
                    Ok((200, patched))
                }
            }
            _ => Err(status::method_not_allowed()),
        }
    }
}

/// A response with a JSON body, or a plain-text one when the body is a JSON string (as the
/// API server's flow control answers 429s).
fn respond(code: u16, body: &Value, retry_after: Option<u64>) -> Response {
    let (text, content_type) = match body {
        Value::String(text) => (text.clone(), "text/plain; charset=utf-8"),
        json => (json.to_string(), "application/json"),
    };
    let mut response = Response::new(Body::from(text));
    *response.status_mut() =
        StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    if let Some(seconds) = retry_after {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
    }
    response
}

/// Waits `latency` to within the OS timer's slack (tens of microseconds). tokio's timer
/// counts whole milliseconds and rounds up, so `tokio::time::sleep(5ms)` answers after about
/// 6.8 ms: a third more than asked, which every figure measured against the latency inherits.
async fn added_latency(latency: Duration) {
    let deadline = Instant::now() + latency;
    // A blocking-pool thread per request in its wait (the pool reuses idle ones). It can only
    // fail when the runtime shuts down, which drops this request anyway.
    let _ = tokio::task::spawn_blocking(move || {
        std::thread::sleep(deadline.saturating_duration_since(Instant::now()));
    })
    .await;
}

pub(crate) async fn handle(State(shared): State<Arc<Shared>>, request: Request) -> Response {
    shared.request_count.fetch_add(1, Ordering::Relaxed);
    let (parts, body) = request.into_parts();
    let body = to_bytes(body, 64 << 20).await.unwrap_or_default();
    let header = |name: header::HeaderName| parts.headers.get(name).and_then(|v| v.to_str().ok());
    let content_type = header(header::CONTENT_TYPE);
    let path = parts.uri.path();
    let method = parts.method.as_str();
    let (user, credential_user) = shared.authenticate(&parts.headers);

    if !shared.latency.is_zero() {
        added_latency(shared.latency).await;
    }
    let fault = shared
        .lock()
        .take_fault(method, path, parts.uri.query().unwrap_or_default());
    let mut lose_answer = false;
    let outcome = match fault {
        Some((latency, answer, lose)) => {
            if let Some(latency) = latency {
                tokio::time::sleep(latency).await;
            }
            lose_answer = lose;
            answer
        }
        None => None,
    };
    let (code, body_out, retry_after) = match outcome {
        Some((code, body, retry_after)) => (code, body, retry_after),
        None => {
            let req = Incoming {
                method,
                query: Query::parse(parts.uri.query().unwrap_or_default()),
                content_type,
                user_agent: header(header::USER_AGENT).unwrap_or_default(),
                accept: header(header::ACCEPT).unwrap_or_default(),
                body: &body,
                user: &user,
            };
            let route = route(path);
            let unsynced = shared.lock().rbac_unsynced();
            let result = shared
                .authorize_impersonation(&credential_user, &user)
                .and_then(|()| match &shared.rbac {
                    _ if unsynced => shared.authorize(None, &route, &req),
                    Some(rbac) if shared.held_by_rbac(&user) => {
                        shared.authorize(Some(rbac), &route, &req)
                    }
                    _ => Ok(()),
                })
                .and_then(|()| match route {
                    Route::Unknown => Err(status::no_such_path()),
                    _ => shared.serve(&route, &req),
                });
            match result {
                // Served (the store changed, or not), but the client hears nothing.
                _ if lose_answer => (0, Value::Null, None),
                Ok((code, body)) => (code, body, None),
                Err(e) => (e.code, e.body, e.retry_after),
            }
        }
    };
    if shared.log_requests {
        let recorded = Recorded {
            method: method.to_owned(),
            path: path.to_owned(),
            query: parts.uri.query().unwrap_or_default().to_owned(),
            content_type: content_type.map(str::to_owned),
            status: code,
            body: String::from_utf8_lossy(&body).into_owned(),
            user: user.name,
            credential_user: credential_user.name,
        };
        shared.lock().requests.push(recorded);
    }
    if code == 0 {
        return cut_connection();
    }
    respond(code, &body_out, retry_after)
}

/// Headers, then a body that fails: the server closes the connection mid-answer.
fn cut_connection() -> Response {
    let failing = futures_util::stream::once(async {
        Err::<axum::body::Bytes, _>(std::io::Error::other("fault: connection cut"))
    });
    Response::new(Body::from_stream(failing))
}

/// The body a fault answers: its own, or a Status like the real one for its code.
pub(crate) fn fault_answer(
    code: u16,
    body: Option<Value>,
    retry_after: Option<u64>,
) -> (u16, Value, Option<u64>) {
    match body {
        Some(body) => (code, body, retry_after),
        // Max-in-flight and priority-and-fairness refuse with plain text and a Retry-After
        // header (k8s.io/apiserver/pkg/server/filters: tooManyRequests), not a Status.
        None if code == 429 => (
            code,
            Value::String("Too many requests, please try again later.\n".into()),
            Some(retry_after.unwrap_or(1)),
        ),
        None => {
            let e = status::for_code(code, retry_after);
            (code, e.body, retry_after)
        }
    }
}

/// A 403's reason: the user the RBAC names, or, with no roles loaded yet (`None`: a server
/// just back from an outage), the default ServiceAccount's.
fn refusal(rbac: Option<&Rbac>, attrs: &Attributes<'_>, reason: &str) -> String {
    match rbac {
        Some(r) => r.refusal(attrs, reason),
        None => Rbac::refusal_as(&Identity::default().username(), attrs, reason),
    }
}
