//! The finalizer `trustyai.opendatahub.io/finalizer`: what to do with a TrustyAIService's
//! `metadata.finalizers`, decided from its metadata alone.
//!
//! Unlike the Go operator, the finalizer is added only to objects that are not being deleted
//! (the API server refuses new finalizers on those), the doubled-group name some old Go
//! builds wrote ([`contract::LEGACY_FINALIZER`]) is stripped, and the cleanup is bounded in
//! time: after [`cleanup_expired`] the finalizer goes even if the cleanup keeps failing, so a
//! broken dependency never blocks a namespace deletion forever.

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use serde_json::{Value, json};
use trustyai_crds::contract;

/// What the reconcile must do about finalizers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FinalizerAction {
    /// Live object whose finalizers are as wanted: reconcile it.
    Reconcile,
    /// Live object: write these finalizers (ours added, the legacy one dropped), then
    /// reconcile.
    Set(Vec<String>),
    /// Being deleted with our (or the legacy) finalizer: clean up, then write `remaining`.
    Cleanup {
        /// The finalizers to keep (other controllers').
        remaining: Vec<String>,
    },
    /// Being deleted without our finalizer: nothing to do.
    Ignore,
}

fn ours(finalizer: &str) -> bool {
    finalizer == contract::FINALIZER || finalizer == contract::LEGACY_FINALIZER
}

/// Decides from the object's metadata.
pub fn step(meta: &ObjectMeta) -> FinalizerAction {
    let current = meta.finalizers.as_deref().unwrap_or_default();
    let others: Vec<String> = current.iter().filter(|f| !ours(f)).cloned().collect();
    if meta.deletion_timestamp.is_some() {
        return if current.iter().any(|f| ours(f)) {
            FinalizerAction::Cleanup { remaining: others }
        } else {
            FinalizerAction::Ignore
        };
    }
    let wanted: Vec<String> = others
        .into_iter()
        .chain(std::iter::once(contract::FINALIZER.to_owned()))
        .collect();
    let has_ours = current.iter().any(|f| f == contract::FINALIZER);
    let has_legacy = current.iter().any(|f| f == contract::LEGACY_FINALIZER);
    if has_ours && !has_legacy {
        FinalizerAction::Reconcile
    } else {
        FinalizerAction::Set(wanted)
    }
}

/// Without the operator: the finalizers to keep when ours (and the legacy one) are removed;
/// `None` when the object carries neither.
pub fn released(meta: &ObjectMeta) -> Option<Vec<String>> {
    let current = meta.finalizers.as_deref().unwrap_or_default();
    current
        .iter()
        .any(|f| ours(f))
        .then(|| current.iter().filter(|f| !ours(f)).cloned().collect())
}

/// The merge patch that sets `finalizers`, valid only while the object still has
/// `resource_version` (a concurrent change makes it fail with 409 Conflict rather than drop
/// someone else's finalizer).
pub fn patch(resource_version: Option<&str>, finalizers: &[String]) -> Value {
    let mut metadata = json!({ "finalizers": finalizers });
    if let Some(rv) = resource_version {
        metadata["resourceVersion"] = json!(rv);
    }
    json!({ "metadata": metadata })
}

/// Whether the cleanup has been tried for longer than `timeout` since the deletion was
/// requested, so the finalizer must go regardless.
pub fn cleanup_expired(deletion_timestamp: Option<&Time>, now: &Time, timeout: Duration) -> bool {
    let Some(requested) = deletion_timestamp else {
        return false;
    };
    let elapsed = now.0.duration_since(requested.0);
    u64::try_from(elapsed.as_secs()).is_ok_and(|seconds| seconds >= timeout.as_secs())
}

