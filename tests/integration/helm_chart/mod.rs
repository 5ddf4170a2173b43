//! The Helm chart, with the helm built from its Go module and the real API server:
//!
//! - `render`: what `helm lint` and `helm template` make of the chart alone (the webhook
//!   registrations, the CRD copies, names, cert-manager issuers);
//! - `metric`: what the chart renders for TrustyAIMetric (its CRD, webhook rules and RBAC);
//! - `values`: the values schema and table, and where each value lands in what is rendered
//!   (and that the API server accepts it);
//! - `monitoring`: the alerts and the dashboard, held to Prometheus' rule checker and to the
//!   metrics the operator exports;
//! - `install`: install in every certificate mode; install, upgrade with a CRD that gained a
//!   field, and uninstall that keeps the CRD and every TrustyAIService;
//! - `go_operator`: installs where the Go operator's CRD and objects already exist (left alone
//!   or adopted, two releases side by side);
//! - `uninstall`: the documented uninstall, `helm uninstall` then `trustyai-operator uninstall`.
//!
//! The tests that install hold this concern's control plane exclusively: each install brings
//! the chart's CRD, which the others change.

mod go_operator;
mod install;
mod metric;
pub(crate) mod monitoring;
mod render;
mod uninstall;
mod values;

use crate::support;

use std::path::Path;
use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, CustomResourceDefinitionVersion,
};
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use serde_json::Value;
use support::ControlPlane;
use support::helm::{chart_dir, helm, helm_chart};
use trustyai_crds::contract::CRD_NAME;

const KUBE_VERSION: &str = "1.37.2";

/// cert-manager mode with a named ClusterIssuer (the chart makes no Issuer of its own).
const NAMED_CLUSTER_ISSUER: [&str; 6] = [
    "--set",
    "certs.mode=certManager",
    "--set",
    "certs.issuerKind=ClusterIssuer",
    "--set",
    "certs.issuerName=corporate-ca",
];

/// The CRD's `v1` version.
fn v1_of(crd: &CustomResourceDefinition) -> &CustomResourceDefinitionVersion {
    crd.spec
        .versions
        .iter()
        .find(|v| v.name == "v1")
        .expect("v1")
}

/// The TrustyAIMetric CRD, which the chart installs beside the TrustyAIService one.
const METRIC_CRD_NAME: &str = trustyai_operator::crd_maintenance::METRIC_CRD_NAME;

/// Deletes both CRDs (and with them every TrustyAIService and TrustyAIMetric) so a test starts
/// from a cluster without them: a CRD left by another release or by an operator's CRD
/// maintenance would make `helm install` refuse to adopt it. Whether they are gone is read
/// back from the API server every half second rather than watched, and a deletion that does not
/// finish prints what holds it: the CRDs' status (the cleanup's conditions) and their instances.
async fn delete_crd(cp: &ControlPlane) {
    let crds: Api<CustomResourceDefinition> = Api::all(cp.client().await);
    for name in CRD_NAMES {
        match crds.delete(name, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 404 => {}
            Err(e) => panic!("deleting the CRD {name}: {e}"),
        }
    }
    let asked = std::time::Instant::now();
    support::wait::until_showing(
        "the CRDs deleted",
        Duration::from_secs(180),
        || what_holds_the_crds(cp),
        async || {
            for name in CRD_NAMES {
                let crd = crds.get_opt(name).await.ok()?;
                if let Some(crd) = crd {
                    if asked.elapsed() > CLEANUP_PATIENCE {
                        release_an_empty_crd(cp, &crds, &crd).await;
                    }
                    return None;
                }
            }
            Some(())
        },
    )
    .await;
}

/// How long the API server's cleanup of a CRD with no instances may take before the test
/// releases it itself.
const CLEANUP_PATIENCE: Duration = Duration::from_secs(60);

/// The API server's cleanup finalizer deletes a CRD's instances, then lets the CRD go. In some
/// full runs of the suite the TrustyAIMetric CRD, with no instance, was still there 120 s after
/// its deletion (the TrustyAIService one beside it went at once); no operator runs on this
/// control plane, so nothing of ours can hold it. A CRD still there after [`CLEANUP_PATIENCE`], whose instances
/// the API server lists as none, is released here, saying so with its status; a CRD with
/// instances, or whose instances cannot be listed, is left for the timeout to report.
async fn release_an_empty_crd(
    cp: &ControlPlane,
    crds: &Api<CustomResourceDefinition>,
    crd: &CustomResourceDefinition,
) {
    let name = crd.metadata.name.as_deref().unwrap_or_default();
    if crd.metadata.deletion_timestamp.is_none() {
        return;
    }
    let (listed, instances, _) =
        cp.kubectl(&["get", &crd.spec.names.plural, "-A", "-o", "name"], None);
    if !listed || !instances.trim().is_empty() {
        return;
    }
    eprintln!(
        "the CRD {name} has no instance and is still there {CLEANUP_PATIENCE:?} after its deletion; releasing it. Its status: {:?}",
        crd.status
    );
    let release = serde_json::json!({"metadata": {"finalizers": null}});
    if let Err(e) = crds
        .patch(name, &PatchParams::default(), &Patch::Merge(&release))
        .await
    {
        eprintln!("releasing the CRD {name}: {e}");
    }
}

/// The TrustyAIService and TrustyAIMetric CRDs.
const CRD_NAMES: [&str; 2] = [CRD_NAME, METRIC_CRD_NAME];

