//! Switching back to the Go operator.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, PersistentVolumeClaim, Service, ServiceAccount};
use kube::ResourceExt;
use kube::api::{DeleteParams, Patch, PatchParams};
use serde_json::json;
use trustyai_crds::TrustyAIService;

use super::remove_registrations;
use crate::reconcile::env::Env;
use crate::support::cluster::NamespacedKind;
use crate::support::cluster::{exists, merge_patch};

/// Going back to the Go operator (README, "Migrating from the Go operator"): this operator's
/// release is removed with its webhook registrations (left behind with no operator answering,
/// the API server would refuse every TrustyAIService write, the Go operator's too) and the Go
/// operator's manifests are applied again, its CRD among them. The Go operator's reconcile reads
/// the v1 object, looks each child up by name and creates only what is missing (it corrects
/// only the kube-rbac-proxy ConfigMap's data and labels), and keeps the finalizer
/// `trustyai.opendatahub.io/finalizer`, which it removes on deletion, leaving the children to
/// the garbage collector through their owner references. So: every child is there under the
/// Go operator's names and owned by the TrustyAIService, the internal Service selects the
/// running pods, the Go operator's writes (its status, the finalizer) go through, and a
/// deletion collects the children and keeps the retained claim.
#[tokio::test]
async fn switching_back_to_the_go_operator_leaves_every_child_it_looks_up() {
    let env = Env::exclusive().await;
    let ns = env.namespace("back").await;
    let tas = env.ready_pvc_instance(&ns, "tas").await;

    env.stop_operator();
    remove_registrations(&env);
    let go_crd = format!(
        "{}/tests/fixtures/crds/go-operator-trustyaiservices.yaml",
        env!("CARGO_MANIFEST_DIR")
    );
    // Replaced, not applied: this operator (in local mode here) points conversion at a URL, and
    // an apply would merge the Go CRD's Service into it, which the API server refuses
    // ("exactly one of url or service is required"). The README says so.
    let (ok, out, err) = env.cp.kubectl(&["replace", "-f", &go_crd], None);
    assert!(ok, "the Go operator's CRD back: {out}{err}");

    assert_every_child_the_go_operator_looks_up(&env, &ns, &tas).await;
    the_go_operators_writes_go_through(&env, &ns).await;

    // Back to this operator for the tests that follow: it brings its CRD and registrations.
    env.restart_operator();
}

/// What the Go operator's reconcile looks up for `tas`, by its names, is there and owned by it:
/// nothing for it to create. Its internal Service selects the running pods, and `tas` carries
/// its finalizer.
async fn assert_every_child_the_go_operator_looks_up(env: &Env, ns: &str, tas: &TrustyAIService) {
    let deployment: Deployment = owned_child(env, ns, "tas", tas).await;
    let _: ServiceAccount = owned_child(env, ns, "tas-proxy", tas).await;
    let _: ConfigMap = owned_child(env, ns, "tas-kube-rbac-proxy-config", tas).await;
    let _: Service = owned_child(env, ns, "tas-tls", tas).await;
    let internal: Service = owned_child(env, ns, "tas", tas).await;
    let (ok, out, err) = env.cp.kubectl(
        &[
            "get",
            "clusterrolebinding",
            &format!("tas-{ns}-proxy-rolebinding"),
        ],
        None,
    );
    assert!(ok, "the proxy's ClusterRoleBinding: {out}{err}");
    env.api::<PersistentVolumeClaim>(ns)
        .get("tas-pvc")
        .await
        .expect("PVC tas-pvc");
    let selector = internal.spec.and_then(|s| s.selector).expect("a selector");
    let pod_labels = deployment
        .spec
        .template
        .metadata
        .and_then(|m| m.labels)
        .unwrap_or_default();
    assert!(
        selector.iter().all(|(k, v)| pod_labels.get(k) == Some(v)),
        "the internal Service selects the running pods: {selector:?} / {pod_labels:?}"
    );
    assert_eq!(
        tas.finalizers(),
        ["trustyai.opendatahub.io/finalizer"],
        "the Go operator's finalizer"
    );
}

/// The Go operator's writes, through v1 and without webhooks: its status, then on deletion the
/// removal of its finalizer; the garbage collector takes the children, the claim stays.
async fn the_go_operators_writes_go_through(env: &Env, ns: &str) {
    let services = env.services(ns);
    services
        .patch_status(
            "tas",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Ready", "ready": "True"}})),
        )
        .await
        .expect("the Go operator's status write");
    services
        .delete("tas", &DeleteParams::default())
        .await
        .expect("deleting the TrustyAIService");
    merge_patch(&services, "tas", json!({"metadata": {"finalizers": null}}))
        .await
        .expect("the Go operator removes its finalizer");
    let deployments = env.api::<Deployment>(ns);
    env.wait(
        "the TrustyAIService gone and its Deployment collected",
        || async {
            let gone = services.get_opt("tas").await.ok()?.is_none()
                && deployments.get_opt("tas").await.ok()?.is_none();
            gone.then_some(())
        },
    )
    .await;
    assert!(
        exists(&env.api::<PersistentVolumeClaim>(ns), "tas-pvc").await,
        "the claim is kept (retention: Retain)"
    );
}

/// The child `name` of kind `K` in `ns`, asserted to be owned by `owner`.
async fn owned_child<K: NamespacedKind>(
    env: &Env,
    ns: &str,
    name: &str,
    owner: &TrustyAIService,
) -> K {
    let child: K = env.get(ns, name).await;
    crate::reconcile::env::assert_owned_by(child.meta(), owner, name);
    child
}
