//! What a reconcile reads before it renders anything: the storage mode, the images, the
//! database credentials' verdict, the namespace objects the rendering depends on and the model
//! servers to wire; each problem found on the way is a Warning event of its topic.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;
use trustyai_crds::TrustyAIService;
use trustyai_crds::contract::reason;
use trustyai_crds::defaults::StorageMode;
use trustyai_crds::validation::image_allowed;

use super::children;
use super::children::declaration::Kind;
use super::children::memory::Owner;
use super::context::Context;
use super::db_secret::{self, DbSecretError};
use super::discovery::OptionalApis;
use super::error::ReconcileError;
use super::events::topic;
use super::image_upgrade;
use super::model_servers;
use super::resources::images::{self, ImageSource, ImageSources, Images};
use super::resources::{Instance, names};
use super::wiring::kserve;

/// What the rendering and the wiring read before anything is applied.
pub(super) struct Gathered {
    pub(super) mode: StorageMode,
    pub(super) apis: OptionalApis,
    /// Whether KServe runs Serverless (the operator ConfigMap says).
    pub(super) serverless: bool,
    pub(super) images: Images,
    /// The pods keep the Java service's image instead of the configured one.
    pub(super) image_held: Option<image_upgrade::Held>,
    pub(super) read: NamespaceReads,
    pub(super) survey: model_servers::Survey,
}

pub(super) async fn gather(
    ctx: &Context,
    instance: &Instance<'_>,
) -> Result<Gathered, ReconcileError> {
    let mode = storage_mode(ctx, instance).await?;
    let apis = ctx.apis();
    let config = ctx.operator_config_data();
    let serverless = kserve::serverless_enabled(config.as_ref());
    let (images, image_held) =
        resolve_images(ctx, instance.service(), instance, config.as_ref()).await;
    let read = read_inputs(ctx, instance, mode).await?;
    let survey = model_servers::survey(ctx, instance, apis, serverless).await;
    Ok(Gathered {
        mode,
        apis,
        serverless,
        images,
        image_held,
        read,
        survey,
    })
}

/// The storage mode; a spec without one gets an `InvalidSpec` warning (the schema and the
/// webhook make this unreachable for objects written while they were in place).
async fn storage_mode(
    ctx: &Context,
    instance: &Instance<'_>,
) -> Result<StorageMode, ReconcileError> {
    match instance.storage_mode() {
        Ok(mode) => Ok(mode),
        Err(e) => {
            ctx.events
                .warning(
                    instance.service(),
                    topic::PROVISIONING,
                    "InvalidSpec",
                    e.to_string(),
                )
                .await;
            Err(e.into())
        }
    }
}

/// What the rendering reads from other objects of the namespace.
pub(super) struct NamespaceReads {
    /// The database credentials verdict, in the modes using a database.
    pub(super) db_credentials: Option<Result<(), DbSecretError>>,
    /// The `<cr>-db-ca` Secret exists.
    pub(super) db_ca_exists: bool,
    /// The custom CA bundle ConfigMap exists.
    pub(super) custom_ca_bundle: bool,
}

async fn read_inputs(
    ctx: &Context,
    instance: &Instance<'_>,
    mode: StorageMode,
) -> Result<NamespaceReads, ReconcileError> {
    let db_credentials = if mode.uses_database() {
        Some(check_database(ctx, instance).await?)
    } else {
        None
    };
    let db_ca_exists = mode.uses_database()
        && children::secret_exists(ctx, instance.namespace(), &names::db_ca(instance.name()))
            .await?;
    let custom_ca_bundle = children::custom_ca_bundle_exists(ctx, instance.namespace()).await?;
    Ok(NamespaceReads {
        db_credentials,
        db_ca_exists,
        custom_ca_bundle,
    })
}

