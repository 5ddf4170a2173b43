//! Updates follow the immutability rules: some the CRD's CEL rules answer, some only the
//! webhook knows.

use crate::support;

use kube::Client;
use kube::api::PostParams;
use serde_json::{Value, json};
use support::cluster::{MUTATING_WEBHOOK, patch_spec, tas, tas_api};
use support::samples::end_of_migration;

use super::{assert_patch_refused, db_spec, pvc_spec};

pub(super) async fn updates_follow_the_immutability_rules(client: &Client, ns: &str) {
    let api = tas_api(client, ns, "v1");
    let create = |name: &'static str, spec: Value| {
        let api = api.clone();
        async move {
            api.create(&PostParams::default(), &tas("v1", name, spec))
                .await
                .unwrap_or_else(|e| panic!("creating {name}: {e}"));
        }
    };

    // DATABASE → PVC: the CRD's CEL rule answers before the webhook is asked.
    create("db-to-pvc", db_spec()).await;
    assert_patch_refused(
        &api,
        "db-to-pvc",
        json!({"spec": {"storage": {"format": "PVC"}}}),
        &["spec.storage", "from DATABASE back to PVC"],
        "DATABASE → PVC",
    )
    .await;

    // PVC → DATABASE without the PVC fields that make it a migration: only the webhook knows.
    create("pvc-to-db", pvc_spec()).await;
    assert_patch_refused(
        &api,
        "pvc-to-db",
        json!({"spec": {"storage": {"format": "DATABASE", "folder": null}}}),
        &[
            MUTATING_WEBHOOK,
            r#"spec.storage.format: Invalid value: "DATABASE": may change from PVC to DATABASE only as a migration"#,
        ],
        "PVC → DATABASE without migration",
    )
    .await;
    // With folder and data.filename kept (they were defaulted), it is a migration.
    let migrated = patch_spec(
        &api,
        "pvc-to-db",
        json!({"storage": {"format": "DATABASE"}}),
    )
    .await
    .expect("PVC → DATABASE as a migration is allowed");
    assert_eq!(
        migrated.data["spec"]["storage"]["databaseConfigurations"],
        "pvc-to-db-db-credentials"
    );
    assert_eq!(migrated.data["spec"]["storage"]["folder"], "/inputs");

    // The size grows but never shrinks (CEL and the webhook both say so).
    let mut sized = pvc_spec();
    sized["storage"]["size"] = json!("2Gi");
    create("shrink", sized).await;
    assert_patch_refused(
        &api,
        "shrink",
        json!({"spec": {"storage": {"size": "1Gi"}}}),
        &["spec.storage", "shrink"],
        "shrinking",
    )
    .await;
    patch_spec(&api, "shrink", json!({"storage": {"size": "3Gi"}}))
        .await
        .expect("growing is allowed");

    // The PersistentVolume may not change or go once set.
    let mut bound = pvc_spec();
    bound["storage"]["pv"] = json!("pv-a");
    create("bound", bound).await;
    for (change, what) in [
        (json!("pv-b"), "changing the pv"),
        (Value::Null, "removing the pv"),
    ] {
        assert_patch_refused(
            &api,
            "bound",
            json!({"spec": {"storage": {"pv": change}}}),
            &["spec.storage", "pv"],
            what,
        )
        .await;
    }
    // In migration mode it stays while the volume is mounted, and goes with the migration's end.
    create(
        "migrating",
        json!({"storage": {"format": "DATABASE", "folder": "/inputs", "pv": "pv-m"},
               "data": {"filename": "data.csv"}, "metrics": {"schedule": "5s"}}),
    )
    .await;
    assert_patch_refused(
        &api,
        "migrating",
        json!({"spec": {"storage": {"pv": null}}}),
        &["spec.storage.pv", "the end of a migration"],
        "removing the pv while migrating",
    )
    .await;
    patch_spec(&api, "migrating", end_of_migration())
        .await
        .expect("the end of a migration takes the pv with it");

    // The mount path may not move while the volume holds the data: only the webhook knows.
    create("folder", pvc_spec()).await;
    assert_patch_refused(
        &api,
        "folder",
        json!({"spec": {"storage": {"folder": "/data"}}}),
        &[
            MUTATING_WEBHOOK,
            r#"spec.storage.folder: Invalid value: "/data": may not change while the PersistentVolumeClaim is in use"#,
        ],
        "moving the folder",
    )
    .await;
}
