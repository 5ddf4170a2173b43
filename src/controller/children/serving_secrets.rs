//! The serving certificate Secrets `<cr>-tls` and `<cr>-internal`, issued from the operand CA
//! where no service-ca operator issues them (it does on OpenShift, from the Services'
//! annotations). The Secret watch also serves the database credentials check, so it covers
//! every Secret, metadata only: the operator never caches Secret data.
//!
//! They go through the one apply path with two hooks. Their rendering reads the operand CA and
//! holds its trust bundle, so a new bundle is a new rendering; the CA's next step is when the
//! reconcile looks again. Their adaptation to the live Secret (read whole, as no cache holds
//! its data) keeps a good certificate until it is due, rewrites the bundle of one that stands,
//! issues one otherwise, and leaves a Secret made by someone else alone. A Secret kept or
//! issued is skipped without a request until it is due, as long as neither it nor the bundle
//! changes.
//!
//! What such a Secret holds and when it is re-issued is `trustyai_certs::operand_serving`'s;
//! which Secrets a TrustyAIService has and their metadata (owner, labels, the issued-by marker)
//! are decided here.

use std::collections::BTreeMap;

use futures::future::BoxFuture;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::api::{DynamicObject, ObjectMeta};
use trustyai_certs::ServiceNames;
use trustyai_certs::operand_ca::OperandTrust;
use trustyai_certs::operand_serving::{
    self, ISSUED_BY_ANNOTATION, OperandServingError, SecretDecision,
};
use trustyai_certs::secret_layout::{CA_CRT, SECRET_TYPE};
use trustyai_certs::time::OffsetDateTime;

use super::super::apply;
use super::super::error::ReconcileError;
use super::super::resources::{Instance, labels, names};
use super::cache::Projection;
use super::declaration::{
    Adapted, Declaration, Lifecycle, Mapping, Rendered, Renderer, Rendering, WatchSpec,
};
use super::memory::Tracking;
use super::{RenderInputs, built_in, typed, wanted};
use crate::controller::context::Context;

/// The declaration.
pub const DECLARATION: Declaration = Declaration {
    watch: WatchSpec {
        resource: built_in::<Secret>,
        namespaced: true,
        selector: None,
        served: None,
        mapping: Mapping::SecretReaders,
        tracking: Tracking::ResourceVersion,
        projection: Projection::NONE,
    },
    applies_with: |a| !a.service_ca(),
    lifecycle: Lifecycle::Credentials,
    applying: Rendered {
        render: Renderer::Reading(render),
        keep_live: None,
        must_replace: None,
        prepare_live: None,
        on_refused: None,
        adapt_to_live: Some(issue_or_keep),
    },
};

/// The operand CA's trust: from memory until it changes by itself.
async fn trust(ctx: &Context) -> Result<OperandTrust, ReconcileError> {
    Ok(ctx
        .operand_ca
        .get(&ctx.client)
        .await
        .map_err(OperandServingError::from)?)
}

/// Both Secrets as far as they are rendered; the CA's own next step (a rotation falling due,
/// or ending) is when they are looked at again, since their bundle changes then.
fn render<'a>(
    ctx: &'a Context,
    instance: &'a Instance<'a>,
    _: &'a RenderInputs<'a>,
) -> BoxFuture<'a, Result<Rendering, ReconcileError>> {
    Box::pin(async move {
        let trust = trust(ctx).await?;
        let wanted = secret_names(instance.name())
            .iter()
            .map(|name| wanted(&rendered(instance, name, &trust)))
            .collect::<Result<_, _>>()?;
        Ok(Rendering {
            wanted,
            changes_at: Some(trust.changes_at()),
        })
    })
}

/// The Secret `secret_name` of `instance` as far as it is rendered: its metadata, its type and
/// the trust bundle of `trust`. The certificate and key are [`issue_or_keep`]'s.
fn rendered(instance: &Instance<'_>, secret_name: &str, trust: &OperandTrust) -> Secret {
    Secret {
        metadata: metadata(instance, secret_name),
        type_: Some(SECRET_TYPE.to_owned()),
        data: Some(BTreeMap::from([(
            CA_CRT.to_owned(),
            ByteString(trust.bundle_pem.as_bytes().to_vec()),
        )])),
        ..Secret::default()
    }
}

