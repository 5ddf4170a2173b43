//! What the one apply path does with every rendered kind, driven by the list of kinds rather
//! than by a request script per kind: each behaviour is asserted the same way for each kind,
//! so a new kind is covered by being declared. The serving Secrets' rendering reads the operand
//! CA and their content is issued: the same four behaviours are `serving_secrets`' tests (issued
//! when absent, no request while current, issued again when changed or broken, a Secret no
//! longer rendered kept); their watch is here.

use kube::Resource;
use kube::api::DynamicObject;
use serde_json::{Value, json};

use super::apply_tests::{Harness, owner};
use super::declaration::{Kind, Lifecycle, Render, Renderer, Wanted};
use super::{Children, RenderInputs};
use crate::controller::children::cluster_role_binding::DEFAULT_PROXY_CLUSTER_ROLE;
use crate::controller::children::config_map::ServiceAccess;
use crate::controller::discovery::OptionalApis;
use crate::controller::mock_api::Expected;
use crate::controller::resources::Instance;
use crate::controller::resources::images::{ImageSources, resolve};
use crate::controller::test_support::{
    VERSION, database_service, migration_service, pvc_instance, pvc_service,
};
use trustyai_crds::TrustyAIService;

/// Every optional API served and the mesh objects wanted: every kind has objects to apply.
fn everything() -> OptionalApis {
    OptionalApis {
        routes: true,
        service_monitors: true,
        inference_services: true,
        destination_rules: true,
        virtual_services: true,
    }
}

fn inputs(harness: &Harness) -> RenderInputs<'_> {
    harness.inputs_wanting_istio(everything(), true)
}

/// The kinds rendered from the TrustyAIService and the inputs alone (all but the serving
/// Secrets).
fn rendered_kinds() -> impl Iterator<Item = Kind> {
    Kind::ALL
        .iter()
        .copied()
        .filter(|kind| pure_render(*kind).is_some())
}

/// The rendering of `kind`, when it is a pure function.
fn pure_render(kind: Kind) -> Option<Render> {
    match kind.declaration().applying.render {
        Renderer::Pure(render) => Some(render),
        Renderer::Reading(_) => None,
    }
}

/// What `kind` wants for the PVC-mode TrustyAIService, with each object's API path.
fn wanted(kind: Kind) -> Vec<(String, Wanted)> {
    let harness = Harness::new([]);
    let instance = pvc_instance();
    let Some(render) = pure_render(kind) else {
        return Vec::new();
    };
    let wanted = render(&instance, &inputs(&harness)).expect("rendered");
    assert!(!wanted.is_empty(), "{kind:?} renders nothing");
    wanted
        .into_iter()
        .map(|w| (path_of(kind, &w.object), w))
        .collect()
}

/// The API path of `object`, an object of `kind`.
fn path_of(kind: Kind, object: &DynamicObject) -> String {
    let watch = kind.declaration().watch;
    let namespace = object
        .metadata
        .namespace
        .as_deref()
        .filter(|_| watch.namespaced);
    let name = object.metadata.name.as_deref().unwrap_or_default();
    format!(
        "{}/{name}",
        DynamicObject::url_path(&(watch.resource)(), namespace)
    )
}

fn patches(paths: &[String]) -> Vec<String> {
    paths.iter().map(|p| format!("PATCH {p}")).collect()
}

/// A harness with every cache listed that expects `steps`, after the objects of `kind` were
/// applied once.
async fn applied_once(kind: Kind, then: impl IntoIterator<Item = Expected>) -> Harness {
    let paths: Vec<String> = wanted(kind).into_iter().map(|(p, _)| p).collect();
    let steps: Vec<Expected> = paths
        .iter()
        .map(|p| Expected::apply(p))
        .chain(then)
        .collect();
    let harness = Harness::listed(steps);
    harness
        .apply_kind_with(&pvc_service(), kind, inputs(&harness))
        .await
        .unwrap_or_else(|e| panic!("{kind:?}: {e}"));
    harness
}

#[tokio::test]
async fn every_kind_wanted_is_created_with_one_apply_per_object() {
    for kind in rendered_kinds() {
        let wanted = wanted(kind);
        let paths: Vec<String> = wanted.iter().map(|(p, _)| p.clone()).collect();
        let harness = applied_once(kind, []).await;
        assert_eq!(harness.api.calls(), patches(&paths), "{kind:?}");
        let notes = harness.api.event_notes();
        for (_, object) in wanted.iter().filter(|(_, w)| !w.shared) {
            let item = format!(
                "{} {}",
                kind.event_name(),
                object.object.metadata.name.as_deref().unwrap_or_default()
            );
            assert!(
                notes
                    .iter()
                    .any(|(_, note)| note.starts_with("Created: ") && note.contains(&item)),
                "{kind:?}: {item} not reported created in {notes:?}"
            );
        }
    }
}

