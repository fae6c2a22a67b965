//! Claims (`benchlab verify`): a source's published statements, encoded as `[[claim]]` tables in
//! the scenario that reproduces it (schema in `parse`), matched to a run's records and judged:
//! reproduced, contradicted, inconclusive or not measured, with the measured value, its interval,
//! the tolerance, how the claim was judged and the environment differences that could explain a
//! gap. Findings (the source disagreeing with itself) are listed with their evidence. Pure: the
//! scenario, its claims and records in, an [`Audit`] out; rendering is in `render`.
//!
//! Judging a figure against a claimed value v with tolerance t: the band is [v/(1+t), v·(1+t)]
//! (symmetric on the log scale). Reproduced when the whole interval lies in the band, contradicted
//! when the whole interval lies outside it, inconclusive when it straddles an edge.
//!
//! - **Intervals or no verdict.** A figure with no between-run interval — one reading, or one
//!   run's histogram (its interval is within the run; the spread between runs is unknown) — is
//!   inconclusive whatever its value, and says so. Between-run intervals come from repeats, or
//!   from samples that are each a fresh server process (cold starts); lines of code are exact.
//! - **Noise widens, never forbids.** A noisy figure (CV over `stats::NOISY_CV`) has its interval
//!   widened by the factor 1 + CV on each side (log scale) and is then judged by the same rule,
//!   so noise makes both verdicts harder alike.
//! - **A condition not reproduced** (`unmet_condition` on the claim) makes it not_measured with
//!   the reason, whatever the figure says.
//! - **Self-test** (`selftest`): each claim judged again with its figure halved and doubled; one
//!   that stays reproduced cannot fail, and fails `verify`.
//! - **Evidence** (`evidence`): claims grouped by the measurement they rest on.
//! - **Error rates** are judged in percentage points: the band is [v − t, v + t] (t in points,
//!   default 0.1), so a published 0 % is a value; the self-test moves the figure by 2t down and
//!   up instead of scaling it.
//! - **Consistency** (`consistency`): the source's own figures (cited from its result files, or
//!   literals with where they come from) related to each other, judged without records.
//!
//! Absolute figures are taken as such only when the lab's CPU model and count match the
//! source's `hardware`, or when they do not depend on hardware (lines of code, error rates);
//! otherwise they are judged by the ratio they imply to the claim named in
//! `relative_to`, and without one they are inconclusive (the absolute comparison is still shown).

mod consistency;
pub mod evidence;
mod judge;
pub mod margin;
pub mod measure;
mod outcome;
pub mod parse;
pub mod render;
pub mod runs;
pub mod selftest;
mod soak;

use serde::Serialize;

use crate::record::Record;
use crate::scenario::Scenario;
use crate::stats::{Interval, NOISY_CV};

pub use parse::{parse_claims, Body, Claim, ClaimsError, Dim, Kind, Selector, SourceRef};

/// The claims of a loaded scenario, checked against its cells (what `verify` and `attest` read);
/// `published`: the source's result files its claims may cite (a run folder's kept copy, or as
/// read at the commit).
pub fn scenario_claims(
    scenario: &Scenario,
    published: Option<&crate::source::results::Published>,
) -> Result<Vec<Claim>, ClaimsError> {
    let cell_ids: Vec<String> = scenario.cells().iter().map(|c| c.id()).collect();
    parse::parse_claims_citing(&scenario.path, &scenario.source, &cell_ids, published)
}

/// The verdict on one claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Reproduced,
    Contradicted,
    /// The interval straddles the tolerance band, the cell is too noisy, or an absolute figure
    /// from other hardware has nothing to be related to.
    Inconclusive,
    /// No record measures it (cell not run, failed, or a metric the lab cannot measure).
    NotMeasured,
    /// A finding about the source itself: not a measurement.
    Finding,
}

impl Verdict {
    pub const ALL: [Verdict; 5] = [
        Verdict::Reproduced,
        Verdict::Contradicted,
        Verdict::Inconclusive,
        Verdict::NotMeasured,
        Verdict::Finding,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Reproduced => "reproduced",
            Verdict::Contradicted => "contradicted",
            Verdict::Inconclusive => "inconclusive",
            Verdict::NotMeasured => "not_measured",
            Verdict::Finding => "finding",
        }
    }
}

