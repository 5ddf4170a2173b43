//! A pod's container really starts from an image made here.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, LogParams, PostParams};
use serde_json::json;

use crate::support::control_planes::{self, Concern};
use crate::support::wait;

const TIMEOUT: Duration = Duration::from_secs(120);

#[tokio::test]
async fn a_pod_runs_its_container_from_an_image_made_here() {
    let claim = control_planes::shared(Concern::RealNode);
    let cp = claim.control_plane();
    let client = cp.client().await;
    let ns = cp.namespace(&client, "real-pod").await;
    let image = trustyai_local_cluster::images::pause().expect("the pause image");
    cp.import_image(&image).expect("imported");
    let pod: Pod = serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "hello"},
        "spec": {
            "restartPolicy": "Never",
            "containers": [{
                "name": "hello",
                "image": image.reference,
                "imagePullPolicy": "Never",
                "command": ["/busybox", "sh", "-c", "echo hello from $(/busybox hostname)"],
            }]
        }
    }))
    .expect("a pod");
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    pods.create(&PostParams::default(), &pod)
        .await
        .expect("created");
    let phase = wait::until_showing(
        "the pod to finish",
        TIMEOUT,
        || cp.logs(),
        async || {
            let pod = pods.get("hello").await.ok()?;
            let phase = pod.status?.phase?;
            matches!(phase.as_str(), "Succeeded" | "Failed").then_some(phase)
        },
    )
    .await;
    let logs = pods
        .logs("hello", &LogParams::default())
        .await
        .expect("its log, through the kubelet");
    assert_eq!(phase, "Succeeded", "{logs}");
    assert_eq!(logs.trim(), "hello from hello");
}
