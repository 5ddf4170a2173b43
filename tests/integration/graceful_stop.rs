//! A graceful stop exits 0 with an orderly log whatever the operator was doing when SIGTERM came:
//! during start-up, its first CA bundle publication, its first lists, a lease renewal, a
//! certificate renewal, and a stream of TrustyAIService changes. Each stop point is a line of
//! the operator's own log (never a time), and is printed before the signal, so a failure names
//! the point to replay.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use kube::Client;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use crate::support::cluster::{minimal_spec, tas, tas_api};
use crate::support::control_planes::{self, Concern};
use crate::support::operator::Operator;
use crate::support::{ControlPlane, wait};

const TIMEOUT: Duration = Duration::from_secs(90);

/// Every task of an operator run with [`FLAGS`]: each logs one `stopped` line.
const TASKS: [&str; 8] = [
    "ops server",
    "certificate loader",
    "process watches",
    "webhook server",
    "caBundle publisher",
    "leader election",
    "reconcile loop",
    "certificate maintenance",
];

/// Its own webhook registrations and CA bundle publication, a short lease (renewed every
/// second) and a short serving certificate (renewed every few seconds), JSON logs.
const FLAGS: &[&str] = &[
    "--create-webhook-configurations",
    "--log-format",
    "json",
    "--lease-duration",
    "6s",
    "--renew-deadline",
    "4s",
    "--retry-period",
    "1s",
    "--serving-cert-lifetime",
    "12s",
];

/// Where to send SIGTERM: right after the `nth` log line whose message is `message`.
struct StopPoint {
    message: &'static str,
    nth: usize,
    /// Whether TrustyAIServices are being created and changed meanwhile.
    churn: bool,
}

const STOP_POINTS: &[StopPoint] = &[
    // CRD maintenance and the webhook registrations are being written.
    StopPoint {
        message: "webhook server listening",
        nth: 1,
        churn: false,
    },
    // The first of several CA bundle writes (CRD, then the registrations) is done.
    StopPoint {
        message: "published the CA bundle",
        nth: 1,
        churn: false,
    },
    StopPoint {
        message: "became the leader",
        nth: 1,
        churn: false,
    },
    // The child and input watches are taking their first lists.
    StopPoint {
        message: "controller started",
        nth: 1,
        churn: false,
    },
    StopPoint {
        message: "renewing the lease",
        nth: 2,
        churn: false,
    },
    // A serving certificate renewal has begun.
    StopPoint {
        message: "webhook certificate maintenance",
        nth: 2,
        churn: false,
    },
    // Reconciles (whose writes go through the webhooks) are in flight.
    StopPoint {
        message: "reconcile finished",
        nth: 3,
        churn: true,
    },
    StopPoint {
        message: "reconcile finished",
        nth: 12,
        churn: true,
    },
];

#[tokio::test]
async fn sigterm_at_any_point_exits_0_with_an_orderly_log() {
    let claim = control_planes::exclusive(Concern::GracefulStop);
    let cp = claim.control_plane();
    let client = cp.client().await;
    for (index, point) in STOP_POINTS.iter().enumerate() {
        stop_at(cp, &client, index, point).await;
    }
}

async fn stop_at(cp: &ControlPlane, client: &Client, index: usize, point: &StopPoint) {
    let ns = cp.namespace(client, "stop").await;
    let mut operator = Operator::start(cp, &ns, FLAGS);
    let churning = Arc::new(AtomicBool::new(point.churn));
    let churn = point
        .churn
        .then(|| tokio::spawn(churn(client.clone(), ns.clone(), churning.clone())));
    let log = operator.log.clone();
    wait::until_showing(
        &format!("log line #{} {:?}", point.nth, point.message),
        TIMEOUT,
        || operator.logs(),
        async || (count_messages(&log, point.message) >= point.nth).then_some(()),
    )
    .await;
    eprintln!(
        "stop point {index}: SIGTERM after log line #{} {:?}{}",
        point.nth,
        point.message,
        if point.churn { ", under churn" } else { "" }
    );
    operator.signal_term();
    let status = operator.stop();
    churning.store(false, Ordering::SeqCst);
    if let Some(churn) = churn {
        churn.await.expect("the churn task");
    }
    assert!(
        status.success(),
        "stop point {index} ({:?} #{}): exit {status} on SIGTERM:\n{}",
        point.message,
        point.nth,
        operator.logs()
    );
    assert_orderly(&log, index);
}

/// Creates TrustyAIServices and changes them, until `churning` is cleared (at most 400 writes).
/// A write refused because the webhooks are not trusted yet, or no longer served while the
/// operator stops, is expected: the next round tries again.
async fn churn(client: Client, ns: String, churning: Arc<AtomicBool>) {
    let api = tas_api(&client, &ns, "v1");
    for round in 0..400u32 {
        if !churning.load(Ordering::SeqCst) {
            return;
        }
        let name = format!("churn-{}", round % 8);
        let patch = json!({"metadata": {"labels": {"round": round.to_string()}}});
        match api
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Err(kube::Error::Api(status)) if status.code == 404 => {
                let _ = api
                    .create(&PostParams::default(), &tas("v1", &name, minimal_spec()))
                    .await;
            }
            _ => {}
        }
    }
}

fn records(log: &Path) -> Vec<Value> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect()
}

fn count_messages(log: &Path, message: &str) -> usize {
    records(log)
        .iter()
        .filter(|record| record["message"] == message)
        .count()
}

/// After the signal: no ERROR, one `stopped` line per task, and `stopped` as the last line.
fn assert_orderly(log: &Path, index: usize) {
    let records = records(log);
    let show = || {
        records
            .iter()
            .map(Value::to_string)
            .collect::<Vec<_>>()
            .join("\n")
    };
    let signal = records
        .iter()
        .position(|r| r["message"] == "SIGTERM received; shutting down")
        .unwrap_or_else(|| panic!("stop point {index}: no signal line in the log:\n{}", show()));
    let after = &records[signal..];
    let errors: Vec<&Value> = after.iter().filter(|r| r["level"] == "ERROR").collect();
    assert!(
        errors.is_empty(),
        "stop point {index}: ERROR after the signal: {errors:?}\n{}",
        show()
    );
    let mut stopped: BTreeMap<&str, usize> = BTreeMap::new();
    for record in after.iter().filter(|r| r["message"] == "stopped") {
        if let Some(task) = record["task"].as_str() {
            *stopped.entry(task).or_default() += 1;
        }
    }
    let expected: BTreeMap<&str, usize> = TASKS.iter().map(|task| (*task, 1)).collect();
    assert_eq!(
        stopped,
        expected,
        "stop point {index}: one `stopped` line per task\n{}",
        show()
    );
    let last = records.last().expect("a log");
    assert!(
        last["message"] == "stopped" && last.get("task").is_none(),
        "stop point {index}: the last line is the process's `stopped`, not {last}"
    );
}
