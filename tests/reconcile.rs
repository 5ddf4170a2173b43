#![allow(clippy::expect_used)] // a test fails loudly on unexpected data
//! The reconcile loop through the real API server: the operator binary (webhooks included)
//! against the local control plane, where kube-controller-manager runs the Deployments and
//! the garbage collector, the PV binder binds claims, and kwok makes pods Ready.
//!
//! One operator serves the tests of this binary, each in namespaces of its own: it starts
//! with the first test that needs it and stops when the last one running is done (so it never
//! outlives the binary). Most tests share it (`Env::shared`); the tests that change something
//! cluster-wide (the operator ConfigMap, optional API CRDs) or restart the operator take it
//! exclusively (`Env::exclusive`), which waits for the shared users to finish. That lock plays
//! the role of `support::CLUSTER_WIDE` here: this binary has its own control plane, and no
//! other operator runs on it.

mod support;

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{
    ConfigMap, PersistentVolume, PersistentVolumeClaim, Pod, Secret, Service, ServiceAccount,
};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};
use support::ControlPlane;
use support::operator::Operator;
use tokio::sync::{OnceCell, RwLock, RwLockReadGuard, RwLockWriteGuard};
use trustyai_crds::TrustyAIService;

const TIMEOUT: Duration = Duration::from_secs(90);
const DEFAULT_IMAGE: &str = "quay.io/trustyai/trustyai-service:latest";
const OPERATOR_CONFIG: &str = "trustyai-service-operator-config";

// --- the shared operator -------------------------------------------------------------------

struct Running {
    users: usize,
    operator: Option<Operator>,
}

static RUNNING: Mutex<Running> = Mutex::new(Running {
    users: 0,
    operator: None,
});
static EXCLUSIVE: RwLock<()> = RwLock::const_new(());
static OPERATOR_NAMESPACE: OnceCell<String> = OnceCell::const_new();

#[allow(dead_code)] // held for their Drop only
enum Access {
    Shared(RwLockReadGuard<'static, ()>),
    Exclusive(RwLockWriteGuard<'static, ()>),
}

/// A test's view of the cluster and the operator; dropping it releases the operator.
struct Env {
    cp: &'static ControlPlane,
    client: Client,
    operator_ns: String,
    _access: Access,
}

fn running() -> std::sync::MutexGuard<'static, Running> {
    RUNNING.lock().unwrap_or_else(|e| e.into_inner())
}

/// How long these tests let a failing cleanup hold up a deletion (the default is 5 minutes).
const CLEANUP_TIMEOUT: &str = "15s";
/// How long a claim may stay unbound before its Warning (the default is 2 minutes).
const PVC_PENDING_GRACE: &str = "5s";

fn start_operator(cp: &ControlPlane, namespace: &str) -> Operator {
    let mut operator = Operator::start(
        cp,
        namespace,
        &[
            "--create-webhook-configurations",
            "--log-format",
            "json",
            "--cleanup-timeout",
            CLEANUP_TIMEOUT,
            "--pvc-pending-grace",
            PVC_PENDING_GRACE,
        ],
    );
    operator.wait_ready(TIMEOUT);
    operator
}

impl Env {
    async fn shared() -> Env {
        Self::new(Access::Shared(EXCLUSIVE.read().await)).await
    }

    async fn exclusive() -> Env {
        Self::new(Access::Exclusive(EXCLUSIVE.write().await)).await
    }

    async fn new(access: Access) -> Env {
        let cp = ControlPlane::shared();
        let client = cp.client().await;
        let operator_ns = OPERATOR_NAMESPACE
            .get_or_init(|| cp.namespace(&client, "operator"))
            .await
            .clone();
        {
            let mut running = running();
            running.users += 1;
            if running.operator.is_none() {
                running.operator = Some(start_operator(cp, &operator_ns));
            }
        }
        Env {
            cp,
            client,
            operator_ns,
            _access: access,
        }
    }

    /// Stops the operator (asserting a clean exit) and starts a new one; returns the new log.
    fn restart_operator(&self) -> std::path::PathBuf {
        let mut running = running();
        if let Some(mut operator) = running.operator.take() {
            let status = operator.stop();
            assert!(
                status.success(),
                "clean exit on SIGTERM:\n{}",
                operator.logs()
            );
        }
        let operator = start_operator(self.cp, &self.operator_ns);
        let log = operator.log.clone();
        running.operator = Some(operator);
        log
    }

    /// Stops the operator (asserting a clean exit); the next test's `Env` starts another.
    fn stop_operator(&self) {
        if let Some(mut operator) = running().operator.take() {
            let status = operator.stop();
            assert!(
                status.success(),
                "clean exit on SIGTERM:\n{}",
                operator.logs()
            );
        }
    }

    /// The running operator's log file.
    fn operator_log(&self) -> std::path::PathBuf {
        running()
            .operator
            .as_ref()
            .map(|o| o.log.clone())
            .expect("a running operator")
    }

    fn operator_logs(&self) -> String {
        running()
            .operator
            .as_ref()
            .map(Operator::logs)
            .unwrap_or_default()
    }

    async fn namespace(&self, prefix: &str) -> String {
        self.cp.namespace(&self.client, prefix).await
    }

    /// Polls `check` every 250 ms until it returns `Some`, or fails with the operator's log.
    async fn wait<T, F, Fut>(&self, what: &str, mut check: F) -> T
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Option<T>>,
    {
        let deadline = Instant::now() + TIMEOUT;
        loop {
            if let Some(value) = check().await {
                return value;
            }
            if Instant::now() > deadline {
                panic!(
                    "timed out after {TIMEOUT:?} waiting for {what}\n--- operator log ---\n{}",
                    self.operator_logs()
                );
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// Polls `read` every 500 ms until its answer has not changed for 5 s, and returns it; fails
    /// with the operator's log if it keeps changing for 60 s. A snapshot taken while the writes
    /// that follow a creation are still landing (follow-up reconciles, the rollout, the claim's
    /// binding) would differ from a later one for reasons that are not under test.
    async fn settled<T, F, Fut>(&self, what: &str, mut read: F) -> T
    where
        T: PartialEq,
        F: FnMut() -> Fut,
        Fut: Future<Output = T>,
    {
        const QUIET: Duration = Duration::from_secs(5);
        const LIMIT: Duration = Duration::from_secs(60);
        let deadline = Instant::now() + LIMIT;
        let mut last = read().await;
        let mut unchanged_since = Instant::now();
        while unchanged_since.elapsed() < QUIET {
            if Instant::now() > deadline {
                panic!(
                    "{what} still changing after {LIMIT:?}\n--- operator log ---\n{}",
                    self.operator_logs()
                );
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
            let now = read().await;
            if now != last {
                last = now;
                unchanged_since = Instant::now();
            }
        }
        last
    }

    fn services(&self, ns: &str) -> Api<TrustyAIService> {
        Api::namespaced(self.client.clone(), ns)
    }

    fn api<K>(&self, ns: &str) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>,
        K::DynamicType: Default,
    {
        Api::namespaced(self.client.clone(), ns)
    }

    async fn create(&self, ns: &str, name: &str, spec: Value) -> TrustyAIService {
        let object: TrustyAIService = serde_json::from_value(json!({
            "apiVersion": "trustyai.opendatahub.io/v1", "kind": "TrustyAIService",
            "metadata": {"name": name}, "spec": spec
        }))
        .expect("a TrustyAIService");
        self.services(ns)
            .create(&PostParams::default(), &object)
            .await
            .unwrap_or_else(|e| panic!("creating {ns}/{name}: {e}"))
    }

    /// Waits until the condition `type_` of `ns/name` has `status` (and `reason`, if given).
    async fn wait_condition(
        &self,
        ns: &str,
        name: &str,
        type_: &str,
        status: &str,
        reason: Option<&str>,
    ) -> TrustyAIService {
        let api = self.services(ns);
        self.wait(&format!("{ns}/{name} {type_}={status} {reason:?}"), || {
            let api = api.clone();
            async move {
                let object = api.get_opt(name).await.ok()??;
                let c = condition(&object, type_)?;
                (c.status == status && reason.is_none_or(|r| c.reason.as_deref() == Some(r)))
                    .then_some(object)
            }
        })
        .await
    }

    /// Waits until `name` exists, and returns it.
    async fn wait_exists<K>(&self, api: &Api<K>, name: &str) -> K
    where
        K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned,
    {
        self.wait(&format!("{} {name}", api.resource_url()), || async {
            api.get_opt(name).await.ok().flatten()
        })
        .await
    }

    async fn wait_ready(&self, ns: &str, name: &str) -> TrustyAIService {
        self.wait_condition(ns, name, "Ready", "True", None).await
    }

    /// A PersistentVolume pre-bound to the claim `ns/claim`, so the PV binder binds exactly
    /// that claim (there is no StorageClass on this cluster).
    async fn volume_for(&self, ns: &str, claim: &str) {
        let name = format!("{ns}-{claim}");
        let pv: PersistentVolume = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "PersistentVolume",
            "metadata": {"name": name},
            "spec": {
                "capacity": {"storage": "5Gi"},
                "accessModes": ["ReadWriteOnce"],
                "persistentVolumeReclaimPolicy": "Retain",
                "hostPath": {"path": format!("/tmp/{name}")},
                "claimRef": {"namespace": ns, "name": claim}
            }
        }))
        .expect("a PV");
        Api::<PersistentVolume>::all(self.client.clone())
            .create(&PostParams::default(), &pv)
            .await
            .expect("creating the PV");
    }

    /// Events regarding `name` in `ns` with `reason`.
    async fn events(&self, ns: &str, name: &str, reason: &str) -> Vec<Event> {
        self.api::<Event>(ns)
            .list(&ListParams::default())
            .await
            .expect("events")
            .items
            .into_iter()
            .filter(|e| {
                e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name)
                    && e.reason.as_deref() == Some(reason)
            })
            .collect()
    }

