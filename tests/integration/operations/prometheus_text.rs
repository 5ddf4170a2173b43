//! A strict enough reader of Prometheus (OpenMetrics) text to catch a broken exposition, and
//! the sums the metrics tests compare.

use std::collections::BTreeMap;

// --- Prometheus text ------------------------------------------------------------------------

/// One sample: metric name, labels, value.
pub(super) type Sample = (String, BTreeMap<String, String>, f64);

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
pub(super) fn parse_prometheus(text: &str) -> Result<Vec<Sample>, String> {
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
pub(super) fn sum(samples: &[Sample], name: &str, with: &[(&str, &str)]) -> f64 {
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
