//! `trustyai-operator run`: wires the process together.
//!
//! Order matters: the HTTPS server (conversion!) starts first, before CRD maintenance, leader
//! election and any cache sync, because the API server needs `/convert` even to list our
//! objects. Every long-running task is supervised: one failing brings the whole process down
//! with a non-zero exit, and one shutdown signal drains them all.

use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use kube::Client;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use trustyai_certs::{CertMode, FileSource, Lifetimes, ServiceNames, TlsMaterial};
use trustyai_webhooks::{
    AdmissionSettings, HttpsOptions, OpsState, Readiness, ServingCertificate, WebhookState,
};

use crate::cli::RunArgs;
use crate::controller::children::process_watches::ProcessWatches;
use crate::supervisor::{Task, TaskError, TaskFailure, Tasks, until_stop};
use crate::{crd_maintenance, shutdown};

/// How often mounted files (certificates, the client CA) are read again for changes.
const FILE_POLL_INTERVAL: Duration = Duration::from_secs(3);

/// Why the operator stopped with an error. Messages leave the cause to `source()`: show the
/// whole chain with [`crate::error_chain::Chain`].
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Client(#[from] crate::kube_client::ClientError),
    #[error("binding {what} on {address}")]
    Bind {
        what: &'static str,
        address: std::net::SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("preparing the certificate Secret")]
    CertificateSecret(#[source] trustyai_certs::StoreError),
    #[error("loading the mounted certificate files")]
    CertificateFiles(#[source] trustyai_certs::FilesError),
    #[error("reading the webhook client CA file {path}")]
    ClientCaFile {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the webhook client CA file {path} holds no usable CA")]
    ClientCa {
        path: std::path::PathBuf,
        #[source]
        source: trustyai_webhooks::TlsError,
    },
    #[error("CRD maintenance")]
    Crd(#[from] crd_maintenance::CrdMaintenanceError),
    #[error("registering the webhooks")]
    WebhookRegistration(#[source] kube::Error),
    #[error("configuring leader election")]
    LeaderElection(#[source] crate::leader_election::LeaderError),
    #[error(transparent)]
    Task(#[from] TaskFailure),
}

/// Runs the operator until a shutdown signal (exit 0) or a task failure (error).
pub async fn run(args: RunArgs) -> Result<(), RunError> {
    let client = crate::kube_client::client(args.kubeconfig.as_deref()).await?;
    let stop = CancellationToken::new();
    shutdown::cancel_on_signal(stop.clone());

    let readiness = Readiness::new([Readiness::TLS]);
    let publishes_ca_bundle = args.certificates.publishes_ca_bundle();
    let endpoint = webhook_endpoint(&args);
    if publishes_ca_bundle {
        // Until the first publication the API server cannot verify this server's certificate.
        readiness.register(Readiness::CA_BUNDLE);
    }
    let mut tasks = Tasks::default();
    let metrics = Arc::new(crate::metrics::Metrics::new());

    // The ops server outlives the HTTPS drain, so probes see "draining" rather than a refusal.
    let ops_stop = CancellationToken::new();
    start_ops_servers(&args, &readiness, &metrics, &ops_stop, &mut tasks).await?;
    // Before the first watch: whether watches stream their first list. After the ops server
    // starts, so probes get an answer ("not ready") while an unreachable API server holds the
    // question until its timeout.
    crate::list_strategy::detect(&client).await;

    // TLS material first: nothing can be served without it.
    let local = args.local_webhook_address.is_some();
    let names = ServiceNames::new(&args.service_name, &args.names.namespace).with_local(local);
    let material_rx = start_certificates(&client, &args, &names, &stop, &mut tasks).await?;
    let serving = Arc::new(ServingCertificate::new());
    load_material(&serving, &material_rx.borrow(), &readiness, &metrics);
    spawn_certificate_loader(
        &mut tasks,
        CertificateLoader {
            serving: serving.clone(),
            readiness: readiness.clone(),
            material: material_rx.clone(),
            metrics: metrics.clone(),
        },
        &stop,
    );

    let webhooks = start_webhook_server(
        &args, &client, &serving, &readiness, &metrics, &stop, &mut tasks,
    )
    .await?;

    if !args.no_crd_maintenance {
        crd_maintenance::apply_crd(&client).await?;
    }
    if args.create_webhook_configurations {
        crate::webhook_configurations::apply(
            &client,
            &args.names.validating_webhook_configuration,
            &args.names.mutating_webhook_configuration,
            &endpoint,
            args.webhook_timeout_seconds,
        )
        .await
        .map_err(RunError::WebhookRegistration)?;
    }
    let webhooks_trusted = publishes_ca_bundle.then(|| {
        start_ca_bundle_publisher(
            publish_targets(&args, endpoint),
            &client,
            material_rx.clone(),
            &readiness,
            &stop,
            &mut tasks,
        )
    });

    // The reconcile loop and the storage migration run on the leader only; every replica serves
    // the webhooks. They start after CRD maintenance and the webhook registrations, and where
    // this process publishes the caBundle, after its first publication (their writes go through
    // the webhooks). The storage migration runs only with CRD maintenance (who manages the CRD
    // runs `migrate-storage`).
    let duties = crate::leader_duties::Duties {
        controller: controller_config(&args, &metrics, webhooks.process_watches),
        migrate_storage: !args.no_crd_maintenance,
        webhooks_trusted,
    };
    start_leader_duties(
        &args,
        duties,
        &client,
        &metrics,
        webhooks.reconcile_stopped,
        &stop,
        &mut tasks,
    )
    .map_err(RunError::LeaderElection)?;

    Ok(crate::supervisor::supervise(tasks, stop, ops_stop).await?)
}

/// The ops server, and the probe server where an address is given for it.
async fn start_ops_servers(
    args: &RunArgs,
    readiness: &Readiness,
    metrics: &Arc<crate::metrics::Metrics>,
    ops_stop: &CancellationToken,
    tasks: &mut Tasks,
) -> Result<(), RunError> {
    let ops_listener = bind("the ops server", args.ops_address).await?;
    let ops_state = {
        let metrics = metrics.clone();
        OpsState::new(readiness.clone(), move |format| metrics.render(format))
    };
    if let Some(address) = args.probe_address {
        let probe_listener = bind("the probe server", address).await?;
        let (ops_stop, ops_state) = (ops_stop.clone(), ops_state.clone());
        tasks.spawn_ops(Task::ProbeServer, async move {
            trustyai_webhooks::serve_ops(probe_listener, ops_state, ops_stop.cancelled_owned())
                .await
                .map_err(TaskError::Server)
        });
    }
    let ops_stop = ops_stop.clone();
    tasks.spawn_ops(Task::OpsServer, async move {
        trustyai_webhooks::serve_ops(ops_listener, ops_state, ops_stop.cancelled_owned())
            .await
            .map_err(TaskError::Server)
    });
    Ok(())
}

/// Where each new certificate from the source goes.
struct CertificateLoader {
    serving: Arc<ServingCertificate>,
    readiness: Readiness,
    material: watch::Receiver<TlsMaterial>,
    metrics: Arc<crate::metrics::Metrics>,
}

/// A task that serves each new certificate from the source as it comes.
fn spawn_certificate_loader(
    tasks: &mut Tasks,
    loader: CertificateLoader,
    stop: &CancellationToken,
) {
    let CertificateLoader {
        serving,
        readiness,
        material: mut rx,
        metrics,
    } = loader;
    let stop = stop.clone();
    tasks.spawn(Task::CertificateLoader, async move {
        loop {
            tokio::select! {
                biased;
                _ = stop.cancelled() => return Ok(()),
                changed = rx.changed() => {
                    if changed.is_err() {
                        return Err(TaskError::InputStopped);
                    }
                    let material = rx.borrow_and_update().clone();
                    load_material(&serving, &material, &readiness, &metrics);
                }
            }
        }
    });
}

/// What the webhook server shares with the leader's duties.
struct WebhookServer {
    /// The watches both the webhooks and the controller read.
    process_watches: ProcessWatches,
    /// Cancelled once the reconcile loop has ended: the server drains only then.
    reconcile_stopped: CancellationToken,
}

/// The HTTPS server of the webhooks, and the process-wide watches its admission reads.
async fn start_webhook_server(
    args: &RunArgs,
    client: &Client,
    serving: &Arc<ServingCertificate>,
    readiness: &Readiness,
    metrics: &Arc<crate::metrics::Metrics>,
    stop: &CancellationToken,
    tasks: &mut Tasks,
) -> Result<WebhookServer, RunError> {
    let webhook_address = args.local_webhook_address.unwrap_or(args.webhook_address);
    let https_listener = bind("the webhook server", webhook_address).await?;
    let settings = Arc::new(ArcSwap::from_pointee(AdmissionSettings {
        allowed_image_prefixes: args.image_prefixes.allowed_image_prefixes.clone(),
    }));
    // The watches both the webhooks and the controller read. Secret names serve the
    // missing-credentials warning; until the first list completes the webhook simply does not
    // warn, so nothing waits for it.
    let process_watches = ProcessWatches::default();
    {
        let (watches, client, stop) = (process_watches.clone(), client.clone(), stop.clone());
        tasks.spawn(Task::ProcessWatches, async move {
            let work = watches.run(client, stop.clone());
            until_stop(&stop, work, |()| TaskError::EndedUnexpectedly).await
        });
    }
    let state = WebhookState {
        settings,
        secrets: crate::secret_cache::SecretCache::of(&process_watches)
            .map(|cache| Arc::new(cache) as Arc<dyn trustyai_webhooks::SecretLookup>),
        observer: metrics.clone(),
    };
    let router = trustyai_webhooks::webhook_router(state);
    let client_trust = match &args.webhook_limits.webhook_client_ca_file {
        Some(path) => Some(client_trust(tasks, stop, path).await?),
        None => None,
    };
    let options = HttpsOptions {
        drain_timeout: args.drain_timeout,
        events: trustyai_webhooks::ServerEvents(metrics.clone()),
        client_trust,
        ..args.webhook_limits.https_options()
    };
    // The reconcile loop's writes to TrustyAIServices go through these webhooks: the server
    // drains only once the loop has finished its in-flight reconciles. Readiness turns false at
    // the stop, so endpoints stop routing here first.
    let reconcile_stopped = CancellationToken::new();
    {
        let (serving, readiness, stop) = (serving.clone(), readiness.clone(), stop.clone());
        let reconcile_stopped = reconcile_stopped.clone();
        tasks.spawn(Task::WebhookServer, async move {
            let drain = async move {
                stop.cancelled().await;
                readiness.mark_draining();
                reconcile_stopped.cancelled().await;
            };
            trustyai_webhooks::serve_https(https_listener, router, serving, options, drain)
                .await
                .map_err(TaskError::Server)
        });
    }
    tracing::info!(address = %webhook_address, "webhook server listening");
    Ok(WebhookServer {
        process_watches,
        reconcile_stopped,
    })
}

/// The caBundle publisher; readiness's CA_BUNDLE check turns true at its first publication.
/// Returns whether the webhooks are trusted yet, for the leader's duties to wait on.
fn start_ca_bundle_publisher(
    targets: trustyai_certs::ca_bundle_patches::PublishTargets,
    client: &Client,
    material: watch::Receiver<TlsMaterial>,
    readiness: &Readiness,
    stop: &CancellationToken,
    tasks: &mut Tasks,
) -> watch::Receiver<bool> {
    let (published_tx, mut published_rx) = watch::channel(false);
    let webhooks_trusted = published_rx.clone();
    let (client, stop, ready) = (client.clone(), stop.clone(), readiness.clone());
    tasks.spawn(Task::CaBundlePublisher, async move {
        let mark_ready = async move {
            while published_rx.changed().await.is_ok() {
                if *published_rx.borrow() {
                    ready.set(Readiness::CA_BUNDLE, true);
                }
            }
            std::future::pending::<()>().await
        };
        let work = async move {
            tokio::select! {
                _ = trustyai_certs::run_publisher(client, targets, material, Some(published_tx)) => TaskError::EndedUnexpectedly,
                _ = mark_ready => TaskError::InputStopped,
            }
        };
        until_stop(&stop, work, |error| error).await
    });
    webhooks_trusted
}

/// The reconcile loop's settings from the command line.
fn controller_config(
    args: &RunArgs,
    metrics: &Arc<crate::metrics::Metrics>,
    process_watches: ProcessWatches,
) -> crate::controller::ControllerConfig {
    crate::controller::ControllerConfig {
        proxy_cluster_role: args.proxy_cluster_role.clone(),
        service_access: args.service_access,
        allowed_image_prefixes: args.image_prefixes.allowed_image_prefixes.clone(),
        operand_ca_secret: args.names.operand_ca_secret.clone(),
        operand_cert_lifetime: args.certificates.operand_cert_lifetime,
        operand_ca_lifetime: args.certificates.operand_ca_lifetime,
        ca_overlap: args.certificates.ca_overlap,
        cleanup_timeout: args.cleanup_timeout,
        pvc_pending_grace: args.pvc_pending_grace,
        metrics: Some(metrics.clone()),
        process_watches: Some(process_watches),
        ..crate::controller::ControllerConfig::new(&args.names.namespace).with_image_env()
    }
}

/// Leader election (or, without it, leadership at once) and the duties of the leader: the
/// reconcile loops and the storage migration. `reconcile_stopped` is cancelled when the duties
/// end, whichever way.
fn start_leader_duties(
    args: &RunArgs,
    duties: crate::leader_duties::Duties,
    client: &Client,
    metrics: &Arc<crate::metrics::Metrics>,
    reconcile_stopped: CancellationToken,
    stop: &CancellationToken,
    tasks: &mut Tasks,
) -> Result<(), crate::leader_election::LeaderError> {
    let (leading_tx, leading_rx) = watch::channel(false);
    let release = CancellationToken::new();
    if args.leader_election.no_leader_election {
        leading_tx.send_replace(true);
        let release = release.clone();
        tasks.spawn(Task::LeaderElection, async move {
            release.cancelled().await;
            drop(leading_tx);
            Ok(())
        });
    } else {
        let config = crate::leader_election::LeaderConfig {
            lease_name: args.names.lease_name.clone(),
            namespace: args.names.namespace.clone(),
            identity: leader_identity(),
            lease_duration: args.leader_election.lease_duration,
            renew_deadline: args.leader_election.renew_deadline,
            retry_period: args.leader_election.retry_period,
        };
        config.validate()?;
        let (client, release) = (client.clone(), release.clone());
        tasks.spawn(Task::LeaderElection, async move {
            crate::leader_election::run(client, config, leading_tx, release)
                .await
                .map_err(TaskError::Leader)
        });
    }
    let (client, stop, metrics) = (client.clone(), stop.clone(), metrics.clone());
    tasks.spawn(Task::ReconcileLoop, async move {
        // Also when the task is aborted or panics: the webhook server waits for it.
        let _stopped = reconcile_stopped.drop_guard();
        crate::leader_duties::lead(client, duties, leading_rx, stop, release, metrics)
            .await
            .map_err(TaskError::Leading)
    });
    Ok(())
}

fn load_material(
    serving: &ServingCertificate,
    material: &TlsMaterial,
    readiness: &Readiness,
    metrics: &crate::metrics::Metrics,
) {
    match serving.set_from_pem(
        material.cert_chain_pem().as_bytes(),
        material.key_pem().as_bytes(),
    ) {
        Ok(()) => {
            readiness.set(Readiness::TLS, true);
            metrics.set_certificate_expiry(material.not_after_unix_seconds());
            tracing::info!(
                not_after = material.not_after_unix_seconds(),
                "serving certificate loaded"
            );
        }
        Err(e) => {
            tracing::error!(error = %crate::error_chain::Chain(&e), "new certificate rejected; the previous one keeps serving")
        }
    }
}

/// Starts the certificate source for the chosen mode and returns the channel of material,
/// holding a first value.
async fn start_certificates(
    client: &Client,
    args: &RunArgs,
    names: &ServiceNames,
    stop: &CancellationToken,
    tasks: &mut Tasks,
) -> Result<watch::Receiver<TlsMaterial>, RunError> {
    let lifetimes = Lifetimes {
        ca: args.certificates.ca_lifetime,
        serving: args.certificates.serving_cert_lifetime,
        overlap: args.certificates.ca_overlap,
        // Renewal is due at two thirds of not_before..not_after, so the backdate must stay
        // small against short (test) lifetimes.
        backdate: Lifetimes::default()
            .backdate
            .min(args.certificates.serving_cert_lifetime / 10),
    };
    match args.certificates.cert_mode {
        CertMode::SelfSigned => {
            let ensured = trustyai_certs::ensure_secret(
                client,
                &args.names.namespace,
                &args.names.cert_secret,
                names,
                &lifetimes,
            )
            .await
            .map_err(RunError::CertificateSecret)?;
            let recorder = event_recorder(client);
            if !ensured.warnings.is_empty() {
                use kube::Resource;
                let regarding = ensured.secret.object_ref(&());
                trustyai_certs::publish_warnings(&recorder, &regarding, &ensured.warnings).await;
            }
            let judged = ensured.judged();
            let (tx, rx) = watch::channel(ensured.material);
            let secret = trustyai_certs::CertificateSecret {
                namespace: args.names.namespace.clone(),
                name: args.names.cert_secret.clone(),
                names: names.clone(),
                lifetimes,
                streaming_lists: streaming_lists(),
            };
            let (client, stop) = (client.clone(), stop.clone());
            tasks.spawn(Task::CertificateMaintenance, async move {
                let work = trustyai_certs::maintain_secret(
                    client,
                    secret,
                    tx,
                    Some(recorder),
                    Some(judged),
                );
                until_stop(&stop, work, |result| {
                    result.err().map_or(TaskError::EndedUnexpectedly, |error| {
                        TaskError::Certificates(Box::new(error))
                    })
                })
                .await
            });
            Ok(rx)
        }
        _ => {
            let source = FileSource::in_dir(
                &args.certificates.cert_dir,
                args.certificates.publishes_ca_bundle(),
            );
            let material = trustyai_certs::load_files(&source)
                .await
                .map_err(RunError::CertificateFiles)?;
            let (tx, rx) = watch::channel(material);
            let stop = stop.clone();
            tasks.spawn(Task::CertificateFiles, async move {
                let work = trustyai_certs::watch_files(source, tx, FILE_POLL_INTERVAL);
                until_stop(&stop, work, |_| TaskError::EndedUnexpectedly).await
            });
            Ok(rx)
        }
    }
}

/// The client CA bundle read from `path` now, and a task that applies each change of the file
/// (a mounted Secret is updated in place when the API server's client certificate is rotated).
async fn client_trust(
    tasks: &mut Tasks,
    stop: &CancellationToken,
    path: &std::path::Path,
) -> Result<Arc<trustyai_webhooks::ClientTrust>, RunError> {
    let pem = tokio::fs::read(path)
        .await
        .map_err(|source| RunError::ClientCaFile {
            path: path.to_owned(),
            source,
        })?;
    let trust = Arc::new(
        trustyai_webhooks::ClientTrust::from_pem(&pem).map_err(|source| RunError::ClientCa {
            path: path.to_owned(),
            source,
        })?,
    );
    let (stop, reloaded, path) = (stop.clone(), Arc::clone(&trust), path.to_owned());
    tasks.spawn(Task::ClientCaFile, async move {
        let work = trustyai_webhooks::reload_client_ca(reloaded, path, FILE_POLL_INTERVAL);
        until_stop(&stop, work, |_| TaskError::EndedUnexpectedly).await
    });
    Ok(trust)
}

/// This replica's identity in the lease: the pod name (or host name) and the process, so two
/// processes on one host never share it.
fn leader_identity() -> String {
    let host = std::env::var("POD_NAME")
        .or_else(|_| std::env::var("HOSTNAME"))
        .unwrap_or_else(|_| "trustyai-operator".into());
    let started = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or_default();
    format!("{host}-{}-{started:x}", std::process::id())
}

/// Events about the operator's own objects (its certificate Secret), as `trustyai-operator`.
fn event_recorder(client: &Client) -> kube::runtime::events::Recorder {
    let reporter = kube::runtime::events::Reporter {
        controller: "trustyai-operator".into(),
        instance: std::env::var("POD_NAME").ok(),
    };
    kube::runtime::events::Recorder::new(client.clone(), reporter)
}

/// How the API server reaches the webhooks: the webhook Service, or in local mode a URL. The
/// registrations the operator creates and the caBundle publisher both use it.
fn webhook_endpoint(args: &RunArgs) -> trustyai_certs::ca_bundle_patches::WebhookEndpoint {
    match args.local_webhook_address {
        Some(address) => trustyai_certs::ca_bundle_patches::WebhookEndpoint::Url {
            base: args
                .webhook_url
                .clone()
                .unwrap_or_else(|| format!("https://{address}")),
        },
        None => trustyai_certs::ca_bundle_patches::WebhookEndpoint::Service {
            name: args.service_name.clone(),
            namespace: args.names.namespace.clone(),
            port: args.service_port,
        },
    }
}

/// Whether the watches of the certificate tasks stream their first list.
fn streaming_lists() -> bool {
    crate::list_strategy::current() == kube::runtime::watcher::InitialListStrategy::StreamingList
}

fn publish_targets(
    args: &RunArgs,
    endpoint: trustyai_certs::ca_bundle_patches::WebhookEndpoint,
) -> trustyai_certs::ca_bundle_patches::PublishTargets {
    trustyai_certs::ca_bundle_patches::PublishTargets {
        crd_name: Some(trustyai_crds::contract::CRD_NAME.to_string()),
        conversion_path: trustyai_webhooks::routes::CONVERT.to_string(),
        validating_webhook_configuration: Some(args.names.validating_webhook_configuration.clone()),
        mutating_webhook_configuration: Some(args.names.mutating_webhook_configuration.clone()),
        endpoint,
        streaming_lists: streaming_lists(),
    }
}

async fn bind(what: &'static str, address: std::net::SocketAddr) -> Result<TcpListener, RunError> {
    TcpListener::bind(address)
        .await
        .map_err(|source| RunError::Bind {
            what,
            address,
            source,
        })
}
