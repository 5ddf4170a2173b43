//! The chart installed as an admin installs it, with the operator's own image (built from the
//! Dockerfile's recipe): its pods run on the real node, and the API server reaches the webhooks
//! through their Service.

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams};
use kube::runtime::watcher;
use trustyai_local_cluster::ControlPlane;

use super::release::{
    NAMESPACE, RELEASE, SELECTOR, TEST_POD, TIMEOUT, container_process, installed,
    installed_namespace, operator_pods, two_ready,
};
use crate::support::cluster::{
    create_through_v1alpha1, create_with_disallowed_image, minimal_spec,
};
use crate::support::helm::helm;
use crate::support::wait;

#[tokio::test]
async fn the_operator_pods_become_ready_through_their_own_probes() {
    let (_claim, cp) = installed(false).await;
    let pods: Api<Pod> = Api::namespaced(cp.client().await, NAMESPACE);
    for pod in &two_ready(cp, &pods, None).await {
        let spec = pod.spec.as_ref().expect("a spec");
        let container = &spec.containers[0];
        let probe = container
            .readiness_probe
            .as_ref()
            .expect("a readiness probe");
        assert_eq!(
            probe.http_get.as_ref().map(|g| g.path.as_deref()),
            Some(Some("/readyz"))
        );
        let status = &pod
            .status
            .as_ref()
            .expect("a status")
            .container_statuses
            .as_ref()
            .expect("statuses")[0];
        assert!(status.ready && status.started == Some(true), "{status:?}");
        assert_eq!(status.restart_count, 0, "{status:?}");
    }
}

#[tokio::test]
async fn the_api_server_calls_every_webhook_through_the_service() {
    let (_claim, _, client, ns) = installed_namespace(false, "through-service").await;
    // v1alpha1 in, v1 stored (/convert), defaulted (/mutate).
    let stored = create_through_v1alpha1(&client, &ns, "alpha", minimal_spec()).await;
    assert_eq!(
        stored.data["spec"]["replicas"], 1,
        "defaulted: {:?}",
        stored.data
    );
    // /validate: a rule only the webhook carries.
    let err = create_with_disallowed_image(&client, &ns, "refused").await;
    assert!(err.to_string().contains("spec.image"), "{err}");
}

/// The checks `check-install` reports, each on a line of its own.
const CHECKS: [&str; 4] = [
    "admission (/mutate, /validate)",
    "conversion (/convert)",
    "rules",
    "metrics (/mutate)",
];

/// `helm test`; with `logs`, the test pod's log is printed too (only where the pod stays: a
/// passed one is deleted before helm could read it).
fn helm_test(cp: &ControlPlane, logs: bool) -> (bool, String, String) {
    let mut args = vec!["test", RELEASE, "--namespace", NAMESPACE, "--timeout", "3m"];
    if logs {
        args.push("--logs");
    }
    helm(Some(cp), &args)
}

#[tokio::test]
async fn helm_test_passes_with_its_real_pod_while_the_webhooks_answer() {
    let (_claim, cp) = installed(false).await;
    let (ok, out, err) = tokio::task::spawn_blocking(|| helm_test(cp, false))
        .await
        .expect("helm test ran");
    assert!(ok, "helm test: {out}{err}");
    assert!(
        out.lines()
            .any(|l| l.starts_with("Phase:") && l.trim_end().ends_with("Succeeded")),
        "{out}"
    );
    // A test pod that passed is deleted (hook-succeeded), with its ServiceAccount and RBAC.
    let pods: Api<Pod> = Api::namespaced(cp.client().await, NAMESPACE);
    wait::until("the passed test pod to be deleted", TIMEOUT, async || {
        pods.get_opt(TEST_POD).await.ok()?.is_none().then_some(())
    })
    .await;
}

