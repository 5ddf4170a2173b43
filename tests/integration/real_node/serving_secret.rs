//! Where the cluster serves Routes (OpenShift), the operator leaves the serving certificate
//! Secrets `<cr>-tls` and `<cr>-internal` to the service CA. Where that never issues them, the
//! service's pods wait in `ContainerCreating`, and Ready names the missing Secrets.

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DynamicObject, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::json;
use trustyai_local_cluster::ControlPlane;

use super::database::not_ready_because;
use super::release::{installed, wait_for};
use super::service::create_pvc_service;
use crate::support::cluster::{tas, tas_api};

const ROUTE_CRD: &str = "tests/fixtures/crds/route.yaml";

/// OpenShift's Route CRD, removed again when dropped.
struct RouteCrd<'a>(&'a ControlPlane);

impl<'a> RouteCrd<'a> {
    fn install(cp: &'a ControlPlane) -> Self {
        cp.install_crds(&[ROUTE_CRD], &["routes.route.openshift.io"])
            .unwrap_or_else(|e| panic!("{e}"));
        Self(cp)
    }
}

impl Drop for RouteCrd<'_> {
    fn drop(&mut self) {
        let _ = self.0.kubectl(
            &[
                "delete",
                "--ignore-not-found",
                "--wait=true",
                "-f",
                ROUTE_CRD,
            ],
            None,
        );
    }
}

#[tokio::test]
async fn without_the_service_ca_ready_names_the_missing_serving_secrets() {
    // The Route CRD changes what every operator pod discovers: nobody else may run meanwhile.
    let (_claim, cp) = installed(true).await;
    let _routes = RouteCrd::install(cp);
    let client = cp.client().await;

    // The operator leaves the Secrets to the service CA once it knows Routes: a probe
    // TrustyAIService's Route says it does (its claim never binds; it only has to be reconciled).
    let probe_ns = cp.namespace(&client, "service-ca-probe").await;
    tas_api(&client, &probe_ns, "v1")
        .create(
            &PostParams::default(),
            &tas("v1", "probe", json!({"storage": {"format": "PVC", "folder": "/inputs", "size": "1Gi"}, "metrics": {"schedule": "5s"}})),
        )
        .await
        .expect("created");
    let gvk = GroupVersionKind::gvk("route.openshift.io", "v1", "Route");
    let routes: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        &probe_ns,
        &ApiResource::from_gvk_with_plural(&gvk, "routes"),
    );
    wait_for(
        cp,
        "the probe's Route (the operator knows Routes)",
        async || routes.get_opt("probe").await.ok().flatten().map(|_| ()),
    )
    .await;

    let ns = cp.namespace(&client, "serving-secret").await;
    create_pvc_service(cp, &client, &ns, "demo").await;
    let message = not_ready_because(cp, &client, &ns, "demo", "ServingSecretMissing").await;
    println!("Ready's message: {message}");
    assert!(
        message.contains("demo-tls") && message.contains("demo-internal"),
        "both Secrets are named: {message}"
    );
    // The kubelet says the same: the pod has not started its containers.
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let waiting: Vec<String> = pods
        .list(&Default::default())
        .await
        .expect("the pods")
        .items
        .into_iter()
        .flat_map(|p| {
            p.status
                .and_then(|s| s.container_statuses)
                .unwrap_or_default()
        })
        .filter_map(|s| s.state?.waiting?.reason)
        .collect();
    assert!(
        !waiting.is_empty() && waiting.iter().all(|r| r == "ContainerCreating"),
        "{waiting:?}"
    );
}
