//! Installing where the Go operator's CRD and TrustyAIServices already exist.

use crate::support;
use support::control_planes::{self, Concern};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject};
use serde_json::json;
use support::ControlPlane;
use support::cluster::{create_when_served, tas_api};

use super::{
    CRD_NAME, chart_dir, delete_crd, helm_chart, install, uninstall, upgrade, v1_of,
    wait_established,
};

/// The Go operator's CRD (`tests/fixtures/crds/go-operator-trustyaiservices.yaml`, applied with
/// `kubectl apply` as its kustomize manifests are) and TrustyAIServices stored under it, one of
/// them invalid by our rules. A plain install is refused by Helm; with `crds.install=false` two
/// releases install side by side and leave the CRD and the objects alone; once the CRD carries
/// the release's ownership metadata (the chart README's commands), an upgrade with the CRD adopts
/// it and the objects stay.
#[tokio::test]
async fn a_go_operator_installation_is_taken_over_keeping_its_trustyaiservices() {
    let claim = control_planes::exclusive(Concern::HelmChart);
    let cp = claim.control_plane();
    let client = cp.client().await;
    delete_crd(cp).await;
    let fixture = format!(
        "{}/tests/fixtures/crds/go-operator-trustyaiservices.yaml",
        env!("CARGO_MANIFEST_DIR")
    );
    let (ok, out, err) = cp.kubectl(&["apply", "-f", &fixture], None);
    assert!(ok, "the Go operator's CRD: {out}{err}");
    wait_established(cp);
    let apps = cp.namespace(&client, "go-apps").await;
    let tas = tas_api(&client, &apps, "v1");
    let stored = store_under_the_go_crd(&tas).await;

    let ns_a = cp.namespace(&client, "helm-a").await;
    let ns_b = cp.namespace(&client, "helm-b").await;
    let (ok, out, err) = helm_chart(Some(cp), "install", "refused", &["--namespace", &ns_a]);
    assert!(
        !ok && err.contains("invalid ownership metadata") && err.contains(CRD_NAME),
        "Helm refuses to take over a CRD it does not own:\n{out}\n{err}"
    );
    let releases = [("trustyai-a", &ns_a), ("trustyai-b", &ns_b)];
    for (release, ns) in releases {
        install(
            cp,
            release,
            ns,
            &[
                "--set",
                "crds.install=false",
                "--set",
                "webhook.failurePolicy=Ignore",
            ],
        );
    }
    let crd_api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd = crd_api.get(CRD_NAME).await.expect("crd");
    let annotations = crd.metadata.annotations.clone().unwrap_or_default();
    assert!(
        annotations.contains_key("controller-gen.kubebuilder.io/version")
            && !annotations.contains_key("meta.helm.sh/release-name"),
        "crds.install=false left the Go operator's CRD alone: {annotations:?}"
    );
    for (release, ns) in releases {
        assert_the_cluster_objects_of(cp, release, ns);
    }

    // Adopt: the ownership metadata the chart README gives, then the CRD comes with the chart.
    mark_the_crd_as_released_by(cp, "trustyai-a", &ns_a);
    upgrade(
        cp,
        "trustyai-a",
        &chart_dir(),
        &ns_a,
        &["--set", "webhook.failurePolicy=Ignore"],
    );
    assert_the_crd_is_the_charts(&crd_api.get(CRD_NAME).await.expect("crd"));
    for (name, uid) in &stored {
        let object = tas.get(name).await.expect("the TrustyAIService survived");
        assert_eq!(
            object.metadata.uid.as_ref(),
            Some(uid),
            "{name} is the same object"
        );
    }
    for (release, ns) in releases {
        uninstall(cp, release, ns);
    }
    assert!(
        crd_api.get(CRD_NAME).await.is_ok(),
        "the adopted CRD is kept on uninstall"
    );
    // What the test stored goes with it: the next test of this control plane deletes the CRDs,
    // and the API server deletes the instances of a CRD before the CRD.
    for (name, _) in &stored {
        tas.delete(name, &kube::api::DeleteParams::default())
            .await
            .unwrap_or_else(|e| panic!("deleting {name}: {e}"));
    }
    crate::support::wait::until(
        "the stored TrustyAIServices gone",
        std::time::Duration::from_secs(60),
        async || {
            tas.list(&kube::api::ListParams::default())
                .await
                .ok()?
                .items
                .is_empty()
                .then_some(())
        },
    )
    .await;
}

