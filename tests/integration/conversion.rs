//! CRD version upgrades through the real API server, with the operator binary serving
//! conversion: nothing is lost going through v1alpha1 and back; lists work through both
//! versions; and storage-version migration (at operator start and with `migrate-storage`)
//! re-writes v1alpha1-stored objects as v1 (checked in etcd itself) so that v1alpha1 can then be
//! dropped from the CRD, which the API server refuses before.

use crate::support;
use support::control_planes::{self, Concern};

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::ByteString;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceConversion, CustomResourceDefinition,
};
use kube::Client;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use support::ControlPlane;
use support::cluster::{
    minimal_spec, remove_webhook_registrations, tas, tas_api, wait_for_published_bundle,
    wait_for_webhooks_served,
};
use support::operator::Operator;
use support::wait;
use trustyai_crds::contract::{CONVERSION_PRESERVED_ANNOTATION, CRD_NAME};

const IMAGE: &str = "quay.io/trustyai/trustyai-service:v0.28.0";

fn api_version(object: &DynamicObject) -> &str {
    object
        .types
        .as_ref()
        .map(|t| t.api_version.as_str())
        .unwrap_or("")
}

fn is_code(error: &kube::Error, code: u16) -> bool {
    matches!(error, kube::Error::Api(s) if s.code == code)
}

// ---------------------------------------------------------------------------------------------
// The operator and its webhooks.

/// Starts the operator with `--create-webhook-configurations` (and `extra`) and waits until the
/// API server calls it: ready, its CA in the CRD and both registrations, and conversion and
/// admission answered by it.
async fn start_operator(cp: &ControlPlane, client: &Client, ns: &str, extra: &[&str]) -> Operator {
    let mut args = vec!["--create-webhook-configurations"];
    args.extend_from_slice(extra);
    let mut operator = Operator::start(cp, ns, &args);
    operator.wait_ready(Duration::from_secs(60));
    wait_for_published_bundle(client, ns, &operator).await;
    wait_for_webhooks_served(client, ns, &operator).await;
    operator
}

// ---------------------------------------------------------------------------------------------
// The CRD.

fn crds(client: &Client) -> Api<CustomResourceDefinition> {
    Api::all(client.clone())
}

async fn stored_versions(client: &Client) -> Vec<String> {
    crds(client)
        .get(CRD_NAME)
        .await
        .expect("the CRD")
        .status
        .and_then(|s| s.stored_versions)
        .unwrap_or_default()
}

/// Writes the whole CRD spec (create or replace). Replace, not server-side apply: the
/// conversion stanza belongs to the operator's caBundle field manager, and an apply of
/// `strategy: None` would be merged with its webhook block into an invalid object.
async fn put_crd(client: &Client, crd: &CustomResourceDefinition) -> Result<(), kube::Error> {
    let api = crds(client);
    for _ in 0..10 {
        let result = match api.get_opt(CRD_NAME).await? {
            None => api.create(&PostParams::default(), crd).await,
            Some(live) => {
                let mut next = crd.clone();
                next.metadata.resource_version = live.metadata.resource_version;
                api.replace(CRD_NAME, &PostParams::default(), &next).await
            }
        };
        match result {
            Ok(_) => return Ok(()),
            // The caBundle publisher of a stopping operator may write in between.
            Err(e) if is_code(&e, 409) => continue,
            Err(e) => return Err(e),
        }
    }
    panic!("the CRD kept conflicting");
}

/// The operator's CRD with `storage` as the storage version and no conversion webhook: the CRD
/// as an older release installed it, before v1 was stored.
fn crd_storing(storage: &str) -> CustomResourceDefinition {
    let mut crd = trustyai_crds::crd::crd().expect("the CRD builds");
    for version in &mut crd.spec.versions {
        version.storage = version.name == storage;
    }
    crd.spec.conversion = Some(CustomResourceConversion {
        strategy: "None".into(),
        webhook: None,
    });
    crd
}

/// Drops v1alpha1 from the live CRD's `spec.versions` (what a release that stops serving it
/// applies).
async fn drop_v1alpha1(client: &Client) -> Result<(), kube::Error> {
    let mut crd = crds(client).get(CRD_NAME).await?;
    crd.spec.versions.retain(|v| v.name != "v1alpha1");
    crd.metadata.managed_fields = None;
    put_crd(client, &crd).await
}

// ---------------------------------------------------------------------------------------------
// etcd, read directly: what the API server really stored.

/// The control plane's etcd client URL, from its command line (`--data-dir` names this
/// control plane's folder).
fn etcd_url(cp: &ControlPlane) -> String {
    let data_dir = format!("--data-dir={}", cp.dir.join("etcd").display());
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let args: Vec<String> = cmdline
            .split(|b| *b == 0)
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        if args.contains(&data_dir)
            && let Some(url) = args
                .iter()
                .find_map(|a| a.strip_prefix("--listen-client-urls="))
        {
            return url.to_string();
        }
    }
    panic!("no etcd process with {data_dir}");
}

