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
use support::ControlPlane;
use support::cluster::tas_api;
use support::operator::{Operator, free_port};
use support::proxy::Proxy;
use support::wait;
use tokio_rustls::TlsConnector;

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

/// The operator's replicas, each on ports of its own: a replica's ports stay with its slot
/// across restarts, the processes change.
struct Replicas<'a> {
    cp: &'a ControlPlane,
    ns: &'a str,
    ports: [(u16, u16); 2],
    flags: &'a [&'a str],
    running: [Option<Operator>; 2],
}

impl<'a> Replicas<'a> {
    /// Starts both replicas and waits until both are ready.
    async fn start(
        cp: &'a ControlPlane,
        ns: &'a str,
        ports: [(u16, u16); 2],
        flags: &'a [&'a str],
    ) -> Replicas<'a> {
        let (a, b) = (
            start(cp, ns, ports[0].0, ports[0].1, flags),
            start(cp, ns, ports[1].0, ports[1].1, flags),
        );
        let (a, b) = (ready(a).await, ready(b).await);
        Replicas {
            cp,
            ns,
            ports,
            flags,
            running: [Some(a), Some(b)],
        }
    }

    /// The logs of the running replicas, for a failure's message.
    fn logs(&self) -> String {
        self.running
            .iter()
            .flatten()
            .map(|o| format!("--- {} ---\n{}", o.log.display(), o.logs()))
            .collect::<Vec<_>>()
            .join("\n")
    }

    fn pid(&self, i: usize) -> u32 {
        self.running[i].as_ref().expect("running").pid()
    }

    /// The one replica whose leader gauge is 1 while the other's is 0, if so.
    async fn leader(&self) -> Option<usize> {
        let gauges = [
            leader_gauge(self.ports[0].1).await?,
            leader_gauge(self.ports[1].1).await?,
        ];
        match gauges {
            [1.0, 0.0] => Some(0),
            [0.0, 1.0] => Some(1),
            _ => None,
        }
    }

    /// Samples both leader gauges for `period` (a property held throughout, not a wait): never
    /// both 1.
    async fn assert_never_two_leaders(&self, period: Duration) {
        let watched = Instant::now();
        while watched.elapsed() < period {
            let gauges = [
                leader_gauge(self.ports[0].1).await,
                leader_gauge(self.ports[1].1).await,
            ];
            assert_ne!(
                gauges,
                [Some(1.0); 2],
                "two leaders at once:\n{}",
                self.logs()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    async fn wait_for_one_leader(&self, what: &str) -> usize {
        wait::until_showing(what, TIMEOUT, || self.logs(), || self.leader()).await
    }

    /// The replica `i`, out of its slot (to be stopped).
    fn take(&mut self, i: usize) -> Operator {
        self.running[i].take().expect("a running replica")
    }

    /// Starts the replica `i` again, on its ports, and waits until it is ready.
    async fn restart(&mut self, i: usize) {
        let (webhook, ops) = self.ports[i];
        self.running[i] = Some(ready(start(self.cp, self.ns, webhook, ops, self.flags)).await);
    }

    async fn stop_all(self) {
        for replica in self.running.into_iter().flatten() {
            stop(replica).await;
        }
    }
}

/// Clients that keep writing and listing through v1alpha1 (so every write needs /convert,
/// /mutate and /validate) until stopped; each failure is recorded with the test's phase.
struct Load {
    done: Arc<AtomicBool>,
    phase: Arc<std::sync::Mutex<&'static str>>,
    workers: Vec<tokio::task::JoinHandle<(usize, Vec<String>)>>,
}

impl Load {
    fn start(client: &Client, ns: &str, phase: &'static str) -> Load {
        let done = Arc::new(AtomicBool::new(false));
        let phase = Arc::new(std::sync::Mutex::new(phase));
        let workers = (0..2)
            .map(|worker| {
                continuous_client(
                    client.clone(),
                    ns.to_owned(),
                    worker,
                    done.clone(),
                    phase.clone(),
                )
            })
            .collect();
        Load {
            done,
            phase,
            workers,
        }
    }

    /// Names what the test does now, for the failures that happen meanwhile.
    fn phase(&self, phase: &'static str) {
        *self.phase.lock().expect("phase") = phase;
    }

    /// Stops the clients: they made a fair number of operations, and none failed.
    async fn assert_no_operation_failed(self, replicas: &Replicas<'_>) {
        self.done.store(true, Ordering::SeqCst);
        let (mut operations, mut failures) = (0, Vec::new());
        for worker in self.workers {
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
            replicas.logs()
        );
    }
}

/// One of the [`Load`]'s clients; returns (operations, failures).
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

/// Both replicas answer admission and conversion, over TLS chaining to the Secret's CA.
async fn assert_both_answer(tls: &TlsConnector, ports: [(u16, u16); 2]) {
    for (port, _) in ports {
        assert_validate_denies(tls, port, &format!("validate-{port}")).await;
        assert_convert_converts(tls, port, &format!("convert-{port}")).await;
    }
}

/// The Lease names the replica of process `pid` as its holder.
async fn assert_holds_the_lease(client: &Client, ns: &str, pid: u32, when: &str) {
    let holder = lease_holder(client, ns).await;
    assert!(
        holds_lease(holder.as_deref(), pid),
        "the Lease holder {holder:?} is not the replica of pid {pid} {when}"
    );
}

/// Stops the `leader` and waits until the other replica leads; returns how long that took
/// after the old leader released the lease and after its SIGTERM.
async fn hand_over(
    replicas: &mut Replicas<'_>,
    client: &Client,
    leader: usize,
) -> (Duration, Duration) {
    let follower = 1 - leader;
    let follower_pid = replicas.pid(follower);
    let lease_changes = watch_lease_holders(client, replicas.ns, move |holder| {
        holds_lease(holder, follower_pid)
    })
    .await;
    let signalled = Instant::now();
    let stopping = tokio::spawn(stop(replicas.take(leader)));
    let follower_ops = replicas.ports[follower].1;
    let leading_at = wait::until_showing(
        "the follower takes over",
        TIMEOUT,
        || replicas.logs(),
        || async { (leader_gauge(follower_ops).await? == 1.0).then(Instant::now) },
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
                replicas.logs()
            )
        });
    (
        leading_at.saturating_duration_since(released_at),
        leading_at - signalled,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_keep_one_leader_at_a_time_without_a_failed_request() {
    let (_claim, cp, client, ns) =
        control_planes::exclusive_namespace(Concern::Operations, "replicas").await;
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
    let mut replicas = Replicas::start(cp, &ns, ports, &flags).await;

    replicas.wait_for_one_leader("exactly one leader").await;
    // Never two leaders, while both keep trying for the lease for a few retry periods.
    replicas.assert_never_two_leaders(3 * RETRY_PERIOD).await;
    // Exactly one leads: the leader gauge and the Lease agree; it reconciles.
    let leader = replicas.wait_for_one_leader("exactly one leader").await;
    let follower = 1 - leader;
    assert_holds_the_lease(&client, &ns, replicas.pid(leader), "reporting leader=1").await;
    create_reconciled(&client, &apps, "v1", "first", || replicas.logs()).await;
    assert_both_answer(&connector(&client, &ns).await, ports).await;

    // From here on clients keep writing and listing through the front.
    let load = Load::start(&client, &load_ns, "before the leader stops");
    tokio::time::sleep(Duration::from_secs(2)).await;

    // Stop the leader: it finishes its in-flight reconciles (the clients keep it busy), then
    // releases the lease, and the follower takes it at once rather than after it expires.
    load.phase("stopping the leader");
    let (after_release, after_sigterm) = hand_over(&mut replicas, &client, leader).await;
    eprintln!(
        "handover {after_release:?} after the release, {after_sigterm:?} after SIGTERM to the leader"
    );
    assert!(
        after_release < HANDOVER_AFTER_RELEASE,
        "the follower led {after_release:?} after the lease was released:\n{}",
        replicas.logs()
    );
    assert!(
        after_sigterm < HANDOVER_AFTER_SIGTERM,
        "the follower led {after_sigterm:?} after SIGTERM to the leader:\n{}",
        replicas.logs()
    );
    assert_holds_the_lease(&client, &ns, replicas.pid(follower), "after the handover").await;
    let took = create_reconciled(&client, &apps, "v1alpha1", "after-handover", || {
        replicas.logs()
    })
    .await;
    eprintln!("after-handover reconciled {took:?} after its creation");

    // Rolling restart: the stopped replica comes back on its ports, then the other one is
    // replaced (another handover).
    load.phase("restarting the first replica");
    replicas.restart(leader).await;
    load.phase("first replica restarted");
    tokio::time::sleep(Duration::from_secs(1)).await;
    load.phase("stopping the second replica");
    stop(replicas.take(follower)).await;
    load.phase("restarting the second replica");
    replicas.restart(follower).await;
    load.phase("after the restarts");
    tokio::time::sleep(Duration::from_secs(2)).await;

    load.assert_no_operation_failed(&replicas).await;

    // After the rolling restart: still exactly one leader, and it reconciles.
    let leader = replicas
        .wait_for_one_leader("exactly one leader after the restarts")
        .await;
    assert_holds_the_lease(&client, &ns, replicas.pid(leader), "after the restarts").await;
    create_reconciled(&client, &apps, "v1", "after-restarts", || replicas.logs()).await;

    replicas.stop_all().await;
    drop(proxy);
}