/// Judges the live Secret (`None`: absent) against the operand CA: keeps a good one until it is
/// due, rewrites the bundle of one whose certificate stands, issues one otherwise, and leaves
/// one made by someone else alone.
fn issue_or_keep<'a>(
    ctx: &'a Context,
    instance: &'a Instance<'a>,
    desired: DynamicObject,
    live: Option<&'a DynamicObject>,
) -> BoxFuture<'a, Result<Adapted, ReconcileError>> {
    Box::pin(async move {
        let secret_name = desired.name_any();
        let Some((_, service_name)) = serving_secrets(instance.name())
            .into_iter()
            .find(|(secret, _)| *secret == secret_name)
        else {
            // The rendering names only its Secrets: nothing else is this hook's to issue.
            return Ok(Adapted::Foreign);
        };
        // The trust the rendering held, from memory (unless it changed by itself since: the
        // next reconcile's rendering then differs, and the Secret is judged again).
        let trust = trust(ctx).await?;
        let live: Option<Secret> = live.cloned().map(typed).transpose()?;
        let names = ServiceNames::new(&service_name, instance.namespace());
        let now = OffsetDateTime::now_utc();
        let metadata = desired.metadata;
        Ok(
            match operand_serving::judge_secret(live.as_ref(), &trust, &names, now) {
                SecretDecision::Foreign => Adapted::Foreign,
                SecretDecision::Keep { renew_at } => Adapted::Keep {
                    valid_until: renew_at,
                },
                SecretDecision::UpdateBundle { renew_at } => {
                    // Only a live Secret's bundle is judged out of date.
                    let Some(live) = live else {
                        return Ok(Adapted::Foreign);
                    };
                    tracing::info!(secret = %secret_name, "updating the operand CA bundle");
                    Adapted::Issue {
                        object: dynamic(&operand_serving::with_bundle(metadata, &live, &trust))?,
                        reason: "the operand CA bundle changed".to_owned(),
                        valid_until: renew_at,
                    }
                }
                SecretDecision::Issue(reason) => {
                    tracing::info!(secret = %secret_name, %reason, "issuing an operand certificate");
                    let lifetimes = *ctx.operand_ca.lifetimes();
                    let issued = operand_serving::issue(&trust, &names, &lifetimes, now).await?;
                    let secret = operand_serving::reissued_secret(
                        metadata,
                        issued.keyed,
                        &trust,
                        live.as_ref(),
                        now,
                    );
                    // A bundle that keeps a retired CA for the overlap is looked at again when
                    // that ends, which the certificate alone does not say.
                    let valid_until =
                        operand_serving::looked_at_again(&secret, &trust, &names, now)
                            .map_or(issued.renew_at, |at| at.min(issued.renew_at));
                    Adapted::Issue {
                        object: dynamic(&secret)?,
                        reason: reason.to_string(),
                        valid_until,
                    }
                }
            },
        )
    })
}

/// `secret` as the apply path's object.
fn dynamic(secret: &Secret) -> Result<Box<DynamicObject>, ReconcileError> {
    wanted(secret).map(|w| Box::new(w.object))
}

/// The names of the serving certificate Secrets of the TrustyAIService `cr`.
pub fn secret_names(cr: &str) -> [String; 2] {
    serving_secrets(cr).map(|(secret, _)| secret)
}

/// The two Secrets of a TrustyAIService `cr`: (Secret name, Service it serves).
fn serving_secrets(cr: &str) -> [(String, String); 2] {
    [
        (names::tls(cr), names::tls(cr)),
        (names::internal(cr), names::workload(cr)),
    ]
}

/// The metadata of the Secret `secret_name` of `instance`: owned by it (so it goes with it),
/// labelled as its children are, and marked as this operator's to re-issue.
fn metadata(instance: &Instance<'_>, secret_name: &str) -> ObjectMeta {
    ObjectMeta {
        annotations: Some(BTreeMap::from([(
            ISSUED_BY_ANNOTATION.to_owned(),
            apply::FIELD_MANAGER.to_owned(),
        )])),
        ..instance.owned_meta(secret_name.to_owned(), labels::metadata(instance))
    }
}

#[cfg(test)]
#[path = "serving_secrets_tests.rs"]
mod apply_tests;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::test_support::pvc_instance;

    #[test]
    fn issued_secrets_are_owned_by_the_instance() {
        let instance = pvc_instance();
        let metadata = metadata(&instance, "tas-tls");
        assert_eq!(metadata.name.as_deref(), Some("tas-tls"));
        assert_eq!(
            metadata.owner_references,
            Some(vec![instance.owner_reference()])
        );
    }

    #[test]
    fn issued_secrets_are_marked_as_this_operators_to_reissue() {
        let metadata = metadata(&pvc_instance(), "tas-tls");
        assert_eq!(
            metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(ISSUED_BY_ANNOTATION))
                .map(String::as_str),
            Some(apply::FIELD_MANAGER)
        );
    }

    #[test]
    fn secret_names() {
        assert_eq!(
            serving_secrets("tas"),
            [
                ("tas-tls".to_owned(), "tas-tls".to_owned()),
                ("tas-internal".to_owned(), "tas".to_owned())
            ]
        );
    }
}
