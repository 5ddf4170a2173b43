//! Sample TrustyAIService specs the tests share: one place to read what "a valid PVC instance"
//! or "a DATABASE instance" means in them. Tests of a particular rule write their own.

use serde_json::{Value, json};

/// The smallest valid spec: PVC storage, every other field defaulted.
pub fn minimal() -> Value {
    json!({"storage": {"format": "PVC"}, "metrics": {"schedule": "5s"}})
}

/// PVC storage of a given size (the claim the reconcile tests bind to a prepared volume).
pub fn pvc() -> Value {
    json!({"storage": {"format": "PVC", "size": "1Gi"}, "metrics": {"schedule": "5s"}})
}

/// What ends a migration from a claim to the database, as a change of a spec: no volume name,
/// no file name (the storage is the database alone).
pub fn end_of_migration() -> Value {
    json!({"storage": {"pv": null}, "data": {"filename": null}})
}

/// DATABASE storage with the credentials in the Secret `secret`.
pub fn database(secret: &str) -> Value {
    json!({"storage": {"format": "DATABASE", "databaseConfigurations": secret},
           "metrics": {"schedule": "5s"}})
}
