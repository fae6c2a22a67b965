//! Claims (`benchlab verify`): a source's published statements, encoded as `[[claim]]` tables in
//! the scenario that reproduces it (schema in `parse`), matched to a run's records and judged:
//! reproduced, contradicted, inconclusive or not measured, with the measured value, its interval,
//! the tolerance, how the claim was judged and the environment differences that could explain a
//! gap. Findings (the source disagreeing with itself) are listed with their evidence. Pure: the
//! scenario, its claims and records in, an [`Audit`] out; rendering is in `render`.
//!
//! Judging a figure against a claimed value v with tolerance t: the band is [v/(1+t), v·(1+t)]
//! (symmetric on the log scale). Reproduced when the whole interval lies in the band, contradicted
//! when the whole interval lies outside it, inconclusive when it straddles an edge. A figure whose
//! cell is noisy (CV over `stats::NOISY_CV`) is never contradicted: inconclusive instead.
//! Absolute figures are taken as such only when the lab's CPU model and count match the
//! source's `hardware`, or when they do not depend on hardware (lines of code, error rates);
//! otherwise they are judged by the ratio they imply to the claim named in
//! `relative_to`, and without one they are inconclusive (the absolute comparison is still shown).

pub mod measure;
pub mod parse;
pub mod render;

use serde::Serialize;

use crate::record::{Record, Status};
use crate::scenario::Scenario;
use crate::stats::{Interval, NOISY_CV};

pub use parse::{parse_claims, Body, Claim, ClaimsError, Dim, Kind, Selector};

use measure::{measure, ratio, Measured, RatioMethod};

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
}

impl Audit {
    pub fn count(&self, v: Verdict) -> usize {
        self.results.iter().filter(|r| r.verdict == v).count()
    }

    /// 1 when any claim is contradicted, else 0 (not measured and inconclusive do not fail).
    pub fn exit_code(&self) -> i32 {
        i32::from(self.count(Verdict::Contradicted) > 0)
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

/// Three significant digits, plainly.
pub fn num(v: f64) -> String {
    if !v.is_finite() {
        return "∞".into();
    }
    let a = v.abs();
    if a == 0.0 {
        "0".into()
    } else if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

/// A value in its unit as people read it.
pub fn show(v: f64, unit: &str) -> String {
    match unit {
        "bytes" => format!("{} MiB", num(v / 1_048_576.0)),
        "fraction" => format!("{}%", num(v * 100.0)),
        "ratio" => format!("{}x", num(v)),
        u => format!("{} {u}", num(v)),
    }
}

fn show_interval(i: &Interval, unit: &str) -> String {
    format!("{}–{}", show(i.lower, unit), show(i.upper, unit))
}

/// The records of the cells a figure came from.
fn records_of<'a>(records: &'a [Record], cells: &[String]) -> Vec<&'a Record> {
    records.iter().filter(|r| cells.contains(&r.cell.id)).collect()
}

fn host_text(r: &Record) -> String {
    format!("{} × {} logical CPUs", r.environment.host.cpu_model.trim(), r.environment.host.logical_cpus)
}

/// Whether the lab host of every record matches the source's hardware.
fn hardware_matches(claim: &Claim, recs: &[&Record]) -> bool {
    match &claim.source.hardware {
        None => false,
        Some((model, cpus)) => {
            !recs.is_empty()
                && recs.iter().all(|r| {
                    r.environment.host.cpu_model.to_lowercase().contains(&model.to_lowercase())
                        && r.environment.host.logical_cpus == *cpus
                })
        }
    }
}

/// Environment differences that could explain a gap between the source and these records.
fn environment_notes(scenario: &Scenario, claim: &Claim, recs: &[&Record]) -> Vec<String> {
    let mut out = Vec::new();
    let mut push = |s: String| {
        if !out.contains(&s) {
            out.push(s);
        }
    };
    if let Some(r) = recs.first() {
        let source_hw = claim
            .source
            .hardware
            .as_ref()
            .map_or("not stated".to_string(), |(m, c)| format!("{m} × {c} CPUs"));
        push(format!("CPU: lab {}; source {source_hw}", host_text(r)));
    }
    for r in recs {
        let s = &r.cell.server;
        let want =
            scenario.servers.iter().find(|e| e.id.get_ref() == &s.id).and_then(|e| e.source_runtime.clone());
        let runtime = match want {
            Some(w) if w != s.runtime_version => format!(" (source: {w})"),
            _ => String::new(),
        };
        push(format!(
            "{}: {} {} on {} {}{runtime}",
            s.id, s.family, s.sdk_version, s.runtime, s.runtime_version
        ));
        let p = &r.cell.placement;
        push(format!(
            "placement: server CPUs {}, driver CPUs {}{}, memory limit {} MiB",
            p.server_cpus,
            p.driver_cpus,
            if p.shared { " (shared)" } else { "" },
            p.memory_limit_bytes >> 20
        ));
        for d in &r.environment.deviations {
            push(format!("deviation: {d}"));
        }
    }
    out
}

struct Ctx<'a> {
    scenario: &'a Scenario,
    claims: &'a [Claim],
    records: &'a [Record],
}

