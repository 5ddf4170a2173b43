//! TLS material for the webhook server: CA and serving certificate, their Secret, rotation,
//! caBundle publishing; and the operands' CA ([`operand_ca`]). Both CAs are rotated by one
//! planner ([`rotation`]), with the same overlap.
//! The operands' serving Secrets ([`operand_serving`]): what one holds and when it must be
//! re-issued.
//!
//! The webhook server receives what to serve through a `tokio::sync::watch` channel of
//! [`TlsMaterial`]; every value sent is validated (key matches, within validity, chains to the
//! bundle), so invalid content never replaces what is being served.
//!
//! Modes (see [`CertMode`]):
//!
//! - **self-signed** (default): [`ensure_secret`] gets or creates one Secret holding a CA and a
//!   serving certificate (layout in [`secret_layout`]); [`maintain_secret`] watches it, renews
//!   and rotates (one writer at a time, by resourceVersion), and feeds the channel;
//!   [`run_publisher`] keeps the CA bundle in the CRD's conversion webhook and the admission
//!   webhook configurations.
//! - **files**: [`load_files`] + [`watch_files`] (polling) on mounted certificate files.
//! - **cert-manager**: as files (the mounted Secret), plus optionally [`run_publisher`].
//! - **openshift**: as files; the service-ca operator injects the bundle itself.
//!
//! Pure logic (generation, parsing, the CA rotation and the renewal decision, the bundle, chain
//! verification, the caBundle patches in [`ca_bundle_patches`]) lives apart from the
//! Kubernetes-facing loops ([`secret_store`], [`ca_bundle_publisher`], [`files`]).

pub mod api_call;
pub mod bundle;
pub mod ca_bundle_patches;
pub mod ca_bundle_publisher;
pub mod events;
pub mod files;
pub mod generate;
pub mod lifetimes;
pub mod material;
pub mod mode;
pub mod names;
pub mod operand_ca;
pub mod operand_serving;
pub mod renewal;
pub mod rotation;
pub mod secret_layout;
pub mod secret_store;
pub mod verify;

pub use api_call::ApiCallError;
pub use bundle::{Bundle, ca_bundle};
pub use ca_bundle_patches::{
    CABUNDLE_FIELD_MANAGER, ClientConfig, PublishTargets, WebhookEndpoint,
};
pub use ca_bundle_publisher::{PublishError, Published, publish_once, run_publisher};
pub use events::{CertWarning, publish_warnings};
pub use files::{FileSource, FilesError, load_files, watch_files};
pub use generate::{GenerateError, KeyedCert, generate_ca, issue_serving};
pub use lifetimes::Lifetimes;
pub use material::{CaCert, CertInfo, MaterialError, ServingCert, TlsMaterial};
pub use mode::CertMode;
pub use names::ServiceNames;
pub use renewal::{Reason, RenewalPlan, plan_renewal};
pub use rotation::{CaPlan, CaReason, CaStep, Rotation, Timetable};
pub use secret_layout::{SecretData, StoredState};
pub use secret_store::{
    CertificateSecret, Ensured, Judged, SECRET_FIELD_MANAGER, StoreError, ensure_secret,
    maintain_secret,
};
/// The `time` crate, whose `OffsetDateTime` this API uses.
pub use time;
pub use verify::chains_to;

#[cfg(test)]
mod testutil;
