//! An operator upgrade or configuration change never moves a TrustyAIService off the Java
//! TrustyAI service by itself.
//!
//! The Java service (the repositories of [`images::JAVA_SERVICE_REPOSITORIES`]) stored CSV files
//! on its claim and Hibernate tables (`DataframeMetadata`, `DataframeRow`) in its database. The
//! current (Python) service reads HDF5 files named `<dataset>_<data.filename>` and `trustyai_v2_*`
//! tables: its PVC → database migration moves only `*.hdf5` files, and it reads the Java tables
//! only with `DATABASE_ATTEMPT_MIGRATION` on, which this operator sets in migration mode alone.
//! An instance moved from the one to the other would start with no data.
//!
//! So where the image the operator is configured with (environment, ConfigMap or built-in
//! default) is not the Java service but the instance's pods run the Java service, the pods keep
//! their image, and the `ImageUpgradeHeld` condition says so. The move happens when the
//! TrustyAIService asks for it: [`ALLOW_SERVICE_IMAGE_UPGRADE_ANNOTATION`] set to `"true"`, or a
//! `spec.image` of its own (which only takes effect where the operator's environment names no
//! service image).

use k8s_openapi::api::apps::v1::Deployment;
use trustyai_crds::TrustyAIService;
use trustyai_crds::contract::ALLOW_SERVICE_IMAGE_UPGRADE_ANNOTATION;

use super::children::deployment::containers::SERVICE_CONTAINER;
use super::resources::images::{self, ImageSource, ResolvedImage};

/// The pods keep the Java service although the operator is configured with another image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Held {
    /// The Java service image the pods keep running.
    pub running: String,
    /// The image the operator is configured with, which they would otherwise get.
    pub configured: String,
}

impl Held {
    /// The explanation written to the condition and the event.
    pub fn message(&self) -> String {
        format!(
            "The pods keep {running} (the Java TrustyAI service): the configured image \
             {configured} is not the Java service and does not read the data the Java service \
             stored (CSV files on the claim, its own database tables). To move to it and start \
             without that data (which stays where it is), annotate the TrustyAIService with \
             {ALLOW_SERVICE_IMAGE_UPGRADE_ANNOTATION}=true.",
            running = self.running,
            configured = self.configured,
        )
    }
}

/// The service image the instance's pods run: the Deployment's service container (as its
/// cache knows it), else the `status.image` this operator last wrote.
pub fn running_image(deployment: Option<&Deployment>, service: &TrustyAIService) -> Option<String> {
    deployment
        .and_then(|d| d.spec.template.spec.as_ref())
        .and_then(|pod| pod.containers.iter().find(|c| c.name == SERVICE_CONTAINER))
        .and_then(|c| c.image.clone())
        .or_else(|| service.status.as_ref().and_then(|s| s.image.clone()))
}

/// Whether `service` asks to leave the Java service.
pub fn upgrade_allowed(service: &TrustyAIService) -> bool {
    service
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(ALLOW_SERVICE_IMAGE_UPGRADE_ANNOTATION))
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
}

/// The service image to render, and whether the Java one is held, given what the operator
/// resolved and what the pods run.
pub fn decide(
    resolved: ResolvedImage,
    running: Option<&str>,
    upgrade_allowed: bool,
) -> (ResolvedImage, Option<Held>) {
    let hold = match running {
        Some(running) => {
            images::is_java_service(running)
                && !images::is_java_service(&resolved.image)
                && resolved.source != ImageSource::Spec
                && !upgrade_allowed
        }
        None => false,
    };
    match running {
        Some(running) if hold => (
            ResolvedImage {
                image: running.to_owned(),
                source: ImageSource::Running,
            },
            Some(Held {
                running: running.to_owned(),
                configured: resolved.image,
            }),
        ),
        _ => (resolved, None),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::expect_used)]

    use super::super::test_support;
    use super::*;

    const JAVA: &str = "quay.io/trustyai/trustyai-service:v0.28.0";
    const PYTHON: &str = "quay.io/opendatahub/odh-trustyai-service-py:v1";

    fn resolved(image: &str, source: ImageSource) -> ResolvedImage {
        ResolvedImage {
            image: image.to_owned(),
            source,
        }
    }

    #[test]
    fn java_pods_keep_their_image_when_the_configuration_names_another_service() {
        for source in [
            ImageSource::Environment,
            ImageSource::ConfigMap,
            ImageSource::ConfigMapNameAndTag,
            ImageSource::Default,
        ] {
            let (image, held) = decide(resolved(PYTHON, source), Some(JAVA), false);
            assert_eq!(image, resolved(JAVA, ImageSource::Running), "{source:?}");
            assert_eq!(
                held,
                Some(Held {
                    running: JAVA.into(),
                    configured: PYTHON.into()
                })
            );
        }
    }

    #[test]
    fn the_annotation_or_the_instances_own_spec_image_moves_it() {
        let (image, held) = decide(resolved(PYTHON, ImageSource::Default), Some(JAVA), true);
        assert_eq!((image.image.as_str(), held), (PYTHON, None));
        let (image, held) = decide(resolved(PYTHON, ImageSource::Spec), Some(JAVA), false);
        assert_eq!((image.image.as_str(), held), (PYTHON, None));
    }

    #[test]
    fn anything_but_leaving_the_java_service_takes_the_configured_image() {
        let cases = [
            (PYTHON, None),
            (PYTHON, Some("localhost/trustyai-service:old")),
            // Java to Java (a new tag) and Python to Java are not held: the Java service reads
            // its own data, and a Python instance moved back is the configuration's choice.
            ("quay.io/trustyai/trustyai-service:v0.29.0", Some(JAVA)),
            (JAVA, Some(PYTHON)),
        ];
        for (configured, running) in cases {
            let (image, held) = decide(resolved(configured, ImageSource::Default), running, false);
            assert_eq!(
                (image.image.as_str(), held),
                (configured, None),
                "{running:?}"
            );
        }
    }

    #[test]
    fn the_running_image_is_the_service_containers_else_the_status() {
        let deployment: Deployment = serde_json::from_value(serde_json::json!({
            "spec": {"selector": {}, "template": {"spec": {"containers": [
                {"name": "kube-rbac-proxy", "image": "proxy:1"},
                {"name": SERVICE_CONTAINER, "image": JAVA},
            ]}}}
        }))
        .expect("a Deployment");
        let mut service = test_support::pvc_service();
        service.status =
            Some(serde_json::from_value(serde_json::json!({"image": PYTHON})).expect("a status"));
        assert_eq!(
            running_image(Some(&deployment), &service).as_deref(),
            Some(JAVA)
        );
        assert_eq!(running_image(None, &service).as_deref(), Some(PYTHON));
        service.status = None;
        assert_eq!(running_image(None, &service), None);
    }

    #[test]
    fn only_true_allows_the_move() {
        let with = |value: &str| -> TrustyAIService {
            let mut service = test_support::pvc_service();
            service.metadata.annotations = Some(
                [(
                    ALLOW_SERVICE_IMAGE_UPGRADE_ANNOTATION.to_owned(),
                    value.to_owned(),
                )]
                .into(),
            );
            service
        };
        assert!(upgrade_allowed(&with("true")));
        assert!(upgrade_allowed(&with(" True ")));
        assert!(!upgrade_allowed(&with("false")));
        assert!(!upgrade_allowed(&with("")));
    }
}
