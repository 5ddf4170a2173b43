//! The control planes leave the host as they found it: nothing is written outside their working
//! folders (the controller-manager's flex-volume folder, kubectl's cache, ...), and what was
//! there before is unchanged. The snapshot is taken before the first control plane of this
//! binary starts, so every concern that ran before this test is held to it too.

use std::time::Duration;

use crate::support::control_planes::{self, Concern};
use crate::support::host_footprint::{Snapshot, before_any_control_plane};
use crate::support::operator::Operator;

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

    let differences = before.differences(&Snapshot::take());
    assert!(
        differences.is_empty(),
        "written outside the working folders:\n{}",
        differences.join("\n")
    );
}
