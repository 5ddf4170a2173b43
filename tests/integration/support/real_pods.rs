//! A pod that runs to completion on a real node, from the busybox image made here.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, LogParams, PostParams};
use serde_json::json;
use trustyai_local_cluster::ControlPlane;

use crate::support::wait;

const TIMEOUT: Duration = Duration::from_secs(120);

/// Creates a pod `name` in `namespace` on `cp`'s real node that runs `command` once, and waits
/// until its phase is one of `phases`; returns that phase.
async fn run(
    cp: &ControlPlane,
    namespace: &str,
    name: &str,
    command: &[&str],
    phases: &[&str],
) -> String {
    let image = trustyai_local_cluster::images::pause().expect("the busybox image");
    cp.import_image(&image).expect("imported");
    let pod: Pod = serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "restartPolicy": "Never",
            "containers": [{
                "name": name,
                "image": image.reference,
                "imagePullPolicy": "Never",
                "command": command,
            }]
        }
    }))
    .expect("a pod");
    let pods: Api<Pod> = Api::namespaced(cp.client().await, namespace);
    pods.create(&PostParams::default(), &pod)
        .await
        .expect("created");
    wait::until_showing(
        &format!("pod {name} to be {phases:?}"),
        TIMEOUT,
        || cp.logs(),
        async || {
            let phase = pods.get(name).await.ok()?.status?.phase?;
            phases.contains(&phase.as_str()).then_some(phase)
        },
    )
    .await
}

/// Starts `command` in a pod `name` and waits until it runs.
pub async fn start(cp: &ControlPlane, namespace: &str, name: &str, command: &[&str]) {
    run(cp, namespace, name, command, &["Running"]).await;
}

/// Runs `command` in a pod `name` in `namespace` on `cp`'s real node until it ends; its phase
/// and its log (read through the kubelet).
pub async fn run_to_completion(
    cp: &ControlPlane,
    namespace: &str,
    name: &str,
    command: &[&str],
) -> (String, String) {
    let phase = run(cp, namespace, name, command, &["Succeeded", "Failed"]).await;
    let pods: Api<Pod> = Api::namespaced(cp.client().await, namespace);
    let logs = pods
        .logs(name, &LogParams::default())
        .await
        .expect("its log, through the kubelet");
    (phase, logs)
}
