//! Warnings about broken certificate material, to be published as Kubernetes Events on the
//! Secret (so `kubectl describe secret` shows why it was regenerated).

use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, EventType, Recorder};

use crate::renewal::Reason;
use crate::rotation::CaReason;

/// Event action for every warning: what the operator did about it.
pub const WARNING_ACTION: &str = "RegenerateCertificate";

/// A Warning event to emit: something in the Secret was broken and has been regenerated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CertWarning {
    /// Event reason, PascalCase (`WebhookCAInvalid`, `WebhookCertificateInvalid`, …).
    pub reason: &'static str,
    /// Human-readable note.
    pub message: String,
}

impl CertWarning {
    /// The warning for a decision reason, if that reason deserves one.
    pub fn from_reason(reason: &Reason) -> Option<Self> {
        let code = match reason {
            Reason::Ca(CaReason::Unusable(_)) => "WebhookCAInvalid",
            Reason::ServingUnusable(_) => "WebhookCertificateInvalid",
            Reason::ServingUntrusted(_) => "WebhookCertificateUntrusted",
            Reason::Ca(CaReason::PreviousUnusable(_)) => "WebhookPreviousCAInvalid",
            _ => return None,
        };
        Some(Self {
            reason: code,
            message: reason.to_string(),
        })
    }
}

/// Publishes `warnings` as Warning events regarding `regarding` (the Secret). Failures to
/// publish are logged, never fatal: events are advisory.
pub async fn publish_warnings(
    recorder: &Recorder,
    regarding: &ObjectReference,
    warnings: &[CertWarning],
) {
    for warning in warnings {
        let event = Event {
            type_: EventType::Warning,
            reason: warning.reason.to_owned(),
            // The Events API caps the note at 1 kB.
            note: Some(warning.message.chars().take(1000).collect()),
            action: WARNING_ACTION.to_owned(),
            secondary: None,
        };
        if let Err(error) = recorder.publish(&event, regarding).await {
            tracing::warn!(
                error = &error as &dyn std::error::Error,
                reason = warning.reason,
                "could not publish a certificate warning event"
            );
        }
    }
}
