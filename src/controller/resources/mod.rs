//! What the renderers of every kind share: the [`Instance`] being rendered (its metadata,
//! owner reference and storage mode), the objects' [`names`] and [`labels`] (the Go
//! operator's), and the resolved [`images`]. Each kind's renderer is in its module under
//! `children`.
//!
//! Every renderer is a pure function of the TrustyAIService and explicit inputs: no timestamps,
//! no randomness, maps sorted (`BTreeMap`) or built in a fixed order. Rendering twice gives
//! byte-identical JSON, so the caller can apply the result with server-side apply on every
//! reconcile and the API server sees no change unless the spec or an image changed.
//!
//! Namespaced objects carry a controller owner reference to the TrustyAIService (except the
//! PVC with `retention: Retain`); cluster-scoped and shared objects carry none.

pub mod images;
pub mod labels;
pub mod names;

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::Resource;
use trustyai_crds::TrustyAIService;
use trustyai_crds::defaults::StorageMode;
use trustyai_crds::v1::TrustyAIServiceSpec;

/// Why an object cannot be built for a TrustyAIService.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BuildError {
    /// A metadata field the builders need is absent or empty: only objects read back from the
    /// API server (which sets name, namespace and uid) can own resources.
    #[error("the TrustyAIService has no metadata.{0}")]
    MissingMetadata(&'static str),
    /// `spec.storage.format` is neither `PVC` nor `DATABASE`.
    #[error("spec.storage.format {0:?} is not supported: expected PVC or DATABASE")]
    UnknownStorageFormat(String),
    /// `spec.storage.size` is not a Kubernetes quantity (the Go operator panicked here).
    #[error("spec.storage.size {size:?} is not a valid quantity: {reason}")]
    InvalidStorageSize {
        /// The size as written.
        size: String,
        /// Why it does not parse.
        reason: String,
    },
}

/// A TrustyAIService as this operator version renders it: the resource plus the identity every
/// builder needs, checked once.
#[derive(Debug, Clone, Copy)]
pub struct Instance<'a> {
    service: &'a TrustyAIService,
    name: &'a str,
    namespace: &'a str,
    uid: &'a str,
    operator_version: &'a str,
}

impl<'a> Instance<'a> {
    /// Wraps `service`, which must have a name, a namespace and a uid. `operator_version` goes
    /// into the `app.kubernetes.io/version` label of object metadata (never of a selector or a
    /// pod template).
    pub fn new(
        service: &'a TrustyAIService,
        operator_version: &'a str,
    ) -> Result<Self, BuildError> {
        let meta = service.meta();
        let required = |value: Option<&'a String>, field| {
            value
                .map(String::as_str)
                .filter(|v| !v.is_empty())
                .ok_or(BuildError::MissingMetadata(field))
        };
        Ok(Self {
            service,
            name: required(meta.name.as_ref(), "name")?,
            namespace: required(meta.namespace.as_ref(), "namespace")?,
            uid: required(meta.uid.as_ref(), "uid")?,
            operator_version,
        })
    }

    /// The TrustyAIService.
    pub fn service(&self) -> &'a TrustyAIService {
        self.service
    }

    /// Its spec.
    pub fn spec(&self) -> &'a TrustyAIServiceSpec {
        &self.service.spec
    }

    /// `metadata.name`.
    pub fn name(&self) -> &'a str {
        self.name
    }

    /// `metadata.namespace`.
    pub fn namespace(&self) -> &'a str {
        self.namespace
    }

    /// `metadata.uid`.
    pub fn uid(&self) -> &'a str {
        self.uid
    }

    /// The operator version for the `app.kubernetes.io/version` label.
    pub fn operator_version(&self) -> &'a str {
        self.operator_version
    }

    /// The storage mode of the spec: PVC, DATABASE, or migration (DATABASE with `storage.folder`
    /// and `data.filename`).
    pub fn storage_mode(&self) -> Result<StorageMode, BuildError> {
        storage_mode(self.spec())
    }

    /// The controller owner reference to the TrustyAIService, the way controller-runtime's
    /// `SetControllerReference` writes it, so objects made by the Go operator are adopted
    /// without change.
    pub fn owner_reference(&self) -> OwnerReference {
        OwnerReference {
            api_version: TrustyAIService::api_version(&()).into_owned(),
            kind: TrustyAIService::kind(&()).into_owned(),
            name: self.name.to_owned(),
            uid: self.uid.to_owned(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }
    }

    /// Metadata of a namespaced object in the TrustyAIService's namespace, owned by it.
    pub(crate) fn owned_meta(&self, name: String, labels: BTreeMap<String, String>) -> ObjectMeta {
        ObjectMeta {
            owner_references: Some(vec![self.owner_reference()]),
            ..self.unowned_meta(name, labels)
        }
    }

    /// Metadata of a namespaced object in the TrustyAIService's namespace that it does not own.
    pub(crate) fn unowned_meta(
        &self,
        name: String,
        labels: BTreeMap<String, String>,
    ) -> ObjectMeta {
        ObjectMeta {
            name: Some(name),
            namespace: Some(self.namespace.to_owned()),
            labels: Some(labels),
            ..ObjectMeta::default()
        }
    }
}

