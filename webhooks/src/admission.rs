//! `POST /mutate` and `POST /validate`: the admission webhooks for TrustyAIService and
//! TrustyAIMetric, told apart by the review's `request.resource`. The rules are
//! `trustyai_crds`'s: a TrustyAIService is judged through `trustyai_crds::review`, a
//! TrustyAIMetric through `trustyai_crds::metric` (the offline `validate` calls both too); these
//! handlers only read the review, default (the patch must be in the request's version), have it
//! judged and write the answer.
//!
//! The review's envelope is decoded typed; the objects are read with the shared reader
//! (`wire`) as plain JSON, not through the TrustyAIService types: an object that breaks
//! the types must get a denial that says what is wrong, not a generic "failed calling webhook".
//! The reader keeps only what the rules read, within a budget proportional to the body.

use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use base64::Engine;
use json_patch::{Patch, PatchOperation};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Value, json};
use trustyai_crds::contract::{DEPRECATED_VERSION, GROUP, KIND, PLURAL, STORAGE_VERSION};
use trustyai_crds::defaults::{Operation, apply_defaults};
use trustyai_crds::metric;
use trustyai_crds::metric::validation::MetricFieldError;
use trustyai_crds::review::{self, AdmissionStep};
use trustyai_crds::validation::{
    ErrorKind, FieldError, ValidationContext, denial_message, validate as validate_object,
};

use crate::limits::MALFORMED;
use crate::observe::{ReviewEndpoint, ReviewOutcome, WebhookState};
use crate::wire::{Budget, Envelope, Keep, Members, Passed, Reader};

const REVIEW_API_VERSION: &str = "admission.k8s.io/v1";
const REVIEW_KIND: &str = "AdmissionReview";

/// The TrustyAIMetric's resource name and its one version, as reviews name them.
const METRIC_PLURAL: &str = "trustyaimetrics";
const METRIC_VERSION: &str = "v1alpha1";

/// The resource a review is about: each has its own rules.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Resource {
    /// `trustyaiservices`, in `v1` or `v1alpha1`.
    Service,
    /// `trustyaimetrics`, in `v1alpha1`.
    Metric,
}

impl Resource {
    /// The object's kind, as its `kind` field and the denials name it.
    fn kind(self) -> &'static str {
        match self {
            Self::Service => KIND,
            Self::Metric => metric::validation::KIND,
        }
    }

    /// Whether `version` is one the resource is served in.
    fn serves(self, version: &str) -> bool {
        match self {
            Self::Service => version == STORAGE_VERSION || version == DEPRECATED_VERSION,
            Self::Metric => version == METRIC_VERSION,
        }
    }
}

/// The parts of an admission request the rules need.
struct Request {
    uid: String,
    name: String,
    namespace: String,
    resource: Resource,
    /// `None` for DELETE and CONNECT, which are always allowed.
    operation: Option<Operation>,
    /// The object as sent, and its version.
    object: Value,
    version: String,
    old_object: Option<Value>,
}

/// Why a request cannot be admitted as asked.
enum Rejection {
    /// Not an AdmissionReview with a request uid: HTTP 400.
    Malformed(String),
    /// Answerable, but not by admitting it: `allowed: false` with this message.
    Refused { uid: String, message: String },
}

/// `POST /mutate`: a minimal JSON Patch that adds the defaults; or, when the defaulted object
/// breaks a rule, the same denial `/validate` would give. The API server runs the CRD's schema
/// and CEL rules after mutation and before validation, and stops at their first failures: judged
/// here, a manifest's errors all come in one answer.
///
/// A TrustyAIMetric gets `mutate_metric`'s answer instead.
pub async fn mutate(State(state): State<WebhookState>, body: Bytes) -> Response {
    let span = |req: &Request| tracing::info_span!("mutate", uid = %req.uid, kind = req.resource.kind(), namespace = %req.namespace, name = %req.name, operation = ?req.operation);
    answer(
        &state,
        ReviewEndpoint::Mutate,
        &body,
        span,
        |req, operation| {
            if req.resource == Resource::Metric {
                return mutate_metric(&state, req);
            }
            // Defaulted here, in the request's version, because the patch must be in it; the
            // defaulted object is then judged as it is.
            let mut defaulted = req.object.clone();
            let mut patch = apply_defaults(&mut defaulted, operation);
            if req.version == DEPRECATED_VERSION {
                // A registration that sends v1alpha1 as is (no matchPolicy: Equivalent): its
                // schema has no v1-only fields, so don't add them.
                patch.0.retain(|op| !touches_v1_only_field(op));
            }
            tracing::debug!(operations = patch.0.len(), "defaulted");
            match judge(&state, req, &defaulted) {
                // Warnings are `/validate`'s to give, once.
                (ReviewOutcome::Allowed, _) => (
                    ReviewOutcome::Allowed,
                    review(&req.uid, true, None, Some(patch), Vec::new()),
                ),
                denied => denied,
            }
        },
    )
}

