//! Admission through the real API server, with the operator binary serving the webhooks: what a
//! CR author sees at `kubectl apply` time.
//!
//! - `create`: refusals name every violated field at once, for rules only the webhook knows
//!   (CEL in the CRD catches others first, before the webhook is asked); defaults are stored;
//!   v1alpha1 objects are converted, defaulted and validated; `--dry-run=server` gives the same
//!   answer and stores nothing;
//! - `updates`: updates follow the immutability rules;
//! - `warnings`: warnings reach the client, including the missing-Secret warning from the
//!   operator's cache, and kubectl prints the field errors;
//! - `ratcheting`: objects stored before the webhooks existed stay updatable and deletable;
//! - `metric`: TrustyAIMetric: every field error at once, a deprecated type replaced with a
//!   warning, a valid metric stored (one test per behaviour, each with its own operator).
//!
//! One operator serves many checks; each test holds this concern's control plane exclusively
//! while it runs, because the webhook registrations are cluster-wide.

mod create;
mod metric;
mod ratcheting;
mod updates;
mod warnings;

use crate::support;
use support::control_planes::{self, Concern};

use std::time::Instant;

use kube::Client;
use kube::api::{Api, DynamicObject, Patch};
use kube::core::Status;
use serde_json::{Value, json};
use support::ControlPlane;
use support::cluster::{merge_patch, start_serving_webhooks};
use support::operator::Operator;
use support::samples::minimal as pvc_spec;

fn db_spec() -> Value {
    json!({"storage": {"format": "DATABASE"}, "metrics": {"schedule": "5s"}})
}

/// The API server's refusal, or a panic naming what happened instead.
fn refusal<T: std::fmt::Debug>(result: Result<T, kube::Error>, what: &str) -> Status {
    match result {
        Err(kube::Error::Api(status)) => *status,
        Err(other) => panic!("{what}: expected a refusal from the API server, got {other}"),
        Ok(object) => panic!("{what}: expected a refusal, but it was admitted: {object:?}"),
    }
}

/// The API server's refusal of a merge patch of `name` with `patch` through `api`, or a panic
/// naming what happened instead.
async fn refused_patch(api: &Api<DynamicObject>, name: &str, patch: Value, what: &str) -> Status {
    refusal(merge_patch(api, name, patch).await, what)
}

/// [`refused_patch`] checked with [`assert_invalid`]: the refusal, for more checks.
async fn assert_patch_refused(
    api: &Api<DynamicObject>,
    name: &str,
    patch: Value,
    expected: &[&str],
    what: &str,
) -> Status {
    let status = refused_patch(api, name, patch, what).await;
    assert_invalid(&status, expected, what);
    status
}

/// Asserts that `status` is a 422 Invalid whose message carries every one of `expected`.
fn assert_invalid(status: &Status, expected: &[&str], what: &str) {
    assert_eq!(status.code, 422, "{what}: {status:?}");
    assert_eq!(status.reason, "Invalid", "{what}: {status:?}");
    for text in expected {
        assert!(
            status.message.contains(text),
            "{what}: {text:?} missing in {:?}",
            status.message
        );
    }
}

fn cause_fields(status: &Status) -> Vec<String> {
    status
        .details
        .as_ref()
        .map(|d| d.causes.iter().map(|c| c.field.clone()).collect())
        .unwrap_or_default()
}

fn json_patch(value: Value) -> Patch<Value> {
    Patch::Json(serde_json::from_value(value).expect("a JSON patch"))
}

/// Starts the operator with its webhook registrations and waits until the API server calls
/// them.
async fn start_operator(cp: &ControlPlane, client: &Client, ns: &str) -> Operator {
    let started = Instant::now();
    let operator = start_serving_webhooks(cp, client, ns, &[]).await;
    eprintln!("operator serving admission after {:?}", started.elapsed());
    operator
}

#[tokio::test]
async fn admission_through_the_api_server() {
    let (_claim, cp, client, ns) =
        control_planes::exclusive_namespace(Concern::Admission, "admission").await;
    let started = Instant::now();
    let mut operator = start_operator(cp, &client, &ns).await;

    create::refusals_name_every_field(&client, &ns).await;
    create::defaults_are_stored(&client, &ns).await;
    create::v1alpha1_is_converted_defaulted_and_validated(&client, &ns).await;
    create::dry_run_answers_the_same_and_stores_nothing(&client, &ns).await;
    updates::updates_follow_the_immutability_rules(&client, &ns).await;
    warnings::warnings_reach_kubectl(cp, &client, &ns).await;
    warnings::kubectl_apply_prints_the_field_errors(cp, &ns);

    operator.stop_cleanly();
    eprintln!("admission checks took {:?}", started.elapsed());
}
