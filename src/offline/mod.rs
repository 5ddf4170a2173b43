//! The offline commands (`validate`, `convert`): the webhooks' pure functions applied to
//! manifest files, for CI pipelines and GitOps repositories.

pub mod convert;
pub mod lists;
pub mod validate;
