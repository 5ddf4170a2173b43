//! Leader election through the real API server: one leader at a time, never two; a released
//! lease is taken over at once; a crashed leader's lease after it expires.
//!
//! The timing leaves room for a loaded machine: a holder may wait for a slow lease answer up to
//! what is left of its `RENEW_DEADLINE`, and drops leadership when that passes without a
//! renewal, counted from when the renewal was sent; `LEASE_DURATION` adds a margin on top.

use crate::support;
use support::control_planes::{self, Claim, Concern};

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::jiff::SignedDuration;
use kube::Api;
use support::ControlPlane;
use support::wait;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use trustyai_operator::leader_election::{LeaderConfig, run};

const LEASE_NAME: &str = trustyai_operator::cli::default_names::LEASE;
const LEASE_DURATION: Duration = Duration::from_secs(10);
const RENEW_DEADLINE: Duration = Duration::from_secs(6);
const RETRY_PERIOD: Duration = Duration::from_secs(1);
/// The lease times are written by this process's wall clock and the takeover is decided on its
/// monotonic clock; they may drift apart a little.
const CLOCK_TOLERANCE: Duration = Duration::from_millis(100);

struct Elector {
    leading: watch::Receiver<bool>,
    stop: CancellationToken,
    task: JoinHandle<()>,
}

