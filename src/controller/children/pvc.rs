//! The claim `<cr>-pvc`, in PVC and migration modes: created when absent, grown when the spec
//! asks for more, never shrunk, re-created or deleted by the operator (the retention policy
//! decides through the owner reference); with `retention: Retain`, an owner reference to this
//! TrustyAIService (the Go operator's) is removed. The plan is [`super::super::pvc_plan`].
//!
//! Retention decides ownership: with `Retain` (the default) the claim has no owner reference,
//! so deleting the TrustyAIService keeps the data and a TrustyAIService re-created with the
//! same name picks the claim up again; with `Delete` the TrustyAIService owns it and the
//! garbage collector removes it (the Go operator always did that). Applied with
//! server-side apply, switching `Delete` → `Retain` drops the owner reference again, because
//! the field manager no longer sends it.

use std::collections::BTreeMap;
use std::time::Duration;

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::{
    PersistentVolumeClaim, PersistentVolumeClaimSpec, VolumeResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::jiff::Timestamp;
use kube::api::DynamicObject;
use kube::{Api, ResourceExt};
use serde_json::{Value, json};
use trustyai_crds::TrustyAIService;
use trustyai_crds::defaults::DEFAULT_SIZE;
use trustyai_crds::defaults::StorageMode;
use trustyai_crds::quantity::Quantity as ExactQuantity;

use super::super::error::ReconcileError;
use super::super::pvc_plan;
use super::super::status::PvcObservation;
use super::super::wiring::json_patch::JsonPatch;
use super::cache::Projection;
use super::declaration::{Declaration, Kind, Lifecycle, Mapping, Rendered, WatchSpec, always};
use super::{built_in, delete_ignoring_absent, owned_watch};
use crate::controller::context::Context;
use crate::controller::resources::{BuildError, Instance, labels, names, non_empty};

/// The declaration.
pub const DECLARATION: Declaration = Declaration {
    watch: WatchSpec {
        mapping: Mapping::Claim,
        // The spec and the owner references for the apply's plan, the phase and the creation
        // time for the status.
        projection: Projection(&[
            "/spec",
            "/metadata/ownerReferences",
            "/status/phase",
            "/metadata/creationTimestamp",
        ]),
        ..owned_watch(built_in::<PersistentVolumeClaim>)
    },
    applies_with: always,
    lifecycle: Lifecycle::Data { at_deletion },
    applying: Rendered {
        keep_live: Some(keep_live_settings),
        prepare_live: Some(drop_retained_owner),
        on_refused: Some(keep_live_size),
        ..Rendered::new(|instance, _| {
            pvc(instance)?
                .as_ref()
                .map(super::wanted)
                .into_iter()
                .collect()
        })
    },
};

/// What the apply left.
#[derive(Debug, Default)]
pub struct ClaimApplied {
    /// The claim as the API server last answered (`None`: skipped as current, or not wanted).
    pub claim: Option<PersistentVolumeClaim>,
    /// Why the claim could not grow to the spec's size (it kept its size).
    pub growth_refused: Option<String>,
}

/// `value` as a claim; an unreadable one as none (the apply then goes as rendered).
fn claim(value: &Value) -> Option<PersistentVolumeClaim> {
    serde_json::from_value(value.clone()).ok()
}

/// Writes `claim` over `object`, keeping the object as it was if it cannot be encoded.
fn write_back(claim: &PersistentVolumeClaim, object: &mut DynamicObject) {
    if let Ok(encoded) = serde_json::to_value(claim).and_then(serde_json::from_value) {
        *object = encoded;
    }
}

/// The live claim's immutable settings and its size, when larger ([`pvc_plan::apply_body`]).
fn keep_live_settings(live: &Value, desired: &mut DynamicObject) -> bool {
    let (Some(live), Some(wanted)) = (claim(live), claim(&json!(desired))) else {
        return false;
    };
    write_back(&pvc_plan::apply_body(wanted, Some(&live)), desired);
    false
}

/// With `retention: Retain`: removes an owner reference to this TrustyAIService (the Go
/// operator's), which server-side apply cannot remove.
fn drop_retained_owner(instance: &Instance<'_>, live: &Value) -> Option<JsonPatch> {
    if instance.spec().storage.deletes_pvc_with_service() {
        return None;
    }
    pvc_plan::drop_owner_patch(&claim(live)?, instance.uid())
}

/// A class that cannot expand (or a quota) refuses the growth: the claim keeps its size and
/// still serves, so the rest of the spec goes on being applied.
fn keep_live_size(
    error: &ReconcileError,
    body: &DynamicObject,
    live: &Value,
) -> Option<(DynamicObject, String)> {
    let why = error.refusal()?;
    let body = claim(&json!(body))?;
    let growth = pvc_plan::growth(&body, &claim(live)?)?;
    let refused = format!(
        "it could not grow from {} to {}: {why}",
        growth.from.0, growth.to.0
    );
    let kept = pvc_plan::with_size(body, growth.from);
    let kept = serde_json::to_value(kept)
        .and_then(serde_json::from_value)
        .ok()?;
    Some((kept, refused))
}

/// At the TrustyAIService's deletion, in PVC and migration modes: with `retention: Delete`,
/// deletes the claim (the garbage collector would too, through the owner reference, when it
/// has one) and says so; else says that it is retained. What the spec says now counts: a
/// `retention: Delete` set just before the deletion may not have reached the claim's owner
/// reference yet.
fn at_deletion<'a>(
    ctx: &'a Context,
    service: &'a TrustyAIService,
) -> BoxFuture<'a, Result<(), ReconcileError>> {
    Box::pin(async move {
        if !service.spec.uses_pvc() {
            return Ok(());
        }
        if service.spec.storage.deletes_pvc_with_service() {
            delete_claim(ctx, service).await
        } else {
            report_retained(ctx, service).await;
            Ok(())
        }
    })
}

