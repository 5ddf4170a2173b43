//! `POST /convert`: the CRD conversion webhook. The rules are `trustyai_crds::conversion`'s; this
//! handler reads the `ConversionReview` with the shared reader (`wire`) and writes the
//! answer.
//!
//! Objects are streamed, in the same pass that reads the review: each object's text is taken
//! from the body as the scan goes past it, converted, written to the answer, and left behind
//! before the next one is read. An object of the usual shape is converted on its text
//! (`trustyai_crds::conversion::convert_object_text`: copied, with only what conversion changes
//! rewritten); any other is read into a small tree (the members it changes parsed, everything
//! else, `managedFields` included, kept as JSON text and written back verbatim) and converted
//! by the tree converter, which gives the same answer for the objects the text converter takes.
//! An object already in the desired version is written back as it was read. So a request costs
//! about its body twice (the body and the answer) plus one object's small tree, whatever the
//! objects hold, and its text is scanned about twice (three times for an object the text
//! converter declines, and once more when `objects` comes before `uid` or
//! `desiredAPIVersion`; the API server sends it last).

use std::borrow::Cow;
use std::fmt;

use axum::body::Bytes;
use axum::http::StatusCode;
use axum::http::header::CONTENT_TYPE;
use axum::response::{IntoResponse, Response};
use kube::core::Status;
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;
use serde_json::value::RawValue;
use trustyai_crds::contract::CONVERSION_PRESERVED_ANNOTATION;
use trustyai_crds::conversion::{
    ConversionError, convert_object_owned, convert_object_text, describe, is_served,
};

use crate::limits::MALFORMED;
use crate::observe::{ReviewEndpoint, ReviewOutcome, WebhookState};
use crate::wire::{Budget, Keep, Members, Passed, Reader};

/// The only `ConversionReview` version the CRD asks for (`conversionReviewVersions: [v1]`).
const REVIEW_API_VERSION: &str = "apiextensions.k8s.io/v1";
const REVIEW_KIND: &str = "ConversionReview";

/// What the conversion reads of one condition; the rest is passed.
const CONDITION: Members = Members::passing_the_rest(&[
    ("type", Keep::Parse),
    ("status", Keep::Parse),
    ("lastTransitionTime", Keep::Parse),
    ("observedGeneration", Keep::Parse),
]);

const STATUS: Members = Members::passing_the_rest(&[
    ("observedGeneration", Keep::Parse),
    ("image", Keep::Parse),
    (
        "conditions",
        Keep::Array {
            items: &Keep::Object(&CONDITION),
            otherwise: &Keep::Pass,
        },
    ),
]);

const STORAGE: Members = Members::passing_the_rest(&[("retention", Keep::Parse)]);

const SPEC: Members =
    Members::passing_the_rest(&[("image", Keep::Parse), ("storage", Keep::Object(&STORAGE))]);

/// Of the annotations, only the converter's own is read (the others, `kubectl apply`'s copy of
/// the whole object among them, are passed).
const ANNOTATIONS: Members =
    Members::passing_the_rest(&[(CONVERSION_PRESERVED_ANNOTATION, Keep::Parse)]);

/// `name` and `namespace` name the object in errors; `annotations` holds the converter's own.
const METADATA: Members = Members::passing_the_rest(&[
    ("name", Keep::Parse),
    ("namespace", Keep::Parse),
    ("annotations", Keep::Object(&ANNOTATIONS)),
]);

/// What conversion reads of an object: exactly the paths `trustyai_crds::conversion` reads or
/// changes (its `V1_ONLY` fields, the condition statuses and the converter's annotation).
const OBJECT: Members = Members {
    named: &[
        ("apiVersion", Keep::Parse),
        ("metadata", Keep::Object(&METADATA)),
        ("spec", Keep::Object(&SPEC)),
        ("status", Keep::Object(&STATUS)),
    ],
    rest: Keep::Pass,
    otherwise: Keep::Parse,
};