/// The CRDs as stored, their instances and the control plane's logs.
fn what_holds_the_crds(cp: &ControlPlane) -> String {
    let (_, crds, _) = cp.kubectl(
        &["get", "crd", CRD_NAME, METRIC_CRD_NAME, "-o", "yaml"],
        None,
    );
    let (_, instances, _) = cp.kubectl(
        &[
            "get",
            "trustyaiservices,trustyaimetrics",
            "-A",
            "-o",
            "yaml",
        ],
        None,
    );
    format!(
        "--- the CRDs ---\n{crds}\n--- their instances ---\n{instances}\n{}",
        cp.logs()
    )
}

fn wait_established(cp: &ControlPlane) {
    let (ok, out, err) = cp.kubectl(
        &[
            "wait",
            "--for=condition=Established",
            "--timeout=60s",
            &format!("crd/{CRD_NAME}"),
        ],
        None,
    );
    assert!(ok, "the CRD established: {out}{err}");
}

/// `helm template` without `--kube-version`: the helm of `dev/control-plane/` is built, as
/// helm's own release builds are, to assume its client-go's Kubernetes version, which the
/// chart's `kubeVersion` accepts. Without the `helm test` hooks: their pod names a
/// ServiceAccount that a server-side dry run does not create
/// (`real_node::chart` installs them and runs `helm test`).
fn template(extra: &[&str]) -> String {
    let mut args = vec!["--namespace", "trustyai-system", "--no-hooks"];
    args.extend_from_slice(extra);
    let (ok, out, err) = helm_chart(None, "template", "trustyai", &args);
    assert!(ok, "helm template {extra:?} failed: {err}");
    out
}

/// `helm template` of the chart for Kubernetes [`KUBE_VERSION`] with `extra`, which the chart
/// must refuse; returns helm's message.
fn refused(extra: &[&str]) -> String {
    let mut args = vec!["--kube-version", KUBE_VERSION];
    args.extend_from_slice(extra);
    let (ok, out, err) = helm_chart(None, "template", "t", &args);
    assert!(!ok, "rendered with {extra:?}:\n{out}");
    err
}

/// `helm install <release>` of the chart into `ns` (not waiting for the operator's pod, which
/// never runs here), with `extra` arguments; asserts it succeeds and returns what helm printed.
fn install(cp: &ControlPlane, release: &str, ns: &str, extra: &[&str]) -> String {
    let mut args = vec!["--namespace", ns, "--wait=false"];
    args.extend_from_slice(extra);
    let (ok, out, err) = helm_chart(Some(cp), "install", release, &args);
    assert!(ok, "helm install {release} {extra:?} failed:\n{out}\n{err}");
    out
}

/// `helm upgrade <release>` to the chart in `chart` in `ns`, with `extra` arguments; asserts it
/// succeeds.
fn upgrade(cp: &ControlPlane, release: &str, chart: &Path, ns: &str, extra: &[&str]) {
    let mut args = vec![
        "upgrade",
        release,
        chart.to_str().expect("path"),
        "--namespace",
        ns,
    ];
    args.extend_from_slice(extra);
    let (ok, out, err) = helm(Some(cp), &args);
    assert!(
        ok,
        "helm upgrade {release} to {} {extra:?} failed:\n{out}\n{err}",
        chart.display()
    );
}

/// `helm uninstall <release>` from `ns`; asserts it succeeds.
fn uninstall(cp: &ControlPlane, release: &str, ns: &str) {
    let (ok, out, err) = helm(Some(cp), &["uninstall", release, "--namespace", ns]);
    assert!(ok, "helm uninstall {release} failed:\n{out}\n{err}");
}

/// Applies the CRDs of the fixture `file` (`tests/fixtures/crds/`) and waits until they are
/// established; returns the fixture's path.
fn establish_fixture_crds(cp: &ControlPlane, file: &str) -> String {
    let path = format!("{}/tests/fixtures/crds/{file}", env!("CARGO_MANIFEST_DIR"));
    let (ok, applied, err) =
        cp.kubectl(&["apply", "--server-side", "-o", "name", "-f", &path], None);
    assert!(ok, "{err}");
    let mut wait = vec!["wait", "--for=condition=Established", "--timeout=60s"];
    wait.extend(applied.lines());
    let (ok, out, err) = cp.kubectl(&wait, None);
    assert!(ok, "the CRDs of {file} established: {out}{err}");
    path
}

/// The objects of a rendered manifest, parsed.
fn documents(manifest: &str) -> Vec<Value> {
    manifest
        .split("\n---")
        .flat_map(|document| {
            trustyai_crds::manifests::parse_documents(document)
                .unwrap_or_else(|e| panic!("{e}: {document}"))
        })
        .filter(|object| object["kind"].is_string())
        .collect()
}

/// Every object of `kind` in `objects`.
fn of_kind<'a>(objects: &'a [Value], kind: &str) -> Vec<&'a Value> {
    objects.iter().filter(|o| o["kind"] == kind).collect()
}

/// The one object of `kind` in `objects`.
fn one<'a>(objects: &'a [Value], kind: &str) -> &'a Value {
    let found = of_kind(objects, kind);
    assert_eq!(found.len(), 1, "one {kind}: {found:#?}");
    found[0]
}

/// The `name`s of a list such as a pod's volumes, in order; empty when the list is absent.
fn names(list: &Value) -> Vec<&str> {
    list.as_array()
        .map(|items| items.iter().filter_map(|i| i["name"].as_str()).collect())
        .unwrap_or_default()
}