/// The result of one claim.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ClaimResult {
    pub id: String,
    pub kind: Kind,
    pub source: parse::SourceRef,
    pub statement: String,
    pub verdict: Verdict,
    /// How it was judged: `absolute`, `ratio`, `ratio to <id> (other hardware)`, `ordering`, ...
    pub judged_as: String,
    /// The claimed figure as judged (a ratio when judged as one), in the metric's own unit.
    pub claimed: Option<f64>,
    /// The measured figure and its interval, in the same unit as `claimed`.
    pub measured: Option<f64>,
    pub interval: Option<Interval>,
    /// The unit of `claimed` and `measured`: a metric unit, or `ratio`.
    pub unit: String,
    /// Relative tolerance used.
    pub tolerance: Option<f64>,
    /// Samples and repeats behind the figure(s), their largest CV, and the noise flag.
    pub n: Option<u64>,
    pub repeats: Option<u32>,
    pub cv: Option<f64>,
    pub noisy: bool,
    /// One or two sentences that say why the verdict is what it is.
    pub explanation: String,
    /// Environment differences to the source that could explain a gap.
    pub environment: Vec<String>,
    /// The cells the figures came from.
    pub cells: Vec<String>,
    /// The measurement the verdict rests on (a selector, a ratio of two in either direction, an
    /// order, an outcome): claims with the same key are one piece of evidence.
    pub evidence: Option<String>,
    /// The verdicts with the figure perturbed, and whether the claim can fail.
    pub self_test: Option<selftest::SelfTest>,
    /// How near the verdict is to flipping: the tolerance at which it would, and the interval's
    /// distance to the band's nearest edge (figures judged against a band only).
    pub margin: Option<margin::Margin>,
    /// An absolute figure judged through the ratio to a reference: the raw figures, the
    /// reference and the lab's figure normalised to the source's scale, side by side.
    pub normalised: Option<Normalised>,
    /// The cells behind the verdict that ran a stand-in instead of the source's program, each
    /// as `server: what it stands in for`.
    pub stand_in: Vec<String>,
    /// The runs read whose own records, judged alone, give another verdict.
    pub disagreeing_runs: Vec<runs::RunVerdict>,
}

impl ClaimResult {
    /// The verdict as AUDIT.md says it: `reproduced (normalised, on a stand-in, marginal)`.
    pub fn verdict_text(&self) -> String {
        let mut q: Vec<&str> = Vec::new();
        if self.normalised.is_some() {
            q.push("normalised");
        }
        if !self.stand_in.is_empty() {
            q.push("on a stand-in");
        }
        if self.margin.as_ref().is_some_and(|m| m.marginal) {
            q.push("marginal");
        }
        if self.noisy {
            q.push("noisy");
        }
        match q.is_empty() {
            true => self.verdict.as_str().to_string(),
            false => format!("{} ({})", self.verdict.as_str(), q.join(", ")),
        }
    }

    pub fn is_marginal(&self) -> bool {
        self.margin.as_ref().is_some_and(|m| m.marginal)
    }
}

/// An absolute figure from other hardware judged by the ratio it implies to a reference claim:
/// what was measured and claimed, as absolutes and as ratios, and the lab's figure carried to the
/// source's scale (the lab's ratio times the reference's claimed value).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Normalised {
    /// The reference claim's id.
    pub reference: String,
    /// The unit of the absolute figures.
    pub unit: String,
    /// The lab's absolute figure and the source's, as measured and as claimed.
    pub raw_measured: f64,
    pub raw_claimed: f64,
    /// The reference figure as the lab measured it and as the source claims it.
    pub reference_measured: f64,
    pub reference_claimed: f64,
    /// The ratio as measured (with its interval) and as claimed.
    pub ratio_measured: f64,
    pub ratio_claimed: f64,
    /// The lab's ratio times the reference's claimed value: the figure the verdict compares
    /// with `raw_claimed`, and its interval.
    pub normalised: f64,
    pub normalised_interval: Option<Interval>,
}