/// What one `ConversionReview` body gets back from [`convert_review`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConvertedReview {
    /// Every object converted: the answer (a `ConversionReview`), the desired version and the
    /// number of objects.
    Converted {
        answer: Vec<u8>,
        desired: String,
        objects: usize,
    },
    /// A review answered with `result.status: Failure`: the answer, the request's `uid` (empty
    /// when the review has no request) and why.
    Refused {
        answer: Vec<u8>,
        uid: String,
        message: String,
    },
    /// Not a `ConversionReview` at all (the handler answers HTTP 400).
    Malformed(String),
}

/// Converts one `ConversionReview` body: the one review converter, which the webhook serves and
/// the benchmarks measure. Every object is converted to the desired version in the order given,
/// with the request's `uid`; objects may come in either version, mixed. One object that cannot
/// be converted fails the batch, naming it.
pub fn convert_review(body: &[u8]) -> ConvertedReview {
    match answer(body) {
        Ok((desired, objects, answer)) => ConvertedReview::Converted {
            answer,
            desired,
            objects,
        },
        Err(Failure::Refused { uid, message }) => ConvertedReview::Refused {
            answer: failure_review(&uid, &message),
            uid,
            message,
        },
        Err(Failure::Malformed(message)) => ConvertedReview::Malformed(message),
    }
}

/// Why a review got a failure answer.
enum Failure {
    /// Not a ConversionReview at all: HTTP 400, no uid to answer.
    Malformed(String),
    /// A review answered with `result.status: Failure`.
    Refused { uid: String, message: String },
}

/// Answers one `ConversionReview`. A body that is not a review at all gets HTTP 400; anything
/// that parses gets a well-formed review, success or failure (one object that cannot be
/// converted fails the batch, naming it).
pub async fn convert(
    axum::extract::State(state): axum::extract::State<WebhookState>,
    body: Bytes,
) -> Response {
    let started = std::time::Instant::now();
    let (outcome, response) = match convert_review(&body) {
        ConvertedReview::Converted {
            answer,
            desired,
            objects,
        } => {
            state.observer.conversion(&desired, objects);
            tracing::debug!(desired = %desired, objects, "converted");
            (ReviewOutcome::Allowed, json_response(answer))
        }
        ConvertedReview::Malformed(message) => {
            if MALFORMED.admit() {
                tracing::warn!(error = %message, suppressed = MALFORMED.take_suppressed(), "malformed ConversionReview");
            }
            (
                ReviewOutcome::Malformed,
                (
                    StatusCode::BAD_REQUEST,
                    format!("malformed ConversionReview: {message}"),
                )
                    .into_response(),
            )
        }
        ConvertedReview::Refused {
            answer,
            uid,
            message,
        } => {
            if MALFORMED.admit() {
                tracing::warn!(%uid, %message, suppressed = MALFORMED.take_suppressed(), "conversion failed");
            }
            (ReviewOutcome::Failed, json_response(answer))
        }
    };
    state
        .observer
        .request(ReviewEndpoint::Convert, outcome, started.elapsed());
    response
}

