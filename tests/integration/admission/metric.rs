//! TrustyAIMetric through the real API server and the operator's webhooks: an invalid metric is
//! refused with every field error and its path, a deprecated type name is replaced with a
//! warning, and a valid metric is stored as sent. One behaviour per test; each starts its own
//! operator, holding the concern's control plane exclusively (the registrations are
//! cluster-wide).

use crate::support;
use support::control_planes::{self, Concern};

use std::time::Duration;

use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PostParams};
use kube::core::Status;
use serde_json::{Value, json};
use support::cluster::MUTATING_WEBHOOK;
use support::operator::Operator;

use super::{assert_invalid, cause_fields, start_operator};

/// How long the API server may take to serve the CRD the operator applied at start.
const SERVED: Duration = Duration::from_secs(30);

fn metric_api(client: &Client, ns: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("trustyai.opendatahub.io", "v1alpha1", "TrustyAIMetric");
    Api::namespaced_with(
        client.clone(),
        ns,
        &ApiResource::from_gvk_with_plural(&gvk, "trustyaimetrics"),
    )
}

fn metric(name: &str, spec: Value) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "trustyai.opendatahub.io/v1alpha1",
        "kind": "TrustyAIMetric",
        "metadata": {"name": name},
        "spec": spec,
    }))
    .expect("a TrustyAIMetric")
}

/// The README's example: the statistical parity difference of `demo-model`.
fn spd() -> Value {
    json!({
        "model": "demo-model", "type": "spd", "protectedAttribute": "gender",
        "privilegedValue": 1, "unprivilegedValue": 0, "outcomeName": "income",
        "favorableOutcome": 1, "thresholdDelta": 0.1, "batchSize": 100
    })
}

/// Creates `object` through `api`, retrying while the API server does not serve the kind yet
/// (404: the CRD was applied at the operator's start); the first other answer is returned.
async fn create(
    api: &Api<DynamicObject>,
    object: &DynamicObject,
) -> Result<DynamicObject, kube::Error> {
    support::wait::until(
        "the TrustyAIMetric kind to be served",
        SERVED,
        async || match api.create(&PostParams::default(), object).await {
            Err(kube::Error::Api(status)) if status.code == 404 => None,
            other => Some(other),
        },
    )
    .await
}

fn refusal(result: Result<DynamicObject, kube::Error>, what: &str) -> Status {
    super::refusal(result, what)
}

/// The operator serving admission, in a namespace of the concern's control plane taken
/// exclusively; the claim must outlive the test's requests.
async fn serving() -> (control_planes::Start, Operator) {
    let start = control_planes::exclusive_namespace(Concern::Admission, "metric").await;
    let operator = {
        let (_, cp, client, ns) = &start;
        start_operator(cp, client, ns).await
    };
    (start, operator)
}

#[tokio::test]
async fn an_invalid_metric_is_refused_with_every_field_error() {
    let (start, mut operator) = serving().await;
    let (_, _, client, ns) = &start;
    let api = metric_api(client, ns);
    // A fairness metric without its group parameters, with an empty model and a batch of 0.
    let spec = json!({"model": "", "type": "spd", "batchSize": 0});
    let status = refusal(
        create(&api, &metric("bad", spec)).await,
        "an invalid metric",
    );
    assert_invalid(
        &status,
        &[
            &format!("admission webhook \"{MUTATING_WEBHOOK}\" denied the request"),
            r#"TrustyAIMetric.trustyai.opendatahub.io "bad" is invalid"#,
            "spec.model: Required value",
            "spec.batchSize: Invalid value: 0: must be at least 1",
        ],
        "every error at once",
    );
    let mut fields = cause_fields(&status);
    fields.sort();
    assert_eq!(
        fields,
        [
            "spec.batchSize",
            "spec.favorableOutcome",
            "spec.model",
            "spec.outcomeName",
            "spec.privilegedValue",
            "spec.protectedAttribute",
            "spec.unprivilegedValue",
        ],
        "one cause per field: {status:?}"
    );
    assert!(api.get_opt("bad").await.expect("get").is_none());
    operator.stop_cleanly();
}

#[tokio::test]
async fn a_deprecated_type_is_replaced_with_a_warning() {
    let (start, mut operator) = serving().await;
    let (_, cp, client, ns) = &start;
    let api = metric_api(client, ns);
    // kube's client does not hand warnings back: kubectl prints them, as a CR author sees them.
    let created = create(
        &api,
        &metric("alias", json!({"model": "demo-model", "type": "meanshift"})),
    )
    .await
    .expect("an alias is admitted");
    assert_eq!(created.data["spec"]["type"], "comparemeans", "{created:?}");
    let manifest = r#"{"apiVersion": "trustyai.opendatahub.io/v1alpha1", "kind": "TrustyAIMetric",
        "metadata": {"name": "alias-kubectl"}, "spec": {"model": "demo-model", "type": "fouriermmd"}}"#;
    let (ok, _, stderr) = cp.kubectl(&["apply", "-n", ns, "-f", "-"], Some(manifest));
    assert!(ok, "kubectl apply: {stderr}");
    let warning = stderr
        .lines()
        .find(|l| l.starts_with("Warning: spec.type: "))
        .unwrap_or_default();
    assert!(
        warning.contains("\"fouriermmd\"") && warning.contains("\"mmd\""),
        "the warning names the field, the old and the new name: {stderr}"
    );
    let stored = api.get("alias-kubectl").await.expect("stored");
    assert_eq!(stored.data["spec"]["type"], "mmd");
    operator.stop_cleanly();
}

#[tokio::test]
async fn a_valid_metric_is_stored_as_sent() {
    let (start, mut operator) = serving().await;
    let (_, _, client, ns) = &start;
    let api = metric_api(client, ns);
    create(&api, &metric("gender-spd", spd()))
        .await
        .expect("a valid metric is admitted");
    let stored = api.get("gender-spd").await.expect("stored");
    assert_eq!(stored.data["spec"], spd());
    operator.stop_cleanly();
}
