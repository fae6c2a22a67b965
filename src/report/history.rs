//! Version history of version-matrix sweeps, the way asv shows a benchmark across commits: records
//! of one server family × runtime × workload at many SDK versions become series (versions in
//! semver-ish order, repeats pooled), each metric a line of medians with 95 % intervals, and the
//! releases where a metric moved beyond noise are named as steps. Pure functions of records; the
//! renderers (table, Markdown, HTML, JSON) call these and draw nothing themselves here.
//!
//! # Step detection
//!
//! Per series and metric, over the versions that have a value, in version order:
//!
//! 1. Work on z = ln(value), so that a step is a relative change whatever the unit.
//! 2. Estimate the noise σ (on the ln scale) as the largest of: [`NOISE_FLOOR`]; the median over
//!    the points of their 95 % interval's relative half-width ((hi − lo) / 2 / value); and the
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
//!    (b) the two points either side of the boundary have disjoint 95 % intervals, in the
//!    direction of the step (a point without an interval, such as an RSS reading, must instead
//!    differ from its neighbour by [`MIN_STEP_CHANGE`] itself). Rule (b) keeps a slow drift from
//!    being cut into a staircase of steps: neighbouring releases of a drift are within noise.
//!
//! A step is a regression when the metric got worse: higher for latencies and memory, lower for
//! throughput.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::record::{Record, Status};
use crate::stats::{self, Interval};

use super::rows::{is_load, status_text, Unit, CONFIDENCE, MIN_CI_SAMPLES, RESAMPLES, SEED};
use super::units::{ms_interval, rate_number, unit_text};

/// A series with at least this many distinct versions is a history.
pub const MIN_VERSIONS: usize = 3;
/// The smallest change of level reported as a step: the larger level at least 10 % above the
/// smaller.
pub const MIN_STEP_CHANGE: f64 = 0.10;
/// The smallest noise assumed, relative (2 %): identical figures must not make every wiggle a step.
pub const NOISE_FLOOR: f64 = 0.02;
/// The cost of one more segment, in units of σ, is this times ln(n + 1).
pub const PENALTY_PER_LN_N: f64 = 3.0;
/// The fewest points in a segment of the fit.
pub const MIN_SEGMENT: usize = 2;

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
    fn of(r: &Record) -> SeriesKey {
        let c = &r.cell;
        SeriesKey {
            family: c.server.family.clone(),
            runtime: c.server.runtime.clone(),
            transport: c.transport.clone(),
            suite: c.suite.clone(),
            workload: c.id.rsplit('/').next().unwrap_or(c.workload.kind()).to_string(),
            kind: c.workload.kind().to_string(),
            tool: c.workload.tool().map(str::to_string),
            server_cpus: c.placement.server_cpus.clone(),
            driver_cpus: c.placement.driver_cpus.clone(),
            shared: c.placement.shared,
            env: c.server.env.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(" "),
        }
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

/// One metric at one version.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Point {
    pub value: f64,
    /// The 95 % interval of `value`, when there were enough samples.
    pub ci: Option<Interval>,
    /// Samples behind the value (spawns, calls, repeats or readings).
    pub n: u64,
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
}

// ---------------------------------------------------------------------------------------------
// Version order.

#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Tok {
    Num(u64),
    Text(String),
}

fn tokens(s: &str) -> Vec<Tok> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut digits = false;
    let flush = |cur: &mut String, digits: bool, out: &mut Vec<Tok>| {
        if !cur.is_empty() {
            out.push(if digits {
                Tok::Num(cur.parse().unwrap_or(u64::MAX))
            } else {
                Tok::Text(cur.to_ascii_lowercase())
            });
            cur.clear();
        }
    };
    for c in s.chars() {
        let is_digit = c.is_ascii_digit();
        if !c.is_ascii_alphanumeric() || is_digit != digits {
            flush(&mut cur, digits, &mut out);
        }
        if c.is_ascii_alphanumeric() {
            digits = is_digit;
            cur.push(c);
        }
    }
    flush(&mut cur, digits, &mut out);
    out
}

/// Splits `v1.10.0-rc.1+build` into the release numbers `[1, 10, 0]`, the tag tokens and whether
/// the tag is a post-release.
fn parse_version(v: &str) -> (Vec<u64>, Vec<Tok>, bool) {
    let v = v.trim();
    let v = v.strip_prefix(['v', 'V']).unwrap_or(v);
    let v = v.split('+').next().unwrap_or(v);
    let mut release = Vec::new();
    let mut rest = v;
    loop {
        let end = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
        if end == 0 {
            break;
        }
        release.push(rest[..end].parse().unwrap_or(u64::MAX));
        rest = &rest[end..];
        match rest.strip_prefix('.') {
            Some(r) if r.starts_with(|c: char| c.is_ascii_digit()) => rest = r,
            _ => break,
        }
    }
    while release.last() == Some(&0) && release.len() > 1 {
        release.pop();
    }
    let tag = tokens(rest);
    let post = matches!(tag.first(), Some(Tok::Text(t)) if t == "post" || t == "r" || t == "rev");
    (release, tag, post)
}