    async fn wait_event(&self, ns: &str, name: &str, reason: &str) -> Vec<Event> {
        self.wait(&format!("event {reason} on {ns}/{name}"), || async {
            let found = self.events(ns, name, reason).await;
            (!found.is_empty()).then_some(found)
        })
        .await
    }

    async fn delete_service(&self, ns: &str, name: &str) {
        self.services(ns)
            .delete(name, &DeleteParams::default())
            .await
            .expect("deleting the TrustyAIService");
        self.wait(&format!("{ns}/{name} gone"), || async {
            self.services(ns)
                .get_opt(name)
                .await
                .ok()
                .and_then(|o| o.is_none().then_some(()))
        })
        .await;
    }
}

impl Drop for Env {
    fn drop(&mut self) {
        let mut running = running();
        running.users = running.users.saturating_sub(1);
        if running.users == 0 {
            // SIGTERM, then a bounded wait (Operator's Drop).
            drop(running.operator.take());
        }
    }
}

struct Cond {
    status: String,
    reason: Option<String>,
    message: String,
}

fn condition(object: &TrustyAIService, type_: &str) -> Option<Cond> {
    object
        .status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| Cond {
            status: c.status.clone(),
            reason: c.reason.clone(),
            message: c.message.clone().unwrap_or_default(),
        })
}

fn pvc_spec() -> Value {
    json!({"storage": {"format": "PVC", "size": "1Gi"}, "metrics": {"schedule": "5s"}})
}

fn env_value(deployment: &Deployment, name: &str) -> Option<String> {
    service_container(deployment)
        .env
        .as_ref()?
        .iter()
        .find(|e| e.name == name)
        .and_then(|e| e.value.clone())
}

fn service_container(deployment: &Deployment) -> &k8s_openapi::api::core::v1::Container {
    deployment
        .spec
        .template
        .spec
        .as_ref()
        .and_then(|p| p.containers.iter().find(|c| c.name == "trustyai-service"))
        .expect("the trustyai-service container")
}

fn assert_owned_by(meta: &kube::api::ObjectMeta, owner: &TrustyAIService, what: &str) {
    let refs = meta.owner_references.as_deref().unwrap_or_default();
    assert!(
        refs.iter().any(|r| r.uid == owner.uid().unwrap_or_default()
            && r.controller == Some(true)
            && r.kind == "TrustyAIService"
            && r.api_version == "trustyai.opendatahub.io/v1"),
        "{what} is owned by the TrustyAIService: {refs:?}"
    );
}

fn dynamic_api(
    client: &Client,
    ns: &str,
    group: &str,
    version: &str,
    kind: &str,
    plural: &str,
) -> Api<DynamicObject> {
    let resource =
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural);
    Api::namespaced_with(client.clone(), ns, &resource)
}

// --- tests ----------------------------------------------------------------------------------

#[tokio::test]
async fn pvc_mode_creates_every_child_and_becomes_ready() {
    let env = Env::shared().await;
    let ns = env.namespace("pvc").await;
    env.volume_for(&ns, "tas-pvc").await;
    env.create(&ns, "tas", pvc_spec()).await;
    let started = Instant::now();
    let ready = env.wait_ready(&ns, "tas").await;
    eprintln!("PVC mode Ready after {:?}", started.elapsed());

    // Status.
    let status = ready.status.as_ref().expect("status");
    assert_eq!(status.phase.as_deref(), Some("Ready"));
    assert_eq!(status.ready.as_deref(), Some("True"));
    assert_eq!(status.observed_generation, ready.metadata.generation);
    assert_eq!(status.image.as_deref(), Some(DEFAULT_IMAGE));
    let route = condition(&ready, "RouteAvailable").expect("RouteAvailable");
    assert_eq!(
        (route.status.as_str(), route.reason.as_deref()),
        ("False", Some("RouteNotSupported"))
    );
    let pvc = condition(&ready, "PVCAvailable").expect("PVCAvailable");
    assert_eq!(
        (pvc.status.as_str(), pvc.reason.as_deref()),
        ("True", Some("PVCFound"))
    );
    assert!(condition(&ready, "DBAvailable").is_none());
    assert_eq!(
        ready.metadata.finalizers,
        Some(vec!["trustyai.opendatahub.io/finalizer".to_owned()])
    );

    // Deployment: names, labels, owner, env, images, no version in the selector.
    let deployment = env
        .api::<Deployment>(&ns)
        .get("tas")
        .await
        .expect("Deployment tas");
    assert_owned_by(&deployment.metadata, &ready, "the Deployment");
    let labels = deployment.labels();
    assert_eq!(
        labels.get("app.kubernetes.io/part-of").map(String::as_str),
        Some("trustyai")
    );
    assert_eq!(labels.get("app").map(String::as_str), Some("tas"));
    assert!(labels.contains_key("app.kubernetes.io/version"));
    let spec = &deployment.spec;
    assert_eq!(spec.replicas, Some(1));
    let selector = spec.selector.match_labels.as_ref().expect("selector");
    assert_eq!(
        selector
            .get("app.kubernetes.io/instance")
            .map(String::as_str),
        Some("tas")
    );
    assert!(!selector.contains_key("app.kubernetes.io/version"));
    assert_eq!(
        env_value(&deployment, "SERVICE_STORAGE_FORMAT").as_deref(),
        Some("PVC")
    );
    assert_eq!(
        env_value(&deployment, "SERVICE_METRICS_SCHEDULE").as_deref(),
        Some("5s")
    );
    assert_eq!(
        env_value(&deployment, "STORAGE_DATA_FOLDER").as_deref(),
        Some("/inputs")
    );
    assert_eq!(
        service_container(&deployment).image.as_deref(),
        Some(DEFAULT_IMAGE)
    );
    let pod = spec.template.spec.as_ref().expect("pod");
    assert_eq!(pod.service_account_name.as_deref(), Some("tas-proxy"));
    assert!(pod.volumes.iter().flatten().any(|v| {
        v.persistent_volume_claim
            .as_ref()
            .is_some_and(|c| c.claim_name == "tas-pvc")
    }));

    // The other children.
    for name in ["tas", "tas-tls"] {
        let svc = env.api::<Service>(&ns).get(name).await.expect("Service");
        assert_owned_by(&svc.metadata, &ready, name);
    }
    let sa = env
        .api::<ServiceAccount>(&ns)
        .get("tas-proxy")
        .await
        .expect("ServiceAccount");
    assert_owned_by(&sa.metadata, &ready, "the ServiceAccount");
    let cm = env
        .api::<ConfigMap>(&ns)
        .get("tas-kube-rbac-proxy-config")
        .await
        .expect("ConfigMap");
    assert_owned_by(&cm.metadata, &ready, "the ConfigMap");
    assert!(cm.data.expect("data")["config.yaml"].contains("resourceName: \"tas\""));
    let claim = env
        .api::<PersistentVolumeClaim>(&ns)
        .get("tas-pvc")
        .await
        .expect("PVC");
    assert!(
        claim.metadata.owner_references.is_none(),
        "retained: no owner"
    );
    assert_eq!(
        claim
            .labels()
            .get("app.kubernetes.io/instance")
            .map(String::as_str),
        Some("tas")
    );
    let binding = Api::<ClusterRoleBinding>::all(env.client.clone())
        .get(&format!("tas-{ns}-proxy-rolebinding"))
        .await
        .expect("ClusterRoleBinding");
    assert_eq!(
        binding.role_ref.name,
        "trustyai-service-operator-proxy-role"
    );
    assert_eq!(
        binding.subjects.expect("subjects")[0].namespace.as_deref(),
        Some(ns.as_str())
    );
    // No service-ca on this cluster: the operator issues the serving certificates.
    for name in ["tas-tls", "tas-internal"] {
        let secret = env
            .api::<Secret>(&ns)
            .get(name)
            .await
            .expect("serving Secret");
        assert_eq!(secret.type_.as_deref(), Some("kubernetes.io/tls"));
        assert_owned_by(&secret.metadata, &ready, name);
        let data = secret.data.expect("data");
        assert!(
            ["tls.crt", "tls.key", "ca.crt"]
                .iter()
                .all(|k| data.contains_key(*k))
        );
    }
    // One event for the reconcile that created them, named after the claim (the Go
    // operator's reason) and naming every child it created.
    let created = env.wait_event(&ns, "tas", "PVCCreated").await;
    assert_eq!(created[0].type_.as_deref(), Some("Normal"));
    let note = created[0].note.as_deref().unwrap_or_default();
    for child in [
        "PVC tas-pvc",
        "Deployment tas",
        "Service tas-tls",
        "Service tas,",
        "ServiceAccount tas-proxy",
    ] {
        assert!(note.contains(child), "{child} not in {note:?}");
    }
    // Binding the claim (the binder writes its volume name and status) is not a change of ours:
    // no second write of the claim.
    let events = env
        .api::<Event>(&ns)
        .list(&ListParams::default())
        .await
        .expect("events");
    let claim_updates: Vec<_> = events
        .items
        .iter()
        .filter_map(|e| e.note.as_deref())
        .filter(|note| note.contains("Updated: ") && note.contains("PVC tas-pvc"))
        .collect();
    assert!(claim_updates.is_empty(), "{claim_updates:?}");
}

