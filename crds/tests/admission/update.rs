//! Validation on UPDATE: the rules that compare the new object with the old one.

use serde_json::{Value, json};
use trustyai_crds::defaults::{Operation, defaulted};

use crate::support::{check, db, messages, migration, object, pvc, pvc_spec, with, without};

#[test]
fn update_rules_table() {
    let with_pv = |o: Value, pv: &str| with(o, "/spec/storage/pv", json!(pv));
    let cases: Vec<(&str, Value, Value, Vec<String>)> = vec![
        (
            "DATABASE back to PVC",
            db(),
            defaulted(&with(db(), "/spec/storage/format", json!("PVC")), Operation::Update),
            vec![r#"spec.storage.format: Invalid value: "PVC": may not change from DATABASE back to PVC: the data is in the database, and the service would start again from the volume"#.into()],
        ),
        (
            "migration back to PVC",
            migration(),
            with(migration(), "/spec/storage/format", json!("PVC")),
            vec![r#"spec.storage.format: Invalid value: "PVC": may not change from DATABASE back to PVC: the data is in the database, and the service would start again from the volume"#.into()],
        ),
        (
            "PVC to DATABASE without the folder: not a migration",
            pvc(),
            with(
                without(pvc(), "/spec/storage/folder"),
                "/spec/storage/format",
                json!("DATABASE"),
            ),
            vec![r#"spec.storage.format: Invalid value: "DATABASE": may change from PVC to DATABASE only as a migration: keep spec.storage.folder and spec.data.filename set, so that the service moves the data from the volume into the database"#.into()],
        ),
        (
            "PVC to DATABASE as a migration",
            pvc(),
            defaulted(&with(pvc(), "/spec/storage/format", json!("DATABASE")), Operation::Update),
            vec![],
        ),
        (
            "migration finished: folder and filename removed",
            migration(),
            without(
                without(without(migration(), "/spec/storage/folder"), "/spec/data/filename"),
                "/spec/storage/size",
            ),
            vec![],
        ),
        ("size grows", pvc(), with(pvc(), "/spec/storage/size", json!("2Gi")), vec![]),
        ("size same value, other notation", pvc(), with(pvc(), "/spec/storage/size", json!("1024Mi")), vec![]),
        (
            "size shrinks",
            with(pvc(), "/spec/storage/size", json!("2Gi")),
            with(pvc(), "/spec/storage/size", json!("1Gi")),
            vec![r#"spec.storage.size: Invalid value: "1Gi": may not be smaller than the current "2Gi": a PersistentVolumeClaim can grow but not shrink"#.into()],
        ),
        (
            "size shrinks by one byte",
            pvc(),
            with(pvc(), "/spec/storage/size", json!("1073741823")),
            vec![r#"spec.storage.size: Invalid value: "1073741823": may not be smaller than the current "1Gi": a PersistentVolumeClaim can grow but not shrink"#.into()],
        ),
        (
            "size below the default the stored object implied",
            object("tas", pvc_spec()),
            with(pvc(), "/spec/storage/size", json!("500Mi")),
            vec![r#"spec.storage.size: Invalid value: "500Mi": may not be smaller than the current "1Gi": a PersistentVolumeClaim can grow but not shrink"#.into()],
        ),
        ("pv set for the first time", pvc(), with_pv(pvc(), "pv-1"), vec![]),
        ("pv unchanged", with_pv(pvc(), "pv-1"), with_pv(with(pvc(), "/spec/replicas", json!(0)), "pv-1"), vec![]),
        (
            "pv changed",
            with_pv(pvc(), "pv-1"),
            with_pv(pvc(), "pv-2"),
            vec![r#"spec.storage.pv: Invalid value: "pv-2": may not change once set (it is "pv-1")"#.into()],
        ),
        (
            "pv removed",
            with_pv(pvc(), "pv-1"),
            pvc(),
            vec![r#"spec.storage.pv: Forbidden: may not be removed while the PersistentVolumeClaim is in use (it is "pv-1"); it goes only with the end of a migration (DATABASE storage without storage.folder or data.filename)"#.into()],
        ),
        (
            "pv removed in migration mode",
            with_pv(migration(), "pv-1"),
            migration(),
            vec![r#"spec.storage.pv: Forbidden: may not be removed while the PersistentVolumeClaim is in use (it is "pv-1"); it goes only with the end of a migration (DATABASE storage without storage.folder or data.filename)"#.into()],
        ),
        (
            "pv removed with the end of a migration",
            with_pv(migration(), "pv-1"),
            without(migration(), "/spec/data/filename"),
            vec![],
        ),
        (
            "pv changed with the end of a migration",
            with_pv(migration(), "pv-1"),
            with_pv(without(migration(), "/spec/data/filename"), "pv-2"),
            vec![
                r#"spec.storage.pv: Forbidden: may be set only with PVC storage or in migration mode (DATABASE with spec.storage.folder and spec.data.filename set)"#.into(),
                r#"spec.storage.pv: Invalid value: "pv-2": may not change once set (it is "pv-1")"#.into(),
            ],
        ),
        (
            "folder changed while the PVC is in use",
            pvc(),
            with(pvc(), "/spec/storage/folder", json!("/data")),
            vec![r#"spec.storage.folder: Invalid value: "/data": may not change while the PersistentVolumeClaim is in use (it is mounted at "/inputs", where the service keeps its data)"#.into()],
        ),
        (
            "folder changed in migration mode",
            migration(),
            with(migration(), "/spec/storage/folder", json!("/data")),
            vec![r#"spec.storage.folder: Invalid value: "/data": may not change while the PersistentVolumeClaim is in use (it is mounted at "/inputs", where the service keeps its data)"#.into()],
        ),
        (
            "migration finished with another folder: the volume is no longer used",
            migration(),
            without(
                with(migration(), "/spec/storage/folder", json!("/elsewhere")),
                "/spec/data/filename",
            ),
            vec![],
        ),
        (
            "folder changed on DATABASE storage (no PVC)",
            with(db(), "/spec/storage/folder", json!("/a")),
            with(db(), "/spec/storage/folder", json!("/b")),
            vec![],
        ),
        (
            "name is not re-checked on UPDATE",
            with(pvc(), "/metadata/name", json!("Not.A.Service.Name")),
            with(with(pvc(), "/metadata/name", json!("Not.A.Service.Name")), "/spec/replicas", json!(0)),
            vec![],
        ),
        (
            "several transition errors at once",
            with_pv(with(pvc(), "/spec/storage/size", json!("2Gi")), "pv-1"),
            with_pv(
                with(with(pvc(), "/spec/storage/size", json!("1Gi")), "/spec/storage/folder", json!("/x")),
                "pv-2",
            ),
            vec![
                r#"spec.storage.size: Invalid value: "1Gi": may not be smaller than the current "2Gi": a PersistentVolumeClaim can grow but not shrink"#.into(),
                r#"spec.storage.pv: Invalid value: "pv-2": may not change once set (it is "pv-1")"#.into(),
                r#"spec.storage.folder: Invalid value: "/x": may not change while the PersistentVolumeClaim is in use (it is mounted at "/inputs", where the service keeps its data)"#.into(),
            ],
        ),
    ];
    for (name, old, new, expected) in cases {
        let verdict = check(&new, Some(&old));
        assert_eq!(messages(&verdict), expected, "{name}");
    }
}
