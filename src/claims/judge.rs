//! Judging one claim against a run's records: the figure (or ratio, or order, or outcome) it
//! rests on, its interval widened for noise, the band, and the verdict with the sentences that
//! explain it. The rules are in `claims`' module doc; `selftest` re-runs this with the figure
//! perturbed.

use super::measure::{measure, ratio, Measure, Measured, RatioMethod};
use super::parse::{Body, Claim, Dim, Selector};
use super::selftest::Perturb;
use super::{judge_band, judge_points, num, show, ClaimResult, Verdict};
use crate::record::Record;
use crate::scenario::Scenario;
use crate::stats::{Interval, NOISY_CV};

/// The evidence key of a ratio of two figures: the same for a/b and b/a, so mirrored claims
/// count as one measurement.
fn pair_key(a: &Selector, b: &Selector) -> String {
    let (x, y) = (a.text(), b.text());
    if x <= y {
        format!("ratio of {x} and {y}")
    } else {
        format!("ratio of {y} and {x}")
    }
}

fn show_interval(i: &Interval, unit: &str) -> String {
    format!("{}–{}", show(i.lower, unit), show(i.upper, unit))
}

/// The records of the cells a figure came from.
fn records_of<'a>(records: &'a [Record], cells: &[String]) -> Vec<&'a Record> {
    records.iter().filter(|r| cells.contains(&r.cell.id)).collect()
}

pub(super) fn host_text(r: &Record) -> String {
    format!("{} × {} logical CPUs", r.environment.host.cpu_model.trim(), r.environment.host.logical_cpus)
}

