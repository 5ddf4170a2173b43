//! Sample TrustyAIServices shared by the unit tests.

#![allow(clippy::expect_used)]

use crate::controller::resources::Instance;
use serde_json::{Value, json};
use trustyai_crds::TrustyAIService;

/// Name, namespace and uid of every sample.
pub const NAME: &str = "tas";
pub const NAMESPACE: &str = "models";
pub const UID: &str = "0b5a1c1e-0000-4000-8000-000000000001";
/// The operator version used by the tests.
pub const VERSION: &str = "9.9.9";

/// A TrustyAIService named `tas` in `models` with `spec`.
pub fn with_spec(spec: Value) -> TrustyAIService {
    with_name(NAME, spec)
}

/// A TrustyAIService called `name` in `models` with `spec`.
pub fn with_name(name: &str, spec: Value) -> TrustyAIService {
    serde_json::from_value(json!({
        "apiVersion": "trustyai.opendatahub.io/v1",
        "kind": "TrustyAIService",
        "metadata": {
            "name": name,
            "namespace": NAMESPACE,
            "uid": UID,
            "generation": 3
        },
        "spec": spec
    }))
    .expect("a valid TrustyAIService")
}

/// The Go operator's PVC sample, defaulted.
pub fn pvc_spec() -> Value {
    json!({
        "replicas": 1,
        "storage": { "format": "PVC", "folder": "/inputs", "size": "1Gi", "retention": "Retain" },
        "data": { "filename": "data.csv", "format": "CSV" },
        "metrics": { "schedule": "5s", "batchSize": 5000 }
    })
}

/// A PVC-mode TrustyAIService.
pub fn pvc_service() -> TrustyAIService {
    with_spec(pvc_spec())
}

/// An [`Instance`] of [`pvc_service`], for the renderers' tests (the service is leaked: a
/// test's few hundred bytes).
pub fn pvc_instance() -> Instance<'static> {
    let service: &'static TrustyAIService = Box::leak(Box::new(pvc_service()));
    Instance::new(service, VERSION).expect("an instance")
}

/// A DATABASE-mode TrustyAIService with the credentials Secret `db-creds`.
pub fn database_service() -> TrustyAIService {
    with_spec(json!({
        "storage": { "format": "DATABASE", "databaseConfigurations": "db-creds" },
        "metrics": { "schedule": "5s" }
    }))
}

/// A migration-mode TrustyAIService (DATABASE with folder and data file).
pub fn migration_service() -> TrustyAIService {
    with_spec(json!({
        "storage": {
            "format": "DATABASE", "folder": "/inputs", "size": "2Gi",
            "databaseConfigurations": "db-creds"
        },
        "data": { "filename": "data.csv", "format": "CSV" },
        "metrics": { "schedule": "10s", "batchSize": 100 }
    }))
}
