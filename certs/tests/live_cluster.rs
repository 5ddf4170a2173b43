//! Checks of the Kubernetes-facing functions against a real kube-apiserver: the local control
//! plane of `trustyai-local-cluster` (built by `make control-plane`; missing binaries fail the
//! tests loudly).
//!
//! They create a fresh namespace per test, a test CRD `certtests.certs.trustyai.test`,
//! and webhook configurations named `trustyai-certs-test`.

// Test helpers outside `#[test]` functions fail loudly on purpose.
#![allow(clippy::expect_used)]

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::{Namespace, Secret};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{ApiResource, DeleteParams, DynamicObject, PostParams};
use kube::runtime::events::{Recorder, Reporter};
use kube::{Api, Client};
use tokio::sync::watch;
use trustyai_certs::ca_bundle_patches::{LiveConversion, mutating_entries, validating_entries};
use trustyai_certs::{
    CABUNDLE_FIELD_MANAGER, CertificateSecret, Ensured, Lifetimes, PublishTargets, Published,
    ServiceNames, TlsMaterial, WebhookEndpoint, chains_to, ensure_secret, maintain_secret,
    publish_once, run_publisher,
};

const SECRET: &str = "webhook-tls";
const CRD: &str = "certtests.certs.trustyai.test";
const WEBHOOKS: &str = "trustyai-certs-test";

async fn client() -> Client {
    trustyai_local_cluster::ControlPlane::shared()
        .client()
        .await
}