#[tokio::test]
async fn helm_test_without_the_webhooks_fails_keeping_its_pod() {
    let (_claim, cp) = installed(true).await;
    let client = cp.client().await;
    let scale = |replicas: &str| {
        let (ok, out, err) = cp.kubectl(
            &[
                "scale",
                "deployment",
                "-n",
                NAMESPACE,
                "--selector",
                SELECTOR,
                "--replicas",
                replicas,
            ],
            None,
        );
        assert!(ok, "kubectl scale: {out}{err}");
    };
    scale("0");
    let pods: Api<Pod> = Api::namespaced(client, NAMESPACE);
    wait::until("the operator pods to be gone", TIMEOUT, async || {
        operator_pods(&pods).await?.is_empty().then_some(())
    })
    .await;
    // The API server cannot call the webhooks (failurePolicy: Fail): every check fails and says
    // why, and the pod stays for `kubectl logs`.
    let (ok, out, err) = tokio::task::spawn_blocking(|| helm_test(cp, true))
        .await
        .expect("helm test ran");
    scale("2");
    assert!(!ok, "helm test passed without an operator:\n{out}\n{err}");
    for check in CHECKS {
        assert!(
            out.contains(&format!("FAILED  {check}: "))
                || err.contains(&format!("FAILED  {check}: ")),
            "{check} did not fail:\n{out}\n{err}"
        );
    }
    assert!(
        format!("{out}{err}").contains("failed calling webhook"),
        "the failure does not say the API server could not call a webhook:\n{out}\n{err}"
    );
    let kept = pods.get_opt(TEST_POD).await.expect("read");
    assert!(kept.is_some(), "the failed test pod is kept");
    // The next test finds the release as installed, without this test's pod (it carries the
    // chart's labels: a later test waiting for the release's pods to go would wait for it).
    pods.delete(TEST_POD, &DeleteParams::default())
        .await
        .expect("delete the kept test pod");
    wait::until("the kept test pod deleted", TIMEOUT, async || {
        pods.get_opt(TEST_POD).await.ok()?.is_none().then_some(())
    })
    .await;
    two_ready(cp, &pods, None).await;
}

#[tokio::test]
async fn the_charts_container_restrictions_are_in_force_in_the_running_process() {
    let (_claim, cp) = installed(false).await;
    let pods: Api<Pod> = Api::namespaced(cp.client().await, NAMESPACE);
    let pid = container_process(cp, &two_ready(cp, &pods, None).await[0], "operator");
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("its status");
    let field = |name: &str| -> String {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .unwrap_or_default()
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    };
    // runAsNonRoot with the image's USER 65532:65532.
    assert_eq!(field("Uid:"), "65532 65532 65532 65532", "{status}");
    assert_eq!(field("Gid:"), "65532 65532 65532 65532", "{status}");
    // seccomp RuntimeDefault: a filter (mode 2); no privilege escalation; no capabilities.
    assert_eq!(field("Seccomp:"), "2", "{status}");
    assert_eq!(field("NoNewPrivs:"), "1", "{status}");
    assert_eq!(field("CapEff:"), "0000000000000000", "{status}");
    // readOnlyRootFilesystem: the container's root mount is read-only.
    let mounts = std::fs::read_to_string(format!("/proc/{pid}/mounts")).expect("its mounts");
    let root = mounts
        .lines()
        .find(|l| l.split_whitespace().nth(1) == Some("/"))
        .expect("a root mount");
    let options = root.split_whitespace().nth(3).unwrap_or_default();
    assert!(options.split(',').any(|o| o == "ro"), "{root}");
    // The memory limit (256Mi) in the container's memory cgroup.
    let cgroups = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).expect("its cgroups");
    let memory = cgroups
        .lines()
        .find_map(|l| l.split_once(":memory:").map(|(_, p)| p.to_owned()))
        .expect("a memory cgroup");
    let limit = std::fs::read_to_string(format!(
        "/sys/fs/cgroup/memory{memory}/memory.limit_in_bytes"
    ))
    .expect("its limit");
    assert_eq!(limit.trim(), (256u64 * 1024 * 1024).to_string());
}

#[tokio::test]
async fn a_deleted_operator_pod_is_replaced_after_a_clean_exit() {
    let (_claim, cp) = installed(true).await;
    let client = cp.client().await;
    let pods: Api<Pod> = Api::namespaced(client, NAMESPACE);
    let name = two_ready(cp, &pods, None).await[0]
        .metadata
        .name
        .clone()
        .expect("a name");
    // The kubelet writes the container's terminated state before the pod goes: watch for it.
    let events = watcher::watcher(
        pods.clone(),
        watcher::Config::default().fields(&format!("metadata.name={name}")),
    );
    let terminated = tokio::spawn(async move {
        use futures::StreamExt;
        let mut events = std::pin::pin!(events);
        while let Some(event) = events.next().await {
            let pods = match event {
                Ok(watcher::Event::Apply(pod) | watcher::Event::InitApply(pod)) => vec![pod],
                _ => continue,
            };
            for pod in pods {
                let state = pod
                    .status
                    .and_then(|s| s.container_statuses)
                    .and_then(|c| c.into_iter().next())
                    .and_then(|c| c.state)
                    .and_then(|s| s.terminated);
                if let Some(state) = state {
                    return (state.exit_code, state.reason);
                }
            }
        }
        (-1, None)
    });
    pods.delete(&name, &DeleteParams::default())
        .await
        .expect("deleted");
    let (code, reason) = tokio::time::timeout(TIMEOUT, terminated)
        .await
        .expect("terminated in time")
        .expect("the watch");
    assert_eq!(code, 0, "the container's exit on SIGTERM ({reason:?})");
    // Replaced: two Ready pods again, the deleted one not among them.
    two_ready(cp, &pods, Some(&name)).await;
}
