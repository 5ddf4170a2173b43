//! The webhook HTTPS server: accept loop, TLS handshake, HTTP/1.1 and HTTP/2 connections, and
//! graceful shutdown.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{ConnectInfo, DefaultBodyLimit};
use hyper::Request;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};
use tokio::task::{JoinError, JoinSet};
use tokio_rustls::TlsAcceptor;
use tower::ServiceExt;

use crate::client_trust::ClientTrust;
use crate::limits::{Admission, CONNECTION_LIMIT, HANDSHAKE_FAILED, Refusal, ServerEvents, admit};
use crate::middleware::{RequestLimits, enforce_deadline, trace_request};
use crate::tls::{ALPN_H2, ServingCertificate, TlsError, server_config};

/// Shortest pause after an accept error that is not about one connection (such as `EMFILE`).
const ACCEPT_BACKOFF_MIN: Duration = Duration::from_millis(10);
/// Longest such pause; the backoff doubles up to here while the errors continue.
const ACCEPT_BACKOFF_MAX: Duration = Duration::from_secs(1);
/// How long an HTTP/1.1 connection stays open once the server drains, answering each request
/// with `Connection: close`, before it is closed. HTTP/1.1 has no GOAWAY: a client may be
/// writing a request on an idle keep-alive connection at the moment the server closes it, and
/// that request fails (`write: broken pipe`; a POST is not retried). The API server calls
/// admission and conversion webhooks over HTTP/1.1 from a connection pool, so closing its idle
/// connections at once failed about one request per rolling update under load. Within the
/// grace each busy connection carries one more request and is closed by that answer, in order;
/// only one idle for the whole grace is closed by the server.
const HTTP1_DRAIN_GRACE: Duration = Duration::from_secs(2);

/// Limits and timeouts of [`serve_https`]. `HttpsOptions::default()` suits the apiserver's
/// webhook calls; override single fields with `..HttpsOptions::default()`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpsOptions {
    /// Largest accepted request body; larger ones get `413 Payload Too Large`.
    pub max_body_bytes: usize,
    /// Deadline for one request, from its headers to the response headers; a handler that
    /// misses it is dropped and the client gets `503 Service Unavailable`.
    pub request_timeout: Duration,
    /// Deadline for the TLS handshake of a new connection.
    pub handshake_timeout: Duration,
    /// HTTP/1.1: deadline for receiving a request's headers. It also closes keep-alive
    /// connections that stay idle that long.
    pub header_read_timeout: Duration,
    /// HTTP/2: interval of keep-alive pings that detect dead peers (`None`: no pings).
    pub http2_keep_alive_interval: Option<Duration>,
    /// On shutdown, how long in-flight requests may take to finish before their connections
    /// are closed.
    pub drain_timeout: Duration,
    /// A connection (HTTP/1.1 or HTTP/2) with no request in flight for this long is closed
    /// (HTTP/2 with GOAWAY, so the client opens a new one for its next request).
    pub idle_timeout: Duration,
    /// Most connections open at once; at the limit, accepting pauses until one closes.
    pub max_connections: usize,
    /// HTTP/2: most requests in flight on one connection.
    pub http2_max_concurrent_streams: u32,
    /// Memory that requests in flight may reserve together (see [`crate::COST_PER_BODY_BYTE`]).
    pub memory_budget_bytes: usize,
    /// How long a request waits for room in the memory budget before it gets `429`.
    pub queue_timeout: Duration,
    /// Paths whose requests get another deadline and queue time than
    /// [`request_timeout`](Self::request_timeout) and [`queue_timeout`](Self::queue_timeout).
    pub path_limits: Vec<PathLimits>,
    /// Receives every refusal (429, 413, connection limit, failed handshake, idle close).
    pub events: ServerEvents,
    /// The CAs client certificates must chain to (replaceable while serving); `None` asks for
    /// no client certificate.
    pub client_trust: Option<Arc<ClientTrust>>,
}

/// The deadline, queue time and memory reservation of the requests to one path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PathLimits {
    /// The request path, exactly.
    pub path: &'static str,
    /// Deadline for one request, its queue time included.
    pub request_timeout: Duration,
    /// How long a request waits for room in the memory budget before it gets `429`.
    pub queue_timeout: Duration,
    /// What a request reserves from the memory budget per byte of its body: what this path's
    /// handler can use at most (see [`crate::COST_PER_BODY_BYTE`] for the other paths).
    pub cost_per_body_byte: usize,
}

