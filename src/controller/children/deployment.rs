//! The Deployment `<cr>`. Tracked by generation and metadata (its status moves with every pod,
//! which would otherwise cost a no-op apply each time); its cache keeps the status and the
//! selector, so observing it and checking the immutable selector need no read.
//!
//! A Deployment the Go operator made is adopted as it runs: its selector (which holds the Go
//! operator's `app.kubernetes.io/version`) cannot change, and its pod template is left as the
//! Go operator wrote it as long as nothing it is made from changed, so switching operators
//! replaces no pod. [`POD_TEMPLATE_ANNOTATION`] records the decision on the Deployment.

use k8s_openapi::api::apps::v1::Deployment;
use kube::api::DynamicObject;
use serde_json::Value;

use super::super::resources::deployment::{self, DeploymentInputs};
use super::cache::Projection;
use super::declaration::{
    Applying, Declaration, Lifecycle, Mapping, Rendered, WatchSpec, always, ours,
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
    // The images a Go operator's Deployment runs, to tell whether its pods can stay (the Go
    // operator's template has the service first and the proxy second, as ours does).
    "/spec/template/spec/containers/0/name",
    "/spec/template/spec/containers/0/image",
    "/spec/template/spec/containers/1/name",
    "/spec/template/spec/containers/1/image",
    "/metadata/annotations/trustyai.opendatahub.io~1pod-template",
    "/status",
]);

/// On a Deployment the Go operator made: `kept:<fingerprint>` while its pod template is left as
/// the Go operator wrote it (the fingerprint is of the template this operator rendered then), and
/// `rendered` once this operator's template replaced it.
pub const POD_TEMPLATE_ANNOTATION: &str = "trustyai.opendatahub.io/pod-template";
const KEPT: &str = "kept:";

/// Whether `deployment`'s pod template is the Go operator's, left as it ran: nothing this
/// operator applied since rolled its pods.
pub fn template_kept(deployment: &Deployment) -> bool {
    deployment
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(POD_TEMPLATE_ANNOTATION))
        .is_some_and(|decision| decision.starts_with(KEPT))
}
const RENDERED: &str = "rendered";

/// The declaration.
pub const DECLARATION: Declaration = Declaration {
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
    applying: Applying::Rendered(Rendered {
        keep_live: Some(adopt_in_place),
        // A selector is immutable: one that is not ours plus labels is replaced.
        must_replace: Some(|live, desired| {
            live.pointer("/spec/selector") != desired.data.pointer("/spec/selector")
        }),
        ..Rendered::new(|instance, inputs| {
            render_one(&deployment::deployment(
                instance,
                &DeploymentInputs {
                    images: inputs.images,
                    custom_ca_bundle: inputs.custom_ca_bundle,
                    db_ca_exists: inputs.db_ca_exists,
                    service_access: inputs.service_access,
                },
            )?)
        })
    }),
};

/// Adapts the rendered Deployment to a Go operator's one (see the module documentation);
/// changes nothing for any other. Whether this is the first apply to it (the take-over).
fn adopt_in_place(live: &Value, desired: &mut DynamicObject) -> bool {
    if !keep_selector(live, desired) {
        return false;
    }
    let template = template_fingerprint(desired);
    let kept = format!("{KEPT}{template}");
    let recorded = live
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(POD_TEMPLATE_ANNOTATION))
        .and_then(Value::as_str);
    let decision = match recorded {
        // First met: the pods stay when they run the images this operator would give them.
        // What else the template holds comes from the same TrustyAIService, which the Go
        // operator reconciled until it stopped.
        None if same_images(live, desired) => kept,
        // Kept, and still made from the same TrustyAIService, images and configuration.
        Some(recorded) if recorded == kept => kept,
        // Something changed since (or the images differed): this operator's template rolls the
        // pods once, as any change would.
        _ => RENDERED.to_owned(),
    };
    if decision.starts_with(KEPT)
        && let Some(spec) = desired.data.get_mut("spec").and_then(Value::as_object_mut)
    {
        // Left out of the apply, the Go operator's template stays as it is.
        spec.remove("template");
    }
    desired
        .metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(POD_TEMPLATE_ANNOTATION.to_owned(), decision);
    recorded.is_none()
}

/// Whether the live containers run the images `desired` gives the containers of the same names.
fn same_images(live: &Value, desired: &DynamicObject) -> bool {
    let images = |containers: Option<&Value>| -> Vec<(String, String)> {
        let mut pairs: Vec<(String, String)> = containers
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|c| {
                Some((
                    c.get("name")?.as_str()?.to_owned(),
                    c.get("image")?.as_str()?.to_owned(),
                ))
            })
            .collect();
        pairs.sort();
        pairs
    };
    let live = images(live.pointer("/spec/template/spec/containers"));
    !live.is_empty() && live == images(desired.data.pointer("/spec/template/spec/containers"))
}

/// A fingerprint of the rendered pod template that stays the same across processes and
/// releases (it is stored on the Deployment): FNV-1a over its JSON.
fn template_fingerprint(desired: &DynamicObject) -> String {
    let text = desired
        .data
        .pointer("/spec/template")
        .map(Value::to_string)
        .unwrap_or_default();
    let hash = text.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    format!("{hash:016x}")
}