/// `POST /validate`: every violated rule at once, as field errors; warnings either way.
pub async fn validate(State(state): State<WebhookState>, body: Bytes) -> Response {
    let span = |req: &Request| tracing::info_span!("validate", uid = %req.uid, kind = req.resource.kind(), namespace = %req.namespace, name = %req.name, operation = ?req.operation);
    answer(
        &state,
        ReviewEndpoint::Validate,
        &body,
        span,
        |req, _| match req.resource {
            Resource::Service => judge(&state, req, &req.object),
            Resource::Metric => judge_metric(&state, req, &req.object, Vec::new()),
        },
    )
}

/// A TrustyAIMetric at `/mutate`: a deprecated `spec.type` replaced by its current name (the
/// patch, with a warning naming the field, the old and the new name); or, when the defaulted
/// object breaks a rule, the same denial `/validate` gives it, so every error comes at once
/// before the CRD's schema (which knows no alias) stops at its first.
fn mutate_metric(state: &WebhookState, req: &Request) -> (ReviewOutcome, Response) {
    let mut defaulted = req.object.clone();
    let changes = metric::defaults::apply_defaults(&mut defaulted);
    tracing::debug!(operations = changes.patch.0.len(), "defaulted");
    match judge_metric(state, req, &defaulted, changes.warnings.clone()) {
        (ReviewOutcome::Allowed, _) => (
            ReviewOutcome::Allowed,
            review(&req.uid, true, None, Some(changes.patch), changes.warnings),
        ),
        denied => denied,
    }
}

/// A TrustyAIMetric (the request's, or its defaulted form) against its rules: every error at
/// once, each a cause with its field path; `warnings` go with the answer either way.
fn judge_metric(
    state: &WebhookState,
    req: &Request,
    object: &Value,
    warnings: Vec<String>,
) -> (ReviewOutcome, Response) {
    // An update that leaves `spec` alone (finalizers, labels) is always allowed: the
    // operator's finalizer must come off an object stored before a rule existed.
    let unchanged = req
        .old_object
        .as_ref()
        .is_some_and(|old| old.get("spec") == req.object.get("spec"));
    let errors = if unchanged {
        Vec::new()
    } else {
        metric::validation::validate_object(object)
    };
    if errors.is_empty() {
        return (
            ReviewOutcome::Allowed,
            review(&req.uid, true, None, None, warnings),
        );
    }
    for _ in &errors {
        // One bounded label for every metric rule: the field paths are the detail, in the log.
        state.observer.denial(METRIC_DENIAL_RULE);
    }
    tracing::info!(errors = errors.len(), "denied");
    let status = invalid_status(
        &req.name,
        metric::validation::KIND,
        metric::validation::denial_message(&req.name, &errors),
        &errors,
    );
    (
        ReviewOutcome::Denied,
        review(&req.uid, false, Some(status), None, warnings),
    )
}

/// The denials metric's label for a broken TrustyAIMetric rule.
pub const METRIC_DENIAL_RULE: &str = "trustyaimetric";

/// Answers the review in `body` at `endpoint`, and records the answer: a body that is no
/// review is rejected; in the request's span (`span`), a request without an operation (DELETE,
/// CONNECT) is allowed and `decide` answers the others.
fn answer(
    state: &WebhookState,
    endpoint: ReviewEndpoint,
    body: &[u8],
    span: impl FnOnce(&Request) -> tracing::Span,
    decide: impl FnOnce(&Request, Operation) -> (ReviewOutcome, Response),
) -> Response {
    let started = std::time::Instant::now();
    let (outcome, response) = match parse(body) {
        Err(rejection) => reject(rejection),
        Ok(req) => {
            let span = span(&req);
            let _entered = span.enter();
            match req.operation {
                None => (
                    ReviewOutcome::Allowed,
                    review(&req.uid, true, None, None, Vec::new()),
                ),
                Some(operation) => decide(&req, operation),
            }
        }
    };
    state.observer.request(endpoint, outcome, started.elapsed());
    response
}

