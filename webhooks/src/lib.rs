//! Server infrastructure for the TrustyAI operator's webhooks.
//!
//! One process serves two listeners:
//!
//! - [`serve_https`]: the admission and conversion webhooks over HTTPS (rustls on the `ring`
//!   provider, HTTP/1.1 and HTTP/2), with a request body limit, a per-request deadline, request
//!   tracing and graceful shutdown. It serves whatever [`axum::Router`] it is given; the route
//!   paths the chart and the CRD point at are in [`routes`].
//! - [`serve_ops`]: `/healthz`, `/readyz` and `/metrics` over plain HTTP.
//!
//! The serving certificate lives in a [`ServingCertificate`] slot that the certificate manager
//! (crate `trustyai-certs`) fills with PEM material; a new certificate is used for the next TLS
//! handshake without restarting the server. This crate never generates certificates.

pub mod admission;
mod client_trust;
pub mod conversion;
mod https;
mod limits;
mod middleware;
mod observe;
mod ops;
pub mod routes;
mod tls;
mod wire;

pub use client_trust::{ClientTrust, reload_client_ca};
pub use https::{HttpsOptions, PathLimits, ServerError, serve_https};
pub use limits::{
    CONVERSION_COST_PER_BODY_BYTE, COST_PER_BODY_BYTE, Refusal, ServerEvents, ServerObserver,
};
pub use ops::{
    MetricsFormat, MetricsRenderer, OpsState, Readiness, ReadinessReport, ops_router, serve_ops,
};
pub use tls::{
    CertificateInfo, PROTOCOL_VERSIONS, ServingCertificate, TlsError, crypto_provider,
    server_config,
};

pub use observe::{
    AdmissionSettings, NoObserver, ReviewEndpoint, ReviewOutcome, SecretLookup, WebhookObserver,
    WebhookState,
};

/// The webhook routes (`/convert`, `/mutate`, `/validate`) over the given state, ready for
/// [`serve_https`].
pub fn webhook_router(state: WebhookState) -> axum::Router {
    axum::Router::new()
        .route(routes::CONVERT, axum::routing::post(conversion::convert))
        .route(routes::MUTATE, axum::routing::post(admission::mutate))
        .route(routes::VALIDATE, axum::routing::post(admission::validate))
        .with_state(state)
}
