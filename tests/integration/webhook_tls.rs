//! The HTTPS server and the operator's own TLS, through the real API server: the API server
//! calls conversion and admission using only the caBundle the operator injected; a cleared
//! bundle comes back; certificates rotate under load without a failed request; two replicas
//! starting together share one CA.

use crate::support;
use support::control_planes::{self, Concern};

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use rustls::pki_types::pem::PemObject;
use serde_json::json;
use support::cluster::{
    create_through_v1alpha1, create_with_disallowed_image, merge_patch, minimal_spec, secret_field,
    start_serving_webhooks, tas, tas_api, wait_for_published_bundle, wait_for_webhooks_served,
};
use support::operator::Operator;
use support::wait;

const VWC: &str = trustyai_operator::cli::default_names::VALIDATING_WEBHOOK_CONFIGURATION;

#[tokio::test]
async fn api_server_reaches_the_webhooks_with_the_injected_bundle() {
    let (_claim, cp, client, ns) =
        control_planes::exclusive_namespace(Concern::WebhookTls, "tls").await;
    let mut operator = start_serving_webhooks(cp, &client, &ns, &[]).await;

    // v1alpha1 in, v1 stored: the API server must call /convert; and /mutate defaults the spec.
    let stored = create_through_v1alpha1(&client, &ns, "through-alpha", minimal_spec()).await;
    assert_eq!(
        stored.data["spec"]["replicas"], 1,
        "defaulted by /mutate: {:?}",
        stored.data
    );
    assert_eq!(stored.data["spec"]["storage"]["retention"], "Retain");

    // /validate: a rule CEL does not carry (allowed image prefixes).
    let err = create_with_disallowed_image(&client, &ns, "denied").await;
    let text = err.to_string();
    assert!(
        text.contains("spec.image") && text.contains("quay.io/trustyai/"),
        "{text}"
    );

    operator.stop_cleanly();
}

#[tokio::test]
async fn a_cleared_ca_bundle_is_restored() {
    let (_claim, cp, client, ns) =
        control_planes::exclusive_namespace(Concern::WebhookTls, "cleared").await;
    let mut operator = Operator::start(cp, &ns, &["--create-webhook-configurations"]);
    operator.wait_ready(Duration::from_secs(60));
    wait_for_published_bundle(&client, &ns, &operator).await;

    let vwcs: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    let clear: json_patch::Patch = serde_json::from_value(
        json!([{"op": "remove", "path": "/webhooks/0/clientConfig/caBundle"}]),
    )
    .expect("patch");
    vwcs.patch(VWC, &PatchParams::default(), &Patch::<()>::Json(clear))
        .await
        .expect("cleared");
    let cleared_at = Instant::now();
    wait_for_published_bundle(&client, &ns, &operator).await;
    eprintln!(
        "caBundle restored {:?} after it was cleared",
        cleared_at.elapsed()
    );
    assert!(
        cleared_at.elapsed() < Duration::from_secs(30),
        "restored, but only after {:?}",
        cleared_at.elapsed()
    );
    wait_for_webhooks_served(&client, &ns, &operator).await;

    tas_api(&client, &ns, "v1")
        .create(
            &PostParams::default(),
            &tas("v1", "after-restore", minimal_spec()),
        )
        .await
        .expect("admission works again");
    assert!(operator.stop().success());
}

#[tokio::test]
async fn certificates_rotate_under_load_without_a_failed_request() {
    let (_claim, cp, client, ns) =
        control_planes::exclusive_namespace(Concern::WebhookTls, "rotate").await;
    let mut operator = start_serving_webhooks(
        cp,
        &client,
        &ns,
        &[
            "--serving-cert-lifetime",
            "30s",
            "--ca-lifetime",
            "90s",
            "--ca-overlap",
            "15s",
        ],
    )
    .await;

    // The serving certificate is renewed about every 20 s. The CA rotates at two thirds of its
    // lifetime (about 60 s in); the serving certificate moves onto the new CA one overlap later
    // by the clock, so the overlap is all the time the API server gets to load the bundle
    // holding both CAs. After one more overlap the previous CA leaves (about 90 s in); the load
    // runs until a little after that.
    let mut seen = UnderLoad::new(&client, &ns);
    // Until the rotation has been over for 3 s; one that never ends fails below, with the counts.
    let _ = wait::within(Duration::from_secs(110), async || {
        seen.send_requests().await;
        seen.read_secret().await;
        seen.rotated_at
            .is_some_and(|at| at.elapsed() >= Duration::from_secs(3))
            .then_some(())
    })
    .await;
    eprintln!(
        "{} requests in {:?}, {} serving certificates, {} CA bundles seen",
        seen.requests,
        seen.started.elapsed(),
        seen.serving.len(),
        seen.cas.len()
    );
    assert!(
        seen.failures.is_empty(),
        "{} of {} requests failed:\n{}\n{}",
        seen.failures.len(),
        seen.requests,
        seen.failures.join("\n"),
        operator.logs()
    );
    assert!(
        seen.serving.len() >= 3,
        "expected several serving-certificate renewals, saw {}:\n{}",
        seen.serving.len(),
        operator.logs()
    );
    assert!(
        seen.cas.len() >= 2,
        "expected a CA rotation, saw {} bundles:\n{}",
        seen.cas.len(),
        operator.logs()
    );
    assert!(
        seen.rotated_at.is_some(),
        "the CA rotation did not complete within {:?} (ca-previous.crt seen: {}):\n{}",
        seen.started.elapsed(),
        seen.previous_ca_seen,
        operator.logs()
    );
    assert!(operator.stop().success());
}

