//! What the reconcile loop saw, reduced to what the status needs, with helpers that read it
//! from the Kubernetes objects.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kube::core::DynamicObject;
use trustyai_crds::defaults::StorageMode;

use crate::controller::children::route;
use crate::controller::db_secret::DbSecretError;

/// Everything the status is computed from.
#[derive(Debug, Clone, PartialEq)]
pub struct Observations {
    /// `metadata.generation` of the TrustyAIService.
    pub generation: Option<i64>,
    /// The storage mode of its spec.
    pub mode: StorageMode,
    /// The Deployment `<cr>`; `None` while it does not exist.
    pub deployment: Option<DeploymentObservation>,
    /// The PVC `<cr>-pvc` (looked at in PVC and migration modes); `None` when not observed.
    pub pvc: Option<PvcObservation>,
    /// The database credentials check (DATABASE and migration modes); `None` when not made.
    pub db_credentials: Option<Result<(), DbSecretError>>,
    /// The Route `<cr>`.
    pub route: RouteObservation,
    /// Some InferenceService exists in the namespace.
    pub inference_services_present: bool,
    /// The service image the Deployment runs; `None` keeps the previous `status.image`.
    pub image: Option<String>,
    /// The pods keep the Java service's image instead of the configured one.
    pub image_held: Option<crate::controller::image_upgrade::Held>,
    /// Why applying the objects failed this time, if it did (keeps Ready false and is reported
    /// in `ProvisioningSucceeded`).
    pub provisioning_error: Option<String>,
    /// Why the PVC could not grow to the spec's size; it serves at its old size, so this is
    /// reported in `PVCAvailable` without making it false.
    pub pvc_growth_refused: Option<String>,
    /// What the pods say keeps the service from serving, where they were read.
    pub pod_problem: Option<super::pod_problem::PodProblem>,
}

/// The Deployment `<cr>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeploymentObservation {
    /// `spec.replicas`.
    pub desired_replicas: i32,
    /// `status.readyReplicas`.
    pub ready_replicas: i32,
    /// The Deployment's `Available` condition is `True`.
    pub available: bool,
    /// Its status describes the current spec (`status.observedGeneration` caught up).
    pub up_to_date: bool,
    /// Some pod's container is crash-looping or exited with a non-zero code.
    pub failing: bool,
}

impl DeploymentObservation {
    /// Reads a Deployment and its pods.
    pub fn from_deployment(deployment: &Deployment, pods: &[Pod]) -> Self {
        let status = deployment.status.as_ref();
        let available = status
            .and_then(|s| s.conditions.as_ref())
            .into_iter()
            .flatten()
            .any(|c| {
                c.type_.as_deref() == Some("Available") && c.status.as_deref() == Some("True")
            });
        // A pod template left as it ran (a Go operator's Deployment adopted in place) rolls
        // nothing: the status describes the very pods the current spec keeps, so the first
        // apply's new generation does not make it stale (and `Available` does not flap).
        let up_to_date = crate::controller::children::template_kept(deployment)
            || match (
                deployment.metadata.generation,
                status.and_then(|s| s.observed_generation),
            ) {
                (Some(generation), Some(observed)) => observed >= generation,
                (None, _) => true,
                (Some(_), None) => false,
            };
        Self {
            desired_replicas: deployment.spec.replicas.unwrap_or(1),
            ready_replicas: status.and_then(|s| s.ready_replicas).unwrap_or(0),
            available,
            up_to_date,
            failing: pods_failing(pods),
        }
    }

    /// The Go operator's rule: available, every desired replica ready, no pod failing; plus the
    /// status being current, so a just-changed spec is not reported ready on stale numbers.
    pub fn is_ready(&self) -> bool {
        self.available
            && self.up_to_date
            && self.ready_replicas == self.desired_replicas
            && !self.failing
    }
}

/// Whether the pods must be read to tell if one is failing: only while the Deployment's status
/// describes its current spec and some desired replica is not updated, ready and available
/// (or another pod remains). A crash-looping or exited container makes its pod unready, which
/// the Deployment's status then shows (and that change triggers a reconcile, which reads the
/// pods). A status not yet written, or behind the spec, says the service is not ready
/// anyway, and its next update triggers a reconcile: reading the pods then would only see
/// the previous rollout's.
pub fn pods_may_be_failing(deployment: &Deployment) -> bool {
    let Some(status) = deployment.status.as_ref() else {
        return false;
    };
    let desired = deployment.spec.replicas.unwrap_or(1);
    let current = match (deployment.metadata.generation, status.observed_generation) {
        (Some(generation), Some(observed)) => observed >= generation,
        (None, _) => true,
        (Some(_), None) => false,
    };
    let settled = status.replicas.unwrap_or(0) == desired
        && status.updated_replicas.unwrap_or(0) == desired
        && status.ready_replicas.unwrap_or(0) == desired
        && status.available_replicas.unwrap_or(0) == desired
        && status.unavailable_replicas.unwrap_or(0) == 0;
    current && !settled
}

