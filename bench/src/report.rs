//! The results file (`bench/results/latest.json`) and its tables (`latest.md`, stdout).

use std::fmt::Write as _;
use std::path::Path;

use anyhow::Result;
use serde::Serialize;
use serde_json::Value;

use crate::cluster::ClusterResults;
use crate::http_load::HttpResults;

#[derive(Debug, Clone, Serialize)]
pub struct Machine {
    pub cpus: usize,
    pub cpu_model: String,
    pub memory_gib: f64,
    pub kernel: String,
    /// 1-minute load average when the run started: above the CPU count means the numbers were
    /// taken on a busy machine.
    pub load_average_at_start: f64,
}

impl Machine {
    pub fn detect() -> Machine {
        let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
        let cpuinfo = read("/proc/cpuinfo");
        let meminfo = read("/proc/meminfo");
        Machine {
            cpus: std::thread::available_parallelism().map_or(0, |n| n.get()),
            cpu_model: cpuinfo
                .lines()
                .find_map(|l| l.strip_prefix("model name"))
                .map(|v| v.trim_start_matches([' ', '\t', ':']).to_owned())
                .unwrap_or_default(),
            memory_gib: meminfo
                .lines()
                .find_map(|l| l.strip_prefix("MemTotal:"))
                .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
                .map_or(0.0, |kib| kib / 1024.0 / 1024.0),
            kernel: read("/proc/sys/kernel/osrelease").trim().to_owned(),
            load_average_at_start: read("/proc/loadavg")
                .split_whitespace()
                .next()
                .and_then(|v| v.parse().ok())
                .unwrap_or(0.0),
        }
    }
}

/// One criterion benchmark's result.
#[derive(Debug, Clone, Serialize)]
pub struct PureResult {
    pub id: String,
    pub mean_ns: f64,
    pub median_ns: f64,
    /// Objects per iteration (conversion), when declared.
    pub elements: Option<u64>,
}

/// Reads every `new/benchmark.json` + `new/estimates.json` under criterion's output folder.
pub fn read_criterion(dir: &Path) -> Vec<PureResult> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if !path.is_dir() {
                continue;
            }
            if path.file_name().is_some_and(|n| n == "new") {
                let read = |f: &str| -> Option<Value> {
                    serde_json::from_slice(&std::fs::read(path.join(f)).ok()?).ok()
                };
                if let (Some(bench), Some(est)) = (read("benchmark.json"), read("estimates.json")) {
                    out.push(PureResult {
                        id: bench["full_id"].as_str().unwrap_or_default().to_owned(),
                        mean_ns: est["mean"]["point_estimate"].as_f64().unwrap_or(0.0),
                        median_ns: est["median"]["point_estimate"].as_f64().unwrap_or(0.0),
                        elements: bench["throughput"]["Elements"].as_u64(),
                    });
                }
            } else if path
                .file_name()
                .is_some_and(|n| n != "report" && n != "base")
            {
                stack.push(path);
            }
        }
    }
    out.sort_by(|a, b| a.id.cmp(&b.id));
    out
}

