//! What to publish where: the pure half of caBundle publishing (desired client configs,
//! up-to-date checks, and the request bodies). The loop that sends them is in
//! [`crate::ca_bundle_publisher`].
//!
//! # Why server-side apply, and what exactly is applied
//!
//! The bundle goes into objects other tools install (Helm, the operator's own CRD apply,
//! ArgoCD), so the operator must own *only* the fields it maintains. Server-side apply under a
//! dedicated field manager ([`CABUNDLE_FIELD_MANAGER`]) does exactly that: the applied object
//! is merged into the live one, and only the fields named in it become ours. `force` takes them
//! over from whichever manager set them before (a chart rendering `caBundle: ""`).
//!
//! - **CRD**: `spec.conversion` = `strategy: Webhook`, `webhook.conversionReviewVersions: [v1]`,
//!   `webhook.clientConfig` = service {name, namespace, path, port} or url, plus `caBundle`.
//! - **Validating/MutatingWebhookConfiguration**: for each *existing* entry of `webhooks` (a list
//!   map keyed by `name`), only `name` + `clientConfig` (service {name, namespace, port, path
//!   kept from the live entry} or url, plus `caBundle`). The entry's other required fields
//!   (`sideEffects`, `admissionReviewVersions`) are not applied: apply configurations are
//!   partial, and validation runs on the merged object, where the chart's values are present.
//!   Entries are taken from the live object, never invented: an applied entry that does not
//!   exist would lack those required fields and be rejected, and a webhook the chart removed
//!   must stay removed.
//!
//! Bodies are raw JSON, not k8s-openapi structs: the typed structs serialise required fields
//! (`sideEffects: ""`, `group: ""`, …), which would claim and clobber them.
//!
//! One thing apply cannot do is switch `clientConfig` between `service` and `url` when the
//! other form belongs to another manager (local mode against a CRD installed with a service
//! reference): the merge would hold both, which validation rejects. In that case a merge patch
//! (CRD) or strategic merge patch (webhook configurations, merging entries by name) first sets
//! our form and deletes the other (`null`); the apply follows as usual.

use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1 as admission;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as apiext;
use serde_json::{Value, json};

/// Field manager of the caBundle publisher's writes.
pub const CABUNDLE_FIELD_MANAGER: &str = "trustyai-operator-cabundle";
/// The only ConversionReview version the operator speaks.
const CONVERSION_REVIEW_VERSIONS: [&str; 1] = ["v1"];

/// How the apiserver reaches the webhook server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WebhookEndpoint {
    /// In cluster: through a Service.
    Service {
        /// Service name.
        name: String,
        /// Service namespace.
        namespace: String,
        /// Service port (the chart's is 443).
        port: i32,
    },
    /// Out of cluster (local mode): a base URL such as `https://127.0.0.1:8443`; each webhook's
    /// path is appended.
    Url {
        /// Scheme, host and port, no path.
        base: String,
    },
}

/// The objects to keep the bundle in. Names are the caller's (they come from the chart).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PublishTargets {
    /// The CRD whose conversion webhook to maintain; `None` to leave CRDs alone.
    pub crd_name: Option<String>,
    /// Path of the conversion endpoint.
    pub conversion_path: String,
    /// The operator's ValidatingWebhookConfiguration.
    pub validating_webhook_configuration: Option<String>,
    /// The operator's MutatingWebhookConfiguration.
    pub mutating_webhook_configuration: Option<String>,
    /// How the apiserver reaches the webhook server.
    pub endpoint: WebhookEndpoint,
    /// Whether the watches of the targets stream their first list (the caller knows whether
    /// the API server serves streaming lists); else a list request comes first.
    pub streaming_lists: bool,
}

/// A webhook client config, the shape shared by the apiextensions and admissionregistration
/// types (which are distinct Rust types).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClientConfig {
    /// Service reference.
    pub service: Option<ServiceRef>,
    /// A URL the API server calls instead of a Service (out-of-cluster webhooks).
    pub url: Option<String>,
    /// PEM bytes (the API carries them base64-encoded).
    pub ca_bundle: Option<Vec<u8>>,
}

