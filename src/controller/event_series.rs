//! Writes Events (`events.k8s.io/v1`) and folds repeats into a series, keeping only what the
//! fold needs: an event's name, its count and when it was last seen, for six minutes.
//!
//! kube's `Recorder` keeps every event it wrote, whole, until a later write finds it older than
//! six minutes; an operator that goes quiet after converging a thousand TrustyAIServices
//! keeps a thousand events (a few KiB each, as our notes name every child) indefinitely. It
//! also folds events by reason alone, so a second `Updated` on an object within six minutes
//! patched the first one's series and kept the first one's note. Here a repeat is the same
//! regarding object, type, reason, action *and* note.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::{Event, EventSeries};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};

/// How long an event can still be folded into (what kube's `Recorder` uses, and what
/// client-go's event broadcaster does for series).
const SERIES_WINDOW: Duration = Duration::from_secs(6 * 60);

/// One event to write.
#[derive(Debug, Clone, Copy)]
pub struct Occurrence<'a> {
    /// `Normal` or `Warning`.
    pub type_: &'a str,
    /// Why (`Created`, `InvalidSpec`, ...).
    pub reason: &'a str,
    /// What the operator did or was doing.
    pub action: &'a str,
    /// For humans.
    pub note: &'a str,
}

/// An event written, as far as a repeat needs it.
#[derive(Debug)]
struct Written {
    namespace: Box<str>,
    name: Box<str>,
    count: i32,
    last: Instant,
    /// The regarding object's uid (hashed), so an object's series can be forgotten with it.
    regarding: u64,
}

/// Writes events as `reporter`, folding repeats.
pub struct EventWriter {
    client: Client,
    reporter: &'static str,
    series: Mutex<HashMap<u64, Written>>,
}

impl EventWriter {
    /// A writer using `client`, reporting as `reporter`.
    pub fn new(client: Client, reporter: &'static str) -> Self {
        Self {
            client,
            reporter,
            series: Mutex::new(HashMap::new()),
        }
    }

    /// Writes `occurrence` about `regarding`: a new event, or the next count of the same
    /// event written in the last six minutes.
    pub async fn write(
        &self,
        regarding: &ObjectReference,
        occurrence: Occurrence<'_>,
    ) -> Result<(), kube::Error> {
        let key = hash(&(
            &regarding.uid,
            &regarding.namespace,
            &regarding.name,
            occurrence.type_,
            occurrence.reason,
            occurrence.action,
            occurrence.note,
        ));
        let repeat = {
            let mut series = self.series.lock().unwrap_or_else(PoisonError::into_inner);
            series.retain(|_, written| written.last.elapsed() < SERIES_WINDOW);
            series
                .get(&key)
                .map(|w| (w.namespace.clone(), w.name.clone(), w.count + 1))
        };
        let namespace = regarding.namespace.as_deref().unwrap_or("default");
        let now = Timestamp::now();
        if let Some((namespace, name, count)) = repeat {
            let api: Api<Event> = Api::namespaced(self.client.clone(), &namespace);
            let series = serde_json::json!({
                "series": EventSeries { count, last_observed_time: MicroTime(now) }
            });
            match api
                .patch(&name, &PatchParams::default(), &Patch::Merge(&series))
                .await
            {
                Ok(_) => {
                    self.remember(key, regarding, &namespace, &name, count);
                    return Ok(());
                }
                // Deleted meanwhile (events expire): start a new one.
                Err(kube::Error::Api(status)) if status.code == 404 => {}
                Err(error) => return Err(error),
            }
        }
        let name = format!(
            "{}.{:x}",
            regarding.name.as_deref().unwrap_or(self.reporter),
            now.as_nanosecond()
        );
        let event = Event {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                namespace: Some(namespace.to_owned()),
                ..ObjectMeta::default()
            },
            action: Some(occurrence.action.to_owned()),
            reason: Some(occurrence.reason.to_owned()),
            note: Some(occurrence.note.to_owned()),
            type_: Some(occurrence.type_.to_owned()),
            event_time: Some(MicroTime(now)),
            regarding: Some(regarding.clone()),
            reporting_controller: Some(self.reporter.to_owned()),
            reporting_instance: Some(self.reporter.to_owned()),
            ..Event::default()
        };
        Api::<Event>::namespaced(self.client.clone(), namespace)
            .create(&PostParams::default(), &event)
            .await?;
        self.remember(key, regarding, namespace, &name, 1);
        Ok(())
    }

    /// Forgets the series about the object of `uid` (it is gone).
    pub fn forget(&self, uid: &str) {
        let regarding = hash(&Some(uid));
        self.series
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|_, written| written.regarding != regarding);
    }

    fn remember(
        &self,
        key: u64,
        regarding: &ObjectReference,
        namespace: &str,
        name: &str,
        count: i32,
    ) {
        let written = Written {
            namespace: namespace.into(),
            name: name.into(),
            count,
            last: Instant::now(),
            regarding: hash(&regarding.uid.as_deref()),
        };
        self.series
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(key, written);
    }

    /// How many series are remembered.
    #[cfg(test)]
    fn remembered(&self) -> usize {
        self.series
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
}

fn hash(value: &impl Hash) -> u64 {
    let mut hasher = DefaultHasher::new();
    value.hash(&mut hasher);
    hasher.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::mock_api::MockApi;

    fn regarding() -> ObjectReference {
        ObjectReference {
            api_version: Some("trustyai.opendatahub.io/v1".into()),
            kind: Some("TrustyAIService".into()),
            namespace: Some("ns".into()),
            name: Some("tas".into()),
            uid: Some("uid-1".into()),
            ..ObjectReference::default()
        }
    }

    fn occurrence(note: &str) -> Occurrence<'_> {
        Occurrence {
            type_: "Normal",
            reason: "Updated",
            action: "Reconcile",
            note,
        }
    }

    /// A writer that wrote a note, the same note again, then another note, all about
    /// [`regarding`]; with the mock API server it wrote to.
    async fn written_repeat_then_another_note() -> (MockApi, EventWriter) {
        let (mock, client) = MockApi::new([]);
        let writer = EventWriter::new(client, "reporter");
        for note in [
            "Service tas updated",
            "Service tas updated",
            "Deployment tas updated",
        ] {
            writer
                .write(&regarding(), occurrence(note))
                .await
                .expect("written");
        }
        (mock, writer)
    }

    #[tokio::test]
    async fn a_repeat_counts_in_the_series() {
        let (mock, _writer) = written_repeat_then_another_note().await;
        let events = mock.events();
        assert_eq!(events.len(), 3, "{events:?}");
        assert_eq!(events[0]["note"], "Service tas updated");
        assert_eq!(
            events[1],
            serde_json::json!({"series": {
                "count": 2, "lastObservedTime": events[1]["series"]["lastObservedTime"]}}),
            "a repeat patches the series only"
        );
    }

    #[tokio::test]
    async fn another_note_is_a_new_event() {
        let (mock, _writer) = written_repeat_then_another_note().await;
        let events = mock.events();
        assert_eq!(
            events[2]["note"], "Deployment tas updated",
            "another note is a new event"
        );
        assert_eq!(events[2]["reportingController"], "reporter");
    }

    #[tokio::test]
    async fn forgetting_an_object_drops_its_series() {
        let (_mock, writer) = written_repeat_then_another_note().await;
        assert_eq!(writer.remembered(), 2);
        writer.forget("uid-1");
        assert_eq!(writer.remembered(), 0);
    }
}
