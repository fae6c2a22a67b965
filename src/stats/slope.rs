//! A robust slope with its 95 % interval: Theil–Sen (the median of the slopes of every pair of
//! points) with Sen's rank interval, counted with an effective sample size that the residuals'
//! lag-1 autocorrelation shrinks. Samples of one process's memory a second apart are not
//! independent draws (a heap grows and is collected over many seconds); Sen's interval on them as
//! they are would claim a precision they do not have. What soaks fit: RSS and latency over time.

use serde::{Deserialize, Serialize};

#[cfg(test)]
use super::SplitMix64;

/// More points than this are first reduced to this many bins of consecutive points (each its
/// median time and value): the pairs grow as the square of the points.
pub const MAX_POINTS: usize = 2_000;

/// A slope with its 95 % interval, in the unit of y per unit of x.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Slope {
    pub estimate: f64,
    pub lower: f64,
    pub upper: f64,
    /// The points fitted (after binning), and the effective count the interval assumed.
    pub n: u32,
    pub n_effective: f64,
}

impl Slope {
    /// Whether the interval excludes zero.
    pub fn excludes_zero(&self) -> bool {
        self.lower > 0.0 || self.upper < 0.0
    }

    /// The slope in another unit (each bound multiplied by `k`, which is positive).
    pub fn scaled(self, k: f64) -> Slope {
        Slope { estimate: self.estimate * k, lower: self.lower * k, upper: self.upper * k, ..self }
    }
}

/// Theil–Sen over `(x, y)` points (any order; non-finite ones left out). None for fewer than
/// three points with distinct x.
pub fn theil_sen(points: &[(f64, f64)]) -> Option<Slope> {
    let mut p: Vec<(f64, f64)> =
        points.iter().copied().filter(|(x, y)| x.is_finite() && y.is_finite()).collect();
    p.sort_by(|a, b| a.0.total_cmp(&b.0));
    if p.len() > MAX_POINTS {
        p = binned(&p, MAX_POINTS);
    }
    let n = p.len();
    let mut slopes = Vec::with_capacity(n * n.saturating_sub(1) / 2);
    for i in 0..n {
        for j in i + 1..n {
            let dx = p[j].0 - p[i].0;
            if dx > 0.0 {
                slopes.push((p[j].1 - p[i].1) / dx);
            }
        }
    }
    if n < 3 || slopes.is_empty() {
        return None;
    }
    slopes.sort_by(f64::total_cmp);
    let estimate = super::quantile_sorted(&slopes, 0.5);
    let n_effective = effective_n(&p, estimate);
    // Sen: the rank statistic's spread is z sqrt(n (n - 1) (2n + 5) / 18) over n (n - 1) / 2
    // pairs; as a share of the pairs it applies to the pairs there are.
    let m = n_effective;
    let share = (1.96 * (m * (m - 1.0) * (2.0 * m + 5.0) / 18.0).sqrt() / (m * (m - 1.0) / 2.0)).min(1.0);
    let last = slopes.len() - 1;
    let lo = ((slopes.len() as f64 * (1.0 - share) / 2.0).floor() as usize).min(last);
    let hi = ((slopes.len() as f64 * (1.0 + share) / 2.0).ceil() as usize).saturating_sub(1).min(last);
    Some(Slope { estimate, lower: slopes[lo], upper: slopes[hi].max(slopes[lo]), n: n as u32, n_effective })
}

/// `n (1 - r) / (1 + r)` for the lag-1 autocorrelation r of the residuals in x order (r below
/// 0 counts as 0: no credit is taken for anti-correlation), at least 3.
fn effective_n(p: &[(f64, f64)], slope: f64) -> f64 {
    let r: Vec<f64> = p.iter().map(|(x, y)| y - slope * x).collect();
    let mean = r.iter().sum::<f64>() / r.len() as f64;
    let var: f64 = r.iter().map(|v| (v - mean).powi(2)).sum();
    let cov: f64 = r.windows(2).map(|w| (w[0] - mean) * (w[1] - mean)).sum();
    let rho = if var > 0.0 { (cov / var).clamp(0.0, 0.99) } else { 0.0 };
    (p.len() as f64 * (1.0 - rho) / (1.0 + rho)).max(3.0)
}

