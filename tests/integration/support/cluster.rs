//! Helpers for talking to the local control plane about TrustyAIServices and the operator's
//! webhooks, shared by the concerns' tests.

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, DeleteParams, DynamicObject, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{Value, json};
use std::time::{Duration, Instant};
use trustyai_operator::webhook_configurations::AdmissionWebhook;

use super::wait;

/// The operator's certificate Secret (default `--cert-secret`).
pub const CERT_SECRET: &str = trustyai_operator::cli::default_names::CERT_SECRET;
/// Default `--validating-webhook-configuration`.
pub const VWC: &str = trustyai_operator::cli::default_names::VALIDATING_WEBHOOK_CONFIGURATION;
/// Default `--mutating-webhook-configuration`.
pub const MWC: &str = trustyai_operator::cli::default_names::MUTATING_WEBHOOK_CONFIGURATION;
/// The validating webhook's name in the registration the operator creates; the API server
/// names it in every refusal of its.
pub const VALIDATING_WEBHOOK: &str = AdmissionWebhook::Validating.entry_name();
/// The defaulting webhook's name. It also denies what breaks a rule (all errors at once, before
/// the CRD's schema and CEL rules run), so denials name it.
pub const MUTATING_WEBHOOK: &str = AdmissionWebhook::Mutating.entry_name();

/// A namespaced kind of object the tests read and write through an `Api`.
pub trait NamespacedKind:
    kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType: Default>
    + Clone
    + std::fmt::Debug
    + serde::de::DeserializeOwned
{
}

impl<K> NamespacedKind for K where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType: Default>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
{
}

/// TrustyAIServices in `ns`, through `version` (`v1` or `v1alpha1`).
pub fn tas_api(client: &Client, ns: &str, version: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("trustyai.opendatahub.io", version, "TrustyAIService");
    Api::namespaced_with(
        client.clone(),
        ns,
        &ApiResource::from_gvk_with_plural(&gvk, "trustyaiservices"),
    )
}

/// How long [`create_when_served`] retries.
const CREATE_RETRY: Duration = Duration::from_secs(30);

/// Creates `object` through `api`, retrying for up to 30 s while `transient` says the API server
/// refused it only for now (a kind it does not serve yet, a webhook registration it has not
/// reloaded yet). The first error that is not transient, or the last one when it never took.
pub async fn create_when_served<K>(
    api: &Api<K>,
    object: &K,
    transient: impl Fn(&kube::Error) -> bool,
) -> Result<K, kube::Error>
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::Serialize + serde::de::DeserializeOwned,
{
    let mut last = None;
    let answer = wait::within(CREATE_RETRY, async || {
        match api.create(&PostParams::default(), object).await {
            Err(e) if transient(&e) => {
                last = Some(e);
                None
            }
            answer => Some(answer),
        }
    })
    .await;
    answer.unwrap_or_else(|| Err(last.expect("a refused create")))
}

/// Whether the API server refused a write because it could not call a webhook (one whose
/// registration it has not dropped or reloaded yet).
pub fn failed_calling_webhook(error: &kube::Error) -> bool {
    error.to_string().contains("failed calling webhook")
}

/// The Events in `ns` regarding the object `name`, with `reason`.
pub async fn events_regarding(
    client: &Client,
    ns: &str,
    name: &str,
    reason: &str,
) -> Vec<k8s_openapi::api::events::v1::Event> {
    Api::<k8s_openapi::api::events::v1::Event>::namespaced(client.clone(), ns)
        .list(&kube::api::ListParams::default())
        .await
        .expect("events")
        .items
        .into_iter()
        .filter(|e| {
            e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name)
                && e.reason.as_deref() == Some(reason)
        })
        .collect()
}

/// Whether `name` exists (panics when it cannot be read).
pub async fn exists<K>(api: &Api<K>, name: &str) -> bool
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned,
{
    api.get_opt(name)
        .await
        .unwrap_or_else(|e| panic!("reading {name}: {e}"))
        .is_some()
}

/// A JSON merge patch of `name` with `patch`.
pub async fn merge_patch<K>(api: &Api<K>, name: &str, patch: Value) -> kube::Result<K>
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned,
{
    api.patch(
        name,
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(patch),
    )
    .await
}

/// [`merge_patch`] of `name`'s spec with `spec`: a change of what the object asks for.
pub async fn patch_spec<K>(api: &Api<K>, name: &str, spec: Value) -> kube::Result<K>
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned,
{
    merge_patch(api, name, json!({"spec": spec})).await
}

/// [`merge_patch`] setting every finalizer of `name` to `finalizers` (a merge patch replaces a
/// list whole: those it leaves out are removed).
pub async fn set_finalizers<K>(
    api: &Api<K>,
    name: &str,
    finalizers: impl serde::Serialize,
) -> kube::Result<K>
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned,
{
    merge_patch(api, name, json!({"metadata": {"finalizers": finalizers}})).await
}

