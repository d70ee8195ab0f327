//! The study's throughput statistics (docs/hardware.md §4): each connection's operations
//! counted per sample window; a connection's throughput is the mean of its samples; the
//! system's is the sum of the connections' means. The spread is the sample standard
//! deviation (n − 1) of the system's per-sample throughput — the sum over connections
//! within each window — not a sum of per-connection deviations, which would overstate it
//! whenever connections do not vary together.

/// Per-connection completions per sample window.
#[derive(Clone, Debug, PartialEq)]
pub struct Samples {
    /// Length of one window, seconds.
    pub window_s: f64,
    /// `counts[c][i]`: completions of connection c in window i.
    pub counts: Vec<Vec<u64>>,
}

/// What the samples give.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Throughput {
    /// Sum of per-connection mean rates, operations per second.
    pub ops_per_s: f64,
    /// Sample standard deviation of the per-window system rate, operations per second.
    pub std_ops_per_s: f64,
}

/// The mean and sample standard deviation (n − 1; zero for a single value) of `xs`.
pub fn mean_std(xs: &[f64]) -> (f64, f64) {
    if xs.is_empty() {
        return (0.0, 0.0);
    }
    let n = xs.len() as f64;
    let mean = xs.iter().sum::<f64>() / n;
    if xs.len() < 2 {
        return (mean, 0.0);
    }
    let var = xs.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / (n - 1.0);
    (mean, var.sqrt())
}

impl Samples {
    pub fn new(connections: usize, windows: usize, window_s: f64) -> Samples {
        Samples {
            window_s,
            counts: vec![vec![0; windows]; connections],
        }
    }

    pub fn windows(&self) -> usize {
        self.counts.first().map_or(0, Vec::len)
    }

    /// Sum of per-connection means and the per-window system rate's deviation.
    pub fn throughput(&self) -> Throughput {
        let rate = |c: u64| c as f64 / self.window_s;
        let sum_of_means: f64 = self
            .counts
            .iter()
            .map(|conn| mean_std(&conn.iter().map(|&c| rate(c)).collect::<Vec<_>>()).0)
            .sum();
        let per_window: Vec<f64> = (0..self.windows())
            .map(|i| self.counts.iter().map(|conn| rate(conn[i])).sum())
            .collect();
        Throughput {
            ops_per_s: sum_of_means,
            std_ops_per_s: mean_std(&per_window).1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sum_of_means_and_sample_deviation_on_known_samples() {
        // Two connections, three 10 ms windows.
        let s = Samples {
            window_s: 0.01,
            counts: vec![vec![10, 20, 30], vec![5, 5, 5]],
        };
        let t = s.throughput();
        // Means 2,000/s and 500/s.
        assert!((t.ops_per_s - 2500.0).abs() < 1e-9, "{t:?}");
        // Per-window system rates 1,500, 2,500, 3,500: sample deviation 1,000 (n − 1);
        // the population formula would give 816.5.
        assert!((t.std_ops_per_s - 1000.0).abs() < 1e-9, "{t:?}");
        assert_eq!(mean_std(&[4.0]), (4.0, 0.0));
    }

    #[test]
    fn connections_varying_against_each_other_give_a_steady_system() {
        let s = Samples {
            window_s: 1.0,
            counts: vec![vec![1, 3, 1, 3], vec![3, 1, 3, 1]],
        };
        let t = s.throughput();
        assert_eq!(t.ops_per_s, 4.0);
        assert_eq!(t.std_ops_per_s, 0.0, "each window's sum is 4");
    }
}