/// How long until [`cleanup_expired`] turns true (zero once it has); `None` when no deletion
/// was requested. Retries of a failing cleanup wait at most this long, so the deadline is kept
/// even when the backoff has grown longer.
pub fn until_cleanup_expires(
    deletion_timestamp: Option<&Time>,
    now: &Time,
    timeout: Duration,
) -> Option<Duration> {
    let requested = deletion_timestamp?;
    let elapsed = now.0.duration_since(requested.0).as_secs();
    let elapsed = u64::try_from(elapsed).unwrap_or(0);
    Some(Duration::from_secs(
        timeout.as_secs().saturating_sub(elapsed),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn released_keeps_other_finalizers_only() {
        let meta = |finalizers: &[&str]| ObjectMeta {
            finalizers: Some(finalizers.iter().map(|f| (*f).to_owned()).collect()),
            ..ObjectMeta::default()
        };
        assert_eq!(
            released(&meta(&[
                contract::FINALIZER,
                "other/x",
                contract::LEGACY_FINALIZER
            ])),
            Some(vec!["other/x".to_owned()])
        );
        assert_eq!(released(&meta(&["other/x"])), None);
        assert_eq!(released(&ObjectMeta::default()), None);
    }

    fn meta(finalizers: &[&str], deleting: bool) -> ObjectMeta {
        ObjectMeta {
            finalizers: Some(finalizers.iter().map(|f| (*f).to_owned()).collect()),
            deletion_timestamp: deleting
                .then(|| Time("2026-01-01T00:00:00Z".parse().expect("time"))),
            ..ObjectMeta::default()
        }
    }

    #[test]
    fn adds_ours_keeping_others() {
        assert_eq!(
            step(&meta(&[], false)),
            FinalizerAction::Set(vec![contract::FINALIZER.to_owned()])
        );
        assert_eq!(
            step(&ObjectMeta::default()),
            FinalizerAction::Set(vec![contract::FINALIZER.to_owned()])
        );
        assert_eq!(
            step(&meta(&["other/x"], false)),
            FinalizerAction::Set(vec!["other/x".to_owned(), contract::FINALIZER.to_owned()])
        );
        assert_eq!(
            step(&meta(&["other/x", contract::FINALIZER], false)),
            FinalizerAction::Reconcile
        );
    }

    #[test]
    fn strips_the_legacy_name() {
        assert_eq!(
            step(&meta(&[contract::LEGACY_FINALIZER], false)),
            FinalizerAction::Set(vec![contract::FINALIZER.to_owned()])
        );
        assert_eq!(
            step(&meta(
                &[contract::FINALIZER, contract::LEGACY_FINALIZER],
                false
            )),
            FinalizerAction::Set(vec![contract::FINALIZER.to_owned()])
        );
    }

    #[test]
    fn an_object_being_deleted_without_our_finalizer_is_left_alone() {
        assert_eq!(step(&meta(&[], true)), FinalizerAction::Ignore);
        assert_eq!(step(&meta(&["other/x"], true)), FinalizerAction::Ignore);
    }

    #[test]
    fn an_object_being_deleted_with_our_finalizer_is_cleaned_up_keeping_the_others() {
        assert_eq!(
            step(&meta(&["other/x", contract::FINALIZER], true)),
            FinalizerAction::Cleanup {
                remaining: vec!["other/x".to_owned()]
            }
        );
        assert_eq!(
            step(&meta(&[contract::LEGACY_FINALIZER], true)),
            FinalizerAction::Cleanup { remaining: vec![] }
        );
    }

    #[test]
    fn patch_is_guarded_by_the_resource_version() {
        assert_eq!(
            patch(Some("42"), &["a".to_owned()]),
            json!({"metadata": {"finalizers": ["a"], "resourceVersion": "42"}})
        );
        assert_eq!(patch(None, &[]), json!({"metadata": {"finalizers": []}}));
    }

    #[test]
    fn cleanup_expires_after_the_timeout() {
        let t = |s: &str| Time(s.parse().expect("time"));
        let requested = t("2026-01-01T00:00:00Z");
        let five = Duration::from_secs(300);
        assert!(!cleanup_expired(None, &t("2026-01-02T00:00:00Z"), five));
        assert!(!cleanup_expired(
            Some(&requested),
            &t("2026-01-01T00:04:59Z"),
            five
        ));
        assert!(cleanup_expired(
            Some(&requested),
            &t("2026-01-01T00:05:00Z"),
            five
        ));
        // A clock behind the API server's never expires early.
        assert!(!cleanup_expired(
            Some(&requested),
            &t("2025-12-31T23:00:00Z"),
            five
        ));
    }

    #[test]
    fn time_left_until_the_deadline() {
        let t = |s: &str| Time(s.parse().expect("time"));
        let requested = t("2026-01-01T00:00:00Z");
        let five = Duration::from_secs(300);
        assert_eq!(until_cleanup_expires(None, &requested, five), None);
        assert_eq!(
            until_cleanup_expires(Some(&requested), &t("2026-01-01T00:01:00Z"), five),
            Some(Duration::from_secs(240))
        );
        assert_eq!(
            until_cleanup_expires(Some(&requested), &t("2026-01-01T01:00:00Z"), five),
            Some(Duration::ZERO)
        );
        assert_eq!(
            until_cleanup_expires(Some(&requested), &t("2025-12-31T23:59:00Z"), five),
            Some(five)
        );
    }
}
