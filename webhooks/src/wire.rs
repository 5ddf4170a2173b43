//! Reading review bodies with memory bounded by the body's size, whatever its shape.
//!
//! A `serde_json::Value` costs tens of bytes per JSON value, so a 3 MiB body of `0,0,0,…` parsed
//! into one becomes hundreds of MiB. The handlers therefore never parse a whole object: a
//! [`Keep`] plan says, per member, what the rules read ([`Keep::Parse`]: a `Value`, counted
//! against a [`Budget`]), what conversion must give back unchanged but never reads
//! ([`Keep::Pass`]: the member's JSON text, borrowed from the body and written back verbatim),
//! and what no rule needs ([`Keep::Drop`]: checked for syntax only). Every kept value and every
//! passed member counts against the budget, which is proportional to the body, so the tree a
//! request builds is at most a small multiple of its body.
//!
//! The plan is followed while the body is parsed ([`Reader::seed`]), so each byte is scanned
//! once: a member the plan descends into is read in the same pass as its parent, and a passed
//! member's text is taken as the scan goes past it.
//!
//! The same reader serves the three endpoints, so they agree on the wire format: a member that
//! the reader reads (parses or descends into) twice in one object is refused with the same error
//! everywhere; passed and dropped text is syntax-checked only (the API server, which wrote it,
//! owns it).

use std::cell::{Cell, RefCell};
use std::fmt;

use serde::Serialize;
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::{Map, Number, Value};

/// Bytes of body per JSON value the reader may keep. A kept value costs up to ~160 bytes (a
/// `Value` and its share of a growing container), so 32 keeps the tree of the worst body (all
/// one-byte values) under 5 times the body; real objects keep one value per ~50 bytes of body
/// or fewer, since `managedFields` and `status` are passed or dropped.
const BODY_BYTES_PER_VALUE: usize = 32;
/// What a passed member costs, in values: its placeholder string and the reference to its text.
const PLACEHOLDER_COST: usize = 2;
/// Values every request may keep beyond the proportional share, so small bodies with many short
/// annotations are not refused.
const BASE_VALUES: usize = 8192;

/// The envelope of a review (`AdmissionReview`, `ConversionReview`): its type and its request,
/// whose shape each endpoint gives. Members it does not name (`response`) are skipped.
#[derive(serde::Deserialize)]
#[serde(bound(deserialize = "R: serde::Deserialize<'de>"))]
pub(crate) struct Envelope<R> {
    #[serde(rename = "apiVersion")]
    pub api_version: Option<String>,
    pub kind: Option<String>,
    pub request: Option<R>,
}

/// What to keep of one JSON value.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Keep {
    /// Parsed into a `Value`.
    Parse,
    /// Kept as its JSON text ([`Passed`]), written back unchanged.
    Pass,
    /// Not kept; left out of the result.
    Drop,
    /// An object read member by member; a value of another type is kept as the plan's
    /// `otherwise` says, except that one to be passed is parsed instead (its text is gone once
    /// its type is seen) and written back as the same JSON.
    Object(&'static Members),
    /// An array whose items follow `items`; a value of another type follows `otherwise`, as
    /// for [`Keep::Object`].
    Array {
        items: &'static Keep,
        otherwise: &'static Keep,
    },
}

/// The plan for the members of an object.
#[derive(Debug)]
pub(crate) struct Members {
    /// Members with a plan of their own.
    pub named: &'static [(&'static str, Keep)],
    /// Every other member.
    pub rest: Keep,
    /// The value when it is not an object.
    pub otherwise: Keep,
}

impl Members {
    /// `named` as they say; every other member, and a value that is not an object, passed as
    /// it came (what conversion does not read, it writes back unchanged).
    pub(crate) const fn passing_the_rest(named: &'static [(&'static str, Keep)]) -> Self {
        Self {
            named,
            rest: Keep::Pass,
            otherwise: Keep::Pass,
        }
    }

    fn plan(&self, key: &str) -> Keep {
        self.named
            .iter()
            .find(|(name, _)| *name == key)
            .map_or(self.rest, |(_, keep)| *keep)
    }
}

/// How many JSON values a request may still keep.
#[derive(Debug)]
pub(crate) struct Budget {
    left: Cell<usize>,
    limit: usize,
}