/// The desired version, the number of objects and the answer's bytes.
fn answer(body: &[u8]) -> Result<(String, usize, Vec<u8>), Failure> {
    let mut answer = Answer {
        // Room for the answer up front: an object converted to v1alpha1 carries its v1-only
        // fields again, escaped, in an annotation, so the answer can outgrow the body, and a
        // buffer grown by doubling holds the old and the new copy at once. Pages never
        // written are never resident, so the spare room costs address space only.
        out: Vec::with_capacity(body.len() + body.len() / 2 + 256),
        uid: None,
        body_len: body.len(),
        count: 0,
        failure: None,
    };
    // Checked once here, the text is not checked again for each member passed as text.
    let text = std::str::from_utf8(body)
        .map_err(|e| Failure::Malformed(format!("the body is not UTF-8: {e}")))?;
    let mut de = serde_json::Deserializer::from_str(text);
    let review = ReviewSeed {
        answer: &mut answer,
    }
    .deserialize(&mut de)
    .and_then(|review| de.end().map(|()| review));
    let review = match (review, answer.failure.take(), answer.uid.take()) {
        (Ok(review), failure, uid) => {
            answer.failure = failure;
            answer.uid = uid;
            review
        }
        // An object that could not be read stops the reading; the answer names it.
        (Err(_), Some(message), Some(uid)) => return Err(Failure::Refused { uid, message }),
        (Err(error), ..) => return Err(Failure::Malformed(error.to_string())),
    };
    let Some(request) = review.request else {
        return Err(Failure::Refused {
            uid: String::new(),
            message: "the ConversionReview has no request".to_owned(),
        });
    };
    let refuse = |message: String| Failure::Refused {
        uid: request.uid.clone(),
        message,
    };
    let (api_version, kind) = (
        review.api_version.as_deref().unwrap_or(REVIEW_API_VERSION),
        review.kind.as_deref().unwrap_or(REVIEW_KIND),
    );
    if api_version != REVIEW_API_VERSION || kind != REVIEW_KIND {
        return Err(refuse(format!(
            "cannot answer a {api_version} {kind}: this webhook serves {REVIEW_API_VERSION} {REVIEW_KIND}"
        )));
    }
    let desired = request.desired_api_version.as_str();
    if !is_served(desired) {
        let error = ConversionError::UnknownDesiredVersion {
            desired: desired.to_owned(),
        };
        return Err(refuse(error.to_string()));
    }
    if let Some(objects) = request.deferred {
        answer
            .begin(&request.uid)
            .map_err(|e| refuse(e.to_string()))?;
        let mut de = serde_json::Deserializer::from_str(objects.get());
        ObjectsSeed {
            answer: &mut answer,
            desired,
        }
        .deserialize(&mut de)
        .map_err(|error| refuse(format!("request.objects: {error}")))?;
    }
    if let Some(message) = answer.failure.take() {
        return Err(refuse(message));
    }
    answer.out.extend_from_slice(b"]}}");
    Ok((desired.to_owned(), answer.count, answer.out))
}

/// The answer, written while the review is read.
struct Answer {
    out: Vec<u8>,
    /// The request's uid, once the answer has begun.
    uid: Option<String>,
    /// Each object may keep a tree proportional to the whole body (one object at a time).
    body_len: usize,
    count: usize,
    /// Set when an object could not be converted: the batch fails with this message.
    failure: Option<String>,
}

impl Answer {
    /// The answer up to its first converted object.
    fn begin(&mut self, uid: &str) -> Result<(), serde_json::Error> {
        self.uid = Some(uid.to_owned());
        self.out.extend_from_slice(b"{\"apiVersion\":\"");
        self.out.extend_from_slice(REVIEW_API_VERSION.as_bytes());
        self.out.extend_from_slice(b"\",\"kind\":\"");
        self.out.extend_from_slice(REVIEW_KIND.as_bytes());
        self.out.extend_from_slice(b"\",\"response\":{\"uid\":");
        write_json(&mut self.out, uid)?;
        self.out
            .extend_from_slice(b",\"result\":{\"status\":\"Success\"},\"convertedObjects\":[");
        Ok(())
    }

    /// Converts one object the text converter declined: read into a tree (what the conversion
    /// reads parsed, the rest passed as text), converted, written.
    fn convert_tree<'de>(
        &mut self,
        index: usize,
        text: &'de str,
        passed: &Passed<'de>,
        desired: &str,
    ) -> Result<(), String> {
        let budget = Budget::for_body(self.body_len);
        let reader = Reader::new(&budget, passed);
        let path = format!("request.objects.{index}");
        let mut de = serde_json::Deserializer::from_str(text);
        let object = reader
            .seed(Keep::Object(&OBJECT), &path)
            .deserialize(&mut de)
            .map_err(|error| format!("cannot read object {index}: {error}"))?
            .unwrap_or(Value::Null);
        // An object already in the desired version is written back as read.
        let converted = if object.get("apiVersion").and_then(Value::as_str) == Some(desired) {
            object
        } else {
            convert_object_owned(object, desired).map_err(|(error, object)| {
                format!(
                    "cannot convert object {index} ({}) to {desired}: {error}",
                    describe(&object),
                )
            })?
        };
        serde_json::to_writer(&mut self.out, &passed.restore(&converted))
            .map_err(|e| format!("cannot write object {index}: {e}"))
    }
}

