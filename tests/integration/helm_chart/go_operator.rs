//! Installing where the Go operator's CRD and TrustyAIServices already exist.

use crate::support;
use support::control_planes::{self, Concern};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject};
use serde_json::json;
use support::cluster::{create_when_served, tas_api};

use super::{CRD_NAME, chart_dir, delete_crd, helm, install, wait_established};

/// The Go operator's CRD (`tests/fixtures/crds/go-operator-trustyaiservices.yaml`, applied with
/// `kubectl apply` as its kustomize manifests are) and TrustyAIServices stored under it, one of
/// them invalid by our rules. A plain install is refused by Helm; with `crds.install=false` two
/// releases install side by side and leave the CRD and the objects alone; once the CRD carries
/// the release's ownership metadata (the chart README's commands), an upgrade with the CRD adopts
/// it and the objects stay.
#[tokio::test]
async fn installs_where_the_go_operators_crd_and_objects_exist() {
    let claim = control_planes::exclusive(Concern::HelmChart);
    let cp = claim.control_plane();
    let client = cp.client().await;
    delete_crd(cp);
    let fixture = format!(
        "{}/tests/fixtures/crds/go-operator-trustyaiservices.yaml",
        env!("CARGO_MANIFEST_DIR")
    );
    let (ok, out, err) = cp.kubectl(&["apply", "-f", &fixture], None);
    assert!(ok, "the Go operator's CRD: {out}{err}");
    wait_established(cp);
    let apps = cp.namespace(&client, "go-apps").await;
    let tas = tas_api(&client, &apps, "v1");
    let mut stored = Vec::new();
    for (name, size) in [("kept", "1Gi"), ("odd-size", "abc")] {
        let object: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "trustyai.opendatahub.io/v1", "kind": "TrustyAIService",
            "metadata": {"name": name},
            "spec": {"storage": {"format": "PVC", "folder": "/inputs", "size": size}, "metrics": {"schedule": "5s"}}
        }))
        .expect("tas");
        // Established comes a moment before the API serves the kind.
        let created = create_when_served(&tas, &object, |_| true)
            .await
            .unwrap_or_else(|e| panic!("a TrustyAIService under the Go CRD: {e}"));
        stored.push((name, created.metadata.uid.expect("uid")));
    }

    let chart = chart_dir();
    let chart = chart.to_str().expect("path");
    let ns_a = cp.namespace(&client, "helm-a").await;
    let ns_b = cp.namespace(&client, "helm-b").await;
    let (ok, out, err) = helm(
        Some(cp),
        &["install", "refused", chart, "--namespace", &ns_a],
    );
    assert!(
        !ok && err.contains("invalid ownership metadata") && err.contains(CRD_NAME),
        "Helm refuses to take over a CRD it does not own:\n{out}\n{err}"
    );
    for (release, ns) in [("trustyai-a", &ns_a), ("trustyai-b", &ns_b)] {
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
    for (release, ns) in [("trustyai-a", &ns_a), ("trustyai-b", &ns_b)] {
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

    // Adopt: the ownership metadata the chart README gives, then the CRD comes with the chart.
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
            "meta.helm.sh/release-name=trustyai-a",
            &format!("meta.helm.sh/release-namespace={ns_a}"),
            "kubectl.kubernetes.io/last-applied-configuration-",
        ],
        None,
    );
    assert!(ok, "{out}{err}");
    let (ok, out, err) = helm(
        Some(cp),
        &[
            "upgrade",
            "trustyai-a",
            chart,
            "--namespace",
            &ns_a,
            "--set",
            "webhook.failurePolicy=Ignore",
        ],
    );
    assert!(ok, "helm upgrade adopting the CRD:\n{out}\n{err}");
    let crd = crd_api.get(CRD_NAME).await.expect("crd");
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
    let v1 = crd
        .spec
        .versions
        .iter()
        .find(|v| v.name == "v1")
        .expect("v1");
    assert!(
        v1.additional_printer_columns.is_some(),
        "the chart's CRD (with printer columns) replaced the Go operator's"
    );
    for (name, uid) in &stored {
        let object = tas.get(name).await.expect("the TrustyAIService survived");
        assert_eq!(
            object.metadata.uid.as_ref(),
            Some(uid),
            "{name} is the same object"
        );
    }
    for (release, ns) in [("trustyai-a", &ns_a), ("trustyai-b", &ns_b)] {
        let (ok, out, err) = helm(Some(cp), &["uninstall", release, "--namespace", ns]);
        assert!(ok, "helm uninstall {release}:\n{out}\n{err}");
    }
    assert!(
        crd_api.get(CRD_NAME).await.is_ok(),
        "the adopted CRD is kept on uninstall"
    );
}