/// The `apiVersion` etcd holds for a TrustyAIService (through etcd's JSON gateway).
fn stored_as(etcd: &str, ns: &str, name: &str) -> String {
    let key = format!("/registry/trustyai.opendatahub.io/trustyaiservices/{ns}/{name}");
    let body = json!({"key": ByteString(key.clone().into_bytes())}).to_string();
    let address = etcd.trim_start_matches("http://");
    let mut stream = TcpStream::connect(address).expect("etcd");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    // HTTP/1.0: the answer comes whole, never chunked.
    write!(
        stream,
        "POST /v3/kv/range HTTP/1.0\r\nHost: {address}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .expect("request");
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("response");
    let (_, payload) = response.split_once("\r\n\r\n").expect("HTTP response");
    let payload: Value = serde_json::from_str(payload).expect("JSON from etcd");
    let value = payload["kvs"][0]["value"].clone();
    assert!(value.is_string(), "{key} is not in etcd: {payload}");
    let bytes: ByteString = serde_json::from_value(value).expect("base64");
    let object: Value = serde_json::from_slice(&bytes.0).expect("a JSON object in etcd");
    object["apiVersion"]
        .as_str()
        .expect("apiVersion")
        .to_string()
}
// ---------------------------------------------------------------------------------------------
// Keeping the reconcile loop away from an object.
//
// The operator's reconcile loop writes the status of every TrustyAIService it sees (and adds its
// finalizer), which would overwrite the status a test wrote and make "who re-wrote this object"
// unanswerable. It leaves alone an object that is being deleted without its finalizer, so an
// object created with a finalizer of the test's own and deleted *before any operator runs* is
// never written by it: the test's writes and the migration's are the only ones.

/// The test's own finalizer, holding deleted objects in place.
const HOLD: &str = "conversion-test.trustyai.opendatahub.io/hold";

/// Creates `object` (with [`HOLD`]) through `api` and deletes it, so it stays, being deleted.
/// Retries the create while the API server still calls removed webhook registrations.
async fn create_held(api: &Api<DynamicObject>, mut object: DynamicObject) -> DynamicObject {
    object.metadata.finalizers = Some(vec![HOLD.to_string()]);
    let name = object.metadata.name.clone().expect("name");
    let mut failure = String::new();
    let created = wait::within(Duration::from_secs(30), async || {
        match api.create(&PostParams::default(), &object).await {
            Ok(_) => Some(()),
            Err(e) => {
                eprintln!("create {name}: {e}; retrying");
                failure = e.to_string();
                None
            }
        }
    })
    .await;
    assert!(created.is_some(), "create {name}: {failure}");
    api.delete(&name, &DeleteParams::default())
        .await
        .expect("deleted (held by the finalizer)");
    let held = api.get(&name).await.expect("still there");
    assert!(held.metadata.deletion_timestamp.is_some());
    held
}

/// Lets a held object go.
async fn release(api: &Api<DynamicObject>, name: &str) {
    api.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .expect("finalizer removed");
}

// ---------------------------------------------------------------------------------------------
// Objects stored as v1alpha1, as an older release left them.

/// Waits until the API server stores new objects in `version`: it switches its encoder when
/// its CRD informer delivers a change, so a probe object is created until etcd shows it there.
async fn wait_storing(client: &Client, etcd: &str, ns: &str, version: &str) {
    let api = tas_api(client, ns, version);
    let want = format!("trustyai.opendatahub.io/{version}");
    let mut attempt = 0;
    let mut last_create = None;
    let stored = wait::within(Duration::from_secs(30), async || {
        let name = format!("probe-{version}-{attempt}");
        attempt += 1;
        let created = api
            .create(&PostParams::default(), &tas(version, &name, minimal_spec()))
            .await;
        let landed = created.is_ok() && stored_as(etcd, ns, &name) == want;
        if created.is_ok() {
            // Best effort: the answer to a delete is converted too, which fails for an object
            // that landed in the other version while conversion is not served yet.
            let _ = api.delete(&name, &DeleteParams::default()).await;
        }
        last_create = Some(created);
        landed.then_some(())
    })
    .await;
    assert!(
        stored.is_some(),
        "new objects are not stored as {version} within 30s (last create: {last_create:?})"
    );
}

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
    Api::<Event>::namespaced(client.clone(), "default")
        .list(&ListParams::default())
        .await
        .expect("events")
        .items
        .into_iter()
        .filter(|e| {
            e.reason.as_deref() == Some("StorageMigrated")
                && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(CRD_NAME)
        })
        .map(|e| {
            (
                e.metadata.name.unwrap_or_default(),
                e.note.unwrap_or_default(),
            )
        })
        .collect()
}

