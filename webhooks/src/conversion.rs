//! `POST /convert`: the CRD conversion webhook. The rules are `trustyai_crds::conversion`'s; this
//! handler only turns bytes into a `ConversionReview` and back.

use axum::body::Bytes;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use kube::core::conversion::ConversionReview;

use crate::observe::{Endpoint, Outcome, WebhookState};

/// Answers one `ConversionReview`. A body that is not a review at all gets HTTP 400 (there is
/// no uid to answer); anything that parses gets a well-formed review, success or failure.
pub async fn convert(
    axum::extract::State(state): axum::extract::State<WebhookState>,
    body: Bytes,
) -> Response {
    let started = std::time::Instant::now();
    let review: ConversionReview = match serde_json::from_slice(&body) {
        Ok(review) => review,
        Err(e) => {
            tracing::warn!(error = %e, "malformed ConversionReview");
            state
                .observer
                .request(Endpoint::Convert, Outcome::Malformed, started.elapsed());
            return (
                StatusCode::BAD_REQUEST,
                format!("malformed ConversionReview: {e}"),
            )
                .into_response();
        }
    };
    let (uid, desired, count) = review
        .request
        .as_ref()
        .map(|r| {
            (
                r.uid.clone(),
                r.desired_api_version.clone(),
                r.objects.len(),
            )
        })
        .unwrap_or_default();
    let span = tracing::info_span!("convert", uid = %uid, desired = %desired, objects = count);
    let _entered = span.enter();
    let answer = trustyai_crds::conversion::convert_review(review);
    let ok = answer
        .response
        .as_ref()
        .is_some_and(|r| !r.result.is_failure());
    if ok {
        state.observer.conversion(&desired, count);
        tracing::debug!("converted");
    } else {
        let message = answer
            .response
            .as_ref()
            .map(|r| r.result.message.clone())
            .unwrap_or_default();
        tracing::warn!(%message, "conversion failed");
    }
    let outcome = if ok {
        Outcome::Allowed
    } else {
        Outcome::Failed
    };
    state
        .observer
        .request(Endpoint::Convert, outcome, started.elapsed());
    axum::Json(answer).into_response()
}
