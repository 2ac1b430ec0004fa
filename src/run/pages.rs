//! The namespace driver of both modes: every selected namespace, ECR_REFRESH_CONCURRENCY at a
//! time, as the list pages arrive (`reads`: with what the lists showed of it). Once the run is stopping nothing new starts, and what is in
//! flight when the shutdown grace runs out is abandoned.

use std::future::Future;

use futures::channel::mpsc;
use futures::{SinkExt, StreamExt};
use tokio::sync::watch;
use tracing::{error, warn};

use super::stop::Stop;
use crate::cluster::reads::{Reads, Work};

/// What became of one selected namespace.
pub enum Visit<T> {
    /// The mode's work for it ran to its end.
    Done(T),
    /// Never started: the run was stopping.
    Undone(String),
    /// In flight when the shutdown grace ran out.
    Abandoned(String),
}

/// How a mode runs its namespaces.
#[derive(Clone, Copy)]
pub struct Driver<'a> {
    pub stop: &'a Stop,
    /// ECR_REFRESH_CONCURRENCY.
    pub concurrency: usize,
    /// How the log says what was not done to later pages: "refreshed", "checked".
    pub done: &'static str,
}

/// Every namespace of `first` and the batches after it, through `visit`, each result handed to
/// `record` into `recorded`. After `visit`'s first error no namespace is handed out and the list
/// is read no further (a page being read is given up), but the visits under way are seen through:
/// one that ends is recorded (a namespace half-way through its writes is never cut off, and what
/// it wrote is reported), one that ends in an error is not; then the first error is returned.
/// Returns whether the namespace list was incomplete.
pub async fn each_namespace<T, E, R, F, Fut>(
    mut pages: Reads<'_>,
    first: Vec<Work>,
    driver: Driver<'_>,
    visit: F,
    mut record: impl FnMut(&mut R, Visit<T>),
    recorded: &mut R,
) -> Result<bool, E>
where
    F: Fn(Work) -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    let Driver {
        stop,
        concurrency,
        done,
    } = driver;
    let (mut tx, rx) = mpsc::channel::<Work>(concurrency);
    // Set by the first error of `visit`: no namespace is handed out after it.
    let (failed, mut failed_seen) = watch::channel(false);
    let failed = &failed;

    let producer = async move {
        let mut undone: Vec<String> = Vec::new();
        let mut listing_incomplete = false;
        let mut page = Some(first);
        while let Some(candidates) = page.take() {
            for work in candidates {
                if *failed.borrow() {
                    break;
                }
                if stop.reason().is_some() {
                    undone.push(work.candidate.name);
                } else {
                    let name = work.candidate.name.clone();
                    if let Err(e) = tx.send(work).await {
                        // The consumer is gone, which a panic would do: count it anyway.
                        error!(error = %e, "namespace queue closed");
                        undone.push(name);
                    }
                }
            }
            if *failed.borrow() {
                break;
            }
            if let Some(reason) = stop.reason() {
                // Namespaces the list path knows and has not handed out are undone.
                undone.extend(pages.left());
                if pages.has_more() {
                    listing_incomplete = true;
                    warn!(reason, "the namespace list was not read to its end");
                }
                break;
            }
            let next = tokio::select! {
                next = pages.next() => next,
                () = stop.abandoned() => {
                    warn!("the namespace list was not read to its end: the shutdown grace ran out");
                    undone.extend(pages.left());
                    listing_incomplete = true;
                    break;
                }
                Ok(_) = failed_seen.wait_for(|failed| *failed) => break,
            };
            match next {
                None => {}
                Some(Ok(next)) => page = Some(next),
                Some(Err(e)) => {
                    error!(error = %e, "namespace list stopped: namespaces on later pages were not {done}");
                    listing_incomplete = true;
                }
            }
        }
        drop(tx);
        Ok((undone, listing_incomplete || pages.incomplete()))
    };

    let record_ = &mut record;
    let recorded_ = &mut *recorded;
    let consumer = async move {
        let mut visits = rx
            .map(|work| async {
                if *failed.borrow() {
                    return Ok(None);
                }
                if stop.reason().is_some() {
                    return Ok(Some(Visit::Undone(work.candidate.name)));
                }
                let name = work.candidate.name.clone();
                tokio::select! {
                    done = visit(work) => done.map(|done| Some(Visit::Done(done))),
                    () = stop.abandoned() => Ok(Some(Visit::Abandoned(name))),
                }
            })
            .buffer_unordered(concurrency);
        let mut error = None;
        while let Some(visited) = visits.next().await {
            match visited {
                Ok(Some(visit)) => record_(recorded_, visit),
                Ok(None) => {}
                Err(e) => {
                    failed.send_replace(true);
                    error.get_or_insert(e);
                }
            }
        }
        error.map_or(Ok(()), Err)
    };

    let ((undone, listing_incomplete), ()) = futures::try_join!(producer, consumer)?;
    for namespace in undone {
        record(recorded, Visit::Undone(namespace));
    }
    Ok(listing_incomplete)
}
