//! The verdict on a `soak_slope` claim ("no leak over 24 h"): the RSS slope a soak's record
//! carries (Theil–Sen over its steady phase, with its interval), per run, against the larger of
//! the claimed slope and the floor the workload states. Reproduced when every run's interval
//! lies at or below it, contradicted when every run's lies above it, else inconclusive, and
//! inconclusive from one run whatever it shows (one soak is one reading); the
//! steady phase's length is in the verdict beside the length the source claims.

use super::judge::{not_measured, Ctx};
use super::measure::repeats_of;
use super::parse::Selector;
use super::selftest::Perturb;
use super::{num, ClaimResult, Verdict};
use crate::record::{Record, Status};
use crate::spec::{SoakFigures, Workload};
use crate::stats::{Interval, Slope};

const MIB: f64 = 1_048_576.0;

/// What one run's record gives a soak claim.
struct Run<'a> {
    figures: &'a SoakFigures,
    /// The RSS level at the end of the idle phase after the load.
    after: Option<crate::spec::MemoryLevel>,
    slope: Slope,
    steady_ms: u64,
}

fn run_of(r: &Record) -> Result<Run<'_>, String> {
    let steady_ms = match &r.cell.workload {
        Workload::Soak { steady_ms, .. } => *steady_ms,
        w => {
            return Err(format!(
                "{} is a {} workload, not a soak: an RSS slope needs a long steady phase (kind = \"soak\")",
                r.cell.id,
                w.kind()
            ))
        }
    };
    let figures = r.metrics.load.as_ref().and_then(|l| l.soak.as_ref());
    let figures = figures.ok_or_else(|| format!("{} recorded no soak figures", r.cell.id))?;
    let slope = figures
        .rss_bytes_per_hour
        .ok_or_else(|| format!("{}'s steady phase gave too few memory samples for a slope", r.cell.id))?;
    let after = r.metrics.memory.under_load.as_ref().and_then(|u| u.after_level);
    Ok(Run { figures, after, slope: slope.scaled(1.0 / MIB), steady_ms })
}

/// The self-test's counterpart of a scaled figure for a slope claimed near zero: a leak of
/// `s` times the threshold added (doubled), or `1/s` times it taken away (halved); widened, the
/// interval's half-widths multiplied.
fn perturbed(p: Perturb, s: Slope, threshold: f64) -> Slope {
    let t = if threshold > 0.0 { threshold } else { 1.0 };
    let shift = |d: f64| Slope { estimate: s.estimate + d, lower: s.lower + d, upper: s.upper + d, ..s };
    match p {
        Perturb::None => s,
        Perturb::Scale(k) if k >= 1.0 => shift(k * t),
        Perturb::Scale(k) => shift(-t / k),
        Perturb::Widen(k) => Slope {
            lower: s.estimate - (s.estimate - s.lower) * k,
            upper: s.estimate + (s.upper - s.estimate) * k,
            ..s
        },
    }
}

/// `30 min`, `90.5 min`, `24 h`.
fn minutes(ms: u64) -> String {
    let whole = |x: f64| if (x - x.round()).abs() < 1e-9 { format!("{x:.0}") } else { format!("{x:.1}") };
    let m = ms as f64 / 60_000.0;
    if m >= 120.0 {
        format!("{} h", whole(m / 60.0))
    } else {
        format!("{} min", whole(m))
    }
}

