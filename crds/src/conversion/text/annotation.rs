//! The converter's annotation for an object converted on its text, written from the scalars the
//! scan collected, in the format of the parent module's documentation, without building the
//! maps [`Preserved`](super::super::preserved::Preserved) renders from.
//!
//! This is a second writer of that format, for the one case the text converter handles (no
//! `carried`, no `created`, nothing truncated): the text converter's property tests compare
//! every annotation it writes, byte for byte, with the tree converter's.

use super::super::Version;
use super::super::body::{SEEN, V1_ONLY};
use super::super::preserved::MAX_BYTES;
use super::{Declined, Step, parse};

/// The scalars of one object that go into its annotation. Each is a JSON scalar as it appears
/// in the input: a string without escapes (`"…"`), `true`, `false`, `null` or a number.
pub(super) struct Collected<'a> {
    pub restores: Version,
    /// The values of `V1_ONLY.spec`'s paths, by path index.
    pub spec: [Option<&'a str>; 2],
    /// The values of `V1_ONLY.status`'s paths, by path index.
    pub status: [Option<&'a str>; 2],
    pub conditions: Vec<ConditionEntry<'a>>,
}

/// One condition's entry: what the conversion rendered and what goes back.
pub(super) struct ConditionEntry<'a> {
    /// `type`, `status` and `lastTransitionTime` as rendered, in the order of `SEEN`.
    pub seen: [Option<&'a str>; 3],
    /// Among the conditions with the same `type`, which one.
    pub nth: u64,
    /// The status as the input spelled it, when the rendered one differs.
    pub status: Option<&'a str>,
    /// The values of `V1_ONLY.condition`'s fields, by index.
    pub only: [Option<&'a str>; V1_ONLY.condition.len()],
}

impl Collected<'_> {
    /// Nothing to restore: no annotation.
    pub(super) fn is_empty(&self) -> bool {
        self.spec.iter().chain(&self.status).all(Option::is_none) && self.conditions.is_empty()
    }

    /// The member `"<name>":"<value>"` for `metadata.annotations`, after a comma when
    /// `preceded`, the value escaped as a JSON string. Declined over the size bound, where the
    /// tree converter drops parts.
    pub(super) fn member(&self, name: &str, preceded: bool) -> Step<Vec<u8>> {
        let mut text = Vec::with_capacity(256);
        self.write(&mut text)?;
        if text.len() > MAX_BYTES {
            return Err(Declined);
        }
        let mut member = Vec::with_capacity(text.len() + text.len() / 4 + name.len() + 8);
        if preceded {
            member.push(b',');
        }
        member.push(b'"');
        member.extend_from_slice(name.as_bytes());
        member.extend_from_slice(b"\":\"");
        // The text has no backslash and no control character (its strings have no escapes and
        // its numbers none), so escaping it as a string is escaping its quotes.
        let mut rest = text.as_slice();
        while let Some(at) = memchr::memchr(b'"', rest) {
            member.extend_from_slice(&rest[..at]);
            member.extend_from_slice(b"\\\"");
            rest = &rest[at + 1..];
        }
        member.extend_from_slice(rest);
        member.push(b'"');
        Ok(member)
    }

    fn write(&self, out: &mut Vec<u8>) -> Step {
        out.extend_from_slice(b"{\"restores\":\"");
        out.extend_from_slice(self.restores.name().as_bytes());
        out.push(b'"');
        write_fields(out, "spec", V1_ONLY.spec, &self.spec)?;
        write_fields(out, "status", V1_ONLY.status, &self.status)?;
        if !self.conditions.is_empty() {
            out.extend_from_slice(b",\"conditions\":[");
            for (i, entry) in self.conditions.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                entry.write(out)?;
            }
            out.push(b']');
        }
        out.push(b'}');
        Ok(())
    }
}

impl ConditionEntry<'_> {
    fn write(&self, out: &mut Vec<u8>) -> Step {
        out.extend_from_slice(b"{\"seen\":");
        write_members(out, SEEN.iter().copied().zip(self.seen))?;
        if self.nth > 0 {
            out.extend_from_slice(b",\"nth\":");
            out.extend_from_slice(self.nth.to_string().as_bytes());
        }
        out.extend_from_slice(b",\"restore\":");
        let restore = std::iter::once(("status", self.status))
            .chain(V1_ONLY.condition.iter().copied().zip(self.only));
        write_members(out, restore)?;
        out.push(b'}');
        Ok(())
    }
}

