//! Records into series: grouping by everything but the SDK version, the versions in order, and
//! one point per version and metric (repeats pooled, with its 95 % interval); what failed at each
//! version. The fit and the steps come from `steps`.

use std::collections::BTreeMap;

use crate::record::{Record, Status};
use crate::stats::{self, Interval};

use super::steps::{fit, steps_of};
use super::version::compare_versions;
use super::{ControlDrift, History, HistoryMetric, MetricHistory, Point, SeriesKey, Step};
use crate::report::rows::{is_load, status_text, CONFIDENCE, MIN_CI_SAMPLES, RESAMPLES, SEED};
use crate::spec::ControlAt;

/// A series with at least this many distinct versions is a history.
pub const MIN_VERSIONS: usize = 3;

pub(super) fn fnv1a(bytes: &[u8]) -> u64 {
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
    let ci = ci.filter(Interval::is_finite);
    Some(Point::within_run(value, ci, n))
}

/// One run's value of a metric: the median of its samples, its histogram's percentile, its
/// throughput or its RSS reading.
pub(super) fn run_value(r: &Record, metric: HistoryMetric) -> Option<f64> {
    let median = |m: Option<&crate::record::SampleMetric>| {
        let v: Vec<f64> = m?.samples_ms.iter().copied().filter(|v| v.is_finite()).collect();
        (!v.is_empty()).then(|| stats::median(&mut v.clone()))
    };
    let v = match metric {
        HistoryMetric::ColdStart => median(r.metrics.cold_start.as_ref()),
        HistoryMetric::ToolsList => median(r.metrics.tools_list.as_ref()),
        HistoryMetric::CallP50 | HistoryMetric::CallP99 => {
            let q = if metric == HistoryMetric::CallP50 { 0.50 } else { 0.99 };
            let m = r.metrics.calls.as_ref().or_else(|| r.metrics.load.as_ref()?.latency.as_ref())?;
            match stats::decode_histogram(&m.histogram).ok().filter(|h| !h.is_empty()) {
                Some(h) => Some(h.value_at_quantile(q) as f64 / 1e6),
                None => (m.summary.count > 0).then_some(if q == 0.5 {
                    m.summary.p50_ms
                } else {
                    m.summary.p99_ms
                }),
            }
        }
        HistoryMetric::Throughput => r.metrics.load.as_ref().map(|l| l.throughput_rps),
        HistoryMetric::RssAfterInitialize => {
            r.metrics.memory.after_initialize.as_ref().map(|m| m.rss_bytes as f64)
        }
    };
    v.filter(|v| v.is_finite())
}

/// One metric at one version. With two runs or more, runs are the unit: the value is the median
/// of the runs' values and the interval the between-run interval ([`stats::between_runs`]); the
/// pooled within-run interval stays beside it. With one run, the pooled figure and its
/// within-run interval (the only interval there is).
fn point(label: &str, version: &str, metric: HistoryMetric, records: &[&Record]) -> Option<Point> {
    let pooled = pooled_point(label, version, metric, records)?;
    let values: Vec<f64> = records.iter().filter_map(|r| run_value(r, metric)).collect();
    let noisy = records.iter().filter(|r| r.on_noisy_host()).count() as u32;
    match stats::between_runs(&values) {
        Some(between) if values.len() >= 2 => Some(Point {
            value: between.estimate,
            ci: Some(stats::hull(between, pooled.within)),
            n: pooled.n,
            runs: values.len() as u32,
            within: pooled.within,
            between: true,
            noisy,
            run_values: values,
        }),
        _ => Some(Point { runs: values.len().max(1) as u32, noisy, ..pooled }),
    }
}

