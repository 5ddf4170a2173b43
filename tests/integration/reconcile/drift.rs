//! What follows a change (drift, the CA bundle, the image) and what does not (restarts, peers).

use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service, ServiceAccount};
use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::{Value, json};

use crate::reconcile::env::{
    DEFAULT_IMAGE, Env, OPERATOR_CONFIG, operator_written_of, pvc_spec, service_container, versions,
};
use crate::support::cluster::{exists, merge_patch};

#[tokio::test]
async fn drift_is_corrected() {
    let (env, ns) = Env::shared_instance("drift", "tas").await;

    let services = env.api::<Service>(&ns);
    let took = recreated(&env, &services, "tas", "the Service to come back", |_| true).await;
    eprintln!("deleted Service re-created after {took:?}");

    let deployments = env.api::<Deployment>(&ns);
    let scaled = json!({"spec": {"replicas": 3}});
    let took = restored(
        &env,
        &deployments,
        "tas",
        scaled,
        "replicas back to 1",
        |d| d.spec.replicas == Some(1),
    )
    .await;
    eprintln!("scaled Deployment restored after {took:?}");

    // The kube-rbac-proxy configuration is restored too.
    let config_maps = env.api::<ConfigMap>(&ns);
    let tampered = json!({"data": {"config.yaml": "tampered"}});
    restored(
        &env,
        &config_maps,
        "tas-kube-rbac-proxy-config",
        tampered,
        "the ConfigMap restored",
        |cm| {
            cm.data
                .as_ref()
                .and_then(|data| data.get("config.yaml"))
                .is_some_and(|config| config.contains("    name: \"tas\""))
        },
    )
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
    let issued_again = "the serving Secret issued again";
    recreated(&env, &secrets, "tas-tls", issued_again, |secret| {
        secret
            .data
            .as_ref()
            .is_some_and(|data| data.contains_key("tls.crt"))
    })
    .await;
    let tampered = json!({"data": {"tls.crt": "dGFtcGVyZWQ="}});
    let issued_again = "the internal serving Secret issued again";
    restored(
        &env,
        &secrets,
        "tas-internal",
        tampered,
        issued_again,
        |secret| {
            secret
                .data
                .as_ref()
                .and_then(|data| data.get("tls.crt"))
                .is_some_and(|crt| {
                    std::str::from_utf8(&crt.0).is_ok_and(|pem| pem.contains("BEGIN CERTIFICATE"))
                })
        },
    )
    .await;
}

/// Sets the `app.kubernetes.io/version` label of `name` to `tampered` and waits for the
/// operator to restore it.
async fn restores_tampered_version_label<K>(env: &Env, api: &Api<K>, name: &str)
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned,
{
    let tampered = json!({"metadata": {"labels": {"app.kubernetes.io/version": "tampered"}}});
    let what = format!("the labels of {name} restored");
    restored(env, api, name, tampered, &what, |object| {
        object
            .labels()
            .get("app.kubernetes.io/version")
            .map(String::as_str)
            != Some("tampered")
    })
    .await;
}

/// Deletes `name` and waits, as `what`, until the operator has made it again (another uid)
/// with `made` holding for it; how long that took after the deletion.
async fn recreated<K>(
    env: &Env,
    api: &Api<K>,
    name: &str,
    what: &str,
    made: impl Fn(&K) -> bool,
) -> Duration
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned,
{
    let old = api
        .get(name)
        .await
        .unwrap_or_else(|e| panic!("reading {name}: {e}"))
        .uid();
    api.delete(name, &DeleteParams::default())
        .await
        .unwrap_or_else(|e| panic!("deleting {name}: {e}"));
    let started = Instant::now();
    env.wait(what, || async {
        let object = api.get_opt(name).await.ok()??;
        (object.uid() != old && made(&object)).then_some(())
    })
    .await;
    started.elapsed()
}

