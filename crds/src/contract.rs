//! Names and contracts shared with the Go trustyai-service-operator.
//!
//! A cluster must be able to switch between that operator and this one without touching a
//! TrustyAIService or losing data, so every name below is part of a compatibility contract:
//! change one only together with a migration.

/// API group of the TrustyAIService resource.
pub const GROUP: &str = "trustyai.opendatahub.io";
/// Kind of the resource.
pub const KIND: &str = "TrustyAIService";
/// Plural resource name, as used in URLs and RBAC rules.
pub const PLURAL: &str = "trustyaiservices";
/// Name of the CustomResourceDefinition.
pub const CRD_NAME: &str = "trustyaiservices.trustyai.opendatahub.io";
/// The storage (hub) version.
pub const STORAGE_VERSION: &str = "v1";
/// The deprecated version that is still served.
pub const DEPRECATED_VERSION: &str = "v1alpha1";

/// Finalizer that guards the cleanup of cluster-scoped and patched objects.
pub const FINALIZER: &str = "trustyai.opendatahub.io/finalizer";
/// A doubled-group finalizer name written by old Go operator builds; stripped when seen.
pub const LEGACY_FINALIZER: &str = "trustyai.opendatahub.io.trustyai.opendatahub.io/finalizer";
/// CR annotation that asks the Go operator to re-render the Deployment for a PVC → database migration.
pub const DB_MIGRATION_ANNOTATION: &str = "trustyai.opendatahub.io/db-migration";
/// CR annotation owned by the conversion webhook (this operator only): compact JSON holding what
/// the object's version cannot express, so that the other version can be restored exactly. On a
/// v1alpha1 object it keeps the v1-only fields (`spec.image`, `spec.storage.retention`,
/// `status.observedGeneration`, `status.image`, `conditions[].observedGeneration`) and v1
/// condition statuses outside `True`/`False`/`Unknown`; on a v1 object it keeps v1alpha1 condition
/// status strings that v1 spells differently (`true` → `True`). At most 32 KiB. Written and removed
/// by conversion only; the format is described in `conversion`.
pub const CONVERSION_PRESERVED_ANNOTATION: &str = "trustyai.opendatahub.io/conversion-preserved";
/// CR annotation (`"true"`) that lets a TrustyAIService whose pods run the Java TrustyAI service
/// move to the configured non-Java image, although that service does not read what the Java one
/// stored. Without it the operator keeps the Java image and says so in the `ImageUpgradeHeld`
/// condition.
pub const ALLOW_SERVICE_IMAGE_UPGRADE_ANNOTATION: &str =
    "trustyai.opendatahub.io/allow-service-image-upgrade";

/// Storage formats (`spec.storage.format`).
pub mod storage_format {
    /// Data on a PersistentVolumeClaim.
    pub const PVC: &str = "PVC";
    /// Data in a database described by a credentials Secret.
    pub const DATABASE: &str = "DATABASE";
}

/// PVC retention policies (`spec.storage.retention`).
pub mod retention {
    /// Keep the PVC (and the data) when the TrustyAIService is deleted.
    pub const RETAIN: &str = "Retain";
    /// Delete the PVC together with the TrustyAIService (the Go operator's behaviour).
    pub const DELETE: &str = "Delete";
}

/// Suffixes of the names of the objects created for a TrustyAIService `<cr>`.
pub mod suffix {
    /// ServiceAccount `<cr>-proxy` of the kube-rbac-proxy sidecar.
    pub const PROXY_SERVICE_ACCOUNT: &str = "-proxy";
    /// Service `<cr>-tls` and its serving Secret.
    pub const TLS: &str = "-tls";
    /// Secret `<cr>-internal` with the internal serving certificate.
    pub const INTERNAL: &str = "-internal";
    /// PersistentVolumeClaim `<cr>-pvc`.
    pub const PVC: &str = "-pvc";
    /// Database credentials Secret `<cr>-db-credentials` (fallback when none is named).
    pub const DB_CREDENTIALS: &str = "-db-credentials";
    /// Optional Secret `<cr>-db-ca` with the database CA, which switches the JDBC URL to TLS.
    pub const DB_CA: &str = "-db-ca";
    /// ConfigMap `<cr>-kube-rbac-proxy-config`.
    pub const KUBE_RBAC_PROXY_CONFIG: &str = "-kube-rbac-proxy-config";
}

