//! Length and range limits of the TrustyAIService fields, written once: the schema of both
//! versions (`maxLength`, `minimum` in [`crate::v1`] and [`crate::v1alpha1`]) and the admission
//! webhook's rules ([`crate::validation`]) read them from here, so an object the schema never
//! checked (the offline CLI) gets the same limits. A unit test compares them with the generated
//! schemas.

/// `spec.storage.folder`: the longest path Linux accepts (`PATH_MAX`).
pub const FOLDER_MAX: usize = 4096;
/// `spec.storage.size`: far longer than any quantity.
pub const SIZE_MAX: usize = 64;
/// `spec.storage.databaseConfigurations`, `spec.storage.pv`: names of a Secret and of a
/// PersistentVolume, DNS-1123 subdomains.
pub const OBJECT_NAME_MAX: usize = crate::patterns::DNS1123_SUBDOMAIN_MAX;
/// `spec.data.filename`: the longest file name Linux accepts (`NAME_MAX`).
pub const FILENAME_MAX: usize = 255;
/// `spec.data.format`.
pub const DATA_FORMAT_MAX: usize = 64;
/// `spec.metrics.schedule`.
pub const SCHEDULE_MAX: usize = 64;
/// `spec.image`: far longer than any image reference in use.
pub const IMAGE_MAX: usize = 1024;
/// `spec.replicas`: not negative (0 stops the service).
pub const REPLICAS_MIN: i32 = 0;
/// `spec.metrics.batchSize`: at least one observation.
pub const BATCH_SIZE_MIN: i64 = 1;

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    /// `(field path below spec, schema keyword, limit, only in v1)`.
    fn limits() -> Vec<(&'static str, &'static str, Value, bool)> {
        vec![
            ("storage.folder", "maxLength", json!(FOLDER_MAX), false),
            ("storage.size", "maxLength", json!(SIZE_MAX), false),
            (
                "storage.databaseConfigurations",
                "maxLength",
                json!(OBJECT_NAME_MAX),
                false,
            ),
            ("storage.pv", "maxLength", json!(OBJECT_NAME_MAX), false),
            ("data.filename", "maxLength", json!(FILENAME_MAX), false),
            ("data.format", "maxLength", json!(DATA_FORMAT_MAX), false),
            ("metrics.schedule", "maxLength", json!(SCHEDULE_MAX), false),
            ("metrics.batchSize", "minimum", json!(BATCH_SIZE_MIN), false),
            ("replicas", "minimum", json!(REPLICAS_MIN), false),
            ("image", "maxLength", json!(IMAGE_MAX), true),
        ]
    }

    #[test]
    fn the_schemas_of_both_versions_say_these_limits() {
        let crd = serde_json::to_value(crate::crd::crd().expect("CRD builds")).expect("JSON");
        let versions = crd["spec"]["versions"].as_array().expect("versions");
        for version in versions {
            let name = version["name"].as_str().expect("name");
            let spec = &version["schema"]["openAPIV3Schema"]["properties"]["spec"];
            for (path, keyword, limit, v1_only) in limits() {
                if v1_only && name != "v1" {
                    continue;
                }
                let mut node = spec;
                for field in path.split('.') {
                    node = &node["properties"][field];
                }
                // Numbers in the schema may be written as floats.
                let found = node[keyword].as_f64();
                assert_eq!(found, limit.as_f64(), "{name} spec.{path} {keyword}");
            }
        }
    }
}
