//! The serving Secrets on the one apply path, against a scripted API server: when a Secret
//! costs no request, when it is read, and when it is issued again.

use http::Method;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use serde_json::{Value, json};
use trustyai_certs::generate::generate_ca;
use trustyai_certs::operand_ca::{DEFAULT_CA_SECRET, OperandTrust};
use trustyai_certs::operand_serving::{self, ISSUED_BY_ANNOTATION};
use trustyai_certs::secret_layout::{CA_CRT, CA_KEY, TLS_CRT, TLS_KEY};
use trustyai_certs::time::{Duration, OffsetDateTime};
use trustyai_certs::{CaCert, Lifetimes, ServiceNames};

use super::super::apply_tests::{Harness, owner};
use super::super::declaration::{Kind, Rendering};
use super::super::memory::fingerprint;
use super::super::rendered::KindApplied;
use super::super::wanted;
use super::{metadata, rendered};
use crate::controller::discovery::OptionalApis;
use crate::controller::mock_api::Expected;
use crate::controller::test_support::{NAMESPACE, pvc_instance, pvc_service};

const CA_SECRET: &str = "/api/v1/namespaces/operator-ns/secrets/trustyai-operator-operand-ca";
const TLS: &str = "/api/v1/namespaces/models/secrets/tas-tls";
const INTERNAL: &str = "/api/v1/namespaces/models/secrets/tas-internal";

/// The resourceVersion at which the watch shows the Secrets in these tests.
const SEEN: &str = "3";

/// Now, in whole seconds (certificates hold no more).
fn now() -> OffsetDateTime {
    OffsetDateTime::from_unix_timestamp(OffsetDateTime::now_utc().unix_timestamp()).expect("now")
}

/// An operand CA made 100 days ago (long before the certificates of these tests).
struct Ca {
    /// Its Secret.
    secret: Value,
    /// The trust it gives outside a rotation.
    trust: OperandTrust,
}

fn ca() -> Ca {
    let lifetimes = Lifetimes::default();
    let keyed = generate_ca(&lifetimes, now() - Duration::days(100)).expect("a CA");
    let cert = CaCert::parse(
        CA_CRT,
        keyed.cert_pem.as_bytes(),
        CA_KEY,
        keyed.key_pem.as_bytes(),
    )
    .expect("parses");
    let secret = Secret {
        data: Some(
            [(CA_CRT, keyed.cert_pem), (CA_KEY, keyed.key_pem)]
                .into_iter()
                .map(|(key, pem)| (key.to_owned(), ByteString(pem.into_bytes())))
                .collect(),
        ),
        ..Secret::default()
    };
    let mut secret = serde_json::to_value(secret).expect("encodes");
    secret["metadata"] = json!({"name": DEFAULT_CA_SECRET, "namespace": "operator-ns",
                                "resourceVersion": "1"});
    Ca {
        secret,
        trust: OperandTrust::new(cert, None, &lifetimes),
    }
}

/// A harness with every cache listed whose operand CA is `ca`, read (and then remembered),
/// expecting `steps` after that.
async fn harness(ca: &Ca, steps: impl IntoIterator<Item = Expected>) -> Harness {
    let read_ca = Expected::get(CA_SECRET, ca.secret.clone());
    let harness = Harness::listed(std::iter::once(read_ca).chain(steps));
    assert_eq!(trust(&harness).await.bundle_pem, ca.trust.bundle_pem);
    harness.api.clear();
    harness
}

/// The operand CA's trust, as the harness remembers it.
async fn trust(harness: &Harness) -> OperandTrust {
    harness
        .ctx
        .operand_ca
        .get(&harness.ctx.client)
        .await
        .expect("the operand CA")
}

async fn apply(harness: &Harness) -> KindApplied {
    let inputs = harness.inputs_wanting_istio(OptionalApis::default(), false);
    harness
        .apply_kind_with(&pvc_service(), Kind::Secret, inputs)
        .await
        .expect("applied")
}

/// The fingerprint of the Secret `name` rendered with `trust`.
fn rendering(name: &str, trust: &OperandTrust) -> u64 {
    let object = wanted(&rendered(&pvc_instance(), name, trust)).expect("encodes");
    fingerprint(&object.object).expect("encodes")
}