/// Label keys and values put on every object created for a TrustyAIService.
pub mod labels {
    /// `app: <cr>`.
    pub const APP: &str = "app";
    /// `app.kubernetes.io/instance: <cr>`.
    pub const INSTANCE: &str = "app.kubernetes.io/instance";
    /// `app.kubernetes.io/name: <cr>`.
    pub const NAME: &str = "app.kubernetes.io/name";
    /// `app.kubernetes.io/part-of: trustyai`.
    pub const PART_OF: &str = "app.kubernetes.io/part-of";
    /// Value of [`PART_OF`].
    pub const PART_OF_VALUE: &str = "trustyai";
    /// `app.kubernetes.io/version`: never used in a selector here (the Go operator's
    /// selectors held it, so a new version could not adopt the old pods).
    pub const VERSION: &str = "app.kubernetes.io/version";
    /// `app.kubernetes.io/component`.
    pub const COMPONENT: &str = "app.kubernetes.io/component";
    /// `trustyai-service-name: <cr>` on the TLS Service and the Route.
    pub const SERVICE_NAME: &str = "trustyai-service-name";
    /// ModelMesh label selecting the ModelMesh Deployments and used on ServiceMonitors.
    pub const MODELMESH_SERVICE: &str = "modelmesh-service";
    /// Value of [`MODELMESH_SERVICE`].
    pub const MODELMESH_SERVICE_VALUE: &str = "modelmesh-serving";
}

/// Keys of the operator ConfigMap `trustyai-service-operator-config`.
pub mod config_map {
    /// Name of the operator ConfigMap, in the operator namespace.
    pub const NAME: &str = "trustyai-service-operator-config";
    /// The TrustyAI service image.
    pub const SERVICE_IMAGE: &str = "trustyaiServiceImage";
    /// ADR-0003's split image name (used with [`SERVICE_IMAGE_TAG`]).
    pub const SERVICE_IMAGE_NAME: &str = "trustyaiServiceImageName";
    /// ADR-0003's split image tag (used with [`SERVICE_IMAGE_NAME`]).
    pub const SERVICE_IMAGE_TAG: &str = "trustyaiServiceImageTag";
    /// The kube-rbac-proxy image.
    pub const KUBE_RBAC_PROXY_IMAGE: &str = "kube-rbac-proxy";
    /// `enabled` when KServe Serverless InferenceServices should be wired.
    pub const KSERVE_SERVERLESS: &str = "kServeServerless";
    /// Comma-separated image prefixes a TrustyAIService may use in `spec.image` (this operator only).
    pub const ALLOWED_IMAGE_PREFIXES: &str = "allowedImagePrefixes";
}

/// Environment variables that override the operator ConfigMap's images.
pub mod image_env {
    /// Overrides the TrustyAI service image.
    pub const SERVICE_IMAGE: &str = "RELATED_IMAGE_ODH_TRUSTYAI_SERVICE_PY_IMAGE";
    /// Overrides the kube-rbac-proxy image.
    pub const KUBE_RBAC_PROXY_IMAGE: &str = "RELATED_IMAGE_ODH_KUBE_RBAC_PROXY_IMAGE";
}

/// Keys of the database credentials Secret; the first six are mandatory.
pub mod db_secret {
    /// Database kind, for example `mysql` or `mariadb`.
    pub const KIND: &str = "databaseKind";
    /// User name.
    pub const USERNAME: &str = "databaseUsername";
    /// Password.
    pub const PASSWORD: &str = "databasePassword";
    /// Host name of the database Service.
    pub const SERVICE: &str = "databaseService";
    /// Port of the database Service.
    pub const PORT: &str = "databasePort";
    /// Database name.
    pub const NAME: &str = "databaseName";
    /// Hibernate schema generation strategy (optional).
    pub const GENERATION: &str = "databaseGeneration";
    /// The keys that must be present and non-empty.
    pub const MANDATORY: [&str; 6] = [KIND, USERNAME, PASSWORD, SERVICE, PORT, NAME];
}