/// Whether a container of `pods` waits in `CrashLoopBackOff` or terminated with a non-zero exit
/// code.
pub fn pods_failing(pods: &[Pod]) -> bool {
    pods.iter()
        .filter_map(|p| p.status.as_ref()?.container_statuses.as_ref())
        .flatten()
        .filter_map(|c| c.state.as_ref())
        .any(|state| {
            state
                .waiting
                .as_ref()
                .is_some_and(|w| w.reason.as_deref() == Some("CrashLoopBackOff"))
                || state.terminated.as_ref().is_some_and(|t| t.exit_code != 0)
        })
}

/// The PVC `<cr>-pvc`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PvcObservation {
    /// It does not exist.
    Missing,
    /// It exists but is not bound.
    Unbound {
        /// `status.phase`, e.g. `Pending`.
        phase: Option<String>,
    },
    /// `status.phase` is `Bound`.
    Bound,
}

impl PvcObservation {
    /// Reads a claim (`None` when it was not found).
    pub fn from_claim(claim: Option<&PersistentVolumeClaim>) -> Self {
        let Some(claim) = claim else {
            return Self::Missing;
        };
        match claim.status.as_ref().and_then(|s| s.phase.as_deref()) {
            Some("Bound") => Self::Bound,
            phase => Self::Unbound {
                phase: phase.map(str::to_owned),
            },
        }
    }
}

/// The Route `<cr>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RouteObservation {
    /// The cluster does not serve `route.openshift.io/v1` (not OpenShift). Does not block
    /// readiness: the service is reachable through its Services.
    NotSupported,
    /// The Route does not exist.
    Missing,
    /// It exists, but no router admitted it yet.
    NotAdmitted,
    /// A router admitted it.
    Admitted,
}

impl RouteObservation {
    /// Reads a Route on a cluster that serves Routes (`None` when it was not found).
    pub fn from_route(route_object: Option<&DynamicObject>) -> Self {
        match route_object {
            None => Self::Missing,
            Some(r) if route::is_admitted(r) => Self::Admitted,
            Some(_) => Self::NotAdmitted,
        }
    }