/// Merge-patches `name` with `tampering` and waits, as `what`, until the operator has undone it:
/// until `undone` holds for the object; how long that took after the patch.
async fn restored<K>(
    env: &Env,
    api: &Api<K>,
    name: &str,
    tampering: Value,
    what: &str,
    undone: impl Fn(&K) -> bool,
) -> Duration
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned,
{
    merge_patch(api, name, tampering)
        .await
        .unwrap_or_else(|e| panic!("tampering with {name}: {e}"));
    let started = Instant::now();
    env.wait(what, || async {
        let object = api.get(name).await.ok()?;
        undone(&object).then_some(())
    })
    .await;
    started.elapsed()
}

/// Whether the Deployment `d` mounts the custom CA bundle.
fn has_bundle(d: &Deployment) -> bool {
    d.spec
        .template
        .spec
        .as_ref()
        .and_then(|p| p.volumes.as_ref())
        .is_some_and(|v| v.iter().any(|v| v.name == "odh-trusted-ca-bundle"))
}

/// Creates the custom CA bundle ConfigMap in `ns`, labelled for injection, and waits until the
/// Deployment `tas` mounts it.
async fn the_bundle_appears(env: &Env, ns: &str) {
    let deployments = env.api::<Deployment>(ns);
    let bundle: ConfigMap = serde_json::from_value(json!({
        "metadata": {
            "name": "odh-trusted-ca-bundle",
            "labels": {"config.openshift.io/inject-trusted-cabundle": "true"}
        },
        "data": {"ca-bundle.crt": ""}
    }))
    .expect("ConfigMap");
    env.api::<ConfigMap>(ns)
        .create(&PostParams::default(), &bundle)
        .await
        .expect("creating the CA bundle ConfigMap");
    env.wait("the bundle volume in the Deployment", || async {
        let d = deployments.get("tas").await.ok()?;
        has_bundle(&d).then_some(())
    })
    .await;
}

/// The custom CA bundle ConfigMap is mounted into the proxy when it appears labelled for
/// injection: the operator learns it from its watch (its cache answers the reconcile), not from
/// polling.
#[tokio::test]
async fn a_custom_ca_bundle_is_mounted_when_it_appears() {
    let (env, ns) = Env::shared_instance("cabundle", "tas").await;
    let before = env
        .api::<Deployment>(&ns)
        .get("tas")
        .await
        .expect("Deployment");
    assert!(
        !has_bundle(&before),
        "no bundle volume before the ConfigMap exists"
    );
    the_bundle_appears(&env, &ns).await;
}

/// The custom CA bundle is unmounted when its ConfigMap goes: the operator learns it from its
/// watch, not from polling.
#[tokio::test]
async fn a_custom_ca_bundle_is_unmounted_when_it_goes() {
    let (env, ns) = Env::shared_instance("cabundle", "tas").await;
    the_bundle_appears(&env, &ns).await;
    env.api::<ConfigMap>(&ns)
        .delete("odh-trusted-ca-bundle", &DeleteParams::default())
        .await
        .expect("deleting the CA bundle ConfigMap");
    let deployments = env.api::<Deployment>(&ns);
    env.wait("the bundle volume gone from the Deployment", || async {
        let d = deployments.get("tas").await.ok()?;
        (!has_bundle(&d)).then_some(())
    })
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
        let d: Deployment = env.get(ns, name).await;
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
    env.wait_gone(
        "alpha's Deployment in the first namespace gone",
        &env.api::<Deployment>(&one),
        "alpha",
    )
    .await;
    assert!(!exists(&bindings, &format!("alpha-{one}-proxy-rolebinding")).await);
    assert!(exists(&bindings, &format!("beta-{one}-proxy-rolebinding")).await);
    assert!(exists(&bindings, &format!("alpha-{two}-proxy-rolebinding")).await);
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
    let (env, ns) = Env::exclusive_instance("image", "tas").await;

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
    merge_patch(
        &config_maps,
        OPERATOR_CONFIG,
        json!({"data": {"allowedImagePrefixes": "registry.example.com/"}}),
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

    env.remove_operator_config().await;
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
    let (env, ns) = Env::exclusive_instance("restart", "tas").await;
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
