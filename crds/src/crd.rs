//! The CustomResourceDefinition for TrustyAIService: both versions merged, v1 stored, CEL rules
//! for what a schema can carry, and conversion through the operator's webhook.
//!
//! `trustyai-operator crd` prints [`crd_yaml`]; the committed `crds/trustyaiservices.yaml` must
//! equal it (a test checks).

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceConversion, CustomResourceDefinition, ServiceReference, WebhookClientConfig,
    WebhookConversion,
};
use kube::CustomResourceExt;
use kube::core::crd::merge_crds;
use serde_json::{Value, json};

use crate::contract::STORAGE_VERSION;
use crate::patterns;
use crate::rule_messages as says;

/// The webhook Service the committed CRD points conversion at. The operator (or the chart)
/// replaces the whole client config at install time; a CRD with `strategy: Webhook` must name
/// some client config to be accepted at all.
pub const DEFAULT_WEBHOOK_SERVICE: &str = "trustyai-operator-webhook";
/// Namespace of [`DEFAULT_WEBHOOK_SERVICE`] in the committed CRD.
pub const DEFAULT_WEBHOOK_NAMESPACE: &str = "trustyai-operator-system";
/// Path of the conversion endpoint on the operator's HTTPS server.
pub const CONVERT_PATH: &str = "/convert";

/// Errors building the CRD. They can only come from a programming mistake in this crate (the
/// input is compiled in), but they are reported, not panicked on.
#[derive(Debug, thiserror::Error)]
pub enum CrdError {
    #[error("merging the TrustyAIService versions into one CRD failed")]
    Merge(#[from] kube::core::crd::MergeError),
    #[error("the CRD does not (de)serialize")]
    Serde(#[from] serde_json::Error),
    #[error("schema path {0} is missing in the generated CRD")]
    MissingSchemaPath(String),
}

/// One CEL rule: where it applies (a path of property names below `openAPIV3Schema`), the
/// expression, the message shown to the user, and whether it may see a missing `oldSelf`.
struct CelRule {
    path: &'static [&'static str],
    rule: String,
    message: String,
    /// `optionalOldSelf`: the rule also runs on create, where `oldSelf` has no value.
    optional_old_self: bool,
    /// `fieldPath`, relative to `path`: the field the API server names in the error, for a rule
    /// that has to sit higher up to see the fields it relates.
    field_path: Option<&'static str>,
}

impl CelRule {
    fn reported_at(self, field_path: &'static str) -> Self {
        Self {
            field_path: Some(field_path),
            ..self
        }
    }
}

fn rule(
    path: &'static [&'static str],
    rule: impl Into<String>,
    message: impl Into<String>,
) -> CelRule {
    CelRule {
        path,
        rule: rule.into(),
        message: message.into(),
        optional_old_self: false,
        field_path: None,
    }
}

/// Migration mode, in CEL on `spec` (the Go operator's rule: DATABASE storage reading the files
/// of `storage.folder` and `data.filename`).
const MIGRATION: &str = "has(self.storage.folder) && has(self.data) && has(self.data.filename)";

