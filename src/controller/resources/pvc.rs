//! PersistentVolumeClaim `<cr>-pvc` (PVC and migration modes).
//!
//! Retention decides ownership: with `Retain` (the default) the claim has no owner reference,
//! so deleting the TrustyAIService keeps the data and a TrustyAIService re-created with the
//! same name picks the claim up again; with `Delete` the TrustyAIService owns it and the
//! garbage collector removes it (the Go operator always did that). Applied with
//! server-side apply, switching `Delete` → `Retain` drops the owner reference again, because
//! the field manager no longer sends it.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    PersistentVolumeClaim, PersistentVolumeClaimSpec, VolumeResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use trustyai_crds::defaults::DEFAULT_SIZE;
use trustyai_crds::quantity::Quantity as ExactQuantity;

use super::{BuildError, Instance, labels, names, non_empty};

/// The claim's access mode: the data file is written by one pod at a time.
pub const ACCESS_MODE: &str = "ReadWriteOnce";

/// The claim, or `None` when the storage mode uses no PVC (plain DATABASE).
pub fn pvc(instance: &Instance<'_>) -> Result<Option<PersistentVolumeClaim>, BuildError> {
    if !instance.storage_mode()?.uses_pvc() {
        return Ok(None);
    }
    let storage = &instance.spec().storage;
    let size = non_empty(storage.size.as_deref()).unwrap_or(DEFAULT_SIZE);
    ExactQuantity::parse(size).map_err(|e| BuildError::InvalidStorageSize {
        size: size.to_owned(),
        reason: e.to_string(),
    })?;
    let name = names::pvc(instance.name());
    let metadata = if storage.deletes_pvc_with_service() {
        instance.owned_meta(name, labels::metadata(instance))
    } else {
        instance.unowned_meta(name, labels::metadata(instance))
    };
    let pv = non_empty(storage.pv.as_deref());
    Ok(Some(PersistentVolumeClaim {
        metadata,
        spec: Some(PersistentVolumeClaimSpec {
            access_modes: Some(vec![ACCESS_MODE.to_owned()]),
            resources: Some(VolumeResourceRequirements {
                requests: Some(BTreeMap::from([(
                    "storage".to_owned(),
                    Quantity(size.to_owned()),
                )])),
                ..VolumeResourceRequirements::default()
            }),
            volume_name: pv.map(str::to_owned),
            // An empty class disables dynamic provisioning, so the claim binds to the named PV
            // instead of a fresh one from the default StorageClass. Left unset otherwise: the
            // API server fills in the default class, and the field is immutable afterwards.
            storage_class_name: pv.map(|_| String::new()),
            ..PersistentVolumeClaimSpec::default()
        }),
        ..PersistentVolumeClaim::default()
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::test_support::{
        VERSION, database_service, migration_service, pvc_service, with_spec,
    };
    use serde_json::json;

    fn build(service: &trustyai_crds::TrustyAIService) -> Option<PersistentVolumeClaim> {
        let instance = Instance::new(service, VERSION).expect("instance");
        pvc(&instance).expect("pvc")
    }

    #[test]
    fn retain_by_default_has_no_owner() {
        let claim = build(&pvc_service()).expect("claim");
        assert_eq!(claim.metadata.name.as_deref(), Some("tas-pvc"));
        assert_eq!(claim.metadata.namespace.as_deref(), Some("models"));
        assert!(claim.metadata.owner_references.is_none());
        let spec = claim.spec.expect("spec");
        assert_eq!(spec.access_modes, Some(vec!["ReadWriteOnce".to_owned()]));
        assert_eq!(
            spec.resources.and_then(|r| r.requests).expect("requests")["storage"],
            Quantity("1Gi".into())
        );
        assert!(spec.volume_name.is_none());
        assert!(spec.storage_class_name.is_none());
    }

    #[test]
    fn retention_absent_means_retain() {
        let service = with_spec(json!({
            "storage": {"format": "PVC"}, "metrics": {"schedule": "5s"}
        }));
        let claim = build(&service).expect("claim");
        assert!(claim.metadata.owner_references.is_none());
        assert_eq!(
            claim
                .spec
                .and_then(|s| s.resources)
                .and_then(|r| r.requests)
                .expect("requests")["storage"],
            Quantity("1Gi".into())
        );
    }

    #[test]
    fn delete_retention_is_owned() {
        let service = with_spec(json!({
            "storage": {"format": "PVC", "size": "5Gi", "retention": "Delete"},
            "metrics": {"schedule": "5s"}
        }));
        let instance = Instance::new(&service, VERSION).expect("instance");
        let claim = pvc(&instance).expect("pvc").expect("claim");
        assert_eq!(
            claim.metadata.owner_references,
            Some(vec![instance.owner_reference()])
        );
        assert_eq!(
            claim
                .spec
                .and_then(|s| s.resources)
                .and_then(|r| r.requests)
                .expect("requests")["storage"],
            Quantity("5Gi".into())
        );
    }

    #[test]
    fn binds_to_a_named_pv_without_storage_class() {
        let service = with_spec(json!({
            "storage": {"format": "PVC", "pv": "my-pv"}, "metrics": {"schedule": "5s"}
        }));
        let spec = build(&service).and_then(|c| c.spec).expect("spec");
        assert_eq!(spec.volume_name.as_deref(), Some("my-pv"));
        assert_eq!(spec.storage_class_name.as_deref(), Some(""));
    }

    #[test]
    fn migration_has_a_claim_and_database_none() {
        let claim = build(&migration_service()).expect("claim");
        assert_eq!(
            claim
                .spec
                .and_then(|s| s.resources)
                .and_then(|r| r.requests)
                .expect("requests")["storage"],
            Quantity("2Gi".into())
        );
        assert!(build(&database_service()).is_none());
    }

    #[test]
    fn invalid_size_is_an_error_not_a_panic() {
        let service = with_spec(json!({
            "storage": {"format": "PVC", "size": "lots"}, "metrics": {"schedule": "5s"}
        }));
        let instance = Instance::new(&service, VERSION).expect("instance");
        assert!(matches!(
            pvc(&instance),
            Err(BuildError::InvalidStorageSize { size, .. }) if size == "lots"
        ));
    }
}
