//! `trustyai-operator uninstall`: what the finalizer and the operator would clean up, done
//! without a running operator, so nothing waits for one.
//!
//! Once the operator is gone (`helm uninstall`, or an outage), a TrustyAIService being deleted
//! keeps its finalizer and its namespace stays `Terminating`. This command releases every
//! TrustyAIService (undoes the wiring, deletes its ClusterRoleBindings, removes this
//! operator's finalizer; the objects themselves stay: they are the users') and every
//! TrustyAIMetric (removes the metric finalizer: the service the finalizer would unregister the
//! metric from goes with the release, or keeps it in memory only), then deletes what
//! the operator created cluster-wide or in its namespace: every ClusterRoleBinding it made,
//! the shared ServiceMonitor, its certificate Secrets, its leader Lease, and the webhook
//! registrations it created. The CRD and retained claims stay, by design: they hold data.

use std::process::ExitCode;

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, DynamicObject, ListParams, Patch};
use kube::runtime::reflector;
use kube::{Client, ResourceExt};
use tokio::sync::watch;
use trustyai_crds::TrustyAIService;
use trustyai_crds::contract::CENTRAL_SERVICE_MONITOR;
use trustyai_crds::metric::{self, TrustyAIMetric};

use crate::cli::UninstallArgs;
use crate::controller::apply::update_params;
use crate::controller::children::service_monitor;
use crate::controller::children::{Children, delete_ignoring_absent, lifecycle};
use crate::controller::context::{Context, ControllerConfig};
use crate::controller::discovery::{self, OptionalApis};
use crate::controller::error::ReconcileError;
use crate::controller::finalizer;
use crate::controller::reconciler::undo;

/// What the command did.
#[derive(Debug, Default)]
pub struct Report {
    /// TrustyAIServices released (`namespace/name`).
    pub released: Vec<String>,
    /// TrustyAIMetrics whose finalizer was removed (`namespace/name`).
    pub released_metrics: Vec<String>,
    /// Objects deleted (`Kind namespace/name` or `Kind name`).
    pub deleted: Vec<String>,
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "released {} TrustyAIService(s)", self.released.len())?;
        for name in &self.released {
            writeln!(f, "  {name}")?;
        }
        // Only when there were any: the output of a cluster without metrics stays as it was.
        if !self.released_metrics.is_empty() {
            writeln!(
                f,
                "released {} TrustyAIMetric(s)",
                self.released_metrics.len()
            )?;
            for name in &self.released_metrics {
                writeln!(f, "  {name}")?;
            }
        }
        writeln!(f, "deleted {} object(s)", self.deleted.len())?;
        for name in &self.deleted {
            writeln!(f, "  {name}")?;
        }
        Ok(())
    }
}

/// Runs the command.
pub async fn run_cli(args: &UninstallArgs) -> ExitCode {
    let Some(client) = crate::kube_client::client_or_report(args.kubeconfig.as_deref()).await
    else {
        return ExitCode::FAILURE;
    };
    match uninstall(client, args).await {
        Ok(report) => {
            print!("{report}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: uninstall failed: {}", crate::error_chain::Chain(&e));
            ExitCode::FAILURE
        }
    }
}

/// Releases every TrustyAIService and deletes what the operator left.
pub async fn uninstall(client: Client, args: &UninstallArgs) -> Result<Report, ReconcileError> {
    let apis = discovery::discover(&client, OptionalApis::default()).await;
    let ctx = context(client.clone(), &args.names.namespace, apis);
    let mut report = Report::default();
    // First: with the operator gone, registrations of its webhooks (failurePolicy Fail) would
    // refuse the very patches that release the TrustyAIServices.
    if args.webhook_configurations {
        delete_registrations(&client, args, &mut report).await?;
    }
    release_all(&ctx, &mut report).await?;
    release_metrics(&client, &mut report).await?;
    delete_leftovers(&client, args, apis, &mut report).await?;
    Ok(report)
}

/// A context for the finalizer's steps: nothing cached, so they read what they need.
fn context(client: Client, namespace: &str, apis: OptionalApis) -> std::sync::Arc<Context> {
    let (_, apis_rx) = watch::channel(apis);
    let (config_store, _) = reflector::store::<ConfigMap>();
    Context::new(
        client,
        ControllerConfig::new(namespace),
        apis_rx,
        config_store,
        Children::default(),
    )
}

async fn release_all(ctx: &Context, report: &mut Report) -> Result<(), ReconcileError> {
    let api: Api<TrustyAIService> = Api::all(ctx.client.clone());
    let services = api
        .list(&ListParams::default())
        .await
        .map_err(ReconcileError::kube("listing", "TrustyAIService", "all"))?;
    for service in &services.items {
        let Some(remaining) = finalizer::released(&service.metadata) else {
            continue;
        };
        let (name, namespace) = (service.name_any(), service.namespace().unwrap_or_default());
        undo(service, ctx).await?;
        let body = finalizer::patch(service.metadata.resource_version.as_deref(), &remaining);
        Api::<TrustyAIService>::namespaced(ctx.client.clone(), &namespace)
            .patch(&name, &update_params(), &Patch::Merge(&body))
            .await
            .map_err(ReconcileError::kube("patching", "TrustyAIService", &name))?;
        report.released.push(format!("{namespace}/{name}"));
    }
    Ok(())
}

