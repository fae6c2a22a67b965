//! Version history of version-matrix sweeps, the way asv shows a benchmark across commits: records
//! of one server family × runtime × workload at many SDK versions become series (versions in
//! semver-ish order), each metric a line of medians with 95 % intervals — between runs when a
//! version ran more than once (runs are the unit; the within-run interval stays beside it) — and
//! the releases where a metric moved beyond noise, and beyond what the A/A controls drifted, are
//! named as steps. Pure functions of records; the
//! renderers (table, Markdown, HTML, JSON) call these and draw nothing themselves here.
//!
//! # Step detection
//!
//! Per series and metric, over the versions that have a value, in version order:
//!
//! 1. Work on z = ln(value), so that a step is a relative change whatever the unit.
//! 2. Estimate the noise σ (on the ln scale) as the largest of: [`NOISE_FLOOR`]; the median over
//!    the points of their 95 % interval's relative half-width ((hi − lo) / 2 / value; for a
//!    between-run interval of k runs scaled by 1.96 / t(k − 1), so that three runs' t = 4.30
//!    does not count as noise twice over what a normal interval would); and the
//!    robust spread of consecutive differences (1.4826 · median |z[k+1] − z[k]| / √2), which sees
//!    the run-to-run noise that an interval from within one run cannot.
//! 3. Fit a piecewise-constant model by penalized least absolute deviation: choose the segment
//!    boundaries minimizing Σ_segments (Σ_k |z_k − median(segment)| / σ + β), with
//!    β = [`PENALTY_PER_LN_N`] · ln(n + 1), by dynamic programming over boundaries (O(n³) at
//!    worst, milliseconds for n ≤ 150). Every segment has at least [`MIN_SEGMENT`] points: one
//!    point cannot tell an outlier from a step, so a single odd release never splits the series
//!    (and a step at the newest release shows once a second release confirms it).
//! 4. A boundary is reported as a step only when (a) the two segments' levels (their medians)
//!    differ by at least [`MIN_STEP_CHANGE`] (the larger at least 10 % above the smaller), and
//!    (b) the two points either side of the boundary differ beyond noise in the direction of the
//!    step: when both ran two or more times, the 95 % interval of their ratio by Welch's t on the
//!    logarithms of their runs ([`crate::stats::ratio_between_runs`]) excludes 1 (two separate
//!    intervals that overlap can still differ: requiring them disjoint tests at far beyond 95 %,
//!    and with three runs a side, t = 4.30 each, no real step of a noisy host passed it);
//!    otherwise their 95 % intervals are disjoint (a point without an interval, such as an RSS
//!    reading, must instead differ from its neighbour by [`MIN_STEP_CHANGE`] itself). Rule (b) keeps a slow drift from
//!    being cut into a staircase of steps: neighbouring releases of a drift are within noise.
//!    And (c), when the run measured A/A controls (a control release again at the start, middle
//!    and end), the levels differ by more than the largest control drift (largest over smallest
//!    of one control's measurements): a step no larger than the host moved is not named.
//!
//! A version's point, with two runs or more, is the median of its runs' values (each run's
//! median, percentile, throughput or reading) with the between-run interval
//! ([`crate::stats::between_runs`], widened to hold the within-run interval if that is wider);
//! with one run, its samples pooled with the within-run
//! bootstrap interval. Control measurements are not part of any point.
//!
//! A step is a regression when the metric got worse: higher for latencies and memory, lower for
//! throughput.

//!
//! The parts: `version` orders versions, `series` groups records into series and makes their
//! points, `steps` fits the levels and finds the steps by the rule above, `leaks` names where a
//! soak's leak appeared (a slope is no level for that fit), `text` writes what the renderers show
//! of them (and the JSON form). The types they share are here.

mod leaks;
mod series;
mod steps;
mod text;
mod version;

#[cfg(test)]
mod aa_tests;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;

use serde::Serialize;

use crate::record::Record;
use crate::stats::Interval;

use super::rows::Unit;

pub use leaks::{soak_lines, LeakChange, SoakPoint};
pub use series::{histories, histories_with, MIN_VERSIONS};
pub use steps::{MIN_SEGMENT, MIN_STEP_CHANGE, NOISE_FLOOR, PENALTY_PER_LN_N};
pub(super) use text::{arrow, change_text, point_text, step_at};
pub use text::{control_lines, control_text, history_json, method_note, step_line};
pub use version::compare_versions;

/// What a history follows across versions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum HistoryMetric {
    /// Median cold start (cold_start workloads), ms.
    ColdStart,
    /// Median first tools/list (cold_start workloads), ms.
    ToolsList,
    /// Median call latency (serial-calls histograms, or load latency for load cells), ms.
    CallP50,
    /// 99th percentile call latency, ms.
    CallP99,
    /// Load cells: correct answers per second (median of repeats).
    Throughput,
    /// RSS after initialize (median of repeats), bytes.
    RssAfterInitialize,
}

