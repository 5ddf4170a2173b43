//! Waiting for a condition: the one polling loop of the integration tests. They wait for what
//! they expect to see, never for a time: the timeout only bounds how long a failure takes.

use std::time::{Duration, Instant};

/// Short beside every timeout the tests use, and long enough that a wait's reads do not load the
/// API server the operator under test shares the machine's two cores with.
const INTERVAL: Duration = Duration::from_millis(200);

/// Polls `check` until it returns `Some`; `None` if it still has not after `timeout`. It is
/// called once more at the deadline, so a slow check is never cut short.
pub async fn within<T>(timeout: Duration, mut check: impl AsyncFnMut() -> Option<T>) -> Option<T> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = check().await {
            return Some(value);
        }
        if Instant::now() > deadline {
            return None;
        }
        tokio::time::sleep(INTERVAL).await;
    }
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
