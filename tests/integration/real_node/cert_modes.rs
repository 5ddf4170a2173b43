//! The chart's `existingSecret` certificate mode, served from the operator's pods: the admin's
//! own CA and serving certificate, mounted from their Secret; the operator puts that CA into the
//! registrations and the CRD, and the API server reaches the webhooks with it.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ObjectMeta, PostParams};
use trustyai_certs::generate::{generate_ca, issue_serving};
use trustyai_certs::lifetimes::Lifetimes;
use trustyai_certs::material::CaCert;
use trustyai_certs::names::ServiceNames;

use super::release::{NAMESPACE, RELEASE, TIMEOUT, forget_release, installed, two_ready};
use crate::support::cluster::{minimal_spec, tas, tas_api};
use crate::support::helm::{chart_dir, helm};
use crate::support::wait;

/// The chart's webhook Service for the release.
const WEBHOOK_SERVICE: &str = "trustyai-trustyai-operator-webhook";
const SECRET: &str = "admin-webhook-tls";

/// A kubernetes.io/tls Secret with `tls.crt`, `tls.key` and `ca.crt`: a new CA and a serving
/// certificate it signed for the webhook Service's names. Returns the CA's PEM.
async fn admin_secret(client: &kube::Client) -> String {
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
            name: Some(SECRET.into()),
            ..ObjectMeta::default()
        },
        type_: Some("kubernetes.io/tls".into()),
        data: Some(data),
        ..Secret::default()
    };
    Api::<Secret>::namespaced(client.clone(), NAMESPACE)
        .create(&PostParams::default(), &secret)
        .await
        .expect("the admin's Secret");
    ca.cert_pem
}

#[tokio::test]
async fn an_existing_secret_serves_the_webhooks_from_the_pods() {
    let (_claim, cp) = installed(true).await;
    let client = cp.client().await;
    let ca = admin_secret(&client).await;
    let chart = chart_dir();
    let (ok, out, err) = tokio::task::spawn_blocking(move || {
        helm(
            Some(cp),
            &[
                "upgrade",
                RELEASE,
                chart.to_str().expect("path"),
                "--namespace",
                NAMESPACE,
                "--reuse-values",
                "--set",
                "certs.mode=existingSecret",
                "--set",
                &format!("certs.existingSecret={SECRET}"),
            ],
        )
    })
    .await
    .expect("helm ran");
    assert!(ok, "helm upgrade: {out}{err}");
    // The CRD's conversion webhook trusts the admin's CA once a pod of the new release has
    // published it.
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    wait::until_showing(
        "the admin's CA in the CRD",
        TIMEOUT,
        || cp.logs(),
        async || {
            let crd = crds
                .get("trustyaiservices.trustyai.opendatahub.io")
                .await
                .ok()?;
            let bundle = crd.spec.conversion?.webhook?.client_config?.ca_bundle?;
            (String::from_utf8_lossy(&bundle.0).trim() == ca.trim()).then_some(())
        },
    )
    .await;
    let pods = Api::namespaced(client.clone(), NAMESPACE);
    two_ready(cp, &pods, None).await;
    // Conversion, defaulting and validation, through the Service, with that CA.
    let ns = cp.namespace(&client, "existing-secret").await;
    let api = tas_api(&client, &ns, "v1alpha1");
    wait::until_showing(
        "the webhooks answering with the admin's certificate",
        TIMEOUT,
        || cp.logs(),
        async || {
            api.create(
                &PostParams::default(),
                &tas("v1alpha1", "admin-ca", minimal_spec()),
            )
            .await
            .ok()
        },
    )
    .await;
    // The next test installs the release as usual.
    forget_release().await;
    let (ok, out, err) = tokio::task::spawn_blocking(move || {
        helm(
            Some(cp),
            &["uninstall", RELEASE, "--namespace", NAMESPACE, "--wait"],
        )
    })
    .await
    .expect("helm ran");
    assert!(ok, "helm uninstall: {out}{err}");
}
