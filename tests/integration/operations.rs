//! Running it for real: two replicas behind one front (one reconciles, both serve the webhooks,
//! a stopped leader hands over, rolling restarts without a failed request), SIGTERM during a
//! burst of admission requests, `/metrics` as Prometheus text whose counters move, and
//! `/readyz` false before the certificate is loaded and while draining.
//!
//! Every test holds this concern's control plane exclusively: operators publish into the
//! cluster-wide CRD and webhook registrations, so two at once (from different namespaces) would
//! fight over them.

use crate::support;
use support::control_planes::{self, Concern};

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Secret;
use kube::Client;
use kube::api::{Api, DynamicObject, ListParams, PostParams, WatchEvent, WatchParams};
use serde_json::{Value, json};
use support::ControlPlane;
use support::cluster::tas_api;
use support::operator::{Operator, free_port, http_get, http_get_accepting};
use support::proxy::Proxy;
use support::wait;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;
use tokio_util::sync::CancellationToken;

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
/// Bound on a handover once the lease is released: the follower's next attempt comes within a
/// retry period and takes at most another, plus the polling of its `/metrics`.
const HANDOVER_AFTER_RELEASE: Duration = Duration::from_secs(3);
/// Bound from SIGTERM to the follower leading: the old leader lets its in-flight reconciles
/// finish (up to 20 s) before it releases the lease.
const HANDOVER_AFTER_SIGTERM: Duration = Duration::from_secs(30);

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

async fn lease_holder(client: &Client, ns: &str) -> Option<String> {
    Api::<Lease>::namespaced(client.clone(), ns)
        .get_opt(LEASE)
        .await
        .ok()??
        .spec?
        .holder_identity
}

/// Watches the Lease from its current version and records each holder with when it was seen,
/// until `until` accepts one. Returns once the watch is established, so a change made after the
/// call is never missed.
async fn watch_lease_holders(
    client: &Client,
    ns: &str,
    until: impl Fn(Option<&str>) -> bool + Send + 'static,
) -> tokio::task::JoinHandle<Vec<(Option<String>, Instant)>> {
    let leases = Api::<Lease>::namespaced(client.clone(), ns);
    let version = leases
        .get(LEASE)
        .await
        .expect("the Lease")
        .metadata
        .resource_version
        .expect("the Lease's resourceVersion");
    let params = WatchParams::default().fields(&format!("metadata.name={LEASE}"));
    let changes = leases
        .watch(&params, &version)
        .await
        .expect("watching the Lease");
    tokio::spawn(async move {
        let mut changes = std::pin::pin!(changes);
        let mut holders = Vec::new();
        while let Some(event) = changes.next().await {
            match event.expect("a Lease watch event") {
                WatchEvent::Added(lease) | WatchEvent::Modified(lease) => {
                    let holder = lease.spec.and_then(|s| s.holder_identity);
                    let done = until(holder.as_deref());
                    holders.push((holder, Instant::now()));
                    if done {
                        return holders;
                    }
                }
                WatchEvent::Deleted(_) => panic!("the Lease was deleted: {holders:?}"),
                WatchEvent::Bookmark(_) => {}
                WatchEvent::Error(e) => panic!("the Lease watch failed: {e:?} after {holders:?}"),
            }
        }
        panic!("the Lease watch ended early: {holders:?}");
    })
}

