//! Admission through the real API server, with the operator binary serving the webhooks: what a
//! CR author sees at `kubectl apply` time.
//!
//! - refusals name every violated field at once, for rules only the webhook knows (CEL in the
//!   CRD catches others first, before the webhook is asked);
//! - defaults are stored; v1alpha1 objects are converted, defaulted and validated;
//! - `--dry-run=server` gives the same answer and stores nothing;
//! - updates follow the immutability rules;
//! - objects stored before the webhooks existed stay updatable and deletable (ratcheting);
//! - warnings reach the client, including the missing-Secret warning from the operator's cache.
//!
//! One operator serves many checks; each test holds this concern's control plane exclusively
//! while it runs, because the webhook registrations are cluster-wide.

use crate::support;
use support::control_planes::{self, Concern};

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Secret;
use kube::Client;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::core::Status;
use serde_json::{Value, json};
use support::ControlPlane;
use support::cluster::{
    MUTATING_WEBHOOK, manifest, remove_webhook_registrations, tas, tas_api,
    wait_for_published_bundle, wait_for_webhooks_served, webhook_only_violations,
};
use support::operator::Operator;
use support::wait;

/// A finalizer only these tests manage, so no controller ever removes it for them.
const TEST_FINALIZER: &str = "tests.trustyai.opendatahub.io/hold";

// --- helpers ------------------------------------------------------------------------------

use support::samples::minimal as pvc_spec;

fn db_spec() -> Value {
    json!({"storage": {"format": "DATABASE"}, "metrics": {"schedule": "5s"}})
}

/// The API server's refusal, or a panic naming what happened instead.
fn refusal<T: std::fmt::Debug>(result: Result<T, kube::Error>, what: &str) -> Status {
    match result {
        Err(kube::Error::Api(status)) => *status,
        Err(other) => panic!("{what}: expected a refusal from the API server, got {other}"),
        Ok(object) => panic!("{what}: expected a refusal, but it was admitted: {object:?}"),
    }
}

/// Asserts that `status` is a 422 Invalid whose message carries every one of `expected`.
fn assert_invalid(status: &Status, expected: &[&str], what: &str) {
    assert_eq!(status.code, 422, "{what}: {status:?}");
    assert_eq!(status.reason, "Invalid", "{what}: {status:?}");
    for text in expected {
        assert!(
            status.message.contains(text),
            "{what}: {text:?} missing in {:?}",
            status.message
        );
    }
}

fn cause_fields(status: &Status) -> Vec<String> {
    status
        .details
        .as_ref()
        .map(|d| d.causes.iter().map(|c| c.field.clone()).collect())
        .unwrap_or_default()
}

fn merge(value: Value) -> Patch<Value> {
    Patch::Merge(value)
}

fn json_patch(value: Value) -> Patch<Value> {
    Patch::Json(serde_json::from_value(value).expect("a JSON patch"))
}

/// Starts the operator with its webhook registrations and waits until the API server calls
/// them.
async fn start_operator(cp: &ControlPlane, client: &Client, ns: &str) -> Operator {
    let started = Instant::now();
    let mut operator = Operator::start(cp, ns, &["--create-webhook-configurations"]);
    operator.wait_ready(Duration::from_secs(60));
    wait_for_published_bundle(client, ns, &operator).await;
    wait_for_webhooks_served(client, ns, &operator).await;
    eprintln!("operator serving admission after {:?}", started.elapsed());
    operator
}

/// Runs `kubectl <args> -n <ns> -f -` with `object` as YAML on stdin.
fn kubectl_with(
    cp: &ControlPlane,
    ns: &str,
    args: &[&str],
    object: &Value,
) -> (bool, String, String) {
    let yaml = trustyai_crds::manifests::to_yaml(object);
    let mut all: Vec<&str> = args.to_vec();
    all.extend(["-n", ns, "-f", "-"]);
    cp.kubectl(&all, Some(&yaml))
}

