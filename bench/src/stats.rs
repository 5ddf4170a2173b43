//! Latency percentiles.

use std::time::Duration;

/// Percentiles of a set of latencies, in microseconds.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct Percentiles {
    pub p50_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub max_us: f64,
}

/// The percentiles of `samples` (sorted in place); zeros when empty.
pub fn percentiles(samples: &mut [Duration]) -> Percentiles {
    samples.sort_unstable();
    let at = |q: f64| -> f64 {
        if samples.is_empty() {
            return 0.0;
        }
        let index = ((samples.len() as f64 * q).ceil() as usize).clamp(1, samples.len()) - 1;
        samples[index].as_secs_f64() * 1e6
    };
    Percentiles {
        p50_us: at(0.50),
        p99_us: at(0.99),
        p999_us: at(0.999),
        max_us: at(1.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `samples` in microseconds, as the harness records them.
    fn micros(samples: impl IntoIterator<Item = u64>) -> Vec<Duration> {
        samples.into_iter().map(Duration::from_micros).collect()
    }

    fn assert_close(actual: f64, expected: f64) {
        assert!(
            (actual - expected).abs() < 1e-6,
            "{actual} is not {expected}"
        );
    }

    /// Asserts p50, p99, p99.9 and the maximum of `samples`, in microseconds.
    fn assert_percentiles(mut samples: Vec<Duration>, expected: [f64; 4]) {
        let p = percentiles(&mut samples);
        for (actual, expected) in [p.p50_us, p.p99_us, p.p999_us, p.max_us]
            .into_iter()
            .zip(expected)
        {
            assert_close(actual, expected);
        }
    }

    #[test]
    fn empty_sample_is_all_zeros() {
        let p = percentiles(&mut []);
        assert_eq!(
            (p.p50_us, p.p99_us, p.p999_us, p.max_us),
            (0.0, 0.0, 0.0, 0.0)
        );
    }

    #[test]
    fn one_sample_is_every_percentile() {
        assert_percentiles(micros([42]), [42.0; 4]);
    }

    #[test]
    fn nearest_rank_of_one_to_a_hundred() {
        // Ranks ceil(100 q): 50, 99, ceil(99.9) = 100, 100.
        assert_percentiles(micros(1..=100), [50.0, 99.0, 100.0, 100.0]);
    }

    #[test]
    fn nearest_rank_of_one_to_a_thousand() {
        // Ranks 500, 990, 999, 1000: p99.9 is not the maximum any more.
        assert_percentiles(micros(1..=1000), [500.0, 990.0, 999.0, 1000.0]);
    }

    #[test]
    fn small_samples_round_the_rank_up() {
        // n = 2: rank ceil(1) = 1 is the lower value; n = 3: ceil(1.5) = 2 is the middle one.
        assert_close(percentiles(&mut micros([10, 20])).p50_us, 10.0);
        assert_close(percentiles(&mut micros([10, 20, 30])).p50_us, 20.0);
        // n = 10: p99 is rank ceil(9.9) = 10, the maximum.
        assert_close(percentiles(&mut micros(1..=10)).p99_us, 10.0);
    }

    #[test]
    fn unsorted_input_is_sorted_in_place() {
        let mut samples = micros([5, 1, 4, 2, 3]);
        let p = percentiles(&mut samples);
        assert_close(p.p50_us, 3.0);
        assert_close(p.max_us, 5.0);
        assert_eq!(samples, micros([1, 2, 3, 4, 5]));
    }

    #[test]
    fn percentiles_keep_the_scale_of_every_duration() {
        let mut samples = vec![Duration::from_nanos(500), Duration::from_millis(3)];
        let p = percentiles(&mut samples);
        assert_close(p.p50_us, 0.5);
        assert_close(p.max_us, 3000.0);
    }
}
