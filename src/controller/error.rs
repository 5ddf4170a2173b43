//! Why a reconcile failed, with a bounded [`category`](ReconcileError::category) for metrics
//! labels and event reasons (never the object name or the error text, which are unbounded).

use trustyai_certs::ApiCallError;

use crate::controller::resources::BuildError;

/// A failed reconcile of one TrustyAIService.
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    /// The spec cannot be rendered (an invalid size, an unknown storage format, …). Retrying
    /// does not help until the spec changes, but the backoff keeps it cheap.
    #[error("the spec cannot be rendered")]
    Build(#[from] BuildError),
    /// A call to the API server failed.
    #[error(transparent)]
    Kube(#[from] ApiCallError),
    /// An object could not be turned into a request body.
    #[error("encoding {what}")]
    Encode {
        /// What was being encoded.
        what: &'static str,
        /// The serde error.
        #[source]
        source: serde_json::Error,
    },
    /// The operand certificates could not be issued.
    #[error("operand certificates")]
    Certificates(#[from] trustyai_certs::operand_serving::OperandServingError),
}

impl ReconcileError {
    /// A `kube` error while doing `action` on `kind` `name`.
    pub fn kube(
        action: &'static str,
        kind: &'static str,
        name: impl Into<String>,
    ) -> impl FnOnce(kube::Error) -> Self {
        let call = ApiCallError::on(action, kind, name);
        move |source| Self::Kube(call(source))
    }

    /// Every value [`category`](Self::category) returns.
    pub const CATEGORIES: [&'static str; 8] = [
        "InvalidSpec",
        "Conflict",
        "Forbidden",
        "Rejected",
        "ApiError",
        "ApiUnreachable",
        "EncodingFailed",
        "CertificatesFailed",
    ];

    /// A short PascalCase label from a fixed set, for metrics and event reasons.
    pub fn category(&self) -> &'static str {
        match self {
            Self::Build(_) => "InvalidSpec",
            Self::Kube(_) if self.is_conflict() => "Conflict",
            Self::Kube(call) => match call.source.as_ref() {
                kube::Error::Api(status) if status.code == 403 => "Forbidden",
                kube::Error::Api(status) if status.code == 422 => "Rejected",
                kube::Error::Api(_) => "ApiError",
                _ => "ApiUnreachable",
            },
            Self::Encode { .. } => "EncodingFailed",
            Self::Certificates(_) => "CertificatesFailed",
        }
    }

    /// The API server's message when it refused the request itself (403 Forbidden by an
    /// admission plugin or RBAC, 422 Invalid), as opposed to failing to answer.
    pub fn refusal(&self) -> Option<&str> {
        match self {
            Self::Kube(call) => match call.source.as_ref() {
                kube::Error::Api(status) if matches!(status.code, 403 | 422) => {
                    Some(status.message.as_str())
                }
                _ => None,
            },
            _ => None,
        }
    }

    /// A write lost an optimistic-concurrency race (HTTP 409 Conflict): someone else changed
    /// the object in between. Not a failure worth a warning: the next pass reads again.
    pub fn is_conflict(&self) -> bool {
        matches!(self, Self::Kube(call)
            if matches!(call.source.as_ref(), kube::Error::Api(status)
                if status.code == 409 && !status.is_already_exists()))
    }
}

/// Whether `error` is the API server's 404 Not Found. By code: a 404 from a path the API
/// server does not serve (discovery of an absent group) carries no parseable reason, and
/// `Status::is_not_found` then answers false.
pub fn is_not_found(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == 404)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api_error(code: u16, reason: &str) -> kube::Error {
        kube::Error::Api(Box::new(
            kube::core::Status::failure("boom", reason).with_code(code),
        ))
    }

    fn conflict() -> ReconcileError {
        ReconcileError::kube("applying", "Deployment", "tas")(api_error(409, "Conflict"))
    }

    fn forbidden() -> ReconcileError {
        ReconcileError::kube("reading", "Secret", "x")(api_error(403, "Forbidden"))
    }

    fn invalid() -> ReconcileError {
        ReconcileError::kube("applying", "PVC", "x")(api_error(422, "Invalid"))
    }

    fn already_exists() -> ReconcileError {
        ReconcileError::kube("creating", "Secret", "x")(api_error(409, "AlreadyExists"))
    }

    #[test]
    fn only_a_409_other_than_already_exists_is_a_conflict() {
        assert!(conflict().is_conflict());
        assert!(!forbidden().is_conflict());
        assert!(!already_exists().is_conflict());
    }

    #[test]
    fn errors_are_categorised_by_their_cause() {
        assert_eq!(conflict().category(), "Conflict");
        assert_eq!(forbidden().category(), "Forbidden");
        assert_eq!(invalid().category(), "Rejected");
        assert_eq!(
            ReconcileError::Build(BuildError::MissingMetadata("uid")).category(),
            "InvalidSpec"
        );
    }

    #[test]
    fn only_a_404_is_not_found_whatever_its_reason() {
        assert!(is_not_found(&api_error(404, "NotFound")));
        assert!(is_not_found(&api_error(404, "Failed to parse error data")));
        assert!(!is_not_found(&api_error(409, "Conflict")));
    }

    #[test]
    fn every_category_is_one_of_the_bounded_set() {
        let encode = ReconcileError::Encode {
            what: "x",
            source: serde_json::from_str::<u8>("x").expect_err("not a number"),
        };
        for error in [
            conflict(),
            forbidden(),
            invalid(),
            already_exists(),
            encode,
            ReconcileError::kube("reading", "Secret", "x")(api_error(500, "InternalError")),
            ReconcileError::Certificates(trustyai_certs::operand_serving::OperandServingError::Ca(
                trustyai_certs::operand_ca::OperandCaError::Contended {
                    namespace: "ops".into(),
                    name: "ca".into(),
                },
            )),
        ] {
            assert!(
                ReconcileError::CATEGORIES.contains(&error.category()),
                "{}",
                error.category()
            );
        }
    }

    #[test]
    fn refusals_are_the_api_servers_own_answers() {
        for (code, refused) in [(403, true), (422, true), (409, false), (500, false)] {
            let error = ReconcileError::kube("applying", "PVC", "x")(api_error(code, "Reason"));
            assert_eq!(error.refusal(), refused.then_some("boom"), "{code}");
        }
        assert!(
            ReconcileError::Certificates(trustyai_certs::operand_serving::OperandServingError::Ca(
                trustyai_certs::operand_ca::OperandCaError::Contended {
                    namespace: "ops".into(),
                    name: "ca".into(),
                },
            ))
            .refusal()
            .is_none()
        );
    }
}
