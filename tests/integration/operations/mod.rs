//! Running it for real:
//!
//! - `replicas`: two replicas behind one front (one reconciles, both serve the webhooks, a
//!   stopped leader hands over, rolling restarts without a failed request);
//! - `sigterm_burst`: SIGTERM during a burst of admission requests answers every accepted one;
//! - `metrics`: `/metrics` as Prometheus text (`prometheus_text` checks it) whose counters move;
//! - `readyz`: `/readyz` false before the certificate is loaded and while draining;
//! - `streaming_lists`: an API server without streaming lists.
//!
//! Every test holds this concern's control plane exclusively: operators publish into the
//! cluster-wide CRD and webhook registrations, so two at once (from different namespaces) would
//! fight over them.

mod metrics;
mod prometheus_text;
mod readyz;
mod replicas;
mod sigterm_burst;
mod streaming_lists;

use crate::support;

use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Secret;
use kube::Client;
use kube::api::{Api, DynamicObject, PostParams};
use serde_json::{Value, json};
use support::ControlPlane;
use support::cluster::tas_api;
use support::operator::{Operator, http_get};
use support::wait;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

use prometheus_text::{Sample, parse_prometheus};

const SECRET: &str = trustyai_operator::cli::default_names::CERT_SECRET;
const LEASE: &str = trustyai_operator::cli::default_names::LEASE;
const READY_TIMEOUT: Duration = Duration::from_secs(90);
const TIMEOUT: Duration = Duration::from_secs(90);
/// Leader-election timing of these tests: roomy enough that a loaded machine costs a leader a
/// few renewal attempts (each capped at the retry period), not its lease; and renew deadline
/// plus three retry periods within the lease duration (see tests/leader_election.rs).
const RETRY_PERIOD: Duration = Duration::from_secs(1);
const ELECTION_FLAGS: [&str; 6] = [
    "--lease-duration",
    "10s",
    "--renew-deadline",
    "6s",
    "--retry-period",
    "1s",
];

// --- cluster helpers -----------------------------------------------------------------------

fn tas(version: &str, name: &str) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": format!("trustyai.opendatahub.io/{version}"), "kind": "TrustyAIService",
        "metadata": {"name": name},
        "spec": support::samples::minimal()
    }))
    .expect("object")
}

/// Waits until `ns/name` is reconciled: its Deployment exists and it has status conditions.
async fn wait_reconciled(client: &Client, ns: &str, name: &str, context: impl Fn() -> String) {
    let (services, deployments) = (
        tas_api(client, ns, "v1"),
        Api::<Deployment>::namespaced(client.clone(), ns),
    );
    wait::until_showing(&format!("{ns}/{name} reconciled"), TIMEOUT, context, || {
        let (services, deployments) = (services.clone(), deployments.clone());
        async move {
            deployments.get_opt(name).await.ok()??;
            let object = services.get_opt(name).await.ok()??;
            let conditions = object.data["status"]["conditions"].as_array()?;
            (!conditions.is_empty()).then_some(())
        }
    })
    .await;
}

/// Creates the TrustyAIService `ns/name` through `version` and waits until it is reconciled;
/// returns how long that took.
async fn create_reconciled(
    client: &Client,
    ns: &str,
    version: &str,
    name: &str,
    context: impl Fn() -> String,
) -> Duration {
    tas_api(client, ns, version)
        .create(&PostParams::default(), &tas(version, name))
        .await
        .unwrap_or_else(|e| panic!("creating {name} through {version}: {e}"));
    let created = Instant::now();
    wait_reconciled(client, ns, name, context).await;
    created.elapsed()
}

/// Waits until connections to `port` (the operator's webhooks) are refused; returns when they
/// first were.
async fn wait_until_refused(
    port: u16,
    what: &str,
    timeout: Duration,
    operator: &Operator,
) -> Instant {
    wait::until_showing(
        what,
        timeout,
        || operator.logs(),
        || async {
            TcpStream::connect(("127.0.0.1", port))
                .await
                .is_err()
                .then(Instant::now)
        },
    )
    .await
}