impl PathLimits {
    /// `/convert`: a CRD's conversion webhook has no `timeoutSeconds`. The API server calls it
    /// with no deadline of its own (`k8s.io/apiextensions-apiserver` v0.37.2,
    /// `webhook_converter.go`: the request's context only), so the call lasts as long as the
    /// client request that needed it, 60 s by default (`--request-timeout`); a watch's or a
    /// list's conversion is part of it. A conversion therefore waits for room in the budget
    /// for up to 25 s rather than answering `429` after the admission webhooks' queue time.
    /// It reserves [`crate::CONVERSION_COST_PER_BODY_BYTE`] per byte of body.
    pub fn conversion() -> Self {
        Self {
            path: crate::routes::CONVERT,
            request_timeout: Duration::from_secs(30),
            queue_timeout: Duration::from_secs(25),
            cost_per_body_byte: crate::limits::CONVERSION_COST_PER_BODY_BYTE,
        }
    }
}

impl HttpsOptions {
    /// Default [`max_body_bytes`](Self::max_body_bytes): 3 MiB, the apiserver's own request
    /// size limit, so any object it stores fits.
    pub const DEFAULT_MAX_BODY_BYTES: usize = 3 * 1024 * 1024;
    /// Default [`request_timeout`](Self::request_timeout): 5 s, half the webhook
    /// `timeoutSeconds` (10), so the apiserver sees our error rather than its own timeout.
    pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
    /// Default [`handshake_timeout`](Self::handshake_timeout).
    pub const DEFAULT_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);
    /// Default [`header_read_timeout`](Self::header_read_timeout) (hyper's own default).
    pub const DEFAULT_HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);
    /// Default [`http2_keep_alive_interval`](Self::http2_keep_alive_interval).
    pub const DEFAULT_HTTP2_KEEP_ALIVE_INTERVAL: Duration = Duration::from_secs(30);
    /// Default [`drain_timeout`](Self::drain_timeout): longer than the request timeout, so
    /// every request that was admitted can finish.
    pub const DEFAULT_DRAIN_TIMEOUT: Duration = Duration::from_secs(10);
    /// Default [`idle_timeout`](Self::idle_timeout): under the 90 s a Go HTTP client keeps an
    /// idle connection, so the API server rarely finds one closed under it.
    pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(60);
    /// Default [`max_connections`](Self::max_connections).
    pub const DEFAULT_MAX_CONNECTIONS: usize = 512;
    /// Default [`http2_max_concurrent_streams`](Self::http2_max_concurrent_streams).
    pub const DEFAULT_HTTP2_MAX_CONCURRENT_STREAMS: u32 = 64;
    /// Default [`memory_budget_bytes`](Self::memory_budget_bytes): four requests of the
    /// largest body at once (4 × 3 MiB × 8), which keeps the chart's 256 Mi limit with room.
    pub const DEFAULT_MEMORY_BUDGET_BYTES: usize = 96 * 1024 * 1024;
    /// Default [`queue_timeout`](Self::queue_timeout): 2 s of the 5 s request deadline, which
    /// leaves the largest admission request (a 3 MiB body) 3 s to be read and answered on a
    /// loaded machine; past the deadline the answer is a 503, which the API server does not
    /// retry, while it retries a 429.
    pub const DEFAULT_QUEUE_TIMEOUT: Duration = Duration::from_secs(2);
}

impl Default for HttpsOptions {
    fn default() -> Self {
        Self {
            max_body_bytes: Self::DEFAULT_MAX_BODY_BYTES,
            request_timeout: Self::DEFAULT_REQUEST_TIMEOUT,
            handshake_timeout: Self::DEFAULT_HANDSHAKE_TIMEOUT,
            header_read_timeout: Self::DEFAULT_HEADER_READ_TIMEOUT,
            http2_keep_alive_interval: Some(Self::DEFAULT_HTTP2_KEEP_ALIVE_INTERVAL),
            drain_timeout: Self::DEFAULT_DRAIN_TIMEOUT,
            idle_timeout: Self::DEFAULT_IDLE_TIMEOUT,
            max_connections: Self::DEFAULT_MAX_CONNECTIONS,
            http2_max_concurrent_streams: Self::DEFAULT_HTTP2_MAX_CONCURRENT_STREAMS,
            memory_budget_bytes: Self::DEFAULT_MEMORY_BUDGET_BYTES,
            queue_timeout: Self::DEFAULT_QUEUE_TIMEOUT,
            path_limits: vec![PathLimits::conversion()],
            events: ServerEvents::default(),
            client_trust: None,
        }
    }
}

