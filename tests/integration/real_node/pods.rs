//! A pod's container really starts from an image made here.

use crate::support::control_planes::{self, Concern};
use crate::support::real_pods::run_to_completion;

#[tokio::test]
async fn a_pod_runs_its_container_from_an_image_made_here() {
    let claim = control_planes::shared(Concern::RealNode);
    let cp = claim.control_plane();
    let client = cp.client().await;
    let ns = cp.namespace(&client, "real-pod").await;
    let script = "echo hello from $(/busybox hostname)";
    let (phase, logs) =
        run_to_completion(cp, &ns, "hello", &["/busybox", "sh", "-c", script]).await;
    assert_eq!(phase, "Succeeded", "{logs}");
    assert_eq!(logs.trim(), "hello from hello");
}