/// `object` (the request's, or its defaulted form) against the rules, with the request's old
/// object for the rules that look at changes.
fn judge(state: &WebhookState, req: &Request, object: &Value) -> (ReviewOutcome, Response) {
    let settings = state.settings.load();
    let lookup = |name: &str| -> bool {
        // Unknown (no cache, or the cache doesn't cover the namespace) counts as present: the
        // warning is only for a Secret we know is missing.
        state
            .secrets
            .as_ref()
            .and_then(|s| s.exists(&req.namespace, name))
            .unwrap_or(true)
    };
    let ctx = ValidationContext {
        allowed_image_prefixes: settings.allowed_image_prefixes.clone(),
        secret_exists: Some(&lookup),
    };
    let verdict = match review::review(
        object,
        req.old_object.as_ref(),
        AdmissionStep::JudgeAsIs,
        &ctx,
    ) {
        Ok(reviewed) => reviewed.verdict,
        // Conversion never fails for one of our objects; anything else is judged as it is
        // (and fails the rules with field errors).
        Err(_) => validate_object(object, req.old_object.as_ref(), &ctx),
    };
    if verdict.is_allowed() {
        return (
            ReviewOutcome::Allowed,
            review(&req.uid, true, None, None, verdict.warnings),
        );
    }
    for error in &verdict.errors {
        state.observer.denial(error.rule.as_str());
    }
    tracing::info!(errors = verdict.errors.len(), "denied");
    let status = invalid_status(
        &req.name,
        KIND,
        denial_message(&req.name, &verdict.errors),
        &verdict.errors,
    );
    (
        ReviewOutcome::Denied,
        review(&req.uid, false, Some(status), None, verdict.warnings),
    )
}

fn touches_v1_only_field(op: &PatchOperation) -> bool {
    match op {
        PatchOperation::Add(add) => {
            trustyai_crds::conversion::is_v1_only_spec_pointer(&add.path.to_string())
        }
        _ => false,
    }
}

/// What a denial reads from one broken field, for a TrustyAIService and a TrustyAIMetric alike.
trait DeniedField: std::fmt::Display {
    fn field(&self) -> &str;
    fn kind(&self) -> ErrorKind;
}

impl DeniedField for FieldError {
    fn field(&self) -> &str {
        &self.field
    }
    fn kind(&self) -> ErrorKind {
        self.kind
    }
}

impl DeniedField for MetricFieldError {
    fn field(&self) -> &str {
        &self.field
    }
    fn kind(&self) -> ErrorKind {
        self.kind
    }
}

/// A `Status` in the API server's own shape for an invalid object of `kind`: code 422, reason
/// `Invalid`, `message` on top and one cause per field.
fn invalid_status<E: DeniedField>(name: &str, kind: &str, message: String, errors: &[E]) -> Value {
    let causes: Vec<Value> = errors
        .iter()
        .map(|e| {
            let full = e.to_string();
            let message = full
                .strip_prefix(&format!("{}: ", e.field()))
                .unwrap_or(&full)
                .to_string();
            json!({"reason": e.kind().cause_type(), "message": message, "field": e.field()})
        })
        .collect();
    json!({
        "status": "Failure",
        "message": message,
        "reason": "Invalid",
        "code": 422,
        "details": {"name": name, "group": GROUP, "kind": kind, "causes": causes},
    })
}

fn reject(rejection: Rejection) -> (ReviewOutcome, Response) {
    match rejection {
        Rejection::Malformed(message) => {
            if MALFORMED.admit() {
                tracing::warn!(%message, suppressed = MALFORMED.take_suppressed(), "malformed AdmissionReview");
            }
            (
                ReviewOutcome::Malformed,
                (StatusCode::BAD_REQUEST, message).into_response(),
            )
        }
        Rejection::Refused { uid, message } => {
            if MALFORMED.admit() {
                tracing::warn!(%uid, %message, suppressed = MALFORMED.take_suppressed(), "admission request refused");
            }
            let status = json!({"status": "Failure", "message": message, "reason": "BadRequest", "code": 400});
            (
                ReviewOutcome::Failed,
                review(&uid, false, Some(status), None, Vec::new()),
            )
        }
    }
}

