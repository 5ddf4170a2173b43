//! The admission webhook registrations. The Helm chart renders them; in local mode
//! (`--create-webhook-configurations`, used by `make run` and the tests) the operator applies
//! them itself. Either way they match only TrustyAIService and TrustyAIMetric (one entry per
//! registration, one rule per resource), so `failurePolicy: Fail` can never block anything else
//! in the cluster.

use k8s_openapi::ClusterResourceScope;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhook, MutatingWebhookConfiguration, RuleWithOperations, ValidatingWebhook,
    ValidatingWebhookConfiguration, WebhookClientConfig,
};
use kube::api::{Api, ObjectMeta, Patch, PatchParams};
use kube::{Client, Resource};
use serde::Serialize;
use serde::de::DeserializeOwned;
use trustyai_certs::ca_bundle_patches::WebhookEndpoint;
use trustyai_crds::contract::{GROUP, PLURAL, STORAGE_VERSION};
use trustyai_webhooks::routes;

/// Field manager of the registrations (not of their caBundle, which the publisher owns).
pub const FIELD_MANAGER: &str = "trustyai-operator";
/// One of the operator's admission webhooks: the path its server answers on, the entry name
/// the API server reports in every refusal of it, and how its registration reaches the server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AdmissionWebhook {
    /// Refuses what breaks a rule (all violations at once) and gives warnings.
    Validating,
    /// Adds the defaults; also refuses what breaks a rule, before the CRD's own checks run.
    Mutating,
}

impl AdmissionWebhook {
    /// The request path on the webhook server (the router serves the same constant).
    pub const fn path(self) -> &'static str {
        match self {
            Self::Validating => routes::VALIDATE,
            Self::Mutating => routes::MUTATE,
        }
    }

    /// The webhook's entry name in its registration.
    pub const fn entry_name(self) -> &'static str {
        match self {
            Self::Validating => "validate.trustyaiservices.trustyai.opendatahub.io",
            Self::Mutating => "default.trustyaiservices.trustyai.opendatahub.io",
        }
    }

    /// The registration's client config (no caBundle: the publisher owns it).
    fn client_config(self, endpoint: &WebhookEndpoint) -> WebhookClientConfig {
        endpoint.client_config(Some(self.path().to_owned())).into()
    }
}

/// The TrustyAIMetric's resource name and its one version, which its rule matches.
pub const METRIC_PLURAL: &str = "trustyaimetrics";
/// See [`METRIC_PLURAL`].
pub const METRIC_VERSION: &str = "v1alpha1";

/// The resources both webhooks admit. The entries keep their TrustyAIService names (the chart,
/// the caBundle publisher and the API server's refusals know them by those); TrustyAIMetric is
/// one more rule on the same entries, routed by the server on the review's resource.
fn rules() -> Vec<RuleWithOperations> {
    let rule = |version: &str, plural: &str| RuleWithOperations {
        api_groups: Some(vec![GROUP.into()]),
        api_versions: Some(vec![version.into()]),
        operations: Some(vec!["CREATE".into(), "UPDATE".into()]),
        resources: Some(vec![plural.into()]),
        scope: Some("Namespaced".into()),
    };
    vec![
        rule(STORAGE_VERSION, PLURAL),
        rule(METRIC_VERSION, METRIC_PLURAL),
    ]
}

/// `ValidatingWebhook` and `MutatingWebhook` are two k8s-openapi types with the same fields
/// (the mutating one has more); both registrations set those fields alike, so one literal
/// serves both, with the extra `$field: $value`s after the shared ones.
macro_rules! entry {
    (
        $entry:ident, $webhook:expr, $endpoint:expr, $timeout_seconds:expr
        $(, $field:ident: $value:expr)*
    ) => {
        $entry {
            name: $webhook.entry_name().into(),
            admission_review_versions: vec!["v1".into()],
            client_config: $webhook.client_config($endpoint),
            failure_policy: Some("Fail".into()),
            match_policy: Some("Equivalent".into()),
            $($field: $value,)*
            rules: Some(rules()),
            side_effects: "None".into(),
            timeout_seconds: Some($timeout_seconds),
            ..Default::default()
        }
    };
}

/// The metadata of a registration: a cluster-scoped object known by its name alone.
fn named(name: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.into()),
        ..Default::default()
    }
}

/// The ValidatingWebhookConfiguration.
pub fn validating(
    name: &str,
    endpoint: &WebhookEndpoint,
    timeout_seconds: i32,
) -> ValidatingWebhookConfiguration {
    ValidatingWebhookConfiguration {
        metadata: named(name),
        webhooks: Some(vec![entry!(
            ValidatingWebhook,
            AdmissionWebhook::Validating,
            endpoint,
            timeout_seconds
        )]),
    }
}

/// The MutatingWebhookConfiguration.
pub fn mutating(
    name: &str,
    endpoint: &WebhookEndpoint,
    timeout_seconds: i32,
) -> MutatingWebhookConfiguration {
    MutatingWebhookConfiguration {
        metadata: named(name),
        webhooks: Some(vec![entry!(
            MutatingWebhook,
            AdmissionWebhook::Mutating,
            endpoint,
            timeout_seconds,
            reinvocation_policy: Some("Never".into())
        )]),
    }
}

/// Applies both registrations (server-side apply).
pub async fn apply(
    client: &Client,
    validating_name: &str,
    mutating_name: &str,
    endpoint: &WebhookEndpoint,
    timeout_seconds: i32,
) -> Result<(), kube::Error> {
    let validating_config = validating(validating_name, endpoint, timeout_seconds);
    apply_registration(client, validating_name, validating_config).await?;
    let mutating_config = mutating(mutating_name, endpoint, timeout_seconds);
    apply_registration(client, mutating_name, mutating_config).await
}

/// Server-side applies the registration `name`, taking over the fields it sets from any other
/// manager (a chart that rendered them first).
async fn apply_registration<K>(
    client: &Client,
    name: &str,
    registration: K,
) -> Result<(), kube::Error>
where
    K: Resource<DynamicType = (), Scope = ClusterResourceScope>
        + Clone
        + DeserializeOwned
        + Serialize
        + std::fmt::Debug,
{
    let params = PatchParams::apply(FIELD_MANAGER).force();
    Api::<K>::all(client.clone())
        .patch(name, &params, &Patch::Apply(registration))
        .await?;
    Ok(())
}
