//! Validation on CREATE: each rule's denial message, every violation reported at once, and no
//! custom image without allowed prefixes.

use serde_json::{Value, json};
use trustyai_crds::validation::{Rule, ValidationContext, denial_message, validate};

use crate::support::{check, db, messages, migration, object, pvc, rules, with, without};

#[test]
fn create_rules_table() {
    let long_name = format!("a{}", "b".repeat(59));
    let cases: Vec<(&str, Value, Vec<String>)> = vec![
        // metadata.name
        ("name of 59 characters", with(pvc(), "/metadata/name", json!(format!("a{}", "b".repeat(58)))), vec![]),
        (
            "name of 60 characters",
            with(pvc(), "/metadata/name", json!(long_name)),
            vec![format!(
                "metadata.name: Invalid value: \"{long_name}\": must be no more than 59 characters, because the Services <name> and <name>-tls must be valid Service names"
            )],
        ),
        (
            "name with a dot (a valid object name, not a Service name)",
            with(pvc(), "/metadata/name", json!("trusty.ai")),
            vec![dns1035("trusty.ai")],
        ),
        ("name with uppercase", with(pvc(), "/metadata/name", json!("Tas")), vec![dns1035("Tas")]),
        ("name starting with a digit", with(pvc(), "/metadata/name", json!("1tas")), vec![dns1035("1tas")]),
        ("name ending with '-'", with(pvc(), "/metadata/name", json!("tas-")), vec![dns1035("tas-")]),
        (
            "name missing",
            without(pvc(), "/metadata/name"),
            vec!["metadata.name: Required value: name or generateName is required".into()],
        ),
        (
            "generateName instead of name",
            with(without(pvc(), "/metadata/name"), "/metadata/generateName", json!("tas-")),
            vec![],
        ),
        (
            "generateName too long or malformed",
            with(without(pvc(), "/metadata/name"), "/metadata/generateName", json!(format!("T{}", "a".repeat(54)))),
            vec![
                format!("metadata.generateName: Invalid value: \"T{}\": must be no more than 54 characters, so that the generated name stays within 59 characters", "a".repeat(54)),
                format!("metadata.generateName: Invalid value: \"T{}\": must start with a lowercase letter and contain only lowercase letters, digits and '-'", "a".repeat(54)),
            ],
        ),
        // storage.format
        (
            "format missing",
            without(pvc(), "/spec/storage/format"),
            vec!["spec.storage.format: Required value".into()],
        ),
        (
            "format unknown",
            with(pvc(), "/spec/storage/format", json!("FOO")),
            vec![r#"spec.storage.format: Unsupported value: "FOO": supported values: "PVC", "DATABASE""#.into()],
        ),
        (
            "format in lowercase",
            with(pvc(), "/spec/storage/format", json!("pvc")),
            vec![r#"spec.storage.format: Unsupported value: "pvc": supported values: "PVC", "DATABASE""#.into()],
        ),
        // storage.folder
        ("folder relative", with(pvc(), "/spec/storage/folder", json!("inputs")), vec![folder("inputs")]),
        ("folder empty", with(pvc(), "/spec/storage/folder", json!("")), vec![folder("")]),
        ("folder with ..", with(pvc(), "/spec/storage/folder", json!("/a/../b")), vec![folder("/a/../b")]),
        ("folder ending in ..", with(pvc(), "/spec/storage/folder", json!("/a/..")), vec![folder("/a/..")]),
        ("folder with ..b (a name, not a segment)", with(pvc(), "/spec/storage/folder", json!("/a/..b/c")), vec![]),
        ("folder nested", with(pvc(), "/spec/storage/folder", json!("/var/data/trustyai")), vec![]),
        (
            "folder too long",
            with(pvc(), "/spec/storage/folder", json!(format!("/{}", "a".repeat(4096)))),
            vec!["spec.storage.folder: Too long: may not be more than 4096 bytes".into()],
        ),
        // storage.size
        (
            "size not a quantity",
            with(pvc(), "/spec/storage/size", json!("1Gx")),
            vec![r#"spec.storage.size: Invalid value: "1Gx": must be a quantity such as 1Gi or 500Mi"#.into()],
        ),
        (
            "size with a space",
            with(pvc(), "/spec/storage/size", json!("1 Gi")),
            vec![r#"spec.storage.size: Invalid value: "1 Gi": must be a quantity such as 1Gi or 500Mi"#.into()],
        ),
        (
            "size empty",
            with(pvc(), "/spec/storage/size", json!("")),
            vec![r#"spec.storage.size: Invalid value: "": must be a quantity such as 1Gi or 500Mi"#.into()],
        ),
        (
            "size zero",
            with(pvc(), "/spec/storage/size", json!("0Gi")),
            vec![r#"spec.storage.size: Invalid value: "0Gi": must be greater than zero"#.into()],
        ),
        (
            "size negative",
            with(pvc(), "/spec/storage/size", json!("-1Gi")),
            vec![r#"spec.storage.size: Invalid value: "-1Gi": must be greater than zero"#.into()],
        ),
        ("size 500Mi", with(pvc(), "/spec/storage/size", json!("500Mi")), vec![]),
        ("size with an exponent", with(pvc(), "/spec/storage/size", json!("5e9")), vec![]),
        ("size decimal SI", with(pvc(), "/spec/storage/size", json!("2G")), vec![]),
        (
            "size too long",
            with(pvc(), "/spec/storage/size", json!("1".repeat(65))),
            vec!["spec.storage.size: Too long: may not be more than 64 bytes".into()],
        ),
        // storage.pv
        ("pv with PVC", with(pvc(), "/spec/storage/pv", json!("pv-1")), vec![]),
        ("pv in migration mode", with(migration(), "/spec/storage/pv", json!("pv-1")), vec![]),
        (
            "pv malformed",
            with(pvc(), "/spec/storage/pv", json!("My_PV")),
            vec![subdomain("spec.storage.pv", "My_PV")],
        ),
        (
            "pv with DATABASE outside migration",
            with(db(), "/spec/storage/pv", json!("pv-1")),
            vec!["spec.storage.pv: Forbidden: may be set only with PVC storage or in migration mode (DATABASE with spec.storage.folder and spec.data.filename set)".into()],
        ),
        // storage.databaseConfigurations
        (
            "credentials Secret malformed",
            with(db(), "/spec/storage/databaseConfigurations", json!("Bad_Name")),
            vec![subdomain("spec.storage.databaseConfigurations", "Bad_Name")],
        ),
        (
            "credentials Secret name too long",
            with(db(), "/spec/storage/databaseConfigurations", json!("a".repeat(254))),
            vec![format!(
                "spec.storage.databaseConfigurations: Invalid value: \"{}\": must be no more than 253 characters",
                "a".repeat(254)
            )],
        ),
        // storage.retention
        ("retention Delete", with(pvc(), "/spec/storage/retention", json!("Delete")), vec![]),
        (
            "retention unknown",
            with(pvc(), "/spec/storage/retention", json!("Keep")),
            vec![r#"spec.storage.retention: Unsupported value: "Keep": supported values: "Retain", "Delete""#.into()],
        ),
        // data
        (
            "data format JSON with PVC",
            with(pvc(), "/spec/data/format", json!("JSON")),
            vec![r#"spec.data.format: Unsupported value: "JSON": supported values: "CSV""#.into()],
        ),
        (
            "data format JSON in migration mode",
            with(migration(), "/spec/data/format", json!("JSON")),
            vec![r#"spec.data.format: Unsupported value: "JSON": supported values: "CSV""#.into()],
        ),
        ("data format JSON with DATABASE (ignored: a warning)", with(db(), "/spec/data/format", json!("JSON")), vec![]),
        ("filename a/b", with(pvc(), "/spec/data/filename", json!("a/b")), vec![filename("a/b")]),
        ("filename .", with(pvc(), "/spec/data/filename", json!(".")), vec![filename(".")]),
        ("filename ..", with(pvc(), "/spec/data/filename", json!("..")), vec![filename("..")]),
        ("filename empty", with(pvc(), "/spec/data/filename", json!("")), vec![filename("")]),
        ("filename with dots", with(pvc(), "/spec/data/filename", json!("..data.csv")), vec![]),
        (
            "filename too long",
            with(pvc(), "/spec/data/filename", json!("a".repeat(256))),
            vec!["spec.data.filename: Too long: may not be more than 255 bytes".into()],
        ),
        // metrics
        (
            "schedule missing",
            without(pvc(), "/spec/metrics/schedule"),
            vec!["spec.metrics.schedule: Required value".into()],
        ),
        ("schedule without unit", with(pvc(), "/spec/metrics/schedule", json!("5")), vec![schedule("5")]),
        ("schedule with a space", with(pvc(), "/spec/metrics/schedule", json!("5 s")), vec![schedule("5 s")]),
        ("schedule empty", with(pvc(), "/spec/metrics/schedule", json!("")), vec![schedule("")]),
        ("schedule in days", with(pvc(), "/spec/metrics/schedule", json!("1d")), vec![schedule("1d")]),
        ("schedule Go duration with fraction", with(pvc(), "/spec/metrics/schedule", json!("1.5s")), vec![schedule("1.5s")]),
        (
            "schedule below a second",
            with(pvc(), "/spec/metrics/schedule", json!("500ms")),
            vec![r#"spec.metrics.schedule: Invalid value: "500ms": must be at least one second in total"#.into()],
        ),
        (
            "schedule zero",
            with(pvc(), "/spec/metrics/schedule", json!("0s")),
            vec![r#"spec.metrics.schedule: Invalid value: "0s": must be at least one second in total"#.into()],
        ),
        ("schedule 1000ms", with(pvc(), "/spec/metrics/schedule", json!("1000ms")), vec![]),
        ("schedule 1m30s", with(pvc(), "/spec/metrics/schedule", json!("1m30s")), vec![]),
        ("schedule 2h", with(pvc(), "/spec/metrics/schedule", json!("2h")), vec![]),
        (
            "schedule too long",
            with(pvc(), "/spec/metrics/schedule", json!(format!("{}s", "1".repeat(64)))),
            vec!["spec.metrics.schedule: Too long: may not be more than 64 bytes".into()],
        ),
        (
            "batch size zero",
            with(pvc(), "/spec/metrics/batchSize", json!(0)),
            vec!["spec.metrics.batchSize: Invalid value: 0: must be at least 1".into()],
        ),
        (
            "batch size negative",
            with(pvc(), "/spec/metrics/batchSize", json!(-5)),
            vec!["spec.metrics.batchSize: Invalid value: -5: must be at least 1".into()],
        ),
        ("batch size one", with(pvc(), "/spec/metrics/batchSize", json!(1)), vec![]),
        (
            "batch size beyond int64",
            with(pvc(), "/spec/metrics/batchSize", json!(u64::MAX)),
            vec![format!(
                "spec.metrics.batchSize: Invalid value: {}: must be at most 9223372036854775807",
                u64::MAX
            )],
        ),
        // replicas
        ("replicas zero", with(pvc(), "/spec/replicas", json!(0)), vec![]),
        (
            "replicas negative",
            with(pvc(), "/spec/replicas", json!(-1)),
            vec!["spec.replicas: Invalid value: -1: must be greater than or equal to 0".into()],
        ),
        (
            "replicas beyond int32",
            with(db(), "/spec/replicas", json!(2_147_483_648_i64)),
            vec!["spec.replicas: Invalid value: 2147483648: must be at most 2147483647".into()],
        ),
        // image
        ("image under an allowed prefix", with(pvc(), "/spec/image", json!("quay.io/trustyai/trustyai-service:v0.28.0")), vec![]),
        (
            "image under a prefix without a trailing slash",
            with(pvc(), "/spec/image", json!("registry.redhat.io/rhoai/trustyai@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef")),
            vec![],
        ),
        (
            "image from another registry",
            with(pvc(), "/spec/image", json!("docker.io/evil/svc:latest")),
            vec![r#"spec.image: Invalid value: "docker.io/evil/svc:latest": must start with one of the allowed image prefixes: "quay.io/trustyai/", "registry.redhat.io""#.into()],
        ),
        (
            "image on a look-alike registry",
            with(pvc(), "/spec/image", json!("registry.redhat.io.evil.com/svc")),
            vec![r#"spec.image: Invalid value: "registry.redhat.io.evil.com/svc": must start with one of the allowed image prefixes: "quay.io/trustyai/", "registry.redhat.io""#.into()],
        ),
        (
            "image malformed (short digest) under an allowed prefix",
            with(pvc(), "/spec/image", json!("quay.io/trustyai/svc@sha256:abc")),
            vec![image_malformed("quay.io/trustyai/svc@sha256:abc")],
        ),
        (
            "image with uppercase path",
            with(pvc(), "/spec/image", json!("quay.io/trustyai/Svc:v1")),
            vec![image_malformed("quay.io/trustyai/Svc:v1")],
        ),
        (
            "image too long",
            with(pvc(), "/spec/image", json!(format!("quay.io/trustyai/{}", "a".repeat(1024)))),
            vec!["spec.image: Too long: may not be more than 1024 bytes".into()],
        ),
        // malformed objects
        ("spec missing", without(pvc(), "/spec"), vec!["spec: Required value".into()]),
        (
            "spec a string",
            with(pvc(), "/spec", json!("x")),
            vec![r#"spec: Invalid value: "x": must be an object"#.into()],
        ),
        (
            "spec an array",
            with(pvc(), "/spec", json!([1])),
            vec!["spec: Invalid value: [1]: must be an object".into()],
        ),
        (
            "storage and metrics missing",
            object("tas", json!({})),
            vec!["spec.storage: Required value".into(), "spec.metrics: Required value".into()],
        ),
        (
            "storage and data of the wrong type",
            with(with(pvc(), "/spec/storage", json!("PVC")), "/spec/data", json!(true)),
            vec![
                r#"spec.storage: Invalid value: "PVC": must be an object"#.into(),
                "spec.data: Invalid value: true: must be an object".into(),
            ],
        ),
        (
            "size a number",
            with(pvc(), "/spec/storage/size", json!(5)),
            vec!["spec.storage.size: Invalid value: 5: must be a string".into()],
        ),
        (
            "format a number: one type error, no Required or Unsupported",
            with(pvc(), "/spec/storage/format", json!(5)),
            vec!["spec.storage.format: Invalid value: 5: must be a string".into()],
        ),
        (
            "replicas a string",
            with(pvc(), "/spec/replicas", json!("1")),
            vec![r#"spec.replicas: Invalid value: "1": must be an integer"#.into()],
        ),
        (
            "batch size a fraction",
            with(pvc(), "/spec/metrics/batchSize", json!(1.5)),
            vec!["spec.metrics.batchSize: Invalid value: 1.5: must be an integer".into()],
        ),
        (
            "schedule an object",
            with(pvc(), "/spec/metrics/schedule", json!({"every": "5s"})),
            vec![r#"spec.metrics.schedule: Invalid value: {"every":"5s"}: must be a string"#.into()],
        ),
        (
            "metadata name a number",
            with(pvc(), "/metadata/name", json!(5)),
            vec!["metadata.name: Invalid value: 5: must be a string".into()],
        ),
    ];
    for (name, input, expected) in cases {
        let verdict = check(&input, None);
        assert_eq!(messages(&verdict), expected, "{name}");
    }
}

fn dns1035(name: &str) -> String {
    format!(
        "metadata.name: Invalid value: \"{name}\": must be a DNS-1035 label: lowercase letters, digits and '-', starting with a letter and ending with a letter or digit"
    )
}
fn folder(value: &str) -> String {
    format!(
        "spec.storage.folder: Invalid value: \"{value}\": must be an absolute path with no '..' segment"
    )
}
fn subdomain(field: &str, value: &str) -> String {
    format!(
        "{field}: Invalid value: \"{value}\": must be a DNS-1123 subdomain: lowercase letters, digits, '-' and '.', starting and ending with a letter or digit"
    )
}
fn filename(value: &str) -> String {
    format!(
        "spec.data.filename: Invalid value: \"{value}\": must be a plain file name (no '/', not '.' or '..', not empty)"
    )
}
fn schedule(value: &str) -> String {
    format!(
        "spec.metrics.schedule: Invalid value: \"{value}\": must be one or more <integer><unit> groups with unit ms, s, m or h, for example 5s or 1m30s"
    )
}
fn image_malformed(value: &str) -> String {
    format!(
        "spec.image: Invalid value: \"{value}\": must be an image reference [registry/]path[:tag][@sha256:<64 hex digits>], for example quay.io/trustyai/trustyai-service:v0.28.0"
    )
}

#[test]
fn every_violation_is_reported_at_once() {
    let bad = object(
        "Bad.Name",
        json!({
            "replicas": -1,
            "storage": { "format": "PVC", "folder": "rel", "size": "0", "pv": "X", "retention": "Keep" },
            "data": { "filename": "a/b", "format": "JSON" },
            "metrics": { "schedule": "100ms", "batchSize": 0 },
            "image": "docker.io/x:1"
        }),
    );
    let verdict = check(&bad, None);
    assert_eq!(
        rules(&verdict),
        [
            Rule::Name,
            Rule::StorageFolder,
            Rule::StorageSize,
            Rule::StoragePv,
            Rule::StorageRetention,
            Rule::DataFilename,
            Rule::DataFormat,
            Rule::MetricsSchedule,
            Rule::MetricsBatchSize,
            Rule::Replicas,
            Rule::Image,
        ]
    );
    let message = denial_message("Bad.Name", &verdict.errors);
    assert!(message.starts_with(
        r#"TrustyAIService.trustyai.opendatahub.io "Bad.Name" is invalid: [metadata.name: Invalid value: "Bad.Name": must be a DNS-1035 label"#
    ));
    assert!(message.ends_with(r#"must start with one of the allowed image prefixes: "quay.io/trustyai/", "registry.redhat.io"]"#));
}

#[test]
fn no_allowed_prefixes_means_no_custom_image() {
    let verdict = validate(
        &with(pvc(), "/spec/image", json!("quay.io/trustyai/svc:v1")),
        None,
        &ValidationContext::default(),
    );
    assert_eq!(
        messages(&verdict),
        [
            "spec.image: Forbidden: custom images are not allowed: the operator's configuration allows no image prefixes (allowedImagePrefixes)"
        ]
    );
    // Blank entries (from "a,,b" or trailing commas) allow nothing.
    let blank = ValidationContext {
        allowed_image_prefixes: vec![String::new(), "  ".into()],
        secret_exists: None,
    };
    let verdict = validate(
        &with(pvc(), "/spec/image", json!("quay.io/trustyai/svc:v1")),
        None,
        &blank,
    );
    assert_eq!(rules(&verdict), [Rule::Image]);
}
