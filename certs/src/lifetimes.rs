//! How long certificates live and how long a CA rotation overlaps.

use std::time::Duration;

const DAY: u64 = 24 * 60 * 60;

/// Validity periods and rotation timing. Every certificate this crate issues gets an explicit
/// `not_before`/`not_after` from these (rcgen's default would be 1975 … 4096).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lifetimes {
    /// Lifetime of the CA (default 5 years). It is rotated at two thirds of it.
    pub ca: Duration,
    /// Lifetime of the serving certificate (default 90 days). It is renewed at two thirds of it,
    /// and never outlives its CA.
    pub serving: Duration,
    /// How far `not_before` is set in the past, so a peer whose clock is slightly behind does
    /// not reject a certificate issued a moment ago (default 5 minutes).
    pub backdate: Duration,
    /// How long a new CA sits in the published bundle before a serving certificate signed by it
    /// is written, and how long the previous CA stays after that, so every replica and the
    /// apiserver have switched before anything depends on the change (default 15 minutes).
    pub overlap: Duration,
}

impl Default for Lifetimes {
    fn default() -> Self {
        Self {
            ca: Duration::from_secs(5 * 365 * DAY),
            serving: Duration::from_secs(90 * DAY),
            backdate: Duration::from_secs(5 * 60),
            overlap: Duration::from_secs(15 * 60),
        }
    }
}

/// `t + by`, saturating at the end of the representable calendar (a lifetime that large means
/// "never" for every decision made here).
pub(crate) fn later(t: time::OffsetDateTime, by: Duration) -> time::OffsetDateTime {
    time::Duration::try_from(by)
        .ok()
        .and_then(|by| t.checked_add(by))
        .unwrap_or_else(|| time::PrimitiveDateTime::MAX.assume_utc())
}
