//! The TrustyAIService status, computed from [`Observations`] and the previous status.
//!
//! Every call produces the complete status, whatever stage the reconcile reached, so the fields
//! always agree: `phase`, `ready`, `Ready`, `Available`, `ProvisioningSucceeded` and `Degraded`
//! are derived from one readiness verdict (the Go operator's early exits left stale `Ready`,
//! `Degraded` and `ProvisioningSucceeded` behind).
//!
//! Readiness: the Deployment is ready (available, all desired replicas ready, no pod failing,
//! status current); with a PVC, the PVC is bound; with a database, the credentials Secret is
//! valid and the service is up; the Route is admitted, or Routes are not supported by the
//! cluster. Inference services never gate it.
//!
//! `DBAvailable` does not guess connectivity from pod logs, nor says `DBConnectionError` whenever
//! anything is not ready (as the Go operator does). It is `True` when the credentials are valid
//! and the service (which exits when it cannot reach its database) is available; `False` with
//! `DBCredentialsNotFound`/`DBCredentialsError` for a bad Secret, or with `DBConnectionError`
//! when valid credentials meet a failing service; `Unknown` while the service starts.
//!
//! Condition types that do not apply to the storage mode (`PVCAvailable` without a PVC,
//! `DBAvailable` without a database) are removed, and so is `ImageUpgradeHeld` once the pods
//! no longer keep the Java service's image; conditions of other types, written by
//! someone else, are kept.

mod conditions;
pub mod observations;
pub mod pod_problem;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use trustyai_crds::contract::{condition, phase, reason};
use trustyai_crds::v1::TrustyAIServiceStatus;

use conditions::{Computed, Status, merge};
pub use observations::{
    DeploymentObservation, Observations, PvcObservation, RouteObservation, pods_may_be_failing,
};

/// Condition types this operator computes.
pub const OWNED_CONDITION_TYPES: [&str; 9] = [
    condition::READY,
    condition::AVAILABLE,
    condition::PROVISIONING_SUCCEEDED,
    condition::DEGRADED,
    condition::PVC_AVAILABLE,
    condition::DB_AVAILABLE,
    condition::ROUTE_AVAILABLE,
    condition::INFERENCE_SERVICES_PRESENT,
    condition::IMAGE_UPGRADE_HELD,
];

/// The new status. `now` is the time of this reconcile; it becomes the `lastTransitionTime` of
/// conditions whose status changed (truncated to whole seconds).
pub fn compute(
    previous: Option<&TrustyAIServiceStatus>,
    observed: &Observations,
    now: &Time,
) -> TrustyAIServiceStatus {
    let components = Components::evaluate(observed);
    let ready = components.all_ready(observed);
    let mut computed = vec![
        ready_condition(ready, &components, observed),
        available_condition(ready),
        provisioning_condition(ready, observed),
        degraded_condition(ready, &components, observed),
    ];
    if observed.mode.uses_pvc() {
        computed.push(pvc_condition(observed));
    }
    if observed.mode.uses_database() {
        computed.push(db_condition(observed));
    }
    computed.push(route_condition(observed.route));
    computed.push(inference_services_condition(
        observed.inference_services_present,
    ));
    if let Some(held) = &observed.image_held {
        computed.push(Computed::new(
            condition::IMAGE_UPGRADE_HELD,
            Status::True,
            reason::JAVA_SERVICE_DATA,
            held.message(),
        ));
    }

    let previous_conditions = previous
        .and_then(|s| s.conditions.as_deref())
        .unwrap_or_default();
    TrustyAIServiceStatus {
        observed_generation: observed.generation,
        phase: Some(
            if ready {
                phase::READY
            } else {
                phase::NOT_READY
            }
            .to_owned(),
        ),
        replicas: Some(observed.deployment.map_or(0, |d| d.ready_replicas)),
        ready: Some(Status::from_bool(ready).as_str().to_owned()),
        conditions: Some(merge(
            previous_conditions,
            computed,
            &OWNED_CONDITION_TYPES,
            observed.generation,
            now,
        )),
        image: observed
            .image
            .clone()
            .or_else(|| previous.and_then(|s| s.image.clone())),
    }
}