/// An AdmissionReview answer. The patch, if any and not empty, is sent as `JSONPatch`.
fn review(
    uid: &str,
    allowed: bool,
    status: Option<Value>,
    patch: Option<Patch>,
    warnings: Vec<String>,
) -> Response {
    let mut response = json!({"uid": uid, "allowed": allowed});
    if let Some(status) = status {
        response["status"] = status;
    }
    if let Some(patch) = patch.filter(|p| !p.0.is_empty()) {
        match serde_json::to_vec(&patch) {
            Ok(bytes) => {
                response["patchType"] = json!("JSONPatch");
                response["patch"] = json!(base64::engine::general_purpose::STANDARD.encode(bytes));
            }
            Err(e) => {
                // Cannot happen for a patch of JSON values; refuse rather than admit undefaulted.
                response["allowed"] = json!(false);
                response["status"] = json!({"status": "Failure", "message": format!("cannot encode the defaults patch: {e}"), "code": 500});
            }
        }
    }
    if !warnings.is_empty() {
        response["warnings"] = json!(warnings);
    }
    axum::Json(json!({"apiVersion": REVIEW_API_VERSION, "kind": REVIEW_KIND, "response": response}))
        .into_response()
}

/// What admission reads of an object: everything the rules read (metadata, spec), not
/// `status` or `managedFields`, which no rule looks at (and which are most of a stored object).
const METADATA: Members = Members {
    named: &[("managedFields", Keep::Drop)],
    rest: Keep::Parse,
    otherwise: Keep::Parse,
};

const OBJECT: Members = Members {
    named: &[
        ("metadata", Keep::Object(&METADATA)),
        ("status", Keep::Drop),
    ],
    rest: Keep::Parse,
    otherwise: Keep::Parse,
};

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RequestIn<'a> {
    uid: Option<String>,
    resource: Option<ResourceIn>,
    operation: Option<String>,
    name: Option<String>,
    namespace: Option<String>,
    #[serde(borrow)]
    object: Option<&'a RawValue>,
    #[serde(borrow)]
    old_object: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct ResourceIn {
    group: Option<String>,
    resource: Option<String>,
}

fn read_object<'a>(
    reader: &Reader<'_, 'a>,
    raw: Option<&'a RawValue>,
    path: &str,
) -> Result<Value, serde_json::Error> {
    match raw {
        None => Ok(Value::Null),
        Some(raw) => Ok(reader
            .read(raw, Keep::Object(&OBJECT), path)?
            .unwrap_or(Value::Null)),
    }
}

