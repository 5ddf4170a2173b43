//! What the webhook server refuses to spend: memory of requests in flight, body sizes, and log
//! lines on what a hostile client repeats.
//!
//! Memory: every request reserves, before its body is read, what it may cost at most
//! ([`COST_PER_BODY_BYTE`] times its declared length, or times the body limit when it declares
//! none) from one budget shared by all connections. A request that cannot reserve within the
//! queue time of its path (`crate::PathLimits`) gets `429 Too Many Requests` with
//! `Retry-After: 1`, which the API server's webhook client retries within its timeout. So the
//! server's memory is its idle size plus the budget.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::header::{CONTENT_LENGTH, RETRY_AFTER};
use axum::http::{HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::pin::Pin;
use std::task::{Context, Poll};

use axum::body::HttpBody;
use http_body_util::BodyExt;
use hyper::body::{Frame, SizeHint};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::middleware::RequestLimits;

/// Peak memory of an admission request (`/mutate`, `/validate`) per byte of its body: the body,
/// the answer and the tree the reader keeps of the object and the old object (`crate::wire`,
/// up to about 5 times the body). The hostile corpus of `bench/tests/hostile.rs` holds it.
pub const COST_PER_BODY_BYTE: usize = 8;
/// Peak memory of a conversion (`/convert`) per byte of its body: the body, the answer (about
/// the body again) and the tree of one object at a time. Measured with the hostile corpus of
/// `bench/tests/hostile.rs`: up to 3.1 times the body (an object whose members that conversion
/// reads are a 3 MB array, or 240,000 keys), the allocator's state making one run differ from
/// another by up to a third; the rest is margin.
pub const CONVERSION_COST_PER_BODY_BYTE: usize = 6;
/// Smallest reservation: headers, buffers and the tree of a tiny review.
const MIN_RESERVATION: usize = 64 * 1024;
/// The budget is counted in units of this many bytes (a semaphore permit each).
const UNIT: usize = 1024;

/// Why the server refused work, for the metric that counts refusals (bounded label values).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Refusal {
    /// The memory budget stayed full for the whole queue time: 429.
    Throttled,
    /// The body was over the size limit: 413.
    BodyTooLarge,
    /// The connection limit was reached; accepting paused until a connection closed.
    ConnectionLimit,
    /// A TLS handshake failed (wrong SNI, untrusted CA, not TLS, timeout).
    HandshakeFailed,
    /// A connection idle for the idle timeout was closed.
    IdleClosed,
}

impl Refusal {
    /// Every reason, for creating each series at zero.
    pub const ALL: [Self; 5] = [
        Self::Throttled,
        Self::BodyTooLarge,
        Self::ConnectionLimit,
        Self::HandshakeFailed,
        Self::IdleClosed,
    ];

    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Throttled => "throttled",
            Self::BodyTooLarge => "body_too_large",
            Self::ConnectionLimit => "connection_limit",
            Self::HandshakeFailed => "handshake_failed",
            Self::IdleClosed => "idle_closed",
        }
    }
}

/// Receives the server's refusals; the operator's metrics implement it.
pub trait ServerObserver: Send + Sync {
    /// One refusal.
    fn refused(&self, _refusal: Refusal) {}
}

/// An observer that records nothing.
struct Ignore;
impl ServerObserver for Ignore {}

/// The observer of a server, comparable and printable so that [`crate::HttpsOptions`] stays so.
#[derive(Clone)]
pub struct ServerEvents(pub Arc<dyn ServerObserver>);

impl ServerEvents {
    pub(crate) fn refused(&self, refusal: Refusal) {
        self.0.refused(refusal);
    }
}

impl Default for ServerEvents {
    fn default() -> Self {
        Self(Arc::new(Ignore))
    }
}

impl std::fmt::Debug for ServerEvents {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ServerEvents")
    }
}

impl PartialEq for ServerEvents {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for ServerEvents {}

/// The request admission state shared by every connection of one server.
#[derive(Clone)]
pub(crate) struct Admission {
    budget: Arc<Semaphore>,
    budget_units: usize,
    limits: RequestLimits,
    max_body_bytes: usize,
    events: ServerEvents,
}

impl Admission {
    pub(crate) fn new(
        budget_bytes: usize,
        limits: RequestLimits,
        max_body_bytes: usize,
        events: ServerEvents,
    ) -> Self {
        let budget_units = (budget_bytes / UNIT).clamp(1, Semaphore::MAX_PERMITS);
        Self {
            budget: Arc::new(Semaphore::new(budget_units)),
            budget_units,
            limits,
            max_body_bytes,
            events,
        }
    }

