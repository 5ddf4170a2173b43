//! The objects the benchmarks feed the pure functions and the webhooks with.

use serde_json::{Value, json};

pub const V1: &str = "trustyai.opendatahub.io/v1";
pub const V1ALPHA1: &str = "trustyai.opendatahub.io/v1alpha1";

/// A typical v1 TrustyAIService as a user writes it (the PVC sample), before defaulting.
pub fn typical() -> Value {
    json!({
        "apiVersion": V1,
        "kind": "TrustyAIService",
        "metadata": {"name": "trustyai-service", "namespace": "team-a", "uid": "5f0e1a2b-0000-4000-8000-000000000001", "generation": 1},
        "spec": {
            "storage": {"format": "PVC", "folder": "/inputs", "size": "1Gi"},
            "data": {"filename": "data.csv", "format": "CSV"},
            "metrics": {"schedule": "5s"}
        }
    })
}

/// A v1 TrustyAIService with every field set, long names, many labels and annotations, and a
/// full status (as the operator writes it): the largest object the webhooks normally see.
pub fn maximal() -> Value {
    let labels: serde_json::Map<String, Value> = (0..20)
        .map(|i| {
            (
                format!("example.com/label-{i:02}"),
                Value::String(format!("value-{i:02}-{}", "x".repeat(40))),
            )
        })
        .collect();
    let annotations: serde_json::Map<String, Value> = (0..20)
        .map(|i| {
            (
                format!("example.com/annotation-{i:02}"),
                Value::String(format!("{i}: {}", "lorem ipsum dolor sit amet ".repeat(8))),
            )
        })
        .collect();
    let conditions: Vec<Value> = [
        ("InferenceServicesPresent", "True", "InferenceServicesFound"),
        ("PVCAvailable", "True", "PVCFound"),
        ("RouteAvailable", "False", "RouteNotSupported"),
        ("DBAvailable", "True", "DBAvailable"),
        ("Available", "True", "AllComponentsReady"),
    ]
    .into_iter()
    .map(|(type_, status, reason)| {
        json!({
            "type": type_, "status": status, "reason": reason,
            "message": format!("{type_} is {status}: {}", "details ".repeat(10)),
            "lastTransitionTime": "2025-01-01T00:00:00Z", "observedGeneration": 7
        })
    })
    .collect();
    json!({
        "apiVersion": V1,
        "kind": "TrustyAIService",
        "metadata": {
            "name": "t".repeat(40),
            "namespace": "team-with-a-rather-long-namespace-name",
            "uid": "5f0e1a2b-0000-4000-8000-000000000002",
            "generation": 7,
            "resourceVersion": "123456789",
            "creationTimestamp": "2025-01-01T00:00:00Z",
            "labels": labels,
            "annotations": annotations,
            "finalizers": ["trustyai.opendatahub.io/finalizer"]
        },
        "spec": {
            "replicas": 3,
            "storage": {"format": "PVC", "folder": "/inputs/models/data", "size": "100Gi", "pv": "pv-trustyai-0001", "retention": "Delete"},
            "data": {"filename": "data.csv", "format": "CSV"},
            "metrics": {"schedule": "1m30s", "batchSize": 10000},
            "image": "quay.io/trustyai/trustyai-service:v0.28.0"
        },
        "status": {
            "observedGeneration": 7, "phase": "Ready", "replicas": 3, "ready": "True",
            "image": "quay.io/trustyai/trustyai-service:v0.28.0",
            "conditions": conditions
        }
    })
}

/// The image prefixes the maximal object's `spec.image` is allowed from.
pub fn allowed_image_prefixes() -> Vec<String> {
    vec!["quay.io/trustyai/".to_owned()]
}