/// Whether the lab host of every record matches the source's hardware.
fn hardware_matches(claim: &Claim, recs: &[&Record]) -> bool {
    match &claim.source.hardware {
        None => false,
        Some((model, cpus)) => {
            let model = model.to_lowercase();
            // A run's records share a few environments: each is looked at once in a row.
            !recs.is_empty()
                && recs.iter().enumerate().all(|(i, r)| {
                    (i > 0 && recs[i - 1].environment.same_copy(&r.environment))
                        || (r.environment.host.cpu_model.to_lowercase().contains(&model)
                            && r.environment.host.logical_cpus == *cpus)
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
    // Records of one server, placement and environment give the same lines: derived once each
    // (a claim over many repeats would otherwise derive them per record).
    let mut seen = std::collections::HashSet::new();
    let mut last = None;
    for r in recs {
        let s = &r.cell.server;
        let p = &r.cell.placement;
        let key = (
            (&r.env_hash, &s.id, &s.family, &s.sdk_version, &s.runtime, &s.runtime_version),
            (
                &p.server_cpus,
                &p.driver_cpus,
                p.shared,
                p.memory_limit_bytes,
                &r.cell.suite,
                s.source.is_none(),
            ),
        );
        // The same key as the record before (a server's cells in a row) is not hashed again.
        if last == Some(key) || !seen.insert(key) {
            last = Some(key);
            continue;
        }
        last = Some(key);
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
        push(format!(
            "placement: server CPUs {}, driver CPUs {}{}, memory limit {} MiB",
            p.server_cpus,
            p.driver_cpus,
            if p.shared { " (shared)" } else { "" },
            p.memory_limit_bytes >> 20
        ));
        // Recorded, and derived again from the scenario's `[source]` (records written before
        // the run derived them carry fewer): each difference once.
        let entry = scenario.servers.iter().find(|e| e.id.get_ref() == &s.id);
        let derived = crate::record::deviations::derive(
            &scenario.stated,
            &crate::record::deviations::CellRan {
                env: &r.environment,
                source_runtime: entry.and_then(|e| e.source_runtime.as_deref()),
                stand_in: entry.and_then(|e| e.stand_in.as_deref()),
                program: entry.and_then(|e| e.program.as_ref()).map(|p| p.get_ref().as_str()),
                suite: &r.cell.suite,
                null_server: s.source.is_none(),
            },
        );
        for d in r.environment.deviations.iter().chain(&derived) {
            push(format!("deviation: {d}"));
        }
    }
    if let Some(line) = hosts_line(recs) {
        push(line);
    }
    out
}

/// The servers behind these records that ran a stand-in for the source's program: declared
/// (`stand_in = "…"` on the server entry), or the lab's suite server where the `[source]` names
/// a program of its own. Each once, as `server: what it stands in for`.
fn stand_ins(scenario: &Scenario, recs: &[&Record]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for r in recs {
        let s = &r.cell.server;
        let entry = scenario.servers.iter().find(|e| e.id.get_ref() == &s.id);
        let declared = entry.and_then(|e| e.stand_in.clone());
        let program = entry.and_then(|e| e.program.as_ref()).map(|p| p.get_ref().clone());
        let line = match (declared, &scenario.stated.program) {
            (Some(what), _) => {
                format!("{}: the lab's `{}` suite server, standing in for {what}", s.id, r.cell.suite)
            }
            (None, Some(p)) if program.as_deref() != Some(p.as_str()) && s.source.is_some() => {
                format!(
                    "{}: the lab's `{}` suite server, standing in for the source's program ({p})",
                    s.id, r.cell.suite
                )
            }
            _ => continue,
        };
        if !out.contains(&line) {
            out.push(line);
        }
    }
    out
}

/// Whether the figure's records came from hosts of one speed, by their fingerprints (the first
/// against each other): labelled loudly when they differ, None when no record has one.
fn hosts_line(recs: &[&Record]) -> Option<String> {
    use crate::host::fingerprint as fp;
    let prints: Vec<&fp::Fingerprint> =
        recs.iter().filter_map(|r| r.host_check.as_ref()?.fingerprint.as_deref()).collect();
    let first = prints.first()?;
    let differ: Vec<String> = prints[1..]
        .iter()
        .map(|p| fp::compare(first, p))
        .filter(|c| c.differs)
        .map(|c| fp::comparison_line(&c))
        .collect();
    Some(match differ.first() {
        Some(d) => format!("HOSTS DIFFER IN SPEED: the figure mixes hosts whose fingerprints {d}"),
        None => format!("host speed: {}", fp::summary(first)),
    })
}

/// What judging reads: the scenario, all its claims (for `relative_to`), the run's records, and
/// the perturbation the self-test applies (none for the real verdict).
pub(super) struct Ctx<'a> {
    pub(super) scenario: &'a Scenario,
    pub(super) claims: &'a [Claim],
    pub(super) records: &'a [Record],
    pub(super) perturb: Perturb,
    /// Each selector's figure, measured once: the self-test judges again with the same selectors.
    pub(super) measured: &'a Figures,
}

/// Figures by selector (its debug form), shared by a claim's judgement and its self-test.
/// Claims are judged on every CPU: a selector two claims share may be measured twice, once each.
pub(super) type Figures = std::sync::Mutex<std::collections::HashMap<String, Measure>>;

impl Ctx<'_> {
    /// A selector's figure in the run's records, measured on first use.
    fn measure(&self, sel: &Selector) -> Measure {
        let key = format!("{sel:?}");
        if let Some(m) = self.measured.lock().unwrap_or_else(|p| p.into_inner()).get(&key) {
            return m.clone();
        }
        let m = measure(self.records, sel);
        self.measured.lock().unwrap_or_else(|p| p.into_inner()).insert(key, m.clone());
        m
    }
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
        evidence: None,
        self_test: None,
        margin: None,
        normalised: None,
        stand_in: Vec::new(),
        disagreeing_runs: Vec::new(),
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

/// An error rate's band, in percentage points.
fn points_text(claimed: f64, tol: f64) -> String {
    format!(
        "{} ± {} percentage points (band {}–{})",
        show(claimed, "fraction"),
        num(tol * 100.0),
        show((claimed - tol).max(0.0), "fraction"),
        show(claimed + tol, "fraction")
    )
}

fn where_text(v: Verdict, below: bool) -> &'static str {
    match v {
        Verdict::Reproduced => "the whole interval lies within the band",
        Verdict::Contradicted if below => "the whole interval lies below the band",
        Verdict::Contradicted => "the whole interval lies above the band",
        _ => "the interval straddles an edge of the band",
    }
}

/// One figure about to be judged: the figures it came from, its interval (a ratio's when judged
/// as one), the claimed value and tolerance in the same unit, and the text around the verdict.
struct Judging<'a> {
    ms: &'a [&'a Measured],
    i: Interval,
    claimed: f64,
    tol: f64,
    unit: &'a str,
    prefix: String,
    suffix: String,
    /// An error rate's band: absolute, [claimed − tol, claimed + tol] (tol a fraction).
    points: bool,
}

