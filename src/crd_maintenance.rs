//! CRD maintenance: at start the operator applies its own CRDs (TrustyAIService, then
//! TrustyAIMetric), so upgrading the operator upgrades the CRDs even where Helm would not (Helm
//! never upgrades `crds/`). Platform teams that manage CRDs themselves turn it off with
//! `--no-crd-maintenance`.
//!
//! The conversion settings (`spec.conversion`) are left out: the caBundle publisher owns them
//! under a field manager of its own, and two managers writing one field would fight.

use futures::StreamExt;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::wait::{Condition, conditions};
use kube::runtime::watcher;
use std::time::Duration;

use trustyai_crds::contract::CRD_NAME;

/// The TrustyAIMetric CRD's name.
pub const METRIC_CRD_NAME: &str = "trustyaimetrics.trustyai.opendatahub.io";

/// Field manager of the CRD's schema, names and versions.
pub const FIELD_MANAGER: &str = "trustyai-operator";

/// Errors of CRD maintenance.
#[derive(Debug, thiserror::Error)]
pub enum CrdMaintenanceError {
    #[error("building the CRD")]
    Build(#[from] trustyai_crds::crd::CrdError),
    #[error("applying CRD {0}")]
    Apply(&'static str, #[source] kube::Error),
    #[error("the watch of CRD {0} ended before it was Established")]
    WatchEnded(&'static str),
    #[error("CRD {0} did not become Established within {1:?}")]
    NotEstablished(&'static str, Duration),
}

/// The CRD as this operator applies it: everything but `spec.conversion`.
pub fn crd_without_conversion() -> Result<CustomResourceDefinition, CrdMaintenanceError> {
    let mut crd = trustyai_crds::crd::crd()?;
    crd.spec.conversion = None;
    Ok(crd)
}

/// The annotation `kubectl apply` keeps its last manifest in.
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// The JSON patch removing [`LAST_APPLIED`] from `crd`, guarded by its resourceVersion; `None`
/// when it has none.
fn last_applied_removal(crd: &CustomResourceDefinition) -> Option<serde_json::Value> {
    crd.metadata.annotations.as_ref()?.get(LAST_APPLIED)?;
    let rv = crd.metadata.resource_version.as_deref()?;
    Some(serde_json::json!([
        {"op": "test", "path": "/metadata/resourceVersion", "value": rv},
        {"op": "remove", "path": "/metadata/annotations/kubectl.kubernetes.io~1last-applied-configuration"}
    ]))
}

/// Drops the annotation a `kubectl apply` of another operator's CRD (the Go operator's
/// manifests) left: a later `kubectl apply` of those manifests would compute its patch against
/// it and point conversion back at the other operator. A failure is only logged: the CRD is
/// applied, and the next start tries again.
async fn forget_last_applied(api: &Api<CustomResourceDefinition>, crd: &CustomResourceDefinition) {
    let Some(name) = crd.metadata.name.as_deref() else {
        return;
    };
    let Some(patch) = last_applied_removal(crd) else {
        return;
    };
    let patch: Patch<()> = match serde_json::from_value(patch) {
        Ok(operations) => Patch::Json(operations),
        Err(error) => {
            tracing::warn!(error = %crate::error_chain::Chain(&error), "could not build the patch removing {LAST_APPLIED}");
            return;
        }
    };
    match api
        .patch(
            name,
            &PatchParams {
                field_manager: Some(FIELD_MANAGER.to_owned()),
                ..PatchParams::default()
            },
            &patch,
        )
        .await
    {
        Ok(_) => tracing::info!("removed {LAST_APPLIED} from CRD {name}"),
        Err(error) => {
            tracing::warn!(error = %crate::error_chain::Chain(&error), "could not remove {LAST_APPLIED} from CRD {name}")
        }
    }
}

/// The TrustyAIMetric CRD as this operator applies it (it has one version, so no conversion).
pub fn metric_crd() -> Result<CustomResourceDefinition, CrdMaintenanceError> {
    Ok(trustyai_crds::metric::crd::crd()?)
}

/// Applies both CRDs (server-side apply, forced: it takes the fields over from Helm or
/// kubectl) and waits until each is Established. The TrustyAIService CRD goes first: nothing
/// of the TrustyAIMetric one is needed to serve TrustyAIServices.
#[tracing::instrument(skip(client))]
pub async fn apply_crd(client: &Client) -> Result<(), CrdMaintenanceError> {
    apply_one(client, CRD_NAME, &crd_without_conversion()?).await?;
    apply_one(client, METRIC_CRD_NAME, &metric_crd()?).await
}

/// Applies `crd`, named `name`, and waits until it is Established.
async fn apply_one(
    client: &Client,
    name: &'static str,
    crd: &CustomResourceDefinition,
) -> Result<(), CrdMaintenanceError> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let applied = api
        .patch(
            name,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(crd),
        )
        .await
        .map_err(|e| CrdMaintenanceError::Apply(name, e))?;
    forget_last_applied(&api, &applied).await;
    // Already served (the usual restart): no watch needed to see it.
    if conditions::is_crd_established().matches_object(Some(&applied)) {
        tracing::info!("CRD {name} applied and Established");
        return Ok(());
    }
    let timeout = Duration::from_secs(30);
    tokio::time::timeout(timeout, established(api, name))
        .await
        .map_err(|_| CrdMaintenanceError::NotEstablished(name, timeout))??;
    tracing::info!("CRD {name} applied and Established");
    Ok(())
}

/// Waits until the watch of the CRD `name` shows it Established (its errors are retried with
/// backoff).
async fn established(
    api: Api<CustomResourceDefinition>,
    name: &'static str,
) -> Result<(), CrdMaintenanceError> {
    let config = crate::list_strategy::watcher_config().fields(&format!("metadata.name={name}"));
    let crds = watcher::watcher(api, config)
        .default_backoff()
        .applied_objects();
    let mut crds = std::pin::pin!(crds);
    while let Some(event) = crds.next().await {
        match event {
            Ok(crd) if conditions::is_crd_established().matches_object(Some(&crd)) => return Ok(()),
            Ok(_) => {}
            Err(error) => {
                tracing::debug!(error = %crate::error_chain::Chain(&error), "CRD watch error")
            }
        }
    }
    Err(CrdMaintenanceError::WatchEnded(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_crd_with_the_kubectl_annotation_is_patched() {
        let mut crd = crd_without_conversion().expect("the CRD");
        crd.metadata.resource_version = Some("7".to_owned());
        assert!(last_applied_removal(&crd).is_none());
        crd.metadata.annotations = Some([(LAST_APPLIED.to_owned(), "{}".to_owned())].into());
        let patch = last_applied_removal(&crd).expect("a patch");
        assert_eq!(patch[0]["value"], "7");
        assert_eq!(
            patch[1]["path"],
            "/metadata/annotations/kubectl.kubernetes.io~1last-applied-configuration"
        );
    }

    #[test]
    fn the_metric_crd_is_applied_under_its_own_name() {
        let crd = metric_crd().expect("the metric CRD");
        assert_eq!(crd.metadata.name.as_deref(), Some(METRIC_CRD_NAME));
        assert!(crd.spec.conversion.is_none());
    }
}
