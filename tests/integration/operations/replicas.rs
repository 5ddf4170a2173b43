//! Two replicas behind one front: one leads and reconciles, both serve the webhooks, a stopped
//! leader hands over at once, and rolling restarts go without a failed request.

use crate::support;
use support::control_planes::{self, Concern};

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use kube::Client;
use kube::api::{Api, ListParams, PostParams, WatchEvent, WatchParams};
use support::cluster::tas_api;
use support::operator::{Operator, free_port};
use support::proxy::Proxy;
use support::wait;

use super::*;

/// Bound on a handover once the lease is released: the follower's next attempt comes within a
/// retry period and takes at most another, plus the polling of its `/metrics`.
const HANDOVER_AFTER_RELEASE: Duration = Duration::from_secs(3);
/// Bound from SIGTERM to the follower leading: the old leader lets its in-flight reconciles
/// finish (up to 20 s) before it releases the lease.
const HANDOVER_AFTER_SIGTERM: Duration = Duration::from_secs(30);

async fn lease_holder(client: &Client, ns: &str) -> Option<String> {
    Api::<Lease>::namespaced(client.clone(), ns)
        .get_opt(LEASE)
        .await
        .ok()??
        .spec?
        .holder_identity
}

/// Watches the Lease from its current version and records each holder with when it was seen,
/// until `until` accepts one. Returns once the watch is established, so a change made after the
/// call is never missed.
async fn watch_lease_holders(
    client: &Client,
    ns: &str,
    until: impl Fn(Option<&str>) -> bool + Send + 'static,
) -> tokio::task::JoinHandle<Vec<(Option<String>, Instant)>> {
    let leases = Api::<Lease>::namespaced(client.clone(), ns);
    let version = leases
        .get(LEASE)
        .await
        .expect("the Lease")
        .metadata
        .resource_version
        .expect("the Lease's resourceVersion");
    let params = WatchParams::default().fields(&format!("metadata.name={LEASE}"));
    let changes = leases
        .watch(&params, &version)
        .await
        .expect("watching the Lease");
    tokio::spawn(async move {
        let mut changes = std::pin::pin!(changes);
        let mut holders = Vec::new();
        while let Some(event) = changes.next().await {
            match event.expect("a Lease watch event") {
                WatchEvent::Added(lease) | WatchEvent::Modified(lease) => {
                    let holder = lease.spec.and_then(|s| s.holder_identity);
                    let done = until(holder.as_deref());
                    holders.push((holder, Instant::now()));
                    if done {
                        return holders;
                    }
                }
                WatchEvent::Deleted(_) => panic!("the Lease was deleted: {holders:?}"),
                WatchEvent::Bookmark(_) => {}
                WatchEvent::Error(e) => panic!("the Lease watch failed: {e:?} after {holders:?}"),
            }
        }
        panic!("the Lease watch ended early: {holders:?}");
    })
}

/// The leader identity embeds the process id (`<host>-<pid>-<suffix>`).
fn holds_lease(holder: Option<&str>, pid: u32) -> bool {
    holder.is_some_and(|h| h.contains(&format!("-{pid}-")))
}

// --- 1. two replicas behind one front -------------------------------------------------------

