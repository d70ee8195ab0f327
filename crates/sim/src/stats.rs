//! Latency statistics that stay small and deterministic however many samples arrive: a
//! log-linear histogram (64 sub-buckets per power of two, so a quantile is within 1/64 of
//! the true value) over picoseconds.

use crate::time::Time;

const SUB_BITS: u32 = 6;
const SUB: u64 = 1 << SUB_BITS;

/// A histogram of durations.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Histogram {
    counts: Vec<u64>,
    n: u64,
    sum_ps: u128,
    max_ps: u64,
}

fn bucket(v: u64) -> usize {
    if v < SUB {
        return v as usize;
    }
    let e = 63 - v.leading_zeros(); // ≥ SUB_BITS
    let shift = e - SUB_BITS;
    let mantissa = (v >> shift) - SUB; // 0..SUB
    ((shift as u64 + 1) * SUB + mantissa) as usize
}

/// The middle of a bucket's range.
fn value_of(b: usize) -> u64 {
    let b = b as u64;
    if b < SUB {
        return b;
    }
    let shift = b / SUB - 1;
    let mantissa = b % SUB + SUB;
    let lo = mantissa << shift;
    lo + (1u64 << shift) / 2
}

impl Histogram {
    pub fn record(&mut self, t: Time) {
        let v = t.as_ps();
        let b = bucket(v);
        if self.counts.len() <= b {
            self.counts.resize(b + 1, 0);
        }
        self.counts[b] += 1;
        self.n += 1;
        self.sum_ps += v as u128;
        self.max_ps = self.max_ps.max(v);
    }

    pub fn count(&self) -> u64 {
        self.n
    }

    pub fn mean_ns(&self) -> Option<f64> {
        (self.n > 0).then(|| self.sum_ps as f64 / self.n as f64 / 1000.0)
    }

    pub fn max_ns(&self) -> Option<f64> {
        (self.n > 0).then(|| self.max_ps as f64 / 1000.0)
    }

    /// The `q` quantile (0..=1) in ns, `None` without samples.
    pub fn quantile_ns(&self, q: f64) -> Option<f64> {
        if self.n == 0 {
            return None;
        }
        let rank = ((q.clamp(0.0, 1.0) * self.n as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (b, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return Some((value_of(b).min(self.max_ps)) as f64 / 1000.0);
            }
        }
        self.max_ns()
    }

    /// Adds `other`'s samples (the histogram of both sample sets).
    pub fn merge(&mut self, other: &Histogram) {
        if self.counts.len() < other.counts.len() {
            self.counts.resize(other.counts.len(), 0);
        }
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a += b;
        }
        self.n += other.n;
        self.sum_ps += other.sum_ps;
        self.max_ps = self.max_ps.max(other.max_ps);
    }

    pub fn clear(&mut self) {
        *self = Histogram::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_are_within_the_bucket_precision() {
        let mut h = Histogram::default();
        for i in 1..=10_000u64 {
            h.record(Time::from_ps(i * 1000));
        }
        let p50 = h.quantile_ns(0.5).unwrap();
        let p99 = h.quantile_ns(0.99).unwrap();
        assert!((p50 / 5000.0 - 1.0).abs() < 1.0 / 64.0, "{p50}");
        assert!((p99 / 9900.0 - 1.0).abs() < 1.0 / 64.0, "{p99}");
        assert_eq!(h.mean_ns().unwrap(), 5000.5);
        assert_eq!(h.quantile_ns(1.0).unwrap(), 10_000.0);
    }

    #[test]
    fn a_merge_is_the_histogram_of_both_sample_sets() {
        let (mut a, mut b, mut both) = (
            Histogram::default(),
            Histogram::default(),
            Histogram::default(),
        );
        for i in 1..=100u64 {
            let t = Time::from_ps(i * 977);
            if i % 3 == 0 {
                a.record(t)
            } else {
                b.record(t)
            }
            both.record(t);
        }
        a.merge(&b);
        assert_eq!(a, both);
    }

    #[test]
    fn small_values_are_exact_and_empty_has_none() {
        let mut h = Histogram::default();
        assert_eq!(h.quantile_ns(0.5), None);
        h.record(Time::from_ps(7));
        assert_eq!(h.quantile_ns(0.5).unwrap(), 0.007);
    }
}
