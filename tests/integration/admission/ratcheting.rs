//! Objects stored before the webhooks existed (the Go operator validated nothing) ratchet: they
//! stay updatable and deletable, held only to the rules of the fields a change touches.

use crate::support;
use support::control_planes::{self, Concern};

use std::time::{Duration, Instant};

use kube::Client;
use kube::api::{Api, DeleteParams, DynamicObject, PatchParams, PostParams};
use serde_json::{Value, json};
use support::cluster::{
    MUTATING_WEBHOOK, create_when_served, failed_calling_webhook, merge_patch,
    remove_webhook_registrations, set_finalizers, tas, tas_api,
};
use support::wait;

use super::{assert_invalid, assert_patch_refused, json_patch, refusal, start_operator};

/// A finalizer only these tests manage, so no controller ever removes it for them.
const TEST_FINALIZER: &str = "tests.trustyai.opendatahub.io/hold";

#[tokio::test]
async fn legacy_objects_ratchet() {
    let (_claim, cp, client, ns) =
        control_planes::exclusive_namespace(Concern::Admission, "legacy").await;
    let started = Instant::now();
    let api = tas_api(&client, &ns, "v1");

    store_a_legacy_object(&client, &api).await;
    let mut operator = start_operator(cp, &client, &ns).await;
    the_legacy_spec_is_refused_for_a_new_object(&api).await;
    metadata_only_changes_are_allowed(&api).await;
    a_change_is_held_only_to_its_own_fields_rules(&api).await;
    a_deletion_with_a_finalizer_completes(&api).await;

    operator.stop_cleanly();
    eprintln!("ratcheting checks took {:?}", started.elapsed());
}

/// Valid by the schema and CEL, invalid by today's webhook rules.
fn legacy_spec() -> Value {
    json!({
        "image": "docker.io/legacy/trustyai:1",
        "storage": {"format": "PVC"},
        "metrics": {"schedule": "500ms"}
    })
}

/// An object `legacy` stored before the webhooks existed (the Go operator validated nothing):
/// the schema and CEL accept it, but today's webhook rules do not.
async fn store_a_legacy_object(client: &Client, api: &Api<DynamicObject>) {
    remove_webhook_registrations(client).await;
    trustyai_operator::crd_maintenance::apply_crd(client)
        .await
        .expect("CRD applied");
    // The API server drops removed registrations after a moment; until then it still calls the
    // webhook it knew, whose operator is gone.
    let legacy = tas("v1", "legacy", legacy_spec());
    create_when_served(api, &legacy, failed_calling_webhook)
        .await
        .unwrap_or_else(|e| {
            panic!("storing the legacy object while no webhook is registered: {e}")
        });
    let stored = api.get("legacy").await.expect("stored");
    assert!(
        stored.data["spec"].get("replicas").is_none(),
        "no mutating webhook was involved: {:?}",
        stored.data
    );
}

/// The same spec is refused for a new object today.
async fn the_legacy_spec_is_refused_for_a_new_object(api: &Api<DynamicObject>) {
    let status = refusal(
        api.create(
            &PostParams {
                dry_run: true,
                ..PostParams::default()
            },
            &tas("v1", "legacy-copy", legacy_spec()),
        )
        .await,
        "a new object with the legacy spec",
    );
    assert_invalid(
        &status,
        &["spec.image", "spec.metrics.schedule"],
        "legacy spec on create",
    );
}

/// Metadata-only changes are allowed: a label, a finalizer added and removed.
async fn metadata_only_changes_are_allowed(api: &Api<DynamicObject>) {
    let labelled = merge_patch(
        api,
        "legacy",
        json!({"metadata": {"labels": {"team": "a"}}}),
    )
    .await
    .expect("adding a label");
    assert_eq!(
        labelled
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("team"))
            .map(String::as_str),
        Some("a")
    );
    assert_eq!(
        labelled.data["spec"]["replicas"], 1,
        "the update was defaulted by the mutating webhook and still admitted"
    );
    set_finalizers(api, "legacy", [TEST_FINALIZER])
        .await
        .expect("adding a finalizer");
    let released = api
        .patch(
            "legacy",
            &PatchParams::default(),
            &json_patch(json!([{"op": "remove", "path": "/metadata/finalizers"}])),
        )
        .await
        .expect("removing a finalizer");
    assert!(released.metadata.finalizers.unwrap_or_default().is_empty());
}

/// A change elsewhere in the spec is held only to its own field's rules; changing an invalid
/// field to another invalid value is refused, naming only that field.
async fn a_change_is_held_only_to_its_own_fields_rules(api: &Api<DynamicObject>) {
    merge_patch(api, "legacy", json!({"spec": {"replicas": 2}}))
        .await
        .expect("changing replicas while the untouched image stays invalid");

    let status = assert_patch_refused(
        api,
        "legacy",
        json!({"spec": {"metrics": {"schedule": "200ms"}}}),
        &[
            MUTATING_WEBHOOK,
            r#"spec.metrics.schedule: Invalid value: "200ms""#,
        ],
        "another invalid schedule",
    )
    .await;
    assert!(
        !status.message.contains("spec.image"),
        "the untouched image is ratcheted: {}",
        status.message
    );
    assert_patch_refused(
        api,
        "legacy",
        json!({"spec": {"image": "docker.io/other/trustyai:2"}}),
        &[r#"spec.image: Invalid value: "docker.io/other/trustyai:2""#],
        "another disallowed image",
    )
    .await;
}

/// Deletion with a finalizer completes: removing the finalizer of an invalid object that is
/// being deleted succeeds.
async fn a_deletion_with_a_finalizer_completes(api: &Api<DynamicObject>) {
    set_finalizers(api, "legacy", [TEST_FINALIZER])
        .await
        .expect("adding the finalizer again");
    api.delete("legacy", &DeleteParams::default())
        .await
        .expect("deletion accepted");
    let terminating = api.get("legacy").await.expect("held by the finalizer");
    assert!(terminating.metadata.deletion_timestamp.is_some());
    api.patch(
        "legacy",
        &PatchParams::default(),
        &json_patch(json!([{"op": "remove", "path": "/metadata/finalizers"}])),
    )
    .await
    .expect("removing the finalizer of a terminating invalid object");
    let deleted = wait::within(Duration::from_secs(30), async || {
        api.get_opt("legacy")
            .await
            .expect("get")
            .is_none()
            .then_some(())
    })
    .await;
    assert!(deleted.is_some(), "the object was not deleted");
}
