//! The chart's two operator pods elect one leader; when the leader's pod is deleted another
//! takes over, and the API server's calls to the webhooks keep being answered meanwhile.

use std::time::Instant;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams};

use super::load::{AdmissionLoad, store};
use super::release::{NAMESPACE, installed_namespace, operator_pods, two_ready, wait_for};

/// The operator's leader Lease (its `--lease-name` default; the chart keeps it).
const LEASE: &str = trustyai_operator::cli::default_names::LEASE;

/// The pod among `pods` whose process holds the Lease (its identity is
/// `<pod name>-<pid>-<start>`).
async fn leader_among(leases: &Api<Lease>, pods: &[String]) -> Option<String> {
    let holder = leases.get_opt(LEASE).await.ok()??.spec?.holder_identity?;
    pods.iter()
        .find(|pod| holder.starts_with(&format!("{pod}-")))
        .cloned()
}

#[tokio::test]
async fn a_deleted_leader_pod_hands_over_while_admission_keeps_answering() {
    let (_claim, cp, client, ns) = installed_namespace(true, "handover-load").await;
    store(&client, &ns).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let leases: Api<Lease> = Api::namespaced(client.clone(), NAMESPACE);
    let names: Vec<String> = two_ready(cp, &pods, None)
        .await
        .iter()
        .filter_map(|p| p.metadata.name.clone())
        .collect();
    let leader = wait_for(cp, "one of the pods leading", async || {
        leader_among(&leases, &names).await
    })
    .await;

    let load = AdmissionLoad::start(&client, &ns);
    let deleted = Instant::now();
    pods.delete(&leader, &DeleteParams::default())
        .await
        .expect("deleted");
    // The other pod, or the deleted one's replacement if it starts first: whoever asks first
    // once the leaving leader has released the Lease.
    let next = wait_for(cp, "another pod leading", async || {
        let others: Vec<String> = operator_pods(&pods)
            .await?
            .iter()
            .filter_map(|p| p.metadata.name.clone())
            .filter(|n| *n != leader)
            .collect();
        leader_among(&leases, &others).await
    })
    .await;
    let handover = deleted.elapsed();
    two_ready(cp, &pods, Some(&leader)).await;
    let seen = load.finish().await;
    eprintln!(
        "leader {leader} deleted: {next} led after {:.1}s; {} requests answered, {} failed",
        handover.as_secs_f64(),
        seen.answered,
        seen.failures.len()
    );
    seen.assert_none_failed("the handover");
}