/// A Service reference.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServiceRef {
    /// The Service the API server calls.
    pub name: String,
    /// Its namespace.
    pub namespace: String,
    /// The URL path of the webhook on that Service (`None`: `/`).
    pub path: Option<String>,
    /// The Service port (`None`: 443).
    pub port: Option<i32>,
}

/// The CRD's and the admission registrations' `WebhookClientConfig` are two k8s-openapi types
/// of the same shape; both read into one [`ClientConfig`].
macro_rules! client_config_from {
    ($api:ty) => {
        impl From<&$api> for ClientConfig {
            fn from(c: &$api) -> Self {
                Self {
                    service: c.service.as_ref().map(|s| ServiceRef {
                        name: s.name.clone(),
                        namespace: s.namespace.clone(),
                        path: s.path.clone(),
                        port: s.port,
                    }),
                    url: c.url.clone(),
                    ca_bundle: c.ca_bundle.as_ref().map(|b| b.0.clone()),
                }
            }
        }
    };
}

client_config_from!(apiext::WebhookClientConfig);
client_config_from!(admission::WebhookClientConfig);

impl From<ClientConfig> for admission::WebhookClientConfig {
    fn from(c: ClientConfig) -> Self {
        Self {
            service: c.service.map(|s| admission::ServiceReference {
                name: s.name,
                namespace: s.namespace,
                path: s.path,
                port: s.port,
            }),
            url: c.url,
            ca_bundle: c.ca_bundle.map(ByteString),
        }
    }
}

impl ClientConfig {
    /// The request path this config calls: the service path, or the path part of the URL.
    pub fn path(&self) -> Option<String> {
        if let Some(service) = &self.service {
            return service.path.clone();
        }
        let url = self.url.as_deref()?;
        let after_scheme = url.find("://").map_or(url, |i| &url[i + 3..]);
        after_scheme.find('/').map(|i| after_scheme[i..].to_owned())
    }

    /// Whether the live config uses the other form (service vs url) than `desired`, which
    /// apply cannot remove if another manager owns it.
    pub fn needs_switch_to(&self, desired: &ClientConfig) -> bool {
        (desired.service.is_some() && self.url.is_some())
            || (desired.url.is_some() && self.service.is_some())
    }

    /// The apply/patch JSON. With `delete_other`, the form not used is set to `null`, which
    /// deletes it in a (strategic) merge patch.
    pub fn to_json(&self, delete_other: bool) -> Value {
        let mut out = serde_json::Map::new();
        if let Some(service) = &self.service {
            let mut svc = serde_json::Map::new();
            svc.insert("name".into(), json!(service.name));
            svc.insert("namespace".into(), json!(service.namespace));
            if let Some(path) = &service.path {
                svc.insert("path".into(), json!(path));
            }
            if let Some(port) = service.port {
                svc.insert("port".into(), json!(port));
            }
            out.insert("service".into(), Value::Object(svc));
            if delete_other {
                out.insert("url".into(), Value::Null);
            }
        }
        if let Some(url) = &self.url {
            out.insert("url".into(), json!(url));
            if delete_other {
                out.insert("service".into(), Value::Null);
            }
        }
        if let Some(bundle) = &self.ca_bundle {
            // ByteString serialises as base64, which is what the API expects.
            let encoded = serde_json::to_value(ByteString(bundle.clone())).unwrap_or(Value::Null);
            out.insert("caBundle".into(), encoded);
        }
        Value::Object(out)
    }
}

/// The client config the CRD's conversion webhook should have.
pub fn desired_conversion(endpoint: &WebhookEndpoint, path: &str, bundle: &[u8]) -> ClientConfig {
    client_config(endpoint, Some(path.to_owned()), bundle)
}

