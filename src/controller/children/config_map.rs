//! ConfigMap `<cr>-kube-rbac-proxy-config`: kube-rbac-proxy's `config.yaml`, with the upstream
//! on port 8081 (where the service serves its API).
//!
//! Callers are authorized against `services/<cr>` in the namespace: the Service's name is
//! checked (`name`, the key kube-rbac-proxy reads; the Go operator writes `resourceName`, which
//! kube-rbac-proxy drops silently, so its check is namespace-wide). The verb is `get` for every
//! request ([`ServiceAccess::Get`], the Go operator's meaning; only OpenDataHub's kube-rbac-proxy
//! reads the `verb` key) or the one the HTTP method gives ([`ServiceAccess::HttpMethod`]: `get`
//! to read, `create` to upload, as upstream kube-rbac-proxy always does). kube-rbac-proxy
//! reads the file at start only: a change reaches running pods when they next start (a change of
//! [`ServiceAccess`] rolls them, through the pod template's annotation).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ConfigMap;
use trustyai_crds::contract::labels as contract_labels;

use super::declaration::{Declaration, Lifecycle, Rendered, always};
use super::{built_in, owned_watch, render_one};
use crate::controller::resources::{Instance, labels, names};

/// The declaration.
pub const DECLARATION: Declaration = Declaration {
    watch: owned_watch(built_in::<ConfigMap>),
    applies_with: always,
    lifecycle: Lifecycle::Owned,
    applying: Rendered::new(|instance, inputs| {
        render_one(&kube_rbac_proxy_config(instance, inputs.service_access))
    }),
};

/// Key of the configuration file in the ConfigMap.
pub const CONFIG_KEY: &str = "config.yaml";
/// Value of `app.kubernetes.io/component` on the ConfigMap.
pub const COMPONENT: &str = "kube-rbac-proxy";

/// Which verb a caller of the service's API needs on `services/<cr>`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum ServiceAccess {
    /// `get` for every request, uploads included (the config's `verb` key; upstream
    /// kube-rbac-proxy ignores it and derives the verb from the method).
    #[default]
    Get,
    /// The verb the HTTP method gives: `get` for GET, `create` for POST, `update` for PUT,
    /// `patch` for PATCH, `delete` for DELETE.
    HttpMethod,
}

impl ServiceAccess {
    /// Its name on the command line and in the pod template's annotation.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Get => "get",
            Self::HttpMethod => "http-method",
        }
    }
}

/// The ConfigMap, owned by the TrustyAIService.
pub fn kube_rbac_proxy_config(instance: &Instance<'_>, access: ServiceAccess) -> ConfigMap {
    ConfigMap {
        metadata: instance.owned_meta(
            names::kube_rbac_proxy_config(instance.name()),
            labels::metadata_with(instance, &[(contract_labels::COMPONENT, COMPONENT)]),
        ),
        data: Some(BTreeMap::from([(
            CONFIG_KEY.to_owned(),
            config_yaml(instance.name(), instance.namespace(), access),
        )])),
        ..ConfigMap::default()
    }
}

/// The `config.yaml` text. Names and namespaces are DNS labels, so quoting them in YAML is
/// enough (no escaping needed).
pub fn config_yaml(cr: &str, namespace: &str, access: ServiceAccess) -> String {
    let verb = match access {
        ServiceAccess::Get => "    verb: \"get\"\n",
        ServiceAccess::HttpMethod => "",
    };
    format!(
        r#"authorization:
  resourceAttributes:
    namespace: "{namespace}"
    resource: "services"
    name: "{cr}"
{verb}    apiGroup: ""
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
    use crate::controller::test_support::{VERSION, pvc_instance};

    #[test]
    fn config_map_shape() {
        let instance = pvc_instance();
        let cm = kube_rbac_proxy_config(&instance, ServiceAccess::Get);
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
        assert_eq!(
            data[CONFIG_KEY],
            config_yaml("tas", "models", ServiceAccess::Get)
        );
    }

    /// The config with [`ServiceAccess::Get`] for `tas` in `models`.
    fn get_config() -> String {
        config_yaml("tas", "models", ServiceAccess::Get)
    }

    #[test]
    fn config_authorizes_get_on_the_service() {
        let text = get_config();
        assert!(text.starts_with("authorization:\n"));
        assert!(text.contains("namespace: \"models\"\n"));
        assert!(text.contains("resource: \"services\"\n"));
        // `name` is the key kube-rbac-proxy reads; `resourceName` would be dropped.
        assert!(text.contains("    name: \"tas\"\n"));
        assert!(!text.contains("resourceName"));
        assert!(text.contains("verb: \"get\"\n"));
        assert!(text.contains("apiGroup: \"\"\n"));
    }

    #[test]
    fn config_proxies_to_the_service_on_port_8081() {
        assert!(get_config().contains("url: \"http://127.0.0.1:8081\"\n"));
    }

    #[test]
    fn config_sets_a_tls12_floor_with_six_cipher_suites() {
        let text = get_config();
        assert!(text.contains("minVersion: \"VersionTLS12\"\n"));
        assert_eq!(text.matches("TLS_").count(), 6);
    }

    #[test]
    fn http_method_access_leaves_the_verb_to_the_proxy() {
        let text = config_yaml("tas", "models", ServiceAccess::HttpMethod);
        assert!(!text.contains("verb"), "{text}");
        assert!(
            text.contains("    name: \"tas\"\n    apiGroup: \"\"\n"),
            "{text}"
        );
    }
}