/// TrustyAIServices stored under the Go operator's CRD, one of them invalid by our rules; their
/// names and uids.
async fn store_under_the_go_crd(tas: &Api<DynamicObject>) -> Vec<(&'static str, String)> {
    let mut stored = Vec::new();
    for (name, size) in [("kept", "1Gi"), ("odd-size", "abc")] {
        let object: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "trustyai.opendatahub.io/v1", "kind": "TrustyAIService",
            "metadata": {"name": name},
            "spec": {"storage": {"format": "PVC", "folder": "/inputs", "size": size}, "metrics": {"schedule": "5s"}}
        }))
        .expect("tas");
        // Established comes a moment before the API serves the kind.
        let created = create_when_served(tas, &object, |_| true)
            .await
            .unwrap_or_else(|e| panic!("a TrustyAIService under the Go CRD: {e}"));
        stored.push((name, created.metadata.uid.expect("uid")));
    }
    stored
}

/// The cluster-scoped objects of `release` (installed into `ns`) exist.
fn assert_the_cluster_objects_of(cp: &ControlPlane, release: &str, ns: &str) {
    for (kind, name) in [
        ("clusterrole", format!("{release}-trustyai-operator")),
        ("clusterrole", format!("{release}-trustyai-operator-proxy")),
        ("clusterrole", format!("{release}-trustyai-operator-editor")),
        ("clusterrolebinding", format!("{release}-trustyai-operator")),
        (
            "validatingwebhookconfiguration",
            format!("{release}-trustyai-operator-validating"),
        ),
    ] {
        let (ok, _, err) = cp.kubectl(&["get", kind, &name], None);
        assert!(ok, "{kind}/{name} of {release} in {ns}: {err}");
    }
}

/// The chart README's commands: the CRD labelled and annotated as `release`'s (in `ns`), without
/// kubectl's record of its last apply.
fn mark_the_crd_as_released_by(cp: &ControlPlane, release: &str, ns: &str) {
    let (ok, out, err) = cp.kubectl(
        &[
            "label",
            "crd",
            CRD_NAME,
            "app.kubernetes.io/managed-by=Helm",
            "--overwrite",
        ],
        None,
    );
    assert!(ok, "{out}{err}");
    let (ok, out, err) = cp.kubectl(
        &[
            "annotate",
            "crd",
            CRD_NAME,
            "--overwrite",
            &format!("meta.helm.sh/release-name={release}"),
            &format!("meta.helm.sh/release-namespace={ns}"),
            "kubectl.kubernetes.io/last-applied-configuration-",
        ],
        None,
    );
    assert!(ok, "{out}{err}");
}

/// The chart's CRD replaced the Go operator's: kept on uninstall, without kubectl's record,
/// with the chart's printer columns.
fn assert_the_crd_is_the_charts(crd: &CustomResourceDefinition) {
    let annotations = crd.metadata.annotations.clone().unwrap_or_default();
    assert_eq!(
        annotations
            .get("helm.sh/resource-policy")
            .map(String::as_str),
        Some("keep"),
        "the adopted CRD is the chart's: {annotations:?}"
    );
    assert!(
        !annotations.contains_key("kubectl.kubernetes.io/last-applied-configuration"),
        "{annotations:?}"
    );
    let v1 = v1_of(crd);
    assert!(
        v1.additional_printer_columns.is_some(),
        "the chart's CRD (with printer columns) replaced the Go operator's"
    );
}
