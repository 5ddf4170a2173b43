//! CRD version upgrades through the real API server, with the operator binary serving
//! conversion:
//!
//! - `round_trip`: nothing is lost going through v1alpha1 and back;
//! - `lists`: lists work through both versions, paginated too;
//! - `migration`: storage-version migration (at operator start and with `migrate-storage`)
//!   re-writes v1alpha1-stored objects as v1 (checked in etcd itself, `etcd`) so that v1alpha1
//!   can then be dropped from the CRD, which the API server refuses before.
//!
//! Every test holds this concern's control plane exclusively: they replace the CRD.

mod etcd;
mod lists;
mod migration;
mod round_trip;

use crate::support;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceConversion, CustomResourceDefinition,
};
use kube::Client;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::json;
use support::ControlPlane;
use support::cluster::create_when_served;
use support::operator::Operator;
use support::wait;
use trustyai_crds::contract::CRD_NAME;

const IMAGE: &str = "quay.io/trustyai/trustyai-service:v0.28.0";

fn api_version(object: &DynamicObject) -> &str {
    object
        .types
        .as_ref()
        .map(|t| t.api_version.as_str())
        .unwrap_or("")
}

fn is_code(error: &kube::Error, code: u16) -> bool {
    matches!(error, kube::Error::Api(s) if s.code == code)
}

// ---------------------------------------------------------------------------------------------
// The operator and its webhooks.

/// Starts the operator with its webhook registrations and `extra` flags, and waits until the
/// API server calls it ([`support::cluster::start_serving_webhooks`]).
async fn start_operator(cp: &ControlPlane, client: &Client, ns: &str, extra: &[&str]) -> Operator {
    support::cluster::start_serving_webhooks(cp, client, ns, extra).await
}

// ---------------------------------------------------------------------------------------------
// The CRD.

fn crds(client: &Client) -> Api<CustomResourceDefinition> {
    Api::all(client.clone())
}

async fn stored_versions(client: &Client) -> Vec<String> {
    crds(client)
        .get(CRD_NAME)
        .await
        .expect("the CRD")
        .status
        .and_then(|s| s.stored_versions)
        .unwrap_or_default()
}

/// Writes the whole CRD spec (create or replace). Replace, not server-side apply: the
/// conversion stanza belongs to the operator's caBundle field manager, and an apply of
/// `strategy: None` would be merged with its webhook block into an invalid object.
async fn put_crd(client: &Client, crd: &CustomResourceDefinition) -> Result<(), kube::Error> {
    let api = crds(client);
    for _ in 0..10 {
        let result = match api.get_opt(CRD_NAME).await? {
            None => api.create(&PostParams::default(), crd).await,
            Some(live) => {
                let mut next = crd.clone();
                next.metadata.resource_version = live.metadata.resource_version;
                api.replace(CRD_NAME, &PostParams::default(), &next).await
            }
        };
        match result {
            Ok(_) => return Ok(()),
            // The caBundle publisher of a stopping operator may write in between.
            Err(e) if is_code(&e, 409) => continue,
            Err(e) => return Err(e),
        }
    }
    panic!("the CRD kept conflicting");
}

/// The operator's CRD with `storage` as the storage version and no conversion webhook: the CRD
/// as an older release installed it, before v1 was stored.
fn crd_storing(storage: &str) -> CustomResourceDefinition {
    let mut crd = trustyai_crds::crd::crd().expect("the CRD builds");
    for version in &mut crd.spec.versions {
        version.storage = version.name == storage;
    }
    crd.spec.conversion = Some(CustomResourceConversion {
        strategy: "None".into(),
        webhook: None,
    });
    crd
}

/// Drops v1alpha1 from the live CRD's `spec.versions` (what a release that stops serving it
/// applies).
async fn drop_v1alpha1(client: &Client) -> Result<(), kube::Error> {
    let mut crd = crds(client).get(CRD_NAME).await?;
    crd.spec.versions.retain(|v| v.name != "v1alpha1");
    crd.metadata.managed_fields = None;
    put_crd(client, &crd).await
}

// ---------------------------------------------------------------------------------------------
// Keeping the reconcile loop away from an object.
//
// The operator's reconcile loop writes the status of every TrustyAIService it sees (and adds its
// finalizer), which would overwrite the status a test wrote and make "who re-wrote this object"
// unanswerable. It leaves alone an object that is being deleted without its finalizer, so an
// object created with a finalizer of the test's own and deleted *before any operator runs* is
// never written by it: the test's writes and the migration's are the only ones.

/// The test's own finalizer, holding deleted objects in place.
const HOLD: &str = "conversion-test.trustyai.opendatahub.io/hold";

/// Creates `object` (with [`HOLD`]) through `api` and deletes it, so it stays, being deleted.
/// Retries the create while the API server still calls removed webhook registrations.
async fn create_held(api: &Api<DynamicObject>, mut object: DynamicObject) -> DynamicObject {
    object.metadata.finalizers = Some(vec![HOLD.to_string()]);
    let name = object.metadata.name.clone().expect("name");
    create_when_served(api, &object, |e| {
        eprintln!("create {name}: {e}; retrying");
        true
    })
    .await
    .unwrap_or_else(|e| panic!("create {name}: {e}"));
    api.delete(&name, &DeleteParams::default())
        .await
        .expect("deleted (held by the finalizer)");
    let held = api.get(&name).await.expect("still there");
    assert!(held.metadata.deletion_timestamp.is_some());
    held
}

/// Lets a held object go.
async fn release(api: &Api<DynamicObject>, name: &str) {
    api.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .expect("finalizer removed");
}