/// `metadata.managedFields` as the API server returns them for an object applied with kubectl
/// and reconciled by an operator: part of every object in a real `ConversionReview`.
fn managed_fields(api_version: &str) -> Value {
    json!([
        {"manager": "kubectl-client-side-apply", "operation": "Update", "apiVersion": api_version,
         "time": "2025-01-01T00:00:00Z", "fieldsType": "FieldsV1",
         "fieldsV1": {"f:metadata": {"f:annotations": {".": {}, "f:kubectl.kubernetes.io/last-applied-configuration": {}}},
                      "f:spec": {".": {}, "f:data": {".": {}, "f:filename": {}, "f:format": {}},
                                 "f:metrics": {".": {}, "f:batchSize": {}, "f:schedule": {}},
                                 "f:storage": {".": {}, "f:folder": {}, "f:format": {}, "f:size": {}}}}},
        {"manager": "trustyai-operator", "operation": "Update", "apiVersion": api_version,
         "time": "2025-01-01T00:00:05Z", "fieldsType": "FieldsV1", "subresource": "status",
         "fieldsV1": {"f:status": {".": {}, "f:conditions": {}, "f:phase": {}, "f:ready": {}, "f:replicas": {}}}}
    ])
}

/// The `kubectl apply` annotation of a stored object.
fn last_applied(i: usize, api_version: &str) -> String {
    format!(
        r#"{{"apiVersion":"{api_version}","kind":"TrustyAIService","metadata":{{"annotations":{{}},"name":"tas-{i}","namespace":"team-a"}},"spec":{{"data":{{"filename":"data.csv","format":"CSV"}},"metrics":{{"schedule":"5s"}},"storage":{{"folder":"/inputs","format":"PVC","size":"1Gi"}}}}}}"#
    )
}

/// A v1alpha1 object as the Go operator stored it (status conditions, no v1-only fields).
pub fn v1alpha1_stored(i: usize) -> Value {
    json!({
        "apiVersion": V1ALPHA1,
        "kind": "TrustyAIService",
        "metadata": {"name": format!("tas-{i}"), "namespace": "team-a", "uid": format!("5f0e1a2b-0000-4000-8000-{i:012}"), "generation": 2, "resourceVersion": "1000",
                     "creationTimestamp": "2025-01-01T00:00:00Z",
                     "annotations": {"kubectl.kubernetes.io/last-applied-configuration": last_applied(i, V1ALPHA1)},
                     "managedFields": managed_fields(V1ALPHA1)},
        "spec": {
            "storage": {"format": "PVC", "folder": "/inputs", "size": "1Gi"},
            "data": {"filename": "data.csv", "format": "CSV"},
            "metrics": {"schedule": "5s", "batchSize": 5000},
            "replicas": 1
        },
        "status": {
            "phase": "Ready", "replicas": 1, "ready": "True",
            "conditions": [
                {"type": "PVCAvailable", "status": "True", "reason": "PVCFound", "message": "PersistentVolumeClaim found", "lastTransitionTime": "2025-01-01T00:00:00Z"},
                {"type": "Available", "status": "True", "reason": "AllComponentsReady", "message": "AllComponentsReady", "lastTransitionTime": "2025-01-01T00:00:00Z"}
            ]
        }
    })
}

/// A v1 object as the operator stores it (defaulted, with a status), for conversion to
/// v1alpha1 (the v1-only fields go into the annotation).
pub fn v1_stored(i: usize) -> Value {
    json!({
        "apiVersion": V1,
        "kind": "TrustyAIService",
        "metadata": {"name": format!("tas-{i}"), "namespace": "team-a", "uid": format!("5f0e1a2b-0000-4000-8000-{i:012}"), "generation": 2, "resourceVersion": "1000",
                     "creationTimestamp": "2025-01-01T00:00:00Z", "finalizers": ["trustyai.opendatahub.io/finalizer"],
                     "annotations": {"kubectl.kubernetes.io/last-applied-configuration": last_applied(i, V1)},
                     "managedFields": managed_fields(V1)},
        "spec": {
            "replicas": 1,
            "storage": {"format": "PVC", "folder": "/inputs", "size": "1Gi", "retention": "Retain"},
            "data": {"filename": "data.csv", "format": "CSV"},
            "metrics": {"schedule": "5s", "batchSize": 5000}
        },
        "status": {
            "observedGeneration": 2, "phase": "Ready", "replicas": 1, "ready": "True",
            "image": "quay.io/trustyai/trustyai-service:latest",
            "conditions": [
                {"type": "PVCAvailable", "status": "True", "reason": "PVCFound", "message": "PersistentVolumeClaim found", "lastTransitionTime": "2025-01-01T00:00:00Z", "observedGeneration": 2},
                {"type": "Available", "status": "True", "reason": "AllComponentsReady", "message": "AllComponentsReady", "lastTransitionTime": "2025-01-01T00:00:00Z", "observedGeneration": 2}
            ]
        }
    })
}

