//! The reconcile loop's configuration (fixed at start) and shared state.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::Client;
use kube::runtime::reflector::Store;
use tokio::sync::watch;
use trustyai_crds::contract::{config_map, image_env};

use super::backoff::Backoffs;
use super::children::Children;
use super::children::cluster_role_binding::DEFAULT_PROXY_CLUSTER_ROLE;
use super::children::config_map::ServiceAccess;
use super::children::process_watches::ProcessWatches;
use super::discovery::OptionalApis;
use super::events::Events;
use crate::metrics::Metrics;
use trustyai_certs::operand_ca::{DEFAULT_CA_SECRET, OperandCa};

/// Default time between two reconciles of an unchanged TrustyAIService (plus up to 10 %
/// jitter): a safety net only; every relevant change triggers a reconcile by itself.
pub const DEFAULT_SAFETY_REQUEUE: Duration = Duration::from_secs(10 * 60);
/// Default time after `deletionTimestamp` after which a failing cleanup stops blocking the
/// deletion.
pub const DEFAULT_CLEANUP_TIMEOUT: Duration = Duration::from_secs(5 * 60);
/// How long a claim may stay unbound before a `PVCPending` Warning: binding takes a moment where
/// a provisioner creates the volume, and a `WaitForFirstConsumer` class binds only once the
/// service's pod is scheduled.
pub const DEFAULT_PVC_PENDING_GRACE: Duration = Duration::from_secs(120);
/// The image prefix a TrustyAIService's `spec.image` may use when neither `--allowed-image-prefixes`
/// nor the operator ConfigMap names others: where the TrustyAI images are published.
pub const DEFAULT_ALLOWED_IMAGE_PREFIX: &str = "quay.io/trustyai/";
/// Default lifetime of the operand serving certificates the operator issues.
pub const DEFAULT_OPERAND_CERT_LIFETIME: Duration = Duration::from_secs(90 * 24 * 3600);

/// What the reconcile loop needs to know about its deployment.
#[derive(Clone)]
pub struct ControllerConfig {
    /// The operator's namespace: operator ConfigMap, central ServiceMonitor, operand CA.
    pub operator_namespace: String,
    /// Goes into the `app.kubernetes.io/version` label of the objects' metadata.
    pub operator_version: String,
    /// ClusterRole the per-instance proxy ServiceAccount is bound to.
    pub proxy_cluster_role: String,
    /// The verbs each TrustyAIService's kube-rbac-proxy checks on `services/<cr>`.
    pub service_access: ServiceAccess,
    /// Image prefixes `spec.image` may use, unless the operator ConfigMap's
    /// `allowedImagePrefixes` names others.
    pub allowed_image_prefixes: Vec<String>,
    /// `RELATED_IMAGE_ODH_TRUSTYAI_SERVICE_PY_IMAGE`, read once at start.
    pub env_service_image: Option<String>,
    /// `RELATED_IMAGE_ODH_KUBE_RBAC_PROXY_IMAGE`, read once at start.
    pub env_kube_rbac_proxy_image: Option<String>,
    /// Secret of the operand CA in the operator namespace.
    pub operand_ca_secret: String,
    /// Lifetime of the operand serving certificates.
    pub operand_cert_lifetime: Duration,
    /// Lifetime of the operand CA (rotated at two thirds of it).
    pub operand_ca_lifetime: Duration,
    /// How long a new operand CA is in the bundles before it signs, and the old one after.
    pub ca_overlap: Duration,
    /// Safety requeue of unchanged objects.
    pub safety_requeue: Duration,
    /// How long a failing cleanup may block a deletion.
    pub cleanup_timeout: Duration,
    /// How long a claim may stay unbound before a Warning says so.
    pub pvc_pending_grace: Duration,
    /// Where reconcile durations and error categories are counted, if anywhere.
    pub metrics: Option<Arc<Metrics>>,
    /// The watches the process runs whatever replica leads, whose caches the controller
    /// shares instead of watching those kinds again; `None`: the controller watches them.
    pub process_watches: Option<ProcessWatches>,
}

impl std::fmt::Debug for ControllerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ControllerConfig")
            .field("operator_namespace", &self.operator_namespace)
            .field("operator_version", &self.operator_version)
            .field("proxy_cluster_role", &self.proxy_cluster_role)
            .field("service_access", &self.service_access)
            .field("allowed_image_prefixes", &self.allowed_image_prefixes)
            .field("env_service_image", &self.env_service_image)
            .field("env_kube_rbac_proxy_image", &self.env_kube_rbac_proxy_image)
            .field("operand_ca_secret", &self.operand_ca_secret)
            .field("operand_cert_lifetime", &self.operand_cert_lifetime)
            .field("operand_ca_lifetime", &self.operand_ca_lifetime)
            .field("ca_overlap", &self.ca_overlap)
            .field("safety_requeue", &self.safety_requeue)
            .field("cleanup_timeout", &self.cleanup_timeout)
            .field("pvc_pending_grace", &self.pvc_pending_grace)
            .field("metrics", &self.metrics.is_some())
            .field("process_watches", &self.process_watches.is_some())
            .finish()
    }
}