/// The review as far as the answer needs it; the objects are converted while it is read.
struct ReviewIn<'de> {
    api_version: Option<String>,
    kind: Option<String>,
    request: Option<RequestIn<'de>>,
}

struct RequestIn<'de> {
    uid: String,
    desired_api_version: String,
    /// The objects' text, when it came before `uid` and `desiredAPIVersion` and could not be
    /// converted as it was read.
    deferred: Option<&'de RawValue>,
}

/// Reads the review's members the way a derived `Deserialize` would (unknown members skipped,
/// a member twice refused, the request's three members required), handing the request to
/// [`RequestSeed`].
struct ReviewSeed<'w> {
    answer: &'w mut Answer,
}

impl<'de> DeserializeSeed<'de> for ReviewSeed<'_> {
    type Value = ReviewIn<'de>;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<ReviewIn<'de>, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for ReviewSeed<'_> {
    type Value = ReviewIn<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a ConversionReview")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<ReviewIn<'de>, A::Error> {
        let (mut api_version, mut kind, mut request) = (None, None, None);
        while let Some(key) = access.next_key::<Cow<'de, str>>()? {
            match key.as_ref() {
                "apiVersion" => once(&mut api_version, "apiVersion", access.next_value()?)?,
                "kind" => once(&mut kind, "kind", access.next_value()?)?,
                "request" => {
                    let value = access.next_value_seed(RequestSeed {
                        answer: &mut *self.answer,
                    })?;
                    once(&mut request, "request", value)?;
                }
                _ => {
                    access.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(ReviewIn {
            api_version: api_version.flatten(),
            kind: kind.flatten(),
            request: request.flatten(),
        })
    }
}

/// Sets a member read once; a second one is refused, as a derived `Deserialize` does.
fn once<T, E: de::Error>(slot: &mut Option<T>, name: &'static str, value: T) -> Result<(), E> {
    match slot {
        Some(_) => Err(E::duplicate_field(name)),
        None => {
            *slot = Some(value);
            Ok(())
        }
    }
}

/// The request (or `null`); its objects are converted as they are read when `uid` and a
/// served `desiredAPIVersion` came before them.
struct RequestSeed<'w> {
    answer: &'w mut Answer,
}

impl<'de> DeserializeSeed<'de> for RequestSeed<'_> {
    type Value = Option<RequestIn<'de>>;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_option(self)
    }
}

impl<'de> Visitor<'de> for RequestSeed<'_> {
    type Value = Option<RequestIn<'de>>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a ConversionReview request")
    }

    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_some<D: de::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Self::Value, A::Error> {
        let (mut uid, mut desired, mut objects) = (None::<String>, None::<String>, None);
        while let Some(key) = access.next_key::<Cow<'de, str>>()? {
            match key.as_ref() {
                "uid" => once(&mut uid, "uid", access.next_value()?)?,
                "desiredAPIVersion" => {
                    once(&mut desired, "desiredAPIVersion", access.next_value()?)?
                }
                "objects" => {
                    let deferred = match (&uid, &desired) {
                        (Some(uid), Some(desired)) if is_served(desired) && objects.is_none() => {
                            self.answer.begin(uid).map_err(de::Error::custom)?;
                            access.next_value_seed(ObjectsSeed {
                                answer: &mut *self.answer,
                                desired,
                            })?;
                            None
                        }
                        _ => Some(access.next_value::<&'de RawValue>()?),
                    };
                    once(&mut objects, "objects", deferred)?;
                }
                _ => {
                    access.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(Some(RequestIn {
            uid: uid.ok_or_else(|| de::Error::missing_field("uid"))?,
            desired_api_version: desired
                .ok_or_else(|| de::Error::missing_field("desiredAPIVersion"))?,
            deferred: objects.ok_or_else(|| de::Error::missing_field("objects"))?,
        }))
    }
}

/// The `objects` array: each object read, converted and written as it comes.
struct ObjectsSeed<'w, 'd> {
    answer: &'w mut Answer,
    desired: &'d str,
}

impl<'de> DeserializeSeed<'de> for ObjectsSeed<'_, '_> {
    type Value = ();

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for ObjectsSeed<'_, '_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an array of objects")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut access: A) -> Result<(), A::Error> {
        let answer = self.answer;
        // One prefix for the review's placeholders; each object's texts are its own.
        let passed = Passed::new();
        loop {
            if answer.failure.is_some() {
                // The batch fails; the rest is only checked for syntax.
                while access.next_element::<IgnoredAny>()?.is_some() {}
                return Ok(());
            }
            let index = answer.count;
            // Borrowed from the body: the object's text, checked for syntax.
            let object = match access.next_element::<&'de RawValue>() {
                Ok(Some(object)) => object,
                Ok(None) => return Ok(()),
                Err(error) => {
                    // The review cannot be read further; the failure names the object.
                    answer.failure = Some(format!("cannot read object {index}: {error}"));
                    return Err(error);
                }
            };
            if index > 0 {
                answer.out.push(b',');
            }
            if convert_object_text(object, self.desired, &mut answer.out) {
                answer.count += 1;
                continue;
            }
            passed.clear();
            match answer.convert_tree(index, object.get(), &passed, self.desired) {
                Ok(()) => answer.count += 1,
                Err(message) => answer.failure = Some(message),
            }
        }
    }
}

