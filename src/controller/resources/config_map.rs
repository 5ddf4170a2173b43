//! ConfigMap `<cr>-kube-rbac-proxy-config`: kube-rbac-proxy's `config.yaml`, the Go
//! operator's text with the upstream on port 8081 (where the service serves its API).
//!
//! Callers are authorized with `get services/<cr>` in the namespace. The content depends only
//! on the name and namespace, so it never changes for a given TrustyAIService and needs no pod
//! restart to take effect.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ConfigMap;
use trustyai_crds::contract::labels as contract_labels;

use super::{Instance, labels, names};

/// Key of the configuration file in the ConfigMap.
pub const CONFIG_KEY: &str = "config.yaml";
/// Value of `app.kubernetes.io/component` on the ConfigMap.
pub const COMPONENT: &str = "kube-rbac-proxy";

/// The ConfigMap, owned by the TrustyAIService.
pub fn kube_rbac_proxy_config(instance: &Instance<'_>) -> ConfigMap {
    ConfigMap {
        metadata: instance.owned_meta(
            names::kube_rbac_proxy_config(instance.name()),
            labels::metadata_with(instance, &[(contract_labels::COMPONENT, COMPONENT)]),
        ),
        data: Some(BTreeMap::from([(
            CONFIG_KEY.to_owned(),
            config_yaml(instance.name(), instance.namespace()),
        )])),
        ..ConfigMap::default()
    }
}

/// The `config.yaml` text. Names and namespaces are DNS labels, so quoting them in YAML is
/// enough (no escaping needed).
pub fn config_yaml(cr: &str, namespace: &str) -> String {
    format!(
        r#"authorization:
  resourceAttributes:
    namespace: "{namespace}"
    resource: "services"
    resourceName: "{cr}"
    verb: "get"
    apiGroup: ""
upstreamConfig:
  url: "http://127.0.0.1:8081"
  proxyTimeout: "30s"
tlsConfig:
  minVersion: "VersionTLS12"
  # FIPS 140-2 approved cipher suites only
  cipherSuites:
    - "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"
    - "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384"
    - "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"
    - "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"
    - "TLS_RSA_WITH_AES_128_GCM_SHA256"
    - "TLS_RSA_WITH_AES_256_GCM_SHA384"
"#
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::test_support::{VERSION, pvc_service};

    #[test]
    fn config_map_shape() {
        let service = pvc_service();
        let instance = Instance::new(&service, VERSION).expect("instance");
        let cm = kube_rbac_proxy_config(&instance);
        assert_eq!(
            cm.metadata.name.as_deref(),
            Some("tas-kube-rbac-proxy-config")
        );
        assert_eq!(
            cm.metadata.owner_references,
            Some(vec![instance.owner_reference()])
        );
        let labels = cm.metadata.labels.expect("labels");
        assert_eq!(labels["app.kubernetes.io/component"], "kube-rbac-proxy");
        assert_eq!(labels["app.kubernetes.io/version"], VERSION);
        let data = cm.data.expect("data");
        assert_eq!(data.len(), 1);
        assert_eq!(data[CONFIG_KEY], config_yaml("tas", "models"));
    }

    #[test]
    fn config_authorizes_get_on_the_service_and_proxies_to_8081() {
        let text = config_yaml("tas", "models");
        assert!(text.contains("namespace: \"models\"\n"));
        assert!(text.contains("resource: \"services\"\n"));
        assert!(text.contains("resourceName: \"tas\"\n"));
        assert!(text.contains("verb: \"get\"\n"));
        assert!(text.contains("apiGroup: \"\"\n"));
        assert!(text.contains("url: \"http://127.0.0.1:8081\"\n"));
        assert!(text.contains("minVersion: \"VersionTLS12\"\n"));
        assert_eq!(text.matches("TLS_").count(), 6);
        assert!(text.starts_with("authorization:\n"));
    }
}