/// Remembers the Secret `name` as rendered with `trust`, left at [`SEEN`], standing until
/// `valid_until`; the watch shows both Secrets at [`SEEN`].
fn remember(harness: &Harness, name: &str, trust: &OperandTrust, valid_until: OffsetDateTime) {
    harness.ctx.children.applied.record(
        &owner(),
        Kind::Secret,
        name,
        rendering(name, trust),
        Some(SEEN),
        Some(valid_until),
    );
}

/// The watch shows both Secrets, `tas-tls` at `tls_version`, `tas-internal` at [`SEEN`].
fn watch_shows(harness: &Harness, tls_version: &str) {
    harness.cache_objects(
        Kind::Secret,
        [
            (secret_seen("tas-tls", tls_version), None),
            (secret_seen("tas-internal", SEEN), None),
        ],
    );
}

/// The Secret `name` as the watch shows it at `version` (metadata only).
fn secret_seen(name: &str, version: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": name, "namespace": NAMESPACE, "resourceVersion": version}})
}

/// Both Secrets remembered as applied with `ca`'s trust, `tas-tls` standing until `tls_until`
/// and `tas-internal` for long; the watch shows `tas-tls` at `tls_version`.
fn issued_before(harness: &Harness, ca: &Ca, tls_until: OffsetDateTime, tls_version: &str) {
    remember(harness, "tas-tls", &ca.trust, tls_until);
    remember(
        harness,
        "tas-internal",
        &ca.trust,
        now() + Duration::days(30),
    );
    watch_shows(harness, tls_version);
}

/// The Secret `tas-tls` issued at `at` by `trust`, as the API server shows it at [`SEEN`].
async fn tls_secret(trust: &OperandTrust, at: OffsetDateTime) -> Value {
    let names = ServiceNames::new("tas-tls", NAMESPACE);
    let issued = operand_serving::issue(trust, &names, &Lifetimes::default(), at)
        .await
        .expect("issued");
    let secret = operand_serving::reissued_secret(
        metadata(&pvc_instance(), "tas-tls"),
        issued.keyed,
        trust,
        None,
        at,
    );
    let mut value = serde_json::to_value(secret).expect("encodes");
    value["metadata"]["resourceVersion"] = json!(SEEN);
    value
}

/// The `(reason, note)` of the one event written.
fn the_event(harness: &Harness) -> (String, String) {
    let [event] = harness.api.event_notes().try_into().expect("one event");
    event
}

/// The bodies of the applies made.
fn applied_bodies(harness: &Harness) -> Vec<Value> {
    harness
        .api
        .requests()
        .into_iter()
        .filter(|r| r.method == Method::PATCH)
        .filter_map(|r| r.body)
        .collect()
}

/// The bytes under `key` of a Secret as JSON.
fn data(secret: &Value, key: &str) -> Vec<u8> {
    serde_json::from_value::<ByteString>(secret["data"][key].clone())
        .map(|b| b.0)
        .unwrap_or_default()
}

fn issuing_both() -> [Expected; 4] {
    [
        Expected::get_absent(TLS),
        Expected::apply(TLS),
        Expected::get_absent(INTERNAL),
        Expected::apply(INTERNAL),
    ]
}

#[tokio::test]
async fn absent_serving_secrets_are_issued() {
    let ca = ca();
    let harness = harness(&ca, issuing_both()).await;
    apply(&harness).await;
    let bodies = applied_bodies(&harness);
    assert_eq!(bodies.len(), 2);
    for secret in bodies {
        assert!(!data(&secret, TLS_CRT).is_empty() && !data(&secret, TLS_KEY).is_empty());
        assert_eq!(data(&secret, CA_CRT), ca.trust.bundle_pem.as_bytes());
        assert_eq!(
            secret["metadata"]["annotations"][ISSUED_BY_ANNOTATION],
            "trustyai-operator"
        );
    }
    let (reason, note) = the_event(&harness);
    assert_eq!(reason, "ChildrenChanged");
    assert!(
        note.contains("certificate Secret tas-tls (absent)")
            && note.contains("certificate Secret tas-internal (absent)"),
        "{note}"
    );
}