fn base(claim: &Claim) -> ClaimResult {
    ClaimResult {
        id: claim.id.clone(),
        kind: claim.kind(),
        source: claim.source.clone(),
        statement: claim.statement.clone(),
        verdict: Verdict::NotMeasured,
        judged_as: claim.kind().as_str().to_string(),
        claimed: None,
        measured: None,
        interval: None,
        unit: String::new(),
        tolerance: None,
        n: None,
        repeats: None,
        cv: None,
        noisy: false,
        explanation: String::new(),
        environment: Vec::new(),
        cells: Vec::new(),
    }
}

fn noise_text(ms: &[&Measured]) -> String {
    let cv = ms.iter().filter_map(|m| m.cv).fold(0.0, f64::max);
    format!("the cell is noisy (CV {:.0}% over the {:.0}% threshold)", cv * 100.0, NOISY_CV * 100.0)
}

fn band_text(claimed: f64, tol: f64, unit: &str) -> String {
    format!(
        "{} ± {:.0}% (band {}–{})",
        show(claimed, unit),
        tol * 100.0,
        show(claimed / (1.0 + tol), unit),
        show(claimed * (1.0 + tol), unit)
    )
}

fn where_text(v: Verdict, i: &Interval, claimed: f64, tol: f64) -> &'static str {
    match v {
        Verdict::Reproduced => "the whole interval lies within the band",
        Verdict::Contradicted if i.upper < claimed / (1.0 + tol) => "the whole interval lies below the band",
        Verdict::Contradicted => "the whole interval lies above the band",
        _ => "the interval straddles an edge of the band",
    }
}

/// Fills a result from one judged figure.
#[allow(clippy::too_many_arguments)]
fn judged(
    mut r: ClaimResult,
    ms: &[&Measured],
    i: Interval,
    claimed: f64,
    tol: f64,
    unit: &str,
    prefix: String,
    suffix: String,
) -> ClaimResult {
    let mut v = judge_band(&i, claimed, tol);
    let noisy = ms.iter().any(|m| m.noisy);
    let n: u64 = ms.iter().map(|m| m.n).sum();
    let single = i.lower == i.upper;
    let measured = if single {
        format!("{} (one reading)", show(i.estimate, unit))
    } else {
        format!(
            "{} ({:.0}% CI {}, n={n}{})",
            show(i.estimate, unit),
            i.confidence * 100.0,
            show_interval(&i, unit),
            match ms.iter().map(|m| m.repeats).max() {
                Some(k) if k > 1 => format!(", {k} repeats"),
                _ => String::new(),
            }
        )
    };
    let mut text = format!(
        "{prefix}Measured {measured} against the claimed {}: {}",
        band_text(claimed, tol, unit),
        where_text(v, &i, claimed, tol)
    );
    if v == Verdict::Contradicted && noisy {
        v = Verdict::Inconclusive;
        text.push_str(&format!(", but {}, so it is not taken as a contradiction", noise_text(ms)));
    } else if noisy {
        text.push_str(&format!(" ({})", noise_text(ms)));
    }
    text.push('.');
    text.push_str(&suffix);
    r.verdict = v;
    r.claimed = Some(claimed);
    r.measured = Some(i.estimate);
    r.interval = (!single).then_some(i);
    r.unit = unit.to_string();
    r.tolerance = Some(tol);
    r.n = Some(n);
    r.repeats = ms.iter().map(|m| m.repeats).max();
    r.cv = ms.iter().filter_map(|m| m.cv).reduce(f64::max);
    r.noisy = noisy;
    r.explanation = text;
    r.cells = ms.iter().flat_map(|m| m.cells.clone()).collect();
    r
}

