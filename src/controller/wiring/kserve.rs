//! Wiring a TrustyAIService into the KServe InferenceServices of its namespace as their
//! payload logger, and undoing it.
//!
//! Dispatch is on the annotation `serving.kserve.io/deploymentMode`:
//!
//! | Mode | Action |
//! |---|---|
//! | `ModelMesh` | [`super::modelmesh`] on the ModelMesh Deployments |
//! | `RawDeployment`, `Standard` | logger `https://<cr>.<ns>.svc.cluster.local` |
//! | `Serverless`, `Knative` | logger `http://<cr>.<ns>.svc.cluster.local`, only when the operator ConfigMap has `kServeServerless: enabled` |
//! | anything else, or no annotation | skipped |
//!
//! The logger is `spec.predictor.logger = {mode: all, url}`. An InferenceService has a single
//! logger, so one already pointing elsewhere is reported as a [`LoggerChange::Conflict`] and left
//! alone: the Go operator overwrote it, and two TrustyAIServices in one namespace then took it
//! from each other on every reconcile. Our own URL under the other scheme (the mode changed) is
//! replaced. Removal clears the logger only when it is ours (either scheme) and drops the
//! annotations KServe derived from it.

use std::collections::BTreeMap;

use kube::core::DynamicObject;
use serde_json::{Value, json};
use trustyai_crds::contract::{config_map, kserve};

use super::json_patch::{Builder, JsonPatch, pointer};

/// How an InferenceService's deployment mode is served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeploymentMode {
    /// `ModelMesh`.
    ModelMesh,
    /// `RawDeployment` or `Standard`: plain Kubernetes Deployments.
    Raw,
    /// `Serverless` or `Knative`.
    Serverless,
    /// Any other value, or `None` when the annotation is absent.
    Unknown(Option<String>),
}

/// What to do with one InferenceService.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IsvcWiring {
    /// Patch the namespace's ModelMesh Deployments with [`super::modelmesh::wire`].
    ModelMesh,
    /// Set the logger to `url` with [`set_logger`].
    Logger {
        /// The logger URL.
        url: String,
    },
    /// Leave it alone.
    Skip(SkipReason),
}

/// Why an InferenceService is left alone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SkipReason {
    /// Serverless mode while the operator ConfigMap does not enable `kServeServerless`.
    ServerlessDisabled,
    /// The deployment mode is not one this operator wires (or the annotation is missing).
    UnknownMode(Option<String>),
}

/// The outcome of [`set_logger`].
#[derive(Debug, Clone, PartialEq)]
pub enum LoggerChange {
    /// The logger already points at the URL.
    Unchanged,
    /// Apply this patch.
    Patch(JsonPatch),
    /// Another logger is configured; it is left in place.
    Conflict {
        /// Its URL.
        existing_url: String,
    },
    /// The InferenceService has no `spec.predictor` object (it is invalid); nothing to do.
    NoPredictor,
}

/// Whether the operator ConfigMap's `kServeServerless` enables Serverless wiring: only the exact
/// value `enabled` does; a missing ConfigMap or key does not.
pub fn serverless_enabled(config_map_data: Option<&BTreeMap<String, String>>) -> bool {
    config_map_data
        .and_then(|d| d.get(config_map::KSERVE_SERVERLESS))
        .is_some_and(|v| v == kserve::SERVERLESS_ENABLED)
}

/// The deployment mode of `isvc`.
pub fn deployment_mode(isvc: &DynamicObject) -> DeploymentMode {
    match annotation(isvc, kserve::DEPLOYMENT_MODE_ANNOTATION) {
        Some(kserve::MODE_MODELMESH) => DeploymentMode::ModelMesh,
        Some(kserve::MODE_RAW_DEPLOYMENT | kserve::MODE_STANDARD) => DeploymentMode::Raw,
        Some(kserve::MODE_SERVERLESS | kserve::MODE_KNATIVE) => DeploymentMode::Serverless,
        other => DeploymentMode::Unknown(other.map(str::to_owned)),
    }
}

/// The logger URL of the TrustyAIService `cr` in `namespace`.
pub fn logger_url(cr: &str, namespace: &str, https: bool) -> String {
    let scheme = if https { "https" } else { "http" };
    format!("{scheme}://{cr}.{namespace}.svc.cluster.local")
}

/// What to do with `isvc` for the TrustyAIService `cr` in `namespace`.
pub fn plan(
    isvc: &DynamicObject,
    cr: &str,
    namespace: &str,
    serverless_enabled: bool,
) -> IsvcWiring {
    match deployment_mode(isvc) {
        DeploymentMode::ModelMesh => IsvcWiring::ModelMesh,
        DeploymentMode::Raw => IsvcWiring::Logger {
            url: logger_url(cr, namespace, true),
        },
        DeploymentMode::Serverless if serverless_enabled => IsvcWiring::Logger {
            url: logger_url(cr, namespace, false),
        },
        DeploymentMode::Serverless => IsvcWiring::Skip(SkipReason::ServerlessDisabled),
        DeploymentMode::Unknown(mode) => IsvcWiring::Skip(SkipReason::UnknownMode(mode)),
    }
}

