//! The admission webhook registrations. The Helm chart renders them; in local mode
//! (`--create-webhook-configurations`, used by `make run` and the tests) the operator applies
//! them itself. Either way they match only TrustyAIService, so `failurePolicy: Fail` can never
//! block anything else in the cluster.

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhook, MutatingWebhookConfiguration, RuleWithOperations, ValidatingWebhook,
    ValidatingWebhookConfiguration, WebhookClientConfig,
};
use kube::Client;
use kube::api::{Api, ObjectMeta, Patch, PatchParams};
use trustyai_certs::ca_bundle_patches::WebhookEndpoint;
use trustyai_crds::contract::{GROUP, PLURAL, STORAGE_VERSION};
use trustyai_webhooks::routes;

/// Field manager of the registrations (not of their caBundle, which the publisher owns).
pub const FIELD_MANAGER: &str = "trustyai-operator";
/// Webhook entry name in the ValidatingWebhookConfiguration.
pub const VALIDATING_WEBHOOK: &str = "validate.trustyaiservices.trustyai.opendatahub.io";
/// Webhook entry name in the MutatingWebhookConfiguration.
pub const MUTATING_WEBHOOK: &str = "default.trustyaiservices.trustyai.opendatahub.io";

/// The registration's client config for `path` (no caBundle: the publisher owns it).
fn client_config(endpoint: &WebhookEndpoint, path: &str) -> WebhookClientConfig {
    endpoint.client_config(Some(path.to_owned())).into()
}

fn rules() -> Vec<RuleWithOperations> {
    vec![RuleWithOperations {
        api_groups: Some(vec![GROUP.into()]),
        api_versions: Some(vec![STORAGE_VERSION.into()]),
        operations: Some(vec!["CREATE".into(), "UPDATE".into()]),
        resources: Some(vec![PLURAL.into()]),
        scope: Some("Namespaced".into()),
    }]
}

/// The ValidatingWebhookConfiguration.
pub fn validating(
    name: &str,
    endpoint: &WebhookEndpoint,
    timeout_seconds: i32,
) -> ValidatingWebhookConfiguration {
    ValidatingWebhookConfiguration {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        webhooks: Some(vec![ValidatingWebhook {
            name: VALIDATING_WEBHOOK.into(),
            admission_review_versions: vec!["v1".into()],
            client_config: client_config(endpoint, routes::VALIDATE),
            failure_policy: Some("Fail".into()),
            match_policy: Some("Equivalent".into()),
            rules: Some(rules()),
            side_effects: "None".into(),
            timeout_seconds: Some(timeout_seconds),
            ..Default::default()
        }]),
    }
}

/// The MutatingWebhookConfiguration.
pub fn mutating(
    name: &str,
    endpoint: &WebhookEndpoint,
    timeout_seconds: i32,
) -> MutatingWebhookConfiguration {
    MutatingWebhookConfiguration {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        webhooks: Some(vec![MutatingWebhook {
            name: MUTATING_WEBHOOK.into(),
            admission_review_versions: vec!["v1".into()],
            client_config: client_config(endpoint, routes::MUTATE),
            failure_policy: Some("Fail".into()),
            match_policy: Some("Equivalent".into()),
            reinvocation_policy: Some("Never".into()),
            rules: Some(rules()),
            side_effects: "None".into(),
            timeout_seconds: Some(timeout_seconds),
            ..Default::default()
        }]),
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
    let params = PatchParams::apply(FIELD_MANAGER).force();
    let v: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    v.patch(
        validating_name,
        &params,
        &Patch::Apply(validating(validating_name, endpoint, timeout_seconds)),
    )
    .await?;
    let m: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    m.patch(
        mutating_name,
        &params,
        &Patch::Apply(mutating(mutating_name, endpoint, timeout_seconds)),
    )
    .await?;
    Ok(())
}
