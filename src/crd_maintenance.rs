//! CRD maintenance: at start the operator applies its own CRD, so upgrading the operator
//! upgrades the CRD even where Helm would not (Helm never upgrades `crds/`). Platform teams that
//! manage CRDs themselves turn it off with `--no-crd-maintenance`.
//!
//! The conversion settings (`spec.conversion`) are left out: the caBundle publisher owns them
//! under a field manager of its own, and two managers writing one field would fight.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::wait::{await_condition, conditions};
use std::time::Duration;

use trustyai_crds::contract::CRD_NAME;

/// Field manager of the CRD's schema, names and versions.
pub const FIELD_MANAGER: &str = "trustyai-operator";

/// Errors of CRD maintenance.
#[derive(Debug, thiserror::Error)]
pub enum CrdMaintenanceError {
    #[error("building the CRD: {0}")]
    Build(#[from] trustyai_crds::crd::CrdError),
    #[error("applying CRD {CRD_NAME}: {0}")]
    Apply(#[source] kube::Error),
    #[error("watching CRD {CRD_NAME} for Established: {0}")]
    Wait(#[source] kube::runtime::wait::Error),
    #[error("CRD {CRD_NAME} did not become Established within {0:?}")]
    NotEstablished(Duration),
}

/// The CRD as this operator applies it: everything but `spec.conversion`.
pub fn crd_without_conversion() -> Result<CustomResourceDefinition, CrdMaintenanceError> {
    let mut crd = trustyai_crds::crd::crd()?;
    crd.spec.conversion = None;
    Ok(crd)
}

/// Applies the CRD (server-side apply, forced: it takes the fields over from Helm or kubectl)
/// and waits until it is Established.
#[tracing::instrument(skip(client))]
pub async fn apply_crd(client: &Client) -> Result<(), CrdMaintenanceError> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd = crd_without_conversion()?;
    api.patch(
        CRD_NAME,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(&crd),
    )
    .await
    .map_err(CrdMaintenanceError::Apply)?;
    let timeout = Duration::from_secs(30);
    tokio::time::timeout(
        timeout,
        await_condition(api, CRD_NAME, conditions::is_crd_established()),
    )
    .await
    .map_err(|_| CrdMaintenanceError::NotEstablished(timeout))?
    .map_err(CrdMaintenanceError::Wait)?;
    tracing::info!("CRD {CRD_NAME} applied and Established");
    Ok(())
}
