//! Two runs side by side: for every cell in both and every metric both measured, the ratio b/a
//! with a 95% confidence interval and a verdict against a threshold, the environment differences
//! that could explain a move, and the CI gate (`--fail-if-slower`). Also the renderers of
//! `benchlab compare` and `benchlab diff-env` (terminal table, Markdown, JSON). Pure: records in,
//! text out; reading the runs is the CLI's.
//!
//! How each ratio's interval is made:
//! - Cold start and first tools/list (repeated trials): the ratio of medians, bootstrapped with
//!   [`stats::ratio_ci`] and [`Pairing::Independent`] (the runs' samples are unrelated), percentile
//!   method. Both runs need at least [`MIN_CI_SAMPLES`] samples, otherwise the metric is skipped
//!   (listed in [`Comparison::skipped`]): a serial-calls cell's single cold start says nothing.
//! - Call p50/p95/p99 (one histogram per run): each run's quantile gets its bootstrap interval
//!   from [`stats::histogram_quantile_cis`], and the two are combined into an interval of the
//!   ratio on the log scale by MOVER (Zou and Donner 2008, "method of variance estimates
//!   recovery"): with estimates `a`, `b` and bounds `[la, ua]`, `[lb, ub]`, the log ratio's lower
//!   bound is `ln(b/a) − sqrt(ln(b/lb)² + ln(ua/a)²)` and its upper bound
//!   `ln(b/a) + sqrt(ln(ub/b)² + ln(a/la)²)`. That keeps the exact, seeded quantile bootstrap of
//!   the stats module and costs nothing, and for independent runs it matches a joint bootstrap
//!   far better than dividing the bounds (which compounds both tails).
//! - RSS after initialize (one reading per cell): the ratio of the readings with a zero-width
//!   interval. There is no sample to resample; RSS readings repeat to well under 1%, so the
//!   threshold alone judges them.
//!
//! - HTTP load cells, over every successful repeat of the cell in each run: throughput as the
//!   ratio of the repeats' medians (bootstrapped like cold starts with 3 or more repeats per run,
//!   otherwise one reading of zero width), higher is better, so its verdict is judged on a/b and a
//!   drop reads `slower`; latency p50/p99 under load from the repeats' pooled histograms, by MOVER
//!   as for calls; the error rate as the difference b − a of the pooled proportions with
//!   Newcombe's hybrid score interval, `more errors` when its lower bound is above
//!   [`ERROR_RATE_TOLERANCE`] (and then it fails the CI gate whatever its percentage).
//!
//! Verdicts, with threshold t (e.g. 5%): `slower` when the interval's lower bound is above
//! 1 + t; `faster` when its upper bound is below 1 / (1 + t) (symmetric on the log scale, so
//! swapping the runs swaps the two verdicts); `unchanged` when the whole interval lies within
//! [1 / (1 + t), 1 + t]; `inconclusive` when it straddles either bound. For memory, higher is
//! worse too: `slower` reads as "larger" in the tables.

use std::fmt;
use std::fmt::Write as _;
use std::str::FromStr;

use comfy_table::{presets::UTF8_FULL_CONDENSED, Cell as TCell, CellAlignment, ContentArrangement, Table};
use serde::Serialize;

use crate::record::diffenv::{self, latest_by_cell, CellEnvDiff, EnvDiff, RunEnvDiff};
use crate::record::{Record, Status};
use crate::stats::{self, Interval, Pairing};

use super::markdown::cell as md;
use super::rows::{status_text, Unit, CONFIDENCE, MIN_CI_SAMPLES, RESAMPLES, SEED};
use super::units::unit_text;

/// The threshold of `benchlab compare` when none is given, in percent.
pub const DEFAULT_THRESHOLD_PCT: f64 = 5.0;

/// What is compared in a cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CompareMetric {
    /// The median cold start (spawn request to initialize result).
    ColdStart,
    /// The median first tools/list.
    ToolsList,
    /// Percentiles of one tools/call in a serial-calls workload.
    CallP50,
    CallP95,
    CallP99,
    /// RSS of the server's process tree right after initialize.
    RssAfterInitialize,
    /// HTTP load: correct answers per second. Higher is better: the ratio is still b/a, but the
    /// verdict is judged on a/b, so a throughput drop is `slower`.
    Throughput,
    /// HTTP load: latency percentiles of correct calls, from the histograms (repeats pooled).
    LoadP50,
    LoadP99,
    /// HTTP load: failed / all calls (repeats pooled), compared as the difference b − a.
    ErrorRate,
}

impl CompareMetric {
    pub const ALL: [CompareMetric; 10] = [
        CompareMetric::ColdStart,
        CompareMetric::ToolsList,
        CompareMetric::CallP50,
        CompareMetric::CallP95,
        CompareMetric::CallP99,
        CompareMetric::RssAfterInitialize,
        CompareMetric::Throughput,
        CompareMetric::LoadP50,
        CompareMetric::LoadP99,
        CompareMetric::ErrorRate,
    ];

    /// Whether a larger value is better (throughput), so the verdict reads the ratio inverted.
    pub fn higher_is_better(self) -> bool {
        self == CompareMetric::Throughput
    }

    fn is_load(self) -> bool {
        matches!(
            self,
            CompareMetric::Throughput
                | CompareMetric::LoadP50
                | CompareMetric::LoadP99
                | CompareMetric::ErrorRate
        )
    }

