//! Optional APIs (Route, ServiceMonitor, KServe, Istio): their objects, and ModelMesh wiring.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use trustyai_crds::TrustyAIService;

use crate::reconcile::env::{
    Env, OPERATOR_CONFIG, assert_owned_by, condition, dynamic_api, pvc_spec,
};
use crate::support::ControlPlane;
use crate::support::cluster::{exists, inference_service};

/// Installs the fixture CRDs, and removes them again when dropped.
struct OptionalCrds<'a> {
    cp: &'a ControlPlane,
}

const FIXTURES: [&str; 5] = [
    "tests/fixtures/crds/route.yaml",
    "tests/fixtures/crds/servicemonitor.yaml",
    "tests/fixtures/crds/inferenceservice.yaml",
    "tests/fixtures/crds/istio-destinationrule.yaml",
    "tests/fixtures/crds/istio-virtualservice.yaml",
];

impl<'a> OptionalCrds<'a> {
    fn install(cp: &'a ControlPlane) -> Self {
        cp.install_crds(
            &FIXTURES,
            &[
                "routes.route.openshift.io",
                "servicemonitors.monitoring.coreos.com",
                "inferenceservices.serving.kserve.io",
                "destinationrules.networking.istio.io",
                "virtualservices.networking.istio.io",
            ],
        )
        .unwrap_or_else(|e| panic!("{e}"));
        Self { cp }
    }
}

impl Drop for OptionalCrds<'_> {
    fn drop(&mut self) {
        for file in FIXTURES {
            let _ = self.cp.kubectl(
                &["delete", "--ignore-not-found", "--wait=true", "-f", file],
                None,
            );
        }
    }
}

/// The fields of the operator's log record of the optional APIs it found, one per API.
const OPTIONAL_API_FIELDS: [&str; 5] = [
    "routes",
    "service_monitors",
    "inference_services",
    "destination_rules",
    "virtual_services",
];

/// The optional APIs the operator logging to `log` last reported (at its start, or as a
/// change since), by field: its JSON log carries one boolean field per API.
fn reported_optional_apis(log: &std::path::Path) -> Option<BTreeMap<String, bool>> {
    let text = std::fs::read_to_string(log).ok()?;
    let last = text
        .lines()
        .rev()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .find(|line| {
            matches!(
                line["message"].as_str(),
                Some("optional APIs discovered" | "optional APIs changed")
            )
        })?;
    OPTIONAL_API_FIELDS
        .into_iter()
        .map(|field| Some((field.to_owned(), last[field].as_bool()?)))
        .collect()
}

#[tokio::test]
async fn a_service_is_wired_into_every_optional_api_until_its_deletion() {
    let env = Env::exclusive().await;
    let _crds = OptionalCrds::install(env.cp);
    // Established CRDs are not yet known to the operator, which discovers them a moment after
    // each CRD event, possibly one at a time. A TrustyAIService reconciled before it knows
    // Routes gets operator-issued certificates (service-ca is assumed only with Routes).
    let log = env.operator_log();
    env.wait(
        "the operator to discover Routes, ServiceMonitors, InferenceServices and Istio",
        || async {
            let apis = reported_optional_apis(&log)?;
            OPTIONAL_API_FIELDS
                .iter()
                .all(|api| apis.get(*api) == Some(&true))
                .then_some(())
        },
    )
    .await;
    let ns = env.namespace("optional").await;
    let (deployments, isvcs) = modelmesh_and_inference_services(&env, &ns).await;

    env.volume_for(&ns, "tas-pvc").await;
    let created = env.create(&ns, "tas", pvc_spec()).await;
    // A Route exists but no router admits it: not ready, for that reason only.
    let services = env.services(&ns);
    env.wait(
        "RouteAvailable=False (RouteNotFound) and InferenceServicesPresent=True",
        || async {
            let object = services.get_opt("tas").await.ok()??;
            let route = condition(&object, "RouteAvailable")?;
            let present = condition(&object, "InferenceServicesPresent")?;
            (route.status == "False"
                && route.reason.as_deref() == Some("RouteNotFound")
                && present.status == "True")
                .then_some(())
        },
    )
    .await;
    let routes = assert_the_route_and_the_service_monitors(&env, &ns, &created).await;
    assert_modelmesh_wired(&env, &ns, &deployments).await;
    assert_the_kserve_loggers_set(&env, &ns, &isvcs).await;
    assert_the_istio_objects(&env, &ns, &created).await;
    the_serverless_logger_once_enabled(&env, &ns, &isvcs).await;

    // A router admits the Route: ready.
    routes
        .patch_status(
            "tas",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"ingress": [{"host": "tas.example.com",
                "conditions": [{"type": "Admitted", "status": "True"}]}]}})),
        )
        .await
        .expect("admitting the Route");
    let ready = env.wait_ready(&ns, "tas").await;
    assert!(condition(&ready, "RouteAvailable").is_some_and(|c| c.status == "True"));

    // Deletion undoes the wiring, leaving the other payload processor alone.
    env.delete_service(&ns, "tas").await;
    assert_unwired(&deployments, &isvcs).await;
}

