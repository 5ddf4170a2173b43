//! A change made through v1alpha1 wins over the preserved copy; what `convert_object` refuses;
//! oversized data bounded and flagged.

use serde_json::{Value, json};
use trustyai_crds::conversion::{ConversionError, convert_object};

use crate::support::{
    V1, V1ALPHA1, assert_round_trip, check_output, conditions, down, fixture, kept, up,
};

#[test]
fn a_condition_status_edited_through_v1alpha1_wins() {
    let v1 = fixture("conversion/v1-full.json");
    let mut alpha = down(&v1);
    // Edit: Ready becomes "true" (a v1alpha1 spelling), Degraded's "Partial" becomes "False".
    alpha["status"]["conditions"][0]["status"] = json!("true");
    alpha["status"]["conditions"][2]["status"] = json!("False");
    let back = up(&alpha);
    let ready = &back["status"]["conditions"][0];
    assert_eq!(ready["status"], "True");
    // The condition was rewritten: its preserved observedGeneration no longer describes it.
    assert_eq!(ready.get("observedGeneration"), None);
    let degraded = &back["status"]["conditions"][2];
    assert_eq!(degraded["status"], "False", "not the preserved \"Partial\"");
    assert_eq!(degraded.get("observedGeneration"), None);
    // Untouched condition: everything restored.
    assert_eq!(
        back["status"]["conditions"][1],
        v1["status"]["conditions"][1]
    );
    // Everything else restored too.
    assert_eq!(back["spec"], v1["spec"]);
    assert_eq!(back["status"]["observedGeneration"], 7);
    // And the v1alpha1 spelling is kept for the next read through v1alpha1.
    assert_eq!(down(&back)["status"]["conditions"][0]["status"], "true");
}

#[test]
fn a_condition_removed_through_v1alpha1_does_not_come_back() {
    let v1 = fixture("conversion/v1-full.json");
    let mut alpha = down(&v1);
    let list = alpha["status"]["conditions"]
        .as_array_mut()
        .expect("conditions");
    list.remove(1); // DBAvailable
    let back = up(&alpha);
    let types: Vec<&Value> = conditions(&back).iter().map(|c| &c["type"]).collect();
    assert_eq!(types, ["Ready", "Degraded"]);
    // The others, matched by type, keep their preserved data even though they moved.
    assert_eq!(
        back["status"]["conditions"][1],
        v1["status"]["conditions"][2]
    );
}

#[test]
fn reordered_conditions_are_matched_by_type() {
    let v1 = fixture("conversion/v1-full.json");
    let mut alpha = down(&v1);
    alpha["status"]["conditions"]
        .as_array_mut()
        .expect("conditions")
        .reverse();
    let back = up(&alpha);
    let mut expected: Vec<Value> = v1["status"]["conditions"]
        .as_array()
        .expect("conditions")
        .clone();
    expected.reverse();
    assert_eq!(back["status"]["conditions"], Value::Array(expected));
}

#[test]
fn a_parent_removed_through_v1alpha1_stays_removed() {
    let v1 = fixture("conversion/v1-full.json");
    let mut alpha = down(&v1);
    alpha["spec"]
        .as_object_mut()
        .expect("spec")
        .shift_remove("storage");
    alpha["status"] = json!(null);
    let back = up(&alpha);
    assert_eq!(
        back["spec"].get("storage"),
        None,
        "no storage for the kept retention"
    );
    assert_eq!(back["spec"]["image"], v1["spec"]["image"]);
    assert_eq!(back["status"], json!(null));
}

#[test]
fn the_operator_changing_a_condition_drops_the_v1alpha1_spelling() {
    let alpha = fixture("conversion/v1alpha1-odd-statuses.json");
    let mut v1 = up(&alpha);
    // The operator (through v1) sets Ready to False; the stored "true" must not come back.
    v1["status"]["conditions"][0]["status"] = json!("False");
    let read = down(&v1);
    assert_eq!(read["status"]["conditions"][0]["status"], "False");
    // Untouched conditions keep their spelling.
    assert_eq!(read["status"]["conditions"][2]["status"], "garbage");
    assert_round_trip(&v1);
}

#[test]
fn convert_object_refuses_only_what_it_must() {
    assert_eq!(
        convert_object(&json!("x"), V1),
        Err(ConversionError::NotAnObject { found: "string" })
    );
    assert_eq!(
        convert_object(&json!({}), V1),
        Err(ConversionError::MissingApiVersion)
    );
    assert!(matches!(
        convert_object(
            &json!({"apiVersion": "trustyai.opendatahub.io/v1beta1"}),
            V1
        ),
        Err(ConversionError::UnknownApiVersion { .. })
    ));
    assert!(matches!(
        convert_object(&json!({"apiVersion": V1}), "v1"),
        Err(ConversionError::UnknownDesiredVersion { .. })
    ));
}

/// An object with an image far beyond the schema's limit (only an invalid stored object has
/// one), and its conversion to v1alpha1.
fn oversized_v1_and_down() -> (Value, Value) {
    let v1 = json!({
        "apiVersion": V1,
        "spec": {"image": "i".repeat(40 * 1024), "storage": {"format": "PVC", "retention": "Delete"}},
        "status": {"observedGeneration": 1}
    });
    let alpha = down(&v1);
    (v1, alpha)
}

#[test]
fn oversized_data_is_bounded() {
    let (v1, alpha) = oversized_v1_and_down();
    check_output(&v1, &alpha, V1ALPHA1);
}

#[test]
fn oversized_data_is_flagged_as_truncated() {
    let (_, alpha) = oversized_v1_and_down();
    assert_eq!(kept(&alpha)["truncated"], true);
}

#[test]
fn only_the_oversized_field_is_lost() {
    let (_, alpha) = oversized_v1_and_down();
    let kept = kept(&alpha);
    assert_eq!(kept["spec"], json!({"storage": {"retention": "Delete"}}));
    assert_eq!(kept["status"], json!({"observedGeneration": 1}));
    let back = up(&alpha);
    assert_eq!(back["spec"].get("image"), None, "dropped, as documented");
    assert_eq!(back["spec"]["storage"]["retention"], "Delete");
}
