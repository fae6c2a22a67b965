//! The results site's model: every run's records grouped into the history's series, split first
//! by host class so that figures from different machines never share a line; per version, the
//! records behind a point (run, seq, hash, lock); and every pair of releases compared as
//! `benchlab compare` judges a ratio. Pure: runs in, values out.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::record::Record;
use crate::report::history::{self, Point, SeriesKey};
use crate::report::{History, DEFAULT_THRESHOLD_PCT};
use crate::stats::{self, Interval};

use super::RunInput;

/// The machine a record ran on, as far as figures are comparable: CPU model, logical CPUs,
/// memory, cgroup version and engine kind. Kernel builds and engine versions are left out (they
/// change with every fresh VM of one kind here) and shown per record instead.
pub fn host_class(r: &Record) -> String {
    let h = &r.environment.host;
    let gib = (h.memory_bytes as f64 / 1_073_741_824.0).round();
    format!(
        "{} × {} CPUs, {gib} GiB, cgroup v{}, {}",
        h.cpu_model, h.logical_cpus, h.cgroup_version, r.environment.engine.kind
    )
}

/// A history page: one family × runtime × transport.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct PageKey {
    pub family: String,
    pub runtime: String,
    pub transport: String,
}

impl PageKey {
    fn of(k: &SeriesKey) -> PageKey {
        PageKey { family: k.family.clone(), runtime: k.runtime.clone(), transport: k.transport.clone() }
    }

    /// The page's path inside the site.
    pub fn path(&self) -> String {
        format!("history/{}.html", slug(&format!("{}--{}--{}", self.family, self.runtime, self.transport)))
    }

    pub fn title(&self) -> String {
        format!("{} on {}, {}", self.family, self.runtime, self.transport)
    }
}

/// A file name from any text: letters, digits, `.`, `-` and `_` kept, anything else `_`.
pub fn slug(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') { c } else { '_' })
        .collect()
}

/// One record behind a point, as a reader follows it back.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RecRef {
    /// The run folder (its run id) and scenario: the run page is `runs/<scenario>/<run>.html`.
    pub run: String,
    pub scenario: String,
    /// The run's page, from the site's root.
    pub page: String,
    pub seq: u64,
    /// The record's hash and the image's input hash (recipe, lockfile, base, build args): the
    /// first 12 hex digits.
    pub hash: String,
    pub lock: String,
    pub runtime_version: String,
    pub kernel: String,
    pub recorded_at: String,
    pub status: String,
    /// An A/A control measurement (not part of the point).
    pub control: bool,
}

/// One series of the site: a history of one host class.
pub struct Series {
    pub page: PageKey,
    pub host: String,
    pub history: History,
    /// Per version (the history's order), the records behind it.
    pub refs: Vec<Vec<RecRef>>,
    /// The newest record's time: what "newest" means for steps.
    pub newest: String,
}

fn short(h: &str) -> String {
    h.chars().take(12).collect()
}

fn rec_ref(r: &Record, run: &RunInput) -> RecRef {
    RecRef {
        run: run.id.clone(),
        scenario: run.scenario.clone(),
        page: super::pages::run_path(&run.scenario, &run.id),
        seq: r.seq,
        hash: short(&r.hash),
        lock: short(&r.environment.image.input_hash),
        runtime_version: r.cell.server.runtime_version.clone(),
        kernel: r.environment.host.kernel.clone(),
        recorded_at: r.recorded_at.clone(),
        status: crate::report::status_text(r),
        control: r.schedule.as_ref().is_some_and(|s| s.control.is_some()),
    }
}

/// Every series of every run: records partitioned by host class, each partition's histories at
/// one version or more, in page order (family, runtime, transport), then by label and host.
pub fn series(runs: &[RunInput]) -> Vec<Series> {
    let mut parts: BTreeMap<String, Vec<(&Record, &RunInput)>> = BTreeMap::new();
    for run in runs {
        for r in &run.records {
            parts.entry(host_class(r)).or_default().push((r, run));
        }
    }
    let parts: Vec<(String, Vec<(&Record, &RunInput)>)> = parts.into_iter().collect();
    let mut out = Vec::new();
    let built = super::par_map(&parts, |(_, part)| history::histories_with(part.iter().map(|(r, _)| *r), 1));
    for ((host, part), histories) in parts.iter().zip(built) {
        let keys: Vec<SeriesKey> = part.iter().map(|(r, _)| SeriesKey::of(r)).collect();
        for h in histories {
            let mut refs = vec![Vec::new(); h.versions.len()];
            let mut newest = String::new();
            for (i, (r, run)) in part.iter().enumerate() {
                if keys[i] != h.key {
                    continue;
                }
                if let Some(v) = h.versions.iter().position(|v| *v == r.cell.server.sdk_version) {
                    refs[v].push(rec_ref(r, run));
                    newest = newest.max(r.recorded_at.clone());
                }
            }
            out.push(Series { page: PageKey::of(&h.key), host: host.clone(), history: h, refs, newest });
        }
    }
    out.sort_by(|a, b| (&a.page, &a.history.label, &a.host).cmp(&(&b.page, &b.history.label, &b.host)));
    out
}

