//! Ratcheting: an object stored under older rules (the Go operator's) may be updated without
//! fixing what it already broke, cross-field rules included.

use serde_json::{Value, json};
use trustyai_crds::defaults::{Operation, defaulted};
use trustyai_crds::validation::{Rule, Verdict};

use crate::support::{check, db, messages, pvc, rules, with};

/// A TrustyAIService stored by the Go operator, which validated nothing: a name too long for
/// the `-tls` Service, a size its MustParse would panic on, an unparseable schedule, and no
/// defaults.
fn go_era() -> Value {
    json!({
        "apiVersion": "trustyai.opendatahub.io/v1",
        "kind": "TrustyAIService",
        "metadata": {
            "name": "trustyai-service-with-a-very-long-name-created-under-go-operator",
            "namespace": "ns",
            "finalizers": ["trustyai.opendatahub.io/finalizer"],
            "labels": { "team": "a" }
        },
        "spec": {
            "storage": { "format": "PVC", "folder": "/inputs", "size": "1Gx" },
            "data": { "filename": "data.csv", "format": "CSV" },
            "metrics": { "schedule": "5 seconds" }
        }
    })
}

#[test]
fn go_era_object_is_invalid_on_create() {
    let verdict = check(&go_era(), None);
    assert_eq!(
        rules(&verdict),
        [Rule::Name, Rule::StorageSize, Rule::MetricsSchedule]
    );
}

#[test]
fn ratcheting_table() {
    let old = go_era();
    let cases: Vec<(&str, Value, Vec<Rule>)> = vec![
        (
            "label change",
            with(old.clone(), "/metadata/labels/team", json!("b")),
            vec![],
        ),
        (
            "annotation added",
            with(old.clone(), "/metadata/annotations", json!({"a": "b"})),
            vec![],
        ),
        (
            "finalizer removed",
            with(old.clone(), "/metadata/finalizers", json!([])),
            vec![],
        ),
        (
            "finalizer removed during deletion",
            with(
                with(old.clone(), "/metadata/finalizers", json!([])),
                "/metadata/deletionTimestamp",
                json!("2025-01-01T00:00:00Z"),
            ),
            vec![],
        ),
        (
            "spec changed during deletion",
            with(
                with(
                    old.clone(),
                    "/metadata/deletionTimestamp",
                    json!("2025-01-01T00:00:00Z"),
                ),
                "/spec/storage/size",
                json!("bad"),
            ),
            vec![],
        ),
        (
            "label change after the mutating webhook added defaults",
            with(
                defaulted(&old, Operation::Update),
                "/metadata/labels/team",
                json!("b"),
            ),
            vec![],
        ),
        (
            "an unrelated valid field changes",
            with(
                defaulted(&old, Operation::Update),
                "/spec/replicas",
                json!(0),
            ),
            vec![],
        ),
        (
            "an unrelated invalid field changes",
            with(
                defaulted(&old, Operation::Update),
                "/spec/replicas",
                json!(-1),
            ),
            vec![Rule::Replicas],
        ),
        (
            "the invalid size changes to another invalid size",
            with(old.clone(), "/spec/storage/size", json!("2Gx")),
            vec![Rule::StorageSize],
        ),
        (
            "the invalid size is fixed",
            with(old.clone(), "/spec/storage/size", json!("2Gi")),
            vec![],
        ),
        (
            "the invalid schedule changes to another invalid one",
            with(old.clone(), "/spec/metrics/schedule", json!("10 seconds")),
            vec![Rule::MetricsSchedule],
        ),
        (
            "the invalid schedule is fixed",
            with(old.clone(), "/spec/metrics/schedule", json!("10s")),
            vec![],
        ),
    ];
    for (name, new, expected) in cases {
        let verdict = check(&new, Some(&old));
        assert_eq!(
            rules(&verdict),
            expected,
            "{name}: {:?}",
            messages(&verdict)
        );
    }
}

#[test]
fn metadata_only_update_has_no_warnings_either() {
    let old = with(pvc(), "/spec/replicas", json!(3));
    let verdict = check(
        &with(old.clone(), "/metadata/labels", json!({"a": "b"})),
        Some(&old),
    );
    assert_eq!(verdict, Verdict::default());
}

#[test]
fn ratcheting_covers_cross_field_rules() {
    // A stored DATABASE object with data.format JSON (ignored there). Going into migration
    // mode makes data.format matter, so it is checked although it did not change.
    let old = with(db(), "/spec/data", json!({ "format": "JSON" }));
    let into_migration = with(
        with(old.clone(), "/spec/storage/folder", json!("/inputs")),
        "/spec/data/filename",
        json!("data.csv"),
    );
    assert_eq!(
        rules(&check(&into_migration, Some(&old))),
        [Rule::DataFormat]
    );
    // An unrelated change keeps it unchecked.
    let unrelated = with(old.clone(), "/spec/replicas", json!(0));
    assert!(check(&unrelated, Some(&old)).is_allowed());
}
