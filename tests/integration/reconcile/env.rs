//! The operator the tests share or take exclusively (`Env`), and the helpers they all use.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{
    ConfigMap, PersistentVolume, PersistentVolumeClaim, Secret, Service, ServiceAccount,
};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};
use trustyai_crds::TrustyAIService;

use crate::support::ControlPlane;
use crate::support::cluster::NamespacedKind;
use crate::support::control_planes::{self, Claim, Concern};
use crate::support::operator::Operator;
use crate::support::wait;

pub const TIMEOUT: Duration = Duration::from_secs(90);
pub const DEFAULT_IMAGE: &str = "quay.io/trustyai/trustyai-service:v0.28.0";
pub const OPERATOR_CONFIG: &str = "trustyai-service-operator-config";

// --- the shared operator -------------------------------------------------------------------

struct Running {
    users: usize,
    operator: Option<Operator>,
}

static RUNNING: Mutex<Running> = Mutex::new(Running {
    users: 0,
    operator: None,
});
/// The operator's namespace on the control plane it was made on (a concern's control plane can
/// be replaced by a new one between two of its tests).
static OPERATOR_NAMESPACE: tokio::sync::Mutex<Option<(&'static ControlPlane, String)>> =
    tokio::sync::Mutex::const_new(None);

/// A test's view of the cluster and the operator; dropping it releases the operator, then the
/// control plane.
pub struct Env {
    pub cp: &'static ControlPlane,
    pub client: Client,
    pub operator_ns: String,
    _claim: Claim,
}

fn running() -> std::sync::MutexGuard<'static, Running> {
    RUNNING.lock().unwrap_or_else(|e| e.into_inner())
}

