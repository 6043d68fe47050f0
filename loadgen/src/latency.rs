//! Round-trip (or delivery) latencies of one run, and their percentiles.

use std::time::Duration;

/// Latencies in microseconds, one per completed message. Bounded by the run's message count.
#[derive(Debug, Default, Clone)]
pub(crate) struct Latencies {
    micros: Vec<u32>,
}

/// Percentiles of a run, in microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct Summary {
    /// Median.
    pub p50_us: u32,
    /// 99th percentile.
    pub p99_us: u32,
    /// The slowest message.
    pub max_us: u32,
}

impl Latencies {
    pub(crate) fn with_capacity(n: usize) -> Self {
        Latencies {
            micros: Vec::with_capacity(n),
        }
    }

    pub(crate) fn record(&mut self, d: Duration) {
        self.micros
            .push(u32::try_from(d.as_micros()).unwrap_or(u32::MAX));
    }

    pub(crate) fn len(&self) -> usize {
        self.micros.len()
    }

    pub(crate) fn merge(&mut self, other: Latencies) {
        self.micros.extend(other.micros);
    }

    /// Nearest-rank percentiles; all zero when nothing was recorded.
    pub(crate) fn summary(mut self) -> Summary {
        if self.micros.is_empty() {
            return Summary::default();
        }
        self.micros.sort_unstable();
        let rank = |p: f64| {
            let n = self.micros.len();
            let i = ((p * n as f64).ceil() as usize).clamp(1, n) - 1;
            self.micros[i]
        };
        Summary {
            p50_us: rank(0.50),
            p99_us: rank(0.99),
            max_us: self.micros[self.micros.len() - 1],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let mut l = Latencies::default();
        for us in (1..=100).rev() {
            l.record(Duration::from_micros(us));
        }
        assert_eq!(
            l.summary(),
            Summary {
                p50_us: 50,
                p99_us: 99,
                max_us: 100
            }
        );
        assert_eq!(Latencies::default().summary(), Summary::default());
    }
}
