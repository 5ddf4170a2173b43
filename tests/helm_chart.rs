#![allow(clippy::expect_used)] // a test fails loudly on unexpected data
//! The Helm chart, with the helm built from its Go module and the real API server: lint, render
//! in every certificate mode and server-side dry-run, values schema, the CRD copy, install,
//! upgrade with a CRD that gained a field, and uninstall that keeps the CRD and every
//! TrustyAIService.

mod support;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, PostParams};
use serde_json::json;
use support::ControlPlane;
use support::cluster::tas_api;
use support::helm::helm;
use trustyai_crds::contract::CRD_NAME;

const KUBE_VERSION: &str = "1.37.2";

fn chart_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("charts/trustyai-operator")
}

fn template(extra: &[&str]) -> String {
    let chart = chart_dir();
    let mut args = vec![
        "template",
        "trustyai",
        chart.to_str().expect("path"),
        "--namespace",
        "trustyai-system",
        "--kube-version",
        KUBE_VERSION,
    ];
    args.extend_from_slice(extra);
    let (ok, out, err) = helm(None, &args);
    assert!(ok, "helm template {extra:?} failed: {err}");
    out
}

#[test]
fn chart_crd_is_the_generated_crd() {
    let generated = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("crds/trustyaiservices.yaml"),
    )
    .expect("crd");
    let copy = std::fs::read_to_string(chart_dir().join("files/trustyaiservices.yaml"))
        .expect("chart copy");
    assert!(
        generated == copy,
        "charts/trustyai-operator/files/trustyaiservices.yaml differs from crds/trustyaiservices.yaml: run `make crd`"
    );
}

#[test]
fn lint_is_clean() {
    let (ok, out, err) = helm(
        None,
        &[
            "lint",
            chart_dir().to_str().expect("path"),
            "--strict",
            "--kube-version",
            KUBE_VERSION,
        ],
    );
    assert!(ok, "helm lint failed:\n{out}\n{err}");
}

#[test]
fn values_schema_rejects_a_misspelled_value() {
    let chart = chart_dir();
    let (ok, _, err) = helm(
        None,
        &[
            "template",
            "t",
            chart.to_str().expect("path"),
            "--kube-version",
            KUBE_VERSION,
            "--set",
            "replicaCont=2",
        ],
    );
    assert!(!ok, "a misspelled value was accepted");
    assert!(
        err.contains("replicaCont") && err.contains("not allowed"),
        "{err}"
    );
    let (ok, _, err) = helm(
        None,
        &[
            "template",
            "t",
            chart.to_str().expect("path"),
            "--kube-version",
            KUBE_VERSION,
            "--set",
            "certs.mode=letsencrypt",
        ],
    );
    assert!(!ok && err.contains("/certs/mode"), "{err}");
}

#[test]
fn values_table_documents_every_value() {
    let values = std::fs::read_to_string(chart_dir().join("values.yaml")).expect("values");
    let readme = std::fs::read_to_string(chart_dir().join("README.md")).expect("chart README");
    let mut stack: Vec<String> = Vec::new();
    let mut commented = false;
    for line in values.lines() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("# --") {
            commented = true;
            continue;
        }
        let Some((key, _)) = trimmed.split_once(':') else {
            continue;
        };
        if trimmed.starts_with('-') || trimmed.starts_with('#') || key.contains(' ') {
            continue;
        }
        let depth = (line.len() - trimmed.len()) / 2;
        stack.truncate(depth);
        stack.push(key.to_string());
        let path = stack.join(".");
        // `resources` is one free-form value (a Kubernetes ResourceRequirements), documented whole.
        if depth > 0 && stack[0] == "resources" {
            continue;
        }
        assert!(commented, "values.yaml: {path} has no `# --` comment");
        assert!(
            readme.contains(&format!("| `{path}` |")),
            "charts/trustyai-operator/README.md: no row for {path}"
        );
        commented = false;
    }
}