impl Budget {
    /// The budget of a request with a body of `body_len` bytes.
    pub(crate) fn for_body(body_len: usize) -> Self {
        let limit = body_len / BODY_BYTES_PER_VALUE + BASE_VALUES;
        Self {
            left: Cell::new(limit),
            limit,
        }
    }

    fn charge<E: de::Error>(&self, values: usize, position: &Position) -> Result<(), E> {
        match self.left.get().checked_sub(values) {
            Some(left) => {
                self.left.set(left);
                Ok(())
            }
            None => Err(E::custom(ReadError::OverBudget {
                path: position.render(),
                limit: self.limit,
            })),
        }
    }
}

/// Why the reader refused a body. Rendered into serde_json's error (which adds the position).
#[derive(Debug, thiserror::Error)]
pub(crate) enum ReadError {
    /// More values than the budget allows.
    #[error(
        "{path}: the review holds more JSON values than a body of its size may ({limit}); a TrustyAIService is far smaller"
    )]
    OverBudget { path: String, limit: usize },
    /// A member the webhook reads appears twice.
    #[error("{path}: duplicate key {key:?}")]
    DuplicateKey { path: String, key: String },
}

/// The JSON text of passed members, borrowed from the body, and the placeholder strings that
/// stand for them in the tree. A placeholder carries a per-request random prefix, so no string
/// in an object can be taken for one.
pub(crate) struct Passed<'a> {
    prefix: String,
    texts: RefCell<Vec<&'a RawValue>>,
}

impl<'a> Passed<'a> {
    pub(crate) fn new() -> Self {
        use std::hash::{BuildHasher, Hasher};
        let random = std::collections::hash_map::RandomState::new()
            .build_hasher()
            .finish();
        Self {
            prefix: format!("\u{0}passed-{random:016x}-"),
            texts: RefCell::new(Vec::new()),
        }
    }

    /// Forgets the texts kept so far, so that one `Passed` (and its prefix) serves the next
    /// object of a review.
    pub(crate) fn clear(&self) {
        self.texts.borrow_mut().clear();
    }

    fn placeholder(&self, raw: &'a RawValue) -> Value {
        let mut texts = self.texts.borrow_mut();
        let index = texts.len();
        texts.push(raw);
        // Not `format!`: with one placeholder per passed member, the formatting machinery is a
        // measurable share of converting a small object.
        let mut digits = itoa::Buffer::new();
        let digits = digits.format(index);
        let mut placeholder = String::with_capacity(self.prefix.len() + digits.len());
        placeholder.push_str(&self.prefix);
        placeholder.push_str(digits);
        Value::String(placeholder)
    }

    fn text(&self, value: &str) -> Option<&'a RawValue> {
        let index: usize = value.strip_prefix(&self.prefix)?.parse().ok()?;
        self.texts.borrow().get(index).copied()
    }

    /// `value` for serialization, with every placeholder written as the text it stands for.
    pub(crate) fn restore<'v>(&'v self, value: &'v Value) -> Restored<'v, 'a> {
        Restored {
            value,
            passed: self,
        }
    }
}

/// A value whose placeholders serialize as the passed JSON text.
pub(crate) struct Restored<'v, 'a> {
    value: &'v Value,
    passed: &'v Passed<'a>,
}

impl Serialize for Restored<'_, '_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::{SerializeMap, SerializeSeq};
        match self.value {
            Value::String(s) => match self.passed.text(s) {
                Some(raw) => raw.serialize(serializer),
                None => serializer.serialize_str(s),
            },
            Value::Array(items) => {
                let mut seq = serializer.serialize_seq(Some(items.len()))?;
                for item in items {
                    seq.serialize_element(&self.passed.restore(item))?;
                }
                seq.end()
            }
            Value::Object(members) => {
                let mut map = serializer.serialize_map(Some(members.len()))?;
                for (key, value) in members {
                    map.serialize_entry(key, &self.passed.restore(value))?;
                }
                map.end()
            }
            other => other.serialize(serializer),
        }
    }
}

/// One step of the reader's position.
#[derive(Clone, Debug)]
enum Step {
    Key(String),
    Index(usize),
}

