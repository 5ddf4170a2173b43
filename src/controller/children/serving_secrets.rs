//! The serving certificate Secrets `<cr>-tls` and `<cr>-internal`, issued from the operand CA
//! where no service-ca operator issues them (it does on OpenShift, from the Services'
//! annotations). The Secret watch also serves the database credentials check, so it covers
//! every Secret, metadata only: the operator never caches Secret data.
//!
//! What such a Secret holds and when it is re-issued is `trustyai_certs::operand_serving`'s;
//! which Secrets a TrustyAIService has and their metadata (owner, labels, the issued-by marker)
//! are decided here.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::ObjectMeta;
use trustyai_certs::ServiceNames;
use trustyai_certs::operand_serving::{
    self, ISSUED_BY_ANNOTATION, OperandServingError, SecretDecision,
};
use trustyai_certs::time::OffsetDateTime;

use super::super::apply;
use super::super::error::ReconcileError;
use super::super::resources::{Instance, labels, names};
use super::cache::Projection;
use super::changes::Changes;
use super::declaration::{Applying, Declaration, Kind, Lifecycle, Mapping, WatchSpec};
use super::memory::{Owner, Tracking, fingerprint};
use super::{Children, built_in, count};
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
    applying: Applying::Issued,
};

/// Issues or keeps both Secrets; returns when one of them or the CA is next due.
pub async fn apply(
    ctx: &Context,
    instance: &Instance<'_>,
    changes: &mut Changes,
) -> Result<Option<OffsetDateTime>, ReconcileError> {
    let trust = ctx
        .operand_ca
        .get(&ctx.client)
        .await
        .map_err(OperandServingError::from)?;
    let api: Api<Secret> = Api::namespaced(ctx.client.clone(), instance.namespace());
    let lifetimes = *ctx.operand_ca.lifetimes();
    let children: &Children = &ctx.children;
    let cache = children.cache(Kind::Secret);
    let mut next: Option<OffsetDateTime> = None;
    let owner = Owner::of(instance);
    // A certificate found good stays good until it is due, as long as neither the Secret (its
    // resourceVersion in the cache) nor the trust bundle changed: no read, no parsing until then.
    let ca_fingerprint =
        fingerprint(&trust.bundle_pem).map_err(|source| ReconcileError::Encode {
            what: "the operand CA bundle",
            source,
        })?;
    let memory = &children.certificates;
    for (secret_name, service_name) in serving_secrets(instance.name()) {
        let now = OffsetDateTime::now_utc();
        let cached = cache.lookup(Some(instance.namespace()), &secret_name);
        if let Some(renew_at) =
            memory.current(&owner, Kind::Secret, &secret_name, ca_fingerprint, &cached)
            && now < renew_at
        {
            count(ctx, Kind::Secret, "skipped");
            next = Some(next.map_or(renew_at, |n| n.min(renew_at)));
            continue;
        }
        let live = api
            .get_opt(&secret_name)
            .await
            .map_err(ReconcileError::kube("reading", "Secret", &secret_name))?;
        let names = ServiceNames::new(&service_name, instance.namespace());
        let (secret, live_rv, renew_at, note) = match operand_serving::judge_secret(
            live.as_ref(),
            &trust,
            &names,
            now,
        ) {
            SecretDecision::Foreign => continue,
            SecretDecision::Keep { renew_at } => {
                count(ctx, Kind::Secret, "unchanged");
                let live_rv = live
                    .as_ref()
                    .and_then(|l| l.metadata.resource_version.as_deref());
                memory.record(
                    &owner,
                    Kind::Secret,
                    &secret_name,
                    ca_fingerprint,
                    live_rv,
                    renew_at,
                );
                next = Some(next.map_or(renew_at, |n| n.min(renew_at)));
                continue;
            }
            SecretDecision::UpdateBundle { renew_at } => {
                let Some(live) = live else {
                    continue;
                };
                tracing::info!(secret = %secret_name, "updating the operand CA bundle");
                let secret =
                    operand_serving::with_bundle(metadata(instance, &secret_name), &live, &trust);
                let live_rv = live.metadata.resource_version;
                (
                    secret,
                    live_rv,
                    renew_at,
                    "the operand CA bundle changed".to_owned(),
                )
            }
            SecretDecision::Issue(reason) => {
                tracing::info!(secret = %secret_name, %reason, "issuing an operand certificate");
                let issued = operand_serving::issue(&trust, &names, &lifetimes, now).await?;
                let secret = operand_serving::reissued_secret(
                    metadata(instance, &secret_name),
                    issued.keyed,
                    &trust,
                    live.as_ref(),
                    now,
                );
                // A bundle that keeps a retired CA for the overlap is looked at again when
                // that ends, which the certificate alone does not say.
                let renew_at = operand_serving::looked_at_again(&secret, &trust, &names, now)
                    .map_or(issued.renew_at, |at| at.min(issued.renew_at));
                let live_rv = live.and_then(|l| l.metadata.resource_version);
                (secret, live_rv, renew_at, reason.to_string())
            }
        };
        let applied = apply::apply_after(&api, "Secret", &secret, live_rv).await?;
        count(ctx, Kind::Secret, applied.outcome.label());
        memory.record(
            &owner,
            Kind::Secret,
            &secret_name,
            ca_fingerprint,
            applied.object.metadata.resource_version.as_deref(),
            renew_at,
        );
        changes.issued(&secret_name, &note);
        next = Some(next.map_or(renew_at, |n| n.min(renew_at)));
    }
    // The CA's own next step (a rotation falling due, or ending) is this service's too: its
    // bundle changes then.
    let changes_at = trust.changes_at();
    Ok(Some(next.map_or(changes_at, |n| n.min(changes_at))))
}

/// The two Secrets of a TrustyAIService `cr`: (Secret name, Service it serves).
/// The names of the serving certificate Secrets of the TrustyAIService `cr`.
pub fn secret_names(cr: &str) -> [String; 2] {
    serving_secrets(cr).map(|(secret, _)| secret)
}

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
mod tests {
    use super::*;
    use crate::controller::test_support::pvc_instance;

    #[test]
    fn issued_secrets_are_owned_and_marked() {
        let instance = pvc_instance();
        let metadata = metadata(&instance, "tas-tls");
        assert_eq!(metadata.name.as_deref(), Some("tas-tls"));
        assert_eq!(
            metadata.owner_references,
            Some(vec![instance.owner_reference()])
        );
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