/// Whether `new` differs from `previous`, i.e. whether the status must be written. Since
/// [`compute`] keeps transition times of unchanged conditions, an unchanged situation yields
/// an equal status.
pub fn changed(previous: Option<&TrustyAIServiceStatus>, new: &TrustyAIServiceStatus) -> bool {
    previous != Some(new)
}

/// The readiness of each component.
struct Components {
    deployment: bool,
    pvc: bool,
    credentials: bool,
    database: bool,
}

impl Components {
    fn evaluate(observed: &Observations) -> Self {
        let deployment = observed.deployment.is_some_and(|d| d.is_ready());
        let credentials = matches!(observed.db_credentials, Some(Ok(())));
        Self {
            deployment,
            pvc: matches!(observed.pvc, Some(PvcObservation::Bound)),
            credentials,
            database: credentials && deployment,
        }
    }

    fn all_ready(&self, observed: &Observations) -> bool {
        self.deployment
            && (!observed.mode.uses_pvc() || self.pvc)
            && (!observed.mode.uses_database() || self.database)
            && observed.route.is_ok()
            && observed.provisioning_error.is_none()
    }

    /// What keeps the service from being ready, for the `Ready` message.
    fn blockers(&self, observed: &Observations) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(error) = &observed.provisioning_error {
            out.push(format!("provisioning failed: {error}"));
        }
        match observed.deployment {
            None => out.push("the Deployment does not exist yet".to_owned()),
            Some(d) if !d.is_ready() => out.push(format!(
                "the Deployment has {} of {} replicas ready{}",
                d.ready_replicas,
                d.desired_replicas,
                if d.failing { " and failing pods" } else { "" }
            )),
            Some(_) => {}
        }
        if observed.mode.uses_pvc() && !self.pvc {
            out.push("the PersistentVolumeClaim is not bound".to_owned());
        }
        if observed.mode.uses_database() && !self.credentials {
            out.push("the database credentials are not usable".to_owned());
        }
        match observed.route {
            RouteObservation::Missing => out.push("the Route does not exist yet".to_owned()),
            RouteObservation::NotAdmitted => out.push("the Route is not admitted".to_owned()),
            RouteObservation::Admitted | RouteObservation::NotSupported => {}
        }
        out
    }

    /// Whether anything works at all, for `Degraded`.
    fn any_ready(&self, observed: &Observations) -> bool {
        self.deployment
            || (observed.mode.uses_pvc() && self.pvc)
            || (observed.mode.uses_database() && self.database)
            || observed.route == RouteObservation::Admitted
    }
}

fn ready_condition(ready: bool, components: &Components, observed: &Observations) -> Computed {
    if ready {
        Computed::new(
            condition::READY,
            Status::True,
            reason::ALL_COMPONENTS_READY,
            "All service components are ready",
        )
    } else {
        // What the pods say is the cause, when they say it; else what is missing.
        let problem = observed
            .pod_problem
            .as_ref()
            .filter(|_| !components.deployment);
        let mut blockers = components.blockers(observed);
        let reason = match problem {
            Some(problem) => {
                blockers.insert(0, problem.message());
                problem.reason()
            }
            None => reason::COMPONENTS_NOT_READY,
        };
        Computed::new(
            condition::READY,
            Status::False,
            reason,
            format!(
                "Not all service components are ready: {}",
                blockers.join("; ")
            ),
        )
    }
}

fn available_condition(ready: bool) -> Computed {
    if ready {
        Computed::new(
            condition::AVAILABLE,
            Status::True,
            reason::ALL_COMPONENTS_READY,
            "AllComponentsReady",
        )
    } else {
        Computed::new(
            condition::AVAILABLE,
            Status::False,
            reason::NOT_ALL_COMPONENTS_READY,
            "Not all components available",
        )
    }
}

fn provisioning_condition(ready: bool, observed: &Observations) -> Computed {
    if ready {
        return Computed::new(
            condition::PROVISIONING_SUCCEEDED,
            Status::True,
            reason::PROVISIONING_COMPLETE,
            "Service provisioning completed successfully",
        );
    }
    let message = observed.provisioning_error.as_ref().map_or_else(
        || "Service provisioning in progress".to_owned(),
        |e| format!("Service provisioning in progress: {e}"),
    );
    Computed::new(
        condition::PROVISIONING_SUCCEEDED,
        Status::False,
        reason::PROVISIONING_IN_PROGRESS,
        message,
    )
}

