//! A KServe InferenceService's payload logger, as the operator wires it: a pod of the cluster
//! sends CloudEvents (an inference's request, then its response, with one `ce-id`) to the
//! logger URL the operator wrote into the InferenceService, resolving its name through the
//! cluster's DNS and trusting the CA of the service's internal Secret; the real service stores
//! the inference.

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PostParams};
use serde_json::json;

use super::release::{images, installed, wait_for};
use super::service::pvc_service;
use super::service_api::User;
use crate::support::cluster::inference_service;

const ISVC_CRD: &str = "inferenceservices.serving.kserve.io";

/// What KServe's logger sends for one inference: the request, then the response, each a
/// CloudEvent whose `ce-id` pairs them; exits non-zero unless both are accepted.
const SEND_EVENTS: &str = r#"
import json, os, ssl, sys, urllib.request
url = os.environ["LOGGER_URL"]
context = ssl.create_default_context(cafile="/etc/trustyai-ca/ca.crt")
request = {"inputs": [{"name": "x", "shape": [2, 1], "datatype": "FP32", "data": [1.0, 2.0]}]}
response = {"model_name": "logged-model", "outputs": [{"name": "y", "shape": [2, 1], "datatype": "INT32", "data": [0, 1]}]}
for kind, body in [("request", request), ("response", response)]:
    headers = {"Content-Type": "application/json", "ce-id": "inference-1", "ce-specversion": "1.0",
               "ce-type": "org.kubeflow.serving.inference." + kind, "ce-source": "http://localhost:9081/"}
    sent = urllib.request.Request(url, data=json.dumps(body).encode(), headers=headers, method="POST")
    with urllib.request.urlopen(sent, context=context, timeout=30) as answer:
        print(kind, answer.status, answer.read().decode())
"#;

#[tokio::test]
async fn a_logger_at_the_wired_url_reaches_the_service_through_cluster_dns() {
    let (_claim, cp) = installed(false).await;
    cp.install_crds(&["tests/fixtures/crds/inferenceservice.yaml"], &[ISVC_CRD])
        .unwrap_or_else(|e| panic!("{e}"));
    let client = cp.client().await;
    let ns = cp.namespace(&client, "kserve-logger").await;
    pvc_service(cp, &client, &ns, "demo").await;

    let isvcs: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        &ns,
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("serving.kserve.io", "v1beta1", "InferenceService"),
            "inferenceservices",
        ),
    );
    let isvc = inference_service("model", "RawDeployment", "false");
    isvcs
        .create(&PostParams::default(), &isvc)
        .await
        .expect("created");
    let url = wait_for(cp, "the logger URL", async || {
        let isvc = isvcs.get("model").await.ok()?;
        isvc.data["spec"]["predictor"]["logger"]["url"]
            .as_str()
            .map(str::to_owned)
    })
    .await;

    // The logger's part, from a pod (the service's image has Python).
    let sender: Pod = serde_json::from_value(json!({
        "metadata": {"name": "logger"},
        "spec": {
            "restartPolicy": "Never",
            "containers": [{
                "name": "logger",
                "image": images().await.service.reference,
                "imagePullPolicy": "Never",
                "command": ["python", "-c", SEND_EVENTS],
                "env": [{"name": "LOGGER_URL", "value": url}],
                "securityContext": {
                    "runAsNonRoot": true, "allowPrivilegeEscalation": false,
                    "capabilities": {"drop": ["ALL"]}, "seccompProfile": {"type": "RuntimeDefault"},
                },
                "volumeMounts": [{"name": "ca", "mountPath": "/etc/trustyai-ca"}],
            }],
            "volumes": [{"name": "ca", "secret": {"secretName": "demo-internal", "items": [{"key": "ca.crt", "path": "ca.crt"}]}}],
        }
    }))
    .expect("a pod");
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    pods.create(&PostParams::default(), &sender)
        .await
        .expect("created");
    let phase = wait_for(cp, "the logger pod finished", async || {
        let phase = pods.get("logger").await.ok()?.status?.phase?;
        (phase == "Succeeded" || phase == "Failed").then_some(phase)
    })
    .await;
    let log = pods
        .logs("logger", &Default::default())
        .await
        .unwrap_or_default();
    assert_eq!(phase, "Succeeded", "the logger to {url}: {log}");

    // The service stored the inference under the model it named.
    let user = User::of_demo(&client, &ns).await;
    let (code, info) = user
        .api
        .call(&user.token, "GET", "/info", None)
        .await
        .unwrap_or_else(|e| panic!("GET /info: {e}"));
    assert_eq!(code, 200, "{info}");
    assert!(info.to_string().contains("logged-model"), "{info}");
}
