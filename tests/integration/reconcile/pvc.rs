//! PVC mode: every child and Ready, a claim that grows, a claim that stays pending.

use std::time::Instant;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{
    ConfigMap, PersistentVolume, PersistentVolumeClaim, Secret, Service, ServiceAccount,
};
use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, DynamicObject, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::json;
use trustyai_crds::TrustyAIService;

use crate::reconcile::env::{
    DEFAULT_IMAGE, Env, assert_env, assert_owned_by, condition, env_value, note, pvc_spec,
    service_container,
};
use crate::support::cluster::{merge_patch, patch_spec};

/// A PVC-mode TrustyAIService `tas`, Ready in a new namespace: the namespace and the Ready
/// object.
async fn a_ready_pvc_instance(env: &Env) -> (String, TrustyAIService) {
    let ns = env.namespace("pvc").await;
    env.volume_for(&ns, "tas-pvc").await;
    env.create(&ns, "tas", pvc_spec()).await;
    let started = Instant::now();
    let ready = env.wait_ready(&ns, "tas").await;
    eprintln!("PVC mode Ready after {:?}", started.elapsed());
    (ns, ready)
}

#[tokio::test]
async fn pvc_mode_becomes_ready_with_the_claim_found() {
    let env = Env::shared().await;
    let (_, ready) = a_ready_pvc_instance(&env).await;
    assert_the_status_of_a_ready_pvc_instance(&ready);
}

#[tokio::test]
async fn pvc_mode_creates_every_child() {
    let env = Env::shared().await;
    let (ns, ready) = a_ready_pvc_instance(&env).await;
    assert_the_deployment(&env, &ns, &ready).await;
    assert_the_other_children(&env, &ns, &ready).await;
    // No service-ca on this cluster: the operator issues the serving certificates.
    assert_the_issued_serving_secrets(&env, &ns, &ready).await;
}

#[tokio::test]
async fn pvc_mode_reports_its_children_in_one_creation_event() {
    let env = Env::shared().await;
    let (ns, _) = a_ready_pvc_instance(&env).await;
    assert_one_creation_event_and_no_claim_update(&env, &ns).await;
}

/// Ready, with the claim found, no Route on this cluster, no database, and the finalizer.
fn assert_the_status_of_a_ready_pvc_instance(ready: &TrustyAIService) {
    let status = ready.status.as_ref().expect("status");
    assert_eq!(status.phase.as_deref(), Some("Ready"));
    assert_eq!(status.ready.as_deref(), Some("True"));
    assert_eq!(status.observed_generation, ready.metadata.generation);
    assert_eq!(status.image.as_deref(), Some(DEFAULT_IMAGE));
    let route = condition(ready, "RouteAvailable").expect("RouteAvailable");
    assert_eq!(
        (route.status.as_str(), route.reason.as_deref()),
        ("False", Some("RouteNotSupported"))
    );
    let pvc = condition(ready, "PVCAvailable").expect("PVCAvailable");
    assert_eq!(
        (pvc.status.as_str(), pvc.reason.as_deref()),
        ("True", Some("PVCFound"))
    );
    assert!(condition(ready, "DBAvailable").is_none());
    assert_eq!(
        ready.metadata.finalizers,
        Some(vec!["trustyai.opendatahub.io/finalizer".to_owned()])
    );
}

/// The Deployment: names, labels, owner, env, images, no version in the selector; the claim
/// mounted.
async fn assert_the_deployment(env: &Env, ns: &str, ready: &TrustyAIService) {
    let deployment: Deployment = env.get(ns, "tas").await;
    assert_owned_by(&deployment.metadata, ready, "the Deployment");
    let labels = deployment.labels();
    assert_eq!(
        labels.get("app.kubernetes.io/part-of").map(String::as_str),
        Some("trustyai")
    );
    assert_eq!(labels.get("app").map(String::as_str), Some("tas"));
    assert!(labels.contains_key("app.kubernetes.io/version"));
    let spec = &deployment.spec;
    assert_eq!(spec.replicas, Some(1));
    let selector = spec.selector.match_labels.as_ref().expect("selector");
    assert_eq!(
        selector
            .get("app.kubernetes.io/instance")
            .map(String::as_str),
        Some("tas")
    );
    assert!(!selector.contains_key("app.kubernetes.io/version"));
    assert_env(
        &deployment,
        &[
            ("SERVICE_STORAGE_FORMAT", "PVC"),
            ("SERVICE_METRICS_SCHEDULE", "5s"),
            ("STORAGE_DATA_FOLDER", "/inputs"),
        ],
    );
    assert_eq!(
        service_container(&deployment).image.as_deref(),
        Some(DEFAULT_IMAGE)
    );
    let pod = spec.template.spec.as_ref().expect("pod");
    assert_eq!(pod.service_account_name.as_deref(), Some("tas-proxy"));
    assert!(pod.volumes.iter().flatten().any(|v| {
        v.persistent_volume_claim
            .as_ref()
            .is_some_and(|c| c.claim_name == "tas-pvc")
    }));
}

