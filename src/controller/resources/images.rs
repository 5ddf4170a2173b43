//! Which images a TrustyAIService's pods run.
//!
//! Precedence, first non-empty wins (the order, implemented exactly):
//!
//! | | TrustyAI service | kube-rbac-proxy |
//! |---|---|---|
//! | 1 | env `RELATED_IMAGE_ODH_TRUSTYAI_SERVICE_PY_IMAGE` | env `RELATED_IMAGE_ODH_KUBE_RBAC_PROXY_IMAGE` |
//! | 2 | `spec.image`, only when allowed | — |
//! | 3 | operator ConfigMap `trustyaiServiceImage` | operator ConfigMap `kube-rbac-proxy` |
//! | 4 | operator ConfigMap `trustyaiServiceImageName` + `trustyaiServiceImageTag` (ADR-0003) | — |
//! | 5 | [`DEFAULT_SERVICE_IMAGE`] | [`DEFAULT_KUBE_RBAC_PROXY_IMAGE`] |
//!
//! The env variables come first because they are how a release pins the images it was tested
//! with (the Go operator's manifests always set them). Consequently `spec.image` only takes
//! effect where the operator runs without the service image env variable. Unlike the Go
//! operator, a missing ConfigMap is not an error: the built-in defaults apply.
//!
//! The process environment and the ConfigMap are read by the caller and passed in, so the
//! resolution stays a pure function.

use std::collections::BTreeMap;

use trustyai_crds::contract::config_map;

use super::non_empty;

/// The TrustyAI service image when nothing else names one: the version the Go operator's
/// component metadata names (a floating tag would roll every instance when it is re-pushed).
pub const DEFAULT_SERVICE_IMAGE: &str = "quay.io/trustyai/trustyai-service:v0.28.0";
/// The kube-rbac-proxy image when nothing else names one.
pub const DEFAULT_KUBE_RBAC_PROXY_IMAGE: &str =
    "quay.io/opendatahub/odh-kube-rbac-proxy:odh-stable";

/// The repositories of the older Java (Quarkus) TrustyAI service, which serves its API and
/// `/q/metrics` on 8080 (the current Python service serves them only on its API listeners).
pub const JAVA_SERVICE_REPOSITORIES: [&str; 2] = [
    "quay.io/trustyai/trustyai-service",
    "quay.io/opendatahub/trustyai-service",
];

/// Whether `image` is the Java TrustyAI service: its repository (without tag or digest) is one
/// of [`JAVA_SERVICE_REPOSITORIES`].
pub fn is_java_service(image: &str) -> bool {
    let without_digest = image.split_once('@').map_or(image, |(name, _)| name);
    // A tag follows the last ':' after the last '/' (a ':' before it is a registry's port).
    let last_slash = without_digest.rfind('/').unwrap_or(0);
    let repository = match without_digest[last_slash..].find(':') {
        Some(colon) => &without_digest[..last_slash + colon],
        None => without_digest,
    };
    JAVA_SERVICE_REPOSITORIES.contains(&repository)
}

/// Everything the images can come from.
#[derive(Debug, Clone, Copy, Default)]
pub struct ImageSources<'a> {
    /// Value of `RELATED_IMAGE_ODH_TRUSTYAI_SERVICE_PY_IMAGE` in the operator's environment.
    pub env_service_image: Option<&'a str>,
    /// Value of `RELATED_IMAGE_ODH_KUBE_RBAC_PROXY_IMAGE` in the operator's environment.
    pub env_kube_rbac_proxy_image: Option<&'a str>,
    /// The TrustyAIService's `spec.image`.
    pub spec_image: Option<&'a str>,
    /// Whether `spec.image` passed the allowed-prefix check (decided by the caller, from the
    /// operator ConfigMap's `allowedImagePrefixes`).
    pub spec_image_allowed: bool,
    /// `data` of the operator ConfigMap `trustyai-service-operator-config`, if it exists.
    pub config_map: Option<&'a BTreeMap<String, String>>,
}

/// Where a resolved image came from (for logs and events).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImageSource {
    /// An operator environment variable.
    Environment,
    /// The TrustyAIService's `spec.image`.
    Spec,
    /// The operator ConfigMap's full image reference key.
    ConfigMap,
    /// The operator ConfigMap's `trustyaiServiceImageName` and `trustyaiServiceImageTag`.
    ConfigMapNameAndTag,
    /// The operator's built-in default.
    Default,
    /// The image the pods already run, kept by [`crate::controller::image_upgrade`].
    Running,
}