#[tokio::test]
async fn database_mode_reports_bad_credentials_and_recovers() {
    let env = Env::shared().await;
    let ns = env.namespace("db").await;
    env.create(
        &ns,
        "tas",
        json!({"storage": {"format": "DATABASE", "databaseConfigurations": "db-creds"},
               "metrics": {"schedule": "5s"}}),
    )
    .await;

    let missing = env
        .wait_condition(
            &ns,
            "tas",
            "DBAvailable",
            "False",
            Some("DBCredentialsNotFound"),
        )
        .await;
    assert_eq!(
        missing.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Not Ready")
    );
    let warnings = env.wait_event(&ns, "tas", "DBCredentialsNotFound").await;
    assert_eq!(warnings[0].type_.as_deref(), Some("Warning"));
    assert!(
        warnings[0]
            .note
            .as_deref()
            .unwrap_or_default()
            .contains("db-creds")
    );
    // The Deployment is applied regardless, reading the named Secret; no PVC in this mode.
    let deployment = env.wait_exists(&env.api::<Deployment>(&ns), "tas").await;
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
    assert!(
        env.api::<PersistentVolumeClaim>(&ns)
            .get_opt("tas-pvc")
            .await
            .expect("read")
            .is_none()
    );

    // A Secret missing a key: DBCredentialsError and a warning naming the key.
    let mut data: BTreeMap<String, String> = [
        ("databaseKind", "mariadb"),
        ("databaseUsername", "user"),
        ("databaseService", "db"),
        ("databasePort", "3306"),
        ("databaseName", "trustyai"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    let secret = |data: &BTreeMap<String, String>| -> Secret {
        serde_json::from_value(json!({"metadata": {"name": "db-creds"}, "stringData": data}))
            .expect("a Secret")
    };
    env.api::<Secret>(&ns)
        .create(&PostParams::default(), &secret(&data))
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
    let warnings = env.wait_event(&ns, "tas", "DBCredentialsError").await;
    assert!(
        warnings[0]
            .note
            .as_deref()
            .unwrap_or_default()
            .contains("databasePassword"),
        "{:?}",
        warnings[0].note
    );

    // The complete Secret: the service becomes ready.
    data.insert("databasePassword".into(), "secret".into());
    env.api::<Secret>(&ns)
        .replace("db-creds", &PostParams::default(), &secret(&data))
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

    // The service crash-loops, as it does when it cannot reach its database: the credentials
    // are valid, so the status blames the connection, and Ready names the failing pods. When
    // the pod recovers, so does the status.
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

#[tokio::test]
async fn migration_mode_keeps_the_pvc_and_adds_the_database() {
    let env = Env::shared().await;
    let ns = env.namespace("migration").await;
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": "tas-db-credentials"},
        "stringData": {"databaseKind": "mariadb", "databaseUsername": "user", "databasePassword": "secret",
                       "databaseService": "db", "databasePort": "3306", "databaseName": "trustyai"}
    }))
    .expect("a Secret");
    env.api::<Secret>(&ns)
        .create(&PostParams::default(), &secret)
        .await
        .expect("creating the Secret");
    env.volume_for(&ns, "tas-pvc").await;
    let volume = format!("{ns}-tas-pvc");
    // Migration mode: DATABASE with storage.folder and data.filename (the Go operator's rule),
    // from the files on a named volume.
    env.create(
        &ns,
        "tas",
        json!({"storage": {"format": "DATABASE", "folder": "/inputs", "size": "1Gi", "pv": volume},
               "data": {"filename": "data.csv", "format": "CSV"},
               "metrics": {"schedule": "5s"}}),
    )
    .await;
    let ready = env.wait_ready(&ns, "tas").await;
    for type_ in ["PVCAvailable", "DBAvailable"] {
        let c = condition(&ready, type_).unwrap_or_else(|| panic!("{type_} missing"));
        assert_eq!(c.status, "True", "{type_}");
    }
    assert!(
        env.api::<PersistentVolumeClaim>(&ns)
            .get_opt("tas-pvc")
            .await
            .expect("read")
            .is_some(),
        "the PVC is kept in migration mode"
    );
    let deployment = env
        .api::<Deployment>(&ns)
        .get("tas")
        .await
        .expect("Deployment");
    assert_eq!(
        env_value(&deployment, "STORAGE_MIGRATION_CONFIG_FROM_FOLDER").as_deref(),
        Some("/inputs")
    );
    assert_eq!(
        env_value(&deployment, "STORAGE_MIGRATION_CONFIG_FROM_FILENAME").as_deref(),
        Some("data.csv")
    );
    assert_eq!(
        env_value(&deployment, "QUARKUS_HIBERNATE_ORM_ACTIVE").as_deref(),
        Some("true")
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

    // The Go operator's migration trigger: consumed (removed) once the Deployment runs the
    // current spec, as scripts written for the Go operator wait for.
    let services = env.api::<TrustyAIService>(&ns);
    services
        .patch(
            "tas",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"metadata": {"annotations": {"trustyai.opendatahub.io/db-migration": "true"}}}),
            ),
        )
        .await
        .expect("annotating for migration");
    env.wait("the migration annotation removed", || async {
        let tas = services.get("tas").await.ok()?;
        (!tas
            .annotations()
            .contains_key("trustyai.opendatahub.io/db-migration"))
        .then_some(())
    })
    .await;
    env.wait_event(&ns, "tas", "MigrationAnnotationRemoved")
        .await;

    // The end of the migration: without data.filename the storage is the database alone, and
    // the volume's name goes with it. The claim, still bound to the volume, is kept (it holds
    // the files the migration read); the service no longer mounts it.
    services
        .patch(
            "tas",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"storage": {"pv": null}, "data": {"filename": null}}})),
        )
        .await
        .expect("ending the migration");
    let ended = env
        .wait("the Deployment without the migration", || async {
            let deployment = env.api::<Deployment>(&ns).get("tas").await.ok()?;
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
    let claim = env
        .api::<PersistentVolumeClaim>(&ns)
        .get("tas-pvc")
        .await
        .expect("the PVC is kept after the migration");
    assert_eq!(
        claim.spec.and_then(|s| s.volume_name).as_deref(),
        Some(volume.as_str())
    );
}

#[tokio::test]
async fn drift_is_corrected() {
    let env = Env::shared().await;
    let ns = env.namespace("drift").await;
    env.volume_for(&ns, "tas-pvc").await;
    env.create(&ns, "tas", pvc_spec()).await;
    env.wait_ready(&ns, "tas").await;

    let services = env.api::<Service>(&ns);
    let old = services.get("tas").await.expect("Service").uid();
    services
        .delete("tas", &DeleteParams::default())
        .await
        .expect("deleting the Service");
    let started = Instant::now();
    env.wait("the Service to come back", || async {
        let svc = services.get_opt("tas").await.ok()??;
        (svc.uid() != old).then_some(())
    })
    .await;
    eprintln!("deleted Service re-created after {:?}", started.elapsed());

    let deployments = env.api::<Deployment>(&ns);
    deployments
        .patch(
            "tas",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 3}})),
        )
        .await
        .expect("scaling the Deployment");
    let started = Instant::now();
    env.wait("replicas back to 1", || async {
        let d = deployments.get("tas").await.ok()?;
        (d.spec.replicas == Some(1)).then_some(())
    })
    .await;
    eprintln!("scaled Deployment restored after {:?}", started.elapsed());

    // The kube-rbac-proxy configuration is restored too.
    let config_maps = env.api::<ConfigMap>(&ns);
    config_maps
        .patch(
            "tas-kube-rbac-proxy-config",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"config.yaml": "tampered"}})),
        )
        .await
        .expect("editing the ConfigMap");
    env.wait("the ConfigMap restored", || async {
        let cm = config_maps.get("tas-kube-rbac-proxy-config").await.ok()?;
        cm.data?
            .get("config.yaml")?
            .contains("resourceName")
            .then_some(())
    })
    .await;

    // A metadata-only change (no new generation) is corrected too: the operator skips applies
    // it knows to be no-ops, and this one is not.
    restores_tampered_version_label(&env, &env.api::<ServiceAccount>(&ns), "tas-proxy").await;
    // The same on the Deployment, whose applies are skipped across status updates (by
    // generation) but not across metadata changes.
    restores_tampered_version_label(&env, &deployments, "tas").await;

    // Operand serving certificates: a deleted one is issued again, and so is one whose
    // content was replaced (the operator remembers a good certificate only for the
    // resourceVersion it checked).
    let secrets = env.api::<Secret>(&ns);
    let old = secrets.get("tas-tls").await.expect("serving Secret").uid();
    secrets
        .delete("tas-tls", &DeleteParams::default())
        .await
        .expect("deleting the serving Secret");
    env.wait("the serving Secret issued again", || async {
        let secret = secrets.get_opt("tas-tls").await.ok()??;
        (secret.uid() != old && secret.data?.contains_key("tls.crt")).then_some(())
    })
    .await;
    secrets
        .patch(
            "tas-internal",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"tls.crt": "dGFtcGVyZWQ="}})),
        )
        .await
        .expect("tampering with the internal serving Secret");
    env.wait("the internal serving Secret issued again", || async {
        let secret = secrets.get("tas-internal").await.ok()?;
        let crt = secret.data?.get("tls.crt")?.0.clone();
        String::from_utf8(crt)
            .ok()?
            .contains("BEGIN CERTIFICATE")
            .then_some(())
    })
    .await;
}

