//! From the Go operator: its Deployment adopted in place, its objects stored without validation.

use k8s_openapi::api::apps::v1::Deployment;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use trustyai_crds::TrustyAIService;

use crate::reconcile::env::{DEFAULT_IMAGE, Env, condition, pvc_spec, service_container};

#[tokio::test]
async fn a_go_operator_deployment_is_adopted_in_place_keeping_its_selector() {
    let env = Env::shared().await;
    let ns = env.namespace("adopt").await;
    // What the Go operator made: its version in the (immutable) selector.
    let labels = json!({
        "app": "tas", "app.kubernetes.io/instance": "tas", "app.kubernetes.io/name": "tas",
        "app.kubernetes.io/part-of": "trustyai", "app.kubernetes.io/version": "1.39.0"
    });
    let go: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "tas", "labels": labels},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "trustyai-service", "image": "quay.io/trustyai/trustyai-service:go"}]}
            }
        }
    }))
    .expect("a Deployment");
    let deployments = env.api::<Deployment>(&ns);
    let old = deployments
        .create(&PostParams::default(), &go)
        .await
        .expect("the Go operator's Deployment")
        .uid();

    env.volume_for(&ns, "tas-pvc").await;
    env.create(&ns, "tas", pvc_spec()).await;
    env.wait_ready(&ns, "tas").await;
    let now = deployments.get("tas").await.expect("Deployment");
    // Not deleted and created again: the service keeps running through the switch.
    assert_eq!(now.uid(), old, "adopted in place");
    let selector = now.spec.selector.match_labels.clone().expect("selector");
    assert_eq!(
        selector
            .get("app.kubernetes.io/version")
            .map(String::as_str),
        Some("1.39.0"),
        "the live selector is kept: {selector:?}"
    );
    let pod_labels = now
        .spec
        .template
        .metadata
        .as_ref()
        .and_then(|m| m.labels.clone())
        .unwrap_or_default();
    assert!(
        selector.iter().all(|(k, v)| pod_labels.get(k) == Some(v)),
        "the pods match the kept selector: {pod_labels:?}"
    );
    assert_eq!(
        service_container(&now).image.as_deref(),
        Some(DEFAULT_IMAGE)
    );
    let created = env.wait_event(&ns, "tas", "PVCCreated").await;
    let note = created[0].note.as_deref().unwrap_or_default();
    assert!(
        note.contains("Adopted (it existed): Deployment tas"),
        "{note}"
    );
    assert!(
        env.events(&ns, "tas", "DeploymentRecreated")
            .await
            .is_empty()
    );
}

/// The CRD as the Go operator installed it: no schema rules (its CRD had no validation).
async fn strip_validation(env: &Env) {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
        CustomResourceDefinition, CustomResourceValidation, JSONSchemaProps,
    };
    let crds = Api::<CustomResourceDefinition>::all(env.client.clone());
    let mut crd = crds
        .get("trustyaiservices.trustyai.opendatahub.io")
        .await
        .expect("the CRD");
    for version in &mut crd.spec.versions {
        version.schema = Some(CustomResourceValidation {
            open_api_v3_schema: Some(JSONSchemaProps {
                type_: Some("object".to_owned()),
                x_kubernetes_preserve_unknown_fields: Some(true),
                ..JSONSchemaProps::default()
            }),
        });
    }
    crd.metadata.managed_fields = None;
    crds.replace(&crd.name_any(), &PostParams::default(), &crd)
        .await
        .expect("the CRD without validation");
}

/// Deletes the webhook registrations the operator made: with no operator answering them
/// (`failurePolicy: Fail`), they would refuse every TrustyAIService write.
fn remove_registrations(env: &Env) {
    for (kind, name) in [
        (
            "validatingwebhookconfiguration",
            trustyai_operator::cli::default_names::VALIDATING_WEBHOOK_CONFIGURATION,
        ),
        (
            "mutatingwebhookconfiguration",
            trustyai_operator::cli::default_names::MUTATING_WEBHOOK_CONFIGURATION,
        ),
    ] {
        let (ok, out, err) = env
            .cp
            .kubectl(&["delete", kind, name, "--ignore-not-found"], None);
        assert!(ok, "{out}{err}");
    }
}

