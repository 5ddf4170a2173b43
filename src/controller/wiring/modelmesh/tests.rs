use k8s_openapi::api::apps::v1::Deployment;
use serde_json::{Value, json};

use super::*;
use crate::controller::wiring::json_patch::apply;

/// A ModelMesh Deployment like the one modelmesh-controller renders: container `mm` with a
/// foreign payload processor, and a second container without env.
fn modelmesh_deployment() -> Deployment {
    serde_json::from_value(json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": "modelmesh-serving-ovms", "namespace": "models", "resourceVersion": "7",
            "labels": {"modelmesh-service": "modelmesh-serving"}
        },
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "mm"}},
            "template": {
                "metadata": {"labels": {"app": "mm"}},
                "spec": {
                    "containers": [
                        {
                            "name": "mm",
                            "image": "modelmesh",
                            "env": [
                                {"name": "MM_SERVICE_NAME", "value": "modelmesh-serving"},
                                {"name": "MM_PAYLOAD_PROCESSORS", "value": "http://other.example/consume"}
                            ],
                            "volumeMounts": [{"name": "tc-config", "mountPath": "/etc/tc"}]
                        },
                        {"name": "ovms", "image": "ovms"}
                    ],
                    "volumes": [{"name": "tc-config", "configMap": {"name": "tc"}}]
                }
            }
        },
        "status": {"replicas": 1, "readyReplicas": 1}
    }))
    .expect("deployment")
}