impl ControllerConfig {
    /// Defaults for an operator in `operator_namespace`, with no image variables.
    pub fn new(operator_namespace: impl Into<String>) -> Self {
        Self {
            operator_namespace: operator_namespace.into(),
            operator_version: crate::VERSION.to_owned(),
            proxy_cluster_role: DEFAULT_PROXY_CLUSTER_ROLE.to_owned(),
            service_access: ServiceAccess::default(),
            allowed_image_prefixes: Vec::new(),
            env_service_image: None,
            env_kube_rbac_proxy_image: None,
            operand_ca_secret: DEFAULT_CA_SECRET.to_owned(),
            operand_cert_lifetime: DEFAULT_OPERAND_CERT_LIFETIME,
            operand_ca_lifetime: trustyai_certs::Lifetimes::default().ca,
            ca_overlap: trustyai_certs::Lifetimes::default().overlap,
            safety_requeue: DEFAULT_SAFETY_REQUEUE,
            cleanup_timeout: DEFAULT_CLEANUP_TIMEOUT,
            pvc_pending_grace: DEFAULT_PVC_PENDING_GRACE,
            metrics: None,
            process_watches: None,
        }
    }

    /// Reads the `RELATED_IMAGE_*` variables of the process environment (once, at start: a
    /// release pins its images there, and they do not change while the process runs).
    #[must_use]
    pub fn with_image_env(mut self) -> Self {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
        self.env_service_image = var(image_env::SERVICE_IMAGE);
        self.env_kube_rbac_proxy_image = var(image_env::KUBE_RBAC_PROXY_IMAGE);
        self
    }
}

/// State shared by every reconcile.
pub struct Context {
    /// The API client.
    pub client: Client,
    /// The configuration.
    pub config: ControllerConfig,
    /// Event publisher.
    pub events: Events,
    /// The optional APIs the cluster serves, kept current by discovery.
    pub apis: watch::Receiver<OptionalApis>,
    /// The operator ConfigMap (at most one object), kept current by a reflector.
    pub operator_config: Store<ConfigMap>,
    /// Per-object error backoff.
    pub backoffs: Backoffs,
    /// The CA of the operand certificates.
    pub operand_ca: OperandCa,
    /// The children's metadata and the last applies.
    pub children: Children,
}

impl Context {
    /// Builds the context.
    pub fn new(
        client: Client,
        config: ControllerConfig,
        apis: watch::Receiver<OptionalApis>,
        operator_config: Store<ConfigMap>,
        children: Children,
    ) -> Arc<Self> {
        let operand_ca = OperandCa::new(
            config.operator_namespace.clone(),
            config.operand_ca_secret.clone(),
            super::apply::FIELD_MANAGER,
            trustyai_certs::Lifetimes {
                ca: config.operand_ca_lifetime,
                serving: config.operand_cert_lifetime,
                overlap: config.ca_overlap,
                ..trustyai_certs::Lifetimes::default()
            },
        );
        Arc::new(Self {
            events: Events::new(client.clone()),
            client,
            config,
            apis,
            operator_config,
            backoffs: Backoffs::default(),
            operand_ca,
            children,
        })
    }

    /// The optional APIs now.
    pub fn apis(&self) -> OptionalApis {
        *self.apis.borrow()
    }

    /// `data` of the operator ConfigMap, if it exists.
    pub fn operator_config_data(&self) -> Option<BTreeMap<String, String>> {
        self.operator_config
            .state()
            .iter()
            .find(|cm| cm.metadata.name.as_deref() == Some(config_map::NAME))
            .map(|cm| cm.data.clone().unwrap_or_default())
    }

    /// The image prefixes allowed in `spec.image`: the ConfigMap's `allowedImagePrefixes`
    /// (comma-separated) when set, else the command line's.
    pub fn allowed_image_prefixes(&self, data: Option<&BTreeMap<String, String>>) -> Vec<String> {
        allowed_image_prefixes(data, &self.config.allowed_image_prefixes)
    }
}

/// [`Context::allowed_image_prefixes`], pure.
pub fn allowed_image_prefixes(
    data: Option<&BTreeMap<String, String>>,
    fallback: &[String],
) -> Vec<String> {
    match data.and_then(|d| d.get(config_map::ALLOWED_IMAGE_PREFIXES)) {
        Some(list) if !list.trim().is_empty() => list
            .split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(str::to_owned)
            .collect(),
        _ => fallback.to_vec(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_map_prefixes_replace_the_flag() {
        let fallback = vec![DEFAULT_ALLOWED_IMAGE_PREFIX.to_owned()];
        assert_eq!(allowed_image_prefixes(None, &fallback), fallback);
        let data = BTreeMap::from([(
            "allowedImagePrefixes".to_owned(),
            " a.io/x/ , ,b.io/ ".to_owned(),
        )]);
        assert_eq!(
            allowed_image_prefixes(Some(&data), &fallback),
            vec!["a.io/x/".to_owned(), "b.io/".to_owned()]
        );
        let blank = BTreeMap::from([("allowedImagePrefixes".to_owned(), " ".to_owned())]);
        assert_eq!(allowed_image_prefixes(Some(&blank), &fallback), fallback);
    }
}
