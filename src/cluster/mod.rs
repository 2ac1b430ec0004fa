//! The Kubernetes side: the API client and its retry, namespace selection, object names, Events,
//! pods.

pub mod client;
pub mod events;
pub mod names;
pub mod namespaces;
pub mod pods;
pub mod retry;
pub mod selection;
