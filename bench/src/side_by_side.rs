//! `/convert` of this operator beside the Go operator's, on the same machine, same bodies, cells
//! interleaved (ours, then Go's, for each cell): throughput, the server's CPU per converted
//! object, its peak RSS, 429s and other refusals, and the p99 latency at a fixed offered rate
//! (half the Go server's throughput in that cell, sent open-loop so a slow answer does not
//! slow the sender down).
//!
//! The Go server is `bench/go-conversion` (built by its `build.sh`). With two or more CPUs the
//! servers run on the last CPU and this process (the load generator) on the others, pinned
//! with `taskset`, so the load generator's CPU does not compete with the server it measures.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use bytes::Bytes;
use serde::Serialize;

use crate::client::{Connection, Protocol, connect, tls_config};
use crate::fixtures;
use crate::http_load::{ClosedLoop, closed_loop, cpu_seconds, proc_status_kib};
use crate::server_process::ServerProcess;
use crate::stats::{Percentiles, percentiles};

/// Objects per review in the cells.
pub const SIZES: [usize; 3] = [1, 100, 1000];

/// One server in one cell.
#[derive(Debug, Clone, Serialize)]
pub struct Side {
    pub requests_per_second: f64,
    pub latency: Percentiles,
    /// Answers other than 200 with a successful review (429s included), and failed requests.
    pub errors: usize,
    /// Of `errors`, the answers with HTTP 429.
    pub too_many_requests: usize,
    /// The server's CPU time (user + system) per converted object, µs.
    pub cpu_us_per_object: Option<f64>,
    /// The server's peak resident memory during the cell (VmHWM, reset before it), KiB.
    pub peak_rss_kib: Option<u64>,
    /// p99 latency with requests sent at `fixed_rate_per_second`, µs.
    pub fixed_rate_p99_us: f64,
    /// Errors during the fixed-rate run.
    pub fixed_rate_errors: usize,
}

/// Both servers in one cell.
#[derive(Debug, Clone, Serialize)]
pub struct Cell {
    pub objects: usize,
    /// `to-v1` or `to-v1alpha1`.
    pub direction: &'static str,
    pub protocol: Protocol,
    pub concurrency: usize,
    pub request_bytes: usize,
    /// Half the Go server's throughput in this cell: the rate of the fixed-rate runs.
    pub fixed_rate_per_second: f64,
    pub ours: Side,
    pub go: Side,
    /// Our server's CPU per object (µs) answering the same body on `/baseline/json`, which
    /// parses the review into JSON values and writes it back unchanged: what any conversion
    /// costs at least, on the same TLS, HTTP and request layers.
    pub json_round_trip_cpu_us_per_object: Option<f64>,
    /// Our server's CPU per object (µs) answering the same body on `/baseline`, which reads it
    /// and answers a fixed small JSON: the TLS, HTTP and request layers alone, the floor under
    /// any answer of ours.
    pub floor_cpu_us_per_object: Option<f64>,
}

impl Cell {
    /// Our throughput over the Go server's.
    pub fn throughput_ratio(&self) -> f64 {
        self.ours.requests_per_second / self.go.requests_per_second
    }

    /// Our CPU per object over the Go server's.
    pub fn cpu_ratio(&self) -> Option<f64> {
        Some(self.ours.cpu_us_per_object? / self.go.cpu_us_per_object?)
    }

    /// Our CPU per object on `/convert` over the JSON round trip's.
    pub fn json_round_trip_ratio(&self) -> Option<f64> {
        Some(self.ours.cpu_us_per_object? / self.json_round_trip_cpu_us_per_object?)
    }

    /// Our floor (`/baseline`) over the Go server's CPU per object on `/convert`: the share of
    /// Go's cost our server spends before reading any JSON.
    pub fn floor_ratio(&self) -> Option<f64> {
        Some(self.floor_cpu_us_per_object? / self.go.cpu_us_per_object?)
    }