/// Where the reader is, for error messages (`request.object.spec.storage`).
#[derive(Debug, Default)]
struct Position(RefCell<Vec<Step>>);

impl Position {
    fn render(&self) -> String {
        let steps = self.0.borrow();
        if steps.is_empty() {
            return "the body".to_owned();
        }
        let mut out = String::new();
        for step in steps.iter() {
            if !out.is_empty() {
                out.push('.');
            }
            match step {
                Step::Key(key) => out.push_str(key),
                Step::Index(index) => out.push_str(&index.to_string()),
            }
        }
        out
    }

    fn push(&self, step: Step) {
        self.0.borrow_mut().push(step);
    }

    fn pop(&self) {
        self.0.borrow_mut().pop();
    }

    /// Runs `read` one member deeper, at `key`, and gives the key back (it is not copied: most
    /// keys are read without an error to name them in).
    fn within<T>(&self, key: String, read: impl FnOnce() -> T) -> (String, T) {
        self.0.borrow_mut().push(Step::Key(key));
        let result = read();
        match self.0.borrow_mut().pop() {
            Some(Step::Key(key)) => (key, result),
            _ => (String::new(), result),
        }
    }
}

/// What one read shares: the budget, the passed texts and the position.
pub(crate) struct Reader<'r, 'a> {
    budget: &'r Budget,
    passed: &'r Passed<'a>,
    position: Position,
}

impl<'r, 'a> Reader<'r, 'a> {
    pub(crate) fn new(budget: &'r Budget, passed: &'r Passed<'a>) -> Self {
        Self {
            budget,
            passed,
            position: Position::default(),
        }
    }

    /// Reads `raw` (the value at `path`, dotted) as `keep` says. `Ok(None)` when the plan
    /// drops it.
    pub(crate) fn read(
        &self,
        raw: &'a RawValue,
        keep: Keep,
        path: &str,
    ) -> Result<Option<Value>, serde_json::Error> {
        let mut de = serde_json::Deserializer::from_str(raw.get());
        self.seed(keep, path).deserialize(&mut de)
    }

    /// Reads the value a deserializer is at (the value at `path`, dotted) as `keep` says, in the
    /// same pass as the deserializer's own: nothing is scanned twice.
    pub(crate) fn seed<'v>(&'v self, keep: Keep, path: &str) -> PlanSeed<'v, 'r, 'a> {
        let mut steps = self.position.0.borrow_mut();
        steps.clear();
        steps.extend(path.split('.').map(|key| Step::Key(key.to_owned())));
        PlanSeed { reader: self, keep }
    }

    /// Charges one value, refusing once the budget is spent.
    fn charge<E: de::Error>(&self, values: usize) -> Result<(), E> {
        self.budget.charge(values, &self.position)
    }
}

/// Reads one value as its plan says, from the deserializer positioned at it. Objects and arrays
/// the plan descends into are read member by member in the same pass; only passed members are
/// taken as text (their one scan).
pub(crate) struct PlanSeed<'v, 'r, 'a> {
    reader: &'v Reader<'r, 'a>,
    keep: Keep,
}

impl<'de: 'a, 'a> DeserializeSeed<'de> for PlanSeed<'_, '_, 'a> {
    type Value = Option<Value>;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Option<Value>, D::Error> {
        let reader = self.reader;
        match self.keep {
            Keep::Drop => <IgnoredAny as serde::Deserialize>::deserialize(d).map(|_| None),
            Keep::Pass => {
                let raw = <&'de RawValue as serde::Deserialize>::deserialize(d)?;
                reader.charge(PLACEHOLDER_COST)?;
                Ok(Some(reader.passed.placeholder(raw)))
            }
            Keep::Parse => ParseSeed { reader }.deserialize(d).map(Some),
            Keep::Object(_) | Keep::Array { .. } => d.deserialize_any(PlanVisitor {
                reader,
                keep: self.keep,
            }),
        }
    }
}

/// The value under an [`Keep::Object`] or [`Keep::Array`] plan, whatever its type.
struct PlanVisitor<'v, 'r, 'a> {
    reader: &'v Reader<'r, 'a>,
    keep: Keep,
}