    pub fn as_str(self) -> &'static str {
        match self {
            CompareMetric::ColdStart => "cold_start",
            CompareMetric::ToolsList => "tools_list",
            CompareMetric::CallP50 => "call_p50",
            CompareMetric::CallP95 => "call_p95",
            CompareMetric::CallP99 => "call_p99",
            CompareMetric::RssAfterInitialize => "rss_after_initialize",
            CompareMetric::Throughput => "throughput",
            CompareMetric::LoadP50 => "load_p50",
            CompareMetric::LoadP99 => "load_p99",
            CompareMetric::ErrorRate => "error_rate",
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            CompareMetric::ColdStart => "cold start p50",
            CompareMetric::ToolsList => "first tools/list p50",
            CompareMetric::CallP50 => "tools/call p50",
            CompareMetric::CallP95 => "tools/call p95",
            CompareMetric::CallP99 => "tools/call p99",
            CompareMetric::RssAfterInitialize => "RSS after initialize",
            CompareMetric::Throughput => "throughput (higher is better)",
            CompareMetric::LoadP50 => "latency p50 under load",
            CompareMetric::LoadP99 => "latency p99 under load",
            CompareMetric::ErrorRate => "error rate (b − a)",
        }
    }

    pub fn unit(self) -> Unit {
        match self {
            CompareMetric::RssAfterInitialize => Unit::Bytes,
            CompareMetric::Throughput => Unit::Rps,
            CompareMetric::ErrorRate => Unit::Ratio,
            _ => Unit::Ms,
        }
    }
}

/// How a ratio's interval was made (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Method {
    /// Bootstrap of the ratio of medians, runs resampled independently.
    BootstrapMedianRatio,
    /// Each run's histogram quantile bootstrapped, combined by MOVER on the log scale.
    HistogramQuantileMover,
    /// One reading per run: the ratio itself, zero width.
    SingleReading,
    /// Error rates: the difference b − a of the pooled proportions with Newcombe's hybrid score
    /// interval (from each run's Wilson interval); `ratio` then holds that difference.
    Difference,
}

/// The verdict on one metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// The whole interval is above 1 + threshold.
    Slower,
    /// The whole interval is below 1 / (1 + threshold).
    Faster,
    /// The whole interval is within the threshold both ways.
    Unchanged,
    /// The interval straddles a threshold bound: more samples would tell.
    Inconclusive,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Slower => "slower",
            Verdict::Faster => "faster",
            Verdict::Unchanged => "unchanged",
            Verdict::Inconclusive => "inconclusive",
        }
    }

    /// The word people read: memory is `larger`/`smaller`, error rates `more errors`/`fewer
    /// errors`, not slower/faster.
    pub fn label(self, unit: Unit) -> &'static str {
        match (self, unit) {
            (Verdict::Slower, Unit::Bytes) => "larger",
            (Verdict::Faster, Unit::Bytes) => "smaller",
            (Verdict::Slower, Unit::Ratio) => "more errors",
            (Verdict::Faster, Unit::Ratio) => "fewer errors",
            (v, _) => v.as_str(),
        }
    }

    /// Judges a ratio interval against a threshold in percent.
    pub fn judge(ratio: &Interval, threshold_pct: f64) -> Verdict {
        let hi = 1.0 + threshold_pct / 100.0;
        let lo = 1.0 / hi;
        if !ratio.is_finite() {
            Verdict::Inconclusive
        } else if ratio.lower > hi {
            Verdict::Slower
        } else if ratio.upper < lo {
            Verdict::Faster
        } else if ratio.lower >= lo && ratio.upper <= hi {
            Verdict::Unchanged
        } else {
            Verdict::Inconclusive
        }
    }
}

/// One metric of one cell in both runs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MetricComparison {
    pub cell: String,
    pub metric: CompareMetric,
    pub unit: Unit,
    /// The statistic in run a and run b (ms, or bytes).
    pub a: f64,
    pub b: f64,
    /// Samples behind each (calls in the histogram; 1 for a reading).
    pub n_a: u64,
    pub n_b: u64,
    /// b / a with its interval (`confidence` in the interval); for [`Method::Difference`] the
    /// difference b − a instead.
    pub ratio: Interval,
    pub method: Method,
    /// Throughput: a larger b is better, so the verdict was judged on a / b.
    pub higher_is_better: bool,
    pub verdict: Verdict,
}

impl MetricComparison {
    /// The ratio in the sense "above 1 is worse": b/a, or a/b for a higher-is-better metric.
    pub fn cost_ratio(&self) -> Interval {
        if self.higher_is_better {
            invert(&self.ratio)
        } else {
            self.ratio
        }
    }
}

/// 1 / an interval.
fn invert(i: &Interval) -> Interval {
    Interval {
        estimate: 1.0 / i.estimate,
        lower: 1.0 / i.upper,
        upper: 1.0 / i.lower,
        confidence: i.confidence,
    }
}

/// An error-rate difference below this (0.1 percentage point) is `unchanged`: a handful of
/// failed calls in hundreds of thousands is not a verdict.
pub const ERROR_RATE_TOLERANCE: f64 = 0.001;

/// A cell found, and successful, in both runs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CellComparison {
    pub cell: String,
    pub server: String,
    pub workload: String,
    pub env_hash_a: String,
    pub env_hash_b: String,
    pub metrics: Vec<MetricComparison>,
    /// Every environment difference of the cell (see [`Comparison::env_common`] for the part all
    /// cells share).
    pub env_diff: Vec<EnvDiff>,
}

/// A cell in both runs that failed in at least one: not compared.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FailedCell {
    pub cell: String,
    /// `ok`, `failed: <reason>`, with ` (expected)` when the scenario expected the failure.
    pub status_a: String,
    pub status_b: String,
}

/// A metric measured in a compared cell that could not be judged, and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SkippedMetric {
    pub cell: String,
    pub metric: CompareMetric,
    pub reason: String,
}

/// Two runs compared.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    pub runs_a: Vec<String>,
    pub runs_b: Vec<String>,
    pub threshold_pct: f64,
    pub confidence: f64,
    /// Cells ok in both runs, in a's record order.
    pub cells: Vec<CellComparison>,
    pub failed: Vec<FailedCell>,
    pub only_in_a: Vec<String>,
    pub only_in_b: Vec<String>,
    pub skipped: Vec<SkippedMetric>,
    /// Environment differences every matched cell shows alike.
    pub env_common: Vec<EnvDiff>,
}

impl Comparison {
    /// Every metric comparison, cell by cell.
    pub fn metrics(&self) -> impl Iterator<Item = &MetricComparison> {
        self.cells.iter().flat_map(|c| c.metrics.iter())
    }

