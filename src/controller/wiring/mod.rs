//! Wiring a TrustyAIService into objects it does not own: KServe InferenceServices (payload
//! logger) and ModelMesh Deployments (payload processor), and undoing it in the finalizer.
//!
//! These objects belong to users and to other controllers, so every change is a minimal
//! [`JsonPatch`] guarded by the `resourceVersion` it was computed from, and every removal takes
//! away only what this TrustyAIService added. An empty patch means "already as wanted", so the
//! caller can call the builders on every reconcile.

pub mod json_patch;
pub mod kserve;
pub mod modelmesh;

pub use json_patch::JsonPatch;