/// The storage mode of `spec`. Empty strings count as unset, as in the Go operator.
pub fn storage_mode(spec: &TrustyAIServiceSpec) -> Result<StorageMode, BuildError> {
    if spec.storage.is_pvc() {
        Ok(StorageMode::Pvc)
    } else if spec.is_migration() {
        Ok(StorageMode::Migration)
    } else if spec.storage.is_database() {
        Ok(StorageMode::Database)
    } else {
        Err(BuildError::UnknownStorageFormat(
            spec.storage.format.clone(),
        ))
    }
}

/// `value` unless it is absent or empty: the Go operator tests fields with `!= ""`, and the
/// API server keeps empty strings, so both mean "unset" here.
pub(crate) fn non_empty(value: Option<&str>) -> Option<&str> {
    value.filter(|v| !v.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::test_support::{pvc_service, with_spec};

    #[test]
    fn an_instance_needs_its_identity_fields() {
        let mut service = pvc_service();
        service.metadata.uid = None;
        assert_eq!(
            Instance::new(&service, "1.0.0").map(|_| ()),
            Err(BuildError::MissingMetadata("uid"))
        );
        service.metadata.uid = Some("u".into());
        service.metadata.namespace = Some(String::new());
        assert_eq!(
            Instance::new(&service, "1.0.0").map(|_| ()),
            Err(BuildError::MissingMetadata("namespace"))
        );
        service.metadata.name = None;
        assert_eq!(
            Instance::new(&service, "1.0.0").map(|_| ()),
            Err(BuildError::MissingMetadata("name"))
        );
    }

    #[test]
    fn owner_reference_is_a_blocking_controller_reference_to_v1() {
        let service = pvc_service();
        let instance = Instance::new(&service, "1.0.0").expect("instance");
        let owner = instance.owner_reference();
        assert_eq!(owner.api_version, "trustyai.opendatahub.io/v1");
        assert_eq!(owner.kind, "TrustyAIService");
        assert_eq!(owner.name, "tas");
        assert_eq!(owner.uid, "0b5a1c1e-0000-4000-8000-000000000001");
        assert_eq!(owner.controller, Some(true));
        assert_eq!(owner.block_owner_deletion, Some(true));
    }

    #[test]
    fn storage_modes() {
        let mode = |spec: serde_json::Value| storage_mode(&with_spec(spec).spec);
        assert_eq!(
            mode(serde_json::json!({"storage": {"format": "PVC"}, "metrics": {"schedule": "5s"}})),
            Ok(StorageMode::Pvc)
        );
        assert_eq!(
            mode(
                serde_json::json!({"storage": {"format": "DATABASE"}, "metrics": {"schedule": "5s"}})
            ),
            Ok(StorageMode::Database)
        );
        assert_eq!(
            mode(serde_json::json!({
                "storage": {"format": "DATABASE", "folder": "/inputs"},
                "data": {"filename": "data.csv"},
                "metrics": {"schedule": "5s"}
            })),
            Ok(StorageMode::Migration)
        );
        assert_eq!(
            mode(serde_json::json!({"storage": {"format": "S3"}, "metrics": {"schedule": "5s"}})),
            Err(BuildError::UnknownStorageFormat("S3".into()))
        );
    }
}
