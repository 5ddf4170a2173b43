//! `POST /convert`: the CRD conversion webhook. The rules are `trustyai_crds::conversion`'s; this
//! handler reads the `ConversionReview` with the shared reader (`wire`) and writes the
//! answer.
//!
//! Objects are streamed: each is read as the conversion needs it (the members it changes parsed,
//! everything else, `managedFields` included, kept as JSON text and written back verbatim),
//! converted, written to the answer and dropped before the next one is read. An object already
//! in the desired version is copied as it came. So a request costs about its body twice (the
//! body and the answer) plus one object's small tree, whatever the objects hold.

use std::fmt;

use axum::body::Bytes;
use axum::http::StatusCode;
use axum::http::header::CONTENT_TYPE;
use axum::response::{IntoResponse, Response};
use kube::core::Status;
use serde::Deserialize;
use serde::de::{self, SeqAccess, Visitor};
use serde_json::Value;
use serde_json::value::RawValue;
use trustyai_crds::contract::{DEPRECATED_VERSION, GROUP, STORAGE_VERSION};
use trustyai_crds::conversion::{ConversionError, convert_object_owned, describe};

use crate::limits::MALFORMED;
use crate::observe::{Endpoint, Outcome, WebhookState};
use crate::wire::{Budget, Envelope, Keep, Members, Passed, Reader};

/// The only `ConversionReview` version the CRD asks for (`conversionReviewVersions: [v1]`).
const REVIEW_API_VERSION: &str = "apiextensions.k8s.io/v1";
const REVIEW_KIND: &str = "ConversionReview";

/// What the conversion reads of one condition; the rest is passed.
const CONDITION: Members = Members {
    named: &[
        ("type", Keep::Parse),
        ("status", Keep::Parse),
        ("lastTransitionTime", Keep::Parse),
        ("observedGeneration", Keep::Parse),
    ],
    rest: Keep::Pass,
    otherwise: Keep::Pass,
};

const STATUS: Members = Members {
    named: &[
        ("observedGeneration", Keep::Parse),
        ("image", Keep::Parse),
        (
            "conditions",
            Keep::Array {
                items: &Keep::Object(&CONDITION),
                otherwise: &Keep::Pass,
            },
        ),
    ],
    rest: Keep::Pass,
    otherwise: Keep::Pass,
};

const STORAGE: Members = Members {
    named: &[("retention", Keep::Parse)],
    rest: Keep::Pass,
    otherwise: Keep::Pass,
};

const SPEC: Members = Members {
    named: &[("image", Keep::Parse), ("storage", Keep::Object(&STORAGE))],
    rest: Keep::Pass,
    otherwise: Keep::Pass,
};

/// `name` and `namespace` name the object in errors; `annotations` holds the converter's own.
const METADATA: Members = Members {
    named: &[
        ("name", Keep::Parse),
        ("namespace", Keep::Parse),
        ("annotations", Keep::Parse),
    ],
    rest: Keep::Pass,
    otherwise: Keep::Pass,
};

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

#[derive(Deserialize)]
struct RequestIn<'a> {
    uid: String,
    #[serde(rename = "desiredAPIVersion")]
    desired_api_version: String,
    #[serde(borrow)]
    objects: &'a RawValue,
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
    let (outcome, response) = match answer(&body) {
        Ok((desired, count, bytes)) => {
            state.observer.conversion(&desired, count);
            tracing::debug!(desired = %desired, objects = count, "converted");
            (Outcome::Allowed, json_response(bytes))
        }
        Err(Failure::Malformed(message)) => {
            if MALFORMED.admit() {
                tracing::warn!(error = %message, suppressed = MALFORMED.take_suppressed(), "malformed ConversionReview");
            }
            (
                Outcome::Malformed,
                (
                    StatusCode::BAD_REQUEST,
                    format!("malformed ConversionReview: {message}"),
                )
                    .into_response(),
            )
        }
        Err(Failure::Refused { uid, message }) => {
            if MALFORMED.admit() {
                tracing::warn!(%uid, %message, suppressed = MALFORMED.take_suppressed(), "conversion failed");
            }
            (
                Outcome::Failed,
                json_response(failure_review(&uid, &message)),
            )
        }
    };
    state
        .observer
        .request(Endpoint::Convert, outcome, started.elapsed());
    response
}

