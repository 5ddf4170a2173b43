//! The Istio DestinationRule and VirtualService, wanted while an InferenceService of the
//! namespace logs to this TrustyAIService through Istio (and deleted once none does).
//!
//! Istio objects (`networking.istio.io/v1beta1`) for KServe InferenceServices running with the
//! Istio sidecar (`sidecar.istio.io/inject: "true"`), so their payload logger reaches the
//! internal Service over TLS:
//!
//! - DestinationRule `<cr>-internal`: TLS `SIMPLE` towards port 443 of the internal Service;
//! - VirtualService `<cr>-redirect`: requests to port 80 go to port 443.
//!
//! Create them only when the respective CRD is served (the Go operator checked the
//! DestinationRule CRD for both).

use kube::core::{ApiResource, DynamicObject, GroupVersionKind, TypeMeta};
use serde_json::{Value, json};

use super::declaration::{Applying, Declaration, Lifecycle, Rendered};
use super::{optional_owned_watch, render_one};
use crate::controller::resources::{Instance, labels, names};

/// The DestinationRule's declaration.
pub const DESTINATION_RULE: Declaration = Declaration {
    watch: optional_owned_watch(destination_rule_api_resource, |a| a.destination_rules),
    applies_with: |a| a.destination_rules,
    lifecycle: Lifecycle::Owned,
    applying: Applying::Rendered(Rendered::new(|instance, inputs| {
        if inputs.istio_wanted {
            render_one(&destination_rule(instance))
        } else {
            Ok(Vec::new())
        }
    })),
};

/// The VirtualService's declaration.
pub const VIRTUAL_SERVICE: Declaration = Declaration {
    watch: optional_owned_watch(virtual_service_api_resource, |a| a.virtual_services),
    applies_with: |a| a.virtual_services,
    lifecycle: Lifecycle::Owned,
    applying: Applying::Rendered(Rendered::new(|instance, inputs| {
        if inputs.istio_wanted {
            render_one(&virtual_service(instance))
        } else {
            Ok(Vec::new())
        }
    })),
};

/// The DestinationRule API.
pub fn destination_rule_api_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("networking.istio.io", "v1beta1", "DestinationRule"),
        "destinationrules",
    )
}

/// The VirtualService API.
pub fn virtual_service_api_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("networking.istio.io", "v1beta1", "VirtualService"),
        "virtualservices",
    )
}

/// The internal Service's cluster-local host name, `<cr>.<ns>.svc.cluster.local`.
pub fn internal_host(cr: &str, namespace: &str) -> String {
    format!("{cr}.{namespace}.svc.cluster.local")
}

/// The DestinationRule `<cr>-internal`, owned by the TrustyAIService.
pub fn destination_rule(instance: &Instance<'_>) -> DynamicObject {
    let host = internal_host(instance.name(), instance.namespace());
    object(
        instance,
        destination_rule_api_resource(),
        names::destination_rule(instance.name()),
        json!({
            "spec": {
                "host": host,
                "trafficPolicy": {
                    "portLevelSettings": [
                        { "port": { "number": 443 }, "tls": { "mode": "SIMPLE" } }
                    ]
                }
            }
        }),
    )
}

/// The VirtualService `<cr>-redirect`, owned by the TrustyAIService.
pub fn virtual_service(instance: &Instance<'_>) -> DynamicObject {
    let host = internal_host(instance.name(), instance.namespace());
    object(
        instance,
        virtual_service_api_resource(),
        names::virtual_service(instance.name()),
        json!({
            "spec": {
                "hosts": [host],
                "http": [{
                    "match": [{ "port": 80 }],
                    "route": [{ "destination": { "host": host, "port": { "number": 443 } } }]
                }]
            }
        }),
    )
}

fn object(
    instance: &Instance<'_>,
    resource: ApiResource,
    name: String,
    data: Value,
) -> DynamicObject {
    DynamicObject {
        types: Some(TypeMeta {
            api_version: resource.api_version,
            kind: resource.kind,
        }),
        metadata: instance.owned_meta(name, labels::metadata(instance)),
        data,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::test_support::pvc_instance;

    #[test]
    fn destination_rule_shape() {
        let instance = pvc_instance();
        let value = serde_json::to_value(destination_rule(&instance)).expect("json");
        assert_eq!(value["apiVersion"], "networking.istio.io/v1beta1");
        assert_eq!(value["kind"], "DestinationRule");
        assert_eq!(value["metadata"]["name"], "tas-internal");
        assert_eq!(value["metadata"]["ownerReferences"][0]["name"], "tas");
        assert_eq!(value["spec"]["host"], "tas.models.svc.cluster.local");
        assert_eq!(
            value["spec"]["trafficPolicy"]["portLevelSettings"],
            json!([{"port": {"number": 443}, "tls": {"mode": "SIMPLE"}}])
        );
    }

    #[test]
    fn virtual_service_shape() {
        let instance = pvc_instance();
        let value = serde_json::to_value(virtual_service(&instance)).expect("json");
        assert_eq!(value["kind"], "VirtualService");
        assert_eq!(value["metadata"]["name"], "tas-redirect");
        assert_eq!(
            value["spec"],
            json!({
                "hosts": ["tas.models.svc.cluster.local"],
                "http": [{
                    "match": [{"port": 80}],
                    "route": [{"destination": {
                        "host": "tas.models.svc.cluster.local", "port": {"number": 443}
                    }}]
                }]
            })
        );
    }
}
