//! Installing the chart: in every certificate mode (and uninstalling it again); and install,
//! upgrade to a chart whose CRD gained a field, and uninstall, which keep the CRD and every
//! TrustyAIService.

use crate::support;
use support::control_planes::{self, Concern};

use std::path::{Path, PathBuf};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::Api;
use support::ControlPlane;
use support::cluster::{create_when_served, failed_calling_webhook, minimal_spec, tas, tas_api};

use super::{
    CRD_NAME, NAMED_CLUSTER_ISSUER, chart_dir, delete_crd, establish_fixture_crds, install,
    uninstall, upgrade, v1_of, wait_established,
};

/// No operator pod runs here (no container runtime), so the registrations must ignore their
/// unreachable webhook; v1-only traffic needs no conversion.
const IGNORE_THE_WEBHOOKS: [&str; 2] = ["--set", "webhook.failurePolicy=Ignore"];

#[tokio::test]
async fn every_certificate_mode_completes_an_install_uninstall_cycle() {
    // Each install brings the chart's CRD, which other tests change.
    let claim = control_planes::exclusive(Concern::HelmChart);
    let cp = claim.control_plane();
    let client = cp.client().await;
    // cert-manager's kinds, as minimal CRDs, so its Issuer and Certificate can be created.
    establish_fixture_crds(cp, "cert-manager.yaml");
    for (i, extra) in [
        vec![],
        vec!["--set", "certs.mode=certManager"],
        NAMED_CLUSTER_ISSUER.to_vec(),
        vec!["--set", "crds.install=false"],
        vec!["--set", "certs.mode=openshift"],
        vec![
            "--set",
            "certs.mode=existingSecret",
            "--set",
            "certs.existingSecret=my-tls",
        ],
        vec![
            "--set",
            "serviceMonitor.enabled=false",
            "--set",
            "networkPolicy.enabled=true",
        ],
    ]
    .into_iter()
    .enumerate()
    {
        // A CRD kept from the previous release carries that release's ownership metadata.
        delete_crd(cp).await;
        let ns = cp.namespace(&client, "modes").await;
        let release = format!("mode-{i}");
        install(cp, &release, &ns, &extra);
        uninstall(cp, &release, &ns);
    }
    delete_crd(cp).await;
}

#[tokio::test]
async fn a_release_lifecycle_never_deletes_the_crd_or_a_trustyaiservice() {
    let (_claim, cp, client, ns) =
        control_planes::exclusive_namespace(Concern::HelmChart, "helm").await;
    delete_crd(cp).await;
    let out = install(cp, "trustyai", &ns, &[]);
    assert!(
        out.contains("Create a first TrustyAIService"),
        "NOTES.txt shown: {out}"
    );
    assert_every_object_of_the_release_exists(cp, &ns);

    upgrade(cp, "trustyai", &chart_dir(), &ns, &IGNORE_THE_WEBHOOKS);
    wait_established(cp);
    let crd_api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let services = tas_api(&client, &ns, "v1");
    // The API server reloads webhook registrations from a watch: until it has seen the upgrade,
    // the installed Fail policy still refuses the create.
    create_when_served(
        &services,
        &tas("v1", "keep-me", minimal_spec()),
        failed_calling_webhook,
    )
    .await
    .unwrap_or_else(|e| panic!("TrustyAIService created with failurePolicy=Ignore: {e}"));

    // Upgrade to a chart whose CRD gained a field.
    let upgraded = chart_whose_crd_gained_a_field();
    upgrade(cp, "trustyai", &upgraded, &ns, &IGNORE_THE_WEBHOOKS);
    let crd = crd_api.get(CRD_NAME).await.expect("crd");
    assert!(
        spec_fields(&crd).contains(&"newField".to_owned()),
        "helm upgrade updated the CRD"
    );
    services
        .get("keep-me")
        .await
        .expect("the TrustyAIService survived the upgrade");

    uninstall(cp, "trustyai", &ns);
    // helm returns once its deletes are accepted, and a CRD it had deleted would at once carry
    // a deletionTimestamp (its cleanup finalizer then deletes every TrustyAIService): so the
    // CRD and the TrustyAIService are checked for one, right away.
    let (ok, _, err) = cp.kubectl(
        &["get", "deployment", "trustyai-trustyai-operator", "-n", &ns],
        None,
    );
    assert!(
        !ok && err.contains("NotFound"),
        "helm uninstall deleted the release's Deployment: {err}"
    );
    let crd = crd_api
        .get(CRD_NAME)
        .await
        .expect("the CRD survived helm uninstall");
    assert!(
        crd.metadata.deletion_timestamp.is_none(),
        "helm uninstall deleted the CRD"
    );
    let kept = services
        .get("keep-me")
        .await
        .expect("the TrustyAIService survived helm uninstall");
    assert!(
        kept.metadata.deletion_timestamp.is_none(),
        "helm uninstall deleted the TrustyAIService"
    );
    let _ = std::fs::remove_dir_all(&upgraded);
}

