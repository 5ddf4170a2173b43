use k8s_openapi::jiff::Timestamp;
use trustyai_crds::defaults::StorageMode;
use trustyai_crds::v1::Condition;

use super::*;
use crate::controller::db_secret::DbSecretError;

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

/// `(status, reason)` of a condition.
fn sr(status: &TrustyAIServiceStatus, type_: &str) -> (String, String) {
    let c = condition(status, type_).unwrap_or_else(|| panic!("no {type_} condition"));
    (c.status.clone(), c.reason.clone().unwrap_or_default())
}

fn pair(status: &str, reason: &str) -> (String, String) {
    (status.to_owned(), reason.to_owned())
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

#[test]
fn pvc_mode_all_ready() {
    let status = compute(None, &pvc_ready(), &at(100));
    assert_consistent(&status);
    assert_eq!(status.phase.as_deref(), Some("Ready"));
    assert_eq!(status.observed_generation, Some(3));
    assert_eq!(status.replicas, Some(1));
    assert_eq!(
        status.image.as_deref(),
        Some("quay.io/trustyai/trustyai-service:v1")
    );
    let types: Vec<_> = status
        .conditions
        .iter()
        .flatten()
        .map(|c| c.type_.as_str())
        .collect();
    assert_eq!(
        types,
        [
            "Ready",
            "Available",
            "ProvisioningSucceeded",
            "Degraded",
            "PVCAvailable",
            "RouteAvailable",
            "InferenceServicesPresent"
        ]
    );
    assert_eq!(sr(&status, "Ready"), pair("True", "AllComponentsReady"));
    assert_eq!(sr(&status, "Available"), pair("True", "AllComponentsReady"));
    assert_eq!(
        sr(&status, "ProvisioningSucceeded"),
        pair("True", "ProvisioningComplete")
    );
    assert_eq!(sr(&status, "Degraded"), pair("False", "FullyFunctional"));
    assert_eq!(sr(&status, "PVCAvailable"), pair("True", "PVCFound"));
    assert_eq!(sr(&status, "RouteAvailable"), pair("True", "RouteFound"));
    assert_eq!(
        sr(&status, "InferenceServicesPresent"),
        pair("True", "InferenceServicesFound")
    );
}

#[test]
fn route_not_supported_is_still_ready() {
    let observed = Observations {
        route: RouteObservation::NotSupported,
        inference_services_present: false,
        ..pvc_ready()
    };
    let status = compute(None, &observed, &at(100));
    assert_consistent(&status);
    assert_eq!(status.phase.as_deref(), Some("Ready"));
    assert_eq!(
        sr(&status, "RouteAvailable"),
        pair("False", "RouteNotSupported")
    );
    let message = condition(&status, "RouteAvailable")
        .and_then(|c| c.message.clone())
        .unwrap_or_default();
    assert!(message.contains("not served by this cluster"), "{message}");
    assert_eq!(
        sr(&status, "InferenceServicesPresent"),
        pair("False", "InferenceServicesNotFound")
    );
}

#[test]
fn unadmitted_or_missing_route_blocks_readiness() {
    for route in [RouteObservation::Missing, RouteObservation::NotAdmitted] {
        let status = compute(
            None,
            &Observations {
                route,
                ..pvc_ready()
            },
            &at(100),
        );
        assert_consistent(&status);
        assert_eq!(status.phase.as_deref(), Some("Not Ready"));
        assert_eq!(
            sr(&status, "RouteAvailable"),
            pair("False", "RouteNotFound")
        );
        assert_eq!(
            sr(&status, "Degraded"),
            pair("True", "PartialFunctionality")
        );
    }
}

#[test]
fn unbound_pvc_blocks_readiness() {
    let observed = Observations {
        pvc: Some(PvcObservation::Unbound {
            phase: Some("Pending".into()),
        }),
        ..pvc_ready()
    };
    let status = compute(None, &observed, &at(100));
    assert_consistent(&status);
    assert_eq!(sr(&status, "PVCAvailable"), pair("False", "PVCPending"));
    assert!(
        condition(&status, "PVCAvailable")
            .and_then(|c| c.message.as_deref())
            .is_some_and(|m| m.contains("Pending"))
    );
    let ready_message = condition(&status, "Ready")
        .and_then(|c| c.message.clone())
        .unwrap_or_default();
    assert!(
        ready_message.contains("PersistentVolumeClaim is not bound"),
        "{ready_message}"
    );
}

#[test]
fn nothing_exists_yet() {
    let observed = Observations {
        deployment: None,
        pvc: Some(PvcObservation::Missing),
        route: RouteObservation::Missing,
        ..pvc_ready()
    };
    let status = compute(None, &observed, &at(100));
    assert_consistent(&status);
    assert_eq!(status.replicas, Some(0));
    assert_eq!(sr(&status, "Degraded"), pair("True", "NoFunctionality"));
    assert_eq!(sr(&status, "Ready"), pair("False", "ComponentsNotReady"));
    assert_eq!(
        sr(&status, "Available"),
        pair("False", "NotAllComponentsReady")
    );
    assert_eq!(
        sr(&status, "ProvisioningSucceeded"),
        pair("False", "ProvisioningInProgress")
    );
}

#[test]
fn database_mode_ready() {
    let status = compute(None, &database_ready(), &at(100));
    assert_consistent(&status);
    assert_eq!(status.phase.as_deref(), Some("Ready"));
    assert_eq!(sr(&status, "DBAvailable"), pair("True", "DBAvailable"));
    assert!(condition(&status, "PVCAvailable").is_none());
}

#[test]
fn database_credentials_problems() {
    let cases = [
        (
            DbSecretError::NotFound {
                secret: "db".into(),
                namespace: "models".into(),
            },
            "DBCredentialsNotFound",
        ),
        (
            DbSecretError::MissingKey {
                secret: "db".into(),
                key: "databasePassword",
            },
            "DBCredentialsError",
        ),
        (
            DbSecretError::EmptyKey {
                secret: "db".into(),
                key: "databasePort",
            },
            "DBCredentialsError",
        ),
    ];
    for (error, reason) in cases {
        let observed = Observations {
            db_credentials: Some(Err(error.clone())),
            deployment: None,
            ..database_ready()
        };
        let status = compute(None, &observed, &at(100));
        assert_consistent(&status);
        assert_eq!(status.phase.as_deref(), Some("Not Ready"));
        assert_eq!(sr(&status, "DBAvailable"), pair("False", reason));
        assert_eq!(
            condition(&status, "DBAvailable").and_then(|c| c.message.clone()),
            Some(error.to_string())
        );
    }
}

#[test]
fn database_mode_is_not_always_a_connection_error() {
    let starting = Observations {
        deployment: Some(starting_deployment()),
        ..database_ready()
    };
    let status = compute(None, &starting, &at(100));
    assert_consistent(&status);
    assert_eq!(
        sr(&status, "DBAvailable"),
        pair("Unknown", "ProvisioningInProgress")
    );

    let failing = Observations {
        deployment: Some(DeploymentObservation {
            failing: true,
            ..starting_deployment()
        }),
        ..database_ready()
    };
    let status = compute(None, &failing, &at(100));
    assert_consistent(&status);
    assert_eq!(
        sr(&status, "DBAvailable"),
        pair("False", "DBConnectionError")
    );

    let unchecked = Observations {
        db_credentials: None,
        ..database_ready()
    };
    let status = compute(None, &unchecked, &at(100));
    assert_consistent(&status);
    assert_eq!(status.phase.as_deref(), Some("Not Ready"));
    assert_eq!(sr(&status, "DBAvailable").0, "Unknown");
}

#[test]
fn migration_needs_pvc_and_database() {
    let migration = Observations {
        mode: StorageMode::Migration,
        pvc: Some(PvcObservation::Bound),
        ..database_ready()
    };
    let status = compute(None, &migration, &at(100));
    assert_consistent(&status);
    assert_eq!(status.phase.as_deref(), Some("Ready"));
    assert_eq!(sr(&status, "PVCAvailable"), pair("True", "PVCFound"));
    assert_eq!(sr(&status, "DBAvailable"), pair("True", "DBAvailable"));

    let no_pvc = Observations {
        pvc: Some(PvcObservation::Missing),
        ..migration.clone()
    };
    assert_eq!(
        compute(None, &no_pvc, &at(100)).phase.as_deref(),
        Some("Not Ready")
    );
    let bad_db = Observations {
        db_credentials: Some(Err(DbSecretError::NotFound {
            secret: "db".into(),
            namespace: "models".into(),
        })),
        ..migration
    };
    assert_eq!(
        compute(None, &bad_db, &at(100)).phase.as_deref(),
        Some("Not Ready")
    );
}

#[test]
fn provisioning_error_keeps_it_not_ready() {
    let observed = Observations {
        provisioning_error: Some("applying Service tas: forbidden".into()),
        ..pvc_ready()
    };
    let status = compute(None, &observed, &at(100));
    assert_consistent(&status);
    assert_eq!(status.phase.as_deref(), Some("Not Ready"));
    assert!(
        condition(&status, "ProvisioningSucceeded")
            .and_then(|c| c.message.as_deref())
            .is_some_and(|m| m.contains("forbidden"))
    );
}

#[test]
fn a_refused_growth_is_reported_but_keeps_it_ready() {
    let observed = Observations {
        pvc_growth_refused: Some("it could not grow from 1Gi to 2Gi: not expandable".into()),
        ..pvc_ready()
    };
    let status = compute(None, &observed, &at(100));
    assert_consistent(&status);
    assert_eq!(status.phase.as_deref(), Some("Ready"));
    let pvc = condition(&status, "PVCAvailable").expect("PVCAvailable");
    assert_eq!(pvc.status, "True");
    assert_eq!(
        pvc.message.as_deref(),
        Some("PersistentVolumeClaim found; it could not grow from 1Gi to 2Gi: not expandable")
    );
}

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

#[test]
fn inapplicable_conditions_are_dropped_and_foreign_ones_kept() {
    let mut previous = compute(None, &pvc_ready(), &at(100));
    previous.conditions.get_or_insert_default().push(Condition {
        type_: "SomeoneElses".into(),
        status: "True".into(),
        ..Condition::default()
    });
    let now_database = compute(Some(&previous), &database_ready(), &at(200));
    assert!(condition(&now_database, "PVCAvailable").is_none());
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

#[test]
fn every_combination_is_consistent() {
    let deployments = [None, Some(ready_deployment()), Some(starting_deployment())];
    let pvcs = [
        None,
        Some(PvcObservation::Missing),
        Some(PvcObservation::Bound),
    ];
    let credentials = [
        None,
        Some(Ok(())),
        Some(Err(DbSecretError::NotFound {
            secret: "d".into(),
            namespace: "n".into(),
        })),
    ];
    let routes = [
        RouteObservation::NotSupported,
        RouteObservation::Missing,
        RouteObservation::NotAdmitted,
        RouteObservation::Admitted,
    ];
    for mode in [
        StorageMode::Pvc,
        StorageMode::Database,
        StorageMode::Migration,
    ] {
        for deployment in deployments {
            for pvc in &pvcs {
                for db in &credentials {
                    for route in routes {
                        let observed = Observations {
                            mode,
                            deployment,
                            pvc: pvc.clone(),
                            db_credentials: db.clone(),
                            route,
                            ..pvc_ready()
                        };
                        let status = compute(None, &observed, &at(100));
                        assert_consistent(&status);
                        assert_eq!(
                            condition(&status, "PVCAvailable").is_some(),
                            mode.uses_pvc()
                        );
                        assert_eq!(
                            condition(&status, "DBAvailable").is_some(),
                            mode.uses_database()
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn ready_names_what_the_pods_say_is_the_cause() {
    use super::pod_problem::PodProblem;
    let crashing = Observations {
        deployment: Some(DeploymentObservation {
            failing: true,
            ..starting_deployment()
        }),
        pod_problem: Some(PodProblem::Crashing {
            exit_code: 1,
            killed_for_memory: false,
            last_words: "Can't connect to server on 'nowhere'".into(),
        }),
        ..database_ready()
    };
    let status = compute(None, &crashing, &at(100));
    let ready = condition(&status, "Ready").expect("Ready");
    assert_eq!(ready.status, "False");
    assert_eq!(ready.reason.as_deref(), Some("ServiceCrashing"));
    let message = ready.message.clone().unwrap_or_default();
    assert!(
        message.contains("exits (code 1)")
            && message.contains("Can't connect to server on 'nowhere'"),
        "{message}"
    );
    // A cause the pods reported while the Deployment is ready again no longer counts.
    let recovered = Observations {
        pod_problem: crashing.pod_problem.clone(),
        ..database_ready()
    };
    let status = compute(None, &recovered, &at(100));
    assert_eq!(condition(&status, "Ready").expect("Ready").status, "True");
}

#[test]
fn a_held_java_image_is_a_condition_that_goes_once_it_is_no_longer_held() {
    let held = crate::controller::image_upgrade::Held {
        running: "quay.io/trustyai/trustyai-service:v1".into(),
        configured: "quay.io/opendatahub/odh-trustyai-service-py:v2".into(),
    };
    let first = compute(
        None,
        &Observations {
            image_held: Some(held.clone()),
            ..pvc_ready()
        },
        &at(100),
    );
    let c = condition(&first, "ImageUpgradeHeld").expect("the condition");
    assert_eq!(
        (c.status.as_str(), c.reason.as_deref()),
        ("True", Some("JavaServiceData"))
    );
    let message = c.message.clone().unwrap_or_default();
    assert_eq!(message, held.message());
    assert!(message.contains("odh-trustyai-service-py:v2"), "{message}");
    assert!(
        message.contains("trustyai.opendatahub.io/allow-service-image-upgrade=true"),
        "{message}"
    );
    // Held or not, the instance serves: readiness does not depend on it.
    assert_eq!(first.ready.as_deref(), Some("True"));

    let second = compute(Some(&first), &pvc_ready(), &at(100));
    assert!(condition(&second, "ImageUpgradeHeld").is_none());
}
