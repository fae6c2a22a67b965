//! The verdicts' self-test: every claim judged again with its measured figure perturbed — scaled
//! ×0.5 and ×2 (an ordering: the measured order reversed; an outcome: the opposite outcome) and its
//! interval widened ×3 on the log scale — so a claim whose verdict cannot change is named. A claim
//! `reproduced` both halved and doubled cannot fail: its check does not depend on what was
//! measured. A claim inconclusive both ways can never be decided on this evidence (a single
//! reading, an absolute figure from other hardware with nothing to relate it to).

use serde::Serialize;

use super::judge::Ctx;
use super::{Claim, Verdict};
use crate::stats::Interval;

/// What the self-test does to the judged figure.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Perturb {
    /// The real verdict.
    None,
    /// The figure and its interval multiplied by the factor; orderings reversed, outcomes flipped.
    Scale(f64),
    /// The interval's half-widths multiplied by the factor on the log scale.
    Widen(f64),
}

impl Perturb {
    /// The judged interval, perturbed.
    pub fn interval(self, i: Interval) -> Interval {
        match self {
            Perturb::None => i,
            Perturb::Scale(s) => {
                Interval { estimate: i.estimate * s, lower: i.lower * s, upper: i.upper * s, ..i }
            }
            Perturb::Widen(k) => {
                let e = i.estimate;
                let stretch = |b: f64| {
                    if b > 0.0 && e > 0.0 {
                        e * (b / e).powf(k)
                    } else {
                        e + (b - e) * k
                    }
                };
                Interval { lower: stretch(i.lower), upper: stretch(i.upper), ..i }
            }
        }
    }

    /// An absolute band's counterpart of `interval` (an error rate's, `tol` its half-width): the
    /// figure moved down and up by twice the tolerance instead of scaled, so a published 0 can
    /// fail; widening stretches the interval linearly.
    pub fn shift(self, i: Interval, tol: f64) -> Interval {
        match self {
            Perturb::None => i,
            Perturb::Scale(s) => {
                let d = if s < 1.0 { -2.0 * tol } else { 2.0 * tol };
                Interval { estimate: i.estimate + d, lower: i.lower + d, upper: i.upper + d, ..i }
            }
            Perturb::Widen(k) => {
                let e = i.estimate;
                Interval { lower: e + (i.lower - e) * k, upper: e + (i.upper - e) * k, ..i }
            }
        }
    }

    /// Whether an ordering or an outcome is turned around (the counterpart of scaling a figure).
    pub fn flips(self) -> bool {
        matches!(self, Perturb::Scale(_))
    }
}

/// What the self-test concluded about one claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Some perturbation changes the verdict: the check depends on the measurement.
    CanFail,
    /// Reproduced both halved and doubled: the check cannot fail.
    CannotFail,
    /// Inconclusive both halved and doubled: no measurement of this kind would decide it.
    NeverDecides,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::CanFail => "can fail",
            Status::CannotFail => "cannot fail",
            Status::NeverDecides => "never decides",
        }
    }
}

/// The verdicts under each perturbation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SelfTest {
    pub halved: Verdict,
    pub doubled: Verdict,
    /// With the interval three times as wide (on the log scale).
    pub widened: Verdict,
    pub status: Status,
}

/// The status from the real verdict and the two scaled ones.
pub fn status(real: Verdict, halved: Verdict, doubled: Verdict) -> Status {
    match (real, halved, doubled) {
        (Verdict::Reproduced, Verdict::Reproduced, Verdict::Reproduced) => Status::CannotFail,
        (Verdict::Inconclusive, Verdict::Inconclusive, Verdict::Inconclusive) => Status::NeverDecides,
        _ => Status::CanFail,
    }
}

/// Judges a claim again under each perturbation; None for findings and claims not measured.
pub(super) fn self_test(ctx: &Ctx, claim: &Claim, real: Verdict) -> Option<SelfTest> {
    if matches!(real, Verdict::Finding | Verdict::NotMeasured) {
        return None;
    }
    let under = |p: Perturb| Ctx { perturb: p, ..*ctx }.judge(claim).verdict;
    let (halved, doubled, widened) =
        (under(Perturb::Scale(0.5)), under(Perturb::Scale(2.0)), under(Perturb::Widen(3.0)));
    Some(SelfTest { halved, doubled, widened, status: status(real, halved, doubled) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn perturbations_move_the_interval_as_named() {
        let i = Interval { estimate: 2.0, lower: 1.0, upper: 4.0, confidence: 0.95 };
        let h = Perturb::Scale(0.5).interval(i);
        assert_eq!((h.estimate, h.lower, h.upper), (1.0, 0.5, 2.0));
        let w = Perturb::Widen(3.0).interval(i);
        assert_eq!((w.lower, w.upper), (0.25, 16.0));
        assert!(Perturb::Scale(2.0).flips() && !Perturb::Widen(3.0).flips() && !Perturb::None.flips());
    }

    #[test]
    fn status_names_checks_that_cannot_move() {
        use Verdict::*;
        assert_eq!(status(Reproduced, Reproduced, Reproduced), Status::CannotFail);
        assert_eq!(status(Reproduced, Contradicted, Reproduced), Status::CanFail);
        assert_eq!(status(Contradicted, Contradicted, Contradicted), Status::CanFail);
        assert_eq!(status(Inconclusive, Inconclusive, Inconclusive), Status::NeverDecides);
        assert_eq!(status(Inconclusive, Contradicted, Inconclusive), Status::CanFail);
    }
}