/// Every object the release `trustyai` installs into `ns` and the cluster exists.
fn assert_every_object_of_the_release_exists(cp: &ControlPlane, ns: &str) {
    for (kind, name, namespaced) in [
        ("deployment", "trustyai-trustyai-operator", true),
        ("serviceaccount", "trustyai-trustyai-operator", true),
        ("service", "trustyai-trustyai-operator-webhook", true),
        ("configmap", "trustyai-service-operator-config", true),
        ("role", "trustyai-trustyai-operator", true),
        ("rolebinding", "trustyai-trustyai-operator", true),
        ("clusterrole", "trustyai-trustyai-operator", false),
        ("clusterrolebinding", "trustyai-trustyai-operator", false),
        ("clusterrole", "trustyai-trustyai-operator-proxy", false),
        ("clusterrole", "trustyai-trustyai-operator-editor", false),
        ("clusterrole", "trustyai-trustyai-operator-viewer", false),
        (
            "validatingwebhookconfiguration",
            "trustyai-trustyai-operator-validating",
            false,
        ),
        (
            "mutatingwebhookconfiguration",
            "trustyai-trustyai-operator-mutating",
            false,
        ),
        ("crd", CRD_NAME, false),
    ] {
        let mut args = vec!["get", kind, name];
        if namespaced {
            args.extend(["-n", ns]);
        }
        let (ok, _, err) = cp.kubectl(&args, None);
        assert!(ok, "{kind}/{name} missing after helm install: {err}");
    }
}

/// A copy of the chart whose CRD has a field more in `spec`: `newField`.
fn chart_whose_crd_gained_a_field() -> PathBuf {
    let upgraded =
        std::env::temp_dir().join(format!("trustyai-chart-upgrade-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&upgraded);
    copy_dir(&chart_dir(), &upgraded);
    let crd_file = upgraded.join("files/trustyaiservices.yaml");
    let text = std::fs::read_to_string(&crd_file).expect("crd copy");
    let marker = "              replicas:\n";
    assert!(text.contains(marker), "the CRD copy has spec.replicas");
    let new_field = "              newField:\n                description: A field added by the upgraded chart.\n                type: string\n";
    std::fs::write(
        &crd_file,
        text.replacen(marker, &format!("{new_field}{marker}"), 2),
    )
    .expect("write");
    upgraded
}

/// The fields of `spec` in the CRD's v1 schema.
fn spec_fields(crd: &CustomResourceDefinition) -> Vec<String> {
    let v1 = v1_of(crd);
    let spec_props = v1
        .schema
        .as_ref()
        .and_then(|s| s.open_api_v3_schema.as_ref())
        .and_then(|s| s.properties.as_ref())
        .and_then(|p| p.get("spec"))
        .and_then(|s| s.properties.as_ref())
        .expect("spec properties");
    spec_props.keys().cloned().collect()
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read_dir") {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("type").is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy");
        }
    }
}
