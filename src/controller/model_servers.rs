//! Wires a TrustyAIService into the model servers of its namespace, and undoes it: the I/O
//! around the pure patches of [`super::wiring`].
//!
//! The objects patched belong to users (InferenceServices) and to the ModelMesh controller
//! (its Deployments), so every change is a guarded JSON patch computed from the object just
//! read. One failing object does not stop the others, nor the rest of the reconcile (the Go
//! operator let a failing InferenceService block the whole TrustyAIService): the first
//! error is returned after everything was tried.

use k8s_openapi::api::apps::v1::Deployment;
use kube::ResourceExt;
use kube::api::{Api, DynamicObject, ListParams};
use trustyai_crds::TrustyAIService;
use trustyai_crds::contract::labels;

use super::apply;
use super::children::inputs::WatchedInput;
use super::context::Context;
use super::discovery::{OptionalApis, inference_service_api_resource};
use super::error::ReconcileError;
use super::resources::Instance;
use super::wiring::kserve::{self, IsvcWiring, LoggerChange};
use super::wiring::{JsonPatch, modelmesh};

/// The label selector of ModelMesh Deployments.
pub fn modelmesh_selector() -> String {
    format!(
        "{}={}",
        labels::MODELMESH_SERVICE,
        labels::MODELMESH_SERVICE_VALUE
    )
}

/// The InferenceServices of the namespace, read before the children are applied (whether
/// one goes through Istio decides the Istio children).
#[derive(Debug, Default)]
pub struct Survey {
    /// The InferenceServices (none when the API is not served or the namespace has none).
    inference_services: Vec<DynamicObject>,
    /// Some InferenceService exists in the namespace.
    pub inference_services_present: bool,
    /// An InferenceService logs to this TrustyAIService through Istio.
    pub istio_wanted: bool,
    /// A listing failure; wiring reports it.
    error: Option<ReconcileError>,
}

/// Lists the namespace's InferenceServices, unless their cache shows there are none.
pub async fn survey(
    ctx: &Context,
    instance: &Instance<'_>,
    apis: OptionalApis,
    serverless_enabled: bool,
) -> Survey {
    let mut out = Survey::default();
    if !apis.inference_services {
        return out;
    }
    let ns = instance.namespace();
    if ctx
        .children
        .input(WatchedInput::InferenceServices)
        .any_in(ns)
        == Some(false)
    {
        return out;
    }
    let isvcs: Api<DynamicObject> =
        Api::namespaced_with(ctx.client.clone(), ns, &inference_service_api_resource());
    match isvcs.list(&ListParams::default()).await {
        Ok(list) => out.inference_services = list.items,
        Err(e) => {
            out.error = Some(ReconcileError::kube("listing", "InferenceService", ns)(e));
            return out;
        }
    }
    out.inference_services_present = !out.inference_services.is_empty();
    out.istio_wanted = out.inference_services.iter().any(|isvc| {
        matches!(
            kserve::plan(isvc, instance.name(), ns, serverless_enabled),
            IsvcWiring::Logger { .. }
        ) && kserve::uses_istio(isvc)
    });
    out
}

impl Survey {
    /// Whether the InferenceServices could not be listed (what they want is then unknown).
    pub fn failed(&self) -> bool {
        self.error.is_some()
    }
}

/// What wiring saw.
#[derive(Debug, Default)]
pub struct Wired {
    /// The first failure, after everything was tried.
    pub error: Option<ReconcileError>,
}

impl Wired {
    fn fail(&mut self, error: ReconcileError) {
        tracing::warn!(error = %crate::error_chain::Chain(&error), "wiring failed");
        self.error.get_or_insert(error);
    }
}

/// Wires `instance` into the InferenceServices of `survey` and the ModelMesh Deployments.
pub async fn wire(
    ctx: &Context,
    instance: &Instance<'_>,
    survey: Survey,
    serverless_enabled: bool,
) -> Wired {
    let mut out = Wired::default();
    if let Some(error) = survey.error {
        out.fail(error);
        return out;
    }
    let (cr, ns) = (instance.name(), instance.namespace());
    let service = instance.service();
    let isvcs: Api<DynamicObject> =
        Api::namespaced_with(ctx.client.clone(), ns, &inference_service_api_resource());
    let mut modelmesh_wanted = false;
    for isvc in &survey.inference_services {
        let name = isvc.name_any();
        match kserve::plan(isvc, cr, ns, serverless_enabled) {
            IsvcWiring::ModelMesh => modelmesh_wanted = true,
            IsvcWiring::Skip(reason) => {
                tracing::debug!(isvc = %name, ?reason, "InferenceService skipped")
            }
            IsvcWiring::Logger { url } => match kserve::set_logger(isvc, cr, ns, &url) {
                LoggerChange::Unchanged | LoggerChange::NoPredictor => {}
                LoggerChange::Conflict { existing_url } => {
                    ctx.events
                        .warning(
                            service,
                            "logger",
                            "InferenceServiceLoggerConflict",
                            format!(
                                "InferenceService {name} already logs to {existing_url}; left unchanged"
                            ),
                        )
                        .await;
                }
                LoggerChange::Patch(patch) => {
                    match patch_json(&isvcs, "InferenceService", &name, &patch).await {
                        Ok(()) => {
                            ctx.events
                                .normal(
                                    service,
                                    "InferenceServiceConfigured",
                                    "Wire",
                                    format!("KServe InferenceService {name} configured"),
                                )
                                .await;
                        }
                        Err(e) => out.fail(e),
                    }
                }
            },
        }
    }
    if modelmesh_wanted {
        wire_modelmesh(ctx, instance, &mut out).await;
    }
    out
}