/// The tests that install the shared test CRD and webhook configurations run one at a time.
static SHARED_TARGETS: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A fresh namespace `<base>-<unique>` (never reused: a cluster without the namespace
/// controller never finishes deleting one).
async fn namespace(client: &Client, base: &str) -> String {
    let unique = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_millis();
    let name = format!("{base}-{unique}");
    let api: Api<Namespace> = Api::all(client.clone());
    let ns: Namespace =
        serde_json::from_value(serde_json::json!({"metadata": {"name": name}})).expect("ns");
    api.create(&PostParams::default(), &ns)
        .await
        .expect("create ns");
    name
}

fn names(ns: &str) -> ServiceNames {
    ServiceNames::new("trustyai-operator-webhook", ns)
}

/// The test's certificate Secret in `ns`, for the maintainer.
fn certificate_secret(ns: &str, lifetimes: Lifetimes, streaming_lists: bool) -> CertificateSecret {
    CertificateSecret {
        namespace: ns.to_owned(),
        name: SECRET.into(),
        names: names(ns),
        lifetimes,
        streaming_lists,
    }
}

/// How long a test waits for the API server or a task to show what it expects: roomy, so that
/// a loaded machine is slow rather than failing.
const PATIENCE: Duration = Duration::from_secs(60);

/// Asks `check` every 200 ms until it gives a value; fails naming `what` after [`PATIENCE`].
async fn eventually<T>(what: &str, mut check: impl AsyncFnMut() -> Option<T>) -> T {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what}: not seen within {PATIENCE:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A client of the shared control plane and a fresh namespace `<base>-<unique>` on it.
async fn fresh_namespace(base: &str) -> (Client, String) {
    let client = client().await;
    let ns = namespace(&client, base).await;
    (client, ns)
}

/// The test's certificate Secret in `ns`, made or reused with the default lifetimes.
async fn ensure(client: &Client, ns: &str, what: &str) -> Ensured {
    ensure_secret(client, ns, SECRET, &names(ns), &Lifetimes::default())
        .await
        .expect(what)
}

/// Stores `secret` again with garbage under `key`.
async fn store_garbage(api: &Api<Secret>, secret: &Secret, key: &str) {
    let mut broken = secret.clone();
    broken
        .data
        .get_or_insert_with(BTreeMap::new)
        .insert(key.into(), ByteString(b"garbage".to_vec()));
    api.replace(SECRET, &PostParams::default(), &broken)
        .await
        .expect("break it");
}

/// Waits at most 20 s for new material on `rx`.
async fn changed_within_20_s(rx: &mut watch::Receiver<TlsMaterial>, what: &str) {
    tokio::time::timeout(Duration::from_secs(20), rx.changed())
        .await
        .expect(what)
        .expect("open");
}

fn text(secret: &Secret, key: &str) -> String {
    secret
        .data
        .as_ref()
        .and_then(|d| d.get(key))
        .map(|b| String::from_utf8_lossy(&b.0).into_owned())
        .unwrap_or_default()
}

#[tokio::test]
async fn ensure_creates_a_complete_tls_secret() {
    let (client, ns) = fresh_namespace("certs-ensure").await;
    let first = ensure(&client, &ns, "create").await;
    assert!(first.warnings.is_empty());
    assert_eq!(first.secret.type_.as_deref(), Some("kubernetes.io/tls"));
    for key in ["tls.crt", "tls.key", "ca.crt", "ca.key"] {
        assert!(!text(&first.secret, key).is_empty(), "{key}");
    }
}

#[tokio::test]
async fn ensure_reuses_the_secret_it_created() {
    let (client, ns) = fresh_namespace("certs-reuse").await;
    let first = ensure(&client, &ns, "create").await;
    let again = ensure(&client, &ns, "reuse").await;
    assert_eq!(again.material, first.material);
    assert_eq!(
        again.secret.metadata.resource_version,
        first.secret.metadata.resource_version
    );
}

#[tokio::test]
async fn replicas_starting_together_agree_on_one_ca() {
    let (client, ns) = fresh_namespace("certs-race").await;
    let names = names(&ns);
    let lifetimes = Lifetimes::default();
    let runs = (0..4).map(|_| ensure_secret(&client, &ns, SECRET, &names, &lifetimes));
    let results = futures::future::join_all(runs).await;
    let bundles: Vec<String> = results
        .into_iter()
        .map(|r| {
            r.expect("ensure")
                .material
                .ca_bundle_pem()
                .expect("bundle")
                .to_owned()
        })
        .collect();
    assert!(bundles.windows(2).all(|w| w[0] == w[1]), "one CA for all");
}

#[tokio::test]
async fn garbage_is_repaired_keeping_the_ca_with_a_warning() {
    let (client, ns) = fresh_namespace("certs-garbage").await;
    let first = ensure(&client, &ns, "create").await;
    let api: Api<Secret> = Api::namespaced(client.clone(), &ns);
    store_garbage(&api, &first.secret, "tls.crt").await;
    let repaired = ensure(&client, &ns, "repair").await;
    assert_eq!(repaired.warnings.len(), 1, "{:?}", repaired.warnings);
    assert_eq!(repaired.warnings[0].reason, "WebhookCertificateInvalid");
    assert_eq!(
        text(&repaired.secret, "ca.crt"),
        text(&first.secret, "ca.crt")
    );
    assert_ne!(repaired.material, first.material);
}

/// A maintainer of a fresh namespace's certificate Secret, serving it on `rx`.
struct Maintained {
    client: Client,
    ns: String,
    first: Ensured,
    rx: watch::Receiver<TlsMaterial>,
    task: tokio::task::JoinHandle<Result<(), trustyai_certs::StoreError>>,
}

impl Maintained {
    async fn start(base: &str) -> Self {
        let (client, ns) = fresh_namespace(base).await;
        let first = ensure(&client, &ns, "create").await;
        let (tx, rx) = watch::channel(first.material.clone());
        let task = tokio::spawn(maintain_secret(
            client.clone(),
            certificate_secret(&ns, Lifetimes::default(), true),
            tx,
            Some(Recorder::new(
                client.clone(),
                Reporter {
                    controller: "trustyai-operator".into(),
                    instance: None,
                },
            )),
            Some(first.judged()),
        ));
        Self {
            client,
            ns,
            first,
            rx,
            task,
        }
    }

    fn secrets(&self) -> Api<Secret> {
        Api::namespaced(self.client.clone(), &self.ns)
    }

    /// Drops the receiver; the maintainer must stop without an error.
    async fn stop(self) {
        drop(self.rx);
        tokio::time::timeout(Duration::from_secs(10), self.task)
            .await
            .expect("stops when the receiver is gone")
            .expect("no panic")
            .expect("no error");
    }
}

#[tokio::test]
async fn the_maintainer_leaves_valid_material_alone() {
    let maintained = Maintained::start("certs-maintain").await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        !maintained.rx.has_changed().expect("open"),
        "nothing changed yet"
    );
    maintained.stop().await;
}

#[tokio::test]
async fn the_maintainer_recreates_a_deleted_secret() {
    let mut maintained = Maintained::start("certs-recreate").await;
    let api = maintained.secrets();
    api.delete(SECRET, &DeleteParams::default())
        .await
        .expect("delete");
    changed_within_20_s(&mut maintained.rx, "new material after recreation").await;
    let recreated = api.get(SECRET).await.expect("recreated");
    let served = maintained.rx.borrow_and_update().clone();
    assert_eq!(served.cert_chain_pem(), text(&recreated, "tls.crt"));
    maintained.stop().await;
}

/// Garbage is never served; the repaired material is, and a Warning event says why.
#[tokio::test]
async fn the_maintainer_serves_repaired_material_in_place_of_garbage_with_a_warning() {
    let mut maintained = Maintained::start("certs-repair").await;
    let served = maintained.first.material.clone();
    let api = maintained.secrets();
    store_garbage(&api, &maintained.first.secret, "tls.key").await;
    changed_within_20_s(&mut maintained.rx, "repaired material").await;
    let repaired = maintained.rx.borrow_and_update().clone();
    assert_ne!(repaired, served);
    assert!(!repaired.key_pem().contains("garbage"));
    let events: Api<k8s_openapi::api::events::v1::Event> =
        Api::namespaced(maintained.client.clone(), &maintained.ns);
    eventually("a Warning event on the Secret", async || {
        let list = events.list(&Default::default()).await.ok()?;
        list.items
            .iter()
            .any(|e| {
                e.reason.as_deref() == Some("WebhookCertificateInvalid")
                    && e.type_.as_deref() == Some("Warning")
                    && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(SECRET)
            })
            .then_some(())
    })
    .await;
    maintained.stop().await;
}

/// Creates the webhook configuration of kind `K` anew, as a chart would: one webhook, `hook`,
/// calling `path` on the chart's Service.
async fn recreate_webhooks<K>(client: &Client, hook: &str, path: &str)
where
    K: kube::Resource<Scope = kube::core::ClusterResourceScope, DynamicType = ()>
        + serde::Serialize
        + serde::de::DeserializeOwned
        + Clone
        + std::fmt::Debug,
{
    let api: Api<K> = Api::all(client.clone());
    let _ = api.delete(WEBHOOKS, &DeleteParams::default()).await;
    let config: K = serde_json::from_value(serde_json::json!({
        "metadata": {"name": WEBHOOKS},
        "webhooks": [{
            "name": hook,
            "clientConfig": {"service": {
                "name": "chart-service", "namespace": "chart-ns", "path": path, "port": 443,
            }},
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
            "failurePolicy": "Ignore",
        }],
    }))
    .expect("webhook configuration");
    api.create(&PostParams::default(), &config)
        .await
        .expect("create the webhook configuration");
}

async fn install_targets(client: &Client) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let _ = crds.delete(CRD, &DeleteParams::default()).await;
    let crd: CustomResourceDefinition = serde_json::from_value(serde_json::json!({
        "metadata": {"name": CRD},
        "spec": {
            "group": "certs.trustyai.test",
            "names": {"plural": "certtests", "singular": "certtest", "kind": "CertTest"},
            "scope": "Namespaced",
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object"}}}],
        }
    }))
    .expect("crd");
    // The previous run's CRD may still be terminating.
    eventually("the test CRD created", async || {
        crds.create(&PostParams::default(), &crd).await.ok()
    })
    .await;
    recreate_webhooks::<ValidatingWebhookConfiguration>(
        client,
        "validate.certs.trustyai.test",
        "/validate",
    )
    .await;
    recreate_webhooks::<MutatingWebhookConfiguration>(
        client,
        "mutate.certs.trustyai.test",
        "/mutate",
    )
    .await;
}

