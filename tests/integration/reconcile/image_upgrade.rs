//! A configured non-Java service image never moves an instance off the Java service by itself
//! (its data would be unreadable): the pods keep their image and the status says so, until the
//! TrustyAIService asks for the move.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};

use super::env::{DEFAULT_IMAGE, Env, OPERATOR_CONFIG, condition, pvc_spec, service_container};
use crate::support::cluster::annotate;

const PYTHON_IMAGE: &str = "quay.io/opendatahub/odh-trustyai-service-py:upgrade-test";
const ALLOW: &str = "trustyai.opendatahub.io/allow-service-image-upgrade";

#[tokio::test]
async fn a_java_instance_keeps_its_image_until_it_asks_for_the_configured_service() {
    let (env, ns) = Env::exclusive_instance("java", "java").await;
    let deployments = env.api::<Deployment>(&ns);
    let before = deployments.get("java").await.expect("the Deployment");
    assert_eq!(
        service_container(&before).image.as_deref(),
        Some(DEFAULT_IMAGE)
    );
    configure_the_service_image(&env, PYTHON_IMAGE).await;

    // A new instance gets the configured service.
    env.volume_for(&ns, "fresh-pvc").await;
    env.create(&ns, "fresh", pvc_spec()).await;
    wait_for_the_image(
        &env,
        &deployments,
        "fresh",
        "the new instance's Deployment to run the configured image",
    )
    .await;

    // The Java instance keeps its image and its pods, and says why.
    assert_held_and_saying_why(&env, &ns, &before).await;

    // Asked for, the move happens and the condition goes.
    annotate(&env.services(&ns), "java", ALLOW, "true")
        .await
        .expect("annotating the TrustyAIService");
    wait_for_the_image(
        &env,
        &deployments,
        "java",
        "the Java instance to move to the configured image",
    )
    .await;
    env.wait(
        "ImageUpgradeHeld to go and status.image to follow",
        || async {
            let s = env.services(&ns).get("java").await.ok()?;
            (condition(&s, "ImageUpgradeHeld").is_none()
                && s.status?.image.as_deref() == Some(PYTHON_IMAGE))
            .then_some(())
        },
    )
    .await;

    env.remove_operator_config().await;
}

/// The operator ConfigMap naming `image` as the service image.
async fn configure_the_service_image(env: &Env, image: &str) {
    let config = ConfigMap {
        metadata: kube::api::ObjectMeta {
            name: Some(OPERATOR_CONFIG.to_owned()),
            ..Default::default()
        },
        data: Some(BTreeMap::from([(
            "trustyaiServiceImage".to_owned(),
            image.to_owned(),
        )])),
        ..Default::default()
    };
    env.api::<ConfigMap>(&env.operator_ns)
        .create(&PostParams::default(), &config)
        .await
        .expect("creating the operator ConfigMap");
}

/// Waits until the Deployment `name` runs the configured image ([`PYTHON_IMAGE`]).
async fn wait_for_the_image(env: &Env, deployments: &Api<Deployment>, name: &str, what: &str) {
    env.wait(what, || async {
        let d = deployments.get(name).await.ok()?;
        (service_container(&d).image.as_deref() == Some(PYTHON_IMAGE)).then_some(())
    })
    .await;
}

/// The Java instance `java` keeps its image and its pods (its Deployment as it was `before`),
/// still serves, and says why in a condition and a Warning naming the annotation to move.
async fn assert_held_and_saying_why(env: &Env, ns: &str, before: &Deployment) {
    let deployments = env.api::<Deployment>(ns);
    let held = env
        .wait_condition(
            ns,
            "java",
            "ImageUpgradeHeld",
            "True",
            Some("JavaServiceData"),
        )
        .await;
    let message = condition(&held, "ImageUpgradeHeld")
        .map(|c| c.message)
        .unwrap_or_default();
    assert!(
        message.contains(DEFAULT_IMAGE)
            && message.contains(PYTHON_IMAGE)
            && message.contains(ALLOW),
        "{message}"
    );
    assert_eq!(
        held.status.as_ref().and_then(|s| s.image.as_deref()),
        Some(DEFAULT_IMAGE)
    );
    assert!(
        condition(&held, "Ready").is_some_and(|c| c.status == "True"),
        "a held instance still serves: {:?}",
        held.status
    );
    let after = deployments.get("java").await.expect("the Deployment");
    assert_eq!(
        service_container(&after).image.as_deref(),
        Some(DEFAULT_IMAGE)
    );
    assert_eq!(
        after.metadata.generation, before.metadata.generation,
        "the held Deployment was not changed"
    );
    let warned = env.wait_event(ns, "java", "JavaServiceData").await;
    assert!(
        warned.iter().all(|e| e.type_.as_deref() == Some("Warning")
            && e.note.as_deref().is_some_and(|n| n.contains(ALLOW))),
        "{warned:?}"
    );
}