/// Applies `patch` as the API server would, bumping the resourceVersion.
fn patched(deployment: &Deployment, patch: &JsonPatch) -> Deployment {
    let mut value = serde_json::to_value(deployment).expect("json");
    apply(&mut value, patch).expect("patch applies");
    let rv: u64 = value["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    value["metadata"]["resourceVersion"] = json!((rv + 1).to_string());
    serde_json::from_value(value).expect("still a deployment")
}

fn env(deployment: &Deployment, container: &str, name: &str) -> Option<String> {
    deployment
        .spec
        .template
        .spec
        .as_ref()?
        .containers
        .iter()
        .find(|c| c.name == container)?
        .env
        .as_ref()?
        .iter()
        .find(|e| e.name == name)?
        .value
        .clone()
}

fn mounts(deployment: &Deployment, container: &str) -> Vec<(String, String)> {
    deployment
        .spec
        .template
        .spec
        .as_ref()
        .and_then(|p| p.containers.iter().find(|c| c.name == container))
        .and_then(|c| c.volume_mounts.clone())
        .unwrap_or_default()
        .into_iter()
        .map(|m| (m.name, m.mount_path))
        .collect()
}

fn volumes(deployment: &Deployment) -> Vec<String> {
    deployment
        .spec
        .template
        .spec
        .as_ref()
        .and_then(|p| p.volumes.clone())
        .unwrap_or_default()
        .into_iter()
        .map(|v| v.name)
        .collect()
}

/// `container`'s `MM_PAYLOAD_PROCESSORS` in `deployment` is `expected`.
#[track_caller]
fn assert_processors(deployment: &Deployment, container: &str, expected: &str) {
    assert_eq!(
        env(deployment, container, "MM_PAYLOAD_PROCESSORS").as_deref(),
        Some(expected),
        "{container}"
    );
}

/// The Deployment without resourceVersion, for before/after comparisons.
fn content(deployment: &Deployment) -> Value {
    let mut value = serde_json::to_value(deployment).expect("json");
    value["metadata"]
        .as_object_mut()
        .expect("metadata")
        .remove("resourceVersion");
    value
}

const URL_A: &str = "https://tas-a.models.svc/consumer/kserve/v2";
const URL_B: &str = "https://tas-b.models.svc/consumer/kserve/v2";

#[test]
fn url_format() {
    assert_eq!(payload_processor_url("tas-a", "models"), URL_A);
}

/// `deployment` after the API server applied `cr`'s wiring to it.
fn wired(deployment: &Deployment, cr: &str) -> Deployment {
    patched(deployment, &wire(deployment, cr, "models"))
}

/// `deployment` after the API server applied the removal of `cr`'s wiring.
fn unwired(deployment: &Deployment, cr: &str) -> Deployment {
    patched(deployment, &unwire(deployment, cr, "models"))
}

#[test]
fn wire_is_guarded_by_the_resource_version() {
    let patch = wire(&modelmesh_deployment(), "tas-a", "models");
    assert_eq!(
        patch.operations().first(),
        Some(&super::super::json_patch::test(
            super::super::json_patch::pointer(&["metadata", "resourceVersion"]),
            json!("7")
        ))
    );
}

#[test]
fn wire_adds_the_url_to_every_containers_payload_processors() {
    let d = wired(&modelmesh_deployment(), "tas-a");
    assert_processors(&d, "mm", &format!("http://other.example/consume {URL_A}"));
    assert_processors(&d, "ovms", URL_A);
}

#[test]
fn wire_gives_the_modelmesh_container_the_cert_path_among_its_env() {
    let d = wired(&modelmesh_deployment(), "tas-a");
    assert_eq!(
        env(&d, "mm", "MM_TLS_KEY_CERT_PATH").as_deref(),
        Some("/etc/trustyai/tls/tls.crt")
    );
    assert_eq!(env(&d, "ovms", "MM_TLS_KEY_CERT_PATH"), None);
    assert_eq!(
        env(&d, "mm", "MM_SERVICE_NAME").as_deref(),
        Some("modelmesh-serving")
    );
}

#[test]
fn wire_mounts_the_internal_certificate_secret_in_every_container() {
    let d = wired(&modelmesh_deployment(), "tas-a");
    for c in ["mm", "ovms"] {
        assert!(mounts(&d, c).contains(&("tas-a-internal".into(), "/etc/trustyai/tls".into())));
    }
    assert_eq!(volumes(&d), ["tc-config", "tas-a-internal"]);
    let volume = d
        .spec
        .template
        .spec
        .as_ref()
        .and_then(|p| p.volumes.as_ref())
        .and_then(|v| v.iter().find(|v| v.name == "tas-a-internal"))
        .and_then(|v| v.secret.as_ref())
        .and_then(|s| s.secret_name.clone());
    assert_eq!(volume.as_deref(), Some("tas-a-internal"));
}

#[test]
fn wire_is_idempotent() {
    let once = patched(
        &modelmesh_deployment(),
        &wire(&modelmesh_deployment(), "tas-a", "models"),
    );
    assert!(wire(&once, "tas-a", "models").is_empty());
}

/// The ModelMesh Deployment wired to `tas-a`, then to `tas-b`.
fn wired_to_both() -> Deployment {
    wired(&wired(&modelmesh_deployment(), "tas-a"), "tas-b")
}

/// [`wired_to_both`] once `tas-a`'s wiring is removed.
fn left_by_a() -> Deployment {
    unwired(&wired_to_both(), "tas-a")
}

/// [`left_by_a`] after `tas-b`'s next reconcile.
fn taken_over_by_b() -> Deployment {
    wired(&left_by_a(), "tas-b")
}

#[test]
fn two_services_add_up() {
    let ab = wired_to_both();
    assert_processors(
        &ab,
        "mm",
        &format!("http://other.example/consume {URL_A} {URL_B}"),
    );
    assert_processors(&ab, "ovms", &format!("{URL_A} {URL_B}"));
    // One mount per path: B finds it taken by A and mounts nothing, so adds no volume.
    assert_eq!(
        mounts(&ab, "ovms"),
        [("tas-a-internal".to_owned(), "/etc/trustyai/tls".to_owned())]
    );
    assert_eq!(volumes(&ab), ["tc-config", "tas-a-internal"]);
    assert!(wire(&ab, "tas-a", "models").is_empty());
    assert!(wire(&ab, "tas-b", "models").is_empty());
}

#[test]
fn removing_one_of_two_services_leaves_the_others_wiring() {
    // Removing A keeps B's URL and the foreign one; A's mount, volume and the cert path go.
    let b = left_by_a();
    assert_processors(&b, "mm", &format!("http://other.example/consume {URL_B}"));
    assert_processors(&b, "ovms", URL_B);
    assert!(mounts(&b, "ovms").is_empty());
    assert_eq!(
        mounts(&b, "mm"),
        [("tc-config".to_owned(), "/etc/tc".to_owned())]
    );
    assert_eq!(volumes(&b), ["tc-config"]);
    assert_eq!(env(&b, "mm", "MM_TLS_KEY_CERT_PATH"), None);
    assert!(unwire(&b, "tas-a", "models").is_empty());
}

#[test]
fn the_remaining_service_takes_the_freed_path_over() {
    // B's next reconcile takes the free path over.
    let b2 = taken_over_by_b();
    assert!(mounts(&b2, "ovms").contains(&("tas-b-internal".into(), "/etc/trustyai/tls".into())));
    assert_eq!(volumes(&b2), ["tc-config", "tas-b-internal"]);
    assert_eq!(
        env(&b2, "mm", "MM_TLS_KEY_CERT_PATH").as_deref(),
        Some("/etc/trustyai/tls/tls.crt")
    );
    assert!(wire(&b2, "tas-b", "models").is_empty());
}

#[test]
fn removing_the_last_service_restores_the_original() {
    let none = unwired(&taken_over_by_b(), "tas-b");
    assert_eq!(content(&none), content(&modelmesh_deployment()));
}

#[test]
fn unwire_keeps_the_cert_path_while_another_service_mounts_it() {
    let original = modelmesh_deployment();
    let a = patched(&original, &wire(&original, "tas-a", "models"));
    let ab = patched(&a, &wire(&a, "tas-b", "models"));
    // Removing B (which mounts nothing) leaves A's mount and the cert path alone.
    let a_again = patched(&ab, &unwire(&ab, "tas-b", "models"));
    assert_eq!(content(&a_again), content(&a));
}

#[test]
fn unwire_on_an_untouched_deployment_is_empty() {
    assert!(unwire(&modelmesh_deployment(), "tas-a", "models").is_empty());
    let bare: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "d"},
        "spec": {"selector": {}, "template": {"spec": {"containers": [{"name": "mm"}]}}}
    }))
    .expect("deployment");
    assert!(unwire(&bare, "tas-a", "models").is_empty());
    let wired = patched(&bare, &wire(&bare, "tas-a", "models"));
    assert_processors(&wired, "mm", URL_A);
    assert_eq!(volumes(&wired), ["tas-a-internal"]);
}

