//! Per-request middleware of the webhook server: request tracing and the request deadline.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use axum::extract::{ConnectInfo, Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use tracing::Instrument;

use crate::https::{HttpsOptions, PathLimits};
use crate::limits::REJECTED;
use tracing::field::{Empty, display};

/// Runs the request inside an `http_request` span carrying method, path, HTTP version and peer
/// address, then records status and latency and emits one event: `debug` on success (the
/// apiserver calls often; success is not news), `info` for 4xx, `warn` for 5xx, those two at
/// most once per 10 s with the number left out since.
pub(crate) async fn trace_request(request: Request, next: Next) -> Response {
    let span = tracing::info_span!(
        "http_request",
        method = %request.method(),
        path = %request.uri().path(),
        version = ?request.version(),
        remote = Empty,
        status = Empty,
        latency_ms = Empty,
    );
    if let Some(ConnectInfo(remote)) = request.extensions().get::<ConnectInfo<SocketAddr>>() {
        span.record("remote", display(remote));
    }
    let started = Instant::now();
    let response = next.run(request).instrument(span.clone()).await;
    let status = response.status();
    span.record("status", status.as_u16());
    span.record("latency_ms", started.elapsed().as_secs_f64() * 1000.0);
    span.in_scope(|| {
        // Errors are sampled: a client can repeat a bad request at will.
        if status.is_success() || status.is_redirection() || status.is_informational() {
            tracing::debug!("request served");
        } else if REJECTED.admit() {
            let suppressed = REJECTED.take_suppressed();
            if status.is_server_error() {
                tracing::warn!(suppressed, "request failed");
            } else {
                tracing::info!(suppressed, "request rejected");
            }
        }
    });
    response
}

/// The deadline and queue time of each request, by its path.
#[derive(Clone, Debug)]
pub(crate) struct RequestLimits {
    request: Duration,
    queue: Duration,
    paths: std::sync::Arc<[PathLimits]>,
}

impl RequestLimits {
    pub(crate) fn new(options: &HttpsOptions) -> Self {
        Self {
            request: options.request_timeout,
            queue: options.queue_timeout,
            paths: options.path_limits.clone().into(),
        }
    }

    fn of(&self, path: &str) -> Option<&PathLimits> {
        self.paths.iter().find(|p| p.path == path)
    }

    /// The deadline of a request to `path`.
    pub(crate) fn request(&self, path: &str) -> Duration {
        self.of(path).map_or(self.request, |p| p.request_timeout)
    }

    /// How long a request to `path` may wait for room in the memory budget.
    pub(crate) fn queue(&self, path: &str) -> Duration {
        self.of(path).map_or(self.queue, |p| p.queue_timeout)
    }

    /// What a request to `path` reserves per byte of its body.
    pub(crate) fn cost_per_body_byte(&self, path: &str) -> usize {
        self.of(path)
            .map_or(crate::limits::COST_PER_BODY_BYTE, |p| p.cost_per_body_byte)
    }
}

/// Answers `503 Service Unavailable` when the handler (including the queue for the memory
/// budget and reading the body) takes longer than the request's deadline, and drops the
/// handler. The admission webhooks' deadline sits well under their `timeoutSeconds`, so the
/// apiserver gets a clear error from us instead of its own timeout.
pub(crate) async fn enforce_deadline(
    State(timeouts): State<RequestLimits>,
    request: Request,
    next: Next,
) -> Response {
    let deadline = timeouts.request(request.uri().path());
    match tokio::time::timeout(deadline, next.run(request)).await {
        Ok(response) => response,
        Err(_elapsed) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "the webhook did not answer within its {} ms deadline\n",
                deadline.as_millis()
            ),
        )
            .into_response(),
    }
}
