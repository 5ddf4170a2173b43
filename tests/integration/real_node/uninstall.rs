//! `helm uninstall` on the real node leaves what the README says: the chart's objects and the
//! operator's pods go; the CRD and every TrustyAIService stay, and a TrustyAIService's pods
//! keep serving without the operator.

use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ListParams};

use super::release::{NAMESPACE, RELEASE, SELECTOR, installed_namespace, uninstall, wait_for};
use super::service::{create_service, ready_pod, spec_on_host_volume};
use crate::support::cluster::{exists, tas_api};

#[tokio::test]
async fn helm_uninstall_leaves_the_trustyai_services_running_without_the_operator() {
    let (_claim, cp, client, ns) = installed_namespace(true, "uninstall").await;
    let spec = spec_on_host_volume(cp, &ns, &format!("{ns}-data"), "kept").await;
    create_service(&client, &ns, "kept", spec).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let before = ready_pod(cp, &pods, "kept", None).await;

    uninstall(cp).await;

    let operator_pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    wait_for(cp, "the operator's pods gone", async || {
        let left = operator_pods
            .list(&ListParams::default().labels(SELECTOR))
            .await
            .ok()?;
        left.items.is_empty().then_some(())
    })
    .await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), NAMESPACE);
    let left = deployments
        .list(&ListParams::default().labels(SELECTOR))
        .await
        .expect("listed");
    assert!(left.items.is_empty(), "the operator's Deployment is left");
    let webhooks: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    let registration = format!("{RELEASE}-trustyai-operator-validating");
    assert!(
        !exists(&webhooks, &registration).await,
        "{registration} is left"
    );

    // Kept: the CRD, the TrustyAIService, and its pod, still Ready, the same one.
    Api::<CustomResourceDefinition>::all(client.clone())
        .get("trustyaiservices.trustyai.opendatahub.io")
        .await
        .expect("the CRD is kept");
    tas_api(&client, &ns, "v1")
        .get("kept")
        .await
        .expect("the TrustyAIService is kept");
    let after = ready_pod(cp, &pods, "kept", None).await;
    assert_eq!(
        after.metadata.uid, before.metadata.uid,
        "the same pod serves"
    );
}
