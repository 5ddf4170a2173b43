//! The Go operator's Deployment adopted in place, keeping its (immutable) selector.

use k8s_openapi::api::apps::v1::Deployment;
use kube::ResourceExt;
use kube::api::PostParams;
use serde_json::json;

use crate::reconcile::env::{DEFAULT_IMAGE, Env, note, service_container};

#[tokio::test]
async fn a_go_operator_deployment_is_adopted_in_place_keeping_its_selector() {
    let env = Env::shared().await;
    let ns = env.namespace("adopt").await;
    // What the Go operator made: its version in the (immutable) selector.
    let labels = json!({
        "app": "tas", "app.kubernetes.io/instance": "tas", "app.kubernetes.io/name": "tas",
        "app.kubernetes.io/part-of": "trustyai", "app.kubernetes.io/version": "1.39.0"
    });
    let go: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "tas", "labels": labels},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "trustyai-service", "image": "quay.io/trustyai/trustyai-service:go"}]}
            }
        }
    }))
    .expect("a Deployment");
    let deployments = env.api::<Deployment>(&ns);
    let old = deployments
        .create(&PostParams::default(), &go)
        .await
        .expect("the Go operator's Deployment")
        .uid();

    env.ready_pvc_instance(&ns, "tas").await;
    let now = deployments.get("tas").await.expect("Deployment");
    // Not deleted and created again: the service keeps running through the switch.
    assert_eq!(now.uid(), old, "adopted in place");
    let selector = now.spec.selector.match_labels.clone().expect("selector");
    assert_eq!(
        selector
            .get("app.kubernetes.io/version")
            .map(String::as_str),
        Some("1.39.0"),
        "the live selector is kept: {selector:?}"
    );
    let pod_labels = now
        .spec
        .template
        .metadata
        .as_ref()
        .and_then(|m| m.labels.clone())
        .unwrap_or_default();
    assert!(
        selector.iter().all(|(k, v)| pod_labels.get(k) == Some(v)),
        "the pods match the kept selector: {pod_labels:?}"
    );
    assert_eq!(
        service_container(&now).image.as_deref(),
        Some(DEFAULT_IMAGE)
    );
    let created = env.wait_event(&ns, "tas", "PVCCreated").await;
    let said = note(&created[0]);
    assert!(
        said.contains("Adopted (it existed): Deployment tas"),
        "{said}"
    );
    assert!(
        env.events(&ns, "tas", "DeploymentRecreated")
            .await
            .is_empty()
    );
}
