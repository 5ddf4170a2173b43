//! The documents of manifest files, read the same way by `validate` and `convert`: which are
//! ours ([`classify`]), and lists: any `kind: List` (what `kubectl get -o yaml` prints) or
//! `<Kind>List` (a typed list read from the API, e.g. `TrustyAIServiceList`, whose items may
//! omit the kind and apiVersion they share with it).

use serde_json::Value;
use trustyai_crds::contract::{DEPRECATED_VERSION, GROUP, KIND, STORAGE_VERSION};

/// How a document relates to our resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Document<'a> {
    /// `trustyai.opendatahub.io/v1` or `/v1alpha1` `TrustyAIService`.
    Ours,
    /// A `TrustyAIService` of our group in a version that does not exist.
    UnknownVersion(&'a str),
    /// A `TrustyAIService` without `apiVersion`: ours, but the API server would refuse it.
    MissingApiVersion,
    /// Anything else, a `TrustyAIService` of another group included.
    Other,
}

/// Classifies `document` (an item of a list after [`ItemDefaults::fill`]).
pub fn classify(document: &Value) -> Document<'_> {
    if document.get("kind").and_then(Value::as_str) != Some(KIND) {
        return Document::Other;
    }
    let Some(api_version) = document.get("apiVersion") else {
        return Document::MissingApiVersion;
    };
    match api_version.as_str().and_then(|v| v.split_once('/')) {
        Some((GROUP, STORAGE_VERSION | DEPRECATED_VERSION)) => Document::Ours,
        Some((GROUP, _)) => Document::UnknownVersion(api_version.as_str().unwrap_or_default()),
        _ => Document::Other,
    }
}

/// The items of a list document; `None` when `document` is not a list.
pub fn list_items(document: &Value) -> Option<&Vec<Value>> {
    let kind = document.get("kind")?.as_str()?;
    if !kind.ends_with("List") {
        return None;
    }
    document.get("items")?.as_array()
}

/// What the items of a typed list take from it when they omit it.
#[derive(Debug, Clone, Default)]
pub struct ItemDefaults {
    kind: Option<String>,
    api_version: Option<String>,
}

impl ItemDefaults {
    /// From the list `document`: `TrustyAIServiceList` gives its items `kind: TrustyAIService`
    /// and its apiVersion; a plain `List` gives nothing (its items name their own).
    pub fn of(document: &Value) -> Self {
        let kind = document
            .get("kind")
            .and_then(Value::as_str)
            .and_then(|k| k.strip_suffix("List"))
            .filter(|k| !k.is_empty())
            .map(str::to_owned);
        let api_version = kind
            .as_ref()
            .and(document.get("apiVersion"))
            .and_then(Value::as_str)
            .map(str::to_owned);
        Self { kind, api_version }
    }

    /// Fills in what `item` omits.
    pub fn fill(&self, item: &mut Value) {
        let Some(map) = item.as_object_mut() else {
            return;
        };
        if let Some(kind) = &self.kind {
            map.entry("kind")
                .or_insert_with(|| Value::from(kind.clone()));
        }
        if let Some(api_version) = &self.api_version {
            map.entry("apiVersion")
                .or_insert_with(|| Value::from(api_version.clone()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A `TrustyAIService` document with `api_version`, if any.
    fn doc(api_version: Option<&str>) -> Value {
        let mut doc = json!({"kind": "TrustyAIService"});
        if let Some(v) = api_version {
            doc["apiVersion"] = json!(v);
        }
        doc
    }

    #[test]
    fn only_a_trustyaiservice_of_our_group_is_ours() {
        assert_eq!(
            classify(&doc(Some("trustyai.opendatahub.io/v1"))),
            Document::Ours
        );
        assert_eq!(
            classify(&doc(Some("trustyai.opendatahub.io/v1alpha1"))),
            Document::Ours
        );
        assert_eq!(
            classify(&doc(Some("trustyai.opendatahub.io/v2"))),
            Document::UnknownVersion("trustyai.opendatahub.io/v2")
        );
        assert_eq!(classify(&doc(Some("example.com/v1"))), Document::Other);
        assert_eq!(
            classify(&json!({"kind": "ConfigMap", "apiVersion": "v1"})),
            Document::Other
        );
    }

    #[test]
    fn a_trustyaiservice_needs_an_api_version() {
        assert_eq!(classify(&doc(None)), Document::MissingApiVersion);
    }

    #[test]
    fn a_document_is_a_list_by_a_kind_ending_in_list() {
        assert_eq!(
            list_items(&json!({"apiVersion": "v1", "kind": "List", "items": [{}]})).map(Vec::len),
            Some(1)
        );
        assert!(
            list_items(&json!({"apiVersion": "trustyai.opendatahub.io/v1alpha1",
                "kind": "TrustyAIServiceList", "items": []}))
            .is_some()
        );
        assert!(list_items(&json!({"kind": "TrustyAIService", "items": []})).is_none());
    }

    #[test]
    fn typed_list_items_take_their_type_from_the_list() {
        let list = json!({"apiVersion": "trustyai.opendatahub.io/v1alpha1", "kind": "TrustyAIServiceList"});
        let mut item = json!({"metadata": {"name": "a"}});
        ItemDefaults::of(&list).fill(&mut item);
        assert_eq!(item["kind"], "TrustyAIService");
        assert_eq!(item["apiVersion"], "trustyai.opendatahub.io/v1alpha1");
    }

    #[test]
    fn plain_list_items_are_left_as_they_are() {
        let mut own = json!({"apiVersion": "v1", "kind": "ConfigMap"});
        ItemDefaults::of(&json!({"apiVersion": "v1", "kind": "List"})).fill(&mut own);
        assert_eq!(own, json!({"apiVersion": "v1", "kind": "ConfigMap"}));
    }
}
