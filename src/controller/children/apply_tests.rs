//! The children's application against a scripted API server
//! ([`mock_api`](crate::controller::mock_api)): which requests each situation of the caches and
//! the memory costs, and what the event says.

use std::sync::Arc;

use http::Method;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::runtime::reflector;
use serde_json::{Value, json};

use crate::controller::children::config_map::ServiceAccess;
use tokio::sync::watch;
use trustyai_crds::TrustyAIService;

use super::changes::Changes;
use super::declaration::Kind;
use super::memory::Owner;
use super::rendered::KindApplied;
use super::{Children, RenderInputs, apply_all, rendered};
use crate::controller::children::cluster_role_binding::DEFAULT_PROXY_CLUSTER_ROLE;
use crate::controller::context::{Context, ControllerConfig};
use crate::controller::discovery::OptionalApis;
use crate::controller::error::ReconcileError;
use crate::controller::mock_api::{Expected, MockApi};
use crate::controller::resources::Instance;
use crate::controller::resources::images::{ImageSources, Images, resolve};
use crate::controller::test_support::{
    NAME, NAMESPACE, VERSION, database_service, pvc_service, pvc_spec, with_spec,
};

const OPERATOR_NAMESPACE: &str = "operator-ns";

const SERVICE_ACCOUNT: &str = "/api/v1/namespaces/models/serviceaccounts/tas-proxy";
const BINDING: &str =
    "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/tas-models-proxy-rolebinding";
const CONFIG_MAP: &str = "/api/v1/namespaces/models/configmaps/tas-kube-rbac-proxy-config";
const TLS_SERVICE: &str = "/api/v1/namespaces/models/services/tas-tls";
const INTERNAL_SERVICE: &str = "/api/v1/namespaces/models/services/tas";
const CLAIM: &str = "/api/v1/namespaces/models/persistentvolumeclaims/tas-pvc";
const DEPLOYMENT: &str = "/apis/apps/v1/namespaces/models/deployments/tas";
const ROUTE: &str = "/apis/route.openshift.io/v1/namespaces/models/routes/tas";
const DESTINATION_RULE: &str =
    "/apis/networking.istio.io/v1beta1/namespaces/models/destinationrules/tas-internal";

/// OpenShift without the optional monitoring and mesh APIs: the service-ca operator issues
/// the serving certificates, so no operand CA is read and no Secret is written.
fn openshift() -> OptionalApis {
    OptionalApis {
        routes: true,
        ..OptionalApis::default()
    }
}

pub(super) struct Harness {
    pub(super) api: MockApi,
    pub(super) ctx: Arc<Context>,
    images: Images,
}

impl Harness {
    /// A context on a mock API server expecting `steps`, every cache empty and unlisted.
    pub(super) fn new(steps: impl IntoIterator<Item = Expected>) -> Self {
        let (api, client) = MockApi::new(steps);
        let (_, apis) = watch::channel(OptionalApis::default());
        let ctx = Context::new(
            client,
            ControllerConfig::new(OPERATOR_NAMESPACE),
            apis,
            reflector::store::<ConfigMap>().0,
            Children::default(),
        );
        Self {
            api,
            ctx,
            images: resolve(&ImageSources::default()),
        }
    }

    /// [`Self::new`] with every kind's cache listed (and empty), as once the watches ran.
    pub(super) fn listed(steps: impl IntoIterator<Item = Expected>) -> Self {
        let harness = Self::new(steps);
        for kind in Kind::ALL {
            harness.cache_objects(*kind, []);
        }
        harness
    }

    /// Lists `objects` (with their owners) into the cache of `kind`.
    pub(super) fn cache_objects(
        &self,
        kind: Kind,
        objects: impl IntoIterator<Item = (Value, Option<Owner>)>,
    ) {
        let cache = self.ctx.children.cache(kind);
        cache.begin_list();
        for (object, owner) in objects {
            let meta: ObjectMeta =
                serde_json::from_value(object["metadata"].clone()).expect("metadata");
            let entry = cache.entry_for(&meta, Some(&object), owner);
            let name = meta.name.clone().expect("a name");
            cache.listed_object(meta.namespace.as_deref(), &name, entry);
        }
        cache.end_list();
    }