#[tokio::test]
async fn every_certificate_mode_renders_objects_the_api_server_accepts() {
    let cp = ControlPlane::shared();
    // cert-manager's kinds, as minimal CRDs, so its Issuer and Certificate can be dry-run.
    let (ok, applied, err) = cp.kubectl(
        &[
            "apply",
            "--server-side",
            "-o",
            "name",
            "-f",
            &format!(
                "{}/tests/fixtures/crds/cert-manager.yaml",
                env!("CARGO_MANIFEST_DIR")
            ),
        ],
        None,
    );
    assert!(ok, "{err}");
    let mut wait = vec!["wait", "--for=condition=Established", "--timeout=60s"];
    wait.extend(applied.lines());
    let (ok, out, err) = cp.kubectl(&wait, None);
    assert!(ok, "cert-manager's CRDs established: {out}{err}");
    let (ok, _, err) = cp.kubectl(&["create", "namespace", "trustyai-system"], None);
    assert!(ok || err.contains("AlreadyExists"), "{err}");
    for extra in [
        vec![],
        vec!["--set", "certs.mode=certManager"],
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
    ] {
        let manifest = template(&extra);
        let apply = [
            "apply",
            "--dry-run=server",
            "--server-side",
            "--force-conflicts",
            "-f",
            "-",
        ];
        // Established comes before the kinds show in discovery, which kubectl maps them by.
        let deadline = Instant::now() + Duration::from_secs(30);
        let (ok, out, err) = loop {
            let (ok, out, err) = cp.kubectl(&apply, Some(&manifest));
            let unmapped = err.contains("no matches for kind")
                || err.contains("ensure CRDs are installed first");
            if ok || !unmapped || Instant::now() > deadline {
                break (ok, out, err);
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        };
        assert!(
            ok,
            "the API server refused the chart rendered with {extra:?}:\n{err}\n{out}"
        );
    }
}

#[tokio::test]
async fn install_upgrade_and_uninstall_keep_the_crd_and_every_trustyaiservice() {
    let cp = ControlPlane::shared();
    let client = cp.client().await;
    let ns = cp.namespace(&client, "helm").await;
    let chart = chart_dir();
    let (ok, out, err) = helm(
        Some(cp),
        &[
            "install",
            "trustyai",
            chart.to_str().expect("path"),
            "--namespace",
            &ns,
            "--wait=false",
        ],
    );
    assert!(ok, "helm install failed:\n{out}\n{err}");
    assert!(
        out.contains("Create a first TrustyAIService"),
        "NOTES.txt shown: {out}"
    );

    // Every object exists.
    for (kind, name, namespaced) in [
        ("deployment", "trustyai-trustyai-operator", true),
        ("serviceaccount", "trustyai-trustyai-operator", true),
        ("service", "trustyai-trustyai-operator-webhook", true),
        ("configmap", "trustyai-service-operator-config", true),
        ("role", "trustyai-trustyai-operator", true),
        ("rolebinding", "trustyai-trustyai-operator", true),
        ("clusterrole", "trustyai-trustyai-operator", false),
        ("clusterrolebinding", "trustyai-trustyai-operator", false),
        ("clusterrole", "trustyai-service-operator-proxy-role", false),
        ("clusterrole", "trustyaiservice-editor-role", false),
        ("clusterrole", "trustyaiservice-viewer-role", false),
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
            args.extend(["-n", ns.as_str()]);
        }
        let (ok, _, err) = cp.kubectl(&args, None);
        assert!(ok, "{kind}/{name} missing after helm install: {err}");
    }

    // No operator pod runs here (no container runtime), so let the registrations ignore their
    // unreachable webhook; v1-only traffic needs no conversion.
    let (ok, out, err) = helm(
        Some(cp),
        &[
            "upgrade",
            "trustyai",
            chart.to_str().expect("path"),
            "--namespace",
            &ns,
            "--set",
            "webhook.failurePolicy=Ignore",
        ],
    );
    assert!(ok, "helm upgrade failed:\n{out}\n{err}");
    let (ok, out, err) = cp.kubectl(
        &[
            "wait",
            "--for=condition=Established",
            "--timeout=60s",
            &format!("crd/{CRD_NAME}"),
        ],
        None,
    );
    assert!(ok, "the chart's CRD established: {out}{err}");
    let crd_api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let tas = tas_api(&client, &ns, "v1");
    let keep_me: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "trustyai.opendatahub.io/v1", "kind": "TrustyAIService", "metadata": {"name": "keep-me"},
        "spec": {"storage": {"format": "PVC"}, "metrics": {"schedule": "5s"}}
    }))
    .expect("tas");
    // The API server reloads webhook registrations from a watch: until it has seen the upgrade,
    // the installed Fail policy still refuses the create.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match tas.create(&PostParams::default(), &keep_me).await {
            Ok(_) => break,
            Err(kube::Error::Api(status))
                if status.message.contains("failed calling webhook")
                    && Instant::now() < deadline =>
            {
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
            Err(e) => panic!("TrustyAIService created with failurePolicy=Ignore: {e}"),
        }
    }

    // Upgrade to a chart whose CRD gained a field.
    let upgraded =
        std::env::temp_dir().join(format!("trustyai-chart-upgrade-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&upgraded);
    copy_dir(&chart, &upgraded);
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
    let (ok, out, err) = helm(
        Some(cp),
        &[
            "upgrade",
            "trustyai",
            upgraded.to_str().expect("path"),
            "--namespace",
            &ns,
            "--set",
            "webhook.failurePolicy=Ignore",
        ],
    );
    assert!(ok, "helm upgrade to the new CRD failed:\n{out}\n{err}");
    let crd = crd_api.get(CRD_NAME).await.expect("crd");
    let v1 = crd
        .spec
        .versions
        .iter()
        .find(|v| v.name == "v1")
        .expect("v1");
    let spec_props = v1
        .schema
        .as_ref()
        .and_then(|s| s.open_api_v3_schema.as_ref())
        .and_then(|s| s.properties.as_ref())
        .and_then(|p| p.get("spec"))
        .and_then(|s| s.properties.as_ref())
        .expect("spec properties");
    assert!(
        spec_props.contains_key("newField"),
        "helm upgrade updated the CRD"
    );
    tas.get("keep-me")
        .await
        .expect("the TrustyAIService survived the upgrade");

    let (ok, out, err) = helm(Some(cp), &["uninstall", "trustyai", "--namespace", &ns]);
    assert!(ok, "helm uninstall failed:\n{out}\n{err}");
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
    let kept = tas
        .get("keep-me")
        .await
        .expect("the TrustyAIService survived helm uninstall");
    assert!(
        kept.metadata.deletion_timestamp.is_none(),
        "helm uninstall deleted the TrustyAIService"
    );
    let _ = std::fs::remove_dir_all(&upgraded);
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
