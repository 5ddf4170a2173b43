//! A pod's container really starts from an image made here.

use k8s_openapi::api::core::v1::Service;
use kube::Api;

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

#[tokio::test]
async fn a_pod_resolves_a_service_by_its_cluster_name() {
    let claim = control_planes::shared(Concern::RealNode);
    let cp = claim.control_plane();
    let client = cp.client().await;
    let ns = cp.namespace(&client, "real-dns").await;
    let kubernetes = Api::<Service>::namespaced(client, "default")
        .get("kubernetes")
        .await
        .expect("the kubernetes Service");
    let ip = kubernetes
        .spec
        .and_then(|s| s.cluster_ip)
        .expect("a ClusterIP");
    // The short name goes through the pod's search path, as in any cluster.
    for (pod, name) in [
        ("resolve-full", "kubernetes.default.svc.cluster.local"),
        ("resolve-short", "kubernetes.default"),
    ] {
        let (phase, logs) = run_to_completion(cp, &ns, pod, &["/busybox", "nslookup", name]).await;
        assert_eq!(phase, "Succeeded", "{name}: {logs}");
        assert!(logs.contains(&ip), "{name} is not {ip}: {logs}");
    }
}
