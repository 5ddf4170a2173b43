//! The review converter (`conversion::convert_review`) on whole `ConversionReview`s: what the
//! webhook answers, whatever the review holds.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::path::PathBuf;

use kube::core::conversion::ConversionReview;
use serde_json::{Value, json};
use trustyai_crds::conversion::convert_object;
use trustyai_webhooks::conversion::{ConvertedReview, convert_review};

const V1: &str = "trustyai.opendatahub.io/v1";
const V1ALPHA1: &str = "trustyai.opendatahub.io/v1alpha1";

fn fixture(name: &str) -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn bytes(review: &Value) -> Vec<u8> {
    serde_json::to_vec(review).expect("serializes")
}

/// The answer of a review that converted, as the API server reads it.
fn converted(review: &Value) -> ConversionReview {
    match convert_review(&bytes(review)) {
        ConvertedReview::Converted { answer, .. } => {
            serde_json::from_slice(&answer).expect("a ConversionReview")
        }
        other => panic!("not converted: {other:?}"),
    }
}

/// The objects of the mixed-version review, and the answer to it.
fn mixed_review() -> (Vec<Value>, ConversionReview) {
    let review = fixture("review-mixed.json");
    let objects = review["request"]["objects"]
        .as_array()
        .expect("objects")
        .clone();
    (objects, converted(&review))
}

#[test]
fn a_mixed_review_is_answered_successfully_under_its_uid() {
    let (_, answer) = mixed_review();
    assert_eq!(answer.types.api_version, "apiextensions.k8s.io/v1");
    assert_eq!(answer.types.kind, "ConversionReview");
    assert!(answer.request.is_none());
    let response = answer.response.expect("response");
    assert_eq!(response.uid, "705ab4f5-6393-11e8-b7cc-42010a800002");
    assert!(response.result.is_success(), "{:?}", response.result);
}

#[test]
fn a_mixed_reviews_objects_come_back_converted_in_order() {
    let (objects, answer) = mixed_review();
    let response = answer.response.expect("response");
    assert_eq!(response.converted_objects.len(), objects.len());
    for (input, output) in objects.iter().zip(&response.converted_objects) {
        assert_eq!(output, &convert_object(input, V1).expect("converts"));
    }
    // v1 objects come back as they were.
    assert_eq!(response.converted_objects[1], objects[1]);
    assert_eq!(response.converted_objects[3], objects[3]);
}

#[test]
fn review_converts_down_too() {
    let mut review = fixture("review-mixed.json");
    review["request"]["desiredAPIVersion"] = json!(V1ALPHA1);
    let objects = review["request"]["objects"]
        .as_array()
        .expect("objects")
        .clone();
    let response = converted(&review).response.expect("response");
    assert!(response.result.is_success());
    for (input, output) in objects.iter().zip(&response.converted_objects) {
        assert_eq!(output, &convert_object(input, V1ALPHA1).expect("converts"));
    }
}

fn assert_refused(name: &str, uid: &str, mentions: &[&str]) {
    let (answer, message) = match convert_review(&bytes(&fixture(name))) {
        ConvertedReview::Refused {
            answer,
            uid: refused_uid,
            message,
        } => {
            assert_eq!(refused_uid, uid, "{name}");
            (answer, message)
        }
        other => panic!("{name}: not refused: {other:?}"),
    };
    // Well formed: a v1 ConversionReview with a response, the failure and no objects.
    let answer: ConversionReview = serde_json::from_slice(&answer).expect("a ConversionReview");
    assert_eq!(answer.types.kind, "ConversionReview", "{name}");
    let response = answer.response.expect("response");
    assert_eq!(response.uid, uid, "{name}");
    assert!(
        response.result.is_failure(),
        "{name}: {:?}",
        response.result
    );
    assert_eq!(response.result.message, message, "{name}");
    assert!(response.converted_objects.is_empty(), "{name}");
    for word in mentions {
        assert!(message.contains(word), "{name}: {message:?} lacks {word:?}");
    }
}

#[test]
fn reviews_that_cannot_be_converted_get_a_well_formed_failure() {
    assert_refused("review-no-request.json", "", &["no request"]);
    assert_refused(
        "review-objects-not-objects.json",
        "9a4b6f0e-0000-4000-8000-000000000001",
        &["object 1"],
    );
    assert_refused(
        "review-unknown-desired.json",
        "9a4b6f0e-0000-4000-8000-000000000002",
        &["trustyai.opendatahub.io/v2"],
    );
    assert_refused(
        "review-foreign-object.json",
        "9a4b6f0e-0000-4000-8000-000000000003",
        &["object 1", "ns/intruder", "apps/v1"],
    );
    assert_refused(
        "review-v1beta1.json",
        "9a4b6f0e-0000-4000-8000-000000000004",
        &["apiextensions.k8s.io/v1beta1"],
    );
}

#[test]
fn an_empty_review_succeeds() {
    let review = json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "ConversionReview",
        "request": {"uid": "u", "desiredAPIVersion": V1ALPHA1, "objects": []}
    });
    let response = converted(&review).response.expect("response");
    assert!(response.result.is_success());
    assert_eq!(response.uid, "u");
    assert!(response.converted_objects.is_empty());
}

#[test]
fn any_object_in_a_review_gets_a_well_formed_answer_with_the_uid() {
    let odd = [
        json!(null),
        json!("text"),
        json!([1, {"apiVersion": V1}]),
        json!({}),
        json!({"apiVersion": 5}),
        json!({"apiVersion": V1ALPHA1, "metadata": []}),
        json!({"apiVersion": V1ALPHA1, "metadata": {"annotations": {"trustyai.opendatahub.io/conversion-preserved": "{not json"}}}),
        json!({"apiVersion": V1, "spec": {"image": {"nested": true}, "storage": "PVC"}}),
        json!({"apiVersion": V1, "status": {"conditions": [null, "x", {"type": 1, "status": []}]}}),
        json!({"apiVersion": V1ALPHA1, "status": {"conditions": {"type": "Ready"}}}),
        json!({"apiVersion": V1ALPHA1, "spec": {"storage": {"retention": ["Retain"]}}, "status": 0}),
    ];
    for object in odd {
        for desired in [V1, V1ALPHA1] {
            let review = json!({
                "apiVersion": "apiextensions.k8s.io/v1",
                "kind": "ConversionReview",
                "request": {"uid": "u", "desiredAPIVersion": desired, "objects": [object]}
            });
            let answer = match convert_review(&bytes(&review)) {
                ConvertedReview::Converted { answer, .. }
                | ConvertedReview::Refused { answer, .. } => answer,
                ConvertedReview::Malformed(message) => {
                    panic!("{object} to {desired}: malformed: {message}")
                }
            };
            let answer: ConversionReview =
                serde_json::from_slice(&answer).unwrap_or_else(|e| panic!("{object}: {e}"));
            assert_eq!(
                answer.response.expect("response").uid,
                "u",
                "{object} to {desired}"
            );
        }
    }
}