    /// Whether the Route lets the service be ready.
    pub fn is_ok(self) -> bool {
        matches!(self, Self::Admitted | Self::NotSupported)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[allow(clippy::expect_used)]
    fn deployment(value: serde_json::Value) -> Deployment {
        serde_json::from_value(value).expect("deployment")
    }

    #[allow(clippy::expect_used)]
    fn pod(statuses: serde_json::Value) -> Pod {
        serde_json::from_value(json!({"status": {"containerStatuses": statuses}})).expect("pod")
    }

    #[test]
    fn a_kept_go_template_is_current_although_its_generation_moved() {
        let with = |decision: &str| {
            deployment(json!({
                "metadata": {"name": "tas", "generation": 3,
                             "annotations": {"trustyai.opendatahub.io/pod-template": decision}},
                "spec": {"replicas": 1, "selector": {}, "template": {}},
                "status": {"observedGeneration": 2, "readyReplicas": 1,
                           "conditions": [{"type": "Available", "status": "True"}]}
            }))
        };
        let kept = DeploymentObservation::from_deployment(&with("kept:2df0ce0d5c8daab9"), &[]);
        assert!(kept.up_to_date && kept.is_ready());
        // This operator's template applied: the new generation may roll the pods.
        let rendered = DeploymentObservation::from_deployment(&with("rendered"), &[]);
        assert!(!rendered.up_to_date);
    }

    #[test]
    fn deployment_reading() {
        let d = deployment(json!({
            "metadata": {"name": "tas", "generation": 2},
            "spec": {"replicas": 2, "selector": {}, "template": {}},
            "status": {"observedGeneration": 2, "readyReplicas": 2,
                       "conditions": [{"type": "Available", "status": "True"}]}
        }));
        let observed = DeploymentObservation::from_deployment(&d, &[]);
        assert_eq!(
            observed,
            DeploymentObservation {
                desired_replicas: 2,
                ready_replicas: 2,
                available: true,
                up_to_date: true,
                failing: false
            }
        );
        assert!(observed.is_ready());
        assert!(
            !DeploymentObservation {
                ready_replicas: 1,
                ..observed
            }
            .is_ready()
        );
        assert!(
            !DeploymentObservation {
                up_to_date: false,
                ..observed
            }
            .is_ready()
        );
        assert!(
            !DeploymentObservation {
                failing: true,
                ..observed
            }
            .is_ready()
        );
        assert!(
            !DeploymentObservation {
                available: false,
                ..observed
            }
            .is_ready()
        );

        let stale = deployment(json!({
            "metadata": {"name": "tas", "generation": 3},
            "spec": {"selector": {}, "template": {}},
            "status": {"observedGeneration": 2}
        }));
        let observed = DeploymentObservation::from_deployment(&stale, &[]);
        assert!(!observed.up_to_date);
        assert_eq!(observed.desired_replicas, 1);
        assert_eq!(observed.ready_replicas, 0);
    }

    #[test]
    fn pods_are_read_unless_the_deployment_is_settled() {
        let settled = json!({
            "metadata": {"generation": 2},
            "spec": {"replicas": 2, "selector": {}, "template": {}},
            "status": {"observedGeneration": 2, "replicas": 2, "updatedReplicas": 2,
                       "readyReplicas": 2, "availableReplicas": 2}
        });
        assert!(!pods_may_be_failing(&deployment(settled.clone())));
        let with = |path: &str, value: serde_json::Value| {
            let mut d = settled.clone();
            d["status"][path] = value;
            pods_may_be_failing(&deployment(d))
        };
        assert!(with("readyReplicas", json!(1)), "a pod unready");
        assert!(
            with("availableReplicas", json!(1)),
            "a pod not yet available"
        );
        assert!(with("updatedReplicas", json!(1)), "a rollout under way");
        assert!(with("replicas", json!(3)), "an old pod still there");
        assert!(with("unavailableReplicas", json!(1)), "a pod unavailable");
        // Not ready anyway, and the next status update comes back here.
        assert!(
            !with("observedGeneration", json!(1)),
            "a status behind the spec"
        );
        let mut no_status = settled.clone();
        no_status["status"] = serde_json::Value::Null;
        assert!(!pods_may_be_failing(&deployment(no_status)));
    }

    #[test]
    fn failing_pods() {
        let crash = pod(
            json!([{"name": "c", "image": "i", "imageID": "", "ready": false,
            "restartCount": 3, "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]),
        );
        let exited = pod(
            json!([{"name": "c", "image": "i", "imageID": "", "ready": false,
            "restartCount": 0, "state": {"terminated": {"exitCode": 1}}}]),
        );
        let fine = pod(
            json!([{"name": "c", "image": "i", "imageID": "", "ready": true,
            "restartCount": 0, "state": {"running": {}}}]),
        );
        let starting = pod(
            json!([{"name": "c", "image": "i", "imageID": "", "ready": false,
            "restartCount": 0, "state": {"waiting": {"reason": "ContainerCreating"}}}]),
        );
        assert!(pods_failing(&[fine.clone(), crash]));
        assert!(pods_failing(&[exited]));
        assert!(!pods_failing(&[fine, starting, Pod::default()]));
    }

    #[test]
    fn pvc_reading() {
        assert_eq!(PvcObservation::from_claim(None), PvcObservation::Missing);
        let claim = |phase: &str| -> PersistentVolumeClaim {
            serde_json::from_value(json!({"status": {"phase": phase}})).unwrap_or_default()
        };
        assert_eq!(
            PvcObservation::from_claim(Some(&claim("Bound"))),
            PvcObservation::Bound
        );
        assert_eq!(
            PvcObservation::from_claim(Some(&claim("Pending"))),
            PvcObservation::Unbound {
                phase: Some("Pending".into())
            }
        );
    }

    #[test]
    fn route_reading() {
        let mut r = DynamicObject::new("tas", &route::api_resource());
        assert_eq!(
            RouteObservation::from_route(None),
            RouteObservation::Missing
        );
        assert_eq!(
            RouteObservation::from_route(Some(&r)),
            RouteObservation::NotAdmitted
        );
        r.data = json!({"status": {"ingress": [{"conditions": [{"type": "Admitted", "status": "True"}]}]}});
        assert_eq!(
            RouteObservation::from_route(Some(&r)),
            RouteObservation::Admitted
        );
        assert!(RouteObservation::NotSupported.is_ok());
        assert!(!RouteObservation::NotAdmitted.is_ok());
    }
}