/// Rules a schema can carry, so the most important constraints hold even while the admission
/// webhook is down. The webhook checks the same rules with the same patterns and the same
/// messages ([`says`]), and adds the ones CEL can't express (image prefixes, the schedule's
/// minimum, warnings).
fn cel_rules() -> Vec<CelRule> {
    let subdomain = format!(
        "self.matches('{}')",
        patterns::DNS1123_SUBDOMAIN.replace('\\', "\\\\")
    );
    // Only on create (the name is immutable), so an object created under an older rule can
    // still be updated and deleted. At the root, where a rule cannot name the field it checks
    // (`metadata` has no schema of its own), so the message names it.
    let on_create = |rule: String, message: &str| CelRule {
        path: &[],
        rule: format!("oldSelf.hasValue() || ({rule})"),
        message: format!("metadata.name {message}"),
        optional_old_self: true,
        field_path: None,
    };
    vec![
        on_create(
            format!("self.metadata.name.size() <= {}", patterns::SERVICE_NAME_MAX),
            &says::name_length(),
        ),
        on_create(
            format!("self.metadata.name.matches('{}')", patterns::DNS1035_LABEL),
            says::NAME_LABEL,
        ),
        rule(
            &["spec"],
            format!("!has(self.storage.pv) || self.storage.format == 'PVC' || {MIGRATION}"),
            says::PV_MODE,
        )
        .reported_at(".storage.pv"),
        rule(
            &["spec", "storage"],
            "!(oldSelf.format == 'DATABASE' && self.format == 'PVC')",
            says::FORMAT_BACK,
        )
        .reported_at(".format"),
        // On `spec`, to see whether the volume is still used: the field goes only with the end
        // of a migration.
        rule(
            &["spec"],
            "!has(oldSelf.storage.pv) || !has(self.storage.pv) || self.storage.pv == oldSelf.storage.pv",
            says::pv_changed(None),
        )
        .reported_at(".storage.pv"),
        rule(
            &["spec"],
            format!(
                "!has(oldSelf.storage.pv) || has(self.storage.pv) || (self.storage.format == 'DATABASE' && !({MIGRATION}))"
            ),
            says::pv_removed(None),
        )
        .reported_at(".storage.pv"),
        rule(
            &["spec", "storage"],
            "!has(oldSelf.size) || !has(self.size) || !isQuantity(oldSelf.size) || !isQuantity(self.size) || quantity(self.size).compareTo(quantity(oldSelf.size)) >= 0",
            says::size_shrink(None),
        )
        .reported_at(".size"),
        rule(
            &["spec", "storage", "folder"],
            format!(
                "self.startsWith('/') && !self.matches('{}')",
                patterns::DOT_DOT_SEGMENT.replace('\\', "\\\\")
            ),
            says::FOLDER,
        ),
        rule(&["spec", "storage", "size"], "isQuantity(self)", says::SIZE_QUANTITY),
        rule(
            &["spec", "storage", "size"],
            "!isQuantity(self) || quantity(self).isGreaterThan(quantity('0'))",
            says::SIZE_POSITIVE,
        ),
        rule(&["spec", "storage", "pv"], subdomain.clone(), says::SUBDOMAIN),
        rule(
            &["spec", "storage", "databaseConfigurations"],
            subdomain,
            says::SUBDOMAIN,
        ),
        rule(
            &["spec", "data", "filename"],
            "self != '' && self != '.' && self != '..' && !self.contains('/')",
            says::FILENAME,
        ),
        rule(
            &["spec", "metrics", "schedule"],
            format!("self.matches('{}')", patterns::SCHEDULE),
            says::SCHEDULE,
        ),
    ]
}

/// The TrustyAIService CRD: v1alpha1 and v1 served, v1 stored, conversion by webhook.
pub fn crd() -> Result<CustomResourceDefinition, CrdError> {
    let merged = merge_crds(
        vec![
            crate::v1alpha1::TrustyAIService::crd(),
            crate::v1::TrustyAIService::crd(),
        ],
        STORAGE_VERSION,
    )?;
    let mut value = serde_json::to_value(&merged)?;
    if let Some(versions) = value
        .pointer_mut("/spec/versions")
        .and_then(Value::as_array_mut)
    {
        // merge_crds appends non-stored versions in reverse; keep a stable, readable order.
        versions.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
        for version in versions.iter_mut() {
            let stored = version["name"] == STORAGE_VERSION;
            version["additionalPrinterColumns"] = printer_columns(stored);
            let schema = version
                .pointer_mut("/schema/openAPIV3Schema")
                .ok_or_else(|| CrdError::MissingSchemaPath("openAPIV3Schema".into()))?;
            tidy_schema(schema);
            schema["description"] = json!(ROOT_DESCRIPTION);
            for r in cel_rules() {
                add_rule(schema, &r)?;
            }
        }
    }
    let mut crd: CustomResourceDefinition = serde_json::from_value(value)?;
    crd.spec.conversion = Some(CustomResourceConversion {
        strategy: "Webhook".into(),
        webhook: Some(WebhookConversion {
            conversion_review_versions: vec!["v1".into()],
            client_config: Some(WebhookClientConfig {
                service: Some(ServiceReference {
                    name: DEFAULT_WEBHOOK_SERVICE.into(),
                    namespace: DEFAULT_WEBHOOK_NAMESPACE.into(),
                    path: Some(CONVERT_PATH.into()),
                    port: Some(443),
                }),
                ..WebhookClientConfig::default()
            }),
        }),
    });
    Ok(crd)
}

