//! The two Services of a TrustyAIService `<cr>`:
//!
//! - `<cr>-tls`: `https` 443 → kube-rbac-proxy on 8443, the authenticated entry point (the
//!   Route points here).
//! - `<cr>`: the internal Service, `http` 80 → 8080 and `https` 443 → 4443 on the service
//!   container, used by ModelMesh, KServe loggers and the ServiceMonitors.
//!
//! Each asks OpenShift's service CA for a serving certificate Secret of the same name
//! (`<cr>-tls`, `<cr>-internal`) through the `serving-cert-secret-name` annotation.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use trustyai_crds::contract::labels as contract_labels;

use super::declaration::{Declaration, Lifecycle, Rendered, always};
use super::{built_in, owned_watch, wanted};
use crate::controller::resources::{Instance, labels, names};

/// The declaration.
pub const DECLARATION: Declaration = Declaration {
    watch: owned_watch(built_in::<Service>),
    applies_with: always,
    lifecycle: Lifecycle::Owned,
    applying: Rendered::new(|instance, _| {
        [tls_service(instance), internal_service(instance)]
            .iter()
            .map(wanted)
            .collect()
    }),
};

/// OpenShift service-ca annotation naming the serving certificate Secret to create.
pub const SERVING_CERT_ANNOTATION: &str = "service.beta.openshift.io/serving-cert-secret-name";
/// Prometheus scrape annotations on the internal Service and the pods.
pub const PROMETHEUS_ANNOTATIONS: [(&str, &str); 3] = [
    ("prometheus.io/path", "/q/metrics"),
    ("prometheus.io/scheme", "http"),
    ("prometheus.io/scrape", "true"),
];
/// Name of the plain HTTP port of the internal Service (scraped by the ServiceMonitors).
pub const HTTP_PORT_NAME: &str = "http";
/// Name of the HTTPS port of both Services.
pub const HTTPS_PORT_NAME: &str = "https";

/// The Service `<cr>-tls` in front of kube-rbac-proxy.
pub fn tls_service(instance: &Instance<'_>) -> Service {
    let cr = instance.name();
    let mut metadata = instance.owned_meta(
        names::tls(cr),
        labels::metadata_with(instance, &[(contract_labels::SERVICE_NAME, cr)]),
    );
    metadata.annotations = Some(BTreeMap::from([(
        SERVING_CERT_ANNOTATION.to_owned(),
        names::tls(cr),
    )]));
    Service {
        metadata,
        spec: Some(ServiceSpec {
            ports: Some(vec![port(HTTPS_PORT_NAME, 443, 8443)]),
            // The Go operator selects on `app` only; kept, since it never held the version.
            selector: Some(BTreeMap::from([(
                contract_labels::APP.to_owned(),
                cr.to_owned(),
            )])),
            ..ServiceSpec::default()
        }),
        ..Service::default()
    }
}

/// The internal Service `<cr>`.
pub fn internal_service(instance: &Instance<'_>) -> Service {
    let cr = instance.name();
    let mut metadata = instance.owned_meta(names::workload(cr), labels::metadata(instance));
    let mut annotations: BTreeMap<String, String> = PROMETHEUS_ANNOTATIONS
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    annotations.insert(SERVING_CERT_ANNOTATION.to_owned(), names::internal(cr));
    metadata.annotations = Some(annotations);
    Service {
        metadata,
        spec: Some(ServiceSpec {
            type_: Some("ClusterIP".to_owned()),
            ports: Some(vec![
                port(HTTP_PORT_NAME, 80, 8080),
                port(HTTPS_PORT_NAME, 443, 4443),
            ]),
            // Without the version label, unlike the Go operator: a selector that names the
            // operator version stops matching the pods after an upgrade.
            selector: Some(labels::selector(cr)),
            ..ServiceSpec::default()
        }),
        ..Service::default()
    }
}

fn port(name: &str, port: i32, target: i32) -> ServicePort {
    ServicePort {
        name: Some(name.to_owned()),
        protocol: Some("TCP".to_owned()),
        port,
        target_port: Some(IntOrString::Int(target)),
        ..ServicePort::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::test_support::{VERSION, pvc_instance};

    fn ports(service: &Service) -> Vec<(String, i32, IntOrString)> {
        service
            .spec
            .as_ref()
            .and_then(|s| s.ports.clone())
            .unwrap_or_default()
            .into_iter()
            .map(|p| {
                (
                    p.name.unwrap_or_default(),
                    p.port,
                    p.target_port.unwrap_or(IntOrString::Int(0)),
                )
            })
            .collect()
    }

    #[test]
    fn tls_service_shape() {
        let instance = pvc_instance();
        let svc = tls_service(&instance);
        assert_eq!(svc.metadata.name.as_deref(), Some("tas-tls"));
        assert_eq!(
            svc.metadata.owner_references,
            Some(vec![instance.owner_reference()])
        );
        assert_eq!(
            svc.metadata.annotations.as_ref().expect("annotations")[SERVING_CERT_ANNOTATION],
            "tas-tls"
        );
        let labels = svc.metadata.labels.as_ref().expect("labels");
        assert_eq!(labels["trustyai-service-name"], "tas");
        assert_eq!(labels["app.kubernetes.io/version"], VERSION);
        assert_eq!(
            ports(&svc),
            vec![("https".to_owned(), 443, IntOrString::Int(8443))]
        );
        let selector = svc.spec.and_then(|s| s.selector).expect("selector");
        assert_eq!(selector, BTreeMap::from([("app".into(), "tas".into())]));
    }

    #[test]
    fn internal_service_shape() {
        let instance = pvc_instance();
        let svc = internal_service(&instance);
        assert_eq!(svc.metadata.name.as_deref(), Some("tas"));
        let annotations = svc.metadata.annotations.as_ref().expect("annotations");
        assert_eq!(annotations[SERVING_CERT_ANNOTATION], "tas-internal");
        assert_eq!(annotations["prometheus.io/path"], "/q/metrics");
        assert_eq!(annotations["prometheus.io/scheme"], "http");
        assert_eq!(annotations["prometheus.io/scrape"], "true");
        assert_eq!(
            ports(&svc),
            vec![
                ("http".to_owned(), 80, IntOrString::Int(8080)),
                ("https".to_owned(), 443, IntOrString::Int(4443))
            ]
        );
        let spec = svc.spec.expect("spec");
        assert_eq!(spec.type_.as_deref(), Some("ClusterIP"));
        assert_eq!(spec.selector, Some(labels::selector("tas")));
    }

    #[test]
    fn no_selector_holds_the_version_label() {
        let instance = pvc_instance();
        for svc in [tls_service(&instance), internal_service(&instance)] {
            let selector = svc.spec.and_then(|s| s.selector).expect("selector");
            assert!(!selector.contains_key(contract_labels::VERSION));
            assert!(!selector.values().any(|v| v == VERSION));
        }
    }
}