    /// How many metrics got each verdict: slower, faster, unchanged, inconclusive.
    pub fn counts(&self) -> [(Verdict, usize); 4] {
        [Verdict::Slower, Verdict::Faster, Verdict::Unchanged, Verdict::Inconclusive]
            .map(|v| (v, self.metrics().filter(|m| m.verdict == v).count()))
    }
}

/// FNV-1a: a stable hash for per-metric seeds (std's hasher may change between releases).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

/// A seed per cell, metric and side, so an interval does not depend on the other cells.
fn seed(cell: &str, metric: &str, side: &str) -> u64 {
    SEED ^ fnv1a(format!("compare\0{cell}\0{metric}\0{side}").as_bytes())
}

enum Judged {
    Compared(MetricComparison),
    Skipped(String),
    /// Not measured in either run: nothing to say.
    Absent,
}

/// One quantile of two histograms (a, b) and the interval of b/a, MOVER over each quantile's
/// bootstrap interval; None when an interval is not positive.
fn quantile_ratio(
    ha: &hdrhistogram::Histogram<u64>,
    hb: &hdrhistogram::Histogram<u64>,
    q: f64,
    cell: &str,
    metric: CompareMetric,
) -> Option<(f64, f64, Interval)> {
    let ci = |h, side| {
        stats::histogram_quantile_cis(h, &[q], RESAMPLES, CONFIDENCE, seed(cell, metric.as_str(), side))
    };
    let (ia, ib) = (ci(ha, "a"), ci(hb, "b"));
    match (ia.first(), ib.first()) {
        (Some(ia), Some(ib)) if ia.lower > 0.0 && ib.lower > 0.0 => {
            Some((ia.estimate, ib.estimate, stats::mover_ratio(ia, ib)))
        }
        _ => None,
    }
}

fn compare_metric(ra: &Record, rb: &Record, metric: CompareMetric, threshold_pct: f64) -> Judged {
    let cell = ra.cell.id.as_str();
    let (ma, mb) = (&ra.metrics, &rb.metrics);
    let made = |a: f64, b: f64, n_a: u64, n_b: u64, ratio: Interval, method: Method| {
        Judged::Compared(MetricComparison {
            cell: cell.to_string(),
            metric,
            unit: metric.unit(),
            a,
            b,
            n_a,
            n_b,
            ratio,
            method,
            higher_is_better: false,
            verdict: Verdict::judge(&ratio, threshold_pct),
        })
    };
    let one_sided = |in_a: bool, in_b: bool| match (in_a, in_b) {
        (false, false) => Judged::Absent,
        (true, false) => Judged::Skipped("measured in a only".into()),
        _ => Judged::Skipped("measured in b only".into()),
    };
    match metric {
        CompareMetric::ColdStart | CompareMetric::ToolsList => {
            let pick = |m: &crate::record::Metrics| {
                if metric == CompareMetric::ColdStart {
                    m.cold_start.clone()
                } else {
                    m.tools_list.clone()
                }
            };
            let (sa, sb) = match (
                pick(ma).filter(|s| !s.samples_ms.is_empty()),
                pick(mb).filter(|s| !s.samples_ms.is_empty()),
            ) {
                (Some(sa), Some(sb)) => (sa.samples_ms, sb.samples_ms),
                (x, y) => return one_sided(x.is_some(), y.is_some()),
            };
            let (n_a, n_b) = (sa.len() as u64, sb.len() as u64);
            if n_a < MIN_CI_SAMPLES || n_b < MIN_CI_SAMPLES {
                return Judged::Skipped(format!(
                    "too few samples for an interval ({n_a} and {n_b}, need {MIN_CI_SAMPLES})"
                ));
            }
            let s = seed(cell, metric.as_str(), "ab");
            match stats::ratio_ci(&sb, &sa, stats::median, Pairing::Independent, RESAMPLES, CONFIDENCE, s) {
                Some(ratio) => made(
                    stats::median(&mut sa.clone()),
                    stats::median(&mut sb.clone()),
                    n_a,
                    n_b,
                    ratio,
                    Method::BootstrapMedianRatio,
                ),
                None => Judged::Skipped("the median in a is zero".into()),
            }
        }
        CompareMetric::CallP50 | CompareMetric::CallP95 | CompareMetric::CallP99 => {
            let (ca, cb) = match (&ma.calls, &mb.calls) {
                (Some(ca), Some(cb)) => (ca, cb),
                (x, y) => return one_sided(x.is_some(), y.is_some()),
            };
            let q = match metric {
                CompareMetric::CallP50 => 0.50,
                CompareMetric::CallP95 => 0.95,
                _ => 0.99,
            };
            let decode = |s: &str| stats::decode_histogram(s).ok().filter(|h| h.len() >= MIN_CI_SAMPLES);
            let (ha, hb) = match (decode(&ca.histogram), decode(&cb.histogram)) {
                (Some(ha), Some(hb)) => (ha, hb),
                _ => return Judged::Skipped("a histogram is unreadable or holds too few calls".into()),
            };
            match quantile_ratio(&ha, &hb, q, cell, metric) {
                Some((a, b, ratio)) => made(a, b, ha.len(), hb.len(), ratio, Method::HistogramQuantileMover),
                None => Judged::Skipped("no positive quantile interval".into()),
            }
        }
        CompareMetric::RssAfterInitialize => {
            let (xa, xb) = match (&ma.memory.after_initialize, &mb.memory.after_initialize) {
                (Some(xa), Some(xb)) => (xa.rss_bytes as f64, xb.rss_bytes as f64),
                (x, y) => return one_sided(x.is_some(), y.is_some()),
            };
            if xa <= 0.0 {
                return Judged::Skipped("zero RSS in a".into());
            }
            let r = xb / xa;
            let ratio = Interval { estimate: r, lower: r, upper: r, confidence: CONFIDENCE };
            made(xa, xb, 1, 1, ratio, Method::SingleReading)
        }
        // Load metrics go through `compare_load_metric`, over every repeat.
        CompareMetric::Throughput
        | CompareMetric::LoadP50
        | CompareMetric::LoadP99
        | CompareMetric::ErrorRate => Judged::Absent,
    }
}

