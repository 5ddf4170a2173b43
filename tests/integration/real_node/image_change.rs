//! A TrustyAIService's data on its claim survives a change of its service image: the pods roll
//! to the new image and read what the old ones stored.

use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;

use super::release::{images, installed_namespace, uninstall, upgrade, wait_for};
use super::service::{create_service, ready_pod};
use super::service_api::uploaded_pvc_demo;

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
    // The release's service image changes for every instance: nobody else may run meanwhile.
    let (_claim, cp, client, ns) = installed_namespace(true, "image-change").await;
    let (old, user) = uploaded_pvc_demo(cp, &client, &ns).await;
    user.assert_spd().await;

    // The same content under another name: a new image for Kubernetes. The chart names the
    // service image in the operator's environment, which rolls every instance to it.
    // The change rolls every instance: those of finished tests go first, so that only this
    // one's pods restart (a node running a dozen services at once starts none in time).
    super::release::remove_other_trustyai_services(cp, &ns).await;
    let image = format!("localhost/trustyai-service:{ns}");
    cp.tag_image(&images().await.service.reference, &image)
        .unwrap_or_else(|e| panic!("{e}"));
    upgrade(cp, vec![format!("service.serviceImage={image}")]).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let old_name = old.metadata.name.clone().expect("a name");
    let new = ready_pod(cp, &pods, "demo", Some(&old_name)).await;
    assert_eq!(service_image(&new).as_deref(), Some(image.as_str()));

    // What the old image's service stored, read by the new one.
    user.assert_spd().await;
    uninstall(cp).await;
}

#[tokio::test]
async fn a_spec_image_the_operators_environment_overrides_is_reported() {
    let (_claim, cp, client, ns) = installed_namespace(false, "spec-image").await;
    // Under the chart's allowed prefix, so admitted; the chart's environment names the image.
    let spec = serde_json::json!({
        "storage": {"format": "PVC", "folder": "/inputs", "size": "1Gi"},
        "metrics": {"schedule": "5s"},
        "image": "quay.io/trustyai/trustyai-service:custom",
    });
    create_service(&client, &ns, "demo", spec).await;
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(client.clone(), &ns);
    let note = wait_for(cp, "a Warning SpecImageIgnored on demo", async || {
        let list = events.list(&Default::default()).await.ok()?;
        list.items.into_iter().find_map(|e| {
            (e.type_.as_deref() == Some("Warning")
                && e.reason.as_deref() == Some("SpecImageIgnored"))
            .then(|| e.note.unwrap_or_default())
        })
    })
    .await;
    assert!(
        note.contains("quay.io/trustyai/trustyai-service:custom")
            && note.contains("RELATED_IMAGE_ODH_TRUSTYAI_SERVICE_PY_IMAGE")
            && note.contains(&images().await.service.reference),
        "{note}"
    );
}