    /// Our fixed-rate p99 over the Go server's.
    pub fn fixed_rate_p99_ratio(&self) -> f64 {
        self.ours.fixed_rate_p99_us / self.go.fixed_rate_p99_us
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct SideBySide {
    pub seconds_per_cell: f64,
    /// Whether the servers and the load generator ran on separate CPUs.
    pub pinned: bool,
    pub cells: Vec<Cell>,
}

/// The CPUs to pin the servers and the load generator to, as `taskset` lists; `None` on one CPU.
fn cpu_split() -> Option<(String, String)> {
    let cpus = std::thread::available_parallelism().ok()?.get();
    (cpus >= 2).then(|| ((cpus - 1).to_string(), format!("0-{}", cpus - 2)))
}

fn pinned(bin: &Path, cpus: Option<&str>) -> Command {
    match cpus {
        Some(list) => {
            let mut command = Command::new("taskset");
            command.arg("-c").arg(list).arg(bin);
            command
        }
        None => Command::new(bin),
    }
}

/// Runs every cell against `ours` (`bench-server`) and `go` (`go-conversion`).
pub async fn run(
    ours: &Path,
    go: &Path,
    seconds: f64,
    concurrencies: &[usize],
) -> Result<SideBySide> {
    let split = cpu_split();
    if let Some((_, load)) = &split {
        let status = Command::new("taskset")
            .args(["-a", "-p", "-c", load])
            .arg(std::process::id().to_string())
            .stdout(Stdio::null())
            .status()
            .context("taskset (util-linux) pins the load generator")?;
        if !status.success() {
            bail!("taskset could not pin the load generator to CPUs {load}");
        }
    }
    let server_cpus = split.as_ref().map(|(server, _)| server.as_str());
    let dir = std::env::temp_dir().join(format!("trustyai-side-by-side-{}", std::process::id()));
    let mut ours_command = pinned(ours, server_cpus);
    ours_command.arg("--dir").arg(&dir);
    ours_command.stderr(Stdio::inherit());
    let ours = ServerProcess::start(ours_command, "bench-server")?;
    // bench-server wrote the serving certificate the Go server serves too.
    let mut go_command = pinned(go, server_cpus);
    go_command.arg("--cert-dir").arg(&dir);
    go_command.stderr(Stdio::inherit());
    let go = ServerProcess::start(go_command, "go-conversion")?;
    let ca = std::fs::read(dir.join("ca.pem"))?;

    let mut cells = Vec::new();
    for protocol in [Protocol::H2, Protocol::Http1] {
        let config = tls_config(Some(&ca), protocol)?;
        for &concurrency in concurrencies {
            let connections_to = |port: u16| {
                let config = config.clone();
                async move {
                    let n = if protocol == Protocol::H2 {
                        1
                    } else {
                        concurrency
                    };
                    let mut all = Vec::with_capacity(n);
                    for _ in 0..n {
                        all.push(connect(port, config.clone(), protocol).await?);
                    }
                    anyhow::Ok(all)
                }
            };
            let ours_connections = connections_to(ours.port()).await?;
            let go_connections = connections_to(go.port()).await?;
            for objects in SIZES {
                for (direction, desired) in
                    [("to-v1", fixtures::V1), ("to-v1alpha1", fixtures::V1ALPHA1)]
                {
                    let body = Bytes::from(serde_json::to_vec(&fixtures::conversion_review(
                        objects, desired,
                    ))?);
                    let load = Load {
                        concurrency,
                        body: body.clone(),
                        objects,
                        seconds,
                    };
                    let (ours_side, _) = load
                        .closed_loop(&ours_connections, ours.pid(), CONVERT)
                        .await?;
                    let (round_trip, _) = load
                        .closed_loop(&ours_connections, ours.pid(), JSON_ROUND_TRIP)
                        .await?;
                    let (floor, _) = load
                        .closed_loop(&ours_connections, ours.pid(), FLOOR)
                        .await?;
                    let (go_side, go_rps) =
                        load.closed_loop(&go_connections, go.pid(), CONVERT).await?;
                    let rate = go_rps / 2.0;
                    let mut cell = Cell {
                        objects,
                        direction,
                        protocol,
                        concurrency,
                        request_bytes: body.len(),
                        fixed_rate_per_second: rate,
                        ours: ours_side,
                        go: go_side,
                        json_round_trip_cpu_us_per_object: round_trip.cpu_us_per_object,
                        floor_cpu_us_per_object: floor.cpu_us_per_object,
                    };
                    (cell.ours.fixed_rate_p99_us, cell.ours.fixed_rate_errors) =
                        load.open_loop(&ours_connections, rate).await?;
                    (cell.go.fixed_rate_p99_us, cell.go.fixed_rate_errors) =
                        load.open_loop(&go_connections, rate).await?;
                    eprintln!(
                        "  {objects:>4} {direction:<11} {:<8} c={concurrency:<3} ours {:>7.0} req/s {:>6.1} µs/obj 429 {:<4} | go {:>7.0} req/s {:>6.1} µs/obj 429 {:<4} | ×{:.2} throughput, CPU ×{:.2}, fixed-rate p99 ×{:.2}",
                        protocol.name(),
                        cell.ours.requests_per_second,
                        cell.ours.cpu_us_per_object.unwrap_or(f64::NAN),
                        cell.ours.too_many_requests,
                        cell.go.requests_per_second,
                        cell.go.cpu_us_per_object.unwrap_or(f64::NAN),
                        cell.go.too_many_requests,
                        cell.throughput_ratio(),
                        cell.cpu_ratio().unwrap_or(f64::NAN),
                        cell.fixed_rate_p99_ratio(),
                    );
                    cells.push(cell);
                }
            }
        }
    }
    drop(ours);
    drop(go);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(SideBySide {
        seconds_per_cell: seconds,
        pinned: split.is_some(),
        cells,
    })
}

/// What a cell sends its requests to.
#[derive(Clone, Copy)]
struct Endpoint {
    path: &'static str,
    /// Whether an answer (status and body) is a success.
    succeeded: fn(u16, &[u8]) -> bool,
}

/// Both servers' conversion webhook.
const CONVERT: Endpoint = Endpoint {
    path: "/convert",
    succeeded,
};

/// `bench-server`'s fixed answer to the same body (TLS, HTTP and the request layers only).
const FLOOR: Endpoint = Endpoint {
    path: "/baseline",
    succeeded: |status, _| status == 200,
};

/// `bench-server`'s JSON round trip of the same body (it answers the review unchanged, so
/// only the status tells success).
const JSON_ROUND_TRIP: Endpoint = Endpoint {
    path: "/baseline/json",
    succeeded: |status, _| status == 200,
};

/// One cell's requests.
struct Load {
    concurrency: usize,
    body: Bytes,
    objects: usize,
    seconds: f64,
}

/// Whether an answer is a successful review: HTTP 200 and `"status":"Success"` in its result
/// (a conversion error is also a 200, with `Failure`). The result stands before the converted
/// objects (this operator) or after them (Go's encoding of the review), so only both ends are
/// searched: a search through a megabyte of objects would make the load generator what is
/// measured.
fn succeeded(status: u16, body: &[u8]) -> bool {
    const SUCCESS: &[u8] = br#""status":"Success""#;
    const EDGE: usize = 512;
    let holds = |part: &[u8]| part.windows(SUCCESS.len()).any(|w| w == SUCCESS);
    let edge = EDGE.min(body.len());
    status == 200 && (holds(&body[..edge]) || holds(&body[body.len() - edge..]))
}

impl Load {
    /// `concurrency` senders, each sending its next request when its last is answered, for
    /// `seconds`; the server's side of the cell and its requests per second.
    async fn closed_loop(
        &self,
        connections: &[Connection],
        pid: u32,
        endpoint: Endpoint,
    ) -> Result<(Side, f64)> {
        let warm = connections[0]
            .post(endpoint.path, self.body.clone())
            .await?;
        if !(endpoint.succeeded)(warm.0, &warm.1) {
            bail!(
                "{} answered HTTP {}: {}",
                endpoint.path,
                warm.0,
                String::from_utf8_lossy(&warm.1)
            );
        }
        let _ = std::fs::write(format!("/proc/{pid}/clear_refs"), "5");
        let cpu_before = cpu_seconds(pid);
        let ClosedLoop {
            mut latencies,
            errors,
            too_many_requests,
            seconds,
        } = closed_loop(
            connections,
            self.concurrency,
            endpoint.path,
            self.body.clone(),
            self.seconds,
            usize::MAX,
            endpoint.succeeded,
        )
        .await?;
        let cpu = cpu_seconds(pid).zip(cpu_before).map(|(a, b)| a - b);
        let converted = (latencies.len() * self.objects) as f64;
        let rps = latencies.len() as f64 / seconds;
        Ok((
            Side {
                requests_per_second: rps,
                latency: percentiles(&mut latencies),
                errors,
                too_many_requests,
                cpu_us_per_object: cpu
                    .filter(|_| converted > 0.0)
                    .map(|cpu| cpu * 1e6 / converted),
                peak_rss_kib: proc_status_kib(pid, "VmHWM"),
                fixed_rate_p99_us: 0.0,
                fixed_rate_errors: 0,
            },
            rps,
        ))
    }

    /// Requests sent at `rate` per second for `seconds` whatever the answers, spread over the
    /// connections; each latency counts from when its request was due (not from when it was
    /// sent), so a sender held up by slow answers shows in the result. The p99 (µs) and the
    /// errors.
    ///
    /// The due times are kept by a thread of its own sleeping with the operating system's
    /// timer (tens of µs late at most on an idle CPU), not by the runtime's timer, which fires
    /// on millisecond ticks: at rates of thousands per second that would send requests in
    /// bursts of several per tick and count up to a millisecond of the generator's own
    /// lateness into every latency, more than the servers' own answer time.
    async fn open_loop(&self, connections: &[Connection], rate: f64) -> Result<(f64, usize)> {
        if rate <= 0.0 {
            bail!("no rate to send at");
        }
        let interval = Duration::from_secs_f64(1.0 / rate);
        let count = ((self.seconds * rate).ceil() as usize).max(1);
        let (due_tx, mut due_rx) = tokio::sync::mpsc::unbounded_channel();
        let pacer = std::thread::spawn(move || {
            let started = std::time::Instant::now();
            for i in 0..count {
                let due = started + interval.mul_f64(i as f64);
                if let Some(wait) = due.checked_duration_since(std::time::Instant::now()) {
                    std::thread::sleep(wait);
                }
                if due_tx.send((i, due)).is_err() {
                    return;
                }
            }
        });
        let mut tasks = tokio::task::JoinSet::new();
        while let Some((i, due)) = due_rx.recv().await {
            let connection = connections[i % connections.len()].clone();
            let body = self.body.clone();
            tasks.spawn(async move {
                let answer = connection.post("/convert", body).await;
                let latency = due.elapsed();
                match answer {
                    Ok((status, answer)) if succeeded(status, &answer) => Some(latency),
                    _ => None,
                }
            });
        }
        if pacer.join().is_err() {
            bail!("the open loop's pacing thread panicked");
        }
        let mut latencies = Vec::with_capacity(count);
        let mut errors = 0;
        while let Some(joined) = tasks.join_next().await {
            match joined? {
                Some(latency) => latencies.push(latency),
                None => errors += 1,
            }
        }
        Ok((percentiles(&mut latencies).p99_us, errors))
    }
}

/// The median of `values` (NaN-free), `None` when empty.
pub fn median(mut values: Vec<f64>) -> Option<f64> {
    values.retain(|v| v.is_finite());
    values.sort_by(f64::total_cmp);
    let n = values.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(values[n / 2]),
        _ => Some((values[n / 2 - 1] + values[n / 2]) / 2.0),
    }
}

/// The Markdown report: a summary against the targets, then every cell.
pub fn markdown(r: &SideBySide) -> String {
    use std::fmt::Write;
    let cpu: Vec<f64> = r.cells.iter().filter_map(Cell::cpu_ratio).collect();
    let big_throughput: Vec<f64> = r
        .cells
        .iter()
        .filter(|c| c.objects >= 100)
        .map(Cell::throughput_ratio)
        .collect();
    let p99: Vec<f64> = r.cells.iter().map(Cell::fixed_rate_p99_ratio).collect();
    let refused: usize = r.cells.iter().map(|c| c.ours.too_many_requests).sum();
    let round_trip: Vec<f64> = r
        .cells
        .iter()
        .filter_map(Cell::json_round_trip_ratio)
        .collect();
    let floor: Vec<f64> = r.cells.iter().filter_map(Cell::floor_ratio).collect();
    let fmt = |v: Option<f64>| v.map_or("–".to_owned(), |v| format!("{v:.2}"));
    let max = |v: &[f64]| v.iter().copied().reduce(f64::max);
    let min = |v: &[f64]| v.iter().copied().reduce(f64::min);
    let mut md = String::new();
    let _ = writeln!(
        md,
        "# `/convert` beside the Go operator's\n\n{} s per cell and server; servers and load generator {}.\n",
        r.seconds_per_cell,
        if r.pinned {
            "on separate CPUs (taskset)"
        } else {
            "sharing the CPU"
        }
    );
    let _ = writeln!(md, "| target | measured |\n|---|---|");
    let _ = writeln!(
        md,
        "| our CPU per object ≤ ⅓ of Go's in every cell | worst ×{} (median ×{}) |",
        fmt(max(&cpu)),
        fmt(median(cpu.clone()))
    );
    let _ = writeln!(
        md,
        "| throughput ≥ 3× with 100 and 1,000 objects | lowest ×{} (median ×{}) |",
        fmt(min(&big_throughput)),
        fmt(median(big_throughput.clone()))
    );
    let _ = writeln!(
        md,
        "| median p99 at half Go's rate ≤ ⅓ of Go's | median ×{} |",
        fmt(median(p99))
    );
    let _ = writeln!(md, "| no 429 | {refused} 429s from ours |");
    let spread = |v: &[f64]| {
        format!(
            "×{}–×{} (median ×{})",
            fmt(min(v)),
            fmt(max(v)),
            fmt(median(v.to_vec()))
        )
    };
    let _ = writeln!(
        md,
        "| (for reference) our CPU per object over the JSON round trip's | {} |",
        spread(&round_trip)
    );
    let _ = writeln!(
        md,
        "| (for reference) our floor (`/baseline`: TLS, HTTP, request layers, no JSON) over Go's CPU per object | {} |\n",
        spread(&floor)
    );
    let _ = writeln!(
        md,
        "| objects | direction | protocol | c | ours req/s | Go req/s | × | ours µs CPU/object | Go µs CPU/object | × | JSON round trip µs CPU/object | ours × round trip | floor µs CPU/object | floor × Go | ours peak RSS MiB | Go peak RSS MiB | rate/s | ours p99 ms | Go p99 ms | × | ours errors (429) | Go errors (429) |"
    );
    let _ = writeln!(md, "|{}", "---|".repeat(22));
    for c in &r.cells {
        let mib = |k: Option<u64>| fmt(k.map(|k| k as f64 / 1024.0));
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {:.0} | {:.0} | {:.2} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {:.0} | {:.1} | {:.1} | {:.2} | {} ({}) | {} ({}) |",
            c.objects,
            c.direction,
            c.protocol.name(),
            c.concurrency,
            c.ours.requests_per_second,
            c.go.requests_per_second,
            c.throughput_ratio(),
            fmt(c.ours.cpu_us_per_object),
            fmt(c.go.cpu_us_per_object),
            fmt(c.cpu_ratio()),
            fmt(c.json_round_trip_cpu_us_per_object),
            fmt(c.json_round_trip_ratio()),
            fmt(c.floor_cpu_us_per_object),
            fmt(c.floor_ratio()),
            mib(c.ours.peak_rss_kib),
            mib(c.go.peak_rss_kib),
            c.fixed_rate_per_second,
            c.ours.fixed_rate_p99_us / 1000.0,
            c.go.fixed_rate_p99_us / 1000.0,
            c.fixed_rate_p99_ratio(),
            c.ours.errors + c.ours.fixed_rate_errors,
            c.ours.too_many_requests,
            c.go.errors + c.go.fixed_rate_errors,
            c.go.too_many_requests,
        );
    }
    md
}