    fn inputs(&self, apis: OptionalApis) -> RenderInputs<'_> {
        self.inputs_wanting_istio(apis, false)
    }

    pub(super) fn inputs_wanting_istio(
        &self,
        apis: OptionalApis,
        istio_wanted: bool,
    ) -> RenderInputs<'_> {
        RenderInputs {
            images: &self.images,
            custom_ca_bundle: false,
            db_ca_exists: false,
            apis,
            istio_wanted,
            proxy_cluster_role: DEFAULT_PROXY_CLUSTER_ROLE,
            operator_namespace: OPERATOR_NAMESPACE,
            service_access: ServiceAccess::Get,
        }
    }

    async fn apply_all(
        &self,
        service: &TrustyAIService,
        apis: OptionalApis,
    ) -> Result<super::ChildrenApplied, ReconcileError> {
        let instance = Instance::new(service, VERSION).expect("an instance");
        apply_all(&self.ctx, &instance, self.inputs(apis)).await
    }

    /// Applies the one rendered `kind` the way [`apply_all`] does, event included.
    async fn apply_kind(
        &self,
        service: &TrustyAIService,
        kind: Kind,
    ) -> Result<KindApplied, ReconcileError> {
        self.apply_kind_with(service, kind, self.inputs(openshift()))
            .await
    }

    /// [`Self::apply_kind`] with `inputs`.
    pub(super) async fn apply_kind_with(
        &self,
        service: &TrustyAIService,
        kind: Kind,
        inputs: RenderInputs<'_>,
    ) -> Result<KindApplied, ReconcileError> {
        let instance = Instance::new(service, VERSION).expect("an instance");
        let hooks = &kind.declaration().applying;
        let wanted = hooks
            .render
            .render(&self.ctx, &instance, &inputs)
            .await?
            .wanted;
        let mut changes = Changes::default();
        let result =
            rendered::apply_kind(&self.ctx, kind, &instance, wanted, hooks, &mut changes).await;
        changes.publish(&self.ctx.events, service).await;
        result
    }
}

pub(super) fn owner() -> Owner {
    Owner::new(NAMESPACE, NAME)
}

/// The applies of a TrustyAIService none of whose children exist, on [`openshift`].
fn first_applies(with_claim: bool) -> Vec<Expected> {
    let mut paths = vec![
        SERVICE_ACCOUNT,
        BINDING,
        CONFIG_MAP,
        TLS_SERVICE,
        INTERNAL_SERVICE,
    ];
    if with_claim {
        paths.push(CLAIM);
    }
    paths.extend([DEPLOYMENT, ROUTE]);
    paths.into_iter().map(Expected::apply).collect()
}

/// Asserts that the harness published exactly one event, `reason` with `note`.
#[track_caller]
fn assert_one_event(harness: &Harness, reason: &str, note: &str) {
    assert_eq!(
        harness.api.event_notes(),
        vec![(reason.to_owned(), note.to_owned())]
    );
}

fn patch(path: &str) -> String {
    format!("PATCH {path}")
}

fn get(path: &str) -> String {
    format!("GET {path}")
}

fn delete(path: &str) -> String {
    format!("DELETE {path}")
}

#[tokio::test]
async fn a_child_as_the_last_apply_left_it_costs_no_request() {
    let harness = Harness::listed(first_applies(false));
    let service = database_service();
    harness
        .apply_all(&service, openshift())
        .await
        .expect("first pass");
    harness.api.clear();
    // The applies wrote their answers through to the caches, as their watch events would.
    harness
        .apply_all(&service, openshift())
        .await
        .expect("second pass");
    assert_eq!(harness.api.calls(), Vec::<String>::new());
    assert!(harness.api.events().is_empty());
}

#[tokio::test]
async fn an_object_the_listed_cache_lacks_is_applied_without_a_read() {
    let harness = Harness::listed([Expected::apply(SERVICE_ACCOUNT)]);
    harness
        .apply_kind(&database_service(), Kind::ServiceAccount)
        .await
        .expect("applied");
    let requests = harness.api.requests();
    assert_eq!(harness.api.calls(), vec![patch(SERVICE_ACCOUNT)]);
    assert!(
        requests[0].query.contains("fieldManager=trustyai-operator")
            && requests[0].query.contains("force=true"),
        "{}",
        requests[0].query
    );
    assert_eq!(
        requests[0].body.as_ref().expect("a body")["kind"],
        "ServiceAccount"
    );
}