/// One of the clients that keep writing and listing through v1alpha1 (so every write needs /convert,
/// /mutate and /validate) until stopped; returns (operations, failures).
fn continuous_client(
    client: Client,
    ns: String,
    worker: usize,
    done: Arc<AtomicBool>,
    phase: Arc<std::sync::Mutex<&'static str>>,
) -> tokio::task::JoinHandle<(usize, Vec<String>)> {
    tokio::spawn(async move {
        let api = tas_api(&client, &ns, "v1alpha1");
        let started = Instant::now();
        let (mut operations, mut failures) = (0, Vec::new());
        let mut i = 0;
        while !done.load(Ordering::SeqCst) {
            i += 1;
            let name = format!("load-{worker}-{i}");
            let mut record = |what: &str, result: Result<(), kube::Error>| {
                operations += 1;
                if let Err(e) = result {
                    let phase = *phase.lock().expect("phase");
                    failures.push(format!(
                        "{:?} [{phase}] {what} {name}: {e}",
                        started.elapsed()
                    ));
                }
            };
            let created = api
                .create(&PostParams::default(), &tas("v1alpha1", &name))
                .await
                .map(|_| ());
            let ok = created.is_ok();
            record("create", created);
            if ok {
                let got = api.get(&name).await.map(|_| ());
                record("get", got);
            }
            let listed = api.list(&ListParams::default()).await.map(|_| ());
            record("list", listed);
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        (operations, failures)
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_one_leader_both_serve_handover_and_rolling_restarts_without_failures() {
    let claim = control_planes::exclusive(Concern::Operations);
    let cp = claim.control_plane();
    let client = cp.client().await;
    let ns = cp.namespace(&client, "replicas").await;
    let apps = cp.namespace(&client, "apps").await;
    let load_ns = cp.namespace(&client, "load").await;

    let ports = [(free_port(), free_port()), (free_port(), free_port())];
    // A Service in front: connections go only to replicas whose /readyz is 200.
    let proxy = Proxy::start_ready_aware(ports.to_vec()).await;
    let url = format!("https://127.0.0.1:{}", proxy.port);
    let mut flags = vec![
        "--webhook-url",
        url.as_str(),
        "--create-webhook-configurations",
    ];
    flags.extend(ELECTION_FLAGS);
    let (a, b) = (
        start(cp, &ns, ports[0].0, ports[0].1, &flags),
        start(cp, &ns, ports[1].0, ports[1].1, &flags),
    );
    let (a, b) = (ready(a).await, ready(b).await);
    // Ops ports stay with the slot across restarts; the processes change.
    let mut replicas = [Some(a), Some(b)];
    let logs = |r: &[Option<Operator>]| {
        r.iter()
            .flatten()
            .map(|o| format!("--- {} ---\n{}", o.log.display(), o.logs()))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let pid = |r: &[Option<Operator>], i: usize| r[i].as_ref().expect("running").pid();
    let one_leader = || async {
        let gauges = [
            leader_gauge(ports[0].1).await?,
            leader_gauge(ports[1].1).await?,
        ];
        match gauges {
            [1.0, 0.0] => Some(0),
            [0.0, 1.0] => Some(1),
            _ => None,
        }
    };

    wait::until_showing(
        "exactly one leader",
        TIMEOUT,
        || logs(&replicas),
        one_leader,
    )
    .await;
    // Never two leaders, while both keep trying for the lease for a few retry periods.
    let watched = Instant::now();
    while watched.elapsed() < 3 * RETRY_PERIOD {
        let gauges = [
            leader_gauge(ports[0].1).await,
            leader_gauge(ports[1].1).await,
        ];
        assert_ne!(
            gauges,
            [Some(1.0); 2],
            "two leaders at once:\n{}",
            logs(&replicas)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Exactly one leads: the leader gauge and the Lease agree.
    let leader = wait::until_showing(
        "exactly one leader",
        TIMEOUT,
        || logs(&replicas),
        one_leader,
    )
    .await;
    let follower = 1 - leader;
    let holder = lease_holder(&client, &ns).await;
    assert!(
        holds_lease(holder.as_deref(), pid(&replicas, leader)),
        "the Lease holder {holder:?} is not the replica reporting leader=1 (pid {})",
        pid(&replicas, leader)
    );

    tas_api(&client, &apps, "v1")
        .create(&PostParams::default(), &tas("v1", "first"))
        .await
        .expect("created");
    wait_reconciled(&client, &apps, "first", || logs(&replicas)).await;

    // Both replicas answer admission and conversion, over TLS chaining to the Secret's CA.
    let tls = connector(&client, &ns).await;
    for (port, _) in ports {
        let uid = format!("validate-{port}");
        let answer = post(&tls, port, "/validate", &invalid_admission_review(&uid))
            .await
            .unwrap_or_else(|e| panic!("/validate on {port}: {e}"));
        assert_denied(&answer, &uid);
        let uid = format!("convert-{port}");
        let answer = post(&tls, port, "/convert", &conversion_review(&uid))
            .await
            .unwrap_or_else(|e| panic!("/convert on {port}: {e}"));
        assert_converted(&answer, &uid);
    }

    // From here on a client keeps writing and listing through the front.
    let done = Arc::new(AtomicBool::new(false));
    let phase = Arc::new(std::sync::Mutex::new("before the leader stops"));
    let load: Vec<_> = (0..2)
        .map(|worker| {
            continuous_client(
                client.clone(),
                load_ns.clone(),
                worker,
                done.clone(),
                phase.clone(),
            )
        })
        .collect();
    let set_phase = |p: &'static str| *phase.lock().expect("phase") = p;
    tokio::time::sleep(Duration::from_secs(2)).await;

    // Stop the leader: it finishes its in-flight reconciles (the clients keep it busy), then
    // releases the lease, and the follower takes it at once rather than after it expires.
    set_phase("stopping the leader");
    let follower_pid = pid(&replicas, follower);
    let lease_changes = watch_lease_holders(&client, &ns, move |holder| {
        holds_lease(holder, follower_pid)
    })
    .await;
    let signalled = Instant::now();
    let stopping = tokio::spawn(stop(replicas[leader].take().expect("the leader")));
    let leading_at = wait::until_showing(
        "the follower takes over",
        TIMEOUT,
        || logs(&replicas),
        || async { (leader_gauge(ports[follower].1).await? == 1.0).then(Instant::now) },
    )
    .await;
    stopping.await.expect("stopping the leader");
    let holders = tokio::time::timeout(TIMEOUT, lease_changes)
        .await
        .expect("the Lease watch ends once the follower holds it")
        .expect("the Lease watch");
    let released_at = holders
        .iter()
        .find(|(holder, _)| holder.as_deref().is_none_or(str::is_empty))
        .map(|(_, seen)| *seen)
        .unwrap_or_else(|| {
            panic!(
                "the follower took the lease without a release (it expired?): {holders:?}\n{}",
                logs(&replicas)
            )
        });
    let after_sigterm = leading_at - signalled;
    let after_release = leading_at.saturating_duration_since(released_at);
    eprintln!(
        "handover {after_release:?} after the release, {after_sigterm:?} after SIGTERM to the leader"
    );
    assert!(
        after_release < HANDOVER_AFTER_RELEASE,
        "the follower led {after_release:?} after the lease was released:\n{}",
        logs(&replicas)
    );
    assert!(
        after_sigterm < HANDOVER_AFTER_SIGTERM,
        "the follower led {after_sigterm:?} after SIGTERM to the leader:\n{}",
        logs(&replicas)
    );
    let holder = lease_holder(&client, &ns).await;
    assert!(
        holds_lease(holder.as_deref(), pid(&replicas, follower)),
        "Lease holder {holder:?} after the handover"
    );
    tas_api(&client, &apps, "v1alpha1")
        .create(&PostParams::default(), &tas("v1alpha1", "after-handover"))
        .await
        .expect("created after the handover");
    let created = Instant::now();
    wait_reconciled(&client, &apps, "after-handover", || logs(&replicas)).await;
    eprintln!(
        "after-handover reconciled {:?} after its creation",
        created.elapsed()
    );

    // Rolling restart: the stopped replica comes back on its ports, then the other one is
    // replaced (another handover).
    set_phase("restarting the first replica");
    let (webhook, ops) = ports[leader];
    replicas[leader] = Some(ready(start(cp, &ns, webhook, ops, &flags)).await);
    set_phase("first replica restarted");
    tokio::time::sleep(Duration::from_secs(1)).await;
    set_phase("stopping the second replica");
    stop(replicas[follower].take().expect("the follower")).await;
    set_phase("restarting the second replica");
    let (webhook, ops) = ports[follower];
    replicas[follower] = Some(ready(start(cp, &ns, webhook, ops, &flags)).await);
    set_phase("after the restarts");
    tokio::time::sleep(Duration::from_secs(2)).await;

    done.store(true, Ordering::SeqCst);
    let (mut operations, mut failures) = (0, Vec::new());
    for worker in load {
        let (n, failed) = worker.await.expect("a client task");
        operations += n;
        failures.extend(failed);
    }
    eprintln!(
        "continuous client: {operations} operations, {} failed",
        failures.len()
    );
    assert!(operations > 30, "only {operations} operations");
    assert!(
        failures.is_empty(),
        "{} of {operations} operations failed:\n{}\n{}",
        failures.len(),
        failures.join("\n"),
        logs(&replicas)
    );

    // After the rolling restart: still exactly one leader, and it reconciles.
    let leader = wait::until_showing(
        "exactly one leader after the restarts",
        TIMEOUT,
        || logs(&replicas),
        one_leader,
    )
    .await;
    let holder = lease_holder(&client, &ns).await;
    assert!(
        holds_lease(holder.as_deref(), pid(&replicas, leader)),
        "{holder:?}"
    );
    tas_api(&client, &apps, "v1")
        .create(&PostParams::default(), &tas("v1", "after-restarts"))
        .await
        .expect("created after the restarts");
    wait_reconciled(&client, &apps, "after-restarts", || logs(&replicas)).await;

    for replica in replicas.into_iter().flatten() {
        stop(replica).await;
    }
    drop(proxy);
}