/// The material of the certificate Secret in `ns`, made at once, and its CA bundle.
async fn served(client: &Client, ns: &str) -> (TlsMaterial, Vec<u8>) {
    let material = ensure(client, ns, "secret").await.material;
    let bundle = material
        .ca_bundle_pem()
        .expect("bundle")
        .as_bytes()
        .to_vec();
    (material, bundle)
}

/// The start of a publication test: a fresh namespace `<base>-<unique>`, the shared targets
/// installed anew and held until the guard is dropped, and the material of the namespace's
/// certificate Secret with its CA bundle.
async fn publication(
    base: &str,
) -> (
    Client,
    String,
    tokio::sync::MutexGuard<'static, ()>,
    TlsMaterial,
    Vec<u8>,
) {
    let (client, ns) = fresh_namespace(base).await;
    let shared = SHARED_TARGETS.lock().await;
    install_targets(&client).await;
    let (material, bundle) = served(&client, &ns).await;
    (client, ns, shared, material, bundle)
}

/// The Service `name` in `ns`, on port 443.
fn service_endpoint(name: &str, ns: &str) -> WebhookEndpoint {
    WebhookEndpoint::Service {
        name: name.into(),
        namespace: ns.to_owned(),
        port: 443,
    }
}

fn targets(endpoint: WebhookEndpoint) -> PublishTargets {
    PublishTargets {
        crd_name: Some(CRD.into()),
        conversion_path: "/convert".into(),
        validating_webhook_configuration: Some(WEBHOOKS.into()),
        mutating_webhook_configuration: Some(WEBHOOKS.into()),
        endpoint,
        streaming_lists: true,
    }
}