/// What makes `verify` exit 1 (`--fail-on`): a method defect (a claim that cannot fail), a
/// finding (a contradicted claim), or a claim left undecided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Gate {
    CannotFail,
    Contradicted,
    Inconclusive,
}

impl Gate {
    pub const ALL: [Gate; 3] = [Gate::CannotFail, Gate::Contradicted, Gate::Inconclusive];

    pub fn as_str(self) -> &'static str {
        match self {
            Gate::CannotFail => "cannot-fail",
            Gate::Contradicted => "contradicted",
            Gate::Inconclusive => "inconclusive",
        }
    }

    /// How many of an audit's claims this gate catches.
    pub fn caught(self, a: &Audit) -> usize {
        match self {
            Gate::CannotFail => a.cannot_fail().len(),
            Gate::Contradicted => a.count(Verdict::Contradicted),
            Gate::Inconclusive => a.count(Verdict::Inconclusive),
        }
    }
}

impl std::str::FromStr for Gate {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Gate::ALL.into_iter().find(|g| g.as_str() == s).ok_or_else(|| {
            let all: Vec<&str> = Gate::ALL.iter().map(|g| g.as_str()).collect();
            format!("unknown gate `{s}`: expected one of {}", all.join(", "))
        })
    }
}

/// Every claim of a scenario judged against one run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Audit {
    pub scenario: String,
    pub scenario_file: String,
    /// The run folder read, if any, and the run ids of its records.
    pub run: Option<String>,
    pub run_ids: Vec<String>,
    pub records: usize,
    /// The lab host of the run (`cpu model × logical CPUs`), when there are records.
    pub lab_host: Option<String>,
    pub confidence: f64,
    pub noisy_cv: f64,
    pub results: Vec<ClaimResult>,
    /// The distinct measurements the verdicts rest on.
    pub evidence: Vec<evidence::Evidence>,
    /// Every run read, with its records and whether its store audits clean; more than one when
    /// the scenario's runs that share an environment are judged together.
    pub runs: Vec<runs::RunRead>,
    /// What makes `verify` exit 1 (by default a claim that cannot fail: a method defect).
    pub gate: Vec<Gate>,
}

impl Audit {
    pub fn count(&self, v: Verdict) -> usize {
        self.results.iter().filter(|r| r.verdict == v).count()
    }

    /// The claims whose self-test says they cannot fail.
    pub fn cannot_fail(&self) -> Vec<&ClaimResult> {
        self.results
            .iter()
            .filter(|r| r.self_test.as_ref().is_some_and(|t| t.status == selftest::Status::CannotFail))
            .collect()
    }

    /// 1 when the gate catches a claim (by default: one that cannot fail), else 0.
    pub fn exit_code(&self) -> i32 {
        i32::from(self.gate.iter().any(|g| g.caught(self) > 0))
    }

    /// Whether any run read does not audit clean (judged anyway with `--allow-damaged`).
    pub fn damaged(&self) -> bool {
        self.runs.iter().any(|r| r.damage.is_some())
    }
}

/// Judges an interval against a claimed value with a relative tolerance.
pub fn judge_band(i: &Interval, claimed: f64, tolerance: f64) -> Verdict {
    let (lo, hi) = (claimed / (1.0 + tolerance), claimed * (1.0 + tolerance));
    if !(i.lower.is_finite() && i.upper.is_finite()) {
        Verdict::Inconclusive
    } else if i.lower >= lo && i.upper <= hi {
        Verdict::Reproduced
    } else if i.upper < lo || i.lower > hi {
        Verdict::Contradicted
    } else {
        Verdict::Inconclusive
    }
}

/// Judges an interval against an absolute band [claimed − tol, claimed + tol].
pub fn judge_points(i: &Interval, claimed: f64, tol: f64) -> Verdict {
    let (lo, hi) = (claimed - tol, claimed + tol);
    if !(i.lower.is_finite() && i.upper.is_finite()) {
        Verdict::Inconclusive
    } else if i.lower >= lo && i.upper <= hi {
        Verdict::Reproduced
    } else if i.upper < lo || i.lower > hi {
        Verdict::Contradicted
    } else {
        Verdict::Inconclusive
    }
}

