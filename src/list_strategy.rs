//! How the process's watches get their first list: streamed in the watch request itself
//! (Kubernetes' streaming lists, `sendInitialEvents=true`) where the API server serves them,
//! else a list request before the watch.
//!
//! Every cache of the operator starts from a watch, and the classic start is two requests, a
//! list and then a watch from the list's resourceVersion. A streaming list is one: the API
//! server sends the current objects from its watch cache as the watch's first events, then a
//! bookmark marking their end, and goes on with the changes. It is on by default in the
//! `WatchList` feature gate of Kubernetes 1.32 and from 1.34, off in 1.33, and an admin can
//! switch it either way, so the version does not tell: one streaming watch at start asks.
//!
//! The answer is a fact about the API server, decided once per process before any watch starts
//! and read by every watch (the certificate tasks get it passed, as they live in their own
//! crate). A refusal later, from an API server of another version behind the same address
//! during a control-plane upgrade, is retried with backoff by the watch that met it until it
//! reaches one that serves streaming lists; a restart decides again.

use std::sync::OnceLock;

use futures::StreamExt;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, WatchEvent, WatchParams};
use kube::runtime::watcher::{self, InitialListStrategy};
use trustyai_crds::contract::CRD_NAME;

static DECIDED: OnceLock<InitialListStrategy> = OnceLock::new();

/// The strategy decided at start ([`detect`]); before that, and in processes that never ask
/// (the offline commands, unit tests), a list before each watch, which every API server serves.
pub fn current() -> InitialListStrategy {
    DECIDED
        .get()
        .cloned()
        .unwrap_or(InitialListStrategy::ListWatch)
}

/// A watcher configuration with the process's strategy; callers add their selectors.
pub fn watcher_config() -> watcher::Config {
    watcher::Config {
        initial_list_strategy: current(),
        ..watcher::Config::default()
    }
}

/// Asks the API server once whether it serves streaming lists, and keeps the answer for the
/// process. The question is a streaming watch of our CRD's metadata (the operator may watch
/// CRDs: discovery does), closed after its first event.
pub async fn detect(client: &Client) -> InitialListStrategy {
    let strategy = ask(client).await;
    let decided = DECIDED.get_or_init(|| strategy.clone()).clone();
    tracing::info!(
        initial_lists = ?decided,
        "watches start with {}",
        match decided {
            InitialListStrategy::StreamingList => "streaming lists (one request each)",
            InitialListStrategy::ListWatch => "a list request before the watch",
        }
    );
    decided
}

async fn ask(client: &Client) -> InitialListStrategy {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let params = WatchParams::streaming_lists()
        .fields(&format!("metadata.name={CRD_NAME}"))
        .timeout(10);
    let refused = |why: String| {
        tracing::info!(reason = %why, "the API server does not serve streaming lists");
        InitialListStrategy::ListWatch
    };
    let events = match api.watch_metadata(&params, "0").await {
        Ok(events) => events,
        Err(e) => return refused(crate::error_chain::chain_text(&e)),
    };
    let mut events = std::pin::pin!(events);
    match events.next().await {
        // The CRD's current state, or (on a first install) at once the bookmark that ends the
        // initial events: either way the API server streams the list.
        Some(Ok(WatchEvent::Added(_) | WatchEvent::Bookmark(_))) => {
            InitialListStrategy::StreamingList
        }
        Some(Ok(WatchEvent::Error(status))) => refused(status.message),
        Some(Ok(other)) => refused(format!("unexpected first event {other:?}")),
        Some(Err(e)) => refused(crate::error_chain::chain_text(&e)),
        None => refused("the watch ended before its first event".to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::mock_api::{Expected, MockApi};
    use http::Method;
    use serde_json::json;

    const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";

    #[tokio::test]
    async fn an_api_server_that_ends_the_initial_events_with_a_bookmark_streams_lists() {
        let bookmark = json!({"type": "BOOKMARK", "object": {
            "kind": "CustomResourceDefinition", "apiVersion": "apiextensions.k8s.io/v1",
            "metadata": {"resourceVersion": "12",
                         "annotations": {"k8s.io/initial-events-end": "true"}}}});
        let (api, client) = MockApi::new([Expected::answer(Method::GET, CRDS, 200, bookmark)]);
        assert_eq!(ask(&client).await, InitialListStrategy::StreamingList);
        let requests = api.requests();
        assert!(
            requests[0].query.contains("sendInitialEvents=true")
                && requests[0].query.contains("watch=true"),
            "{}",
            requests[0].query
        );
    }

    #[tokio::test]
    async fn an_api_server_that_refuses_initial_events_gets_a_list_before_each_watch() {
        // What an API server with the WatchList feature gate off answers.
        let message = "ListOptions.meta.k8s.io \"\" is invalid: sendInitialEvents: Forbidden: sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled";
        let refusal = Expected::refused(Method::GET, CRDS, 422, "Invalid", message);
        let (_api, client) = MockApi::new([refusal]);
        assert_eq!(ask(&client).await, InitialListStrategy::ListWatch);
    }

    #[test]
    fn before_the_decision_watches_list_first() {
        assert_eq!(
            watcher_config().initial_list_strategy,
            InitialListStrategy::ListWatch
        );
    }
}