/// Polls a server-side dry-run create until its stderr satisfies `done`, for answers that
/// depend on the operator's Secret cache catching up with the cluster.
async fn dry_run_until(
    cp: &ControlPlane,
    ns: &str,
    object: &Value,
    what: &str,
    done: impl Fn(&str) -> bool,
) -> String {
    let started = Instant::now();
    let mut last = String::new();
    let answer = wait::within(Duration::from_secs(30), async || {
        let (ok, _, stderr) = kubectl_with(cp, ns, &["create", "--dry-run=server"], object);
        assert!(ok, "{what}: the dry run failed: {stderr}");
        if done(&stderr) {
            return Some(stderr);
        }
        last = stderr;
        None
    })
    .await;
    let Some(stderr) = answer else {
        panic!("{what}: not within 30s; last stderr: {last}");
    };
    eprintln!("{what}: after {:?}", started.elapsed());
    stderr
}

// --- tests --------------------------------------------------------------------------------

#[tokio::test]
async fn admission_through_the_api_server() {
    let claim = control_planes::exclusive(Concern::Admission);
    let started = Instant::now();
    let cp = claim.control_plane();
    let client = cp.client().await;
    let ns = cp.namespace(&client, "admission").await;
    let mut operator = start_operator(cp, &client, &ns).await;

    refusals_name_every_field(&client, &ns).await;
    defaults_are_stored(&client, &ns).await;
    v1alpha1_is_converted_defaulted_and_validated(&client, &ns).await;
    dry_run_answers_the_same_and_stores_nothing(&client, &ns).await;
    updates_follow_the_immutability_rules(&client, &ns).await;
    warnings_reach_kubectl(cp, &client, &ns).await;
    kubectl_apply_prints_the_field_errors(cp, &ns);

    assert!(
        operator.stop().success(),
        "clean exit on SIGTERM:\n{}",
        operator.logs()
    );
    eprintln!("admission checks took {:?}", started.elapsed());
}

async fn refusals_name_every_field(client: &Client, ns: &str) {
    let api = tas_api(client, ns, "v1");
    let status = refusal(
        api.create(
            &PostParams::default(),
            &tas("v1", "bad", webhook_only_violations()),
        )
        .await,
        "three webhook-only violations",
    );
    assert_invalid(
        &status,
        &[
            &format!("admission webhook \"{MUTATING_WEBHOOK}\" denied the request"),
            r#"TrustyAIService.trustyai.opendatahub.io "bad" is invalid"#,
            r#"spec.image: Invalid value: "docker.io/someone/trustyai:1": must start with one of the allowed image prefixes: "quay.io/trustyai/""#,
            r#"spec.metrics.schedule: Invalid value: "500ms": must be at least one second in total"#,
            r#"spec.data.format: Unsupported value: "JSON": supported values: "CSV""#,
        ],
        "all violations at once",
    );
    let mut fields = cause_fields(&status);
    fields.sort();
    assert_eq!(
        fields,
        ["spec.data.format", "spec.image", "spec.metrics.schedule"],
        "one cause per field: {status:?}"
    );
    assert!(api.get_opt("bad").await.expect("get").is_none());

    // Errors the CRD's CEL rules also catch (a relative folder, a size that is no quantity) and
    // errors only the webhook knows, in one answer: the defaulting webhook runs before the
    // schema and CEL, and denies with every violation.
    let status = refusal(
        api.create(
            &PostParams::default(),
            &tas(
                "v1",
                "worse",
                json!({
                    "image": "docker.io/someone/trustyai:1",
                    "storage": {"format": "PVC", "folder": "inputs", "size": "abc"},
                    "data": {"format": "JSON"},
                    "metrics": {"schedule": "5s"}
                }),
            ),
        )
        .await,
        "CEL and webhook-only violations",
    );
    let mut fields = cause_fields(&status);
    fields.sort();
    assert_eq!(
        fields,
        [
            "spec.data.format",
            "spec.image",
            "spec.storage.folder",
            "spec.storage.size"
        ],
        "every violation in one answer: {status:?}"
    );
    assert!(
        status.message.contains(&format!(
            "admission webhook \"{MUTATING_WEBHOOK}\" denied the request"
        )),
        "{}",
        status.message
    );
}

