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

use super::declaration::{Declaration, Lifecycle, Render, Rendered, Wanted};
use super::{RenderInputs, optional_owned_watch, render_one};
use crate::controller::discovery::OptionalApis;
use crate::controller::error::ReconcileError;
use crate::controller::resources::{Instance, labels, names};

/// The DestinationRule's declaration.
pub const DESTINATION_RULE: Declaration = istio_declaration(
    destination_rule_api_resource,
    |a| a.destination_rules,
    |instance, inputs| while_istio_wanted(inputs, || destination_rule(instance)),
);

/// The VirtualService's declaration.
pub const VIRTUAL_SERVICE: Declaration = istio_declaration(
    virtual_service_api_resource,
    |a| a.virtual_services,
    |instance, inputs| while_istio_wanted(inputs, || virtual_service(instance)),
);

/// Both Istio kinds are owned, and watched and applied only while their API is `served`.
const fn istio_declaration(
    resource: fn() -> ApiResource,
    served: fn(&OptionalApis) -> bool,
    render: Render,
) -> Declaration {
    Declaration {
        watch: optional_owned_watch(resource, served),
        applies_with: served,
        lifecycle: Lifecycle::Owned,
        applying: Rendered::new(render),
    }
}

/// The object while an InferenceService of the namespace logs through Istio; none otherwise,
/// so an owned one left from before is deleted.
fn while_istio_wanted(
    inputs: &RenderInputs<'_>,
    object: impl FnOnce() -> DynamicObject,
) -> Result<Vec<Wanted>, ReconcileError> {
    if inputs.istio_wanted {
        render_one(&object())
    } else {
        Ok(Vec::new())
    }
}

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
    object(
        instance,
        destination_rule_api_resource(),
        names::destination_rule,
        |host| {
            json!({
                "host": host,
                "trafficPolicy": {
                    "portLevelSettings": [
                        { "port": { "number": 443 }, "tls": { "mode": "SIMPLE" } }
                    ]
                }
            })
        },
    )
}

/// The VirtualService `<cr>-redirect`, owned by the TrustyAIService.
pub fn virtual_service(instance: &Instance<'_>) -> DynamicObject {
    object(
        instance,
        virtual_service_api_resource(),
        names::virtual_service,
        |host| {
            json!({
                "hosts": [host],
                "http": [{
                    "match": [{ "port": 80 }],
                    "route": [{ "destination": { "host": host, "port": { "number": 443 } } }]
                }]
            })
        },
    )
}

/// Both Istio objects are owned by the TrustyAIService, named after it, and route to its
/// internal Service: `spec` is given that Service's [`internal_host`].
fn object(
    instance: &Instance<'_>,
    resource: ApiResource,
    name: fn(&str) -> String,
    spec: impl FnOnce(&str) -> Value,
) -> DynamicObject {
    let host = internal_host(instance.name(), instance.namespace());
    DynamicObject {
        types: Some(TypeMeta {
            api_version: resource.api_version,
            kind: resource.kind,
        }),
        metadata: instance.owned_meta(name(instance.name()), labels::metadata(instance)),
        data: json!({ "spec": spec(&host) }),
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
