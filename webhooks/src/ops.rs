//! The plain-HTTP ops server: `/healthz`, `/readyz` and `/metrics`.

use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
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

/// The two text formats a Prometheus scrape accepts, chosen per request from its `Accept`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MetricsFormat {
    /// The Prometheus text format 0.0.4: what a scraper gets unless it asks for OpenMetrics.
    PrometheusText,
    /// OpenMetrics text 1.0.0 (`# EOF`-terminated, `info` and `unit` metadata).
    OpenMetrics,
}

impl MetricsFormat {
    /// The `Content-Type` that names the format; Prometheus picks its parser from it.
    pub fn content_type(self) -> &'static str {
        match self {
            Self::PrometheusText => "text/plain; version=0.0.4; charset=utf-8",
            Self::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
        }
    }

    /// The format an `Accept` header prefers: the highest `q` among the media ranges we can
    /// serve (OpenMetrics 1.0.0 or unversioned, the classic text format, wildcards); the
    /// classic text format without a header, on ties and when nothing matches.
    pub fn negotiate(accept: Option<&str>) -> Self {
        let Some(accept) = accept else {
            return Self::PrometheusText;
        };
        let mut best: Option<(f32, Self)> = None;
        for range in accept.split(',') {
            let mut parts = range.split(';').map(str::trim);
            let media = parts.next().unwrap_or_default().to_ascii_lowercase();
            let (mut q, mut version) = (1.0_f32, None);
            for parameter in parts {
                if let Some((key, value)) = parameter.split_once('=') {
                    match key.trim().to_ascii_lowercase().as_str() {
                        "q" => q = value.trim().parse().unwrap_or(0.0),
                        "version" => version = Some(value.trim().to_owned()),
                        _ => {}
                    }
                }
            }
            let format = match (media.as_str(), version.as_deref()) {
                ("application/openmetrics-text", None | Some("1.0.0")) => Self::OpenMetrics,
                ("text/plain", None | Some("0.0.4")) | ("text/*" | "*/*", _) => {
                    Self::PrometheusText
                }
                _ => continue,
            };
            let better = match best {
                None => q > 0.0,
                Some((best_q, best_format)) => {
                    q > best_q
                        || (q == best_q && format == Self::PrometheusText && best_format != format)
                }
            };
            if better {
                best = Some((q, format));
            }
        }
        best.map_or(Self::PrometheusText, |(_, format)| format)
    }
}

/// Renders the metrics exposition in a format; built by whoever owns the metrics registry.
pub type MetricsRenderer = Arc<dyn Fn(MetricsFormat) -> String + Send + Sync>;

/// What the ops server serves.
#[derive(Clone)]
pub struct OpsState {
    readiness: Readiness,
    metrics: MetricsRenderer,
}

impl OpsState {
    /// Serves `readiness` on `/readyz` and the output of `metrics` on `/metrics`, in the format
    /// the scraper's `Accept` prefers.
    pub fn new(
        readiness: Readiness,
        metrics: impl Fn(MetricsFormat) -> String + Send + Sync + 'static,
    ) -> Self {
        Self {
            readiness,
            metrics: Arc::new(metrics),
        }
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
    tracing::info!(address = %listener.local_addr().map(|a| a.to_string()).unwrap_or_default(), "ops server listening");
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

async fn metrics(State(state): State<OpsState>, headers: HeaderMap) -> Response {
    let accept = headers
        .get(header::ACCEPT)
        .and_then(|value| value.to_str().ok());
    let format = MetricsFormat::negotiate(accept);
    let body = (state.metrics)(format);
    (
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static(format.content_type()),
            ),
            (header::VARY, HeaderValue::from_static("Accept")),
        ],
        body,
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scraper_gets_openmetrics_only_when_it_prefers_it() {
        use MetricsFormat::*;
        // Prometheus 3's default scrape Accept.
        let prometheus = "application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.6,application/openmetrics-text;version=0.0.1;q=0.5,text/plain;version=1.0.0;escaping=allow-utf-8;q=0.4,text/plain;version=0.0.4;q=0.3,*/*;q=0.2";
        for (accept, expected) in [
            (None, PrometheusText),
            (Some(prometheus), OpenMetrics),
            (
                Some("text/plain;version=0.0.4;q=0.3,*/*;q=0.2"),
                PrometheusText,
            ),
            (Some("application/openmetrics-text"), OpenMetrics),
            (
                Some("application/openmetrics-text; version=0.0.1"),
                PrometheusText,
            ),
            (Some("*/*"), PrometheusText),
            (
                Some("application/openmetrics-text;q=0.5, text/plain;q=0.5"),
                PrometheusText,
            ),
            (Some("application/json"), PrometheusText),
            (Some("application/openmetrics-text;q=0"), PrometheusText),
        ] {
            assert_eq!(MetricsFormat::negotiate(accept), expected, "{accept:?}");
        }
    }

    /// Readiness with the TLS and CA bundle checks, neither passed yet.
    fn unpassed_checks() -> Readiness {
        Readiness::new([Readiness::TLS, Readiness::CA_BUNDLE])
    }

    #[test]
    fn ready_only_when_every_check_passes() {
        let readiness = unpassed_checks();
        assert_eq!(readiness.report().to_string(), "not ready: ca-bundle, tls");

        readiness.set(Readiness::TLS, true);
        assert!(!readiness.is_ready());
        readiness.set(Readiness::CA_BUNDLE, true);
        assert!(readiness.is_ready());
        assert_eq!(readiness.report().to_string(), "ok");

        readiness.set(Readiness::TLS, false);
        assert_eq!(readiness.report().to_string(), "not ready: tls");
    }

    #[test]
    fn a_draining_server_is_not_ready_even_with_every_check_passed() {
        let readiness = unpassed_checks();
        readiness.set(Readiness::TLS, true);
        readiness.set(Readiness::CA_BUNDLE, true);

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