/// How long these tests let a failing cleanup hold up a deletion (the default is 5 minutes).
pub const CLEANUP_TIMEOUT: &str = "15s";
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
    /// Beside the other tests that share the operator.
    pub async fn shared() -> Env {
        Self::new(control_planes::shared(Concern::Reconcile)).await
    }

    /// Alone: no other test of this module runs meanwhile.
    pub async fn exclusive() -> Env {
        Self::new(control_planes::exclusive(Concern::Reconcile)).await
    }

    /// [`Env::shared`], with a new namespace `prefix-…` holding the Ready PVC instance `name`
    /// ([`Env::ready_pvc_instance`]): where the tests of a running instance start.
    pub async fn shared_instance(prefix: &str, name: &str) -> (Env, String) {
        Self::shared().await.with_instance(prefix, name).await
    }

    /// [`Env::shared_instance`], alone ([`Env::exclusive`]): for a test that changes the
    /// operator or something cluster-wide once its instance runs.
    pub async fn exclusive_instance(prefix: &str, name: &str) -> (Env, String) {
        Self::exclusive().await.with_instance(prefix, name).await
    }

    /// A new namespace `prefix-…` with the Ready PVC instance `name` in it.
    async fn with_instance(self, prefix: &str, name: &str) -> (Env, String) {
        let ns = self.namespace(prefix).await;
        self.ready_pvc_instance(&ns, name).await;
        (self, ns)
    }

    async fn new(claim: Claim) -> Env {
        let cp = claim.control_plane();
        let client = cp.client().await;
        let operator_ns = {
            let mut made = OPERATOR_NAMESPACE.lock().await;
            match made.as_ref() {
                Some((on, ns)) if std::ptr::eq(*on, cp) => ns.clone(),
                _ => {
                    let ns = cp.namespace(&client, "operator").await;
                    *made = Some((cp, ns.clone()));
                    ns
                }
            }
        };
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
            _claim: claim,
        }
    }

    /// Stops the operator (asserting a clean exit) and starts a new one; returns the new log.
    pub fn restart_operator(&self) -> std::path::PathBuf {
        let mut running = running();
        if let Some(mut operator) = running.operator.take() {
            operator.stop_cleanly();
        }
        let operator = start_operator(self.cp, &self.operator_ns);
        let log = operator.log.clone();
        running.operator = Some(operator);
        log
    }

    /// Stops the operator (asserting a clean exit); the next test's `Env` starts another.
    pub fn stop_operator(&self) {
        if let Some(mut operator) = running().operator.take() {
            operator.stop_cleanly();
        }
    }

    /// The running operator's log file.
    pub fn operator_log(&self) -> std::path::PathBuf {
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

    pub async fn namespace(&self, prefix: &str) -> String {
        self.cp.namespace(&self.client, prefix).await
    }

    /// Polls `check` until it returns `Some`, or fails with the operator's log.
    pub async fn wait<T>(&self, what: &str, check: impl AsyncFnMut() -> Option<T>) -> T {
        wait::until_showing(
            what,
            TIMEOUT,
            || format!("--- operator log ---\n{}", self.operator_logs()),
            check,
        )
        .await
    }

    /// Reads `read` until its answer has not changed for 5 s, and returns it; fails with the
    /// operator's log if it keeps changing for 60 s ([`wait::settled`]). A snapshot taken while
    /// the writes that follow a creation are still landing (follow-up reconciles, the rollout,
    /// the claim's binding) would differ from a later one for reasons that are not under test.
    pub async fn settled<T: PartialEq>(&self, what: &str, read: impl AsyncFnMut() -> T) -> T {
        const QUIET: Duration = Duration::from_secs(5);
        const LIMIT: Duration = Duration::from_secs(60);
        wait::settled(
            what,
            QUIET,
            LIMIT,
            || format!("--- operator log ---\n{}", self.operator_logs()),
            read,
        )
        .await
    }

    pub fn services(&self, ns: &str) -> Api<TrustyAIService> {
        Api::namespaced(self.client.clone(), ns)
    }

    pub fn api<K>(&self, ns: &str) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>,
        K::DynamicType: Default,
    {
        Api::namespaced(self.client.clone(), ns)
    }

    /// The object `name` of kind `K` in `ns`; panics when it cannot be read.
    pub async fn get<K: NamespacedKind>(&self, ns: &str, name: &str) -> K {
        self.api::<K>(ns)
            .get(name)
            .await
            .unwrap_or_else(|e| panic!("{} {ns}/{name}: {e}", K::kind(&Default::default())))
    }

    /// Creates `object` in `ns` as the test's own (not through the operator); panics with `what`
    /// when the API server refuses it.
    pub async fn create_object<K>(&self, ns: &str, object: &K, what: &str) -> K
    where
        K: NamespacedKind + serde::Serialize,
    {
        self.api::<K>(ns)
            .create(&PostParams::default(), object)
            .await
            .unwrap_or_else(|e| panic!("{what}: {e:?}"))
    }

    pub async fn create(&self, ns: &str, name: &str, spec: Value) -> TrustyAIService {
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
    pub async fn wait_condition(
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
    pub async fn wait_exists<K>(&self, api: &Api<K>, name: &str) -> K
    where
        K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned,
    {
        self.wait(&format!("{} {name}", api.resource_url()), || async {
            api.get_opt(name).await.ok().flatten()
        })
        .await
    }

    /// Waits until `name` is gone.
    pub async fn wait_gone<K>(&self, what: &str, api: &Api<K>, name: &str)
    where
        K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned,
    {
        self.wait(what, || async {
            api.get_opt(name).await.ok()?.is_none().then_some(())
        })
        .await;
    }

    pub async fn wait_ready(&self, ns: &str, name: &str) -> TrustyAIService {
        self.wait_condition(ns, name, "Ready", "True", None).await
    }

    /// A PVC-mode TrustyAIService `name` in `ns`, with a volume for its claim, once Ready.
    pub async fn ready_pvc_instance(&self, ns: &str, name: &str) -> TrustyAIService {
        self.volume_for(ns, &format!("{name}-pvc")).await;
        self.create(ns, name, pvc_spec()).await;
        self.wait_ready(ns, name).await
    }

    /// A PersistentVolume pre-bound to the claim `ns/claim`, so the PV binder binds exactly
    /// that claim (there is no StorageClass on this cluster).
    pub async fn volume_for(&self, ns: &str, claim: &str) {
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

    /// Deletes the operator ConfigMap a test created (the operator falls back to its defaults).
    pub async fn remove_operator_config(&self) {
        self.api::<ConfigMap>(&self.operator_ns)
            .delete(OPERATOR_CONFIG, &DeleteParams::default())
            .await
            .expect("deleting the operator ConfigMap");
    }

    /// Events regarding `name` in `ns` with `reason`.
    pub async fn events(&self, ns: &str, name: &str, reason: &str) -> Vec<Event> {
        crate::support::cluster::events_regarding(&self.client, ns, name, reason).await
    }

    /// Every Event in `ns`, whatever it regards: what a test reads to see all that was said.
    pub async fn all_events(&self, ns: &str) -> Vec<Event> {
        self.api::<Event>(ns)
            .list(&ListParams::default())
            .await
            .expect("events")
            .items
    }

    pub async fn wait_event(&self, ns: &str, name: &str, reason: &str) -> Vec<Event> {
        self.wait(&format!("event {reason} on {ns}/{name}"), || async {
            let found = self.events(ns, name, reason).await;
            (!found.is_empty()).then_some(found)
        })
        .await
    }

    pub async fn delete_service(&self, ns: &str, name: &str) {
        self.services(ns)
            .delete(name, &DeleteParams::default())
            .await
            .expect("deleting the TrustyAIService");
        self.wait_gone(&format!("{ns}/{name} gone"), &self.services(ns), name)
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

pub struct Cond {
    pub status: String,
    pub reason: Option<String>,
    pub message: String,
}

pub fn condition(object: &TrustyAIService, type_: &str) -> Option<Cond> {
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

/// What an Event says (empty when it says nothing).
pub fn note(event: &Event) -> &str {
    event.note.as_deref().unwrap_or_default()
}

pub use crate::support::samples::pvc as pvc_spec;

pub fn env_value(deployment: &Deployment, name: &str) -> Option<String> {
    service_container(deployment)
        .env
        .as_ref()?
        .iter()
        .find(|e| e.name == name)
        .and_then(|e| e.value.clone())
}

/// The service container of `deployment` has each `(name, value)` of `expected` in its
/// environment.
pub fn assert_env(deployment: &Deployment, expected: &[(&str, &str)]) {
    for (name, value) in expected {
        assert_eq!(
            env_value(deployment, name).as_deref(),
            Some(*value),
            "{name}"
        );
    }
}

pub fn service_container(deployment: &Deployment) -> &k8s_openapi::api::core::v1::Container {
    deployment
        .spec
        .template
        .spec
        .as_ref()
        .and_then(|p| p.containers.iter().find(|c| c.name == "trustyai-service"))
        .expect("the trustyai-service container")
}

pub fn assert_owned_by(meta: &kube::api::ObjectMeta, owner: &TrustyAIService, what: &str) {
    let refs = meta.owner_references.as_deref().unwrap_or_default();
    assert!(
        refs.iter().any(|r| r.uid == owner.uid().unwrap_or_default()
            && r.controller == Some(true)
            && r.kind == "TrustyAIService"
            && r.api_version == "trustyai.opendatahub.io/v1"),
        "{what} is owned by the TrustyAIService: {refs:?}"
    );
}

pub fn dynamic_api(
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
pub async fn operator_written_of<K>(api: &Api<K>, name: &str) -> Value
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
pub async fn versions(env: &Env, ns: &str) -> BTreeMap<String, Value> {
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