/// What [`certificates_rotate_under_load_without_a_failed_request`] sends and sees: requests
/// through both versions (so through every webhook) and the certificates in the operator's
/// Secret, round after round.
struct UnderLoad<'a> {
    client: &'a kube::Client,
    ns: &'a str,
    v1: Api<kube::api::DynamicObject>,
    v1alpha1: Api<kube::api::DynamicObject>,
    started: Instant,
    rounds: u32,
    requests: u32,
    failures: Vec<String>,
    serving: BTreeSet<Vec<u8>>,
    cas: BTreeSet<Vec<u8>>,
    previous_ca_seen: bool,
    /// When `ca-previous.crt` went again, after it was seen: the rotation's end.
    rotated_at: Option<Instant>,
}

impl<'a> UnderLoad<'a> {
    fn new(client: &'a kube::Client, ns: &'a str) -> Self {
        UnderLoad {
            client,
            ns,
            v1: tas_api(client, ns, "v1"),
            v1alpha1: tas_api(client, ns, "v1alpha1"),
            started: Instant::now(),
            rounds: 0,
            requests: 0,
            failures: Vec::new(),
            serving: BTreeSet::new(),
            cas: BTreeSet::new(),
            previous_ca_seen: false,
            rotated_at: None,
        }
    }

    /// A create, a read and a patch of a new object, and a list; each failure recorded.
    async fn send_requests(&mut self) {
        self.rounds += 1;
        let name = format!("load-{}", self.rounds);
        let results = [
            self.v1alpha1
                .create(
                    &PostParams::default(),
                    &tas("v1alpha1", &name, minimal_spec()),
                )
                .await
                .map(|_| ()),
            self.v1alpha1.get(&name).await.map(|_| ()),
            merge_patch(&self.v1, &name, json!({"spec": {"replicas": 2}}))
                .await
                .map(|_| ()),
            self.v1alpha1.list(&ListParams::default()).await.map(|_| ()),
        ];
        for r in results {
            self.requests += 1;
            if let Err(e) = r {
                self.failures
                    .push(format!("{:?}: {e}", self.started.elapsed()));
            }
        }
    }

    /// The serving certificate and CA of the moment, and whether a previous CA is still kept.
    async fn read_secret(&mut self) {
        let (client, ns) = (self.client, self.ns);
        if let Some(cert) = secret_field(client, ns, "tls.crt").await {
            self.serving.insert(cert);
        }
        if let Some(ca) = secret_field(client, ns, "ca.crt").await {
            self.cas.insert(ca);
        }
        let previous_ca = secret_field(client, ns, "ca-previous.crt").await.is_some();
        self.previous_ca_seen |= previous_ca;
        if self.previous_ca_seen && !previous_ca && self.rotated_at.is_none() {
            self.rotated_at = Some(Instant::now());
        }
    }
}

#[tokio::test]
async fn two_replicas_starting_together_share_one_ca() {
    let (_claim, cp, client, ns) =
        control_planes::exclusive_namespace(Concern::WebhookTls, "two").await;
    let (port_a, port_b) = (
        support::operator::free_port(),
        support::operator::free_port(),
    );
    // A replica is ready once it has published the CA, which needs the CRD and the
    // registrations to exist, whatever earlier tests left. The CRD is applied here rather than
    // by the replicas, so that their start is only what this test is about: both finding no
    // certificate Secret at once.
    trustyai_operator::crd_maintenance::apply_crd(&client)
        .await
        .expect("CRD applied");
    let url = format!("https://127.0.0.1:{port_a}");
    let flags = [
        "--webhook-url",
        url.as_str(),
        "--no-crd-maintenance",
        "--create-webhook-configurations",
    ];
    let (mut a, mut b) = std::thread::scope(|s| {
        let a = s.spawn(|| {
            Operator::launch(cp, &ns, &flags)
                .webhook_port(port_a)
                .start()
        });
        let b = s.spawn(|| {
            Operator::launch(cp, &ns, &flags)
                .webhook_port(port_b)
                .start()
        });
        (a.join().expect("start a"), b.join().expect("start b"))
    });
    a.wait_ready(Duration::from_secs(60));
    b.wait_ready(Duration::from_secs(60));

    let ca = secret_field(&client, &ns, "ca.crt").await.expect("ca.crt");
    let cas: Vec<_> = rustls::pki_types::CertificateDer::pem_slice_iter(&ca)
        .collect::<Result<_, _>>()
        .expect("PEM");
    assert_eq!(cas.len(), 1, "one CA in the Secret");
    let connector = support::cluster::tls_connector(&ca);
    for port in [port_a, port_b] {
        let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .expect("connect");
        let name = rustls::pki_types::ServerName::try_from("127.0.0.1").expect("name");
        connector.connect(name, tcp).await.unwrap_or_else(|e| {
            panic!("replica on port {port} does not chain to the shared CA: {e}")
        });
    }
    assert!(a.stop().success());
    assert!(b.stop().success());
}