/// Sets the `app.kubernetes.io/version` label of `name` to `tampered` and waits for the
/// operator to restore it.
async fn restores_tampered_version_label<K>(env: &Env, api: &Api<K>, name: &str)
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned,
{
    api.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"app.kubernetes.io/version": "tampered"}}})),
    )
    .await
    .expect("editing the labels");
    env.wait(&format!("the labels of {name} restored"), || async {
        let object = api.get(name).await.ok()?;
        (object
            .labels()
            .get("app.kubernetes.io/version")
            .map(String::as_str)
            != Some("tampered"))
        .then_some(())
    })
    .await;
}

/// The custom CA bundle ConfigMap is mounted into the proxy when it appears labelled for
/// injection, and unmounted when it goes: the operator learns both from its watch (its cache
/// answers the reconcile), not from polling.
#[tokio::test]
async fn custom_ca_bundle_is_mounted_when_it_appears_and_unmounted_when_it_goes() {
    let env = Env::shared().await;
    let ns = env.namespace("cabundle").await;
    env.volume_for(&ns, "tas-pvc").await;
    env.create(&ns, "tas", pvc_spec()).await;
    env.wait_ready(&ns, "tas").await;

    let deployments = env.api::<Deployment>(&ns);
    let has_bundle = |d: &Deployment| {
        d.spec
            .template
            .spec
            .as_ref()
            .and_then(|p| p.volumes.as_ref())
            .is_some_and(|v| v.iter().any(|v| v.name == "odh-trusted-ca-bundle"))
    };
    let before = deployments.get("tas").await.expect("Deployment");
    assert!(
        !has_bundle(&before),
        "no bundle volume before the ConfigMap exists"
    );

    let config_maps = env.api::<ConfigMap>(&ns);
    let bundle: ConfigMap = serde_json::from_value(json!({
        "metadata": {
            "name": "odh-trusted-ca-bundle",
            "labels": {"config.openshift.io/inject-trusted-cabundle": "true"}
        },
        "data": {"ca-bundle.crt": ""}
    }))
    .expect("ConfigMap");
    config_maps
        .create(&PostParams::default(), &bundle)
        .await
        .expect("creating the CA bundle ConfigMap");
    env.wait("the bundle volume in the Deployment", || async {
        let d = deployments.get("tas").await.ok()?;
        has_bundle(&d).then_some(())
    })
    .await;

    config_maps
        .delete("odh-trusted-ca-bundle", &DeleteParams::default())
        .await
        .expect("deleting the CA bundle ConfigMap");
    env.wait("the bundle volume gone from the Deployment", || async {
        let d = deployments.get("tas").await.ok()?;
        (!has_bundle(&d)).then_some(())
    })
    .await;
}

#[tokio::test]
async fn retained_pvc_survives_deletion_and_is_adopted_while_delete_removes_it() {
    let env = Env::shared().await;
    let ns = env.namespace("retain").await;
    env.volume_for(&ns, "kept-pvc").await;
    env.create(&ns, "kept", pvc_spec()).await;
    env.wait_ready(&ns, "kept").await;
    let claims = env.api::<PersistentVolumeClaim>(&ns);
    let claim_uid = claims.get("kept-pvc").await.expect("PVC").uid();
    let bindings = Api::<ClusterRoleBinding>::all(env.client.clone());
    let binding = format!("kept-{ns}-proxy-rolebinding");
    assert!(bindings.get_opt(&binding).await.expect("read").is_some());

    env.delete_service(&ns, "kept").await;
    env.wait_event(&ns, "kept", "PVCRetained").await;
    assert!(
        bindings.get_opt(&binding).await.expect("read").is_none(),
        "the binding is deleted"
    );
    // The garbage collector removes the owned children; the claim stays.
    env.wait("the Deployment garbage-collected", || async {
        env.api::<Deployment>(&ns)
            .get_opt("kept")
            .await
            .ok()?
            .is_none()
            .then_some(())
    })
    .await;
    let claim = claims.get("kept-pvc").await.expect("the retained PVC");
    assert_eq!(claim.uid(), claim_uid);
    assert!(claim.metadata.deletion_timestamp.is_none());

    env.create(&ns, "kept", pvc_spec()).await;
    let adopted = env.wait_ready(&ns, "kept").await;
    assert_eq!(
        claims.get("kept-pvc").await.expect("PVC").uid(),
        claim_uid,
        "adopted, not re-created"
    );
    assert!(condition(&adopted, "PVCAvailable").is_some_and(|c| c.status == "True"));

    // retention: Delete: the claim is owned, and goes with the TrustyAIService.
    env.volume_for(&ns, "gone-pvc").await;
    let mut spec = pvc_spec();
    spec["storage"]["retention"] = json!("Delete");
    env.create(&ns, "gone", spec).await;
    let gone = env.wait_ready(&ns, "gone").await;
    let claim = claims.get("gone-pvc").await.expect("PVC");
    assert_owned_by(&claim.metadata, &gone, "the PVC with retention Delete");
    env.delete_service(&ns, "gone").await;
    env.wait("the PVC with retention Delete deleted", || async {
        claims
            .get_opt("gone-pvc")
            .await
            .ok()?
            .is_none()
            .then_some(())
    })
    .await;
    assert!(env.events(&ns, "gone", "PVCRetained").await.is_empty());
    env.wait_event(&ns, "gone", "PVCDeleted").await;
}

#[tokio::test]
async fn retention_delete_set_right_before_deletion_is_honoured() {
    let env = Env::shared().await;
    let ns = env.namespace("late-delete").await;
    env.volume_for(&ns, "late-pvc").await;
    env.create(&ns, "late", pvc_spec()).await;
    env.wait_ready(&ns, "late").await;
    let claims = env.api::<PersistentVolumeClaim>(&ns);
    // Retained so far: no owner reference for the garbage collector to follow.
    let claim = claims.get("late-pvc").await.expect("PVC");
    assert!(
        claim
            .metadata
            .owner_references
            .unwrap_or_default()
            .is_empty()
    );

    // The change and the deletion back to back: whether a reconcile runs in between or not,
    // the deletion does what the spec says when it is deleted.
    env.api::<TrustyAIService>(&ns)
        .patch(
            "late",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"storage": {"retention": "Delete"}}})),
        )
        .await
        .expect("setting retention: Delete");
    env.delete_service(&ns, "late").await;
    env.wait("the claim deleted", || async {
        claims
            .get_opt("late-pvc")
            .await
            .ok()?
            .is_none()
            .then_some(())
    })
    .await;
    let deleted = env.wait_event(&ns, "late", "PVCDeleted").await;
    assert!(
        deleted[0]
            .note
            .as_deref()
            .unwrap_or_default()
            .contains("late-pvc")
    );
    assert!(env.events(&ns, "late", "PVCRetained").await.is_empty());
}