#[tokio::test]
async fn a_cache_that_has_not_listed_means_a_read_before_the_apply() {
    let harness = Harness::new([
        Expected::get_absent(SERVICE_ACCOUNT),
        Expected::apply(SERVICE_ACCOUNT),
    ]);
    harness
        .apply_kind(&database_service(), Kind::ServiceAccount)
        .await
        .expect("applied");
    assert_eq!(
        harness.api.calls(),
        vec![get(SERVICE_ACCOUNT), patch(SERVICE_ACCOUNT)]
    );
    assert_one_event(
        &harness,
        "ServiceAccountCreated",
        "Created: ServiceAccount tas-proxy.",
    );
}

#[tokio::test]
async fn a_binding_to_another_role_is_recreated() {
    let harness = Harness::listed([Expected::delete(BINDING), Expected::apply(BINDING)]);
    let binding = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": "tas-models-proxy-rolebinding", "resourceVersion": "5"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "old"}
    });
    harness.cache_objects(Kind::ClusterRoleBinding, [(binding, Some(owner()))]);
    harness
        .apply_kind(&database_service(), Kind::ClusterRoleBinding)
        .await
        .expect("replaced");
    assert_eq!(harness.api.calls(), vec![delete(BINDING), patch(BINDING)]);
    let [(reason, note)] = harness.api.event_notes().try_into().expect("one event");
    assert_eq!(reason, "ClusterRoleBindingRecreated");
    assert!(
        note.starts_with("Re-created") && note.contains("tas-models-proxy-rolebinding"),
        "{note}"
    );
}

#[tokio::test]
async fn unwanted_mesh_objects_are_deleted_but_never_a_claim() {
    let mut steps = first_applies(false);
    steps.push(Expected::delete(DESTINATION_RULE));
    let harness = Harness::listed(steps);
    let owned = |api_version: &str, kind: &str, name: &str| {
        let object = json!({
            "apiVersion": api_version, "kind": kind,
            "metadata": {"name": name, "namespace": NAMESPACE, "resourceVersion": "3"}
        });
        (object, Some(owner()))
    };
    harness.cache_objects(
        Kind::DestinationRule,
        [owned(
            "networking.istio.io/v1beta1",
            "DestinationRule",
            "tas-internal",
        )],
    );
    harness.cache_objects(
        Kind::PersistentVolumeClaim,
        [owned("v1", "PersistentVolumeClaim", "tas-pvc")],
    );
    let apis = OptionalApis {
        destination_rules: true,
        virtual_services: true,
        ..openshift()
    };
    harness
        .apply_all(&database_service(), apis)
        .await
        .expect("applied");
    let calls = harness.api.calls();
    assert!(calls.contains(&delete(DESTINATION_RULE)), "{calls:#?}");
    assert!(
        !calls.iter().any(|c| c.contains("persistentvolumeclaims")),
        "{calls:#?}"
    );
    let [(_, note)] = harness.api.event_notes().try_into().expect("one event");
    assert!(
        note.ends_with("Deleted (no longer wanted): DestinationRule tas-internal."),
        "{note}"
    );
}

#[tokio::test]
async fn a_refused_growth_keeps_the_claim_at_its_live_size() {
    let mut spec = pvc_spec();
    spec["storage"]["size"] = json!("2Gi");
    let service = with_spec(spec);
    let live = json!({
        "apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": "tas-pvc", "namespace": NAMESPACE, "resourceVersion": "7"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
    });
    let harness = Harness::new([
        Expected::get(CLAIM, live),
        Expected::apply_refused(
            CLAIM,
            403,
            "Forbidden",
            "persistentvolumeclaims \"tas-pvc\" is forbidden: exceeded quota: storage",
        ),
        Expected::apply(CLAIM),
    ]);
    let applied = harness
        .apply_kind(&service, Kind::PersistentVolumeClaim)
        .await
        .expect("applied at the live size");
    let sizes: Vec<Value> = harness
        .api
        .requests()
        .iter()
        .filter(|r| r.method == Method::PATCH)
        .map(|r| {
            r.body.as_ref().expect("a body")["spec"]["resources"]["requests"]["storage"].clone()
        })
        .collect();
    assert_eq!(sizes, vec![json!("2Gi"), json!("1Gi")]);
    let refused = applied.refused.expect("the refusal");
    assert!(
        refused.contains("from 1Gi to 2Gi") && refused.contains("exceeded quota"),
        "{refused}"
    );
    assert_eq!(applied.answers.len(), 1);
}