impl HistoryMetric {
    pub const ALL: [HistoryMetric; 6] = [
        HistoryMetric::ColdStart,
        HistoryMetric::ToolsList,
        HistoryMetric::CallP50,
        HistoryMetric::CallP99,
        HistoryMetric::Throughput,
        HistoryMetric::RssAfterInitialize,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            HistoryMetric::ColdStart => "cold_start",
            HistoryMetric::ToolsList => "tools_list",
            HistoryMetric::CallP50 => "call_p50",
            HistoryMetric::CallP99 => "call_p99",
            HistoryMetric::Throughput => "throughput",
            HistoryMetric::RssAfterInitialize => "rss_after_initialize",
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            HistoryMetric::ColdStart => "cold start",
            HistoryMetric::ToolsList => "tools/list",
            HistoryMetric::CallP50 => "call p50",
            HistoryMetric::CallP99 => "call p99",
            HistoryMetric::Throughput => "throughput",
            HistoryMetric::RssAfterInitialize => "RSS after init",
        }
    }

    pub fn unit(self) -> Unit {
        match self {
            HistoryMetric::Throughput => Unit::Rps,
            HistoryMetric::RssAfterInitialize => Unit::Bytes,
            _ => Unit::Ms,
        }
    }

    /// Whether a higher value is worse (latency, memory) or better (throughput).
    pub fn higher_is_worse(self) -> bool {
        self != HistoryMetric::Throughput
    }
}

/// What makes records one series: everything but the SDK version (and the server id, which names
/// the version, and the API generation, which changes with it).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct SeriesKey {
    pub family: String,
    /// Runtime name (`cpython-trixie`, `node-22.12.0`, `bun-1.1.38`).
    pub runtime: String,
    pub transport: String,
    pub suite: String,
    /// The workload's name in its cell id (`cold_start`, `calls-1000`) and its kind and tool.
    pub workload: String,
    pub kind: String,
    pub tool: Option<String>,
    /// Placement: server and driver cpusets, and whether they share CPUs.
    pub server_cpus: String,
    pub driver_cpus: String,
    pub shared: bool,
    /// The server's extra environment, `K=V` joined by spaces (empty when none).
    pub env: String,
}

impl SeriesKey {
    /// The series a record belongs to.
    pub fn of(r: &Record) -> SeriesKey {
        let v = SeriesView::of(r);
        SeriesKey {
            family: v.family.to_string(),
            runtime: v.runtime.to_string(),
            transport: v.transport.to_string(),
            suite: v.suite.to_string(),
            workload: v.workload.to_string(),
            kind: v.kind.to_string(),
            tool: v.tool.map(str::to_string),
            server_cpus: v.server_cpus.to_string(),
            driver_cpus: v.driver_cpus.to_string(),
            shared: v.shared,
            env: env_text(v.env),
        }
    }

    /// Whether a record belongs to this series: `SeriesKey::of(r) == *self`, without building
    /// the record's key (a report groups every record of a run by its series).
    pub fn is_of(&self, r: &Record) -> bool {
        let v = SeriesView::of(r);
        self.family == v.family
            && self.runtime == v.runtime
            && self.transport == v.transport
            && self.suite == v.suite
            && self.workload == v.workload
            && self.kind == v.kind
            && self.tool.as_deref() == v.tool
            && self.server_cpus == v.server_cpus
            && self.driver_cpus == v.driver_cpus
            && self.shared == v.shared
            && (if v.env.is_empty() { self.env.is_empty() } else { self.env == env_text(v.env) })
    }

    /// `python-mcp on cpython-trixie, stdio, weekly suite, calls-1000 (add), cpus 1/0` (server/driver,
    /// `shared` when they share CPUs).
    pub fn label(&self) -> String {
        let mut s = format!(
            "{} on {}, {}, {} suite, {}",
            self.family, self.runtime, self.transport, self.suite, self.workload
        );
        if let Some(t) = &self.tool {
            s.push_str(&format!(" ({t})"));
        }
        s.push_str(&format!(", cpus {}/{}", self.server_cpus, self.driver_cpus));
        if self.shared {
            s.push_str(" shared");
        }
        if !self.env.is_empty() {
            s.push_str(&format!(", env {}", self.env));
        }
        s
    }
}

/// A record's series key as borrowed from the record: what [`SeriesKey::of`] copies and
/// [`SeriesKey::is_of`] compares.
struct SeriesView<'a> {
    family: &'a str,
    runtime: &'a str,
    transport: &'a str,
    suite: &'a str,
    workload: &'a str,
    kind: &'a str,
    tool: Option<&'a str>,
    server_cpus: &'a str,
    driver_cpus: &'a str,
    shared: bool,
    env: &'a BTreeMap<String, String>,
}

impl<'a> SeriesView<'a> {
    fn of(r: &'a Record) -> Self {
        let c = &r.cell;
        SeriesView {
            family: &c.server.family,
            runtime: &c.server.runtime,
            transport: c.transport.as_str(),
            suite: &c.suite,
            workload: c.id.rsplit('/').next().unwrap_or(c.workload.kind()),
            kind: c.workload.kind(),
            tool: c.workload.tool(),
            server_cpus: &c.placement.server_cpus,
            driver_cpus: &c.placement.driver_cpus,
            shared: c.placement.shared,
            env: &c.server.env,
        }
    }
}