async fn defaults_are_stored(client: &Client, ns: &str) {
    let api = tas_api(client, ns, "v1");
    api.create(
        &PostParams::default(),
        &tas("v1", "defaults-pvc", pvc_spec()),
    )
    .await
    .expect("a minimal PVC object is admitted");
    let stored = api.get("defaults-pvc").await.expect("stored");
    assert_eq!(
        stored.data["spec"],
        json!({
            "replicas": 1,
            "storage": {"format": "PVC", "folder": "/inputs", "size": "1Gi", "retention": "Retain"},
            "data": {"filename": "data.csv", "format": "CSV"},
            "metrics": {"schedule": "5s", "batchSize": 5000}
        }),
        "every PVC default is stored"
    );

    api.create(&PostParams::default(), &tas("v1", "defaults-db", db_spec()))
        .await
        .expect("a minimal DATABASE object is admitted");
    let stored = api.get("defaults-db").await.expect("stored");
    assert_eq!(
        stored.data["spec"],
        json!({
            "replicas": 1,
            "storage": {"format": "DATABASE", "databaseConfigurations": "defaults-db-db-credentials"},
            "metrics": {"schedule": "5s", "batchSize": 5000}
        }),
        "DATABASE gets the credentials Secret name and no volume defaults"
    );
}

async fn v1alpha1_is_converted_defaulted_and_validated(client: &Client, ns: &str) {
    let alpha = tas_api(client, ns, "v1alpha1");
    alpha
        .create(
            &PostParams::default(),
            &tas("v1alpha1", "alpha", pvc_spec()),
        )
        .await
        .expect("created through v1alpha1");
    let as_v1 = tas_api(client, ns, "v1").get("alpha").await.expect("v1");
    assert_eq!(as_v1.data["spec"]["replicas"], 1, "{:?}", as_v1.data);
    assert_eq!(as_v1.data["spec"]["storage"]["size"], "1Gi");
    assert_eq!(
        as_v1.data["spec"]["storage"]["retention"], "Retain",
        "the v1-only default is there when read through v1"
    );
    let as_alpha = alpha.get("alpha").await.expect("v1alpha1");
    assert_eq!(as_alpha.data["spec"]["metrics"]["batchSize"], 5000);
    assert!(
        as_alpha.data["spec"]["storage"].get("retention").is_none(),
        "v1alpha1 has no retention: {:?}",
        as_alpha.data
    );

    let mut bad = webhook_only_violations();
    bad.as_object_mut().map(|spec| spec.remove("image"));
    let status = refusal(
        alpha
            .create(&PostParams::default(), &tas("v1alpha1", "alpha-bad", bad))
            .await,
        "an invalid v1alpha1 object",
    );
    assert_invalid(
        &status,
        &[
            MUTATING_WEBHOOK,
            "spec.metrics.schedule: Invalid value",
            "spec.data.format: Unsupported value",
        ],
        "v1alpha1 refusal",
    );
    assert!(alpha.get_opt("alpha-bad").await.expect("get").is_none());
}

async fn dry_run_answers_the_same_and_stores_nothing(client: &Client, ns: &str) {
    let api = tas_api(client, ns, "v1");
    let dry_run = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let real = refusal(
        api.create(
            &PostParams::default(),
            &tas("v1", "bad", webhook_only_violations()),
        )
        .await,
        "real create",
    );
    let dry = refusal(
        api.create(&dry_run, &tas("v1", "bad", webhook_only_violations()))
            .await,
        "dry-run create",
    );
    assert_eq!(dry.message, real.message, "the same errors");
    assert_eq!(cause_fields(&dry), cause_fields(&real));

    let answered = api
        .create(&dry_run, &tas("v1", "dry", pvc_spec()))
        .await
        .expect("a valid dry run is admitted");
    assert_eq!(
        answered.data["spec"]["storage"]["folder"], "/inputs",
        "the dry-run answer shows the defaults"
    );
    assert!(
        api.get_opt("dry").await.expect("get").is_none(),
        "a dry run stores nothing"
    );
}

