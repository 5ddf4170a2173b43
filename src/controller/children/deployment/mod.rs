//! The Deployment `<cr>`. Tracked by generation and metadata (its status moves with every pod,
//! which would otherwise cost a no-op apply each time); its cache keeps the status and the
//! selector, so observing it and checking the immutable selector need no read.
//!
//! A Deployment the Go operator made is adopted as it runs: its selector (which holds the Go
//! operator's `app.kubernetes.io/version`) cannot change, and its pod template is left as the
//! Go operator wrote it as long as nothing it is made from changed, so switching operators
//! replaces no pod. [`POD_TEMPLATE_ANNOTATION`] records the decision on the Deployment.
//!
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
use kube::api::DynamicObject;
use serde_json::Value;
use trustyai_crds::defaults::DEFAULT_REPLICAS;

use super::cache::Projection;
use super::declaration::{Declaration, Lifecycle, Rendered, WatchSpec, always};
use super::memory::Tracking;
use super::{built_in, owned_watch, render_one};
use crate::controller::children::config_map::ServiceAccess;
use crate::controller::children::services::PROMETHEUS_ANNOTATIONS;
use crate::controller::resources::images::Images;
use crate::controller::resources::{BuildError, Instance, labels, names};
use volumes::VolumePlan;

/// The fields the reconciler reads: what [`super::super::status::DeploymentObservation`]
/// needs, and the selector.
pub const PROJECTION: Projection = Projection(&[
    "/metadata/generation",
    "/spec/replicas",
    "/spec/selector",
    // Required by the typed Deployment; the labels are all the reconciler could want of it.
    "/spec/template/metadata/labels",
    // The images a Go operator's Deployment runs, to tell whether its pods can stay (the Go
    // operator's template has the service first and the proxy second, as ours does).
    "/spec/template/spec/containers/0/name",
    "/spec/template/spec/containers/0/image",
    "/spec/template/spec/containers/1/name",
    "/spec/template/spec/containers/1/image",
    "/metadata/annotations/trustyai.opendatahub.io~1pod-template",
    "/status",
]);

/// On a Deployment the Go operator made: `kept:<fingerprint>` while its pod template is left as
/// the Go operator wrote it (the fingerprint is of the template this operator rendered then), and
/// `rendered` once this operator's template replaced it.
pub const POD_TEMPLATE_ANNOTATION: &str = "trustyai.opendatahub.io/pod-template";
const KEPT: &str = "kept:";

/// Whether `deployment`'s pod template is the Go operator's, left as it ran: nothing this
/// operator applied since rolled its pods.
pub fn template_kept(deployment: &Deployment) -> bool {
    deployment
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(POD_TEMPLATE_ANNOTATION))
        .is_some_and(|decision| decision.starts_with(KEPT))
}
const RENDERED: &str = "rendered";

/// The declaration.
pub const DECLARATION: Declaration = Declaration {
    watch: WatchSpec {
        tracking: Tracking::GenerationAndMetadata,
        projection: PROJECTION,
        ..owned_watch(built_in::<Deployment>)
    },
    applies_with: always,
    lifecycle: Lifecycle::Owned,
    applying: Rendered {
        keep_live: Some(adopt_in_place),
        // A selector is immutable: one that is not ours plus labels is replaced.
        must_replace: Some(|live, desired| {
            live.pointer("/spec/selector") != desired.data.pointer("/spec/selector")
        }),
        ..Rendered::new(|instance, inputs| {
            render_one(&deployment(
                instance,
                &DeploymentInputs {
                    images: inputs.images,
                    custom_ca_bundle: inputs.custom_ca_bundle,
                    db_ca_exists: inputs.db_ca_exists,
                    service_access: inputs.service_access,
                },
            )?)
        })
    },
};

/// Adapts the rendered Deployment to a Go operator's one (see the module documentation);
/// changes nothing for any other. Whether this is the first apply to it (the take-over).
fn adopt_in_place(live: &Value, desired: &mut DynamicObject) -> bool {
    if !keep_selector(live, desired) {
        return false;
    }
    let template = template_fingerprint(desired);
    let kept = format!("{KEPT}{template}");
    let recorded = live
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(POD_TEMPLATE_ANNOTATION))
        .and_then(Value::as_str);
    let decision = match recorded {
        // First met: the pods stay when they run the images this operator would give them.
        // What else the template holds comes from the same TrustyAIService, which the Go
        // operator reconciled until it stopped.
        None if same_images(live, desired) => kept,
        // Kept, and still made from the same TrustyAIService, images and configuration.
        Some(recorded) if recorded == kept => kept,
        // Something changed since (or the images differed): this operator's template rolls the
        // pods once, as any change would.
        _ => RENDERED.to_owned(),
    };
    if decision.starts_with(KEPT)
        && let Some(spec) = desired.data.get_mut("spec").and_then(Value::as_object_mut)
    {
        // Left out of the apply, the Go operator's template stays as it is.
        spec.remove("template");
    }
    desired
        .metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(POD_TEMPLATE_ANNOTATION.to_owned(), decision);
    recorded.is_none()
}

/// Whether the live containers run the images `desired` gives the containers of the same names.
fn same_images(live: &Value, desired: &DynamicObject) -> bool {
    let images = |containers: Option<&Value>| -> Vec<(String, String)> {
        let mut pairs: Vec<(String, String)> = containers
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|c| {
                Some((
                    c.get("name")?.as_str()?.to_owned(),
                    c.get("image")?.as_str()?.to_owned(),
                ))
            })
            .collect();
        pairs.sort();
        pairs
    };
    let live = images(live.pointer("/spec/template/spec/containers"));
    !live.is_empty() && live == images(desired.data.pointer("/spec/template/spec/containers"))
}

/// A fingerprint of the rendered pod template that stays the same across processes and
/// releases (it is stored on the Deployment): FNV-1a over its JSON.
fn template_fingerprint(desired: &DynamicObject) -> String {
    let text = desired
        .data
        .pointer("/spec/template")
        .map(Value::to_string)
        .unwrap_or_default();
    let hash = text.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    format!("{hash:016x}")
}

/// Keeps a live selector that selects on this operator's labels plus others (the Go
/// operator's also holds `app.kubernetes.io/version`), and gives the pods those labels too: the
/// selector cannot change in place, and replacing the Deployment would restart the service.
/// Whether it kept such a selector.
fn keep_selector(live: &Value, desired: &mut DynamicObject) -> bool {
    const LABELS: &str = "/spec/selector/matchLabels";
    if live.pointer("/spec/selector/matchExpressions").is_some() {
        return false;
    }
    let (Some(Value::Object(live_labels)), Some(Value::Object(ours))) =
        (live.pointer(LABELS), desired.data.pointer(LABELS))
    else {
        return false;
    };
    let superset = ours.iter().all(|(k, v)| live_labels.get(k) == Some(v));
    if !superset || live_labels.len() == ours.len() {
        return false;
    }
    let live_labels = live_labels.clone();
    if let Some(template) = desired
        .data
        .pointer_mut("/spec/template/metadata/labels")
        .and_then(Value::as_object_mut)
    {
        for (key, value) in &live_labels {
            template.insert(key.clone(), value.clone());
        }
    }
    if let Some(selector) = desired.data.pointer_mut(LABELS) {
        *selector = Value::Object(live_labels);
    }
    true
}

#[cfg(test)]
mod adoption_tests;

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