impl<'v, 'r, 'a> PlanVisitor<'v, 'r, 'a> {
    /// The plan for a value that is not of the planned type. Passing it would need its text,
    /// which is gone once its type is seen; such a value is parsed instead (and written back
    /// as the same JSON). Reviews from the API server never hold one: its schema has the types.
    fn otherwise(&self) -> Keep {
        let otherwise = match self.keep {
            Keep::Object(members) => members.otherwise,
            Keep::Array { otherwise, .. } => *otherwise,
            other => other,
        };
        match otherwise {
            Keep::Drop => Keep::Drop,
            _ => Keep::Parse,
        }
    }

    fn parse(&self) -> Option<ParseSeed<'v, 'r, 'a>> {
        matches!(self.otherwise(), Keep::Parse).then_some(ParseSeed {
            reader: self.reader,
        })
    }
}

/// Scalars under an object or array plan follow the plan's `otherwise`.
macro_rules! otherwise_scalar {
    ($($method:ident($($ty:ty)?)),* $(,)?) => {$(
        fn $method<E: de::Error>(self $(, v: $ty)?) -> Result<Option<Value>, E> {
            match self.parse() {
                Some(parse) => parse.$method($(v as $ty)?).map(Some),
                None => Ok(None),
            }
        }
    )*};
}

impl<'de: 'a, 'a> Visitor<'de> for PlanVisitor<'_, '_, 'a> {
    type Value = Option<Value>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    otherwise_scalar!(
        visit_bool(bool),
        visit_i64(i64),
        visit_u64(u64),
        visit_f64(f64),
        visit_str(&str),
        visit_string(String),
        visit_unit(),
        visit_none(),
    );

    fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Option<Value>, A::Error> {
        let Keep::Object(members) = self.keep else {
            return match self.parse() {
                Some(parse) => parse.visit_map(access).map(Some),
                None => IgnoredAny.visit_map(access).map(|_| None),
            };
        };
        let reader = self.reader;
        reader.charge(1)?;
        let mut out = Map::new();
        while let Some(key) = access.next_key::<String>()? {
            let keep = members.plan(&key);
            if matches!(keep, Keep::Drop) {
                access.next_value::<IgnoredAny>()?;
                continue;
            }
            reader.charge(1)?;
            let (key, value) = reader
                .position
                .within(key, || access.next_value_seed(PlanSeed { reader, keep }));
            let value = value?;
            match out.entry(key) {
                serde_json::map::Entry::Occupied(entry) => {
                    return Err(de::Error::custom(ReadError::DuplicateKey {
                        path: reader.position.render(),
                        key: entry.key().clone(),
                    }));
                }
                serde_json::map::Entry::Vacant(entry) => {
                    if let Some(value) = value {
                        entry.insert(value);
                    }
                }
            }
        }
        Ok(Some(Value::Object(out)))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut access: A) -> Result<Option<Value>, A::Error> {
        let Keep::Array { items, .. } = self.keep else {
            return match self.parse() {
                Some(parse) => parse.visit_seq(access).map(Some),
                None => IgnoredAny.visit_seq(access).map(|_| None),
            };
        };
        let reader = self.reader;
        reader.charge(1)?;
        let mut out = Vec::new();
        for index in 0.. {
            reader.position.push(Step::Index(index));
            let item = access.next_element_seed(PlanSeed {
                reader,
                keep: *items,
            })?;
            reader.position.pop();
            match item {
                Some(Some(value)) => out.push(value),
                Some(None) => {}
                None => break,
            }
        }
        Ok(Some(Value::Array(out)))
    }
}

/// Parses a whole value, charging the budget for every value and refusing duplicate keys.
#[derive(Clone, Copy)]
struct ParseSeed<'v, 'r, 'a> {
    reader: &'v Reader<'r, 'a>,
}

