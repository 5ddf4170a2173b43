//! Tests of `compute` and `changed`: the status written for what was observed. The
//! observations and condition readers the test modules share are here.

use k8s_openapi::jiff::Timestamp;
use trustyai_crds::defaults::StorageMode;
use trustyai_crds::v1::Condition;

use super::*;

mod database;
mod readiness;
mod transitions;

#[allow(clippy::expect_used)]
fn at(seconds: i64) -> Time {
    Time(Timestamp::from_second(seconds).expect("timestamp"))
}

fn ready_deployment() -> DeploymentObservation {
    DeploymentObservation {
        desired_replicas: 1,
        ready_replicas: 1,
        available: true,
        up_to_date: true,
        failing: false,
    }
}

fn starting_deployment() -> DeploymentObservation {
    DeploymentObservation {
        ready_replicas: 0,
        available: false,
        ..ready_deployment()
    }
}

fn pvc_ready() -> Observations {
    Observations {
        generation: Some(3),
        mode: StorageMode::Pvc,
        deployment: Some(ready_deployment()),
        pvc: Some(PvcObservation::Bound),
        db_credentials: None,
        route: RouteObservation::Admitted,
        inference_services_present: true,
        image: Some("quay.io/trustyai/trustyai-service:v1".into()),
        image_held: None,
        provisioning_error: None,
        pvc_growth_refused: None,
        pod_problem: None,
    }
}

fn database_ready() -> Observations {
    Observations {
        mode: StorageMode::Database,
        pvc: None,
        db_credentials: Some(Ok(())),
        ..pvc_ready()
    }
}

fn condition<'a>(status: &'a TrustyAIServiceStatus, type_: &str) -> Option<&'a Condition> {
    status
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
}

/// The message of a condition; empty without one.
fn message<'a>(status: &'a TrustyAIServiceStatus, type_: &str) -> &'a str {
    condition(status, type_)
        .and_then(|c| c.message.as_deref())
        .unwrap_or_default()
}

/// `(status, reason)` of a condition.
fn sr(status: &TrustyAIServiceStatus, type_: &str) -> (String, String) {
    let c = condition(status, type_).unwrap_or_else(|| panic!("no {type_} condition"));
    (c.status.clone(), c.reason.clone().unwrap_or_default())
}

/// Asserts that the `type_` condition of `status` has `expected_status` and `reason`.
#[track_caller]
fn assert_condition(
    status: &TrustyAIServiceStatus,
    type_: &str,
    expected_status: &str,
    reason: &str,
) {
    assert_eq!(
        sr(status, type_),
        (expected_status.to_owned(), reason.to_owned())
    );
}

/// The first status computed for `observed`, checked with [`assert_consistent`].
#[track_caller]
fn first_status(observed: &Observations) -> TrustyAIServiceStatus {
    let status = compute(None, observed, &at(100));
    assert_consistent(&status);
    status
}

/// Every field that says "ready" agrees.
fn assert_consistent(status: &TrustyAIServiceStatus) {
    let ready = status.phase.as_deref() == Some("Ready");
    if !ready {
        assert_eq!(status.phase.as_deref(), Some("Not Ready"));
    }
    let expected = if ready { "True" } else { "False" };
    assert_eq!(status.ready.as_deref(), Some(expected));
    assert_eq!(sr(status, "Ready").0, expected);
    assert_eq!(sr(status, "Available").0, expected);
    assert_eq!(sr(status, "ProvisioningSucceeded").0, expected);
    assert_eq!(
        sr(status, "Degraded").0,
        if ready { "False" } else { "True" }
    );
    for c in status.conditions.iter().flatten() {
        assert_eq!(
            c.observed_generation, status.observed_generation,
            "{}",
            c.type_
        );
        assert!(c.last_transition_time.is_some());
        assert!(c.reason.is_some() && c.message.is_some());
    }
}
