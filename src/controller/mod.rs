//! The reconcile loop of TrustyAIServices.
//!
//! Everything here is pure (no Kubernetes client, no I/O, no clock, no process environment):
//! the caller reads the cluster, passes what it saw in, and writes what comes out. That keeps
//! every rule unit-testable and every rendered object deterministic, so re-rendering after an
//! operator restart or upgrade changes nothing unless the spec or an image changed.
//!
//! - [`resources`]: the objects owned by (or created for) a TrustyAIService.
//! - [`wiring`]: the minimal JSON patches that connect InferenceServices and ModelMesh
//!   Deployments (objects owned by others) to a TrustyAIService, and undo it.
//! - [`db_secret`]: the database credentials Secret check.
//! - [`status`]: the status computed from observations.

pub mod db_secret;
pub mod resources;
pub mod status;
pub mod wiring;

#[cfg(test)]
mod test_support;