#[tokio::test]
async fn objects_stored_without_validation_keep_working_and_say_what_to_fix() {
    let env = Env::exclusive().await;
    let ns = env.namespace("legacy").await;
    // Under the Go operator: no webhooks, a CRD without rules, and an object ours refuse.
    env.stop_operator();
    remove_registrations(&env);
    strip_validation(&env).await;
    let mut spec = pvc_spec();
    spec["storage"]["size"] = json!("abc");
    let legacy: TrustyAIService = serde_json::from_value(json!({
        "apiVersion": "trustyai.opendatahub.io/v1", "kind": "TrustyAIService",
        "metadata": {"name": "legacy"}, "spec": spec
    }))
    .expect("a TrustyAIService");
    let services = env.services(&ns);
    // The API server takes the new schema a moment after the CRD is written.
    env.wait("the invalid object stored", || async {
        services
            .create(&PostParams::default(), &legacy)
            .await
            .ok()
            .map(|_| ())
    })
    .await;

    // As `kubectl apply` of the Go operator's manifests leaves it.
    let (ok, out, err) = env.cp.kubectl(
        &[
            "annotate",
            "crd",
            "trustyaiservices.trustyai.opendatahub.io",
            "--overwrite",
            "kubectl.kubernetes.io/last-applied-configuration={}",
        ],
        None,
    );
    assert!(ok, "{out}{err}");

    // Ours takes over: its CRD maintenance restores the rules (and drops what a later
    // `kubectl apply` of the Go manifests would patch against), the webhooks are registered.
    let _log = env.restart_operator();
    let crds = Api::<
        k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
    >::all(env.client.clone());
    env.wait("the kubectl annotation gone from the CRD", || async {
        let crd = crds
            .get("trustyaiservices.trustyai.opendatahub.io")
            .await
            .ok()?;
        (!crd
            .annotations()
            .contains_key("kubectl.kubernetes.io/last-applied-configuration"))
        .then_some(())
    })
    .await;
    env.wait("a condition naming the field to fix", || async {
        let object = services.get("legacy").await.ok()?;
        let provisioning = condition(&object, "ProvisioningSucceeded")?;
        (provisioning.status == "False" && provisioning.message.contains("spec.storage.size"))
            .then_some(())
    })
    .await;
    let warnings = env.wait_event(&ns, "legacy", "InvalidSpec").await;
    assert_eq!(warnings[0].type_.as_deref(), Some("Warning"));
    assert!(
        warnings[0]
            .note
            .as_deref()
            .unwrap_or_default()
            .contains("spec.storage.size"),
        "{:?}",
        warnings[0].note
    );

    // Everything but the invalid field can still change.
    for patch in [
        json!({"metadata": {"labels": {"team": "fraud"}}}),
        json!({"metadata": {"annotations": {"example.com/note": "kept"}}}),
        json!({"spec": {"metrics": {"schedule": "10s"}}}),
    ] {
        services
            .patch("legacy", &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .unwrap_or_else(|e| panic!("{patch}: {e}"));
    }
    let current = services.get("legacy").await.expect("the object");
    let finalizers = [
        current.metadata.finalizers.clone().unwrap_or_default(),
        vec!["example.com/hold".to_owned()],
    ]
    .concat();
    services
        .patch(
            "legacy",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": finalizers}})),
        )
        .await
        .expect("adding a finalizer");
    let kept: Vec<String> = finalizers
        .into_iter()
        .filter(|f| f != "example.com/hold")
        .collect();
    services
        .patch(
            "legacy",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": kept}})),
        )
        .await
        .expect("removing it");

    // And it can be deleted: the cleanup does not depend on a valid spec.
    env.delete_service(&ns, "legacy").await;
}

/// The Go operator's labels, on its Deployment, the Deployment's selector and its pods: its
/// version sits in the immutable selector.
fn go_labels(cr: &str) -> serde_json::Value {
    json!({
        "app": cr, "app.kubernetes.io/instance": cr, "app.kubernetes.io/name": cr,
        "app.kubernetes.io/part-of": "trustyai", "app.kubernetes.io/version": "1.39.0"
    })
}

/// The storage modes the Go operator renders differently.
#[derive(Clone, Copy, Debug, PartialEq)]
enum GoMode {
    Pvc,
    Database,
    Migration,
}

/// The Deployment the Go operator writes for `cr` (its Deployment template, with the images
/// this operator resolves by default: the Go operator read them from the same ConfigMap keys).
fn go_deployment(cr: &str, mode: GoMode, owner: Option<&TrustyAIService>) -> Deployment {
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
async fn go_service_account(env: &Env, ns: &str, owner: Option<&TrustyAIService>) {
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
    env.api::<ServiceAccount>(ns)
        .create(&PostParams::default(), &account)
        .await
        .expect("the Go operator's ServiceAccount");
}

/// The Go operator's Services (`<cr>` and `<cr>-tls`), its kube-rbac-proxy ConfigMap and the
/// status it wrote, for `tas` in `ns`; returns the uids of the objects.
async fn go_other_objects(env: &Env, ns: &str, tas: &TrustyAIService) -> Vec<String> {
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
            .api::<Service>(ns)
            .create(&PostParams::default(), &service)
            .await
            .expect("the Go operator's Service");
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
        .api::<ConfigMap>(ns)
        .create(&PostParams::default(), &map)
        .await
        .expect("the Go operator's ConfigMap");
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
struct Running {
    deployment: String,
    replica_sets: Vec<String>,
    pods: Vec<String>,
    claim: Option<String>,
}

async fn running(env: &Env, ns: &str) -> Running {
    use k8s_openapi::api::apps::v1::ReplicaSet;
    use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
    use kube::api::ListParams;
    let uids = |items: Vec<Option<String>>| {
        let mut uids: Vec<String> = items.into_iter().flatten().collect();
        uids.sort();
        uids
    };
    let list = ListParams::default();
    Running {
        deployment: env
            .api::<Deployment>(ns)
            .get("tas")
            .await
            .expect("Deployment")
            .uid()
            .expect("uid"),
        replica_sets: uids(
            env.api::<ReplicaSet>(ns)
                .list(&list)
                .await
                .expect("ReplicaSets")
                .items
                .iter()
                .map(|r| r.uid())
                .collect(),
        ),
        pods: uids(
            env.api::<Pod>(ns)
                .list(&list)
                .await
                .expect("pods")
                .items
                .iter()
                .map(|p| p.uid())
                .collect(),
        ),
        claim: env
            .api::<PersistentVolumeClaim>(ns)
            .get_opt("tas-pvc")
            .await
            .expect("read")
            .and_then(|c| c.uid()),
    }
}

/// Until the Deployment `tas` in `ns` has one available replica and one pod.
async fn go_pods_running(env: &Env, ns: &str) {
    use k8s_openapi::api::core::v1::Pod;
    use k8s_openapi::api::events::v1::Event;
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
        let events = env
            .api::<Event>(ns)
            .list(&Default::default())
            .await
            .expect("events");
        let notes: Vec<String> = events
            .items
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

#[tokio::test]
async fn switching_from_the_go_operator_replaces_no_pod_in_any_storage_mode() {
    use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Secret};
    use trustyai_crds::contract::FINALIZER;

    let env = Env::exclusive().await;
    let credentials = json!({
        "metadata": {"name": "db-creds"},
        "stringData": {"databaseKind": "mariadb", "databaseUsername": "user", "databasePassword": "secret",
                       "databaseService": "db", "databasePort": "3306", "databaseName": "trustyai",
                       "databaseGeneration": "update"}
    });
    let specs = [
        (
            GoMode::Pvc,
            json!({"storage": {"format": "PVC", "folder": "/inputs", "size": "1Gi"},
                              "data": {"filename": "data.csv", "format": "CSV"}, "metrics": {"schedule": "5s"}}),
        ),
        (
            GoMode::Database,
            json!({"storage": {"format": "DATABASE", "databaseConfigurations": "db-creds"},
                                   "metrics": {"schedule": "5s"}}),
        ),
        (
            GoMode::Migration,
            json!({"storage": {"format": "DATABASE", "folder": "/inputs", "size": "1Gi",
                                                "databaseConfigurations": "db-creds"},
                                    "data": {"filename": "data.csv", "format": "CSV"}, "metrics": {"schedule": "5s"}}),
        ),
    ];

    // A v1alpha1 instance, created through v1alpha1 while the operator runs (it converts), over
    // a Go operator's Deployment that was running before it.
    let alpha = env.namespace("go-alpha").await;
    env.volume_for(&alpha, "tas-pvc").await;
    go_service_account(&env, &alpha, None).await;
    env.api::<Deployment>(&alpha)
        .create(
            &PostParams::default(),
            &go_deployment("tas", GoMode::Pvc, None),
        )
        .await
        .expect("the Go operator's Deployment");
    let claim: PersistentVolumeClaim = serde_json::from_value(json!({
        "metadata": {"name": "tas-pvc"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
    }))
    .expect("a PVC");
    env.api::<PersistentVolumeClaim>(&alpha)
        .create(&PostParams::default(), &claim)
        .await
        .expect("the Go operator's PVC");
    go_pods_running(&env, &alpha).await;
    let alpha_before = running(&env, &alpha).await;

    // The Go operator's instances in the three storage modes, written while no operator of ours
    // runs (its webhook registrations go with it; the restarted operator registers them again).
    env.stop_operator();
    remove_registrations(&env);
    let mut namespaces = Vec::new();
    for (mode, spec) in &specs {
        let ns = env.namespace(&format!("go-{mode:?}").to_lowercase()).await;
        let secret: Secret = serde_json::from_value(credentials.clone()).expect("a Secret");
        env.api::<Secret>(&ns)
            .create(&PostParams::default(), &secret)
            .await
            .expect("the credentials");
        let mut object = json!({
            "apiVersion": "trustyai.opendatahub.io/v1", "kind": "TrustyAIService",
            "metadata": {"name": "tas", "finalizers": [FINALIZER]}, "spec": spec
        });
        if *mode == GoMode::Database {
            object["spec"]["storage"]
                .as_object_mut()
                .expect("storage")
                .remove("folder");
        }
        let tas: TrustyAIService = serde_json::from_value(object).expect("a TrustyAIService");
        let tas = env
            .services(&ns)
            .create(&PostParams::default(), &tas)
            .await
            .expect("the Go operator's TrustyAIService");
        if *mode != GoMode::Database {
            env.volume_for(&ns, "tas-pvc").await;
            let mut claim = claim.clone();
            claim.metadata.owner_references = go_deployment("tas", *mode, Some(&tas))
                .metadata
                .owner_references;
            env.api::<PersistentVolumeClaim>(&ns)
                .create(&PostParams::default(), &claim)
                .await
                .expect("the Go operator's PVC");
        }
        go_service_account(&env, &ns, Some(&tas)).await;
        env.api::<Deployment>(&ns)
            .create(
                &PostParams::default(),
                &go_deployment("tas", *mode, Some(&tas)),
            )
            .await
            .expect("the Go operator's Deployment");
        let others = go_other_objects(&env, &ns, &tas).await;
        namespaces.push((ns, *mode, others));
    }
    let mut before = Vec::new();
    for (ns, _, _) in &namespaces {
        go_pods_running(&env, ns).await;
        before.push(running(&env, ns).await);
    }

    // Our operator takes over.
    env.restart_operator();
    let mut all: Vec<(String, Running)> = vec![(alpha.clone(), alpha_before)];
    all.extend(namespaces.iter().map(|(ns, _, _)| ns.clone()).zip(before));
    let alpha_tas: TrustyAIService = serde_json::from_value(json!({
        "apiVersion": "trustyai.opendatahub.io/v1", "kind": "TrustyAIService", "metadata": {"name": "tas"},
        "spec": specs[0].1
    }))
    .expect("object");
    let alpha_api = crate::reconcile::env::dynamic_api(
        &env.client,
        &alpha,
        "trustyai.opendatahub.io",
        "v1alpha1",
        "TrustyAIService",
        "trustyaiservices",
    );
    let mut alpha_object = serde_json::to_value(&alpha_tas).expect("json");
    alpha_object["apiVersion"] = json!("trustyai.opendatahub.io/v1alpha1");
    alpha_api
        .create(
            &PostParams::default(),
            &serde_json::from_value(alpha_object).expect("object"),
        )
        .await
        .expect("creating through v1alpha1");
    for (ns, was) in &all {
        let ready = env.wait_ready(ns, "tas").await;
        assert_eq!(
            condition(&ready, "Available").map(|c| c.status).as_deref(),
            Some("True"),
            "{ns}"
        );
        // Settled: a rollout the operator started would show in a later snapshot.
        let now = env
            .settled(&format!("{ns}: what runs"), || running(&env, ns))
            .await;
        assert_eq!(
            &now, was,
            "{ns}: the Deployment, its ReplicaSets, its pods and the claim stay"
        );
        let deployment = env
            .api::<Deployment>(ns)
            .get("tas")
            .await
            .expect("Deployment");
        let decision = deployment
            .annotations()
            .get("trustyai.opendatahub.io/pod-template")
            .cloned();
        assert!(
            decision.as_deref().is_some_and(|d| d.starts_with("kept:")),
            "{ns}: {decision:?}"
        );
        // Said as it is: the Deployment existed, so the event calls it adopted, not created
        // (also where the Go operator's owner reference already named this TrustyAIService).
        let events = env.api::<k8s_openapi::api::events::v1::Event>(ns);
        let sentence = env
            .wait(&format!("{ns}: an event naming the Deployment"), || async {
                let list = events.list(&Default::default()).await.ok()?;
                list.items.iter().find_map(|e| {
                    let note = e.note.as_deref()?;
                    note.split(". ")
                        .find(|s| s.contains("Deployment tas"))
                        .map(str::to_owned)
                })
            })
            .await;
        assert!(
            sentence.starts_with("Adopted (it existed)"),
            "{ns}: {sentence}"
        );
        // So are the other children the Go operator made, although its owner references
        // already named this TrustyAIService: none is said to be created or merely updated.
        let mut expected = vec!["Deployment tas", "ServiceAccount tas-proxy"];
        if *ns != alpha {
            expected.extend([
                "Service tas",
                "Service tas-tls",
                "ConfigMap tas-kube-rbac-proxy-config",
            ]);
        }
        let adopted = env
            .wait(
                &format!("{ns}: events naming every adopted child"),
                || async {
                    let list = events.list(&Default::default()).await.ok()?;
                    let adopted: Vec<String> = list
                        .items
                        .iter()
                        .filter_map(|e| e.note.as_deref())
                        .flat_map(|note| note.split(". "))
                        .filter_map(|s| s.strip_prefix("Adopted (it existed): "))
                        .flat_map(|items| items.trim_end_matches('.').split(", "))
                        .map(str::to_owned)
                        .collect();
                    expected
                        .iter()
                        .all(|item| adopted.iter().any(|a| a == item))
                        .then_some(adopted)
                },
            )
            .await;
        for item in &expected {
            let said_otherwise = events
                .list(&Default::default())
                .await
                .expect("events")
                .items
                .iter()
                .filter_map(|e| e.note.clone())
                .flat_map(|note| {
                    note.split(". ")
                        .filter(|s| s.starts_with("Created: ") || s.starts_with("Updated: "))
                        .flat_map(|s| {
                            s.split_once(": ")
                                .map(|(_, items)| items.trim_end_matches('.').to_owned())
                        })
                        .collect::<Vec<_>>()
                })
                .any(|items| items.split(", ").any(|i| i == *item));
            assert!(
                !said_otherwise,
                "{ns}: {item} also reported created or updated (adopted: {adopted:?})"
            );
            // The log says so too: its record of the apply.
            let (kind, name) = item.split_once(' ').expect("kind and name");
            let log = std::fs::read_to_string(env.operator_log()).expect("the operator's log");
            let logged = log
                .lines()
                .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
                .any(|record| {
                    record["message"] == "applied"
                        && record["kind"] == kind
                        && record["name"] == name
                        && record["namespace"] == ns.as_str()
                        && record["outcome"] == "Adopted"
                });
            assert!(logged, "{ns}: no log record of {item} adopted");
        }
    }

    // A real change afterwards rolls the pods once, to this operator's template.
    // The other objects the Go operator made stay (adopted, not made again), nothing is left
    // beside them, and the status carries on from the Go operator's.
    for (ns, _, others) in &namespaces {
        use k8s_openapi::api::core::v1::{ConfigMap, Service};
        let services = env
            .api::<Service>(ns)
            .list(&Default::default())
            .await
            .expect("Services");
        let mut names: Vec<String> = services.items.iter().map(|s| s.name_any()).collect();
        names.sort();
        assert_eq!(names, ["tas", "tas-tls"], "{ns}: no other Service");
        let mut uids: Vec<String> = services.items.iter().filter_map(|s| s.uid()).collect();
        uids.extend(
            env.api::<ConfigMap>(ns)
                .get("tas-kube-rbac-proxy-config")
                .await
                .expect("the proxy ConfigMap")
                .uid(),
        );
        let mut expected = others.clone();
        expected.sort();
        uids.sort();
        assert_eq!(
            uids, expected,
            "{ns}: the Go operator's Services and ConfigMap are kept"
        );
        let status = env.services(ns).get("tas").await.expect("TrustyAIService");
        let available = status
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|c| c.iter().find(|c| c.type_ == "Available"))
            .and_then(|c| c.last_transition_time.as_ref())
            .map(|t| t.0.to_string());
        assert!(
            available
                .as_deref()
                .is_some_and(|t| t.starts_with("2025-01-01")),
            "{ns}: Available since the Go operator said so: {available:?}"
        );
    }

    let (ns, _, _) = &namespaces[0];
    env.services(ns)
        .patch(
            "tas",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"metrics": {"schedule": "10s"}}})),
        )
        .await
        .expect("a change");
    let deployments = env.api::<Deployment>(ns);
    env.wait("the change rolled out", || async {
        let deployment = deployments.get("tas").await.ok()?;
        let rendered = deployment
            .annotations()
            .get("trustyai.opendatahub.io/pod-template")?
            == "rendered";
        let schedule = crate::reconcile::env::env_value(&deployment, "SERVICE_METRICS_SCHEDULE")?;
        (rendered && schedule == "10s").then_some(())
    })
    .await;
}

