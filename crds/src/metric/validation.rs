//! Every rule of a TrustyAIMetric, checked at once: the admission webhook and the offline
//! `validate` report all of them together, each with its field path, in the API server's words
//! (`spec.outcomeName: Required value: ...`).

use std::fmt;

use serde_json::Value;

use super::kinds::{self, Family};
use super::types::{Bounds, TrustyAIMetric, TrustyAIMetricSpec};
use crate::validation::ErrorKind;

/// The kind, as denials name it.
pub const KIND: &str = "TrustyAIMetric";

/// One violated rule.
#[derive(Debug, Clone, PartialEq)]
pub struct MetricFieldError {
    /// Dotted field path, for example `spec.type`.
    pub field: String,
    /// What is wrong.
    pub kind: ErrorKind,
    /// The offending value, when showing it helps.
    pub value: Option<Value>,
    /// The rule.
    pub detail: String,
}

impl MetricFieldError {
    fn new(field: &str, kind: ErrorKind, value: Option<Value>, detail: impl Into<String>) -> Self {
        Self {
            field: field.to_owned(),
            kind,
            value,
            detail: detail.into(),
        }
    }
}

impl fmt::Display for MetricFieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.kind)?;
        if let Some(value) = &self.value {
            write!(f, ": {value}")?;
        }
        if !self.detail.is_empty() {
            write!(f, ": {}", self.detail)?;
        }
        Ok(())
    }
}

/// The denial message: `TrustyAIMetric.trustyai.opendatahub.io "x" is invalid: [e1, e2]`.
pub fn denial_message(name: &str, errors: &[MetricFieldError]) -> String {
    crate::validation::denial_message_of(KIND, name, errors)
}

/// Every rule the object breaks (empty: allowed). `object` is the whole object as the API
/// server holds it; an object that is not a TrustyAIMetric's shape at all gets one error that
/// names where.
pub fn validate_object(object: &Value) -> Vec<MetricFieldError> {
    match serde_json::from_value::<TrustyAIMetric>(object.clone()) {
        Ok(metric) => validate(&metric.spec),
        Err(e) => vec![MetricFieldError::new(
            "spec",
            ErrorKind::TypeInvalid,
            None,
            e.to_string(),
        )],
    }
}

/// Every rule `spec` breaks.
pub fn validate(spec: &TrustyAIMetricSpec) -> Vec<MetricFieldError> {
    let mut errors = Vec::new();
    if let Some(service) = &spec.service
        && !is_dns_label(service)
    {
        errors.push(MetricFieldError::new(
            "spec.service",
            ErrorKind::Invalid,
            Some(Value::from(service.as_str())),
            "must be the name of a TrustyAIService: a DNS label (lower case letters, digits and '-', at most 63)",
        ));
    }
    if spec.model.trim().is_empty() {
        errors.push(MetricFieldError::new(
            "spec.model",
            ErrorKind::Required,
            None,
            "the model's id, as its inferences reach the service",
        ));
    }
    if let Some(batch) = spec.batch_size
        && batch < 1
    {
        errors.push(MetricFieldError::new(
            "spec.batchSize",
            ErrorKind::Invalid,
            Some(Value::from(batch)),
            "must be at least 1",
        ));
    }
    match kinds::metric_type(&spec.type_) {
        Some(t) if t.family == Family::Fairness => fairness_rules(spec, &mut errors),
        Some(_) => drift_rules(spec, &mut errors),
        None => errors.push(unknown_type(&spec.type_)),
    }
    if let Some(bounds) = &spec.bounds {
        bounds_rules(bounds, &mut errors);
    }
    errors
}

/// A DNS-1035 label, as Service names (and so TrustyAIService names) are.
fn is_dns_label(name: &str) -> bool {
    let bytes = name.as_bytes();
    (1..=63).contains(&bytes.len())
        && bytes[0].is_ascii_lowercase()
        && bytes[bytes.len() - 1] != b'-'
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
}

fn unknown_type(name: &str) -> MetricFieldError {
    let known = kinds::names().join(", ");
    let detail = match kinds::alias_of(name) {
        Some(current) => {
            format!("{name:?} is the service's deprecated name of {current:?}: use {current:?}")
        }
        None => format!("supported values: {known}"),
    };
    MetricFieldError::new(
        "spec.type",
        ErrorKind::NotSupported,
        Some(Value::from(name)),
        detail,
    )
}

/// A parameter that only one family of metrics takes.
#[derive(Debug, Clone, Copy)]
pub struct FamilyParameter {
    /// The field under `spec`, as the API spells it.
    pub field: &'static str,
    /// The family that takes it; the other family's metrics refuse it.
    pub family: Family,
    /// What it is, when every metric of its family needs it (`None`: optional).
    pub needed_as: Option<&'static str>,
}