#[tokio::test]
async fn a_cleanup_that_keeps_failing_holds_the_deletion_until_its_deadline() {
    let env = Env::shared().await;
    let ns = env.namespace("stuck").await;
    env.volume_for(&ns, "stuck-pvc").await;
    env.create(&ns, "stuck", pvc_spec()).await;
    env.wait_ready(&ns, "stuck").await;
    let binding = format!("stuck-{ns}-proxy-rolebinding");
    let bindings = Api::<ClusterRoleBinding>::all(env.client.clone());
    bindings
        .get(&binding)
        .await
        .expect("the ClusterRoleBinding");

    // An admission policy refuses to delete the binding, so the finalizer's cleanup fails.
    let policy = format!("keep-{ns}");
    let (ok, out, err) = env.cp.kubectl(
        &["apply", "-f", "-"],
        Some(
            &json!({"apiVersion": "v1", "kind": "List", "items": [
                {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
                 "metadata": {"name": policy},
                 "spec": {"failurePolicy": "Fail",
                          "matchConstraints": {"resourceRules": [{"apiGroups": ["rbac.authorization.k8s.io"], "apiVersions": ["v1"],
                                                                  "operations": ["DELETE"], "resources": ["clusterrolebindings"]}]},
                          "validations": [{"expression": format!("oldObject.metadata.name != '{binding}'"),
                                           "message": "held by the cleanup test"}]}},
                {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
                 "metadata": {"name": policy},
                 "spec": {"policyName": policy, "validationActions": ["Deny"]}}
            ]})
            .to_string(),
        ),
    );
    assert!(ok, "the admission policy: {out}{err}");
    let dry_run = DeleteParams {
        dry_run: true,
        ..DeleteParams::default()
    };
    env.wait("the policy to refuse deleting the binding", || async {
        matches!(bindings.delete(&binding, &dry_run).await, Err(kube::Error::Api(s)) if s.message.contains("held by the cleanup test"))
            .then_some(())
    })
    .await;

    let requested = Instant::now();
    env.services(&ns)
        .delete("stuck", &DeleteParams::default())
        .await
        .expect("deleting the TrustyAIService");
    let failed = env.wait_event(&ns, "stuck", "CleanupFailed").await;
    assert!(
        failed[0]
            .note
            .as_deref()
            .is_some_and(|n| n.contains("held by the cleanup test")),
        "{failed:?}"
    );
    assert!(
        env.services(&ns)
            .get_opt("stuck")
            .await
            .expect("read")
            .is_some(),
        "the finalizer holds the deletion while the cleanup fails"
    );
    env.wait("the TrustyAIService gone", || async {
        env.services(&ns)
            .get_opt("stuck")
            .await
            .ok()?
            .is_none()
            .then_some(())
    })
    .await;
    let took = requested.elapsed();
    eprintln!("deletion released {took:?} after the request (cleanup timeout {CLEANUP_TIMEOUT})");
    // The deadline counts from deletionTimestamp, which is truncated to the second.
    assert!(
        took >= Duration::from_secs(14),
        "released before its deadline: {took:?}"
    );
    let abandoned = env.wait_event(&ns, "stuck", "CleanupAbandoned").await;
    assert_eq!(abandoned[0].type_.as_deref(), Some("Warning"));
    // What could not be cleaned up is left, and said so: the binding still exists.
    bindings
        .get(&binding)
        .await
        .expect("the binding the cleanup could not delete");

    for kind in [
        "validatingadmissionpolicybinding",
        "validatingadmissionpolicy",
    ] {
        let (ok, out, err) = env.cp.kubectl(&["delete", kind, &policy], None);
        assert!(ok, "removing the {kind}: {out}{err}");
    }
    env.wait("the leftover binding deleted", || async {
        match bindings.delete(&binding, &DeleteParams::default()).await {
            Ok(_) => Some(()),
            Err(kube::Error::Api(s)) if s.code == 404 => Some(()),
            Err(_) => None,
        }
    })
    .await;
}

/// The requested size of the claim `name`.
async fn claim_size(env: &Env, ns: &str, name: &str) -> Option<String> {
    env.api::<PersistentVolumeClaim>(ns)
        .get(name)
        .await
        .ok()?
        .spec?
        .resources?
        .requests?
        .get("storage")
        .map(|q| q.0.clone())
}

#[tokio::test]
async fn a_claim_grows_where_its_class_can_expand_and_a_refused_growth_blocks_nothing() {
    let env = Env::shared().await;
    let ns = env.namespace("grow").await;

    // An adopted claim of a class that can expand, bound to its volume.
    let class = format!("{ns}-expandable");
    let classes = Api::<DynamicObject>::all_with(
        env.client.clone(),
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("storage.k8s.io", "v1", "StorageClass"),
            "storageclasses",
        ),
    );
    classes
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
                "metadata": {"name": class},
                "provisioner": "kubernetes.io/no-provisioner",
                "allowVolumeExpansion": true
            }))
            .expect("a StorageClass"),
        )
        .await
        .expect("creating the StorageClass");
    let volume = format!("{ns}-wide-pvc");
    Api::<PersistentVolume>::all(env.client.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "metadata": {"name": volume},
                "spec": {
                    "capacity": {"storage": "5Gi"},
                    "accessModes": ["ReadWriteOnce"],
                    "persistentVolumeReclaimPolicy": "Retain",
                    "storageClassName": class,
                    "hostPath": {"path": format!("/tmp/{volume}")},
                    "claimRef": {"namespace": ns, "name": "wide-pvc"}
                }
            }))
            .expect("a PV"),
        )
        .await
        .expect("creating the PV");
    let claims = env.api::<PersistentVolumeClaim>(&ns);
    claims
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "metadata": {"name": "wide-pvc"},
                "spec": {
                    "accessModes": ["ReadWriteOnce"],
                    "storageClassName": class,
                    "volumeName": volume,
                    "resources": {"requests": {"storage": "1Gi"}}
                }
            }))
            .expect("a PVC"),
        )
        .await
        .expect("creating the PVC");
    env.create(&ns, "wide", pvc_spec()).await;
    env.wait_ready(&ns, "wide").await;
    let services = env.services(&ns);
    services
        .patch(
            "wide",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"storage": {"size": "2Gi"}}})),
        )
        .await
        .expect("growing");
    env.wait("the expandable claim asks for 2Gi", || async {
        (claim_size(&env, &ns, "wide-pvc").await.as_deref() == Some("2Gi")).then_some(())
    })
    .await;

    // A claim bound to a volume of no class: the API server refuses to grow it. The claim keeps
    // its size, the refusal is reported, and the rest of the spec still reaches the Deployment.
    env.volume_for(&ns, "fixed-pvc").await;
    env.create(&ns, "fixed", pvc_spec()).await;
    env.wait_ready(&ns, "fixed").await;
    services
        .patch(
            "fixed",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"spec": {"storage": {"size": "2Gi"}, "metrics": {"schedule": "10s"}}}),
            ),
        )
        .await
        .expect("growing and changing the schedule");
    env.wait("the new schedule in the Deployment", || async {
        let deployment = env.api::<Deployment>(&ns).get("fixed").await.ok()?;
        (env_value(&deployment, "SERVICE_METRICS_SCHEDULE").as_deref() == Some("10s")).then_some(())
    })
    .await;
    // Ready again once the new schedule has rolled out: the claim still serves.
    let reported = env
        .wait("Ready, with the refused growth in the status", || async {
            let tas = services.get("fixed").await.ok()?;
            let pvc = condition(&tas, "PVCAvailable")?;
            (tas.status.as_ref()?.observed_generation == tas.metadata.generation
                && pvc.message.contains("2Gi")
                && condition(&tas, "Ready")?.status == "True")
                .then_some(tas)
        })
        .await;
    let pvc = condition(&reported, "PVCAvailable").expect("PVCAvailable");
    eprintln!("refused growth: {}", pvc.message);
    assert_eq!(pvc.status, "True", "the claim is still bound and in use");
    assert!(
        pvc.message.contains("could not grow from 1Gi to 2Gi"),
        "{}",
        pvc.message
    );
    let events = env.wait_event(&ns, "fixed", "PVCGrowthRefused").await;
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(
        claim_size(&env, &ns, "fixed-pvc").await.as_deref(),
        Some("1Gi")
    );
    let _ = classes.delete(&class, &DeleteParams::default()).await;
}