/// A fake ModelMesh Deployment (kwok makes it ready) and three InferenceServices (ModelMesh,
/// raw, serverless) in `ns`; the APIs of both.
async fn modelmesh_and_inference_services(
    env: &Env,
    ns: &str,
) -> (Api<Deployment>, Api<DynamicObject>) {
    let modelmesh: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "modelmesh-serving-mlserver", "labels": {"modelmesh-service": "modelmesh-serving"}},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "mm"}},
            "template": {
                "metadata": {"labels": {"app": "mm"}},
                "spec": {"containers": [
                    {"name": "mm", "image": "example.com/modelmesh:1",
                     "env": [{"name": "MM_PAYLOAD_PROCESSORS", "value": "http://other/consumer"}]},
                    {"name": "rest-proxy", "image": "example.com/rest-proxy:1"}
                ]}
            }
        }
    }))
    .expect("a Deployment");
    let deployments = env.api::<Deployment>(ns);
    deployments
        .create(&PostParams::default(), &modelmesh)
        .await
        .expect("the ModelMesh Deployment");
    let isvcs = dynamic_api(
        &env.client,
        ns,
        "serving.kserve.io",
        "v1beta1",
        "InferenceService",
        "inferenceservices",
    );
    // The raw one runs with the Istio sidecar; the serverless one is wired only once the
    // operator ConfigMap enables KServe serverless.
    for (name, mode, istio) in [
        ("mm-model", "ModelMesh", "false"),
        ("raw-model", "RawDeployment", "true"),
        ("serverless-model", "Serverless", "false"),
    ] {
        isvcs
            .create(
                &PostParams::default(),
                &inference_service(name, mode, istio),
            )
            .await
            .expect("creating an InferenceService");
    }

    (deployments, isvcs)
}

/// The Route (to the TLS Service) and the ServiceMonitors (local and the operator's) exist,
/// owned by `created`, and no certificates are issued: service-ca is assumed where Routes
/// exist. Returns the Routes' API.
async fn assert_the_route_and_the_service_monitors(
    env: &Env,
    ns: &str,
    created: &TrustyAIService,
) -> Api<DynamicObject> {
    let client = &env.client;
    let routes = dynamic_api(client, ns, "route.openshift.io", "v1", "Route", "routes");
    let route = env.wait_exists(&routes, "tas").await;
    assert_eq!(route.data["spec"]["to"]["name"], "tas-tls");
    assert_owned_by(&route.metadata, created, "the Route");
    let monitors = |ns: &str| {
        dynamic_api(
            client,
            ns,
            "monitoring.coreos.com",
            "v1",
            "ServiceMonitor",
            "servicemonitors",
        )
    };
    let local = env.wait_exists(&monitors(ns), "tas").await;
    assert_owned_by(&local.metadata, created, "the local ServiceMonitor");
    env.wait_exists(&monitors(&env.operator_ns), "trustyai-metrics")
        .await;
    // service-ca is assumed where Routes exist: no operator-issued certificates. The operator
    // knew Routes before the TrustyAIService existed, and a reconcile issues certificates
    // before it applies the Route: once the Route exists, a single read suffices.
    assert!(!exists(&env.api::<Secret>(ns), "tas-tls").await);

    routes
}

/// The payload processor is added next to the existing one, with the TLS volume and path.
async fn assert_modelmesh_wired(env: &Env, ns: &str, deployments: &Api<Deployment>) {
    let url = format!("https://tas.{ns}.svc/consumer/kserve/v2");
    let wired = env
        .wait("the ModelMesh Deployment wired", || async {
            let d = deployments.get("modelmesh-serving-mlserver").await.ok()?;
            let value = d.spec.template.spec.as_ref()?.containers[0]
                .env
                .as_ref()?
                .iter()
                .find(|e| e.name == "MM_PAYLOAD_PROCESSORS")?
                .value
                .clone()?;
            value.contains(&url).then_some(d)
        })
        .await;
    let pod = wired.spec.template.spec.as_ref().expect("pod");
    assert!(
        pod.volumes
            .iter()
            .flatten()
            .any(|v| v.name == "tas-internal")
    );
    let mm = &pod.containers[0];
    assert!(
        mm.env
            .iter()
            .flatten()
            .any(|e| e.name == "MM_TLS_KEY_CERT_PATH")
    );
    assert!(
        mm.env
            .iter()
            .flatten()
            .any(|e| e.value.as_deref() == Some(&format!("http://other/consumer {url}")))
    );
}