/// `Operator::wait_ready` blocks; run it off the runtime so the proxy keeps serving.
async fn ready(mut operator: Operator) -> Operator {
    tokio::task::spawn_blocking(move || {
        operator.wait_ready(READY_TIMEOUT);
        operator
    })
    .await
    .expect("wait_ready")
}

/// SIGTERM and wait for the exit, off the runtime; asserts exit 0.
async fn stop(mut operator: Operator) {
    let (status, logs) = tokio::task::spawn_blocking(move || {
        let status = operator.stop();
        (status, operator.logs())
    })
    .await
    .expect("stop");
    assert!(status.success(), "exit {status} on SIGTERM:\n{logs}");
}

fn start(cp: &ControlPlane, ns: &str, webhook: u16, ops: u16, extra: &[&str]) -> Operator {
    Operator::launch(cp, ns, extra)
        .webhook_port(webhook)
        .ops_port(ops)
        .start()
}

// --- TLS and raw HTTP/1.1 -----------------------------------------------------------------

/// A TLS connector trusting only the CA in the operator's Secret (`ca.crt`).
async fn connector(client: &Client, ns: &str) -> TlsConnector {
    let secret = Api::<Secret>::namespaced(client.clone(), ns)
        .get(SECRET)
        .await
        .expect("the webhook Secret");
    let ca = secret
        .data
        .as_ref()
        .and_then(|d| d.get("ca.crt"))
        .expect("ca.crt")
        .0
        .clone();
    support::cluster::tls_connector(&ca)
}

async fn tls_connect(connector: &TlsConnector, port: u16) -> Result<TlsStream<TcpStream>, String> {
    support::https::connect(connector, &format!("127.0.0.1:{port}"), "127.0.0.1").await
}

/// The head of a `POST path` with a JSON body of `length` bytes, closing after the answer.
fn post_head(path: &str, length: usize) -> String {
    format!(
        "POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {length}\r\nConnection: close\r\n\r\n"
    )
}

/// [`post_head`] asking for `100 Continue`: the server answers it only once its handler reads
/// the body, which marks the request as accepted (in flight); until then a drain may close the
/// connection unread (hyper does, for connections it has read nothing from).
fn post_head_expecting_continue(path: &str, length: usize) -> String {
    post_head(path, length).replacen("\r\n", "\r\nExpect: 100-continue\r\n", 1)
}

/// Reads the interim `100 Continue`, and nothing after it. `Ok(false)`: the connection closed
/// first.
async fn read_continue(stream: &mut TlsStream<TcpStream>) -> Result<bool, String> {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match tokio::time::timeout(Duration::from_secs(20), stream.read(&mut byte)).await {
            Err(_) => return Err("no 100 Continue within 20s".into()),
            Ok(Ok(0) | Err(_)) => return Ok(false),
            Ok(Ok(_)) => head.push(byte[0]),
        }
    }
    if head.starts_with(b"HTTP/1.1 100 ") {
        Ok(true)
    } else {
        Err(format!(
            "expected 100 Continue: {}",
            String::from_utf8_lossy(&head)
        ))
    }
}

/// One POST over a fresh TLS connection.
async fn post(
    connector: &TlsConnector,
    port: u16,
    path: &str,
    body: &Value,
) -> Result<(u16, Value), String> {
    let mut stream = tls_connect(connector, port).await?;
    let body = serde_json::to_vec(body).expect("json");
    let mut request = post_head(path, body.len()).into_bytes();
    request.extend_from_slice(&body);
    stream
        .write_all(&request)
        .await
        .map_err(|e| format!("write: {e}"))?;
    support::https::read_answer(&mut stream).await
}

