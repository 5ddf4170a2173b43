//! What the webhook handlers share: the admission settings that the operator may change at run
//! time, a lookup of Secrets for warnings, and an observer that the operator's metrics implement
//! (bounded labels only: endpoints, outcomes, rule names, directions).

use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;

/// A webhook endpoint, as a metric label.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReviewEndpoint {
    Convert,
    Mutate,
    Validate,
}

impl ReviewEndpoint {
    /// Every endpoint, for creating each series at zero.
    pub const ALL: [Self; 3] = [Self::Convert, Self::Mutate, Self::Validate];

    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Convert => "convert",
            Self::Mutate => "mutate",
            Self::Validate => "validate",
        }
    }
}

/// How a webhook request ended, as a metric label.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReviewOutcome {
    /// Admitted (possibly with a patch or warnings), or converted.
    Allowed,
    /// Denied by a rule.
    Denied,
    /// The review could not be answered as asked (wrong resource, conversion failure).
    Failed,
    /// The body was not a review: HTTP 400.
    Malformed,
}

impl ReviewOutcome {
    /// Every outcome, for creating each series at zero.
    pub const ALL: [Self; 4] = [Self::Allowed, Self::Denied, Self::Failed, Self::Malformed];

    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Allowed => "allowed",
            Self::Denied => "denied",
            Self::Failed => "failed",
            Self::Malformed => "malformed",
        }
    }
}

/// Receives what the handlers did. The operator's metrics implement it; the default does nothing.
pub trait WebhookObserver: Send + Sync {
    /// One request answered.
    fn request(&self, _endpoint: ReviewEndpoint, _outcome: ReviewOutcome, _latency: Duration) {}
    /// One denial, per violated rule (`trustyai_crds::validation::Rule::as_str`).
    fn denial(&self, _rule: &'static str) {}
    /// A successful conversion of `objects` objects to `desired_api_version`.
    fn conversion(&self, _desired_api_version: &str, _objects: usize) {}
}

/// An observer that records nothing.
#[derive(Debug, Default)]
pub struct NoObserver;
impl WebhookObserver for NoObserver {}

/// Tells whether a Secret exists, from the operator's cache (no API call on the request path).
pub trait SecretLookup: Send + Sync {
    /// `Some(exists)` when the cache knows the namespace; `None` skips the warning.
    fn exists(&self, namespace: &str, name: &str) -> Option<bool>;
}

/// Admission settings that can change while the operator runs (the operator ConfigMap).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AdmissionSettings {
    /// Prefixes `spec.image` must start with; empty allows no custom image.
    pub allowed_image_prefixes: Vec<String>,
}

/// State shared by the webhook handlers.
#[derive(Clone)]
pub struct WebhookState {
    /// Current admission settings; swapped atomically when the configuration changes.
    pub settings: Arc<ArcSwap<AdmissionSettings>>,
    /// Secret lookup for warnings, if the operator has a cache of Secrets.
    pub secrets: Option<Arc<dyn SecretLookup>>,
    /// Metrics.
    pub observer: Arc<dyn WebhookObserver>,
}

impl WebhookState {
    /// State with fixed settings, no Secret lookup and no observer.
    pub fn new(settings: AdmissionSettings) -> Self {
        Self {
            settings: Arc::new(ArcSwap::from_pointee(settings)),
            secrets: None,
            observer: Arc::new(NoObserver),
        }
    }
}