/// The client config an admission webhook entry should have, keeping the entry's own path.
pub fn desired_admission(
    live: &ClientConfig,
    endpoint: &WebhookEndpoint,
    bundle: &[u8],
) -> ClientConfig {
    client_config(endpoint, live.path(), bundle)
}

fn client_config(endpoint: &WebhookEndpoint, path: Option<String>, bundle: &[u8]) -> ClientConfig {
    ClientConfig {
        ca_bundle: Some(bundle.to_vec()),
        ..endpoint.client_config(path)
    }
}

impl WebhookEndpoint {
    /// The client config reaching `path` here, without a caBundle: what a webhook registration
    /// is created with (the publisher adds the bundle under its own field manager).
    pub fn client_config(&self, path: Option<String>) -> ClientConfig {
        match self {
            WebhookEndpoint::Service {
                name,
                namespace,
                port,
            } => ClientConfig {
                service: Some(ServiceRef {
                    name: name.clone(),
                    namespace: namespace.clone(),
                    path,
                    port: Some(*port),
                }),
                url: None,
                ca_bundle: None,
            },
            WebhookEndpoint::Url { base } => ClientConfig {
                service: None,
                url: Some(format!(
                    "{}{}",
                    base.trim_end_matches('/'),
                    path.as_deref().unwrap_or_default()
                )),
                ca_bundle: None,
            },
        }
    }
}

/// The live CRD's conversion as the publisher sees it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LiveConversion {
    /// `spec.conversion.strategy`.
    pub strategy: Option<String>,
    /// `spec.conversion.webhook.conversionReviewVersions`.
    pub review_versions: Vec<String>,
    /// `spec.conversion.webhook.clientConfig`.
    pub client_config: ClientConfig,
}

impl LiveConversion {
    /// Reads it from a CRD.
    pub fn of(crd: &apiext::CustomResourceDefinition) -> Self {
        let conversion = crd.spec.conversion.as_ref();
        let webhook = conversion.and_then(|c| c.webhook.as_ref());
        Self {
            strategy: conversion.map(|c| c.strategy.clone()),
            review_versions: webhook
                .map(|w| w.conversion_review_versions.clone())
                .unwrap_or_default(),
            client_config: webhook
                .and_then(|w| w.client_config.as_ref())
                .map(ClientConfig::from)
                .unwrap_or_default(),
        }
    }

    /// Whether it already is exactly what would be applied.
    pub fn is_up_to_date(&self, desired: &ClientConfig) -> bool {
        self.strategy.as_deref() == Some("Webhook")
            && self.review_versions == CONVERSION_REVIEW_VERSIONS
            && &self.client_config == desired
    }
}

/// The server-side apply body for the CRD's conversion.
pub fn crd_apply_body(crd_name: &str, desired: &ClientConfig) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": { "name": crd_name },
        "spec": { "conversion": conversion_json(desired, false) },
    })
}

/// The merge patch that switches the CRD's client config between service and url.
pub fn crd_switch_patch(desired: &ClientConfig) -> Value {
    json!({ "spec": { "conversion": conversion_json(desired, true) } })
}

fn conversion_json(desired: &ClientConfig, delete_other: bool) -> Value {
    json!({
        "strategy": "Webhook",
        "webhook": {
            "conversionReviewVersions": CONVERSION_REVIEW_VERSIONS,
            "clientConfig": desired.to_json(delete_other),
        },
    })
}

/// A live webhook entry: its name and client config.
pub type LiveEntry = (String, ClientConfig);

/// The entries of a ValidatingWebhookConfiguration.
pub fn validating_entries(config: &admission::ValidatingWebhookConfiguration) -> Vec<LiveEntry> {
    entries(&config.webhooks)
}

/// The entries of a MutatingWebhookConfiguration.
pub fn mutating_entries(config: &admission::MutatingWebhookConfiguration) -> Vec<LiveEntry> {
    entries(&config.webhooks)
}

