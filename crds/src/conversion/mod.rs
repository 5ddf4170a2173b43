//! Conversion between `trustyai.opendatahub.io/v1alpha1` and `trustyai.opendatahub.io/v1`, as
//! pure functions on JSON values: [`convert_object`] converts one object. The conversion webhook
//! (`trustyai_webhooks::conversion::convert_review`) reads each `ConversionReview` and hands
//! every object in turn to [`convert_object_text`], which converts the objects of the usual
//! shape on their JSON text without building a tree, and the others to
//! [`convert_object_owned`]; both give the same result (a property test compares them).
//!
//! # Rules
//!
//! - **Total.** Objects are converted as JSON, not through the typed structs, so every stored
//!   object converts: missing `metadata`, `spec` or `status`, unknown fields, out-of-range values
//!   and wrong types are carried as they are (validation is not conversion's job, and one object
//!   that fails conversion makes every list and watch of the resource fail). Only a non-object,
//!   an `apiVersion` that is not one of ours, or an unknown desired version is refused.
//! - **Only what must change changes.** An object already in the desired version is returned
//!   unchanged. Otherwise `apiVersion` is rewritten, `kind` and `metadata` are copied (except the
//!   converter's own annotation), and so is every field both versions share.
//! - **Deterministic.** No clock, no randomness, no invented values (the Go operator stamps
//!   `Now()` and `metadata.generation` into fields v1alpha1 did not have; this converter
//!   doesn't).
//! - **Lossless both ways.** Converting to the other version and back gives the input again, as
//!   a JSON value (the order of object members is not kept; the API server does not keep it
//!   either), within the limits below.
//!
//! # What differs between the versions
//!
//! | | v1alpha1 | v1 |
//! |---|---|---|
//! | `spec.image`, `spec.storage.retention` | absent | present |
//! | `status.observedGeneration`, `status.image` | absent | present |
//! | `status.conditions[].observedGeneration` | absent | present |
//! | `status.conditions[].status` | any string | `True`, `False` or `Unknown` |
//!
//! v1 → v1alpha1 moves the v1-only fields into the annotation and copies condition statuses.
//! v1alpha1 → v1 maps a condition status to `True`/`False` by case-insensitive match and anything
//! else to `Unknown`, and keeps the original spelling (`true`, `garbage`) in the annotation. Each
//! way puts back what the annotation it finds still applies to, and removes that annotation.
//!
//! # The annotation
//!
//! [`CONVERSION_PRESERVED_ANNOTATION`]'s value is compact JSON (keys in this order, empty parts
//! left out), for example on a v1alpha1 object:
//!
//! ```json
//! {"restores":"v1",
//!  "spec":{"image":"quay.io/trustyai/trustyai-service:v0.28.0","storage":{"retention":"Delete"}},
//!  "status":{"observedGeneration":3},
//!  "conditions":[{"seen":{"type":"Ready","status":"True","lastTransitionTime":"2025-01-01T00:00:00Z"},
//!                 "restore":{"observedGeneration":3}}],
//!  "carried":{"json":{…},"regenerated":"…"},
//!  "created":"annotations",
//!  "truncated":true}
//! ```
//!
//! - `restores`: the version this data restores (the other one). Any other value, or a value
//!   that is not this format, is not applied.
//! - `spec`, `status`: the fields only that version has, nested as in the object. They go back
//!   only into a parent that still exists and only where the object has no value of its own:
//!   `spec.storage` removed through v1alpha1 does not come back for its `retention`.
//! - `conditions`: per condition, matched by `type` (and `nth`, the rank among conditions of the
//!   same type, when a v1alpha1 list holds a type twice). `seen` is the condition's `type`,
//!   `status` and `lastTransitionTime` as this conversion rendered them; `restore` holds the
//!   original `status` spelling and the fields only the other version has. An entry applies only
//!   while the condition still has exactly what `seen` says, so a status changed through the
//!   other version wins over the kept copy, and a condition removed there does not come back.
//! - `carried`: the annotation the input object had, kept verbatim (`json` when it is JSON as
//!   this converter prints it, `value` otherwise, neither when there was none) when the way back
//!   would not write it again by itself (it was stale, or edited). `regenerated` is what the way
//!   back would write; the carried value replaces exactly that, so it is restored only if nothing
//!   it depends on changed.
//! - `created`: `annotations` or `metadata` when the conversion created that container to hold
//!   the annotation; the way back removes it again if it is empty.
//! - `truncated`: parts were dropped to respect the size bound.
//!
//! # Limits
//!
//! - **Size.** The value is at most 32 KiB. Over that, whole parts are dropped deterministically:
//!   first any part larger than the bound on its own, then, least useful first, the carried
//!   annotation, condition entries, `status` fields and `spec` fields, the largest first within
//!   each. Dropped data is not restored (a v1 object
//!   then lacks those fields, and the operator's defaults apply). Objects within the CRD's limits
//!   stay far below the bound.
//! - **Non-integer numbers.** The annotation is read back with serde_json, which parses decimals
//!   of up to 15 significant digits exactly; a longer one (only possible in a field whose schema
//!   says integer, so never in an object the API server accepted) may come back one unit off in
//!   the last place.
//! - **Odd metadata.** When `metadata` or `metadata.annotations` is not an object (the API server
//!   never sends such an object) nothing can be kept: the v1-only fields are dropped.
//! - **v1-only fields in a v1alpha1 object.** The API server prunes them; if one is there anyway
//!   it is carried to v1 as it is and, on the way back, moved into the annotation.
//! - **Status writes.** The API server keeps `metadata` unchanged on a write to the `status`
//!   subresource, so a v1alpha1 spelling such as `true` written through v1alpha1's status is
//!   stored as v1's `True` and read back through v1alpha1 as `True`.
//!
//! [`CONVERSION_PRESERVED_ANNOTATION`]: crate::contract::CONVERSION_PRESERVED_ANNOTATION

