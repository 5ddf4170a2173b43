//! Wiring a TrustyAIService into the ModelMesh Deployments of its namespace (those labelled
//! `modelmesh-service=modelmesh-serving`), and undoing it.
//!
//! [`wire`] adds, only where absent:
//! - the URL `https://<cr>.<ns>.svc/consumer/kserve/v2` to the space-separated
//!   `MM_PAYLOAD_PROCESSORS` of every container (other URLs are kept);
//! - the Secret volume `<cr>-internal`, mounted read-only at `/etc/trustyai/tls` in every
//!   container;
//! - `MM_TLS_KEY_CERT_PATH=/etc/trustyai/tls/tls.crt` on the container `mm`.
//!
//! Several TrustyAIServices in one namespace share the Deployments. The URLs add up, but
//! `/etc/trustyai/tls` can hold one mount per container: a container whose path is already
//! taken by another TrustyAIService's volume gets no mount, and the volume is added only when
//! some container mounts it (the Go operator added a second mount at the same path, which the
//! API server rejects).
//!
//! [`unwire`] removes only this TrustyAIService's URL, mounts and volume (the Go operator's
//! removal did nothing and could panic), and `MM_TLS_KEY_CERT_PATH` once nothing is mounted
//! at its path any more, so no pod references a Secret that is about to disappear.
//!
//! Both return a [`JsonPatch`] (server-side apply cannot edit one token of a shared string),
//! empty when the Deployment is already as wanted, so applying twice is a no-op.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Container, EnvVar, PodSpec, VolumeMount};
use serde_json::{Value, json};
use trustyai_crds::contract::modelmesh;

use json_patch::jsonptr::PointerBuf;

use super::json_patch::{Builder, JsonPatch, pointer};
use crate::controller::resources::names;

/// The payload processor URL of the TrustyAIService `cr` in `namespace`.
pub fn payload_processor_url(cr: &str, namespace: &str) -> String {
    format!("https://{cr}.{namespace}.svc{}", modelmesh::CONSUMER_PATH)
}

/// Whether a ModelMesh Deployment is ready to be patched: every desired replica is ready
/// (patching a Deployment mid-rollout makes ModelMesh restart twice). Callers skip the others
/// and retry later.
pub fn is_ready(deployment: &Deployment) -> bool {
    let desired = deployment.spec.replicas.unwrap_or(1);
    let ready = deployment
        .status
        .as_ref()
        .and_then(|s| s.ready_replicas)
        .unwrap_or(0);
    ready == desired
}

/// The patch that wires the TrustyAIService `cr` in `namespace` into `deployment`.
pub fn wire(deployment: &Deployment, cr: &str, namespace: &str) -> JsonPatch {
    let Some((pod, volume, url, mut patch)) = starting_point(deployment, cr, namespace) else {
        return JsonPatch::default();
    };
    let mut mounted = false;
    for (i, container) in pod.containers.iter().enumerate() {
        let mut ops = container_ops(i, container);
        let mounts = container.volume_mounts.as_deref().unwrap_or_default();
        let ours = mounts.iter().any(|m| m.name == volume);
        let path_taken = tls_path_mounted_by_another(mounts, &volume);
        if !ours && !path_taken {
            let mount = json!({
                "name": volume, "mountPath": modelmesh::TLS_MOUNT_PATH, "readOnly": true
            });
            append(
                &mut ops,
                i,
                "volumeMounts",
                container.volume_mounts.is_some(),
                mount,
            );
        }
        mounted |= ours || !path_taken;
        wire_env(&mut ops, i, container, &url);
        patch.extend(ops);
    }
    let volumes = pod.volumes.as_deref().unwrap_or_default();
    if mounted && !volumes.iter().any(|v| v.name == volume) {
        let value = json!({ "name": volume, "secret": { "secretName": volume } });
        if pod.volumes.is_some() {
            patch.add(pod_path(&["volumes", "-"]), value);
        } else {
            patch.add(pod_path(&["volumes"]), json!([value]));
        }
    }
    patch.finish()
}