/// A claim no volume binds: `PVCAvailable` says `PVCPending` (not "not found"), a `PVCPending`
/// Warning names the claim once it has waited for `--pvc-pending-grace`, and the condition
/// turns `True` when a volume binds it.
#[tokio::test]
async fn a_claim_that_stays_pending_is_reported() {
    let env = Env::shared().await;
    let ns = env.namespace("pending").await;
    env.create(&ns, "waits", pvc_spec()).await;
    let service = env
        .wait_condition(&ns, "waits", "PVCAvailable", "False", Some("PVCPending"))
        .await;
    let pvc = condition(&service, "PVCAvailable").expect("PVCAvailable");
    assert!(pvc.message.contains("not bound"), "{}", pvc.message);
    let events = env.wait_event(&ns, "waits", "PVCPending").await;
    assert_eq!(events[0].type_.as_deref(), Some("Warning"), "{events:?}");
    let note = events[0].note.clone().unwrap_or_default();
    assert!(note.contains("waits-pvc"), "{note}");
    env.volume_for(&ns, "waits-pvc").await;
    env.wait_condition(&ns, "waits", "PVCAvailable", "True", Some("PVCFound"))
        .await;
}

#[tokio::test]
async fn instances_do_not_interfere() {
    let env = Env::shared().await;
    let (one, two) = (
        env.namespace("multi-a").await,
        env.namespace("multi-b").await,
    );
    for (ns, name) in [(&one, "alpha"), (&one, "beta"), (&two, "alpha")] {
        env.volume_for(ns, &format!("{name}-pvc")).await;
        env.create(ns, name, pvc_spec()).await;
    }
    for (ns, name) in [(&one, "alpha"), (&one, "beta"), (&two, "alpha")] {
        env.wait_ready(ns, name).await;
        let d = env
            .api::<Deployment>(ns)
            .get(name)
            .await
            .expect("Deployment");
        let selector = d.spec.selector.match_labels.expect("labels");
        assert_eq!(
            selector.get("app.kubernetes.io/instance"),
            Some(&name.to_owned())
        );
    }
    let bindings = Api::<ClusterRoleBinding>::all(env.client.clone());
    let version = |ns: &str, name: &str| {
        let api = env.api::<Deployment>(ns);
        let name = name.to_owned();
        async move { operator_written_of(&api, &name).await }
    };
    let (beta_before, alpha_two_before) = env
        .settled("the neighbours' Deployments", || async {
            (version(&one, "beta").await, version(&two, "alpha").await)
        })
        .await;

    env.delete_service(&one, "alpha").await;
    env.wait("alpha's Deployment in the first namespace gone", || async {
        env.api::<Deployment>(&one)
            .get_opt("alpha")
            .await
            .ok()?
            .is_none()
            .then_some(())
    })
    .await;
    assert!(
        bindings
            .get_opt(&format!("alpha-{one}-proxy-rolebinding"))
            .await
            .expect("read")
            .is_none()
    );
    assert!(
        bindings
            .get_opt(&format!("beta-{one}-proxy-rolebinding"))
            .await
            .expect("read")
            .is_some()
    );
    assert!(
        bindings
            .get_opt(&format!("alpha-{two}-proxy-rolebinding"))
            .await
            .expect("read")
            .is_some()
    );
    env.wait_ready(&one, "beta").await;
    env.wait_ready(&two, "alpha").await;
    assert_eq!(
        version(&one, "beta").await,
        beta_before,
        "the neighbour is untouched"
    );
    assert_eq!(
        version(&two, "alpha").await,
        alpha_two_before,
        "the namesake elsewhere is untouched"
    );
}

#[tokio::test]
async fn an_image_change_in_the_operator_config_map_rolls_the_deployment() {
    let env = Env::exclusive().await;
    let ns = env.namespace("image").await;
    env.volume_for(&ns, "tas-pvc").await;
    env.create(&ns, "tas", pvc_spec()).await;
    env.wait_ready(&ns, "tas").await;

    let config_maps = env.api::<ConfigMap>(&env.operator_ns);
    let image = "quay.io/trustyai/trustyai-service:rolled";
    let config: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": OPERATOR_CONFIG},
        "data": {"trustyaiServiceImage": image}
    }))
    .expect("a ConfigMap");
    config_maps
        .create(&PostParams::default(), &config)
        .await
        .expect("creating the operator ConfigMap");
    let started = Instant::now();
    env.wait("the Deployment to roll to the configured image", || async {
        let d = env.api::<Deployment>(&ns).get("tas").await.ok()?;
        (service_container(&d).image.as_deref() == Some(image)).then_some(())
    })
    .await;
    eprintln!(
        "image rolled out {:?} after the ConfigMap change",
        started.elapsed()
    );
    env.wait("status.image to follow", || async {
        let s = env.services(&ns).get("tas").await.ok()?;
        (s.status?.image.as_deref() == Some(image)).then_some(())
    })
    .await;

    // A spec.image under an allowed prefix wins over the configured image, until the
    // ConfigMap's allowedImagePrefixes stop allowing it: then the configured image runs, and a
    // warning says why (the admission webhook judged it by the prefixes of its time).
    let image_of = |name: &'static str| {
        let api = env.api::<Deployment>(&ns);
        async move {
            let d = api.get(name).await.ok()?;
            service_container(&d).image.clone()
        }
    };
    let custom = "quay.io/trustyai/trustyai-service:custom";
    env.volume_for(&ns, "own-pvc").await;
    let mut spec = pvc_spec();
    spec["image"] = json!(custom);
    env.create(&ns, "own", spec).await;
    env.wait("the Deployment to run spec.image", || async {
        (image_of("own").await.as_deref() == Some(custom)).then_some(())
    })
    .await;
    config_maps
        .patch(
            OPERATOR_CONFIG,
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"allowedImagePrefixes": "registry.example.com/"}})),
        )
        .await
        .expect("narrowing the allowed prefixes");
    env.wait(
        "the configured image instead of a spec.image no longer allowed",
        || async { (image_of("own").await.as_deref() == Some(image)).then_some(()) },
    )
    .await;
    let warned = env.wait_event(&ns, "own", "ImageNotAllowed").await;
    assert!(
        warned
            .iter()
            .all(|e| e.note.as_deref().is_some_and(|n| n.contains(custom))),
        "{warned:?}"
    );

    config_maps
        .delete(OPERATOR_CONFIG, &DeleteParams::default())
        .await
        .expect("deleting the operator ConfigMap");
    env.wait("the default image back", || async {
        (image_of("tas").await.as_deref() == Some(DEFAULT_IMAGE)).then_some(())
    })
    .await;
    env.wait(
        "spec.image allowed again by the default prefixes",
        || async { (image_of("own").await.as_deref() == Some(custom)).then_some(()) },
    )
    .await;
}

/// What the operator writes of a child: all of it but its resourceVersion and its status
/// (with the status' managedFields entries), which the control plane writes on its own
/// schedule (the Deployment's rollout, the claim's binding). Any write of the operator (a
/// server-side apply of a changed rendering) shows here, in the content or in the time of its
/// managedFields entry.
fn operator_written<K: serde::Serialize>(object: &K) -> Value {
    let mut value = serde_json::to_value(object).expect("a JSON object");
    let fields = value.as_object_mut().expect("a JSON object");
    fields.remove("status");
    let meta = fields
        .get_mut("metadata")
        .and_then(Value::as_object_mut)
        .expect("metadata");
    meta.remove("resourceVersion");
    if let Some(entries) = meta.get_mut("managedFields").and_then(Value::as_array_mut) {
        entries.retain(|entry| entry["subresource"] != "status");
    }
    value
}

/// [`operator_written`] of `name`.
async fn operator_written_of<K>(api: &Api<K>, name: &str) -> Value
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::Serialize + serde::de::DeserializeOwned,
{
    let object = api
        .get(name)
        .await
        .unwrap_or_else(|e| panic!("reading {name}: {e}"));
    operator_written(&object)
}

