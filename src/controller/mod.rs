//! The reconcile loop of TrustyAIServices.
//!
//! The rules are pure (no Kubernetes client, no I/O, no clock, no process environment): the
//! caller reads the cluster, passes what it saw in, and writes what comes out. That keeps
//! every rule unit-testable and every rendered object deterministic, so re-rendering after an
//! operator restart or upgrade changes nothing unless the spec or an image changed.
//!
//! - [`resources`]: the objects owned by (or created for) a TrustyAIService.
//! - [`wiring`]: the minimal JSON patches that connect InferenceServices and ModelMesh
//!   Deployments (objects owned by others) to a TrustyAIService, and undo it.
//! - [`db_secret`]: the database credentials Secret check.
//! - [`migration_trigger`]: removing the Go operator's migration annotation.
//! - [`status`]: the status computed from observations.
//! - [`finalizer`], [`pvc_plan`], [`backoff`], [`triggers`]: the pure decisions of the loop
//!   (finalizer list, PVC apply body, retry delays, what triggers a reconcile).
//!
//! The I/O side:
//!
//! - [`runner`]: [`run_controller`], the `kube` controller and its watches.
//! - [`reconciler`]: one reconcile (finalizer, children, wiring, status) or cleanup; `gather`:
//!   what it reads before rendering (storage mode, images, database credentials, namespace objects).
//! - [`children`]: the list of child kinds, each declared once (rendering, apply, watch and
//!   cache, orphans, optional API), and the one path that applies them ([`apply`]), with
//!   events ([`events`], written by [`event_series`], which folds repeats).
//!   Among them, the operands' serving certificate Secrets, where no service-ca issues them:
//!   their names and metadata here, their content and renewal in
//!   `trustyai_certs::operand_serving`, from the operand CA that `trustyai_certs::operand_ca`
//!   keeps and rotates with overlap.
//! - [`model_servers`]: wiring InferenceServices and ModelMesh Deployments (the I/O around
//!   [`wiring`]), and undoing it.
//! - [`discovery`]: which optional APIs (Route, ServiceMonitor, InferenceService, Istio) exist.
//! - [`context`]: configuration and shared state.
//! - [`error`]: [`ReconcileError`](error::ReconcileError), with the bounded categories its
//!   metrics and event reasons use.

pub mod apply;
pub mod backoff;
pub mod children;
pub mod context;
pub mod db_secret;
pub mod discovery;
pub mod error;
pub mod event_series;
pub mod events;
pub mod finalizer;
mod gather;
pub mod image_upgrade;
pub mod migration_trigger;
pub mod model_servers;
pub mod pvc_plan;
pub mod reconciler;
pub mod resources;
pub mod runner;
pub mod single_writer;
pub mod status;
pub mod triggers;
pub mod wiring;

pub use children::config_map::ServiceAccess;
pub use context::ControllerConfig;
pub use runner::{ControllerError, run_controller};

#[cfg(test)]
pub(crate) mod mock_api;
#[cfg(test)]
mod test_support;