/// A validating AdmissionReview for a CREATE of an object the rules deny (a foreign image).
fn invalid_admission_review(uid: &str) -> Value {
    json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": uid, "name": "bad", "namespace": "ns", "operation": "CREATE",
            "kind": {"group": "trustyai.opendatahub.io", "version": "v1", "kind": "TrustyAIService"},
            "resource": {"group": "trustyai.opendatahub.io", "version": "v1", "resource": "trustyaiservices"},
            "userInfo": {"username": "alice"},
            "object": {
                "apiVersion": "trustyai.opendatahub.io/v1", "kind": "TrustyAIService",
                "metadata": {"name": "bad", "namespace": "ns"},
                "spec": {"storage": {"format": "PVC"}, "metrics": {"schedule": "5s"},
                         "image": "docker.io/someone/trustyai:1"}
            }
        }
    })
}

fn assert_denied(answer: &(u16, Value), uid: &str) {
    let (status, body) = answer;
    assert_eq!(*status, 200, "{body}");
    assert_eq!(body["kind"], "AdmissionReview", "{body}");
    assert_eq!(body["response"]["uid"], uid, "{body}");
    assert_eq!(body["response"]["allowed"], false, "{body}");
    assert!(
        body["response"]["status"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("spec.image")),
        "{body}"
    );
}

/// `/validate` on `port` denies an invalid object (review `uid`).
async fn assert_validate_denies(tls: &TlsConnector, port: u16, uid: &str) {
    let answer = post(tls, port, "/validate", &invalid_admission_review(uid))
        .await
        .unwrap_or_else(|e| panic!("/validate on {port}: {e}"));
    assert_denied(&answer, uid);
}

/// `/convert` on `port` converts an old object (review `uid`).
async fn assert_convert_converts(tls: &TlsConnector, port: u16, uid: &str) {
    let answer = post(tls, port, "/convert", &conversion_review(uid))
        .await
        .unwrap_or_else(|e| panic!("/convert on {port}: {e}"));
    assert_converted(&answer, uid);
}

fn conversion_review(uid: &str) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
        "request": {
            "uid": uid, "desiredAPIVersion": "trustyai.opendatahub.io/v1",
            "objects": [{
                "apiVersion": "trustyai.opendatahub.io/v1alpha1", "kind": "TrustyAIService",
                "metadata": {"name": "old", "namespace": "ns", "uid": "o-1"},
                "spec": {"storage": {"format": "PVC", "folder": "/inputs", "size": "1Gi"},
                         "data": {"filename": "data.csv", "format": "CSV"},
                         "metrics": {"schedule": "5s"}}
            }]
        }
    })
}

fn assert_converted(answer: &(u16, Value), uid: &str) {
    let (status, body) = answer;
    assert_eq!(*status, 200, "{body}");
    assert_eq!(body["kind"], "ConversionReview", "{body}");
    assert_eq!(body["response"]["uid"], uid, "{body}");
    assert_eq!(body["response"]["result"]["status"], "Success", "{body}");
    let converted = body["response"]["convertedObjects"]
        .as_array()
        .expect("convertedObjects");
    assert_eq!(converted.len(), 1, "{body}");
    assert_eq!(
        converted[0]["apiVersion"], "trustyai.opendatahub.io/v1",
        "{body}"
    );
    assert_eq!(converted[0]["metadata"]["name"], "old", "{body}");
}

/// `/metrics` of an operator, parsed (panics when it does not parse).
async fn metrics(ops_port: u16) -> Option<Vec<Sample>> {
    let (code, body) = tokio::task::spawn_blocking(move || http_get(ops_port, "/metrics"))
        .await
        .ok()??;
    assert_eq!(code, 200, "{body}");
    Some(
        parse_prometheus(&body)
            .unwrap_or_else(|e| panic!("/metrics is not Prometheus text: {e}\n{body}")),
    )
}

async fn leader_gauge(ops_port: u16) -> Option<f64> {
    let samples = metrics(ops_port).await?;
    samples
        .iter()
        .find(|(n, _, _)| n == "trustyai_operator_leader")
        .map(|(_, _, v)| *v)
}
