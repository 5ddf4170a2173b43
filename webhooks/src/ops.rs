//! The plain-HTTP ops server: `/healthz`, `/readyz` and `/metrics`.

use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use tokio::net::TcpListener;

use crate::https::ServerError;
use crate::routes;

/// Named readiness checks that other components set, plus a draining flag.
///
/// Cheap to clone; clones share state. The process is ready when every registered check is
/// true and it is not draining. Register every check that gates readiness up front (in
/// [`new`](Self::new)), so the process is not ready before the component owning a check has
/// run at all.
#[derive(Clone, Default)]
pub struct Readiness {
    inner: Arc<ReadinessInner>,
}

#[derive(Default)]
struct ReadinessInner {
    checks: Mutex<BTreeMap<String, bool>>,
    draining: AtomicBool,
}

impl Readiness {
    /// Check name: the serving certificate is loaded.
    pub const TLS: &'static str = "tls";
    /// Check name: the CA bundle is published to the CRD and the webhook configurations.
    pub const CA_BUNDLE: &'static str = "ca-bundle";

    /// Readiness with the given checks, all not passing yet.
    pub fn new<I, S>(checks: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let readiness = Self::default();
        for check in checks {
            readiness.register(check);
        }
        readiness
    }

    /// Adds a check, not passing, unless it already exists.
    pub fn register(&self, check: impl Into<String>) {
        self.checks().entry(check.into()).or_insert(false);
    }

    /// Sets a check, adding it if it was not registered.
    pub fn set(&self, check: impl Into<String>, passing: bool) {
        let check = check.into();
        let previous = self.checks().insert(check.clone(), passing);
        if previous != Some(passing) {
            tracing::info!(check = %check, passing, "readiness check changed");
        }
    }

    /// Marks the process as shutting down: from now on it is never ready again, so endpoints
    /// stop sending traffic while in-flight requests drain.
    pub fn mark_draining(&self) {
        if !self.inner.draining.swap(true, Ordering::SeqCst) {
            tracing::info!("draining: readiness now fails");
        }
    }

    /// Whether [`mark_draining`](Self::mark_draining) was called.
    pub fn is_draining(&self) -> bool {
        self.inner.draining.load(Ordering::SeqCst)
    }

    /// Whether the process is ready right now.
    pub fn is_ready(&self) -> bool {
        self.report().is_ready()
    }

    /// The current state of every check.
    pub fn report(&self) -> ReadinessReport {
        let failing = self
            .checks()
            .iter()
            .filter(|(_, passing)| !**passing)
            .map(|(name, _)| name.clone())
            .collect();
        ReadinessReport {
            failing,
            draining: self.is_draining(),
        }
    }

    fn checks(&self) -> MutexGuard<'_, BTreeMap<String, bool>> {
        // The map is always consistent (single inserts), so a panic elsewhere while holding
        // the lock must not take readiness down with it.
        self.inner
            .checks
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

impl fmt::Debug for Readiness {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Readiness")
            .field("checks", &*self.checks())
            .field("draining", &self.is_draining())
            .finish()
    }
}

/// A snapshot of [`Readiness`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadinessReport {
    /// Names of the checks not passing, sorted.
    pub failing: Vec<String>,
    /// Whether the process is draining.
    pub draining: bool,
}

impl ReadinessReport {
    /// Ready: no failing check and not draining.
    pub fn is_ready(&self) -> bool {
        self.failing.is_empty() && !self.draining
    }
}

impl fmt::Display for ReadinessReport {
    /// `ok`, or `not ready: ` and the reasons, `draining` first.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_ready() {
            return f.write_str("ok");
        }
        let reasons: Vec<&str> = self
            .draining
            .then_some("draining")
            .into_iter()
            .chain(self.failing.iter().map(String::as_str))
            .collect();
        write!(f, "not ready: {}", reasons.join(", "))
    }
}

/// Renders the metrics exposition text; built by whoever owns the metrics registry.
pub type MetricsRenderer = Arc<dyn Fn() -> String + Send + Sync>;

/// What the ops server serves.
#[derive(Clone)]
pub struct OpsState {
    readiness: Readiness,
    metrics: MetricsRenderer,
    metrics_content_type: HeaderValue,
}