fn degraded_condition(ready: bool, components: &Components, observed: &Observations) -> Computed {
    if ready {
        Computed::new(
            condition::DEGRADED,
            Status::False,
            reason::FULLY_FUNCTIONAL,
            "All components are fully functional",
        )
    } else if components.any_ready(observed) {
        Computed::new(
            condition::DEGRADED,
            Status::True,
            reason::PARTIAL_FUNCTIONALITY,
            "Some components are available but service is not fully functional",
        )
    } else {
        Computed::new(
            condition::DEGRADED,
            Status::True,
            reason::NO_FUNCTIONALITY,
            "No components are available",
        )
    }
}

fn pvc_condition(observed: &Observations) -> Computed {
    match &observed.pvc {
        Some(PvcObservation::Bound) => Computed::new(
            condition::PVC_AVAILABLE,
            Status::True,
            reason::PVC_FOUND,
            match &observed.pvc_growth_refused {
                Some(refused) => format!("PersistentVolumeClaim found; {refused}"),
                None => "PersistentVolumeClaim found".to_owned(),
            },
        ),
        Some(PvcObservation::Unbound { phase }) => Computed::new(
            condition::PVC_AVAILABLE,
            Status::False,
            reason::PVC_PENDING,
            format!(
                "PersistentVolumeClaim is not bound (phase {})",
                phase.as_deref().unwrap_or("unknown")
            ),
        ),
        Some(PvcObservation::Missing) | None => Computed::new(
            condition::PVC_AVAILABLE,
            Status::False,
            reason::PVC_NOT_FOUND,
            "PersistentVolumeClaim not found",
        ),
    }
}

fn db_condition(observed: &Observations) -> Computed {
    let deployment = observed.deployment;
    match &observed.db_credentials {
        None => Computed::new(
            condition::DB_AVAILABLE,
            Status::Unknown,
            reason::PROVISIONING_IN_PROGRESS,
            "The database credentials have not been checked yet",
        ),
        Some(Err(error)) => Computed::new(
            condition::DB_AVAILABLE,
            Status::False,
            error.reason(),
            error.to_string(),
        ),
        Some(Ok(())) if deployment.is_some_and(|d| d.is_ready()) => Computed::new(
            condition::DB_AVAILABLE,
            Status::True,
            reason::DB_AVAILABLE,
            "Database available",
        ),
        Some(Ok(())) if deployment.is_some_and(|d| d.failing) => Computed::new(
            condition::DB_AVAILABLE,
            Status::False,
            reason::DB_CONNECTION_ERROR,
            "The database credentials are valid, but the service is failing: it may be unable \
             to connect to the database",
        ),
        Some(Ok(())) => Computed::new(
            condition::DB_AVAILABLE,
            Status::Unknown,
            reason::PROVISIONING_IN_PROGRESS,
            "The database credentials are valid; waiting for the service to become available",
        ),
    }
}

fn route_condition(route: RouteObservation) -> Computed {
    let (status, reason, message) = match route {
        RouteObservation::Admitted => (Status::True, reason::ROUTE_FOUND, "Route found"),
        RouteObservation::NotSupported => (
            Status::False,
            reason::ROUTE_NOT_SUPPORTED,
            "Routes are not served by this cluster (no route.openshift.io API); the service \
             is reachable through its Services, and readiness does not wait for a Route",
        ),
        RouteObservation::Missing => (Status::False, reason::ROUTE_NOT_FOUND, "Route not found"),
        RouteObservation::NotAdmitted => (
            Status::False,
            reason::ROUTE_NOT_FOUND,
            "Route not admitted by a router yet",
        ),
    };
    Computed::new(condition::ROUTE_AVAILABLE, status, reason, message)
}

fn inference_services_condition(present: bool) -> Computed {
    if present {
        Computed::new(
            condition::INFERENCE_SERVICES_PRESENT,
            Status::True,
            reason::INFERENCE_SERVICES_FOUND,
            "InferenceServices found",
        )
    } else {
        Computed::new(
            condition::INFERENCE_SERVICES_PRESENT,
            Status::False,
            reason::INFERENCE_SERVICES_NOT_FOUND,
            "InferenceServices not found",
        )
    }
}

#[cfg(test)]
mod tests;