#[derive(Debug, Clone, Serialize)]
pub struct Binary {
    pub path: String,
    pub bytes: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Results {
    pub generated_unix_seconds: u64,
    pub command: String,
    pub machine: Machine,
    pub pure: Vec<PureResult>,
    pub http: Option<HttpResults>,
    pub cluster: Option<ClusterResults>,
    pub binary: Option<Binary>,
}

fn time(ns: f64) -> String {
    if ns >= 1e6 {
        format!("{:.2} ms", ns / 1e6)
    } else if ns >= 1e3 {
        format!("{:.1} µs", ns / 1e3)
    } else {
        format!("{ns:.0} ns")
    }
}

fn us(v: f64) -> String {
    if v >= 1000.0 {
        format!("{:.2} ms", v / 1000.0)
    } else {
        format!("{v:.0} µs")
    }
}

fn mib(kib: Option<u64>) -> String {
    kib.map_or("–".to_owned(), |k| {
        format!("{:.1} MiB", k as f64 / 1024.0)
    })
}

/// The tables, as Markdown.
pub fn markdown(r: &Results) -> String {
    let mut s = String::new();
    let m = &r.machine;
    let _ = writeln!(
        s,
        "Machine: {} CPUs ({}), {:.1} GiB RAM, Linux {}; 1-min load average at start {:.1}.\n",
        m.cpus, m.cpu_model, m.memory_gib, m.kernel, m.load_average_at_start
    );
    if !r.pure.is_empty() {
        let _ = writeln!(s, "**Pure functions** (criterion, mean per call)\n");
        let _ = writeln!(s, "| Benchmark | Mean | Per object |\n|---|---:|---:|");
        for p in &r.pure {
            let per = p
                .elements
                .filter(|&e| e > 0)
                .map_or("".to_owned(), |e| time(p.mean_ns / e as f64));
            let _ = writeln!(s, "| `{}` | {} | {} |", p.id, time(p.mean_ns), per);
        }
        s.push('\n');
    }
    if let Some(h) = &r.http {
        let _ = writeln!(
            s,
            "**HTTPS webhooks under load** (loopback, TLS, keep-alive; {:.0} s per cell; h2: one connection with c streams, http/1.1: c connections; server peak RSS {})\n",
            h.seconds_per_cell,
            mib(h.server_peak_rss_kib)
        );
        let _ = writeln!(
            s,
            "| Endpoint | Protocol | c | req/s | p50 | p99 | p99.9 | Cost × baseline | Errors |\n|---|---|---:|---:|---:|---:|---:|---:|---:|"
        );
        for c in &h.cells {
            let _ = writeln!(
                s,
                "| {} | {} | {} | {:.0} | {} | {} | {} | {} | {} |",
                c.endpoint,
                c.protocol.name(),
                c.concurrency,
                c.requests_per_second,
                us(c.latency.p50_us),
                us(c.latency.p99_us),
                us(c.latency.p999_us),
                c.cost_vs_baseline
                    .map_or("".to_owned(), |x| format!("{x:.2}")),
                c.errors
            );
        }
        s.push('\n');
    }
    if let Some(c) = &r.cluster {
        let n = c.reconcile.trustyaiservices;
        let _ = writeln!(
            s,
            "**Operator against the local control plane** ({n} TrustyAIServices, DATABASE mode)\n"
        );
        let _ = writeln!(s, "| Measure | Value |\n|---|---:|");
        let rows = [
            (
                "Start-up: process start → `/convert` answers over TLS".to_owned(),
                format!("{:.0} ms", c.startup.to_convert_ms),
            ),
            (
                "Start-up: process start → `/readyz` 200".to_owned(),
                format!("{:.0} ms", c.startup.to_readyz_ms),
            ),
            (
                "API requests until ready".to_owned(),
                c.startup.api_requests_until_ready.to_string(),
            ),
            (
                format!("Create {n} (through the admission webhooks)"),
                format!("{:.1} s", c.reconcile.create_seconds),
            ),
            (
                format!("All {n} with children and current observedGeneration"),
                format!("{:.1} s", c.reconcile.seconds_until_all_reconciled),
            ),
            (
                format!("All {n} Ready (simulated pods running)"),
                c.reconcile
                    .seconds_until_all_ready
                    .map_or("not within 60 s more".to_owned(), |v| format!("{v:.1} s")),
            ),
            (
                "API requests per TrustyAIService (create → Ready + 10 s)".to_owned(),
                format!(
                    "{:.1} ({:.1} writes)",
                    c.reconcile.api_requests_per_trustyaiservice,
                    c.reconcile.api_writes_per_trustyaiservice
                ),
            ),
            (
                format!(
                    "At rest ({:.0} s): requests / writes in total",
                    c.at_rest.seconds
                ),
                format!(
                    "{} / {} ({} of them Lease renewals)",
                    c.at_rest.api_requests,
                    c.at_rest.api_writes,
                    c.at_rest.api_writes - c.at_rest.api_writes_excluding_lease
                ),
            ),
            (
                "At rest: requests / writes (excl. Lease) per TrustyAIService per minute"
                    .to_owned(),
                format!(
                    "{:.3} / {:.3}",
                    c.at_rest.requests_per_trustyaiservice_per_minute,
                    c.at_rest
                        .writes_excluding_lease_per_trustyaiservice_per_minute
                ),
            ),
            (
                "Memory: RSS idle (ready, no TrustyAIService)".to_owned(),
                mib(c.memory.idle_rss_kib),
            ),
            (
                "Memory: peak RSS (VmHWM)".to_owned(),
                mib(c.memory.peak_rss_kib),
            ),
            (
                format!("Memory: steady RSS with {n}"),
                mib(c.memory.steady_rss_kib),
            ),
        ];
        for (k, v) in rows {
            let _ = writeln!(s, "| {k} | {v} |");
        }
        let _ = writeln!(
            s,
            "\nAPI requests by verb and resource, create → Ready + 10 s:\n"
        );
        let _ = writeln!(
            s,
            "| Request | Count | Per TrustyAIService |\n|---|---:|---:|"
        );
        for (k, v) in &c.reconcile.by_verb_resource {
            let _ = writeln!(s, "| {k} | {v} | {:.2} |", *v as f64 / n as f64);
        }
        s.push('\n');
    }
    if let Some(b) = &r.binary {
        let _ = writeln!(
            s,
            "**Binary**: `{}` {:.1} MiB ({} bytes)\n",
            b.path,
            b.bytes as f64 / 1024.0 / 1024.0,
            b.bytes
        );
    }
    s
}

/// Writes `latest.json` and `latest.md` into `dir`.
pub fn write(dir: &Path, results: &Results) -> Result<String> {
    std::fs::create_dir_all(dir)?;
    std::fs::write(
        dir.join("latest.json"),
        serde_json::to_string_pretty(results)? + "\n",
    )?;
    let md = markdown(results);
    std::fs::write(dir.join("latest.md"), &md)?;
    Ok(md)
}