mod body;
mod meta;
mod preserved;
mod text;

use std::borrow::Cow;

use serde_json::{Map, Value};

use crate::contract::{DEPRECATED_VERSION, GROUP, STORAGE_VERSION};
use meta::Shape;
use preserved::{Carried, Preserved};
pub use text::convert_object_text;

/// Why an object or a review could not be converted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConversionError {
    /// The desired API version is not one this converter serves.
    #[error(
        "cannot convert to {desired:?}: the desired API version must be {GROUP}/{STORAGE_VERSION} or {GROUP}/{DEPRECATED_VERSION}"
    )]
    UnknownDesiredVersion {
        /// The `desiredAPIVersion` asked for.
        desired: String,
    },
    /// The value to convert is not a JSON object.
    #[error("the value to convert is a JSON {found}, not an object")]
    NotAnObject {
        /// The JSON type found (`array`, `string`, …).
        found: &'static str,
    },
    /// The object has no `apiVersion`.
    #[error("the object has no apiVersion")]
    MissingApiVersion,
    /// The object's `apiVersion` is not one of this resource's versions.
    #[error(
        "the object's apiVersion {found} is neither {GROUP}/{STORAGE_VERSION} nor {GROUP}/{DEPRECATED_VERSION}"
    )]
    UnknownApiVersion {
        /// The `apiVersion` found, as JSON (quoted when it is a string).
        found: String,
    },
}

/// The two served versions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Version {
    V1,
    V1alpha1,
}

impl Version {
    fn from_api_version(api_version: &str) -> Option<Self> {
        match api_version.split_once('/') {
            Some((GROUP, STORAGE_VERSION)) => Some(Version::V1),
            Some((GROUP, DEPRECATED_VERSION)) => Some(Version::V1alpha1),
            _ => None,
        }
    }

    /// The version's name, as in `apiVersion` after the group.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Version::V1 => STORAGE_VERSION,
            Version::V1alpha1 => DEPRECATED_VERSION,
        }
    }

    fn api_version(self) -> String {
        format!("{GROUP}/{}", self.name())
    }
}