/// Why a server could not run.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// The TLS configuration could not be built.
    #[error("could not configure TLS for the webhook server")]
    Tls(#[from] TlsError),
    /// The plain-HTTP ops server stopped with an I/O error.
    #[error("the ops server failed")]
    Ops(#[source] io::Error),
}

/// Serves `router` over HTTPS on `listener` until `shutdown` completes.
///
/// Each connection is TLS 1.2 or 1.3 with the certificate held by `cert` at its handshake, then
/// HTTP/2 if the client negotiated `h2` by ALPN, HTTP/1.1 (with keep-alive) otherwise. Every
/// request, including unknown paths, passes the body limit, the request deadline and a tracing
/// span (see [`HttpsOptions`]); handlers can extract `ConnectInfo<SocketAddr>`.
///
/// Accept errors do not stop the server. When `shutdown` completes, the listener is closed
/// (new connections are refused), open connections are told to finish (HTTP/1.1 closes after
/// the current response, HTTP/2 sends GOAWAY), and the call returns `Ok` once they have, or
/// once [`HttpsOptions::drain_timeout`] has passed, closing whatever is left.
///
/// Mark the process not ready ([`Readiness::mark_draining`](crate::Readiness::mark_draining))
/// before completing `shutdown`, so endpoints stop routing here first.
pub async fn serve_https(
    listener: TcpListener,
    router: Router,
    cert: Arc<ServingCertificate>,
    options: HttpsOptions,
    shutdown: impl Future<Output = ()>,
) -> Result<(), ServerError> {
    let acceptor = TlsAcceptor::from(Arc::new(server_config(cert, options.client_trust.clone())?));
    let app = with_request_layers(router, &options);
    let builders = Arc::new(HttpBuilders::new(&options));
    let (drain_tx, drain_rx) = watch::channel(false);
    let mut connections = JoinSet::new();
    let mut backoff = ACCEPT_BACKOFF_MIN;

    let connection_slots = Arc::new(Semaphore::new(options.max_connections.max(1)));
    let per_connection = Arc::new(ConnectionOptions {
        handshake_timeout: options.handshake_timeout,
        idle_timeout: options.idle_timeout,
        events: options.events.clone(),
    });

    tracing::info!(address = %listener.local_addr().map(|a| a.to_string()).unwrap_or_default(), "webhook server listening");
    tokio::pin!(shutdown);
    loop {
        let slot = match Arc::clone(&connection_slots).try_acquire_owned() {
            Ok(slot) => slot,
            Err(_) => {
                options.events.refused(Refusal::ConnectionLimit);
                if CONNECTION_LIMIT.admit() {
                    tracing::warn!(
                        max_connections = options.max_connections,
                        suppressed = CONNECTION_LIMIT.take_suppressed(),
                        "connection limit reached; accepting paused until a connection closes"
                    );
                }
                tokio::select! {
                    biased;
                    () = &mut shutdown => break,
                    Some(finished) = connections.join_next() => {
                        log_task_failure(finished);
                        continue;
                    }
                }
            }
        };
        tokio::select! {
            biased;
            () = &mut shutdown => break,
            Some(finished) = connections.join_next() => log_task_failure(finished),
            accepted = listener.accept() => match accepted {
                Ok((stream, remote)) => {
                    backoff = ACCEPT_BACKOFF_MIN;
                    // No Nagle: a response's last partial segment must not wait for the
                    // client's (delayed, up to 40 ms) ACK of the previous one.
                    if let Err(err) = stream.set_nodelay(true) {
                        tracing::debug!(error = %err, "setting TCP_NODELAY failed");
                    }
                    connections.spawn(serve_connection(
                        stream,
                        remote,
                        acceptor.clone(),
                        Arc::clone(&builders),
                        app.clone(),
                        Arc::clone(&per_connection),
                        drain_rx.clone(),
                        slot,
                    ));
                }
                Err(err) if is_connection_error(&err) => {
                    tracing::debug!(error = %err, "accepting a connection failed");
                }
                Err(err) => {
                    // Usually out of file descriptors: retrying at once would spin.
                    tracing::warn!(error = %err, backoff_ms = backoff.as_millis(),
                        "accepting connections failed; pausing");
                    tokio::select! {
                        biased;
                        () = &mut shutdown => break,
                        () = tokio::time::sleep(backoff) => {}
                    }
                    backoff = (backoff * 2).min(ACCEPT_BACKOFF_MAX);
                }
            },
        }
    }

    drop(listener);
    tracing::info!(
        open_connections = connections.len(),
        "webhook server draining"
    );
    drain_tx.send_replace(true);
    let drained = tokio::time::timeout(options.drain_timeout, async {
        while let Some(finished) = connections.join_next().await {
            log_task_failure(finished);
        }
    })
    .await;
    if drained.is_err() {
        tracing::warn!(
            open_connections = connections.len(),
            drain_timeout_ms = options.drain_timeout.as_millis(),
            "drain timeout passed; closing the remaining connections"
        );
        connections.shutdown().await;
    }
    tracing::info!("webhook server stopped");
    Ok(())
}

/// Wraps the caller's router in the request layers. Outermost first: tracing (so it sees every
/// final status), the deadline, then admission (the memory reservation and the body read within
/// its limit, [`crate::limits`]). axum's own body limit is set too, because its extractors
/// apply a 2 MB default otherwise.
fn with_request_layers(router: Router, options: &HttpsOptions) -> Router {
    let limits = RequestLimits::new(options);
    let admission = Admission::new(
        options.memory_budget_bytes,
        limits.clone(),
        options.max_body_bytes,
        options.events.clone(),
    );
    router
        .layer(DefaultBodyLimit::max(options.max_body_bytes))
        .layer(axum::middleware::from_fn_with_state(admission, admit))
        .layer(axum::middleware::from_fn_with_state(
            limits,
            enforce_deadline,
        ))
        .layer(axum::middleware::from_fn(trace_request))
}

/// HTTP/2: how much of a request's body the client may send before the server reads it, on
/// connections beyond the first [`HTTP2_ROOMY_CONNECTIONS`].
const HTTP2_STREAM_WINDOW: u32 = 16 * 1024;

/// HTTP/2: the stream window of the first [`HTTP2_ROOMY_CONNECTIONS`] connections open at once.
/// A client sends at most a window's worth before it waits for the server's window update, so
/// with one stream a 2 MB body takes 256 round trips at 16 KiB and 64 at this size: measured
/// with one stream and 1,000-object reviews, 19 against 32 reviews per second.
const HTTP2_ROOMY_STREAM_WINDOW: u32 = 64 * 1024;

/// HTTP/2: how many connections open at once get [`HTTP2_ROOMY_STREAM_WINDOW`]. The API server
/// keeps one connection per webhook host and multiplexes its calls over it, so it gets the
/// roomy windows; a client opening more connections gets the smaller windows on the rest, which
/// bounds what unread bodies hold: 8 × 4 MiB for the roomy ones (64 streams), 1 MiB each for
/// the others.
const HTTP2_ROOMY_CONNECTIONS: usize = 8;

/// HTTP/2: the connection's window holds every stream's, so the bodies of requests waiting for
/// room in the memory budget (not read yet) can never use up the connection's window and stall
/// the body of the request that got room (with hyper's defaults, 1 MiB each, one waiting
/// request did, until its queue time ran out).
fn connection_window(max_streams: u32, stream_window: u32) -> u32 {
    max_streams
        .saturating_mul(stream_window)
        .clamp(stream_window, i32::MAX as u32)
}

/// The connection builders, one per protocol and HTTP/2 window size. The protocol is chosen by
/// ALPN rather than by sniffing the first bytes: HTTP/2 over TLS requires ALPN (RFC 9113 §3.2),
/// and sniffing would leave a silent connection waiting outside every timeout.
struct HttpBuilders {
    http1: auto::Builder<TokioExecutor>,
    http2: auto::Builder<TokioExecutor>,
    http2_roomy: auto::Builder<TokioExecutor>,
    /// One permit per connection that may have the roomy windows.
    roomy: Arc<Semaphore>,
}

/// The builder of one connection, and its claim on the roomy windows while it lasts.
type ChosenBuilder<'a> = (
    &'a auto::Builder<TokioExecutor>,
    Option<OwnedSemaphorePermit>,
);