#[test]
fn value_from_processors_are_left_alone() {
    let d: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "d"},
        "spec": {"selector": {}, "template": {"spec": {"containers": [{
            "name": "rest-proxy",
            "env": [{"name": "MM_PAYLOAD_PROCESSORS",
                     "valueFrom": {"configMapKeyRef": {"name": "c", "key": "k"}}}],
            "volumeMounts": [{"name": "tas-a-internal", "mountPath": "/etc/trustyai/tls"}]
        }], "volumes": [{"name": "tas-a-internal", "secret": {"secretName": "tas-a-internal"}}]}}}
    }))
    .expect("deployment");
    assert!(wire(&d, "tas-a", "models").is_empty());
}

#[test]
fn stale_patch_is_rejected() {
    let original = modelmesh_deployment();
    let patch = wire(&original, "tas-a", "models");
    let mut value = serde_json::to_value(&original).expect("json");
    value["metadata"]["resourceVersion"] = json!("8");
    assert!(apply(&mut value, &patch).is_err());
}

#[test]
fn readiness() {
    let mut d = modelmesh_deployment();
    assert!(is_ready(&d));
    d.spec.replicas = Some(2);
    assert!(!is_ready(&d));
    d.status = None;
    d.spec.replicas = Some(0);
    assert!(is_ready(&d));
}