/// Whether `isvc` runs with the Istio sidecar, so the TrustyAIService needs its
/// DestinationRule and VirtualService.
pub fn uses_istio(isvc: &DynamicObject) -> bool {
    annotation(isvc, kserve::ISTIO_INJECT_ANNOTATION) == Some("true")
}

/// Points the logger of `isvc` at `url` (from [`plan`]) for the TrustyAIService `cr` in
/// `namespace`.
pub fn set_logger(isvc: &DynamicObject, cr: &str, namespace: &str, url: &str) -> LoggerChange {
    let Some(predictor) = isvc
        .data
        .pointer("/spec/predictor")
        .and_then(Value::as_object)
    else {
        return LoggerChange::NoPredictor;
    };
    let logger_path = pointer(&["spec", "predictor", "logger"]);
    let logger = json!({ "mode": kserve::LOGGER_MODE, "url": url });
    let mut patch = Builder::guarded_by(isvc.metadata.resource_version.as_deref());
    match predictor.get("logger") {
        None | Some(Value::Null) => patch.add(logger_path, logger),
        Some(existing) => match existing.get("url").and_then(Value::as_str) {
            Some(current) if current == url => return LoggerChange::Unchanged,
            Some(current) if !is_ours(current, cr, namespace) && !current.is_empty() => {
                return LoggerChange::Conflict {
                    existing_url: current.to_owned(),
                };
            }
            _ => patch.replace(logger_path, logger),
        },
    }
    LoggerChange::Patch(patch.finish())
}

/// Removes the logger of `isvc` if it points at the TrustyAIService `cr` in `namespace`, with
/// the `internal.serving.kserve.io/logger*` annotations. Empty when the logger is not ours.
pub fn remove_logger(isvc: &DynamicObject, cr: &str, namespace: &str) -> JsonPatch {
    let url = isvc
        .data
        .pointer("/spec/predictor/logger/url")
        .and_then(Value::as_str);
    let Some(url) = url.filter(|u| is_ours(u, cr, namespace)) else {
        return JsonPatch::default();
    };
    let mut patch = Builder::guarded_by(isvc.metadata.resource_version.as_deref());
    patch.test(pointer(&["spec", "predictor", "logger", "url"]), json!(url));
    patch.remove(pointer(&["spec", "predictor", "logger"]));
    if let Some(annotations) = &isvc.metadata.annotations {
        for key in kserve::LOGGER_ANNOTATIONS {
            if annotations.contains_key(key) {
                patch.remove(pointer(&["metadata", "annotations", key]));
            }
        }
    }
    patch.finish()
}

fn is_ours(url: &str, cr: &str, namespace: &str) -> bool {
    let url = url.trim_end_matches('/');
    url == logger_url(cr, namespace, true) || url == logger_url(cr, namespace, false)
}

