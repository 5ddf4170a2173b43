//! The HTTPS endpoints under load: this process drives `bench-server` (a second process) on
//! loopback over TLS with keep-alive, HTTP/2 (one connection, `c` concurrent streams, as the API
//! server calls webhooks) and HTTP/1.1 (`c` connections), for a fixed time per cell.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use bytes::Bytes;
use serde::Serialize;
use serde_json::Value;
use trustyai_crds::defaults::{Operation, defaulted};

use crate::client::{Connection, Protocol, connect, tls_config};
use crate::fixtures;
use crate::server_process::ServerProcess;
use crate::stats::{Percentiles, percentiles};

/// Requests per cell at most, whatever the time.
const MAX_REQUESTS_PER_CELL: usize = 500_000;

/// One measurement: an endpoint at one protocol and concurrency.
#[derive(Debug, Clone, Serialize)]
pub struct Cell {
    pub endpoint: String,
    pub protocol: Protocol,
    pub concurrency: usize,
    pub request_bytes: usize,
    pub requests: usize,
    pub errors: usize,
    pub seconds: f64,
    pub requests_per_second: f64,
    pub latency: Percentiles,
    /// Requests/second of the baseline at the same protocol and concurrency, divided by this
    /// cell's: how many times more a request costs than the bare stack.
    pub cost_vs_baseline: Option<f64>,
    /// For `convert/…`: requests/second of the JSON round trip of the same body (`json/…`,
    /// parsed into JSON values and written back unchanged: the cost no conversion can avoid),
    /// divided by this cell's.
    #[serde(default)]
    pub cost_vs_json: Option<f64>,
    /// The server process's CPU time (user + system) during the cell per object its requests
    /// carried (1 per admission request), µs; `None` where `/proc` could not be read.
    #[serde(default)]
    pub server_cpu_us_per_object: Option<f64>,
    /// The server process's peak resident memory during the cell (VmHWM, reset before it), KiB.
    #[serde(default)]
    pub server_peak_rss_kib: Option<u64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct HttpResults {
    pub seconds_per_cell: f64,
    pub cells: Vec<Cell>,
    /// The server process's peak resident memory after all cells (VmHWM), KiB.
    pub server_peak_rss_kib: Option<u64>,
}

/// The endpoints measured, with their request bodies.
fn endpoints() -> Result<Vec<(&'static str, &'static str, Bytes, usize)>> {
    let json = |v: &Value| -> Result<Bytes> { Ok(Bytes::from(serde_json::to_vec(v)?)) };
    let typical = fixtures::typical();
    let mutate = json(&fixtures::admission_review(&typical))?;
    let validate = json(&fixtures::admission_review(&defaulted(
        &typical,
        Operation::Create,
    )))?;
    let mut all = vec![
        ("baseline", "/baseline", validate.clone(), 1),
        ("validate", "/validate", validate, 1),
        ("mutate", "/mutate", mutate, 1),
    ];
    // Each conversion right after its JSON round trip of the same body, both directions.
    for (n, json_name, to_v1, to_v1alpha1, json_name_down) in [
        (
            1,
            "json/1/to-v1",
            "convert/1/to-v1",
            "convert/1/to-v1alpha1",
            "json/1/to-v1alpha1",
        ),
        (
            100,
            "json/100/to-v1",
            "convert/100/to-v1",
            "convert/100/to-v1alpha1",
            "json/100/to-v1alpha1",
        ),
        (
            1000,
            "json/1000/to-v1",
            "convert/1000/to-v1",
            "convert/1000/to-v1alpha1",
            "json/1000/to-v1alpha1",
        ),
    ] {
        let up = json(&fixtures::conversion_review(n, fixtures::V1))?;
        let down = json(&fixtures::conversion_review(n, fixtures::V1ALPHA1))?;
        all.push((json_name, "/baseline/json", up.clone(), n));
        all.push((to_v1, "/convert", up, n));
        all.push((json_name_down, "/baseline/json", down.clone(), n));
        all.push((to_v1alpha1, "/convert", down, n));
    }
    Ok(all)
}

/// Reads a process's `/proc/<pid>/status` field (`VmHWM`, `VmRSS`) in KiB.
pub fn proc_status_kib(pid: u32, field: &str) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status_field_kib(&text, field)
}