fn entries<W: AdmissionEntry>(webhooks: &Option<Vec<W>>) -> Vec<LiveEntry> {
    webhooks.iter().flatten().map(W::live_entry).collect()
}

/// The two kinds' webhooks have the same name and client config fields, in different types;
/// both read into one [`LiveEntry`].
trait AdmissionEntry {
    fn live_entry(&self) -> LiveEntry;
}

macro_rules! admission_entry {
    ($api:ty) => {
        impl AdmissionEntry for $api {
            fn live_entry(&self) -> LiveEntry {
                (self.name.clone(), ClientConfig::from(&self.client_config))
            }
        }
    };
}

admission_entry!(admission::ValidatingWebhook);
admission_entry!(admission::MutatingWebhook);

/// Each live entry with the client config it should have.
pub fn desired_entries(
    live: &[LiveEntry],
    endpoint: &WebhookEndpoint,
    bundle: &[u8],
) -> Vec<LiveEntry> {
    live.iter()
        .map(|(name, config)| (name.clone(), desired_admission(config, endpoint, bundle)))
        .collect()
}

/// The server-side apply body for a webhook configuration (`kind` is
/// `ValidatingWebhookConfiguration` or `MutatingWebhookConfiguration`).
pub fn webhooks_apply_body(kind: &str, name: &str, desired: &[LiveEntry]) -> Value {
    json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": kind,
        "metadata": { "name": name },
        "webhooks": entries_json(desired, false),
    })
}

/// The strategic merge patch that switches entries between service and url.
pub fn webhooks_switch_patch(desired: &[LiveEntry]) -> Value {
    json!({ "webhooks": entries_json(desired, true) })
}

