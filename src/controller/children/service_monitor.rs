//! The ServiceMonitors, where the Prometheus Operator's API is served: `<cr>` in the
//! TrustyAIService's namespace, and `trustyai-metrics` in the operator namespace, shared by all
//! and owned by none.
//!
//! ServiceMonitors (`monitoring.coreos.com/v1`) that let Prometheus scrape the `trustyai_*`
//! metrics from the internal Services:
//!
//! - local `<cr>` in the TrustyAIService's namespace, owned by it. It scrapes the `https` port
//!   (the service's TLS API listener, 4443): the TrustyAI service serves `/q/metrics` only on
//!   its API listeners, and its plain `http` port (8080) answers 404 there. The server's
//!   certificate is verified against the CA bundle of the namespace (the `ca.crt` of the
//!   `<cr>-internal` Secret, which holds both CAs during a rotation; on OpenShift, the
//!   service CA's `openshift-service-ca.crt` ConfigMap) for the name `<cr>.<namespace>.svc`.
//!   Where the pods run the older Java service ([`crate::controller::resources::images::is_java_service`]), which
//!   serves `/q/metrics` on its `http` port, the endpoint is the Go operator's.
//! - central `trustyai-metrics` in the operator namespace, shared by every TrustyAIService,
//!   selecting all namespaces, with no owner (it outlives any one TrustyAIService). It keeps
//!   the Go operator's endpoint (`http`), since one endpoint cannot name each target's server
//!   name and CA.
//!
//! The local one selects only this instance's Services (`app.kubernetes.io/instance: <cr>`):
//! the Go operator's selected every `part-of: trustyai` Service in the namespace, so with two
//! TrustyAIServices each target was scraped once per ServiceMonitor.

use kube::core::{ApiResource, DynamicObject, GroupVersionKind, ObjectMeta, TypeMeta};
use serde_json::{Value, json};
use trustyai_crds::contract::{CENTRAL_SERVICE_MONITOR, labels as contract_labels};

use super::super::resources::images::is_java_service;
use super::declaration::{Declaration, Lifecycle, Rendered, Wanted};
use super::services;
use super::{optional_owned_watch, wanted};
use crate::controller::resources::{Instance, labels, names};

/// The declaration.
pub const DECLARATION: Declaration = Declaration {
    watch: optional_owned_watch(api_resource, |a| a.service_monitors),
    applies_with: |a| a.service_monitors,
    lifecycle: Lifecycle::Owned,
    applying: Rendered::new(|instance, inputs| {
        Ok(vec![
            wanted(&local(
                instance,
                inputs.apis.service_ca(),
                is_java_service(&inputs.images.service.image),
            ))?,
            Wanted {
                shared: true,
                ..wanted(&central(inputs.operator_namespace))?
            },
        ])
    }),
};

/// The ServiceMonitor API.
pub fn api_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("monitoring.coreos.com", "v1", "ServiceMonitor"),
        "servicemonitors",
    )
}

/// The ConfigMap OpenShift's service CA operator publishes in every namespace, and its key.
pub const OPENSHIFT_SERVICE_CA: (&str, &str) = ("openshift-service-ca.crt", "service-ca.crt");

/// The local ServiceMonitor `<cr>`; `service_ca`: the serving certificates come from
/// OpenShift's service CA (else from the operator's operand CA); `java_service`: the pods run
/// the older Java service, which serves `/q/metrics` on its `http` port (the Go operator's
/// endpoint).
pub fn local(instance: &Instance<'_>, service_ca: bool, java_service: bool) -> DynamicObject {
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
        if java_service {
            endpoint()
        } else {
            tls_endpoint(instance, service_ca)
        },
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
        endpoint(),
    )
}

fn service_monitor(
    metadata: ObjectMeta,
    namespace_selector: Value,
    match_labels: Value,
    endpoint: Value,
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
                "endpoints": [endpoint],
                "namespaceSelector": namespace_selector,
                "selector": { "matchLabels": match_labels }
            }
        }),
    }
}

/// The scrape endpoint of the local ServiceMonitor: the `https` port, verified.
fn tls_endpoint(instance: &Instance<'_>, service_ca: bool) -> Value {
    let ca = if service_ca {
        let (name, key) = OPENSHIFT_SERVICE_CA;
        json!({ "configMap": { "name": name, "key": key } })
    } else {
        json!({ "secret": { "name": names::internal(instance.name()), "key": "ca.crt" } })
    };
    let mut endpoint = endpoint();
    endpoint["port"] = json!(services::HTTPS_PORT_NAME);
    endpoint["scheme"] = json!("https");
    endpoint["tlsConfig"] = json!({
        "ca": ca,
        "serverName": format!("{}.{}.svc", instance.name(), instance.namespace()),
    });
    endpoint
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
    use crate::controller::test_support::pvc_instance;

    #[test]
    fn local_shape() {
        let instance = pvc_instance();
        let value = serde_json::to_value(local(&instance, false, false)).expect("json");
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
        assert_eq!(
            value["spec"]["endpoints"],
            json!([tls_endpoint(&instance, false)])
        );
    }

    #[test]
    fn the_java_service_is_scraped_where_it_serves_its_metrics() {
        let instance = pvc_instance();
        let value = serde_json::to_value(local(&instance, false, true)).expect("json");
        assert_eq!(value["spec"]["endpoints"], json!([endpoint()]));
        assert_eq!(value["spec"]["endpoints"][0]["port"], "http");
    }

    #[test]
    fn the_local_endpoint_scrapes_the_tls_port_verifying_the_server() {
        let instance = pvc_instance();
        let e = tls_endpoint(&instance, false);
        assert_eq!(e["port"], "https");
        assert_eq!(e["scheme"], "https");
        assert_eq!(e["path"], "/q/metrics");
        assert_eq!(
            e["tlsConfig"],
            json!({"ca": {"secret": {"name": "tas-internal", "key": "ca.crt"}},
                   "serverName": "tas.models.svc"})
        );
        assert!(e["tlsConfig"].get("insecureSkipVerify").is_none());
        let on_openshift = tls_endpoint(&instance, true);
        assert_eq!(
            on_openshift["tlsConfig"]["ca"],
            json!({"configMap": {"name": "openshift-service-ca.crt", "key": "service-ca.crt"}})
        );
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