#[tokio::test]
async fn every_kind_as_the_last_apply_left_it_costs_no_request() {
    for kind in rendered_kinds() {
        let harness = applied_once(kind, []).await;
        harness.api.clear();
        harness
            .apply_kind_with(&pvc_service(), kind, inputs(&harness))
            .await
            .unwrap_or_else(|e| panic!("{kind:?}: {e}"));
        assert_eq!(harness.api.calls(), Vec::<String>::new(), "{kind:?}");
    }
}

#[tokio::test]
async fn every_kind_changed_by_someone_else_is_applied_again() {
    for kind in rendered_kinds() {
        let wanted = wanted(kind);
        let paths: Vec<String> = wanted.iter().map(|(p, _)| p.clone()).collect();
        let harness = applied_once(kind, paths.iter().map(|p| Expected::apply(p))).await;
        harness.api.clear();
        // The watch shows each object at a version this operator's apply did not produce.
        let edited = wanted.iter().map(|(_, w)| {
            let mut object = serde_json::to_value(&w.object).expect("encodes");
            object["metadata"]["resourceVersion"] = json!("5");
            object["metadata"]["generation"] = json!(2);
            object["metadata"]["managedFields"] =
                json!([{"manager": "trustyai-operator", "operation": "Apply"}]);
            (object, Some(owner()))
        });
        harness.cache_objects(kind, edited.collect::<Vec<_>>());
        harness
            .apply_kind_with(&pvc_service(), kind, inputs(&harness))
            .await
            .unwrap_or_else(|e| panic!("{kind:?}: {e}"));
        assert_eq!(harness.api.calls(), patches(&paths), "{kind:?}");
    }
}

#[tokio::test]
async fn every_kind_no_longer_wanted_meets_its_lifecycle() {
    for kind in rendered_kinds() {
        let wanted = wanted(kind);
        let (path, first) = &wanted[0];
        let unwanted_path = format!("{path}-unwanted");
        let mut unwanted: Value = serde_json::to_value(&first.object).expect("encodes");
        let name = format!(
            "{}-unwanted",
            first.object.metadata.name.as_deref().unwrap_or_default()
        );
        unwanted["metadata"]["name"] = json!(name);
        unwanted["metadata"]["resourceVersion"] = json!("3");
        unwanted["metadata"]["generation"] = json!(1);
        let lifecycle = kind.declaration().lifecycle;
        let deleted = lifecycle.removes_orphans();
        let paths: Vec<String> = wanted.iter().map(|(p, _)| p.clone()).collect();
        let mut steps: Vec<Expected> = paths.iter().map(|p| Expected::apply(p)).collect();
        if deleted {
            steps.push(Expected::delete(&unwanted_path));
        }
        let harness = Harness::listed(steps);
        harness.cache_objects(kind, [(unwanted, Some(owner()))]);
        harness
            .apply_kind_with(&pvc_service(), kind, inputs(&harness))
            .await
            .unwrap_or_else(|e| panic!("{kind:?}: {e}"));
        let calls = harness.api.calls();
        let delete = format!("DELETE {unwanted_path}");
        assert_eq!(
            calls.contains(&delete),
            deleted,
            "{kind:?} ({lifecycle:?}): {calls:#?}"
        );
        if deleted {
            let notes = harness.api.event_notes();
            let item = format!("{} {name}", kind.event_name());
            assert!(
                notes
                    .iter()
                    .any(|(_, n)| n.contains("Deleted (no longer wanted): ") && n.contains(&item)),
                "{kind:?}: {notes:?}"
            );
        }
    }
    // What is never deleted while its TrustyAIService exists holds data or credentials.
    for &kind in Kind::ALL {
        let lifecycle = kind.declaration().lifecycle;
        if !lifecycle.removes_orphans() {
            assert!(
                matches!(lifecycle, Lifecycle::Data { .. } | Lifecycle::Credentials),
                "{kind:?}"
            );
        }
    }
}