/// The value of `field` in the text of a `/proc/<pid>/status` file (`VmHWM:\t  1234 kB`), in
/// KiB; `None` when the field is absent or not a number.
pub fn status_field_kib(status: &str, field: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
}

/// Starts `server_bin`, runs every cell, stops the server.
pub async fn run(server_bin: &Path, seconds: f64, concurrencies: &[usize]) -> Result<HttpResults> {
    let dir = std::env::temp_dir().join(format!("trustyai-bench-server-{}", std::process::id()));
    let mut command = Command::new(server_bin);
    command.arg("--dir").arg(&dir).stderr(Stdio::inherit());
    let server = ServerProcess::start(command, "bench-server")?;
    let port = server.port();
    let ca = std::fs::read(dir.join("ca.pem"))?;
    let endpoints = endpoints()?;
    let mut cells = Vec::new();
    for protocol in [Protocol::H2, Protocol::Http1] {
        let config = tls_config(Some(&ca), protocol)?;
        for &concurrency in concurrencies {
            let connections = match protocol {
                Protocol::H2 => vec![connect(port, config.clone(), protocol).await?],
                Protocol::Http1 => {
                    let mut all = Vec::new();
                    for _ in 0..concurrency {
                        all.push(connect(port, config.clone(), protocol).await?);
                    }
                    all
                }
            };
            let mut baseline_rps = None;
            let mut json_rps = None;
            for (name, path, body, objects) in &endpoints {
                // Best effort: without /proc the cell has no CPU or memory figures.
                let _ = std::fs::write(format!("/proc/{}/clear_refs", server.pid()), "5");
                let cpu_before = cpu_seconds(server.pid());
                let mut cell =
                    measure(&connections, concurrency, path, body.clone(), seconds).await?;
                let cpu = cpu_seconds(server.pid())
                    .zip(cpu_before)
                    .map(|(a, b)| a - b);
                let objects = (cell.requests * objects) as f64;
                cell.server_cpu_us_per_object =
                    cpu.filter(|_| objects > 0.0).map(|cpu| cpu * 1e6 / objects);
                cell.server_peak_rss_kib = proc_status_kib(server.pid(), "VmHWM");
                cell.endpoint = (*name).to_owned();
                cell.protocol = protocol;
                if *name == "baseline" {
                    baseline_rps = Some(cell.requests_per_second);
                }
                cell.cost_vs_baseline = baseline_rps
                    .filter(|_| cell.requests_per_second > 0.0)
                    .map(|b| b / cell.requests_per_second);
                if name.starts_with("json/") {
                    json_rps = Some(cell.requests_per_second);
                } else if name.starts_with("convert/") {
                    cell.cost_vs_json = json_rps
                        .filter(|_| cell.requests_per_second > 0.0)
                        .map(|j| j / cell.requests_per_second);
                }
                eprintln!(
                    "  {:<24} {:<8} c={:<3} {:>9.0} req/s  p50 {:>8.0} µs  p99 {:>8.0} µs  p99.9 {:>8.0} µs  errors {}",
                    cell.endpoint,
                    protocol.name(),
                    concurrency,
                    cell.requests_per_second,
                    cell.latency.p50_us,
                    cell.latency.p99_us,
                    cell.latency.p999_us,
                    cell.errors
                );
                cells.push(cell);
            }
        }
    }
    let server_peak_rss_kib = proc_status_kib(server.pid(), "VmHWM");
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(HttpResults {
        seconds_per_cell: seconds,
        cells,
        server_peak_rss_kib,
    })
}

