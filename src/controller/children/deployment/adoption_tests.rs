//! Adopting a Deployment another operator made, and when it must be replaced.

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
fn the_fingerprint_of_the_same_template_is_pinned() {
    let a = template_fingerprint(&desired());
    assert_eq!(a, template_fingerprint(&desired()));
    // Pinned: it is stored on Deployments, so it must not change between releases.
    assert_eq!(a, "2df0ce0d5c8daab9");
}

#[test]
fn the_fingerprint_follows_the_template() {
    let mut other = desired();
    other.data["spec"]["template"]["spec"]["containers"][0]["image"] = json!("svc:2");
    assert_ne!(
        template_fingerprint(&desired()),
        template_fingerprint(&other)
    );
}

fn live(match_labels: Value) -> Value {
    json!({"spec": {"selector": {"matchLabels": match_labels}}})
}

fn replaced(live: &Value, desired: &DynamicObject) -> bool {
    let Rendered {
        must_replace: Some(must_replace),
        ..
    } = DECLARATION.applying
    else {
        panic!("the Deployment is rendered and may be replaced");
    };
    must_replace(live, desired)
}

/// The Go operator's selector, with its version label.
fn go_selector() -> Value {
    live(
        json!({"app": "tas", "app.kubernetes.io/part-of": "trustyai",
                "app.kubernetes.io/version": "1.39.0"}),
    )
}

#[test]
fn the_go_operators_selector_is_kept() {
    let go = go_selector();
    let mut object = desired();
    assert!(keep_selector(&go, &mut object));
    assert_eq!(
        object
            .data
            .pointer("/spec/selector/matchLabels/app.kubernetes.io~1version"),
        Some(&json!("1.39.0"))
    );
    assert!(!replaced(&go, &object));
}

#[test]
fn the_pods_get_the_kept_selectors_labels() {
    let mut object = desired();
    keep_selector(&go_selector(), &mut object);
    assert_eq!(
        object
            .data
            .pointer("/spec/template/metadata/labels/app.kubernetes.io~1version"),
        Some(&json!("1.39.0"))
    );
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
