//! What the Go operator made for a TrustyAIService `tas`, as its templates write it: its
//! Deployment (in each storage mode), ServiceAccount, Services, kube-rbac-proxy ConfigMap and
//! status; and what of it must not change while this operator takes it over.

use k8s_openapi::api::apps::v1::Deployment;
use kube::ResourceExt;
use kube::api::{Patch, PatchParams};
use serde_json::json;
use trustyai_crds::TrustyAIService;

use crate::reconcile::env::{DEFAULT_IMAGE, Env};

/// The Go operator's labels, on its Deployment, the Deployment's selector and its pods: its
/// version sits in the immutable selector.
pub(super) fn go_labels(cr: &str) -> serde_json::Value {
    json!({
        "app": cr, "app.kubernetes.io/instance": cr, "app.kubernetes.io/name": cr,
        "app.kubernetes.io/part-of": "trustyai", "app.kubernetes.io/version": "1.39.0"
    })
}

/// The storage modes the Go operator renders differently.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum GoMode {
    Pvc,
    Database,
    Migration,
}

/// The Deployment the Go operator writes for `cr` (its Deployment template, with the images
/// this operator resolves by default: the Go operator read them from the same ConfigMap keys).
pub(super) fn go_deployment(cr: &str, mode: GoMode, owner: Option<&TrustyAIService>) -> Deployment {
    let labels = go_labels(cr);
    let plain = |name: &str, value: &str| json!({"name": name, "value": value});
    let secret = |name: &str, key: &str| json!({"name": name, "valueFrom": {"secretKeyRef": {"name": "db-creds", "key": key}}});
    let mut env = vec![
        plain(
            "SERVICE_STORAGE_FORMAT",
            if mode == GoMode::Pvc {
                "PVC"
            } else {
                "DATABASE"
            },
        ),
        plain("SERVICE_METRICS_SCHEDULE", "5s"),
        plain("SERVICE_BATCH_SIZE", "5000"),
    ];
    if mode != GoMode::Database {
        env.extend([
            plain("STORAGE_DATA_FILENAME", "data.csv"),
            plain("STORAGE_DATA_FOLDER", "/inputs"),
            plain("SERVICE_DATA_FORMAT", "CSV"),
        ]);
    }
    if mode == GoMode::Pvc {
        env.push(plain("QUARKUS_HIBERNATE_ORM_ACTIVE", "false"));
    }
    if mode == GoMode::Migration {
        env.extend([
            plain("STORAGE_MIGRATION_CONFIG_FROM_FOLDER", "/inputs"),
            plain("STORAGE_MIGRATION_CONFIG_FROM_FILENAME", "data.csv"),
        ]);
    }
    if mode != GoMode::Pvc {
        env.extend([
            plain("QUARKUS_HIBERNATE_ORM_ACTIVE", "true"),
            plain("QUARKUS_DATASOURCE_JDBC_MAX_SIZE", "16"),
            secret("QUARKUS_DATASOURCE_DB_KIND", "databaseKind"),
            secret("QUARKUS_DATASOURCE_USERNAME", "databaseUsername"),
            secret("QUARKUS_DATASOURCE_PASSWORD", "databasePassword"),
            secret("DATABASE_SERVICE", "databaseService"),
            secret("DATABASE_PORT", "databasePort"),
            secret("DATABASE_NAME", "databaseName"),
            secret("QUARKUS_DATASOURCE_GENERATION", "databaseGeneration"),
            plain(
                "QUARKUS_DATASOURCE_JDBC_URL",
                "jdbc:${QUARKUS_DATASOURCE_DB_KIND}://${DATABASE_SERVICE}:${DATABASE_PORT}/${DATABASE_NAME}",
            ),
            // The duplicate of migration mode: Kubernetes uses the last one.
            plain("SERVICE_DATA_FORMAT", "HIBERNATE"),
        ]);
    }
    let mut mounts =
        vec![json!({"name": format!("{cr}-internal"), "mountPath": "/etc/tls/internal"})];
    let mut volumes = vec![
        json!({"name": format!("{cr}-tls"), "secret": {"secretName": format!("{cr}-tls")}}),
        json!({"name": format!("{cr}-internal"), "secret": {"secretName": format!("{cr}-internal")}}),
        json!({"name": "kube-rbac-proxy-config", "configMap": {"name": format!("{cr}-kube-rbac-proxy-config")}}),
    ];
    if mode != GoMode::Database {
        mounts.push(json!({"name": "volume", "mountPath": "/inputs"}));
        volumes.push(
            json!({"name": "volume", "persistentVolumeClaim": {"claimName": format!("{cr}-pvc")}}),
        );
    }
    let probe = |path: &str| json!({"httpGet": {"path": path, "port": 8080}, "initialDelaySeconds": 10, "periodSeconds": 5, "timeoutSeconds": 2});
    let mut metadata = json!({
        "name": cr, "labels": labels,
        "annotations": {"deployment.kubernetes.io/revision": "1"}
    });
    if let Some(owner) = owner {
        metadata["ownerReferences"] = json!([{
            "apiVersion": "trustyai.opendatahub.io/v1", "kind": "TrustyAIService",
            "name": owner.name_any(), "uid": owner.uid().expect("uid"),
            "controller": true, "blockOwnerDeletion": true
        }]);
    }
    serde_json::from_value(json!({
        "metadata": metadata,
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}},
            "template": {
                "metadata": {
                    "labels": labels,
                    "annotations": {"prometheus.io/path": "/q/metrics", "prometheus.io/scheme": "http",
                                    "prometheus.io/scrape": "true"}
                },
                "spec": {
                    "serviceAccountName": format!("{cr}-proxy"),
                    "serviceAccount": format!("{cr}-proxy"),
                    "containers": [
                        {"name": "trustyai-service", "image": DEFAULT_IMAGE, "env": env,
                         "readinessProbe": probe("/q/health/ready"), "livenessProbe": probe("/q/health/live"),
                         "volumeMounts": mounts},
                        {"name": "kube-rbac-proxy", "image": GO_PROXY_IMAGE,
                         "args": ["--secure-listen-address=0.0.0.0:8443", "--upstream=http://127.0.0.1:8081/",
                                  "--config-file=/etc/kube-rbac-proxy/config.yaml",
                                  "--tls-cert-file=/etc/tls/private/tls.crt",
                                  "--tls-private-key-file=/etc/tls/private/tls.key",
                                  "--proxy-endpoints-port=9443", "--v=0"],
                         "ports": [{"name": "https", "containerPort": 8443, "protocol": "TCP"},
                                   {"name": "proxy-healthz", "containerPort": 9443, "protocol": "TCP"}],
                         "resources": {"requests": {"cpu": "50m", "memory": "32Mi"},
                                       "limits": {"cpu": "100m", "memory": "64Mi"}},
                         "volumeMounts": [
                             {"name": format!("{cr}-tls"), "mountPath": "/etc/tls/private", "readOnly": true},
                             {"name": "kube-rbac-proxy-config", "mountPath": "/etc/kube-rbac-proxy", "readOnly": true}
                         ]}
                    ],
                    "volumes": volumes
                }
            }
        }
    }))
    .expect("the Go operator's Deployment")
}