/// The family parameters. The webhook's rules below and the CRD's CEL rules
/// (`super::crd`) both come from this table, with the messages of [`required_detail`] and
/// [`forbidden_detail`].
pub const FAMILY_PARAMETERS: [FamilyParameter; 8] = [
    needed("protectedAttribute", "the input whose groups are compared"),
    needed("privilegedValue", "the privileged group's value"),
    needed("unprivilegedValue", "the unprivileged group's value"),
    needed("outcomeName", "the output the groups are compared on"),
    needed("favorableOutcome", "the favourable outcome's value"),
    optional("thresholdDelta", Family::Fairness),
    optional("referenceTag", Family::Drift),
    optional("fitColumns", Family::Drift),
];

const fn needed(field: &'static str, what: &'static str) -> FamilyParameter {
    FamilyParameter {
        field,
        family: Family::Fairness,
        needed_as: Some(what),
    }
}

const fn optional(field: &'static str, family: Family) -> FamilyParameter {
    FamilyParameter {
        field,
        family,
        needed_as: None,
    }
}

/// Why a missing parameter is refused: `fairness metrics need the output the groups are
/// compared on`.
pub fn required_detail(family: Family, what: &str) -> String {
    format!("{} metrics need {what}", family.name())
}

/// Why a parameter of the other family is refused: `only drift metrics (comparemeans, ...)
/// take it`.
pub fn forbidden_detail(family: Family) -> String {
    format!(
        "only {} metrics ({}) take it",
        family.name(),
        family.members().join(", ")
    )
}

/// The family parameters' rules for a metric of `family`: each one it needs present (a blank
/// string counts as missing; values are integers or strings), each one of the other family
/// absent.
fn family_rules(spec: &TrustyAIMetricSpec, family: Family, errors: &mut Vec<MetricFieldError>) {
    // The spec as the API server holds it: a parameter is set when its key is there.
    let fields = serde_json::to_value(spec).unwrap_or(Value::Null);
    for parameter in FAMILY_PARAMETERS {
        let path = format!("spec.{}", parameter.field);
        let value = fields.get(parameter.field);
        if parameter.family != family {
            if value.is_some() {
                errors.push(MetricFieldError::new(
                    &path,
                    ErrorKind::Forbidden,
                    None,
                    forbidden_detail(parameter.family),
                ));
            }
            continue;
        }
        let Some(what) = parameter.needed_as else {
            continue;
        };
        match value {
            None => {}
            Some(Value::String(text)) if text.trim().is_empty() => {}
            Some(Value::String(_)) => continue,
            Some(Value::Number(n)) if n.is_i64() || n.is_u64() => continue,
            Some(other) => {
                errors.push(MetricFieldError::new(
                    &path,
                    ErrorKind::TypeInvalid,
                    Some(other.clone()),
                    "must be an integer or a string",
                ));
                continue;
            }
        }
        errors.push(MetricFieldError::new(
            &path,
            ErrorKind::Required,
            None,
            required_detail(family, what),
        ));
    }
}

fn fairness_rules(spec: &TrustyAIMetricSpec, errors: &mut Vec<MetricFieldError>) {
    family_rules(spec, Family::Fairness, errors);
    if let (Some(p), Some(u)) = (&spec.privileged_value, &spec.unprivileged_value)
        && p == u
    {
        errors.push(MetricFieldError::new(
            "spec.unprivilegedValue",
            ErrorKind::Invalid,
            Some(u.clone()),
            "must differ from spec.privilegedValue",
        ));
    }
    if let Some(delta) = spec.threshold_delta
        && !(delta.is_finite() && delta >= 0.0)
    {
        errors.push(MetricFieldError::new(
            "spec.thresholdDelta",
            ErrorKind::Invalid,
            Some(Value::from(delta)),
            "must be a number of at least 0",
        ));
    }
}

fn drift_rules(spec: &TrustyAIMetricSpec, errors: &mut Vec<MetricFieldError>) {
    family_rules(spec, Family::Drift, errors);
    if let Some(columns) = &spec.fit_columns {
        for (i, column) in columns.iter().enumerate() {
            if column.trim().is_empty() {
                errors.push(MetricFieldError::new(
                    &format!("spec.fitColumns[{i}]"),
                    ErrorKind::Invalid,
                    Some(Value::from(column.as_str())),
                    "must name a column",
                ));
            }
        }
    }
}

