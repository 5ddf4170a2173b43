//! Database mode: bad credentials and their recovery, and the migration from a PVC.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, Secret};
use kube::ResourceExt;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use trustyai_crds::TrustyAIService;

use crate::reconcile::env::{Env, assert_env, condition, env_value, note, service_container};
use crate::support::cluster::{annotate, exists, patch_spec};
use crate::support::samples::{database, end_of_migration};

/// The Go operator's annotation asking for a migration of the claim's data into the database.
const MIGRATION_TRIGGER: &str = "trustyai.opendatahub.io/db-migration";

/// A database-mode TrustyAIService `tas` in a new namespace, whose credentials Secret
/// `db-creds` does not exist; once it says so. Returns the namespace and the object then.
async fn without_credentials(env: &Env) -> (String, TrustyAIService) {
    let ns = env.namespace("db").await;
    env.create(&ns, "tas", database("db-creds")).await;
    let missing = env
        .wait_condition(
            &ns,
            "tas",
            "DBAvailable",
            "False",
            Some("DBCredentialsNotFound"),
        )
        .await;
    (ns, missing)
}

/// [`without_credentials`], then the Secret created without `databasePassword`; once the
/// service says so. Returns the namespace.
async fn with_incomplete_credentials(env: &Env) -> String {
    let (ns, _) = without_credentials(env).await;
    let mut data = complete_credentials();
    data.remove("databasePassword");
    env.api::<Secret>(&ns)
        .create(&PostParams::default(), &credentials("db-creds", &data))
        .await
        .expect("creating the Secret");
    env.wait_condition(
        &ns,
        "tas",
        "DBAvailable",
        "False",
        Some("DBCredentialsError"),
    )
    .await;
    ns
}

#[tokio::test]
async fn missing_database_credentials_are_reported_with_a_warning() {
    let env = Env::shared().await;
    let (ns, missing) = without_credentials(&env).await;
    assert_eq!(
        missing.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Not Ready")
    );
    let warnings = env.wait_event(&ns, "tas", "DBCredentialsNotFound").await;
    assert_eq!(warnings[0].type_.as_deref(), Some("Warning"));
    assert!(note(&warnings[0]).contains("db-creds"));
    assert_the_deployment_reads_the_named_secret(&env, &ns).await;
}

/// A Secret missing a key: DBCredentialsError and a warning naming the key.
#[tokio::test]
async fn incomplete_database_credentials_warn_naming_the_missing_key() {
    let env = Env::shared().await;
    let ns = with_incomplete_credentials(&env).await;
    let warnings = env.wait_event(&ns, "tas", "DBCredentialsError").await;
    assert!(
        note(&warnings[0]).contains("databasePassword"),
        "{:?}",
        warnings[0].note
    );
}

/// The complete Secret: the service becomes ready, having warned once per problem on the way.
#[tokio::test]
async fn completed_credentials_make_the_service_ready_after_one_warning_per_problem() {
    let env = Env::shared().await;
    let ns = with_incomplete_credentials(&env).await;
    env.api::<Secret>(&ns)
        .replace(
            "db-creds",
            &PostParams::default(),
            &credentials("db-creds", &complete_credentials()),
        )
        .await
        .expect("completing the Secret");
    let ready = env.wait_ready(&ns, "tas").await;
    let db = condition(&ready, "DBAvailable").expect("DBAvailable");
    assert_eq!(
        (db.status.as_str(), db.reason.as_deref()),
        ("True", Some("DBAvailable"))
    );
    // Warnings are emitted on transitions, not on every reconcile.
    assert_eq!(
        env.events(&ns, "tas", "DBCredentialsNotFound").await.len(),
        1
    );
    assert_eq!(env.events(&ns, "tas", "DBCredentialsError").await.len(), 1);
    for event in env.events(&ns, "tas", "DBCredentialsNotFound").await {
        assert!(event.series.is_none(), "published once: {:?}", event.series);
    }
}

