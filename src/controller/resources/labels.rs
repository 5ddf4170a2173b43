//! The Go operator's labels, split in two: [`selector`] (stable for the life of a
//! TrustyAIService) and [`metadata`] (adds the operator version).
//!
//! The version label is for humans and tooling reading object metadata. It is never part of a
//! selector (a Deployment selector is immutable, and a Service selecting on it stops matching
//! pods after an upgrade) nor of a pod template (it would roll every pod on every operator
//! upgrade even when nothing else changed).

use std::collections::BTreeMap;

use trustyai_crds::contract::{labels, owner_labels};

use super::Instance;

/// `app`, `app.kubernetes.io/instance`, `app.kubernetes.io/name` = `<cr>` and
/// `app.kubernetes.io/part-of: trustyai`: the Deployment selector, the pod template labels and
/// the internal Service selector.
pub fn selector(cr: &str) -> BTreeMap<String, String> {
    [
        (labels::APP, cr),
        (labels::INSTANCE, cr),
        (labels::NAME, cr),
        (labels::PART_OF, labels::PART_OF_VALUE),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect()
}

/// [`selector`] plus `app.kubernetes.io/version: <operator version>`: the labels on the
/// metadata of every object made for the instance.
pub fn metadata(instance: &Instance<'_>) -> BTreeMap<String, String> {
    let mut out = selector(instance.name());
    out.insert(
        labels::VERSION.to_owned(),
        instance.operator_version().to_owned(),
    );
    out
}

/// [`metadata`] plus `extra`.
pub fn metadata_with(instance: &Instance<'_>, extra: &[(&str, &str)]) -> BTreeMap<String, String> {
    let mut out = metadata(instance);
    out.extend(
        extra
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned())),
    );
    out
}

/// The labels that identify the owning TrustyAIService on a cluster-scoped object.
pub fn owner(cr: &str, namespace: &str) -> BTreeMap<String, String> {
    [
        (owner_labels::NAMESPACE, namespace),
        (owner_labels::NAME, cr),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect()
}

/// A label selector string (`k=v,k=v`, sorted) matching every label of `labels`, for list calls.
pub fn selector_string(labels: &BTreeMap<String, String>) -> String {
    labels
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::test_support::{VERSION, pvc_instance};

    #[test]
    fn selector_has_no_version() {
        let labels = selector("tas");
        assert_eq!(labels.len(), 4);
        assert!(!labels.contains_key(labels::VERSION));
        assert_eq!(labels["app"], "tas");
        assert_eq!(labels["app.kubernetes.io/part-of"], "trustyai");
    }

    #[test]
    fn metadata_adds_the_operator_version() {
        let instance = pvc_instance();
        let labels = metadata(&instance);
        assert_eq!(labels["app.kubernetes.io/version"], VERSION);
        assert_eq!(labels.len(), 5);
        let with = metadata_with(&instance, &[("app.kubernetes.io/component", "x")]);
        assert_eq!(with.len(), 6);
    }

    #[test]
    fn owner_selector_string() {
        assert_eq!(
            selector_string(&owner("tas", "models")),
            "trustyai.opendatahub.io/owner-name=tas,trustyai.opendatahub.io/owner-namespace=models"
        );
    }
}