/// Publishes `material` for the webhook Service in `ns`.
async fn publish_for_the_service(
    client: &Client,
    ns: &str,
    material: &TlsMaterial,
    what: &str,
) -> Published {
    let service = service_endpoint("trustyai-operator-webhook", ns);
    publish_once(client, &targets(service), material)
        .await
        .expect(what)
}

#[tokio::test]
async fn a_publication_applies_the_bundle_once_to_exactly_the_owned_fields() {
    let (client, ns, _shared, material, bundle) = publication("certs-publish").await;

    let first = publish_for_the_service(&client, &ns, &material, "publish").await;
    assert_eq!(first.updated.len(), 3, "{first:?}");
    let again = publish_for_the_service(&client, &ns, &material, "publish again").await;
    assert!(again.updated.is_empty(), "idempotent: {again:?}");

    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd = crds.get(CRD).await.expect("crd");
    let conversion = LiveConversion::of(&crd);
    assert_eq!(conversion.strategy.as_deref(), Some("Webhook"));
    assert_eq!(
        conversion.client_config.ca_bundle.as_deref(),
        Some(bundle.as_slice())
    );
    let svc = conversion.client_config.service.expect("service");
    assert_eq!(
        (svc.name.as_str(), svc.path.as_deref(), svc.port),
        ("trustyai-operator-webhook", Some("/convert"), Some(443))
    );
    assert!(
        crd.metadata
            .managed_fields
            .iter()
            .flatten()
            .any(|m| m.manager.as_deref() == Some(CABUNDLE_FIELD_MANAGER)
                && m.operation.as_deref() == Some("Apply")),
        "applied under the dedicated field manager"
    );

    let vwcs: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    let vwc = vwcs.get(WEBHOOKS).await.expect("vwc");
    let entry = &validating_entries(&vwc)[0].1;
    assert_eq!(entry.ca_bundle.as_deref(), Some(bundle.as_slice()));
    let svc = entry.service.as_ref().expect("service");
    assert_eq!(
        (svc.namespace.as_str(), svc.path.as_deref()),
        (ns.as_str(), Some("/validate"))
    );
    // The chart's other fields survive.
    let hook = &vwc.webhooks.as_ref().expect("webhooks")[0];
    assert_eq!(hook.failure_policy.as_deref(), Some("Ignore"));
    assert_eq!(hook.side_effects, "None");

    chains_to(
        material.cert_chain_pem().as_bytes(),
        &bundle,
        trustyai_certs::time::OffsetDateTime::now_utc(),
    )
    .expect("chains");
}

/// Removes the caBundle of the first webhook of our `K` configuration, as a re-apply of the
/// chart's manifest does.
async fn clear_first_bundle<K>(client: &Client)
where
    K: kube::Resource<DynamicType = ()>,
{
    let kind = ApiResource::erase::<K>(&());
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &kind);
    let mut cleared = api.get(WEBHOOKS).await.expect("webhook configuration");
    if let Some(config) = cleared.data["webhooks"][0]["clientConfig"].as_object_mut() {
        config.remove("caBundle");
    }
    api.replace(WEBHOOKS, &PostParams::default(), &cleared)
        .await
        .expect("clear");
}

/// A re-apply by the chart that drops the bundle is corrected by the next publication.
#[tokio::test]
async fn a_bundle_the_chart_cleared_is_restored_by_the_next_publication() {
    let (client, ns, _shared, material, _) = publication("certs-restore").await;
    publish_for_the_service(&client, &ns, &material, "publish").await;

    clear_first_bundle::<ValidatingWebhookConfiguration>(&client).await;
    let fixed = publish_for_the_service(&client, &ns, &material, "fix").await;
    assert_eq!(
        fixed.updated,
        [format!("ValidatingWebhookConfiguration/{WEBHOOKS}")]
    );
}