async fn wire_modelmesh(ctx: &Context, instance: &Instance<'_>, out: &mut Wired) {
    let (cr, ns) = (instance.name(), instance.namespace());
    let api: Api<Deployment> = Api::namespaced(ctx.client.clone(), ns);
    let deployments = match api
        .list(&ListParams::default().labels(&modelmesh_selector()))
        .await
    {
        Ok(list) => list.items,
        Err(e) => {
            out.fail(ReconcileError::kube("listing", "Deployment", ns)(e));
            return;
        }
    };
    for deployment in &deployments {
        let name = deployment.name_any();
        if !modelmesh::is_ready(deployment) {
            // Patching mid-rollout restarts ModelMesh twice; its Deployment watch brings us
            // back when it is ready.
            tracing::info!(deployment = %name, "ModelMesh Deployment not ready; wiring it later");
            continue;
        }
        let patch = modelmesh::wire(deployment, cr, ns);
        if patch.is_empty() {
            continue;
        }
        match patch_json(&api, "Deployment", &name, &patch).await {
            Ok(()) => {
                ctx.events
                    .normal(
                        instance.service(),
                        "InferenceServiceConfigured",
                        "Wire",
                        format!("ModelMesh Deployment {name} configured"),
                    )
                    .await;
            }
            Err(e) => out.fail(e),
        }
    }
}

/// Removes what [`wire`] added: the KServe loggers pointing at `service` (when the API is
/// served) and its payload processor, mounts and volume on the ModelMesh Deployments.
pub async fn unwire(
    ctx: &Context,
    service: &TrustyAIService,
    apis: OptionalApis,
) -> Result<(), ReconcileError> {
    let cr = service.name_any();
    let ns = service.namespace().unwrap_or_default();
    let mut first: Option<ReconcileError> = None;
    if apis.inference_services {
        let isvcs: Api<DynamicObject> =
            Api::namespaced_with(ctx.client.clone(), &ns, &inference_service_api_resource());
        let every = ListParams::default();
        let unwired = patch_each(&isvcs, "InferenceService", every, &ns, |isvc| {
            kserve::remove_logger(isvc, &cr, &ns)
        });
        if let Err(e) = unwired.await {
            first.get_or_insert(e);
        }
    }
    let deployments: Api<Deployment> = Api::namespaced(ctx.client.clone(), &ns);
    let modelmesh_only = ListParams::default().labels(&modelmesh_selector());
    let unwired = patch_each(
        &deployments,
        "Deployment",
        modelmesh_only,
        &ns,
        |deployment| modelmesh::unwire(deployment, &cr, &ns),
    );
    if let Err(e) = unwired.await {
        first.get_or_insert(e);
    }
    first.map_or(Ok(()), Err)
}

/// Patches every object `list` selects in `namespace` with its `patch`, going on past a
/// failing one; the first error (listing or patching) after all were tried.
async fn patch_each<K>(
    api: &Api<K>,
    kind: &'static str,
    list: ListParams,
    namespace: &str,
    patch: impl Fn(&K) -> JsonPatch,
) -> Result<(), ReconcileError>
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned,
{
    let objects = api
        .list(&list)
        .await
        .map_err(ReconcileError::kube("listing", kind, namespace))?;
    let mut first = None;
    for object in &objects.items {
        if let Err(e) = patch_json(api, kind, &object.name_any(), &patch(object)).await {
            first.get_or_insert(e);
        }
    }
    first.map_or(Ok(()), Err)
}

/// Applies a non-empty JSON patch to `name`.
async fn patch_json<K>(
    api: &Api<K>,
    kind: &'static str,
    name: &str,
    patch: &JsonPatch,
) -> Result<(), ReconcileError>
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned,
{
    if patch.is_empty() {
        return Ok(());
    }
    let body = patch.to_kube_patch::<()>();
    api.patch(name, &apply::update_params(), &body)
        .await
        .map_err(ReconcileError::kube("patching", kind, name))?;
    tracing::info!(kind, name, "patched");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modelmesh_deployments_are_selected_by_label() {
        assert_eq!(modelmesh_selector(), "modelmesh-service=modelmesh-serving");
    }
}
