//! The chart's two operator pods elect one leader; when the leader's pod is deleted another
//! takes over. (Whether every admission request is answered meanwhile is
//! `upgrade::helm_upgrade_to_a_new_image_fails_no_admission_or_conversion_request`'s question,
//! ignored until the drain stops racing the API server's pooled connections.)

use std::time::Instant;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams};

use super::release::{NAMESPACE, TIMEOUT, installed, operator_pods, two_ready};
use crate::support::wait;

/// The operator's leader Lease (its `--lease-name` default; the chart keeps it).
const LEASE: &str = "trustyai-operator-leader";

/// The pod among `pods` whose process holds the Lease (its identity is
/// `<pod name>-<pid>-<start>`).
async fn leader_among(leases: &Api<Lease>, pods: &[String]) -> Option<String> {
    let holder = leases.get_opt(LEASE).await.ok()??.spec?.holder_identity?;
    pods.iter()
        .find(|pod| holder.starts_with(&format!("{pod}-")))
        .cloned()
}

#[tokio::test]
async fn a_deleted_leader_pod_hands_the_lease_over() {
    let (_claim, cp) = installed(true).await;
    let client = cp.client().await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let leases: Api<Lease> = Api::namespaced(client.clone(), NAMESPACE);
    let names: Vec<String> = two_ready(cp, &pods, None)
        .await
        .iter()
        .filter_map(|p| p.metadata.name.clone())
        .collect();
    let leader = wait::until_showing(
        "one of the pods leading",
        TIMEOUT,
        || cp.logs(),
        async || leader_among(&leases, &names).await,
    )
    .await;

    let deleted = Instant::now();
    pods.delete(&leader, &DeleteParams::default())
        .await
        .expect("deleted");
    // The other pod, or the deleted one's replacement if it starts first: whoever asks first
    // once the leaving leader has released the Lease.
    let next = wait::until_showing(
        "another pod leading",
        TIMEOUT,
        || cp.logs(),
        async || {
            let others: Vec<String> = operator_pods(&pods)
                .await?
                .iter()
                .filter_map(|p| p.metadata.name.clone())
                .filter(|n| *n != leader)
                .collect();
            leader_among(&leases, &others).await
        },
    )
    .await;
    let handover = deleted.elapsed();
    two_ready(cp, &pods, Some(&leader)).await;
    eprintln!(
        "leader {leader} deleted: {next} led after {:.1}s",
        handover.as_secs_f64()
    );
}
