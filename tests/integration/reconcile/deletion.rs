//! Deletion: claim retention, the cleanup deadline, and an uninstall without the operator.

use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Secret};
use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams};
use serde_json::json;
use trustyai_crds::TrustyAIService;

use crate::reconcile::env::{CLEANUP_TIMEOUT, Env, assert_owned_by, condition, note, pvc_spec};
use crate::support::cli;
use crate::support::cluster::{exists, merge_patch};
use crate::support::samples::database;

/// retention: Retain (the default): the claim outlives its TrustyAIService, and one created
/// again under the same name adopts it.
#[tokio::test]
async fn a_retained_claim_survives_deletion_to_be_adopted() {
    let (env, ns) = Env::shared_instance("retain", "kept").await;
    let claims = env.api::<PersistentVolumeClaim>(&ns);
    let claim_uid = claims.get("kept-pvc").await.expect("PVC").uid();
    let bindings = Api::<ClusterRoleBinding>::all(env.client.clone());
    let binding = format!("kept-{ns}-proxy-rolebinding");
    assert!(exists(&bindings, &binding).await);

    env.delete_service(&ns, "kept").await;
    env.wait_event(&ns, "kept", "PVCRetained").await;
    assert!(!exists(&bindings, &binding).await, "the binding is deleted");
    // The garbage collector removes the owned children; the claim stays.
    env.wait_gone(
        "the Deployment garbage-collected",
        &env.api::<Deployment>(&ns),
        "kept",
    )
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
}

/// retention: Delete: the claim is owned, and goes with the TrustyAIService.
#[tokio::test]
async fn a_claim_with_retention_delete_goes_with_its_trustyaiservice() {
    let env = Env::shared().await;
    let ns = env.namespace("retain").await;
    let claims = env.api::<PersistentVolumeClaim>(&ns);
    env.volume_for(&ns, "gone-pvc").await;
    let mut spec = pvc_spec();
    spec["storage"]["retention"] = json!("Delete");
    env.create(&ns, "gone", spec).await;
    let gone = env.wait_ready(&ns, "gone").await;
    let claim = claims.get("gone-pvc").await.expect("PVC");
    assert_owned_by(&claim.metadata, &gone, "the PVC with retention Delete");
    env.delete_service(&ns, "gone").await;
    env.wait_gone("the PVC with retention Delete deleted", &claims, "gone-pvc")
        .await;
    assert!(env.events(&ns, "gone", "PVCRetained").await.is_empty());
    env.wait_event(&ns, "gone", "PVCDeleted").await;
}

#[tokio::test]
async fn retention_delete_set_right_before_deletion_is_honoured() {
    let (env, ns) = Env::shared_instance("late-delete", "late").await;
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
    merge_patch(
        &env.api::<TrustyAIService>(&ns),
        "late",
        json!({"spec": {"storage": {"retention": "Delete"}}}),
    )
    .await
    .expect("setting retention: Delete");
    env.delete_service(&ns, "late").await;
    env.wait_gone("the claim deleted", &claims, "late-pvc")
        .await;
    let deleted = env.wait_event(&ns, "late", "PVCDeleted").await;
    assert!(note(&deleted[0]).contains("late-pvc"));
    assert!(env.events(&ns, "late", "PVCRetained").await.is_empty());
}

#[tokio::test]
async fn a_cleanup_that_keeps_failing_holds_the_deletion_until_its_deadline() {
    let (env, ns) = Env::shared_instance("stuck", "stuck").await;
    let binding = format!("stuck-{ns}-proxy-rolebinding");
    let bindings = Api::<ClusterRoleBinding>::all(env.client.clone());
    bindings
        .get(&binding)
        .await
        .expect("the ClusterRoleBinding");

    // An admission policy refuses to delete the binding, so the finalizer's cleanup fails.
    let policy = refuse_deleting(&env, &bindings, &binding, &ns).await;

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
        exists(&env.services(&ns), "stuck").await,
        "the finalizer holds the deletion while the cleanup fails"
    );
    env.wait_gone("the TrustyAIService gone", &env.services(&ns), "stuck")
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

    stop_refusing(&env, &bindings, &binding, &policy).await;
}

/// A ValidatingAdmissionPolicy (named after `ns`) that refuses to delete the ClusterRoleBinding
/// `binding`, in force once the API server refuses a dry-run deletion; its name.
async fn refuse_deleting(
    env: &Env,
    bindings: &Api<ClusterRoleBinding>,
    binding: &str,
    ns: &str,
) -> String {
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
        matches!(bindings.delete(binding, &dry_run).await, Err(kube::Error::Api(s)) if s.message.contains("held by the cleanup test"))
            .then_some(())
    })
    .await;
    policy
}

/// Removes the admission policy `policy`, then the `binding` it kept.
async fn stop_refusing(env: &Env, bindings: &Api<ClusterRoleBinding>, binding: &str, policy: &str) {
    for kind in [
        "validatingadmissionpolicybinding",
        "validatingadmissionpolicy",
    ] {
        let (ok, out, err) = env.cp.kubectl(&["delete", kind, policy], None);
        assert!(ok, "removing the {kind}: {out}{err}");
    }
    env.wait("the leftover binding deleted", || async {
        match bindings.delete(binding, &DeleteParams::default()).await {
            Ok(_) => Some(()),
            Err(kube::Error::Api(s)) if s.code == 404 => Some(()),
            Err(_) => None,
        }
    })
    .await;
}

#[tokio::test]
async fn uninstall_without_the_operator_leaves_nothing_of_ours() {
    let env = Env::exclusive().await;
    let ns = env.namespace("uninstall").await;
    env.create(&ns, "tas", database("db-creds")).await;
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

    let stdout = cli::succeeded(&cli::run_against(
        env.cp,
        "uninstall",
        &["--namespace", &env.operator_ns, "--webhook-configurations"],
        &[],
    ));
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
        trustyai_operator::cli::default_names::CERT_SECRET,
        trustyai_operator::cli::default_names::OPERAND_CA_SECRET,
    ] {
        assert!(!exists(&secrets, name).await, "{name}");
    }
    let leases = env.api::<k8s_openapi::api::coordination::v1::Lease>(&env.operator_ns);
    assert!(!exists(&leases, trustyai_operator::cli::default_names::LEASE).await);
    let validating = Api::<
        k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration,
    >::all(env.client.clone());
    assert!(
        !exists(
            &validating,
            trustyai_operator::cli::default_names::VALIDATING_WEBHOOK_CONFIGURATION
        )
        .await
    );
}
