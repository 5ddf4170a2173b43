//! Switching from the Go operator: its instances in every storage mode (and one created through
//! v1alpha1) are taken over without replacing a pod.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Secret};
use kube::ResourceExt;
use kube::api::PostParams;
use serde_json::{Value, json};
use trustyai_crds::TrustyAIService;
use trustyai_crds::contract::FINALIZER;

use super::go_objects::{
    GoMode, Running, go_deployment, go_other_objects, go_pods_running, go_service_account, running,
};
use super::remove_registrations;
use crate::reconcile::env::{Env, condition};
use crate::support::cluster::merge_patch;

#[tokio::test]
async fn switching_from_the_go_operator_replaces_no_pod_in_any_storage_mode() {
    let env = Env::exclusive().await;

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
    env.api::<PersistentVolumeClaim>(&alpha)
        .create(&PostParams::default(), &go_claim())
        .await
        .expect("the Go operator's PVC");
    go_pods_running(&env, &alpha).await;
    let alpha_before = running(&env, &alpha).await;

    // The Go operator's instances in the three storage modes, written while no operator of ours
    // runs (its webhook registrations go with it; the restarted operator registers them again).
    env.stop_operator();
    remove_registrations(&env);
    let mut namespaces = Vec::new();
    for mode in [GoMode::Pvc, GoMode::Database, GoMode::Migration] {
        namespaces.push(go_instance(&env, mode).await);
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
    create_through_v1alpha1(&env, &alpha, go_spec(GoMode::Pvc)).await;
    for (ns, was) in &all {
        assert_taken_over_in_place(&env, ns, was).await;
        // The Deployment existed, and so did the other children the Go operator made: they are
        // said to be adopted (although its owner references already named this
        // TrustyAIService), none created or merely updated.
        let mut expected = vec!["Deployment tas", "ServiceAccount tas-proxy"];
        if *ns != alpha {
            expected.extend([
                "Service tas",
                "Service tas-tls",
                "ConfigMap tas-kube-rbac-proxy-config",
            ]);
        }
        assert_said_adopted(&env, ns, &expected).await;
    }

    // The other objects the Go operator made stay (adopted, not made again), nothing is left
    // beside them, and the status carries on from the Go operator's.
    for (ns, _, others) in &namespaces {
        assert_the_go_objects_kept(&env, ns, others).await;
    }
    // A real change afterwards rolls the pods once, to this operator's template.
    a_change_rolls_out(&env, &namespaces[0].0).await;
}

/// The spec of the Go operator's instance in `mode`.
fn go_spec(mode: GoMode) -> Value {
    match mode {
        GoMode::Pvc => json!({"storage": {"format": "PVC", "folder": "/inputs", "size": "1Gi"},
                              "data": {"filename": "data.csv", "format": "CSV"}, "metrics": {"schedule": "5s"}}),
        GoMode::Database => {
            json!({"storage": {"format": "DATABASE", "databaseConfigurations": "db-creds"},
                                   "metrics": {"schedule": "5s"}})
        }
        GoMode::Migration => {
            json!({"storage": {"format": "DATABASE", "folder": "/inputs", "size": "1Gi",
                                                "databaseConfigurations": "db-creds"},
                                    "data": {"filename": "data.csv", "format": "CSV"}, "metrics": {"schedule": "5s"}})
        }
    }
}

/// The database credentials the Go operator's DATABASE instances name.
fn go_credentials() -> Secret {
    serde_json::from_value(json!({
        "metadata": {"name": "db-creds"},
        "stringData": {"databaseKind": "mariadb", "databaseUsername": "user", "databasePassword": "secret",
                       "databaseService": "db", "databasePort": "3306", "databaseName": "trustyai",
                       "databaseGeneration": "update"}
    }))
    .expect("a Secret")
}

/// The Go operator's claim `tas-pvc`.
fn go_claim() -> PersistentVolumeClaim {
    serde_json::from_value(json!({
        "metadata": {"name": "tas-pvc"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
    }))
    .expect("a PVC")
}

/// The Go operator's instance `tas` in `mode`, in a namespace of its own, as it left it: the
/// TrustyAIService with its finalizer, the credentials, the claim (where there is one), the
/// ServiceAccount, the Deployment and the other objects. Returns the namespace, the mode and
/// the uids of the other objects.
async fn go_instance(env: &Env, mode: GoMode) -> (String, GoMode, Vec<String>) {
    let ns = env.namespace(&format!("go-{mode:?}").to_lowercase()).await;
    env.api::<Secret>(&ns)
        .create(&PostParams::default(), &go_credentials())
        .await
        .expect("the credentials");
    let mut object = json!({
        "apiVersion": "trustyai.opendatahub.io/v1", "kind": "TrustyAIService",
        "metadata": {"name": "tas", "finalizers": [FINALIZER]}, "spec": go_spec(mode)
    });
    if mode == GoMode::Database {
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
    if mode != GoMode::Database {
        env.volume_for(&ns, "tas-pvc").await;
        let mut claim = go_claim();
        claim.metadata.owner_references = go_deployment("tas", mode, Some(&tas))
            .metadata
            .owner_references;
        env.api::<PersistentVolumeClaim>(&ns)
            .create(&PostParams::default(), &claim)
            .await
            .expect("the Go operator's PVC");
    }
    go_service_account(env, &ns, Some(&tas)).await;
    env.api::<Deployment>(&ns)
        .create(
            &PostParams::default(),
            &go_deployment("tas", mode, Some(&tas)),
        )
        .await
        .expect("the Go operator's Deployment");
    let others = go_other_objects(env, &ns, &tas).await;
    (ns, mode, others)
}

/// Creates the TrustyAIService `tas` with `spec` in `ns` through v1alpha1.
async fn create_through_v1alpha1(env: &Env, ns: &str, spec: Value) {
    let alpha_tas: TrustyAIService = serde_json::from_value(json!({
        "apiVersion": "trustyai.opendatahub.io/v1", "kind": "TrustyAIService", "metadata": {"name": "tas"},
        "spec": spec
    }))
    .expect("object");
    let alpha_api = crate::reconcile::env::dynamic_api(
        &env.client,
        ns,
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
}

/// `tas` in `ns` is ready and available, and what ran before (`was`) runs on: the Deployment,
/// its ReplicaSets, its pods and the claim, with the Go operator's pod template kept.
async fn assert_taken_over_in_place(env: &Env, ns: &str, was: &Running) {
    let ready = env.wait_ready(ns, "tas").await;
    assert_eq!(
        condition(&ready, "Available").map(|c| c.status).as_deref(),
        Some("True"),
        "{ns}"
    );
    // Settled: a rollout the operator started would show in a later snapshot.
    let now = env
        .settled(&format!("{ns}: what runs"), || running(env, ns))
        .await;
    assert_eq!(
        &now, was,
        "{ns}: the Deployment, its ReplicaSets, its pods and the claim stay"
    );
    let deployment: Deployment = env.get(ns, "tas").await;
    let decision = deployment
        .annotations()
        .get("trustyai.opendatahub.io/pod-template")
        .cloned();
    assert!(
        decision.as_deref().is_some_and(|d| d.starts_with("kept:")),
        "{ns}: {decision:?}"
    );
}

/// The events and the operator's log in `ns` say each of `expected` ("Kind name") was adopted:
/// the Deployment's sentence says so first, and none is said to be created or updated.
async fn assert_said_adopted(env: &Env, ns: &str, expected: &[&str]) {
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
    for item in expected {
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
        assert_logged_adopted(env, ns, item);
    }
}

/// The operator's log has its record of the apply that adopted `item` ("Kind name") in `ns`.
fn assert_logged_adopted(env: &Env, ns: &str, item: &str) {
    let (kind, name) = item.split_once(' ').expect("kind and name");
    let log = std::fs::read_to_string(env.operator_log()).expect("the operator's log");
    let logged = log
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .any(|record| {
            record["message"] == "applied"
                && record["kind"] == kind
                && record["name"] == name
                && record["namespace"] == ns
                && record["outcome"] == "Adopted"
        });
    assert!(logged, "{ns}: no log record of {item} adopted");
}

/// The Go operator's Services and ConfigMap in `ns` (the uids `others`) are kept, with no other
/// Service beside them, and the status is Available since the Go operator said so.
async fn assert_the_go_objects_kept(env: &Env, ns: &str, others: &[String]) {
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
    let mut expected = others.to_vec();
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

/// A real change to `tas` in `ns` rolls out, to this operator's template.
async fn a_change_rolls_out(env: &Env, ns: &str) {
    merge_patch(
        &env.services(ns),
        "tas",
        json!({"spec": {"metrics": {"schedule": "10s"}}}),
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
