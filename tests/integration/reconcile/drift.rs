//! What follows a change (drift, the CA bundle, the image) and what does not (restarts, peers).

use std::time::Instant;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service, ServiceAccount};
use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use crate::reconcile::env::{
    DEFAULT_IMAGE, Env, OPERATOR_CONFIG, operator_written_of, pvc_spec, service_container, versions,
};
use crate::support::cluster::{exists, merge_patch};

#[tokio::test]
async fn drift_is_corrected() {
    let (env, ns) = Env::shared_instance("drift", "tas").await;

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
    merge_patch(&deployments, "tas", json!({"spec": {"replicas": 3}}))
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
    merge_patch(
        &config_maps,
        "tas-kube-rbac-proxy-config",
        json!({"data": {"config.yaml": "tampered"}}),
    )
    .await
    .expect("editing the ConfigMap");
    env.wait("the ConfigMap restored", || async {
        let cm = config_maps.get("tas-kube-rbac-proxy-config").await.ok()?;
        cm.data?
            .get("config.yaml")?
            .contains("    name: \"tas\"")
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
    merge_patch(
        &secrets,
        "tas-internal",
        json!({"data": {"tls.crt": "dGFtcGVyZWQ="}}),
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
    let (env, ns) = Env::shared_instance("cabundle", "tas").await;

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
