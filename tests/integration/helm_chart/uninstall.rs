//! The documented uninstall: `helm uninstall`, then `trustyai-operator uninstall` releases what
//! the operator's finalizer still holds.

use crate::support;
use support::control_planes::{self, Concern};

use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, PostParams};
use serde_json::json;
use support::cluster::tas_api;

use super::{CRD_NAME, delete_crd, helm, install, wait_established};

/// The documented uninstall, end to end: the chart installed under its default release name,
/// its operator running with the chart's flags and a TrustyAIService held by its finalizer,
/// then `helm uninstall` (the operator goes with the release) and the namespace of the
/// TrustyAIService deleted. The namespace stays `Terminating` until `trustyai-operator
/// uninstall --namespace <release namespace>` (the README's command, with the chart's names as
/// its defaults) releases the TrustyAIService; afterwards nothing of ours is left but the CRD.
#[tokio::test]
async fn helm_uninstall_then_the_uninstall_command_leaves_no_namespace_terminating() {
    use k8s_openapi::api::admissionregistration::v1::{
        MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
    };
    use k8s_openapi::api::coordination::v1::Lease;
    use k8s_openapi::api::core::v1::{Namespace, Secret};
    use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
    use kube::api::{DeleteParams, ListParams};
    use support::operator::Operator;
    use support::wait::until;

    const RELEASE: &str = "trustyai-operator";
    let timeout = Duration::from_secs(120);
    let claim = control_planes::exclusive(Concern::HelmChart);
    let cp = claim.control_plane();
    delete_crd(cp);
    let client = cp.client().await;
    let ns = cp.namespace(&client, "release").await;
    let app = cp.namespace(&client, "app").await;
    // The registrations point at the chart's Service, which has no pod behind it here.
    install(cp, RELEASE, &ns, &["--set", "webhook.failurePolicy=Ignore"]);
    wait_established(cp);

    // There is no container runtime, so the chart's operator pod never runs: the same binary
    // runs beside the cluster in its place, with the chart's names (the release's defaults).
    let mut operator = Operator::start(
        cp,
        &ns,
        &["--proxy-cluster-role", "trustyai-operator-proxy"],
    );
    operator.wait_ready(timeout);
    let (ok, out, err) = cp.kubectl(
        &[
            "create",
            "secret",
            "generic",
            "db-creds",
            "-n",
            &app,
            "--from-literal=databaseKind=mariadb",
            "--from-literal=databaseUsername=u",
            "--from-literal=databasePassword=p",
            "--from-literal=databaseService=db",
            "--from-literal=databasePort=3306",
            "--from-literal=databaseName=trustyai",
        ],
        None,
    );
    assert!(ok, "{out}{err}");
    let services = tas_api(&client, &app, "v1");
    let tas: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "trustyai.opendatahub.io/v1", "kind": "TrustyAIService",
        "metadata": {"name": "tas"},
        "spec": support::samples::database("db-creds"),
    }))
    .expect("object");
    services
        .create(&PostParams::default(), &tas)
        .await
        .expect("creating the TrustyAIService");
    let bindings = Api::<ClusterRoleBinding>::all(client.clone());
    let binding = format!("tas-{app}-proxy-rolebinding");
    until(
        "the operator's finalizer and binding",
        timeout,
        async || {
            let tas = services.get_opt("tas").await.ok()??;
            let finalized = tas.metadata.finalizers.is_some_and(|f| !f.is_empty());
            (finalized && bindings.get_opt(&binding).await.ok()?.is_some()).then_some(())
        },
    )
    .await;

    let (ok, out, err) = helm(Some(cp), &["uninstall", RELEASE, "--namespace", &ns]);
    assert!(ok, "helm uninstall failed:\n{out}\n{err}");
    operator.stop();
    let namespaces = Api::<Namespace>::all(client.clone());
    namespaces
        .delete(&app, &DeleteParams::default())
        .await
        .expect("deleting the namespace");
    // Without an operator the finalizer holds the TrustyAIService, and it the namespace.
    until(
        "the namespace to wait on its TrustyAIService",
        timeout,
        async || {
            let namespace = namespaces.get(&app).await.ok()?;
            let terminating = namespace.status?.phase.as_deref() == Some("Terminating");
            let held = services
                .get_opt("tas")
                .await
                .ok()??
                .metadata
                .deletion_timestamp
                .is_some();
            (terminating && held).then_some(())
        },
    )
    .await;

    let out = std::process::Command::new(env!("CARGO_BIN_EXE_trustyai-operator"))
        .arg("uninstall")
        .arg("--kubeconfig")
        .arg(&cp.kubeconfig)
        .args(["--namespace", &ns])
        .output()
        .expect("running uninstall");
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    until("the namespace to be gone", timeout, async || {
        namespaces.get_opt(&app).await.ok()?.is_none().then_some(())
    })
    .await;

    // Nothing of ours is left cluster-wide or in the release namespace, except the CRD.
    let ours = ListParams::default().labels("trustyai.opendatahub.io/owner-name");
    let left = bindings
        .list_metadata(&ours)
        .await
        .expect("listing bindings");
    assert!(left.items.is_empty(), "bindings left: {:?}", left.items);
    let named = |list: Vec<String>| -> Vec<String> {
        list.into_iter()
            .filter(|name| name.starts_with(RELEASE))
            .collect()
    };
    let roles = Api::<ClusterRole>::all(client.clone())
        .list_metadata(&ListParams::default())
        .await
        .expect("roles");
    let role_bindings = bindings
        .list_metadata(&ListParams::default())
        .await
        .expect("bindings");
    let validating = Api::<ValidatingWebhookConfiguration>::all(client.clone())
        .list_metadata(&ListParams::default())
        .await
        .expect("validating");
    let mutating = Api::<MutatingWebhookConfiguration>::all(client.clone())
        .list_metadata(&ListParams::default())
        .await
        .expect("mutating");
    let left: Vec<String> = named(
        roles
            .items
            .into_iter()
            .filter_map(|o| o.metadata.name)
            .chain(
                role_bindings
                    .items
                    .into_iter()
                    .filter_map(|o| o.metadata.name),
            )
            .chain(validating.items.into_iter().filter_map(|o| o.metadata.name))
            .chain(mutating.items.into_iter().filter_map(|o| o.metadata.name))
            .collect(),
    );
    assert!(left.is_empty(), "cluster-scoped objects left: {left:?}");
    let secrets = Api::<Secret>::namespaced(client.clone(), &ns)
        .list_metadata(&ListParams::default())
        .await
        .expect("secrets");
    let secrets: Vec<String> = secrets
        .items
        .into_iter()
        .filter_map(|o| o.metadata.name)
        .collect();
    assert!(
        named(secrets.clone()).is_empty(),
        "Secrets left: {secrets:?}"
    );
    let leases = Api::<Lease>::namespaced(client.clone(), &ns)
        .list_metadata(&ListParams::default())
        .await
        .expect("leases");
    assert!(leases.items.is_empty(), "Leases left: {:?}", leases.items);
    let crds = Api::<CustomResourceDefinition>::all(client.clone());
    assert!(
        crds.get_opt(CRD_NAME).await.expect("read").is_some(),
        "the CRD stays"
    );
    // The operator pointed the CRD's conversion at itself: the next test starts without it.
    delete_crd(cp);
}