async fn measure(
    connections: &[Connection],
    concurrency: usize,
    path: &'static str,
    body: Bytes,
    seconds: f64,
) -> Result<Cell> {
    let request_bytes = body.len();
    // Warm-up, not recorded.
    for connection in connections {
        let (status, answer) = connection.post(path, body.clone()).await?;
        if status != 200 {
            bail!(
                "{path}: HTTP {status}: {}",
                String::from_utf8_lossy(&answer)
            );
        }
    }
    let run = closed_loop(
        connections,
        concurrency,
        path,
        body,
        seconds,
        MAX_REQUESTS_PER_CELL,
        |status, _| status == 200,
    )
    .await?;
    let ClosedLoop {
        mut latencies,
        errors,
        seconds: elapsed,
        ..
    } = run;
    let requests = latencies.len();
    Ok(Cell {
        endpoint: String::new(),
        protocol: Protocol::H2,
        concurrency,
        request_bytes,
        requests,
        errors,
        seconds: elapsed,
        requests_per_second: requests as f64 / elapsed,
        latency: percentiles(&mut latencies),
        cost_vs_baseline: None,
        cost_vs_json: None,
        server_cpu_us_per_object: None,
        server_peak_rss_kib: None,
    })
}

/// What a closed-loop run measured.
pub struct ClosedLoop {
    /// One per accepted answer.
    pub latencies: Vec<Duration>,
    /// Answers not accepted (429s included) and failed requests.
    pub errors: usize,
    /// Of `errors`, the answers with HTTP 429.
    pub too_many_requests: usize,
    pub seconds: f64,
}

/// `concurrency` senders spread over `connections`, each sending its next `POST path` when its
/// last is answered, for `seconds` or until `max_requests` were sent in all; `accept` judges
/// each answer by its status and body.
pub async fn closed_loop(
    connections: &[Connection],
    concurrency: usize,
    path: &'static str,
    body: Bytes,
    seconds: f64,
    max_requests: usize,
    accept: fn(u16, &[u8]) -> bool,
) -> Result<ClosedLoop> {
    let per_task = max_requests / concurrency.max(1);
    let duration = Duration::from_secs_f64(seconds);
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..concurrency {
        let connection = connections[i % connections.len()].clone();
        let body = body.clone();
        tasks.spawn(async move {
            let mut latencies = Vec::with_capacity(4096);
            let (mut errors, mut too_many) = (0usize, 0usize);
            while started.elapsed() < duration && latencies.len() < per_task {
                let sent = Instant::now();
                match connection.post(path, body.clone()).await {
                    Ok((status, answer)) if accept(status, &answer) => {
                        latencies.push(sent.elapsed());
                    }
                    Ok((429, _)) => {
                        too_many += 1;
                        errors += 1;
                    }
                    _ => errors += 1,
                }
            }
            (latencies, errors, too_many)
        });
    }
    let mut run = ClosedLoop {
        latencies: Vec::new(),
        errors: 0,
        too_many_requests: 0,
        seconds: 0.0,
    };
    while let Some(joined) = tasks.join_next().await {
        let (mut latencies, errors, too_many) = joined?;
        run.latencies.append(&mut latencies);
        run.errors += errors;
        run.too_many_requests += too_many;
    }
    run.seconds = started.elapsed().as_secs_f64();
    Ok(run)
}

/// Clock ticks per second of the CPU times in `/proc/<pid>/stat` (`USER_HZ`, 100 wherever Linux
/// exports them).
const USER_HZ: f64 = 100.0;

