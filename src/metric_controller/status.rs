//! A TrustyAIMetric's next status, pure: from the previous status, the registrations, and the
//! value read this time. A condition keeps its `lastTransitionTime` until its status changes,
//! and `value`/`readAt` change only with the value, so an unchanged metric gives an identical
//! status (and no write).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use trustyai_crds::metric::conditions::{REGISTERED, WITHIN_BOUNDS};
use trustyai_crds::metric::request::within;
use trustyai_crds::metric::types::{Bounds, Registration, TrustyAIMetricStatus};
use trustyai_crds::v1::Condition;

/// Where the metric stands with its service.
#[derive(Debug, Clone, PartialEq)]
pub enum Standing {
    /// Scheduled in every ready process.
    Registered,
    /// No TrustyAIService to compute it.
    ServiceNotFound(String),
    /// The service has no ready pod, or is being deleted.
    ServiceNotReady(String),
    /// A registration failed.
    RegistrationFailed(String),
}

impl Standing {
    fn condition(&self) -> (&'static str, &'static str, String) {
        match self {
            Self::Registered => (
                "True",
                "Registered",
                "scheduled in every ready pod of the service".to_owned(),
            ),
            Self::ServiceNotFound(m) => ("False", "ServiceNotFound", m.clone()),
            Self::ServiceNotReady(m) => ("False", "ServiceNotReady", m.clone()),
            Self::RegistrationFailed(m) => ("False", "RegistrationFailed", m.clone()),
        }
    }
}

/// What a reconcile learnt.
#[derive(Debug, Clone, PartialEq)]
pub struct Observed {
    /// The spec generation.
    pub generation: i64,
    /// The TrustyAIService, when one was named or found.
    pub service: Option<String>,
    /// The metric's `requestName` in the service.
    pub request_name: String,
    /// The registrations now.
    pub registrations: Vec<Registration>,
    /// Where the metric stands.
    pub standing: Standing,
    /// The value read this time, if any process reported one.
    pub value: Option<f64>,
    /// The range values are judged by.
    pub bounds: Option<Bounds>,
}

/// A change of the `WithinBounds` condition worth an event.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum BoundsChange {
    /// The value left its bounds (or was out of them at the first reading).
    Left(f64),
    /// The value came back within bounds after being out of them.
    Returned(f64),
}

/// The next status, and the change of `WithinBounds` it makes, if any.
pub fn next(
    previous: Option<&TrustyAIMetricStatus>,
    observed: &Observed,
    now: &Time,
) -> (TrustyAIMetricStatus, Option<BoundsChange>) {
    let previous = previous.cloned().unwrap_or_default();
    let (value, read_at) = match observed.value {
        Some(v) if previous.value.is_some_and(|p| p.to_bits() == v.to_bits()) => {
            (Some(v), previous.read_at.clone())
        }
        Some(v) if v.is_finite() => (Some(v), Some(now.clone())),
        _ => (previous.value, previous.read_at.clone()),
    };
    let judged = match (&observed.bounds, value) {
        (Some(bounds), Some(v)) => Some(within(bounds, v)),
        _ => None,
    };
    let (bounds_status, bounds_reason, bounds_message) = match (judged, value, &observed.bounds) {
        (Some(true), Some(v), _) => (
            "True",
            "WithinBounds",
            format!("{v} is within {}", range(observed.bounds.as_ref())),
        ),
        (Some(false), Some(v), _) => (
            "False",
            "OutsideBounds",
            format!("{v} is outside {}", range(observed.bounds.as_ref())),
        ),
        (_, _, None) => (
            "Unknown",
            "NoBounds",
            "no bounds: set spec.bounds to judge this metric".to_owned(),
        ),
        _ => (
            "Unknown",
            "NoValueYet",
            "the service has not reported a value yet".to_owned(),
        ),
    };
    let was_within = condition_status(&previous, WITHIN_BOUNDS);
    let change = match (was_within.as_deref(), judged, value) {
        (Some("True") | Some("Unknown") | None, Some(false), Some(v)) => {
            Some(BoundsChange::Left(v))
        }
        (Some("False"), Some(true), Some(v)) => Some(BoundsChange::Returned(v)),
        _ => None,
    };
    let (reg_status, reg_reason, reg_message) = observed.standing.condition();
    let mut conditions = previous.conditions.clone().unwrap_or_default();
    set(
        &mut conditions,
        REGISTERED,
        reg_status,
        reg_reason,
        &reg_message,
        observed.generation,
        now,
    );
    set(
        &mut conditions,
        WITHIN_BOUNDS,
        bounds_status,
        bounds_reason,
        &bounds_message,
        observed.generation,
        now,
    );
    let status = TrustyAIMetricStatus {
        observed_generation: Some(observed.generation),
        service: observed.service.clone(),
        request_name: Some(observed.request_name.clone()),
        value,
        read_at,
        bounds: observed.bounds,
        within_bounds: (bounds_status != "Unknown").then(|| bounds_status.to_owned()),
        registrations: observed.registrations.clone(),
        conditions: Some(conditions),
    };
    (status, change)
}