/// The service crash-loops, as it does when it cannot reach its database: the credentials are
/// valid, so the status blames the connection, and Ready names the failing pods. When the pod
/// recovers, so does the status.
#[tokio::test]
async fn a_crash_looping_service_blames_the_database_connection() {
    let env = Env::shared().await;
    let ns = env.namespace("db").await;
    create_credentials(&env, &ns, "db-creds").await;
    env.create(&ns, "tas", database("db-creds")).await;
    env.wait_ready(&ns, "tas").await;

    let pods = env.api::<Pod>(&ns);
    let pod = env
        .wait("the service's pod", || async {
            pods.list(&ListParams::default().labels("app=tas"))
                .await
                .ok()?
                .items
                .into_iter()
                .next()
        })
        .await
        .name_any();
    set_service_container(&pods, &pod, false).await;
    let failing = env
        .wait_condition(
            &ns,
            "tas",
            "DBAvailable",
            "False",
            Some("DBConnectionError"),
        )
        .await;
    let not_ready = condition(&failing, "Ready").expect("Ready");
    assert_eq!(not_ready.status, "False");
    assert!(
        not_ready.message.contains("failing pods"),
        "{}",
        not_ready.message
    );
    set_service_container(&pods, &pod, true).await;
    let recovered = env.wait_ready(&ns, "tas").await;
    assert_eq!(
        condition(&recovered, "DBAvailable").map(|c| c.status),
        Some("True".to_owned())
    );
}

