//! Two runs side by side: for every cell in both and every metric both measured, the ratio b/a
//! with a 95% confidence interval and a verdict against a threshold, the environment differences
//! that could explain a move, and the CI gate (`--fail-if-slower`). Also the renderers of
//! `benchlab compare` and `benchlab diff-env` (terminal table, Markdown, JSON). Pure: records in,
//! text out; reading the runs is the CLI's.
//!
//! How each ratio's interval is made:
//! - Cold start and first tools/list (repeated trials): the ratio of medians, bootstrapped with
//!   [`stats::ratio_ci`] (the runs' samples are unrelated, each resampled on its own), percentile
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
//! - With two or more ok runs of a cell on each side (repeats, each in fresh containers; A/A
//!   control measurements left out), every metric above uses runs as the unit instead: one value
//!   per run (its median, quantile or reading), and the interval of the ratio by Welch's t on the
//!   logarithms ([`Method::BetweenRuns`]), never narrower than the within-run interval (which
//!   stays beside it: three runs can agree by chance).
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

//!
//! The parts: the types of a comparison are here; `ratios` matches the cells of the two runs and
//! judges each metric (the intervals above, the verdicts, the gate); `render` writes comparisons
//! and environment differences for people.

mod ratios;
mod render;

#[cfg(test)]
mod tests;

use serde::Serialize;

use crate::record::diffenv::EnvDiff;
use crate::stats::Interval;

use super::rows::Unit;

pub use ratios::{compare, gate, gate_failures, hosts_compared};
pub use render::{
    compare_markdown, compare_table, compare_text, diff_env_markdown, diff_env_table, diff_env_text,
    render_compare, render_diff_env, CompareFormat, UnknownCompareFormat,
};
/// The pieces of the comparison's text the results site's compare page shows in HTML.
pub mod text {
    pub use super::render::{
        counts_text, diff_line, hosts_text, ratio_cell, ratio_interval_text, rule_text, value_text,
    };
}

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
    /// Runs as the unit (two or more fresh runs of the cell on each side): one value per run,
    /// Welch's t on the logarithms ([`crate::stats::ratio_between_runs`]); the within-run
    /// interval of the latest records stays beside it.
    BetweenRuns,
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
    /// [`Method::BetweenRuns`]: the within-run interval of the ratio (the latest records'), shown
    /// beside the between-run one, and the runs on each side.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub within: Option<Interval>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runs: Option<(u32, u32)>,
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
    /// The two runs' host speed fingerprints compared; None when a run has none (records from
    /// before fingerprints were taken).
    pub hosts: Option<HostsCompared>,
}

/// Two runs' hosts by their speed fingerprints (each run's first).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HostsCompared {
    pub a: String,
    pub b: String,
    /// `same speed within noise`, or which probes differ and by how much.
    pub line: String,
    /// The hosts' speeds differ beyond noise: b/a mixes the SDK with the machine, and
    /// `--fail-if-slower` refuses to gate on it (unless `--cross-host`).
    pub differs: bool,
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