/// `,"<name>":{…}` with the present values nested along their paths; nothing when none is
/// present. No two paths share a parent (a unit test checks `V1_ONLY`), so each present path
/// is its own chain of one-member objects.
fn write_fields(out: &mut Vec<u8>, name: &str, paths: &[&[&str]], values: &[Option<&str>]) -> Step {
    let mut open = false;
    for (path, value) in paths.iter().zip(values) {
        let Some(value) = value else { continue };
        if open {
            out.push(b',');
        } else {
            out.extend_from_slice(b",\"");
            out.extend_from_slice(name.as_bytes());
            out.extend_from_slice(b"\":{");
            open = true;
        }
        for (depth, key) in path.iter().enumerate() {
            if depth > 0 {
                out.push(b'{');
            }
            out.push(b'"');
            out.extend_from_slice(key.as_bytes());
            out.extend_from_slice(b"\":");
        }
        write_scalar(out, value)?;
        out.extend(std::iter::repeat_n(b'}', path.len().saturating_sub(1)));
    }
    if open {
        out.push(b'}');
    }
    Ok(())
}

/// `{"k":v,…}` with the present values, in order.
fn write_members<'a>(
    out: &mut Vec<u8>,
    members: impl Iterator<Item = (&'a str, Option<&'a str>)>,
) -> Step {
    out.push(b'{');
    let mut first = true;
    for (key, value) in members {
        let Some(value) = value else { continue };
        if !std::mem::take(&mut first) {
            out.push(b',');
        }
        out.push(b'"');
        out.extend_from_slice(key.as_bytes());
        out.extend_from_slice(b"\":");
        write_scalar(out, value)?;
    }
    out.push(b'}');
    Ok(())
}

/// A scalar as the tree converter prints it once parsed: strings without escapes, literals and
/// plain integers print as they are written; other numbers (`1.0`, `1e3`, `-0`, long ones) as
/// `serde_json` prints their value.
fn write_scalar(out: &mut Vec<u8>, raw: &str) -> Step {
    match raw.as_bytes().first() {
        Some(b'-' | b'0'..=b'9') if !prints_as_written(raw) => {
            serde_json::to_writer(out, &parse(raw)?).map_err(|_| Declined)
        }
        _ => {
            out.extend_from_slice(raw.as_bytes());
            Ok(())
        }
    }
}

/// An integer `serde_json` reads into an `i64`/`u64` and prints digit for digit.
fn prints_as_written(number: &str) -> bool {
    let digits = number.strip_prefix('-').unwrap_or(number);
    let leading_zero = digits.len() > 1 && digits.starts_with('0');
    let negative_zero = digits == "0" && number.starts_with('-');
    !digits.is_empty()
        && digits.len() <= 18
        && digits.bytes().all(|b| b.is_ascii_digit())
        && !leading_zero
        && !negative_zero
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_two_version_only_paths_share_a_parent() {
        for paths in [V1_ONLY.spec, V1_ONLY.status] {
            for (i, a) in paths.iter().enumerate() {
                for b in &paths[i + 1..] {
                    assert_ne!(a.first(), b.first(), "{a:?} and {b:?}");
                }
            }
        }
    }

    /// Integers take the copying way, other numbers the parsing way; both print what the
    /// tree converter prints: `serde_json`'s rendering of the parsed value.
    #[test]
    fn numbers_print_as_serde_json_prints_their_value() {
        let numbers = "0 7 -7 123456789012345678 12345678901234567890 1.0 1e3 -0 1.50 -12E-1";
        for raw in numbers.split(' ') {
            let mut out = Vec::new();
            write_scalar(&mut out, raw).unwrap();
            let value: serde_json::Value = serde_json::from_str(raw).unwrap();
            assert_eq!(String::from_utf8(out).unwrap(), value.to_string(), "{raw}");
        }
    }
}