impl HttpBuilders {
    fn new(options: &HttpsOptions) -> Self {
        let mut builder = auto::Builder::new(TokioExecutor::new());
        builder
            .http1()
            .timer(TokioTimer::new())
            .keep_alive(true)
            .header_read_timeout(options.header_read_timeout);
        builder
            .http2()
            .timer(TokioTimer::new())
            .max_concurrent_streams(options.http2_max_concurrent_streams)
            .keep_alive_interval(options.http2_keep_alive_interval);
        let http2 = |stream_window: u32| {
            let mut builder = builder.clone().http2_only();
            builder
                .http2()
                .initial_stream_window_size(stream_window)
                .initial_connection_window_size(connection_window(
                    options.http2_max_concurrent_streams,
                    stream_window,
                ));
            builder
        };
        Self {
            http2: http2(HTTP2_STREAM_WINDOW),
            http2_roomy: http2(HTTP2_ROOMY_STREAM_WINDOW),
            http1: builder.http1_only(),
            roomy: Arc::new(Semaphore::new(HTTP2_ROOMY_CONNECTIONS)),
        }
    }

    fn for_alpn(&self, alpn: Option<&[u8]>) -> ChosenBuilder<'_> {
        if alpn != Some(ALPN_H2) {
            return (&self.http1, None);
        }
        match Arc::clone(&self.roomy).try_acquire_owned() {
            Ok(claim) => (&self.http2_roomy, Some(claim)),
            Err(_) => (&self.http2, None),
        }
    }
}

