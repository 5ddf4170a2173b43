//! What only the leader does — the reconcile loop and the start-up storage migration — started
//! when this replica gains the lease and stopped when it loses it. Losing the lease aborts the
//! reconcile loop at once (another replica may take over after `lease_duration - renew_deadline`);
//! a shutdown lets in-flight reconciles finish, and only then is the lease released.

use std::sync::Arc;

use kube::Client;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::controller::ControllerConfig;
use crate::metrics::Metrics;

/// Why the leader's work ended while the process was meant to keep running.
#[derive(Debug, thiserror::Error)]
pub enum LeadingError {
    /// The election task dropped its side of the channel: nobody can tell this replica whether
    /// it leads any more.
    #[error("leader election stopped")]
    ElectionStopped,
    /// The reconcile loop returned although neither a shutdown nor a lost lease stopped it.
    #[error("the reconcile loop ended unexpectedly")]
    ControllerEnded,
    /// The reconcile loop failed.
    #[error("the reconcile loop failed")]
    Controller(#[source] crate::controller::ControllerError),
    /// The reconcile loop's task panicked.
    #[error("the reconcile loop panicked")]
    ControllerPanicked(#[source] tokio::task::JoinError),
}

/// The leader's work.
#[derive(Clone)]
pub struct Duties {
    /// The reconcile loop's configuration.
    pub controller: ControllerConfig,
    /// Run the storage-version migration when leadership starts.
    pub migrate_storage: bool,
    /// Set once the API server has the CA bundle of the webhooks, where this process
    /// publishes it: the controller's writes go through the webhooks, and its first watches
    /// would be cut short by the CRD write that publishes the bundle.
    pub webhooks_trusted: Option<watch::Receiver<bool>>,
}

/// Runs `duties` during every term in which `leading` is true, until `stop`. Cancels `release`
/// when the duties have stopped, so the election loop may then give the lease up.
pub async fn lead(
    client: Client,
    duties: Duties,
    mut leading: watch::Receiver<bool>,
    stop: CancellationToken,
    release: CancellationToken,
    metrics: Arc<Metrics>,
) -> Result<(), LeadingError> {
    let result = loop {
        tokio::select! {
            biased;
            _ = stop.cancelled() => break Ok(()),
            changed = leading.wait_for(|l| *l) => if changed.is_err() {
                break Err(LeadingError::ElectionStopped);
            },
        }
        if let Some(trusted) = &duties.webhooks_trusted {
            let mut trusted = trusted.clone();
            tokio::select! {
                biased;
                _ = stop.cancelled() => break Ok(()),
                // A publisher that stopped is the supervisor's business; start anyway.
                _ = trusted.wait_for(|t| *t) => {}
            }
        }
        tracing::info!("leading: starting the reconcile loop");
        metrics.set_leader(true);
        let term = stop.child_token();
        let mut controller = tokio::spawn(crate::controller::run_controller(
            client.clone(),
            duties.controller.clone(),
            term.clone(),
        ));
        let migration = duties.migrate_storage.then(|| {
            let (client, term) = (client.clone(), term.clone());
            tokio::spawn(async move {
                tokio::select! {
                    _ = term.cancelled() => {}
                    _ = crate::storage_migration::migrate_at_start(client) => {}
                }
            })
        });
        enum End {
            Stop,
            Lost,
            Ended(Result<Result<(), crate::controller::ControllerError>, tokio::task::JoinError>),
        }
        let end = tokio::select! {
            biased;
            _ = stop.cancelled() => End::Stop,
            _ = leading.wait_for(|l| !*l) => End::Lost,
            joined = &mut controller => End::Ended(joined),
        };
        term.cancel();
        if let Some(migration) = migration {
            migration.abort();
        }
        metrics.set_leader(false);
        match end {
            End::Stop => {
                // Still holding the lease: let in-flight reconciles finish.
                let _ = controller.await;
                break Ok(());
            }
            End::Lost => {
                controller.abort();
                let _ = controller.await;
                tracing::warn!("lost the lease: the reconcile loop stopped");
            }
            End::Ended(Ok(Ok(()))) if stop.is_cancelled() => break Ok(()),
            End::Ended(Ok(Ok(()))) => break Err(LeadingError::ControllerEnded),
            End::Ended(Ok(Err(e))) => break Err(LeadingError::Controller(e)),
            End::Ended(Err(e)) => break Err(LeadingError::ControllerPanicked(e)),
        }
    };
    release.cancel();
    result
}
