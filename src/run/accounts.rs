//! The ServiceAccounts whose lists decide for a namespace's pods (`pods::deciding_accounts`),
//! read: the one lookup `check` and the evictions share, so that both judge a pod against the
//! same accounts, read the same way.

use std::collections::HashMap;

use k8s_openapi::api::core::v1::{Pod, ServiceAccount};
use kube::{Api, Client};

use crate::cluster::pods;
use crate::cluster::retry::RequestError;
use crate::pods::{Account, deciding_accounts};

/// What each ServiceAccount that decides for `using` says of `secret`, by name: one GET each.
/// One that can't be read is `Account::Unknown`, and `refused` is told of it (each caller logs
/// it its own way: a check once per run, the evictions per account).
pub async fn read(
    client: &Client,
    namespace: &str,
    using: &[&Pod],
    secret: &str,
    mut refused: impl FnMut(&str, &RequestError),
) -> HashMap<String, Account> {
    let names = deciding_accounts(using, secret);
    let api: Api<ServiceAccount> = Api::namespaced(client.clone(), namespace);
    let mut found = HashMap::new();
    for (name, read) in pods::service_accounts(&api, names).await {
        let account = match read {
            Ok(sa) => Account::read(sa.as_ref(), secret),
            Err(e) => {
                refused(name, &e);
                Account::Unknown
            }
        };
        found.insert(name.to_owned(), account);
    }
    found
}
