//! `trustyai-operator check-install`: whether an installed operator's webhooks answer, asked
//! the way a user meets them, through the API server. The chart's `helm test` pod runs it.
//!
//! Each check is a server-side dry-run create (nothing is stored, no TrustyAIService is
//! reconciled), so it needs only `create` on TrustyAIServices and TrustyAIMetrics in one
//! namespace:
//!
//! 1. admission: a minimal v1 object is admitted and comes back with the defaults only the
//!    mutating webhook adds (the CRD schema has none), so the API server called `/mutate` and
//!    `/validate` allowed it;
//! 2. conversion: the same object sent as v1alpha1 comes back as v1alpha1: v1 is stored, so the
//!    API server converted it both ways through `/convert`;
//! 3. rules: an object with a malformed `spec.image` is refused by an admission webhook naming
//!    `spec.image`. CEL does not hold that rule, so only the webhooks can refuse it (the
//!    defaulting webhook refuses an object the rules refuse, so that every error is reported in
//!    one answer before CEL stops the request);
//! 4. metrics: a TrustyAIMetric named by one of the service's deprecated type names comes back
//!    with the current name, which only the mutating webhook writes (the CRD's schema refuses
//!    the deprecated names), so the API server calls the webhooks for TrustyAIMetrics too.
//!
//! A webhook the API server cannot reach fails its check with the API server's own message.

use std::fmt;
use std::process::ExitCode;

use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use kube::core::GroupVersionKind;
use kube::{Client, ResourceExt};
use serde_json::{Value, json};
use trustyai_crds::contract::{DEPRECATED_VERSION, GROUP, KIND, PLURAL, STORAGE_VERSION};

use crate::cli::CheckInstallArgs;

/// The name prefix of the dry-run objects (`generateName`, so a TrustyAIService of any name
/// can exist in the namespace).
const GENERATE_NAME: &str = "install-check-";
/// A `spec.image` that is no image reference, whatever prefixes the operator allows.
const MALFORMED_IMAGE: &str = "Not An Image";
/// The field a default of the mutating webhook lands in (v1 only; the CRD has no default).
const DEFAULTED_FIELD: &str = "spec.storage.retention";
/// A deprecated metric type name the mutating webhook replaces, and its current name.
const METRIC_ALIAS: (&str, &str) = ("meanshift", "comparemeans");

/// Why a check failed.
#[derive(Debug, thiserror::Error)]
pub enum CheckFailure {
    #[error("the API server refused the dry-run create")]
    Refused(#[source] kube::Error),
    #[error(
        "the answer has no {field}: the mutating webhook did not default the object (is namespace {namespace} outside webhook.namespaceSelector?)"
    )]
    NotDefaulted {
        field: &'static str,
        namespace: String,
    },
    #[error("the answer is in {got}, not {wanted}")]
    NotConverted { got: String, wanted: &'static str },
    #[error(
        "an object with spec.image {MALFORMED_IMAGE:?} was accepted: no admission webhook judged it (is namespace {namespace} outside webhook.namespaceSelector?)"
    )]
    NotRefused { namespace: String },
    #[error("refused, but not by an admission webhook naming spec.image: {message}")]
    RefusedOtherwise { message: String },
    #[error(
        "the answer's spec.type is {got:?}, not {wanted:?}: the mutating webhook did not admit the TrustyAIMetric (is namespace {namespace} outside webhook.namespaceSelector?)"
    )]
    MetricNotDefaulted {
        got: String,
        wanted: &'static str,
        namespace: String,
    },
}

/// One check's name and outcome.
pub struct CheckResult {
    /// What was checked.
    pub name: &'static str,
    /// What the API server showed, or why the check failed.
    pub outcome: Result<String, CheckFailure>,
}

impl fmt::Display for CheckResult {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.outcome {
            Ok(shown) => write!(f, "ok      {}: {shown}", self.name),
            Err(e) => write!(f, "FAILED  {}: {}", self.name, crate::error_chain::Chain(e)),
        }
    }
}

