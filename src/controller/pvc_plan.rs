//! What to apply to the PVC `<cr>-pvc`, given the one that exists.
//!
//! A claim's spec is immutable except for its size, which may only grow. Server-side apply
//! removes fields the field manager stops sending, so the applied body keeps the same fields
//! on every pass and takes the immutable values (access modes, volume name, storage class)
//! from the live claim whenever it has them: an adopted claim (retained from a deleted
//! TrustyAIService, or made by the Go operator) is never asked to change them. The requested
//! size is the larger of the spec's and the live one: a claim is never shrunk.
//!
//! With `retention: Retain` the claim must not be owned by the TrustyAIService. The Go operator
//! made it owned; [`drop_owner_patch`] removes that owner reference (which belongs to another
//! field manager, so server-side apply cannot drop it).

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use serde_json::{Value, json};
use trustyai_crds::quantity::Quantity as ExactQuantity;

use super::wiring::json_patch::{JsonPatch, pointer, remove, test};

/// The body to apply: `desired` with the live claim's immutable settings and the larger size.
pub fn apply_body(
    mut desired: PersistentVolumeClaim,
    live: Option<&PersistentVolumeClaim>,
) -> PersistentVolumeClaim {
    let (Some(live_spec), Some(spec)) = (live.and_then(|l| l.spec.as_ref()), desired.spec.as_mut())
    else {
        return desired;
    };
    if live_spec.access_modes.is_some() {
        spec.access_modes.clone_from(&live_spec.access_modes);
    }
    if spec.volume_name.is_some() && live_spec.volume_name.is_some() {
        spec.volume_name.clone_from(&live_spec.volume_name);
    }
    if spec.storage_class_name.is_some() && live_spec.storage_class_name.is_some() {
        spec.storage_class_name
            .clone_from(&live_spec.storage_class_name);
    }
    let live_size = storage_request(live_spec.resources.as_ref());
    if let (Some(live_size), Some(requests)) = (
        live_size,
        spec.resources.as_mut().and_then(|r| r.requests.as_mut()),
    ) && let Some(wanted) = requests.get_mut("storage")
        && larger(&live_size.0, &wanted.0)
    {
        *wanted = live_size;
    }
    desired
}

/// The live claim's requested size.
fn storage_request(
    resources: Option<&k8s_openapi::api::core::v1::VolumeResourceRequirements>,
) -> Option<Quantity> {
    resources?.requests.as_ref()?.get("storage").cloned()
}

/// `a > b` as quantities; unparseable values never win.
fn larger(a: &str, b: &str) -> bool {
    match (ExactQuantity::parse(a), ExactQuantity::parse(b)) {
        (Ok(a), Ok(b)) => a > b,
        _ => false,
    }
}

/// A body that asks the live claim for more than it has now: the sizes (live, wanted).
pub struct Growth {
    /// What the live claim asks for.
    pub from: Quantity,
    /// What the body asks for.
    pub to: Quantity,
}

/// Whether applying `body` grows the `live` claim. Growing is the one change that can be
/// refused for reasons outside the spec (the claim's class cannot expand), so the caller can
/// keep the claim as it is and go on.
pub fn growth(body: &PersistentVolumeClaim, live: &PersistentVolumeClaim) -> Option<Growth> {
    let from = storage_request(live.spec.as_ref()?.resources.as_ref())?;
    let to = storage_request(body.spec.as_ref()?.resources.as_ref())?;
    larger(&to.0, &from.0).then_some(Growth { from, to })
}

/// `body` asking for `size`.
pub fn with_size(mut body: PersistentVolumeClaim, size: Quantity) -> PersistentVolumeClaim {
    if let Some(requests) = body
        .spec
        .as_mut()
        .and_then(|s| s.resources.as_mut())
        .and_then(|r| r.requests.as_mut())
    {
        requests.insert("storage".to_owned(), size);
    }
    body
}

