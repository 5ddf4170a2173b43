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