/// The reasons no verdict may rest on these figures (single readings, one run's interval).
fn undecidable(ms: &[&Measured]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for w in ms.iter().filter_map(|m| m.undecidable.clone()) {
        if !out.contains(&w) {
            out.push(w);
        }
    }
    out
}

/// What stands behind an interval from runs: how many, the within-run interval beside the
/// between-run one (a single figure only), and the runs the quiet check flagged.
fn runs_text(ms: &[&Measured], unit: &str) -> String {
    let Some(k) = ms.iter().map(|m| m.repeats).max().filter(|k| *k > 1) else {
        return String::new();
    };
    let mut out = format!(", {k} runs");
    if let [m] = ms {
        if let Some(w) = m.within {
            out.push_str(&format!("; within {}", show_interval(&w, unit)));
        }
    }
    let loud: u32 = ms.iter().map(|m| m.noisy_runs).sum();
    if loud > 0 {
        let all: u32 = ms.iter().map(|m| m.repeats).sum();
        out.push_str(&format!("; {loud} of {all} runs on a noisy host"));
    }
    out
}

/// The largest CV among the noisy figures, if any is noisy.
fn noise_cv(ms: &[&Measured]) -> Option<f64> {
    ms.iter().filter(|m| m.noisy).filter_map(|m| m.cv).reduce(f64::max)
}

/// An interval widened for noise: each bound moved out by the factor 1 + CV (log scale), so a
/// noisy figure needs a larger gap for either verdict; it never forbids one verdict only.
pub(super) fn widen_for_noise(i: Interval, cv: Option<f64>) -> Interval {
    match cv {
        Some(cv) if cv > 0.0 => {
            // Outward on either side of zero (a share released can be negative).
            let out = |b: f64, down: bool| if (b > 0.0) == down { b / (1.0 + cv) } else { b * (1.0 + cv) };
            Interval { lower: out(i.lower, true), upper: out(i.upper, false), ..i }
        }
        _ => i,
    }
}

impl Ctx<'_> {
    /// Fills a result from one judged figure.
    fn judged(&self, mut r: ClaimResult, j: Judging) -> ClaimResult {
        let Judging { ms, i, claimed, tol, unit, prefix, suffix, points } = j;
        let i = if points { self.perturb.shift(i, tol) } else { self.perturb.interval(i) };
        let band = |claimed: f64, tol: f64, unit: &str| {
            if points {
                points_text(claimed, tol)
            } else {
                band_text(claimed, tol, unit)
            }
        };
        let noisy = ms.iter().any(|m| m.noisy);
        let n: u64 = ms.iter().map(|m| m.n).sum();
        let single = i.lower == i.upper;
        let measured = if single && ms.iter().all(|m| m.basis == super::measure::Basis::Cycles) {
            format!("{} (every one of the {n} disconnections gives the same value)", show(i.estimate, unit))
        } else if single && ms.iter().all(|m| m.repeats <= 1) {
            format!("{} (one reading)", show(i.estimate, unit))
        } else if single {
            format!("{} (every repeat gives the same value)", show(i.estimate, unit))
        } else {
            format!(
                "{} ({:.0}% CI {}, n={n}{})",
                show(i.estimate, unit),
                i.confidence * 100.0,
                show_interval(&i, unit),
                runs_text(ms, unit)
            )
        };
        let why_not = undecidable(ms);
        let (v, text) = if !why_not.is_empty() {
            (
                Verdict::Inconclusive,
                format!(
                    "{prefix}Measured {measured} against the claimed {}, but no verdict: {}.",
                    band(claimed, tol, unit),
                    why_not.join("; ")
                ),
            )
        } else {
            let cv = noise_cv(ms);
            let judged_i = widen_for_noise(i, cv);
            let v = if points {
                judge_points(&judged_i, claimed, tol)
            } else {
                judge_band(&judged_i, claimed, tol)
            };
            let mut text =
                format!("{prefix}Measured {measured} against the claimed {}", band(claimed, tol, unit));
            if cv.is_some() {
                text.push_str(&format!(
                    "; {}, so the interval is widened by that much on each side to {}",
                    noise_text(ms),
                    show_interval(&judged_i, unit)
                ));
            }
            let below =
                if points { judged_i.upper < claimed - tol } else { judged_i.upper < claimed / (1.0 + tol) };
            text.push_str(&format!(": {}.", where_text(v, below)));
            r.margin = super::margin::of(v, &judged_i, claimed, tol, points);
            (v, text)
        };
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
        r.explanation = text + &suffix;
        r.cells = ms.iter().flat_map(|m| m.cells.clone()).collect();
        r
    }
}

