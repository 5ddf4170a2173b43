//! `helm uninstall` on the real node leaves what the README says: the chart's objects and the
//! operator's pods go; the CRD and every TrustyAIService stay, and a TrustyAIService's pods
//! keep serving without the operator.

use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ListParams, PostParams};
use serde_json::json;

use super::release::{NAMESPACE, RELEASE, SELECTOR, TIMEOUT, installed_namespace, uninstall};
use super::service::{host_volume, ready_pod};
use crate::support::cluster::{exists, tas, tas_api};
use crate::support::wait;

#[tokio::test]
async fn helm_uninstall_keeps_the_crd_and_the_trustyai_services_whose_pods_keep_running() {
    let (_claim, cp, client, ns) = installed_namespace(true, "uninstall").await;
    let pv = format!("{ns}-data");
    host_volume(cp, &pv, &ns, "kept-pvc").await;
    let spec = json!({
        "storage": {"format": "PVC", "folder": "/inputs", "size": "1Gi", "pv": pv},
        "metrics": {"schedule": "5s"},
    });
    tas_api(&client, &ns, "v1")
        .create(&PostParams::default(), &tas("v1", "kept", spec))
        .await
        .expect("created");
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let before = ready_pod(cp, &pods, "kept", None).await;

    uninstall(cp).await;

    let operator_pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    wait::until_showing(
        "the operator's pods gone",
        TIMEOUT,
        || super::release::logs(cp),
        async || {
            let left = operator_pods
                .list(&ListParams::default().labels(SELECTOR))
                .await
                .ok()?;
            left.items.is_empty().then_some(())
        },
    )
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