fn migrate_storage_cli(cp: &ControlPlane) -> (Option<i32>, String, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_trustyai-operator"))
        .arg("migrate-storage")
        .arg("--kubeconfig")
        .arg(&cp.kubeconfig)
        .env("RUST_LOG", "info")
        .output()
        .expect("the binary runs");
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

// ---------------------------------------------------------------------------------------------
// The tests.

#[tokio::test]
async fn a_round_trip_through_v1alpha1_loses_nothing() {
    let claim = control_planes::exclusive(Concern::Conversion);
    let cp = claim.control_plane();
    let client = cp.client().await;
    let etcd = etcd_url(cp);
    let ns = cp.namespace(&client, "round-trip").await;
    let (v1, v1alpha1) = (
        tas_api(&client, &ns, "v1"),
        tas_api(&client, &ns, "v1alpha1"),
    );

    // Created through v1 with the v1-only fields, and its status written, before the operator
    // runs (see HOLD: its reconcile loop would write a status of its own).
    remove_webhook_registrations(&client).await;
    put_crd(&client, &trustyai_crds::crd::crd().expect("the CRD"))
        .await
        .expect("the CRD");
    // Were it still stored as v1alpha1, the v1-only fields would be pruned on the way in.
    wait_storing(&client, &etcd, &ns, "v1").await;
    let mut spec = minimal_spec();
    spec["image"] = json!(IMAGE);
    spec["storage"]["retention"] = json!("Delete");
    create_held(&v1, tas("v1", "svc", spec)).await;
    v1.patch_status(
        "svc",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {
            "observedGeneration": 1, "phase": "Ready", "image": IMAGE,
            "conditions": [{"type": "Ready", "status": "True", "observedGeneration": 1,
                            "lastTransitionTime": "2025-01-01T00:00:00Z", "reason": "Ready"}]}})),
    )
    .await
    .expect("status written through v1");
    let generation = v1.get("svc").await.expect("svc").metadata.generation;
    let mut operator = start_operator(cp, &client, &ns, &[]).await;

    // Through v1alpha1: the v1-only fields are not there (kept in the annotation).
    let alpha = v1alpha1.get("svc").await.expect("read through v1alpha1");
    assert_eq!(api_version(&alpha), "trustyai.opendatahub.io/v1alpha1");
    assert!(
        alpha.data["spec"].get("image").is_none(),
        "{:?}",
        alpha.data
    );
    assert!(alpha.data["spec"]["storage"].get("retention").is_none());
    assert!(alpha.data["status"].get("observedGeneration").is_none());
    assert!(
        alpha.data["status"]["conditions"][0]
            .get("observedGeneration")
            .is_none()
    );
    assert!(
        alpha
            .metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(CONVERSION_PRESERVED_ANNOTATION))
    );

    // A v1alpha1 client patches; another reads, modifies and replaces the whole object (the
    // classic way to lose fields a version does not have). Both pass the webhooks, the
    // validating one checking spec.image restored from the annotation.
    v1alpha1
        .patch(
            "svc",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"metrics": {"schedule": "10s"}}})),
        )
        .await
        .expect("merge patch through v1alpha1");
    let mut alpha = v1alpha1.get("svc").await.expect("re-read through v1alpha1");
    assert_eq!(alpha.data["spec"]["metrics"]["schedule"], "10s");
    assert!(alpha.data["spec"].get("image").is_none());
    alpha.data["spec"]["metrics"]["batchSize"] = json!(1000);
    v1alpha1
        .replace("svc", &PostParams::default(), &alpha)
        .await
        .expect("replace through v1alpha1");

    // Through v1: everything is there, and both changes applied.
    let back = v1.get("svc").await.expect("read through v1");
    assert_eq!(api_version(&back), "trustyai.opendatahub.io/v1");
    assert_eq!(back.data["spec"]["image"], IMAGE);
    assert_eq!(back.data["spec"]["storage"]["retention"], "Delete");
    assert_eq!(back.data["spec"]["metrics"]["schedule"], "10s");
    assert_eq!(back.data["spec"]["metrics"]["batchSize"], 1000);
    assert_eq!(back.data["status"]["observedGeneration"], 1);
    assert_eq!(back.data["status"]["image"], IMAGE);
    assert_eq!(
        back.data["status"]["conditions"][0]["observedGeneration"],
        1
    );
    assert_eq!(back.data["status"]["conditions"][0]["status"], "True");
    assert_eq!(
        back.metadata.generation,
        generation.map(|g| g + 2),
        "two spec changes"
    );
    assert!(
        back.metadata
            .annotations
            .as_ref()
            .is_none_or(|a| !a.contains_key(CONVERSION_PRESERVED_ANNOTATION)),
        "the annotation is consumed on the way back: {:?}",
        back.metadata.annotations
    );
    release(&v1, "svc").await;
    assert!(operator.stop().success(), "{}", operator.logs());
}