/// Going back to the Go operator (README, "Migrating from the Go operator"): this operator's
/// release is removed with its webhook registrations (left behind with no operator answering,
/// the API server would refuse every TrustyAIService write, the Go operator's too) and the Go
/// operator's manifests are applied again, its CRD among them. The Go operator's reconcile reads
/// the v1 object, looks each child up by name and creates only what is missing (it corrects
/// only the kube-rbac-proxy ConfigMap's data and labels), and keeps the finalizer
/// `trustyai.opendatahub.io/finalizer`, which it removes on deletion, leaving the children to
/// the garbage collector through their owner references. So: every child is there under the
/// Go operator's names and owned by the TrustyAIService, the internal Service selects the
/// running pods, the Go operator's writes (its status, the finalizer) go through, and a
/// deletion collects the children and keeps the retained claim.
#[tokio::test]
async fn switching_back_to_the_go_operator_leaves_every_child_it_looks_up() {
    use k8s_openapi::api::core::v1::{ConfigMap, PersistentVolumeClaim, Service, ServiceAccount};
    use kube::api::DeleteParams;

    let env = Env::exclusive().await;
    let ns = env.namespace("back").await;
    env.volume_for(&ns, "tas-pvc").await;
    env.create(&ns, "tas", pvc_spec()).await;
    let tas = env.wait_ready(&ns, "tas").await;

    env.stop_operator();
    remove_registrations(&env);
    let go_crd = format!(
        "{}/tests/fixtures/crds/go-operator-trustyaiservices.yaml",
        env!("CARGO_MANIFEST_DIR")
    );
    // Replaced, not applied: this operator (in local mode here) points conversion at a URL, and
    // an apply would merge the Go CRD's Service into it, which the API server refuses
    // ("exactly one of url or service is required"). The README says so.
    let (ok, out, err) = env.cp.kubectl(&["replace", "-f", &go_crd], None);
    assert!(ok, "the Go operator's CRD back: {out}{err}");

    // What the Go operator's reconcile looks up, by its names: nothing for it to create.
    let deployment: Deployment = owned_child(&env, &ns, "tas", &tas).await;
    let _: ServiceAccount = owned_child(&env, &ns, "tas-proxy", &tas).await;
    let _: ConfigMap = owned_child(&env, &ns, "tas-kube-rbac-proxy-config", &tas).await;
    let _: Service = owned_child(&env, &ns, "tas-tls", &tas).await;
    let internal: Service = owned_child(&env, &ns, "tas", &tas).await;
    let (ok, out, err) = env.cp.kubectl(
        &[
            "get",
            "clusterrolebinding",
            &format!("tas-{ns}-proxy-rolebinding"),
        ],
        None,
    );
    assert!(ok, "the proxy's ClusterRoleBinding: {out}{err}");
    env.api::<PersistentVolumeClaim>(&ns)
        .get("tas-pvc")
        .await
        .expect("PVC tas-pvc");
    let selector = internal.spec.and_then(|s| s.selector).expect("a selector");
    let pod_labels = deployment
        .spec
        .template
        .metadata
        .and_then(|m| m.labels)
        .unwrap_or_default();
    assert!(
        selector.iter().all(|(k, v)| pod_labels.get(k) == Some(v)),
        "the internal Service selects the running pods: {selector:?} / {pod_labels:?}"
    );
    assert_eq!(
        tas.finalizers(),
        ["trustyai.opendatahub.io/finalizer"],
        "the Go operator's finalizer"
    );

    // The Go operator's writes, through v1 and without webhooks: its status, then on deletion
    // the removal of its finalizer; the garbage collector takes the children, the claim stays.
    let services = env.services(&ns);
    services
        .patch_status(
            "tas",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Ready", "ready": "True"}})),
        )
        .await
        .expect("the Go operator's status write");
    services
        .delete("tas", &DeleteParams::default())
        .await
        .expect("deleting the TrustyAIService");
    services
        .patch(
            "tas",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": null}})),
        )
        .await
        .expect("the Go operator removes its finalizer");
    let deployments = env.api::<Deployment>(&ns);
    env.wait(
        "the TrustyAIService gone and its Deployment collected",
        || async {
            let gone = services.get_opt("tas").await.ok()?.is_none()
                && deployments.get_opt("tas").await.ok()?.is_none();
            gone.then_some(())
        },
    )
    .await;
    assert!(
        env.api::<PersistentVolumeClaim>(&ns)
            .get_opt("tas-pvc")
            .await
            .expect("read")
            .is_some(),
        "the claim is kept (retention: Retain)"
    );

    // Back to this operator for the tests that follow: it brings its CRD and registrations.
    env.restart_operator();
}

/// The child `name` of kind `K` in `ns`, asserted to be owned by `owner`.
async fn owned_child<K>(env: &Env, ns: &str, name: &str, owner: &TrustyAIService) -> K
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
    K::DynamicType: Default,
{
    let child = env
        .api::<K>(ns)
        .get(name)
        .await
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    crate::reconcile::env::assert_owned_by(child.meta(), owner, name);
    child
}
