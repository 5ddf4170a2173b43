//! The kinds' lifecycles where garbage collection does not reach: at a TrustyAIService's
//! deletion (the finalizer) and at uninstall, one loop over [`Kind::ALL`] each.
//!
//! Owned children go with their TrustyAIService by themselves. A cluster-scoped child cannot
//! have a namespaced owner, so the finalizer deletes it; data (the claim) follows the
//! retention the spec states at the deletion.

use kube::api::{Api, DynamicObject, ListParams};
use kube::{Client, ResourceExt};
use trustyai_crds::TrustyAIService;
use trustyai_crds::contract::owner_labels;

use super::super::context::Context;
use super::super::error::ReconcileError;
use super::super::resources::labels;
use super::declaration::{Kind, Lifecycle};
use super::delete_ignoring_absent;

/// The cluster-scoped kinds, with the name each is made under for a TrustyAIService.
fn cluster_scoped() -> impl Iterator<Item = (Kind, fn(&str, &str) -> String)> {
    Kind::ALL
        .iter()
        .filter_map(|&kind| match kind.declaration().lifecycle {
            Lifecycle::ClusterScoped { name } => Some((kind, name)),
            _ => None,
        })
}

fn cluster_api(client: &Client, kind: Kind) -> Api<DynamicObject> {
    Api::all_with(client.clone(), &(kind.declaration().watch.resource)())
}

/// Deletes the cluster-scoped children of `service`: by the name each is made under, and any
/// other carrying its owner labels.
pub async fn delete_cluster_scoped(
    ctx: &Context,
    service: &TrustyAIService,
) -> Result<(), ReconcileError> {
    let (cr, ns) = (service.name_any(), service.namespace().unwrap_or_default());
    for (kind, name) in cluster_scoped() {
        let api = cluster_api(&ctx.client, kind);
        delete_ignoring_absent(&api, kind.name(), &name(&cr, &ns)).await?;
        let selector = labels::selector_string(&labels::owner(&cr, &ns));
        let labelled = api
            .list_metadata(&ListParams::default().labels(&selector))
            .await
            .map_err(ReconcileError::kube("listing", kind.name(), &cr))?;
        for object in labelled.items {
            delete_ignoring_absent(&api, kind.name(), &object.name_any()).await?;
        }
    }
    Ok(())
}

/// Applies each data kind's retention to the children of `service`, being deleted.
pub async fn settle_data(ctx: &Context, service: &TrustyAIService) -> Result<(), ReconcileError> {
    for kind in Kind::ALL {
        if let Lifecycle::Data { at_deletion } = kind.declaration().lifecycle {
            at_deletion(ctx, service).await?;
        }
    }
    Ok(())
}

/// For `uninstall`: deletes every cluster-scoped child made for any TrustyAIService, those of
/// TrustyAIServices already gone included. Returns what was deleted, as `Kind name`.
pub async fn delete_every_cluster_scoped(client: &Client) -> Result<Vec<String>, ReconcileError> {
    let mut deleted = Vec::new();
    for (kind, _) in cluster_scoped() {
        let api = cluster_api(client, kind);
        let labelled = api
            .list_metadata(&ListParams::default().labels(owner_labels::NAME))
            .await
            .map_err(ReconcileError::kube("listing", kind.name(), "all"))?;
        for object in labelled.items {
            let name = object.name_any();
            if delete_ignoring_absent(&api, kind.name(), &name).await? {
                deleted.push(format!("{} {name}", kind.name()));
            }
        }
    }
    Ok(deleted)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_finalizer_deletes_the_proxy_binding_by_its_name() {
        let kinds: Vec<_> = cluster_scoped()
            .map(|(kind, name)| (kind, name("tas", "models")))
            .collect();
        assert_eq!(
            kinds,
            [(
                Kind::ClusterRoleBinding,
                "tas-models-proxy-rolebinding".to_owned()
            )]
        );
    }

    #[test]
    fn the_finalizer_finds_other_cluster_scoped_children_by_their_owner_labels() {
        assert_eq!(
            labels::selector_string(&labels::owner("tas", "models")),
            "trustyai.opendatahub.io/owner-name=tas,trustyai.opendatahub.io/owner-namespace=models"
        );
    }
}
