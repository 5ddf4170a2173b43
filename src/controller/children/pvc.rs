//! The claim `<cr>-pvc`, in PVC and migration modes: created when absent, grown when the spec
//! asks for more, never shrunk, re-created or deleted by the operator (the retention policy
//! decides through the owner reference); with `retention: Retain`, an owner reference to this
//! TrustyAIService (the Go operator's) is removed. The plan is [`super::super::pvc_plan`].

use std::time::Duration;

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use k8s_openapi::jiff::Timestamp;
use kube::{Api, ResourceExt};
use trustyai_crds::TrustyAIService;
use trustyai_crds::defaults::StorageMode;

use super::super::apply;
use super::super::error::ReconcileError;
use super::super::pvc_plan;
use super::super::resources::{Instance, names, pvc};
use super::super::status::PvcObservation;
use super::cache::{Cached, Projection};
use super::changes::Changes;
use super::declaration::{
    Applying, Declaration, Kind, Lifecycle, Mapping, WatchSpec, always, ours,
};
use super::memory::{Tracking, fingerprint};
use super::{built_in, count, delete_ignoring_absent};
use crate::controller::context::Context;

/// The declaration.
pub const DECLARATION: Declaration = Declaration {
    watch: WatchSpec {
        resource: built_in::<PersistentVolumeClaim>,
        namespaced: true,
        selector: Some(ours),
        served: None,
        mapping: Mapping::Claim,
        tracking: Tracking::ResourceVersion,
        projection: Projection(&["/status/phase", "/metadata/creationTimestamp"]),
    },
    applies_with: always,
    lifecycle: Lifecycle::Data { at_deletion },
    applying: Applying::Planned,
};

/// What the apply left.
#[derive(Debug, Default)]
pub struct ClaimApplied {
    /// The claim as the API server last answered (`None`: skipped as current, or not wanted).
    pub claim: Option<PersistentVolumeClaim>,
    /// Why the claim could not grow to the spec's size (it kept its size).
    pub growth_refused: Option<String>,
}

/// Applies the claim, if the storage mode wants one.
pub async fn apply(
    ctx: &Context,
    instance: &Instance<'_>,
    changes: &mut Changes,
) -> Result<ClaimApplied, ReconcileError> {
    let Some(desired) = pvc::pvc(instance)? else {
        return Ok(ClaimApplied::default());
    };
    let name = desired.name_any();
    let owner = (instance.namespace().to_owned(), instance.name().to_owned());
    let memory = &ctx.children.applied;
    let cached = ctx
        .children
        .cache(Kind::PersistentVolumeClaim)
        .lookup(Some(instance.namespace()), &name);
    let rendered = fingerprint(&desired).map_err(|source| ReconcileError::Encode {
        what: "a rendered child",
        source,
    })?;
    if memory
        .current(
            &owner,
            Kind::PersistentVolumeClaim,
            &name,
            rendered,
            &cached,
        )
        .is_some()
    {
        count(ctx, Kind::PersistentVolumeClaim, "skipped");
        return Ok(ClaimApplied::default());
    }
    let api: Api<PersistentVolumeClaim> = Api::namespaced(ctx.client.clone(), instance.namespace());
    let live = match cached {
        Cached::Absent if !memory.knows(&owner, Kind::PersistentVolumeClaim, &name) => None,
        _ => api.get_opt(&name).await.map_err(ReconcileError::kube(
            "reading",
            "PersistentVolumeClaim",
            &name,
        ))?,
    };
    if let Some(live) = &live
        && !instance.spec().storage.deletes_pvc_with_service()
        && let Some(patch) = pvc_plan::drop_owner_patch(live, instance.uid())
    {
        let patch = patch.to_kube_patch::<()>();
        api.patch(&name, &apply::update_params(), &patch)
            .await
            .map_err(ReconcileError::kube(
                "patching",
                "PersistentVolumeClaim",
                &name,
            ))?;
        tracing::info!(pvc = %name, "removed the owner reference of a retained PVC");
    }
    let live_rv = live
        .as_ref()
        .and_then(|l| l.metadata.resource_version.clone());
    let body = pvc_plan::apply_body(desired, live.as_ref());
    let growth = live.as_ref().and_then(|l| pvc_plan::growth(&body, l));
    let (applied, growth_refused) =
        match apply::apply_after(&api, "PersistentVolumeClaim", &body, live_rv.clone()).await {
            Ok(applied) => (applied, None),
            // A class that cannot expand (or a quota) refuses the growth: the claim keeps its
            // size and still serves, so the rest of the spec goes on being applied.
            Err(e) => {
                let (growth, refused) = match (growth, e.refusal()) {
                    (Some(growth), Some(why)) => {
                        let refused = format!(
                            "it could not grow from {} to {}: {why}",
                            growth.from.0, growth.to.0
                        );
                        (growth, refused)
                    }
                    _ => return Err(e),
                };
                tracing::warn!(pvc = %name, %refused, "the PVC keeps its size");
                let kept = pvc_plan::with_size(body, growth.from.clone());
                let applied =
                    apply::apply_after(&api, "PersistentVolumeClaim", &kept, live_rv).await?;
                (applied, Some(refused))
            }
        };
    count(ctx, Kind::PersistentVolumeClaim, applied.outcome.label());
    // Remembered only when the whole spec was applied: a refused growth is tried again.
    if growth_refused.is_none() {
        memory.record(
            &owner,
            Kind::PersistentVolumeClaim,
            &name,
            rendered,
            applied.object.metadata.resource_version.as_deref(),
            (),
        );
    }
    changes.applied(Kind::PersistentVolumeClaim, &name, applied.outcome);
    Ok(ClaimApplied {
        claim: Some(applied.object),
        growth_refused,
    })
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