fn condition_status(status: &TrustyAIMetricStatus, type_: &str) -> Option<String> {
    status
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| c.status.clone())
}

/// `[lower, upper]` with `-inf`/`+inf` for an open end.
pub fn range(bounds: Option<&Bounds>) -> String {
    let end = |v: Option<f64>, open: &str| v.map_or_else(|| open.to_owned(), |v| v.to_string());
    match bounds {
        Some(b) => format!("[{}, {}]", end(b.lower, "-inf"), end(b.upper, "+inf")),
        None => "no bounds".to_owned(),
    }
}

fn set(
    conditions: &mut Vec<Condition>,
    type_: &str,
    status: &str,
    reason: &str,
    message: &str,
    generation: i64,
    now: &Time,
) {
    let next = |last_transition_time| Condition {
        type_: type_.to_owned(),
        status: status.to_owned(),
        observed_generation: Some(generation),
        last_transition_time,
        reason: Some(reason.to_owned()),
        message: Some(message.to_owned()),
    };
    match conditions.iter_mut().find(|c| c.type_ == type_) {
        Some(c) if c.status == status => *c = next(c.last_transition_time.clone()),
        Some(c) => *c = next(Some(now.clone())),
        None => conditions.push(next(Some(now.clone()))),
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::jiff::Timestamp;

    use super::*;

    fn at(seconds: i64) -> Time {
        Time(Timestamp::from_second(seconds).unwrap_or_default())
    }

    fn observed(value: Option<f64>) -> Observed {
        Observed {
            generation: 1,
            service: Some("demo".into()),
            request_name: "ns/m".into(),
            registrations: vec![],
            standing: Standing::Registered,
            value,
            bounds: Some(Bounds {
                lower: Some(-0.1),
                upper: Some(0.1),
            }),
        }
    }

    fn condition<'a>(status: &'a TrustyAIMetricStatus, type_: &str) -> &'a Condition {
        status
            .conditions
            .as_ref()
            .and_then(|c| c.iter().find(|c| c.type_ == type_))
            .unwrap_or_else(|| panic!("{type_} in {status:?}"))
    }

    #[test]
    fn a_first_value_outside_bounds_is_a_change() {
        let (status, change) = next(None, &observed(Some(-0.3)), &at(10));
        assert_eq!(change, Some(BoundsChange::Left(-0.3)));
        assert_eq!(status.within_bounds.as_deref(), Some("False"));
        assert_eq!(
            condition(&status, WITHIN_BOUNDS).reason.as_deref(),
            Some("OutsideBounds")
        );
        assert_eq!(status.read_at, Some(at(10)));
    }

    #[test]
    fn an_unchanged_reading_gives_an_identical_status() {
        let (first, _) = next(None, &observed(Some(-0.3)), &at(10));
        let (second, change) = next(Some(&first), &observed(Some(-0.3)), &at(20));
        assert_eq!(second, first);
        assert_eq!(change, None);
    }

    #[test]
    fn returning_within_bounds_is_a_change() {
        let (first, _) = next(None, &observed(Some(-0.3)), &at(10));
        let mut wider = observed(Some(-0.3));
        wider.bounds = Some(Bounds {
            lower: Some(-0.5),
            upper: Some(0.5),
        });
        let (second, change) = next(Some(&first), &wider, &at(20));
        assert_eq!(change, Some(BoundsChange::Returned(-0.3)));
        assert_eq!(
            condition(&second, WITHIN_BOUNDS).last_transition_time,
            Some(at(20))
        );
        assert_eq!(
            condition(&second, REGISTERED).last_transition_time,
            Some(at(10))
        );
    }

    #[test]
    fn no_reading_keeps_the_last_value() {
        let (first, _) = next(None, &observed(Some(0.05)), &at(10));
        let mut lost = observed(None);
        lost.standing = Standing::ServiceNotReady("no ready pod".into());
        let (second, change) = next(Some(&first), &lost, &at(20));
        assert_eq!(second.value, Some(0.05));
        assert_eq!(change, None);
        assert_eq!(condition(&second, REGISTERED).status, "False");
        assert_eq!(
            condition(&second, REGISTERED).reason.as_deref(),
            Some("ServiceNotReady")
        );
    }

    #[test]
    fn without_bounds_the_metric_is_reported_not_judged() {
        let mut drift = observed(Some(0.7));
        drift.bounds = None;
        let (status, change) = next(None, &drift, &at(10));
        assert_eq!(status.within_bounds, None);
        assert_eq!(
            condition(&status, WITHIN_BOUNDS).reason.as_deref(),
            Some("NoBounds")
        );
        assert_eq!(change, None);
    }

    #[test]
    fn ranges_read_as_intervals() {
        assert_eq!(
            range(Some(&Bounds {
                lower: Some(-0.1),
                upper: None
            })),
            "[-0.1, +inf]"
        );
    }
}
