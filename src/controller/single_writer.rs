//! One writer per claim: the pods of a TrustyAIService whose data is on a claim are created
//! behind a scheduling gate ([`SINGLE_WRITER_GATE`]), and the operator removes it from one pod
//! only once no other pod of the TrustyAIService can still have the claim's files open.
//!
//! A pod holds the claim from the moment it is released until its containers have stopped: a
//! pod being deleted still holds it (the TrustyAI service ignores SIGTERM, so it runs until the
//! grace period's SIGKILL), a pod that has failed or succeeded does not. A ReplicaSet replaces a
//! deleted or evicted pod at once, so without the gate the two would run side by side.

use ::json_patch::jsonptr::PointerBuf;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::PatchParams;
use serde_json::json;

use super::children::deployment::SINGLE_WRITER_GATE;
use super::context::Context;
use super::error::ReconcileError;
use super::resources::Instance;
use super::wiring::json_patch::{self, JsonPatch};

/// What the gate asks of the operator now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Release<'a> {
    /// No pod waits behind the gate.
    Nothing,
    /// A pod waits while another still holds the claim: look again when that one is gone.
    Waiting,
    /// Release this pod (at this index of its gates).
    Pod { name: &'a str, gate_index: usize },
}

/// The index of the gate in `pod`'s scheduling gates, if it has it.
fn gate_index(pod: &Pod) -> Option<usize> {
    pod.spec
        .as_ref()?
        .scheduling_gates
        .as_ref()?
        .iter()
        .position(|g| g.name == SINGLE_WRITER_GATE)
}

/// Whether `pod`'s containers have stopped for good.
fn terminal(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .is_some_and(|phase| phase == "Succeeded" || phase == "Failed")
}

/// What to do with the pods of one TrustyAIService: release the oldest gated pod that is not
/// being deleted when no released pod holds the claim.
pub fn decide(pods: &[Pod]) -> Release<'_> {
    let waiting: Vec<(&Pod, usize)> = pods
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter_map(|p| gate_index(p).map(|i| (p, i)))
        .collect();
    if waiting.is_empty() {
        return Release::Nothing;
    }
    if pods.iter().any(|p| gate_index(p).is_none() && !terminal(p)) {
        return Release::Waiting;
    }
    let oldest = waiting.into_iter().min_by(|(a, _), (b, _)| {
        let key = |p: &&Pod| {
            (
                p.metadata.creation_timestamp.clone(),
                p.metadata.name.clone(),
            )
        };
        key(a).cmp(&key(b))
    });
    match oldest {
        Some((pod, gate_index)) => match pod.metadata.name.as_deref() {
            Some(name) => Release::Pod { name, gate_index },
            None => Release::Nothing,
        },
        None => Release::Nothing,
    }
}

/// Acts on [`decide`] for `pods`, the TrustyAIService's pods; returns whether a pod still waits
/// for another to stop.
pub async fn release(
    ctx: &Context,
    instance: &Instance<'_>,
    pods: &[Pod],
) -> Result<bool, ReconcileError> {
    match decide(pods) {
        Release::Nothing => Ok(false),
        Release::Waiting => Ok(true),
        Release::Pod { name, gate_index } => {
            // The test makes the removal fail rather than remove another gate if the pod
            // changed since it was read.
            let gate =
                PointerBuf::from_tokens(["spec", "schedulingGates", &gate_index.to_string()]);
            let mut name_of_gate = gate.clone();
            name_of_gate.push_back("name");
            let patch = JsonPatch(vec![
                json_patch::test(name_of_gate, json!(SINGLE_WRITER_GATE)),
                json_patch::remove(gate),
            ]);
            let api: Api<Pod> = Api::namespaced(ctx.client.clone(), instance.namespace());
            api.patch(name, &PatchParams::default(), &patch.to_kube_patch::<()>())
                .await
                .map_err(ReconcileError::kube("releasing", "Pod", name))?;
            tracing::info!(pod = name, "released the pod: no other pod holds the claim");
            Ok(false)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn pod(name: &str, created: &str, gated: bool, extra: Value) -> Pod {
        let mut value = json!({
            "metadata": {"name": name, "creationTimestamp": created},
            "spec": {"containers": []},
        });
        if gated {
            value["spec"]["schedulingGates"] =
                json!([{"name": "other"}, {"name": SINGLE_WRITER_GATE}]);
        }
        if let (Some(target), Some(extra)) = (value.as_object_mut(), extra.as_object()) {
            for (k, v) in extra {
                match target.get_mut(k) {
                    Some(Value::Object(existing)) => {
                        existing.extend(v.as_object().cloned().unwrap_or_default())
                    }
                    _ => {
                        target.insert(k.clone(), v.clone());
                    }
                }
            }
        }
        serde_json::from_value(value).expect("a pod")
    }

    const T1: &str = "2026-01-01T00:00:01Z";
    const T2: &str = "2026-01-01T00:00:02Z";

    #[test]
    fn a_lone_gated_pod_is_released() {
        let pods = [pod("a", T1, true, json!({}))];
        assert_eq!(
            decide(&pods),
            Release::Pod {
                name: "a",
                gate_index: 1
            }
        );
    }

    #[test]
    fn a_pod_being_killed_holds_the_claim() {
        let old = pod(
            "old",
            T1,
            false,
            json!({"metadata": {"deletionTimestamp": T2}, "status": {"phase": "Running"}}),
        );
        let new = pod("new", T2, true, json!({}));
        assert_eq!(decide(&[old, new]), Release::Waiting);
    }

    #[test]
    fn a_failed_or_succeeded_pod_holds_nothing() {
        for phase in ["Failed", "Succeeded"] {
            let old = pod("old", T1, false, json!({"status": {"phase": phase}}));
            let new = pod("new", T2, true, json!({}));
            assert_eq!(
                decide(&[old, new]),
                Release::Pod {
                    name: "new",
                    gate_index: 1
                }
            );
        }
    }

    #[test]
    fn the_oldest_gated_pod_not_being_deleted_is_released() {
        let deleted = pod(
            "deleted",
            T1,
            true,
            json!({"metadata": {"deletionTimestamp": T2}}),
        );
        let later = pod("later", T2, true, json!({}));
        let first = pod("first", T2, true, json!({}));
        assert_eq!(
            decide(&[deleted, later, first]),
            Release::Pod {
                name: "first",
                gate_index: 1
            }
        );
    }

    #[test]
    fn without_gated_pods_there_is_nothing_to_do() {
        let running = pod("a", T1, false, json!({"status": {"phase": "Running"}}));
        assert_eq!(decide(&[running]), Release::Nothing);
        assert_eq!(decide(&[]), Release::Nothing);
    }
}
