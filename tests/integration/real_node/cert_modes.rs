//! The chart's certificate modes that need no component beyond the cluster, served from the
//! operator's pods: `existingSecret` (the admin's own CA and serving certificate, mounted from
//! their Secret; the operator puts that CA into the registrations and the CRD) and
//! `certManager` (a Secret shaped as cert-manager writes it, and the CA put where cert-manager's
//! cainjector puts it, since neither runs here). The API server reaches the webhooks with it.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, ObjectMeta, Patch, PatchParams, PostParams};
use trustyai_certs::generate::{generate_ca, issue_serving};
use trustyai_certs::lifetimes::Lifetimes;
use trustyai_certs::material::CaCert;
use trustyai_certs::names::ServiceNames;

use super::release::{NAMESPACE, TIMEOUT, installed, two_ready, uninstall, upgrade, wait_for};
use crate::support::cluster::{minimal_spec, tas, tas_api};
use crate::support::wait;

/// The chart's webhook Service for the release.
const WEBHOOK_SERVICE: &str = "trustyai-trustyai-operator-webhook";
const SECRET: &str = "admin-webhook-tls";
/// The Secret the chart's Certificate names in certManager mode.
const CERT_MANAGER_SECRET: &str = "trustyai-trustyai-operator-webhook-tls";
const CRD: &str = "trustyaiservices.trustyai.opendatahub.io";

/// A kubernetes.io/tls Secret `name` with `tls.crt`, `tls.key` and `ca.crt` (as cert-manager
/// and admins write them): a new CA and a serving certificate it signed for the webhook
/// Service's names, replacing any Secret of that name. Returns the CA's PEM.
async fn tls_secret(
    client: &kube::Client,
    name: &str,
    annotations: BTreeMap<String, String>,
) -> String {
    let lifetimes = Lifetimes::default();
    let now = trustyai_certs::time::OffsetDateTime::now_utc();
    let ca = generate_ca(&lifetimes, now).expect("a CA");
    let signer = CaCert::parse("ca", ca.cert_pem.as_bytes(), "key", ca.key_pem.as_bytes())
        .expect("the CA parses");
    let names = ServiceNames::new(WEBHOOK_SERVICE, NAMESPACE);
    let serving = issue_serving(&signer, &names, &lifetimes, now).expect("a serving certificate");
    let data = BTreeMap::from([
        (
            "tls.crt".to_owned(),
            ByteString(serving.cert_pem.into_bytes()),
        ),
        (
            "tls.key".to_owned(),
            ByteString(serving.key_pem.into_bytes()),
        ),
        (
            "ca.crt".to_owned(),
            ByteString(ca.cert_pem.clone().into_bytes()),
        ),
    ]);
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some(name.into()),
            annotations: Some(annotations),
            ..ObjectMeta::default()
        },
        type_: Some("kubernetes.io/tls".into()),
        data: Some(data),
        ..Secret::default()
    };
    let secrets = Api::<Secret>::namespaced(client.clone(), NAMESPACE);
    let _ = secrets.delete(name, &Default::default()).await;
    wait::until("the old Secret gone", TIMEOUT, async || {
        secrets.get_opt(name).await.ok()?.is_none().then_some(())
    })
    .await;
    secrets
        .create(&PostParams::default(), &secret)
        .await
        .expect("the Secret");
    ca.cert_pem
}

/// Waits until the CRD's conversion webhook trusts `ca`, the pods are Ready, and a create
/// through v1alpha1 (conversion, defaulting, validation through the Service) succeeds; then
/// uninstalls the release, so the next test installs it as usual.
async fn served_with(cp: &'static trustyai_local_cluster::ControlPlane, ca: &str, ns: &str) {
    let client = cp.client().await;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    wait_for(cp, "the CA in the CRD", async || {
        let bundle = crds
            .get(CRD)
            .await
            .ok()?
            .spec
            .conversion?
            .webhook?
            .client_config?
            .ca_bundle?;
        (String::from_utf8_lossy(&bundle.0).trim() == ca.trim()).then_some(())
    })
    .await;
    let pods = Api::namespaced(client.clone(), NAMESPACE);
    two_ready(cp, &pods, None).await;
    let api = tas_api(&client, ns, "v1alpha1");
    let dry_run = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    wait_for(
        cp,
        "the webhooks answering with that certificate",
        async || {
            api.create(
                &dry_run,
                &tas("v1alpha1", "through-the-service", minimal_spec()),
            )
            .await
            .ok()
        },
    )
    .await;
    uninstall(cp).await;
}

#[tokio::test]
async fn an_existing_secret_serves_the_webhooks_from_the_pods() {
    let (_claim, cp) = installed(true).await;
    let client = cp.client().await;
    let ca = tls_secret(&client, SECRET, BTreeMap::new()).await;
    upgrade(
        cp,
        vec![
            "certs.mode=existingSecret".into(),
            format!("certs.existingSecret={SECRET}"),
        ],
    )
    .await;
    let ns = cp.namespace(&client, "existing-secret").await;
    served_with(cp, &ca, &ns).await;
}

