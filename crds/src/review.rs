//! What admission makes of one TrustyAIService, in one place for the webhooks and the offline
//! `validate`: the object converted to v1 (the version every rule is written for; the API
//! server hands the webhooks v1 through `matchPolicy: Equivalent`), defaulted when the step
//! being played defaults, then judged against every rule.
//!
//! `validate` plays the whole chain ([`AdmissionStep::Default`]). The webhooks judge what they hold
//! ([`AdmissionStep::JudgeAsIs`]): the validating one runs after the defaulting one, and an object that
//! skipped defaulting must not pass for one that did; the defaulting one has already defaulted,
//! in the request's version, because its JSON patch must be in that version.

use std::borrow::Cow;

use serde_json::Value;

use crate::conversion::{ConversionError, in_storage_version};
use crate::defaults::{Operation, defaulted};
use crate::validation::{ValidationContext, Verdict, validate};

/// Which admission step is being played.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdmissionStep {
    /// Default for `Operation`, then judge (`validate`, which plays the whole chain).
    Default(Operation),
    /// Judge the object as it is (the webhooks).
    JudgeAsIs,
}

/// The object in v1 as judged, and the verdict.
#[derive(Debug)]
pub struct Reviewed<'a> {
    /// The object in v1, defaulted when the step defaults.
    pub object: Cow<'a, Value>,
    /// Every violated rule, and the warnings.
    pub verdict: Verdict,
}

/// Converts `object` and `old` (the stored object on UPDATE, `None` on CREATE; either version)
/// to v1, defaults `object` if `step` says so, and judges it. Fails only when one of them does
/// not convert (it is not a TrustyAIService of a served version, or is malformed where
/// conversion reads it).
pub fn review<'a>(
    object: &'a Value,
    old: Option<&Value>,
    step: AdmissionStep,
    ctx: &ValidationContext<'_>,
) -> Result<Reviewed<'a>, ConversionError> {
    let new = in_storage_version(object)?;
    let old = old.map(in_storage_version).transpose()?;
    let object = match step {
        AdmissionStep::Default(operation) => Cow::Owned(defaulted(&new, operation)),
        AdmissionStep::JudgeAsIs => new,
    };
    let verdict = validate(&object, old.as_deref(), ctx);
    Ok(Reviewed { object, verdict })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn context() -> ValidationContext<'static> {
        ValidationContext {
            allowed_image_prefixes: Vec::new(),
            secret_exists: None,
        }
    }

    fn alpha(spec: Value) -> Value {
        json!({
            "apiVersion": "trustyai.opendatahub.io/v1alpha1", "kind": "TrustyAIService",
            "metadata": {"name": "t", "namespace": "ns"}, "spec": spec
        })
    }

    fn minimal_spec() -> Value {
        json!({
            "storage": {"format": "PVC", "folder": "/inputs", "size": "1Gi"},
            "data": {"filename": "data.csv", "format": "CSV"},
            "metrics": {"schedule": "5s"}
        })
    }

    /// `object` reviewed as a create, defaults included.
    fn reviewed_at_create(object: &Value) -> Reviewed<'_> {
        review(
            object,
            None,
            AdmissionStep::Default(Operation::Create),
            &context(),
        )
        .expect("converts")
    }

    #[test]
    fn a_v1alpha1_object_is_defaulted_in_v1_when_the_step_defaults() {
        let object = alpha(minimal_spec());
        let defaulted = reviewed_at_create(&object);
        assert_eq!(defaulted.object["apiVersion"], "trustyai.opendatahub.io/v1");
        assert_eq!(defaulted.object["spec"]["replicas"], 1);
        assert!(defaulted.verdict.is_allowed(), "{:?}", defaulted.verdict);
    }

    #[test]
    fn a_v1alpha1_object_judged_as_is_is_converted_to_v1_without_defaults() {
        let object = alpha(minimal_spec());
        let as_is = review(&object, None, AdmissionStep::JudgeAsIs, &context()).expect("converts");
        assert_eq!(as_is.object["apiVersion"], "trustyai.opendatahub.io/v1");
        assert!(as_is.object["spec"].get("replicas").is_none());
    }

    #[test]
    fn violations_are_named_by_field_whatever_the_version() {
        let mut spec = minimal_spec();
        spec["metrics"]["schedule"] = json!("500ms");
        let object = alpha(spec);
        let reviewed = reviewed_at_create(&object);
        assert!(
            reviewed
                .verdict
                .errors
                .iter()
                .any(|e| e.field == "spec.metrics.schedule"),
            "{:?}",
            reviewed.verdict.errors
        );
    }

    #[test]
    fn an_object_of_another_version_is_a_conversion_error() {
        let mut object = alpha(minimal_spec());
        object["apiVersion"] = json!("trustyai.opendatahub.io/v2");
        assert!(review(&object, None, AdmissionStep::JudgeAsIs, &context()).is_err());
    }
}