    /// Units to reserve for a body of `declared` bytes (`None`: not declared) to `path`.
    fn units_for(&self, path: &str, declared: Option<usize>) -> u32 {
        let body = declared
            .unwrap_or(self.max_body_bytes)
            .min(self.max_body_bytes);
        let bytes = body
            .saturating_mul(self.limits.cost_per_body_byte(path))
            .max(MIN_RESERVATION);
        // A request alone always fits, however small the budget.
        let units = bytes.div_ceil(UNIT).min(self.budget_units);
        u32::try_from(units).unwrap_or(u32::MAX)
    }
}

/// Middleware: reserves the request's cost, reads its body within the size limit, and hands it
/// on buffered. Over the limit, the rest of the body is read and dropped (up to
/// [`DRAIN_FACTOR`] times the limit) before the `413`, so an HTTP/1.1 client that is still
/// sending reads the answer instead of a connection reset.
pub(crate) async fn admit(
    State(admission): State<Admission>,
    request: Request,
    next: Next,
) -> Response {
    let declared = request
        .headers()
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|d| d > admission.max_body_bytes.saturating_mul(DRAIN_FACTOR)) {
        // Not worth reading: refused at once.
        admission.events.refused(Refusal::BodyTooLarge);
        return payload_too_large(admission.max_body_bytes);
    }
    let units = admission.units_for(request.uri().path(), declared);
    let permit = match tokio::time::timeout(
        admission.limits.queue(request.uri().path()),
        Arc::clone(&admission.budget).acquire_many_owned(units),
    )
    .await
    {
        Ok(Ok(permit)) => permit,
        // Closed never happens (the semaphore is never closed); treat it like a full budget.
        Ok(Err(_)) | Err(_) => {
            admission.events.refused(Refusal::Throttled);
            if THROTTLED.admit() {
                tracing::warn!(
                    suppressed = THROTTLED.take_suppressed(),
                    "webhook memory budget full; answering 429"
                );
            }
            return too_many_requests();
        }
    };
    let (parts, body) = request.into_parts();
    let bytes = match read_body(body, declared, admission.max_body_bytes).await {
        Ok(bytes) => bytes,
        Err(BodyError::TooLarge) => {
            admission.events.refused(Refusal::BodyTooLarge);
            return payload_too_large(admission.max_body_bytes);
        }
        Err(BodyError::Read) => {
            return (
                StatusCode::BAD_REQUEST,
                "the request body could not be read\n",
            )
                .into_response();
        }
    };
    let response = next
        .run(Request::from_parts(parts, Body::from(bytes)))
        .await;
    // The reservation lasts until the answer is written: its body holds the permit.
    response.map(|body| {
        Body::new(Held {
            body,
            _permit: permit,
        })
    })
}

/// A response body that keeps its request's reservation until it is written or dropped, and is
/// otherwise the body it wraps (its size hint too, so the answer keeps its `Content-Length`).
struct Held {
    body: Body,
    _permit: OwnedSemaphorePermit,
}

impl HttpBody for Held {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

fn payload_too_large(limit: usize) -> Response {
    (
        StatusCode::PAYLOAD_TOO_LARGE,
        format!("the request body is larger than the webhook's limit of {limit} bytes\n"),
    )
        .into_response()
}

/// How much of an oversized body is read and dropped before answering 413.
const DRAIN_FACTOR: usize = 4;

enum BodyError {
    TooLarge,
    Read,
}

/// Reads `body` whole within `limit`. The buffer is sized by the declared length up front: grown
/// by doubling instead, a 3 MiB body is copied a dozen times and, at the last growth, held twice
/// over (the old buffer and the new one), which an allocator without in-place growth of large
/// blocks turns into a peak of three times the body.
async fn read_body(
    mut body: Body,
    declared: Option<usize>,
    limit: usize,
) -> Result<Bytes, BodyError> {
    let mut kept: Vec<u8> = Vec::with_capacity(declared.unwrap_or(0).min(limit));
    let mut seen = 0usize;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|_| BodyError::Read)?;
        let Ok(data) = frame.into_data() else {
            continue;
        };
        seen = seen.saturating_add(data.len());
        if seen > limit {
            if seen > limit.saturating_mul(DRAIN_FACTOR) {
                return Err(BodyError::TooLarge);
            }
            kept = Vec::new();
            continue;
        }
        kept.extend_from_slice(&data);
    }
    if seen > limit {
        return Err(BodyError::TooLarge);
    }
    Ok(Bytes::from(kept))
}

