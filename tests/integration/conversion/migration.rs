//! Storage-version migration, at operator start and with `migrate-storage`: objects an older
//! release stored as v1alpha1 are re-written as v1, after which v1alpha1 can be dropped.

use crate::support;
use support::control_planes::{self, Concern};

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use futures::StreamExt;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use support::cli;
use support::cluster::{
    events_regarding, minimal_spec, remove_webhook_registrations, tas, tas_api,
};

use super::etcd::{etcd_url, stored_as, wait_storing};
use super::*;

/// Makes v1alpha1 the storage version, with no webhook involved at all (registrations removed,
/// conversion `None`), as before this operator's first release.
async fn store_as_v1alpha1(client: &Client, etcd: &str, ns: &str) {
    remove_webhook_registrations(client).await;
    put_crd(client, &crd_storing("v1alpha1"))
        .await
        .expect("the CRD with v1alpha1 stored");
    wait::until(
        "v1alpha1 in status.storedVersions",
        Duration::from_secs(30),
        || async {
            stored_versions(client)
                .await
                .contains(&"v1alpha1".to_string())
                .then_some(())
        },
    )
    .await;
    wait_storing(client, etcd, ns, "v1alpha1").await;
}

/// The spec of the old objects.
fn old_spec() -> Value {
    json!({
        "replicas": 1,
        "storage": {"format": "PVC", "folder": "/inputs", "size": "1Gi"},
        "data": {"filename": "data.csv", "format": "CSV"},
        "metrics": {"schedule": "5s", "batchSize": 5000}
    })
}

/// Creates `count` objects `old-<i>` through v1alpha1 and checks that etcd holds each as
/// v1alpha1. `old-0` also gets a status (through v1alpha1, as the Go operator wrote it) and is
/// held (see [`HOLD`]), so only the migration can re-write it. Returns the resourceVersions by
/// name.
async fn create_old_objects(
    client: &Client,
    etcd: &str,
    ns: &str,
    count: usize,
) -> Vec<(String, String)> {
    let api = tas_api(client, ns, "v1alpha1");
    let mut old0 = tas("v1alpha1", "old-0", old_spec());
    old0.metadata.finalizers = Some(vec![HOLD.to_string()]);
    api.create(&PostParams::default(), &old0)
        .await
        .expect("old-0 created");
    api.patch_status(
        "old-0",
        &PatchParams::default(),
        &Patch::Merge(
            json!({"status": {"phase": "Ready", "replicas": 1, "conditions": [
            {"type": "Ready", "status": "True", "lastTransitionTime": "2025-01-01T00:00:00Z",
             "reason": "Ready", "message": "written by an older operator"}]}}),
        ),
    )
    .await
    .expect("status written through v1alpha1");
    api.delete("old-0", &DeleteParams::default())
        .await
        .expect("old-0 deleted (held)");
    futures::stream::iter(1..count)
        .map(|i| {
            let api = api.clone();
            async move {
                api.create(
                    &PostParams::default(),
                    &tas("v1alpha1", &format!("old-{i}"), old_spec()),
                )
                .await
                .expect("created through v1alpha1")
            }
        })
        .buffer_unordered(8)
        .for_each(|_| async {})
        .await;
    let mut versions = Vec::new();
    for i in 0..count {
        let name = format!("old-{i}");
        assert_eq!(
            stored_as(etcd, ns, &name),
            "trustyai.opendatahub.io/v1alpha1",
            "{name} is stored as v1alpha1 before the migration"
        );
        let current = api.get(&name).await.expect("read");
        versions.push((name, current.metadata.resource_version.expect("rv")));
    }
    versions
}

/// `count` objects stored as v1alpha1 in `cp`'s etcd, as an older release left them
/// ([`store_as_v1alpha1`], [`create_old_objects`]), which keep the API server from dropping
/// v1alpha1; the etcd URL, and their resourceVersions by name.
async fn old_objects_stored_as_v1alpha1(
    cp: &ControlPlane,
    client: &Client,
    ns: &str,
    count: usize,
) -> (String, Vec<(String, String)>) {
    let etcd = etcd_url(cp);
    store_as_v1alpha1(client, &etcd, ns).await;
    let before = create_old_objects(client, &etcd, ns, count).await;
    assert_dropping_v1alpha1_is_refused(client).await;
    (etcd, before)
}

/// The API server's refusal to drop v1alpha1 while etcd may still hold it.
async fn assert_dropping_v1alpha1_is_refused(client: &Client) {
    let err = drop_v1alpha1(client)
        .await
        .expect_err("dropping v1alpha1 is refused while storedVersions lists it");
    let text = err.to_string();
    assert!(
        is_code(&err, 422) && text.contains("storedVersions") && text.contains("v1alpha1"),
        "{text}"
    );
}

