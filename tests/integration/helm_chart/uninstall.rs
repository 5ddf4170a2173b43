//! The documented uninstall: `helm uninstall`, then `trustyai-operator uninstall` releases what
//! the operator's finalizer still holds.

use crate::support;
use support::control_planes::{self, Concern};

use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, PostParams};
use support::ControlPlane;
use support::cli;
use support::cluster::{exists, names, tas, tas_api};
use support::operator::Operator;
use support::wait::until;

use super::{CRD_NAME, delete_crd, install, uninstall, wait_established};

/// The documented uninstall, end to end: the chart installed under its default release name,
/// its operator running with the chart's flags and a TrustyAIService held by its finalizer,
/// then `helm uninstall` (the operator goes with the release) and the namespace of the
/// TrustyAIService deleted. The namespace stays `Terminating` until `trustyai-operator
/// uninstall --namespace <release namespace>` (the README's command, with the chart's names as
/// its defaults) releases the TrustyAIService and the TrustyAIMetric; afterwards nothing of ours
/// is left but the CRDs.
#[tokio::test]
async fn helm_uninstall_then_the_uninstall_command_leaves_no_namespace_terminating() {
    let (_claim, cp, client, ns) =
        control_planes::exclusive_namespace(Concern::HelmChart, "release").await;
    delete_crd(cp).await;
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
    operator.wait_ready(TIMEOUT);
    let services = tas_api(&client, &app, "v1");
    create_a_database_service(cp, &services, &app).await;
    // A TrustyAIMetric held by the metric finalizer, as the operator's metric controller leaves
    // it: `uninstall` must release it too, or the namespace never goes.
    let metrics = metric_api(&client, &app);
    metrics
        .create(&PostParams::default(), &finalized_metric())
        .await
        .expect("creating the TrustyAIMetric");
    let bindings = Api::<ClusterRoleBinding>::all(client.clone());
    let binding = format!("tas-{app}-proxy-rolebinding");
    until(
        "the operator's finalizer and binding",
        TIMEOUT,
        async || {
            let tas = services.get_opt("tas").await.ok()??;
            let finalized = tas.metadata.finalizers.is_some_and(|f| !f.is_empty());
            (finalized && bindings.get_opt(&binding).await.ok()?.is_some()).then_some(())
        },
    )
    .await;

    uninstall(cp, RELEASE, &ns);
    operator.stop();
    let namespaces = Api::<Namespace>::all(client.clone());
    namespaces
        .delete(&app, &DeleteParams::default())
        .await
        .expect("deleting the namespace");
    // Without an operator the finalizer holds the TrustyAIService, and it the namespace.
    until(
        "the namespace to wait on its TrustyAIService",
        TIMEOUT,
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
            let metric_held = metrics
                .get_opt("demo-model-spd")
                .await
                .ok()??
                .metadata
                .deletion_timestamp
                .is_some();
            (terminating && held && metric_held).then_some(())
        },
    )
    .await;

    cli::succeeded(&cli::run_against(
        cp,
        "uninstall",
        &["--namespace", &ns],
        &[],
    ));
    until("the namespace to be gone", TIMEOUT, async || {
        namespaces.get_opt(&app).await.ok()?.is_none().then_some(())
    })
    .await;

    assert_nothing_of_the_release_is_left(&client, &ns).await;
    let crds = Api::<CustomResourceDefinition>::all(client.clone());
    assert!(exists(&crds, CRD_NAME).await, "the CRD stays");
    // The operator pointed the CRD's conversion at itself: the next test starts without it.
    delete_crd(cp).await;
}

/// The TrustyAIMetrics of `ns`.
fn metric_api(client: &Client, ns: &str) -> Api<DynamicObject> {
    let gvk =
        kube::api::GroupVersionKind::gvk("trustyai.opendatahub.io", "v1alpha1", "TrustyAIMetric");
    Api::namespaced_with(
        client.clone(),
        ns,
        &kube::api::ApiResource::from_gvk_with_plural(&gvk, "trustyaimetrics"),
    )
}

/// A valid TrustyAIMetric carrying the metric finalizer.
fn finalized_metric() -> DynamicObject {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "trustyai.opendatahub.io/v1alpha1",
        "kind": "TrustyAIMetric",
        "metadata": {
            "name": "demo-model-spd",
            "finalizers": [trustyai_crds::metric::FINALIZER],
        },
        "spec": {"model": "demo-model", "type": "kstest"},
    }))
    .expect("a TrustyAIMetric")
}

/// The chart's default release name, whose names are the operator's defaults.
const RELEASE: &str = "trustyai-operator";
const TIMEOUT: Duration = Duration::from_secs(120);

/// A DATABASE TrustyAIService `tas` in `ns`, with its credentials Secret.
async fn create_a_database_service(cp: &ControlPlane, services: &Api<DynamicObject>, ns: &str) {
    let (ok, out, err) = cp.kubectl(
        &[
            "create",
            "secret",
            "generic",
            "db-creds",
            "-n",
            ns,
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
    services
        .create(
            &PostParams::default(),
            &tas("v1", "tas", support::samples::database("db-creds")),
        )
        .await
        .expect("creating the TrustyAIService");
}

/// Nothing of ours is left cluster-wide (bindings the operator made, the release's roles,
/// bindings and registrations) or in the release namespace (Secrets, Leases).
async fn assert_nothing_of_the_release_is_left(client: &Client, ns: &str) {
    let bindings = Api::<ClusterRoleBinding>::all(client.clone());
    let ours = ListParams::default().labels("trustyai.opendatahub.io/owner-name");
    let left = bindings
        .list_metadata(&ours)
        .await
        .expect("listing bindings");
    assert!(left.items.is_empty(), "bindings left: {:?}", left.items);
    let of_the_release = |list: Vec<String>| -> Vec<String> {
        list.into_iter()
            .filter(|name| name.starts_with(RELEASE))
            .collect()
    };
    let left: Vec<String> = of_the_release(
        [
            names(&Api::<ClusterRole>::all(client.clone())).await,
            names(&bindings).await,
            names(&Api::<ValidatingWebhookConfiguration>::all(client.clone())).await,
            names(&Api::<MutatingWebhookConfiguration>::all(client.clone())).await,
        ]
        .concat(),
    );
    assert!(left.is_empty(), "cluster-scoped objects left: {left:?}");
    let secrets = names(&Api::<Secret>::namespaced(client.clone(), ns)).await;
    assert!(
        of_the_release(secrets.clone()).is_empty(),
        "Secrets left: {secrets:?}"
    );
    let leases = names(&Api::<Lease>::namespaced(client.clone(), ns)).await;
    assert!(leases.is_empty(), "Leases left: {leases:?}");
}