/// Whether `api_version` is one of the two versions this converter serves.
pub fn is_served(api_version: &str) -> bool {
    Version::from_api_version(api_version).is_some()
}

/// Whether the JSON pointer `pointer` is at or below a `spec` field only v1 has (e.g.
/// `/spec/storage/retention`): a v1alpha1 object must not be given it.
pub fn is_v1_only_spec_pointer(pointer: &str) -> bool {
    body::V1_ONLY.spec.iter().any(|path| {
        let field = format!("/spec/{}", path.join("/"));
        pointer == field || pointer.starts_with(&format!("{field}/"))
    })
}

/// Converts one TrustyAIService, given as JSON, to `desired_api_version`
/// (`trustyai.opendatahub.io/v1` or `trustyai.opendatahub.io/v1alpha1`). An object already in
/// that version is returned unchanged. See the module documentation for the rules.
pub fn convert_object(object: &Value, desired_api_version: &str) -> Result<Value, ConversionError> {
    let to = Version::from_api_version(desired_api_version).ok_or_else(|| {
        ConversionError::UnknownDesiredVersion {
            desired: desired_api_version.to_owned(),
        }
    })?;
    let from = source_version(object)?;
    let Value::Object(map) = object else {
        return Err(ConversionError::NotAnObject {
            found: json_type(object),
        });
    };
    if from == to {
        return Ok(object.clone());
    }
    Ok(Value::Object(convert(map.clone(), from, to, 0)))
}

/// [`convert_object`] on an object the caller gives away: nothing is copied but the few fields
/// the annotation needs (the conversion webhook owns the objects of its review). On error the
/// object is handed back, for the message to name it.
pub fn convert_object_owned(
    object: Value,
    desired_api_version: &str,
) -> Result<Value, (ConversionError, Value)> {
    match Version::from_api_version(desired_api_version) {
        Some(desired) => convert_owned(object, desired),
        None => Err((
            ConversionError::UnknownDesiredVersion {
                desired: desired_api_version.to_owned(),
            },
            object,
        )),
    }
}

fn convert_owned(object: Value, desired: Version) -> Result<Value, (ConversionError, Value)> {
    let from = match source_version(&object) {
        Ok(from) => from,
        Err(error) => return Err((error, object)),
    };
    match object {
        Value::Object(map) if from != desired => Ok(Value::Object(convert(map, from, desired, 0))),
        same => Ok(same),
    }
}

/// The version `object` is in, or why it is not one of ours.
fn source_version(object: &Value) -> Result<Version, ConversionError> {
    let Value::Object(map) = object else {
        return Err(ConversionError::NotAnObject {
            found: json_type(object),
        });
    };
    match map.get("apiVersion") {
        None => Err(ConversionError::MissingApiVersion),
        Some(found) => found
            .as_str()
            .and_then(Version::from_api_version)
            .ok_or_else(|| ConversionError::UnknownApiVersion {
                found: found.to_string(),
            }),
    }
}

/// The object in the storage version (v1), the version the defaulting and validation rules are
/// written for: what the admission webhooks and the offline `validate` command both judge. An
/// object already in v1 is borrowed, not copied (the usual case on the webhooks' hot path).
pub fn in_storage_version(object: &Value) -> Result<Cow<'_, Value>, ConversionError> {
    let v1 = format!("{GROUP}/{STORAGE_VERSION}");
    if object.get("apiVersion").and_then(Value::as_str) == Some(v1.as_str()) {
        return Ok(Cow::Borrowed(object));
    }
    convert_object(object, &v1).map(Cow::Owned)
}

/// `namespace/name` of an object, for messages (`without a name` when it has none).
pub fn describe(object: &Value) -> String {
    let field = |name: &str| {
        object
            .get("metadata")
            .and_then(|m| m.get(name))
            .and_then(Value::as_str)
    };
    match (field("namespace"), field("name")) {
        (Some(namespace), Some(name)) => format!("{namespace}/{name}"),
        (None, Some(name)) => name.to_owned(),
        _ => "without a name".to_owned(),
    }
}

fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// How deeply carried annotations are followed when checking that restoring one gives the
/// input back. Each level is a carried annotation inside a carried annotation, which only
/// repeated edits of stale objects through both versions produce; the size bound keeps real
/// nesting far below this.
const MAX_NESTING: usize = 16;

/// Converts an object between the two versions (`from` ≠ `to`); `depth` counts the checks of
/// carried annotations this conversion runs inside.
///
/// Besides the body, it chooses the converter annotation of the output, the first that works:
/// 1. the annotation the input carries from the other version, when it belongs to this state
///    (its `regenerated` is what this conversion would write) and converting back with it gives
///    the input again;
/// 2. the data for restoring `from` ("own"), when converting back writes the input's annotation
///    again by itself;
/// 3. own data carrying the input's annotation verbatim, for the way back to give it back.
fn convert(
    mut out: Map<String, Value>,
    from: Version,
    to: Version,
    depth: usize,
) -> Map<String, Value> {
    let taken = meta::take(&mut out);
    let incoming = taken.as_ref().and_then(|a| Preserved::parse(a, to));
    // The input as it came is needed only to check a carried annotation (rare: objects edited
    // through both versions), so only then is it copied.
    let object = match (&taken, incoming.as_ref().and_then(|p| p.carried.as_ref())) {
        (Some(annotation), Some(_)) => {
            let mut object = out.clone();
            meta::put(&mut object, annotation.clone());
            Some(object)
        }
        _ => None,
    };
    out.insert("apiVersion".into(), Value::String(to.api_version()));
    if let Some(created) = incoming.as_ref().and_then(|p| p.created) {
        meta::remove_created(&mut out, created);
    }
    // Where an annotation would go now; the way back sees the same after removing ours.
    let shape = Shape::of(&out);

    let nothing = Preserved::new(to);
    let own = body::convert(&mut out, from, to, incoming.as_ref().unwrap_or(&nothing));
    let own_text = finish_ref(&own, shape);

    if let Some(carried) = incoming.and_then(|p| p.carried)
        && let Some(object) = object
        && carried.regenerated == own_text
        && depth < MAX_NESTING
    {
        let mut candidate = out.clone();
        if let Some(annotation) = carried.annotation {
            meta::put(&mut candidate, annotation);
        }
        if convert(candidate.clone(), to, from, depth + 1) == object {
            return candidate;
        }
    }

    // What the way back writes when given our own data: the body conversion back, which does
    // not depend on anything carried.
    let regenerated = {
        // Only the fields the data depends on are copied, not the object (its metadata, with
        // managedFields, is most of a stored object, and most of `status` is messages).
        let mut back = body::projection(&out);
        finish(body::convert(&mut back, to, from, &own), shape)
    };
    let annotation = if taken == regenerated.clone().map(Value::String) {
        own_text
    } else {
        let mut own = own;
        own.carried = Some(Carried {
            annotation: taken,
            regenerated,
        });
        finish(own, shape)
    };
    if let Some(annotation) = annotation {
        meta::put(&mut out, Value::String(annotation));
    }
    out
}

/// The annotation value for `data`, or `None` when there is nothing to keep or nowhere to keep
/// it.
fn finish(mut data: Preserved, shape: Shape) -> Option<String> {
    if data.is_empty() || !shape.writable() {
        return None;
    }
    data.created = shape.created();
    Some(data.render())
}

/// [`finish`] of data that is used again afterwards: copied only when it must be truncated.
fn finish_ref(data: &Preserved, shape: Shape) -> Option<String> {
    if data.is_empty() || !shape.writable() {
        return None;
    }
    data.render_fitting(shape.created())
        .or_else(|| finish(data.clone(), shape))
}

#[cfg(test)]
mod tests;