/// With `retention: Retain`: the patch removing an owner reference to the TrustyAIService
/// `uid` from the live claim (guarded by its resourceVersion and the reference's uid), or
/// `None` when there is none.
pub fn drop_owner_patch(live: &PersistentVolumeClaim, uid: &str) -> Option<JsonPatch> {
    let owners = live.metadata.owner_references.as_deref()?;
    let index = owners.iter().position(|o| o.uid == uid)?;
    let mut ops = Vec::new();
    if let Some(rv) = &live.metadata.resource_version {
        ops.push(test(pointer(&["metadata", "resourceVersion"]), json!(rv)));
    }
    let item = index.to_string();
    ops.push(test(
        pointer(&["metadata", "ownerReferences", item.as_str(), "uid"]),
        Value::String(uid.to_owned()),
    ));
    ops.push(if owners.len() == 1 {
        remove(pointer(&["metadata", "ownerReferences"]))
    } else {
        remove(pointer(&["metadata", "ownerReferences", item.as_str()]))
    });
    Some(JsonPatch(ops))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim(value: Value) -> PersistentVolumeClaim {
        serde_json::from_value(value).unwrap_or_default()
    }

    fn desired() -> PersistentVolumeClaim {
        claim(json!({
            "metadata": {"name": "tas-pvc", "namespace": "models", "labels": {"app": "tas"}},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "2Gi"}}}
        }))
    }

    fn size(c: &PersistentVolumeClaim) -> String {
        c.spec
            .as_ref()
            .and_then(|s| storage_request(s.resources.as_ref()))
            .map(|q| q.0)
            .unwrap_or_default()
    }

    /// A live claim of 1Gi, and the body applying [`desired`] (2Gi) over it.
    fn growing() -> (PersistentVolumeClaim, PersistentVolumeClaim) {
        let live = claim(json!({"spec": {"resources": {"requests": {"storage": "1Gi"}}}}));
        (apply_body(desired(), Some(&live)), live)
    }

    #[test]
    fn a_larger_request_is_a_growth() {
        let (body, live) = growing();
        let growth = growth(&body, &live).expect("1Gi -> 2Gi grows");
        assert_eq!(
            (growth.from.0.as_str(), growth.to.0.as_str()),
            ("1Gi", "2Gi")
        );
    }

    #[test]
    fn a_growth_can_be_undone() {
        let (body, live) = growing();
        let from = growth(&body, &live).expect("1Gi -> 2Gi grows").from;
        let kept = with_size(body, from);
        assert_eq!(size(&kept), "1Gi");
        assert!(growth(&kept, &live).is_none());
    }

    #[test]
    fn the_same_size_or_no_live_size_is_no_growth() {
        // Same size, spelled differently, or no live size: no growth.
        let same = claim(json!({"spec": {"resources": {"requests": {"storage": "2048Mi"}}}}));
        assert!(growth(&desired(), &same).is_none());
        assert!(growth(&desired(), &claim(json!({"spec": {}}))).is_none());
    }

    #[test]
    fn absent_claim_gets_the_desired_body() {
        assert_eq!(apply_body(desired(), None), desired());
    }

    /// The size of the body applying [`desired`] (2Gi) over the live claim `live`.
    fn size_applied_over(live: Value) -> String {
        size(&apply_body(desired(), Some(&claim(live))))
    }

    #[test]
    fn never_shrinks() {
        let live = json!({"spec": {"accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "5Gi"}}}});
        assert_eq!(size_applied_over(live), "5Gi");
    }

    #[test]
    fn grows_to_the_desired_size() {
        let live = json!({"spec": {"accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "1024Mi"}}}});
        assert_eq!(size_applied_over(live), "2Gi");
    }

    #[test]
    fn the_same_size_spelled_differently_takes_the_desired_spelling() {
        let live = json!({"spec": {"resources": {"requests": {"storage": "2048Mi"}}}});
        assert_eq!(size_applied_over(live), "2Gi");
    }

    #[test]
    fn keeps_the_live_immutable_settings() {
        let mut with_pv = desired();
        if let Some(spec) = with_pv.spec.as_mut() {
            spec.volume_name = Some("pv-a".into());
            spec.storage_class_name = Some(String::new());
        }
        let live = claim(
            json!({"spec": {"accessModes": ["ReadWriteMany"], "volumeName": "pv-b",
            "storageClassName": "manual", "resources": {"requests": {"storage": "2Gi"}}}}),
        );
        let body = apply_body(with_pv, Some(&live));
        let spec = body.spec.expect("spec");
        assert_eq!(spec.access_modes, Some(vec!["ReadWriteMany".to_owned()]));
        assert_eq!(spec.volume_name.as_deref(), Some("pv-b"));
        assert_eq!(spec.storage_class_name.as_deref(), Some("manual"));
        // Fields the desired claim does not set stay unset, whatever the live claim holds.
        let spec = apply_body(desired(), Some(&live)).spec.expect("spec");
        assert!(spec.volume_name.is_none() && spec.storage_class_name.is_none());
    }

    #[test]
    fn drops_only_the_owner_reference_to_the_service() {
        let owner = |uid: &str| json!({"apiVersion": "v1", "kind": "X", "name": "n", "uid": uid});
        let live = claim(json!({"metadata": {"resourceVersion": "7",
            "ownerReferences": [owner("other"), owner("u1")]}}));
        let patch = drop_owner_patch(&live, "u1").expect("patch");
        assert_eq!(
            patch.to_value(),
            json!([
                {"op": "test", "path": "/metadata/resourceVersion", "value": "7"},
                {"op": "test", "path": "/metadata/ownerReferences/1/uid", "value": "u1"},
                {"op": "remove", "path": "/metadata/ownerReferences/1"}
            ])
        );
        let only = claim(json!({"metadata": {"ownerReferences": [owner("u1")]}}));
        assert_eq!(
            drop_owner_patch(&only, "u1").expect("patch").to_value(),
            json!([
                {"op": "test", "path": "/metadata/ownerReferences/0/uid", "value": "u1"},
                {"op": "remove", "path": "/metadata/ownerReferences"}
            ])
        );
        assert!(drop_owner_patch(&live, "u2").is_none());
        assert!(drop_owner_patch(&desired(), "u1").is_none());
    }
}
