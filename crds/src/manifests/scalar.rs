//! How a string is written in the YAML we emit: plain only when every YAML reader kubectl and
//! its neighbours use (go-yaml v2 with YAML 1.1 resolution, go-yaml v3 and serde-saphyr with
//! YAML 1.2) reads it back as this same string; quoted otherwise, on one line, with escapes
//! where any character needs one. The plain form is kept for the common case (`name: team-a`,
//! `schedule: 5s`) so the files stay readable; the rules err towards quoting.

use std::fmt::Write as _;

/// `s` as a YAML scalar: plain when that is certain to be read back as this string; single
/// quoted when it holds `"` or `\` and nothing but printable ASCII, so JSON in an annotation
/// (the conversion's own, for one) stays legible; double quoted otherwise.
pub(super) fn string(s: &str) -> String {
    if plain_is_safe(s) {
        s.to_owned()
    } else if s.contains(['"', '\\']) && s.chars().all(|c| matches!(c, ' '..='~')) {
        format!("'{}'", s.replace('\'', "''"))
    } else {
        double_quoted(s)
    }
}

/// Whether `s` may be written unquoted. Only printable ASCII is ever plain: go-yaml v2 treats
/// U+0085, U+2028 and U+2029 as line breaks and refuses other controls, and nothing is lost by
/// quoting the rest. Flow indicators (`,[]{}`) are plain text inside a scalar in block style,
/// the only style we write; `#` is quoted wherever it is, though only ` #` starts a comment.
pub(super) fn plain_is_safe(s: &str) -> bool {
    let Some(first) = s.chars().next() else {
        return false; // the empty plain scalar is null
    };
    (first.is_ascii_alphanumeric() || matches!(first, '/' | '.' | '_' | '(' | '$' | '^' | '+'))
        && s.chars().all(|c| matches!(c, ' '..='~') && c != '#')
        && !s.ends_with([' ', ':'])
        && !s.contains(": ")
        && !s.starts_with("...")
        && !resolves_to_another_type(s)
}

/// Whether a plain `s` could be read as a boolean, null, number, timestamp, merge key or value
/// key by YAML 1.1 or 1.2 rules, in any spelling a reader might accept (a superset of what the
/// specifications list: readers differ in the cases and forms they take).
fn resolves_to_another_type(s: &str) -> bool {
    let lower = s.to_ascii_lowercase();
    if matches!(
        lower.as_str(),
        "y" | "yes" | "n" | "no" | "on" | "off" | "true" | "false" | "null" | "~" | "<<" | "="
    ) {
        return true;
    }
    let unsigned = lower.strip_prefix(['+', '-']).unwrap_or(&lower);
    if matches!(unsigned.trim_start_matches('.'), "inf" | "nan" | "infinity") {
        return true;
    }
    // YAML 1.1 and go-yaml ignore `_` in numbers (`1_000`, `0x_1F`).
    let digits: String = unsigned.chars().filter(|&c| c != '_').collect();
    digits.is_empty()
        || is_integer(&digits)
        || is_float(&digits)
        || is_sexagesimal(unsigned)
        || looks_like_a_date(s)
}

fn all_in(s: &str, allowed: impl Fn(char) -> bool) -> bool {
    !s.is_empty() && s.chars().all(allowed)
}

/// Decimal, `0x` hexadecimal, `0o` octal or `0b` binary (`017` is decimal-looking and caught
/// as such).
fn is_integer(s: &str) -> bool {
    if let Some(hex) = s.strip_prefix("0x") {
        all_in(hex, |c| c.is_ascii_hexdigit())
    } else if let Some(octal) = s.strip_prefix("0o") {
        all_in(octal, |c| matches!(c, '0'..='7'))
    } else if let Some(binary) = s.strip_prefix("0b") {
        all_in(binary, |c| matches!(c, '0' | '1'))
    } else {
        all_in(s, |c| c.is_ascii_digit())
    }
}