/// The two-sided normal quantile of a confidence level (0.95 → 1.96), by bisection on erf.
fn z_of(confidence: f64) -> f64 {
    // Abramowitz and Stegun 7.1.26 is accurate to 1.5e-7, plenty for an interval's width.
    let erf = |x: f64| {
        let t = 1.0 / (1.0 + 0.327_591_1 * x);
        let y = ((((1.061_405_429 * t - 1.453_152_027) * t + 1.421_413_741) * t - 0.284_496_736) * t
            + 0.254_829_592)
            * t;
        1.0 - y * (-x * x).exp()
    };
    let (mut lo, mut hi) = (0.0f64, 10.0f64);
    for _ in 0..80 {
        let mid = (lo + hi) / 2.0;
        if erf(mid / std::f64::consts::SQRT_2) < confidence {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    (lo + hi) / 2.0
}

/// Wilson's score interval of a proportion x / n.
fn wilson(x: u64, n: u64, z: f64) -> (f64, f64, f64) {
    let (nf, p) = (n as f64, x as f64 / n as f64);
    let z2 = z * z;
    let denom = 1.0 + z2 / nf;
    let centre = (p + z2 / (2.0 * nf)) / denom;
    let half = z * (p * (1.0 - p) / nf + z2 / (4.0 * nf * nf)).sqrt() / denom;
    (p, (centre - half).max(0.0), (centre + half).min(1.0))
}

/// Newcombe's hybrid score interval (his method 10) of the difference of two proportions b − a.
fn newcombe_difference(xa: u64, na: u64, xb: u64, nb: u64, confidence: f64) -> Interval {
    let z = z_of(confidence);
    let (pa, la, ua) = wilson(xa, na, z);
    let (pb, lb, ub) = wilson(xb, nb, z);
    let d = pb - pa;
    Interval {
        estimate: d,
        lower: d - ((pb - lb).powi(2) + (ua - pa).powi(2)).sqrt(),
        upper: d + ((ub - pb).powi(2) + (pa - la).powi(2)).sqrt(),
        confidence,
    }
}

/// Judges an error-rate difference against [`ERROR_RATE_TOLERANCE`].
fn judge_difference(d: &Interval) -> Verdict {
    let t = ERROR_RATE_TOLERANCE;
    if !d.is_finite() {
        Verdict::Inconclusive
    } else if d.lower > t {
        Verdict::Slower
    } else if d.upper < -t {
        Verdict::Faster
    } else if d.lower >= -t && d.upper <= t {
        Verdict::Unchanged
    } else {
        Verdict::Inconclusive
    }
}

/// Every repeat's histogram of a load cell, merged.
fn pooled_histogram(rs: &[&Record]) -> Option<hdrhistogram::Histogram<u64>> {
    let mut pooled: Option<hdrhistogram::Histogram<u64>> = None;
    for r in rs {
        let Some(lat) = r.metrics.load.as_ref().and_then(|l| l.latency.as_ref()) else { continue };
        let h = stats::decode_histogram(&lat.histogram).ok()?;
        match pooled.as_mut() {
            Some(p) => p.add(&h).ok()?,
            None => pooled = Some(h),
        }
    }
    pooled.filter(|h| h.len() >= MIN_CI_SAMPLES)
}

/// A load metric of one cell over all its successful repeats in each run.
fn compare_load_metric(
    cell: &str,
    ra: &[&Record],
    rb: &[&Record],
    metric: CompareMetric,
    threshold_pct: f64,
) -> Judged {
    let with_load = |rs: &[&Record]| rs.iter().any(|r| r.metrics.load.is_some());
    match (with_load(ra), with_load(rb)) {
        (false, false) => return Judged::Absent,
        (true, false) => return Judged::Skipped("measured in a only".into()),
        (false, true) => return Judged::Skipped("measured in b only".into()),
        _ => {}
    }
    let made = |a: f64, b: f64, n_a: u64, n_b: u64, ratio: Interval, method: Method| {
        let higher_is_better = metric.higher_is_better();
        let verdict = match method {
            Method::Difference => judge_difference(&ratio),
            _ if higher_is_better => Verdict::judge(&invert(&ratio), threshold_pct),
            _ => Verdict::judge(&ratio, threshold_pct),
        };
        Judged::Compared(MetricComparison {
            cell: cell.to_string(),
            metric,
            unit: metric.unit(),
            a,
            b,
            n_a,
            n_b,
            ratio,
            method,
            higher_is_better,
            verdict,
        })
    };
    match metric {
        CompareMetric::Throughput => {
            let tps = |rs: &[&Record]| -> Vec<f64> {
                rs.iter().filter_map(|r| Some(r.metrics.load.as_ref()?.throughput_rps)).collect()
            };
            let (ta, tb) = (tps(ra), tps(rb));
            let (ma, mb) = (stats::median(&mut ta.clone()), stats::median(&mut tb.clone()));
            if ma.is_nan() || ma <= 0.0 || !mb.is_finite() {
                return Judged::Skipped("no throughput in a".into());
            }
            let (n_a, n_b) = (ta.len() as u64, tb.len() as u64);
            if n_a >= MIN_CI_SAMPLES && n_b >= MIN_CI_SAMPLES {
                let s = seed(cell, metric.as_str(), "ab");
                if let Some(ratio) =
                    stats::ratio_ci(&tb, &ta, stats::median, Pairing::Independent, RESAMPLES, CONFIDENCE, s)
                {
                    return made(ma, mb, n_a, n_b, ratio, Method::BootstrapMedianRatio);
                }
            }
            let r = mb / ma;
            made(
                ma,
                mb,
                n_a,
                n_b,
                Interval { estimate: r, lower: r, upper: r, confidence: CONFIDENCE },
                Method::SingleReading,
            )
        }
        CompareMetric::LoadP50 | CompareMetric::LoadP99 => {
            let q = if metric == CompareMetric::LoadP50 { 0.50 } else { 0.99 };
            let (Some(ha), Some(hb)) = (pooled_histogram(ra), pooled_histogram(rb)) else {
                return Judged::Skipped("a histogram is unreadable or holds too few calls".into());
            };
            match quantile_ratio(&ha, &hb, q, cell, metric) {
                Some((a, b, ratio)) => made(a, b, ha.len(), hb.len(), ratio, Method::HistogramQuantileMover),
                None => Judged::Skipped("no positive quantile interval".into()),
            }
        }
        _ => {
            let counts = |rs: &[&Record]| {
                rs.iter()
                    .filter_map(|r| r.metrics.load.as_ref())
                    .fold((0u64, 0u64), |(f, n), l| (f + l.failed, n + l.ok + l.failed))
            };
            let ((fa, na), (fb, nb)) = (counts(ra), counts(rb));
            if na == 0 || nb == 0 {
                return Judged::Skipped("no calls in a run's window".into());
            }
            let d = newcombe_difference(fa, na, fb, nb, CONFIDENCE);
            made(fa as f64 / na as f64, fb as f64 / nb as f64, na, nb, d, Method::Difference)
        }
    }
}

/// Compares run b against run a: ratios are b / a, so `slower` means b is slower. Cells are
/// matched by id (the latest record of an id stands); see the module docs for the intervals.
pub fn compare(a: &[Record], b: &[Record], threshold_pct: f64) -> Comparison {
    let env = diffenv::diff_runs(a, b);
    let lb = latest_by_cell(b);
    let mut cells = Vec::new();
    let mut failed = Vec::new();
    let mut skipped = Vec::new();
    for ra in latest_by_cell(a) {
        let Some(rb) = lb.iter().find(|r| r.cell.id == ra.cell.id) else { continue };
        if ra.status != Status::Ok || rb.status != Status::Ok {
            failed.push(FailedCell {
                cell: ra.cell.id.clone(),
                status_a: status_text(ra),
                status_b: status_text(rb),
            });
            continue;
        }
        let mut metrics = Vec::new();
        // Load metrics use every successful repeat of the cell in each run.
        let id = ra.cell.id.as_str();
        let all_a: Vec<&Record> = a.iter().filter(|r| r.cell.id == id && r.status == Status::Ok).collect();
        let all_b: Vec<&Record> = b.iter().filter(|r| r.cell.id == id && r.status == Status::Ok).collect();
        for metric in CompareMetric::ALL {
            let judged = if metric.is_load() {
                compare_load_metric(&ra.cell.id, &all_a, &all_b, metric, threshold_pct)
            } else {
                compare_metric(ra, rb, metric, threshold_pct)
            };
            match judged {
                Judged::Compared(m) => metrics.push(m),
                Judged::Skipped(reason) => {
                    skipped.push(SkippedMetric { cell: ra.cell.id.clone(), metric, reason })
                }
                Judged::Absent => {}
            }
        }
        let env_diff =
            env.cells.iter().find(|c| c.cell == ra.cell.id).map(|c| c.diffs.clone()).unwrap_or_default();
        cells.push(CellComparison {
            cell: ra.cell.id.clone(),
            server: ra.cell.server.id.clone(),
            workload: ra.cell.workload.kind().to_string(),
            env_hash_a: ra.env_hash.clone(),
            env_hash_b: rb.env_hash.clone(),
            metrics,
            env_diff,
        });
    }
    Comparison {
        runs_a: env.runs_a,
        runs_b: env.runs_b,
        threshold_pct,
        confidence: CONFIDENCE,
        cells,
        failed,
        only_in_a: env.only_in_a,
        only_in_b: env.only_in_b,
        skipped,
        env_common: env.common,
    }
}

/// The metrics that fail a CI gate: flagged slower (or larger) with the interval's lower bound
/// above 1 + `fail_if_slower_pct` / 100, in the sense where above 1 is worse (a throughput drop
/// of more than the percentage fails it: a/b above the limit); and any error rate flagged `more
/// errors` (its difference is beyond [`ERROR_RATE_TOLERANCE`]), whatever the percentage.
pub fn gate_failures(c: &Comparison, fail_if_slower_pct: f64) -> Vec<&MetricComparison> {
    let limit = 1.0 + fail_if_slower_pct / 100.0;
    c.metrics()
        .filter(|m| {
            m.verdict == Verdict::Slower && (m.method == Method::Difference || m.cost_ratio().lower > limit)
        })
        .collect()
}

/// The CI gate of `--fail-if-slower <pct>`: true when it passes, i.e. no metric is flagged slower
/// by more than `fail_if_slower_pct` at its lower bound. Memory counts (larger is worse);
/// failed and unmatched cells do not (the CLI reports them).
pub fn gate(c: &Comparison, fail_if_slower_pct: f64) -> bool {
    gate_failures(c, fail_if_slower_pct).is_empty()
}

// ---------------------------------------------------------------------------------------------
// Renderers.

/// The output formats of `benchlab compare` and `benchlab diff-env`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompareFormat {
    Table,
    Markdown,
    Json,
}

impl CompareFormat {
    pub const ALL: [CompareFormat; 3] = [CompareFormat::Table, CompareFormat::Markdown, CompareFormat::Json];

    pub fn as_str(self) -> &'static str {
        match self {
            CompareFormat::Table => "table",
            CompareFormat::Markdown => "markdown",
            CompareFormat::Json => "json",
        }
    }
}