/// [`merge_patch`] setting the annotation `key` of `name` to `value`.
pub async fn annotate<K>(api: &Api<K>, name: &str, key: &str, value: &str) -> kube::Result<K>
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned,
{
    merge_patch(
        api,
        name,
        json!({"metadata": {"annotations": {key: value}}}),
    )
    .await
}

/// The names of every object `api` lists.
pub async fn names<K>(api: &Api<K>) -> Vec<String>
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned,
{
    api.list_metadata(&kube::api::ListParams::default())
        .await
        .unwrap_or_else(|e| panic!("listing {}: {e}", api.resource_url()))
        .items
        .into_iter()
        .filter_map(|o| o.metadata.name)
        .collect()
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

/// Creates the TrustyAIService `name` in `ns` with `spec` through v1alpha1, and reads it back
/// through v1: the API server converts it (the webhook's /convert) and admits it on the way
/// (/mutate defaults it). Returns what v1 reads.
pub async fn create_through_v1alpha1(
    client: &Client,
    ns: &str,
    name: &str,
    spec: Value,
) -> DynamicObject {
    tas_api(client, ns, "v1alpha1")
        .create(&PostParams::default(), &tas("v1alpha1", name, spec))
        .await
        .expect("created through v1alpha1");
    tas_api(client, ns, "v1")
        .get(name)
        .await
        .expect("read as v1")
}

/// Creates `bad-image` in `ns`: the smallest valid spec but for an image outside the allowed
/// prefixes, a rule only the validating webhook carries (CEL does not). Returns the refusal;
/// panics with `what` when it is admitted.
pub async fn create_with_disallowed_image(client: &Client, ns: &str, what: &str) -> kube::Error {
    let mut spec = minimal_spec();
    spec["image"] = json!("docker.io/someone/trustyai:1");
    tas_api(client, ns, "v1")
        .create(&PostParams::default(), &tas("v1", "bad-image", spec))
        .await
        .expect_err(what)
}

/// The smallest valid spec.
pub use super::samples::minimal as minimal_spec;

/// Violations of three rules that only the validating webhook checks: the schema and CEL accept
/// them.
pub fn webhook_only_violations() -> Value {
    json!({
        "image": "docker.io/someone/trustyai:1",
        "storage": {"format": "PVC"},
        "data": {"format": "JSON"},
        "metrics": {"schedule": "500ms"}
    })
}

/// A KServe InferenceService `name` serving a sklearn model in the deployment mode `mode`, with
/// the Istio sidecar asked for or not (`istio`: `"true"` or `"false"`): what the operator wires
/// a payload logger into.
pub fn inference_service(name: &str, mode: &str, istio: &str) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
        "metadata": {"name": name, "annotations": {
            "serving.kserve.io/deploymentMode": mode, "sidecar.istio.io/inject": istio
        }},
        "spec": {"predictor": {"model": {"modelFormat": {"name": "sklearn"}}}}
    }))
    .expect("an InferenceService")
}

/// A TLS connector that trusts the CA certificates of `ca_pem` and nothing else.
pub fn tls_connector(ca_pem: &[u8]) -> tokio_rustls::TlsConnector {
    use tokio_rustls::rustls;
    use tokio_rustls::rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls::pki_types::CertificateDer::pem_slice_iter(ca_pem) {
        roots.add(cert.expect("PEM")).expect("a CA certificate");
    }
    let config = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("versions")
    .with_root_certificates(roots)
    .with_no_client_auth();
    tokio_rustls::TlsConnector::from(std::sync::Arc::new(config))
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
    let vwc = registration::<ValidatingWebhookConfiguration>(client, VWC)
        .await
        .and_then(|v| v.webhooks)
        .and_then(|w| first_bundle(w.into_iter().map(|w| w.client_config)));
    let mwc = registration::<MutatingWebhookConfiguration>(client, MWC)
        .await
        .and_then(|v| v.webhooks)
        .and_then(|w| first_bundle(w.into_iter().map(|w| w.client_config)));
    vec![crd_bundle, vwc, mwc]
}

/// The webhook registration `name` of kind `K`, if it can be read.
async fn registration<K>(client: &Client, name: &str) -> Option<K>
where
    K: kube::Resource<Scope = k8s_openapi::ClusterResourceScope, DynamicType: Default>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned,
{
    Api::<K>::all(client.clone())
        .get_opt(name)
        .await
        .ok()
        .flatten()
}

/// The caBundle of the first of a registration's webhooks.
fn first_bundle(
    mut configs: impl Iterator<Item = k8s_openapi::api::admissionregistration::v1::WebhookClientConfig>,
) -> Option<Vec<u8>> {
    configs.next()?.ca_bundle.map(|b| b.0)
}