/// A `ConversionReview` request of `n` objects to `desired` (objects in the other version).
pub fn conversion_review(n: usize, desired: &str) -> Value {
    let objects: Vec<Value> = (0..n)
        .map(|i| {
            if desired == V1 {
                v1alpha1_stored(i)
            } else {
                v1_stored(i)
            }
        })
        .collect();
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "ConversionReview",
        "request": {"uid": "00000000-0000-4000-8000-00000000c0de", "desiredAPIVersion": desired, "objects": objects}
    })
}

/// An `AdmissionReview` CREATE request for `object`.
pub fn admission_review(object: &Value) -> Value {
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "00000000-0000-4000-8000-0000000ad000",
            "kind": {"group": "trustyai.opendatahub.io", "version": "v1", "kind": "TrustyAIService"},
            "resource": {"group": "trustyai.opendatahub.io", "version": "v1", "resource": "trustyaiservices"},
            "requestKind": {"group": "trustyai.opendatahub.io", "version": "v1", "kind": "TrustyAIService"},
            "requestResource": {"group": "trustyai.opendatahub.io", "version": "v1", "resource": "trustyaiservices"},
            "name": object.pointer("/metadata/name").cloned().unwrap_or(Value::Null),
            "namespace": object.pointer("/metadata/namespace").cloned().unwrap_or(Value::Null),
            "operation": "CREATE",
            "userInfo": {"username": "admin", "groups": ["system:masters", "system:authenticated"]},
            "object": object,
            "oldObject": null,
            "dryRun": false,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"}
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::DynamicObject;
    use kube::core::admission::{AdmissionRequest, AdmissionReview, Operation as AdmissionOp};
    use kube::core::conversion::ConversionReview;
    use trustyai_crds::TrustyAIService;
    use trustyai_crds::defaults::{Operation, defaulted, defaults_patch};
    use trustyai_crds::validation::{ValidationContext, Verdict, validate};
    use trustyai_webhooks::conversion::{ConvertedReview, convert_review};

    fn validated(object: &Value, allowed_image_prefixes: Vec<String>) -> Verdict {
        let exists = |_: &str| true;
        let ctx = ValidationContext {
            allowed_image_prefixes,
            secret_exists: Some(&exists),
        };
        validate(&defaulted(object, Operation::Create), None, &ctx)
    }

    #[test]
    fn every_object_to_create_is_valid_once_defaulted() {
        for (name, object) in [("typical", typical()), ("maximal", maximal())] {
            let verdict = validated(&object, allowed_image_prefixes());
            assert!(verdict.is_allowed(), "{name}: {:?}", verdict.errors);
            let _: TrustyAIService = serde_json::from_value(object).unwrap();
        }
    }

    #[test]
    fn typical_is_written_without_defaults() {
        // The mutating webhook has work to do on it (at least `spec.replicas`).
        let patch = serde_json::to_value(defaults_patch(&typical(), Operation::Create)).unwrap();
        let paths: Vec<&str> = patch
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|op| op["path"].as_str())
            .collect();
        assert!(paths.contains(&"/spec/replicas"), "{paths:?}");
    }

    #[test]
    fn maximal_image_needs_the_allowed_prefix() {
        let verdict = validated(&maximal(), Vec::new());
        let fields: Vec<&str> = verdict.errors.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(fields, ["spec.image"]);
    }

    #[test]
    fn maximal_is_the_largest_object() {
        let size = |v: &Value| serde_json::to_vec(v).unwrap().len();
        assert!(size(&maximal()) > size(&typical()));
        assert!(size(&maximal()) > size(&v1_stored(0)));
        let object = maximal();
        assert_eq!(object["metadata"]["labels"].as_object().unwrap().len(), 20);
        assert_eq!(
            object["metadata"]["annotations"].as_object().unwrap().len(),
            20
        );
        assert_eq!(object["status"]["conditions"].as_array().unwrap().len(), 5);
    }

    #[test]
    fn stored_objects_deserialize_in_their_versions() {
        for i in [0, 1, 999] {
            let v1: TrustyAIService = serde_json::from_value(v1_stored(i)).unwrap();
            assert_eq!(v1.metadata.name, Some(format!("tas-{i}")));
            assert_eq!(v1.spec.storage.format, "PVC");
            let alpha: trustyai_crds::v1alpha1::TrustyAIService =
                serde_json::from_value(v1alpha1_stored(i)).unwrap();
            assert_eq!(alpha.metadata.name, Some(format!("tas-{i}")));
            assert_eq!(v1.metadata.uid, alpha.metadata.uid);
        }
        assert_eq!(
            v1_stored(7)["metadata"]["uid"],
            "5f0e1a2b-0000-4000-8000-000000000007"
        );
        assert_ne!(
            v1_stored(1)["metadata"]["uid"],
            v1_stored(2)["metadata"]["uid"]
        );
    }

    #[test]
    fn last_applied_annotation_is_the_object_as_applied() {
        for (object, version) in [(v1_stored(3), V1), (v1alpha1_stored(3), V1ALPHA1)] {
            let text = object["metadata"]["annotations"]
                ["kubectl.kubernetes.io/last-applied-configuration"]
                .as_str()
                .unwrap();
            let applied: Value = serde_json::from_str(text).unwrap();
            assert_eq!(applied["apiVersion"], version);
            assert_eq!(applied["metadata"]["name"], "tas-3");
            assert_eq!(applied["metadata"]["namespace"], "team-a");
            assert_eq!(applied["spec"]["storage"]["size"], "1Gi");
        }
    }

    /// The webhook's answer to `review`, which must convert.
    fn converted(review: &Value) -> kube::core::conversion::ConversionResponse {
        match convert_review(&serde_json::to_vec(review).unwrap()) {
            ConvertedReview::Converted { answer, .. } => {
                let answer: ConversionReview = serde_json::from_slice(&answer).unwrap();
                answer.response.unwrap()
            }
            other => panic!("not converted: {other:?}"),
        }
    }

    #[test]
    fn conversion_reviews_convert_every_object_each_way() {
        for (desired, from) in [(V1, V1ALPHA1), (V1ALPHA1, V1)] {
            let request = conversion_review(3, desired);
            let objects = request["request"]["objects"].as_array().unwrap();
            assert_eq!(objects.len(), 3);
            assert!(objects.iter().all(|o| o["apiVersion"] == from), "{desired}");
            let response = converted(&request);
            assert!(response.result.is_success(), "{:?}", response.result);
            assert_eq!(response.uid, "00000000-0000-4000-8000-00000000c0de");
            let names: Vec<&str> = response
                .converted_objects
                .iter()
                .map(|o| {
                    assert_eq!(o["apiVersion"], desired);
                    o["metadata"]["name"].as_str().unwrap()
                })
                .collect();
            assert_eq!(names, ["tas-0", "tas-1", "tas-2"]);
        }
    }

    #[test]
    fn an_empty_conversion_review_is_still_well_formed() {
        let response = converted(&conversion_review(0, V1));
        assert!(response.result.is_success());
        assert!(response.converted_objects.is_empty());
    }

    #[test]
    fn admission_review_is_a_create_of_the_object() {
        let object = typical();
        let review: AdmissionReview<DynamicObject> =
            serde_json::from_value(admission_review(&object)).unwrap();
        let request: AdmissionRequest<DynamicObject> = review.try_into().unwrap();
        assert_eq!(request.operation, AdmissionOp::Create);
        assert_eq!(request.name, "trustyai-service");
        assert_eq!(request.namespace.as_deref(), Some("team-a"));
        assert_eq!(request.resource.resource, "trustyaiservices");
        assert!(request.old_object.is_none());
        let sent = serde_json::to_value(request.object.unwrap()).unwrap();
        assert_eq!(sent["spec"], object["spec"]);
        assert_eq!(sent["metadata"]["uid"], object["metadata"]["uid"]);
    }

    #[test]
    fn admission_review_of_an_unnamed_object_has_null_name() {
        let review = admission_review(&json!({"apiVersion": V1, "kind": "TrustyAIService"}));
        assert_eq!(review["request"]["name"], Value::Null);
        assert_eq!(review["request"]["namespace"], Value::Null);
    }
}