/// Applies every child of a database-mode TrustyAIService where the API server answers the
/// ClusterRoleBinding's apply (the second) with a conflict; the harness and the error.
async fn apply_all_with_a_conflict_on_the_binding() -> (Harness, ReconcileError) {
    let harness = Harness::listed([
        Expected::apply(SERVICE_ACCOUNT),
        Expected::apply_refused(BINDING, 409, "Conflict", "the object has been modified"),
    ]);
    let error = harness
        .apply_all(&database_service(), openshift())
        .await
        .expect_err("a conflict");
    (harness, error)
}

#[tokio::test]
async fn a_conflict_stops_the_apply() {
    let (_harness, error) = apply_all_with_a_conflict_on_the_binding().await;
    assert!(error.is_conflict(), "{error}");
}

#[tokio::test]
async fn the_event_after_a_conflict_names_what_was_done() {
    let (harness, _error) = apply_all_with_a_conflict_on_the_binding().await;
    assert_one_event(
        &harness,
        "ServiceAccountCreated",
        "Created: ServiceAccount tas-proxy.",
    );
}

#[tokio::test]
async fn one_event_names_every_child_created() {
    let harness = Harness::listed(first_applies(true));
    harness
        .apply_all(&pvc_service(), openshift())
        .await
        .expect("applied");
    assert_one_event(
        &harness,
        "PVCCreated",
        "Created: ServiceAccount tas-proxy, ClusterRoleBinding tas-models-proxy-rolebinding, \
             ConfigMap tas-kube-rbac-proxy-config, Service tas-tls, Service tas, PVC tas-pvc, \
             Deployment tas, Route tas.",
    );
}

#[tokio::test]
async fn an_orphan_deleted_is_not_deleted_again_before_its_watch_event() {
    let harness = Harness::listed([Expected::delete(DESTINATION_RULE)]);
    let rule = json!({
        "apiVersion": "networking.istio.io/v1beta1", "kind": "DestinationRule",
        "metadata": {"name": "tas-internal", "namespace": NAMESPACE, "resourceVersion": "3"}
    });
    harness.cache_objects(Kind::DestinationRule, [(rule, Some(owner()))]);
    let service = database_service();
    for _ in 0..2 {
        harness
            .apply_kind(&service, Kind::DestinationRule)
            .await
            .expect("applied");
    }
    assert_eq!(harness.api.calls(), vec![delete(DESTINATION_RULE)]);
    let reasons: Vec<String> = harness
        .api
        .event_notes()
        .into_iter()
        .map(|(r, _)| r)
        .collect();
    assert_eq!(reasons, vec!["DestinationRuleDeleted".to_owned()]);
}

/// Applies the ServiceAccount where the cache holds one owned by the TrustyAIService whose only
/// managed-fields entry is `manager`'s `operation`; the harness after the apply.
async fn apply_over_a_service_account_written_by(manager: &str, operation: &str) -> Harness {
    let harness = Harness::listed([Expected::apply(SERVICE_ACCOUNT)]);
    let live = json!({
        "apiVersion": "v1", "kind": "ServiceAccount",
        "metadata": {"name": "tas-proxy", "namespace": NAMESPACE, "resourceVersion": "5",
                     "managedFields": [{"manager": manager, "operation": operation}]}
    });
    harness.cache_objects(Kind::ServiceAccount, [(live, Some(owner()))]);
    harness
        .apply_kind(&database_service(), Kind::ServiceAccount)
        .await
        .expect("applied");
    harness
}

#[tokio::test]
async fn a_child_another_operator_made_for_the_trustyaiservice_is_reported_adopted() {
    // As the Go operator leaves it: owned by the TrustyAIService, written by its manager only.
    let harness = apply_over_a_service_account_written_by("manager", "Update").await;
    assert_one_event(
        &harness,
        "ServiceAccountAdopted",
        "Adopted (it existed): ServiceAccount tas-proxy.",
    );
    // The apply's answer, written through, shows this operator's apply: a later change is an
    // update.
    let cached = harness
        .ctx
        .children
        .cache(Kind::ServiceAccount)
        .entry(Some(NAMESPACE), "tas-proxy")
        .expect("written through");
    assert!(cached.applied_by_us, "{cached:?}");
}

#[tokio::test]
async fn a_child_this_operator_applied_before_is_reported_updated() {
    let harness = apply_over_a_service_account_written_by("trustyai-operator", "Apply").await;
    assert_one_event(
        &harness,
        "ServiceAccountUpdated",
        "Updated: ServiceAccount tas-proxy.",
    );
}
