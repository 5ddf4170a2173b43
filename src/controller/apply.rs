//! Server-side apply of rendered objects, under the field manager `trustyai-operator` with
//! `force` (the operator is the authority on the fields it renders).
//!
//! The rendering is deterministic, so applying an unchanged object is a no-op on the API server
//! (no write, no new resourceVersion). Comparing the resourceVersion before and after the apply
//! tells whether the object was created, changed or left alone, which decides the `Normal`
//! events.

use std::fmt::Debug;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, Patch, PatchParams};
use kube::{Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::error::ReconcileError;

/// The field manager of everything this operator writes to its own objects.
pub const FIELD_MANAGER: &str = "trustyai-operator";

/// What an apply did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApplyOutcome {
    /// The object did not exist.
    Created,
    /// It existed, made by someone else (the Go operator, a previous install), without being
    /// known to this operator: the apply took it over.
    Adopted,
    /// It existed and the apply changed it.
    Changed,
    /// It was already as rendered.
    Unchanged,
}

impl ApplyOutcome {
    /// From the resourceVersions before (`None`: absent) and after the apply.
    pub fn from_versions(before: Option<&str>, after: Option<&str>) -> Self {
        match before {
            None => Self::Created,
            Some(before) if Some(before) == after => Self::Unchanged,
            Some(_) => Self::Changed,
        }
    }

    /// From the resourceVersion before (`None`: not known to exist) and the apply's answer:
    /// an object believed absent whose answer shows other field managers already existed.
    pub fn from_answer(before: Option<&str>, answer: &ObjectMeta) -> Self {
        match Self::from_versions(before, answer.resource_version.as_deref()) {
            Self::Created if written_by_others(answer) => Self::Adopted,
            outcome => outcome,
        }
    }

    /// The metric label.
    pub fn label(self) -> &'static str {
        match self {
            Self::Created => "created",
            Self::Adopted => "adopted",
            Self::Changed => "changed",
            Self::Unchanged => "unchanged",
        }
    }
}

/// An applied object and what the apply did.
#[derive(Debug, Clone)]
pub struct Applied<K> {
    /// The object as the API server returned it.
    pub object: K,
    /// What changed.
    pub outcome: ApplyOutcome,
}

/// The patch parameters of every apply.
pub fn params() -> PatchParams {
    PatchParams::apply(FIELD_MANAGER).force()
}

/// The patch parameters of JSON and merge patches (wiring, finalizers, status), so they too
/// are attributed to [`FIELD_MANAGER`].
pub fn update_params() -> PatchParams {
    PatchParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PatchParams::default()
    }
}

/// Applies `object` whose live resourceVersion (`None`: absent) the caller already read;
/// `taking_over`: the live object is another's, which this apply takes over (a change is then
/// [`ApplyOutcome::Adopted`], in the log as in the event).
pub async fn apply_taking_over<K>(
    api: &Api<K>,
    kind: &'static str,
    object: &K,
    live_resource_version: Option<String>,
    taking_over: bool,
) -> Result<Applied<K>, ReconcileError>
where
    K: Resource + Clone + Debug + Serialize + DeserializeOwned,
{
    let name = object.name_any();
    let applied = api
        .patch(&name, &params(), &Patch::Apply(object))
        .await
        .map_err(ReconcileError::kube("applying", kind, &name))?;
    let outcome = match ApplyOutcome::from_answer(live_resource_version.as_deref(), applied.meta())
    {
        ApplyOutcome::Changed if taking_over => ApplyOutcome::Adopted,
        outcome => outcome,
    };
    if outcome != ApplyOutcome::Unchanged {
        tracing::info!(kind, name, ?outcome, "applied");
    }
    Ok(Applied {
        object: applied,
        outcome,
    })
}

/// Whether this operator's field manager has applied the object (server-side apply records it
/// in `managedFields`; every build of this operator applies under [`FIELD_MANAGER`]).
pub fn applied_by_us(meta: &ObjectMeta) -> bool {
    meta.managed_fields.iter().flatten().any(|m| {
        m.manager.as_deref() == Some(FIELD_MANAGER) && m.operation.as_deref() == Some("Apply")
    })
}

/// Whether a field manager other than this operator's wrote to the object.
fn written_by_others(meta: &ObjectMeta) -> bool {
    meta.managed_fields.iter().flatten().any(|m| {
        m.manager
            .as_deref()
            .is_some_and(|manager| !manager.starts_with(FIELD_MANAGER))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;

    #[test]
    fn outcome_from_resource_versions() {
        assert_eq!(
            ApplyOutcome::from_versions(None, Some("1")),
            ApplyOutcome::Created
        );
        assert_eq!(
            ApplyOutcome::from_versions(Some("1"), Some("1")),
            ApplyOutcome::Unchanged
        );
        assert_eq!(
            ApplyOutcome::from_versions(Some("1"), Some("2")),
            ApplyOutcome::Changed
        );
    }

    #[test]
    fn an_object_believed_absent_but_written_by_others_was_adopted() {
        let answer = |managers: &[&str]| ObjectMeta {
            resource_version: Some("5".to_owned()),
            managed_fields: Some(
                managers
                    .iter()
                    .map(|m| ManagedFieldsEntry {
                        manager: Some((*m).to_owned()),
                        ..ManagedFieldsEntry::default()
                    })
                    .collect(),
            ),
            ..ObjectMeta::default()
        };
        assert_eq!(
            ApplyOutcome::from_answer(None, &answer(&[FIELD_MANAGER])),
            ApplyOutcome::Created
        );
        assert_eq!(
            ApplyOutcome::from_answer(None, &answer(&[FIELD_MANAGER, "manager"])),
            ApplyOutcome::Adopted
        );
        assert_eq!(
            ApplyOutcome::from_answer(Some("5"), &answer(&[FIELD_MANAGER, "manager"])),
            ApplyOutcome::Unchanged
        );
    }
}
