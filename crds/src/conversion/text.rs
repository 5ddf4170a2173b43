//! [`convert_object`](super::convert_object) on an object's JSON text, for the objects the API
//! server sends: the answer is written by copying the input's text, with only what conversion
//! changes rewritten, and no tree of the object is built.
//!
//! It takes the objects whose conversion is the body conversion alone: no converter annotation
//! on the input (so nothing to restore and nothing carried), and, when converting to v1, no
//! v1-only field in the input (which the way back would have to carry). For those, the
//! annotation written is the data for going back and nothing else; [`annotation`] writes it
//! from the scalars the scan collected, as the tree converter renders it. Every other object
//! (and anything this reader is not sure of: a member twice, an escaped key where it looks,
//! a non-scalar where the rules read a scalar, an object with many members or conditions) is
//! declined, and the caller converts it with the tree converter, which has the full rules and
//! names what is wrong.

mod annotation;

use serde_json::Value;
use serde_json::value::RawValue;

use super::Version;
use super::body::{V1_ONLY, canonical_status};
use crate::contract::{CONVERSION_PRESERVED_ANNOTATION, GROUP};
use annotation::{Collected, ConditionEntry};

/// Most members of one object this reader looks into, and most conditions: the duplicate check
/// compares each key with the ones before it, so this bounds its work; real objects stay far
/// below.
const MAX_MEMBERS: usize = 64;

/// Not the common case: convert the object with the tree converter.
#[derive(Debug)]
struct Declined;

type Step<T = ()> = Result<T, Declined>;

/// Converts `object` to `desired_api_version` and appends the result to `out`, when the object
/// is of the common case (see the module documentation). Returns `false`, with `out` as it was,
/// for every other object: the caller converts those with
/// [`convert_object_owned`](super::convert_object_owned), which gives the same result for the
/// objects this function converts.
pub fn convert_object_text(
    object: &RawValue,
    desired_api_version: &str,
    out: &mut Vec<u8>,
) -> bool {
    let Some(to) = Version::from_api_version(desired_api_version) else {
        return false;
    };
    let start = out.len();
    let mut writer = Writer {
        src: object.get(),
        at: 0,
        out,
        to,
        collected: Collected {
            restores: Version::V1,
            spec: [None, None],
            status: [None, None],
            conditions: Vec::new(),
        },
        types: Vec::new(),
        annotations_end: None,
        keys: Vec::with_capacity(MAX_MEMBERS),
    };
    let written = writer.object_top().is_ok();
    if !written {
        out.truncate(start);
    }
    written
}

/// The scan of one object and what it collected for the annotation.
struct Writer<'a, 'o> {
    /// The object's text: valid JSON (a `RawValue`), which the scan relies on.
    src: &'a str,
    at: usize,
    out: &'o mut Vec<u8>,
    to: Version,
    /// What goes into the annotation; `restores` is the version the object came in.
    collected: Collected<'a>,
    /// Each condition `type` seen and how many times, for an entry's `nth`.
    types: Vec<(Option<&'a str>, u64)>,
    /// The keys of the objects being read, outermost first (see [`Self::object`]).
    keys: Vec<&'a str>,
    /// Where the converter's annotation goes (before `metadata.annotations`' closing brace) and
    /// whether a member precedes it there.
    annotations_end: Option<(usize, bool)>,
}

/// Where version-only fields are.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Node {
    Spec,
    Status,
}

impl Node {
    fn paths(self) -> &'static [&'static [&'static str]] {
        match self {
            Node::Spec => V1_ONLY.spec,
            Node::Status => V1_ONLY.status,
        }
    }
}

const _: () = assert!(V1_ONLY.spec.len() == 2 && V1_ONLY.status.len() == 2);

