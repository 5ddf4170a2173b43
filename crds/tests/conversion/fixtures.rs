//! Fixtures: the Go operator's samples and objects, v1-only fields, odd condition spellings, and
//! objects without status, metadata or annotations.

use serde_json::{Value, json};
use trustyai_crds::conversion::convert_object;

use crate::support::{
    V1, V1ALPHA1, annotation, assert_round_trip, conditions, down, fixture, golden, kept, other,
    round_tripped, up,
};

const GO_OPERATOR_SAMPLES: [&str; 2] = [
    "go-operator/v1-sample.yaml",
    "go-operator/v1alpha1-example.yaml",
];

#[test]
fn go_operator_samples_round_trip() {
    for name in GO_OPERATOR_SAMPLES {
        assert_round_trip(&fixture(name));
    }
}

#[test]
fn go_operator_samples_convert_field_for_field() {
    for name in GO_OPERATOR_SAMPLES {
        let sample = fixture(name);
        let there = convert_object(
            &sample,
            other(sample["apiVersion"].as_str().expect("apiVersion")),
        )
        .expect("converts");
        // Neither sample has anything only v1 has: the spec is copied field for field.
        assert_eq!(there["spec"], sample["spec"], "{name}");
        assert_eq!(there["metadata"], sample["metadata"], "{name}");
        assert_eq!(annotation(&there), None, "{name}");
    }
}

#[test]
fn v1_written_by_the_go_operator() {
    let v1 = round_tripped("conversion/v1-go-written.json");
    let alpha = down(&v1);
    golden("v1-go-written.expected-v1alpha1.json", &alpha);
    // Nothing invented: conditions without lastTransitionTime stay without one, empty reasons
    // stay empty, the other annotations stay.
    let degraded = conditions(&alpha)
        .into_iter()
        .find(|c| c["type"] == "Degraded")
        .expect("Degraded");
    assert_eq!(degraded.get("lastTransitionTime"), None);
    assert_eq!(degraded["reason"], "");
    assert!(
        alpha["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"]
            .is_string()
    );
    let kept = kept(&alpha);
    assert_eq!(kept["restores"], "v1");
    assert_eq!(kept["status"], json!({"observedGeneration": 3}));
    // One entry per condition that had an observedGeneration (Degraded had none).
    assert_eq!(kept["conditions"].as_array().map(Vec::len), Some(7));
}

#[test]
fn v1_with_every_v1_only_field() {
    let v1 = round_tripped("conversion/v1-full.json");
    let alpha = down(&v1);
    golden("v1-full.expected-v1alpha1.json", &alpha);
    let kept = kept(&alpha);
    assert_eq!(
        kept["spec"],
        json!({"image": "quay.io/trustyai/trustyai-service:v0.28.0", "storage": {"retention": "Delete"}})
    );
    assert_eq!(
        kept["status"],
        json!({"observedGeneration": 7, "image": "quay.io/trustyai/trustyai-service:v0.28.0"})
    );
    // The out-of-range v1 status "Partial" is shown as is and kept for the way back.
    assert_eq!(alpha["status"]["conditions"][2]["status"], "Partial");
    // The metadata had no annotations: the converter created the map and says so.
    assert_eq!(kept["created"], "annotations");
    // Integers beyond 2^53 are carried exactly.
    assert_eq!(
        alpha["spec"]["metrics"]["batchSize"],
        json!(9007199254740993u64)
    );
}

#[test]
fn v1alpha1_condition_statuses_in_any_spelling() {
    let alpha = round_tripped("conversion/v1alpha1-odd-statuses.json");
    let v1 = up(&alpha);
    golden("v1alpha1-odd-statuses.expected-v1.json", &v1);
    let statuses: Vec<&Value> = conditions(&v1).iter().map(|c| &c["status"]).collect();
    assert_eq!(
        statuses,
        ["True", "True", "Unknown", "False", "Unknown", "Unknown"]
    );
    // status.ready is not a condition: carried as it is.
    assert_eq!(v1["status"]["ready"], "true");
    // The empty annotations map was there before: it holds the annotation, no "created".
    assert_eq!(kept(&v1).get("created"), None);
}

#[test]
fn objects_without_status_or_metadata() {
    let v1 = round_tripped("conversion/v1-no-metadata.json");
    let alpha = down(&v1);
    assert_eq!(kept(&alpha)["created"], "metadata");
    assert_eq!(
        alpha["metadata"]
            .as_object()
            .map(|m| m.keys().cloned().collect::<Vec<_>>()),
        Some(vec!["annotations".to_owned()])
    );
    assert_eq!(
        up(&alpha),
        v1,
        "metadata created for the annotation goes away again"
    );

    let alpha = round_tripped("conversion/v1alpha1-no-status.json");
    let v1 = up(&alpha);
    assert_eq!(v1.get("status"), None, "no status is invented");
    assert_eq!(annotation(&v1), None);

    for bare in [
        json!({"apiVersion": V1}),
        json!({"apiVersion": V1ALPHA1, "kind": "TrustyAIService"}),
        json!({"apiVersion": V1, "metadata": {}}),
        json!({"apiVersion": V1, "metadata": {"annotations": {}}}),
        json!({"apiVersion": V1, "spec": {}, "status": {}}),
        json!({"apiVersion": V1, "spec": null, "status": []}),
    ] {
        assert_round_trip(&bare);
    }
}

#[test]
fn empty_annotation_maps_are_kept_exactly() {
    // An empty map that was there stays; one the converter created goes.
    for metadata in [
        json!({"annotations": {}}),
        json!({"name": "x"}),
        json!({}),
        json!({"annotations": {"other": "1"}}),
    ] {
        for spec in [json!({"image": "quay.io/x:1"}), json!({"replicas": 1})] {
            let v1 = json!({"apiVersion": V1, "metadata": metadata, "spec": spec});
            assert_round_trip(&v1);
        }
    }
    let v1 = json!({"apiVersion": V1, "spec": {"replicas": 1}});
    assert_eq!(down(&v1).get("metadata"), None);
}