/// The raw InferenceService logs to the TrustyAIService over TLS; the ModelMesh one has no
/// logger.
async fn assert_the_kserve_loggers_set(env: &Env, ns: &str, isvcs: &Api<DynamicObject>) {
    let logger = format!("https://tas.{ns}.svc.cluster.local");
    env.wait("the KServe logger set", || async {
        let isvc = isvcs.get("raw-model").await.ok()?;
        (isvc.data["spec"]["predictor"]["logger"]["url"] == logger.as_str()).then_some(())
    })
    .await;
    assert_eq!(
        isvcs.get("mm-model").await.expect("isvc").data["spec"]["predictor"].get("logger"),
        None
    );
}

/// The sidecar's traffic reaches the internal Service over TLS: a DestinationRule and a
/// VirtualService, owned by `created`.
async fn assert_the_istio_objects(env: &Env, ns: &str, created: &TrustyAIService) {
    let rule = owned_istio_object(env, ns, "DestinationRule", "tas-internal", created).await;
    assert_eq!(
        rule.data["spec"]["host"],
        format!("tas.{ns}.svc.cluster.local")
    );
    owned_istio_object(env, ns, "VirtualService", "tas-redirect", created).await;
}

/// The Istio object `name` of `kind` in `ns`, once it exists, asserted to be owned by `owner`.
async fn owned_istio_object(
    env: &Env,
    ns: &str,
    kind: &str,
    name: &str,
    owner: &TrustyAIService,
) -> DynamicObject {
    let plural = format!("{}s", kind.to_lowercase());
    let api = dynamic_api(
        &env.client,
        ns,
        "networking.istio.io",
        "v1beta1",
        kind,
        &plural,
    );
    let object = env.wait_exists(&api, name).await;
    assert_owned_by(&object.metadata, owner, &format!("the {kind}"));
    object
}

/// Serverless: left alone until the operator ConfigMap enables it, then logged over HTTP.
async fn the_serverless_logger_once_enabled(env: &Env, ns: &str, isvcs: &Api<DynamicObject>) {
    assert_eq!(
        isvcs.get("serverless-model").await.expect("isvc").data["spec"]["predictor"].get("logger"),
        None
    );
    let config_maps = env.api::<ConfigMap>(&env.operator_ns);
    config_maps
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "metadata": {"name": OPERATOR_CONFIG},
                "data": {"kServeServerless": "enabled"}
            }))
            .expect("a ConfigMap"),
        )
        .await
        .expect("enabling KServe serverless");
    let serverless_logger = format!("http://tas.{ns}.svc.cluster.local");
    env.wait("the serverless logger set", || async {
        let isvc = isvcs.get("serverless-model").await.ok()?;
        (isvc.data["spec"]["predictor"]["logger"]["url"] == serverless_logger.as_str())
            .then_some(())
    })
    .await;
    env.remove_operator_config().await;
}

/// The wiring undone: no TLS volume or path, only the other payload processor, no loggers.
async fn assert_unwired(deployments: &Api<Deployment>, isvcs: &Api<DynamicObject>) {
    let unwired = deployments
        .get("modelmesh-serving-mlserver")
        .await
        .expect("the ModelMesh Deployment");
    let pod = unwired.spec.template.spec.as_ref().expect("pod");
    assert!(
        !pod.volumes
            .iter()
            .flatten()
            .any(|v| v.name == "tas-internal")
    );
    let mm = &pod.containers[0];
    let processors: Vec<_> = mm
        .env
        .iter()
        .flatten()
        .filter(|e| e.name == "MM_PAYLOAD_PROCESSORS")
        .collect();
    assert_eq!(processors.len(), 1);
    assert_eq!(
        processors[0].value.as_deref(),
        Some("http://other/consumer")
    );
    assert!(
        !mm.env
            .iter()
            .flatten()
            .any(|e| e.name == "MM_TLS_KEY_CERT_PATH")
    );
    assert!(
        pod.containers[1]
            .volume_mounts
            .as_deref()
            .unwrap_or_default()
            .is_empty()
    );
    for name in ["raw-model", "serverless-model"] {
        assert_eq!(
            isvcs.get(name).await.expect("isvc").data["spec"]["predictor"].get("logger"),
            None,
            "{name}"
        );
    }
}
