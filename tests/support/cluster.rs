//! Helpers for talking to the local control plane about TrustyAIServices and the operator's
//! webhooks, shared by the test binaries.

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, DynamicObject};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{Value, json};

/// The operator's certificate Secret (default `--cert-secret`).
pub const CERT_SECRET: &str = "trustyai-operator-webhook-tls";
/// Default `--validating-webhook-configuration`.
pub const VWC: &str = "trustyai-operator-validating";
/// Default `--mutating-webhook-configuration`.
pub const MWC: &str = "trustyai-operator-mutating";

/// TrustyAIServices in `ns`, through `version` (`v1` or `v1alpha1`).
pub fn tas_api(client: &Client, ns: &str, version: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("trustyai.opendatahub.io", version, "TrustyAIService");
    Api::namespaced_with(
        client.clone(),
        ns,
        &ApiResource::from_gvk_with_plural(&gvk, "trustyaiservices"),
    )
}

/// A TrustyAIService manifest.
pub fn manifest(version: &str, name: &str, spec: Value) -> Value {
    json!({
        "apiVersion": format!("trustyai.opendatahub.io/{version}"), "kind": "TrustyAIService",
        "metadata": {"name": name}, "spec": spec
    })
}

/// A TrustyAIService object.
pub fn tas(version: &str, name: &str, spec: Value) -> DynamicObject {
    serde_json::from_value(manifest(version, name, spec)).expect("object")
}

/// The smallest valid spec.
pub fn minimal_spec() -> Value {
    json!({"storage": {"format": "PVC"}, "metrics": {"schedule": "5s"}})
}

/// One key of the operator's certificate Secret in `ns`.
pub async fn secret_field(client: &Client, ns: &str, key: &str) -> Option<Vec<u8>> {
    let secret = Api::<Secret>::namespaced(client.clone(), ns)
        .get_opt(CERT_SECRET)
        .await
        .ok()??;
    secret.data?.get(key).map(|b| b.0.clone())
}

/// The caBundles of the CRD's conversion webhook and of the two default webhook registrations.
pub async fn published_bundles(client: &Client) -> Vec<Option<Vec<u8>>> {
    let crd = Api::<CustomResourceDefinition>::all(client.clone())
        .get_opt(trustyai_crds::contract::CRD_NAME)
        .await
        .ok()
        .flatten();
    let crd_bundle = crd
        .and_then(|c| c.spec.conversion)
        .and_then(|c| c.webhook)
        .and_then(|w| w.client_config)
        .and_then(|c| c.ca_bundle)
        .map(|b| b.0);
    let vwc = Api::<ValidatingWebhookConfiguration>::all(client.clone())
        .get_opt(VWC)
        .await
        .ok()
        .flatten()
        .and_then(|v| v.webhooks)
        .and_then(|w| w.first().and_then(|w| w.client_config.ca_bundle.clone()))
        .map(|b| b.0);
    let mwc = Api::<MutatingWebhookConfiguration>::all(client.clone())
        .get_opt(MWC)
        .await
        .ok()
        .flatten()
        .and_then(|v| v.webhooks)
        .and_then(|w| w.first().and_then(|w| w.client_config.ca_bundle.clone()))
        .map(|b| b.0);
    vec![crd_bundle, vwc, mwc]
}

/// Waits until the CRD and both registrations carry exactly the CA bundle the operator keeps in
/// its Secret in `ns`; panics with the operator's log after 60 s.
pub async fn wait_for_published_bundle(
    client: &Client,
    ns: &str,
    operator: &super::operator::Operator,
) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while std::time::Instant::now() < deadline {
        if let Some(ca) = secret_field(client, ns, "ca.crt").await
            && published_bundles(client)
                .await
                .iter()
                .all(|b| b.as_deref() == Some(ca.as_slice()))
        {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    panic!(
        "the CA bundle was not published within 60s:\n{}",
        operator.logs()
    );
}
