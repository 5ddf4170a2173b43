//! Deployment `<cr>`: the TrustyAI service and its kube-rbac-proxy sidecar.
//!
//! The pod template depends only on the spec, the resolved images and the presence of the
//! optional CA objects, so it changes (and the pods roll) exactly when one of those does; the
//! operator version appears only in the Deployment's own labels. No config-hash annotation is
//! needed: the only rendered config, the kube-rbac-proxy ConfigMap, changes only with the
//! operator's [`ServiceAccess`], which the template names itself when it is not the default.
//!
//! Differences from the Go operator: `spec.replicas` is honoured in DATABASE mode (with the data
//! on a claim, one pod runs at a time, released by the operator: [`SINGLE_WRITER_GATE`]); the
//! selector and the pod labels carry no version; the pods follow the `restricted` security
//! profile and both containers request resources; no PVC is required in DATABASE mode.

pub mod containers;
pub mod env;
pub mod volumes;

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{
    Deployment, DeploymentSpec, DeploymentStrategy, RollingUpdateDeployment,
};
use k8s_openapi::api::core::v1::{PodSchedulingGate, PodSpec, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use trustyai_crds::defaults::DEFAULT_REPLICAS;

use super::config_map::ServiceAccess;
use super::images::Images;
use super::services::PROMETHEUS_ANNOTATIONS;
use super::{BuildError, Instance, labels, names};
use volumes::VolumePlan;

/// What the Deployment depends on besides the TrustyAIService.
#[derive(Debug, Clone, Copy)]
pub struct DeploymentInputs<'a> {
    /// The resolved images.
    pub images: &'a Images,
    /// The `odh-trusted-ca-bundle` ConfigMap (labelled
    /// `config.openshift.io/inject-trusted-cabundle=true`) exists in the namespace.
    pub custom_ca_bundle: bool,
    /// The `<cr>-db-ca` Secret exists (used in DATABASE and migration modes only).
    pub db_ca_exists: bool,
    /// The verbs kube-rbac-proxy checks: the pods roll when it changes, since the proxy reads
    /// its configuration at start only.
    pub service_access: ServiceAccess,
}

/// Scheduling gate on the pods of a TrustyAIService whose data is on a claim: the operator
/// removes it only once no other pod of the TrustyAIService is left (a deleted or evicted pod
/// is replaced at once, while it is still being killed; the service ignores SIGTERM, so that
/// takes the whole grace period). So two service processes never have the claim's files open
/// at once, whatever the volume, the claim's access modes or the cause of the replacement.
pub const SINGLE_WRITER_GATE: &str = "trustyai.opendatahub.io/single-writer";

/// The pods' grace period after SIGTERM. The TrustyAI service ignores SIGTERM and answers until
/// the SIGKILL at the end of it, so the grace period only bounds how long its in-flight requests
/// may take; with the data on a claim the replacement starts after it (the single-writer gate),
/// so it is also the service's downtime on every rollout and pod deletion. The Kubernetes
/// default is 30 s.
pub const TERMINATION_GRACE_SECONDS: i64 = 10;

/// Pod template annotation naming the non-default [`ServiceAccess`] the pods' kube-rbac-proxy
/// was started with. Absent for the default, so the template of a TrustyAIService the Go
/// operator ran is unchanged.
pub const SERVICE_ACCESS_ANNOTATION: &str = "trustyai.opendatahub.io/service-access";

/// The Deployment `<cr>`, owned by the TrustyAIService.
pub fn deployment(
    instance: &Instance<'_>,
    inputs: &DeploymentInputs<'_>,
) -> Result<Deployment, BuildError> {
    let cr = instance.name();
    let spec = instance.spec();
    let mode = instance.storage_mode()?;
    let plan = VolumePlan::new(mode, inputs.custom_ca_bundle, inputs.db_ca_exists);
    let db_credentials = names::db_credentials(cr, spec);
    let service = containers::service_container(
        &inputs.images.service.image,
        env::service_env(spec, mode, &db_credentials, plan.db_tls),
        volumes::service_mounts(instance, plan),
    );
    let proxy = containers::proxy_container(
        &inputs.images.kube_rbac_proxy.image,
        volumes::proxy_mounts(instance, plan),
    );
    let mut pod_annotations: BTreeMap<String, String> = PROMETHEUS_ANNOTATIONS
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    if inputs.service_access != ServiceAccess::default() {
        pod_annotations.insert(
            SERVICE_ACCESS_ANNOTATION.to_owned(),
            inputs.service_access.as_str().to_owned(),
        );
    }

    let replicas = spec.replicas.unwrap_or(DEFAULT_REPLICAS);
    // One writer per claim: at most one pod, and each released by the operator (see
    // [`SINGLE_WRITER_GATE`]).
    let (replicas, scheduling_gates) = if mode.uses_pvc() {
        let gate = PodSchedulingGate {
            name: SINGLE_WRITER_GATE.to_owned(),
        };
        (replicas.min(1), Some(vec![gate]))
    } else {
        (replicas, None)
    };

    Ok(Deployment {
        metadata: instance.owned_meta(names::workload(cr), labels::metadata(instance)),
        spec: DeploymentSpec {
            replicas: Some(replicas),
            selector: LabelSelector {
                match_labels: Some(labels::selector(cr)),
                match_expressions: None,
            },
            // No surge: with a ReadWriteOnce PVC a second pod on another node could not mount
            // the volume, and the rollout would hang.
            strategy: Some(DeploymentStrategy {
                type_: Some("RollingUpdate".to_owned()),
                rolling_update: Some(RollingUpdateDeployment {
                    max_surge: Some(IntOrString::Int(0)),
                    max_unavailable: Some(IntOrString::Int(1)),
                }),
            }),
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels::selector(cr)),
                    annotations: Some(pod_annotations),
                    ..ObjectMeta::default()
                }),
                spec: Some(PodSpec {
                    service_account_name: Some(names::proxy_service_account(cr)),
                    security_context: Some(containers::pod_security_context()),
                    containers: vec![service, proxy],
                    volumes: Some(volumes::volumes(instance, plan)),
                    scheduling_gates,
                    termination_grace_period_seconds: Some(TERMINATION_GRACE_SECONDS),
                    ..PodSpec::default()
                }),
            },
            ..DeploymentSpec::default()
        },
        ..Deployment::default()
    })
}

#[cfg(test)]
mod tests;
