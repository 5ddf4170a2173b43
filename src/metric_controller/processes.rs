//! The processes of a TrustyAIService as the cluster shows them: the ones its internal
//! Service's EndpointSlices route to (ready), and every running service container of its pods.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::ResourceExt;
use trustyai_crds::contract::labels;

use super::Caches;
use super::plan::Process;

/// The service container's name in the pods the operator renders.
const SERVICE_CONTAINER: &str = "trustyai-service";
/// The internal Service's TLS port, which reaches the service's API.
const HTTPS_PORT_NAME: &str = "https";

/// The ready and the running processes of the TrustyAIService `cr`.
#[derive(Debug, Default)]
pub struct Processes {
    /// Routed to by the internal Service's endpoints.
    pub ready: Vec<Process>,
    /// Running, ready or not.
    pub running: Vec<Process>,
}

/// The processes of `cr` in `namespace`, from the cached pods of the TrustyAIService and the
/// cached EndpointSlices of its internal Service.
pub fn of(caches: &Caches, namespace: &str, cr: &str) -> Processes {
    let is_of = |labels: &std::collections::BTreeMap<String, String>, key: &str| {
        labels.get(key).map(String::as_str) == Some(cr)
    };
    let pods: Vec<_> = caches
        .pods
        .state()
        .into_iter()
        .filter(|p| {
            p.namespace().as_deref() == Some(namespace) && is_of(p.labels(), labels::INSTANCE)
        })
        .collect();
    let slices: Vec<_> = caches
        .slices
        .state()
        .into_iter()
        .filter(|s| {
            s.namespace().as_deref() == Some(namespace)
                && is_of(s.labels(), "kubernetes.io/service-name")
        })
        .collect();
    from_objects(
        &pods.iter().map(AsRef::as_ref).collect::<Vec<_>>(),
        &slices.iter().map(AsRef::as_ref).collect::<Vec<_>>(),
    )
}

/// [`of`], pure.
pub fn from_objects(pods: &[&Pod], slices: &[&EndpointSlice]) -> Processes {
    let running: Vec<Process> = pods.iter().copied().filter_map(running_process).collect();
    let by_uid: BTreeMap<&str, &Process> =
        running.iter().map(|p| (p.pod_uid.as_str(), p)).collect();
    let mut ready = Vec::new();
    for slice in slices {
        let Some(port) = slice
            .ports
            .iter()
            .flatten()
            .find(|p| p.name.as_deref() == Some(HTTPS_PORT_NAME))
            .and_then(|p| p.port)
        else {
            continue;
        };
        for endpoint in slice.endpoints.iter().flatten() {
            let is_ready = endpoint.conditions.as_ref().and_then(|c| c.ready) == Some(true);
            let Some(uid) = endpoint.target_ref.as_ref().and_then(|r| r.uid.as_deref()) else {
                continue;
            };
            let (Some(process), Some(ip)) = (by_uid.get(uid), endpoint.addresses.first()) else {
                continue;
            };
            if is_ready && !ready.iter().any(|p: &Process| p.pod_uid == uid) {
                ready.push(Process {
                    address: socket(ip, port),
                    ..(*process).clone()
                });
            }
        }
    }
    Processes { ready, running }
}

/// `ip:port`, bracketing an IPv6 address.
fn socket(ip: &str, port: i32) -> String {
    if ip.contains(':') {
        format!("[{ip}]:{port}")
    } else {
        format!("{ip}:{port}")
    }
}

/// The pod's running service container as a process (its address is the pod IP and the
/// container's own TLS port, used only when no endpoint names one).
fn running_process(pod: &Pod) -> Option<Process> {
    if pod.metadata.deletion_timestamp.is_some() {
        return None;
    }
    let status = pod.status.as_ref()?;
    let started = status
        .container_statuses
        .iter()
        .flatten()
        .find(|c| c.name == SERVICE_CONTAINER)?
        .state
        .as_ref()?
        .running
        .as_ref()?
        .started_at
        .as_ref()?;
    Some(Process {
        pod: pod.metadata.name.clone()?,
        pod_uid: pod.metadata.uid.clone()?,
        started_at: started.0.to_string(),
        address: socket(status.pod_ip.as_deref()?, 4443),
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pod(name: &str, started: &str) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": name, "uid": format!("uid-{name}")},
            "status": {"podIP": "10.0.0.7", "containerStatuses": [
                {"name": "kube-rbac-proxy", "image": "p", "imageID": "", "ready": true, "restartCount": 0,
                 "state": {"running": {"startedAt": "2026-12-07T05:00:00Z"}}},
                {"name": "trustyai-service", "image": "s", "imageID": "", "ready": true, "restartCount": 0,
                 "state": {"running": {"startedAt": started}}}
            ]}
        }))
        .unwrap_or_else(|e| panic!("{e}"))
    }

    fn slice(endpoints: serde_json::Value) -> EndpointSlice {
        serde_json::from_value(json!({
            "metadata": {"name": "demo-abc"},
            "addressType": "IPv4",
            "ports": [{"name": "http", "port": 8080}, {"name": "https", "port": 4443}],
            "endpoints": endpoints,
        }))
        .unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn ready_endpoints_are_the_ready_processes() {
        let pods = [
            pod("a", "2026-12-07T05:01:00Z"),
            pod("b", "2026-12-07T05:02:00Z"),
        ];
        let slices = [slice(json!([
            {"addresses": ["10.0.0.7"], "conditions": {"ready": true},
             "targetRef": {"kind": "Pod", "name": "a", "uid": "uid-a"}},
            {"addresses": ["10.0.0.8"], "conditions": {"ready": false},
             "targetRef": {"kind": "Pod", "name": "b", "uid": "uid-b"}},
        ]))];
        let read = from_objects(&[&pods[0], &pods[1]], &[&slices[0]]);
        assert_eq!(read.running.len(), 2);
        assert_eq!(read.ready.len(), 1);
        assert_eq!(read.ready[0].pod, "a");
        assert_eq!(read.ready[0].address, "10.0.0.7:4443");
        assert_eq!(read.ready[0].started_at, "2026-12-07T05:01:00Z");
    }

    #[test]
    fn an_endpoint_of_a_pod_without_a_running_service_is_skipped() {
        let slices = [slice(json!([
            {"addresses": ["10.0.0.7"], "conditions": {"ready": true},
             "targetRef": {"kind": "Pod", "name": "gone", "uid": "uid-gone"}},
        ]))];
        assert!(from_objects(&[], &[&slices[0]]).ready.is_empty());
    }
}