/// The patch that removes what [`wire`] added for `cr` in `namespace` from `deployment`,
/// leaving everything of other TrustyAIServices in place.
pub fn unwire(deployment: &Deployment, cr: &str, namespace: &str) -> JsonPatch {
    let Some((pod, volume, url, mut patch)) = starting_point(deployment, cr, namespace) else {
        return JsonPatch::default();
    };
    for (i, container) in pod.containers.iter().enumerate() {
        let mut ops = container_ops(i, container);
        let mounts = container.volume_mounts.as_deref().unwrap_or_default();
        let ours: Vec<usize> = indices(mounts.iter().map(|m| m.name == volume));
        remove_items(
            &mut ops,
            &container_path(i, &["volumeMounts"]),
            &ours,
            mounts.len(),
            |j| json!(mounts[j].name),
        );
        let path_still_mounted = tls_path_mounted_by_another(mounts, &volume);
        unwire_env(&mut ops, i, container, &url, path_still_mounted);
        patch.extend(ops);
    }
    let volumes = pod.volumes.as_deref().unwrap_or_default();
    let ours: Vec<usize> = indices(volumes.iter().map(|v| v.name == volume));
    remove_items(
        &mut patch,
        &pod_path(&["volumes"]),
        &ours,
        volumes.len(),
        |j| json!(volumes[j].name),
    );
    patch.finish()
}

/// What both [`wire`] and [`unwire`] start from: the pod template, the TrustyAIService's
/// volume name and payload processor URL, and a patch guarded by the Deployment's
/// resourceVersion (so a Deployment changed since it was read is not patched). `None` for a
/// Deployment without a pod spec: nothing to patch.
fn starting_point<'a>(
    deployment: &'a Deployment,
    cr: &str,
    namespace: &str,
) -> Option<(&'a PodSpec, String, String, Builder)> {
    let pod = deployment.spec.template.spec.as_ref()?;
    let patch = Builder::guarded_by(deployment.metadata.resource_version.as_deref());
    Some((
        pod,
        names::internal(cr),
        payload_processor_url(cr, namespace),
        patch,
    ))
}

/// The operations on container `i`, starting with a test of its name: they address it by
/// index, and must edit the container they were computed for.
fn container_ops(i: usize, container: &Container) -> Builder {
    let mut ops = Builder::default();
    ops.test(container_path(i, &["name"]), json!(container.name));
    ops
}

/// Whether another TrustyAIService's volume is mounted at the TLS path, which holds one.
fn tls_path_mounted_by_another(mounts: &[VolumeMount], volume: &str) -> bool {
    mounts
        .iter()
        .any(|m| m.name != volume && m.mount_path == modelmesh::TLS_MOUNT_PATH)
}

fn wire_env(ops: &mut Builder, i: usize, container: &Container, url: &str) {
    let env = container.env.as_deref().unwrap_or_default();
    let mut additions = Vec::new();
    match find(env, modelmesh::PAYLOAD_PROCESSORS_ENV) {
        None => additions.push(json!({ "name": modelmesh::PAYLOAD_PROCESSORS_ENV, "value": url })),
        // A value from a ConfigMap or Secret is someone else's to edit.
        Some((_, var)) if var.value_from.is_some() => {}
        Some((j, var)) => {
            let current = var.value.as_deref().unwrap_or_default();
            if !current.split_whitespace().any(|u| u == url) {
                let j = j.to_string();
                ops.test(container_path(i, &["env", &j, "name"]), json!(var.name));
                let value_path = container_path(i, &["env", &j, "value"]);
                let joined = if current.trim().is_empty() {
                    url.to_owned()
                } else {
                    format!("{current} {url}")
                };
                if var.value.is_some() {
                    ops.test(value_path.clone(), json!(current));
                    ops.replace(value_path, json!(joined));
                } else {
                    ops.add(value_path, json!(joined));
                }
            }
        }
    }
    if container.name == modelmesh::CONTAINER
        && find(env, modelmesh::TLS_KEY_CERT_PATH_ENV).is_none()
    {
        additions.push(json!({
            "name": modelmesh::TLS_KEY_CERT_PATH_ENV, "value": modelmesh::TLS_KEY_CERT_PATH
        }));
    }
    if additions.is_empty() {
        return;
    }
    if container.env.is_some() {
        for value in additions {
            ops.add(container_path(i, &["env", "-"]), value);
        }
    } else {
        ops.add(container_path(i, &["env"]), Value::Array(additions));
    }
}

