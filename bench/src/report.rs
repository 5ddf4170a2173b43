//! The results file (`bench/results/latest.json`) and its tables (`latest.md`, stdout).

use std::fmt::Write as _;
use std::path::Path;

use anyhow::Result;
use serde::Serialize;
use serde_json::Value;

use crate::cluster::{ClusterResults, per_trustyaiservice};
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
        Machine::from_proc(
            std::thread::available_parallelism().map_or(0, |n| n.get()),
            &read("/proc/cpuinfo"),
            &read("/proc/meminfo"),
            &read("/proc/sys/kernel/osrelease"),
            &read("/proc/loadavg"),
        )
    }

    /// The machine described by the texts of `/proc/cpuinfo`, `/proc/meminfo`,
    /// `/proc/sys/kernel/osrelease` and `/proc/loadavg`; a missing or unreadable value is empty
    /// or 0.
    pub fn from_proc(
        cpus: usize,
        cpuinfo: &str,
        meminfo: &str,
        osrelease: &str,
        loadavg: &str,
    ) -> Machine {
        Machine {
            cpus,
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
            kernel: osrelease.trim().to_owned(),
            load_average_at_start: loadavg
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

/// `count` `noun`s, in English.
fn plural(count: usize, noun: &str) -> String {
    if count == 1 {
        format!("1 {noun}")
    } else {
        format!("{count} {noun}s")
    }
}

/// The `spec.replicas` setting of the cluster benchmark's TrustyAIServices.
fn replicas(replicas: Option<i32>) -> String {
    match replicas {
        None => "`spec.replicas` unset (1 pod each)".to_owned(),
        Some(0) => "`spec.replicas` 0 (no pods)".to_owned(),
        Some(r) => format!("`spec.replicas` {r}"),
    }
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
            "| Endpoint | Protocol | c | req/s | p50 | p99 | p99.9 | Cost × baseline | Cost × JSON round trip | Server CPU per object | Server peak RSS | Errors |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
        );
        for c in &h.cells {
            let _ = writeln!(
                s,
                "| {} | {} | {} | {:.0} | {} | {} | {} | {} | {} | {} | {} | {} |",
                c.endpoint,
                c.protocol.name(),
                c.concurrency,
                c.requests_per_second,
                us(c.latency.p50_us),
                us(c.latency.p99_us),
                us(c.latency.p999_us),
                c.cost_vs_baseline
                    .map_or("".to_owned(), |x| format!("{x:.2}")),
                c.cost_vs_json.map_or("".to_owned(), |x| format!("{x:.2}")),
                c.server_cpu_us_per_object
                    .map_or("".to_owned(), |v| format!("{v:.1} µs")),
                c.server_peak_rss_kib
                    .map_or("".to_owned(), |k| mib(Some(k))),
                c.errors
            );
        }
        s.push('\n');
    }
    if let Some(c) = &r.cluster {
        let n = c.reconcile.trustyaiservices;
        let _ = writeln!(
            s,
            "**Operator against the local control plane** ({n} TrustyAIServices in {}, DATABASE mode, {})\n",
            plural(c.reconcile.namespaces, "namespace"),
            replicas(c.reconcile.replicas)
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
                "API requests from start to idle (ready + 5 s, no TrustyAIService)".to_owned(),
                c.startup.api_requests_until_idle.to_string(),
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
                format!(
                    "All {n} Ready ({})",
                    if c.reconcile.replicas == Some(0) {
                        "Deployments of 0 replicas available"
                    } else {
                        "simulated pods running"
                    }
                ),
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
                "Operator CPU per TrustyAIService (create → Ready + 10 s)".to_owned(),
                c.reconcile
                    .cpu_seconds_per_trustyaiservice
                    .map_or("unknown".to_owned(), |v| format!("{:.1} ms", v * 1e3)),
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
                    c.at_rest
                        .api_writes
                        .saturating_sub(c.at_rest.api_writes_excluding_lease)
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
            let _ = writeln!(s, "| {k} | {v} | {:.2} |", per_trustyaiservice(*v, n));
        }
        let _ = writeln!(
            s,
            "\nAPI requests by verb and resource, start → idle:\n\n| Request | Count |\n|---|---:|"
        );
        for (k, v) in &c.startup.until_idle_by_verb_resource {
            let _ = writeln!(s, "| {k} | {v} |");
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

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::path::PathBuf;

    use super::*;
    use crate::client::Protocol;
    use crate::cluster::{AtRest, Memory, Reconcile, Startup};
    use crate::http_load::Cell;
    use crate::stats::Percentiles;

    /// A fresh, empty folder under the temp dir, removed on drop.
    struct TempDir(PathBuf);

    impl TempDir {
        fn new(name: &str) -> TempDir {
            let path = std::env::temp_dir()
                .join(format!("trustyai-bench-test-{}-{name}", std::process::id()));
            let _ = std::fs::remove_dir_all(&path);
            std::fs::create_dir_all(&path).unwrap();
            TempDir(path)
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn machine() -> Machine {
        Machine {
            cpus: 2,
            cpu_model: "Test CPU".to_owned(),
            memory_gib: 15.55,
            kernel: "6.1.0".to_owned(),
            load_average_at_start: 0.5,
        }
    }

    fn empty() -> Results {
        Results {
            generated_unix_seconds: 1_700_000_000,
            command: "trustyai-bench --skip-http".to_owned(),
            machine: machine(),
            pure: Vec::new(),
            http: None,
            cluster: None,
            binary: None,
        }
    }

    fn cell(endpoint: &str, protocol: Protocol, cost: Option<f64>) -> Cell {
        Cell {
            endpoint: endpoint.to_owned(),
            protocol,
            concurrency: 8,
            request_bytes: 1234,
            requests: 24_691,
            errors: 3,
            seconds: 2.0,
            requests_per_second: 12_345.4,
            latency: Percentiles {
                p50_us: 80.4,
                p99_us: 1500.0,
                p999_us: 2345.6,
                max_us: 9000.0,
            },
            cost_vs_baseline: cost,
            cost_vs_json: None,
            server_cpu_us_per_object: Some(2.5),
            server_peak_rss_kib: Some(40_960),
        }
    }

    fn cluster(n: usize, by_verb_resource: BTreeMap<String, u64>) -> ClusterResults {
        ClusterResults {
            operator_binary: "/x/trustyai-operator".to_owned(),
            startup: Startup {
                to_convert_ms: 123.4,
                to_readyz_ms: 456.7,
                api_requests_until_ready: 12,
                api_requests_until_idle: 20,
                until_idle_by_verb_resource: BTreeMap::new(),
            },
            reconcile: Reconcile {
                trustyaiservices: n,
                namespaces: 1,
                replicas: None,
                create_seconds: 3.21,
                seconds_until_all_reconciled: 9.87,
                seconds_until_all_ready: None,
                api_requests: 550,
                api_writes: 226,
                api_requests_per_trustyaiservice: 5.5,
                api_writes_per_trustyaiservice: 2.26,
                cpu_seconds_per_trustyaiservice: Some(0.004),
                by_verb_resource,
            },
            at_rest: AtRest {
                seconds: 60.0,
                api_requests: 130,
                api_writes: 13,
                api_writes_excluding_lease: 1,
                requests_per_trustyaiservice_per_minute: 1.3,
                writes_per_trustyaiservice_per_minute: 0.13,
                writes_excluding_lease_per_trustyaiservice_per_minute: 0.01,
                by_verb_resource: BTreeMap::new(),
            },
            memory: Memory {
                idle_rss_kib: Some(10_240),
                peak_rss_kib: None,
                steady_rss_kib: Some(31_000),
            },
        }
    }

    fn full() -> Results {
        Results {
            pure: vec![
                PureResult {
                    id: "admission/validate/typical".to_owned(),
                    mean_ns: 1234.0,
                    median_ns: 1200.0,
                    elements: None,
                },
                PureResult {
                    id: "convert_review/to_v1/100".to_owned(),
                    mean_ns: 2_500_000.0,
                    median_ns: 2_400_000.0,
                    elements: Some(100),
                },
                PureResult {
                    id: "zero/elements".to_owned(),
                    mean_ns: 999.0,
                    median_ns: 999.0,
                    elements: Some(0),
                },
            ],
            http: Some(HttpResults {
                seconds_per_cell: 2.0,
                cells: vec![
                    cell("baseline", Protocol::H2, None),
                    cell("validate", Protocol::Http1, Some(1.234)),
                ],
                server_peak_rss_kib: Some(20_480),
            }),
            cluster: Some(cluster(
                100,
                BTreeMap::from([
                    ("get secrets".to_owned(), 100),
                    ("patch trustyaiservices/status".to_owned(), 250),
                ]),
            )),
            binary: Some(Binary {
                path: "target/release/trustyai-operator".to_owned(),
                bytes: 10 * 1024 * 1024,
            }),
            ..empty()
        }
    }

    fn assert_line(markdown: &str, line: &str) {
        assert!(
            markdown.lines().any(|l| l == line),
            "no line {line:?} in:\n{markdown}"
        );
    }

    #[test]
    fn time_picks_the_unit() {
        assert_eq!(time(0.0), "0 ns");
        assert_eq!(time(999.0), "999 ns");
        assert_eq!(time(1000.0), "1.0 µs");
        assert_eq!(time(1234.0), "1.2 µs");
        assert_eq!(time(999_000.0), "999.0 µs");
        assert_eq!(time(1_000_000.0), "1.00 ms");
        assert_eq!(time(21_890_000.0), "21.89 ms");
    }

    #[test]
    fn us_picks_the_unit() {
        assert_eq!(us(0.0), "0 µs");
        assert_eq!(us(80.4), "80 µs");
        assert_eq!(us(999.0), "999 µs");
        assert_eq!(us(1000.0), "1.00 ms");
        assert_eq!(us(2345.6), "2.35 ms");
    }

    #[test]
    fn mib_of_kib() {
        assert_eq!(mib(None), "–");
        assert_eq!(mib(Some(0)), "0.0 MiB");
        assert_eq!(mib(Some(20_480)), "20.0 MiB");
        assert_eq!(mib(Some(36_250)), "35.4 MiB");
    }

    #[test]
    fn machine_from_proc_texts() {
        let cpuinfo = "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) Processor\nflags\t\t: fpu\n\nprocessor\t: 1\nmodel name\t: Intel(R) Xeon(R) Processor\n";
        let meminfo = "MemTotal:       24746060 kB\nMemFree:         1000000 kB\n";
        let m = Machine::from_proc(
            2,
            cpuinfo,
            meminfo,
            "6.18.44-fc\n",
            "4.20 3.10 2.00 3/400 1234\n",
        );
        assert_eq!(m.cpus, 2);
        assert_eq!(m.cpu_model, "Intel(R) Xeon(R) Processor");
        // 24746060 KiB / 1024 / 1024 = 23.6 GiB.
        assert!((m.memory_gib - 23.6).abs() < 0.01, "{}", m.memory_gib);
        assert_eq!(m.kernel, "6.18.44-fc");
        assert_eq!(m.load_average_at_start, 4.2);
    }

    #[test]
    fn machine_from_missing_proc_texts_is_empty() {
        // An ARM /proc/cpuinfo has no `model name`; an unreadable file reads as "".
        let m = Machine::from_proc(0, "processor\t: 0\nCPU part\t: 0xd0c\n", "", "", "");
        assert_eq!(m.cpu_model, "");
        assert_eq!(m.memory_gib, 0.0);
        assert_eq!(m.kernel, "");
        assert_eq!(m.load_average_at_start, 0.0);
    }

    #[test]
    fn markdown_of_nothing_is_the_machine_line() {
        assert_eq!(
            markdown(&empty()),
            "Machine: 2 CPUs (Test CPU), 15.6 GiB RAM, Linux 6.1.0; 1-min load average at start 0.5.\n\n"
        );
    }

    #[test]
    fn markdown_pure_table() {
        let md = markdown(&full());
        assert_line(&md, "| Benchmark | Mean | Per object |");
        assert_line(&md, "| `admission/validate/typical` | 1.2 µs |  |");
        // 2.5 ms for 100 objects: 25 µs each.
        assert_line(&md, "| `convert_review/to_v1/100` | 2.50 ms | 25.0 µs |");
        // Zero elements: no per-object column rather than a division by zero.
        assert_line(&md, "| `zero/elements` | 999 ns |  |");
    }

    #[test]
    fn markdown_http_table() {
        let md = markdown(&full());
        assert!(
            md.contains("keep-alive; 2 s per cell;") && md.contains("server peak RSS 20.0 MiB)"),
            "{md}"
        );
        assert_line(
            &md,
            "| baseline | h2 | 8 | 12345 | 80 µs | 1.50 ms | 2.35 ms |  |  | 2.5 µs | 40.0 MiB | 3 |",
        );
        assert_line(
            &md,
            "| validate | http/1.1 | 8 | 12345 | 80 µs | 1.50 ms | 2.35 ms | 1.23 |  | 2.5 µs | 40.0 MiB | 3 |",
        );
    }

    #[test]
    fn markdown_cluster_table() {
        let md = markdown(&full());
        assert_line(
            &md,
            "**Operator against the local control plane** (100 TrustyAIServices in 1 namespace, DATABASE mode, `spec.replicas` unset (1 pod each))",
        );
        for line in [
            "| Start-up: process start → `/convert` answers over TLS | 123 ms |",
            "| Start-up: process start → `/readyz` 200 | 457 ms |",
            "| API requests until ready | 12 |",
            "| Create 100 (through the admission webhooks) | 3.2 s |",
            "| All 100 with children and current observedGeneration | 9.9 s |",
            "| All 100 Ready (simulated pods running) | not within 60 s more |",
            "| API requests per TrustyAIService (create → Ready + 10 s) | 5.5 (2.3 writes) |",
            "| At rest (60 s): requests / writes in total | 130 / 13 (12 of them Lease renewals) |",
            "| At rest: requests / writes (excl. Lease) per TrustyAIService per minute | 1.300 / 0.010 |",
            "| Memory: RSS idle (ready, no TrustyAIService) | 10.0 MiB |",
            "| Memory: peak RSS (VmHWM) | – |",
            "| Memory: steady RSS with 100 | 30.3 MiB |",
            "| get secrets | 100 | 1.00 |",
            "| patch trustyaiservices/status | 250 | 2.50 |",
        ] {
            assert_line(&md, line);
        }
    }

    #[test]
    fn markdown_cluster_ready_time_when_reached() {
        let mut r = full();
        if let Some(c) = &mut r.cluster {
            c.reconcile.seconds_until_all_ready = Some(12.34);
        }
        assert_line(
            &markdown(&r),
            "| All 100 Ready (simulated pods running) | 12.3 s |",
        );
    }

    #[test]
    fn markdown_cluster_of_a_scale_run() {
        let mut r = full();
        if let Some(c) = &mut r.cluster {
            c.reconcile.trustyaiservices = 10_000;
            c.reconcile.namespaces = 1_000;
            c.reconcile.replicas = Some(0);
            c.reconcile.seconds_until_all_ready = Some(700.0);
        }
        let md = markdown(&r);
        assert_line(
            &md,
            "**Operator against the local control plane** (10000 TrustyAIServices in 1000 namespaces, DATABASE mode, `spec.replicas` 0 (no pods))",
        );
        assert_line(
            &md,
            "| All 10000 Ready (Deployments of 0 replicas available) | 700.0 s |",
        );
        assert_eq!(replicas(Some(2)), "`spec.replicas` 2");
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["cluster"]["reconcile"]["namespaces"], 1_000);
        assert_eq!(json["cluster"]["reconcile"]["replicas"], 0);
    }

    #[test]
    fn markdown_cluster_of_zero_trustyaiservices_has_no_nan() {
        let r = Results {
            cluster: Some(cluster(0, BTreeMap::from([("get secrets".to_owned(), 3)]))),
            ..empty()
        };
        let md = markdown(&r);
        assert_line(&md, "| get secrets | 3 | 0.00 |");
        assert!(!md.contains("NaN") && !md.contains("inf"), "{md}");
    }

    #[test]
    fn markdown_binary_line() {
        assert_line(
            &markdown(&full()),
            "**Binary**: `target/release/trustyai-operator` 10.0 MiB (10485760 bytes)",
        );
    }

    #[test]
    fn markdown_sections_in_order() {
        let md = markdown(&full());
        let at = |needle: &str| md.find(needle).unwrap_or_else(|| panic!("{needle}"));
        assert!(at("Machine:") < at("**Pure functions**"));
        assert!(at("**Pure functions**") < at("**HTTPS webhooks"));
        assert!(at("**HTTPS webhooks") < at("**Operator against"));
        assert!(at("**Operator against") < at("API requests by verb and resource"));
        assert!(at("API requests by verb and resource") < at("**Binary**"));
    }

    /// A directory `name` into which `write` put the results of [`full`], where it put them, and
    /// what it returned.
    fn written(name: &str) -> (TempDir, PathBuf, String) {
        let dir = TempDir::new(name);
        let out = dir.0.join("results");
        let md = write(&out, &full()).unwrap();
        (dir, out, md)
    }

    #[test]
    fn write_stores_the_markdown_it_returns_as_latest_md() {
        let (_dir, out, md) = written("write-md");
        assert_eq!(md, markdown(&full()));
        assert_eq!(std::fs::read_to_string(out.join("latest.md")).unwrap(), md);
    }

    #[test]
    fn write_stores_the_results_as_latest_json() {
        let (_dir, out, _) = written("write-json");
        let text = std::fs::read_to_string(out.join("latest.json")).unwrap();
        assert!(text.ends_with("}\n"));
        let json: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(json["generated_unix_seconds"], 1_700_000_000);
        assert_eq!(json["machine"]["cpus"], 2);
        assert_eq!(json["pure"][1]["elements"], 100);
        assert_eq!(json["pure"][0]["elements"], Value::Null);
        assert_eq!(json["http"]["cells"][0]["protocol"], "h2");
        assert_eq!(json["http"]["cells"][1]["protocol"], "http/1.1");
        assert_eq!(json["http"]["cells"][0]["latency"]["p99_us"], 1500.0);
        assert_eq!(
            json["cluster"]["reconcile"]["seconds_until_all_ready"],
            Value::Null
        );
        assert_eq!(
            json["cluster"]["reconcile"]["by_verb_resource"]["patch trustyaiservices/status"],
            250
        );
        assert_eq!(json["cluster"]["memory"]["peak_rss_kib"], Value::Null);
        assert_eq!(json["cluster"]["reconcile"]["namespaces"], 1);
        assert_eq!(json["cluster"]["reconcile"]["replicas"], Value::Null);
        assert_eq!(json["binary"]["bytes"], 10_485_760);
    }

    fn write_bench(dir: &Path, full_id: &str, elements: Option<u64>, mean: f64, median: f64) {
        std::fs::create_dir_all(dir).unwrap();
        let throughput = elements.map_or(Value::Null, |e| serde_json::json!({"Elements": e}));
        std::fs::write(
            dir.join("benchmark.json"),
            serde_json::json!({"group_id": "g", "function_id": "f", "value_str": null,
                               "throughput": throughput, "full_id": full_id})
            .to_string(),
        )
        .unwrap();
        std::fs::write(
            dir.join("estimates.json"),
            serde_json::json!({"mean": {"point_estimate": mean, "standard_error": 1.0},
                               "median": {"point_estimate": median, "standard_error": 1.0}})
            .to_string(),
        )
        .unwrap();
    }

    #[test]
    fn read_criterion_collects_every_new_result_sorted() {
        let dir = TempDir::new("criterion");
        let root = &dir.0;
        write_bench(
            &root.join("convert_review/to_v1_100/new"),
            "convert_review/to_v1/100",
            Some(100),
            2_000_000.0,
            1_900_000.0,
        );
        // The previous run's numbers, not this one's.
        write_bench(
            &root.join("convert_review/to_v1_100/base"),
            "convert_review/to_v1/100",
            Some(100),
            9.0,
            9.0,
        );
        write_bench(
            &root.join("admission/validate_typical/new"),
            "admission/validate/typical",
            None,
            5900.0,
            5800.0,
        );
        // Criterion's HTML reports, and a result with its estimates missing: skipped.
        write_bench(&root.join("admission/report/new"), "report", None, 1.0, 1.0);
        let partial = root.join("admission/partial/new");
        write_bench(&partial, "admission/partial", None, 1.0, 1.0);
        std::fs::remove_file(partial.join("estimates.json")).unwrap();
        // A file where a folder could be is not walked.
        std::fs::write(root.join("admission/notes.txt"), "x").unwrap();

        let results = read_criterion(root);
        let summary: Vec<_> = results
            .iter()
            .map(|r| (r.id.as_str(), r.mean_ns, r.median_ns, r.elements))
            .collect();
        assert_eq!(
            summary,
            [
                ("admission/validate/typical", 5900.0, 5800.0, None),
                (
                    "convert_review/to_v1/100",
                    2_000_000.0,
                    1_900_000.0,
                    Some(100)
                ),
            ]
        );
    }

    #[test]
    fn read_criterion_of_a_missing_folder_is_empty() {
        let dir = TempDir::new("criterion-missing");
        assert!(read_criterion(&dir.0.join("absent")).is_empty());
    }
}
