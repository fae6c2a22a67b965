//! How near a band verdict is to flipping: the tolerance at which it would change, and the
//! interval's distance to the band's nearest edge. A verdict is marginal when a tolerance a tenth
//! of its own away (15 % → 13.5 % or 16.5 %) would change it: AUDIT.md shows those first.
//! Pure arithmetic on the judged interval (after widening for noise).

use serde::Serialize;

use super::Verdict;
use crate::stats::Interval;

/// A tolerance moved by less than this share of itself flips a marginal verdict.
pub const MARGINAL_SHARE: f64 = 0.1;

/// The margin of one band verdict.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Margin {
    /// The tolerance at which the verdict would change (relative, or in fraction points for an
    /// error rate), and to what; None when no tolerance changes it (an interval that holds the
    /// claimed value is never contradicted).
    pub flips_at: Option<f64>,
    pub flips_to: Option<Verdict>,
    /// How far the interval lies from the nearest band edge: inside it for a reproduced verdict,
    /// outside it for a contradicted one (relative: the factor minus 1; points: the difference);
    /// None for an interval that straddles an edge.
    pub edge_distance: Option<f64>,
    /// Whether the judged tolerance moved by `MARGINAL_SHARE` of itself flips the verdict.
    pub marginal: bool,
}

/// The margin of `v`, judged from interval `i` against `claimed` with tolerance `tol`, on the log
/// scale (`points` false) or in points.
pub fn of(v: Verdict, i: &Interval, claimed: f64, tol: f64, points: bool) -> Option<Margin> {
    let (l, u) = (i.lower, i.upper);
    if !(l.is_finite() && u.is_finite()) || (!points && (l <= 0.0 || claimed <= 0.0)) {
        return None;
    }
    // The tolerance whose band edge touches a bound: `away(a, b)` for a bound b beyond a.
    let away = |a: f64, b: f64| if points { b - a } else { b / a - 1.0 };
    // Smallest tolerance that holds the whole interval.
    let holds = away(claimed, u).max(away(l, claimed));
    // The tolerance below which the interval lies wholly outside, if it lies to one side.
    let outside = if u < claimed {
        Some(away(u, claimed))
    } else if l > claimed {
        Some(away(claimed, l))
    } else {
        None
    };
    let (lo, hi) =
        if points { (claimed - tol, claimed + tol) } else { (claimed / (1.0 + tol), claimed * (1.0 + tol)) };
    let (flips_at, flips_to, edge_distance) = match v {
        Verdict::Reproduced => (Some(holds), Some(Verdict::Inconclusive), Some(away(lo, l).min(away(u, hi)))),
        Verdict::Contradicted => {
            let d = if u < lo { away(u, lo) } else { away(hi, l) };
            (outside, Some(Verdict::Inconclusive), Some(d))
        }
        Verdict::Inconclusive => {
            // The nearer of: wide enough to hold it, or narrow enough to exclude it.
            let to_reproduced = (holds, Verdict::Reproduced);
            let nearest = match outside {
                Some(o) if (tol - o).abs() < (holds - tol).abs() => (o, Verdict::Contradicted),
                _ => to_reproduced,
            };
            (Some(nearest.0), Some(nearest.1), None)
        }
        _ => return None,
    };
    let marginal = flips_at.is_some_and(|f| (f - tol).abs() <= MARGINAL_SHARE * tol);
    Some(Margin { flips_at, flips_to, edge_distance, marginal })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn iv(lower: f64, upper: f64) -> Interval {
        Interval { estimate: (lower + upper) / 2.0, lower, upper, confidence: 0.95 }
    }

    #[test]
    fn a_reproduced_verdict_just_inside_an_edge_is_marginal() {
        // Band at 15 %: [0.8696, 1.15]; the interval ends 0.5 % inside the upper edge.
        let m = of(Verdict::Reproduced, &iv(0.95, 1.15 / 1.005), 1.0, 0.15, false).unwrap();
        assert!((m.flips_at.unwrap() - (1.15 / 1.005 - 1.0)).abs() < 1e-12, "{m:?}");
        assert!((m.edge_distance.unwrap() - 0.005).abs() < 1e-9, "{m:?}");
        assert!(m.marginal);
        let m = of(Verdict::Reproduced, &iv(0.98, 1.02), 1.0, 0.15, false).unwrap();
        assert!(!m.marginal && (m.flips_at.unwrap() - (1.0 / 0.98 - 1.0)).abs() < 1e-12, "{m:?}");
    }

    #[test]
    fn contradicted_and_undecided_verdicts_name_where_they_flip() {
        let m = of(Verdict::Contradicted, &iv(1.3, 1.4), 1.0, 0.15, false).unwrap();
        assert!((m.flips_at.unwrap() - 0.3).abs() < 1e-12 && m.flips_to == Some(Verdict::Inconclusive));
        assert!((m.edge_distance.unwrap() - (1.3 / 1.15 - 1.0)).abs() < 1e-12);
        // Straddling the upper edge: 20 % holds it, 10 % would exclude it; 10 % is nearer.
        let m = of(Verdict::Inconclusive, &iv(1.1, 1.2), 1.0, 0.15, false).unwrap();
        assert_eq!(m.flips_to, Some(Verdict::Contradicted));
        assert!((m.flips_at.unwrap() - 0.1).abs() < 1e-12 && m.edge_distance.is_none());
        // An interval over the claimed value is never contradicted.
        let m = of(Verdict::Inconclusive, &iv(0.8, 1.3), 1.0, 0.15, false).unwrap();
        assert_eq!(
            (m.flips_to, m.flips_at.map(|f| (f * 1e9).round())),
            (Some(Verdict::Reproduced), Some(3e8))
        );
    }

    #[test]
    fn error_rates_flip_in_points() {
        let m = of(Verdict::Reproduced, &iv(0.0, 0.00095), 0.0, 0.001, true).unwrap();
        assert!((m.flips_at.unwrap() - 0.00095).abs() < 1e-12 && m.marginal, "{m:?}");
    }
}