/// `1.5`, `.5`, `5.`, `1e3`, `1.0e-3` (lowercased).
fn is_float(s: &str) -> bool {
    let (mantissa, exponent) = match s.split_once('e') {
        Some((mantissa, exponent)) => (mantissa, Some(exponent)),
        None => (s, None),
    };
    let mantissa_ok = match mantissa.split_once('.') {
        Some((whole, fraction)) => {
            (whole.is_empty() || all_in(whole, |c| c.is_ascii_digit()))
                && (fraction.is_empty() || all_in(fraction, |c| c.is_ascii_digit()))
                && !(whole.is_empty() && fraction.is_empty())
        }
        None => all_in(mantissa, |c| c.is_ascii_digit()),
    };
    let exponent_ok = exponent.is_none_or(|e| {
        let e = e.strip_prefix(['+', '-']).unwrap_or(e);
        all_in(e, |c| c.is_ascii_digit())
    });
    mantissa_ok && exponent_ok
}

/// YAML 1.1 base 60 (`1:20`, `190:20:30.15`): any digits with colons, more broadly than the
/// specification, since no Kubernetes string of that shape needs to stay plain.
fn is_sexagesimal(s: &str) -> bool {
    s.starts_with(|c: char| c.is_ascii_digit())
        && s.contains(':')
        && s.chars()
            .all(|c| c.is_ascii_digit() || matches!(c, ':' | '.' | '_'))
}

/// YAML 1.1 timestamps all start `YYYY-M`; anything starting like that is quoted.
fn looks_like_a_date(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() > 5 && b[..4].iter().all(u8::is_ascii_digit) && b[4] == b'-' && b[5].is_ascii_digit()
}