impl fmt::Display for CompareFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown format {0:?} (one of: table, markdown, json)")]
pub struct UnknownCompareFormat(pub String);

impl FromStr for CompareFormat {
    type Err = UnknownCompareFormat;

    fn from_str(s: &str) -> Result<CompareFormat, UnknownCompareFormat> {
        CompareFormat::ALL
            .into_iter()
            .find(|f| f.as_str() == s)
            .ok_or_else(|| UnknownCompareFormat(s.to_string()))
    }
}

fn value_text(unit: Unit, v: f64) -> String {
    unit_text(unit, v)
}

/// A difference of rates in percentage points: `+1.20 pp`.
fn pp(d: f64) -> String {
    format!("{:+.2} pp", d * 100.0)
}

/// `1.502x`, or a difference for error rates.
fn ratio_cell(m: &MetricComparison) -> String {
    if m.method == Method::Difference {
        pp(m.ratio.estimate)
    } else {
        ratio_text(m.ratio.estimate)
    }
}

/// `1.502x`.
fn ratio_text(r: f64) -> String {
    if r.is_finite() {
        format!("{r:.3}x")
    } else {
        "—".into()
    }
}

/// `1.421–1.587x`, or `(one reading)`.
fn ratio_interval_text(m: &MetricComparison) -> String {
    if m.method == Method::SingleReading {
        "(one reading)".into()
    } else if m.method == Method::Difference && m.ratio.is_finite() {
        format!("{} to {}", pp(m.ratio.lower), pp(m.ratio.upper))
    } else if m.ratio.is_finite() {
        format!("{:.3}–{:.3}x", m.ratio.lower, m.ratio.upper)
    } else {
        "—".into()
    }
}