impl<'de> DeserializeSeed<'de> for ParseSeed<'_, '_, '_> {
    type Value = Value;

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for ParseSeed<'_, '_, '_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Value, E> {
        self.reader.charge(1)?;
        Ok(Value::Bool(v))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Value, E> {
        self.reader.charge(1)?;
        Ok(Value::Number(v.into()))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Value, E> {
        self.reader.charge(1)?;
        Ok(Value::Number(v.into()))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        self.reader.charge(1)?;
        Ok(Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Value, E> {
        self.reader.charge(1)?;
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Value, E> {
        self.reader.charge(1)?;
        Ok(Value::String(v))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        self.reader.charge(1)?;
        Ok(Value::Null)
    }

    fn visit_none<E: de::Error>(self) -> Result<Value, E> {
        self.visit_unit()
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut access: A) -> Result<Value, A::Error> {
        self.reader.charge(1)?;
        let mut items = Vec::new();
        loop {
            self.reader.position.push(Step::Index(items.len()));
            let item = access.next_element_seed(self)?;
            self.reader.position.pop();
            match item {
                Some(item) => items.push(item),
                None => break,
            }
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Value, A::Error> {
        self.reader.charge(1)?;
        let mut out = Map::new();
        while let Some(key) = access.next_key::<String>()? {
            if out.contains_key(&key) {
                return Err(de::Error::custom(ReadError::DuplicateKey {
                    path: self.reader.position.render(),
                    key,
                }));
            }
            // The key costs about what a value does.
            self.reader.charge(1)?;
            let (key, value) = self
                .reader
                .position
                .within(key, || access.next_value_seed(self));
            out.insert(key, value?);
        }
        Ok(Value::Object(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const PLAN: Members = Members {
        named: &[
            ("spec", Keep::Parse),
            ("status", Keep::Drop),
            (
                "list",
                Keep::Array {
                    items: &Keep::Parse,
                    otherwise: &Keep::Pass,
                },
            ),
        ],
        rest: Keep::Pass,
        otherwise: Keep::Parse,
    };

    fn read(body: &str) -> Result<String, String> {
        let budget = Budget::for_body(body.len());
        let passed = Passed::new();
        let reader = Reader::new(&budget, &passed);
        let raw: &RawValue = serde_json::from_str(body).map_err(|e| e.to_string())?;
        let value = reader
            .read(raw, Keep::Object(&PLAN), "object")
            .map_err(|e| e.to_string())?
            .unwrap_or(Value::Null);
        serde_json::to_string(&passed.restore(&value)).map_err(|e| e.to_string())
    }

    #[test]
    fn dropped_members_vanish_from_an_otherwise_verbatim_object() {
        let body = r#"{"spec":{"a":1},"status":{"x":[1,2]},"other":{"b" : [1, 2.50, "\u00e9"]}}"#;
        assert_eq!(
            read(body).expect("read"),
            r#"{"spec":{"a":1},"other":{"b" : [1, 2.50, "\u00e9"]}}"#
        );
    }

    #[test]
    fn a_value_of_another_type_follows_otherwise() {
        assert_eq!(read(r#"[1,2]"#).expect("read"), "[1,2]");
        assert_eq!(
            read(r#"{"list":"not a list"}"#).expect("read"),
            r#"{"list":"not a list"}"#
        );
        assert_eq!(
            read(r#"{"list":[{"a":1},2]}"#).expect("read"),
            r#"{"list":[{"a":1},2]}"#
        );
    }

    #[test]
    fn duplicate_keys_are_refused_where_read_with_their_path() {
        let error = read(r#"{"spec":{"a":1,"a":2}}"#).expect_err("duplicate");
        assert!(
            error.contains("object.spec: duplicate key \"a\""),
            "{error}"
        );
        let error = read(r#"{"other":1,"other":2}"#).expect_err("duplicate");
        assert!(error.contains("object: duplicate key \"other\""), "{error}");
    }

    #[test]
    fn a_huge_array_where_values_are_parsed_exceeds_the_budget() {
        let zeros = vec!["0"; 200_000].join(",");
        let error = read(&format!(r#"{{"spec":{{"size":[{zeros}]}}}}"#)).expect_err("budget");
        // The error names where the budget ran out.
        assert!(error.contains("object.spec.size."), "{error}");
        assert!(
            error.contains("the review holds more JSON values"),
            "{error}"
        );
        // The same array passed through costs one value.
        let body = format!(r#"{{"other":[{zeros}]}}"#);
        assert_eq!(read(&body).expect("passed"), body);
    }

    #[test]
    fn strings_equal_to_no_placeholder_are_kept() {
        let body = json!({"spec": {"s": "\u{0}passed-0000000000000000-0"}}).to_string();
        assert_eq!(read(&body).expect("read"), body);
    }
}