/// The ServiceAccount the Go operator's pods run as (`<cr>-proxy`), owned like its Deployment.
pub(super) async fn go_service_account(env: &Env, ns: &str, owner: Option<&TrustyAIService>) {
    use k8s_openapi::api::core::v1::ServiceAccount;
    let mut account: ServiceAccount = serde_json::from_value(
        json!({"metadata": {"name": "tas-proxy", "labels": go_labels("tas")}}),
    )
    .expect("a ServiceAccount");
    account.metadata.owner_references = owner.and_then(|owner| {
        go_deployment("tas", GoMode::Pvc, Some(owner))
            .metadata
            .owner_references
    });
    env.create_object(ns, &account, "the Go operator's ServiceAccount")
        .await;
}

/// The Go operator's Services (`<cr>` and `<cr>-tls`), its kube-rbac-proxy ConfigMap and the
/// status it wrote, for `tas` in `ns`; returns the uids of the objects.
pub(super) async fn go_other_objects(env: &Env, ns: &str, tas: &TrustyAIService) -> Vec<String> {
    use k8s_openapi::api::core::v1::{ConfigMap, Service};
    let owner = go_deployment("tas", GoMode::Pvc, Some(tas))
        .metadata
        .owner_references;
    let mut with_component = go_labels("tas");
    with_component["app.kubernetes.io/component"] = json!("kube-rbac-proxy");
    let mut tls_labels = go_labels("tas");
    tls_labels["trustyai-service-name"] = json!("tas");
    let mut uids = Vec::new();
    for service in [
        json!({"metadata": {"name": "tas", "labels": go_labels("tas"),
                            "annotations": {"prometheus.io/path": "/q/metrics", "prometheus.io/scheme": "http",
                                            "prometheus.io/scrape": "true",
                                            "service.beta.openshift.io/serving-cert-secret-name": "tas-internal"}},
               "spec": {"type": "ClusterIP", "selector": go_labels("tas"),
                        "ports": [{"name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP"},
                                  {"name": "https", "port": 443, "targetPort": 4443, "protocol": "TCP"}]}}),
        json!({"metadata": {"name": "tas-tls", "labels": tls_labels,
                            "annotations": {"service.beta.openshift.io/serving-cert-secret-name": "tas-tls"}},
               "spec": {"selector": {"app": "tas"},
                        "ports": [{"name": "https", "port": 443, "targetPort": 8443, "protocol": "TCP"}]}}),
    ] {
        let mut service: Service = serde_json::from_value(service).expect("a Service");
        service.metadata.owner_references = owner.clone();
        let created = env
            .create_object(ns, &service, "the Go operator's Service")
            .await;
        uids.extend(created.uid());
    }
    let config = "authorization:\n  resourceAttributes:\n    namespace: NS\n    apiGroup: \"\"\n    resource: services\n    resourceName: tas\n    verb: get\n"
        .replace("NS", ns);
    let mut map: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "tas-kube-rbac-proxy-config", "labels": with_component},
        "data": {"config.yaml": config}
    }))
    .expect("a ConfigMap");
    map.metadata.owner_references = owner;
    let created = env
        .create_object(ns, &map, "the Go operator's ConfigMap")
        .await;
    uids.extend(created.uid());
    // The status the Go operator wrote: Available since long ago.
    env.services(ns)
        .patch_status(
            "tas",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {
                "phase": "Ready", "ready": "True",
                "conditions": [{"type": "Available", "status": "True", "reason": "AllComponentsReady",
                                "message": "AllComponentsReady", "lastTransitionTime": GO_AVAILABLE_SINCE}]
            }})),
        )
        .await
        .expect("the Go operator's status");
    uids
}

