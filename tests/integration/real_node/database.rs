//! MariaDB's image made here runs as a pod for the TrustyAI service's DATABASE mode: as its
//! non-root user, its data in a volume, the database and user its environment names created.

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};
use serde_json::json;
use trustyai_local_cluster::images;

use super::release::TIMEOUT;
use crate::support::control_planes::{self, Concern};
use crate::support::wait;

#[tokio::test]
async fn mariadb_serves_the_database_and_user_its_environment_names() {
    let image = tokio::task::spawn_blocking(images::mariadb::build)
        .await
        .expect("the build thread")
        .unwrap_or_else(|e| panic!("MariaDB's image: {e}"));
    let claim = control_planes::shared(Concern::RealNode);
    let cp = claim.control_plane();
    cp.import_image(&image).expect("imported");
    let client = cp.client().await;
    let ns = cp.namespace(&client, "real-mariadb").await;
    // Ready only once the user can log in over TCP and reach its database.
    let check = r#"mariadb -h 127.0.0.1 -u "$MARIADB_USER" -p"$MARIADB_PASSWORD" -e 'SELECT 1' "$MARIADB_DATABASE""#;
    let pod: Pod = serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "mariadb"},
        "spec": {
            "securityContext": {"runAsNonRoot": true, "fsGroup": images::mariadb::UID},
            "containers": [{
                "name": "mariadb",
                "image": image.reference,
                "imagePullPolicy": "Never",
                "env": [
                    {"name": "MARIADB_DATABASE", "value": "trustyai"},
                    {"name": "MARIADB_USER", "value": "trustyai"},
                    {"name": "MARIADB_PASSWORD", "value": "it's a secret"},
                ],
                "ports": [{"containerPort": 3306}],
                "readinessProbe": {
                    "exec": {"command": ["sh", "-c", check]},
                    "periodSeconds": 1,
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
    let pods: Api<Pod> = Api::namespaced(client, &ns);
    pods.create(&PostParams::default(), &pod)
        .await
        .expect("created");
    wait::until_showing(
        "MariaDB Ready",
        TIMEOUT,
        || cp.logs(),
        async || {
            let status = pods.get("mariadb").await.ok()?.status?;
            status
                .conditions?
                .iter()
                .any(|c| c.type_ == "Ready" && c.status == "True")
                .then_some(())
        },
    )
    .await;
}
