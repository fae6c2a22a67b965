//! Runs as the unit: the interval of a figure across fresh runs of a cell (each run one value),
//! and the seeded shuffle that orders a run's cells. A within-run interval only sees one
//! container's samples; the spread between containers, hours and host states is larger, and
//! only runs measure it.

use super::{Interval, SplitMix64};

/// Two-sided 97.5 % quantiles of Student's t for 1..=30 degrees of freedom (a 95 % interval).
const T_975: [f64; 30] = [
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
    2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
];

/// Student's t 97.5 % quantile for `df` degrees of freedom (1.96 beyond 120).
pub fn t_975(df: usize) -> f64 {
    match df {
        0 => f64::INFINITY,
        1..=30 => T_975[df - 1],
        31..=60 => 2.000,
        61..=120 => 1.980,
        _ => 1.960,
    }
}

/// The 95 % between-run interval of a figure from one value per run: Student's t on the
/// logarithms of the values (run-to-run spread of latencies is multiplicative), around their
/// mean, back-transformed; the estimate is the runs' median. With three runs the interval always
/// holds every run's value (t = 4.30 covers the largest possible deviation, 1.15 s), so the
/// median is inside it. None for fewer than two runs or a value that is not positive and finite.
pub fn between_runs(values: &[f64]) -> Option<Interval> {
    if values.len() < 2 || values.iter().any(|v| !v.is_finite() || *v <= 0.0) {
        return None;
    }
    let logs: Vec<f64> = values.iter().map(|v| v.ln()).collect();
    let l = mean_interval(&logs)?;
    let estimate = super::median(&mut values.to_vec());
    let (lower, upper) = (l.lower.exp().min(estimate), l.upper.exp().max(estimate));
    Some(Interval { estimate, lower, upper, confidence: 0.95 })
}

/// The 95 % Student t interval of the mean of `values`, on the values themselves (for figures
/// that are not log-normal, such as shares that sit at 0 or 1); the estimate is the mean. None
/// for fewer than two values or one that is not finite.
pub fn mean_interval(values: &[f64]) -> Option<Interval> {
    if values.len() < 2 || values.iter().any(|v| !v.is_finite()) {
        return None;
    }
    let n = values.len();
    let mean = values.iter().sum::<f64>() / n as f64;
    let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
    let half = t_975(n - 1) * (var / n as f64).sqrt();
    Some(Interval { estimate: mean, lower: mean - half, upper: mean + half, confidence: 0.95 })
}

/// The 95 % interval of the ratio b / a of two sets of runs (one value per run, at least two
/// each): Welch's t on the difference of the logarithms' means (Welch–Satterthwaite degrees of
/// freedom), back-transformed; the estimate is the ratio of the runs' geometric means. None when
/// a set has fewer than two runs or a value that is not positive and finite.
pub fn ratio_between_runs(a: &[f64], b: &[f64]) -> Option<Interval> {
    let logs = |v: &[f64]| -> Option<(f64, f64, f64)> {
        if v.len() < 2 || v.iter().any(|x| !x.is_finite() || *x <= 0.0) {
            return None;
        }
        let n = v.len() as f64;
        let l: Vec<f64> = v.iter().map(|x| x.ln()).collect();
        let mean = l.iter().sum::<f64>() / n;
        let var = l.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
        Some((mean, var / n, n))
    };
    let ((ma, sa, na), (mb, sb, nb)) = (logs(a)?, logs(b)?);
    let d = mb - ma;
    let se2 = sa + sb;
    let df = match se2 > 0.0 {
        true => se2 * se2 / (sa * sa / (na - 1.0) + sb * sb / (nb - 1.0)),
        false => na + nb - 2.0,
    };
    let half = t_975(df.floor().max(1.0) as usize) * se2.sqrt();
    Some(Interval { estimate: d.exp(), lower: (d - half).exp(), upper: (d + half).exp(), confidence: 0.95 })
}

/// The smallest interval holding both (the estimate `a`'s): a between-run interval is never
/// reported narrower than the within-run one (three runs can agree by chance).
pub fn hull(a: Interval, b: Option<Interval>) -> Interval {
    match b.filter(Interval::is_finite) {
        Some(b) => Interval { lower: a.lower.min(b.lower), upper: a.upper.max(b.upper), ..a },
        None => a,
    }
}

