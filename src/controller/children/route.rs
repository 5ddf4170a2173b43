//! The OpenShift Route `<cr>` to the proxy Service. Its cache keeps the status: whether a
//! router admitted it is part of readiness. A Route without `metadata.generation` cannot be
//! tracked that way; it is then read before each apply.
//!
//! `route.openshift.io/v1`: the external HTTPS entry point on OpenShift, to the `<cr>-tls`
//! Service (kube-rbac-proxy), re-encrypting with the service CA's certificate.
//!
//! k8s-openapi has no Route type, so the Route is a [`DynamicObject`]; [`api_resource`] gives
//! the matching `ApiResource` for `Api::namespaced_with`.

use kube::core::{ApiResource, DynamicObject, GroupVersionKind, TypeMeta};
use serde_json::{Value, json};
use trustyai_crds::contract::labels as contract_labels;

use super::cache::Projection;
use super::declaration::{Declaration, Lifecycle, Rendered, WatchSpec};
use super::memory::Tracking;
use super::services;
use super::{optional_owned_watch, render_one};
use crate::controller::resources::{Instance, labels, names};

/// The declaration.
pub const DECLARATION: Declaration = Declaration {
    // Tracked by generation: a router's status writes would otherwise cost a no-op apply.
    watch: WatchSpec {
        tracking: Tracking::GenerationAndMetadata,
        projection: Projection(&["/status"]),
        ..optional_owned_watch(api_resource, |a| a.routes)
    },
    applies_with: |a| a.routes,
    lifecycle: Lifecycle::Owned,
    applying: Rendered::new(|instance, _| render_one(&route(instance))),
};

/// The Route API.
pub fn api_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("route.openshift.io", "v1", "Route"),
        "routes",
    )
}

/// The Route `<cr>`, owned by the TrustyAIService.
pub fn route(instance: &Instance<'_>) -> DynamicObject {
    let cr = instance.name();
    let resource = api_resource();
    DynamicObject {
        types: Some(TypeMeta {
            api_version: resource.api_version,
            kind: resource.kind,
        }),
        metadata: instance.owned_meta(
            names::workload(cr),
            labels::metadata_with(instance, &[(contract_labels::SERVICE_NAME, cr)]),
        ),
        data: json!({
            "spec": {
                "to": { "kind": "Service", "name": names::tls(cr), "weight": 100 },
                "port": { "targetPort": services::HTTPS_PORT_NAME },
                "tls": {
                    "termination": "reencrypt",
                    "insecureEdgeTerminationPolicy": "Redirect"
                }
            }
        }),
    }
}

/// Whether a Route read from the API server is admitted by a router: some
/// `status.ingress[].conditions[]` is `Admitted=True` (the Go operator's rule).
pub fn is_admitted(route: &DynamicObject) -> bool {
    route
        .data
        .pointer("/status/ingress")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|ingress| ingress.get("conditions").and_then(Value::as_array))
        .flatten()
        .any(|c| {
            c.get("type").and_then(Value::as_str) == Some("Admitted")
                && c.get("status").and_then(Value::as_str) == Some("True")
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::test_support::pvc_instance;

    #[test]
    fn route_shape() {
        let instance = pvc_instance();
        let route = route(&instance);
        let value = serde_json::to_value(&route).expect("json");
        assert_eq!(value["apiVersion"], "route.openshift.io/v1");
        assert_eq!(value["kind"], "Route");
        assert_eq!(value["metadata"]["name"], "tas");
        assert_eq!(value["metadata"]["namespace"], "models");
        assert_eq!(value["metadata"]["labels"]["trustyai-service-name"], "tas");
        assert_eq!(
            value["metadata"]["ownerReferences"][0]["uid"],
            instance.uid()
        );
        assert_eq!(
            value["spec"],
            json!({
                "to": {"kind": "Service", "name": "tas-tls", "weight": 100},
                "port": {"targetPort": "https"},
                "tls": {"termination": "reencrypt", "insecureEdgeTerminationPolicy": "Redirect"}
            })
        );
        assert_eq!(api_resource().plural, "routes");
    }

    #[test]
    fn admission() {
        let mut route = DynamicObject::new("tas", &api_resource());
        assert!(!is_admitted(&route));
        route.data = json!({"status": {"ingress": [
            {"conditions": [{"type": "Admitted", "status": "False"}]},
            {"conditions": [{"type": "Admitted", "status": "True"}]}
        ]}});
        assert!(is_admitted(&route));
        route.data = json!({"status": {"ingress": [{"conditions": [{"type": "Admitted", "status": "False"}]}]}});
        assert!(!is_admitted(&route));
    }
}
