//! The Deployment `<cr>`. Tracked by generation and metadata (its status moves with every pod,
//! which would otherwise cost a no-op apply each time); its cache keeps the status and the
//! selector, so observing it and checking the immutable selector need no read.

use k8s_openapi::api::apps::v1::Deployment;
use kube::api::DynamicObject;
use serde_json::Value;

use super::super::resources::deployment::{self, DeploymentInputs};
use super::cache::Projection;
use super::declaration::{
    Applying, Declaration, Kind, Lifecycle, Mapping, WatchSpec, always, ours,
};
use super::memory::Tracking;
use super::{built_in, render_one};

/// The fields the reconciler reads: what [`super::super::status::DeploymentObservation`]
/// needs, and the selector.
pub const PROJECTION: Projection = Projection(&[
    "/metadata/generation",
    "/spec/replicas",
    "/spec/selector",
    // Required by the typed Deployment; the labels are all the reconciler could want of it.
    "/spec/template/metadata/labels",
    "/status",
]);

/// The declaration.
pub const DECLARATION: Declaration = Declaration {
    kind: Kind::Deployment,
    label: "Deployment",
    watch: WatchSpec {
        resource: built_in::<Deployment>,
        namespaced: true,
        selector: Some(ours),
        served: None,
        mapping: Mapping::OwnerReferences,
        tracking: Tracking::GenerationAndMetadata,
        projection: PROJECTION,
    },
    applies_with: always,
    lifecycle: Lifecycle::Owned,
    applying: Applying::Rendered {
        render: |instance, inputs| {
            render_one(&deployment::deployment(
                instance,
                &DeploymentInputs {
                    images: inputs.images,
                    custom_ca_bundle: inputs.custom_ca_bundle,
                    db_ca_exists: inputs.db_ca_exists,
                },
            )?)
        },
        keep_live: Some(keep_selector),
        // A selector is immutable: one that is not ours plus labels is replaced.
        must_replace: Some(|live, desired| {
            live.pointer("/spec/selector") != desired.data.pointer("/spec/selector")
        }),
    },
};

/// Keeps a live selector that selects on this operator's labels plus others (the Go
/// operator's also holds `app.kubernetes.io/version`), and gives the pods those labels too: the
/// selector cannot change in place, and replacing the Deployment would restart the service.
fn keep_selector(live: &Value, desired: &mut DynamicObject) {
    const LABELS: &str = "/spec/selector/matchLabels";
    if live.pointer("/spec/selector/matchExpressions").is_some() {
        return;
    }
    let (Some(Value::Object(live_labels)), Some(Value::Object(ours))) =
        (live.pointer(LABELS), desired.data.pointer(LABELS))
    else {
        return;
    };
    let superset = ours.iter().all(|(k, v)| live_labels.get(k) == Some(v));
    if !superset || live_labels.len() == ours.len() {
        return;
    }
    let live_labels = live_labels.clone();
    if let Some(template) = desired
        .data
        .pointer_mut("/spec/template/metadata/labels")
        .and_then(Value::as_object_mut)
    {
        for (key, value) in &live_labels {
            template.insert(key.clone(), value.clone());
        }
    }
    if let Some(selector) = desired.data.pointer_mut(LABELS) {
        *selector = Value::Object(live_labels);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn desired() -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "tas"},
            "spec": {
                "selector": {"matchLabels": {"app": "tas", "app.kubernetes.io/part-of": "trustyai"}},
                "template": {"metadata": {"labels": {"app": "tas", "app.kubernetes.io/part-of": "trustyai"}}}
            }
        }))
        .expect("a Deployment")
    }

    fn live(match_labels: Value) -> Value {
        json!({"spec": {"selector": {"matchLabels": match_labels}}})
    }

    fn replaced(live: &Value, desired: &DynamicObject) -> bool {
        let Applying::Rendered {
            must_replace: Some(must_replace),
            ..
        } = DECLARATION.applying
        else {
            panic!("the Deployment is rendered and may be replaced");
        };
        must_replace(live, desired)
    }

    #[test]
    fn the_go_operators_selector_is_kept_and_the_pods_get_its_labels() {
        let go = live(
            json!({"app": "tas", "app.kubernetes.io/part-of": "trustyai",
                             "app.kubernetes.io/version": "1.39.0"}),
        );
        let mut object = desired();
        keep_selector(&go, &mut object);
        assert_eq!(
            object
                .data
                .pointer("/spec/selector/matchLabels/app.kubernetes.io~1version"),
            Some(&json!("1.39.0"))
        );
        assert_eq!(
            object
                .data
                .pointer("/spec/template/metadata/labels/app.kubernetes.io~1version"),
            Some(&json!("1.39.0"))
        );
        assert!(!replaced(&go, &object));
    }

    #[test]
    fn a_selector_without_our_labels_is_replaced() {
        let foreign = live(json!({"app": "other"}));
        let mut object = desired();
        keep_selector(&foreign, &mut object);
        assert_eq!(object.data, desired().data);
        assert!(replaced(&foreign, &object));
        let ours = live(json!({"app": "tas", "app.kubernetes.io/part-of": "trustyai"}));
        assert!(!replaced(&ours, &desired()));
    }
}
