//! A pod's container really starts from an image made here.

use k8s_openapi::api::core::v1::Service;
use kube::Api;

use crate::support::control_planes::{self, Concern};
use crate::support::real_pods::run_to_completion;

#[tokio::test]
async fn a_pod_runs_its_container_from_an_image_made_here() {
    let (_claim, cp, _, ns) = control_planes::shared_namespace(Concern::RealNode, "real-pod").await;
    let script = "echo hello from $(/busybox hostname)";
    let (phase, logs) =
        run_to_completion(cp, &ns, "hello", &["/busybox", "sh", "-c", script]).await;
    assert_eq!(phase, "Succeeded", "{logs}");
    assert_eq!(logs.trim(), "hello from hello");
}

#[tokio::test]
async fn a_pod_resolves_a_service_by_its_cluster_name() {
    let (_claim, cp, client, ns) =
        control_planes::shared_namespace(Concern::RealNode, "real-dns").await;
    let kubernetes = Api::<Service>::namespaced(client, "default")
        .get("kubernetes")
        .await
        .expect("the kubernetes Service");
    let ip = kubernetes
        .spec
        .and_then(|s| s.cluster_ip)
        .expect("a ClusterIP");
    let (phase, logs) = run_to_completion(
        cp,
        &ns,
        "resolve",
        &[
            "/busybox",
            "nslookup",
            "kubernetes.default.svc.cluster.local",
        ],
    )
    .await;
    assert_eq!(phase, "Succeeded", "{logs}");
    assert!(logs.contains(&ip), "the answer is not {ip}: {logs}");
    // Short names go through the pod's search path, as in any cluster (busybox's nslookup does
    // not apply it, so read it).
    let (_, resolv) = run_to_completion(
        cp,
        &ns,
        "resolv-conf",
        &["/busybox", "cat", "/etc/resolv.conf"],
    )
    .await;
    let search = format!("search {ns}.svc.cluster.local svc.cluster.local cluster.local");
    assert!(resolv.lines().any(|l| l.trim() == search), "{resolv}");
    let nameserver = format!("nameserver {}", trustyai_local_cluster::real_node::NODE_IP);
    assert!(resolv.lines().any(|l| l.trim() == nameserver), "{resolv}");
}