/// The desired version, the number of objects and the answer's bytes.
fn answer(body: &[u8]) -> Result<(String, usize, Vec<u8>), Failure> {
    let review: Envelope<RequestIn<'_>> =
        serde_json::from_slice(body).map_err(|e| Failure::Malformed(e.to_string()))?;
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
    let v1 = format!("{GROUP}/{STORAGE_VERSION}");
    let v1alpha1 = format!("{GROUP}/{DEPRECATED_VERSION}");
    if desired != v1 && desired != v1alpha1 {
        let error = ConversionError::UnknownDesiredVersion {
            desired: desired.to_owned(),
        };
        return Err(refuse(error.to_string()));
    }

    let mut out = Vec::with_capacity(body.len() + 256);
    out.extend_from_slice(b"{\"apiVersion\":\"");
    out.extend_from_slice(REVIEW_API_VERSION.as_bytes());
    out.extend_from_slice(b"\",\"kind\":\"");
    out.extend_from_slice(REVIEW_KIND.as_bytes());
    out.extend_from_slice(b"\",\"response\":{\"uid\":");
    write_json(&mut out, &request.uid).map_err(|e| refuse(e.to_string()))?;
    out.extend_from_slice(b",\"result\":{\"status\":\"Success\"},\"convertedObjects\":[");
    let mut writer = ObjectWriter {
        desired,
        out: &mut out,
        count: 0,
        failure: None,
    };
    let streamed = {
        let mut de = serde_json::Deserializer::from_str(request.objects.get());
        de::Deserializer::deserialize_seq(&mut de, &mut writer)
    };
    if let Some(message) = writer.failure.take() {
        return Err(refuse(message));
    }
    if let Err(error) = streamed {
        return Err(refuse(format!("request.objects: {error}")));
    }
    let count = writer.count;
    out.extend_from_slice(b"]}}");
    Ok((desired.to_owned(), count, out))
}

/// Converts and writes the objects one at a time, as the array is read.
struct ObjectWriter<'o> {
    desired: &'o str,
    out: &'o mut Vec<u8>,
    count: usize,
    /// Set when an object could not be converted: the batch fails with this message.
    failure: Option<String>,
}

impl<'de> Visitor<'de> for &mut ObjectWriter<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an array of objects")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut access: A) -> Result<(), A::Error> {
        while let Some(raw) = access.next_element::<&'de RawValue>()? {
            let index = self.count;
            if let Err(message) = self.write(index, raw) {
                self.failure = Some(message);
                return Ok(());
            }
            self.count += 1;
        }
        Ok(())
    }
}

impl ObjectWriter<'_> {
    fn write(&mut self, index: usize, raw: &RawValue) -> Result<(), String> {
        let budget = Budget::for_body(raw.get().len());
        let passed = Passed::new();
        let reader = Reader::new(&budget, &passed);
        let object = reader
            .read(
                raw,
                Keep::Object(&OBJECT),
                &format!("request.objects.{index}"),
            )
            .map_err(|e| format!("cannot read object {index}: {e}"))?
            .unwrap_or(Value::Null);
        if index > 0 {
            self.out.push(b',');
        }
        if object.get("apiVersion").and_then(Value::as_str) == Some(self.desired) {
            // Already in the desired version: copied as it came.
            self.out.extend_from_slice(raw.get().as_bytes());
            return Ok(());
        }
        let converted = convert_object_owned(object, self.desired).map_err(|(error, object)| {
            format!(
                "cannot convert object {index} ({}) to {}: {error}",
                describe(&object),
                self.desired
            )
        })?;
        serde_json::to_writer(&mut *self.out, &passed.restore(&converted))
            .map_err(|e| format!("cannot write object {index}: {e}"))
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
        match answer(&review(json!([v1("a"), other]))) {
            Err(Failure::Refused { uid, message }) => {
                assert_eq!(uid, "u-1");
                assert!(
                    message.starts_with("cannot convert object 1 (ns/b)"),
                    "{message}"
                );
            }
            _ => panic!("expected a refusal"),
        }
    }

    #[test]
    fn duplicate_keys_in_what_conversion_reads_are_refused() {
        let body = br#"{"request":{"uid":"u","desiredAPIVersion":"trustyai.opendatahub.io/v1alpha1","objects":[{"apiVersion":"trustyai.opendatahub.io/v1","spec":{"image":"a","image":"b"}}]}}"#;
        match answer(body) {
            Err(Failure::Refused { message, .. }) => {
                assert!(message.contains("duplicate key \"image\""), "{message}")
            }
            _ => panic!("expected a refusal"),
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
