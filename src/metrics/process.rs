//! The `process_*` metrics every Prometheus client library exports, read from `/proc/self` on
//! each scrape (Linux only; elsewhere none are written).

use std::fmt::Write;

/// Clock ticks per second of the CPU times in `/proc/<pid>/stat`: the kernel's `USER_HZ`, which
/// is 100 on every architecture Linux exports to user space this way.
const USER_HZ: f64 = 100.0;

/// The process metrics in OpenMetrics text, to insert before `# EOF`.
pub fn render() -> String {
    let mut out = String::new();
    let Some(stat) = read("/proc/self/stat") else {
        return out;
    };
    // Fields after the command name, which is in parentheses and may hold spaces.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    // `fields[0]` is field 3 of proc(5): utime is field 14, stime 15, starttime 22, vsize 23,
    // rss (pages) 24.
    let field = |n: usize| fields.get(n - 3).and_then(|v| v.parse::<f64>().ok());
    if let (Some(utime), Some(stime)) = (field(14), field(15)) {
        family(
            &mut out,
            "process_cpu_seconds",
            "counter",
            "Total user and system CPU time spent in seconds.",
            "process_cpu_seconds_total",
            (utime + stime) / USER_HZ,
        );
    }
    if let Some(vsize) = field(23) {
        family(
            &mut out,
            "process_virtual_memory_bytes",
            "gauge",
            "Virtual memory size in bytes.",
            "process_virtual_memory_bytes",
            vsize,
        );
    }
    if let Some(rss_kib) = read("/proc/self/status").and_then(|s| status_kib(&s, "VmRSS:")) {
        family(
            &mut out,
            "process_resident_memory_bytes",
            "gauge",
            "Resident memory size in bytes.",
            "process_resident_memory_bytes",
            rss_kib * 1024.0,
        );
    }
    if let (Some(start_ticks), Some(boot)) = (
        field(22),
        read("/proc/stat").and_then(|s| boot_time_seconds(&s)),
    ) {
        family(
            &mut out,
            "process_start_time_seconds",
            "gauge",
            "Start time of the process since unix epoch in seconds.",
            "process_start_time_seconds",
            boot + start_ticks / USER_HZ,
        );
    }
    if let Ok(entries) = std::fs::read_dir("/proc/self/fd") {
        family(
            &mut out,
            "process_open_fds",
            "gauge",
            "Number of open file descriptors.",
            "process_open_fds",
            entries.count() as f64,
        );
    }
    if let Some(max) = read("/proc/self/limits").and_then(|s| max_open_files(&s)) {
        family(
            &mut out,
            "process_max_fds",
            "gauge",
            "Maximum number of open file descriptors.",
            "process_max_fds",
            max,
        );
    }
    out
}

fn read(path: &str) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

fn family(out: &mut String, name: &str, kind: &str, help: &str, sample: &str, value: f64) {
    let value = if value.is_infinite() {
        "+Inf".to_owned()
    } else {
        value.to_string()
    };
    // Writing to a String cannot fail.
    let _ = write!(
        out,
        "# HELP {name} {help}\n# TYPE {name} {kind}\n{sample} {value}\n"
    );
}

fn status_kib(status: &str, key: &str) -> Option<f64> {
    status
        .lines()
        .find_map(|line| line.strip_prefix(key))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|v| v.parse().ok())
}

fn boot_time_seconds(stat: &str) -> Option<f64> {
    stat.lines()
        .find_map(|line| line.strip_prefix("btime "))
        .and_then(|v| v.trim().parse().ok())
}

fn max_open_files(limits: &str) -> Option<f64> {
    let line = limits
        .lines()
        .find(|line| line.starts_with("Max open files"))?;
    // "Max open files  <soft>  <hard>  files": the soft limit is what applies.
    let soft = line
        .trim_start_matches("Max open files")
        .split_whitespace()
        .next()?;
    if soft == "unlimited" {
        Some(f64::INFINITY)
    } else {
        soft.parse().ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The value of sample `name` in `text`, 0 when absent or unreadable.
    #[cfg(target_os = "linux")]
    fn sample_value(text: &str, name: &str) -> f64 {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0.0)
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn this_process_reports_every_standard_process_metric() {
        let text = render();
        for name in [
            "process_cpu_seconds_total ",
            "process_resident_memory_bytes ",
            "process_virtual_memory_bytes ",
            "process_start_time_seconds ",
            "process_open_fds ",
            "process_max_fds ",
        ] {
            assert!(text.contains(name), "{name} missing in {text}");
        }
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn the_resident_memory_is_reported_in_bytes() {
        let text = render();
        assert!(
            sample_value(&text, "process_resident_memory_bytes") > 1_000_000.0,
            "{text}"
        );
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn the_start_time_is_a_recent_unix_time() {
        let text = render();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs_f64())
            .unwrap_or_default();
        let started = sample_value(&text, "process_start_time_seconds");
        assert!(
            started <= now + 1.0 && started > now - 86_400.0,
            "{started} vs {now}"
        );
    }

    #[test]
    fn the_soft_open_files_limit_is_read() {
        let limits = "Limit                     Soft Limit           Hard Limit           Units\nMax open files            1024                 524288               files\n";
        assert_eq!(max_open_files(limits), Some(1024.0));
    }

    #[test]
    fn a_status_line_is_read_in_kib() {
        assert_eq!(
            status_kib("Name:\tx\nVmRSS:\t  2048 kB\n", "VmRSS:"),
            Some(2048.0)
        );
    }

    #[test]
    fn the_boot_time_is_read_from_the_btime_line() {
        assert_eq!(
            boot_time_seconds("cpu 1 2\nbtime 1700000000\n"),
            Some(1.7e9)
        );
    }
}