/// After the migration: status.storedVersions is [v1]; etcd holds every old object as v1, each
/// was written again (`old-0`, which nothing else writes, by the migration); v1alpha1 can be
/// dropped, after which every object still reads through v1 with its spec (and `old-0` with the
/// status the old operator wrote).
async fn assert_migrated(client: &Client, etcd: &str, ns: &str, before: &[(String, String)]) {
    assert_eq!(stored_versions(client).await, ["v1"]);
    let v1 = tas_api(client, ns, "v1");
    for (name, resource_version) in before {
        assert_eq!(
            stored_as(etcd, ns, name),
            "trustyai.opendatahub.io/v1",
            "{name} in etcd"
        );
        let object = v1.get(name).await.expect("read through v1");
        assert_ne!(
            object.metadata.resource_version.as_ref(),
            Some(resource_version),
            "{name} was written again"
        );
    }

    drop_v1alpha1(client)
        .await
        .expect("v1alpha1 can be dropped after the migration");
    // The API server rebuilds its handlers for the CRD when its informer delivers the change:
    // until then it still serves v1alpha1.
    let alpha = tas_api(client, ns, "v1alpha1");
    wait::until(
        "v1alpha1 is no longer served once dropped",
        Duration::from_secs(30),
        || async { matches!(alpha.get("old-0").await, Err(e) if is_code(&e, 404)).then_some(()) },
    )
    .await;
    // With v1alpha1 gone from spec.versions the API server could no longer decode an object
    // stored as v1alpha1: every read below proves etcd holds v1.
    let listed = v1
        .list(&ListParams::default())
        .await
        .expect("list through v1");
    let names: BTreeSet<String> = listed
        .items
        .iter()
        .filter_map(|o| o.metadata.name.clone())
        .collect();
    let expected: BTreeSet<String> = before.iter().map(|(n, _)| n.clone()).collect();
    assert!(names.is_superset(&expected), "{names:?}");
    for item in &listed.items {
        let spec = &item.data["spec"];
        for (path, value) in [
            ("/replicas", json!(1)),
            ("/storage/format", json!("PVC")),
            ("/storage/folder", json!("/inputs")),
            ("/storage/size", json!("1Gi")),
            ("/data/filename", json!("data.csv")),
            ("/metrics/schedule", json!("5s")),
            ("/metrics/batchSize", json!(5000)),
        ] {
            if expected.contains(item.metadata.name.as_deref().unwrap_or("")) {
                assert_eq!(spec.pointer(path), Some(&value), "{path} of {spec}");
            }
        }
    }
    let old0 = v1.get("old-0").await.expect("old-0 through v1");
    assert_eq!(old0.data["status"]["phase"], "Ready");
    assert_eq!(old0.data["status"]["conditions"][0]["status"], "True");
    assert_eq!(
        old0.data["status"]["conditions"][0]["message"],
        "written by an older operator"
    );
}

/// The StorageMigrated Events regarding the CRD (cluster-scoped: in `default`), as
/// (name, note).
async fn migration_events(client: &Client) -> BTreeSet<(String, String)> {
    events_regarding(client, "default", CRD_NAME, "StorageMigrated")
        .await
        .into_iter()
        .map(|e| {
            (
                e.metadata.name.unwrap_or_default(),
                e.note.unwrap_or_default(),
            )
        })
        .collect()
}