/// When the Go operator's instances became available.
const GO_AVAILABLE_SINCE: &str = "2025-01-01T00:00:00Z";

/// The kube-rbac-proxy image this operator resolves when nothing names one.
const GO_PROXY_IMAGE: &str = "quay.io/opendatahub/odh-kube-rbac-proxy:odh-stable";

/// What must not change while our operator takes a Go operator's instance over.
#[derive(Debug, PartialEq)]
pub(super) struct Running {
    deployment: String,
    replica_sets: Vec<String>,
    pods: Vec<String>,
    claim: Option<String>,
}

pub(super) async fn running(env: &Env, ns: &str) -> Running {
    use k8s_openapi::api::apps::v1::ReplicaSet;
    use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
    Running {
        deployment: env.get::<Deployment>(ns, "tas").await.uid().expect("uid"),
        replica_sets: sorted_uids(&env.api::<ReplicaSet>(ns)).await,
        pods: sorted_uids(&env.api::<Pod>(ns)).await,
        claim: env
            .api::<PersistentVolumeClaim>(ns)
            .get_opt("tas-pvc")
            .await
            .expect("read")
            .and_then(|c| c.uid()),
    }
}

/// The uids of every object `api` lists, sorted.
async fn sorted_uids<K>(api: &kube::Api<K>) -> Vec<String>
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned,
{
    let mut uids: Vec<String> = api
        .list(&kube::api::ListParams::default())
        .await
        .unwrap_or_else(|e| panic!("listing {}: {e}", api.resource_url()))
        .items
        .iter()
        .filter_map(|o| o.uid())
        .collect();
    uids.sort();
    uids
}

/// Until the Deployment `tas` in `ns` has one available replica and one pod.
pub(super) async fn go_pods_running(env: &Env, ns: &str) {
    use k8s_openapi::api::core::v1::Pod;
    let deployments = env.api::<Deployment>(ns);
    let pods = env.api::<Pod>(ns);
    let check = async || {
        let deployment = deployments.get("tas").await.ok()?;
        let available = deployment.status?.available_replicas? == 1;
        let listed = pods.list(&Default::default()).await.ok()?.items.len() == 1;
        (available && listed).then_some(())
    };
    if crate::support::wait::within(crate::reconcile::env::TIMEOUT, check)
        .await
        .is_none()
    {
        // What kept them: the events of the namespace say it.
        let notes: Vec<String> = env
            .all_events(ns)
            .await
            .iter()
            .map(|e| {
                format!(
                    "{:?} {:?}: {:?}",
                    e.regarding.as_ref().and_then(|r| r.name.clone()),
                    e.reason,
                    e.note
                )
            })
            .collect();
        let account = env
            .api::<k8s_openapi::api::core::v1::ServiceAccount>(ns)
            .get_opt("tas-proxy")
            .await
            .expect("read");
        panic!(
            "{ns}: the Go operator's pod is not running:\n{}\nServiceAccount: {account:?}",
            notes.join("\n")
        );
    }
}