fn n_text(m: &MetricComparison) -> String {
    if m.n_a == m.n_b {
        m.n_a.to_string()
    } else {
        format!("{}/{}", m.n_a, m.n_b)
    }
}

fn runs_text(runs: &[String]) -> String {
    if runs.is_empty() {
        "(no records)".into()
    } else {
        runs.join(", ")
    }
}

fn counts_text(c: &Comparison) -> String {
    c.counts().iter().map(|(v, n)| format!("{n} {}", v.as_str())).collect::<Vec<_>>().join(", ")
}

/// The rule the verdicts follow, in one sentence.
fn rule_text(c: &Comparison) -> String {
    let hi = 1.0 + c.threshold_pct / 100.0;
    format!(
        "Ratios are b/a with {:.0}% intervals; slower when the interval is above {hi:.3}, faster when below {:.3}, \
         unchanged when inside, inconclusive when it straddles a bound (threshold {}%). Throughput is higher-is-better: \
         its verdict reads a/b, so a drop is slower. Error rates are compared as b − a in percentage points \
         (more errors beyond {:.1} pp).",
        c.confidence * 100.0,
        1.0 / hi,
        c.threshold_pct,
        ERROR_RATE_TOLERANCE * 100.0
    )
}

/// A manifest value for a terminal or a table: sha256 hex shortened to 12 characters (JSON
/// keeps them whole).
fn show_short(v: Option<&serde_json::Value>) -> String {
    let s = EnvDiff::show(v);
    let hex = s.strip_prefix("sha256:").unwrap_or(&s);
    if hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        format!("{}…", &s[..s.len() - 64 + 12])
    } else {
        s
    }
}

fn diff_line(d: &EnvDiff) -> String {
    format!("{}: {} → {}", d.path, show_short(d.a.as_ref()), show_short(d.b.as_ref()))
}

/// The per-metric table of a comparison (comfy-table).
pub fn compare_table(c: &Comparison) -> Table {
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED).set_content_arrangement(ContentArrangement::Dynamic);
    t.set_header(vec!["cell", "metric", "n", "a", "b", "b/a", "95% interval", "verdict"]);
    for m in c.metrics() {
        t.add_row(vec![
            TCell::new(&m.cell),
            TCell::new(m.metric.label()),
            TCell::new(n_text(m)).set_alignment(CellAlignment::Right),
            TCell::new(value_text(m.unit, m.a)).set_alignment(CellAlignment::Right),
            TCell::new(value_text(m.unit, m.b)).set_alignment(CellAlignment::Right),
            TCell::new(ratio_cell(m)).set_alignment(CellAlignment::Right),
            TCell::new(ratio_interval_text(m)).set_alignment(CellAlignment::Right),
            TCell::new(m.verdict.label(m.unit)),
        ]);
    }
    t
}

/// Cell-specific environment differences (beyond the common ones), one line each.
fn specific_diffs<'a>(c: &'a Comparison, cell: &'a CellComparison) -> impl Iterator<Item = &'a EnvDiff> {
    cell.env_diff.iter().filter(|d| !c.env_common.contains(d))
}

/// The terminal form: the table, then unmatched, failed and skipped cells and the environment
/// differences.
pub fn compare_text(c: &Comparison) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "a: {}\nb: {}", runs_text(&c.runs_a), runs_text(&c.runs_b));
    let _ = writeln!(o, "{}", rule_text(c));
    if c.cells.iter().any(|cell| !cell.metrics.is_empty()) {
        let _ = writeln!(o, "{}", compare_table(c));
    }
    let _ = writeln!(o, "{} cells compared: {}.", c.cells.len(), counts_text(c));
    for (label, ids) in [("only in a", &c.only_in_a), ("only in b", &c.only_in_b)] {
        if !ids.is_empty() {
            let _ = writeln!(o, "{label}: {}", ids.join(", "));
        }
    }
    for f in &c.failed {
        let _ = writeln!(o, "not compared (failed): {} — a: {}, b: {}", f.cell, f.status_a, f.status_b);
    }
    for s in &c.skipped {
        let _ = writeln!(o, "skipped: {} {} — {}", s.cell, s.metric.label(), s.reason);
    }
    if c.env_common.is_empty() && c.cells.iter().all(|cell| cell.env_diff.is_empty()) {
        o.push_str("environment: identical in every compared cell\n");
    } else {
        if !c.env_common.is_empty() {
            o.push_str("environment, every cell:\n");
            for d in &c.env_common {
                let _ = writeln!(o, "  {}", diff_line(d));
            }
        }
        for cell in &c.cells {
            let mut lines = specific_diffs(c, cell).peekable();
            if lines.peek().is_some() {
                let _ = writeln!(o, "environment, {}:", cell.cell);
                for d in lines {
                    let _ = writeln!(o, "  {}", diff_line(d));
                }
            }
        }
    }
    o
}