fn entries_json(desired: &[LiveEntry], delete_other: bool) -> Value {
    Value::Array(
        desired
            .iter()
            .map(|(name, config)| json!({ "name": name, "clientConfig": config.to_json(delete_other) }))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const PEM: &[u8] = b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";

    fn service() -> WebhookEndpoint {
        WebhookEndpoint::Service {
            name: "hook".into(),
            namespace: "ops".into(),
            port: 443,
        }
    }

    fn local() -> WebhookEndpoint {
        WebhookEndpoint::Url {
            base: "https://127.0.0.1:8443/".into(),
        }
    }

    fn b64(bytes: &[u8]) -> Value {
        serde_json::to_value(ByteString(bytes.to_vec())).expect("serialise")
    }

    #[test]
    fn crd_apply_body_holds_only_the_conversion_stanza() {
        let desired = desired_conversion(&service(), "/convert", PEM);
        let body = crd_apply_body("tas.example.io", &desired);
        assert_eq!(
            body,
            json!({
                "apiVersion": "apiextensions.k8s.io/v1",
                "kind": "CustomResourceDefinition",
                "metadata": { "name": "tas.example.io" },
                "spec": { "conversion": {
                    "strategy": "Webhook",
                    "webhook": {
                        "conversionReviewVersions": ["v1"],
                        "clientConfig": {
                            "service": { "name": "hook", "namespace": "ops", "path": "/convert", "port": 443 },
                            "caBundle": b64(PEM),
                        },
                    },
                }},
            })
        );
    }

    #[test]
    fn ca_bundle_is_base64_of_the_raw_pem() {
        let desired = desired_conversion(&service(), "/convert", PEM);
        let encoded = desired.to_json(false)["caBundle"]
            .as_str()
            .expect("string")
            .to_owned();
        assert!(encoded.starts_with("LS0tLS1CRUdJTi")); // base64 of "-----BEGIN"
    }

    #[test]
    fn a_registration_references_the_service_path_without_a_bundle() {
        let registered: admission::WebhookClientConfig =
            service().client_config(Some("/validate".into())).into();
        let reference = registered.service.expect("a service reference");
        assert_eq!(
            (reference.name.as_str(), reference.namespace.as_str()),
            ("hook", "ops")
        );
        assert_eq!(
            (reference.path.as_deref(), reference.port),
            (Some("/validate"), Some(443))
        );
        assert!(registered.ca_bundle.is_none() && registered.url.is_none());
    }

    #[test]
    fn a_local_registration_gets_a_url_with_the_path() {
        let local: admission::WebhookClientConfig =
            local().client_config(Some("/mutate".into())).into();
        assert_eq!(local.url.as_deref(), Some("https://127.0.0.1:8443/mutate"));
    }

    #[test]
    fn local_mode_uses_a_url_with_the_path() {
        let desired = desired_conversion(&local(), "/convert", PEM);
        assert_eq!(
            desired.url.as_deref(),
            Some("https://127.0.0.1:8443/convert")
        );
        assert!(desired.service.is_none());
        let body = crd_switch_patch(&desired);
        assert_eq!(
            body["spec"]["conversion"]["webhook"]["clientConfig"]["service"],
            Value::Null
        );
    }

    /// Live entries, one calling a Service and one a URL, and what they should become.
    fn live_and_desired_entries() -> (Vec<LiveEntry>, Vec<LiveEntry>) {
        let live = vec![
            (
                "validate.tas".to_owned(),
                ClientConfig {
                    service: Some(ServiceRef {
                        name: "old".into(),
                        namespace: "old-ns".into(),
                        path: Some("/validate".into()),
                        port: None,
                    }),
                    ..ClientConfig::default()
                },
            ),
            (
                "mutate.tas".to_owned(),
                ClientConfig {
                    url: Some("https://localhost:9443/mutate".into()),
                    ..ClientConfig::default()
                },
            ),
        ];
        let desired = desired_entries(&live, &service(), PEM);
        (live, desired)
    }

    #[test]
    fn webhook_entries_keep_their_paths_under_the_bundled_service() {
        let (_, desired) = live_and_desired_entries();
        let body = webhooks_apply_body("ValidatingWebhookConfiguration", "tas", &desired);
        assert_eq!(
            body["webhooks"],
            json!([
                { "name": "validate.tas", "clientConfig": {
                    "service": { "name": "hook", "namespace": "ops", "path": "/validate", "port": 443 },
                    "caBundle": b64(PEM) } },
                { "name": "mutate.tas", "clientConfig": {
                    "service": { "name": "hook", "namespace": "ops", "path": "/mutate", "port": 443 },
                    "caBundle": b64(PEM) } },
            ])
        );
    }

    #[test]
    fn only_a_webhook_entry_that_used_a_url_needs_the_switch_patch() {
        let (live, desired) = live_and_desired_entries();
        assert!(!live[0].1.needs_switch_to(&desired[0].1));
        assert!(live[1].1.needs_switch_to(&desired[1].1));
        assert_eq!(
            webhooks_switch_patch(&desired)["webhooks"][1]["clientConfig"]["url"],
            Value::Null
        );
    }

    #[test]
    fn a_live_conversion_is_up_to_date_only_while_it_matches_the_desired_one() {
        let desired = desired_conversion(&service(), "/convert", PEM);
        let mut live = LiveConversion {
            strategy: Some("Webhook".into()),
            review_versions: vec!["v1".into()],
            client_config: desired.clone(),
        };
        assert!(live.is_up_to_date(&desired));
        live.client_config.ca_bundle = None; // a re-apply cleared it
        assert!(!live.is_up_to_date(&desired));
        live.client_config = desired.clone();
        live.strategy = Some("None".into());
        assert!(!live.is_up_to_date(&desired));
    }

    #[test]
    fn paths_are_read_from_service_or_url() {
        let url = |u: &str| ClientConfig {
            url: Some(u.into()),
            ..ClientConfig::default()
        };
        assert_eq!(url("https://h:1/a/b").path().as_deref(), Some("/a/b"));
        assert_eq!(url("https://h:1").path(), None);
    }
}
