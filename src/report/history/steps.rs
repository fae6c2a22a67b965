//! Step detection, by the rule in the documentation of `history`: the noise of a series, the
//! penalized least-absolute-deviation fit of its levels, and the boundaries that are steps beyond
//! noise. Points in, segments and steps out.

use crate::stats::{self, Interval};

use super::{MetricHistory, Point, Segment, Step};

/// The smallest change of level reported as a step: the larger level at least 10 % above the
/// smaller.
pub const MIN_STEP_CHANGE: f64 = 0.10;

/// The smallest noise assumed, relative (2 %): identical figures must not make every wiggle a step.
pub const NOISE_FLOOR: f64 = 0.02;

/// The cost of one more segment, in units of σ, is this times ln(n + 1).
pub const PENALTY_PER_LN_N: f64 = 3.0;

/// The fewest points in a segment of the fit.
pub const MIN_SEGMENT: usize = 2;

fn median_of(v: &[f64]) -> f64 {
    stats::median(&mut v.to_vec())
}

/// The relative noise of a series on the ln scale (step 2). `cis` carry, beside each interval,
/// the runs behind it when it is a between-run one (0 otherwise).
fn noise(z: &[f64], cis: &[(Option<Interval>, usize)]) -> f64 {
    let half: Vec<f64> = cis
        .iter()
        .zip(z)
        .filter_map(|((ci, runs), zk)| {
            // A between-run interval's t quantile, brought to the normal one's 1.96.
            let scale = if *runs >= 2 { 1.96 / stats::t_975(runs - 1) } else { 1.0 };
            ci.map(|i| (i.upper - i.lower) / 2.0 / zk.exp() * scale)
        })
        .filter(|h| h.is_finite())
        .collect();
    let from_intervals = if half.is_empty() { 0.0 } else { median_of(&half) };
    let diffs: Vec<f64> = z.windows(2).map(|w| (w[1] - w[0]).abs()).collect();
    let from_diffs = if diffs.is_empty() { 0.0 } else { 1.4826 * median_of(&diffs) / 2f64.sqrt() };
    NOISE_FLOOR.max(from_intervals).max(from_diffs)
}

/// The boundaries (indexes of the first value of each segment after the first) of the penalized
/// least-absolute-deviation fit of `z` with segments of at least [`MIN_SEGMENT`] values (step 3).
fn lad_boundaries(z: &[f64], sigma: f64) -> Vec<usize> {
    let n = z.len();
    if n < 2 * MIN_SEGMENT {
        return Vec::new();
    }
    let beta = PENALTY_PER_LN_N * ((n + 1) as f64).ln();
    let cost = |i: usize, j: usize| {
        let m = median_of(&z[i..j]);
        z[i..j].iter().map(|v| (v - m).abs()).sum::<f64>() / sigma
    };
    // best[j]: the least cost of z[..j]; prev[j]: where its last segment starts.
    let mut best = vec![f64::INFINITY; n + 1];
    let mut prev = vec![0usize; n + 1];
    best[0] = 0.0;
    for j in MIN_SEGMENT..=n {
        for i in (0..=j - MIN_SEGMENT).filter(|&i| i == 0 || i >= MIN_SEGMENT) {
            if !best[i].is_finite() {
                continue;
            }
            let c = best[i] + cost(i, j) + beta;
            // Ties go to the longer last segment (fewer boundaries).
            if c < best[j] - 1e-12 {
                best[j] = c;
                prev[j] = i;
            }
        }
    }
    let mut bounds = Vec::new();
    let mut j = n;
    while j > 0 {
        let i = prev[j];
        if i > 0 {
            bounds.push(i);
        }
        j = i;
    }
    bounds.reverse();
    bounds
}

/// The present points of a metric: (index into the versions, value, interval), positive values
/// only (the ln scale needs them).
fn present(points: &[Option<Point>]) -> Vec<(usize, f64, Option<Interval>, usize)> {
    points
        .iter()
        .enumerate()
        .filter_map(|(i, p)| {
            p.as_ref().map(|p| (i, p.value, p.ci, if p.between { p.run_values.len() } else { 0 }))
        })
        .filter(|(_, v, _, _)| v.is_finite() && *v > 0.0)
        .collect()
}

pub(super) fn fit(points: &[Option<Point>]) -> Vec<Segment> {
    let pts = present(points);
    if pts.is_empty() {
        return Vec::new();
    }
    let z: Vec<f64> = pts.iter().map(|p| p.1.ln()).collect();
    let cis: Vec<(Option<Interval>, usize)> = pts.iter().map(|p| (p.2, p.3)).collect();
    let bounds = lad_boundaries(&z, noise(&z, &cis));
    let mut starts = vec![0];
    starts.extend(bounds);
    starts
        .iter()
        .enumerate()
        .map(|(s, &a)| {
            let b = starts.get(s + 1).copied().unwrap_or(pts.len());
            let level = median_of(&pts[a..b].iter().map(|p| p.1).collect::<Vec<_>>());
            Segment { first: pts[a].0, last: pts[b - 1].0, level }
        })
        .collect()
}

/// Whether two neighbouring points are apart beyond noise in the direction of `up` (rule b):
/// by Welch's t on their runs when both ran twice or more, else by disjoint intervals.
fn apart(a: &Point, b: &Point, up: bool) -> bool {
    if let Some(r) = stats::ratio_between_runs(&a.run_values, &b.run_values) {
        return if up { r.lower > 1.0 } else { r.upper < 1.0 };
    }
    match (a.ci, b.ci) {
        (Some(x), Some(y)) => {
            if up {
                y.lower > x.upper
            } else {
                y.upper < x.lower
            }
        }
        _ => {
            let (lo, hi) = if up { (a.value, b.value) } else { (b.value, a.value) };
            hi >= lo * (1.0 + MIN_STEP_CHANGE)
        }
    }
}

pub(super) fn steps_of(m: &MetricHistory, versions: &[String]) -> Vec<Step> {
    let mut out = Vec::new();
    for w in m.segments.windows(2) {
        let (before, after) = (w[0].level, w[1].level);
        let up = after > before;
        let (lo, hi) = if up { (before, after) } else { (after, before) };
        if hi < lo * (1.0 + MIN_STEP_CHANGE) {
            continue;
        }
        // (c) The levels move more than the same release moved across the run (A/A controls).
        if m.control_drift.is_some_and(|d| hi <= lo * (1.0 + d)) {
            continue;
        }
        let (Some(a), Some(b)) = (&m.points[w[0].last], &m.points[w[1].first]) else { continue };
        if !apart(a, b, up) {
            continue;
        }
        out.push(Step {
            metric: m.metric,
            from_version: versions[w[0].last].clone(),
            to_version: versions[w[1].first].clone(),
            from_index: w[0].last,
            index: w[1].first,
            from_value: a.value,
            to_value: b.value,
            before,
            after,
            ratio: after / before,
            regression: up == m.metric.higher_is_worse(),
        });
    }
    out
}
