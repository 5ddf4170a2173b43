//! When to look at a TrustyAIService again: per-object exponential backoff after errors, and a
//! long, jittered safety requeue after success.
//!
//! The state lives in the controller context keyed by object (kube's `error_policy` gets no
//! attempt count), is reset by a successful reconcile, and is forgotten with the object.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Mutex;
use std::time::Duration;

/// First retry after an error.
pub const INITIAL: Duration = Duration::from_secs(1);
/// Longest wait between retries.
pub const MAXIMUM: Duration = Duration::from_secs(5 * 60);
/// Retry after losing a write race (409): soon, without growing the backoff.
pub const CONFLICT_RETRY: Duration = Duration::from_millis(500);

/// Consecutive failures per object.
#[derive(Debug, Default)]
pub struct Backoffs {
    failures: Mutex<HashMap<String, u32>>,
}

impl Backoffs {
    /// Records a failure of `key` and returns how long to wait before the next attempt:
    /// 1 s, 2 s, 4 s, … capped at 5 minutes.
    pub fn next_delay(&self, key: &str) -> Duration {
        let mut failures = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        let count = failures.entry(key.to_owned()).or_insert(0);
        let delay = delay_for(*count);
        *count = count.saturating_add(1);
        delay
    }

    /// Forgets the failures of `key` (after a success, or when the object is gone).
    pub fn reset(&self, key: &str) {
        self.failures
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(key);
    }
}

/// The delay after `failures` previous consecutive failures.
pub fn delay_for(failures: u32) -> Duration {
    let factor = 1u32.checked_shl(failures.min(31)).unwrap_or(u32::MAX);
    INITIAL.saturating_mul(factor).min(MAXIMUM)
}

/// The safety requeue: `base` plus up to a tenth of it, spread by `seed` (the object's uid)
/// so objects created together do not all come back in the same second.
pub fn jittered(base: Duration, seed: &str) -> Duration {
    let mut hasher = DefaultHasher::new();
    seed.hash(&mut hasher);
    let spread = base.as_millis() / 10;
    let extra = match u64::try_from(spread) {
        Ok(0) | Err(_) => 0,
        Ok(spread) => hasher.finish() % spread,
    };
    base + Duration::from_millis(extra)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_from_one_second_to_five_minutes() {
        let delays: Vec<u64> = (0..12).map(|n| delay_for(n).as_secs()).collect();
        assert_eq!(delays, [1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300, 300]);
        assert_eq!(delay_for(u32::MAX), MAXIMUM);
    }

    /// Backoffs after one failure of each key of `failures`, in order.
    fn backoffs_after(failures: &[&str]) -> Backoffs {
        let backoffs = Backoffs::default();
        for key in failures {
            backoffs.next_delay(key);
        }
        backoffs
    }

    #[test]
    fn each_object_backs_off_on_its_own() {
        let backoffs = Backoffs::default();
        assert_eq!(backoffs.next_delay("a"), Duration::from_secs(1));
        assert_eq!(backoffs.next_delay("a"), Duration::from_secs(2));
        assert_eq!(backoffs.next_delay("b"), Duration::from_secs(1));
        assert_eq!(backoffs.next_delay("a"), Duration::from_secs(4));
    }

    #[test]
    fn a_reset_restarts_only_that_objects_backoff() {
        let backoffs = backoffs_after(&["a", "a", "b", "a"]);
        backoffs.reset("a");
        assert_eq!(backoffs.next_delay("a"), Duration::from_secs(1));
        assert_eq!(backoffs.next_delay("b"), Duration::from_secs(2));
    }

    const BASE: Duration = Duration::from_secs(600);

    #[test]
    fn jitter_adds_less_than_a_tenth_of_the_base() {
        let a = jittered(BASE, "uid-a");
        assert!(a >= BASE && a < BASE + Duration::from_secs(60), "{a:?}");
        assert_eq!(jittered(Duration::ZERO, "x"), Duration::ZERO);
    }

    #[test]
    fn jitter_is_the_same_for_the_same_object() {
        assert_eq!(jittered(BASE, "uid-a"), jittered(BASE, "uid-a"));
    }

    #[test]
    fn jitter_spreads_different_objects() {
        let spread: std::collections::BTreeSet<_> = (0..20)
            .map(|i| jittered(BASE, &format!("uid-{i}")))
            .collect();
        assert!(spread.len() > 10);
    }
}