/// The series by history page, in page order (`series` is sorted by page).
pub fn pages(series: &[Series]) -> Vec<(PageKey, Vec<&Series>)> {
    let mut out: Vec<(PageKey, Vec<&Series>)> = Vec::new();
    for s in series {
        match out.last_mut() {
            Some((k, v)) if *k == s.page => v.push(s),
            _ => out.push((s.page.clone(), vec![s])),
        }
    }
    out
}

/// The 95 % interval of b / a for two releases' points, as `benchlab compare` makes a ratio's:
/// with two or more runs on each side, Welch's t on the runs' logarithms, never narrower than
/// the within-run interval; otherwise MOVER from the two points' intervals; two single readings
/// (RSS) give a zero-width ratio. None when one side has an interval and the other none.
pub fn pair_interval(a: &Point, b: &Point) -> Option<Interval> {
    if a.value <= 0.0 || b.value <= 0.0 || !a.value.is_finite() || !b.value.is_finite() {
        return None;
    }
    let positive = |i: &Interval| i.lower > 0.0 && i.upper.is_finite();
    let within = match (a.within.or(a.ci), b.within.or(b.ci)) {
        (Some(x), Some(y)) if positive(&x) && positive(&y) => Some(stats::mover_ratio(&x, &y)),
        _ => None,
    };
    if a.run_values.len() >= 2 && b.run_values.len() >= 2 {
        if let Some(i) = stats::ratio_between_runs(&a.run_values, &b.run_values) {
            return Some(stats::hull(i, within));
        }
    }
    match (within, a.ci, b.ci) {
        (Some(w), _, _) => Some(w),
        (None, None, None) => {
            let r = b.value / a.value;
            Some(Interval { estimate: r, lower: r, upper: r, confidence: 0.95 })
        }
        _ => None,
    }
}

/// Four significant digits: what a ratio's bound needs on a page.
fn sig4(v: f64) -> f64 {
    if v == 0.0 || !v.is_finite() {
        return v;
    }
    let p = 10f64.powi(3 - v.abs().log10().floor() as i32);
    (v * p).round() / p
}

/// A point as the page's script reads it.
#[derive(Serialize)]
struct PointJson {
    v: f64,
    lo: Option<f64>,
    hi: Option<f64>,
    n: u64,
    runs: u32,
    between: bool,
    noisy: u32,
}

#[derive(Serialize)]
struct StepJson {
    from: usize,
    to: usize,
    ratio: f64,
    regression: bool,
    text: String,
}

#[derive(Serialize)]
struct MetricJson {
    metric: &'static str,
    label: &'static str,
    unit: &'static str,
    higher_is_worse: bool,
    points: Vec<Option<PointJson>>,
    segments: Vec<(usize, usize, f64)>,
    steps: Vec<StepJson>,
    /// For every pair i < j of versions with both points: [i, j, lower, upper] of b / a.
    cmp: Vec<(usize, usize, f64, f64)>,
}

/// One series as the history page's script reads it.
#[derive(Serialize)]
pub struct SeriesJson<'a> {
    label: &'a str,
    workload: &'a str,
    host: &'a str,
    notes: Vec<String>,
    versions: &'a [String],
    failures: &'a [Option<String>],
    refs: &'a [Vec<RecRef>],
    metrics: Vec<MetricJson>,
}

