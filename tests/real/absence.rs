//! The seed's whole claim, on a real kube-apiserver and etcd: while ecr-refresh rewrites the
//! Secret, a reader never finds it missing; while the delete-and-create loop does, it does.
//!
//! Readers in 20 namespaces GET the Secret in a tight loop and WATCH it. ecr-refresh runs
//! (renewing every Secret each time) until every reader has made at least 1,000 reads: no
//! 404, no DELETED event, no uid change. Then the seed's `kubectl delete; kubectl create`
//! loop over the same namespaces, with the same readers: at least one gap, which proves the
//! readers can see one.
//!
//! It takes a turn on an installs' control plane (`common::real::installs`): a server to
//! itself, so that its load slows no other test's requests there.

use crate::real_scale as real;

use std::time::{Duration, Instant};

use crate::common::real::installs;
use real::{Readers, Real};

const NAMESPACES: usize = 20;
const READS: u64 = 1_000;

#[test]
#[ignore = "needs KUBEBUILDER_ASSETS (bash .ci/test)"]
fn readers_never_miss_the_secret_while_ecr_refresh_runs_and_do_while_delete_and_create_runs() {
    let real = Real::on(installs(), "ns", NAMESPACES);
    let created = real.ecr_refresh(&[]).output().expect("ecr-refresh runs");
    assert_eq!(
        created.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&created.stdout)
    );
    let uids = real.uids();
    assert_eq!(uids.len(), NAMESPACES, "every namespace has its Secret");

    let readers = Readers::start(real.cp.admin_kubeconfig(), &real.namespaces);
    let started = Instant::now();
    let mut runs = 0;
    while readers.min_reads() < READS {
        assert!(
            started.elapsed() < Duration::from_secs(600),
            "the readers made too few reads in 10 minutes: {:?}",
            readers.seen()
        );
        let run = real.ecr_refresh(&[]).output().expect("ecr-refresh runs");
        assert_eq!(
            run.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&run.stdout)
        );
        runs += 1;
    }
    // The last run's writes reach the watches a moment after it exits: wait for them (bounded)
    // before counting, or a slow watch would look like one that missed a write.
    let settle = Instant::now();
    while readers.seen().iter().any(|(_, s)| s.watch_events < runs)
        && settle.elapsed() < Duration::from_secs(15)
    {
        std::thread::sleep(Duration::from_millis(100));
    }
    let ours = readers.stop();
    let mut total = real::Seen::default();
    for (ns, seen) in &ours {
        total.add(seen);
        assert!(seen.reads >= READS, "{ns}: {seen:?}");
        assert_eq!(seen.gaps(), 0, "{ns}: the Secret went missing: {seen:?}");
        assert_eq!(seen.errors, 0, "{ns}: {seen:?}");
        // Every run wrote every Secret: the watch saw the writes, so it would have seen a
        // DELETED.
        assert!(seen.watch_events >= runs, "{ns}: {runs} runs, {seen:?}");
    }
    assert_eq!(real.uids(), uids, "every Secret kept its uid");
    eprintln!(
        "ecr-refresh: {runs} runs, 0 reads without a Secret in {} ({} watch events, 0 DELETED, 0 uid changes)",
        total.reads, total.watch_events
    );

    let readers = Readers::start(real.cp.admin_kubeconfig(), &real.namespaces);
    let mut passes = 0;
    while passes == 0 || readers.total().gaps() == 0 {
        assert!(
            passes < 5,
            "5 passes of delete-and-create and no reader saw a gap: {:?}",
            readers.seen()
        );
        for ns in &real.namespaces {
            real.delete_and_create(ns, &format!("pw-loop-{passes}"));
        }
        passes += 1;
    }
    let theirs = readers.stop();
    let mut total = real::Seen::default();
    for (_, seen) in &theirs {
        total.add(seen);
    }
    eprintln!(
        "delete-and-create: {passes} passes, {} reads without a Secret in {}, {} DELETED events, {} uid changes (reads {}, watch {})",
        total.not_found,
        total.reads,
        total.deleted_events,
        total.read_uid_changes + total.watch_uid_changes,
        total.read_uid_changes,
        total.watch_uid_changes
    );
    assert!(total.gaps() > 0, "{theirs:?}");
}
