//! `/readyz`: false before the serving certificate is loaded, and false while draining.

use crate::support;
use support::control_planes::{self, Concern};

use std::path::PathBuf;
use std::time::{Duration, Instant};

use support::ControlPlane;
use support::operator::{Operator, http_get};
use support::proxy::Proxy;
use support::wait;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use super::*;

async fn readyz(ops_port: u16) -> Option<(u16, String)> {
    tokio::task::spawn_blocking(move || http_get(ops_port, "/readyz"))
        .await
        .ok()?
}

/// The operator's flags in these tests: the registrations must exist for the caBundle (the
/// other readiness check) to publish.
fn flags() -> Vec<&'static str> {
    let mut flags = vec!["--drain-timeout", "10s", "--create-webhook-configurations"];
    flags.extend(ELECTION_FLAGS);
    flags
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_says_ready_once_the_certificate_is_loaded() {
    let (_claim, cp, _client, ns) =
        control_planes::exclusive_namespace(Concern::Operations, "readyz").await;

    // The operator reaches the API server through a gate that holds every connection: in
    // self-signed mode the certificate comes from a Secret, so none can load until it opens.
    let (gate, kubeconfig) = gated_kubeconfig(cp).await;
    let mut operator = Operator::launch(cp, &ns, &flags())
        .kubeconfig(&kubeconfig)
        .start();
    let ops = operator.ops_port;
    assert_not_ready_without_a_certificate(&mut operator).await;

    gate.open();
    let operator = ready(operator).await;
    let (code, body) = readyz(ops).await.expect("/readyz");
    assert_eq!((code, body.trim()), (200, "ok"));
    stop(operator).await;
    drop(gate);
    let _ = std::fs::remove_file(&kubeconfig);
}

/// Draining: a request in flight (its head and half its body sent) holds the HTTPS server
/// open; /readyz says "draining" meanwhile, and the request still gets its answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_says_draining_until_the_requests_in_flight_are_answered() {
    let (_claim, cp, client, ns) =
        control_planes::exclusive_namespace(Concern::Operations, "draining").await;
    let operator = ready(Operator::launch(cp, &ns, &flags()).start()).await;
    let ops = operator.ops_port;
    let tls = connector(&client, &ns).await;
    let held = HeldRequest::send_half(&tls, operator.webhook_port).await;

    let signalled = Instant::now();
    operator.signal_term();
    let (code, body_text) = wait::until_showing(
        "/readyz to stop answering 200 after SIGTERM",
        Duration::from_secs(30),
        || operator.logs(),
        async || {
            let answer = readyz(ops).await.unwrap_or_else(|| {
                panic!(
                    "the ops server went away while draining:\n{}",
                    operator.logs()
                )
            });
            (answer.0 != 200).then_some(answer)
        },
    )
    .await;
    assert_eq!(code, 503, "/readyz after SIGTERM: {body_text}");
    assert!(body_text.contains("draining"), "{body_text}");
    // The listener closes once the reconcile loop has stopped (its writes go through the
    // webhooks); new connections are refused from then on.
    wait_until_refused(
        operator.webhook_port,
        "the webhook listener to close",
        Duration::from_secs(30),
        &operator,
    )
    .await;
    // Still draining: the held request keeps the server open.
    let (code, body_text) = readyz(ops)
        .await
        .expect("the ops server outlives the drain");
    assert_eq!(
        (code, body_text.contains("draining")),
        (503, true),
        "{body_text}"
    );

    assert_denied(&held.finish().await, "held");
    stop(operator).await;
    eprintln!(
        "drain with a held request: exit {:?} after SIGTERM",
        signalled.elapsed()
    );
}

/// A closed gate in front of the API server, and a kubeconfig that goes through it.
async fn gated_kubeconfig(cp: &ControlPlane) -> (Proxy, PathBuf) {
    let api_port: u16 = cp
        .server
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .expect("the API server port");
    let gate = Proxy::gated(api_port).await;
    let kubeconfig = cp.dir.join(format!("kubeconfig-gated-{}", gate.port));
    let text = std::fs::read_to_string(&cp.kubeconfig).expect("kubeconfig");
    assert!(
        text.contains(&cp.server),
        "the kubeconfig names {}",
        cp.server
    );
    std::fs::write(
        &kubeconfig,
        text.replace(&cp.server, &format!("https://127.0.0.1:{}", gate.port)),
    )
    .expect("gated kubeconfig");
    (gate, kubeconfig)
}

/// From the first answer of its ops port on, for 2 s, the operator (which cannot load its
/// certificate) says it is not ready, and it keeps running.
async fn assert_not_ready_without_a_certificate(operator: &mut Operator) {
    let ops = operator.ops_port;
    let first = wait::until_showing(
        "the ops port",
        Duration::from_secs(30),
        || operator.logs(),
        || readyz(ops),
    )
    .await;
    // Samples for a while (a property held throughout, not a wait).
    let mut samples = vec![first];
    let held = Instant::now();
    while held.elapsed() < Duration::from_secs(2) {
        samples.push(readyz(ops).await.expect("the ops server answers"));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(operator.is_running(), "{}", operator.logs());
    for (code, body) in &samples {
        assert_eq!(*code, 503, "/readyz before any certificate: {body}");
        assert!(body.contains("not ready"), "{body}");
    }
    eprintln!(
        "/readyz without a certificate: {} x 503 {:?}",
        samples.len(),
        samples[0].1
    );
    assert_eq!(
        readyz(ops).await.map(|(c, _)| c),
        Some(503),
        "still not ready while the API server is unreachable"
    );
}

/// An admission request the server has accepted, with the first half of its body sent and the
/// rest held back.
struct HeldRequest {
    stream: TlsStream<TcpStream>,
    body: Vec<u8>,
    half: usize,
}

impl HeldRequest {
    /// Returns once the server's handler reads the body (its `100 Continue`): the request is
    /// in flight from then on.
    async fn send_half(tls: &TlsConnector, port: u16) -> HeldRequest {
        let mut stream = tls_connect(tls, port).await.expect("connect");
        let body = serde_json::to_vec(&invalid_admission_review("held")).expect("json");
        let half = body.len() / 2;
        let head = post_head_expecting_continue("/validate", body.len());
        stream.write_all(head.as_bytes()).await.expect("head");
        assert_eq!(read_continue(&mut stream).await, Ok(true), "100 Continue");
        stream
            .write_all(&body[..half])
            .await
            .expect("half the body");
        HeldRequest { stream, body, half }
    }

    /// Sends the rest of the body; the answer.
    async fn finish(mut self) -> (u16, Value) {
        self.stream
            .write_all(&self.body[self.half..])
            .await
            .expect("the rest of the body");
        support::https::read_answer(&mut self.stream)
            .await
            .expect("the held request's answer")
    }
}