fn metric_json(h: &History, m: &history::MetricHistory) -> MetricJson {
    let points = m
        .points
        .iter()
        .map(|p| {
            p.as_ref().map(|p| PointJson {
                v: p.value,
                lo: p.ci.map(|c| c.lower).filter(|v| v.is_finite()),
                hi: p.ci.map(|c| c.upper).filter(|v| v.is_finite()),
                n: p.n,
                runs: p.runs,
                between: p.between,
                noisy: p.noisy,
            })
        })
        .collect();
    let mut cmp = Vec::new();
    for (i, a) in m.points.iter().enumerate() {
        for (j, b) in m.points.iter().enumerate().skip(i + 1) {
            if let (Some(a), Some(b)) = (a, b) {
                if let Some(r) = pair_interval(a, b) {
                    cmp.push((i, j, sig4(r.lower), sig4(r.upper)));
                }
            }
        }
    }
    let steps = h
        .steps
        .iter()
        .filter(|s| s.metric == m.metric)
        .map(|s| StepJson {
            from: s.from_index,
            to: s.index,
            ratio: s.ratio,
            regression: s.regression,
            text: history::step_line(h, s),
        })
        .collect();
    MetricJson {
        metric: m.metric.as_str(),
        label: m.metric.label(),
        unit: m.unit.as_str(),
        higher_is_worse: m.metric.higher_is_worse(),
        points,
        segments: m.segments.iter().map(|s| (s.first, s.last, s.level)).collect(),
        steps,
        cmp,
    }
}

pub fn series_json(s: &Series) -> SeriesJson<'_> {
    let h = &s.history;
    let mut notes = Vec::new();
    if h.runtime_versions.len() > 1 {
        notes.push(format!("runtime versions: {}", h.runtime_versions.join(", ")));
    }
    if h.api_changes() {
        // Each generation once, at the first release that has it.
        let mut apis: Vec<String> = Vec::new();
        let mut last = None;
        for (v, api) in h.versions.iter().zip(&h.apis) {
            if last != Some(api) {
                apis.push(format!("from {v}: {api}"));
                last = Some(api);
            }
        }
        notes.push(format!("the server source's API generation changes: {}", apis.join("; ")));
    }
    notes.extend(history::control_lines(h));
    SeriesJson {
        label: &h.label,
        workload: &h.key.workload,
        host: &s.host,
        notes,
        versions: &h.versions,
        failures: &h.failures,
        refs: &s.refs,
        metrics: h.metrics.iter().map(|m| metric_json(h, m)).collect(),
    }
}

/// The threshold the pages judge release ratios by, as `benchlab compare`'s default.
pub const THRESHOLD_PCT: f64 = DEFAULT_THRESHOLD_PCT;

#[cfg(test)]
mod tests {
    use super::*;

    fn point(v: f64, lo: f64, hi: f64) -> Point {
        Point::within_run(v, Some(Interval { estimate: v, lower: lo, upper: hi, confidence: 0.95 }), 100)
    }

    #[test]
    fn a_pair_with_intervals_gets_movers_ratio_and_single_readings_a_zero_width_one() {
        let r = pair_interval(&point(10.0, 9.0, 11.0), &point(20.0, 18.0, 22.0)).unwrap();
        assert!((r.estimate - 2.0).abs() < 1e-12);
        assert!(r.lower < 2.0 && r.upper > 2.0 && r.lower > 1.5 && r.upper < 2.6);
        let one = |v| Point::within_run(v, None, 1);
        let r = pair_interval(&one(100.0), &one(110.0)).unwrap();
        assert_eq!((r.lower, r.upper), (1.1, 1.1));
        assert!(pair_interval(&one(100.0), &point(20.0, 18.0, 22.0)).is_none());
    }

    #[test]
    fn runs_on_both_sides_use_welch_and_keep_the_within_interval() {
        let mut a = point(10.0, 9.9, 10.1);
        let mut b = point(12.0, 11.9, 12.1);
        a.run_values = vec![9.0, 10.0, 11.0];
        b.run_values = vec![11.0, 12.0, 13.0];
        let r = pair_interval(&a, &b).unwrap();
        let w = stats::mover_ratio(&a.ci.unwrap(), &b.ci.unwrap());
        assert!(r.lower <= w.lower && r.upper >= w.upper);
        assert!(r.upper - r.lower > w.upper - w.lower);
    }

    #[test]
    fn slugs_keep_only_file_name_characters() {
        assert_eq!(slug("ts-sdk--node-22.12.0--stdio"), "ts-sdk--node-22.12.0--stdio");
        assert_eq!(slug("a/b c"), "a_b_c");
    }
}