/// The finalizers `meta` keeps once the metric finalizer is removed; `None` when it has none.
fn without_metric_finalizer(meta: &kube::api::ObjectMeta) -> Option<Vec<String>> {
    let current = meta.finalizers.as_deref().unwrap_or_default();
    current.iter().any(|f| f == metric::FINALIZER).then(|| {
        current
            .iter()
            .filter(|f| *f != metric::FINALIZER)
            .cloned()
            .collect()
    })
}

/// Removes the metric finalizer from every TrustyAIMetric. Without the CRD (an operator older
/// than TrustyAIMetric, or the CRD deleted already) there is nothing to release.
async fn release_metrics(client: &Client, report: &mut Report) -> Result<(), ReconcileError> {
    let api: Api<TrustyAIMetric> = Api::all(client.clone());
    let metrics = match api.list(&ListParams::default()).await {
        Ok(list) => list.items,
        Err(kube::Error::Api(status)) if status.code == 404 => return Ok(()),
        Err(e) => return Err(ReconcileError::kube("listing", "TrustyAIMetric", "all")(e)),
    };
    for item in &metrics {
        let Some(remaining) = without_metric_finalizer(&item.metadata) else {
            continue;
        };
        let (name, namespace) = (item.name_any(), item.namespace().unwrap_or_default());
        // The resourceVersion makes a concurrent change a conflict instead of dropping someone
        // else's finalizer.
        let body = finalizer::patch(item.metadata.resource_version.as_deref(), &remaining);
        Api::<TrustyAIMetric>::namespaced(client.clone(), &namespace)
            .patch(&name, &update_params(), &Patch::Merge(&body))
            .await
            .map_err(ReconcileError::kube("patching", "TrustyAIMetric", &name))?;
        report.released_metrics.push(format!("{namespace}/{name}"));
    }
    Ok(())
}

async fn delete_leftovers(
    client: &Client,
    args: &UninstallArgs,
    apis: OptionalApis,
    report: &mut Report,
) -> Result<(), ReconcileError> {
    let ns = args.names.namespace.as_str();
    report
        .deleted
        .extend(lifecycle::delete_every_cluster_scoped(client).await?);
    if apis.service_monitors {
        let monitors = Api::<DynamicObject>::namespaced_with(
            client.clone(),
            ns,
            &service_monitor::api_resource(),
        );
        delete_found(
            &monitors,
            "ServiceMonitor",
            ns,
            CENTRAL_SERVICE_MONITOR,
            report,
        )
        .await?;
    }
    let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
    for name in [&args.names.cert_secret, &args.names.operand_ca_secret] {
        delete_found(&secrets, "Secret", ns, name, report).await?;
    }
    let leases: Api<Lease> = Api::namespaced(client.clone(), ns);
    delete_found(&leases, "Lease", ns, &args.names.lease_name, report).await?;
    Ok(())
}

async fn delete_registrations(
    client: &Client,
    args: &UninstallArgs,
    report: &mut Report,
) -> Result<(), ReconcileError> {
    let validating: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    delete_found(
        &validating,
        "ValidatingWebhookConfiguration",
        "",
        &args.names.validating_webhook_configuration,
        report,
    )
    .await?;
    let mutating: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    delete_found(
        &mutating,
        "MutatingWebhookConfiguration",
        "",
        &args.names.mutating_webhook_configuration,
        report,
    )
    .await
}

/// Deletes `name` if it exists, and reports it.
async fn delete_found<K>(
    api: &Api<K>,
    kind: &'static str,
    namespace: &str,
    name: &str,
    report: &mut Report,
) -> Result<(), ReconcileError>
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned,
{
    if delete_ignoring_absent(api, kind, name).await? {
        report.deleted.push(if namespace.is_empty() {
            format!("{kind} {name}")
        } else {
            format!("{kind} {namespace}/{name}")
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use kube::api::ObjectMeta;

    use super::*;

    fn meta(finalizers: &[&str]) -> ObjectMeta {
        ObjectMeta {
            finalizers: Some(finalizers.iter().map(|f| (*f).to_owned()).collect()),
            ..ObjectMeta::default()
        }
    }

    #[test]
    fn only_the_metric_finalizer_is_removed() {
        let remaining = without_metric_finalizer(&meta(&["other/keep", metric::FINALIZER]));
        assert_eq!(remaining, Some(vec!["other/keep".to_owned()]));
    }

    #[test]
    fn a_metric_without_it_is_left_alone() {
        assert_eq!(without_metric_finalizer(&meta(&["other/keep"])), None);
        assert_eq!(without_metric_finalizer(&ObjectMeta::default()), None);
    }

    #[test]
    fn the_report_names_released_metrics_only_when_there_are_some() {
        let mut report = Report::default();
        assert!(!report.to_string().contains("TrustyAIMetric"));
        report.released_metrics.push("ns/m".to_owned());
        assert!(
            report
                .to_string()
                .contains("released 1 TrustyAIMetric(s)\n  ns/m\n")
        );
    }
}
