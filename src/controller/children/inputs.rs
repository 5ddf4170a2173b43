//! Watches of objects that are not children but change what a TrustyAIService renders or
//! wires: they trigger reconciles and answer "is there one" without a request.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use trustyai_crds::contract::custom_ca_bundle;

use super::super::discovery::inference_service_api_resource;
use super::super::model_servers::modelmesh_selector;
use super::built_in;
use super::cache::Projection;
use super::declaration::{Mapping, WatchSpec};
use super::memory::Tracking;

/// A watched input.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WatchedInput {
    /// The custom CA bundle ConfigMaps labelled for injection: mounted when present, so their
    /// appearance changes the pods of every TrustyAIService of the namespace.
    CaBundles,
    /// ModelMesh Deployments, wired once they are ready.
    ModelMeshDeployments,
    /// KServe InferenceServices, wired to the TrustyAIServices of their namespace; a
    /// namespace without one needs no list.
    InferenceServices,
}

impl WatchedInput {
    /// Every input.
    pub const ALL: &'static [WatchedInput] = &[
        WatchedInput::CaBundles,
        WatchedInput::ModelMeshDeployments,
        WatchedInput::InferenceServices,
    ];

    /// Its watch.
    pub fn watch(self) -> WatchSpec {
        let spec = WatchSpec {
            resource: built_in::<ConfigMap>,
            namespaced: true,
            selector: None,
            served: None,
            mapping: Mapping::Namespace,
            tracking: Tracking::ResourceVersion,
            projection: Projection::NONE,
        };
        match self {
            Self::CaBundles => WatchSpec {
                selector: Some(|| format!("{}=true", custom_ca_bundle::INJECT_LABEL)),
                ..spec
            },
            Self::ModelMeshDeployments => WatchSpec {
                resource: built_in::<Deployment>,
                selector: Some(modelmesh_selector),
                ..spec
            },
            Self::InferenceServices => WatchSpec {
                resource: inference_service_api_resource,
                served: Some(|a| a.inference_services),
                ..spec
            },
        }
    }

    /// A label for logs.
    pub fn label(self) -> &'static str {
        match self {
            Self::CaBundles => "custom CA bundle ConfigMaps",
            Self::ModelMeshDeployments => "ModelMesh Deployments",
            Self::InferenceServices => "InferenceServices",
        }
    }
}