fn too_many_requests() -> Response {
    let mut response = (
        StatusCode::TOO_MANY_REQUESTS,
        "the webhook is at its memory budget for requests in flight; retry shortly\n",
    )
        .into_response();
    response
        .headers_mut()
        .insert(RETRY_AFTER, HeaderValue::from_static("1"));
    response
}

/// At most one log line per [`SAMPLE_PERIOD`] for one kind of event that a client can repeat
/// at will; the line carries how many were not logged since the last one. The metrics count
/// every event.
pub(crate) struct Sampler {
    /// Milliseconds since [`epoch`] of the last logged event, plus one (0: never).
    last: AtomicU64,
    suppressed: AtomicU64,
}

/// Time between two log lines of one sampled kind.
const SAMPLE_PERIOD: Duration = Duration::from_secs(10);

fn epoch() -> Instant {
    static EPOCH: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

impl Sampler {
    pub(crate) const fn new() -> Self {
        Self {
            last: AtomicU64::new(0),
            suppressed: AtomicU64::new(0),
        }
    }

    /// Whether to log this event; if not, it is counted as suppressed.
    pub(crate) fn admit(&self) -> bool {
        let now = u64::try_from(epoch().elapsed().as_millis())
            .unwrap_or(u64::MAX)
            .saturating_add(1);
        let last = self.last.load(Ordering::Relaxed);
        let period = u64::try_from(SAMPLE_PERIOD.as_millis()).unwrap_or(u64::MAX);
        if (last == 0 || now.saturating_sub(last) >= period)
            && self
                .last
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            return true;
        }
        self.suppressed.fetch_add(1, Ordering::Relaxed);
        false
    }

    /// The events not logged since the last logged one, resetting the count.
    pub(crate) fn take_suppressed(&self) -> u64 {
        self.suppressed.swap(0, Ordering::Relaxed)
    }
}

/// Sampled: failed TLS handshakes.
pub(crate) static HANDSHAKE_FAILED: Sampler = Sampler::new();
/// Sampled: accepting paused at the connection limit.
pub(crate) static CONNECTION_LIMIT: Sampler = Sampler::new();
/// Sampled: requests refused for the memory budget.
pub(crate) static THROTTLED: Sampler = Sampler::new();
/// Sampled: requests answered with a 4xx or 5xx status.
pub(crate) static REJECTED: Sampler = Sampler::new();
/// Sampled: bodies that are not a review.
pub(crate) static MALFORMED: Sampler = Sampler::new();

#[cfg(test)]
mod tests {
    use super::*;

    /// The admission of a server with the default limits and a memory budget of `budget`.
    fn admission_with_budget(budget: usize) -> Admission {
        let limits = RequestLimits::new(&crate::HttpsOptions::default());
        Admission::new(budget, limits, 3 * 1024 * 1024, ServerEvents::default())
    }

    #[test]
    fn reservations_scale_with_the_declared_body() {
        let admission = admission_with_budget(64 * 1024 * 1024);
        assert_eq!(admission.units_for("/validate", Some(10)), 64);
        assert_eq!(
            admission.units_for("/validate", Some(1024 * 1024)),
            8 * 1024
        );
        assert_eq!(admission.units_for("/convert", Some(1024 * 1024)), 6 * 1024);
    }

    #[test]
    fn an_undeclared_or_oversized_body_reserves_the_limits_worth() {
        let admission = admission_with_budget(64 * 1024 * 1024);
        // Undeclared: the limit's worth; over the limit: capped there.
        assert_eq!(admission.units_for("/mutate", None), 24 * 1024);
        assert_eq!(admission.units_for("/mutate", Some(usize::MAX)), 24 * 1024);
    }

    #[test]
    fn a_reservation_fits_even_the_smallest_budget() {
        let tiny = admission_with_budget(1);
        assert_eq!(tiny.units_for("/mutate", None), 1);
    }

    #[test]
    fn conversions_wait_longer_than_admission_requests() {
        let limits = RequestLimits::new(&crate::HttpsOptions::default());
        assert_eq!(limits.queue("/validate"), Duration::from_secs(2));
        assert_eq!(limits.request("/mutate"), Duration::from_secs(5));
        assert_eq!(
            limits.queue(crate::routes::CONVERT),
            Duration::from_secs(25)
        );
        assert_eq!(
            limits.request(crate::routes::CONVERT),
            Duration::from_secs(30)
        );
    }

    #[test]
    fn a_sampler_admits_one_event_then_counts_the_suppressed_ones() {
        let sampler = Sampler::new();
        assert!(sampler.admit());
        for _ in 0..1000 {
            assert!(!sampler.admit());
        }
        assert_eq!(sampler.take_suppressed(), 1000);
        assert_eq!(sampler.take_suppressed(), 0);
    }
}