/// Condition types written to `status.conditions`.
pub mod condition {
    /// The service as a whole is ready.
    pub const READY: &str = "Ready";
    /// All components are available.
    pub const AVAILABLE: &str = "Available";
    /// The PersistentVolumeClaim is bound (PVC and migration modes).
    pub const PVC_AVAILABLE: &str = "PVCAvailable";
    /// The database credentials are present and valid (DATABASE and migration modes).
    pub const DB_AVAILABLE: &str = "DBAvailable";
    /// The OpenShift Route is admitted (or Routes are not supported on this cluster).
    pub const ROUTE_AVAILABLE: &str = "RouteAvailable";
    /// InferenceServices exist in the namespace.
    pub const INFERENCE_SERVICES_PRESENT: &str = "InferenceServicesPresent";
    /// Provisioning completed.
    pub const PROVISIONING_SUCCEEDED: &str = "ProvisioningSucceeded";
    /// Some or all functionality is missing.
    pub const DEGRADED: &str = "Degraded";
    /// The pods keep running the Java TrustyAI service although the operator is configured with
    /// a non-Java image (present only while that is so).
    pub const IMAGE_UPGRADE_HELD: &str = "ImageUpgradeHeld";
}

/// Condition reasons, as the Go operator writes them.
pub mod reason {
    pub const INFERENCE_SERVICES_FOUND: &str = "InferenceServicesFound";
    pub const INFERENCE_SERVICES_NOT_FOUND: &str = "InferenceServicesNotFound";
    pub const PVC_FOUND: &str = "PVCFound";
    pub const PVC_NOT_FOUND: &str = "PVCNotFound";
    /// The claim exists but no volume is bound to it yet (the Go operator said `PVCNotFound`).
    pub const PVC_PENDING: &str = "PVCPending";
    pub const ROUTE_FOUND: &str = "RouteFound";
    pub const ROUTE_NOT_FOUND: &str = "RouteNotFound";
    /// Routes are not served by this cluster (not OpenShift); readiness does not wait for one.
    pub const ROUTE_NOT_SUPPORTED: &str = "RouteNotSupported";
    pub const ALL_COMPONENTS_READY: &str = "AllComponentsReady";
    pub const NOT_ALL_COMPONENTS_READY: &str = "NotAllComponentsReady";
    pub const COMPONENTS_NOT_READY: &str = "ComponentsNotReady";
    /// The service's container keeps exiting (its last log lines in the message).
    pub const SERVICE_CRASHING: &str = "ServiceCrashing";
    /// The service's container runs, but its readiness check has failed for a while.
    pub const SERVICE_NOT_READY: &str = "ServiceNotReady";
    /// The service's pods cannot start: serving certificate Secrets the service CA issues are missing.
    pub const SERVING_SECRET_MISSING: &str = "ServingSecretMissing";
    pub const DB_AVAILABLE: &str = "DBAvailable";
    pub const DB_CREDENTIALS_NOT_FOUND: &str = "DBCredentialsNotFound";
    pub const DB_CREDENTIALS_ERROR: &str = "DBCredentialsError";
    pub const DB_CONNECTION_ERROR: &str = "DBConnectionError";
    pub const PROVISIONING_COMPLETE: &str = "ProvisioningComplete";
    pub const PROVISIONING_IN_PROGRESS: &str = "ProvisioningInProgress";
    pub const FULLY_FUNCTIONAL: &str = "FullyFunctional";
    pub const PARTIAL_FUNCTIONALITY: &str = "PartialFunctionality";
    pub const NO_FUNCTIONALITY: &str = "NoFunctionality";
    /// `ImageUpgradeHeld`: the configured service does not read the data the Java service stored.
    pub const JAVA_SERVICE_DATA: &str = "JavaServiceData";
}

/// `status.phase` values (note the space in `Not Ready`).
pub mod phase {
    pub const READY: &str = "Ready";
    pub const NOT_READY: &str = "Not Ready";
}

/// Event reporter name used by the Go operator.
pub const EVENT_REPORTER: &str = "trustyai-service-operator";
/// ClusterRole the per-CR proxy ServiceAccount is bound to (token and subject access reviews).
pub const PROXY_CLUSTER_ROLE: &str = "trustyai-service-operator-proxy-role";
/// Name of the central ServiceMonitor in the operator namespace.
pub const CENTRAL_SERVICE_MONITOR: &str = "trustyai-metrics";