/// Sorted points reduced to `bins` bins of consecutive points, each its median x and median y.
fn binned(p: &[(f64, f64)], bins: usize) -> Vec<(f64, f64)> {
    (0..bins)
        .map(|b| {
            let chunk = &p[b * p.len() / bins..(b + 1) * p.len() / bins];
            let mut xs: Vec<f64> = chunk.iter().map(|q| q.0).collect();
            let mut ys: Vec<f64> = chunk.iter().map(|q| q.1).collect();
            (super::median(&mut xs), super::median(&mut ys))
        })
        .collect()
}

/// Seeded noise for tests elsewhere: `n` values uniform in `[-1, 1)`.
#[cfg(test)]
pub(crate) fn test_noise(n: usize, seed: u64) -> Vec<f64> {
    let mut rng = SplitMix64(seed);
    (0..n).map(|_| (rng.next_u64() >> 11) as f64 / (1u64 << 52) as f64 - 1.0).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_with_noise_is_recovered_within_its_interval() {
        let noise = test_noise(600, 7);
        // 10 MB/h over 10 minutes a second apart, ±2 MB of noise.
        let pts: Vec<(f64, f64)> =
            (0..600).map(|i| (i as f64 / 3600.0, 50e6 + 10e6 * i as f64 / 3600.0 + 2e6 * noise[i])).collect();
        let s = theil_sen(&pts).unwrap();
        assert!(s.lower <= 10e6 && 10e6 <= s.upper, "{s:?}");
        assert!(s.excludes_zero() && s.upper - s.lower < 6e6, "{s:?}");
        assert_eq!(s.n, 600);
    }

    #[test]
    fn a_flat_series_with_a_sawtooth_contains_zero_and_is_wider_than_independent_noise() {
        // A heap that grows 1 MB a second for 20 s and is collected, over 10 minutes: no leak.
        let saw: Vec<(f64, f64)> = (0..600).map(|i| (i as f64, 40e6 + 1e6 * (i % 20) as f64)).collect();
        let s = theil_sen(&saw).unwrap();
        assert!(s.lower <= 0.0 && 0.0 <= s.upper, "{s:?}");
        assert!(s.n_effective < 100.0, "the sawtooth's residuals are correlated: {s:?}");
        // The same spread of values, shuffled in time, is independent: a narrower interval.
        let noise = test_noise(600, 3);
        let iid: Vec<(f64, f64)> = (0..600).map(|i| (i as f64, 40e6 + 10e6 * (noise[i] + 1.0))).collect();
        let t = theil_sen(&iid).unwrap();
        assert!(t.n_effective > 400.0, "{t:?}");
        assert!(t.upper - t.lower < s.upper - s.lower, "{t:?} vs {s:?}");
    }

    #[test]
    fn a_memory_that_never_moves_has_slope_zero_exactly() {
        let flat: Vec<(f64, f64)> = (0..100).map(|i| (i as f64, 12_345_678.0)).collect();
        let s = theil_sen(&flat).unwrap();
        assert_eq!((s.estimate, s.lower, s.upper), (0.0, 0.0, 0.0));
        assert!(!s.excludes_zero());
    }

    #[test]
    fn many_points_are_binned_and_too_few_give_nothing() {
        let pts: Vec<(f64, f64)> = (0..10_000).map(|i| (i as f64, 3.0 * i as f64)).collect();
        let s = theil_sen(&pts).unwrap();
        assert_eq!(s.n as usize, MAX_POINTS);
        assert!((s.estimate - 3.0).abs() < 1e-9 && (s.lower - 3.0).abs() < 1e-9, "{s:?}");
        assert!(theil_sen(&[(0.0, 1.0), (1.0, 2.0)]).is_none());
        assert!(theil_sen(&[(1.0, 1.0), (1.0, 2.0), (1.0, 3.0)]).is_none());
        assert!(theil_sen(&[(0.0, f64::NAN), (1.0, 2.0), (2.0, 3.0)]).is_none());
    }
}