/// The images, and a warning when `spec.image` is not allowed (it is then ignored, as the
/// webhook would have refused it); the Java service's image when the pods keep it
/// ([`image_upgrade`]), with a warning.
async fn resolve_images(
    ctx: &Context,
    service: &TrustyAIService,
    instance: &Instance<'_>,
    config: Option<&std::collections::BTreeMap<String, String>>,
) -> (Images, Option<image_upgrade::Held>) {
    let spec_image = service
        .spec
        .image
        .as_deref()
        .map(str::trim)
        .filter(|i| !i.is_empty());
    let prefixes = ctx.allowed_image_prefixes(config);
    let allowed = spec_image.is_some_and(|i| image_allowed(i, &prefixes));
    let mut images = images::resolve(&ImageSources {
        env_service_image: ctx.config.env_service_image.as_deref(),
        env_kube_rbac_proxy_image: ctx.config.env_kube_rbac_proxy_image.as_deref(),
        spec_image,
        spec_image_allowed: allowed,
        config_map: config,
    });
    match spec_image {
        Some(image) if !allowed => {
            ctx.events
                .warning(
                    service,
                    topic::IMAGE,
                    "ImageNotAllowed",
                    format!(
                        "spec.image {image} is not under an allowed prefix ({}); the default image is used",
                        prefixes.join(", ")
                    ),
                )
                .await;
        }
        // The operator's environment pins the image its release was tested with (the chart
        // sets it): say so rather than ignore spec.image silently.
        Some(image) if images.service.source == ImageSource::Environment => {
            ctx.events
                .warning(
                    service,
                    topic::IMAGE,
                    "SpecImageIgnored",
                    format!(
                        "spec.image {image} is not used: the operator's environment ({}) names the service image {}, which takes precedence",
                        trustyai_crds::contract::image_env::SERVICE_IMAGE,
                        images.service.image
                    ),
                )
                .await;
        }
        _ => ctx.events.resolved(service, topic::IMAGE),
    }
    let deployment: Option<Deployment> = children::cached(
        ctx,
        Kind::Deployment,
        instance.namespace(),
        &names::workload(instance.name()),
    );
    let running = image_upgrade::running_image(deployment.as_ref(), service);
    let (service_image, held) = image_upgrade::decide(
        images.service,
        running.as_deref(),
        image_upgrade::upgrade_allowed(service),
    );
    images.service = service_image;
    match &held {
        Some(held) => {
            ctx.events
                .warning(
                    service,
                    topic::IMAGE_UPGRADE,
                    reason::JAVA_SERVICE_DATA,
                    held.message(),
                )
                .await;
        }
        None => ctx.events.resolved(service, topic::IMAGE_UPGRADE),
    }
    (images, held)
}

/// The database credentials check, with a warning event when it fails.
async fn check_database(
    ctx: &Context,
    instance: &Instance<'_>,
) -> Result<Result<(), DbSecretError>, ReconcileError> {
    let name = names::db_credentials(instance.name(), instance.spec());
    // The verdict (never the data) is remembered for the resourceVersion it was reached on.
    let owner = Owner::of(instance);
    let cached = ctx
        .children
        .cache(Kind::Secret)
        .lookup(Some(instance.namespace()), &name);
    let memory = &ctx.children.db_credentials;
    let checked = match memory.current(&owner, Kind::Secret, &name, 0, &cached) {
        Some(verdict) => verdict,
        None => {
            let api: Api<Secret> = Api::namespaced(ctx.client.clone(), instance.namespace());
            let secret = api
                .get_opt(&name)
                .await
                .map_err(ReconcileError::kube("reading", "Secret", &name))?;
            let verdict = db_secret::check_secret(&name, instance.namespace(), secret.as_ref());
            let rv = secret
                .as_ref()
                .and_then(|s| s.metadata.resource_version.as_deref());
            memory.record(&owner, Kind::Secret, &name, 0, rv, verdict.clone());
            verdict
        }
    };
    match &checked {
        Err(e) => {
            ctx.events
                .warning(
                    instance.service(),
                    topic::DATABASE,
                    e.reason(),
                    e.to_string(),
                )
                .await;
        }
        Ok(()) => ctx.events.resolved(instance.service(), topic::DATABASE),
    }
    Ok(checked)
}