/// Labels this operator (not the Go one) puts on the cluster-scoped ClusterRoleBinding it creates
/// for a TrustyAIService. A cluster-scoped object cannot carry an owner reference to a namespaced
/// one, so the finalizer finds the binding with these labels and deletes it.
pub mod owner_labels {
    /// Namespace of the owning TrustyAIService.
    pub const NAMESPACE: &str = "trustyai.opendatahub.io/owner-namespace";
    /// Name of the owning TrustyAIService.
    pub const NAME: &str = "trustyai.opendatahub.io/owner-name";
}

/// The custom CA bundle ConfigMap in a TrustyAIService's namespace, mounted into the
/// kube-rbac-proxy container when present.
pub mod custom_ca_bundle {
    /// Name of the ConfigMap (and of its volume).
    pub const CONFIG_MAP: &str = "odh-trusted-ca-bundle";
    /// Label that OpenShift's network operator looks for to inject the trusted CA bundle.
    pub const INJECT_LABEL: &str = "config.openshift.io/inject-trusted-cabundle";
    /// Key of the bundle in the ConfigMap.
    pub const KEY: &str = "ca-bundle.crt";
}

/// How a TrustyAIService is wired into ModelMesh Deployments (`modelmesh-service=modelmesh-serving`).
pub mod modelmesh {
    /// Space-separated payload processor URLs on every container.
    pub const PAYLOAD_PROCESSORS_ENV: &str = "MM_PAYLOAD_PROCESSORS";
    /// Certificate ModelMesh uses for the payload processors, on container [`CONTAINER`].
    pub const TLS_KEY_CERT_PATH_ENV: &str = "MM_TLS_KEY_CERT_PATH";
    /// The ModelMesh container that gets [`TLS_KEY_CERT_PATH_ENV`].
    pub const CONTAINER: &str = "mm";
    /// Where the `<cr>-internal` Secret is mounted in every container.
    pub const TLS_MOUNT_PATH: &str = "/etc/trustyai/tls";
    /// Value of [`TLS_KEY_CERT_PATH_ENV`].
    pub const TLS_KEY_CERT_PATH: &str = "/etc/trustyai/tls/tls.crt";
    /// Path of the payload consumer on the TrustyAI service: `https://<cr>.<ns>.svc` + this.
    pub const CONSUMER_PATH: &str = "/consumer/kserve/v2";
}

/// How a TrustyAIService is wired into KServe InferenceServices (`serving.kserve.io/v1beta1`).
pub mod kserve {
    /// InferenceService annotation that selects the deployment mode.
    pub const DEPLOYMENT_MODE_ANNOTATION: &str = "serving.kserve.io/deploymentMode";
    /// Deployment mode served by ModelMesh.
    pub const MODE_MODELMESH: &str = "ModelMesh";
    /// Raw Kubernetes Deployment mode (before KServe 0.17).
    pub const MODE_RAW_DEPLOYMENT: &str = "RawDeployment";
    /// Raw Kubernetes Deployment mode (KServe 0.17 and later).
    pub const MODE_STANDARD: &str = "Standard";
    /// Knative mode (before KServe 0.17).
    pub const MODE_SERVERLESS: &str = "Serverless";
    /// Knative mode (KServe 0.17 and later).
    pub const MODE_KNATIVE: &str = "Knative";
    /// Value of the operator ConfigMap's `kServeServerless` key that enables Knative wiring.
    pub const SERVERLESS_ENABLED: &str = "enabled";
    /// Logger mode set on `spec.predictor.logger`.
    pub const LOGGER_MODE: &str = "all";
    /// Annotations KServe derives from the logger; removed together with it.
    pub const LOGGER_ANNOTATIONS: [&str; 3] = [
        "internal.serving.kserve.io/logger",
        "internal.serving.kserve.io/logger-mode",
        "internal.serving.kserve.io/logger-sink-url",
    ];
    /// InferenceService annotation that turns on the Istio sidecar.
    pub const ISTIO_INJECT_ANNOTATION: &str = "sidecar.istio.io/inject";
}
