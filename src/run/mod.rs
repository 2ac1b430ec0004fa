//! What the two modes share: the stop, the namespace driver over the list pages
//! (`cluster::reads` reads them), the fleet's driver over the clusters, the ServiceAccounts a
//! namespace's pods are judged against, and the end of a run.

pub mod accounts;
pub mod end;
pub mod fleet;
pub mod pages;
pub mod stop;
