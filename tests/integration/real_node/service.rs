//! A TrustyAIService's pods on the real node, under the operator installed by its chart: the
//! TrustyAI service and kube-rbac-proxy start from the images built here, the claim binds to a
//! static PersistentVolume, Ready comes from the containers' own probes, and a deleted pod is
//! replaced as Kubernetes does it.

use std::os::unix::fs::PermissionsExt;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use serde_json::{Value, json};
use trustyai_local_cluster::ControlPlane;

use super::release::{container_process, installed_namespace, wait_for};
use crate::support::cluster::{tas, tas_api};

/// The TrustyAI service image's user (its Containerfile's `USER`).
const SERVICE_UID: u32 = 1001;

/// A PersistentVolume on the node's disk (a folder of the control plane's, removed with it),
/// writable by the service's user, reserved for the claim `claim` in `namespace` (a claim of
/// another test with no class could take a free volume first).
pub async fn host_volume(cp: &ControlPlane, name: &str, namespace: &str, claim: &str) {
    let dir = cp.dir.join("volumes").join(name);
    std::fs::create_dir_all(&dir).expect("the volume's folder");
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).expect("writable");
    let pv: PersistentVolume = serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name},
        "spec": {
            "capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": "",
            "hostPath": {"path": dir, "type": "Directory"},
            "claimRef": {"namespace": namespace, "name": claim},
        }
    }))
    .expect("a PersistentVolume");
    Api::<PersistentVolume>::all(cp.client().await)
        .create(&PostParams::default(), &pv)
        .await
        .expect("created");
}

/// The TrustyAIService's Ready pod whose name is not `not`, once its Ready condition says so.
pub async fn ready_pod(cp: &ControlPlane, pods: &Api<Pod>, cr: &str, not: Option<&str>) -> Pod {
    let selector = format!("app.kubernetes.io/instance={cr}");
    wait_for(cp, &format!("a Ready pod of {cr}"), async || {
        let list = pods
            .list(&ListParams::default().labels(&selector))
            .await
            .ok()?;
        list.items.into_iter().find(|p| {
            p.metadata.deletion_timestamp.is_none()
                && p.metadata.name.as_deref() != not
                && p.status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
        })
    })
    .await
}

/// The numeric uid a process runs as.
fn process_uid(pid: u32) -> u32 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("its status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|ids| ids.split_whitespace().next())
        .and_then(|uid| uid.parse().ok())
        .expect("a Uid line")
}

/// Waits until the TrustyAIService `cr` in `ns` reports Ready.
pub async fn service_ready(cp: &ControlPlane, client: &kube::Client, ns: &str, cr: &str) {
    let api = tas_api(client, ns, "v1");
    wait_for(cp, &format!("{cr} Ready"), async || {
        let object = api.get(cr).await.ok()?;
        let conditions = object.data["status"]["conditions"].as_array()?.clone();
        conditions
            .iter()
            .any(|c| c["type"] == "Ready" && c["status"] == "True")
            .then_some(())
    })
    .await;
}

/// Creates the TrustyAIService `cr` in `ns` through v1, with `spec`.
pub async fn create_service(client: &kube::Client, ns: &str, cr: &str, spec: Value) {
    tas_api(client, ns, "v1")
        .create(&PostParams::default(), &tas("v1", cr, spec))
        .await
        .expect("created");
}

/// Reserves the volume `pv` on the node's disk ([`host_volume`]) for the claim `<cr>-pvc` in
/// `ns`; returns a PVC-mode spec for `cr` whose claim binds to it, mounted at `/inputs`.
pub async fn spec_on_host_volume(cp: &ControlPlane, ns: &str, pv: &str, cr: &str) -> Value {
    host_volume(cp, pv, ns, &format!("{cr}-pvc")).await;
    json!({
        "storage": {"format": "PVC", "folder": "/inputs", "size": "1Gi", "pv": pv},
        "metrics": {"schedule": "5s"},
    })
}

/// Creates the TrustyAIService `cr` in PVC mode in `ns`, its claim `<cr>-pvc` reserved the
/// volume `<ns>-<cr>` on the node's disk; waits for nothing.
pub async fn create_pvc_service(cp: &ControlPlane, client: &kube::Client, ns: &str, cr: &str) {
    let mut spec = spec_on_host_volume(cp, ns, &format!("{ns}-{cr}"), cr).await;
    // The service writes HDF5 whatever the name; a later migration to the database moves only
    // files whose names end in `.hdf5` (the default `data.csv` would leave nothing to move).
    spec["data"] = json!({"filename": "trustyai.hdf5"});
    create_service(client, ns, cr, spec).await;
}

/// [`create_pvc_service`], then waits until it is Ready; returns its Ready pod.
pub async fn pvc_service(cp: &ControlPlane, client: &kube::Client, ns: &str, cr: &str) -> Pod {
    create_pvc_service(cp, client, ns, cr).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let pod = ready_pod(cp, &pods, cr, None).await;
    service_ready(cp, client, ns, cr).await;
    pod
}

#[tokio::test]
async fn a_trustyai_service_runs_on_its_bound_claim_through_a_pod_deletion() {
    let (_claim, cp, client, ns) = installed_namespace(false, "service-pods").await;
    let pv = format!("{ns}-data");
    let spec = spec_on_host_volume(cp, &ns, &pv, "demo").await;
    create_service(&client, &ns, "demo", spec).await;

    // The claim binds to the volume it names.
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), &ns);
    wait_for(cp, "demo-pvc Bound", async || {
        let claim = claims.get("demo-pvc").await.ok()?;
        let bound = claim.status?.phase? == "Bound";
        (bound && claim.spec?.volume_name.as_deref() == Some(pv.as_str())).then_some(())
    })
    .await;

    // Both containers Ready through their own probes, the service as its image's user.
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let pod = ready_pod(cp, &pods, "demo", None).await;
    let statuses = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.clone())
        .expect("container statuses");
    for status in &statuses {
        assert!(status.ready, "{status:?}");
    }
    let service = container_process(cp, &pod, "trustyai-service");
    assert_eq!(process_uid(service), SERVICE_UID);
    let cmdline = std::fs::read(format!("/proc/{service}/cmdline")).expect("its command line");
    assert!(
        String::from_utf8_lossy(&cmdline).contains("trustyai_service.main"),
        "{}",
        String::from_utf8_lossy(&cmdline)
    );
    container_process(cp, &pod, "kube-rbac-proxy");

    // The TrustyAIService reports Ready.
    service_ready(cp, &client, &ns, "demo").await;

    // A deleted pod is replaced by a new one that becomes Ready on the same claim.
    let name = pod.metadata.name.clone().expect("a name");
    pods.delete(&name, &DeleteParams::default())
        .await
        .expect("deleted");
    let replacement = ready_pod(cp, &pods, "demo", Some(&name)).await;
    let claim_of = |pod: &Pod| {
        pod.spec
            .as_ref()
            .and_then(|s| s.volumes.as_ref())
            .and_then(|v| {
                v.iter()
                    .find_map(|v| v.persistent_volume_claim.as_ref())
                    .map(|c| c.claim_name.clone())
            })
    };
    assert_eq!(claim_of(&replacement).as_deref(), Some("demo-pvc"));
}
