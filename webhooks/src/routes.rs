//! Route paths. The chart's webhook configurations and the CRD's conversion `clientConfig`
//! point at these, so they are part of the deployment contract: change them only together with
//! the chart.

/// `POST`: the CRD conversion webhook (`ConversionReview` in and out). The CRD's own
/// `clientConfig` names it, so the CRD module owns the value.
pub const CONVERT: &str = trustyai_crds::crd::CONVERT_PATH;

/// `POST`: the mutating (defaulting) admission webhook (`AdmissionReview` in and out).
pub const MUTATE: &str = "/mutate";

/// `POST`: the validating admission webhook (`AdmissionReview` in and out).
pub const VALIDATE: &str = "/validate";

/// `GET` on the ops port: the process is alive.
pub const HEALTHZ: &str = "/healthz";

/// `GET` on the ops port: every readiness check passes and the process is not draining.
pub const READYZ: &str = "/readyz";

/// `GET` on the ops port: Prometheus metrics.
pub const METRICS: &str = "/metrics";