fn write_json(out: &mut Vec<u8>, value: &str) -> Result<(), serde_json::Error> {
    serde_json::to_writer(out, value)
}

/// A failed review: `result` in the API server's `Status` shape and no objects.
fn failure_review(uid: &str, message: &str) -> Vec<u8> {
    let result = Status::failure(message, "BadRequest").with_code(400);
    let review = serde_json::json!({
        "apiVersion": REVIEW_API_VERSION,
        "kind": REVIEW_KIND,
        "response": {"uid": uid, "result": result, "convertedObjects": []},
    });
    serde_json::to_vec(&review).unwrap_or_default()
}

fn json_response(bytes: Vec<u8>) -> Response {
    ([(CONTENT_TYPE, "application/json")], bytes).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn review(objects: Value) -> Vec<u8> {
        json!({
            "apiVersion": REVIEW_API_VERSION, "kind": REVIEW_KIND,
            "request": {"uid": "u-1", "desiredAPIVersion": "trustyai.opendatahub.io/v1alpha1", "objects": objects},
        })
        .to_string()
        .into_bytes()
    }

    fn converted(body: &[u8]) -> Value {
        let (_, _, bytes) = answer(body).map_err(|_| "failed").expect("answer");
        serde_json::from_slice(&bytes).expect("json")
    }

    /// The uid and message of the refusal `body` gets.
    /// `body` is refused for the review `uid`, with a message that starts with `start`.
    #[track_caller]
    fn assert_refused_with(body: &[u8], uid: &str, start: &str) {
        let (refused_uid, message) = refused(body);
        assert_eq!(refused_uid, uid);
        assert!(message.starts_with(start), "{message}");
    }

    fn refused(body: &[u8]) -> (String, String) {
        match answer(body) {
            Err(Failure::Refused { uid, message }) => (uid, message),
            _ => panic!("expected a refusal"),
        }
    }

    fn v1(name: &str) -> Value {
        json!({
            "apiVersion": "trustyai.opendatahub.io/v1", "kind": "TrustyAIService",
            "metadata": {"name": name, "namespace": "ns", "managedFields": [{"manager": "kubectl", "fieldsV1": {"f:spec": {}}}]},
            "spec": {"image": "quay.io/x:1", "storage": {"format": "PVC", "retention": "Delete", "size": "1Gi"}, "metrics": {"schedule": "5s"}},
            "status": {"phase": "Ready", "observedGeneration": 2, "conditions": [{"type": "Ready", "status": "True", "reason": "Ok", "observedGeneration": 2}]},
        })
    }

    #[test]
    fn the_answer_equals_the_converters_for_every_object() {
        let objects = json!([v1("a"), v1("b")]);
        let answer = converted(&review(objects.clone()));
        let expected: Vec<Value> = objects
            .as_array()
            .expect("array")
            .iter()
            .map(|o| {
                trustyai_crds::conversion::convert_object(o, "trustyai.opendatahub.io/v1alpha1")
                    .expect("convert")
            })
            .collect();
        assert_eq!(answer["response"]["convertedObjects"], json!(expected));
        assert_eq!(answer["response"]["uid"], "u-1");
        assert_eq!(answer["response"]["result"]["status"], "Success");
    }

    #[test]
    fn unread_members_are_written_back_as_they_came() {
        let zeros = vec!["0"; 100_000].join(",");
        let body = format!(
            r#"{{"request":{{"uid":"u","desiredAPIVersion":"trustyai.opendatahub.io/v1alpha1","objects":[{{"apiVersion":"trustyai.opendatahub.io/v1","kind":"TrustyAIService","status":{{"big":[{zeros}]}}}}]}}}}"#
        );
        let (_, count, bytes) = answer(body.as_bytes())
            .map_err(|_| "failed")
            .expect("answer");
        assert_eq!(count, 1);
        let text = String::from_utf8(bytes).expect("utf-8");
        assert!(text.contains(&format!(r#""big":[{zeros}]"#)));
    }

    #[test]
    fn an_object_that_cannot_be_converted_fails_the_batch_naming_it() {
        let mut other = v1("b");
        other["apiVersion"] = json!("example.com/v1");
        let body = review(json!([v1("a"), other]));
        assert_refused_with(&body, "u-1", "cannot convert object 1 (ns/b)");
    }

    #[test]
    fn duplicate_keys_in_what_conversion_reads_are_refused() {
        let body = br#"{"request":{"uid":"u","desiredAPIVersion":"trustyai.opendatahub.io/v1alpha1","objects":[{"apiVersion":"trustyai.opendatahub.io/v1","spec":{"image":"a","image":"b"}}]}}"#;
        let (_, message) = refused(body);
        assert!(message.contains("duplicate key \"image\""), "{message}");
    }

    #[test]
    fn objects_are_converted_whatever_the_order_of_the_request_members() {
        let objects = json!([v1("a"), v1("b")]);
        let body = format!(
            r#"{{"request":{{"objects":{objects},"uid":"u-1","desiredAPIVersion":"trustyai.opendatahub.io/v1alpha1"}},"kind":"{REVIEW_KIND}","apiVersion":"{REVIEW_API_VERSION}"}}"#
        );
        assert_eq!(converted(body.as_bytes()), converted(&review(objects)));
    }

    #[test]
    fn an_object_already_in_the_desired_version_comes_back_equal() {
        let mut object = v1("a");
        object["apiVersion"] = json!("trustyai.opendatahub.io/v1alpha1");
        object["spec"] = json!({"storage": {"format": "PVC"}, "x": "\u{e9}"});
        let answer = converted(&review(json!([object.clone()])));
        assert_eq!(answer["response"]["convertedObjects"], json!([object]));
    }

    #[test]
    fn an_object_over_the_budget_fails_the_batch_with_the_uid_naming_it() {
        let zeros = vec!["0"; 200_000].join(",");
        let body = format!(
            r#"{{"request":{{"uid":"u-7","desiredAPIVersion":"trustyai.opendatahub.io/v1alpha1","objects":[{},{{"apiVersion":"trustyai.opendatahub.io/v1","spec":{{"image":[{zeros}]}}}}]}}}}"#,
            v1("a")
        );
        let start = "cannot read object 1: request.objects.1.spec.image.";
        assert_refused_with(body.as_bytes(), "u-7", start);
    }

    #[test]
    fn a_member_of_the_review_twice_or_a_body_that_is_not_utf8_is_malformed() {
        for body in [
            br#"{"request":{"uid":"a","uid":"b","desiredAPIVersion":"v","objects":[]}}"#.to_vec(),
            br#"{"kind":"a","kind":"b"}"#.to_vec(),
            b"{\"kind\":\"\xff\"}".to_vec(),
        ] {
            assert!(
                matches!(answer(&body), Err(Failure::Malformed(_))),
                "{}",
                String::from_utf8_lossy(&body)
            );
        }
    }

    #[test]
    fn a_review_without_the_required_fields_is_malformed() {
        assert!(matches!(
            answer(b"{\"request\":{}}"),
            Err(Failure::Malformed(_))
        ));
        assert!(matches!(answer(b"[]"), Err(Failure::Malformed(_))));
    }
}
