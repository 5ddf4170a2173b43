//! Reads the TrustyAI service's `/q/metrics` (Prometheus text format) for the gauges of
//! scheduled metrics: each sample's metric name, labels and value. Only what the operator needs
//! is kept: samples of `trustyai_*` gauges that carry a `request` label.

use std::collections::BTreeMap;

/// One sample of a scheduled metric's gauge.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// The gauge, for example `trustyai_spd`.
    pub gauge: String,
    /// The request id the service gave the scheduled metric (`request` label).
    pub request_id: String,
    /// The `requestName` label, when the request had one.
    pub request_name: Option<String>,
    /// The value.
    pub value: f64,
}

/// The samples of scheduled metrics in `text`. Lines that are not such samples (comments,
/// other metrics, lines this reader does not understand) are skipped: a scrape is read for
/// what it says about our requests, never refused whole.
pub fn samples(text: &str) -> Vec<Sample> {
    text.lines().filter_map(sample).collect()
}

fn sample(line: &str) -> Option<Sample> {
    let line = line.trim();
    if !line.starts_with("trustyai_") {
        return None;
    }
    let open = line.find('{')?;
    let gauge = &line[..open];
    let (labels, rest) = labels(&line[open + 1..])?;
    let value = rest.split_whitespace().next()?;
    let value = match value {
        "NaN" => f64::NAN,
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        v => v.parse().ok()?,
    };
    let mut labels = labels;
    Some(Sample {
        gauge: gauge.to_owned(),
        request_id: labels.remove("request")?,
        request_name: labels.remove("requestName"),
        value,
    })
}

/// The labels of `text` (after the `{`) and what follows the closing `}`.
fn labels(text: &str) -> Option<(BTreeMap<String, String>, &str)> {
    let mut out = BTreeMap::new();
    let mut rest = text.trim_start();
    loop {
        if let Some(after) = rest.strip_prefix('}') {
            return Some((out, after));
        }
        let eq = rest.find('=')?;
        let name = rest[..eq].trim().to_owned();
        let quoted = rest[eq + 1..].trim_start().strip_prefix('"')?;
        let mut value = String::new();
        let mut chars = quoted.char_indices();
        let end = loop {
            let (i, c) = chars.next()?;
            match c {
                '"' => break i,
                '\\' => match chars.next()?.1 {
                    'n' => value.push('\n'),
                    other => value.push(other),
                },
                c => value.push(c),
            }
        };
        out.insert(name, value);
        rest = quoted[end + 1..].trim_start();
        rest = rest.strip_prefix(',').unwrap_or(rest).trim_start();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_services_spd_gauge() {
        let text = "# HELP trustyai_spd SPD\n# TYPE trustyai_spd gauge\n\
            trustyai_spd{metricName=\"SPD\",modelId=\"demo-model\",outcomeName=\"income\",protectedAttribute=\"gender\",request=\"7f0c\",requestName=\"ns/demo-spd\"} -0.30000000000000004\n\
            process_cpu_seconds_total 1.5\n";
        assert_eq!(
            samples(text),
            vec![Sample {
                gauge: "trustyai_spd".into(),
                request_id: "7f0c".into(),
                request_name: Some("ns/demo-spd".into()),
                value: -0.300_000_000_000_000_04,
            }]
        );
    }

    /// The samples of a line with escapes in a label value and the value `NaN`.
    fn escaped_nan_line() -> Vec<Sample> {
        samples("trustyai_mmd{request=\"a\",requestName=\"x\\\"y\\\\z\",subcategory=\"age\"} NaN\n")
    }

    #[test]
    fn escaped_label_values_are_unescaped() {
        assert_eq!(
            escaped_nan_line()[0].request_name.as_deref(),
            Some("x\"y\\z")
        );
    }

    #[test]
    fn a_nan_value_is_read() {
        assert!(escaped_nan_line()[0].value.is_nan());
    }

    #[test]
    fn lines_it_does_not_understand_are_skipped() {
        let text = "trustyai_spd{request=\"a\"\ntrustyai_dir 3\ntrustyai_dir{modelId=\"m\"} 1\ntrustyai_spd{request=\"b\"} x\n";
        assert_eq!(samples(text), vec![]);
    }
}