/// Runs the command: every check, one line each; exit 1 when one failed.
pub async fn run_cli(args: &CheckInstallArgs) -> ExitCode {
    let Some(client) = crate::kube_client::client_or_report(args.kubeconfig.as_deref()).await
    else {
        return ExitCode::from(2);
    };
    let results = check(client, &args.namespace).await;
    for result in &results {
        println!("{result}");
    }
    if results.iter().all(|r| r.outcome.is_ok()) {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// Every check, in order, against the TrustyAIServices of `namespace`.
pub async fn check(client: Client, namespace: &str) -> Vec<CheckResult> {
    let v1 = api(&client, namespace, STORAGE_VERSION);
    let v1alpha1 = api(&client, namespace, DEPRECATED_VERSION);
    vec![
        CheckResult {
            name: "admission (/mutate, /validate)",
            outcome: defaulted(&v1, namespace).await,
        },
        CheckResult {
            name: "conversion (/convert)",
            outcome: converted(&v1alpha1).await,
        },
        CheckResult {
            name: "rules",
            outcome: refused(&v1, namespace).await,
        },
        CheckResult {
            name: "metrics (/mutate)",
            outcome: metric_defaulted(&client, namespace).await,
        },
    ]
}

fn resource(version: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(GROUP, version, KIND), PLURAL)
}

fn api(client: &Client, namespace: &str, version: &str) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), namespace, &resource(version))
}

/// An object in `version` with `spec` and a generated name.
fn object(version: &str, spec: Value) -> DynamicObject {
    let mut object = DynamicObject::new("", &resource(version)).data(json!({ "spec": spec }));
    object.metadata.name = None;
    object.metadata.generate_name = Some(GENERATE_NAME.to_owned());
    object
}

fn minimal_spec() -> Value {
    json!({"storage": {"format": "PVC"}, "metrics": {"schedule": "5s"}})
}

fn dry_run() -> PostParams {
    PostParams {
        dry_run: true,
        ..PostParams::default()
    }
}

async fn defaulted(api: &Api<DynamicObject>, namespace: &str) -> Result<String, CheckFailure> {
    let answer = api
        .create(&dry_run(), &object(STORAGE_VERSION, minimal_spec()))
        .await
        .map_err(CheckFailure::Refused)?;
    let value = serde_json::to_value(&answer.data).unwrap_or(Value::Null);
    // `answer.data` holds what is not metadata, so the pointer starts at `spec`.
    let pointer = format!("/{}", DEFAULTED_FIELD.replace('.', "/"));
    match value.pointer(&pointer) {
        Some(default) => Ok(format!(
            "{} was admitted and defaulted ({DEFAULTED_FIELD}: {default})",
            answer.name_any(),
        )),
        None => Err(CheckFailure::NotDefaulted {
            field: DEFAULTED_FIELD,
            namespace: namespace.to_owned(),
        }),
    }
}

async fn converted(api: &Api<DynamicObject>) -> Result<String, CheckFailure> {
    let answer = api
        .create(&dry_run(), &object(DEPRECATED_VERSION, minimal_spec()))
        .await
        .map_err(CheckFailure::Refused)?;
    let wanted = format!("{GROUP}/{DEPRECATED_VERSION}");
    let got = answer
        .types
        .as_ref()
        .map(|t| t.api_version.clone())
        .unwrap_or_default();
    if got == wanted {
        Ok(format!(
            "{} sent as {DEPRECATED_VERSION} (the CRD stores {STORAGE_VERSION}) came back as {DEPRECATED_VERSION}",
            answer.name_any()
        ))
    } else {
        Err(CheckFailure::NotConverted {
            got,
            wanted: DEPRECATED_VERSION,
        })
    }
}

async fn refused(api: &Api<DynamicObject>, namespace: &str) -> Result<String, CheckFailure> {
    let mut spec = minimal_spec();
    spec["image"] = json!(MALFORMED_IMAGE);
    match api.create(&dry_run(), &object(STORAGE_VERSION, spec)).await {
        Ok(_) => Err(CheckFailure::NotRefused {
            namespace: namespace.to_owned(),
        }),
        Err(kube::Error::Api(status)) => {
            let by_webhook = status.message.contains("admission webhook")
                && status.message.contains("spec.image");
            if by_webhook {
                Ok(format!(
                    "a malformed spec.image was refused ({})",
                    status.message
                ))
            } else {
                Err(CheckFailure::RefusedOtherwise {
                    message: status.message.clone(),
                })
            }
        }
        Err(e) => Err(CheckFailure::Refused(e)),
    }
}