/// The leader identity embeds the process id (`<host>-<pid>-<suffix>`).
fn holds_lease(holder: Option<&str>, pid: u32) -> bool {
    holder.is_some_and(|h| h.contains(&format!("-{pid}-")))
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

// --- Prometheus text ------------------------------------------------------------------------

/// One sample: metric name, labels, value.
type Sample = (String, BTreeMap<String, String>, f64);

fn is_metric_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

/// Parses Prometheus (OpenMetrics) text strictly enough to catch a broken exposition:
/// `# HELP name text`, `# TYPE name type`, `# UNIT name unit`, a final `# EOF`, and samples
/// `name{label="value",...} value [timestamp]` with a float value.
fn parse_prometheus(text: &str) -> Result<Vec<Sample>, String> {
    let mut samples = Vec::new();
    let mut typed = BTreeMap::new();
    let lines: Vec<&str> = text.lines().collect();
    for (i, line) in lines.iter().enumerate() {
        let bad = |why: &str| format!("line {}: {why}: {line:?}", i + 1);
        if line.is_empty() {
            continue;
        }
        if let Some(comment) = line.strip_prefix('#') {
            if *line == "# EOF" {
                if i + 1 != lines.len() {
                    return Err(bad("# EOF before the end"));
                }
                continue;
            }
            let mut parts = comment.trim_start().splitn(3, ' ');
            let (keyword, name, rest) = (parts.next(), parts.next(), parts.next());
            let name = name
                .filter(|n| is_metric_name(n))
                .ok_or_else(|| bad("no metric name"))?;
            match keyword {
                Some("HELP") => {
                    if rest.is_none_or(str::is_empty) {
                        return Err(bad("HELP without text"));
                    }
                }
                Some("TYPE") => {
                    let kind = rest.unwrap_or_default();
                    let known = [
                        "counter",
                        "gauge",
                        "histogram",
                        "summary",
                        "info",
                        "unknown",
                        "untyped",
                        "stateset",
                        "gaugehistogram",
                    ];
                    if !known.contains(&kind) {
                        return Err(bad("unknown TYPE"));
                    }
                    if typed.insert(name.to_string(), kind.to_string()).is_some() {
                        return Err(bad("TYPE given twice"));
                    }
                }
                Some("UNIT") => {}
                _ => return Err(bad("unknown comment")),
            }
            continue;
        }
        let (name, labels, rest) = match line.find('{') {
            Some(open) => {
                let close = line.rfind('}').ok_or_else(|| bad("unclosed labels"))?;
                (
                    &line[..open],
                    parse_labels(&line[open + 1..close]).map_err(|e| bad(&e))?,
                    &line[close + 1..],
                )
            }
            None => {
                let (name, rest) = line.split_once(' ').ok_or_else(|| bad("no value"))?;
                (name, BTreeMap::new(), rest)
            }
        };
        if !is_metric_name(name) {
            return Err(bad("bad metric name"));
        }
        let mut fields = rest.split_whitespace();
        let value: f64 = fields
            .next()
            .ok_or_else(|| bad("no value"))?
            .parse()
            .map_err(|_| bad("value is not a float"))?;
        if let Some(ts) = fields.next() {
            ts.parse::<f64>().map_err(|_| bad("bad timestamp"))?;
        }
        if fields.next().is_some() {
            return Err(bad("trailing fields"));
        }
        // A sample belongs to a declared family (histograms add _bucket, _sum, _count; counters _total).
        let family_declared = typed.contains_key(name)
            || ["_total", "_bucket", "_sum", "_count", "_created", "_info"]
                .iter()
                .any(|s| name.strip_suffix(s).is_some_and(|f| typed.contains_key(f)));
        if !family_declared {
            return Err(bad("sample of an undeclared metric (no TYPE before it)"));
        }
        samples.push((name.to_string(), labels, value));
    }
    Ok(samples)
}

fn parse_labels(text: &str) -> Result<BTreeMap<String, String>, String> {
    let mut labels = BTreeMap::new();
    let mut rest = text.trim();
    while !rest.is_empty() {
        let (key, after) = rest.split_once("=\"").ok_or("label without =\"")?;
        if !is_metric_name(key) || key.contains(':') {
            return Err(format!("bad label name {key:?}"));
        }
        let mut value = String::new();
        let mut chars = after.char_indices();
        let end = loop {
            match chars.next() {
                Some((_, '\\')) => match chars.next() {
                    Some((_, 'n')) => value.push('\n'),
                    Some((_, c)) => value.push(c),
                    None => return Err("dangling escape".into()),
                },
                Some((i, '"')) => break i,
                Some((_, c)) => value.push(c),
                None => return Err("unterminated label value".into()),
            }
        };
        if labels.insert(key.to_string(), value).is_some() {
            return Err(format!("label {key} twice"));
        }
        rest = after[end + 1..].trim_start();
        if let Some(next) = rest.strip_prefix(',') {
            rest = next.trim_start();
        } else if !rest.is_empty() {
            return Err(format!("expected , between labels, found {rest:?}"));
        }
    }
    Ok(labels)
}

/// Sum of the samples named `name` whose labels include `with`.
fn sum(samples: &[Sample], name: &str, with: &[(&str, &str)]) -> f64 {
    samples
        .iter()
        .filter(|(n, labels, _)| {
            n == name
                && with
                    .iter()
                    .all(|(k, v)| labels.get(*k).map(String::as_str) == Some(*v))
        })
        .fold(0.0, |total, (_, _, v)| total + v)
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

/// Prometheus' own scrape parser (`promcheck scrape`, built from the Prometheus module) reads
/// `/metrics` in the format each Accept asks for, picked by the Content-Type as a scrape does;
/// the series an alert needs are there before any event, and the process metrics too.
async fn prometheus_parses_the_scrape(ops_port: u16) {
    let promcheck = trustyai_local_cluster::binary("promcheck").expect("promcheck");
    let dir = tempfile_dir("scrape");
    // A Prometheus 3 scrape's Accept, then a client that asks for nothing (the text format).
    let prometheus = "application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.6,application/openmetrics-text;version=0.0.1;q=0.5,text/plain;version=1.0.0;escaping=allow-utf-8;q=0.4,text/plain;version=0.0.4;q=0.3,*/*;q=0.2";
    for (accept, expected_type) in [
        (
            Some(prometheus),
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        ),
        (None, "text/plain; version=0.0.4; charset=utf-8"),
    ] {
        let (code, content_type, body) =
            tokio::task::spawn_blocking(move || http_get_accepting(ops_port, "/metrics", accept))
                .await
                .expect("join")
                .expect("/metrics answers");
        assert_eq!(code, 200, "{body}");
        let content_type = content_type.expect("a Content-Type");
        assert_eq!(content_type, expected_type);
        let file = dir.join("metrics.txt");
        std::fs::write(&file, &body).expect("write the scrape");
        let parsed = std::process::Command::new(&promcheck)
            .arg("scrape")
            .arg(&content_type)
            .arg(&file)
            .output()
            .expect("run promcheck");
        let stdout = String::from_utf8_lossy(&parsed.stdout);
        assert!(
            parsed.status.success(),
            "Prometheus refused the {content_type} scrape: {}\n{body}",
            String::from_utf8_lossy(&parsed.stderr)
        );
        for series in [
            "{__name__=\"trustyai_operator_reconciles_total\", result=\"error\"} 0",
            "{__name__=\"trustyai_operator_reconcile_errors_total\", category=\"ApiUnreachable\"} 0",
            "{__name__=\"trustyai_operator_webhook_requests_total\", endpoint=\"mutate\", outcome=\"malformed\"}",
            "{__name__=\"trustyai_operator_admission_denials_total\", rule=\"storage_size\"}",
            "{__name__=\"trustyai_operator_webhook_refusals_total\", reason=\"throttled\"} 0",
            "{__name__=\"trustyai_operator_build_info\", version=\"",
            "{__name__=\"process_resident_memory_bytes\"}",
            "{__name__=\"process_cpu_seconds_total\"}",
            "{__name__=\"process_start_time_seconds\"}",
        ] {
            assert!(
                stdout.contains(series),
                "{series} missing from what Prometheus read of the {content_type} scrape:\n{stdout}"
            );
        }
    }
}

/// A fresh folder under the system temp dir for files a test hands to a tool.
fn tempfile_dir(what: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("trustyai-{what}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

async fn leader_gauge(ops_port: u16) -> Option<f64> {
    let samples = metrics(ops_port).await?;
    samples
        .iter()
        .find(|(n, _, _)| n == "trustyai_operator_leader")
        .map(|(_, _, v)| *v)
}

async fn readyz(ops_port: u16) -> Option<(u16, String)> {
    tokio::task::spawn_blocking(move || http_get(ops_port, "/readyz"))
        .await
        .ok()?
}

// --- 1. two replicas behind one front -------------------------------------------------------

/// One of the clients that keep writing and listing through v1alpha1 (so every write needs /convert,
/// /mutate and /validate) until stopped; returns (operations, failures).
fn continuous_client(
    client: Client,
    ns: String,
    worker: usize,
    done: Arc<AtomicBool>,
    phase: Arc<std::sync::Mutex<&'static str>>,
) -> tokio::task::JoinHandle<(usize, Vec<String>)> {
    tokio::spawn(async move {
        let api = tas_api(&client, &ns, "v1alpha1");
        let started = Instant::now();
        let (mut operations, mut failures) = (0, Vec::new());
        let mut i = 0;
        while !done.load(Ordering::SeqCst) {
            i += 1;
            let name = format!("load-{worker}-{i}");
            let mut record = |what: &str, result: Result<(), kube::Error>| {
                operations += 1;
                if let Err(e) = result {
                    let phase = *phase.lock().expect("phase");
                    failures.push(format!(
                        "{:?} [{phase}] {what} {name}: {e}",
                        started.elapsed()
                    ));
                }
            };
            let created = api
                .create(&PostParams::default(), &tas("v1alpha1", &name))
                .await
                .map(|_| ());
            let ok = created.is_ok();
            record("create", created);
            if ok {
                let got = api.get(&name).await.map(|_| ());
                record("get", got);
            }
            let listed = api.list(&ListParams::default()).await.map(|_| ());
            record("list", listed);
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        (operations, failures)
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_one_leader_both_serve_handover_and_rolling_restarts_without_failures() {
    let claim = control_planes::exclusive(Concern::Operations);
    let cp = claim.control_plane();
    let client = cp.client().await;
    let ns = cp.namespace(&client, "replicas").await;
    let apps = cp.namespace(&client, "apps").await;
    let load_ns = cp.namespace(&client, "load").await;

    let ports = [(free_port(), free_port()), (free_port(), free_port())];
    // A Service in front: connections go only to replicas whose /readyz is 200.
    let proxy = Proxy::start_ready_aware(ports.to_vec()).await;
    let url = format!("https://127.0.0.1:{}", proxy.port);
    let mut flags = vec![
        "--webhook-url",
        url.as_str(),
        "--create-webhook-configurations",
    ];
    flags.extend(ELECTION_FLAGS);
    let (a, b) = (
        start(cp, &ns, ports[0].0, ports[0].1, &flags),
        start(cp, &ns, ports[1].0, ports[1].1, &flags),
    );
    let (a, b) = (ready(a).await, ready(b).await);
    // Ops ports stay with the slot across restarts; the processes change.
    let mut replicas = [Some(a), Some(b)];
    let logs = |r: &[Option<Operator>]| {
        r.iter()
            .flatten()
            .map(|o| format!("--- {} ---\n{}", o.log.display(), o.logs()))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let pid = |r: &[Option<Operator>], i: usize| r[i].as_ref().expect("running").pid();
    let one_leader = || async {
        let gauges = [
            leader_gauge(ports[0].1).await?,
            leader_gauge(ports[1].1).await?,
        ];
        match gauges {
            [1.0, 0.0] => Some(0),
            [0.0, 1.0] => Some(1),
            _ => None,
        }
    };

    wait::until_showing(
        "exactly one leader",
        TIMEOUT,
        || logs(&replicas),
        one_leader,
    )
    .await;
    // Never two leaders, while both keep trying for the lease for a few retry periods.
    let watched = Instant::now();
    while watched.elapsed() < 3 * RETRY_PERIOD {
        let gauges = [
            leader_gauge(ports[0].1).await,
            leader_gauge(ports[1].1).await,
        ];
        assert_ne!(
            gauges,
            [Some(1.0); 2],
            "two leaders at once:\n{}",
            logs(&replicas)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Exactly one leads: the leader gauge and the Lease agree.
    let leader = wait::until_showing(
        "exactly one leader",
        TIMEOUT,
        || logs(&replicas),
        one_leader,
    )
    .await;
    let follower = 1 - leader;
    let holder = lease_holder(&client, &ns).await;
    assert!(
        holds_lease(holder.as_deref(), pid(&replicas, leader)),
        "the Lease holder {holder:?} is not the replica reporting leader=1 (pid {})",
        pid(&replicas, leader)
    );

    tas_api(&client, &apps, "v1")
        .create(&PostParams::default(), &tas("v1", "first"))
        .await
        .expect("created");
    wait_reconciled(&client, &apps, "first", || logs(&replicas)).await;

    // Both replicas answer admission and conversion, over TLS chaining to the Secret's CA.
    let tls = connector(&client, &ns).await;
    for (port, _) in ports {
        let uid = format!("validate-{port}");
        let answer = post(&tls, port, "/validate", &invalid_admission_review(&uid))
            .await
            .unwrap_or_else(|e| panic!("/validate on {port}: {e}"));
        assert_denied(&answer, &uid);
        let uid = format!("convert-{port}");
        let answer = post(&tls, port, "/convert", &conversion_review(&uid))
            .await
            .unwrap_or_else(|e| panic!("/convert on {port}: {e}"));
        assert_converted(&answer, &uid);
    }

    // From here on a client keeps writing and listing through the front.
    let done = Arc::new(AtomicBool::new(false));
    let phase = Arc::new(std::sync::Mutex::new("before the leader stops"));
    let load: Vec<_> = (0..2)
        .map(|worker| {
            continuous_client(
                client.clone(),
                load_ns.clone(),
                worker,
                done.clone(),
                phase.clone(),
            )
        })
        .collect();
    let set_phase = |p: &'static str| *phase.lock().expect("phase") = p;
    tokio::time::sleep(Duration::from_secs(2)).await;

    // Stop the leader: it finishes its in-flight reconciles (the clients keep it busy), then
    // releases the lease, and the follower takes it at once rather than after it expires.
    set_phase("stopping the leader");
    let follower_pid = pid(&replicas, follower);
    let lease_changes = watch_lease_holders(&client, &ns, move |holder| {
        holds_lease(holder, follower_pid)
    })
    .await;
    let signalled = Instant::now();
    let stopping = tokio::spawn(stop(replicas[leader].take().expect("the leader")));
    let leading_at = wait::until_showing(
        "the follower takes over",
        TIMEOUT,
        || logs(&replicas),
        || async { (leader_gauge(ports[follower].1).await? == 1.0).then(Instant::now) },
    )
    .await;
    stopping.await.expect("stopping the leader");
    let holders = tokio::time::timeout(TIMEOUT, lease_changes)
        .await
        .expect("the Lease watch ends once the follower holds it")
        .expect("the Lease watch");
    let released_at = holders
        .iter()
        .find(|(holder, _)| holder.as_deref().is_none_or(str::is_empty))
        .map(|(_, seen)| *seen)
        .unwrap_or_else(|| {
            panic!(
                "the follower took the lease without a release (it expired?): {holders:?}\n{}",
                logs(&replicas)
            )
        });
    let after_sigterm = leading_at - signalled;
    let after_release = leading_at.saturating_duration_since(released_at);
    eprintln!(
        "handover {after_release:?} after the release, {after_sigterm:?} after SIGTERM to the leader"
    );
    assert!(
        after_release < HANDOVER_AFTER_RELEASE,
        "the follower led {after_release:?} after the lease was released:\n{}",
        logs(&replicas)
    );
    assert!(
        after_sigterm < HANDOVER_AFTER_SIGTERM,
        "the follower led {after_sigterm:?} after SIGTERM to the leader:\n{}",
        logs(&replicas)
    );
    let holder = lease_holder(&client, &ns).await;
    assert!(
        holds_lease(holder.as_deref(), pid(&replicas, follower)),
        "Lease holder {holder:?} after the handover"
    );
    tas_api(&client, &apps, "v1alpha1")
        .create(&PostParams::default(), &tas("v1alpha1", "after-handover"))
        .await
        .expect("created after the handover");
    let created = Instant::now();
    wait_reconciled(&client, &apps, "after-handover", || logs(&replicas)).await;
    eprintln!(
        "after-handover reconciled {:?} after its creation",
        created.elapsed()
    );

    // Rolling restart: the stopped replica comes back on its ports, then the other one is
    // replaced (another handover).
    set_phase("restarting the first replica");
    let (webhook, ops) = ports[leader];
    replicas[leader] = Some(ready(start(cp, &ns, webhook, ops, &flags)).await);
    set_phase("first replica restarted");
    tokio::time::sleep(Duration::from_secs(1)).await;
    set_phase("stopping the second replica");
    stop(replicas[follower].take().expect("the follower")).await;
    set_phase("restarting the second replica");
    let (webhook, ops) = ports[follower];
    replicas[follower] = Some(ready(start(cp, &ns, webhook, ops, &flags)).await);
    set_phase("after the restarts");
    tokio::time::sleep(Duration::from_secs(2)).await;

    done.store(true, Ordering::SeqCst);
    let (mut operations, mut failures) = (0, Vec::new());
    for worker in load {
        let (n, failed) = worker.await.expect("a client task");
        operations += n;
        failures.extend(failed);
    }
    eprintln!(
        "continuous client: {operations} operations, {} failed",
        failures.len()
    );
    assert!(operations > 30, "only {operations} operations");
    assert!(
        failures.is_empty(),
        "{} of {operations} operations failed:\n{}\n{}",
        failures.len(),
        failures.join("\n"),
        logs(&replicas)
    );

    // After the rolling restart: still exactly one leader, and it reconciles.
    let leader = wait::until_showing(
        "exactly one leader after the restarts",
        TIMEOUT,
        || logs(&replicas),
        one_leader,
    )
    .await;
    let holder = lease_holder(&client, &ns).await;
    assert!(
        holds_lease(holder.as_deref(), pid(&replicas, leader)),
        "{holder:?}"
    );
    tas_api(&client, &apps, "v1")
        .create(&PostParams::default(), &tas("v1", "after-restarts"))
        .await
        .expect("created after the restarts");
    wait_reconciled(&client, &apps, "after-restarts", || logs(&replicas)).await;

    for replica in replicas.into_iter().flatten() {
        stop(replica).await;
    }
    drop(proxy);
}

// --- 2. SIGTERM during a burst ----------------------------------------------------------------

/// One admission request sent with `Expect: 100-continue`. The server answers `100 Continue`
/// only once its handler reads the body, which marks the request as accepted: until then a
/// drain may close the connection unread (hyper does, for connections it has read nothing
/// from), and the client cannot tell "sent" from "read".
#[derive(Debug)]
enum Attempt {
    /// Not accepted: refused, or closed before the server read the request.
    Refused(String),
    /// Neither accepted nor closed (a hang, or an answer other than `100 Continue`).
    Stalled(String),
    /// Accepted at `accepted`; then the answer or error at `finished`.
    Accepted {
        accepted: Instant,
        answer: Result<(u16, Value), String>,
        finished: Instant,
    },
}

/// How many requests are held in flight across SIGTERM.
const HELD: usize = 10;

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

/// Sends the request's head and, once accepted, half its body; reports the acceptance on
/// `accepted`, waits for `hold`, then sends the rest and reads the answer.
async fn admission_request(
    tls: TlsConnector,
    port: u16,
    uid: String,
    accepted: Option<tokio::sync::mpsc::Sender<()>>,
    hold: impl Future<Output = ()>,
) -> (String, Attempt) {
    let body = serde_json::to_vec(&invalid_admission_review(&uid)).expect("json");
    let half = body.len() / 2;
    let head = post_head("/validate", body.len())
        .replacen("\r\n", "\r\nExpect: 100-continue\r\n", 1)
        .into_bytes();
    let mut stream = match tls_connect(&tls, port).await {
        Ok(stream) => stream,
        Err(e) => return (uid, Attempt::Refused(e)),
    };
    if let Err(e) = stream.write_all(&head).await {
        return (uid, Attempt::Refused(format!("write: {e}")));
    }
    match read_continue(&mut stream).await {
        Ok(true) => {}
        Ok(false) => return (uid, Attempt::Refused("closed unread".into())),
        Err(e) => return (uid, Attempt::Stalled(e)),
    }
    let accepted_at = Instant::now();
    let answer = async {
        stream
            .write_all(&body[..half])
            .await
            .map_err(|e| format!("writing half the body: {e}"))?;
        if let Some(accepted) = accepted {
            let _ = accepted.send(()).await;
        }
        hold.await;
        stream
            .write_all(&body[half..])
            .await
            .map_err(|e| format!("writing the rest of the body: {e}"))?;
        support::https::read_answer(&mut stream).await
    }
    .await;
    (
        uid,
        Attempt::Accepted {
            accepted: accepted_at,
            answer,
            finished: Instant::now(),
        },
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_during_a_burst_of_admission_requests_answers_every_accepted_request() {
    let claim = control_planes::exclusive(Concern::Operations);
    let cp = claim.control_plane();
    let client = cp.client().await;
    let ns = cp.namespace(&client, "burst").await;
    // Readiness needs the caBundle published into the registrations, so this test creates them
    // rather than relying on an earlier test having done it.
    let mut flags = vec!["--drain-timeout", "10s", "--create-webhook-configurations"];
    flags.extend(ELECTION_FLAGS);
    let operator = ready(start(cp, &ns, free_port(), free_port(), &flags)).await;
    let tls = connector(&client, &ns).await;
    let port = operator.webhook_port;

    // Requests certainly in flight at the signal, however the machine schedules: accepted,
    // with the rest of their bodies held back until the server drains. They are held for far
    // less than the operator's 5 s request deadline.
    let release = CancellationToken::new();
    let (accepted_tx, mut accepted) = tokio::sync::mpsc::channel(HELD);
    let held: Vec<_> = (0..HELD)
        .map(|i| {
            let release = release.clone();
            tokio::spawn(admission_request(
                tls.clone(),
                port,
                format!("held-{i}"),
                Some(accepted_tx.clone()),
                async move { release.cancelled().await },
            ))
        })
        .collect();
    drop(accepted_tx);
    for _ in 0..HELD {
        if !matches!(
            tokio::time::timeout(TIMEOUT, accepted.recv()).await,
            Ok(Some(()))
        ) {
            release.cancel();
            let mut attempts = Vec::new();
            for task in held {
                attempts.push(task.await.expect("request task"));
            }
            panic!(
                "the held requests were not all accepted: {attempts:?}\n{}",
                operator.logs()
            );
        }
    }

    // Around them, 200 requests started 4 ms apart over 0.8 s, each sending its body in two
    // halves 150 ms apart: the signal lands among connections at every stage.
    const REQUESTS: usize = 200;
    let started = Instant::now();
    let burst: Vec<_> = (0..REQUESTS)
        .map(|i| {
            let tls = tls.clone();
            tokio::spawn(async move {
                tokio::time::sleep_until((started + Duration::from_millis(4 * i as u64)).into())
                    .await;
                admission_request(
                    tls,
                    port,
                    format!("burst-{i}"),
                    None,
                    tokio::time::sleep(Duration::from_millis(150)),
                )
                .await
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(400)).await;
    let signalled = Instant::now();
    operator.signal_term();

    // Draining: new connections are refused, and only then do the held requests go on.
    let closed = wait::until_showing(
        "the webhook listener to refuse connections after SIGTERM",
        Duration::from_secs(10),
        || operator.logs(),
        || async {
            TcpStream::connect(("127.0.0.1", port))
                .await
                .is_err()
                .then(|| signalled.elapsed())
        },
    )
    .await;
    release.cancel();

    let mut attempts = Vec::new();
    for task in held.into_iter().chain(burst) {
        attempts.push(task.await.expect("request task"));
    }
    stop(operator).await;
    eprintln!(
        "the operator refused connections {closed:?} and exited {:?} after SIGTERM",
        signalled.elapsed()
    );

    let (mut before, mut in_flight, mut after, mut refused) = (0, 0, 0, 0);
    let mut broken = Vec::new();
    let mut refusal = None;
    for (uid, attempt) in &attempts {
        match attempt {
            Attempt::Refused(why) => {
                refused += 1;
                refusal.get_or_insert_with(|| why.clone());
            }
            Attempt::Stalled(e) => broken.push(format!("{uid}: {e}")),
            Attempt::Accepted {
                accepted,
                answer,
                finished,
            } => {
                if *accepted < signalled {
                    before += 1;
                    if *finished > signalled {
                        in_flight += 1;
                    }
                } else {
                    after += 1;
                }
                match answer {
                    Ok(answer) => assert_denied(answer, uid),
                    Err(e) => broken.push(format!("{uid}: {e}")),
                }
            }
        }
    }
    eprintln!(
        "burst: {before} accepted before SIGTERM ({in_flight} still in flight at the signal), {after} after, {refused} not accepted (first: {refusal:?})"
    );
    assert!(
        broken.is_empty(),
        "{} of {} accepted requests got no complete answer:\n{}",
        broken.len(),
        before + after,
        broken.join("\n")
    );
    assert!(
        in_flight >= HELD,
        "only {in_flight} requests were in flight at the signal"
    );
}

// --- 3. /metrics ---------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_parse_as_prometheus_text_and_counters_move() {
    let claim = control_planes::exclusive(Concern::Operations);
    let cp = claim.control_plane();
    let client = cp.client().await;
    let ns = cp.namespace(&client, "metrics").await;
    let apps = cp.namespace(&client, "metrics-apps").await;
    let mut flags = vec!["--create-webhook-configurations"];
    flags.extend(ELECTION_FLAGS);
    let operator = ready(start(cp, &ns, free_port(), free_port(), &flags)).await;
    let ops = operator.ops_port;
    wait::until_showing(
        "leader=1",
        TIMEOUT,
        || operator.logs(),
        || async { (leader_gauge(ops).await? == 1.0).then_some(()) },
    )
    .await;

    prometheus_parses_the_scrape(ops).await;
    let before = metrics(ops).await.expect("/metrics");
    for name in [
        "trustyai_operator_build_info",
        "trustyai_operator_serving_certificate_expiry_timestamp_seconds",
        "trustyai_operator_leader",
        "trustyai_operator_trustyaiservices",
    ] {
        assert!(
            before.iter().any(|(n, _, _)| n == name),
            "{name} missing from /metrics"
        );
    }
    let expiry = sum(
        &before,
        "trustyai_operator_serving_certificate_expiry_timestamp_seconds",
        &[],
    );
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs_f64();
    assert!(
        expiry > now,
        "certificate expiry {expiry} is not in the future"
    );

    let requests = "trustyai_operator_webhook_requests_total";
    let validate_denied = [("endpoint", "validate"), ("outcome", "denied")];
    let convert = [("endpoint", "convert")];
    let (denied0, convert0) = (
        sum(&before, requests, &validate_denied),
        sum(&before, requests, &convert),
    );

    let tls = connector(&client, &ns).await;
    for i in 0..3 {
        let uid = format!("m-validate-{i}");
        let answer = post(
            &tls,
            operator.webhook_port,
            "/validate",
            &invalid_admission_review(&uid),
        )
        .await
        .expect("/validate");
        assert_denied(&answer, &uid);
    }
    for i in 0..2 {
        let uid = format!("m-convert-{i}");
        let answer = post(
            &tls,
            operator.webhook_port,
            "/convert",
            &conversion_review(&uid),
        )
        .await
        .expect("/convert");
        assert_converted(&answer, &uid);
    }
    let after = metrics(ops).await.expect("/metrics");
    let (denied1, convert1) = (
        sum(&after, requests, &validate_denied),
        sum(&after, requests, &convert),
    );
    assert!(
        denied1 >= denied0 + 3.0,
        "validate/denied {denied0} -> {denied1}"
    );
    assert!(
        convert1 >= convert0 + 2.0,
        "convert {convert0} -> {convert1}"
    );
    assert!(
        sum(
            &after,
            "trustyai_operator_admission_denials_total",
            &[("rule", "image")]
        ) >= 3.0,
        "admission_denials_total{{rule=image}}"
    );
    assert!(
        sum(
            &after,
            "trustyai_operator_webhook_request_duration_seconds_count",
            &[("endpoint", "validate")]
        ) >= 3.0,
        "the validate latency histogram counts the requests"
    );

    // Reconciles on the leader.
    let reconciles = "trustyai_operator_reconciles_total";
    let success0 = sum(&after, reconciles, &[("result", "success")]);
    tas_api(&client, &apps, "v1")
        .create(&PostParams::default(), &tas("v1", "counted"))
        .await
        .expect("created");
    wait_reconciled(&client, &apps, "counted", || operator.logs()).await;
    let success1 = wait::until_showing(
        "reconciles_total{result=success} to grow",
        TIMEOUT,
        || operator.logs(),
        || async {
            let s = sum(&metrics(ops).await?, reconciles, &[("result", "success")]);
            (s > success0).then_some(s)
        },
    )
    .await;
    let last = metrics(ops).await.expect("/metrics");
    assert!(
        sum(
            &last,
            "trustyai_operator_reconcile_duration_seconds_count",
            &[]
        ) >= success1,
        "every reconcile is timed"
    );
    // The gauge is set after a reconcile's result is emitted, so it may trail the counters.
    wait::until_showing(
        "trustyaiservices >= 1",
        TIMEOUT,
        || operator.logs(),
        || async {
            let managed = sum(
                &metrics(ops).await?,
                "trustyai_operator_trustyaiservices",
                &[],
            );
            (managed >= 1.0).then_some(())
        },
    )
    .await;
    eprintln!("reconciles_total{{result=success}}: {success0} -> {success1}");

    // The children were created by an apply each; a reconcile with nothing to change (an
    // annotation on the TrustyAIService triggers one) skips their applies without a request.
    let applies = "trustyai_operator_child_applies_total";
    assert!(
        sum(
            &last,
            applies,
            &[("kind", "Deployment"), ("outcome", "created")]
        ) >= 1.0,
        "the Deployment's creation is counted"
    );
    let skipped0 = sum(
        &last,
        applies,
        &[("kind", "Service"), ("outcome", "skipped")],
    );
    tas_api(&client, &apps, "v1")
        .patch(
            "counted",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(json!({"metadata": {"annotations": {"poke": "1"}}})),
        )
        .await
        .expect("annotating");
    let skipped1 = wait::until_showing(
        "child_applies_total{kind=Service,outcome=skipped} to grow by both Services",
        TIMEOUT,
        || operator.logs(),
        || async {
            let samples = metrics(ops).await?;
            let s = sum(
                &samples,
                applies,
                &[("kind", "Service"), ("outcome", "skipped")],
            );
            (s >= skipped0 + 2.0).then_some(s)
        },
    )
    .await;
    eprintln!("child_applies_total{{kind=Service,outcome=skipped}}: {skipped0} -> {skipped1}");
    stop(operator).await;
}

#[test]
fn the_prometheus_check_rejects_broken_text() {
    let good = "# HELP x_total Things.\n# TYPE x counter\nx_total{a=\"1\",b=\"q\\\"\"} 2\n# EOF";
    assert_eq!(parse_prometheus(good).expect("parses").len(), 1);
    for bad in [
        "# TYPE x counter\nx_total{a=\"1\"} two",
        "x 1",
        "# TYPE x counter\nx_total{a=1} 1",
        "# TYPE x bogus\n",
        "# TYPE x counter\nx_total 1 2 3",
        "# HELP x\n",
    ] {
        assert!(parse_prometheus(bad).is_err(), "accepted {bad:?}");
    }
}

// --- 4. /readyz ------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_is_false_before_the_certificate_is_loaded_and_while_draining() {
    let claim = control_planes::exclusive(Concern::Operations);
    let cp = claim.control_plane();
    let client = cp.client().await;
    let ns = cp.namespace(&client, "readyz").await;

    // The operator reaches the API server through a gate that holds every connection: in
    // self-signed mode the certificate comes from a Secret, so none can load until it opens.
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
    // The registrations must exist for the caBundle (the other readiness check) to publish.
    let mut flags = vec!["--drain-timeout", "10s", "--create-webhook-configurations"];
    flags.extend(ELECTION_FLAGS);
    let mut operator = Operator::launch(cp, &ns, &flags)
        .kubeconfig(&kubeconfig)
        .start();
    let ops = operator.ops_port;

    let first = wait::until_showing(
        "the ops port",
        Duration::from_secs(30),
        || operator.logs(),
        || readyz(ops),
    )
    .await;
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

    gate.open();
    let operator = ready(operator).await;
    let (code, body) = readyz(ops).await.expect("/readyz");
    assert_eq!((code, body.trim()), (200, "ok"));

    // Draining: a request in flight (head and half the body sent) holds the HTTPS server open;
    // /readyz says "draining" meanwhile, and the request still gets its answer.
    let tls = connector(&client, &ns).await;
    let mut stream = tls_connect(&tls, operator.webhook_port)
        .await
        .expect("connect");
    let body = serde_json::to_vec(&invalid_admission_review("held")).expect("json");
    let half = body.len() / 2;
    let mut first = post_head("/validate", body.len()).into_bytes();
    first.extend_from_slice(&body[..half]);
    stream.write_all(&first).await.expect("head");
    tokio::time::sleep(Duration::from_millis(300)).await;

    let signalled = Instant::now();
    operator.signal_term();
    let (code, body_text) = loop {
        let answer = readyz(ops).await.unwrap_or_else(|| {
            panic!(
                "the ops server went away while draining:\n{}",
                operator.logs()
            )
        });
        if answer.0 != 200 || signalled.elapsed() > Duration::from_secs(30) {
            break answer;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert_eq!(code, 503, "/readyz after SIGTERM: {body_text}");
    assert!(body_text.contains("draining"), "{body_text}");
    // The listener closes once the reconcile loop has stopped (its writes go through the
    // webhooks); new connections are refused from then on.
    let port = operator.webhook_port;
    wait::until_showing(
        "the webhook listener to close",
        Duration::from_secs(30),
        || operator.logs(),
        async || {
            TcpStream::connect(("127.0.0.1", port))
                .await
                .is_err()
                .then_some(())
        },
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

    stream
        .write_all(&body[half..])
        .await
        .expect("the rest of the body");
    let answer = support::https::read_answer(&mut stream)
        .await
        .expect("the held request's answer");
    assert_denied(&answer, "held");
    stop(operator).await;
    eprintln!(
        "drain with a held request: exit {:?} after SIGTERM",
        signalled.elapsed()
    );
    drop(gate);
    let _ = std::fs::remove_file(&kubeconfig);
}

/// An API server that does not serve streaming lists (the `WatchList` feature gate off, as in
/// Kubernetes 1.33): the operator's question at start gets a refusal, its watches list first,
/// and it reconciles as usual. (The shared control plane serves them, so every other test runs
/// the streaming path.)
#[tokio::test]
async fn without_streaming_lists_the_watches_list_first_and_reconcile() {
    let cp = tokio::task::spawn_blocking(|| {
        ControlPlane::start_with_apiserver_flags(&["--feature-gates=WatchList=false"])
    })
    .await
    .expect("start thread")
    .unwrap_or_else(|e| panic!("a control plane without streaming lists: {e}"));
    let client = cp.client().await;
    let ns = cp.namespace(&client, "list-first").await;
    let operator = ready(Operator::start(
        &cp,
        &ns,
        &["--create-webhook-configurations"],
    ))
    .await;
    let log = || std::fs::read_to_string(&operator.log).unwrap_or_default();
    assert!(
        log().contains("watches start with a list request before the watch"),
        "the operator did not decide on lists:\n{}",
        operator.logs()
    );
    let app = cp.namespace(&client, "app").await;
    tas_api(&client, &app, "v1")
        .create(&PostParams::default(), &tas("v1", "tas"))
        .await
        .expect("creating a TrustyAIService");
    wait_reconciled(&client, &app, "tas", || operator.logs()).await;
    stop(operator).await;
}
