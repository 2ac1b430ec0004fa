//! The fake cluster's own tests: the fake API server and fake ECR answer as the real ones
//! do, to the clients that talk to them.

#[path = "../common/mod.rs"]
mod common;

// The same requests to the fake and to a real kube-apiserver, answers compared.
mod conformance;
// The fake ECR, driven by the real aws-sdk-ecr client.
mod ecr;
// Events: one store under core/v1 and events.k8s.io/v1, creates refused as the real server does.
mod events;
// The fake API server answers as the real one does.
mod kube_api;
// kube-rs, as ecr-refresh uses it, against the fake.
mod kube_client;
// kubectl against the fake: get, and create|apply loops.
mod kubectl;
// The fake STS, read by aws-config's own AssumeRole provider.
mod sts;
// Who a request is made as: TokenRequest tokens, Impersonate-User, the kubeconfig's user.
mod tokens;