/// Every object every rendered kind renders for `service`, as JSON.
fn render_all(service: &TrustyAIService) -> Vec<Value> {
    let instance = Instance::new(service, VERSION).expect("an instance");
    let images = resolve(&ImageSources::default());
    let inputs = RenderInputs {
        images: &images,
        custom_ca_bundle: true,
        db_ca_exists: true,
        apis: everything(),
        istio_wanted: true,
        proxy_cluster_role: DEFAULT_PROXY_CLUSTER_ROLE,
        operator_namespace: "operator-ns",
        service_access: ServiceAccess::Get,
    };
    rendered_kinds()
        .flat_map(|kind| {
            let Some(render) = pure_render(kind) else {
                return Vec::new();
            };
            let wanted = render(&instance, &inputs).expect("rendered");
            wanted
                .into_iter()
                .map(|w| serde_json::to_value(&w.object).expect("encodes"))
                .collect()
        })
        .collect()
}

/// Every `selector`/`matchLabels`/pod-template `labels` map found in `value`.
fn label_maps<'a>(value: &'a Value, key: Option<&str>, out: &mut Vec<&'a Value>) {
    match value {
        Value::Object(map) => {
            if matches!(key, Some("selector" | "matchLabels")) {
                out.push(value);
            }
            for (k, v) in map {
                label_maps(v, Some(k), out);
            }
        }
        Value::Array(items) => items.iter().for_each(|v| label_maps(v, None, out)),
        _ => {}
    }
}

#[test]
fn every_object_renders_deterministically() {
    for service in [pvc_service(), database_service(), migration_service()] {
        let a = render_all(&service);
        let b = render_all(&service);
        assert_eq!(a, b);
        for (x, y) in a.iter().zip(&b) {
            assert_eq!(
                serde_json::to_string(x).expect("json"),
                serde_json::to_string(y).expect("json")
            );
        }
    }
}

#[test]
fn no_selector_or_pod_template_carries_the_version() {
    let mut checked = 0;
    for service in [pvc_service(), database_service(), migration_service()] {
        for object in render_all(&service) {
            let mut maps = Vec::new();
            label_maps(&object, None, &mut maps);
            if let Some(template_labels) = object.pointer("/spec/template/metadata/labels") {
                maps.push(template_labels);
            }
            for map in maps {
                let text = map.to_string();
                assert!(!text.contains("app.kubernetes.io/version"), "{text}");
                assert!(!text.contains(VERSION), "{text}");
                checked += 1;
            }
        }
    }
    // Deployment selector and template, two Service selectors, two ServiceMonitor
    // selectors (each with matchLabels inside), per mode.
    assert!(checked >= 3 * 8, "{checked}");
}

#[test]
fn namespaced_children_are_owned_unless_retained_or_shared() {
    let service = pvc_service();
    for object in render_all(&service) {
        let kind = object["kind"].as_str().map(str::to_owned);
        let name = object["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let owners = object["metadata"].get("ownerReferences");
        let unowned = matches!(
            (kind.as_deref(), name.as_str()),
            (Some("ClusterRoleBinding"), _)
                | (Some("ServiceMonitor"), "trustyai-metrics")
                | (Some("PersistentVolumeClaim"), "tas-pvc")
        );
        if unowned {
            assert!(owners.is_none(), "{kind:?} {name}");
        } else {
            let owner = &owners.expect("owner references")[0];
            assert_eq!(owner["controller"], true, "{kind:?} {name}");
            assert_eq!(owner["blockOwnerDeletion"], true);
            assert_eq!(owner["apiVersion"], "trustyai.opendatahub.io/v1");
            assert_eq!(owner["kind"], "TrustyAIService");
            assert_eq!(owner["name"], "tas");
        }
    }
}

#[test]
fn every_kind_is_watched() {
    let alone = Children::default();
    let watched: Vec<&str> = alone.watches().iter().map(|w| w.label).collect();
    for &kind in Kind::ALL {
        assert!(
            watched.contains(&kind.name()),
            "{kind:?} not in {watched:?}"
        );
    }
    // Where the process watches a kind for everyone, the controller shares that cache.
    let process = super::process_watches::ProcessWatches::default();
    let sharing = Children::sharing(Some(process.clone()));
    let own: Vec<&str> = sharing.watches().iter().map(|w| w.label).collect();
    for &kind in Kind::ALL {
        let shared = process.cache(kind).is_some();
        assert_eq!(own.contains(&kind.name()), !shared, "{kind:?}");
        if let Some(cache) = process.cache(kind) {
            assert!(std::ptr::eq(
                std::sync::Arc::as_ptr(cache),
                sharing.cache(kind)
            ));
        }
    }
}