/// Semver-ish order: release numbers numerically (1.9.0 < 1.10.0, 1.2 = 1.2.0), a pre-release tag
/// (`-rc.1`, `rc1`, `b2`, `.dev0`) before its release, a post-release (`.post1`) after it; tags
/// compare token by token, numbers numerically; build metadata (`+...`) and a leading `v` are
/// ignored, and the text itself breaks ties.
pub fn compare_versions(a: &str, b: &str) -> std::cmp::Ordering {
    let (ra, ta, pa) = parse_version(a);
    let (rb, tb, pb) = parse_version(b);
    let rank = |t: &[Tok], post: bool| match (t.is_empty(), post) {
        (true, _) => 1,
        (false, true) => 2,
        (false, false) => 0,
    };
    ra.cmp(&rb)
        .then_with(|| rank(&ta, pa).cmp(&rank(&tb, pb)))
        .then_with(|| {
            // Tokens: numbers before text (semver), numbers numerically; `dev` before
            // `a`/`alpha` before `b`/`beta` before `rc`, as PEP 440 and semver read them; other
            // text by its letters.
            let key = |t: &Tok| match t {
                Tok::Num(n) => (0u8, *n, String::new()),
                Tok::Text(s) => {
                    let order = match s.as_str() {
                        "dev" => 0,
                        "a" | "alpha" => 1,
                        "b" | "beta" => 2,
                        "c" | "pre" | "preview" | "rc" => 3,
                        _ => 4,
                    };
                    (1, order, s.clone())
                }
            };
            let ka: Vec<_> = ta.iter().map(key).collect();
            let kb: Vec<_> = tb.iter().map(key).collect();
            ka.cmp(&kb)
        })
        .then_with(|| a.cmp(b))
}

// ---------------------------------------------------------------------------------------------
// Series and points.

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

fn seed(label: &str, version: &str, metric: HistoryMetric) -> u64 {
    SEED ^ fnv1a(format!("history\0{label}\0{version}\0{}", metric.as_str()).as_bytes())
}

/// Which metrics a workload's series follows: cold start and tools/list from cold_start cells,
/// latency percentiles from serial-calls and load cells, throughput from load cells, RSS from all.
fn metrics_of(kind: &str, load: bool) -> &'static [HistoryMetric] {
    use HistoryMetric::*;
    match (kind, load) {
        ("cold_start", _) => &[ColdStart, ToolsList, RssAfterInitialize],
        (_, true) => &[Throughput, CallP50, CallP99, RssAfterInitialize],
        _ => &[CallP50, CallP99, RssAfterInitialize],
    }
}

fn sample_point(values: Vec<f64>, seed: u64) -> Option<Point> {
    if values.is_empty() {
        return None;
    }
    let n = values.len() as u64;
    let value = stats::median(&mut values.clone());
    let ci = (n >= MIN_CI_SAMPLES).then(|| stats::median_ci(&values, RESAMPLES, CONFIDENCE, seed));
    Some(Point { value, ci: ci.filter(Interval::is_finite), n })
}

fn point(label: &str, version: &str, metric: HistoryMetric, records: &[&Record]) -> Option<Point> {
    let s = seed(label, version, metric);
    match metric {
        HistoryMetric::ColdStart | HistoryMetric::ToolsList => {
            let samples: Vec<f64> = records
                .iter()
                .filter_map(|r| {
                    if metric == HistoryMetric::ColdStart {
                        r.metrics.cold_start.as_ref()
                    } else {
                        r.metrics.tools_list.as_ref()
                    }
                })
                .flat_map(|m| m.samples_ms.iter().copied())
                .filter(|v| v.is_finite())
                .collect();
            sample_point(samples, s)
        }
        HistoryMetric::CallP50 | HistoryMetric::CallP99 => {
            let q = if metric == HistoryMetric::CallP50 { 0.50 } else { 0.99 };
            let hists: Vec<_> = records
                .iter()
                .filter_map(|r| {
                    r.metrics.calls.as_ref().or_else(|| r.metrics.load.as_ref()?.latency.as_ref())
                })
                .collect();
            let mut pooled: Option<hdrhistogram::Histogram<u64>> = None;
            for h in hists.iter().filter_map(|m| stats::decode_histogram(&m.histogram).ok()) {
                match &mut pooled {
                    Some(p) => {
                        let _ = p.add(&h);
                    }
                    None => pooled = Some(h),
                }
            }
            match pooled.filter(|h| !h.is_empty()) {
                Some(h) => {
                    let value = h.value_at_quantile(q) as f64 / 1e6;
                    let ci = (h.len() >= MIN_CI_SAMPLES)
                        .then(|| stats::histogram_quantile_cis(&h, &[q], RESAMPLES, CONFIDENCE, s))
                        .and_then(|v| v.first().copied())
                        .filter(Interval::is_finite);
                    Some(Point { value, ci, n: h.len() })
                }
                // No histogram decodes: the first stored summary, without an interval.
                None => hists.iter().find(|m| m.summary.count > 0).map(|m| Point {
                    value: if q == 0.5 { m.summary.p50_ms } else { m.summary.p99_ms },
                    ci: None,
                    n: m.summary.count,
                }),
            }
        }
        HistoryMetric::Throughput => {
            let v =
                records.iter().filter_map(|r| r.metrics.load.as_ref()).map(|l| l.throughput_rps).collect();
            sample_point(v, s)
        }
        HistoryMetric::RssAfterInitialize => {
            let mut v: Vec<f64> = records
                .iter()
                .filter_map(|r| r.metrics.memory.after_initialize.as_ref())
                .map(|m| m.rss_bytes as f64)
                .collect();
            if v.is_empty() {
                return None;
            }
            let n = v.len() as u64;
            Some(Point { value: stats::median(&mut v), ci: None, n })
        }
    }
}