/// `kubectl get tas` columns, the same in both versions except what only v1 has; the wide ones
/// (`-o wide`, priority 1) say which image runs, which database Secret a DATABASE service uses and
/// which generation the status describes.
fn printer_columns(stored: bool) -> Value {
    let ready = r#".status.conditions[?(@.type=="Ready")]"#;
    let mut columns = vec![
        json!({"name": "Ready", "type": "string", "description": "Status of the Ready condition", "jsonPath": format!("{ready}.status")}),
        json!({"name": "Reason", "type": "string", "description": "Reason of the Ready condition", "jsonPath": format!("{ready}.reason")}),
        json!({"name": "Storage", "type": "string", "description": "Storage format: PVC or DATABASE", "jsonPath": ".spec.storage.format"}),
        json!({"name": "Replicas", "type": "integer", "description": "Desired number of service replicas", "jsonPath": ".spec.replicas"}),
        json!({"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}),
        json!({"name": "Phase", "type": "string", "priority": 1, "description": "Ready or Not Ready", "jsonPath": ".status.phase"}),
        json!({"name": "Database", "type": "string", "priority": 1, "description": "Secret with the database credentials (DATABASE storage)", "jsonPath": ".spec.storage.databaseConfigurations"}),
    ];
    if stored {
        columns.push(json!({"name": "Image", "type": "string", "priority": 1, "description": "TrustyAI service image deployed", "jsonPath": ".status.image"}));
        columns.push(json!({"name": "Observed", "type": "integer", "priority": 1, "description": "Generation the status describes", "jsonPath": ".status.observedGeneration"}));
    }
    Value::Array(columns)
}

/// `kubectl explain tas` text.
const ROOT_DESCRIPTION: &str = "TrustyAIService deploys a TrustyAI service, which monitors deployed ML models: \
fairness metrics and explanations computed from their inference data.";

/// Removes `nullable` from the generated schema (an unset field is
/// absent, and a `null` sent by a client is pruned, as in the Go operator's CRD), and makes each
/// description prose (`kubectl explain` wraps it itself).
pub(crate) fn tidy_schema(node: &mut Value) {
    match node {
        Value::Object(map) => {
            map.remove("nullable");
            if let Some(Value::String(text)) = map.get_mut("description") {
                *text = prose(text);
            }
            map.values_mut().for_each(tidy_schema);
        }
        Value::Array(items) => items.iter_mut().for_each(tidy_schema),
        _ => {}
    }
}

/// A doc comment as prose: the line breaks inside a paragraph (where the comment wrapped) become
/// spaces; blank lines between paragraphs and line breaks before list items (`- `) stay.
fn prose(text: &str) -> String {
    text.split("\n\n")
        .map(|paragraph| {
            let mut out = String::new();
            for line in paragraph.lines().map(str::trim) {
                if line.is_empty() {
                    continue;
                }
                if !out.is_empty() {
                    out.push(if line.starts_with("- ") { '\n' } else { ' ' });
                }
                out.push_str(line);
            }
            out
        })
        .filter(|paragraph| !paragraph.is_empty())
        .collect::<Vec<_>>()
        .join("\n\n")
}

fn add_rule(schema: &mut Value, rule: &CelRule) -> Result<(), CrdError> {
    let mut node = schema;
    for part in rule.path {
        node = node
            .get_mut("properties")
            .and_then(|p| p.get_mut(*part))
            .ok_or_else(|| CrdError::MissingSchemaPath(rule.path.join(".")))?;
    }
    let Some(obj) = node.as_object_mut() else {
        return Err(CrdError::MissingSchemaPath(rule.path.join(".")));
    };
    let list = obj
        .entry("x-kubernetes-validations")
        .or_insert_with(|| json!([]));
    if let Some(list) = list.as_array_mut() {
        let mut entry = json!({ "rule": rule.rule, "message": rule.message });
        if rule.optional_old_self {
            entry["optionalOldSelf"] = json!(true);
        }
        if let Some(field_path) = rule.field_path {
            entry["fieldPath"] = json!(field_path);
        }
        list.push(entry);
    }
    Ok(())
}

/// The CRD as YAML, exactly as committed in `crds/trustyaiservices.yaml`.
pub fn crd_yaml() -> Result<String, CrdError> {
    let header = "# Generated by `trustyai-operator crd`; do not edit by hand.\n\
                  # Regenerate with: cargo run -- crd > crds/trustyaiservices.yaml\n";
    let crd = serde_json::to_value(crd()?)?;
    Ok(format!("{header}{}", crate::manifests::to_yaml(&crd)))
}