/// The Services, ServiceAccount, ConfigMap, claim (retained: without an owner) and proxy
/// ClusterRoleBinding.
async fn assert_the_other_children(env: &Env, ns: &str, ready: &TrustyAIService) {
    for name in ["tas", "tas-tls"] {
        let svc = env.api::<Service>(ns).get(name).await.expect("Service");
        assert_owned_by(&svc.metadata, ready, name);
    }
    let sa: ServiceAccount = env.get(ns, "tas-proxy").await;
    assert_owned_by(&sa.metadata, ready, "the ServiceAccount");
    let cm: ConfigMap = env.get(ns, "tas-kube-rbac-proxy-config").await;
    assert_owned_by(&cm.metadata, ready, "the ConfigMap");
    assert!(cm.data.expect("data")["config.yaml"].contains("    name: \"tas\"\n"));
    let claim: PersistentVolumeClaim = env.get(ns, "tas-pvc").await;
    assert!(
        claim.metadata.owner_references.is_none(),
        "retained: no owner"
    );
    assert_eq!(
        claim
            .labels()
            .get("app.kubernetes.io/instance")
            .map(String::as_str),
        Some("tas")
    );
    let binding = Api::<ClusterRoleBinding>::all(env.client.clone())
        .get(&format!("tas-{ns}-proxy-rolebinding"))
        .await
        .expect("ClusterRoleBinding");
    assert_eq!(
        binding.role_ref.name,
        "trustyai-service-operator-proxy-role"
    );
    assert_eq!(
        binding.subjects.expect("subjects")[0].namespace.as_deref(),
        Some(ns)
    );
}

/// The serving Secrets, issued by the operator and owned by `ready`.
async fn assert_the_issued_serving_secrets(env: &Env, ns: &str, ready: &TrustyAIService) {
    for name in ["tas-tls", "tas-internal"] {
        let secret: Secret = env.get(ns, name).await;
        assert_eq!(secret.type_.as_deref(), Some("kubernetes.io/tls"));
        assert_owned_by(&secret.metadata, ready, name);
        let data = secret.data.expect("data");
        assert!(
            ["tls.crt", "tls.key", "ca.crt"]
                .iter()
                .all(|k| data.contains_key(*k))
        );
    }
}

/// One event for the reconcile that created the children, named after the claim (the Go
/// operator's reason) and naming every child it created; binding the claim (the binder writes
/// its volume name and status) is not a change of ours: no second write of the claim.
async fn assert_one_creation_event_and_no_claim_update(env: &Env, ns: &str) {
    let created = env.wait_event(ns, "tas", "PVCCreated").await;
    assert_eq!(created[0].type_.as_deref(), Some("Normal"));
    let said = note(&created[0]);
    for child in [
        "PVC tas-pvc",
        "Deployment tas",
        "Service tas-tls",
        "Service tas,",
        "ServiceAccount tas-proxy",
    ] {
        assert!(said.contains(child), "{child} not in {said:?}");
    }
    let events = env.all_events(ns).await;
    let claim_updates: Vec<_> = events
        .iter()
        .filter_map(|e| e.note.as_deref())
        .filter(|note| note.contains("Updated: ") && note.contains("PVC tas-pvc"))
        .collect();
    assert!(claim_updates.is_empty(), "{claim_updates:?}");
}

/// The requested size of the claim `name`.
async fn claim_size(env: &Env, ns: &str, name: &str) -> Option<String> {
    env.api::<PersistentVolumeClaim>(ns)
        .get(name)
        .await
        .ok()?
        .spec?
        .resources?
        .requests?
        .get("storage")
        .map(|q| q.0.clone())
}

/// A claim of a class that can expand is asked for the spec's new size.
#[tokio::test]
async fn a_claim_grows_where_its_class_can_expand() {
    let env = Env::shared().await;
    let ns = env.namespace("grow").await;
    let (classes, class) = an_expandable_claim(&env, &ns, "wide-pvc").await;
    env.create(&ns, "wide", pvc_spec()).await;
    env.wait_ready(&ns, "wide").await;
    let services = env.services(&ns);
    patch_spec(&services, "wide", json!({"storage": {"size": "2Gi"}}))
        .await
        .expect("growing");
    env.wait("the expandable claim asks for 2Gi", || async {
        (claim_size(&env, &ns, "wide-pvc").await.as_deref() == Some("2Gi")).then_some(())
    })
    .await;
    let _ = classes.delete(&class, &DeleteParams::default()).await;
}

