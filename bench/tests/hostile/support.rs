//! What the tests share: `bench-server` started and measured, the hostile corpus, and the
//! checks of an answer and of the valid requests that must still work.

use std::io::Read;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result, bail};
use bytes::Bytes;
use serde_json::{Value, json};
use trustyai_bench::client::{Connection, Protocol, connect, tls_config};
use trustyai_bench::fixtures;
use trustyai_bench::http_load::proc_status_kib;
use trustyai_bench::server_process::ServerProcess;

pub(crate) const MIB: usize = 1024 * 1024;
/// The server's body limit (the API server's own request limit).
pub(crate) const BODY_LIMIT: usize = 3 * MIB;
/// What one request may cost at most, per byte of body (`trustyai_webhooks::COST_PER_BODY_BYTE`).
pub(crate) const COST_PER_BODY_BYTE: usize = trustyai_webhooks::COST_PER_BODY_BYTE;
/// What one conversion may cost at most, per byte of body.
pub(crate) const CONVERSION_COST_PER_BODY_BYTE: usize =
    trustyai_webhooks::CONVERSION_COST_PER_BODY_BYTE;
/// The chart's default memory budget for requests in flight.
pub(crate) const DEFAULT_BUDGET: usize =
    trustyai_webhooks::HttpsOptions::DEFAULT_MEMORY_BUDGET_BYTES;
/// Memory the allocator may keep beyond what requests use (arenas per thread, fragmentation).
pub(crate) const ALLOCATOR_SLACK: usize = 16 * MIB;

pub(crate) struct Server {
    pub(crate) process: ServerProcess,
    pub(crate) ca: Vec<u8>,
    stderr: Arc<Mutex<String>>,
    dir: std::path::PathBuf,
}

impl Server {
    pub(crate) fn start(args: &[&str]) -> Result<Self> {
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("trustyai-hostile-{}-{n}", std::process::id()));
        let mut command = Command::new(env!("CARGO_BIN_EXE_bench-server"));
        command
            .arg("--dir")
            .arg(&dir)
            .args(args)
            .stderr(Stdio::piped());
        let mut process = ServerProcess::start(command, "bench-server")?;
        let stderr = Arc::new(Mutex::new(String::new()));
        if let Some(mut pipe) = process.take_stderr() {
            let sink = Arc::clone(&stderr);
            std::thread::spawn(move || {
                let mut buf = [0u8; 8192];
                while let Ok(n) = pipe.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    if let Ok(mut text) = sink.lock() {
                        text.push_str(&String::from_utf8_lossy(&buf[..n]));
                    }
                }
            });
        }
        let ca = std::fs::read(dir.join("ca.pem"))?;
        Ok(Self {
            process,
            ca,
            stderr,
            dir,
        })
    }

    pub(crate) async fn connect(&self, protocol: Protocol) -> Result<Connection> {
        connect(
            self.process.port(),
            tls_config(Some(&self.ca), protocol)?,
            protocol,
        )
        .await
    }

    pub(crate) fn kib(&self, field: &str) -> Result<usize> {
        proc_status_kib(self.process.pid(), field)
            .map(|k| k as usize)
            .with_context(|| format!("{field} of the server"))
    }

    /// Resets the peak (`VmHWM`) to the current resident set (Linux: `5` to `clear_refs`), so
    /// the next peak is one request's.
    pub(crate) fn reset_peak(&self) -> Result<usize> {
        std::fs::write(format!("/proc/{}/clear_refs", self.process.pid()), "5")
            .context("resetting the server's peak RSS")?;
        self.kib("VmRSS")
    }

    pub(crate) fn log_lines(&self) -> usize {
        self.stderr.lock().map(|t| t.lines().count()).unwrap_or(0)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // Killed, not drained: a hostile test may leave connections the drain would wait for.
        self.process.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

pub(crate) fn zeros(n: usize) -> String {
    let mut s = String::with_capacity(n * 2);
    for i in 0..n {
        if i > 0 {
            s.push(',');
        }
        s.push('0');
    }
    s
}

/// As many zeros as fit a body of the limit with `overhead` bytes around them.
pub(crate) fn fill(overhead: usize) -> String {
    zeros((BODY_LIMIT - overhead - 1024) / 2)
}

pub(crate) fn conversion(objects: &str, desired: &str) -> String {
    format!(
        r#"{{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":{{"uid":"u-1","desiredAPIVersion":"{desired}","objects":[{objects}]}}}}"#
    )
}

pub(crate) fn v1_object(spec: &str, status: &str) -> String {
    format!(
        r#"{{"apiVersion":"trustyai.opendatahub.io/v1","kind":"TrustyAIService","metadata":{{"name":"tas","namespace":"ns"}},"spec":{spec},"status":{status}}}"#
    )
}

pub(crate) fn admission(object: &str) -> String {
    format!(
        r#"{{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{{"uid":"u-2","name":"tas","namespace":"ns","operation":"CREATE","kind":{{"group":"trustyai.opendatahub.io","version":"v1","kind":"TrustyAIService"}},"resource":{{"group":"trustyai.opendatahub.io","version":"v1","resource":"trustyaiservices"}},"userInfo":{{"username":"mallory"}},"object":{object}}}}}"#
    )
}

pub(crate) const V1ALPHA1: &str = "trustyai.opendatahub.io/v1alpha1";
pub(crate) const SPEC: &str = r#"{"storage":{"format":"PVC","folder":"/inputs","size":"1Gi"},"data":{"filename":"data.csv","format":"CSV"},"metrics":{"schedule":"5s"}}"#;

/// What a hostile request must get back.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Expect {
    /// 200 with a review whose conversion succeeded.
    Converted,
    /// 200 with a review that refuses (conversion failure or admission denial).
    Refused,
}

