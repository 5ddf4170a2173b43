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
use crate::support::wait;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};
use serde_json::json;
use trustyai_local_cluster::{ControlPlane, NodeKind, Options};

/// A pod that runs to completion on `cp`'s real node (a sandbox, a network namespace, mounts,
/// cgroups, log files: what the node's janitor must remove).
async fn run_a_pod(cp: &ControlPlane) {
    let client = cp.client().await;
    let image = trustyai_local_cluster::images::pause().expect("the pause image");
    cp.import_image(&image).expect("imported");
    let pod: Pod = serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "footprint"},
        "spec": {"restartPolicy": "Never", "containers": [{
            "name": "footprint", "image": image.reference, "imagePullPolicy": "Never",
            "command": ["/busybox", "true"]}]}
    }))
    .expect("a pod");
    let pods: Api<Pod> = Api::namespaced(client, "default");
    pods.create(&PostParams::default(), &pod)
        .await
        .expect("created");
    wait::until_showing(
        "the pod to succeed",
        Duration::from_secs(120),
        || cp.logs(),
        async || {
            let phase = pods.get("footprint").await.ok()?.status?.phase?;
            (phase == "Succeeded").then_some(())
        },
    )
    .await;
}

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
    run_a_pod(&real).await;
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
