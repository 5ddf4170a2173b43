//! An API server without streaming lists.

use crate::support;

use kube::api::PostParams;
use support::ControlPlane;
use support::cluster::tas_api;
use support::operator::Operator;

use super::*;

/// An API server that does not serve streaming lists (the `WatchList` feature gate off, as in
/// Kubernetes 1.33): the operator's question at start gets a refusal, its watches list first,
/// and it reconciles as usual. (The shared control plane serves them, so every other test runs
/// the streaming path.)
#[tokio::test]
async fn without_streaming_lists_the_operator_reconciles_through_list_first_watches() {
    let cp = tokio::task::spawn_blocking(|| {
        ControlPlane::start_with_apiserver_flags(&["--feature-gates=WatchList=false"])
    })
    .await
    .expect("start thread")
    .unwrap_or_else(|e| panic!("a control plane without streaming lists: {e}"));
    let client = cp.client().await;
    let ns = cp.namespace(&client, "list-first").await;
    let operator = ready(Operator::start(
        &cp,
        &ns,
        &["--create-webhook-configurations"],
    ))
    .await;
    let log = || std::fs::read_to_string(&operator.log).unwrap_or_default();
    assert!(
        log().contains("watches start with a list request before the watch"),
        "the operator did not decide on lists:\n{}",
        operator.logs()
    );
    let app = cp.namespace(&client, "app").await;
    tas_api(&client, &app, "v1")
        .create(&PostParams::default(), &tas("v1", "tas"))
        .await
        .expect("creating a TrustyAIService");
    wait_reconciled(&client, &app, "tas", || operator.logs()).await;
    stop(operator).await;
}