async fn updates_follow_the_immutability_rules(client: &Client, ns: &str) {
    let api = tas_api(client, ns, "v1");
    let pp = PatchParams::default();
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
    let status = refusal(
        api.patch(
            "db-to-pvc",
            &pp,
            &merge(json!({"spec": {"storage": {"format": "PVC"}}})),
        )
        .await,
        "DATABASE → PVC",
    );
    assert_invalid(
        &status,
        &["spec.storage", "from DATABASE back to PVC"],
        "DATABASE → PVC",
    );

    // PVC → DATABASE without the PVC fields that make it a migration: only the webhook knows.
    create("pvc-to-db", pvc_spec()).await;
    let status = refusal(
        api.patch(
            "pvc-to-db",
            &pp,
            &merge(json!({"spec": {"storage": {"format": "DATABASE", "folder": null}}})),
        )
        .await,
        "PVC → DATABASE without migration",
    );
    assert_invalid(
        &status,
        &[
            MUTATING_WEBHOOK,
            r#"spec.storage.format: Invalid value: "DATABASE": may change from PVC to DATABASE only as a migration"#,
        ],
        "PVC → DATABASE without migration",
    );
    // With folder and data.filename kept (they were defaulted), it is a migration.
    let migrated = api
        .patch(
            "pvc-to-db",
            &pp,
            &merge(json!({"spec": {"storage": {"format": "DATABASE"}}})),
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
    let status = refusal(
        api.patch(
            "shrink",
            &pp,
            &merge(json!({"spec": {"storage": {"size": "1Gi"}}})),
        )
        .await,
        "shrinking",
    );
    assert_invalid(&status, &["spec.storage", "shrink"], "shrinking");
    api.patch(
        "shrink",
        &pp,
        &merge(json!({"spec": {"storage": {"size": "3Gi"}}})),
    )
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
        let status = refusal(
            api.patch(
                "bound",
                &pp,
                &merge(json!({"spec": {"storage": {"pv": change}}})),
            )
            .await,
            what,
        );
        assert_invalid(&status, &["spec.storage", "pv"], what);
    }
    // In migration mode it stays while the volume is mounted, and goes with the migration's end.
    create(
        "migrating",
        json!({"storage": {"format": "DATABASE", "folder": "/inputs", "pv": "pv-m"},
               "data": {"filename": "data.csv"}, "metrics": {"schedule": "5s"}}),
    )
    .await;
    let status = refusal(
        api.patch(
            "migrating",
            &pp,
            &merge(json!({"spec": {"storage": {"pv": null}}})),
        )
        .await,
        "removing the pv while migrating",
    );
    assert_invalid(
        &status,
        &["spec.storage.pv", "the end of a migration"],
        "removing the pv while migrating",
    );
    api.patch(
        "migrating",
        &pp,
        &merge(json!({"spec": {"storage": {"pv": null}, "data": {"filename": null}}})),
    )
    .await
    .expect("the end of a migration takes the pv with it");

    // The mount path may not move while the volume holds the data: only the webhook knows.
    create("folder", pvc_spec()).await;
    let status = refusal(
        api.patch(
            "folder",
            &pp,
            &merge(json!({"spec": {"storage": {"folder": "/data"}}})),
        )
        .await,
        "moving the folder",
    );
    assert_invalid(
        &status,
        &[
            MUTATING_WEBHOOK,
            r#"spec.storage.folder: Invalid value: "/data": may not change while the PersistentVolumeClaim is in use"#,
        ],
        "moving the folder",
    );
}