fn migrate_storage_cli(cp: &ControlPlane) -> (Option<i32>, String, String) {
    let output = cli::run_against(cp, "migrate-storage", &[], &[("RUST_LOG", "info")]);
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// The number before `label` in a migration report (`… 3 already stored as v1 …`).
fn count_in(report: &str, label: &str) -> usize {
    let before = report.split(label).next().expect("text");
    before
        .split_whitespace()
        .last()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count before {label:?} in {report:?}"))
}

#[tokio::test]
async fn the_operator_migrates_storage_at_start() {
    let (_claim, cp, client, ns) =
        control_planes::exclusive_namespace(Concern::Conversion, "migrate-start").await;
    let (etcd, before) = old_objects_stored_as_v1alpha1(cp, &client, &ns, 20).await;
    let events_before = migration_events(&client).await;

    // The operator's CRD maintenance makes v1 the storage version (the API server appends it
    // to storedVersions), then its start-up migration re-writes everything.
    let started = Instant::now();
    let mut operator = start_operator(cp, &client, &ns, &[]).await;
    // The migration's last step is its event, after pruning storedVersions and logging:
    // waiting for storedVersions alone races the log line.
    wait::until(
        "status.storedVersions == [v1] and a StorageMigrated event after the start-up migration",
        Duration::from_secs(90),
        || async {
            (stored_versions(&client).await == ["v1"]
                && !migration_events(&client).await.is_subset(&events_before))
            .then_some(())
        },
    )
    .await;
    eprintln!(
        "start-up migration done {:?} after the operator started",
        started.elapsed()
    );
    assert!(operator.is_running(), "{}", operator.logs());
    assert!(
        std::fs::read_to_string(&operator.log)
            .unwrap_or_default()
            .contains("storage migration done"),
        "{}",
        operator.logs()
    );
    let new_events: Vec<_> = migration_events(&client)
        .await
        .difference(&events_before)
        .cloned()
        .collect();
    assert_eq!(new_events.len(), 1, "{new_events:?}");
    assert!(
        new_events[0].1.contains("re-written as v1") && new_events[0].1.ends_with("-> [v1]"),
        "{new_events:?}"
    );

    assert_migrated(&client, &etcd, &ns, &before).await;
    release(&tas_api(&client, &ns, "v1"), "old-0").await;
    assert!(operator.stop().success(), "{}", operator.logs());
}

#[tokio::test]
async fn the_migrate_storage_cli_migrates_once_the_crd_stores_v1() {
    let (_claim, cp, client, ns) =
        control_planes::exclusive_namespace(Concern::Conversion, "migrate-cli").await;
    // More than one list page (100) of old objects.
    let (etcd, before) = old_objects_stored_as_v1alpha1(cp, &client, &ns, 120).await;

    // With v1alpha1 still the storage version, the migration refuses to start.
    let (code, _, stderr) = migrate_storage_cli(cp);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("stores v1alpha1"), "{stderr}");

    // A platform team that manages the CRD itself applies the new one...
    put_crd(&client, &trustyai_crds::crd::crd().expect("the CRD"))
        .await
        .expect("the CRD with v1 stored");
    wait_storing(&client, &etcd, &ns, "v1").await;
    // ... (an object written now is stored as v1 at once; held, and complete with every
    // default, so nothing at all changes when the migration writes it back) ...
    let v1 = tas_api(&client, &ns, "v1");
    let fresh = serde_json::from_value(trustyai_crds::defaults::defaulted(
        &serde_json::to_value(tas("v1", "fresh", minimal_spec())).expect("JSON"),
        trustyai_crds::defaults::Operation::Create,
    ))
    .expect("object");
    let fresh_rv = create_held(&v1, fresh).await.metadata.resource_version;
    assert_eq!(stored_as(&etcd, &ns, "fresh"), "trustyai.opendatahub.io/v1");
    // ... and runs the operator without CRD maintenance, which does not migrate at start.
    let mut operator = start_operator(cp, &client, &ns, &["--no-crd-maintenance"]).await;
    let stored = stored_versions(&client).await;
    assert!(
        stored.contains(&"v1alpha1".to_string()) && stored.contains(&"v1".to_string()),
        "{stored:?}"
    );
    let events_before = migration_events(&client).await;

    let started = Instant::now();
    let (code, stdout, stderr) = migrate_storage_cli(cp);
    eprintln!("migrate-storage took {:?}: {stdout}", started.elapsed());
    assert_eq!(code, Some(0), "stdout: {stdout}\nstderr: {stderr}");
    assert!(stdout.trim_end().ends_with("-> [v1]"), "{stdout}");
    assert!(count_in(&stdout, " re-written as v1") >= 1, "{stdout}");
    assert!(count_in(&stdout, " already stored as v1") >= 1, "{stdout}");
    assert!(
        count_in(&stdout, " TrustyAIServices:") > 100,
        "more than one page: {stdout}"
    );
    assert!(
        stderr.contains("storage migration progress"),
        "progress is logged every 100 objects: {stderr}"
    );
    assert_eq!(
        migration_events(&client)
            .await
            .difference(&events_before)
            .count(),
        1
    );
    // The API server skipped the write of the object already stored as v1 (nothing else
    // writes it).
    assert_eq!(
        v1.get("fresh")
            .await
            .expect("fresh")
            .metadata
            .resource_version,
        fresh_rv
    );

    // Idempotent.
    let (code, stdout, stderr) = migrate_storage_cli(cp);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stdout.contains("nothing to migrate"), "{stdout}");

    assert_migrated(&client, &etcd, &ns, &before).await;
    release(&v1, "old-0").await;
    release(&v1, "fresh").await;
    assert!(operator.stop().success(), "{}", operator.logs());
}
