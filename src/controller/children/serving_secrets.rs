//! The serving certificate Secrets `<cr>-tls` and `<cr>-internal`, issued from the operand CA
//! where no service-ca operator issues them (it does on OpenShift, from the Services'
//! annotations). The Secret watch also serves the database credentials check, so it covers
//! every Secret, metadata only: the operator never caches Secret data.

use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use trustyai_certs::ServiceNames;
use trustyai_certs::time::OffsetDateTime;

use super::super::apply;
use super::super::error::ReconcileError;
use super::super::operand_tls::{self, OperandTlsError, SecretDecision};
use super::super::resources::Instance;
use super::cache::Projection;
use super::changes::Changes;
use super::declaration::{Applying, Declaration, Kind, Lifecycle, Mapping, WatchSpec};
use super::memory::{Tracking, fingerprint};
use super::{Children, built_in, count};
use crate::controller::context::Context;

/// The declaration.
pub const DECLARATION: Declaration = Declaration {
    kind: Kind::Secret,
    label: "Secret",
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
        .map_err(OperandTlsError::from)?;
    let api: Api<Secret> = Api::namespaced(ctx.client.clone(), instance.namespace());
    let lifetimes = *ctx.operand_ca.lifetimes();
    let children: &Children = &ctx.children;
    let cache = children.cache(Kind::Secret);
    let mut next: Option<OffsetDateTime> = None;
    let owner = (instance.namespace().to_owned(), instance.name().to_owned());
    // A certificate found good stays good until it is due, as long as neither the Secret (its
    // resourceVersion in the cache) nor the trust bundle changed: no read, no parsing until then.
    let ca_fingerprint =
        fingerprint(&trust.bundle_pem).map_err(|source| ReconcileError::Encode {
            what: "the operand CA bundle",
            source,
        })?;
    let memory = &children.certificates;
    for (secret_name, service_name) in operand_tls::serving_secrets(instance.name()) {
        let now = OffsetDateTime::now_utc();
        let cached = cache.lookup(Some(instance.namespace()), &secret_name);
        if let Some(renew_at) =
            memory.current(&owner, "Secret", &secret_name, ca_fingerprint, &cached)
            && now < renew_at
        {
            count(ctx, "Secret", "skipped");
            next = Some(next.map_or(renew_at, |n| n.min(renew_at)));
            continue;
        }
        let live = api
            .get_opt(&secret_name)
            .await
            .map_err(ReconcileError::kube("reading", "Secret", &secret_name))?;
        let names = ServiceNames::new(&service_name, instance.namespace());
        let (secret, live_rv, renew_at, note) = match operand_tls::judge_secret(
            live.as_ref(),
            &trust,
            &names,
            now,
        ) {
            SecretDecision::Foreign => continue,
            SecretDecision::Keep { renew_at } => {
                count(ctx, "Secret", "unchanged");
                let live_rv = live
                    .as_ref()
                    .and_then(|l| l.metadata.resource_version.as_deref());
                memory.record(
                    &owner,
                    "Secret",
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
                let secret = operand_tls::with_bundle(instance, &secret_name, &live, &trust);
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
                let secret = operand_tls::issue(
                    instance,
                    &trust,
                    &lifetimes,
                    &secret_name,
                    &service_name,
                    now,
                )
                .await?;
                let mut renew_at = now + lifetimes.serving * 2 / 3;
                if let Some(retire_at) = trust.retire_at {
                    // The bundle shrinks then.
                    renew_at = renew_at.min(retire_at);
                }
                let live_rv = live.and_then(|l| l.metadata.resource_version);
                (secret, live_rv, renew_at, reason.to_string())
            }
        };
        let applied = apply::apply_after(&api, "Secret", &secret, live_rv).await?;
        count(ctx, "Secret", applied.outcome.label());
        memory.record(
            &owner,
            "Secret",
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
