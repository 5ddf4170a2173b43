//! A round trip through v1alpha1 loses nothing: the v1-only fields wait in an annotation.

use crate::support;
use support::control_planes::{self, Concern};

use kube::api::{Patch, PatchParams, PostParams};
use serde_json::json;
use support::cluster::{minimal_spec, patch_spec, remove_webhook_registrations, tas, tas_api};
use trustyai_crds::contract::CONVERSION_PRESERVED_ANNOTATION;

use super::etcd::{etcd_url, wait_storing};
use super::*;

#[tokio::test]
async fn a_round_trip_through_v1alpha1_loses_nothing() {
    let (_claim, cp, client, ns) =
        control_planes::exclusive_namespace(Concern::Conversion, "round-trip").await;
    let etcd = etcd_url(cp);
    let (v1, v1alpha1) = (
        tas_api(&client, &ns, "v1"),
        tas_api(&client, &ns, "v1alpha1"),
    );

    // Created through v1 with the v1-only fields, and its status written, before the operator
    // runs (see HOLD: its reconcile loop would write a status of its own).
    remove_webhook_registrations(&client).await;
    put_crd(&client, &trustyai_crds::crd::crd().expect("the CRD"))
        .await
        .expect("the CRD");
    // Were it still stored as v1alpha1, the v1-only fields would be pruned on the way in.
    wait_storing(&client, &etcd, &ns, "v1").await;
    let mut spec = minimal_spec();
    spec["image"] = json!(IMAGE);
    spec["storage"]["retention"] = json!("Delete");
    create_held(&v1, tas("v1", "svc", spec)).await;
    v1.patch_status(
        "svc",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {
            "observedGeneration": 1, "phase": "Ready", "image": IMAGE,
            "conditions": [{"type": "Ready", "status": "True", "observedGeneration": 1,
                            "lastTransitionTime": "2025-01-01T00:00:00Z", "reason": "Ready"}]}})),
    )
    .await
    .expect("status written through v1");
    let generation = v1.get("svc").await.expect("svc").metadata.generation;
    let mut operator = start_operator(cp, &client, &ns, &[]).await;

    // Through v1alpha1: the v1-only fields are not there (kept in the annotation).
    assert_without_the_v1_only_fields(&v1alpha1.get("svc").await.expect("read through v1alpha1"));

    // A v1alpha1 client patches; another reads, modifies and replaces the whole object (the
    // classic way to lose fields a version does not have). Both pass the webhooks, the
    // validating one checking spec.image restored from the annotation.
    patch_spec(&v1alpha1, "svc", json!({"metrics": {"schedule": "10s"}}))
        .await
        .expect("merge patch through v1alpha1");
    let mut alpha = v1alpha1.get("svc").await.expect("re-read through v1alpha1");
    assert_eq!(alpha.data["spec"]["metrics"]["schedule"], "10s");
    assert!(alpha.data["spec"].get("image").is_none());
    alpha.data["spec"]["metrics"]["batchSize"] = json!(1000);
    v1alpha1
        .replace("svc", &PostParams::default(), &alpha)
        .await
        .expect("replace through v1alpha1");

    // Through v1: everything is there, and both changes applied.
    let back = v1.get("svc").await.expect("read through v1");
    assert_everything_and_both_changes(&back, generation);
    release(&v1, "svc").await;
    assert!(operator.stop().success(), "{}", operator.logs());
}

/// `alpha`, read through v1alpha1, has none of the v1-only fields (spec.image, retention,
/// observedGeneration): they are kept in the annotation.
fn assert_without_the_v1_only_fields(alpha: &DynamicObject) {
    assert_eq!(api_version(alpha), "trustyai.opendatahub.io/v1alpha1");
    assert!(
        alpha.data["spec"].get("image").is_none(),
        "{:?}",
        alpha.data
    );
    assert!(alpha.data["spec"]["storage"].get("retention").is_none());
    assert!(alpha.data["status"].get("observedGeneration").is_none());
    assert!(
        alpha.data["status"]["conditions"][0]
            .get("observedGeneration")
            .is_none()
    );
    assert!(
        alpha
            .metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(CONVERSION_PRESERVED_ANNOTATION))
    );
}

/// `back`, read through v1, has every v1-only field and the status, both spec changes (two
/// generations after `generation`), and no annotation left.
fn assert_everything_and_both_changes(back: &DynamicObject, generation: Option<i64>) {
    assert_eq!(api_version(back), "trustyai.opendatahub.io/v1");
    assert_eq!(back.data["spec"]["image"], IMAGE);
    assert_eq!(back.data["spec"]["storage"]["retention"], "Delete");
    assert_eq!(back.data["spec"]["metrics"]["schedule"], "10s");
    assert_eq!(back.data["spec"]["metrics"]["batchSize"], 1000);
    assert_eq!(back.data["status"]["observedGeneration"], 1);
    assert_eq!(back.data["status"]["image"], IMAGE);
    assert_eq!(
        back.data["status"]["conditions"][0]["observedGeneration"],
        1
    );
    assert_eq!(back.data["status"]["conditions"][0]["status"], "True");
    assert_eq!(
        back.metadata.generation,
        generation.map(|g| g + 2),
        "two spec changes"
    );
    assert!(
        back.metadata
            .annotations
            .as_ref()
            .is_none_or(|a| !a.contains_key(CONVERSION_PRESERVED_ANNOTATION)),
        "the annotation is consumed on the way back: {:?}",
        back.metadata.annotations
    );
}
