//! The Kubernetes side: the API client and its retry, the one pager of every paged list,
//! namespace selection, the lists of one name in every namespace and how a run reads its Secrets
//! through them (`reads`), object names, Events, pods.

pub mod by_name;
pub mod client;
pub mod events;
pub mod names;
pub mod namespaces;
pub mod pager;
pub mod pods;
pub mod reads;
pub mod retry;
pub mod selection;
pub mod whoami;