/// Shuffles `items` in place by Fisher–Yates with a SplitMix64 seeded by `seed`: the same seed
/// gives the same order on any machine.
pub fn seeded_shuffle<T>(items: &mut [T], seed: u64) {
    let mut rng = SplitMix64(seed);
    for i in (1..items.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        items.swap(i, j);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn three_runs_hold_their_median_and_every_value() {
        let v = [1.0, 1.1, 0.95];
        let i = between_runs(&v).unwrap();
        assert_eq!(i.estimate, 1.0);
        assert!(v.iter().all(|x| i.lower <= *x && *x <= i.upper), "{i:?}");
        // Identical runs: a zero-width interval at the value.
        let i = between_runs(&[2.0, 2.0, 2.0]).unwrap();
        assert!((i.lower - 2.0).abs() < 1e-12 && (i.upper - 2.0).abs() < 1e-12);
        assert!(between_runs(&[1.0]).is_none() && between_runs(&[1.0, 0.0]).is_none());
    }

    #[test]
    fn the_interval_narrows_with_more_runs_of_the_same_spread() {
        let three = between_runs(&[0.9, 1.0, 1.1]).unwrap();
        let nine = between_runs(&[0.9, 1.0, 1.1, 0.9, 1.0, 1.1, 0.9, 1.0, 1.1]).unwrap();
        assert!(nine.width() < three.width() / 2.0, "{three:?} {nine:?}");
    }

    #[test]
    fn a_ratio_between_runs_sees_the_runs_spread() {
        let a = [1.0, 1.1, 0.9];
        let same = ratio_between_runs(&a, &a).unwrap();
        assert!((same.estimate - 1.0).abs() < 1e-12 && same.lower < 1.0 && same.upper > 1.0);
        let slower = ratio_between_runs(&a, &[2.0, 2.2, 1.8]).unwrap();
        assert!((slower.estimate - 2.0).abs() < 1e-9 && slower.lower > 1.5, "{slower:?}");
        // Identical runs: an exact ratio.
        let exact = ratio_between_runs(&[1.0, 1.0], &[3.0, 3.0]).unwrap();
        assert!((exact.lower - 3.0).abs() < 1e-9 && (exact.upper - 3.0).abs() < 1e-9);
        assert!(ratio_between_runs(&[1.0], &a).is_none());
    }

    #[test]
    fn a_seeded_shuffle_is_a_permutation_and_repeatable() {
        let mut a: Vec<u32> = (0..50).collect();
        let mut b = a.clone();
        seeded_shuffle(&mut a, 7);
        seeded_shuffle(&mut b, 7);
        assert_eq!(a, b);
        assert_ne!(a, (0..50).collect::<Vec<_>>());
        let mut sorted = a.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..50).collect::<Vec<_>>());
        let mut c: Vec<u32> = (0..50).collect();
        seeded_shuffle(&mut c, 8);
        assert_ne!(a, c);
    }

    #[test]
    fn the_mean_interval_is_students_t_on_the_values_and_holds_zero() {
        // Mean 0.5, variance 1/3 (n − 1), t(3) = 3.182: half-width 3.182 × √(1/3 / 4).
        let i = mean_interval(&[0.0, 0.0, 1.0, 1.0]).unwrap();
        let half = 3.182 * (1.0f64 / 12.0).sqrt();
        assert_eq!(i.estimate, 0.5);
        assert!((i.upper - (0.5 + half)).abs() < 1e-12 && (i.lower - (0.5 - half)).abs() < 1e-12, "{i:?}");
        // Identical values: a zero-width interval; zero is a value like any other.
        let z = mean_interval(&[0.0, 0.0, 0.0]).unwrap();
        assert_eq!((z.lower, z.estimate, z.upper), (0.0, 0.0, 0.0));
        assert_eq!(mean_interval(&[1.0]), None);
        assert_eq!(mean_interval(&[1.0, f64::NAN]), None);
    }
}