/// Keeps a live selector that selects on this operator's labels plus others (the Go
/// operator's also holds `app.kubernetes.io/version`), and gives the pods those labels too: the
/// selector cannot change in place, and replacing the Deployment would restart the service.
/// Whether it kept such a selector.
fn keep_selector(live: &Value, desired: &mut DynamicObject) -> bool {
    const LABELS: &str = "/spec/selector/matchLabels";
    if live.pointer("/spec/selector/matchExpressions").is_some() {
        return false;
    }
    let (Some(Value::Object(live_labels)), Some(Value::Object(ours))) =
        (live.pointer(LABELS), desired.data.pointer(LABELS))
    else {
        return false;
    };
    let superset = ours.iter().all(|(k, v)| live_labels.get(k) == Some(v));
    if !superset || live_labels.len() == ours.len() {
        return false;
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
    true
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
                "template": {
                    "metadata": {"labels": {"app": "tas", "app.kubernetes.io/part-of": "trustyai"}},
                    "spec": {"containers": [{"name": "trustyai-service", "image": "svc:1"},
                                            {"name": "kube-rbac-proxy", "image": "proxy:1"}]}
                }
            }
        }))
        .expect("a Deployment")
    }

    /// The Go operator's Deployment as the cache projects it.
    fn go_live(service_image: &str, annotation: Option<&str>) -> Value {
        let mut live = json!({
            "spec": {
                "selector": {"matchLabels": {"app": "tas", "app.kubernetes.io/part-of": "trustyai",
                                             "app.kubernetes.io/version": "1.39.0"}},
                "template": {"spec": {"containers": [{"name": "trustyai-service", "image": service_image},
                                                     {"name": "kube-rbac-proxy", "image": "proxy:1"}]}}
            }
        });
        if let Some(annotation) = annotation {
            live["metadata"] = json!({"annotations": {POD_TEMPLATE_ANNOTATION: annotation}});
        }
        live
    }

    fn decision(object: &DynamicObject) -> Option<&str> {
        object
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(POD_TEMPLATE_ANNOTATION))
            .map(String::as_str)
    }

    #[test]
    fn a_go_operators_pods_running_our_images_are_left_as_they_run() {
        let mut first = desired();
        assert!(
            adopt_in_place(&go_live("svc:1", None), &mut first),
            "taken over"
        );
        let kept = decision(&first).expect("recorded").to_owned();
        assert!(kept.starts_with(KEPT), "{kept}");
        assert_eq!(
            first.data.pointer("/spec/template"),
            None,
            "the template is not applied"
        );
        assert!(
            first
                .data
                .pointer("/spec/selector/matchLabels/app.kubernetes.io~1version")
                .is_some()
        );

        // Later reconciles with nothing changed keep them.
        let mut again = desired();
        assert!(!adopt_in_place(&go_live("svc:1", Some(&kept)), &mut again));
        assert_eq!(decision(&again), Some(kept.as_str()));
        assert_eq!(again.data.pointer("/spec/template"), None);
    }

    #[test]
    fn a_change_after_adoption_or_other_images_roll_the_pods_once() {
        // The rendered template changed since it was kept (the spec, an image, the config).
        let mut changed = desired();
        adopt_in_place(
            &go_live("svc:1", Some("kept:0000000000000000")),
            &mut changed,
        );
        assert_eq!(decision(&changed), Some(RENDERED));
        assert!(
            changed
                .data
                .pointer("/spec/template/spec/containers")
                .is_some()
        );
        // Once rendered, it stays this operator's.
        let mut after = desired();
        adopt_in_place(&go_live("svc:1", Some(RENDERED)), &mut after);
        assert_eq!(decision(&after), Some(RENDERED));
        assert!(after.data.pointer("/spec/template").is_some());
        // The Go operator ran another image: this operator's template is applied at once.
        let mut other = desired();
        adopt_in_place(&go_live("svc:0", None), &mut other);
        assert_eq!(decision(&other), Some(RENDERED));
        assert!(other.data.pointer("/spec/template").is_some());
    }

    #[test]
    fn our_own_deployment_gets_no_decision() {
        let ours = json!({"spec": {"selector": {"matchLabels": {"app": "tas", "app.kubernetes.io/part-of": "trustyai"}}}});
        let mut object = desired();
        assert!(!adopt_in_place(&ours, &mut object));
        assert_eq!(object.data, desired().data);
        assert_eq!(decision(&object), None);
    }

    #[test]
    fn the_fingerprint_is_stable_and_follows_the_template() {
        let a = template_fingerprint(&desired());
        assert_eq!(a, template_fingerprint(&desired()));
        // Pinned: it is stored on Deployments, so it must not change between releases.
        assert_eq!(a, "2df0ce0d5c8daab9");
        let mut other = desired();
        other.data["spec"]["template"]["spec"]["containers"][0]["image"] = json!("svc:2");
        assert_ne!(a, template_fingerprint(&other));
    }

    fn live(match_labels: Value) -> Value {
        json!({"spec": {"selector": {"matchLabels": match_labels}}})
    }

    fn replaced(live: &Value, desired: &DynamicObject) -> bool {
        let Applying::Rendered(Rendered {
            must_replace: Some(must_replace),
            ..
        }) = DECLARATION.applying
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
        assert!(keep_selector(&go, &mut object));
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
        assert!(!keep_selector(&foreign, &mut object));
        assert_eq!(object.data, desired().data);
        assert!(replaced(&foreign, &object));
        let ours = live(json!({"app": "tas", "app.kubernetes.io/part-of": "trustyai"}));
        assert!(!replaced(&ours, &desired()));
    }
}
