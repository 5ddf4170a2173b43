//! Admission and conversion traffic while the operator's pods change: what the API server's
//! calls to the webhooks through their Service met.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use kube::api::PostParams;
use tokio::task::JoinHandle;

use crate::support::cluster::{minimal_spec, tas, tas_api};

/// The object in the namespace the loops read through v1alpha1.
pub const STORED: &str = "stored";

/// What the loops saw: how many requests were answered and every failure's message.
#[derive(Default)]
pub struct Seen {
    pub answered: u64,
    pub failures: Vec<String>,
}

impl Seen {
    /// Fails the test, listing the failures, if any request failed (or none was sent).
    pub fn assert_none_failed(&self, during: &str) {
        assert!(self.answered > 0, "the load loops sent nothing");
        assert!(
            self.failures.is_empty(),
            "{} of {} requests failed during {during}:\n{}",
            self.failures.len(),
            self.answered + self.failures.len() as u64,
            self.failures.join("\n")
        );
    }
}

/// Two loops, each sending one request after another until [`AdmissionLoad::finish`].
pub struct AdmissionLoad {
    stop: Arc<AtomicBool>,
    loops: Vec<JoinHandle<Seen>>,
}

impl AdmissionLoad {
    /// Starts the loops in `ns`, which must hold the TrustyAIService [`STORED`]: a dry-run
    /// create through v1alpha1 (conversion, defaulting, validation) and a read of the stored
    /// object through v1alpha1 (conversion), in turn.
    pub fn start(client: &kube::Client, ns: &str) -> AdmissionLoad {
        let stop = Arc::new(AtomicBool::new(false));
        let loops = (0..2)
            .map(|_| tokio::spawn(run(client.clone(), ns.to_owned(), stop.clone())))
            .collect();
        AdmissionLoad { stop, loops }
    }

    /// Stops the loops and adds up what they saw.
    pub async fn finish(self) -> Seen {
        self.stop.store(true, Ordering::SeqCst);
        let mut all = Seen::default();
        for handle in self.loops {
            let seen = handle.await.expect("a load loop");
            all.answered += seen.answered;
            all.failures.extend(seen.failures);
        }
        all
    }
}

/// Creates [`STORED`] in `ns` (through v1).
pub async fn store(client: &kube::Client, ns: &str) {
    tas_api(client, ns, "v1")
        .create(&PostParams::default(), &tas("v1", STORED, minimal_spec()))
        .await
        .expect("stored");
}

async fn run(client: kube::Client, ns: String, stop: Arc<AtomicBool>) -> Seen {
    let alpha = tas_api(&client, &ns, "v1alpha1");
    let dry_run = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let mut seen = Seen::default();
    while !stop.load(Ordering::SeqCst) {
        let created = alpha
            .create(&dry_run, &tas("v1alpha1", "load", minimal_spec()))
            .await
            .map(|_| ());
        let read = alpha.get(STORED).await.map(|_| ());
        for result in [created, read] {
            match result {
                Ok(()) => seen.answered += 1,
                Err(e) => seen.failures.push(e.to_string()),
            }
        }
    }
    seen
}
