//! `serve_ops` over plain HTTP on 127.0.0.1.

use std::net::SocketAddr;

use hyper::StatusCode;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use trustyai_webhooks::{MetricsFormat, OpsState, Readiness, ServerError, routes, serve_ops};

use crate::common::{PATIENCE, plain_get, plain_get_accepting};

async fn start(
    state: OpsState,
) -> (
    SocketAddr,
    oneshot::Sender<()>,
    JoinHandle<Result<(), ServerError>>,
) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("local address");
    let (shutdown_tx, shutdown_rx) = oneshot::channel::<()>();
    let task = tokio::spawn(serve_ops(listener, state, async move {
        let _ = shutdown_rx.await;
    }));
    (addr, shutdown_tx, task)
}

/// An ops server of readiness with the TLS and CA bundle checks, neither passed yet.
struct Serving {
    readiness: Readiness,
    addr: SocketAddr,
    shutdown: oneshot::Sender<()>,
    task: JoinHandle<Result<(), ServerError>>,
}

impl Serving {
    async fn start() -> Self {
        let readiness = Readiness::new([Readiness::TLS, Readiness::CA_BUNDLE]);
        let (addr, shutdown, task) =
            start(OpsState::new(readiness.clone(), |_| String::new())).await;
        Self {
            readiness,
            addr,
            shutdown,
            task,
        }
    }

    /// Draining, with every check passed.
    async fn draining() -> Self {
        let serving = Self::start().await;
        serving.readiness.set(Readiness::CA_BUNDLE, true);
        serving.readiness.set(Readiness::TLS, true);
        serving.readiness.mark_draining();
        serving
    }

    /// Stops the server; it must return cleanly.
    async fn stop(self) {
        self.shutdown.send(()).expect("server running");
        tokio::time::timeout(PATIENCE, self.task)
            .await
            .expect("serve_ops returned")
            .expect("no panic")
            .expect("clean shutdown");
    }
}

#[tokio::test]
async fn readyz_follows_the_checks() {
    let serving = Serving::start().await;
    let (addr, readiness) = (serving.addr, &serving.readiness);

    let (status, _, body) = plain_get(addr, routes::READYZ).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(body, "not ready: ca-bundle, tls");

    readiness.set(Readiness::CA_BUNDLE, true);
    let (status, _, body) = plain_get(addr, routes::READYZ).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(body, "not ready: tls");

    readiness.set(Readiness::TLS, true);
    let (status, _, body) = plain_get(addr, routes::READYZ).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body, "ok");

    serving.stop().await;
}

/// The answer to `GET route` of a draining server whose checks all pass.
async fn while_draining(route: &str) -> (StatusCode, String) {
    let serving = Serving::draining().await;
    let (status, _, body) = plain_get(serving.addr, route).await;
    serving.stop().await;
    (status, body)
}

#[tokio::test]
async fn readyz_fails_while_draining() {
    let answer = while_draining(routes::READYZ).await;
    assert_eq!(
        answer,
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "not ready: draining".to_owned()
        )
    );
}

/// Liveness is not readiness.
#[tokio::test]
async fn healthz_stays_ok_while_draining() {
    let answer = while_draining(routes::HEALTHZ).await;
    assert_eq!(answer, (StatusCode::OK, "ok".to_owned()));
}

#[tokio::test]
async fn metrics_renders_the_callback_on_each_scrape() {
    let scrapes = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = std::sync::Arc::clone(&scrapes);
    let state = OpsState::new(Readiness::default(), move |_| {
        let n = counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
        format!("scrapes {n}\n")
    });
    let (addr, _shutdown, _task) = start(state).await;

    for n in 1..=2 {
        let (status, content_type, body) = plain_get(addr, routes::METRICS).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(
            content_type.as_deref(),
            Some(MetricsFormat::PrometheusText.content_type())
        );
        assert_eq!(body, format!("scrapes {n}\n"));
    }
}

#[tokio::test]
async fn metrics_is_openmetrics_when_the_scraper_prefers_it() {
    let state = OpsState::new(Readiness::default(), |format| match format {
        MetricsFormat::OpenMetrics => "# EOF\n".to_owned(),
        MetricsFormat::PrometheusText => String::new(),
    });
    let (addr, _shutdown, _task) = start(state).await;
    let accept = "application/openmetrics-text;version=1.0.0;q=0.6,text/plain;version=0.0.4;q=0.3";
    let (_, content_type, body) = plain_get_accepting(addr, routes::METRICS, Some(accept)).await;
    assert_eq!(
        content_type.as_deref(),
        Some(MetricsFormat::OpenMetrics.content_type())
    );
    assert_eq!(body, "# EOF\n");
}