/// An image reference and its origin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedImage {
    /// The image reference.
    pub image: String,
    /// Where it came from.
    pub source: ImageSource,
}

/// The images of both containers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Images {
    /// The `trustyai-service` container's image.
    pub service: ResolvedImage,
    /// The `kube-rbac-proxy` container's image.
    pub kube_rbac_proxy: ResolvedImage,
}

/// Resolves both images from `sources` in the documented order.
pub fn resolve(sources: &ImageSources<'_>) -> Images {
    Images {
        service: resolve_service(sources),
        kube_rbac_proxy: resolve_kube_rbac_proxy(sources),
    }
}

fn resolve_service(sources: &ImageSources<'_>) -> ResolvedImage {
    let cm = |key: &str| config_value(sources.config_map, key);
    let spec = non_empty_trimmed(sources.spec_image).filter(|_| sources.spec_image_allowed);
    let candidates = [
        (
            non_empty_trimmed(sources.env_service_image).map(str::to_owned),
            ImageSource::Environment,
        ),
        (spec.map(str::to_owned), ImageSource::Spec),
        (
            cm(config_map::SERVICE_IMAGE).map(str::to_owned),
            ImageSource::ConfigMap,
        ),
        (
            name_and_tag(
                cm(config_map::SERVICE_IMAGE_NAME),
                cm(config_map::SERVICE_IMAGE_TAG),
            ),
            ImageSource::ConfigMapNameAndTag,
        ),
    ];
    first(candidates, DEFAULT_SERVICE_IMAGE)
}

fn resolve_kube_rbac_proxy(sources: &ImageSources<'_>) -> ResolvedImage {
    let candidates = [
        (
            non_empty_trimmed(sources.env_kube_rbac_proxy_image).map(str::to_owned),
            ImageSource::Environment,
        ),
        (
            config_value(sources.config_map, config_map::KUBE_RBAC_PROXY_IMAGE).map(str::to_owned),
            ImageSource::ConfigMap,
        ),
    ];
    first(candidates, DEFAULT_KUBE_RBAC_PROXY_IMAGE)
}

fn first<const N: usize>(
    candidates: [(Option<String>, ImageSource); N],
    default: &str,
) -> ResolvedImage {
    candidates
        .into_iter()
        .find_map(|(image, source)| image.map(|image| ResolvedImage { image, source }))
        .unwrap_or_else(|| ResolvedImage {
            image: default.to_owned(),
            source: ImageSource::Default,
        })
}

fn config_value<'a>(data: Option<&'a BTreeMap<String, String>>, key: &str) -> Option<&'a str> {
    non_empty_trimmed(data.and_then(|d| d.get(key)).map(String::as_str))
}

/// Surrounding whitespace is dropped: ConfigMaps made from `params.env` files or YAML block
/// scalars easily end in a newline, which would make an invalid image reference.
fn non_empty_trimmed(value: Option<&str>) -> Option<&str> {
    non_empty(value.map(str::trim))
}

/// ADR-0003's split reference: `name:tag`, or `name@tag` when the tag is a digest
/// (`sha256:…`). A name without a tag is used as it is; a tag without a name is ignored.
fn name_and_tag(name: Option<&str>, tag: Option<&str>) -> Option<String> {
    let name = name?;
    Some(match tag {
        Some(tag) if tag.contains(':') => format!("{name}@{tag}"),
        Some(tag) => format!("{name}:{tag}"),
        None => name.to_owned(),
    })
}

#[cfg(test)]
mod tests {

    #[test]
    fn the_java_service_is_known_by_its_repository() {
        assert!(is_java_service("quay.io/trustyai/trustyai-service:v0.28.0"));
        assert!(is_java_service(
            "quay.io/opendatahub/trustyai-service:latest"
        ));
        assert!(is_java_service(
            "quay.io/trustyai/trustyai-service@sha256:0000000000000000000000000000000000000000000000000000000000000000"
        ));
        assert!(!is_java_service(
            "quay.io/opendatahub/odh-trustyai-service-py:odh-stable"
        ));
        assert!(!is_java_service("localhost/trustyai-service:abc"));
        assert!(!is_java_service(
            "registry.example.com:5000/trustyai-service:1"
        ));
    }
    use super::*;