impl<'a> Writer<'a, '_> {
    fn object_top(&mut self) -> Step {
        let start = self.out.len();
        let mut first = true;
        self.object(|w, key, wrote| {
            if std::mem::take(&mut first) {
                // The API server writes `apiVersion` first; anything else goes the long way.
                if key != "apiVersion" {
                    return Err(Declined);
                }
                let value = w.read_scalar()?;
                let from = value
                    .strip_prefix('"')
                    .and_then(|v| v.strip_suffix('"'))
                    .and_then(Version::from_api_version)
                    .ok_or(Declined)?;
                w.collected.restores = from;
                w.key(key, wrote);
                for part in ["\"", GROUP, "/", w.to.name(), "\""] {
                    w.out.extend_from_slice(part.as_bytes());
                }
                return Ok(());
            }
            match key {
                "metadata" if w.peek() == b'{' => {
                    w.key(key, wrote);
                    w.metadata()
                }
                "spec" if w.peek() == b'{' => {
                    w.key(key, wrote);
                    w.fields(Node::Spec, 0b11, 0)
                }
                "status" if w.peek() == b'{' => {
                    w.key(key, wrote);
                    w.fields(Node::Status, 0b11, 0)
                }
                _ => w.copy(key, wrote),
            }
        })?;
        if first {
            // `{}`: no apiVersion.
            return Err(Declined);
        }
        if self.collected.restores == self.to {
            // Written back as it came; the scan only checked that the tree converter would
            // read it the same way.
            self.out.truncate(start);
            self.out.extend_from_slice(self.src.as_bytes());
            return Ok(());
        }
        self.annotate()
    }

    /// Puts the data for going back into `metadata.annotations`, as the tree converter does.
    fn annotate(&mut self) -> Step {
        if self.collected.is_empty() {
            return Ok(());
        }
        let (at, preceded) = self.annotations_end.ok_or(Declined)?;
        let member = self
            .collected
            .member(CONVERSION_PRESERVED_ANNOTATION, preceded)?;
        self.out.splice(at..at, member);
        Ok(())
    }

    fn metadata(&mut self) -> Step {
        self.object(|w, key, wrote| match key {
            "annotations" if w.peek() == b'{' => {
                w.key(key, wrote);
                w.annotations()
            }
            "name" | "namespace" => w.copy_scalar(key, wrote).map(drop),
            _ => w.copy(key, wrote),
        })
    }

    fn annotations(&mut self) -> Step {
        let mut any = false;
        self.object(|w, key, wrote| {
            if key == CONVERSION_PRESERVED_ANNOTATION {
                return Err(Declined);
            }
            any = true;
            w.copy(key, wrote)
        })?;
        // Before the closing brace just written.
        self.annotations_end = Some((self.out.len() - 1, any));
        Ok(())
    }

    /// `spec` or `status`, or an object below them (at `depth`) on the way to the version-only
    /// fields whose indices are set in `paths_here`; `status` also holds the conditions.
    fn fields(&mut self, node: Node, paths_here: u8, depth: usize) -> Step {
        let paths = node.paths();
        self.object(|w, key, wrote| {
            let mut leaf = None;
            let mut deeper = 0u8;
            for (i, path) in paths.iter().enumerate() {
                if paths_here & (1 << i) != 0 && path.get(depth) == Some(&key) {
                    if path.len() == depth + 1 {
                        leaf = Some(i);
                    } else {
                        deeper |= 1 << i;
                    }
                }
            }
            if let Some(i) = leaf {
                return w.take(node, i);
            }
            if deeper != 0 && w.peek() == b'{' {
                w.key(key, wrote);
                return w.fields(node, deeper, depth + 1);
            }
            if node == Node::Status && depth == 0 && key == "conditions" && w.peek() == b'[' {
                w.key(key, wrote);
                return w.conditions();
            }
            w.copy(key, wrote)
        })
    }

    /// A version-only field: taken into the annotation when converting from v1; converting to
    /// v1 with one in the input is the long way's (the way back carries it).
    fn take(&mut self, node: Node, index: usize) -> Step {
        if self.collected.restores != Version::V1 {
            return Err(Declined);
        }
        let value = self.read_scalar()?;
        let slots = match node {
            Node::Spec => &mut self.collected.spec,
            Node::Status => &mut self.collected.status,
        };
        *slots.get_mut(index).ok_or(Declined)? = Some(value);
        Ok(())
    }

    fn conditions(&mut self) -> Step {
        self.expect(b'[')?;
        self.out.push(b'[');
        self.whitespace();
        if self.peek() == b']' {
            self.at += 1;
            self.out.push(b']');
            return Ok(());
        }
        for count in 0.. {
            if count == MAX_MEMBERS {
                return Err(Declined);
            }
            if count > 0 {
                self.out.push(b',');
            }
            self.whitespace();
            if self.peek() != b'{' {
                return Err(Declined);
            }
            self.condition()?;
            self.whitespace();
            match self.next_byte()? {
                b',' => continue,
                b']' => break,
                _ => return Err(Declined),
            }
        }
        self.out.push(b']');
        Ok(())
    }

    /// One condition: its status spelled the desired version's way, its v1-only fields taken,
    /// and an entry for the annotation when the way back needs one.
    fn condition(&mut self) -> Step {
        let mut seen = [None; 3];
        let mut original_status = None;
        let mut only = [None; V1_ONLY.condition.len()];
        self.object(|w, key, wrote| match key {
            "type" => {
                seen[0] = Some(w.copy_scalar(key, wrote)?);
                Ok(())
            }
            "lastTransitionTime" => {
                seen[2] = Some(w.copy_scalar(key, wrote)?);
                Ok(())
            }
            "status" => {
                let raw = w.read_scalar()?;
                w.key(key, wrote);
                let rendered = match raw.strip_prefix('"').and_then(|r| r.strip_suffix('"')) {
                    Some(text) => {
                        let canonical = quoted(canonical_status(text));
                        if canonical != raw {
                            original_status = Some(raw);
                        }
                        match w.to {
                            Version::V1 => canonical,
                            Version::V1alpha1 => raw,
                        }
                    }
                    // Not a string: copied both ways, nothing to restore.
                    None => raw,
                };
                w.out.extend_from_slice(rendered.as_bytes());
                seen[1] = Some(rendered);
                Ok(())
            }
            _ => match V1_ONLY.condition.iter().position(|field| *field == key) {
                Some(index) => {
                    if w.collected.restores != Version::V1 {
                        return Err(Declined);
                    }
                    only[index] = Some(w.read_scalar()?);
                    Ok(())
                }
                None => w.copy(key, wrote),
            },
        })?;
        let type_key = match seen[0] {
            None => None,
            Some(raw) => Some(
                raw.strip_prefix('"')
                    .and_then(|r| r.strip_suffix('"'))
                    .ok_or(Declined)?,
            ),
        };
        let nth = match self.types.iter_mut().find(|(seen, _)| *seen == type_key) {
            Some((_, count)) => {
                *count += 1;
                *count - 1
            }
            None => {
                self.types.push((type_key, 1));
                0
            }
        };
        if original_status.is_none() && only.iter().all(Option::is_none) {
            return Ok(());
        }
        self.collected.conditions.push(ConditionEntry {
            seen,
            nth,
            status: original_status,
            only,
        });
        Ok(())
    }

    /// Walks one object (the cursor at its `{`), writing `{`, what `member` writes for each
    /// member, and `}`. `member` gets the key (unescaped: a key with an escape is declined) and
    /// whether a member was written before (for the comma), and must consume the value. A key
    /// twice is declined, as is an object of more than [`MAX_MEMBERS`] members.
    fn object(&mut self, mut member: impl FnMut(&mut Self, &'a str, &mut bool) -> Step) -> Step {
        self.expect(b'{')?;
        self.out.push(b'{');
        // This object's keys are the stack's above `base`; a nested object's go above them
        // while it is read, and are gone again when it returns.
        let base = self.keys.len();
        let mut wrote = false;
        self.whitespace();
        if self.peek() == b'}' {
            self.at += 1;
            self.out.push(b'}');
            return Ok(());
        }
        loop {
            self.whitespace();
            let key = self.key_text()?;
            let keys = &self.keys[base..];
            if keys.len() == MAX_MEMBERS || keys.contains(&key) {
                return Err(Declined);
            }
            self.keys.push(key);
            self.whitespace();
            self.expect(b':')?;
            self.whitespace();
            member(self, key, &mut wrote)?;
            self.whitespace();
            match self.next_byte()? {
                b',' => {}
                b'}' => break,
                _ => return Err(Declined),
            }
        }
        self.keys.truncate(base);
        self.out.push(b'}');
        Ok(())
    }

    /// Writes `"key":`, after a comma when a member was written before.
    fn key(&mut self, key: &str, wrote: &mut bool) {
        if std::mem::replace(wrote, true) {
            self.out.push(b',');
        }
        self.out.push(b'"');
        self.out.extend_from_slice(key.as_bytes());
        self.out.extend_from_slice(b"\":");
    }

    /// Copies a member as it came.
    fn copy(&mut self, key: &str, wrote: &mut bool) -> Step {
        let value = self.value()?;
        self.key(key, wrote);
        self.out.extend_from_slice(value.as_bytes());
        Ok(())
    }

    /// Copies a member the tree converter parses (see [`Self::read_scalar`]); its text.
    fn copy_scalar(&mut self, key: &str, wrote: &mut bool) -> Step<&'a str> {
        let value = self.read_scalar()?;
        self.key(key, wrote);
        self.out.extend_from_slice(value.as_bytes());
        Ok(value)
    }

    /// A value the tree converter parses: declined unless it is a scalar it reads the same way
    /// (a string without escapes, `true`, `false`, `null`, or a number it can represent), so
    /// that both accept and refuse the same objects.
    fn read_scalar(&mut self) -> Step<&'a str> {
        let value = self.value()?;
        match value.as_bytes().first() {
            Some(b'"') if !value.contains('\\') => Ok(value),
            Some(b't' | b'f' | b'n') => Ok(value),
            Some(b'-' | b'0'..=b'9') => parse(value).map(|_| value),
            _ => Err(Declined),
        }
    }

    /// The text of the next value, which is valid JSON (the whole object is).
    fn value(&mut self) -> Step<&'a str> {
        let start = self.at;
        match self.peek() {
            b'"' => self.at = self.string_end(start)?,
            b'{' | b'[' => {
                let mut depth = 0usize;
                loop {
                    match self.next_byte()? {
                        b'"' => self.at = self.string_end(self.at - 1)?,
                        b'{' | b'[' => depth += 1,
                        b'}' | b']' => {
                            depth = depth.checked_sub(1).ok_or(Declined)?;
                            if depth == 0 {
                                break;
                            }
                        }
                        _ => {}
                    }
                }
            }
            _ => {
                while !matches!(
                    self.peek(),
                    b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r' | 0
                ) {
                    self.at += 1;
                }
            }
        }
        if self.at == start {
            return Err(Declined);
        }
        Ok(&self.src[start..self.at])
    }

    /// The position after the string whose opening quote is at `start`.
    fn string_end(&self, start: usize) -> Step<usize> {
        let bytes = self.src.as_bytes();
        let mut at = start + 1;
        // Jumps from quote or backslash to the next: most of an object's bytes are in long
        // strings (`kubectl apply`'s copy of the object, `managedFields`' keys).
        loop {
            let found =
                memchr::memchr2(b'"', b'\\', bytes.get(at..).ok_or(Declined)?).ok_or(Declined)?;
            at += found;
            match bytes.get(at) {
                Some(b'"') => return Ok(at + 1),
                _ => at += 2,
            }
        }
    }

    /// A key's text between its quotes; a key with an escape is declined (comparing it would
    /// need unescaping).
    fn key_text(&mut self) -> Step<&'a str> {
        if self.peek() != b'"' {
            return Err(Declined);
        }
        let start = self.at;
        self.at = self.string_end(start)?;
        let key = &self.src[start + 1..self.at - 1];
        if key.contains('\\') {
            return Err(Declined);
        }
        Ok(key)
    }

    fn peek(&self) -> u8 {
        self.src.as_bytes().get(self.at).copied().unwrap_or(0)
    }

    fn next_byte(&mut self) -> Step<u8> {
        let byte = self.src.as_bytes().get(self.at).copied().ok_or(Declined)?;
        self.at += 1;
        Ok(byte)
    }

    fn expect(&mut self, byte: u8) -> Step {
        if self.next_byte()? == byte {
            Ok(())
        } else {
            Err(Declined)
        }
    }

    fn whitespace(&mut self) {
        while matches!(self.peek(), b' ' | b'\t' | b'\n' | b'\r') {
            self.at += 1;
        }
    }
}

fn parse(raw: &str) -> Step<Value> {
    serde_json::from_str(raw).map_err(|_| Declined)
}

/// A condition status as a JSON string.
fn quoted(status: &'static str) -> &'static str {
    match status {
        "True" => "\"True\"",
        "False" => "\"False\"",
        _ => "\"Unknown\"",
    }
}