/// The hostile corpus: every shape that made the server allocate far more than its body.
pub(crate) fn corpus() -> Vec<(&'static str, &'static str, String, Expect)> {
    let wrap = 400;
    let big = fill(wrap);
    let deep = format!(
        "{}{}",
        "[".repeat(BODY_LIMIT / 2 - wrap),
        "]".repeat(BODY_LIMIT / 2 - wrap)
    );
    let many_keys = (0..(BODY_LIMIT - 4 * wrap) / 13)
        .map(|i| format!(r#""k{i:07}":0"#))
        .collect::<Vec<_>>()
        .join(",");
    let one_small = r#"{"apiVersion":"trustyai.opendatahub.io/v1alpha1","kind":"TrustyAIService","metadata":{"name":"x"},"spec":{}}"#;
    let many_objects = vec![one_small; (BODY_LIMIT - wrap) / (one_small.len() + 1)].join(",");
    let long_string = "x".repeat(BODY_LIMIT - wrap * 2);
    vec![
        (
            "array in status, passed through",
            "/convert",
            conversion(
                &v1_object(SPEC, &format!(r#"{{"junk":[{big}]}}"#)),
                V1ALPHA1,
            ),
            Expect::Converted,
        ),
        (
            "array in spec, passed through",
            "/convert",
            conversion(
                &v1_object(&format!(r#"{{"junk":[{big}]}}"#), "{}"),
                V1ALPHA1,
            ),
            Expect::Converted,
        ),
        (
            "array where conversion reads (spec.image)",
            "/convert",
            conversion(
                &v1_object(&format!(r#"{{"image":[{big}]}}"#), "{}"),
                V1ALPHA1,
            ),
            Expect::Refused,
        ),
        (
            "array of non-conditions in status.conditions",
            "/convert",
            conversion(
                &v1_object(SPEC, &format!(r#"{{"conditions":[{big}]}}"#)),
                V1ALPHA1,
            ),
            Expect::Refused,
        ),
        (
            "deep nesting, passed through",
            "/convert",
            conversion(&v1_object(SPEC, &format!(r#"{{"deep":{deep}}}"#)), V1ALPHA1),
            Expect::Converted,
        ),
        (
            "many keys where conversion reads (status)",
            "/convert",
            conversion(&v1_object(SPEC, &format!("{{{many_keys}}}")), V1ALPHA1),
            Expect::Refused,
        ),
        (
            "many small objects",
            "/convert",
            conversion(&many_objects, "trustyai.opendatahub.io/v1"),
            Expect::Converted,
        ),
        (
            "array as spec.storage.size",
            "/validate",
            admission(&v1_object(
                &format!(r#"{{"storage":{{"size":[{big}]}}}}"#),
                "{}",
            )),
            Expect::Refused,
        ),
        (
            "array as spec.storage.size",
            "/mutate",
            admission(&v1_object(
                &format!(r#"{{"storage":{{"size":[{big}]}}}}"#),
                "{}",
            )),
            Expect::Refused,
        ),
        (
            "long string as spec.storage.size",
            "/validate",
            admission(&v1_object(
                &format!(
                    r#"{{"storage":{{"format":"PVC","folder":"/inputs","size":"{long_string}"}},"metrics":{{"schedule":"5s"}}}}"#
                ),
                "{}",
            )),
            Expect::Refused,
        ),
        (
            "many labels",
            "/validate",
            admission(&format!(
                r#"{{"apiVersion":"trustyai.opendatahub.io/v1","kind":"TrustyAIService","metadata":{{"name":"tas","labels":{{{many_keys}}}}},"spec":{SPEC}}}"#
            )),
            Expect::Refused,
        ),
        (
            "deep nesting in spec",
            "/mutate",
            admission(&v1_object(&format!(r#"{{"deep":{deep}}}"#), "{}")),
            Expect::Refused,
        ),
    ]
}

/// Checks one answer against what the corpus expects; returns the answer's size.
pub(crate) fn check(
    name: &str,
    path: &str,
    expect: Expect,
    status: u16,
    body: &[u8],
) -> Result<usize> {
    if status != 200 {
        bail!(
            "{path} {name}: HTTP {status}: {}",
            String::from_utf8_lossy(&body[..body.len().min(300)])
        );
    }
    // The envelope only: passed-through members (1.5 million levels of nesting) are not parsed.
    #[derive(serde::Deserialize)]
    struct Envelope {
        response: Response,
    }
    #[derive(serde::Deserialize)]
    struct Response {
        uid: String,
        #[serde(default)]
        result: Value,
        #[serde(default)]
        allowed: Value,
        #[serde(default, rename = "convertedObjects")]
        _converted: serde::de::IgnoredAny,
    }
    let envelope: Envelope = serde_json::from_slice(body)
        .with_context(|| format!("{path} {name}: answer is not a review"))?;
    let review = json!({"response": {"uid": envelope.response.uid, "result": envelope.response.result, "allowed": envelope.response.allowed}});
    let ok = if path == "/convert" {
        review["response"]["result"]["status"] == "Success"
    } else {
        review["response"]["allowed"] == true
    };
    match expect {
        Expect::Converted if !ok => bail!(
            "{path} {name}: not converted: {}",
            &review["response"]["result"]
        ),
        Expect::Refused if ok => bail!("{path} {name}: accepted"),
        _ => {}
    }
    let uid = review["response"]["uid"].as_str().unwrap_or_default();
    if uid.is_empty() {
        bail!("{path} {name}: no uid in the answer");
    }
    Ok(body.len())
}

pub(crate) async fn valid_requests_still_work(connection: &Connection) -> Result<()> {
    let typical = fixtures::typical();
    let body = Bytes::from(serde_json::to_vec(&fixtures::admission_review(&typical))?);
    let (status, answer) = connection.post("/validate", body).await?;
    let answer: Value = serde_json::from_slice(&answer)?;
    if status != 200 || answer["response"]["allowed"] != true {
        bail!("a valid TrustyAIService was not admitted: {status} {answer}");
    }
    let body = Bytes::from(serde_json::to_vec(&fixtures::conversion_review(
        10,
        fixtures::V1,
    ))?);
    let (status, answer) = connection.post("/convert", body).await?;
    let answer: Value = serde_json::from_slice(&answer)?;
    if status != 200 || answer["response"]["result"]["status"] != "Success" {
        bail!("a valid conversion failed: {status} {answer}");
    }
    Ok(())
}
