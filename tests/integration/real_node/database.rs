//! MariaDB's image made here runs as a pod, and the real TrustyAI service keeps its data there:
//! in DATABASE mode, and in migration mode, which moves what it kept on its claim into the
//! database.

use std::time::Instant;

use k8s_openapi::api::core::v1::{Pod, Secret, Service};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use trustyai_local_cluster::{ControlPlane, images};

use super::release::{installed_namespace, wait_for};
use super::service::{create_service, pvc_service, ready_pod, service_ready};
use super::service_api::{User, uploaded_pvc_demo};
use crate::support::cluster::tas_api;
use crate::support::control_planes::{self, Concern};

/// The database, user and password the MariaDB pod creates.
const DATABASE: &str = "trustyai";
const USER: &str = "trustyai";
const PASSWORD: &str = "it's a secret";

/// Runs MariaDB's image (built here, imported into the node) as the pod and Service `mariadb`
/// in `ns`, and waits until its user can log in over TCP and reach its database.
async fn mariadb(cp: &ControlPlane, ns: &str) {
    let image = tokio::task::spawn_blocking(images::mariadb::build)
        .await
        .expect("the build thread")
        .unwrap_or_else(|e| panic!("MariaDB's image: {e}"));
    cp.import_image(&image).expect("imported");
    let client = cp.client().await;
    let check = r#"mariadb -h 127.0.0.1 -u "$MARIADB_USER" -p"$MARIADB_PASSWORD" -e 'SELECT 1' "$MARIADB_DATABASE""#;
    let pod: Pod = serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "mariadb", "labels": {"app": "mariadb"}},
        "spec": {
            "securityContext": {"runAsNonRoot": true, "fsGroup": images::mariadb::UID},
            "containers": [{
                "name": "mariadb",
                "image": image.reference,
                "imagePullPolicy": "Never",
                "env": [
                    {"name": "MARIADB_DATABASE", "value": DATABASE},
                    {"name": "MARIADB_USER", "value": USER},
                    {"name": "MARIADB_PASSWORD", "value": PASSWORD},
                ],
                "ports": [{"containerPort": 3306}],
                // The client's answer takes more than the default second on a loaded node.
                "readinessProbe": {
                    "exec": {"command": ["sh", "-c", check]},
                    "periodSeconds": 1,
                    "timeoutSeconds": 10,
                },
                "securityContext": {
                    "allowPrivilegeEscalation": false,
                    "capabilities": {"drop": ["ALL"]},
                    "readOnlyRootFilesystem": true,
                },
                "volumeMounts": [
                    {"name": "data", "mountPath": images::mariadb::DATA_DIR},
                    {"name": "tmp", "mountPath": "/tmp"},
                ],
            }],
            "volumes": [{"name": "data", "emptyDir": {}}, {"name": "tmp", "emptyDir": {}}],
        }
    }))
    .expect("a pod");
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    pods.create(&PostParams::default(), &pod)
        .await
        .expect("created");
    let service: Service = serde_json::from_value(json!({
        "metadata": {"name": "mariadb"},
        "spec": {"selector": {"app": "mariadb"}, "ports": [{"port": 3306, "targetPort": 3306}]},
    }))
    .expect("a Service");
    Api::<Service>::namespaced(client, ns)
        .create(&PostParams::default(), &service)
        .await
        .expect("created");
    wait_for(cp, "MariaDB Ready", async || {
        let status = pods.get("mariadb").await.ok()?.status?;
        status
            .conditions?
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True")
            .then_some(())
    })
    .await;
}

/// The credentials Secret `<cr>-db-credentials` for the `mariadb` Service of the namespace.
async fn credentials(client: &kube::Client, ns: &str, cr: &str) {
    credentials_for(client, ns, cr, "mariadb").await;
}

/// The credentials Secret `<cr>-db-credentials` for the database Service `host`.
async fn credentials_for(client: &kube::Client, ns: &str, cr: &str, host: &str) {
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": format!("{cr}-db-credentials")},
        "stringData": {
            "databaseKind": "mariadb",
            "databaseUsername": USER,
            "databasePassword": PASSWORD,
            "databaseService": host,
            "databasePort": "3306",
            "databaseName": DATABASE,
            "databaseGeneration": "update",
        },
    }))
    .expect("a Secret");
    Api::<Secret>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &secret)
        .await
        .expect("created");
}

#[tokio::test]
async fn mariadb_is_set_up_as_its_environment_says() {
    let (_claim, cp, _, ns) =
        control_planes::shared_namespace(Concern::RealNode, "real-mariadb").await;
    mariadb(cp, &ns).await;
}

#[tokio::test]
async fn in_database_mode_the_service_keeps_its_data_in_mariadb() {
    let (_claim, cp, client, ns) = installed_namespace(false, "database-mode").await;
    mariadb(cp, &ns).await;
    credentials(&client, &ns, "demo").await;
    let created = Instant::now();
    let spec = json!({"storage": {"format": "DATABASE"}, "metrics": {"schedule": "5s"}});
    create_service(&client, &ns, "demo", spec).await;
    service_ready(cp, &client, &ns, "demo").await;
    println!(
        "DATABASE mode: Ready {:?} after the create",
        created.elapsed()
    );

    let user = User::of_demo(&client, &ns).await;
    user.upload().await;
    user.assert_spd().await;
}