/// What every connection of a server shares.
struct ConnectionOptions {
    handshake_timeout: Duration,
    idle_timeout: Duration,
    events: ServerEvents,
}

/// One connection: TLS handshake, then HTTP until the peer closes, the connection stays idle
/// for the idle timeout, or the server drains. `_slot` is its place under the connection limit.
#[allow(clippy::too_many_arguments)]
async fn serve_connection(
    stream: TcpStream,
    remote: SocketAddr,
    acceptor: TlsAcceptor,
    builders: Arc<HttpBuilders>,
    app: Router,
    options: Arc<ConnectionOptions>,
    mut drain: watch::Receiver<bool>,
    _slot: OwnedSemaphorePermit,
) {
    let handshake = tokio::time::timeout(options.handshake_timeout, acceptor.accept(stream));
    let stream = tokio::select! {
        result = handshake => match result {
            Ok(Ok(stream)) => stream,
            Ok(Err(err)) => {
                options.events.refused(Refusal::HandshakeFailed);
                log_handshake_failure(remote, &err);
                return;
            }
            Err(_elapsed) => {
                options.events.refused(Refusal::HandshakeFailed);
                tracing::debug!(%remote, "TLS handshake timed out");
                return;
            }
        },
        () = draining(&mut drain) => return,
    };

    let alpn = stream.get_ref().1.alpn_protocol().map(<[u8]>::to_vec);
    let http1 = alpn.as_deref() != Some(ALPN_H2);
    let activity = Arc::new(Activity::new());
    let service = {
        let activity = Arc::clone(&activity);
        let draining_now = drain.clone();
        hyper::service::service_fn(move |mut request: Request<Incoming>| {
            request.extensions_mut().insert(ConnectInfo(remote));
            let busy = activity.begin();
            let response = app.clone().oneshot(request);
            let draining_now = draining_now.clone();
            async move {
                let mut response = response.await;
                drop(busy);
                // See HTTP1_DRAIN_GRACE: the client closes this connection after the answer.
                if let Ok(response) = &mut response
                    && http1
                    && *draining_now.borrow()
                {
                    response.headers_mut().insert(
                        hyper::header::CONNECTION,
                        hyper::header::HeaderValue::from_static("close"),
                    );
                }
                response
            }
        })
    };
    let (builder, _roomy_windows) = builders.for_alpn(alpn.as_deref());
    let connection = builder.serve_connection(TokioIo::new(stream), service);
    tokio::pin!(connection);
    let result = tokio::select! {
        result = connection.as_mut() => result,
        () = draining(&mut drain) => {
            if http1 {
                tokio::select! {
                    result = connection.as_mut() => return log_connection_end(remote, result),
                    () = tokio::time::sleep(HTTP1_DRAIN_GRACE) => {}
                }
            }
            connection.as_mut().graceful_shutdown();
            connection.await
        }
        () = activity.idle_for(options.idle_timeout) => {
            options.events.refused(Refusal::IdleClosed);
            tracing::debug!(%remote, "closing an idle connection");
            connection.as_mut().graceful_shutdown();
            connection.await
        }
    };
    log_connection_end(remote, result);
}