    fn cm(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn service(sources: ImageSources<'_>) -> (String, ImageSource) {
        let r = resolve(&sources).service;
        (r.image, r.source)
    }

    #[test]
    fn service_image_precedence_table() {
        let full = cm(&[
            ("trustyaiServiceImage", "cm/full:1"),
            ("trustyaiServiceImageName", "cm/split"),
            ("trustyaiServiceImageTag", "2"),
        ]);
        let split = cm(&[
            ("trustyaiServiceImageName", "cm/split"),
            ("trustyaiServiceImageTag", "2"),
        ]);
        let all = ImageSources {
            env_service_image: Some("env/svc:1"),
            spec_image: Some("spec/svc:1"),
            spec_image_allowed: true,
            config_map: Some(&full),
            ..ImageSources::default()
        };
        let table: Vec<(ImageSources<'_>, (&str, ImageSource))> = vec![
            (all, ("env/svc:1", ImageSource::Environment)),
            (
                ImageSources {
                    env_service_image: None,
                    ..all
                },
                ("spec/svc:1", ImageSource::Spec),
            ),
            (
                ImageSources {
                    env_service_image: Some(""),
                    ..all
                },
                ("spec/svc:1", ImageSource::Spec),
            ),
            (
                ImageSources {
                    env_service_image: None,
                    spec_image_allowed: false,
                    ..all
                },
                ("cm/full:1", ImageSource::ConfigMap),
            ),
            (
                ImageSources {
                    env_service_image: None,
                    spec_image: None,
                    ..all
                },
                ("cm/full:1", ImageSource::ConfigMap),
            ),
            (
                ImageSources {
                    env_service_image: None,
                    spec_image: None,
                    config_map: Some(&split),
                    ..all
                },
                ("cm/split:2", ImageSource::ConfigMapNameAndTag),
            ),
            (
                ImageSources {
                    env_service_image: None,
                    spec_image: None,
                    config_map: None,
                    ..all
                },
                (DEFAULT_SERVICE_IMAGE, ImageSource::Default),
            ),
            (
                ImageSources::default(),
                (DEFAULT_SERVICE_IMAGE, ImageSource::Default),
            ),
        ];
        for (i, (sources, (image, source))) in table.into_iter().enumerate() {
            assert_eq!(service(sources), (image.to_owned(), source), "row {i}");
        }
    }

    #[test]
    fn split_reference_forms() {
        assert_eq!(name_and_tag(Some("q/s"), Some("v1")), Some("q/s:v1".into()));
        assert_eq!(
            name_and_tag(Some("q/s"), Some("sha256:abc")),
            Some("q/s@sha256:abc".into())
        );
        assert_eq!(name_and_tag(Some("q/s"), None), Some("q/s".into()));
        assert_eq!(name_and_tag(None, Some("v1")), None);
        let tag_only = cm(&[("trustyaiServiceImageTag", "v1")]);
        assert_eq!(
            service(ImageSources {
                config_map: Some(&tag_only),
                ..ImageSources::default()
            }),
            (DEFAULT_SERVICE_IMAGE.to_owned(), ImageSource::Default)
        );
    }

    #[test]
    fn surrounding_whitespace_in_image_values_is_ignored() {
        let padded = cm(&[
            ("trustyaiServiceImage", " cm/full:1\n"),
            ("kube-rbac-proxy", "  "),
        ]);
        let images = resolve(&ImageSources {
            env_service_image: Some("   "),
            config_map: Some(&padded),
            ..ImageSources::default()
        });
        assert_eq!(images.service.image, "cm/full:1");
        assert_eq!(images.kube_rbac_proxy.image, DEFAULT_KUBE_RBAC_PROXY_IMAGE);
        assert_eq!(images.kube_rbac_proxy.source, ImageSource::Default);
    }

    #[test]
    fn kube_rbac_proxy_precedence() {
        let data = cm(&[("kube-rbac-proxy", "cm/proxy:1")]);
        let proxy = |sources: ImageSources<'_>| {
            let r = resolve(&sources).kube_rbac_proxy;
            (r.image, r.source)
        };
        assert_eq!(
            proxy(ImageSources {
                env_kube_rbac_proxy_image: Some("env/proxy:1"),
                config_map: Some(&data),
                ..ImageSources::default()
            }),
            ("env/proxy:1".into(), ImageSource::Environment)
        );
        assert_eq!(
            proxy(ImageSources {
                config_map: Some(&data),
                spec_image: Some("spec/svc:1"),
                spec_image_allowed: true,
                ..ImageSources::default()
            }),
            ("cm/proxy:1".into(), ImageSource::ConfigMap)
        );
        assert_eq!(
            proxy(ImageSources::default()),
            (DEFAULT_KUBE_RBAC_PROXY_IMAGE.into(), ImageSource::Default)
        );
    }
}
