//! ServiceMonitors (`monitoring.coreos.com/v1`) that let Prometheus scrape the `trustyai_*`
//! metrics from the `http` port of the internal Services:
//!
//! - local `<cr>` in the TrustyAIService's namespace, owned by it;
//! - central `trustyai-metrics` in the operator namespace, shared by every TrustyAIService,
//!   selecting all namespaces, with no owner (it outlives any one TrustyAIService).
//!
//! The local one selects only this instance's Services (`app.kubernetes.io/instance: <cr>`):
//! the Go operator's selected every `part-of: trustyai` Service in the namespace, so with two
//! TrustyAIServices each target was scraped once per ServiceMonitor.

use kube::core::{ApiResource, DynamicObject, GroupVersionKind, ObjectMeta, TypeMeta};
use serde_json::{Value, json};
use trustyai_crds::contract::{CENTRAL_SERVICE_MONITOR, labels as contract_labels};

use super::{Instance, labels, names, services};

/// The ServiceMonitor API.
pub fn api_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("monitoring.coreos.com", "v1", "ServiceMonitor"),
        "servicemonitors",
    )
}

/// The local ServiceMonitor `<cr>`.
pub fn local(instance: &Instance<'_>) -> DynamicObject {
    let cr = instance.name();
    service_monitor(
        instance.owned_meta(
            names::workload(cr),
            labels::metadata_with(
                instance,
                &[(
                    contract_labels::MODELMESH_SERVICE,
                    contract_labels::MODELMESH_SERVICE_VALUE,
                )],
            ),
        ),
        json!({ "matchNames": [instance.namespace()] }),
        json!({
            contract_labels::INSTANCE: cr,
            contract_labels::PART_OF: contract_labels::PART_OF_VALUE,
        }),
    )
}

/// The central ServiceMonitor `trustyai-metrics` in `operator_namespace`.
pub fn central(operator_namespace: &str) -> DynamicObject {
    let metadata = ObjectMeta {
        name: Some(CENTRAL_SERVICE_MONITOR.to_owned()),
        namespace: Some(operator_namespace.to_owned()),
        labels: Some(
            [
                (
                    contract_labels::MODELMESH_SERVICE,
                    contract_labels::MODELMESH_SERVICE_VALUE,
                ),
                (contract_labels::PART_OF, contract_labels::PART_OF_VALUE),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect(),
        ),
        ..ObjectMeta::default()
    };
    service_monitor(
        metadata,
        json!({ "any": true }),
        json!({ contract_labels::PART_OF: contract_labels::PART_OF_VALUE }),
    )
}

fn service_monitor(
    metadata: ObjectMeta,
    namespace_selector: Value,
    match_labels: Value,
) -> DynamicObject {
    let resource = api_resource();
    DynamicObject {
        types: Some(TypeMeta {
            api_version: resource.api_version,
            kind: resource.kind,
        }),
        metadata,
        data: json!({
            "spec": {
                "endpoints": [endpoint()],
                "namespaceSelector": namespace_selector,
                "selector": { "matchLabels": match_labels }
            }
        }),
    }
}

/// The Go operator's scrape endpoint (its empty `bearerTokenSecret.key` included, so objects it
/// created compare equal).
fn endpoint() -> Value {
    json!({
        "bearerTokenSecret": { "key": "" },
        "honorLabels": true,
        "interval": "4s",
        "metricRelabelings": [
            { "action": "keep", "regex": "trustyai_.*", "sourceLabels": ["__name__"] }
        ],
        "params": {
            "match[]": ["{__name__= \"trustyai_spd\"}", "{__name__= \"trustyai_dir\"}"]
        },
        "path": "/q/metrics",
        "port": services::HTTP_PORT_NAME,
        "scheme": "http"
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::test_support::{VERSION, pvc_service};

    #[test]
    fn local_shape() {
        let service = pvc_service();
        let instance = Instance::new(&service, VERSION).expect("instance");
        let value = serde_json::to_value(local(&instance)).expect("json");
        assert_eq!(value["apiVersion"], "monitoring.coreos.com/v1");
        assert_eq!(value["kind"], "ServiceMonitor");
        assert_eq!(value["metadata"]["name"], "tas");
        assert_eq!(value["metadata"]["namespace"], "models");
        assert_eq!(
            value["metadata"]["labels"]["modelmesh-service"],
            "modelmesh-serving"
        );
        assert_eq!(value["metadata"]["ownerReferences"][0]["name"], "tas");
        assert_eq!(
            value["spec"]["namespaceSelector"],
            json!({"matchNames": ["models"]})
        );
        assert_eq!(
            value["spec"]["selector"],
            json!({"matchLabels": {
                "app.kubernetes.io/instance": "tas",
                "app.kubernetes.io/part-of": "trustyai"
            }})
        );
        assert_eq!(value["spec"]["endpoints"], json!([endpoint()]));
    }

    #[test]
    fn endpoint_is_the_go_operators() {
        let e = endpoint();
        assert_eq!(e["path"], "/q/metrics");
        assert_eq!(e["port"], "http");
        assert_eq!(e["scheme"], "http");
        assert_eq!(e["interval"], "4s");
        assert_eq!(e["honorLabels"], true);
        assert_eq!(e["bearerTokenSecret"], json!({"key": ""}));
        assert_eq!(
            e["metricRelabelings"],
            json!([{"action": "keep", "regex": "trustyai_.*", "sourceLabels": ["__name__"]}])
        );
        assert_eq!(
            e["params"]["match[]"],
            json!([
                "{__name__= \"trustyai_spd\"}",
                "{__name__= \"trustyai_dir\"}"
            ])
        );
    }

    #[test]
    fn central_shape() {
        let value = serde_json::to_value(central("operators")).expect("json");
        assert_eq!(value["metadata"]["name"], "trustyai-metrics");
        assert_eq!(value["metadata"]["namespace"], "operators");
        assert!(value["metadata"].get("ownerReferences").is_none());
        assert_eq!(value["spec"]["namespaceSelector"], json!({"any": true}));
        assert_eq!(
            value["spec"]["selector"],
            json!({"matchLabels": {"app.kubernetes.io/part-of": "trustyai"}})
        );
        assert!(
            value["metadata"]["labels"]
                .get("app.kubernetes.io/version")
                .is_none()
        );
    }
}
