//! Warnings: what is admitted but worth telling, such as a growth the storage class decides or a
//! missing credentials Secret.

use serde_json::{Value, json};
use trustyai_crds::validation::{ValidationContext, validate};

use crate::support::{check, db, messages, migration, pvc, with, without};

#[test]
fn growing_warns_that_the_storage_class_decides() {
    let grown = with(pvc(), "/spec/storage/size", json!("2Gi"));
    assert_eq!(
        check(&grown, Some(&pvc())).warnings,
        [
            r#"spec.storage.size: the PersistentVolumeClaim grows from "1Gi" to "2Gi" only if its StorageClass allows volume expansion; otherwise it keeps its size and the PVCAvailable condition says why"#
        ]
    );
    // The same size spelled differently, or no claim (DATABASE storage): nothing to say.
    let same = with(pvc(), "/spec/storage/size", json!("1024Mi"));
    assert!(check(&same, Some(&pvc())).warnings.is_empty());
    assert!(check(&pvc(), Some(&pvc())).warnings.is_empty());
}

#[test]
fn warnings_table() {
    let rwo = "spec.replicas: 3 replicas run as one pod while the data is on a claim (one writer per claim: two service processes must never have its files open at once)";
    let outside_migration = |field: &str| {
        format!(
            "{field}: ignored with DATABASE storage outside migration mode (migration needs both spec.storage.folder and spec.data.filename)"
        )
    };
    let cases: Vec<(&str, Value, Vec<String>)> = vec![
        ("valid PVC", pvc(), vec![]),
        (
            "replicas above 1 with PVC",
            with(pvc(), "/spec/replicas", json!(3)),
            vec![rwo.into()],
        ),
        (
            "replicas above 1 in migration",
            with(migration(), "/spec/replicas", json!(3)),
            vec![rwo.into()],
        ),
        (
            "replicas above 1 with DATABASE",
            with(db(), "/spec/replicas", json!(3)),
            vec![],
        ),
        (
            "credentials Secret with PVC",
            with(
                pvc(),
                "/spec/storage/databaseConfigurations",
                json!("creds"),
            ),
            vec!["spec.storage.databaseConfigurations: ignored with PVC storage".into()],
        ),
        (
            "size with DATABASE",
            with(db(), "/spec/storage/size", json!("1Gi")),
            vec![outside_migration("spec.storage.size")],
        ),
        (
            "folder without filename with DATABASE",
            with(db(), "/spec/storage/folder", json!("/inputs")),
            vec![outside_migration("spec.storage.folder")],
        ),
        (
            "data with DATABASE",
            with(db(), "/spec/data", json!({ "format": "CSV" })),
            vec![outside_migration("spec.data.format")],
        ),
        ("everything used in migration", migration(), vec![]),
        (
            "migration of files the service does not migrate",
            with(migration(), "/spec/data/filename", json!("data.csv")),
            vec!["spec.data.filename: the TrustyAI service (Python) moves into the database only the files of its folder whose names end in .hdf5; with \"data.csv\" nothing is moved and the service never becomes ready".into()],
        ),
        (
            "retention with DATABASE: a leftover volume may still follow it",
            with(db(), "/spec/storage/retention", json!("Delete")),
            vec![],
        ),
    ];
    for (name, input, expected) in cases {
        let verdict = check(&input, None);
        assert!(verdict.is_allowed(), "{name}: {:?}", messages(&verdict));
        assert_eq!(verdict.warnings, expected, "{name}");
    }
}

#[test]
fn missing_credentials_secret_warns_only_with_a_lookup() {
    let missing = "spec.storage.databaseConfigurations: Secret \"tas-db-credentials\" does not exist yet; the service cannot start until it exists with the keys databaseKind, databaseUsername, databasePassword, databaseService, databasePort, databaseName";
    let exists_only = |name: &'static str| move |secret: &str| secret == name;

    let none = exists_only("other");
    let with_lookup = |lookup: &dyn Fn(&str) -> bool, object: &Value| {
        let ctx = ValidationContext {
            allowed_image_prefixes: vec![],
            secret_exists: Some(lookup),
        };
        validate(object, None, &ctx)
    };
    assert_eq!(with_lookup(&none, &db()).warnings, [missing]);
    // The fallback name is looked up when the field is absent (generateName objects).
    assert_eq!(
        with_lookup(
            &none,
            &without(db(), "/spec/storage/databaseConfigurations")
        )
        .warnings,
        [missing]
    );
    let present = exists_only("tas-db-credentials");
    assert!(with_lookup(&present, &db()).warnings.is_empty());
    // Migration uses the database too; the named Secret is looked up.
    let creds = exists_only("creds");
    assert!(with_lookup(&creds, &migration()).warnings.is_empty());
    assert_eq!(with_lookup(&none, &migration()).warnings.len(), 1);
    // PVC storage needs no Secret; no lookup means no warning; malformed names are errors only.
    assert!(with_lookup(&none, &pvc()).warnings.is_empty());
    assert!(check(&db(), None).warnings.is_empty());
    let malformed = with(db(), "/spec/storage/databaseConfigurations", json!("Bad"));
    assert!(with_lookup(&none, &malformed).warnings.is_empty());
}
