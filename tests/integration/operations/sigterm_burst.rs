//! SIGTERM during a burst of admission requests: every request the server accepted gets its
//! answer, new connections are refused.

use crate::support;
use support::control_planes::{self, Concern};

use std::time::{Duration, Instant};

use serde_json::Value;
use support::operator::{Operator, free_port};
use tokio::io::AsyncWriteExt;
use tokio_rustls::TlsConnector;
use tokio_util::sync::CancellationToken;

use super::*;

// --- 2. SIGTERM during a burst ----------------------------------------------------------------

/// One admission request sent with `Expect: 100-continue`. The server answers `100 Continue`
/// only once its handler reads the body, which marks the request as accepted: until then a
/// drain may close the connection unread (hyper does, for connections it has read nothing
/// from), and the client cannot tell "sent" from "read".
#[derive(Debug)]
enum Attempt {
    /// Not accepted: refused, or closed before the server read the request.
    Refused(String),
    /// Neither accepted nor closed (a hang, or an answer other than `100 Continue`).
    Stalled(String),
    /// Accepted at `accepted`; then the answer or error at `finished`.
    Accepted {
        accepted: Instant,
        answer: Result<(u16, Value), String>,
        finished: Instant,
    },
}

/// How many requests are held in flight across SIGTERM.
const HELD: usize = 10;