fn method_text(m: RatioMethod) -> &'static str {
    match m {
        RatioMethod::PairedRepeats => " The ratio's interval comes from resampling the repeats in pairs.",
        RatioMethod::IndependentSamples => " The ratio's interval comes from resampling both cells' samples.",
        RatioMethod::Mover => " The ratio's interval combines both figures' intervals (MOVER, log scale).",
        RatioMethod::Readings => " Both figures are single readings, so the ratio has no interval.",
    }
}

fn not_measured(mut r: ClaimResult, why: String) -> ClaimResult {
    r.verdict = Verdict::NotMeasured;
    r.explanation = format!("Not measured: {why}.");
    r
}

impl Ctx<'_> {
    fn finish(&self, claim: &Claim, mut r: ClaimResult) -> ClaimResult {
        let recs = records_of(self.records, &r.cells);
        r.environment = environment_notes(self.scenario, claim, &recs);
        r
    }

    fn judge(&self, claim: &Claim) -> ClaimResult {
        let r = base(claim);
        let r = match &claim.body {
            Body::Absolute { measure: sel, value, tolerance, relative_to, .. } => {
                self.absolute(claim, r, sel, *value, *tolerance, relative_to.as_deref())
            }
            Body::Ratio { numerator, denominator, value, tolerance } => {
                let (a, b) = match (measure(self.records, numerator), measure(self.records, denominator)) {
                    (Ok(a), Ok(b)) => (a, b),
                    (Err(e), _) | (_, Err(e)) => return self.finish(claim, not_measured(r, e)),
                };
                match ratio(&a, &b, &numerator.stat, &claim.id) {
                    None => not_measured(r, "the denominator is zero".into()),
                    Some((i, how)) => {
                        let prefix = format!(
                            "{} is {} and {} is {}. ",
                            numerator.cell,
                            show(a.estimate, numerator.dim().as_str()),
                            denominator.cell,
                            show(b.estimate, denominator.dim().as_str())
                        );
                        judged(r, &[&a, &b], i, *value, *tolerance, "ratio", prefix, method_text(how).into())
                    }
                }
            }
            Body::Ordering { items, tolerance } => self.ordering(r, items, *tolerance),
            Body::SoakSlope { measure: sel, value, unit, duration } => {
                let why = match measure(self.records, sel) {
                    Err(e) => e,
                    Ok(_) => "unexpected".into(),
                };
                let mut r = not_measured(
                    r,
                    format!("{why}; the claim is a slope of at most {value} {unit} over {duration}, which needs a soak workload"),
                );
                r.claimed = Some(*value);
                r.unit = unit.clone();
                r
            }
            Body::Outcome { cell, expect_failure, reason } => {
                self.outcome(r, cell, *expect_failure, reason.as_deref())
            }
            Body::Finding { figures, check, expected, explanation } => {
                let mut r = r;
                r.verdict = Verdict::Finding;
                r.judged_as = format!("finding ({check})");
                let figs: Vec<String> =
                    figures.iter().map(|f| format!("{} = {}", f.label, num(f.value))).collect();
                let exp = expected
                    .map_or(String::new(), |e| format!(", where the source's other figures give {}", num(e)));
                r.explanation = format!("The source's own figures: {}{exp}. {explanation}", figs.join("; "));
                return r;
            }
        };
        self.finish(claim, r)
    }

    fn absolute(
        &self,
        claim: &Claim,
        mut r: ClaimResult,
        sel: &Selector,
        value: f64,
        tol: f64,
        relative_to: Option<&str>,
    ) -> ClaimResult {
        let unit = sel.dim().as_str();
        let m = match measure(self.records, sel) {
            Ok(m) => m,
            Err(e) => return not_measured(r, e),
        };
        let recs = records_of(self.records, &m.cells);
        let lab = recs.first().map(|x| host_text(x)).unwrap_or_default();
        let src =
            claim.source.hardware.as_ref().map_or("not stated".into(), |(c, n)| format!("{c} × {n} CPUs"));
        if hardware_matches(claim, &recs) {
            r.judged_as = "absolute (hardware matches)".into();
            let i = m.interval();
            return judged(
                r,
                &[&m],
                i,
                value,
                tol,
                unit,
                format!("The lab's hardware ({lab}) matches the source's. "),
                String::new(),
            );
        }
        if matches!(sel.dim(), Dim::Lines | Dim::Fraction) {
            r.judged_as = "absolute (does not depend on hardware)".into();
            let i = m.interval();
            return judged(r, &[&m], i, value, tol, unit, String::new(), String::new());
        }
        let other = relative_to.and_then(|id| self.claims.iter().find(|c| c.id == id));
        let Some(other) = other else {
            let i = m.interval();
            let as_abs = judge_band(&i, value, tol);
            r.judged_as = "absolute on other hardware (no reference)".into();
            r.verdict = Verdict::Inconclusive;
            r.claimed = Some(value);
            r.measured = Some(m.estimate);
            r.interval = m.ci;
            r.unit = unit.into();
            r.tolerance = Some(tol);
            r.n = Some(m.n);
            r.repeats = Some(m.repeats);
            r.cv = m.cv;
            r.noisy = m.noisy;
            r.cells = m.cells.clone();
            r.explanation = format!(
                "The source's hardware ({src}) is not the lab's ({lab}) and the claim names no figure to relate it to, so an absolute comparison cannot decide; taken literally, the measured {} against {} would be {}.",
                show(m.estimate, unit),
                band_text(value, tol, unit),
                as_abs.as_str()
            );
            return r;
        };
        let Body::Absolute { measure: osel, value: ovalue, .. } = &other.body else {
            unreachable!("relative_to is checked to name an absolute claim")
        };
        let om = match measure(self.records, osel) {
            Ok(m) => m,
            Err(e) => return not_measured(r, format!("the reference figure ({}) is missing: {e}", other.id)),
        };
        let Some((i, how)) = ratio(&m, &om, &sel.stat, &claim.id) else {
            return not_measured(r, "the reference figure is zero".into());
        };
        r.judged_as = format!("ratio to {} (other hardware)", other.id);
        let prefix = format!(
            "On other hardware (source {src}; lab {lab}) the figure is judged by the ratio it implies to {}: claimed {} / {} = {}; as absolutes, {} measured against {} claimed. ",
            other.id,
            show(value, unit),
            show(*ovalue, unit),
            num(value / ovalue),
            show(m.estimate, unit),
            show(value, unit)
        );
        judged(r, &[&m, &om], i, value / ovalue, tol, "ratio", prefix, method_text(how).into())
    }

    fn ordering(&self, mut r: ClaimResult, items: &[Selector], tol: f64) -> ClaimResult {
        let ms: Vec<Measured> =
            match items.iter().map(|s| measure(self.records, s)).collect::<Result<Vec<_>, _>>() {
                Ok(ms) => ms,
                Err(e) => return not_measured(r, e),
            };
        let unit = items[0].dim().as_str();
        let mut verdict = Verdict::Reproduced;
        let mut pairs = Vec::new();
        let mut noisy_reversal = false;
        for k in 1..ms.len() {
            let (a, b) = (&ms[k - 1], &ms[k]);
            let Some((i, _)) = ratio(b, a, &items[k].stat, &format!("{}\0{k}", r.id)) else {
                return not_measured(r, format!("{} is zero", items[k - 1].cell));
            };
            let pair = if i.lower > 1.0 {
                "holds"
            } else if i.upper < 1.0 / (1.0 + tol) {
                if a.noisy || b.noisy {
                    noisy_reversal = true;
                    verdict = verdict_min(verdict, Verdict::Inconclusive);
                    "reversed (noisy)"
                } else {
                    verdict = Verdict::Contradicted;
                    "reversed"
                }
            } else {
                verdict = verdict_min(verdict, Verdict::Inconclusive);
                "undecided"
            };
            pairs.push(format!(
                "{} < {}: {} (ratio {}, CI {}–{})",
                items[k - 1].cell,
                items[k].cell,
                pair,
                num(i.estimate),
                num(i.lower),
                num(i.upper)
            ));
        }
        let mut sorted: Vec<(f64, &str)> =
            ms.iter().zip(items).map(|(m, s)| (m.estimate, s.cell.as_str())).collect();
        sorted.sort_by(|a, b| a.0.total_cmp(&b.0));
        let order: Vec<String> = sorted.iter().map(|(v, c)| format!("{c} {}", show(*v, unit))).collect();
        r.verdict = verdict;
        r.unit = unit.into();
        r.tolerance = Some(tol);
        r.n = Some(ms.iter().map(|m| m.n).sum());
        r.repeats = ms.iter().map(|m| m.repeats).max();
        r.cv = ms.iter().filter_map(|m| m.cv).reduce(f64::max);
        r.noisy = ms.iter().any(|m| m.noisy);
        r.cells = ms.iter().flat_map(|m| m.cells.clone()).collect();
        let what = match verdict {
            Verdict::Reproduced => {
                "Every adjacent pair is ordered as claimed, each ratio's whole interval above 1"
            }
            Verdict::Contradicted => "At least one pair is reversed, its ratio's whole interval below 1",
            _ if noisy_reversal => "A pair looks reversed but its cell is noisy",
            _ => "At least one pair's ratio interval includes 1",
        };
        r.explanation =
            format!("Measured order (smallest first): {}. {what}: {}.", order.join(" < "), pairs.join("; "));
        r
    }

    fn outcome(
        &self,
        mut r: ClaimResult,
        cell: &str,
        expect_failure: bool,
        reason: Option<&str>,
    ) -> ClaimResult {
        let recs: Vec<&Record> = self.records.iter().filter(|x| x.cell.id == cell).collect();
        let Some(last) = recs.last() else {
            return not_measured(r, format!("no record of cell {cell} in the run"));
        };
        r.cells = vec![cell.to_string()];
        r.judged_as = "outcome".into();
        let failed = last.status == Status::Failed;
        let got = last.failure.as_ref().map_or("ok".to_string(), |f| f.reason.as_str().to_string());
        let detail = last
            .failure
            .as_ref()
            .map(|f| f.detail.lines().last().unwrap_or("").to_string())
            .unwrap_or_default();
        r.verdict = if failed == expect_failure && (!failed || reason.is_none_or(|w| w == got)) {
            Verdict::Reproduced
        } else {
            Verdict::Contradicted
        };
        let want = if expect_failure {
            format!("a failure{}", reason.map_or(String::new(), |w| format!(" ({w})")))
        } else {
            "success".into()
        };
        r.explanation = format!(
            "The source reports {want}; the lab's cell {cell} ended {}{}.",
            if failed { format!("failed ({got})") } else { "ok".into() },
            if detail.is_empty() { String::new() } else { format!(": {detail}") }
        );
        r
    }
}

/// The weaker of two verdicts in the order reproduced > inconclusive > contradicted.
fn verdict_min(a: Verdict, b: Verdict) -> Verdict {
    let rank = |v: Verdict| match v {
        Verdict::Contradicted => 0,
        Verdict::Inconclusive => 1,
        _ => 2,
    };
    if rank(a) <= rank(b) {
        a
    } else {
        b
    }
}

/// Judges every claim against a run's records (empty when the scenario has not been run).
pub fn verify(scenario: &Scenario, claims: &[Claim], records: &[Record], run: Option<String>) -> Audit {
    let ctx = Ctx { scenario, claims, records };
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
        lab_host: records.first().map(host_text),
        confidence: crate::report::CONFIDENCE,
        noisy_cv: NOISY_CV,
        results: claims.iter().map(|c| ctx.judge(c)).collect(),
    }
}

#[cfg(test)]
mod tests {
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