async fn delete_claim(ctx: &Context, service: &TrustyAIService) -> Result<(), ReconcileError> {
    let name = names::pvc(&service.name_any());
    let api: Api<PersistentVolumeClaim> =
        Api::namespaced(ctx.client.clone(), &service.namespace().unwrap_or_default());
    if !delete_ignoring_absent(&api, Kind::PersistentVolumeClaim.name(), &name).await? {
        return Ok(());
    }
    ctx.events
        .normal(
            service,
            "PVCDeleted",
            "Delete",
            format!("PersistentVolumeClaim {name} deleted (storage.retention: Delete)"),
        )
        .await;
    Ok(())
}

async fn report_retained(ctx: &Context, service: &TrustyAIService) {
    let name = names::pvc(&service.name_any());
    let api: Api<PersistentVolumeClaim> =
        Api::namespaced(ctx.client.clone(), &service.namespace().unwrap_or_default());
    match api.get_metadata_opt(&name).await {
        Ok(Some(_)) => {
            ctx.events
                .normal(
                    service,
                    "PVCRetained",
                    "Delete",
                    format!(
                        "PersistentVolumeClaim {name} is retained (storage.retention: Retain); a TrustyAIService of the same name adopts it, or delete it to free the data"
                    ),
                )
                .await;
        }
        Ok(None) => {}
        Err(error) => {
            tracing::warn!(error = %crate::error_chain::Chain(&error), pvc = %name, "could not check the retained PVC")
        }
    }
}

/// Event topics: each has at most one outstanding warning.
mod topic {
    /// The claim cannot grow to the spec's size.
    pub const GROWTH: &str = "pvc-growth";
    /// The claim stays unbound.
    pub const PENDING: &str = "pvc-pending";
}