/// Sends the request's head and, once accepted, half its body; reports the acceptance on
/// `accepted`, waits for `hold`, then sends the rest and reads the answer.
async fn admission_request(
    tls: TlsConnector,
    port: u16,
    uid: String,
    accepted: Option<tokio::sync::mpsc::Sender<()>>,
    hold: impl Future<Output = ()>,
) -> (String, Attempt) {
    let body = serde_json::to_vec(&invalid_admission_review(&uid)).expect("json");
    let half = body.len() / 2;
    let head = post_head_expecting_continue("/validate", body.len()).into_bytes();
    let mut stream = match tls_connect(&tls, port).await {
        Ok(stream) => stream,
        Err(e) => return (uid, Attempt::Refused(e)),
    };
    if let Err(e) = stream.write_all(&head).await {
        return (uid, Attempt::Refused(format!("write: {e}")));
    }
    match read_continue(&mut stream).await {
        Ok(true) => {}
        Ok(false) => return (uid, Attempt::Refused("closed unread".into())),
        Err(e) => return (uid, Attempt::Stalled(e)),
    }
    let accepted_at = Instant::now();
    let answer = async {
        stream
            .write_all(&body[..half])
            .await
            .map_err(|e| format!("writing half the body: {e}"))?;
        if let Some(accepted) = accepted {
            let _ = accepted.send(()).await;
        }
        hold.await;
        stream
            .write_all(&body[half..])
            .await
            .map_err(|e| format!("writing the rest of the body: {e}"))?;
        support::https::read_answer(&mut stream).await
    }
    .await;
    (
        uid,
        Attempt::Accepted {
            accepted: accepted_at,
            answer,
            finished: Instant::now(),
        },
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_during_a_burst_of_admission_requests_answers_every_accepted_request() {
    let (_claim, cp, client, ns) =
        control_planes::exclusive_namespace(Concern::Operations, "burst").await;
    // Readiness needs the caBundle published into the registrations, so this test creates them
    // rather than relying on an earlier test having done it.
    let mut flags = vec!["--drain-timeout", "10s", "--create-webhook-configurations"];
    flags.extend(ELECTION_FLAGS);
    let operator = ready(start(cp, &ns, free_port(), free_port(), &flags)).await;
    let tls = connector(&client, &ns).await;
    let port = operator.webhook_port;

    let release = CancellationToken::new();
    let held = hold_accepted_requests(&tls, port, &release, &operator).await;
    let burst = start_a_burst(&tls, port);
    tokio::time::sleep(Duration::from_millis(400)).await;
    let signalled = Instant::now();
    operator.signal_term();

    // Draining: new connections are refused, and only then do the held requests go on.
    let closed = wait_until_refused(
        port,
        "the webhook listener to refuse connections after SIGTERM",
        Duration::from_secs(10),
        &operator,
    )
    .await
        - signalled;
    release.cancel();

    let mut attempts = Vec::new();
    for task in held.into_iter().chain(burst) {
        attempts.push(task.await.expect("request task"));
    }
    stop(operator).await;
    eprintln!(
        "the operator refused connections {closed:?} and exited {:?} after SIGTERM",
        signalled.elapsed()
    );

    let tally = Tally::of(&attempts, signalled);
    eprintln!(
        "burst: {} accepted before SIGTERM ({} still in flight at the signal), {} after, {} not accepted (first: {:?})",
        tally.before, tally.in_flight, tally.after, tally.refused, tally.refusal
    );
    assert!(
        tally.broken.is_empty(),
        "{} of {} accepted requests got no complete answer:\n{}",
        tally.broken.len(),
        tally.before + tally.after,
        tally.broken.join("\n")
    );
    assert!(
        tally.in_flight >= HELD,
        "only {} requests were in flight at the signal",
        tally.in_flight
    );
}

type Request = tokio::task::JoinHandle<(String, Attempt)>;

/// [`HELD`] requests certainly in flight at the signal, however the machine schedules: accepted,
/// with the rest of their bodies held back until `release`. They are held for far less than the
/// operator's 5 s request deadline.
async fn hold_accepted_requests(
    tls: &TlsConnector,
    port: u16,
    release: &CancellationToken,
    operator: &Operator,
) -> Vec<Request> {
    let (accepted_tx, mut accepted) = tokio::sync::mpsc::channel(HELD);
    let held: Vec<_> = (0..HELD)
        .map(|i| {
            let release = release.clone();
            tokio::spawn(admission_request(
                tls.clone(),
                port,
                format!("held-{i}"),
                Some(accepted_tx.clone()),
                async move { release.cancelled().await },
            ))
        })
        .collect();
    drop(accepted_tx);
    for _ in 0..HELD {
        if !matches!(
            tokio::time::timeout(TIMEOUT, accepted.recv()).await,
            Ok(Some(()))
        ) {
            release.cancel();
            let mut attempts = Vec::new();
            for task in held {
                attempts.push(task.await.expect("request task"));
            }
            panic!(
                "the held requests were not all accepted: {attempts:?}\n{}",
                operator.logs()
            );
        }
    }
    held
}

/// 200 requests started 4 ms apart over 0.8 s, each sending its body in two halves 150 ms
/// apart: a signal in their midst lands among connections at every stage.
fn start_a_burst(tls: &TlsConnector, port: u16) -> Vec<Request> {
    const REQUESTS: usize = 200;
    let started = Instant::now();
    (0..REQUESTS)
        .map(|i| {
            let tls = tls.clone();
            tokio::spawn(async move {
                tokio::time::sleep_until((started + Duration::from_millis(4 * i as u64)).into())
                    .await;
                admission_request(
                    tls,
                    port,
                    format!("burst-{i}"),
                    None,
                    tokio::time::sleep(Duration::from_millis(150)),
                )
                .await
            })
        })
        .collect()
}

/// What became of the requests around the signal; every answer is asserted to be the denial
/// its request asked for.
#[derive(Default)]
struct Tally {
    /// Accepted before the signal.
    before: usize,
    /// Of those, still unanswered at the signal.
    in_flight: usize,
    /// Accepted after the signal.
    after: usize,
    /// Not accepted (refused, or closed unread).
    refused: usize,
    /// The first refusal's reason.
    refusal: Option<String>,
    /// Accepted requests without a complete answer, and stalled ones.
    broken: Vec<String>,
}

impl Tally {
    fn of(attempts: &[(String, Attempt)], signalled: Instant) -> Tally {
        let mut tally = Tally::default();
        for (uid, attempt) in attempts {
            match attempt {
                Attempt::Refused(why) => {
                    tally.refused += 1;
                    tally.refusal.get_or_insert_with(|| why.clone());
                }
                Attempt::Stalled(e) => tally.broken.push(format!("{uid}: {e}")),
                Attempt::Accepted {
                    accepted,
                    answer,
                    finished,
                } => {
                    if *accepted < signalled {
                        tally.before += 1;
                        if *finished > signalled {
                            tally.in_flight += 1;
                        }
                    } else {
                        tally.after += 1;
                    }
                    match answer {
                        Ok(answer) => assert_denied(answer, uid),
                        Err(e) => tally.broken.push(format!("{uid}: {e}")),
                    }
                }
            }
        }
        tally
    }
}