fn unwire_env(
    ops: &mut Builder,
    i: usize,
    container: &Container,
    url: &str,
    path_still_mounted: bool,
) {
    let env = container.env.as_deref().unwrap_or_default();
    // (index, new value, or None to remove the variable)
    let mut edits: Vec<(usize, Option<String>)> = Vec::new();
    if let Some((j, var)) = find(env, modelmesh::PAYLOAD_PROCESSORS_ENV)
        && var.value_from.is_none()
    {
        let current = var.value.as_deref().unwrap_or_default();
        if current.split_whitespace().any(|u| u == url) {
            let rest: Vec<&str> = current.split_whitespace().filter(|u| *u != url).collect();
            edits.push((j, (!rest.is_empty()).then(|| rest.join(" "))));
        }
    }
    if container.name == modelmesh::CONTAINER
        && !path_still_mounted
        && let Some((j, var)) = find(env, modelmesh::TLS_KEY_CERT_PATH_ENV)
        && var.value.as_deref() == Some(modelmesh::TLS_KEY_CERT_PATH)
    {
        edits.push((j, None));
    }
    for (j, value) in &edits {
        if let Some(value) = value {
            let index = j.to_string();
            ops.test(
                container_path(i, &["env", &index, "name"]),
                json!(env[*j].name),
            );
            ops.replace(container_path(i, &["env", &index, "value"]), json!(value));
        }
    }
    let mut removals: Vec<usize> = edits
        .iter()
        .filter(|(_, value)| value.is_none())
        .map(|(j, _)| *j)
        .collect();
    removals.sort_unstable();
    remove_items(
        ops,
        &container_path(i, &["env"]),
        &removals,
        env.len(),
        |j| json!(env[j].name),
    );
}

/// Removes the items at `ours` (ascending) from the list at `list_path` of length `len`, each
/// after a `test` of its name: the whole list when that leaves it empty (so wiring and
/// unwiring restore the original object), else item by item from the highest index down, so
/// no removal shifts a later path.
fn remove_items(
    ops: &mut Builder,
    list_path: &PointerBuf,
    ours: &[usize],
    len: usize,
    name: impl Fn(usize) -> Value,
) {
    if ours.is_empty() {
        return;
    }
    for &j in ours.iter().rev() {
        ops.test(
            list_path.with_trailing_token(j).with_trailing_token("name"),
            name(j),
        );
    }
    if ours.len() == len {
        ops.remove(list_path.clone());
    } else {
        for &j in ours.iter().rev() {
            ops.remove(list_path.with_trailing_token(j));
        }
    }
}

/// Indices of the `true` items.
fn indices(flags: impl Iterator<Item = bool>) -> Vec<usize> {
    flags
        .enumerate()
        .filter(|(_, flag)| *flag)
        .map(|(j, _)| j)
        .collect()
}

fn append(ops: &mut Builder, i: usize, field: &str, list_exists: bool, value: Value) {
    if list_exists {
        ops.add(container_path(i, &[field, "-"]), value);
    } else {
        ops.add(container_path(i, &[field]), json!([value]));
    }
}

fn find<'a>(env: &'a [EnvVar], name: &str) -> Option<(usize, &'a EnvVar)> {
    env.iter().enumerate().find(|(_, e)| e.name == name)
}

fn pod_path(rest: &[&str]) -> PointerBuf {
    let mut tokens = vec!["spec", "template", "spec"];
    tokens.extend_from_slice(rest);
    pointer(&tokens)
}

fn container_path(i: usize, rest: &[&str]) -> PointerBuf {
    let i = i.to_string();
    let mut tokens = vec!["containers", i.as_str()];
    tokens.extend_from_slice(rest);
    pod_path(&tokens)
}

#[cfg(test)]
mod tests;
