//! Readiness: which missing or failing part keeps the service not ready (and which does not: no
//! Route API, a refused growth), the pods' cause, a held image, and every combination consistent.

use trustyai_crds::defaults::StorageMode;

use super::*;
use crate::controller::db_secret::DbSecretError;

#[test]
fn pvc_mode_all_ready() {
    let status = first_status(&pvc_ready());
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
    assert_condition(&status, "Ready", "True", "AllComponentsReady");
    assert_condition(&status, "Available", "True", "AllComponentsReady");
    assert_condition(
        &status,
        "ProvisioningSucceeded",
        "True",
        "ProvisioningComplete",
    );
    assert_condition(&status, "Degraded", "False", "FullyFunctional");
    assert_condition(&status, "PVCAvailable", "True", "PVCFound");
    assert_condition(&status, "RouteAvailable", "True", "RouteFound");
    assert_condition(
        &status,
        "InferenceServicesPresent",
        "True",
        "InferenceServicesFound",
    );
}

#[test]
fn route_not_supported_is_still_ready() {
    let observed = Observations {
        route: RouteObservation::NotSupported,
        inference_services_present: false,
        ..pvc_ready()
    };
    let status = first_status(&observed);
    assert_eq!(status.phase.as_deref(), Some("Ready"));
    assert_condition(&status, "RouteAvailable", "False", "RouteNotSupported");
    let message = message(&status, "RouteAvailable");
    assert!(message.contains("not served by this cluster"), "{message}");
    assert_condition(
        &status,
        "InferenceServicesPresent",
        "False",
        "InferenceServicesNotFound",
    );
}

#[test]
fn unadmitted_or_missing_route_blocks_readiness() {
    for route in [RouteObservation::Missing, RouteObservation::NotAdmitted] {
        let status = first_status(&Observations {
            route,
            ..pvc_ready()
        });
        assert_eq!(status.phase.as_deref(), Some("Not Ready"));
        assert_condition(&status, "RouteAvailable", "False", "RouteNotFound");
        assert_condition(&status, "Degraded", "True", "PartialFunctionality");
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
    let status = first_status(&observed);
    assert_condition(&status, "PVCAvailable", "False", "PVCPending");
    assert!(message(&status, "PVCAvailable").contains("Pending"));
    let ready_message = message(&status, "Ready");
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
    let status = first_status(&observed);
    assert_eq!(status.replicas, Some(0));
    assert_condition(&status, "Degraded", "True", "NoFunctionality");
    assert_condition(&status, "Ready", "False", "ComponentsNotReady");
    assert_condition(&status, "Available", "False", "NotAllComponentsReady");
    assert_condition(
        &status,
        "ProvisioningSucceeded",
        "False",
        "ProvisioningInProgress",
    );
}

#[test]
fn provisioning_error_keeps_it_not_ready() {
    let observed = Observations {
        provisioning_error: Some("applying Service tas: forbidden".into()),
        ..pvc_ready()
    };
    let status = first_status(&observed);
    assert_eq!(status.phase.as_deref(), Some("Not Ready"));
    assert!(message(&status, "ProvisioningSucceeded").contains("forbidden"));
}

#[test]
fn a_refused_growth_is_reported_but_keeps_it_ready() {
    let observed = Observations {
        pvc_growth_refused: Some("it could not grow from 1Gi to 2Gi: not expandable".into()),
        ..pvc_ready()
    };
    let status = first_status(&observed);
    assert_eq!(status.phase.as_deref(), Some("Ready"));
    let pvc = condition(&status, "PVCAvailable").expect("PVCAvailable");
    assert_eq!(pvc.status, "True");
    assert_eq!(
        pvc.message.as_deref(),
        Some("PersistentVolumeClaim found; it could not grow from 1Gi to 2Gi: not expandable")
    );
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
                        let status = first_status(&observed);
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
