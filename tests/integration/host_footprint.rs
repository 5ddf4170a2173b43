//! The control planes leave the host as they found it: nothing is written outside their working
//! folders (the controller-manager's flex-volume folder, kubectl's cache, ...), what was there
//! before is unchanged, and a real node's addresses, bridge, routes, rules, kernel settings,
//! mounts and cgroups are gone once it has stopped. The snapshot is taken before the first
//! control plane of this binary starts, so every concern that ran before this test is held to
//! it too.

use std::time::Duration;

use crate::support::control_planes::{self, Concern};
use crate::support::host_footprint::{Snapshot, before_any_control_plane};
use crate::support::operator::Operator;
use crate::support::real_pods::{self, run_to_completion};
use trustyai_local_cluster::{ControlPlane, NodeKind, Options};

#[tokio::test]
async fn the_control_planes_leave_the_host_as_they_found_it() {
    let before = before_any_control_plane().clone();
    // A control plane of its own, used as every test uses one: kubectl, a client, an operator.
    let claim = control_planes::exclusive(Concern::HostFootprint);
    let cp = claim.control_plane();
    let (ok, out, err) = cp.kubectl(&["get", "namespaces"], None);
    assert!(ok, "kubectl get namespaces: {out}{err}");
    let client = cp.client().await;
    let ns = cp.namespace(&client, "footprint").await;
    let mut operator = Operator::start(cp, &ns, &["--create-webhook-configurations"]);
    operator.wait_ready(Duration::from_secs(60));
    assert!(operator.stop().success(), "{}", operator.logs());

    // A real node of its own, with a pod, stopped; its janitor holds the machine's real-node
    // lock until it has undone every host change.
    let real = std::thread::spawn(|| {
        ControlPlane::start_with(Options {
            node: NodeKind::Real,
            ..Options::default()
        })
    })
    .join()
    .expect("the start thread")
    .unwrap_or_else(|e| panic!("a real node: {e}"));
    // A sandbox, a network namespace, mounts, cgroups, log files: what the janitor must remove.
    let (phase, logs) =
        run_to_completion(&real, "default", "footprint", &["/busybox", "true"]).await;
    assert_eq!(phase, "Succeeded", "{logs}");
    // And one still running when the node stops: its containers, network namespace and veth
    // must go too.
    real_pods::start(&real, "default", "running", &["/busybox", "sleep", "3600"]).await;
    real.stop();
    trustyai_local_cluster::real_node::wait_until_released(Duration::from_secs(120))
        .expect("the real node's janitor finished");

    let differences = before.differences(&Snapshot::take());
    assert!(
        differences.is_empty(),
        "written outside the working folders:\n{}",
        differences.join("\n")
    );
}