impl OpsState {
    /// Content type of the Prometheus text format 0.0.4 (the default).
    pub const PROMETHEUS_TEXT: &'static str = "text/plain; version=0.0.4; charset=utf-8";
    /// Content type of the OpenMetrics text format 1.0 (what `prometheus-client`'s
    /// `encoding::text::encode` writes).
    pub const OPENMETRICS_TEXT: &'static str =
        "application/openmetrics-text; version=1.0.0; charset=utf-8";

    /// Serves `readiness` on `/readyz` and the output of `metrics` on `/metrics`, as
    /// [`PROMETHEUS_TEXT`](Self::PROMETHEUS_TEXT).
    pub fn new(readiness: Readiness, metrics: impl Fn() -> String + Send + Sync + 'static) -> Self {
        Self {
            readiness,
            metrics: Arc::new(metrics),
            metrics_content_type: HeaderValue::from_static(Self::PROMETHEUS_TEXT),
        }
    }

    /// Sets the `Content-Type` of `/metrics`, e.g. [`OPENMETRICS_TEXT`](Self::OPENMETRICS_TEXT).
    pub fn with_metrics_content_type(mut self, content_type: &'static str) -> Self {
        self.metrics_content_type = HeaderValue::from_static(content_type);
        self
    }

    /// The readiness this state serves.
    pub fn readiness(&self) -> &Readiness {
        &self.readiness
    }
}

impl fmt::Debug for OpsState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpsState")
            .field("readiness", &self.readiness)
            .field("metrics_content_type", &self.metrics_content_type)
            .finish_non_exhaustive()
    }
}

/// The ops routes, for serving them on a listener of the caller's choice.
pub fn ops_router(state: OpsState) -> Router {
    Router::new()
        .route(routes::HEALTHZ, get(healthz))
        .route(routes::READYZ, get(readyz))
        .route(routes::METRICS, get(metrics))
        .with_state(state)
}

/// Serves `/healthz`, `/readyz` and `/metrics` over plain HTTP on `listener` until `shutdown`
/// completes, then lets in-flight requests finish and returns.
///
/// Keep this running until the HTTPS server has drained, so probes keep seeing `/readyz` fail
/// with `draining` rather than a refused connection.
pub async fn serve_ops(
    listener: TcpListener,
    state: OpsState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServerError> {
    tracing::info!(address = ?listener.local_addr().ok(), "ops server listening");
    axum::serve(listener, ops_router(state))
        .with_graceful_shutdown(shutdown)
        .await
        .map_err(ServerError::Ops)?;
    tracing::info!("ops server stopped");
    Ok(())
}

/// The process is up and its runtime answers.
async fn healthz() -> &'static str {
    "ok"
}

/// 200 `ok`, or 503 naming what is not ready.
async fn readyz(State(state): State<OpsState>) -> Response {
    let report = state.readiness.report();
    let status = if report.is_ready() {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, report.to_string()).into_response()
}

async fn metrics(State(state): State<OpsState>) -> Response {
    let body = (state.metrics)();
    ([(header::CONTENT_TYPE, state.metrics_content_type)], body).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ready_only_when_every_check_passes_and_not_draining() {
        let readiness = Readiness::new([Readiness::TLS, Readiness::CA_BUNDLE]);
        assert_eq!(readiness.report().to_string(), "not ready: ca-bundle, tls");

        readiness.set(Readiness::TLS, true);
        assert!(!readiness.is_ready());
        readiness.set(Readiness::CA_BUNDLE, true);
        assert!(readiness.is_ready());
        assert_eq!(readiness.report().to_string(), "ok");

        readiness.set(Readiness::TLS, false);
        assert_eq!(readiness.report().to_string(), "not ready: tls");
        readiness.set(Readiness::TLS, true);

        readiness.mark_draining();
        assert!(readiness.is_draining());
        assert_eq!(readiness.report().to_string(), "not ready: draining");
    }

    #[test]
    fn register_does_not_reset_a_passing_check() {
        let readiness = Readiness::new(["a"]);
        readiness.set("a", true);
        readiness.register("a");
        assert!(readiness.is_ready());
    }

    #[test]
    fn clones_share_state() {
        let readiness = Readiness::new(["a"]);
        let other = readiness.clone();
        other.set("a", true);
        assert!(readiness.is_ready());
        other.mark_draining();
        assert!(!readiness.is_ready());
    }

    #[test]
    fn no_checks_means_ready() {
        assert!(Readiness::default().is_ready());
    }
}