fn annotation<'a>(isvc: &'a DynamicObject, key: &str) -> Option<&'a str> {
    isvc.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .map(String::as_str)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::wiring::json_patch::apply;

    fn isvc(mode: Option<&str>, logger: Option<Value>) -> DynamicObject {
        let mut annotations = serde_json::Map::new();
        if let Some(mode) = mode {
            annotations.insert("serving.kserve.io/deploymentMode".into(), json!(mode));
        }
        let mut predictor = json!({"model": {"modelFormat": {"name": "sklearn"}}});
        if let Some(logger) = logger {
            predictor["logger"] = logger;
        }
        serde_json::from_value(json!({
            "apiVersion": "serving.kserve.io/v1beta1",
            "kind": "InferenceService",
            "metadata": {"name": "model", "namespace": "models", "resourceVersion": "5",
                         "annotations": annotations},
            "spec": {"predictor": predictor}
        }))
        .expect("isvc")
    }

    /// A RawDeployment InferenceService whose logger sends everything to `url`.
    fn raw_deployment_logging_to(url: &str) -> DynamicObject {
        isvc(
            Some("RawDeployment"),
            Some(json!({"mode": "all", "url": url})),
        )
    }

    fn patched(object: &DynamicObject, patch: &JsonPatch) -> DynamicObject {
        let mut value = serde_json::to_value(object).expect("json");
        apply(&mut value, patch).expect("applies");
        serde_json::from_value(value).expect("object")
    }

    #[test]
    fn dispatch_per_mode() {
        let https = IsvcWiring::Logger {
            url: "https://tas.models.svc.cluster.local".into(),
        };
        let http = IsvcWiring::Logger {
            url: "http://tas.models.svc.cluster.local".into(),
        };
        let cases = [
            (Some("ModelMesh"), true, IsvcWiring::ModelMesh),
            (Some("RawDeployment"), false, https.clone()),
            (Some("Standard"), false, https),
            (Some("Serverless"), true, http.clone()),
            (Some("Knative"), true, http),
            (
                Some("Serverless"),
                false,
                IsvcWiring::Skip(SkipReason::ServerlessDisabled),
            ),
            (
                Some("Knative"),
                false,
                IsvcWiring::Skip(SkipReason::ServerlessDisabled),
            ),
            (
                Some("Other"),
                true,
                IsvcWiring::Skip(SkipReason::UnknownMode(Some("Other".into()))),
            ),
            (None, true, IsvcWiring::Skip(SkipReason::UnknownMode(None))),
        ];
        for (mode, serverless, expected) in cases {
            assert_eq!(
                plan(&isvc(mode, None), "tas", "models", serverless),
                expected,
                "{mode:?}"
            );
        }
    }

    #[test]
    fn serverless_flag() {
        let data = |v: &str| BTreeMap::from([("kServeServerless".to_owned(), v.to_owned())]);
        assert!(serverless_enabled(Some(&data("enabled"))));
        assert!(!serverless_enabled(Some(&data("disabled"))));
        assert!(!serverless_enabled(Some(&data("Enabled"))));
        assert!(!serverless_enabled(Some(&BTreeMap::new())));
        assert!(!serverless_enabled(None));
    }

    #[test]
    fn set_then_unchanged_then_removed() {
        let url = logger_url("tas", "models", true);
        let mut object = isvc(Some("RawDeployment"), None);
        object
            .metadata
            .annotations
            .get_or_insert_default()
            .insert("internal.serving.kserve.io/logger".into(), "true".into());
        let LoggerChange::Patch(patch) = set_logger(&object, "tas", "models", &url) else {
            panic!("expected a patch");
        };
        let wired = patched(&object, &patch);
        assert_eq!(
            wired.data["spec"]["predictor"]["logger"],
            json!({"mode": "all", "url": "https://tas.models.svc.cluster.local"})
        );
        assert_eq!(
            set_logger(&wired, "tas", "models", &url),
            LoggerChange::Unchanged
        );

        let removal = remove_logger(&wired, "tas", "models");
        let unwired = patched(&wired, &removal);
        assert!(unwired.data["spec"]["predictor"].get("logger").is_none());
        assert!(
            !unwired
                .metadata
                .annotations
                .as_ref()
                .expect("annotations")
                .contains_key("internal.serving.kserve.io/logger")
        );
        assert!(remove_logger(&unwired, "tas", "models").is_empty());
    }

    const FOREIGN_URL: &str = "https://other.models.svc.cluster.local";

    #[test]
    fn a_foreign_logger_is_a_conflict() {
        let object = raw_deployment_logging_to(FOREIGN_URL);
        assert_eq!(
            set_logger(&object, "tas", "models", &logger_url("tas", "models", true)),
            LoggerChange::Conflict {
                existing_url: FOREIGN_URL.into()
            }
        );
    }

    #[test]
    fn a_foreign_logger_is_never_removed() {
        let object = raw_deployment_logging_to(FOREIGN_URL);
        assert!(remove_logger(&object, "tas", "models").is_empty());
    }

    /// An InferenceService logging to this TrustyAIService over plain HTTP.
    fn logging_to_us_over_http() -> DynamicObject {
        raw_deployment_logging_to("http://tas.models.svc.cluster.local")
    }

    #[test]
    fn our_url_under_the_other_scheme_is_removable() {
        assert!(!remove_logger(&logging_to_us_over_http(), "tas", "models").is_empty());
    }

    #[test]
    fn our_url_under_the_other_scheme_is_replaced() {
        let object = logging_to_us_over_http();
        let url = logger_url("tas", "models", true);
        let LoggerChange::Patch(patch) = set_logger(&object, "tas", "models", &url) else {
            panic!("expected a patch");
        };
        assert_eq!(
            patched(&object, &patch).data["spec"]["predictor"]["logger"]["url"],
            json!(url)
        );
    }

    #[test]
    fn logger_without_url_is_replaced() {
        let object = isvc(Some("Standard"), Some(json!({"mode": "request"})));
        let url = logger_url("tas", "models", true);
        assert!(matches!(
            set_logger(&object, "tas", "models", &url),
            LoggerChange::Patch(p) if !p.is_empty()
        ));
    }

    #[test]
    fn invalid_isvc_without_predictor() {
        let mut object = isvc(Some("Standard"), None);
        object.data = json!({"spec": {}});
        assert_eq!(
            set_logger(&object, "tas", "models", "https://x"),
            LoggerChange::NoPredictor
        );
    }

    #[test]
    fn istio_annotation() {
        let mut object = isvc(Some("Standard"), None);
        assert!(!uses_istio(&object));
        object
            .metadata
            .annotations
            .get_or_insert_default()
            .insert("sidecar.istio.io/inject".into(), "true".into());
        assert!(uses_istio(&object));
    }
}
