//! One scrape of a service process's `/q/metrics` per schedule interval, shared by every
//! TrustyAIMetric of that service: the service recomputes its gauges once per interval, so
//! reading more often would only load it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use super::exposition::{Sample, samples};
use super::plan::Process;
use super::service_api::{CallError, ServiceApi};

/// The service's Prometheus endpoint on its API listener.
pub const METRICS_PATH: &str = "/q/metrics";

type Slot = Arc<tokio::sync::Mutex<Option<(Instant, Arc<Vec<Sample>>)>>>;

/// The last scrape of each process.
#[derive(Default)]
pub struct Scrapes {
    slots: Mutex<HashMap<(String, String), Slot>>,
}

impl Scrapes {
    /// The samples of `process`, scraped now unless a scrape younger than `interval` exists.
    /// Concurrent callers for one process wait for one scrape.
    pub async fn of(
        &self,
        api: &ServiceApi,
        process: &Process,
        interval: Duration,
    ) -> Result<Arc<Vec<Sample>>, CallError> {
        let slot = {
            let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
            let key = (process.pod_uid.clone(), process.started_at.clone());
            if !slots.contains_key(&key) {
                slots.retain(|_, slot| !is_stale(slot));
            }
            slots.entry(key).or_default().clone()
        };
        let mut last = slot.lock().await;
        if let Some((at, samples)) = last.as_ref()
            && at.elapsed() < interval
        {
            return Ok(samples.clone());
        }
        let (status, body) = api
            .call(&process.address, http::Method::GET, METRICS_PATH, None)
            .await?;
        if !status.is_success() {
            return Err(CallError::Http {
                method: "GET".into(),
                path: METRICS_PATH.into(),
                address: process.address.clone(),
                message: format!("answered {status}"),
            });
        }
        let read = Arc::new(samples(&String::from_utf8_lossy(&body)));
        *last = Some((Instant::now(), read.clone()));
        Ok(read)
    }
}

/// A slot not scraped for this long belongs to a process that is gone (every live process is
/// scraped once per interval): it is dropped when another is added.
const STALE: Duration = Duration::from_secs(3600);

fn is_stale(slot: &Slot) -> bool {
    slot.try_lock()
        .is_ok_and(|last| last.as_ref().is_some_and(|(at, _)| at.elapsed() > STALE))
}