/// The version histories of the records: one per series with at least [`MIN_VERSIONS`] distinct
/// SDK versions that have an ok record, in order of the series' first record. Only ok records
/// make points; a failed record shows as its version's failure. Repeats of a cell are pooled:
/// their samples and histograms together, or the median of their readings.
pub fn histories(records: &[Record]) -> Vec<History> {
    let mut groups: Vec<(SeriesKey, BTreeMap<String, Vec<&Record>>)> = Vec::new();
    for r in records {
        let key = SeriesKey::of(r);
        let i = match groups.iter().position(|g| g.0 == key) {
            Some(i) => i,
            None => {
                groups.push((key, BTreeMap::new()));
                groups.len() - 1
            }
        };
        groups[i].1.entry(r.cell.server.sdk_version.clone()).or_default().push(r);
    }
    groups
        .into_iter()
        .filter(|g| {
            g.1.values().filter(|rs| rs.iter().any(|r| r.status == Status::Ok)).count() >= MIN_VERSIONS
        })
        .map(|(key, all)| {
            let failures = |v: &str| failure_text(&all[v]);
            let by_version: BTreeMap<String, Vec<&Record>> = all
                .iter()
                .map(|(v, rs)| (v.clone(), rs.iter().copied().filter(|r| r.status == Status::Ok).collect()))
                .collect();
            let mut versions: Vec<String> = by_version.keys().cloned().collect();
            versions.sort_by(|a, b| compare_versions(a, b));
            let label = key.label();
            let load = by_version.values().flatten().any(|r| is_load(r));
            let mut runtime_versions: Vec<String> = Vec::new();
            for v in &versions {
                for r in &by_version[v] {
                    if !runtime_versions.contains(&r.cell.server.runtime_version) {
                        runtime_versions.push(r.cell.server.runtime_version.clone());
                    }
                }
            }
            let apis: Vec<String> = versions
                .iter()
                .map(|v| {
                    let mut a: Vec<&str> = all[v].iter().map(|r| r.cell.server.api.as_str()).collect();
                    a.sort_unstable();
                    a.dedup();
                    a.join("+")
                })
                .collect();
            let failures: Vec<Option<String>> = versions.iter().map(|v| failures(v)).collect();
            let mut metrics = Vec::new();
            for &metric in metrics_of(&key.kind, load) {
                let points: Vec<Option<Point>> =
                    versions.iter().map(|v| point(&label, v, metric, &by_version[v])).collect();
                if points.iter().all(Option::is_none) {
                    continue;
                }
                let segments = fit(&points);
                metrics.push(MetricHistory { metric, unit: metric.unit(), points, segments });
            }
            let mut steps: Vec<Step> = metrics.iter().flat_map(|m| steps_of(m, &versions)).collect();
            steps.sort_by_key(|s| s.index);
            History { key, label, runtime_versions, versions, failures, apis, metrics, steps }
        })
        .collect()
}

/// What failed among one version's records (see [`History::failures`]).
fn failure_text(records: &[&Record]) -> Option<String> {
    let failed: Vec<&&Record> = records.iter().filter(|r| r.status == Status::Failed).collect();
    if failed.is_empty() {
        return None;
    }
    let mut reasons: Vec<String> = Vec::new();
    for r in &failed {
        let text = status_text(r);
        let text = text.strip_prefix("failed: ").unwrap_or(&text).to_string();
        if !reasons.contains(&text) {
            reasons.push(text);
        }
    }
    let reasons = reasons.join(", ");
    Some(if failed.len() == records.len() {
        reasons
    } else {
        format!("{} of {} failed: {reasons}", failed.len(), records.len())
    })
}

// ---------------------------------------------------------------------------------------------
// Step detection (see the module's documentation).

fn median_of(v: &[f64]) -> f64 {
    stats::median(&mut v.to_vec())
}

