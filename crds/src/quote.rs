//! Double-quoted strings with C's escapes, the common ground of the YAML this crate writes
//! ([`crate::manifests`]) and the Go quoting its messages mimic ([`crate::validation`]).

/// `s` between double quotes, with `"`, `\`, newline, carriage return and tab escaped as in C,
/// and every other character as `other` writes it (itself, or the dialect's escape).
pub(crate) fn double_quoted(s: &str, mut other: impl FnMut(char, &mut String)) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c => other(c, &mut out),
        }
    }
    out.push('"');
    out
}
