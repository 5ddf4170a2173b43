//! A TrustyAIService's data on its claim survives a change of its service image: the pods roll
//! to the new image and read what the old ones stored.

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use super::release::{TIMEOUT, images, installed};
use super::service::{pvc_service, ready_pod};
use super::service_api::User;
use crate::support::cluster::tas_api;
use crate::support::wait;

/// The service container's image of `pod`.
fn service_image(pod: &Pod) -> Option<String> {
    pod.spec
        .as_ref()?
        .containers
        .iter()
        .find(|c| c.name == "trustyai-service")?
        .image
        .clone()
}

#[tokio::test]
async fn the_claims_data_is_read_back_after_the_service_image_changes() {
    let (_claim, cp) = installed(false).await;
    let client = cp.client().await;
    let ns = cp.namespace(&client, "image-change").await;
    let old = pvc_service(cp, &client, &ns, "demo").await;
    let user = User::of_demo(&client, &ns).await;
    user.upload().await;
    user.assert_spd().await;

    // The same content under another name (in a repository the chart's allowedImagePrefixes
    // let spec.image name, and not one of the Java service's): a new image for Kubernetes.
    let image = format!("quay.io/trustyai/trustyai-service-py:{ns}");
    cp.tag_image(&images().await.service.reference, &image)
        .unwrap_or_else(|e| panic!("{e}"));
    let api = tas_api(&client, &ns, "v1");
    let patch = json!({"spec": {"image": image}});
    wait::until_showing(
        "spec.image accepted",
        TIMEOUT,
        || cp.logs(),
        async || {
            api.patch("demo", &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .ok()
                .map(drop)
        },
    )
    .await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let old_name = old.metadata.name.clone().expect("a name");
    let new = ready_pod(cp, &pods, "demo", Some(&old_name)).await;
    assert_eq!(service_image(&new).as_deref(), Some(image.as_str()));

    // What the old image's service stored, read by the new one.
    user.assert_spd().await;
}