async fn warnings_reach_kubectl(cp: &ControlPlane, client: &Client, ns: &str) {
    // kube-rs only logs warnings; kubectl shows them as "Warning: ..." on stderr.
    let mut busy = pvc_spec();
    busy["replicas"] = json!(3);
    let (ok, _, stderr) = kubectl_with(cp, ns, &["apply"], &manifest("v1", "busy", busy));
    assert!(ok, "a warning does not refuse: {stderr}");
    assert!(
        stderr.contains(
            "Warning: spec.replicas: 3 replicas run as one pod while the data is on a claim"
        ),
        "{stderr}"
    );

    // The credentials Secret does not exist: the operator's Secret cache says so (it may need
    // a moment after start for its first list).
    let mut named = db_spec();
    named["storage"]["databaseConfigurations"] = json!("absent-creds");
    let object = manifest("v1", "db-warn", named);
    let missing =
        "Warning: spec.storage.databaseConfigurations: Secret \"absent-creds\" does not exist yet";
    dry_run_until(cp, ns, &object, "the missing-Secret warning", |e| {
        e.contains(missing)
    })
    .await;
    let (ok, _, stderr) = kubectl_with(cp, ns, &["apply"], &object);
    assert!(ok, "{stderr}");
    assert!(stderr.contains(missing), "{stderr}");
    // Without databaseConfigurations, the defaulted name is checked.
    let (ok, _, stderr) = kubectl_with(cp, ns, &["apply"], &manifest("v1", "db-plain", db_spec()));
    assert!(ok, "{stderr}");
    assert!(
        stderr.contains("Secret \"db-plain-db-credentials\" does not exist yet"),
        "{stderr}"
    );

    // Once the Secret exists, the cache follows the watch and the warning goes away.
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": "absent-creds"},
        "stringData": {"databaseKind": "mysql"}
    }))
    .expect("secret");
    Api::<Secret>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &secret)
        .await
        .expect("the Secret is created");
    let mut other = db_spec();
    other["storage"]["databaseConfigurations"] = json!("absent-creds");
    dry_run_until(
        cp,
        ns,
        &manifest("v1", "db-after", other),
        "no warning once the Secret exists",
        |e| !e.contains("does not exist yet"),
    )
    .await;
}

fn kubectl_apply_prints_the_field_errors(cp: &ControlPlane, ns: &str) {
    let (ok, stdout, stderr) = kubectl_with(
        cp,
        ns,
        &["apply"],
        &manifest("v1", "applied-bad", webhook_only_violations()),
    );
    assert!(!ok, "refused: {stdout}");
    // kubectl renders the causes of a 422 one per line.
    for text in [
        r#"The TrustyAIService "applied-bad" is invalid"#,
        r#"* spec.image: Invalid value: "docker.io/someone/trustyai:1": must start with one of the allowed image prefixes: "quay.io/trustyai/""#,
        r#"* spec.metrics.schedule: Invalid value: "500ms": must be at least one second in total"#,
        r#"* spec.data.format: Unsupported value: "JSON": supported values: "CSV""#,
    ] {
        assert!(stderr.contains(text), "{text:?} missing in {stderr}");
    }
}