/// An absolute figure carried to the source's scale through its reference: the lab's ratio
/// (interval `i`) times the reference's claimed value, beside the raw figures.
fn normalised(
    reference: &str,
    unit: &str,
    (m, value): (&Measured, f64),
    (om, ovalue): (&Measured, f64),
    i: Interval,
) -> super::Normalised {
    let normalised = i.estimate * ovalue;
    super::Normalised {
        reference: reference.to_string(),
        unit: unit.to_string(),
        raw_measured: m.estimate,
        raw_claimed: value,
        reference_measured: om.estimate,
        reference_claimed: ovalue,
        ratio_measured: i.estimate,
        ratio_claimed: value / ovalue,
        normalised,
        normalised_interval: (i.lower < i.upper).then_some(Interval {
            estimate: normalised,
            lower: i.lower * ovalue,
            upper: i.upper * ovalue,
            ..i
        }),
    }
}

fn method_text(m: RatioMethod) -> &'static str {
    match m {
        RatioMethod::BetweenRuns => " The ratio's interval is between runs: Welch's t on the logarithms of both cells' run values, never narrower than the ratio of their within-run intervals.",
        RatioMethod::IndependentSamples => " The ratio's interval comes from resampling both cells' samples.",
        RatioMethod::Mover => " The ratio's interval combines both figures' intervals (MOVER, log scale).",
        RatioMethod::Readings => " Both figures are single readings, so the ratio has no interval.",
    }
}

pub(super) fn not_measured(mut r: ClaimResult, why: String) -> ClaimResult {
    r.verdict = Verdict::NotMeasured;
    r.explanation = format!("Not measured: {why}.");
    r
}

