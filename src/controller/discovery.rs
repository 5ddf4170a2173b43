//! Which optional APIs the cluster serves: OpenShift Routes, Prometheus-operator
//! ServiceMonitors, KServe InferenceServices and the Istio objects.
//!
//! Discovered before the controller starts, then again whenever a CustomResourceDefinition of
//! one of those groups changes and every [`REDISCOVERY_INTERVAL`] (API groups can also come
//! from aggregated API servers, which have no CRD). Changes are published on a `watch`
//! channel; the controller reconciles everything when they change. A discovery call that
//! fails for another reason than 404 keeps the previous answer, so a flaky API server does not
//! make Routes "disappear".

use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::client::APIGroupDiscoveryList;
use kube::core::{ApiResource, GroupVersionKind, PartialObjectMeta};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::children::route;
use super::children::{istio, service_monitor};
use super::error::is_not_found;

/// How often the optional APIs are discovered again without a CRD change.
pub const REDISCOVERY_INTERVAL: Duration = Duration::from_secs(60);
/// How long to wait after a CRD change before discovering (a new CRD is served once it is
/// Established, a moment after it is created).
const SETTLE: Duration = Duration::from_secs(1);

/// The optional APIs the cluster serves.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OptionalApis {
    /// `route.openshift.io/v1` Routes. Also taken as the sign of OpenShift, whose service-ca
    /// operator issues the operands' serving certificates.
    pub routes: bool,
    /// `monitoring.coreos.com/v1` ServiceMonitors.
    pub service_monitors: bool,
    /// `serving.kserve.io/v1beta1` InferenceServices.
    pub inference_services: bool,
    /// `networking.istio.io/v1beta1` DestinationRules.
    pub destination_rules: bool,
    /// `networking.istio.io/v1beta1` VirtualServices.
    pub virtual_services: bool,
}

impl OptionalApis {
    /// Logs which APIs are served, one boolean field each.
    pub fn log(&self, message: &str) {
        tracing::info!(
            routes = self.routes,
            service_monitors = self.service_monitors,
            inference_services = self.inference_services,
            destination_rules = self.destination_rules,
            virtual_services = self.virtual_services,
            "{message}"
        );
    }

    /// Whether the OpenShift service-ca operator issues the `<cr>-tls` and `<cr>-internal`
    /// Secrets from the Services' annotations (else the operator issues them).
    pub fn service_ca(&self) -> bool {
        self.routes
    }
}

/// The KServe InferenceService API.
pub fn inference_service_api_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("serving.kserve.io", "v1beta1", "InferenceService"),
        "inferenceservices",
    )
}

/// One API to look for.
struct Probe {
    resource: ApiResource,
    field: fn(&mut OptionalApis) -> &mut bool,
}

impl Probe {
    fn new(resource: ApiResource, field: fn(&mut OptionalApis) -> &mut bool) -> Self {
        Self { resource, field }
    }
}

fn probes() -> [Probe; 5] {
    [
        Probe::new(route::api_resource(), |a| &mut a.routes),
        Probe::new(service_monitor::api_resource(), |a| &mut a.service_monitors),
        Probe::new(inference_service_api_resource(), |a| {
            &mut a.inference_services
        }),
        Probe::new(istio::destination_rule_api_resource(), |a| {
            &mut a.destination_rules
        }),
        Probe::new(istio::virtual_service_api_resource(), |a| {
            &mut a.virtual_services
        }),
    ]
}

/// Whether a change of the CRD `name` (`<plural>.<group>`) may change [`OptionalApis`].
pub fn is_relevant_crd(name: &str) -> bool {
    probes()
        .iter()
        .any(|p| name == format!("{}.{}", p.resource.plural, p.resource.group))
}

/// Discovers the optional APIs in one request (aggregated discovery of `/apis`); where the
/// API server does not answer it, group by group, an API whose discovery fails (other than
/// 404) keeping its value in `previous`.
pub async fn discover(client: &Client, previous: OptionalApis) -> OptionalApis {
    match client.list_api_groups_aggregated().await {
        Ok(groups) => from_aggregated(&groups),
        Err(error) => {
            tracing::debug!(error = %crate::error_chain::Chain(&error), "aggregated discovery failed; discovering group by group");
            discover_by_group(client, previous).await
        }
    }
}