#[tokio::test]
async fn two_hundred_objects_list_through_each_version() {
    let claim = control_planes::exclusive(Concern::Conversion);
    let cp = claim.control_plane();
    let client = cp.client().await;
    let ns = cp.namespace(&client, "list").await;
    let mut operator = start_operator(cp, &client, &ns, &[]).await;
    let started = Instant::now();

    // Even ones through v1 (with the v1-only spec.image), odd ones through v1alpha1.
    futures::stream::iter(0..200)
        .map(|i| {
            let client = client.clone();
            let ns = ns.clone();
            async move {
                let (version, mut spec) =
                    (if i % 2 == 0 { "v1" } else { "v1alpha1" }, minimal_spec());
                if version == "v1" {
                    spec["image"] = json!(IMAGE);
                }
                tas_api(&client, &ns, version)
                    .create(
                        &PostParams::default(),
                        &tas(version, &format!("svc-{i}"), spec),
                    )
                    .await
                    .unwrap_or_else(|e| panic!("creating svc-{i} through {version}: {e}"));
            }
        })
        .buffer_unordered(10)
        .for_each(|()| async {})
        .await;
    eprintln!("200 objects created in {:?}", started.elapsed());

    let expected: BTreeSet<String> = (0..200).map(|i| format!("svc-{i}")).collect();
    for version in ["v1", "v1alpha1"] {
        let started = Instant::now();
        let list = tas_api(&client, &ns, version)
            .list(&ListParams::default())
            .await
            .unwrap_or_else(|e| panic!("list through {version}: {e}"));
        eprintln!("listed through {version} in {:?}", started.elapsed());
        let names: BTreeSet<String> = list
            .items
            .iter()
            .filter_map(|o| o.metadata.name.clone())
            .collect();
        assert_eq!(names, expected, "through {version}");
        for item in &list.items {
            assert_eq!(
                api_version(item),
                format!("trustyai.opendatahub.io/{version}")
            );
            let name = item.metadata.name.as_deref().unwrap_or("");
            let made_through_v1 = name
                .trim_start_matches("svc-")
                .parse::<u32>()
                .is_ok_and(|i| i % 2 == 0);
            let has_image = item.data["spec"].get("image").is_some();
            assert_eq!(
                has_image,
                version == "v1" && made_through_v1,
                "{name} through {version}"
            );
        }
    }

    // Paginated through v1alpha1: every page converted, nothing repeated or missed.
    let mut names = Vec::new();
    let mut token: Option<String> = None;
    let mut pages = 0;
    loop {
        let mut params = ListParams::default().limit(64);
        if let Some(t) = &token {
            params = params.continue_token(t);
        }
        let page = tas_api(&client, &ns, "v1alpha1")
            .list(&params)
            .await
            .expect("page");
        pages += 1;
        assert!(
            page.items
                .iter()
                .all(|o| api_version(o) == "trustyai.opendatahub.io/v1alpha1")
        );
        names.extend(page.items.iter().filter_map(|o| o.metadata.name.clone()));
        token = page.metadata.continue_.filter(|t| !t.is_empty());
        if token.is_none() {
            break;
        }
    }
    assert_eq!(pages, 4);
    assert_eq!(names.len(), 200);
    assert_eq!(names.into_iter().collect::<BTreeSet<_>>(), expected);

    assert!(operator.stop().success(), "{}", operator.logs());
}

#[tokio::test]
async fn the_operator_migrates_storage_at_start() {
    let claim = control_planes::exclusive(Concern::Conversion);
    let cp = claim.control_plane();
    let client = cp.client().await;
    let etcd = etcd_url(cp);
    let ns = cp.namespace(&client, "migrate-start").await;

    store_as_v1alpha1(&client, &etcd, &ns).await;
    let before = create_old_objects(&client, &etcd, &ns, 20).await;
    assert_dropping_v1alpha1_is_refused(&client).await;
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
async fn migrate_storage_cli_rewrites_and_then_has_nothing_to_do() {
    let claim = control_planes::exclusive(Concern::Conversion);
    let cp = claim.control_plane();
    let client = cp.client().await;
    let etcd = etcd_url(cp);
    let ns = cp.namespace(&client, "migrate-cli").await;

    // More than one list page (100) of old objects.
    store_as_v1alpha1(&client, &etcd, &ns).await;
    let before = create_old_objects(&client, &etcd, &ns, 120).await;
    assert_dropping_v1alpha1_is_refused(&client).await;

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