#[tokio::test]
async fn issued_serving_secrets_are_due_after_two_thirds_of_their_lifetime() {
    let ca = ca();
    let harness = harness(&ca, issuing_both()).await;
    let due = apply(&harness).await.due.expect("when they are due");
    let expected = now() + Duration::days(60);
    assert!((due - expected).abs() < Duration::hours(1), "{due}");
}

#[tokio::test]
async fn serving_secrets_as_issued_cost_no_request_while_current() {
    let ca = ca();
    let harness = harness(&ca, issuing_both()).await;
    let first = apply(&harness).await;
    harness.api.clear();
    // The applies wrote their answers (metadata only) through to the Secret cache.
    let again = apply(&harness).await;
    assert_eq!(harness.api.calls(), Vec::<String>::new());
    assert!(harness.api.events().is_empty());
    assert_eq!(again.due, first.due);
}

#[tokio::test]
async fn a_serving_secret_remembered_as_current_costs_no_request() {
    let ca = ca();
    let harness = harness(&ca, []).await;
    issued_before(&harness, &ca, now() + Duration::days(30), SEEN);
    apply(&harness).await;
    assert_eq!(harness.api.calls(), Vec::<String>::new());
}

#[tokio::test]
async fn a_serving_secret_due_is_issued_again() {
    let ca = ca();
    // Issued 80 of its 90 days ago: past two thirds of its lifetime, and remembered so.
    let live = tls_secret(&ca.trust, now() - Duration::days(80)).await;
    let harness = harness(&ca, [Expected::get(TLS, live), Expected::apply(TLS)]).await;
    issued_before(&harness, &ca, now() - Duration::seconds(1), SEEN);
    apply(&harness).await;
    assert_eq!(
        harness.api.calls(),
        vec![format!("GET {TLS}"), format!("PATCH {TLS}")]
    );
    assert_eq!(
        the_event(&harness),
        (
            "CertificateIssued".to_owned(),
            "Issued: certificate Secret tas-tls (due for renewal).".to_owned()
        )
    );
}

#[tokio::test]
async fn a_serving_secret_of_another_operand_ca_is_issued_again() {
    let (before, ca) = (self::ca(), self::ca());
    let live = tls_secret(&before.trust, now() - Duration::days(1)).await;
    let harness = harness(&ca, [Expected::get(TLS, live), Expected::apply(TLS)]).await;
    // Both were applied when the trust was `before`'s: the rendering holds another bundle now.
    issued_before(&harness, &before, now() + Duration::days(30), SEEN);
    remember(
        &harness,
        "tas-internal",
        &ca.trust,
        now() + Duration::days(30),
    );
    apply(&harness).await;
    assert_eq!(
        harness.api.calls(),
        vec![format!("GET {TLS}"), format!("PATCH {TLS}")]
    );
    let [issued] = applied_bodies(&harness).try_into().expect("one apply");
    // The CA of the certificate pods still serve stays in the bundle for the overlap.
    assert!(data(&issued, CA_CRT).starts_with(ca.trust.bundle_pem.as_bytes()));
    let (reason, _) = the_event(&harness);
    assert_eq!(reason, "CertificateIssued");
}

#[tokio::test]
async fn a_serving_secret_broken_by_someone_else_is_issued_again() {
    let ca = ca();
    let mut live = tls_secret(&ca.trust, now() - Duration::days(1)).await;
    live["data"][TLS_KEY] = json!("");
    live["metadata"]["resourceVersion"] = json!("4");
    let harness = harness(&ca, [Expected::get(TLS, live), Expected::apply(TLS)]).await;
    // The watch shows it at a version the last apply did not leave.
    issued_before(&harness, &ca, now() + Duration::days(30), "4");
    apply(&harness).await;
    assert_eq!(
        harness.api.calls(),
        vec![format!("GET {TLS}"), format!("PATCH {TLS}")]
    );
    let [issued] = applied_bodies(&harness).try_into().expect("one apply");
    assert!(!data(&issued, TLS_KEY).is_empty());
}