/// The relative noise of a series on the ln scale (step 2).
fn noise(z: &[f64], cis: &[Option<Interval>]) -> f64 {
    let half: Vec<f64> = cis
        .iter()
        .zip(z)
        .filter_map(|(ci, zk)| ci.map(|i| (i.upper - i.lower) / 2.0 / zk.exp()))
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
fn present(points: &[Option<Point>]) -> Vec<(usize, f64, Option<Interval>)> {
    points
        .iter()
        .enumerate()
        .filter_map(|(i, p)| p.as_ref().map(|p| (i, p.value, p.ci)))
        .filter(|(_, v, _)| v.is_finite() && *v > 0.0)
        .collect()
}

fn fit(points: &[Option<Point>]) -> Vec<Segment> {
    let pts = present(points);
    if pts.is_empty() {
        return Vec::new();
    }
    let z: Vec<f64> = pts.iter().map(|p| p.1.ln()).collect();
    let cis: Vec<Option<Interval>> = pts.iter().map(|p| p.2).collect();
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

/// Whether two neighbouring points are apart beyond noise in the direction of `up` (rule b).
fn apart(a: (f64, Option<Interval>), b: (f64, Option<Interval>), up: bool) -> bool {
    match (a.1, b.1) {
        (Some(x), Some(y)) => {
            if up {
                y.lower > x.upper
            } else {
                y.upper < x.lower
            }
        }
        _ => {
            let (lo, hi) = if up { (a.0, b.0) } else { (b.0, a.0) };
            hi >= lo * (1.0 + MIN_STEP_CHANGE)
        }
    }
}

fn steps_of(m: &MetricHistory, versions: &[String]) -> Vec<Step> {
    let mut out = Vec::new();
    for w in m.segments.windows(2) {
        let (before, after) = (w[0].level, w[1].level);
        let up = after > before;
        let (lo, hi) = if up { (before, after) } else { (after, before) };
        if hi < lo * (1.0 + MIN_STEP_CHANGE) {
            continue;
        }
        let (Some(a), Some(b)) = (&m.points[w[0].last], &m.points[w[1].first]) else { continue };
        if !apart((a.value, a.ci), (b.value, b.ci), up) {
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

// ---------------------------------------------------------------------------------------------
// Text for the renderers.

/// A value in its unit: `612 ms`, `102.3 µs`, `1,234 req/s`, `45.2 MiB`.
pub(super) fn value_text(unit: Unit, v: f64) -> String {
    unit_text(unit, v)
}

/// A point as the tables show it: `612 ms [598–631]`, or the value alone without an interval.
pub(super) fn point_text(unit: Unit, p: &Point) -> String {
    let v = value_text(unit, p.value);
    let Some(ci) = p.ci.filter(Interval::is_finite) else { return v };
    let bounds = match unit {
        Unit::Ms => {
            let t = ms_interval(Some(&Interval { estimate: p.value, ..ci }));
            t.rsplit_once(' ').map_or(t.clone(), |(b, _)| b.to_string())
        }
        Unit::Rps => format!("{}–{}", rate_number(ci.lower), rate_number(ci.upper)),
        _ => return v,
    };
    format!("{v} [{bounds}]")
}

/// `+38 %`, `−12 %`.
pub(super) fn change_text(ratio: f64) -> String {
    let pct = (ratio - 1.0) * 100.0;
    if pct >= 0.0 {
        format!("+{pct:.0} %")
    } else {
        format!("−{:.0} %", -pct)
    }
}

/// `▲` for a step up, `▼` for a step down.
pub(super) fn arrow(step: &Step) -> &'static str {
    if step.ratio >= 1.0 {
        "▲"
    } else {
        "▼"
    }
}

/// `cold start ▲ +38 % at python-mcp 1.9.0 (1.8.1 612 ms → 1.9.0 845 ms; levels 610 ms → 842 ms), regression`,
/// with `; api fastmcp → mcpserver` when the server source's API generation changes there too.
pub fn step_line(h: &History, s: &Step) -> String {
    let unit = s.metric.unit();
    let api = match (h.apis.get(s.from_index), h.apis.get(s.index)) {
        (Some(a), Some(b)) if a != b => format!("; api {a} → {b}"),
        _ => String::new(),
    };
    format!(
        "{} {} {} at {} {} ({} {} → {} {}; levels {} → {}{api}), {}",
        s.metric.label(),
        arrow(s),
        change_text(s.ratio),
        h.key.family,
        s.to_version,
        s.from_version,
        value_text(unit, s.from_value),
        s.to_version,
        value_text(unit, s.to_value),
        value_text(unit, s.before),
        value_text(unit, s.after),
        if s.regression { "regression" } else { "improvement" },
    )
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

/// The step that starts at version `index` for `metric`, if any.
pub(super) fn step_at(h: &History, metric: HistoryMetric, index: usize) -> Option<&Step> {
    h.steps.iter().find(|s| s.metric == metric && s.index == index)
}

/// The note that says how the history figures and steps were made.
pub fn method_note() -> String {
    format!(
        "Versions in semver order; repeats of a cell pooled. Medians (and call percentiles from the pooled \
         histograms) with {:.0}% bootstrap intervals. A step is a boundary of a penalized least-absolute-deviation \
         piecewise-constant fit of ln(value) (segments of at least {MIN_SEGMENT} versions, penalty {PENALTY_PER_LN_N}·ln(n+1) \
         noise units, noise at least {:.0}%), reported only when the levels differ by at least {:.0}% and the two \
         versions either side have disjoint intervals. ▲/▼ marks the first version of a step.",
        CONFIDENCE * 100.0,
        NOISE_FLOOR * 100.0,
        MIN_STEP_CHANGE * 100.0,
    )
}

/// The histories as JSON: `{"method": {...}, "series": [{key, label, runtime_versions, versions,
/// failures, apis,
/// metrics: [{metric, unit, points: [{version, value, lower, upper, n} | null], segments}],
/// steps}]}`.
pub fn history_json(records: &[Record]) -> serde_json::Value {
    let series: Vec<serde_json::Value> = histories(records)
        .iter()
        .map(|h| {
            let metrics: Vec<serde_json::Value> = h
                .metrics
                .iter()
                .map(|m| {
                    let points: Vec<serde_json::Value> = m
                        .points
                        .iter()
                        .zip(&h.versions)
                        .map(|(p, v)| match p {
                            None => serde_json::Value::Null,
                            Some(p) => serde_json::json!({
                                "version": v,
                                "value": p.value,
                                "lower": p.ci.map(|i| i.lower),
                                "upper": p.ci.map(|i| i.upper),
                                "n": p.n,
                            }),
                        })
                        .collect();
                    serde_json::json!({
                        "metric": m.metric,
                        "unit": m.unit,
                        "points": points,
                        "segments": m.segments,
                    })
                })
                .collect();
            serde_json::json!({
                "key": h.key,
                "label": h.label,
                "runtime_versions": h.runtime_versions,
                "versions": h.versions,
                "apis": h.apis,
                "failures": h.failures,
                "metrics": metrics,
                "steps": h.steps,
            })
        })
        .collect();
    serde_json::json!({
        "method": {
            "confidence": CONFIDENCE,
            "resamples": RESAMPLES,
            "min_versions": MIN_VERSIONS,
            "min_step_change": MIN_STEP_CHANGE,
            "noise_floor": NOISE_FLOOR,
            "penalty_per_ln_n": PENALTY_PER_LN_N,
            "min_segment": MIN_SEGMENT,
        },
        "series": series,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::tests::sample_record;
    use crate::spec::Workload;
    use crate::spec::{HistogramMetric, Repeat};

    #[test]
    fn versions_sort_numerically_with_pre_releases_first() {
        let mut v = vec![
            "1.10.0",
            "1.9.0",
            "1.2",
            "1.10.0rc1",
            "1.10.0-beta.2",
            "v1.1.2",
            "1.10.0.post1",
            "1.10.0.dev0",
            "1.10.0-rc.10",
            "1.10.0-rc.9",
            "2.0.0+build.5",
            "1.2.0.1",
        ];
        v.sort_by(|a, b| compare_versions(a, b));
        assert_eq!(
            v,
            [
                "v1.1.2",
                "1.2",
                "1.2.0.1",
                "1.9.0",
                "1.10.0.dev0",
                "1.10.0-beta.2",
                "1.10.0rc1",
                "1.10.0-rc.9",
                "1.10.0-rc.10",
                "1.10.0",
                "1.10.0.post1",
                "2.0.0+build.5",
            ]
        );
        assert_eq!(compare_versions("1.9.0", "1.10.0"), std::cmp::Ordering::Less);
        assert_eq!(compare_versions("1.0.0-alpha.1", "1.0.0-alpha.beta"), std::cmp::Ordering::Less);
        assert_eq!(compare_versions("1.0.0-alpha", "1.0.0-alpha.1"), std::cmp::Ordering::Less);
        assert_eq!(compare_versions("1.2", "1.2.0"), std::cmp::Ordering::Less, "ties broken by the text");
    }

    /// A deterministic jitter in [-1, 1].
    fn jitter(k: usize) -> f64 {
        let h = fnv1a(&(k as u64).to_le_bytes());
        (h % 2001) as f64 / 1000.0 - 1.0
    }

    /// Points with the given values and intervals of ± `rel` around them.
    fn points(values: &[f64], rel: f64) -> Vec<Option<Point>> {
        values
            .iter()
            .map(|&v| {
                Some(Point {
                    value: v,
                    ci: Some(Interval {
                        estimate: v,
                        lower: v * (1.0 - rel),
                        upper: v * (1.0 + rel),
                        confidence: 0.95,
                    }),
                    n: 20,
                })
            })
            .collect()
    }

    fn detect(metric: HistoryMetric, values: &[f64], rel: f64) -> Vec<Step> {
        let points = points(values, rel);
        let versions: Vec<String> = (0..values.len()).map(|i| format!("1.{i}.0")).collect();
        let segments = fit(&points);
        steps_of(&MetricHistory { metric, unit: metric.unit(), points, segments }, &versions)
    }

    #[test]
    fn a_flat_noisy_series_has_no_step() {
        let v: Vec<f64> = (0..60).map(|k| 100.0 * (1.0 + 0.04 * jitter(k))).collect();
        assert_eq!(detect(HistoryMetric::ColdStart, &v, 0.03), []);
        // Tight intervals (a histogram of many calls) over run-to-run noise: still none.
        assert_eq!(detect(HistoryMetric::CallP50, &v, 0.005), []);
    }

    #[test]
    fn one_clear_jump_is_one_step_at_its_version() {
        let v: Vec<f64> =
            (0..30).map(|k| if k < 17 { 600.0 } else { 840.0 } * (1.0 + 0.03 * jitter(k))).collect();
        let steps = detect(HistoryMetric::ColdStart, &v, 0.03);
        assert_eq!(steps.len(), 1, "{steps:?}");
        let s = &steps[0];
        assert_eq!((s.from_version.as_str(), s.to_version.as_str(), s.index), ("1.16.0", "1.17.0", 17));
        assert!(s.regression && (s.ratio - 1.4).abs() < 0.05, "{s:?}");
        // The same jump in throughput is an improvement; a fall is a regression.
        assert!(!detect(HistoryMetric::Throughput, &v, 0.03)[0].regression);
        let fall: Vec<f64> = v.iter().map(|x| 100_000.0 / x).collect();
        let s = &detect(HistoryMetric::Throughput, &fall, 0.03)[0];
        assert!(s.regression && s.ratio < 0.75 && s.index == 17, "{s:?}");
    }

    #[test]
    fn a_short_series_finds_its_step() {
        let steps = detect(HistoryMetric::CallP99, &[100.0, 103.0, 99.0, 150.0, 148.0, 152.0], 0.02);
        assert_eq!(steps.len(), 1, "{steps:?}");
        assert_eq!(steps[0].to_version, "1.3.0");
        assert_eq!(change_text(steps[0].ratio), "+50 %");
    }

    #[test]
    fn two_steps_are_two_steps() {
        let v: Vec<f64> = (0..30)
            .map(|k| match k {
                0..=9 => 100.0,
                10..=19 => 130.0,
                _ => 95.0,
            } * (1.0 + 0.02 * jitter(k)))
            .collect();
        let steps = detect(HistoryMetric::ColdStart, &v, 0.02);
        let at: Vec<(usize, bool)> = steps.iter().map(|s| (s.index, s.regression)).collect();
        assert_eq!(at, [(10, true), (20, false)], "{steps:?}");
    }

    /// Noise drawn from a seeded stream: the sum of three jitters (roughly normal, sd ≈ 1).
    fn noise_at(seed: usize, k: usize) -> f64 {
        (0..3).map(|j| jitter(seed * 1000 + 3 * k + j)).sum()
    }

    #[test]
    fn false_steps_are_rare_and_real_ones_found() {
        // 300 flat series of 30 versions, 3% noise (sd), intervals ±6% (about 2 sd): no step.
        let mut false_steps = 0;
        let mut found = 0;
        for seed in 0..300 {
            let flat: Vec<f64> = (0..30).map(|k| 100.0 * (1.0 + 0.03 * noise_at(seed, k))).collect();
            false_steps += detect(HistoryMetric::ColdStart, &flat, 0.06).len();
            // Intervals from within one run (a histogram of many calls) far narrower than the
            // noise between runs: the noise estimate from neighbours keeps the fit honest.
            false_steps += detect(HistoryMetric::CallP50, &flat, 0.005).len();
            // The same with a 25% step at version 15: found at its version.
            let step: Vec<f64> =
                flat.iter().enumerate().map(|(k, v)| if k < 15 { *v } else { v * 1.25 }).collect();
            let steps = detect(HistoryMetric::ColdStart, &step, 0.06);
            found += usize::from(steps.len() == 1 && steps[0].index == 15);
        }
        assert_eq!(false_steps, 0);
        assert!(found >= 285, "found {found} of 300");
    }

    #[test]
    fn a_slow_drift_is_no_burst_of_steps() {
        // +1.5% per release, doubling over 48 releases, within the intervals of neighbours.
        let v: Vec<f64> =
            (0..48).map(|k| 100.0 * 1.015f64.powi(k as i32) * (1.0 + 0.01 * jitter(k))).collect();
        assert_eq!(detect(HistoryMetric::ColdStart, &v, 0.03), []);
    }

    #[test]
    fn a_single_outlier_is_no_step() {
        let mut v: Vec<f64> = (0..25).map(|k| 100.0 * (1.0 + 0.02 * jitter(k))).collect();
        v[12] = 200.0;
        assert_eq!(detect(HistoryMetric::ColdStart, &v, 0.01), []);
        // Nor at either end.
        v[12] = 100.0;
        v[24] = 200.0;
        assert_eq!(detect(HistoryMetric::ColdStart, &v, 0.01), []);
        v[24] = 100.0;
        v[0] = 30.0;
        assert_eq!(detect(HistoryMetric::ColdStart, &v, 0.01), []);
    }

    #[test]
    fn a_jump_within_overlapping_intervals_is_no_step() {
        let v: Vec<f64> = (0..20).map(|k| if k < 10 { 100.0 } else { 115.0 }).collect();
        assert_eq!(detect(HistoryMetric::ColdStart, &v, 0.2), []);
        assert_eq!(detect(HistoryMetric::ColdStart, &v, 0.02).len(), 1);
        // Under the minimum change, even with tight intervals: none.
        let v: Vec<f64> = (0..20).map(|k| if k < 10 { 100.0 } else { 107.0 }).collect();
        assert_eq!(detect(HistoryMetric::ColdStart, &v, 0.001), []);
    }

    fn record(server: &str, version: &str, workload: &str, cold_ms: f64) -> Record {
        let mut r = sample_record(server);
        r.cell.server.family = "python-mcp".into();
        r.cell.server.sdk_version = version.into();
        r.cell.server.runtime = "cpython-trixie".into();
        r.cell.id = format!("{server}/{workload}");
        r.metrics.cold_start.as_mut().unwrap().samples_ms = (0..8).map(|i| cold_ms + f64::from(i)).collect();
        if workload != "cold_start" {
            r.cell.workload = Workload::SerialCalls { tool: "add".into(), warmup: 0, calls: 100 };
            let mut h = stats::latency_histogram();
            for us in 1..=100u64 {
                h.record(us * 10_000).unwrap();
            }
            r.metrics.calls = Some(HistogramMetric {
                summary: stats::summarize(&h).unwrap(),
                histogram: stats::encode_histogram(&h),
            });
        }
        r
    }

    #[test]
    fn records_become_series_in_version_order_with_repeats_pooled() {
        let mut rs = Vec::new();
        for (v, ms) in [("1.10.0", 300.0), ("1.2.0", 100.0), ("1.9.0", 100.0), ("1.11.0", 300.0)] {
            rs.push(record(&format!("mcp-{v}"), v, "cold_start", ms));
            rs.push(record(&format!("mcp-{v}"), v, "calls", ms));
        }
        // A repeated cell: its samples pooled.
        let mut again = record("mcp-1.9.0", "1.9.0", "cold_start", 100.0);
        again.cell.repeat = Some(Repeat { index: 1, of: 2, fresh_container: true });
        rs.push(again);
        // A failed cell adds no point; a family with two versions is no history.
        let mut failed = record("mcp-1.12.0", "1.12.0", "cold_start", 900.0);
        failed.status = Status::Failed;
        failed.failure = Some(crate::spec::Failure::new(crate::spec::FailureReason::Crash, "gone"));
        rs.push(failed);
        for v in ["0.1", "0.2"] {
            let mut r = record(&format!("ts-{v}"), v, "cold_start", 50.0);
            r.cell.server.family = "ts-sdk".into();
            rs.push(r);
        }
        let hs = histories(&rs);
        assert_eq!(hs.len(), 2, "cold start and calls of python-mcp");
        let cold = &hs[0];
        assert_eq!(cold.versions, ["1.2.0", "1.9.0", "1.10.0", "1.11.0", "1.12.0"]);
        assert_eq!(cold.failures[4].as_deref(), Some("crash"));
        assert!(cold.metrics.iter().all(|m| m.points[4].is_none()), "a failed version has no points");
        assert_eq!(cold.label, "python-mcp on cpython-trixie, stdio, weekly suite, cold_start, cpus 1/0");
        let metrics: Vec<HistoryMetric> = cold.metrics.iter().map(|m| m.metric).collect();
        assert_eq!(metrics, [HistoryMetric::ColdStart, HistoryMetric::RssAfterInitialize]);
        let pts = &cold.metrics[0].points;
        assert_eq!(pts[1].as_ref().unwrap().n, 16, "two repeats of 8 spawns");
        assert!(pts[0].as_ref().unwrap().ci.is_some());
        assert_eq!(cold.steps.len(), 1, "{:?}", cold.steps);
        assert_eq!(
            (cold.steps[0].from_version.as_str(), cold.steps[0].to_version.as_str()),
            ("1.9.0", "1.10.0")
        );
        assert!(!cold.api_changes());
        let mut moved = rs.clone();
        for r in moved.iter_mut().filter(|r| compare_versions(&r.cell.server.sdk_version, "1.10.0").is_ge()) {
            r.cell.server.api = "mcpserver".into();
        }
        let moved = histories(&moved);
        assert!(moved[0].api_changes());
        assert!(step_line(&moved[0], &moved[0].steps[0]).contains("; api builtin → mcpserver), regression"));
        assert!(
            step_line(cold, &cold.steps[0]).starts_with("cold start ▲ +"),
            "{}",
            step_line(cold, &cold.steps[0])
        );
        let calls = &hs[1];
        assert_eq!(calls.key.workload, "calls");
        let metrics: Vec<HistoryMetric> = calls.metrics.iter().map(|m| m.metric).collect();
        assert_eq!(
            metrics,
            [HistoryMetric::CallP50, HistoryMetric::CallP99, HistoryMetric::RssAfterInitialize]
        );
        let p50 = calls.metrics[0].points[0].as_ref().unwrap();
        assert_eq!(p50.n, 100);
        assert!(p50.ci.unwrap().contains(p50.value) && (p50.value - 0.5).abs() < 0.01, "{p50:?}");
        assert!(calls.steps.is_empty(), "identical histograms");
        // The same records give the same histories, and JSON carries them.
        assert_eq!(histories(&rs), hs);
        let j = history_json(&rs);
        assert_eq!(j["series"].as_array().unwrap().len(), 2);
        assert_eq!(j["series"][0]["steps"][0]["to_version"], "1.10.0");
        assert_eq!(j["series"][0]["metrics"][0]["points"][2]["version"], "1.10.0");
        assert!(histories(&rs[..4]).is_empty(), "two versions are no history");
        // Nor two versions and a failed one.
        let mut two = rs[..4].to_vec();
        two.push(rs.iter().find(|r| r.status == Status::Failed).unwrap().clone());
        assert!(histories(&two).is_empty());
    }

    #[test]
    fn a_long_sweep_is_quick_and_drawn() {
        let t = std::time::Instant::now();
        let mut rs = Vec::new();
        for k in 0..150 {
            let v = format!("1.{k}.0");
            let ms = if k < 90 { 600.0 } else { 800.0 } * (1.0 + 0.01 * jitter(k));
            rs.push(record(&format!("mcp-{v}"), &v, "cold_start", ms));
        }
        let hs = histories(&rs);
        assert_eq!(hs[0].versions.len(), 150);
        let steps: Vec<&str> = hs[0].steps.iter().map(|s| s.to_version.as_str()).collect();
        assert_eq!(steps, ["1.90.0"]);
        assert!(t.elapsed().as_secs() < 60, "{:?}", t.elapsed());
        eprintln!("150 versions: {:?}", t.elapsed());
    }

    #[test]
    fn load_cells_follow_throughput_and_a_fall_is_a_regression() {
        let mut rs = Vec::new();
        for (k, v) in ["1.0.0", "1.1.0", "1.2.0", "1.3.0", "1.4.0", "1.5.0"].iter().enumerate() {
            for repeat in 0..3u32 {
                let mut r = sample_record(&format!("ts-{v}"));
                r.cell.server.sdk_version = v.to_string();
                r.cell.id = format!("ts-{v}/concurrency-w10");
                r.cell.transport = "streamable-http".into();
                r.cell.workload = Workload::Concurrency {
                    tool: "add".into(),
                    workers: 10,
                    warmup_ms: 100,
                    duration_ms: 1000,
                    lifecycle: Default::default(),
                };
                r.cell.repeat = Some(Repeat { index: repeat, of: 3, fresh_container: true });
                let rps = if k < 3 { 5000.0 } else { 3000.0 } + 20.0 * f64::from(repeat);
                r.metrics.cold_start = None;
                r.metrics.load = Some(crate::spec::LoadMetrics {
                    mode: "closed".into(),
                    workers: 10,
                    throughput_rps: rps,
                    ..Default::default()
                });
                rs.push(r);
            }
        }
        let hs = histories(&rs);
        assert_eq!(hs.len(), 1);
        let metrics: Vec<HistoryMetric> = hs[0].metrics.iter().map(|m| m.metric).collect();
        assert_eq!(metrics, [HistoryMetric::Throughput, HistoryMetric::RssAfterInitialize]);
        let p = hs[0].metrics[0].points[0].as_ref().unwrap();
        assert_eq!((p.value, p.n), (5020.0, 3), "the median of three repeats");
        assert_eq!(point_text(Unit::Rps, p), "5,020 req/s [5,000–5,040]");
        let s = &hs[0].steps;
        assert_eq!(s.len(), 1, "{s:?}");
        assert!(s[0].regression && s[0].to_version == "1.3.0" && s[0].ratio < 0.7, "{s:?}");
        assert!(step_line(&hs[0], &s[0]).starts_with("throughput ▼ −40 % at benchlab-null 1.3.0"));
    }

    #[test]
    fn points_read_with_their_interval() {
        let p = Point {
            value: 612.3,
            ci: Some(Interval { estimate: 612.3, lower: 598.2, upper: 631.0, confidence: 0.95 }),
            n: 10,
        };
        assert_eq!(point_text(Unit::Ms, &p), "612 ms [598–631]");
        let p = Point {
            value: 0.1023,
            ci: Some(Interval { estimate: 0.1023, lower: 0.1019, upper: 0.1049, confidence: 0.95 }),
            n: 10,
        };
        assert_eq!(point_text(Unit::Ms, &p), "102.3 µs [101.9–104.9]");
        let p = Point { value: 3.0 * 1048576.0, ci: None, n: 1 };
        assert_eq!(point_text(Unit::Bytes, &p), "3.0 MiB");
        assert_eq!(change_text(0.88), "−12 %");
    }
}
