//! What one reconcile changed among the children, reported as one `Normal` event.
//!
//! One event per child would be folded by Kubernetes (same reason, same object): `kubectl
//! describe` would show `ServiceCreated (x2)` and never name the second Service. One event per
//! reconcile names every child it created, changed, replaced, issued or deleted.

use trustyai_crds::TrustyAIService;

use super::super::apply::ApplyOutcome;
use super::super::events::{Events, NOTE_LIMIT};
use super::declaration::Kind;

/// One change.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Change {
    kind: Kind,
    name: String,
    what: What,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum What {
    Created,
    /// It existed, made by someone else; now this operator's.
    Adopted,
    Updated,
    /// Deleted and created again: a field that cannot change in place differed.
    Replaced,
    /// A certificate issued, and why.
    Issued(String),
    /// No longer wanted.
    Deleted,
}

impl What {
    /// The note's heading for the changes of this sort.
    fn heading(&self) -> &'static str {
        match self {
            What::Created => "created",
            What::Adopted => "adopted (it existed)",
            What::Updated => "updated",
            What::Replaced => "re-created (a field that cannot change in place differed)",
            What::Issued(_) => "issued",
            What::Deleted => "deleted (no longer wanted)",
        }
    }
}

/// The changes of one reconcile, in the order they happened.
#[derive(Debug, Default)]
pub struct Changes {
    changes: Vec<Change>,
}

impl Changes {
    /// Records what an apply of `kind` `name` did (nothing when unchanged).
    pub fn applied(&mut self, kind: Kind, name: &str, outcome: ApplyOutcome) {
        let what = match outcome {
            ApplyOutcome::Created => What::Created,
            ApplyOutcome::Adopted => What::Adopted,
            ApplyOutcome::Changed => What::Updated,
            ApplyOutcome::Unchanged => return,
        };
        self.push(kind, name, what);
    }

    /// `kind` `name` was deleted and created again.
    pub fn replaced(&mut self, kind: Kind, name: &str) {
        // Its re-creation is recorded as `Created` next: one entry says both.
        self.push(kind, name, What::Replaced);
    }

    /// The child `name` of `kind` (a certificate Secret) was issued for `reason`.
    pub fn issued(&mut self, kind: Kind, name: &str, reason: &str) {
        self.push(kind, name, What::Issued(reason.to_owned()));
    }

    /// `kind` `name` was deleted: no longer wanted.
    pub fn deleted(&mut self, kind: Kind, name: &str) {
        self.push(kind, name, What::Deleted);
    }

    fn push(&mut self, kind: Kind, name: &str, what: What) {
        if let Some(last) = self.changes.last_mut()
            && last.kind == kind
            && last.name == name
            && last.what == What::Replaced
            && what == What::Created
        {
            return;
        }
        self.changes.push(Change {
            kind,
            name: name.to_owned(),
            what,
        });
    }

    /// Whether nothing changed.
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.changes.is_empty()
    }

    /// The event's reason: the Go operator's `PVCCreated` when the claim was created (what
    /// existing alerts and scripts look for), a Deployment's re-creation, the single change's
    /// own reason (`ServiceCreated`, `CertificateIssued`, ...), else `ChildrenCreated` when
    /// everything was new and `ChildrenChanged` otherwise.
    pub fn reason(&self) -> Option<String> {
        let first = self.changes.first()?;
        let is = |kind: Kind, what: &What| {
            self.changes
                .iter()
                .any(|c| c.kind == kind && &c.what == what)
        };
        if is(Kind::PersistentVolumeClaim, &What::Created) {
            return Some("PVCCreated".to_owned());
        }
        if is(Kind::Deployment, &What::Replaced) {
            return Some("DeploymentRecreated".to_owned());
        }
        if self.changes.len() == 1 {
            return Some(match &first.what {
                What::Created => format!("{}Created", first.kind.event_name()),
                What::Adopted => format!("{}Adopted", first.kind.event_name()),
                What::Updated => format!("{}Updated", first.kind.event_name()),
                What::Replaced => format!("{}Recreated", first.kind.event_name()),
                What::Issued(_) => "CertificateIssued".to_owned(),
                What::Deleted => format!("{}Deleted", first.kind.event_name()),
            });
        }
        let all_new = self.changes.iter().all(|c| c.what == What::Created);
        Some(
            if all_new {
                "ChildrenCreated"
            } else {
                "ChildrenChanged"
            }
            .to_owned(),
        )
    }

    /// The event's note: every change, grouped by what happened, within `limit` bytes.
    pub fn note(&self, limit: usize) -> String {
        let mut groups: Vec<(String, Vec<String>)> = Vec::new();
        for change in &self.changes {
            let heading = change.what.heading().to_owned();
            let item = match &change.what {
                What::Issued(reason) => format!("certificate Secret {} ({reason})", change.name),
                _ => format!("{} {}", change.kind.event_name(), change.name),
            };
            match groups.iter_mut().find(|(h, _)| *h == heading) {
                Some((_, items)) => items.push(item),
                None => groups.push((heading, vec![item])),
            }
        }
        let sentences: Vec<String> = groups
            .into_iter()
            .map(|(heading, items)| {
                let mut heading = heading;
                if let Some(first) = heading.get(..1) {
                    heading = format!("{}{}", first.to_uppercase(), &heading[1..]);
                }
                format!("{heading}: {}.", items.join(", "))
            })
            .collect();
        truncate(&sentences.join(" "), limit)
    }

    /// Publishes the event, if anything changed.
    pub async fn publish(&self, events: &Events, service: &TrustyAIService) {
        if let Some(reason) = self.reason() {
            events
                .normal(service, &reason, "Apply", self.note(NOTE_LIMIT))
                .await;
        }
    }
}