impl Ctx<'_> {
    fn finish(&self, claim: &Claim, mut r: ClaimResult) -> ClaimResult {
        // The self-test reads only verdicts: the environment is the real verdict's business.
        if self.perturb != Perturb::None {
            return r;
        }
        let recs = records_of(self.records, &r.cells);
        r.environment = environment_notes(self.scenario, claim, &recs);
        r.stand_in = stand_ins(self.scenario, &recs);
        r
    }

    /// The verdict on one claim; a claim whose condition the lab did not reproduce is
    /// not_measured with the reason, whatever its figure says.
    pub(super) fn judge(&self, claim: &Claim) -> ClaimResult {
        let mut r = self.judge_figure(claim);
        if let (Some(why), true) = (&claim.unmet, r.verdict != Verdict::Finding) {
            let had = r.verdict;
            r.verdict = Verdict::NotMeasured;
            r.explanation = format!(
                "Not measured: the source's condition was not reproduced here: {why}. Judged anyway, the figure would be {}: {}",
                had.as_str(),
                r.explanation
            );
        }
        r
    }

    fn judge_figure(&self, claim: &Claim) -> ClaimResult {
        let r = base(claim);
        let r = match &claim.body {
            Body::Absolute { measure: sel, value, tolerance, relative_to, points, .. } => {
                let mut r = r;
                r.evidence = Some(sel.text());
                self.absolute(claim, r, sel, (*value, *tolerance, *points), relative_to.as_deref())
            }
            Body::Ratio { numerator, denominator, value, tolerance } => {
                let (a, b) = match (self.measure(numerator), self.measure(denominator)) {
                    (Ok(a), Ok(b)) => (a, b),
                    (Err(e), _) | (_, Err(e)) => return self.finish(claim, not_measured(r, e)),
                };
                match ratio(&a, &b, &numerator.stat, &claim.id) {
                    None => not_measured(r, "the denominator is zero".into()),
                    Some((i, how)) => {
                        let mut r = r;
                        let prefix = format!(
                            "{} is {} and {} is {}. ",
                            numerator.cell,
                            show(a.estimate, numerator.dim().as_str()),
                            denominator.cell,
                            show(b.estimate, denominator.dim().as_str())
                        );
                        r.evidence = Some(pair_key(numerator, denominator));
                        self.judged(
                            r,
                            Judging {
                                ms: &[&a, &b],
                                i,
                                claimed: *value,
                                tol: *tolerance,
                                unit: "ratio",
                                prefix,
                                suffix: method_text(how).into(),
                                points: false,
                            },
                        )
                    }
                }
            }
            Body::Ordering { items, tolerance } => {
                let mut r = self.ordering(r, items, *tolerance);
                if !claim.source.cited.is_empty() {
                    let published: Vec<String> = claim.source.cited.iter().map(|c| c.text()).collect();
                    r.explanation.push_str(&format!(
                        " The source's own figures, in that order: {}.",
                        published.join("; ")
                    ));
                }
                r
            }
            Body::SoakSlope { measure: sel, value, unit, duration } => {
                self.soak_slope(r, sel, *value, unit, duration)
            }
            Body::Outcome { cell, expect_failure, reason, detail } => {
                self.outcome(r, cell, *expect_failure, (reason.as_deref(), detail.as_deref()))
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
            Body::Consistency { figures, check, tolerance } => {
                return super::consistency::judge(r, figures, *check, *tolerance, self.perturb)
            }
        };
        self.finish(claim, r)
    }

    fn absolute(
        &self,
        claim: &Claim,
        mut r: ClaimResult,
        sel: &Selector,
        (value, tol, points): (f64, f64, bool),
        relative_to: Option<&str>,
    ) -> ClaimResult {
        let unit = sel.dim().as_str();
        let m = match self.measure(sel) {
            Ok(m) => m,
            Err(e) => return not_measured(r, e),
        };
        let recs = records_of(self.records, &m.cells);
        let lab = recs.first().map(|x| host_text(x)).unwrap_or_default();
        let src =
            claim.source.hardware.as_ref().map_or("not stated".into(), |(c, n)| format!("{c} × {n} CPUs"));
        if hardware_matches(claim, &recs) {
            r.judged_as = if points {
                format!("absolute in {} (hardware matches)", super::render::POINTS)
            } else {
                "absolute (hardware matches)".into()
            };
            let i = m.interval();
            let prefix = format!("The lab's hardware ({lab}) matches the source's. ");
            let j =
                Judging { ms: &[&m], i, claimed: value, tol, unit, prefix, suffix: basis_note(&m), points };
            return self.judged(r, j);
        }
        if matches!(sel.dim(), Dim::Lines | Dim::Fraction) {
            r.judged_as = if points {
                format!("absolute in {} (does not depend on hardware)", super::render::POINTS)
            } else {
                "absolute (does not depend on hardware)".into()
            };
            let i = m.interval();
            let j = Judging {
                ms: &[&m],
                i,
                claimed: value,
                tol,
                unit,
                prefix: String::new(),
                suffix: basis_note(&m),
                points,
            };
            return self.judged(r, j);
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
        let om = match self.measure(osel) {
            Ok(m) => m,
            Err(e) => return not_measured(r, format!("the reference figure ({}) is missing: {e}", other.id)),
        };
        let Some((i, how)) = ratio(&m, &om, &sel.stat, &claim.id) else {
            return not_measured(r, "the reference figure is zero".into());
        };
        r.judged_as = format!("normalised: ratio to {} (other hardware)", other.id);
        let prefix = format!(
            "On other hardware (source {src}; lab {lab}) the figure is judged by the ratio it implies to {}: claimed {} / {} = {}; as absolutes, {} measured against {} claimed. ",
            other.id,
            show(value, unit),
            show(*ovalue, unit),
            num(value / ovalue),
            show(m.estimate, unit),
            show(value, unit)
        );
        r.evidence = Some(pair_key(sel, osel));
        let n = normalised(&other.id, unit, (&m, value), (&om, *ovalue), i);
        let normalised = n.normalised;
        r.normalised = Some(n);
        let suffix = format!(
            "{} Normalised to the source's scale (the lab's ratio × the source's {} for {}), the lab's figure is {} against the claimed {}.",
            method_text(how),
            show(*ovalue, unit),
            other.id,
            show(normalised, unit),
            show(value, unit)
        );
        self.judged(
            r,
            Judging {
                ms: &[&m, &om],
                i,
                claimed: value / ovalue,
                tol,
                unit: "ratio",
                prefix,
                suffix,
                points: false,
            },
        )
    }

    fn ordering(&self, mut r: ClaimResult, items: &[Selector], tol: f64) -> ClaimResult {
        let mut ms: Vec<Measured> = match items.iter().map(|s| self.measure(s)).collect::<Result<Vec<_>, _>>()
        {
            Ok(ms) => ms,
            Err(e) => return not_measured(r, e),
        };
        if self.perturb.flips() {
            // The self-test's counterpart of a scaled figure: the measured order reversed.
            let values: Vec<Measured> = ms.iter().rev().cloned().collect();
            for (m, v) in ms.iter_mut().zip(values) {
                (m.estimate, m.ci, m.resample, m.within) = (v.estimate, v.ci, v.resample, v.within);
            }
        }
        let mut keys: Vec<String> = items.iter().map(Selector::text).collect();
        keys.sort();
        r.evidence = Some(format!("order of {}", keys.join(" ; ")));
        let unit = items[0].dim().as_str();
        let refs: Vec<&Measured> = ms.iter().collect();
        let why_not = undecidable(&refs);
        let mut verdict = Verdict::Reproduced;
        let mut pairs = Vec::new();
        for k in 1..ms.len() {
            let (a, b) = (&ms[k - 1], &ms[k]);
            let Some((i, _)) = ratio(b, a, &items[k].stat, &format!("{}\0{k}", r.id)) else {
                return not_measured(r, format!("{} is zero", items[k - 1].cell));
            };
            let i = widen_for_noise(self.perturb.interval(i), noise_cv(&[a, b]));
            let pair = if i.lower > 1.0 {
                "holds"
            } else if i.upper < 1.0 / (1.0 + tol) {
                verdict = Verdict::Contradicted;
                "reversed"
            } else {
                verdict = verdict_min(verdict, Verdict::Inconclusive);
                "undecided"
            };
            pairs.push(format!(
                "{} < {}: {} (ratio {}, CI {}–{}{})",
                items[k - 1].cell,
                items[k].cell,
                pair,
                num(i.estimate),
                num(i.lower),
                num(i.upper),
                if a.noisy || b.noisy { ", widened for noise" } else { "" }
            ));
        }
        let mut sorted: Vec<(f64, &str)> =
            ms.iter().zip(items).map(|(m, s)| (m.estimate, s.cell.as_str())).collect();
        sorted.sort_by(|a, b| a.0.total_cmp(&b.0));
        let order: Vec<String> = sorted.iter().map(|(v, c)| format!("{c} {}", show(*v, unit))).collect();
        if !why_not.is_empty() {
            verdict = Verdict::Inconclusive;
        }
        r.verdict = verdict;
        r.unit = unit.into();
        r.tolerance = Some(tol);
        r.n = Some(ms.iter().map(|m| m.n).sum());
        r.repeats = ms.iter().map(|m| m.repeats).max();
        r.cv = ms.iter().filter_map(|m| m.cv).reduce(f64::max);
        r.noisy = ms.iter().any(|m| m.noisy);
        r.cells = ms.iter().flat_map(|m| m.cells.clone()).collect();
        let what = match verdict {
            _ if !why_not.is_empty() => format!("No verdict: {}", why_not.join("; ")),
            Verdict::Reproduced => {
                "Every adjacent pair is ordered as claimed, each ratio's whole interval above 1".into()
            }
            Verdict::Contradicted => {
                "At least one pair is reversed, its ratio's whole interval below 1".into()
            }
            _ => "At least one pair's ratio interval includes 1".into(),
        };
        r.explanation = format!(
            "Measured order (smallest first): {}. {what}: {}. A noisy figure's ratio interval is widened by its CV on each side.",
            order.join(" < "),
            pairs.join("; ")
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

/// What a figure's interval is between, when that is not what its n says by itself.
fn basis_note(m: &Measured) -> String {
    match m.basis {
        super::measure::Basis::Cycles => format!(
            " The interval is between the {} disconnections of one server process (the soak's load and its connect/disconnect cycles), not between runs.",
            m.n
        ),
        _ => String::new(),
    }
}
