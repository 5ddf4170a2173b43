#![allow(clippy::expect_used)] // a test fails loudly on unexpected data
//! Leader election through the real API server: one leader at a time, never two; a released
//! lease is taken over at once; a crashed leader's lease after it expires.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use support::ControlPlane;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use trustyai_operator::leader::{LeaderConfig, run};

struct Elector {
    leading: watch::Receiver<bool>,
    stop: CancellationToken,
    task: JoinHandle<()>,
}

fn config(ns: &str, identity: &str) -> LeaderConfig {
    LeaderConfig {
        lease_name: "trustyai-operator-leader".into(),
        namespace: ns.into(),
        identity: identity.into(),
        lease_duration: Duration::from_secs(3),
        renew_deadline: Duration::from_secs(2),
        retry_period: Duration::from_millis(300),
    }
}

async fn start(cp: &ControlPlane, ns: &str, identity: &str) -> Elector {
    let client = cp.client().await;
    let (tx, rx) = watch::channel(false);
    let stop = CancellationToken::new();
    let cfg = config(ns, identity);
    let token = stop.clone();
    let task = tokio::spawn(async move {
        run(client, cfg, tx, token).await.expect("valid timing");
    });
    Elector {
        leading: rx,
        stop,
        task,
    }
}

/// Samples both electors every 5 ms and records whether they ever led at once.
fn watch_overlap(
    a: watch::Receiver<bool>,
    b: watch::Receiver<bool>,
    done: CancellationToken,
) -> Arc<AtomicBool> {
    let overlapped = Arc::new(AtomicBool::new(false));
    let flag = overlapped.clone();
    tokio::spawn(async move {
        while !done.is_cancelled() {
            if *a.borrow() && *b.borrow() {
                flag.store(true, Ordering::SeqCst);
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    });
    overlapped
}

async fn wait_leading(e: &Elector, timeout: Duration) -> Duration {
    let started = Instant::now();
    while started.elapsed() < timeout {
        if *e.leading.borrow() {
            return started.elapsed();
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("did not become leader within {timeout:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_leader_at_a_time_and_a_released_lease_is_taken_at_once() {
    let cp = ControlPlane::shared();
    let client = cp.client().await;
    let ns = cp.namespace(&client, "leader").await;
    let a = start(cp, &ns, "a").await;
    wait_leading(&a, Duration::from_secs(10)).await;
    let b = start(cp, &ns, "b").await;
    let done = CancellationToken::new();
    let overlapped = watch_overlap(a.leading.clone(), b.leading.clone(), done.clone());

    // b waits while a renews.
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(
        *a.leading.borrow() && !*b.leading.borrow(),
        "a keeps leading while it renews"
    );

    // a stops and releases: b takes over well before the lease would have expired.
    a.stop.cancel();
    a.task.await.expect("a stopped");
    let took = wait_leading(&b, Duration::from_secs(10)).await;
    assert!(
        took < Duration::from_secs(3),
        "takeover after a release took {took:?}"
    );
    done.cancel();
    assert!(!overlapped.load(Ordering::SeqCst), "two leaders at once");
    b.stop.cancel();
    b.task.await.expect("b stopped");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_leader_is_replaced_after_its_lease_expires_never_before() {
    let cp = ControlPlane::shared();
    let client = cp.client().await;
    let ns = cp.namespace(&client, "crash").await;
    let a = start(cp, &ns, "a").await;
    wait_leading(&a, Duration::from_secs(10)).await;
    let b = start(cp, &ns, "b").await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    // A crash: the task is gone without releasing.
    a.task.abort();
    let crashed_at = Instant::now();
    let took = wait_leading(&b, Duration::from_secs(15)).await;
    let since_crash = crashed_at.elapsed();
    assert!(
        since_crash >= Duration::from_secs(2),
        "b took an unexpired lease after {since_crash:?} ({took:?})"
    );
    b.stop.cancel();
    b.task.await.expect("b stopped");
}