/// Waits until the CRD and both registrations carry exactly the CA bundle the operator keeps in
/// its Secret in `ns`; panics with the operator's log after 60 s. The objects only: a test that
/// then goes through the webhooks waits for [`wait_for_webhooks_served`] too.
pub async fn wait_for_published_bundle(
    client: &Client,
    ns: &str,
    operator: &super::operator::Operator,
) {
    let published = wait::within(Duration::from_secs(60), async || {
        let ca = secret_field(client, ns, "ca.crt").await?;
        published_bundles(client)
            .await
            .iter()
            .all(|b| b.as_deref() == Some(ca.as_slice()))
            .then_some(())
    })
    .await;
    assert!(
        published.is_some(),
        "the CA bundle was not published within 60s:\n{}",
        operator.logs()
    );
}

/// Waits until the API server calls the operator's webhooks. It takes registrations and
/// caBundles from its own informers, a moment after the objects carry them (which is all
/// [`wait_for_published_bundle`] sees); until then a call fails TLS verification or is not made
/// at all. Each round dry-runs an object only the webhooks refuse (the defaulting one denies it
/// first), and a valid one through v1 and through v1alpha1 that must come back defaulted by the
/// mutating webhook and pass the validating one (the
/// registrations match v1 only, so v1alpha1 also needs /convert, both ways). Panics with the
/// operator's log after 60 s.
pub async fn wait_for_webhooks_served(
    client: &Client,
    ns: &str,
    operator: &super::operator::Operator,
) {
    let started = Instant::now();
    let mut not_yet = String::new();
    let served = wait::within(Duration::from_secs(60), async || {
        match webhooks_answer(client, ns).await {
            Ok(()) => Some(()),
            Err(e) => {
                not_yet = e;
                None
            }
        }
    })
    .await;
    assert!(
        served.is_some(),
        "the API server did not call the webhooks within 60s ({not_yet}):\n{}",
        operator.logs()
    );
    eprintln!(
        "the API server calls the webhooks after {:?}",
        started.elapsed()
    );
}

/// Starts the operator in `ns` with its webhook registrations (`--create-webhook-configurations`,
/// then `extra`) and waits until the API server calls it: ready, its CA in the CRD and both
/// registrations, and conversion and admission answered by it.
pub async fn start_serving_webhooks(
    cp: &super::ControlPlane,
    client: &Client,
    ns: &str,
    extra: &[&str],
) -> super::operator::Operator {
    let mut args = vec!["--create-webhook-configurations"];
    args.extend_from_slice(extra);
    let mut operator = super::operator::Operator::start(cp, ns, &args);
    operator.wait_ready(Duration::from_secs(60));
    wait_for_published_bundle(client, ns, &operator).await;
    wait_for_webhooks_served(client, ns, &operator).await;
    operator
}

/// One round of [`wait_for_webhooks_served`]: the first answer that is not the webhooks'.
async fn webhooks_answer(client: &Client, ns: &str) -> Result<(), String> {
    const PROBE: &str = "webhook-probe";
    let dry_run = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    match tas_api(client, ns, "v1")
        .create(&dry_run, &tas("v1", PROBE, webhook_only_violations()))
        .await
    {
        Err(kube::Error::Api(status))
            if status.message.contains(MUTATING_WEBHOOK)
                || status.message.contains(VALIDATING_WEBHOOK) => {}
        other => {
            return Err(format!(
                "an invalid object was not refused by {MUTATING_WEBHOOK}: {other:?}"
            ));
        }
    }
    for version in ["v1", "v1alpha1"] {
        match tas_api(client, ns, version)
            .create(&dry_run, &tas(version, PROBE, minimal_spec()))
            .await
        {
            Ok(answer) if answer.data["spec"]["replicas"] == 1 => {}
            other => {
                return Err(format!(
                    "a valid object through {version} was not defaulted by the mutating webhook: {other:?}"
                ));
            }
        }
    }
    Ok(())
}

/// Removes the two default webhook registrations (an earlier operator may have left them,
/// pointing at a port nobody listens on any more: with no operator running they would refuse
/// every write).
pub async fn remove_webhook_registrations(client: &Client) {
    let dp = DeleteParams::default();
    for result in [
        Api::<ValidatingWebhookConfiguration>::all(client.clone())
            .delete(VWC, &dp)
            .await
            .map(|_| ()),
        Api::<MutatingWebhookConfiguration>::all(client.clone())
            .delete(MWC, &dp)
            .await
            .map(|_| ()),
    ] {
        match result {
            Ok(()) => {}
            Err(kube::Error::Api(status)) if status.code == 404 => {}
            Err(e) => panic!("removing a webhook registration: {e}"),
        }
    }
}
