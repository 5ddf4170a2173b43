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
