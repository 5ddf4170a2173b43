//! A status computed over the previous one: transition times move only on flips, foreign
//! conditions are kept, the Go operator's status is rewritten once, the image falls back.

use trustyai_crds::v1::Condition;

use super::*;

#[test]
fn transition_times_move_only_on_flips() {
    let starting = Observations {
        deployment: Some(starting_deployment()),
        ..pvc_ready()
    };
    let first = compute(None, &starting, &at(100));
    assert!(changed(None, &first));

    let same = compute(Some(&first), &starting, &at(200));
    assert_eq!(same, first);
    assert!(!changed(Some(&first), &same));

    let ready = compute(Some(&same), &pvc_ready(), &at(300));
    assert!(changed(Some(&same), &ready));
    assert_consistent(&ready);
    let ltt = |s: &TrustyAIServiceStatus, t: &str| {
        condition(s, t).and_then(|c| c.last_transition_time.clone())
    };
    for flipped in ["Ready", "Available", "ProvisioningSucceeded", "Degraded"] {
        assert_eq!(ltt(&ready, flipped), Some(at(300)), "{flipped}");
    }
    for steady in ["PVCAvailable", "RouteAvailable", "InferenceServicesPresent"] {
        assert_eq!(ltt(&ready, steady), Some(at(100)), "{steady}");
    }
    assert!(!changed(
        Some(&ready),
        &compute(Some(&ready), &pvc_ready(), &at(400))
    ));
}

#[test]
fn message_change_without_flip_keeps_the_transition_time() {
    let one = Observations {
        deployment: Some(DeploymentObservation {
            desired_replicas: 3,
            ready_replicas: 1,
            ..ready_deployment()
        }),
        ..pvc_ready()
    };
    let two = Observations {
        deployment: Some(DeploymentObservation {
            desired_replicas: 3,
            ready_replicas: 2,
            ..ready_deployment()
        }),
        ..pvc_ready()
    };
    let first = compute(None, &one, &at(100));
    let second = compute(Some(&first), &two, &at(200));
    assert!(changed(Some(&first), &second));
    assert_eq!(second.replicas, Some(2));
    let ready = condition(&second, "Ready").expect("Ready");
    assert_eq!(ready.last_transition_time, Some(at(100)));
    assert!(
        ready
            .message
            .as_deref()
            .is_some_and(|m| m.contains("2 of 3"))
    );
}

#[test]
fn generation_bump_is_a_change() {
    let first = compute(None, &pvc_ready(), &at(100));
    let bumped = Observations {
        generation: Some(4),
        ..pvc_ready()
    };
    let second = compute(Some(&first), &bumped, &at(200));
    assert!(changed(Some(&first), &second));
    assert_eq!(second.observed_generation, Some(4));
    assert!(
        second
            .conditions
            .iter()
            .flatten()
            .all(|c| c.observed_generation == Some(4))
    );
    assert_eq!(
        condition(&second, "Ready").and_then(|c| c.last_transition_time.clone()),
        Some(at(100))
    );
}

/// The status once a PVC-mode TrustyAIService, whose status also holds a condition of
/// someone else's, is observed in database mode.
fn pvc_status_with_a_foreign_condition_now_database() -> TrustyAIServiceStatus {
    let mut previous = compute(None, &pvc_ready(), &at(100));
    previous.conditions.get_or_insert_default().push(Condition {
        type_: "SomeoneElses".into(),
        status: "True".into(),
        ..Condition::default()
    });
    compute(Some(&previous), &database_ready(), &at(200))
}

#[test]
fn inapplicable_conditions_are_dropped() {
    let now_database = pvc_status_with_a_foreign_condition_now_database();
    assert!(condition(&now_database, "PVCAvailable").is_none());
}

#[test]
fn foreign_conditions_are_kept_at_the_end() {
    let now_database = pvc_status_with_a_foreign_condition_now_database();
    assert!(condition(&now_database, "SomeoneElses").is_some());
    assert_eq!(
        now_database
            .conditions
            .as_ref()
            .and_then(|c| c.last())
            .map(|c| c.type_.as_str()),
        Some("SomeoneElses")
    );
}

#[test]
fn go_written_status_is_rewritten_once() {
    // The Go operator's status: no observedGeneration on conditions, Ready=True left behind
    // while phase says Not Ready.
    let go: TrustyAIServiceStatus = serde_json::from_value(serde_json::json!({
        "phase": "Not Ready",
        "ready": "False",
        "conditions": [
            {"type": "Ready", "status": "True", "reason": "AllComponentsReady",
             "message": "All service components are ready", "lastTransitionTime": "2024-01-01T00:00:00Z"},
            {"type": "RouteAvailable", "status": "False", "reason": "RouteNotFound",
             "message": "Route not found", "lastTransitionTime": "2024-01-01T00:00:00Z"}
        ]
    }))
    .unwrap_or_default();
    let observed = Observations {
        route: RouteObservation::Missing,
        ..pvc_ready()
    };
    let first = compute(Some(&go), &observed, &at(100));
    assert!(changed(Some(&go), &first));
    assert_consistent(&first);
    assert_eq!(sr(&first, "Ready").0, "False");
    assert_eq!(
        condition(&first, "RouteAvailable").and_then(|c| c.last_transition_time.clone()),
        condition(&go, "RouteAvailable").and_then(|c| c.last_transition_time.clone())
    );
    assert!(!changed(
        Some(&first),
        &compute(Some(&first), &observed, &at(200))
    ));
}

#[test]
fn image_falls_back_to_the_previous_one() {
    let first = compute(None, &pvc_ready(), &at(100));
    let second = compute(
        Some(&first),
        &Observations {
            image: None,
            ..pvc_ready()
        },
        &at(200),
    );
    assert_eq!(second.image, first.image);
}