/// A `PVCGrowthRefused` warning while the claim cannot grow (`refused` says why); only a
/// `completed` apply of every child says the refusal is over.
pub async fn report_growth(
    ctx: &Context,
    instance: &Instance<'_>,
    refused: Option<&str>,
    completed: bool,
) {
    let service = instance.service();
    match refused {
        Some(refused) => {
            ctx.events
                .warning(
                    service,
                    topic::GROWTH,
                    "PVCGrowthRefused",
                    format!(
                        "PersistentVolumeClaim {}: {refused}",
                        names::pvc(instance.name())
                    ),
                )
                .await;
        }
        None if completed => ctx.events.resolved(service, topic::GROWTH),
        None => {}
    }
}

/// The claim as observed, and since when it exists.
pub struct ObservedClaim {
    /// What the status reads of it; `None` in the modes without a claim.
    pub observation: Option<PvcObservation>,
    created: Option<Timestamp>,
}

/// The claim, in the modes that use one: `applied` (this reconcile's answer), else its cache,
/// else read.
pub async fn observe(
    ctx: &Context,
    instance: &Instance<'_>,
    mode: StorageMode,
    applied: Option<PersistentVolumeClaim>,
) -> Result<ObservedClaim, ReconcileError> {
    if !mode.uses_pvc() {
        return Ok(ObservedClaim {
            observation: None,
            created: None,
        });
    }
    let name = names::pvc(instance.name());
    let claim: Option<PersistentVolumeClaim> = super::current(
        ctx,
        Kind::PersistentVolumeClaim,
        instance.namespace(),
        &name,
        applied,
    )
    .await?;
    Ok(ObservedClaim {
        observation: Some(PvcObservation::from_claim(claim.as_ref())),
        created: claim
            .as_ref()
            .and_then(|c| c.metadata.creation_timestamp.as_ref())
            .map(|t| t.0),
    })
}

/// A `PVCPending` Warning once the claim has been unbound for `--pvc-pending-grace` (resolved
/// when it binds); before that, when to look again (a claim that binds triggers a reconcile by
/// itself, one that stays pending does not).
pub async fn report_pending(
    ctx: &Context,
    instance: &Instance<'_>,
    claim: &ObservedClaim,
) -> Option<Duration> {
    let service = instance.service();
    let Some(PvcObservation::Unbound { phase }) = &claim.observation else {
        ctx.events.resolved(service, topic::PENDING);
        return None;
    };
    let age = claim
        .created
        .map(|created| Timestamp::now().duration_since(created))
        .and_then(|age| Duration::try_from(age).ok())
        .unwrap_or_default();
    let grace = ctx.config.pvc_pending_grace;
    if age < grace {
        return Some(grace - age + Duration::from_secs(1));
    }
    let name = names::pvc(instance.name());
    let hint = match instance.spec().storage.pv.as_deref() {
        Some(pv) => format!("check that PersistentVolume {pv} exists, is Available and matches the claim"),
        None => "check its events and its StorageClass (a provisioner, or a PersistentVolume that matches)".to_owned(),
    };
    ctx.events
        .warning(
            service,
            topic::PENDING,
            "PVCPending",
            format!(
                "PersistentVolumeClaim {name} has not been bound for {}s (phase {}): {hint}",
                age.as_secs(),
                phase.as_deref().unwrap_or("unknown")
            ),
        )
        .await;
    None
}

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
        assert_eq!(requested(claim), Quantity("1Gi".into()));
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
        assert_eq!(requested(claim), Quantity("5Gi".into()));
    }

    /// The storage the claim requests.
    fn requested(claim: PersistentVolumeClaim) -> Quantity {
        claim
            .spec
            .and_then(|s| s.resources)
            .and_then(|r| r.requests)
            .expect("requests")["storage"]
            .clone()
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
    fn migration_mode_has_a_claim() {
        let claim = build(&migration_service()).expect("claim");
        assert_eq!(requested(claim), Quantity("2Gi".into()));
    }

    #[test]
    fn database_mode_has_no_claim() {
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