/// A server's extra environment as a key holds it: `K=V` joined by spaces.
fn env_text(env: &BTreeMap<String, String>) -> String {
    env.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(" ")
}

/// One metric at one version.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Point {
    pub value: f64,
    /// The 95 % interval of `value` the steps are judged by: between runs when `between`, else
    /// within the one run (when there were enough samples).
    pub ci: Option<Interval>,
    /// Samples behind the value (spawns, calls, repeats or readings).
    pub n: u64,
    /// Runs (records) behind the value.
    pub runs: u32,
    /// The within-run interval: the runs' samples or histograms pooled.
    pub within: Option<Interval>,
    /// Whether `value` is the median of the runs' values and `ci` their between-run interval.
    pub between: bool,
    /// How many of the runs the quiet check flagged as measured on a loud host.
    pub noisy: u32,
    /// Each run's value, when `between`: rule (b) compares two neighbours' runs by Welch's t.
    #[serde(skip)]
    pub run_values: Vec<f64>,
}

impl Point {
    /// A point from one run's (or pooled) samples: `ci` is the within-run interval.
    pub fn within_run(value: f64, ci: Option<Interval>, n: u64) -> Point {
        Point { value, ci, n, runs: 1, within: ci, between: false, noisy: 0, run_values: Vec::new() }
    }
}

/// A control release's A/A measurements of one metric across its run, and their spread.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ControlDrift {
    pub version: String,
    /// (where in the run, value), in run order.
    pub values: Vec<(crate::spec::ControlAt, f64)>,
    /// The largest value over the smallest, minus one: how far the host moved one release.
    pub drift: f64,
}

/// One metric across a series' versions.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MetricHistory {
    pub metric: HistoryMetric,
    pub unit: Unit,
    /// One entry per version of the series, `None` where that version did not measure it.
    pub points: Vec<Option<Point>>,
    /// The fitted levels: (index of the first version, index of the last version, level).
    pub segments: Vec<Segment>,
    /// The A/A controls' drift across the run, per control release.
    pub controls: Vec<ControlDrift>,
    /// The largest of the controls' drifts: a step must move more than this.
    pub control_drift: Option<f64>,
}

/// A run of versions at one level in the piecewise-constant fit.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Segment {
    /// Indexes into the series' versions, inclusive.
    pub first: usize,
    pub last: usize,
    /// The median of the segment's values.
    pub level: f64,
}

/// A release where a metric moved beyond noise.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Step {
    pub metric: HistoryMetric,
    /// The last version of the old level and the first of the new one.
    pub from_version: String,
    pub to_version: String,
    /// Indexes of `from_version` and `to_version` in the series' versions.
    pub from_index: usize,
    pub index: usize,
    /// The two versions' own values.
    pub from_value: f64,
    pub to_value: f64,
    /// The segment levels either side, and after / before.
    pub before: f64,
    pub after: f64,
    pub ratio: f64,
    pub regression: bool,
}

/// One series with at least [`MIN_VERSIONS`] versions.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct History {
    pub key: SeriesKey,
    pub label: String,
    /// The runtime versions installed, distinct, in order of first appearance.
    pub runtime_versions: Vec<String>,
    /// In version order.
    pub versions: Vec<String>,
    /// Per version, what failed there: `None` when every record was ok, else the failure
    /// reasons (`crash`, `crash (expected)`), prefixed by `1 of 2 failed: ` when some records were
    /// ok. A version where everything failed has no points.
    pub failures: Vec<Option<String>>,
    /// Per version, the API generation(s) of its server source (`fastmcp`, `mcpserver`), joined
    /// by `+`: a step where this changes may come from the server source, not the SDK.
    pub apis: Vec<String>,
    /// Metrics that have a value at some version, in [`HistoryMetric::ALL`] order.
    pub metrics: Vec<MetricHistory>,
    /// In version order, then metric order.
    pub steps: Vec<Step>,
    /// Soak series: per version, its runs' RSS slopes and leak verdicts (`None` where it ran no
    /// soak; empty for other series), and where a leak appeared or went away (`leaks`).
    pub soak: Vec<Option<SoakPoint>>,
    pub leak_changes: Vec<LeakChange>,
    /// When the series' records come from hosts whose speed fingerprints differ beyond noise:
    /// how (its steps may be the machines').
    pub hosts_differ: Option<String>,
}

impl History {
    /// Whether some version had a failed record (the tables then show a column of them).
    pub fn any_failure(&self) -> bool {
        self.failures.iter().any(Option::is_some)
    }

    /// Whether the server source's API generation changes across the versions (the tables then
    /// show it per version).
    pub fn api_changes(&self) -> bool {
        self.apis.windows(2).any(|w| w[0] != w[1])
    }
}
