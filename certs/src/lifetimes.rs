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

impl Lifetimes {
    /// When a serving certificate issued at `issued_at` is due: two thirds of
    /// [`Lifetimes::serving`] later, which is when to look at it again. The certificate's own
    /// [`CertInfo::renew_at`](crate::CertInfo::renew_at) counts from its backdated `not_before`
    /// (and its end may be cut to its CA's), so it is never later: that look finds it due.
    pub fn serving_renew_at(&self, issued_at: time::OffsetDateTime) -> time::OffsetDateTime {
        later(issued_at, self.serving.saturating_mul(2) / 3)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_serving_certificate_is_due_at_two_thirds_of_its_lifetime_from_issue() {
        let lifetimes = Lifetimes {
            serving: Duration::from_secs(3000),
            ..Lifetimes::default()
        };
        let issued_at = crate::testutil::t0();
        assert_eq!(
            lifetimes.serving_renew_at(issued_at) - issued_at,
            time::Duration::seconds(2000)
        );
        let forever = Lifetimes {
            serving: Duration::MAX,
            ..Lifetimes::default()
        };
        assert_eq!(
            forever.serving_renew_at(issued_at),
            time::PrimitiveDateTime::MAX.assume_utc()
        );
    }
}