/// Local mode: a publication switches every client config from the Service to a URL.
#[tokio::test]
async fn a_publication_can_switch_every_client_config_to_a_url() {
    let (client, ns, _shared, material, _) = publication("certs-switch").await;
    publish_for_the_service(&client, &ns, &material, "publish").await;

    let local = WebhookEndpoint::Url {
        base: "https://127.0.0.1:8443".into(),
    };
    publish_once(&client, &targets(local.clone()), &material)
        .await
        .expect("switch");
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd = crds.get(CRD).await.expect("crd");
    let cc = LiveConversion::of(&crd).client_config;
    assert_eq!(cc.url.as_deref(), Some("https://127.0.0.1:8443/convert"));
    assert!(cc.service.is_none());
    let mwcs: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    let mwc = mwcs.get(WEBHOOKS).await.expect("mwc");
    let entry = &mutating_entries(&mwc)[0].1;
    assert_eq!(entry.url.as_deref(), Some("https://127.0.0.1:8443/mutate"));
    assert!(entry.service.is_none());
    let settled = publish_once(&client, &targets(local), &material)
        .await
        .expect("settled");
    assert!(settled.updated.is_empty(), "{settled:?}");
}

#[tokio::test]
async fn the_publisher_loop_restores_a_cleared_bundle() {
    let (client, ns, _shared, material, bundle) = publication("certs-loop").await;
    let (_tx, rx) = watch::channel(material);
    let (ready_tx, mut ready) = watch::channel(false);
    let task = tokio::spawn(run_publisher(
        client.clone(),
        targets(service_endpoint("svc", &ns)),
        rx,
        Some(ready_tx),
    ));
    tokio::time::timeout(Duration::from_secs(20), ready.wait_for(|r| *r))
        .await
        .expect("published in time")
        .expect("open");

    clear_first_bundle::<MutatingWebhookConfiguration>(&client).await;
    let mwcs: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    eventually("the bundle back in the mutating webhook", async || {
        let mwc = mwcs.get(WEBHOOKS).await.ok()?;
        (mutating_entries(&mwc)[0].1.ca_bundle.as_deref() == Some(bundle.as_slice())).then_some(())
    })
    .await;
    task.abort();
}

#[tokio::test]
async fn the_maintainer_walks_a_ca_rotation_with_overlap() {
    let (client, ns) = fresh_namespace("certs-rotate").await;
    let lifetimes = Lifetimes {
        ca: Duration::from_secs(45),
        serving: Duration::from_secs(15),
        backdate: Duration::ZERO,
        overlap: Duration::from_secs(3),
    };
    let first = ensure_secret(&client, &ns, SECRET, &names(&ns), &lifetimes)
        .await
        .expect("create");
    let (tx, mut rx) = watch::channel(first.material.clone());
    let task = tokio::spawn(maintain_secret(
        client.clone(),
        certificate_secret(&ns, lifetimes, false),
        tx,
        None,
        None,
    ));
    let count = |pem: &str| pem.matches("BEGIN CERTIFICATE").count();
    let mut seen = vec![(
        count(first.material.ca_bundle_pem().expect("bundle")),
        first.material.clone(),
    )];
    let deadline = tokio::time::Instant::now() + Duration::from_secs(70);
    while tokio::time::Instant::now() < deadline {
        if tokio::time::timeout_at(deadline, rx.changed())
            .await
            .is_err()
        {
            break;
        }
        let m = rx.borrow_and_update().clone();
        let now = trustyai_certs::time::OffsetDateTime::now_utc();
        chains_to(
            m.cert_chain_pem().as_bytes(),
            m.ca_bundle_pem().expect("bundle").as_bytes(),
            now,
        )
        .expect("served material always chains to its bundle");
        // What the apiserver still has (the previous bundle) trusts the new leaf.
        let (_, previous) = seen.last().expect("seen");
        chains_to(
            m.cert_chain_pem().as_bytes(),
            previous.ca_bundle_pem().expect("bundle").as_bytes(),
            now,
        )
        .expect("the previous bundle trusts the new serving certificate");
        seen.push((count(m.ca_bundle_pem().expect("bundle")), m));
    }
    let counts: Vec<usize> = seen.iter().map(|(n, _)| *n).collect();
    let rotation = counts.windows(4).position(|w| w == [1, 2, 2, 1]);
    assert!(rotation.is_some(), "bundle sizes over time: {counts:?}");
    task.abort();
}