/// Every child of `tas` in `ns` as [`operator_written`], and the TrustyAIService itself by its
/// resourceVersion (the operator is the only writer of its status too), by kind/name.
async fn versions(env: &Env, ns: &str) -> BTreeMap<String, Value> {
    let mut out = BTreeMap::new();
    let tas = env.services(ns).get("tas").await.expect("tas");
    out.insert(
        "TrustyAIService".to_owned(),
        json!(tas.metadata.resource_version.expect("a resourceVersion")),
    );
    out.insert(
        "Deployment".to_owned(),
        operator_written_of(&env.api::<Deployment>(ns), "tas").await,
    );
    for name in ["tas", "tas-tls"] {
        out.insert(
            format!("Service/{name}"),
            operator_written_of(&env.api::<Service>(ns), name).await,
        );
    }
    for name in ["tas-tls", "tas-internal"] {
        out.insert(
            format!("Secret/{name}"),
            operator_written_of(&env.api::<Secret>(ns), name).await,
        );
    }
    out.insert(
        "ServiceAccount".to_owned(),
        operator_written_of(&env.api::<ServiceAccount>(ns), "tas-proxy").await,
    );
    out.insert(
        "ConfigMap".to_owned(),
        operator_written_of(&env.api::<ConfigMap>(ns), "tas-kube-rbac-proxy-config").await,
    );
    out.insert(
        "PVC".to_owned(),
        operator_written_of(&env.api::<PersistentVolumeClaim>(ns), "tas-pvc").await,
    );
    out.insert(
        "ClusterRoleBinding".to_owned(),
        operator_written_of(
            &Api::<ClusterRoleBinding>::all(env.client.clone()),
            &format!("tas-{ns}-proxy-rolebinding"),
        )
        .await,
    );
    out
}

/// Whether the operator log at `log` shows a completed reconcile of `ns/name`.
fn reconciled_in_log(log: &std::path::Path, ns: &str, name: &str) -> bool {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .any(|line| {
            line["message"] == "reconciled"
                && line["kind"] == "TrustyAIService"
                && line["namespace"] == ns
                && line["name"] == name
        })
}

#[tokio::test]
async fn an_operator_restart_changes_no_object() {
    let env = Env::exclusive().await;
    let ns = env.namespace("restart").await;
    env.volume_for(&ns, "tas-pvc").await;
    env.create(&ns, "tas", pvc_spec()).await;
    env.wait_ready(&ns, "tas").await;
    let before = env
        .settled("the objects after the creation", || versions(&env, &ns))
        .await;

    let log = env.restart_operator();
    env.wait(
        "the new operator to reconcile the TrustyAIService",
        || async { reconciled_in_log(&log, &ns, "tas").then_some(()) },
    )
    .await;
    // Settled, so a write that comes some time after the new operator's first reconcile shows
    // too (as a difference, or as objects that never settle).
    let after = env
        .settled("the objects after the restart", || versions(&env, &ns))
        .await;
    assert_eq!(before, after, "no object was written after the restart");
}

/// Installs the fixture CRDs, and removes them again when dropped.
struct OptionalCrds<'a> {
    cp: &'a ControlPlane,
}

const FIXTURES: [&str; 5] = [
    "tests/fixtures/crds/route.yaml",
    "tests/fixtures/crds/servicemonitor.yaml",
    "tests/fixtures/crds/inferenceservice.yaml",
    "tests/fixtures/crds/istio-destinationrule.yaml",
    "tests/fixtures/crds/istio-virtualservice.yaml",
];

impl<'a> OptionalCrds<'a> {
    fn install(cp: &'a ControlPlane) -> Self {
        cp.install_crds(
            &FIXTURES,
            &[
                "routes.route.openshift.io",
                "servicemonitors.monitoring.coreos.com",
                "inferenceservices.serving.kserve.io",
                "destinationrules.networking.istio.io",
                "virtualservices.networking.istio.io",
            ],
        )
        .unwrap_or_else(|e| panic!("{e}"));
        Self { cp }
    }
}

impl Drop for OptionalCrds<'_> {
    fn drop(&mut self) {
        for file in FIXTURES {
            let _ = self.cp.kubectl(
                &["delete", "--ignore-not-found", "--wait=true", "-f", file],
                None,
            );
        }
    }
}

/// The optional APIs the operator logging to `log` last reported (at its start, or as a
/// change since), by field: its JSON log carries one boolean field per API.
fn reported_optional_apis(log: &std::path::Path) -> Option<BTreeMap<String, bool>> {
    let text = std::fs::read_to_string(log).ok()?;
    let last = text
        .lines()
        .rev()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .find(|line| {
            matches!(
                line["message"].as_str(),
                Some("optional APIs discovered" | "optional APIs changed")
            )
        })?;
    [
        "routes",
        "service_monitors",
        "inference_services",
        "destination_rules",
        "virtual_services",
    ]
    .into_iter()
    .map(|field| Some((field.to_owned(), last[field].as_bool()?)))
    .collect()
}