async fn metric_defaulted(client: &Client, namespace: &str) -> Result<String, CheckFailure> {
    use trustyai_crds::metric::TrustyAIMetric;
    let (alias, current) = METRIC_ALIAS;
    let mut metric = TrustyAIMetric::new(
        "",
        trustyai_crds::metric::types::TrustyAIMetricSpec {
            model: "install-check".to_owned(),
            type_: alias.to_owned(),
            ..Default::default()
        },
    );
    metric.metadata.name = None;
    metric.metadata.generate_name = Some(GENERATE_NAME.to_owned());
    let answer = Api::<TrustyAIMetric>::namespaced(client.clone(), namespace)
        .create(&dry_run(), &metric)
        .await
        .map_err(CheckFailure::Refused)?;
    if answer.spec.type_ == current {
        Ok(format!(
            "{} was admitted with spec.type {alias:?} replaced by {current:?}",
            answer.name_any()
        ))
    } else {
        Err(CheckFailure::MetricNotDefaulted {
            got: answer.spec.type_,
            wanted: current,
            namespace: namespace.to_owned(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::mock_api::{Expected, MockApi};
    use http::Method;

    const V1: &str = "/apis/trustyai.opendatahub.io/v1/namespaces/models/trustyaiservices";
    const V1ALPHA1: &str =
        "/apis/trustyai.opendatahub.io/v1alpha1/namespaces/models/trustyaiservices";
    const METRICS: &str =
        "/apis/trustyai.opendatahub.io/v1alpha1/namespaces/models/trustyaimetrics";

    /// The checks against an API server whose webhooks do not see the namespace (outside their
    /// namespaceSelector): every dry run is stored as sent. Returns the API server and the
    /// checks' lines.
    async fn checked_where_webhooks_never_see_the_namespace() -> (MockApi, Vec<String>) {
        let (api, client) = MockApi::new([
            Expected::write(Method::POST, V1),
            Expected::write(Method::POST, V1ALPHA1),
            Expected::write(Method::POST, V1),
            Expected::write(Method::POST, METRICS),
        ]);
        let results = check(client, "models").await;
        (api, results.iter().map(ToString::to_string).collect())
    }

    #[tokio::test]
    async fn the_checks_only_make_dry_runs() {
        let (api, _lines) = checked_where_webhooks_never_see_the_namespace().await;
        assert!(
            api.requests()
                .iter()
                .all(|r| r.query.contains("dryRun=All")),
            "only dry runs"
        );
    }

    #[tokio::test]
    async fn webhooks_that_never_see_the_namespace_fail_three_checks_naming_the_selector() {
        let (_api, lines) = checked_where_webhooks_never_see_the_namespace().await;
        assert!(
            lines[0].starts_with(
                "FAILED  admission (/mutate, /validate): the answer has no spec.storage.retention"
            ) && lines[0].contains("webhook.namespaceSelector"),
            "{lines:?}"
        );
        assert!(
            lines[1].starts_with("ok      conversion (/convert)"),
            "{lines:?}"
        );
        assert!(
            lines[2].starts_with("FAILED  rules: an object with spec.image")
                && lines[2].contains("webhook.namespaceSelector"),
            "{lines:?}"
        );
        assert!(
            lines[3].starts_with(
                "FAILED  metrics (/mutate): the answer's spec.type is \"meanshift\", not \"comparemeans\""
            ) && lines[3].contains("webhook.namespaceSelector"),
            "{lines:?}"
        );
    }

    #[tokio::test]
    async fn a_refusal_that_is_not_the_webhooks_fails_the_rules_check() {
        let message = "trustyaiservices.trustyai.opendatahub.io is forbidden: User cannot create";
        let refusal = Expected::refused(Method::POST, V1, 403, "Forbidden", message);
        let (_api, client) = MockApi::new([refusal]);
        let outcome = refused(&api(&client, "models", STORAGE_VERSION), "models").await;
        assert!(
            matches!(&outcome, Err(CheckFailure::RefusedOtherwise { message }) if message.contains("forbidden")),
            "{outcome:?}"
        );
    }
}