pub use crate::text::three_digits as num;

/// A value in its unit as people read it.
pub fn show(v: f64, unit: &str) -> String {
    match unit {
        "bytes" => format!("{} MiB", num(v / 1_048_576.0)),
        "fraction" => format!("{}%", num(v * 100.0)),
        "ratio" => format!("{}x", num(v)),
        "" => num(v),
        u => format!("{} {u}", num(v)),
    }
}

/// Judges every claim against one run's records (empty when the scenario has not been run),
/// the gate the default (claims that cannot fail).
pub fn verify(scenario: &Scenario, claims: &[Claim], records: &[Record], run: Option<String>) -> Audit {
    let runs = runs::RunRead::split(run.as_deref().unwrap_or(""), records);
    verify_runs(scenario, claims, records, runs, vec![Gate::CannotFail], run)
}

/// Judges every claim against the records of several runs together (`records` holds each run's
/// records in one contiguous stretch, as `runs` says), then each run alone: the runs whose own
/// verdict differs are named on the claim.
pub fn verify_runs(
    scenario: &Scenario,
    claims: &[Claim],
    records: &[Record],
    runs: Vec<runs::RunRead>,
    gate: Vec<Gate>,
    run: Option<String>,
) -> Audit {
    let measured = judge::Figures::default();
    let ctx = judge::Ctx { scenario, claims, records, perturb: selftest::Perturb::None, measured: &measured };
    // Each claim (and its self-test) on its own, on every CPU, in the claims' order.
    let mut results: Vec<ClaimResult> = crate::par::par_map(claims, |c| {
        let mut r = ctx.judge(c);
        r.self_test = selftest::self_test(&ctx, c, r.verdict);
        r
    });
    runs::disagreements(scenario, claims, records, &runs, &mut results);
    let mut run_ids: Vec<String> = Vec::new();
    for r in records {
        if !run_ids.contains(&r.run_id) {
            run_ids.push(r.run_id.clone());
        }
    }
    Audit {
        scenario: scenario.name.clone(),
        scenario_file: scenario.path.display().to_string(),
        run,
        run_ids,
        records: records.len(),
        lab_host: records.first().map(judge::host_text),
        confidence: crate::report::CONFIDENCE,
        noisy_cv: NOISY_CV,
        evidence: evidence::group(&results),
        results,
        runs,
        gate,
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod unit_tests {
    use super::*;

    fn iv(lower: f64, upper: f64) -> Interval {
        Interval { estimate: (lower + upper) / 2.0, lower, upper, confidence: 0.95 }
    }

    #[test]
    fn bands_are_symmetric_on_the_log_scale() {
        assert_eq!(judge_band(&iv(0.9, 1.1), 1.0, 0.15), Verdict::Reproduced);
        assert_eq!(judge_band(&iv(1.2, 1.3), 1.0, 0.15), Verdict::Contradicted);
        assert_eq!(judge_band(&iv(0.5, 0.8), 1.0, 0.15), Verdict::Contradicted);
        assert_eq!(judge_band(&iv(1.1, 1.2), 1.0, 0.15), Verdict::Inconclusive);
        assert_eq!(judge_band(&iv(1.0 / 1.15, 1.15), 1.0, 0.15), Verdict::Reproduced);
        assert_eq!(judge_band(&iv(0.0, f64::INFINITY), 1.0, 0.15), Verdict::Inconclusive);
    }

    #[test]
    fn numbers_read_plainly() {
        assert_eq!(show(0.1038, "ms"), "0.104 ms");
        assert_eq!(show(51_609_600.0, "bytes"), "49.2 MiB");
        assert_eq!(show(1.0, "fraction"), "100%");
        assert_eq!(show(1.4167, "ratio"), "1.42x");
        assert_eq!(num(4120.0), "4120");
    }
}
