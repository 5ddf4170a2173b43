//! Waiting for a condition: the polling loops of the integration tests, all here. They wait for
//! what they expect to see, never for a time: the timeout only bounds how long a failure takes.

use std::time::{Duration, Instant};

/// Short beside every timeout the tests use, and long enough that a wait's reads do not load the
/// API server the operator under test shares the machine's two cores with.
const INTERVAL: Duration = Duration::from_millis(200);

/// Polls `check` every `interval` until it returns `Some`; `None` if it still has not after
/// `timeout`. It is called once more at the deadline, so a slow check is never cut short.
async fn poll<T>(
    timeout: Duration,
    interval: Duration,
    mut check: impl AsyncFnMut() -> Option<T>,
) -> Option<T> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = check().await {
            return Some(value);
        }
        if Instant::now() > deadline {
            return None;
        }
        tokio::time::sleep(interval).await;
    }
}

/// Polls `check` until it returns `Some`; `None` if it still has not after `timeout`. It is
/// called once more at the deadline, so a slow check is never cut short.
pub async fn within<T>(timeout: Duration, check: impl AsyncFnMut() -> Option<T>) -> Option<T> {
    poll(timeout, INTERVAL, check).await
}

/// Panics with `what` and the timeout; the panic hook of `support::operator` then prints every
/// running operator's log, objects and events.
fn timed_out(what: &str, timeout: Duration, context: &str) -> ! {
    panic!("timed out after {timeout:?} waiting for {what}\n{context}")
}

/// [`within`], panicking with `what` and the timeout when it runs out.
pub async fn until<T>(what: &str, timeout: Duration, check: impl AsyncFnMut() -> Option<T>) -> T {
    match within(timeout, check).await {
        Some(value) => value,
        None => timed_out(what, timeout, ""),
    }
}

/// [`until`], with `context()` (an operator's log, say) added to the panic message.
pub async fn until_showing<T>(
    what: &str,
    timeout: Duration,
    context: impl FnOnce() -> String,
    check: impl AsyncFnMut() -> Option<T>,
) -> T {
    match within(timeout, check).await {
        Some(value) => value,
        None => timed_out(what, timeout, &context()),
    }
}

/// Reads `read` every 500 ms until its answer has not changed for `quiet`, and returns it;
/// panics with `what`, the timeout and `context()` if it keeps changing for `timeout`. For a
/// snapshot taken once the writes that follow a change have landed: 500 ms, as such a read is
/// often a dozen requests.
pub async fn settled<T: PartialEq>(
    what: &str,
    quiet: Duration,
    timeout: Duration,
    context: impl FnOnce() -> String,
    mut read: impl AsyncFnMut() -> T,
) -> T {
    let mut last: Option<(T, Instant)> = None;
    let settled = poll(timeout, Duration::from_millis(500), async || {
        let now = read().await;
        match &last {
            Some((seen, _)) if *seen == now => {}
            _ => last = Some((now, Instant::now())),
        }
        let (_, since) = last.as_ref()?;
        (since.elapsed() >= quiet).then_some(())
    })
    .await;
    match (settled, last) {
        (Some(()), Some((value, _))) => value,
        _ => timed_out(&format!("{what} to settle"), timeout, &context()),
    }
}

/// [`within`] for a caller that may not await (a `Drop`, or a test thread that blocks): the
/// same polling, with the thread asleep in between.
pub fn blocking_within<T>(timeout: Duration, mut check: impl FnMut() -> Option<T>) -> Option<T> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = check() {
            return Some(value);
        }
        if Instant::now() > deadline {
            return None;
        }
        std::thread::sleep(INTERVAL);
    }
}

/// Runs `step` at every interval until the task running it is aborted: a stand-in for a
/// controller that would react to watch events (cert-manager's cainjector, say). Each step is a
/// future of its own (not an `AsyncFnMut` borrowing the closure), so a spawned task can run it.
pub async fn forever<F: Future<Output = ()>>(mut step: impl FnMut() -> F) {
    loop {
        step().await;
        tokio::time::sleep(INTERVAL).await;
    }
}