fn bounds_rules(bounds: &Bounds, errors: &mut Vec<MetricFieldError>) {
    for (field, value) in [
        ("spec.bounds.lower", bounds.lower),
        ("spec.bounds.upper", bounds.upper),
    ] {
        if let Some(v) = value
            && !v.is_finite()
        {
            errors.push(MetricFieldError::new(
                field,
                ErrorKind::Invalid,
                None,
                "must be a finite number",
            ));
        }
    }
    if let (Some(lower), Some(upper)) = (bounds.lower, bounds.upper)
        && lower > upper
    {
        errors.push(MetricFieldError::new(
            "spec.bounds",
            ErrorKind::Invalid,
            None,
            format!("lower ({lower}) must not be above upper ({upper})"),
        ));
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn spec(value: Value) -> TrustyAIMetricSpec {
        serde_json::from_value(value).unwrap_or_else(|e| panic!("a spec: {e}"))
    }

    fn fields(errors: &[MetricFieldError]) -> Vec<&str> {
        errors.iter().map(|e| e.field.as_str()).collect()
    }

    pub(crate) fn spd() -> Value {
        json!({"model": "demo-model", "type": "spd", "protectedAttribute": "gender",
               "privilegedValue": 1, "unprivilegedValue": 0, "outcomeName": "income",
               "favorableOutcome": 1})
    }

    /// The fields refused in the complete SPD metric of [`spd`] with `edits` merged in.
    fn refused_fields_of_spd_with(edits: Value) -> Vec<String> {
        let mut value = spd();
        for (key, edit) in edits.as_object().into_iter().flatten() {
            value[key] = edit.clone();
        }
        fields(&validate(&spec(value)))
            .into_iter()
            .map(str::to_owned)
            .collect()
    }

    #[test]
    fn a_complete_fairness_metric_is_allowed() {
        assert_eq!(validate(&spec(spd())), vec![]);
    }

    #[test]
    fn a_fairness_metric_lists_every_missing_parameter() {
        let errors = validate(&spec(json!({"model": "m", "type": "dir"})));
        assert_eq!(
            fields(&errors),
            [
                "spec.protectedAttribute",
                "spec.privilegedValue",
                "spec.unprivilegedValue",
                "spec.outcomeName",
                "spec.favorableOutcome"
            ]
        );
        assert!(errors.iter().all(|e| e.kind == ErrorKind::Required));
    }

    #[test]
    fn an_unknown_type_is_refused_with_the_known_ones() {
        let errors = validate(&spec(json!({"model": "m", "type": "accuracy"})));
        let text = errors[0].to_string();
        assert!(
            text.starts_with("spec.type: Unsupported value: \"accuracy\""),
            "{text}"
        );
        for name in kinds::names() {
            assert!(text.contains(name), "{text}");
        }
    }

    #[test]
    fn a_deprecated_name_says_which_current_name_to_use() {
        let errors = validate(&spec(json!({"model": "m", "type": "meanshift"})));
        assert!(
            errors[0].detail.contains("use \"comparemeans\""),
            "{errors:?}"
        );
    }

    #[test]
    fn drift_metrics_refuse_fairness_parameters() {
        let mut value = spd();
        value["type"] = json!("kstest");
        value["referenceTag"] = json!("TRAINING");
        let errors = validate(&spec(value));
        assert_eq!(errors.len(), 5, "{errors:?}");
        assert!(errors.iter().all(|e| e.kind == ErrorKind::Forbidden));
    }

    #[test]
    fn fairness_metrics_refuse_drift_parameters() {
        let refused = refused_fields_of_spd_with(json!({"referenceTag": "TRAINING"}));
        assert_eq!(refused, ["spec.referenceTag"]);
    }

    #[test]
    fn group_values_are_integers_or_strings() {
        let refused =
            refused_fields_of_spd_with(json!({"privilegedValue": 1.5, "favorableOutcome": "yes"}));
        assert_eq!(refused, ["spec.privilegedValue"]);
    }

    #[test]
    fn the_two_group_values_differ() {
        let refused = refused_fields_of_spd_with(json!({"unprivilegedValue": 1}));
        assert_eq!(refused, ["spec.unprivilegedValue"]);
    }

    #[test]
    fn bounds_are_ordered() {
        let refused = refused_fields_of_spd_with(json!({"bounds": {"lower": 0.5, "upper": -0.5}}));
        assert_eq!(refused, ["spec.bounds"]);
    }

    #[test]
    fn every_error_is_reported_at_once() {
        let errors = validate(&spec(
            json!({"service": "Not_A_Label", "model": "", "type": "spd",
            "batchSize": 0, "thresholdDelta": -1.0}),
        ));
        assert_eq!(errors.len(), 3 + 5 + 1, "{errors:?}");
        let message = denial_message("m", &errors);
        assert!(
            message.starts_with(
                "TrustyAIMetric.trustyai.opendatahub.io \"m\" is invalid: [spec.service"
            ),
            "{message}"
        );
    }

    #[test]
    fn an_object_of_the_wrong_shape_names_where() {
        let errors = validate_object(
            &json!({"metadata": {"name": "m"}, "spec": {"model": 3, "type": "spd"}}),
        );
        assert_eq!(fields(&errors), ["spec"]);
        assert!(
            errors[0].detail.contains("model") || errors[0].detail.contains("string"),
            "{errors:?}"
        );
    }
}
