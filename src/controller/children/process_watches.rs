//! The watches that run for the whole process, on every replica, not only while it leads:
//! their caches serve the admission webhooks as well as the controller, so one watch feeds
//! both instead of each keeping its own.
//!
//! Today that is the Secret watch: every Secret of the cluster, metadata only. The validating
//! webhook asks it whether a database credentials Secret exists; the controller reads it for
//! its serving certificate Secrets and the credentials, and is told of each change while it
//! runs ([`ProcessWatches::connect`]).

use std::sync::Arc;

use kube::Client;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::super::discovery::OptionalApis;
use super::cache::KindCache;
use super::declaration::Kind;
use super::watches::{self, Queue, Shared, Targets, Watched};

/// The process-wide watches and their caches.
#[derive(Clone)]
pub struct ProcessWatches {
    secrets: Arc<KindCache>,
    targets: Targets,
}

impl Default for ProcessWatches {
    fn default() -> Self {
        let spec = Kind::Secret.declaration().watch;
        Self {
            secrets: Arc::new(KindCache::new(spec.tracking, spec.projection)),
            targets: Targets::process(),
        }
    }
}

impl ProcessWatches {
    /// The cache of `kind`, if its watch runs here.
    pub fn cache(&self, kind: Kind) -> Option<&Arc<KindCache>> {
        (kind == Kind::Secret).then_some(&self.secrets)
    }

    /// From now on, the TrustyAIServices each event concerns go to `queue`.
    pub fn connect(&self, queue: Queue) {
        self.targets.connect(queue);
    }

    /// Runs the watches until `stop`.
    pub async fn run(&self, client: Client, stop: CancellationToken) {
        // None of these watches needs an optional API; the sender is kept so the receiver
        // never reads as closed.
        let (_apis_tx, apis) = watch::channel(OptionalApis::default());
        let watched = Watched {
            spec: Kind::Secret.declaration().watch,
            cache: self.secrets.clone(),
            label: Kind::Secret.name(),
        };
        let shared = Shared {
            client,
            apis,
            targets: self.targets.clone(),
            stop,
        };
        watches::run(watched, shared).await;
    }
}