#[tokio::test]
async fn legacy_objects_ratchet() {
    let claim = control_planes::exclusive(Concern::Admission);
    let started = Instant::now();
    let cp = claim.control_plane();
    let client = cp.client().await;
    let ns = cp.namespace(&client, "legacy").await;

    // An object stored before the webhooks existed (the Go operator validated nothing): the
    // schema and CEL accept it, but today's webhook rules do not.
    remove_webhook_registrations(&client).await;
    trustyai_operator::crd_maintenance::apply_crd(&client)
        .await
        .expect("CRD applied");
    let legacy_spec = json!({
        "image": "docker.io/legacy/trustyai:1",
        "storage": {"format": "PVC"},
        "metrics": {"schedule": "500ms"}
    });
    let api = tas_api(&client, &ns, "v1");
    // The API server drops removed registrations after a moment; until then it still calls the
    // webhook it knew, whose operator is gone.
    let mut last = String::new();
    let created = wait::within(Duration::from_secs(30), async || {
        let legacy = tas("v1", "legacy", legacy_spec.clone());
        match api.create(&PostParams::default(), &legacy).await {
            Ok(_) => Some(()),
            Err(e) => {
                last = e.to_string();
                assert!(
                    last.contains("failed calling webhook"),
                    "storing the legacy object while no webhook is registered: {e}"
                );
                None
            }
        }
    })
    .await;
    assert!(
        created.is_some(),
        "storing the legacy object while no webhook is registered: {last}"
    );
    let stored = api.get("legacy").await.expect("stored");
    assert!(
        stored.data["spec"].get("replicas").is_none(),
        "no mutating webhook was involved: {:?}",
        stored.data
    );

    let mut operator = start_operator(cp, &client, &ns).await;
    let pp = PatchParams::default();

    // The same spec is refused for a new object today.
    let status = refusal(
        api.create(
            &PostParams {
                dry_run: true,
                ..PostParams::default()
            },
            &tas("v1", "legacy-copy", legacy_spec),
        )
        .await,
        "a new object with the legacy spec",
    );
    assert_invalid(
        &status,
        &["spec.image", "spec.metrics.schedule"],
        "legacy spec on create",
    );

    // Metadata-only changes are allowed.
    let labelled = api
        .patch(
            "legacy",
            &pp,
            &merge(json!({"metadata": {"labels": {"team": "a"}}})),
        )
        .await
        .expect("adding a label");
    assert_eq!(
        labelled
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("team"))
            .map(String::as_str),
        Some("a")
    );
    assert_eq!(
        labelled.data["spec"]["replicas"], 1,
        "the update was defaulted by the mutating webhook and still admitted"
    );
    api.patch(
        "legacy",
        &pp,
        &merge(json!({"metadata": {"finalizers": [TEST_FINALIZER]}})),
    )
    .await
    .expect("adding a finalizer");
    let released = api
        .patch(
            "legacy",
            &pp,
            &json_patch(json!([{"op": "remove", "path": "/metadata/finalizers"}])),
        )
        .await
        .expect("removing a finalizer");
    assert!(released.metadata.finalizers.unwrap_or_default().is_empty());

    // A change elsewhere in the spec is held only to its own field's rules.
    api.patch("legacy", &pp, &merge(json!({"spec": {"replicas": 2}})))
        .await
        .expect("changing replicas while the untouched image stays invalid");

    // Changing an invalid field to another invalid value is refused, naming only that field.
    let status = refusal(
        api.patch(
            "legacy",
            &pp,
            &merge(json!({"spec": {"metrics": {"schedule": "200ms"}}})),
        )
        .await,
        "another invalid schedule",
    );
    assert_invalid(
        &status,
        &[
            MUTATING_WEBHOOK,
            r#"spec.metrics.schedule: Invalid value: "200ms""#,
        ],
        "another invalid schedule",
    );
    assert!(
        !status.message.contains("spec.image"),
        "the untouched image is ratcheted: {}",
        status.message
    );
    let status = refusal(
        api.patch(
            "legacy",
            &pp,
            &merge(json!({"spec": {"image": "docker.io/other/trustyai:2"}})),
        )
        .await,
        "another disallowed image",
    );
    assert_invalid(
        &status,
        &[r#"spec.image: Invalid value: "docker.io/other/trustyai:2""#],
        "another disallowed image",
    );

    // Deletion with a finalizer completes: removing the finalizer of an invalid object that is
    // being deleted succeeds.
    api.patch(
        "legacy",
        &pp,
        &merge(json!({"metadata": {"finalizers": [TEST_FINALIZER]}})),
    )
    .await
    .expect("adding the finalizer again");
    api.delete("legacy", &DeleteParams::default())
        .await
        .expect("deletion accepted");
    let terminating = api.get("legacy").await.expect("held by the finalizer");
    assert!(terminating.metadata.deletion_timestamp.is_some());
    api.patch(
        "legacy",
        &pp,
        &json_patch(json!([{"op": "remove", "path": "/metadata/finalizers"}])),
    )
    .await
    .expect("removing the finalizer of a terminating invalid object");
    let deleted = wait::within(Duration::from_secs(30), async || {
        api.get_opt("legacy")
            .await
            .expect("get")
            .is_none()
            .then_some(())
    })
    .await;
    assert!(deleted.is_some(), "the object was not deleted");

    assert!(
        operator.stop().success(),
        "clean exit on SIGTERM:\n{}",
        operator.logs()
    );
    eprintln!("ratcheting checks took {:?}", started.elapsed());
}