/// A double-quoted scalar on one line: JSON's escapes, `\xNN` for the other C0 and C1
/// controls and DEL, `\uNNNN` for the characters YAML 1.1 readers take as line breaks or a
/// byte order mark, and the non-characters YAML does not allow raw.
pub(super) fn double_quoted(s: &str) -> String {
    crate::quote::double_quoted(s, |c, out| match c {
        '\u{0}'..='\u{1f}' | '\u{7f}'..='\u{9f}' => {
            let _ = write!(out, "\\x{:02x}", u32::from(c));
        }
        '\u{2028}' | '\u{2029}' | '\u{feff}' | '\u{fffe}' | '\u{ffff}' => {
            let _ = write!(out, "\\u{:04x}", u32::from(c));
        }
        c => out.push(c),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quoted(s: &str) -> bool {
        string(s).starts_with(['"', '\''])
    }

    #[test]
    fn ordinary_strings_stay_plain() {
        for s in [
            "team-a",
            "5s",
            "1m30s",
            "quay.io/trustyai/trustyai-service:v0.28.0",
            "/inputs",
            "data.csv",
            "1.2.3",
            "v1",
            "a b",
            "x:y",
            "it's",
            "say \"hi\"",
            "a\\b",
            "trustyai.opendatahub.io/v1alpha1",
            "a, b",
            "a[0]{x}",
            ".status.conditions[?(@.type==\"Ready\")].status",
        ] {
            assert_eq!(string(s), s, "{s:?}");
        }
    }

    #[test]
    fn the_empty_string_is_quoted() {
        assert_eq!(string(""), "\"\"");
    }

    #[test]
    fn words_read_as_a_boolean_or_null_are_quoted_in_every_case() {
        for s in [
            "y", "Y", "yes", "Yes", "YES", "yEs", "n", "N", "no", "No", "NO", "on", "On", "ON",
            "off", "Off", "OFF", "true", "True", "TRUE", "tRUE", "false", "False", "FALSE", "null",
            "Null", "NULL", "nUll", "~",
        ] {
            assert!(quoted(s), "{s:?}");
        }
    }

    #[test]
    fn integers_in_every_base_are_quoted() {
        for s in [
            "0", "42", "-7", "+12", "017", "09", "0x1F", "0X1f", "0o17", "0O17", "0b101", "1_000",
            "0x_1F", "-0",
        ] {
            assert!(quoted(s), "{s:?}");
        }
    }

    #[test]
    fn every_float_spelling_is_quoted() {
        for s in [
            "1.5",
            ".5",
            "5.",
            "-1.5",
            "1e3",
            "1E3",
            "1e+3",
            "1.0e-3",
            "+.5",
            ".inf",
            ".Inf",
            "-.inf",
            "+.INF",
            ".nan",
            ".NaN",
            "NaN",
            "nan",
            "inf",
            "Infinity",
            "-Infinity",
        ] {
            assert!(quoted(s), "{s:?}");
        }
    }

    #[test]
    fn sexagesimal_numbers_are_quoted() {
        for s in ["1:20", "190:20:30", "190:20:30.15", "-1:20"] {
            assert!(quoted(s), "{s:?}");
        }
    }

    #[test]
    fn date_like_scalars_are_quoted() {
        for s in [
            "2025-01-01",
            "2025-1-1",
            "2025-01-01T00:00:00Z",
            "2001-12-14 21:59:43.10 -5",
        ] {
            assert!(quoted(s), "{s:?}");
        }
    }

    #[test]
    fn yaml_1_1_special_key_symbols_are_quoted() {
        assert!(quoted("<<"));
        assert!(quoted("="));
    }

    #[test]
    fn whitespace_at_either_end_is_quoted() {
        for s in [" a", "a ", " ", "\ta"] {
            assert!(quoted(s), "{s:?}");
        }
    }

    #[test]
    fn every_indicator_at_the_start_is_quoted() {
        for c in "-?:,[]{}#&*!|>'\"%@`~=<\\".chars() {
            let s = format!("{c}x");
            assert!(quoted(&s), "{s:?}");
        }
        assert!(quoted("- x"));
        assert!(quoted("---"));
        assert!(quoted("..."));
    }

    #[test]
    fn a_string_that_could_read_as_a_collection_or_comment_is_quoted() {
        for s in ["a: b", "a #b", "a#b", "a:", "{x}", "[0]"] {
            assert!(quoted(s), "{s:?}");
        }
    }

    #[test]
    fn control_characters_are_escaped() {
        assert_eq!(string("a\nb"), "\"a\\nb\"");
        assert_eq!(string("a\tb"), "\"a\\tb\"");
        assert_eq!(string("a\rb"), "\"a\\rb\"");
        assert_eq!(string("\u{0}\u{1b}\u{7f}"), "\"\\x00\\x1b\\x7f\"");
        assert_eq!(string("\u{9f}"), "\"\\x9f\"");
    }

    #[test]
    fn unicode_yaml_readers_cannot_take_raw_is_escaped() {
        assert_eq!(string("a\u{85}b"), "\"a\\x85b\"");
        assert_eq!(string("a \u{2028}b"), "\"a \\u2028b\"");
        assert_eq!(string("\u{2029}"), "\"\\u2029\"");
        assert_eq!(string("\u{feff}x"), "\"\\ufeffx\"");
        assert_eq!(string("\u{fffe}"), "\"\\ufffe\"");
    }

    #[test]
    fn printable_ascii_with_double_quotes_or_backslashes_is_single_quoted() {
        assert_eq!(string("\"x\""), "'\"x\"'");
        assert_eq!(string("{\"a\":\"it's\"}"), "'{\"a\":\"it''s\"}'");
        assert_eq!(string("-\\ y "), "'-\\ y '");
    }

    #[test]
    fn characters_special_in_double_quotes_are_escaped() {
        assert_eq!(string("\"\u{e9}\"\n"), "\"\\\"\u{e9}\\\"\\n\"");
        assert_eq!(string("'x' \\\t"), "\"'x' \\\\\\t\"");
    }

    #[test]
    fn other_unicode_is_double_quoted_verbatim() {
        for s in ["日本語", "😀", "e\u{301}", "caf\u{e9}", "a\u{a0}b"] {
            assert_eq!(string(s), format!("\"{s}\""), "{s:?}");
        }
    }
}