/// `text` cut at a character boundary to fit `limit` bytes, saying it was cut.
fn truncate(text: &str, limit: usize) -> String {
    const MORE: &str = " …";
    if text.len() <= limit {
        return text.to_owned();
    }
    let mut end = limit.saturating_sub(MORE.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}{MORE}", &text[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_changed_means_no_event() {
        let mut changes = Changes::default();
        changes.applied(Kind::Service, "tas-tls", ApplyOutcome::Unchanged);
        assert!(changes.is_empty());
        assert_eq!(changes.reason(), None);
    }

    #[test]
    fn one_change_keeps_its_own_reason() {
        let mut changes = Changes::default();
        changes.applied(Kind::Deployment, "tas", ApplyOutcome::Changed);
        assert_eq!(changes.reason().as_deref(), Some("DeploymentUpdated"));
        assert_eq!(changes.note(1000), "Updated: Deployment tas.");
    }

    #[test]
    fn every_child_is_named_in_one_event() {
        let mut changes = Changes::default();
        changes.applied(Kind::Service, "tas-tls", ApplyOutcome::Created);
        changes.applied(Kind::Service, "tas-internal", ApplyOutcome::Created);
        changes.issued(Kind::Secret, "tas-tls", "no certificate yet");
        changes.applied(Kind::Deployment, "tas", ApplyOutcome::Created);
        assert_eq!(changes.reason().as_deref(), Some("ChildrenChanged"));
        assert_eq!(
            changes.note(1000),
            "Created: Service tas-tls, Service tas-internal, Deployment tas. \
             Issued: certificate Secret tas-tls (no certificate yet)."
        );
    }

    #[test]
    fn a_created_claim_keeps_the_go_operators_reason() {
        let mut changes = Changes::default();
        changes.applied(Kind::Service, "tas-tls", ApplyOutcome::Created);
        changes.applied(
            Kind::PersistentVolumeClaim,
            "tas-pvc",
            ApplyOutcome::Created,
        );
        assert_eq!(changes.reason().as_deref(), Some("PVCCreated"));
        let mut all_new = Changes::default();
        all_new.applied(Kind::Service, "tas-tls", ApplyOutcome::Created);
        all_new.applied(Kind::Deployment, "tas", ApplyOutcome::Created);
        assert_eq!(all_new.reason().as_deref(), Some("ChildrenCreated"));
    }

    #[test]
    fn a_replacement_is_one_entry() {
        let mut changes = Changes::default();
        changes.replaced(Kind::Deployment, "tas");
        changes.applied(Kind::Deployment, "tas", ApplyOutcome::Created);
        changes.deleted(Kind::Route, "old");
        assert_eq!(changes.reason().as_deref(), Some("DeploymentRecreated"));
        assert_eq!(
            changes.note(1000),
            "Re-created (a field that cannot change in place differed): Deployment tas. \
             Deleted (no longer wanted): Route old."
        );
    }

    #[test]
    fn long_notes_are_cut_at_a_character_boundary() {
        let mut changes = Changes::default();
        for i in 0..100 {
            changes.applied(Kind::Service, &format!("é-{i}"), ApplyOutcome::Created);
        }
        let note = changes.note(100);
        assert!(note.len() <= 100, "{}", note.len());
        assert!(note.ends_with('…'));
    }
}
