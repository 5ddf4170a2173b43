//! The classic Prometheus text format (0.0.4) from the OpenMetrics text that
//! `prometheus-client` writes.
//!
//! The two differ where a text-format parser refuses the whole scrape or misreads it: the
//! classic format has no `info` type (Prometheus' `expfmt` fails with `unknown metric type
//! "info"`), no `# UNIT` and no `# EOF`, and names a counter's family after its `_total`
//! sample. Samples and label escaping are the same in both, so they are copied as they are.

use std::collections::HashMap;

/// `openmetrics` (the complete text `prometheus_client::encoding::text::encode` writes) in the
/// classic text format.
pub fn to_prometheus_text(openmetrics: &str) -> String {
    let types: HashMap<&str, &str> = openmetrics
        .lines()
        .filter_map(|line| line.strip_prefix("# TYPE "))
        .filter_map(|rest| rest.split_once(' '))
        .collect();
    let mut out = String::with_capacity(openmetrics.len());
    for line in openmetrics.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, help) = rest.split_once(' ').unwrap_or((rest, ""));
            let name = family_name(name, types.get(name).copied());
            // OpenMetrics also escapes `"` in help text; the classic format only `\` and `\n`.
            let help = help.replace("\\\"", "\"");
            out.push_str(&format!("# HELP {name} {help}\n"));
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap_or((rest, "untyped"));
            let classic = match kind {
                "counter" | "gauge" | "histogram" | "summary" => kind,
                "info" | "stateset" => "gauge",
                _ => "untyped",
            };
            out.push_str(&format!(
                "# TYPE {} {classic}\n",
                family_name(name, Some(kind))
            ));
        } else if line.starts_with("# UNIT ") || line == "# EOF" {
            continue;
        } else {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// The classic format names a family after its samples: `x_total` for a counter, `x_info` for
/// an info metric; OpenMetrics names it `x`.
fn family_name(name: &str, kind: Option<&str>) -> String {
    match kind {
        Some("counter") => format!("{name}_total"),
        Some("info") => format!("{name}_info"),
        _ => name.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openmetrics_text_is_rewritten_only_where_the_classic_format_differs() {
        let openmetrics = "# HELP a_requests Requests \\\"served\\\".\n# TYPE a_requests counter\n# UNIT a_requests requests\na_requests_total{code=\"200\"} 3\n# HELP a_build Build information.\n# TYPE a_build info\na_build_info{version=\"1\"} 1\n# HELP a_up Up.\n# TYPE a_up gauge\na_up 1\n# EOF\n";
        assert_eq!(
            to_prometheus_text(openmetrics),
            "# HELP a_requests_total Requests \"served\".\n# TYPE a_requests_total counter\na_requests_total{code=\"200\"} 3\n# HELP a_build_info Build information.\n# TYPE a_build_info gauge\na_build_info{version=\"1\"} 1\n# HELP a_up Up.\n# TYPE a_up gauge\na_up 1\n"
        );
    }
}