fn config(ns: &str, identity: &str) -> LeaderConfig {
    LeaderConfig {
        lease_name: LEASE_NAME.into(),
        namespace: ns.into(),
        identity: identity.into(),
        lease_duration: LEASE_DURATION,
        renew_deadline: RENEW_DEADLINE,
        retry_period: RETRY_PERIOD,
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

/// Waits until `e` leads; returns how long that took.
async fn wait_leading(e: &Elector, timeout: Duration) -> Duration {
    let started = Instant::now();
    wait::until("the elector to lead", timeout, async || {
        (*e.leading.borrow()).then(|| started.elapsed())
    })
    .await
}

async fn lease(leases: &Api<Lease>) -> LeaseSpec {
    leases
        .get(LEASE_NAME)
        .await
        .expect("the Lease")
        .spec
        .expect("the Lease's spec")
}

fn holder(spec: &LeaseSpec) -> Option<&str> {
    spec.holder_identity.as_deref()
}

/// Two electors in a namespace: `a`, leading, then `b`, with a watch that records whether they
/// ever led at once (see [`assert_never_two_leaders`]).
struct Pair {
    a: Elector,
    b: Elector,
    done: CancellationToken,
    overlapped: Arc<AtomicBool>,
}

/// A [`Pair`] in a new namespace `prefix-…` of this concern's control plane (shared); the claim
/// (to keep for the test) and the namespace's Leases.
async fn a_leading_then_b(prefix: &str) -> (Claim, Api<Lease>, Pair) {
    let (claim, cp, client, ns) =
        control_planes::shared_namespace(Concern::LeaderElection, prefix).await;
    let a = start(cp, &ns, "a").await;
    wait_leading(&a, Duration::from_secs(30)).await;
    let b = start(cp, &ns, "b").await;
    let done = CancellationToken::new();
    let overlapped = watch_overlap(a.leading.clone(), b.leading.clone(), done.clone());
    let leases = Api::<Lease>::namespaced(client, &ns);
    let pair = Pair {
        a,
        b,
        done,
        overlapped,
    };
    (claim, leases, pair)
}

/// Ends the overlap watch of a [`Pair`]: the two never led at once.
fn assert_never_two_leaders(done: &CancellationToken, overlapped: &AtomicBool) {
    done.cancel();
    assert!(!overlapped.load(Ordering::SeqCst), "two leaders at once");
}

async fn stop(elector: Elector, name: &str) {
    elector.stop.cancel();
    elector
        .task
        .await
        .unwrap_or_else(|e| panic!("{name} stopped: {e}"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_leader_at_a_time_while_it_renews() {
    let (_claim, leases, pair) = a_leading_then_b("leader").await;

    // b waits while a renews: for longer than a lease duration (after which b would take a
    // lease that was not renewed), a keeps the lease, renewing it, and b never leads. (Sampled
    // throughout a period: a property held, not a wait.)
    let mut renewals = Vec::new();
    let watched = Instant::now();
    while watched.elapsed() < LEASE_DURATION + 2 * RETRY_PERIOD {
        let spec = lease(&leases).await;
        assert_eq!(
            holder(&spec),
            Some("a"),
            "a lost the lease it renews after {:?}: {spec:?}",
            watched.elapsed()
        );
        assert!(!*pair.b.leading.borrow(), "b leads while a renews");
        if renewals.last() != Some(&spec.renew_time) {
            renewals.push(spec.renew_time);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        renewals.len() >= 2,
        "a did not renew the lease within {:?}: {renewals:?}",
        watched.elapsed()
    );
    assert_never_two_leaders(&pair.done, &pair.overlapped);
    stop(pair.a, "a").await;
    stop(pair.b, "b").await;
}

/// a stops and releases: b takes over within its next attempts, well before the lease would
/// have expired.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_released_lease_is_taken_at_once() {
    let (_claim, leases, pair) = a_leading_then_b("release").await;

    wait_leading(&pair.a, RENEW_DEADLINE).await;
    stop(pair.a, "a").await;
    let released = lease(&leases).await;
    assert!(
        matches!(holder(&released), None | Some("" | "b")),
        "a did not release the lease: {released:?}"
    );
    let took = wait_leading(&pair.b, 3 * LEASE_DURATION).await;
    assert!(
        took < 3 * RETRY_PERIOD,
        "takeover after a release took {took:?} (retry period {RETRY_PERIOD:?})"
    );
    assert_never_two_leaders(&pair.done, &pair.overlapped);
    stop(pair.b, "b").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_leader_is_replaced_after_its_lease_expires_never_before() {
    let (_claim, cp, client, ns) =
        control_planes::shared_namespace(Concern::LeaderElection, "crash").await;
    let leases = Api::<Lease>::namespaced(client.clone(), &ns);
    let a = start(cp, &ns, "a").await;
    wait_leading(&a, Duration::from_secs(30)).await;
    let b = start(cp, &ns, "b").await;
    tokio::time::sleep(2 * RETRY_PERIOD).await;
    // A crash: the task is gone without releasing. A renewal already on the wire may still land,
    // and a may have failed to renew for a while before: so "never before" counts from the last
    // renewal the Lease shows, which the polling below sees (it stays for a lease duration).
    a.task.abort();
    let mut last_renewal = None;
    let polled = Instant::now();
    let mut seen = None;
    let taken = wait::within(3 * LEASE_DURATION, async || {
        let spec = lease(&leases).await;
        match holder(&spec) {
            Some("a") => last_renewal = spec.renew_time.clone().or(last_renewal.take()),
            Some("b") => return Some(spec),
            other => panic!("unexpected Lease holder {other:?}: {spec:?}"),
        }
        seen = Some(spec);
        None
    })
    .await
    .unwrap_or_else(|| {
        panic!(
            "b did not take the expired lease within {:?}: {seen:?}",
            polled.elapsed()
        )
    });
    let last_renewal = last_renewal.expect("a's lease had a renewTime").0;
    let acquired = taken.acquire_time.clone().expect("b's acquireTime").0;
    let unrenewed = acquired.duration_since(last_renewal);
    let minimum = SignedDuration::try_from(LEASE_DURATION - CLOCK_TOLERANCE).expect("duration");
    assert!(
        unrenewed >= minimum,
        "b took a's lease {unrenewed:#} after its last renewal, before it expired \
         (lease duration {LEASE_DURATION:?}): {taken:?}"
    );
    wait_leading(&b, 3 * RETRY_PERIOD).await;
    eprintln!(
        "b took over {unrenewed:#} after a's last renewal, {:?} after the crash",
        polled.elapsed()
    );
    stop(b, "b").await;
}