#[tokio::test]
async fn optional_apis_get_their_objects_and_modelmesh_is_wired_and_unwired() {
    let env = Env::exclusive().await;
    let _crds = OptionalCrds::install(env.cp);
    // Established CRDs are not yet known to the operator, which discovers them a moment after
    // each CRD event, possibly one at a time. A TrustyAIService reconciled before it knows
    // Routes gets operator-issued certificates (service-ca is assumed only with Routes).
    let log = env.operator_log();
    env.wait(
        "the operator to discover Routes, ServiceMonitors, InferenceServices and Istio",
        || async {
            let apis = reported_optional_apis(&log)?;
            [
                "routes",
                "service_monitors",
                "inference_services",
                "destination_rules",
                "virtual_services",
            ]
            .iter()
            .all(|api| apis.get(*api) == Some(&true))
            .then_some(())
        },
    )
    .await;
    let ns = env.namespace("optional").await;
    let client = &env.client;

    // A fake ModelMesh Deployment (kwok makes it ready) and two InferenceServices.
    let modelmesh: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "modelmesh-serving-mlserver", "labels": {"modelmesh-service": "modelmesh-serving"}},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "mm"}},
            "template": {
                "metadata": {"labels": {"app": "mm"}},
                "spec": {"containers": [
                    {"name": "mm", "image": "example.com/modelmesh:1",
                     "env": [{"name": "MM_PAYLOAD_PROCESSORS", "value": "http://other/consumer"}]},
                    {"name": "rest-proxy", "image": "example.com/rest-proxy:1"}
                ]}
            }
        }
    }))
    .expect("a Deployment");
    let deployments = env.api::<Deployment>(&ns);
    deployments
        .create(&PostParams::default(), &modelmesh)
        .await
        .expect("the ModelMesh Deployment");
    let isvcs = dynamic_api(
        client,
        &ns,
        "serving.kserve.io",
        "v1beta1",
        "InferenceService",
        "inferenceservices",
    );
    // The raw one runs with the Istio sidecar; the serverless one is wired only once the
    // operator ConfigMap enables KServe serverless.
    for (name, mode, istio) in [
        ("mm-model", "ModelMesh", "false"),
        ("raw-model", "RawDeployment", "true"),
        ("serverless-model", "Serverless", "false"),
    ] {
        let isvc: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
            "metadata": {"name": name, "annotations": {
                "serving.kserve.io/deploymentMode": mode, "sidecar.istio.io/inject": istio
            }},
            "spec": {"predictor": {"model": {"modelFormat": {"name": "sklearn"}}}}
        }))
        .expect("an InferenceService");
        isvcs
            .create(&PostParams::default(), &isvc)
            .await
            .expect("creating an InferenceService");
    }

    env.volume_for(&ns, "tas-pvc").await;
    let created = env.create(&ns, "tas", pvc_spec()).await;
    // A Route exists but no router admits it: not ready, for that reason only.
    let services = env.services(&ns);
    env.wait(
        "RouteAvailable=False (RouteNotFound) and InferenceServicesPresent=True",
        || async {
            let object = services.get_opt("tas").await.ok()??;
            let route = condition(&object, "RouteAvailable")?;
            let present = condition(&object, "InferenceServicesPresent")?;
            (route.status == "False"
                && route.reason.as_deref() == Some("RouteNotFound")
                && present.status == "True")
                .then_some(())
        },
    )
    .await;

    let routes = dynamic_api(client, &ns, "route.openshift.io", "v1", "Route", "routes");
    let route = env.wait_exists(&routes, "tas").await;
    assert_eq!(route.data["spec"]["to"]["name"], "tas-tls");
    assert_owned_by(&route.metadata, &created, "the Route");
    let monitors = |ns: &str| {
        dynamic_api(
            client,
            ns,
            "monitoring.coreos.com",
            "v1",
            "ServiceMonitor",
            "servicemonitors",
        )
    };
    let local = env.wait_exists(&monitors(&ns), "tas").await;
    assert_owned_by(&local.metadata, &created, "the local ServiceMonitor");
    env.wait_exists(&monitors(&env.operator_ns), "trustyai-metrics")
        .await;
    // service-ca is assumed where Routes exist: no operator-issued certificates. The operator
    // knew Routes before the TrustyAIService existed, and a reconcile issues certificates
    // before it applies the Route: once the Route exists, a single read suffices.
    assert!(
        env.api::<Secret>(&ns)
            .get_opt("tas-tls")
            .await
            .expect("read")
            .is_none()
    );

    // Wiring: the payload processor is added next to the existing one; the logger is set.
    let url = format!("https://tas.{ns}.svc/consumer/kserve/v2");
    let wired = env
        .wait("the ModelMesh Deployment wired", || async {
            let d = deployments.get("modelmesh-serving-mlserver").await.ok()?;
            let value = d.spec.template.spec.as_ref()?.containers[0]
                .env
                .as_ref()?
                .iter()
                .find(|e| e.name == "MM_PAYLOAD_PROCESSORS")?
                .value
                .clone()?;
            value.contains(&url).then_some(d)
        })
        .await;
    let pod = wired.spec.template.spec.as_ref().expect("pod");
    assert!(
        pod.volumes
            .iter()
            .flatten()
            .any(|v| v.name == "tas-internal")
    );
    let mm = &pod.containers[0];
    assert!(
        mm.env
            .iter()
            .flatten()
            .any(|e| e.name == "MM_TLS_KEY_CERT_PATH")
    );
    assert!(
        mm.env
            .iter()
            .flatten()
            .any(|e| e.value.as_deref() == Some(&format!("http://other/consumer {url}")))
    );
    let logger = format!("https://tas.{ns}.svc.cluster.local");
    env.wait("the KServe logger set", || async {
        let isvc = isvcs.get("raw-model").await.ok()?;
        (isvc.data["spec"]["predictor"]["logger"]["url"] == logger.as_str()).then_some(())
    })
    .await;
    assert_eq!(
        isvcs.get("mm-model").await.expect("isvc").data["spec"]["predictor"].get("logger"),
        None
    );
    // The sidecar's traffic reaches the internal Service over TLS.
    let rules = dynamic_api(
        client,
        &ns,
        "networking.istio.io",
        "v1beta1",
        "DestinationRule",
        "destinationrules",
    );
    let rule = env.wait_exists(&rules, "tas-internal").await;
    assert_owned_by(&rule.metadata, &created, "the DestinationRule");
    assert_eq!(
        rule.data["spec"]["host"],
        format!("tas.{ns}.svc.cluster.local")
    );
    let redirects = dynamic_api(
        client,
        &ns,
        "networking.istio.io",
        "v1beta1",
        "VirtualService",
        "virtualservices",
    );
    let redirect = env.wait_exists(&redirects, "tas-redirect").await;
    assert_owned_by(&redirect.metadata, &created, "the VirtualService");
    // Serverless: left alone until the operator ConfigMap enables it, then logged over HTTP.
    assert_eq!(
        isvcs.get("serverless-model").await.expect("isvc").data["spec"]["predictor"].get("logger"),
        None
    );
    let config_maps = env.api::<ConfigMap>(&env.operator_ns);
    config_maps
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "metadata": {"name": OPERATOR_CONFIG},
                "data": {"kServeServerless": "enabled"}
            }))
            .expect("a ConfigMap"),
        )
        .await
        .expect("enabling KServe serverless");
    let serverless_logger = format!("http://tas.{ns}.svc.cluster.local");
    env.wait("the serverless logger set", || async {
        let isvc = isvcs.get("serverless-model").await.ok()?;
        (isvc.data["spec"]["predictor"]["logger"]["url"] == serverless_logger.as_str())
            .then_some(())
    })
    .await;
    config_maps
        .delete(OPERATOR_CONFIG, &DeleteParams::default())
        .await
        .expect("deleting the operator ConfigMap");

    // A router admits the Route: ready.
    routes
        .patch_status(
            "tas",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"ingress": [{"host": "tas.example.com",
                "conditions": [{"type": "Admitted", "status": "True"}]}]}})),
        )
        .await
        .expect("admitting the Route");
    let ready = env.wait_ready(&ns, "tas").await;
    assert!(condition(&ready, "RouteAvailable").is_some_and(|c| c.status == "True"));

    // Deletion undoes the wiring, leaving the other payload processor alone.
    env.delete_service(&ns, "tas").await;
    let unwired = deployments
        .get("modelmesh-serving-mlserver")
        .await
        .expect("the ModelMesh Deployment");
    let pod = unwired.spec.template.spec.as_ref().expect("pod");
    assert!(
        !pod.volumes
            .iter()
            .flatten()
            .any(|v| v.name == "tas-internal")
    );
    let mm = &pod.containers[0];
    let processors: Vec<_> = mm
        .env
        .iter()
        .flatten()
        .filter(|e| e.name == "MM_PAYLOAD_PROCESSORS")
        .collect();
    assert_eq!(processors.len(), 1);
    assert_eq!(
        processors[0].value.as_deref(),
        Some("http://other/consumer")
    );
    assert!(
        !mm.env
            .iter()
            .flatten()
            .any(|e| e.name == "MM_TLS_KEY_CERT_PATH")
    );
    assert!(
        pod.containers[1]
            .volume_mounts
            .as_deref()
            .unwrap_or_default()
            .is_empty()
    );
    for name in ["raw-model", "serverless-model"] {
        assert_eq!(
            isvcs.get(name).await.expect("isvc").data["spec"]["predictor"].get("logger"),
            None,
            "{name}"
        );
    }
}

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

#[tokio::test]
async fn uninstall_without_the_operator_releases_deletions_and_leaves_nothing_of_ours() {
    let env = Env::exclusive().await;
    let ns = env.namespace("uninstall").await;
    env.create(
        &ns,
        "tas",
        json!({"storage": {"format": "DATABASE", "databaseConfigurations": "db-creds"},
               "metrics": {"schedule": "5s"}}),
    )
    .await;
    let bindings = Api::<ClusterRoleBinding>::all(env.client.clone());
    let binding = format!("tas-{ns}-proxy-rolebinding");
    env.wait("the proxy's ClusterRoleBinding", || async {
        bindings.get_opt(&binding).await.ok()?.map(|_| ())
    })
    .await;

    // The operator is gone (helm uninstall, an outage): a deletion waits for its finalizer.
    env.stop_operator();
    let services = env.services(&ns);
    services
        .delete("tas", &DeleteParams::default())
        .await
        .expect("deleting the TrustyAIService");
    let waiting = services.get("tas").await.expect("held by its finalizer");
    assert!(waiting.metadata.deletion_timestamp.is_some());

    let out = std::process::Command::new(env!("CARGO_BIN_EXE_trustyai-operator"))
        .arg("uninstall")
        .arg("--kubeconfig")
        .arg(&env.cp.kubeconfig)
        .args(["--namespace", &env.operator_ns, "--webhook-configurations"])
        .output()
        .expect("running uninstall");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains(&format!("{ns}/tas")), "{stdout}");

    env.wait("the deletion to complete without an operator", || async {
        services.get_opt("tas").await.ok()?.is_none().then_some(())
    })
    .await;
    let left = bindings
        .list_metadata(&ListParams::default().labels("trustyai.opendatahub.io/owner-name"))
        .await
        .expect("listing bindings");
    assert!(left.items.is_empty(), "bindings left: {:?}", left.items);
    let secrets = env.api::<Secret>(&env.operator_ns);
    for name in [
        "trustyai-operator-webhook-tls",
        "trustyai-operator-operand-ca",
    ] {
        assert!(
            secrets.get_opt(name).await.expect("read").is_none(),
            "{name}"
        );
    }
    let leases = env.api::<k8s_openapi::api::coordination::v1::Lease>(&env.operator_ns);
    assert!(
        leases
            .get_opt("trustyai-operator-leader")
            .await
            .expect("read")
            .is_none()
    );
    let validating = Api::<
        k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration,
    >::all(env.client.clone());
    assert!(
        validating
            .get_opt("trustyai-operator-validating")
            .await
            .expect("read")
            .is_none()
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

#[tokio::test]
async fn objects_stored_without_validation_keep_working_and_say_what_to_fix() {
    let env = Env::exclusive().await;
    let ns = env.namespace("legacy").await;
    // Under the Go operator: no webhooks, a CRD without rules, and an object ours refuse.
    env.stop_operator();
    for (kind, name) in [
        (
            "validatingwebhookconfiguration",
            "trustyai-operator-validating",
        ),
        ("mutatingwebhookconfiguration", "trustyai-operator-mutating"),
    ] {
        let (ok, out, err) = env
            .cp
            .kubectl(&["delete", kind, name, "--ignore-not-found"], None);
        assert!(ok, "{out}{err}");
    }
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