/// Writes `side-by-side.json` and `side-by-side.md` into `dir`; returns the Markdown.
pub fn write(dir: &Path, r: &SideBySide) -> Result<String> {
    std::fs::create_dir_all(dir)?;
    let md = markdown(r);
    std::fs::write(dir.join("side-by-side.json"), serde_json::to_vec_pretty(r)?)?;
    std::fs::write(dir.join("side-by-side.md"), &md)?;
    Ok(md)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_review_succeeded_only_when_a_200_carries_a_successful_result() {
        let ok = br#"{"response":{"uid":"u","result":{"status":"Success"}}}"#;
        let failed = br#"{"response":{"uid":"u","result":{"status":"Failure","message":"x"}}}"#;
        assert!(succeeded(200, ok));
        assert!(!succeeded(200, failed));
        assert!(!succeeded(429, ok));
        assert!(!succeeded(200, b""));
    }

    #[test]
    fn the_result_is_found_at_either_end_of_a_large_answer() {
        // At either end of a large answer, as each server writes it.
        let objects = format!(
            "[{}]",
            vec![r#"{"status":{"phase":"Ready"}}"#; 100].join(",")
        );
        let first = format!(
            r#"{{"response":{{"result":{{"status":"Success"}},"convertedObjects":{objects}}}}}"#
        );
        let last = format!(
            r#"{{"response":{{"convertedObjects":{objects},"result":{{"status":"Success"}}}}}}"#
        );
        assert!(succeeded(200, first.as_bytes()));
        assert!(succeeded(200, last.as_bytes()));
    }

    #[test]
    fn the_median_of_an_even_count_is_the_mean_of_the_middle_two() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(vec![4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(vec![f64::NAN, 1.0]), Some(1.0));
        assert_eq!(median(Vec::new()), None);
    }
}