/// The figure of a version's runs pooled: their samples or histograms together, or the median of
/// their readings, with the within-run interval.
fn pooled_point(label: &str, version: &str, metric: HistoryMetric, records: &[&Record]) -> Option<Point> {
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
            let pooled = stats::merge_histograms(hists.iter().map(|m| m.histogram.as_str()));
            let point = Point::within_run;
            match pooled.filter(|h| !h.is_empty()) {
                Some(h) => {
                    let value = h.value_at_quantile(q) as f64 / 1e6;
                    let ci = (h.len() >= MIN_CI_SAMPLES)
                        .then(|| stats::histogram_quantile_cis(&h, &[q], RESAMPLES, CONFIDENCE, s))
                        .and_then(|v| v.first().copied())
                        .filter(Interval::is_finite);
                    Some(point(value, ci, h.len()))
                }
                // No histogram decodes: the first stored summary, without an interval.
                None => hists.iter().find(|m| m.summary.count > 0).map(|m| {
                    point(if q == 0.5 { m.summary.p50_ms } else { m.summary.p99_ms }, None, m.summary.count)
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
            Some(Point::within_run(stats::median(&mut v), None, n))
        }
    }
}

/// The version histories of the records: one per series with at least [`MIN_VERSIONS`] distinct
/// SDK versions that have an ok record, in order of the series' first record. Only ok records
/// make points; a failed record shows as its version's failure. Repeats of a cell are pooled:
/// their samples and histograms together, or the median of their readings.
pub fn histories(records: &[Record]) -> Vec<History> {
    histories_with(records, MIN_VERSIONS)
}

/// [`histories`] of the series with at least `min_versions` versions that have an ok record: the
/// results site draws every series, one release or many (a series with fewer than
/// 2 × [`super::MIN_SEGMENT`] versions names no step).
pub fn histories_with<'a>(
    records: impl IntoIterator<Item = &'a Record>,
    min_versions: usize,
) -> Vec<History> {
    let mut groups: Vec<(SeriesKey, BTreeMap<String, Vec<&Record>>)> = Vec::new();
    let mut controls: BTreeMap<SeriesKey, Vec<&Record>> = BTreeMap::new();
    // The group of the record before, which the next record mostly shares (its key is then
    // not built).
    let mut last: Option<usize> = None;
    for r in records {
        // An A/A control measurement shows the host's drift, not its version's figure.
        if r.schedule.as_ref().is_some_and(|s| s.control.is_some()) {
            controls.entry(SeriesKey::of(r)).or_default().push(r);
            continue;
        }
        let i = match last.filter(|&i| groups[i].0.is_of(r)) {
            Some(i) => i,
            None => {
                let key = SeriesKey::of(r);
                match groups.iter().position(|g| g.0 == key) {
                    Some(i) => i,
                    None => {
                        groups.push((key, BTreeMap::new()));
                        groups.len() - 1
                    }
                }
            }
        };
        last = Some(i);
        let version = &r.cell.server.sdk_version;
        match groups[i].1.get_mut(version) {
            Some(rs) => rs.push(r),
            None => {
                groups[i].1.insert(version.clone(), vec![r]);
            }
        }
    }
    groups
        .into_iter()
        .filter(|g| {
            g.1.values().filter(|rs| rs.iter().any(|r| r.status == Status::Ok)).count() >= min_versions
        })
        .map(|(key, all)| {
            let controls = controls.remove(&key).unwrap_or_default();
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
                let controls = control_drifts(&controls, metric);
                let control_drift = controls.iter().map(|c| c.drift).reduce(f64::max);
                metrics.push(MetricHistory {
                    metric,
                    unit: metric.unit(),
                    points,
                    segments,
                    controls,
                    control_drift,
                });
            }
            let mut steps: Vec<Step> = metrics.iter().flat_map(|m| steps_of(m, &versions)).collect();
            steps.sort_by_key(|s| s.index);
            let hosts_differ = hosts_differ(all.values().flatten().copied());
            let soak: Vec<_> = versions.iter().map(|v| super::leaks::soak_point(&by_version[v])).collect();
            let leak_changes = super::leaks::leak_changes(&versions, &soak);
            History {
                key,
                label,
                runtime_versions,
                versions,
                failures,
                apis,
                metrics,
                steps,
                soak,
                leak_changes,
                hosts_differ,
            }
        })
        .collect()
}

/// Whether the records' host fingerprints differ beyond noise (against the first one): the
/// comparison's line for the first that does.
fn hosts_differ<'a>(records: impl Iterator<Item = &'a Record>) -> Option<String> {
    use crate::host::fingerprint as fp;
    let mut first: Option<&fp::Fingerprint> = None;
    for f in records.filter_map(|r| r.host_check.as_ref()?.fingerprint.as_deref()) {
        match first {
            None => first = Some(f),
            Some(a) => {
                let c = fp::compare(a, f);
                if c.differs {
                    return Some(format!(
                        "records from hosts of different speed ({})",
                        fp::comparison_line(&c)
                    ));
                }
            }
        }
    }
    None
}

/// Per control version, its A/A measurements of `metric` (ok records only) in the order of the
/// run (start, middle, end) and how far apart they are.
fn control_drifts(controls: &[&Record], metric: HistoryMetric) -> Vec<ControlDrift> {
    let mut by_version: BTreeMap<&str, Vec<(ControlAt, f64)>> = BTreeMap::new();
    for r in controls.iter().filter(|r| r.status == Status::Ok) {
        let at = r.schedule.as_ref().and_then(|s| s.control);
        if let (Some(at), Some(v)) = (at, run_value(r, metric).filter(|v| *v > 0.0)) {
            by_version.entry(r.cell.server.sdk_version.as_str()).or_default().push((at, v));
        }
    }
    let mut out: Vec<ControlDrift> = by_version
        .into_iter()
        .filter(|(_, v)| v.len() >= 2)
        .map(|(version, mut values)| {
            values.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.total_cmp(&b.1)));
            let lo = values.iter().map(|v| v.1).fold(f64::INFINITY, f64::min);
            let hi = values.iter().map(|v| v.1).fold(0.0, f64::max);
            ControlDrift { version: version.to_string(), values, drift: hi / lo - 1.0 }
        })
        .collect();
    out.sort_by(|a, b| compare_versions(&a.version, &b.version));
    out
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