/// The optional APIs an aggregated discovery document lists.
fn from_aggregated(groups: &APIGroupDiscoveryList) -> OptionalApis {
    let mut found = OptionalApis::default();
    for probe in probes() {
        let resource = &probe.resource;
        *(probe.field)(&mut found) = groups
            .items
            .iter()
            .filter(|g| {
                g.metadata.as_ref().and_then(|m| m.name.as_deref()) == Some(&resource.group)
            })
            .flat_map(|g| &g.versions)
            .filter(|v| v.version.as_deref() == Some(&resource.version))
            .flat_map(|v| &v.resources)
            .any(|r| r.resource.as_deref() == Some(&resource.plural));
    }
    found
}

async fn discover_by_group(client: &Client, previous: OptionalApis) -> OptionalApis {
    let mut found = previous;
    for probe in probes() {
        let resource = &probe.resource;
        let served = match client.list_api_group_resources(&resource.api_version).await {
            Ok(list) => list.resources.iter().any(|r| r.name == resource.plural),
            Err(e) if is_not_found(&e) => false,
            Err(error) => {
                tracing::warn!(error = %crate::error_chain::Chain(&error), api = %resource.api_version, "API discovery failed; keeping the previous answer");
                continue;
            }
        };
        *(probe.field)(&mut found) = served;
    }
    found
}

/// Keeps `tx` current until `stop`.
pub async fn maintain(client: Client, tx: watch::Sender<OptionalApis>, stop: CancellationToken) {
    let crds = watcher(
        Api::<PartialObjectMeta<CustomResourceDefinition>>::all(client.clone()),
        crate::list_strategy::watcher_config(),
    )
    .default_backoff()
    .filter_map(|event| async move {
        match event {
            // The (re)list shows what the discovery before it already saw: only changes count.
            Ok(watcher::Event::Apply(crd) | watcher::Event::Delete(crd)) => crd
                .metadata
                .name
                .as_deref()
                .is_some_and(is_relevant_crd)
                .then_some(()),
            Ok(_) => None,
            Err(error) => {
                tracing::debug!(error = %crate::error_chain::Chain(&error), "CustomResourceDefinition watch error");
                None
            }
        }
    });
    let mut crds = std::pin::pin!(crds);
    // The caller discovered just now: the first periodic pass is one interval away.
    let mut tick = tokio::time::interval_at(
        tokio::time::Instant::now() + REDISCOVERY_INTERVAL,
        REDISCOVERY_INTERVAL,
    );
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tick.tick() => {}
            Some(()) = crds.next() => tokio::time::sleep(SETTLE).await,
        }
        let previous = *tx.borrow();
        let found = discover(&client, previous).await;
        if found != previous {
            // Published before it is logged: whoever reads the log line may rely on it.
            tx.send_replace(found);
            found.log("optional APIs changed");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relevant_crds_are_the_optional_apis() {
        for name in [
            "routes.route.openshift.io",
            "servicemonitors.monitoring.coreos.com",
            "inferenceservices.serving.kserve.io",
            "destinationrules.networking.istio.io",
            "virtualservices.networking.istio.io",
        ] {
            assert!(is_relevant_crd(name), "{name}");
        }
        assert!(!is_relevant_crd("trustyaiservices.trustyai.opendatahub.io"));
        assert!(!is_relevant_crd("podmonitors.monitoring.coreos.com"));
    }

    #[test]
    fn one_aggregated_document_answers_every_api() {
        let groups: APIGroupDiscoveryList = serde_json::from_value(serde_json::json!({
            "apiVersion": "apidiscovery.k8s.io/v2", "kind": "APIGroupDiscoveryList",
            "metadata": {},
            "items": [
                {"metadata": {"name": "route.openshift.io"}, "versions": [
                    {"version": "v1", "resources": [{"resource": "routes"}]}]},
                {"metadata": {"name": "monitoring.coreos.com"}, "versions": [
                    {"version": "v1", "resources": [{"resource": "podmonitors"}]}]},
                {"metadata": {"name": "serving.kserve.io"}, "versions": [
                    {"version": "v1alpha1", "resources": [{"resource": "inferenceservices"}]}]},
                {"metadata": {"name": "networking.istio.io"}, "versions": [
                    {"version": "v1beta1", "resources": [
                        {"resource": "destinationrules"}, {"resource": "virtualservices"}]}]}
            ]
        }))
        .expect("a discovery document");
        assert_eq!(
            from_aggregated(&groups),
            OptionalApis {
                routes: true,
                // Another resource of the group, another version: not served.
                service_monitors: false,
                inference_services: false,
                destination_rules: true,
                virtual_services: true,
            }
        );
    }

    #[test]
    fn service_ca_follows_routes() {
        assert!(
            OptionalApis {
                routes: true,
                ..OptionalApis::default()
            }
            .service_ca()
        );
        assert!(!OptionalApis::default().service_ca());
    }
}