#[tokio::test]
async fn a_cert_manager_secret_serves_the_webhooks_from_the_pods() {
    let (_claim, cp) = installed(true).await;
    let client = cp.client().await;
    // cert-manager's kinds, so the chart's Issuer and Certificate can be created.
    let fixture = format!(
        "{}/tests/fixtures/crds/cert-manager.yaml",
        env!("CARGO_MANIFEST_DIR")
    );
    let (ok, applied, err) = cp.kubectl(
        &["apply", "--server-side", "-o", "name", "-f", &fixture],
        None,
    );
    assert!(ok, "{err}");
    let mut established = vec!["wait", "--for=condition=Established", "--timeout=60s"];
    established.extend(applied.lines());
    let (ok, out, err) = cp.kubectl(&established, None);
    assert!(ok, "cert-manager's CRDs established: {out}{err}");
    // What cert-manager writes for the chart's Certificate.
    let annotations = BTreeMap::from([
        (
            "cert-manager.io/certificate-name".to_owned(),
            "trustyai-trustyai-operator-webhook".to_owned(),
        ),
        (
            "cert-manager.io/issuer-name".to_owned(),
            "trustyai-trustyai-operator-selfsigned".to_owned(),
        ),
        (
            "cert-manager.io/issuer-kind".to_owned(),
            "Issuer".to_owned(),
        ),
        (
            "cert-manager.io/issuer-group".to_owned(),
            "cert-manager.io".to_owned(),
        ),
    ]);
    let ca = tls_secret(&client, CERT_MANAGER_SECRET, annotations).await;
    upgrade(cp, vec!["certs.mode=certManager".into()]).await;
    // cainjector's part, as cainjector does it: for as long as the test runs, the CA goes back
    // into every object annotated cert-manager.io/inject-ca-from whenever it differs there (the
    // rollout's old pods, self-signed, keep publishing their own CA until they are gone).
    let injector = tokio::spawn(inject_ca(client.clone(), ca.clone()));
    let _stop_injecting = AbortOnDrop(injector);
    let ns = cp.namespace(&client, "cert-manager").await;
    served_with(cp, &ca, &ns).await;
}

/// Aborts the task when the test ends, however it ends.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// What cert-manager's cainjector does for the chart's objects: puts `ca` into the CRD's
/// conversion webhook and into every webhook of both registrations whenever one holds
/// anything else. Runs until aborted.
async fn inject_ca(client: kube::Client, ca: String) {
    let bundle = ByteString(ca.into_bytes());
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let registration =
        |resource: ApiResource| Api::<DynamicObject>::all_with(client.clone(), &resource);
    let validating = registration(ApiResource::erase::<ValidatingWebhookConfiguration>(&()));
    let mutating = registration(ApiResource::erase::<MutatingWebhookConfiguration>(&()));
    // cainjector reacts to watch events; polling stands in for them.
    wait::forever(|| {
        let (crds, validating, mutating, bundle) = (
            crds.clone(),
            validating.clone(),
            mutating.clone(),
            bundle.clone(),
        );
        async move {
            inject_into_crd(&crds, &bundle).await;
            for (api, suffix) in [(&validating, "validating"), (&mutating, "mutating")] {
                inject_into_registration(api, suffix, &bundle).await;
            }
        }
    })
    .await;
}

/// Puts `bundle` into the CRD's conversion webhook, unless it is there already.
async fn inject_into_crd(crds: &Api<CustomResourceDefinition>, bundle: &ByteString) {
    let Ok(crd) = crds.get(CRD).await else {
        return;
    };
    let found = crd
        .spec
        .conversion
        .as_ref()
        .and_then(|c| c.webhook.as_ref())
        .and_then(|w| w.client_config.as_ref())
        .and_then(|c| c.ca_bundle.as_ref());
    if found != Some(bundle) {
        let patch = serde_json::json!({"spec": {"conversion": {"webhook":
            {"clientConfig": {"caBundle": bundle}}}}});
        let _ = crds
            .patch(CRD, &PatchParams::default(), &Patch::Merge(patch))
            .await;
    }
}

/// Puts `bundle` into every webhook of the release's `suffix` registration, unless each holds it.
async fn inject_into_registration(api: &Api<DynamicObject>, suffix: &str, bundle: &ByteString) {
    let name = format!("trustyai-trustyai-operator-{suffix}");
    let Ok(mut config) = api.get(&name).await else {
        return;
    };
    let Some(webhooks) = config.data["webhooks"].as_array_mut() else {
        return;
    };
    let encoded = serde_json::to_value(bundle).unwrap_or_default();
    if webhooks
        .iter()
        .all(|w| w["clientConfig"]["caBundle"] == encoded)
    {
        return;
    }
    for webhook in webhooks.iter_mut() {
        webhook["clientConfig"]["caBundle"] = encoded.clone();
    }
    let _ = api.replace(&name, &PostParams::default(), &config).await;
}