#[tokio::test]
async fn a_serving_secret_changed_by_someone_else_but_still_good_is_read_once() {
    let ca = ca();
    let mut live = tls_secret(&ca.trust, now() - Duration::days(1)).await;
    live["metadata"]["labels"] = json!({"team": "models"});
    live["metadata"]["resourceVersion"] = json!("4");
    let harness = harness(&ca, [Expected::get(TLS, live)]).await;
    issued_before(&harness, &ca, now() + Duration::days(30), "4");
    apply(&harness).await;
    assert_eq!(harness.api.calls(), vec![format!("GET {TLS}")]);
    assert!(harness.api.events().is_empty());
    harness.api.clear();
    // Remembered at the version read.
    apply(&harness).await;
    assert_eq!(harness.api.calls(), Vec::<String>::new());
}

#[tokio::test]
async fn a_serving_secret_made_by_someone_else_is_left_alone() {
    let ca = ca();
    let mut live = tls_secret(&ca.trust, now() - Duration::days(1)).await;
    live["metadata"]["annotations"] = json!({});
    let harness = harness(&ca, [Expected::get(TLS, live.clone())]).await;
    remember(
        &harness,
        "tas-internal",
        &ca.trust,
        now() + Duration::days(30),
    );
    watch_shows(&harness, SEEN);
    let applied = apply(&harness).await;
    assert_eq!(harness.api.calls(), vec![format!("GET {TLS}")]);
    assert!(harness.api.events().is_empty());
    // Only the other Secret is due: the foreign one is not remembered, and read again.
    assert!(
        applied
            .due
            .is_some_and(|due| due > now() + Duration::days(29))
    );
}

/// The Secrets' rendering for the PVC-mode instance, on a harness whose operand CA is `ca`.
async fn render_secrets(ca: &Ca) -> (Harness, Rendering) {
    let harness = harness(ca, []).await;
    let inputs = harness.inputs_wanting_istio(OptionalApis::default(), false);
    let rendering = Kind::Secret
        .declaration()
        .applying
        .render
        .render(&harness.ctx, &pvc_instance(), &inputs)
        .await
        .expect("rendered");
    (harness, rendering)
}

#[tokio::test]
async fn the_rendering_says_when_the_operand_ca_changes() {
    let (harness, rendering) = render_secrets(&ca()).await;
    assert_eq!(
        rendering.changes_at,
        Some(trust(&harness).await.changes_at())
    );
}

#[tokio::test]
async fn the_rendered_secrets_carry_the_trust_bundle_but_no_certificate() {
    let ca = ca();
    let (_harness, rendering) = render_secrets(&ca).await;
    let names: Vec<String> = rendering
        .wanted
        .iter()
        .map(|w| w.object.metadata.name.clone().unwrap_or_default())
        .collect();
    assert_eq!(names, ["tas-tls", "tas-internal"]);
    for wanted in &rendering.wanted {
        let secret = serde_json::to_value(&wanted.object).expect("encodes");
        assert_eq!(data(&secret, CA_CRT), ca.trust.bundle_pem.as_bytes());
        assert!(
            data(&secret, TLS_CRT).is_empty(),
            "issued only by adapt_to_live"
        );
    }
}

#[tokio::test]
async fn rendering_the_secrets_costs_no_request() {
    let (harness, _rendering) = render_secrets(&ca()).await;
    assert_eq!(harness.api.calls(), Vec::<String>::new());
}

/// Credentials are never deleted while their TrustyAIService exists: a Secret of its own that
/// it no longer renders stays (the every-kind tests assert the other kinds' lifecycles).
#[tokio::test]
async fn a_secret_of_its_own_no_longer_rendered_is_kept() {
    let ca = ca();
    let harness = harness(&ca, []).await;
    issued_before(&harness, &ca, now() + Duration::days(30), SEEN);
    harness.cache_objects(
        Kind::Secret,
        [
            (secret_seen("tas-tls", SEEN), None),
            (secret_seen("tas-internal", SEEN), None),
            (secret_seen("tas-former", SEEN), Some(owner())),
        ],
    );
    apply(&harness).await;
    assert_eq!(harness.api.calls(), Vec::<String>::new());
}
