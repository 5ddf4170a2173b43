//! `helm upgrade` to a new operator image rolls the operator's pods while the API server keeps
//! calling the webhooks: no admission or conversion request fails.

use std::time::Instant;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use trustyai_local_cluster::images;

use super::load::AdmissionLoad;
use super::release::{NAMESPACE, SELECTOR, installed, operator_pods, upgrade, wait_for};

/// The image every container of the Deployment's pods runs, once the rollout is complete.
async fn rolled_out(deployments: &Api<Deployment>, pods: &Api<Pod>, image: &str) -> Option<()> {
    let deployment = deployments
        .list(&kube::api::ListParams::default().labels(SELECTOR))
        .await
        .ok()?
        .items
        .pop()?;
    let status = deployment.status?;
    let complete = deployment.metadata.generation == status.observed_generation
        && status.updated_replicas == Some(2)
        && status.replicas == Some(2)
        && status.available_replicas == Some(2);
    let all_new = operator_pods(pods).await?.iter().all(|p| {
        p.spec
            .as_ref()
            .is_some_and(|s| s.containers[0].image.as_deref() == Some(image))
    });
    (complete && all_new).then_some(())
}

#[tokio::test]
async fn helm_upgrade_to_a_new_image_fails_no_admission_or_conversion_request() {
    let (_claim, cp) = installed(true).await;
    let image = tokio::task::spawn_blocking(|| {
        images::operator::build_labelled(&[("org.trustyai.test/upgrade", "next")])
    })
    .await
    .expect("the build thread")
    .unwrap_or_else(|e| panic!("the next operator image: {e}"));
    cp.import_image(&image).expect("imported");
    let client = cp.client().await;
    let ns = cp.namespace(&client, "upgrade-load").await;
    super::load::store(&client, &ns).await;

    let load = AdmissionLoad::start(&client, &ns);
    let started = Instant::now();
    upgrade(cp, vec![format!("image.tag={}", image.tag())]).await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), NAMESPACE);
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    wait_for(cp, "the rollout to the new image", async || {
        rolled_out(&deployments, &pods, &image.reference).await
    })
    .await;
    let rollout = started.elapsed();
    let seen = load.finish().await;
    eprintln!(
        "helm upgrade under load: rollout {:.1}s, {} requests answered, {} failed",
        rollout.as_secs_f64(),
        seen.answered,
        seen.failures.len()
    );
    seen.assert_none_failed("the rollout");
}