fn log_connection_end<E: std::fmt::Display>(remote: SocketAddr, result: Result<(), E>) {
    if let Err(err) = result {
        tracing::debug!(%remote, error = %err, "connection ended with an error");
    }
}

/// Requests in flight on one connection and when the last one ended.
struct Activity {
    in_flight: AtomicUsize,
    changed: Notify,
    since: std::sync::Mutex<Instant>,
}

/// Marks a request in flight until dropped.
struct Busy(Arc<Activity>);

impl Drop for Busy {
    fn drop(&mut self) {
        if self.0.in_flight.fetch_sub(1, Ordering::AcqRel) == 1
            && let Ok(mut since) = self.0.since.lock()
        {
            *since = Instant::now();
        }
        self.0.changed.notify_waiters();
    }
}

impl Activity {
    fn new() -> Self {
        Self {
            in_flight: AtomicUsize::new(0),
            changed: Notify::new(),
            since: std::sync::Mutex::new(Instant::now()),
        }
    }

    fn begin(self: &Arc<Self>) -> Busy {
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        self.changed.notify_waiters();
        Busy(Arc::clone(self))
    }

    /// Completes once no request has been in flight for `timeout`.
    async fn idle_for(&self, timeout: Duration) {
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if self.in_flight.load(Ordering::Acquire) > 0 {
                changed.await;
                continue;
            }
            let since = self
                .since
                .lock()
                .map(|s| *s)
                .unwrap_or_else(|_| Instant::now());
            let deadline = tokio::time::Instant::from_std(since + timeout);
            tokio::select! {
                () = tokio::time::sleep_until(deadline) => {
                    if self.in_flight.load(Ordering::Acquire) == 0 {
                        return;
                    }
                }
                () = changed => {}
            }
        }
    }
}

/// Completes when the server starts draining (or the server is gone).
async fn draining(drain: &mut watch::Receiver<bool>) {
    // An error means the sender was dropped, which also means the server is stopping.
    let _ = drain.wait_for(|draining| *draining).await;
}

/// A peer that gives up or a port probe is noise (`debug`); a TLS error is worth a `warn`,
/// because it is what a stale `caBundle` or a missing certificate looks like from here.
fn log_handshake_failure(remote: SocketAddr, err: &io::Error) {
    let tls_error = err
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>());
    match tls_error {
        // Sampled: anyone who can open a connection can repeat this at will.
        Some(tls_error) if HANDSHAKE_FAILED.admit() => {
            tracing::warn!(%remote, error = %tls_error,
                suppressed = HANDSHAKE_FAILED.take_suppressed(),
                "TLS handshake failed (one line per 10 s at most; the metric counts each)");
        }
        Some(_) => {}
        None => tracing::debug!(%remote, error = %err, "TLS handshake failed"),
    }
}

/// Errors that concern only the connection being accepted, after which accepting again at once
/// is right.
fn is_connection_error(err: &io::Error) -> bool {
    matches!(
        err.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::Interrupted
    )
}

fn log_task_failure(finished: Result<(), JoinError>) {
    if let Err(err) = finished
        && err.is_panic()
    {
        tracing::error!(error = %err, "a connection task panicked");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_match_the_webhook_contract() {
        let options = HttpsOptions::default();
        assert_eq!(options.max_body_bytes, 3 * 1024 * 1024);
        assert_eq!(options.request_timeout, Duration::from_secs(5));
        assert!(options.request_timeout < Duration::from_secs(10));
        assert!(options.drain_timeout > options.request_timeout);
        assert!(options.queue_timeout < options.request_timeout);
        for path in &options.path_limits {
            assert!(path.queue_timeout < path.request_timeout, "{path:?}");
        }
    }

    #[test]
    fn per_connection_accept_errors_are_told_apart() {
        assert!(is_connection_error(&io::Error::from(
            io::ErrorKind::ConnectionAborted
        )));
        // EMFILE: not about one connection; the accept loop must back off.
        assert!(!is_connection_error(&io::Error::from_raw_os_error(24)));
    }
}