/// A claim bound to a volume of no class: the API server refuses to grow it. The claim keeps
/// its size, the refusal is reported, and the rest of the spec still reaches the Deployment.
#[tokio::test]
async fn a_refused_growth_blocks_nothing() {
    let (env, ns) = Env::shared_instance("grow", "fixed").await;
    let services = env.services(&ns);
    merge_patch(
        &services,
        "fixed",
        json!({"spec": {"storage": {"size": "2Gi"}, "metrics": {"schedule": "10s"}}}),
    )
    .await
    .expect("growing and changing the schedule");
    env.wait("the new schedule in the Deployment", || async {
        let deployment = env.api::<Deployment>(&ns).get("fixed").await.ok()?;
        (env_value(&deployment, "SERVICE_METRICS_SCHEDULE").as_deref() == Some("10s")).then_some(())
    })
    .await;
    // Ready again once the new schedule has rolled out: the claim still serves.
    let reported = env
        .wait("Ready, with the refused growth in the status", || async {
            let tas = services.get("fixed").await.ok()?;
            let pvc = condition(&tas, "PVCAvailable")?;
            (tas.status.as_ref()?.observed_generation == tas.metadata.generation
                && pvc.message.contains("2Gi")
                && condition(&tas, "Ready")?.status == "True")
                .then_some(tas)
        })
        .await;
    let pvc = condition(&reported, "PVCAvailable").expect("PVCAvailable");
    eprintln!("refused growth: {}", pvc.message);
    assert_eq!(pvc.status, "True", "the claim is still bound and in use");
    assert!(
        pvc.message.contains("could not grow from 1Gi to 2Gi"),
        "{}",
        pvc.message
    );
    let events = env.wait_event(&ns, "fixed", "PVCGrowthRefused").await;
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(
        claim_size(&env, &ns, "fixed-pvc").await.as_deref(),
        Some("1Gi")
    );
}

/// An adopted claim `claim` in `ns` of a class that can expand, bound to its volume; the
/// StorageClasses' API and the class's name (for the test to delete).
async fn an_expandable_claim(env: &Env, ns: &str, claim: &str) -> (Api<DynamicObject>, String) {
    let class = format!("{ns}-expandable");
    let classes = Api::<DynamicObject>::all_with(
        env.client.clone(),
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("storage.k8s.io", "v1", "StorageClass"),
            "storageclasses",
        ),
    );
    classes
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
                "metadata": {"name": class},
                "provisioner": "kubernetes.io/no-provisioner",
                "allowVolumeExpansion": true
            }))
            .expect("a StorageClass"),
        )
        .await
        .expect("creating the StorageClass");
    let volume = format!("{ns}-{claim}");
    Api::<PersistentVolume>::all(env.client.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "metadata": {"name": volume},
                "spec": {
                    "capacity": {"storage": "5Gi"},
                    "accessModes": ["ReadWriteOnce"],
                    "persistentVolumeReclaimPolicy": "Retain",
                    "storageClassName": class,
                    "hostPath": {"path": format!("/tmp/{volume}")},
                    "claimRef": {"namespace": ns, "name": claim}
                }
            }))
            .expect("a PV"),
        )
        .await
        .expect("creating the PV");
    let claims = env.api::<PersistentVolumeClaim>(ns);
    claims
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "metadata": {"name": claim},
                "spec": {
                    "accessModes": ["ReadWriteOnce"],
                    "storageClassName": class,
                    "volumeName": volume,
                    "resources": {"requests": {"storage": "1Gi"}}
                }
            }))
            .expect("a PVC"),
        )
        .await
        .expect("creating the PVC");
    (classes, class)
}

/// A claim no volume binds: `PVCAvailable` says `PVCPending` (not "not found"), a `PVCPending`
/// Warning names the claim once it has waited for `--pvc-pending-grace`, and the condition
/// turns `True` when a volume binds it.
#[tokio::test]
async fn a_claim_that_stays_pending_is_reported() {
    let env = Env::shared().await;
    let ns = env.namespace("pending").await;
    env.create(&ns, "waits", pvc_spec()).await;
    let service = env
        .wait_condition(&ns, "waits", "PVCAvailable", "False", Some("PVCPending"))
        .await;
    let pvc = condition(&service, "PVCAvailable").expect("PVCAvailable");
    assert!(pvc.message.contains("not bound"), "{}", pvc.message);
    let events = env.wait_event(&ns, "waits", "PVCPending").await;
    assert_eq!(events[0].type_.as_deref(), Some("Warning"), "{events:?}");
    let note = events[0].note.clone().unwrap_or_default();
    assert!(note.contains("waits-pvc"), "{note}");
    env.volume_for(&ns, "waits-pvc").await;
    env.wait_condition(&ns, "waits", "PVCAvailable", "True", Some("PVCFound"))
        .await;
}