/// The comparison as Markdown, for pull-request comments.
pub fn compare_markdown(c: &Comparison) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "# benchlab compare\n");
    let _ = writeln!(o, "- a: `{}`\n- b: `{}`\n", md(&runs_text(&c.runs_a)), md(&runs_text(&c.runs_b)));
    let _ = writeln!(o, "{}\n", rule_text(c));
    let _ = writeln!(o, "{} cells compared: {}.\n", c.cells.len(), counts_text(c));
    if c.metrics().next().is_some() {
        o.push_str("| cell | metric | n | a | b | b/a | 95% interval | verdict |\n");
        o.push_str("|---|---|--:|--:|--:|--:|--:|---|\n");
        for m in c.metrics() {
            let verdict = match m.verdict {
                Verdict::Slower | Verdict::Faster => format!("**{}**", m.verdict.label(m.unit)),
                v => v.label(m.unit).to_string(),
            };
            let _ = writeln!(
                o,
                "| {} | {} | {} | {} | {} | {} | {} | {verdict} |",
                md(&m.cell),
                m.metric.label(),
                n_text(m),
                value_text(m.unit, m.a),
                value_text(m.unit, m.b),
                ratio_cell(m),
                ratio_interval_text(m),
            );
        }
        o.push('\n');
    }
    if !c.only_in_a.is_empty() || !c.only_in_b.is_empty() || !c.failed.is_empty() || !c.skipped.is_empty() {
        o.push_str("## Not compared\n\n");
        for id in &c.only_in_a {
            let _ = writeln!(o, "- `{}`: only in a", md(id));
        }
        for id in &c.only_in_b {
            let _ = writeln!(o, "- `{}`: only in b", md(id));
        }
        for f in &c.failed {
            let _ = writeln!(o, "- `{}`: a {}, b {}", md(&f.cell), md(&f.status_a), md(&f.status_b));
        }
        for s in &c.skipped {
            let _ = writeln!(o, "- `{}` {}: {}", md(&s.cell), s.metric.label(), md(&s.reason));
        }
        o.push('\n');
    }
    o.push_str("## Environment differences\n\n");
    if c.env_common.is_empty() && c.cells.iter().all(|cell| cell.env_diff.is_empty()) {
        o.push_str("None: every compared cell ran in the same environment.\n");
        return o;
    }
    o.push_str("| cell | field | a | b |\n|---|---|---|---|\n");
    for d in &c.env_common {
        let _ = writeln!(o, "{}", diff_row_md("every cell", d));
    }
    for cell in &c.cells {
        for d in specific_diffs(c, cell) {
            let _ = writeln!(o, "{}", diff_row_md(&cell.cell, d));
        }
    }
    o
}

fn diff_row_md(cell: &str, d: &EnvDiff) -> String {
    format!(
        "| {} | `{}` | {} | {} |",
        md(cell),
        md(&d.path),
        md(&show_short(d.a.as_ref())),
        md(&show_short(d.b.as_ref()))
    )
}

/// Renders a comparison. Every output ends with a newline.
pub fn render_compare(format: CompareFormat, c: &Comparison) -> String {
    let mut out = match format {
        CompareFormat::Table => compare_text(c),
        CompareFormat::Markdown => compare_markdown(c),
        CompareFormat::Json => serde_json::to_string_pretty(c).expect("comparisons serialise"),
    };
    if !out.ends_with('\n') {
        out.push('\n');
    }
    out
}

/// The table of a run-level environment diff: common differences first, then each cell's own.
pub fn diff_env_table(d: &RunEnvDiff) -> Table {
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED).set_content_arrangement(ContentArrangement::Dynamic);
    t.set_header(vec!["cell", "field", "change", "a", "b"]);
    let mut row = |cell: &str, x: &EnvDiff| {
        t.add_row(vec![
            TCell::new(cell),
            TCell::new(&x.path),
            TCell::new(format!("{:?}", x.kind).to_lowercase()),
            TCell::new(show_short(x.a.as_ref())),
            TCell::new(show_short(x.b.as_ref())),
        ]);
    };
    for x in &d.common {
        row("every cell", x);
    }
    for c in &d.cells {
        for x in &c.specific {
            row(&c.cell, x);
        }
    }
    t
}

fn cells_line(d: &RunEnvDiff) -> String {
    let same = d.cells.iter().filter(|c| c.diffs.is_empty()).count();
    format!("{} cells in both runs, {same} with identical environments (equal env_hash).", d.cells.len())
}

fn identical_cells(d: &RunEnvDiff) -> Vec<&CellEnvDiff> {
    d.cells.iter().filter(|c| c.diffs.is_empty()).collect()
}

/// `benchlab diff-env` for people.
pub fn diff_env_text(d: &RunEnvDiff) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "a: {}\nb: {}", runs_text(&d.runs_a), runs_text(&d.runs_b));
    let _ = writeln!(o, "{}", cells_line(d));
    if d.common.is_empty() && d.cells.iter().all(|c| c.specific.is_empty()) {
        o.push_str("no environment differences\n");
    } else {
        let _ = writeln!(o, "{}", diff_env_table(d));
    }
    for (label, ids) in [("only in a", &d.only_in_a), ("only in b", &d.only_in_b)] {
        if !ids.is_empty() {
            let _ = writeln!(o, "{label}: {}", ids.join(", "));
        }
    }
    o
}

