//! Properties over generated objects: round trips are identities, conversion is deterministic
//! and never fails for our objects, and any JSON gets an answer.

use proptest::prelude::*;
use proptest::test_runner::Config as ProptestConfig;
use trustyai_crds::conversion::convert_object;

use crate::generators::{any_json, any_shape, one_of, read_v1alpha1, stored_v1};
use crate::support::{
    MAX_ANNOTATION_BYTES, V1, V1ALPHA1, annotation, assert_round_trip, check_output, other,
};

fn config() -> ProptestConfig {
    ProptestConfig {
        // PROPTEST_CASES raises the count for a longer soak.
        cases: ProptestConfig::default().cases.max(2000),
        // Keep failures in the test output rather than in files next to the tests.
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn v1_objects_round_trip_through_v1alpha1_unchanged(v1 in stored_v1()) {
        assert_round_trip(&v1);
    }

    #[test]
    fn v1alpha1_objects_round_trip_through_v1_unchanged(alpha in read_v1alpha1()) {
        assert_round_trip(&alpha);
    }

    #[test]
    fn conversion_is_deterministic(object in prop_oneof![stored_v1(), read_v1alpha1()]) {
        for desired in [V1, V1ALPHA1] {
            let first = convert_object(&object, desired).expect("converts");
            let second = convert_object(&object, desired).expect("converts");
            prop_assert_eq!(
                serde_json::to_string(&first).expect("serializes"),
                serde_json::to_string(&second).expect("serializes")
            );
            check_output(&object, &first, desired);
        }
    }

    #[test]
    fn conversion_never_fails_for_our_objects(object in any_shape()) {
        for desired in [V1, V1ALPHA1] {
            let converted = convert_object(&object, desired);
            prop_assert!(converted.is_ok(), "{:?}", converted);
            let converted = converted.expect("checked");
            prop_assert_eq!(&converted["apiVersion"], desired);
            if let Some(text) = annotation(&converted) {
                prop_assert!(text.len() <= MAX_ANNOTATION_BYTES);
            }
            // And back again, still without failing.
            prop_assert!(convert_object(&converted, other(desired)).is_ok());
        }
    }

    #[test]
    fn any_json_gets_an_answer_not_a_panic(value in any_json(), desired in one_of(&[V1, V1ALPHA1])) {
        let desired = desired.as_str().unwrap_or_default().to_owned();
        let _ = convert_object(&value, &desired);
    }
}
