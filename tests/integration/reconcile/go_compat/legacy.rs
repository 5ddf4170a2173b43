//! The Go operator's objects, stored without validation: they keep working under this operator,
//! which says what to fix.

use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use trustyai_crds::TrustyAIService;

use super::remove_registrations;
use crate::reconcile::env::{Env, condition, note, pvc_spec};
use crate::support::cluster::set_finalizers;

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
async fn objects_stored_without_validation_stay_manageable_while_naming_what_to_fix() {
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

    annotate_the_crd_as_kubectl_apply_does(&env);

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
    assert_it_says_what_to_fix(&env, &ns).await;

    everything_but_the_invalid_field_can_change(&services).await;

    // And it can be deleted: the cleanup does not depend on a valid spec.
    env.delete_service(&ns, "legacy").await;
}

/// The CRD as `kubectl apply` of the Go operator's manifests leaves it: with kubectl's record of
/// the apply.
fn annotate_the_crd_as_kubectl_apply_does(env: &Env) {
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
}

/// The object `legacy` in `ns` says what to fix: a condition and a Warning event naming the
/// invalid field.
async fn assert_it_says_what_to_fix(env: &Env, ns: &str) {
    let services = env.services(ns);
    env.wait("a condition naming the field to fix", || async {
        let object = services.get("legacy").await.ok()?;
        let provisioning = condition(&object, "ProvisioningSucceeded")?;
        (provisioning.status == "False" && provisioning.message.contains("spec.storage.size"))
            .then_some(())
    })
    .await;
    let warnings = env.wait_event(ns, "legacy", "InvalidSpec").await;
    assert_eq!(warnings[0].type_.as_deref(), Some("Warning"));
    assert!(
        note(&warnings[0]).contains("spec.storage.size"),
        "{:?}",
        warnings[0].note
    );
}

/// Everything but the invalid field of `legacy` can still change: labels, annotations, the
/// spec elsewhere, and finalizers (one added, then removed).
async fn everything_but_the_invalid_field_can_change(services: &Api<TrustyAIService>) {
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
    set_finalizers(services, "legacy", &finalizers)
        .await
        .expect("adding a finalizer");
    let kept: Vec<String> = finalizers
        .into_iter()
        .filter(|f| f != "example.com/hold")
        .collect();
    set_finalizers(services, "legacy", kept)
        .await
        .expect("removing it");
}