#[tokio::test]
async fn migration_moves_the_claims_data_into_mariadb() {
    let (_claim, cp, client, ns) = installed_namespace(false, "migration").await;
    let (pvc_pod, user) = uploaded_pvc_demo(cp, &client, &ns).await;

    // DATABASE, keeping the folder and the file name (defaulted at the create) the service
    // wrote under: migration mode.
    mariadb(cp, &ns).await;
    credentials(&client, &ns, "demo").await;
    let switched = Instant::now();
    switch_demo_to_database(&client, &ns).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let old = pvc_pod.metadata.name.as_deref();
    ready_pod(cp, &pods, "demo", old).await;
    service_ready(cp, &client, &ns, "demo").await;
    println!("migration: Ready {:?} after the switch", switched.elapsed());

    // Read from the database only: the metric over the migrated data.
    user.assert_spd().await;
}

/// Switches the TrustyAIService `demo` in `ns` to DATABASE storage, keeping its folder and file
/// name: a migration of what it wrote on its claim.
async fn switch_demo_to_database(client: &kube::Client, ns: &str) {
    let patch = json!({"spec": {"storage": {"format": "DATABASE"}}});
    tas_api(client, ns, "v1")
        .patch("demo", &PatchParams::default(), &Patch::Merge(patch))
        .await
        .expect("switched");
}

/// Waits until the TrustyAIService `cr` is not Ready with `reason`, and a Warning event with
/// that reason is on it; returns the condition's message.
pub(super) async fn not_ready_because(
    cp: &ControlPlane,
    client: &kube::Client,
    ns: &str,
    cr: &str,
    reason: &str,
) -> String {
    let api = tas_api(client, ns, "v1");
    let message = wait_for(
        cp,
        &format!("{cr} not Ready with reason {reason}"),
        async || {
            let object = api.get(cr).await.ok()?;
            let conditions = object.data["status"]["conditions"].as_array()?.clone();
            let ready = conditions.iter().find(|c| c["type"] == "Ready")?;
            (ready["status"] == "False" && ready["reason"] == reason)
                .then(|| ready["message"].as_str().unwrap_or_default().to_owned())
        },
    )
    .await;
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(client.clone(), ns);
    wait_for(cp, &format!("a Warning {reason} on {cr}"), async || {
        let list = events.list(&Default::default()).await.ok()?;
        list.items
            .iter()
            .any(|e| {
                e.type_.as_deref() == Some("Warning")
                    && e.reason.as_deref() == Some(reason)
                    && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(cr)
            })
            .then_some(())
    })
    .await;
    message
}

#[tokio::test]
async fn an_unreachable_database_is_named_in_ready_with_the_services_last_words() {
    let (_claim, cp, client, ns) = installed_namespace(false, "database-unreachable").await;
    credentials_for(&client, &ns, "demo", "nowhere").await;
    let spec = json!({"storage": {"format": "DATABASE"}, "metrics": {"schedule": "5s"}});
    create_service(&client, &ns, "demo", spec).await;
    let message = not_ready_because(cp, &client, &ns, "demo", "ServiceCrashing").await;
    println!("Ready's message: {message}");
    for pod in Api::<Pod>::namespaced(client.clone(), &ns)
        .list(&Default::default())
        .await
        .expect("the pods")
    {
        let statuses = pod
            .status
            .and_then(|s| s.container_statuses)
            .unwrap_or_default();
        for status in statuses {
            let terminated = status.last_state.and_then(|s| s.terminated);
            if let Some(terminated) = terminated {
                println!(
                    "{} exited {}: {}",
                    status.name,
                    terminated.exit_code,
                    terminated.message.unwrap_or_default()
                );
            }
        }
    }
    let (_, last_words) = message
        .split_once("the end of its log: ")
        .unwrap_or_else(|| panic!("no log quoted: {message}"));
    assert!(
        last_words.chars().any(char::is_alphabetic),
        "the service's last words are quoted: {message}"
    );
}

#[tokio::test]
async fn a_migration_with_nothing_to_move_is_named_in_ready() {
    let (_claim, cp, client, ns) = installed_namespace(false, "migration-empty").await;
    let pvc_pod = pvc_service(cp, &client, &ns, "demo").await;
    mariadb(cp, &ns).await;
    credentials(&client, &ns, "demo").await;
    // Nothing was uploaded: the folder holds no file to move.
    switch_demo_to_database(&client, &ns).await;
    let message = not_ready_because(cp, &client, &ns, "demo", "ServiceNotReady").await;
    println!("Ready's message: {message}");
    let old = pvc_pod.metadata.name.expect("a name");
    assert!(
        !message.contains(&old),
        "the old pod is not the one named: {message}"
    );
}