impl Ctx<'_> {
    pub(super) fn soak_slope(
        &self,
        mut r: ClaimResult,
        sel: &Selector,
        value: f64,
        unit: &str,
        duration: &str,
    ) -> ClaimResult {
        r.evidence = Some(sel.text());
        r.claimed = Some(value);
        r.unit = unit.to_string();
        r.judged_as = "soak_slope".into();
        let records = repeats_of(self.records, &sel.cell);
        if records.is_empty() {
            return not_measured(r, format!("no record of cell {} in the run", sel.cell));
        }
        r.cells = vec![sel.cell.clone()];
        let (failed, done): (Vec<&Record>, Vec<&Record>) =
            records.iter().copied().partition(|x| x.status == Status::Failed);
        let runs: Vec<Run> = match done.iter().map(|x| run_of(x)).collect::<Result<_, _>>() {
            Ok(runs) => runs,
            Err(why) => return not_measured(r, why),
        };
        if runs.is_empty() {
            let why: Vec<String> =
                failed.iter().filter_map(|x| x.failure.as_ref()).map(|f| f.to_string()).collect();
            r.verdict = Verdict::Inconclusive;
            r.explanation =
                format!("Every run of {} failed, so no slope was fitted: {}.", sel.cell, why.join("; "));
            return r;
        }
        let floor = runs.iter().map(|x| x.figures.leak_floor_bytes_per_hour as f64 / MIB).fold(0.0, f64::max);
        let threshold = value.max(floor);
        let slopes: Vec<Slope> = runs.iter().map(|x| perturbed(self.perturb, x.slope, threshold)).collect();
        let above = slopes.iter().filter(|s| s.lower > threshold).count();
        let below = slopes.iter().filter(|s| s.upper <= threshold).count();
        r.verdict = if slopes.len() < 2 {
            // One soak is one reading: its slope's interval is within the run.
            Verdict::Inconclusive
        } else if below == slopes.len() {
            Verdict::Reproduced
        } else if above == slopes.len() {
            Verdict::Contradicted
        } else {
            Verdict::Inconclusive
        };
        let mut est: Vec<f64> = slopes.iter().map(|s| s.estimate).collect();
        est.sort_by(f64::total_cmp);
        let (lo, hi) = slopes
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), s| (l.min(s.lower), h.max(s.upper)));
        r.measured = Some(est[est.len() / 2]);
        r.interval = Some(Interval { estimate: est[est.len() / 2], lower: lo, upper: hi, confidence: 0.95 });
        r.repeats = Some(slopes.len() as u32);
        r.n = Some(slopes.iter().map(|s| u64::from(s.n)).sum());
        let each: Vec<String> = runs
            .iter()
            .zip(&slopes)
            .zip(&done)
            .map(|((run, s), rec)| {
                let alone = if s.lower > threshold {
                    "above the threshold: a leak, in this run alone"
                } else if s.upper <= threshold {
                    "at or below the threshold: no leak, in this run alone"
                } else {
                    "straddling the threshold"
                };
                let level = |l: Option<crate::spec::MemoryLevel>| {
                    l.map_or("—".to_string(), |l| format!("{} MiB", num(l.estimate as f64 / MIB)))
                };
                let levels = format!(
                    "; idle level {} before the load, {} after it",
                    level(run.figures.idle_before),
                    level(run.after)
                );
                format!(
                    "run {}: {} {unit} (95% CI {}–{}, {alone}; Theil–Sen over {} points, {} effective) over {} of steady load{levels}",
                    rec.run_id,
                    num(s.estimate),
                    num(s.lower),
                    num(s.upper),
                    s.n,
                    num(s.n_effective),
                    minutes(run.steady_ms)
                )
            })
            .collect();
        let rule = format!(
            "a leak is named when the interval lies above {} {unit} (the larger of the claimed {} and the workload's floor {})",
            num(threshold),
            num(value),
            num(floor)
        );
        let verdict = match r.verdict {
            _ if slopes.len() < 2 => {
                "no verdict: one run's slope is one reading, and the spread between runs is unknown (judge two or more runs)"
            }
            Verdict::Reproduced => "no leak: every run's interval lies at or below it",
            Verdict::Contradicted => "a leak: every run's interval lies above it",
            _ => "not decided: an interval straddles it, or the runs disagree",
        };
        let failed_text = if failed.is_empty() {
            String::new()
        } else {
            format!(" {} run(s) failed and are left out.", failed.len())
        };
        let steady = minutes(runs.iter().map(|x| x.steady_ms).max().unwrap_or(0));
        let caveat = match r.verdict {
            Verdict::Contradicted => {
                "growth that levels off later (a warm-up longer than the soak) is not ruled out".to_string()
            }
            _ => "a slower leak or one that starts later is not ruled out".to_string(),
        };
        r.explanation = format!(
            "RSS slope {}; {rule}: {verdict}. The claim is over {duration}; this soak's steady phase was {steady}, so {caveat}.{failed_text}",
            each.join("; "),
        );
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_self_test_adds_a_leak_at_the_threshold_or_takes_one_away() {
        let s = Slope { estimate: 0.1, lower: -0.2, upper: 0.4, n: 100, n_effective: 20.0 };
        let up = perturbed(Perturb::Scale(2.0), s, 1.0);
        assert!((up.lower - 1.8).abs() < 1e-12 && up.lower > 1.0, "{up:?}");
        let down = perturbed(Perturb::Scale(0.5), s, 1.0);
        assert!((down.upper + 1.6).abs() < 1e-12, "{down:?}");
        let wide = perturbed(Perturb::Widen(3.0), s, 1.0);
        assert!((wide.lower + 0.8).abs() < 1e-12 && (wide.upper - 1.0).abs() < 1e-12, "{wide:?}");
        assert_eq!(perturbed(Perturb::None, s, 1.0), s);
    }
}