/// Every key of a database credentials Secret, valid.
fn complete_credentials() -> BTreeMap<String, String> {
    [
        ("databaseKind", "mariadb"),
        ("databaseUsername", "user"),
        ("databasePassword", "secret"),
        ("databaseService", "db"),
        ("databasePort", "3306"),
        ("databaseName", "trustyai"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect()
}

/// A complete, valid database credentials Secret `name` in `ns`.
async fn create_credentials(env: &Env, ns: &str, name: &str) {
    env.api::<Secret>(ns)
        .create(
            &PostParams::default(),
            &credentials(name, &complete_credentials()),
        )
        .await
        .expect("creating the Secret");
}

/// The database credentials Secret `name` with `data`.
fn credentials(name: &str, data: &BTreeMap<String, String>) -> Secret {
    serde_json::from_value(json!({"metadata": {"name": name}, "stringData": data}))
        .expect("a Secret")
}

/// The Deployment is applied regardless of the credentials, reading the named Secret; no PVC
/// in this mode.
async fn assert_the_deployment_reads_the_named_secret(env: &Env, ns: &str) {
    let deployment = env.wait_exists(&env.api::<Deployment>(ns), "tas").await;
    let refs: Vec<String> = service_container(&deployment)
        .env
        .iter()
        .flatten()
        .filter_map(|e| {
            e.value_from
                .as_ref()?
                .secret_key_ref
                .as_ref()
                .map(|r| r.name.clone())
        })
        .collect();
    assert!(
        !refs.is_empty() && refs.iter().all(|r| r == "db-creds"),
        "{refs:?}"
    );
    assert!(!exists(&env.api::<PersistentVolumeClaim>(ns), "tas-pvc").await);
}

/// Makes the service container of `pod` run and be ready, or crash-loop (what the kubelet
/// would report; kwok leaves a running pod's status alone).
async fn set_service_container(pods: &Api<Pod>, pod: &str, running: bool) {
    let ready = if running { "True" } else { "False" };
    let container = if running {
        json!({"name": "trustyai-service", "ready": true,
               "state": {"waiting": null, "running": {"startedAt": "2026-01-01T00:00:00Z"}}})
    } else {
        json!({"name": "trustyai-service", "ready": false, "restartCount": 5,
               "state": {"running": null, "waiting": {"reason": "CrashLoopBackOff", "message": "back-off restarting failed container"}}})
    };
    let patch = json!({"status": {
        "conditions": [
            {"type": "Ready", "status": ready},
            {"type": "ContainersReady", "status": ready}
        ],
        "containerStatuses": [container]
    }});
    pods.patch_status(pod, &PatchParams::default(), &Patch::Strategic(patch))
        .await
        .unwrap_or_else(|e| panic!("setting the status of pod {pod}: {e}"));
}

/// A TrustyAIService `tas` in migration mode, Ready in a new namespace: DATABASE with
/// storage.folder and data.filename (the Go operator's rule), from the files on a named volume.
/// Returns the namespace, the volume's name and the Ready object.
async fn migrating(env: &Env) -> (String, String, TrustyAIService) {
    let ns = env.namespace("migration").await;
    create_credentials(env, &ns, "tas-db-credentials").await;
    env.volume_for(&ns, "tas-pvc").await;
    let volume = format!("{ns}-tas-pvc");
    env.create(
        &ns,
        "tas",
        json!({"storage": {"format": "DATABASE", "folder": "/inputs", "size": "1Gi", "pv": volume},
               "data": {"filename": "data.csv", "format": "CSV"},
               "metrics": {"schedule": "5s"}}),
    )
    .await;
    let ready = env.wait_ready(&ns, "tas").await;
    (ns, volume, ready)
}

#[tokio::test]
async fn migration_mode_keeps_the_pvc_beside_the_database() {
    let env = Env::shared().await;
    let (ns, _, ready) = migrating(&env).await;
    assert_migrating_with_the_claim_and_the_database(&env, &ns, &ready).await;
}

#[tokio::test]
async fn a_go_operator_migration_trigger_is_consumed() {
    let env = Env::shared().await;
    let (ns, _, _) = migrating(&env).await;
    the_go_operators_migration_trigger_is_consumed(&env, &ns).await;
}

#[tokio::test]
async fn the_end_of_a_migration_keeps_the_claim_unmounted() {
    let env = Env::shared().await;
    let (ns, volume, _) = migrating(&env).await;
    the_end_of_the_migration_keeps_the_claim(&env, &ns, &volume).await;
}

/// Both the claim and the database are available; the claim is kept and mounted at the folder,
/// and the service migrates from its files to the database.
async fn assert_migrating_with_the_claim_and_the_database(
    env: &Env,
    ns: &str,
    ready: &TrustyAIService,
) {
    for type_ in ["PVCAvailable", "DBAvailable"] {
        let c = condition(ready, type_).unwrap_or_else(|| panic!("{type_} missing"));
        assert_eq!(c.status, "True", "{type_}");
    }
    assert!(
        exists(&env.api::<PersistentVolumeClaim>(ns), "tas-pvc").await,
        "the PVC is kept in migration mode"
    );
    let deployment: Deployment = env.get(ns, "tas").await;
    assert_env(
        &deployment,
        &[
            ("STORAGE_MIGRATION_CONFIG_FROM_FOLDER", "/inputs"),
            ("STORAGE_MIGRATION_CONFIG_FROM_FILENAME", "data.csv"),
            ("QUARKUS_HIBERNATE_ORM_ACTIVE", "true"),
        ],
    );
    let mounts: Vec<String> = service_container(&deployment)
        .volume_mounts
        .iter()
        .flatten()
        .map(|m| m.mount_path.clone())
        .collect();
    assert!(
        mounts.iter().any(|m| m == "/inputs"),
        "the PVC is mounted at the folder: {mounts:?}"
    );
}

/// The Go operator's migration trigger: consumed (removed) once the Deployment runs the
/// current spec, as scripts written for the Go operator wait for.
async fn the_go_operators_migration_trigger_is_consumed(env: &Env, ns: &str) {
    let services = env.api::<TrustyAIService>(ns);
    annotate(&services, "tas", MIGRATION_TRIGGER, "true")
        .await
        .expect("annotating for migration");
    env.wait("the migration annotation removed", || async {
        let tas = services.get("tas").await.ok()?;
        (!tas.annotations().contains_key(MIGRATION_TRIGGER)).then_some(())
    })
    .await;
    env.wait_event(ns, "tas", "MigrationAnnotationRemoved")
        .await;
}

/// The end of the migration: without data.filename the storage is the database alone, and the
/// volume's name goes with it. The claim, still bound to the volume, is kept (it holds the
/// files the migration read); the service no longer mounts it.
async fn the_end_of_the_migration_keeps_the_claim(env: &Env, ns: &str, volume: &str) {
    let services = env.api::<TrustyAIService>(ns);
    patch_spec(&services, "tas", end_of_migration())
        .await
        .expect("ending the migration");
    let ended = env
        .wait("the Deployment without the migration", || async {
            let deployment = env.api::<Deployment>(ns).get("tas").await.ok()?;
            let mounted = service_container(&deployment)
                .volume_mounts
                .iter()
                .flatten()
                .any(|m| m.mount_path == "/inputs");
            (!mounted && env_value(&deployment, "STORAGE_MIGRATION_CONFIG_FROM_FOLDER").is_none())
                .then_some(deployment)
        })
        .await;
    assert_eq!(
        env_value(&ended, "QUARKUS_HIBERNATE_ORM_ACTIVE").as_deref(),
        Some("true")
    );
    let ready = env
        .wait("Ready with the database alone", || async {
            let tas = services.get("tas").await.ok()?;
            (condition(&tas, "Ready").is_some_and(|c| c.status == "True")
                && condition(&tas, "PVCAvailable").is_none()
                && tas.status.as_ref()?.observed_generation == tas.metadata.generation)
                .then_some(tas)
        })
        .await;
    assert_eq!(
        condition(&ready, "DBAvailable").map(|c| c.status),
        Some("True".to_owned())
    );
    let claim: PersistentVolumeClaim = env.get(ns, "tas-pvc").await;
    assert_eq!(
        claim.spec.and_then(|s| s.volume_name).as_deref(),
        Some(volume)
    );
}