/// The CPU time (user + system) process `pid` has used, seconds.
pub fn cpu_seconds(pid: u32) -> Option<f64> {
    stat_cpu_seconds(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// utime + stime of a `/proc/<pid>/stat` line, seconds. The command name (field 2) may hold
/// spaces and parentheses, so the fields are counted from its closing parenthesis.
fn stat_cpu_seconds(stat: &str) -> Option<f64> {
    let (_, rest) = stat.rsplit_once(')')?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // `fields[0]` is field 3 (state); utime is field 14, stime 15.
    let ticks = |field: usize| fields.get(field - 3)?.parse::<f64>().ok();
    Some((ticks(14)? + ticks(15)?) / USER_HZ)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The head of a real `/proc/<pid>/status` (Linux 6.x).
    const STATUS: &str = "Name:\ttrustyai-operat\n\
        Umask:\t0022\n\
        State:\tS (sleeping)\n\
        Pid:\t4242\n\
        VmPeak:\t  812345 kB\n\
        VmSize:\t  798765 kB\n\
        VmHWM:\t   45678 kB\n\
        VmRSS:\t   31337 kB\n\
        RssAnon:\t   20000 kB\n\
        Threads:\t9\n";

    #[test]
    fn cpu_time_is_read_past_a_command_name_with_spaces() {
        let stat =
            "4242 (bench server) S 1 4242 4242 0 -1 4194560 500 0 0 0 250 75 0 0 20 0 9 0 1000 0 0";
        assert_eq!(stat_cpu_seconds(stat), Some(3.25));
        assert_eq!(stat_cpu_seconds("garbage"), None);
        assert!(cpu_seconds(std::process::id()).is_some());
    }

    #[test]
    fn reads_the_named_field_in_kib() {
        assert_eq!(status_field_kib(STATUS, "VmHWM"), Some(45678));
        assert_eq!(status_field_kib(STATUS, "VmRSS"), Some(31337));
        assert_eq!(status_field_kib(STATUS, "Threads"), Some(9));
    }

    #[test]
    fn a_prefix_of_a_field_name_is_not_that_field() {
        // `Vm` and `Rss` begin other fields' names but are not fields themselves.
        assert_eq!(status_field_kib(STATUS, "Vm"), None);
        assert_eq!(status_field_kib(STATUS, "Rss"), None);
    }

    #[test]
    fn absent_or_malformed_fields_are_none() {
        assert_eq!(status_field_kib(STATUS, "VmSwap"), None);
        assert_eq!(status_field_kib("", "VmRSS"), None);
        assert_eq!(status_field_kib("VmRSS:\n", "VmRSS"), None);
        assert_eq!(status_field_kib("VmRSS:\tlots kB\n", "VmRSS"), None);
    }

    #[test]
    fn this_process_has_a_resident_set() {
        let rss = proc_status_kib(std::process::id(), "VmRSS");
        assert!(rss.is_some_and(|kib| kib > 0), "{rss:?}");
        let hwm = proc_status_kib(std::process::id(), "VmHWM");
        assert!(hwm >= rss, "peak {hwm:?} below current {rss:?}");
    }

    #[test]
    fn endpoints_carry_reviews_the_server_accepts() {
        let endpoints = endpoints().unwrap();
        let names: Vec<_> = endpoints.iter().map(|(name, ..)| *name).collect();
        assert_eq!(names[..3], ["baseline", "validate", "mutate"]);
        assert_eq!(names.len(), 3 + 12);
        // Every conversion follows its JSON round trip of the very same body.
        for pair in endpoints[3..].chunks(2) {
            assert!(pair[0].0.starts_with("json/") && pair[1].0.starts_with("convert/"));
            assert_eq!(pair[0].0["json".len()..], pair[1].0["convert".len()..]);
            assert_eq!(pair[0].2, pair[1].2);
        }
        for (name, _, body, _) in &endpoints {
            let review: Value = serde_json::from_slice(body).unwrap();
            match name.split('/').nth(1).and_then(|n| n.parse::<usize>().ok()) {
                Some(n) => {
                    assert_eq!(review["kind"], "ConversionReview");
                    assert_eq!(review["request"]["objects"].as_array().unwrap().len(), n);
                }
                None => assert_eq!(review["kind"], "AdmissionReview", "{name}"),
            }
        }
        // The baseline sends the validate body: it measures the stack, not the payload size.
        assert_eq!(endpoints[0].2, endpoints[1].2);
        // Validation sees the defaulted object; mutation the one the user wrote.
        let object = |i: usize| -> Value {
            serde_json::from_slice::<Value>(&endpoints[i].2).unwrap()["request"]["object"].clone()
        };
        assert_eq!(object(2), fixtures::typical());
        assert_eq!(
            object(1),
            defaulted(&fixtures::typical(), Operation::Create)
        );
        assert_ne!(object(1), object(2));
    }
}