fn parse(body: &[u8]) -> Result<Request, Rejection> {
    let review: Envelope<RequestIn<'_>> = serde_json::from_slice(body)
        .map_err(|e| Rejection::Malformed(format!("malformed AdmissionReview: {e}")))?;
    let request = review
        .request
        .ok_or_else(|| Rejection::Malformed("AdmissionReview has no request".into()))?;
    let uid = request
        .uid
        .ok_or_else(|| Rejection::Malformed("AdmissionReview request has no uid".into()))?;
    let refuse = |message: String| Rejection::Refused {
        uid: uid.clone(),
        message,
    };
    if review.api_version.as_deref() != Some(REVIEW_API_VERSION)
        || review.kind.as_deref() != Some(REVIEW_KIND)
    {
        return Err(refuse(format!(
            "expected {REVIEW_API_VERSION} {REVIEW_KIND}, got {} {}",
            review.api_version.as_deref().unwrap_or("<none>"),
            review.kind.as_deref().unwrap_or("<none>")
        )));
    }
    let (group, plural) = request.resource.as_ref().map_or(("", ""), |r| {
        (
            r.group.as_deref().unwrap_or(""),
            r.resource.as_deref().unwrap_or(""),
        )
    });
    let resource = match (group, plural) {
        (GROUP, PLURAL) => Resource::Service,
        (GROUP, METRIC_PLURAL) => Resource::Metric,
        _ => {
            return Err(refuse(format!(
                "this webhook admits only {PLURAL}.{GROUP} and {METRIC_PLURAL}.{GROUP}, not {plural}.{group}"
            )));
        }
    };
    let operation = match request.operation.as_deref() {
        Some("CREATE") => Some(Operation::Create),
        Some("UPDATE") => Some(Operation::Update),
        Some("DELETE") | Some("CONNECT") => None,
        other => {
            return Err(refuse(format!(
                "unknown operation {}",
                other.unwrap_or("<none>")
            )));
        }
    };
    // One budget for both objects: together they are at most a small multiple of the body.
    let budget = Budget::for_body(body.len());
    let passed = Passed::new();
    let reader = Reader::new(&budget, &passed);
    let read = |raw, path| read_object(&reader, raw, path).map_err(|e| refuse(e.to_string()));
    // DELETE and CONNECT are answered without reading the objects.
    let (object, old_object) = if operation.is_some() {
        (
            read(request.object, "request.object")?,
            Some(read(request.old_object, "request.oldObject")?).filter(Value::is_object),
        )
    } else {
        (Value::Null, None)
    };
    if operation.is_some() && !object.is_object() {
        return Err(refuse(format!(
            "request.object must be a {} object",
            resource.kind()
        )));
    }
    let api_version = object.get("apiVersion").and_then(Value::as_str);
    let kind = object.get("kind").and_then(Value::as_str);
    let version = api_version
        .and_then(|v| v.strip_prefix(&format!("{GROUP}/")))
        .unwrap_or("")
        .to_string();
    if operation.is_some() && (kind != Some(resource.kind()) || !resource.serves(&version)) {
        return Err(refuse(format!(
            "request.object is a {} {}, not a {GROUP} {}",
            api_version.unwrap_or("<no apiVersion>"),
            kind.unwrap_or("<no kind>"),
            resource.kind()
        )));
    }
    // The name of an object being created from generateName is only in the object.
    let name = match request.name.filter(|n| !n.is_empty()) {
        Some(name) => name,
        None => object
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
    };
    Ok(Request {
        uid,
        name,
        namespace: request.namespace.unwrap_or_default(),
        resource,
        operation,
        object,
        version,
        old_object,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(value: Value) -> Vec<u8> {
        serde_json::to_vec(&value).expect("json")
    }

    fn request(operation: &str, object: Value, old: Option<Value>) -> Value {
        let mut req = json!({
            "uid": "u-1", "name": "tas", "namespace": "ns", "operation": operation,
            "kind": {"group": GROUP, "version": "v1", "kind": KIND},
            "resource": {"group": GROUP, "version": "v1", "resource": PLURAL},
            "userInfo": {"username": "alice"},
            "object": object,
        });
        if let Some(old) = old {
            req["oldObject"] = old;
        }
        json!({"apiVersion": REVIEW_API_VERSION, "kind": REVIEW_KIND, "request": req})
    }

    fn tas(spec: Value) -> Value {
        json!({"apiVersion": "trustyai.opendatahub.io/v1", "kind": KIND, "metadata": {"name": "tas", "namespace": "ns"}, "spec": spec})
    }

    async fn call(handler: &str, value: Value) -> (StatusCode, Value) {
        let state = WebhookState::new(crate::AdmissionSettings {
            allowed_image_prefixes: vec!["quay.io/trustyai/".into()],
        });
        let response = match handler {
            "mutate" => mutate(State(state), Bytes::from(body(value))).await,
            _ => validate(State(state), Bytes::from(body(value))).await,
        };
        let status = response.status();
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .expect("body");
        (
            status,
            serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        )
    }

    fn decoded_patch(answer: &Value) -> Value {
        let b64 = answer["response"]["patch"].as_str().expect("patch");
        serde_json::from_slice(
            &base64::engine::general_purpose::STANDARD
                .decode(b64)
                .expect("base64"),
        )
        .expect("json")
    }

    #[tokio::test]
    async fn mutate_adds_defaults_as_json_patch() {
        let (status, answer) = call(
            "mutate",
            request(
                "CREATE",
                tas(json!({"storage": {"format": "PVC"}, "metrics": {"schedule": "5s"}})),
                None,
            ),
        )
        .await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(answer["response"]["uid"], "u-1");
        assert_eq!(answer["response"]["allowed"], true);
        assert_eq!(answer["response"]["patchType"], "JSONPatch");
        let patch = decoded_patch(&answer);
        let paths: Vec<&str> = patch
            .as_array()
            .expect("ops")
            .iter()
            .filter_map(|op| op["path"].as_str())
            .collect();
        assert!(
            paths.contains(&"/spec/replicas") && paths.contains(&"/spec/storage/size"),
            "{paths:?}"
        );
    }

    #[tokio::test]
    async fn mutate_denies_what_breaks_a_rule_with_the_same_answer_as_validate() {
        let spec = json!({"storage": {"format": "PVC", "folder": "inputs", "size": "abc"},
                          "data": {"format": "JSON"}, "metrics": {"schedule": "5s"}});
        let (_, mutated) = call("mutate", request("CREATE", tas(spec.clone()), None)).await;
        let (_, validated) = call("validate", request("CREATE", tas(spec), None)).await;
        assert_eq!(mutated["response"]["allowed"], false, "{mutated}");
        assert!(mutated["response"].get("patch").is_none(), "{mutated}");
        assert_eq!(
            mutated["response"]["status"],
            validated["response"]["status"]
        );
        let causes = mutated["response"]["status"]["details"]["causes"]
            .as_array()
            .map_or(0, Vec::len);
        assert_eq!(causes, 3, "{mutated}");
    }

    #[tokio::test]
    async fn mutate_of_a_defaulted_object_sends_no_patch() {
        let spec = json!({"replicas": 1, "storage": {"format": "PVC", "folder": "/inputs", "size": "1Gi", "retention": "Retain"},
                          "data": {"filename": "data.csv", "format": "CSV"}, "metrics": {"schedule": "5s", "batchSize": 5000}});
        let (_, answer) = call("mutate", request("CREATE", tas(spec), None)).await;
        assert_eq!(answer["response"]["allowed"], true);
        assert!(answer["response"].get("patch").is_none(), "{answer}");
    }

    #[tokio::test]
    async fn mutate_of_v1alpha1_leaves_out_v1_only_fields() {
        let mut object = tas(json!({"storage": {"format": "PVC"}, "metrics": {"schedule": "5s"}}));
        object["apiVersion"] = json!("trustyai.opendatahub.io/v1alpha1");
        let (_, answer) = call("mutate", request("CREATE", object, None)).await;
        let patch = decoded_patch(&answer).to_string();
        assert!(!patch.contains("retention"), "{patch}");
    }

    #[tokio::test]
    async fn validate_denies_with_field_causes() {
        let spec = json!({"storage": {"format": "PVC", "folder": "inputs", "size": "1Gx"}, "metrics": {"schedule": "5x"}});
        let (status, answer) = call("validate", request("CREATE", tas(spec), None)).await;
        assert_eq!(status, StatusCode::OK);
        let response = &answer["response"];
        assert_eq!(response["allowed"], false);
        assert_eq!(response["status"]["code"], 422);
        assert_eq!(response["status"]["reason"], "Invalid");
        let message = response["status"]["message"].as_str().expect("message");
        for field in [
            "spec.storage.folder",
            "spec.storage.size",
            "spec.metrics.schedule",
        ] {
            assert!(message.contains(field), "{field} missing in {message}");
        }
        let fields: Vec<&str> = response["status"]["details"]["causes"]
            .as_array()
            .expect("causes")
            .iter()
            .filter_map(|c| c["field"].as_str())
            .collect();
        assert!(fields.contains(&"spec.storage.size"), "{fields:?}");
    }

    #[tokio::test]
    async fn validate_allows_a_valid_object_with_warnings() {
        let spec = json!({"replicas": 3, "storage": {"format": "PVC", "folder": "/inputs", "size": "1Gi"}, "data": {"filename": "data.csv", "format": "CSV"}, "metrics": {"schedule": "5s"}});
        let (_, answer) = call("validate", request("CREATE", tas(spec), None)).await;
        assert_eq!(answer["response"]["allowed"], true, "{answer}");
        assert!(
            answer["response"]["warnings"]
                .as_array()
                .is_some_and(|w| !w.is_empty()),
            "{answer}"
        );
    }

    #[tokio::test]
    async fn delete_is_always_allowed() {
        let (_, answer) = call(
            "validate",
            request("DELETE", Value::Null, Some(tas(json!({})))),
        )
        .await;
        assert_eq!(answer["response"]["allowed"], true);
    }

    /// A review of the TrustyAIMetric `object`.
    fn metric_request(operation: &str, object: Value) -> Value {
        let mut req = request(operation, object, None);
        req["request"]["name"] = json!("m");
        req["request"]["kind"] =
            json!({"group": GROUP, "version": METRIC_VERSION, "kind": "TrustyAIMetric"});
        req["request"]["resource"] =
            json!({"group": GROUP, "version": METRIC_VERSION, "resource": METRIC_PLURAL});
        req
    }

    fn tam(spec: Value) -> Value {
        json!({"apiVersion": "trustyai.opendatahub.io/v1alpha1", "kind": "TrustyAIMetric",
               "metadata": {"name": "m", "namespace": "ns"}, "spec": spec})
    }

    fn spd() -> Value {
        json!({"model": "demo-model", "type": "spd", "protectedAttribute": "gender",
               "privilegedValue": 1, "unprivilegedValue": 0, "outcomeName": "income",
               "favorableOutcome": 1})
    }

    fn cause_fields(answer: &Value) -> Vec<String> {
        answer["response"]["status"]["details"]["causes"]
            .as_array()
            .map(|causes| {
                causes
                    .iter()
                    .filter_map(|c| c["field"].as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    }

    #[tokio::test]
    async fn validate_allows_a_valid_metric() {
        let (_, answer) = call("validate", metric_request("CREATE", tam(spd()))).await;
        assert_eq!(answer["response"]["allowed"], true, "{answer}");
        assert!(answer["response"].get("warnings").is_none(), "{answer}");
    }

    #[tokio::test]
    async fn validate_denies_a_metric_with_every_field_error() {
        let spec = json!({"model": "", "type": "spd", "batchSize": 0});
        let (status, answer) = call("validate", metric_request("UPDATE", tam(spec))).await;
        assert_eq!(status, StatusCode::OK);
        let response = &answer["response"];
        assert_eq!(response["allowed"], false, "{answer}");
        assert_eq!(response["status"]["code"], 422);
        assert_eq!(response["status"]["reason"], "Invalid");
        assert_eq!(response["status"]["details"]["kind"], "TrustyAIMetric");
        assert_eq!(response["status"]["details"]["name"], "m");
        let fields = cause_fields(&answer);
        for field in [
            "spec.model",
            "spec.batchSize",
            "spec.protectedAttribute",
            "spec.privilegedValue",
            "spec.unprivilegedValue",
            "spec.outcomeName",
        ] {
            assert!(fields.iter().any(|f| f == field), "{field} in {fields:?}");
        }
        let message = response["status"]["message"].as_str().unwrap_or_default();
        assert!(
            message.starts_with("TrustyAIMetric.trustyai.opendatahub.io \"m\" is invalid: ["),
            "{message}"
        );
        // A cause's message is the error without its field, as the API server writes them.
        let first = &response["status"]["details"]["causes"][0];
        let cause_message = first["message"].as_str().unwrap_or_default();
        assert!(!cause_message.starts_with("spec."), "{first}");
    }

    #[tokio::test]
    async fn validate_denies_a_metric_alias_naming_the_current_name() {
        let mut spec = spd();
        spec["type"] = json!("meanshift");
        let (_, answer) = call("validate", metric_request("CREATE", tam(spec))).await;
        assert_eq!(answer["response"]["allowed"], false, "{answer}");
        assert_eq!(cause_fields(&answer), ["spec.type"]);
    }

    #[tokio::test]
    async fn mutate_replaces_a_metric_alias_with_a_warning() {
        let spec = json!({"model": "demo-model", "type": "fouriermmd", "referenceTag": "training"});
        let sent = tam(spec);
        let (_, answer) = call("mutate", metric_request("CREATE", sent.clone())).await;
        assert_eq!(answer["response"]["allowed"], true, "{answer}");
        assert_eq!(answer["response"]["patchType"], "JSONPatch");
        let patch: Patch = serde_json::from_value(decoded_patch(&answer)).expect("patch");
        let mut patched = sent;
        assert!(json_patch::patch(&mut patched, &patch).is_ok());
        assert_eq!(patched["spec"]["type"], "mmd");
        let warnings = answer["response"]["warnings"].to_string();
        for part in ["spec.type", "fouriermmd", "mmd"] {
            assert!(warnings.contains(part), "{part} in {warnings}");
        }
    }

    #[tokio::test]
    async fn mutate_of_a_current_metric_sends_no_patch_nor_warning() {
        let (_, answer) = call("mutate", metric_request("CREATE", tam(spd()))).await;
        assert_eq!(answer["response"]["allowed"], true, "{answer}");
        assert!(answer["response"].get("patch").is_none(), "{answer}");
        assert!(answer["response"].get("warnings").is_none(), "{answer}");
    }

    #[tokio::test]
    async fn mutate_denies_a_broken_metric_as_validate_does_after_defaulting() {
        let spec =
            json!({"model": "demo-model", "type": "meanshift", "protectedAttribute": "gender"});
        let (_, answer) = call("mutate", metric_request("CREATE", tam(spec))).await;
        assert_eq!(answer["response"]["allowed"], false, "{answer}");
        assert!(answer["response"].get("patch").is_none(), "{answer}");
        // Judged as defaulted: the alias is no error, the fairness field is; the warning stays.
        let fields = cause_fields(&answer);
        assert!(!fields.iter().any(|f| f == "spec.type"), "{fields:?}");
        assert!(
            fields.iter().any(|f| f == "spec.protectedAttribute"),
            "{fields:?}"
        );
        assert!(
            answer["response"]["warnings"]
                .to_string()
                .contains("meanshift")
        );
    }

    #[tokio::test]
    async fn a_metric_review_must_carry_a_metric() {
        let (_, answer) = call("validate", metric_request("CREATE", tas(json!({})))).await;
        assert_eq!(answer["response"]["allowed"], false, "{answer}");
        let message = answer["response"]["status"]["message"]
            .as_str()
            .unwrap_or_default();
        assert!(
            message.contains("not a trustyai.opendatahub.io TrustyAIMetric"),
            "{message}"
        );
        let mut other_version = tam(spd());
        other_version["apiVersion"] = json!("trustyai.opendatahub.io/v1");
        let (_, answer) = call("mutate", metric_request("CREATE", other_version)).await;
        assert_eq!(answer["response"]["allowed"], false, "{answer}");
        let (_, answer) = call("mutate", metric_request("CREATE", json!([]))).await;
        let message = answer["response"]["status"]["message"]
            .as_str()
            .unwrap_or_default();
        assert!(message.contains("TrustyAIMetric object"), "{message}");
    }

    #[tokio::test]
    async fn an_update_that_leaves_a_metrics_spec_alone_is_allowed() {
        let broken = tam(json!({"model": "demo-model", "type": "spd"}));
        let mut req = metric_request("UPDATE", broken.clone());
        req["request"]["oldObject"] = broken;
        let (_, answer) = call("validate", req.clone()).await;
        assert_eq!(answer["response"]["allowed"], true, "{answer}");
        req["request"]["object"]["spec"]["model"] = json!("other");
        let (_, answer) = call("validate", req).await;
        assert_eq!(answer["response"]["allowed"], false, "{answer}");
    }

    #[tokio::test]
    async fn deleting_a_metric_is_always_allowed() {
        let (_, answer) = call("validate", metric_request("DELETE", Value::Null)).await;
        assert_eq!(answer["response"]["allowed"], true, "{answer}");
    }

    #[tokio::test]
    async fn malformed_bodies_get_400() {
        for bad in [
            b"not json".to_vec(),
            body(json!({"kind": "AdmissionReview"})),
            body(json!({"request": {"name": "x"}})),
        ] {
            let state = WebhookState::new(crate::AdmissionSettings::default());
            let response = validate(State(state), Bytes::from(bad)).await;
            assert_eq!(response.status(), StatusCode::BAD_REQUEST);
        }
    }

    #[tokio::test]
    async fn well_formed_reviews_of_the_wrong_kind_or_object_are_refused() {
        let mut wrong_kind = request("CREATE", tas(json!({})), None);
        wrong_kind["kind"] = json!("ConversionReview");
        let (_, answer) = call("validate", wrong_kind).await;
        assert_eq!(answer["response"]["allowed"], false);
        assert_eq!(answer["response"]["uid"], "u-1");
        let mut other_resource =
            request("CREATE", json!({"apiVersion": "v1", "kind": "Pod"}), None);
        other_resource["request"]["resource"] =
            json!({"group": "", "version": "v1", "resource": "pods"});
        let (_, answer) = call("mutate", other_resource).await;
        assert_eq!(answer["response"]["allowed"], false);
        assert!(
            answer["response"]["status"]["message"]
                .as_str()
                .unwrap_or_default()
                .contains("admits only trustyaiservices")
        );
        let (_, answer) = call("validate", request("CREATE", json!("a string"), None)).await;
        assert_eq!(answer["response"]["allowed"], false);
    }
}