/// `benchlab diff-env` as Markdown.
pub fn diff_env_markdown(d: &RunEnvDiff) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "# benchlab diff-env\n");
    let _ = writeln!(o, "- a: `{}`\n- b: `{}`\n", md(&runs_text(&d.runs_a)), md(&runs_text(&d.runs_b)));
    let _ = writeln!(o, "{}\n", cells_line(d));
    if d.common.is_empty() && d.cells.iter().all(|c| c.specific.is_empty()) {
        o.push_str("No environment differences.\n");
    } else {
        o.push_str("| cell | field | a | b |\n|---|---|---|---|\n");
        for x in &d.common {
            let _ = writeln!(o, "{}", diff_row_md("every cell", x));
        }
        for c in &d.cells {
            for x in &c.specific {
                let _ = writeln!(o, "{}", diff_row_md(&c.cell, x));
            }
        }
    }
    let same = identical_cells(d);
    if !same.is_empty() && same.len() < d.cells.len() {
        let ids = same.iter().map(|c| format!("`{}`", md(&c.cell))).collect::<Vec<_>>().join(", ");
        let _ = writeln!(o, "\nIdentical: {ids}.");
    }
    for (label, ids) in [("Only in a", &d.only_in_a), ("Only in b", &d.only_in_b)] {
        if !ids.is_empty() {
            let ids = ids.iter().map(|i| format!("`{}`", md(i))).collect::<Vec<_>>().join(", ");
            let _ = writeln!(o, "\n{label}: {ids}.");
        }
    }
    o
}

/// Renders a run-level environment diff. Every output ends with a newline.
pub fn render_diff_env(format: CompareFormat, d: &RunEnvDiff) -> String {
    let mut out = match format {
        CompareFormat::Table => diff_env_text(d),
        CompareFormat::Markdown => diff_env_markdown(d),
        CompareFormat::Json => serde_json::to_string_pretty(d).expect("diffs serialise"),
    };
    if !out.ends_with('\n') {
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::tests::sample_record;

    fn iv(lower: f64, upper: f64) -> Interval {
        Interval { estimate: (lower + upper) / 2.0, lower, upper, confidence: 0.95 }
    }

    #[test]
    fn verdicts_need_the_whole_interval_beyond_the_threshold() {
        assert_eq!(Verdict::judge(&iv(1.06, 1.2), 5.0), Verdict::Slower);
        assert_eq!(Verdict::judge(&iv(1.04, 1.2), 5.0), Verdict::Inconclusive);
        assert_eq!(Verdict::judge(&iv(0.97, 1.04), 5.0), Verdict::Unchanged);
        assert_eq!(Verdict::judge(&iv(0.8, 0.95), 5.0), Verdict::Faster);
        assert_eq!(Verdict::judge(&iv(0.8, 0.96), 5.0), Verdict::Inconclusive);
        assert_eq!(Verdict::judge(&iv(0.5, 2.0), 5.0), Verdict::Inconclusive);
        assert_eq!(Verdict::judge(&iv(f64::NAN, 1.0), 5.0), Verdict::Inconclusive);
        assert_eq!(Verdict::Slower.label(Unit::Bytes), "larger");
        // Swapping the runs inverts the interval and swaps the verdict.
        let i = iv(1.051, 1.3);
        let inv = Interval {
            estimate: 1.0 / i.estimate,
            lower: 1.0 / i.upper,
            upper: 1.0 / i.lower,
            confidence: 0.95,
        };
        assert_eq!((Verdict::judge(&i, 5.0), Verdict::judge(&inv, 5.0)), (Verdict::Slower, Verdict::Faster));
    }

    #[test]
    fn mover_combines_independent_intervals_on_the_log_scale() {
        let a = Interval { estimate: 1.0, lower: 0.9, upper: 1.1, confidence: 0.95 };
        let b = Interval { estimate: 2.0, lower: 1.8, upper: 2.2, confidence: 0.95 };
        let r = stats::mover_ratio(&a, &b);
        assert_eq!(r.estimate, 2.0);
        // Narrower than dividing the bounds, wider than either alone.
        assert!(r.lower > 1.8 / 1.1 && r.upper < 2.2 / 0.9, "{r:?}");
        assert!(r.lower < 2.0 * 0.9 / 1.0 * 1.0 && r.upper > 2.0 * 1.1, "{r:?}");
        let flat = Interval { estimate: 3.0, lower: 3.0, upper: 3.0, confidence: 0.95 };
        assert_eq!(
            stats::mover_ratio(&flat, &flat),
            Interval { estimate: 1.0, lower: 1.0, upper: 1.0, confidence: 0.95 }
        );
    }

    #[test]
    fn hashes_are_shortened_for_people() {
        let h = serde_json::json!("0123456789abcdef".repeat(4));
        assert_eq!(show_short(Some(&h)), "0123456789ab…");
        let id = serde_json::json!(format!("sha256:{}", "ab".repeat(32)));
        assert_eq!(show_short(Some(&id)), "sha256:abababababab…");
        assert_eq!(show_short(Some(&serde_json::json!("1"))), "1");
    }

    #[test]
    fn formats_parse_from_their_names() {
        for f in CompareFormat::ALL {
            assert_eq!(f.as_str().parse::<CompareFormat>(), Ok(f));
        }
        assert!("csv".parse::<CompareFormat>().unwrap_err().to_string().contains("markdown"));
    }

    #[test]
    fn failed_and_unmatched_cells_are_listed_not_compared() {
        let a = vec![sample_record("x"), sample_record("gone")];
        let mut failed = sample_record("x");
        failed.status = Status::Failed;
        failed.failure = Some(crate::spec::Failure::new(crate::spec::FailureReason::Crash, "boom"));
        let b = vec![failed, sample_record("new")];
        let c = compare(&a, &b, 5.0);
        assert!(c.cells.is_empty());
        assert_eq!(
            c.failed,
            [FailedCell {
                cell: "x/cold_start".into(),
                status_a: "ok".into(),
                status_b: "failed: crash".into()
            }]
        );
        assert_eq!(
            (c.only_in_a.as_slice(), c.only_in_b.as_slice()),
            (&["gone/cold_start".to_string()][..], &["new/cold_start".to_string()][..])
        );
        assert!(gate(&c, 0.0));
        let text = compare_text(&c);
        assert!(
            text.contains("only in a: gone/cold_start") && text.contains("a: ok, b: failed: crash"),
            "{text}"
        );
    }
}
