//! What the renderers show, derived from records once: the summary rows (one per server,
//! workloads merged) and the metric rows (one per cell and metric, with medians, bootstrap
//! confidence intervals, percentiles and the noise flag), and what every renderer asks of a
//! record (its status text, whether it is a load cell). Pure: records in, rows out.

use serde::Serialize;

use super::units::ms;
use crate::record::{Record, Status};
use crate::stats::{self, Interval};

/// One server's figures across its cells: each the median over the records that measured it (a
/// cell's repeats, and the server's other cells of that workload), never the last record's.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SummaryRow {
    pub server: String,
    pub family: String,
    pub sdk_version: String,
    pub runtime: String,
    pub runtime_version: String,
    /// Lines of code of the server source (non-blank, non-comment).
    pub source_loc: Option<u32>,
    pub server_cpus: String,
    pub driver_cpus: String,
    /// The median over records of each record's cold-start p50.
    pub cold_start_p50_ms: Option<f64>,
    /// Cold-start samples over all those records.
    pub cold_start_n: Option<u64>,
    /// How many records (runs) the cold-start median is over.
    pub cold_start_runs: u64,
    /// The between-run 95 % interval of the cold-start p50 (two runs or more).
    pub cold_start_p50_ci_ms: Option<Interval>,
    pub tools_list_p50_ms: Option<f64>,
    pub call_p50_ms: Option<f64>,
    pub call_p95_ms: Option<f64>,
    pub call_p99_ms: Option<f64>,
    /// Calls over all the records with calls.
    pub calls: Option<u64>,
    /// How many records (runs) the call medians are over.
    pub call_runs: u64,
    /// The between-run 95 % interval of the call p50 (two runs or more).
    pub call_p50_ci_ms: Option<Interval>,
    pub rss_after_initialize_bytes: Option<u64>,
    pub rss_end_bytes: Option<u64>,
    /// `ok`, or the failed cells with their reasons.
    pub status: String,
}

/// One server's readings, one per record, before the medians.
#[derive(Default)]
struct Readings {
    /// Whether `cold`/`tools` come from a cold_start workload (preferred over the cold start
    /// other workloads measure on the way).
    cold_from_cold_workload: bool,
    cold: Vec<f64>,
    cold_n: u64,
    tools: Vec<f64>,
    p50: Vec<f64>,
    p95: Vec<f64>,
    p99: Vec<f64>,
    calls: u64,
    rss_from_serial: bool,
    rss_init: Vec<f64>,
    rss_end: Vec<f64>,
}

impl Readings {
    fn add(&mut self, r: &Record) {
        let m = &r.metrics;
        let kind = r.cell.workload.kind();
        if kind == "cold_start" && !self.cold_from_cold_workload {
            // The first cold_start record: what other workloads measured on the way is dropped.
            (self.cold, self.cold_n, self.tools) = (Vec::new(), 0, Vec::new());
            self.cold_from_cold_workload = true;
        }
        if kind == "cold_start" || !self.cold_from_cold_workload {
            if let Some(c) = &m.cold_start {
                self.cold.push(c.summary.p50_ms);
                self.cold_n += c.summary.count;
            }
            if let Some(t) = &m.tools_list {
                self.tools.push(t.summary.p50_ms);
            }
        }
        if let Some(c) = &m.calls {
            self.p50.push(c.summary.p50_ms);
            self.p95.push(c.summary.p95_ms);
            self.p99.push(c.summary.p99_ms);
            self.calls += c.summary.count;
        }
        if kind == "serial_calls" && !self.rss_from_serial {
            (self.rss_init, self.rss_end) = (Vec::new(), Vec::new());
            self.rss_from_serial = true;
        }
        if kind == "serial_calls" || !self.rss_from_serial {
            if let Some(mem) = &m.memory.after_initialize {
                self.rss_init.push(mem.rss_bytes as f64);
            }
            if let Some(mem) = &m.memory.end {
                self.rss_end.push(mem.rss_bytes as f64);
            }
        }
    }

    fn fill(self, row: &mut SummaryRow) {
        let med = |v: &[f64]| (!v.is_empty()).then(|| stats::median(&mut v.to_vec()));
        row.cold_start_p50_ms = med(&self.cold);
        row.cold_start_n = (!self.cold.is_empty()).then_some(self.cold_n);
        row.cold_start_runs = self.cold.len() as u64;
        row.cold_start_p50_ci_ms = stats::between_runs(&self.cold);
        row.tools_list_p50_ms = med(&self.tools);
        row.call_p50_ms = med(&self.p50);
        row.call_p95_ms = med(&self.p95);
        row.call_p99_ms = med(&self.p99);
        row.calls = (!self.p50.is_empty()).then_some(self.calls);
        row.call_runs = self.p50.len() as u64;
        row.call_p50_ci_ms = stats::between_runs(&self.p50);
        row.rss_after_initialize_bytes = med(&self.rss_init).map(|b| b.round() as u64);
        row.rss_end_bytes = med(&self.rss_end).map(|b| b.round() as u64);
    }
}

/// Merges stdio records into one row per server, in the order servers first appear: every
/// figure the median over the records that measured it, with the between-run interval of the
/// cold start and call p50. HTTP load cells have their own rows (`load::load_summary_rows`).
pub fn summary_rows(records: &[Record]) -> Vec<SummaryRow> {
    let mut rows: Vec<(SummaryRow, Readings)> = Vec::new();
    for r in records.iter().filter(|r| !is_load(r)) {
        let s = &r.cell.server;
        let idx = match rows.iter().position(|(row, _)| row.server == s.id) {
            Some(i) => i,
            None => {
                let row = SummaryRow {
                    server: s.id.clone(),
                    family: s.family.clone(),
                    sdk_version: s.sdk_version.clone(),
                    runtime: s.runtime.clone(),
                    runtime_version: s.runtime_version.clone(),
                    source_loc: s.source.as_ref().map(|src| src.loc),
                    server_cpus: r.cell.placement.server_cpus.clone(),
                    driver_cpus: r.cell.placement.driver_cpus.clone(),
                    cold_start_p50_ms: None,
                    cold_start_n: None,
                    cold_start_runs: 0,
                    cold_start_p50_ci_ms: None,
                    tools_list_p50_ms: None,
                    call_p50_ms: None,
                    call_p95_ms: None,
                    call_p99_ms: None,
                    calls: None,
                    call_runs: 0,
                    call_p50_ci_ms: None,
                    rss_after_initialize_bytes: None,
                    rss_end_bytes: None,
                    status: "ok".into(),
                };
                rows.push((row, Readings::default()));
                rows.len() - 1
            }
        };
        let (row, readings) = &mut rows[idx];
        readings.add(r);
        if r.status == Status::Failed {
            let kind = r.cell.workload.kind();
            let reason = r.failure.as_ref().map_or("failed", |f| f.reason.as_str());
            let workload = r.cell.id.rsplit('/').next().unwrap_or(kind);
            let note = if r.as_expected() {
                format!("{workload}: {reason} (expected)")
            } else {
                format!("{workload}: {reason}")
            };
            row.status = if row.status == "ok" { note } else { format!("{}; {note}", row.status) };
        }
    }
    rows.into_iter()
        .map(|(mut row, readings)| {
            readings.fill(&mut row);
            row
        })
        .collect()
}

/// A summary row's cold start as the reports show it: the median over runs, its between-run
/// interval when there are two runs or more, the samples and runs it is over.
pub fn cold_start_text(r: &SummaryRow) -> String {
    let (Some(v), Some(n)) = (r.cold_start_p50_ms, r.cold_start_n) else {
        return "—".into();
    };
    match (&r.cold_start_p50_ci_ms, r.cold_start_runs) {
        (Some(i), runs) => {
            format!("{} [{}–{}] (n={n}, {runs} runs)", ms(Some(v)), ms(Some(i.lower)), ms(Some(i.upper)))
        }
        (None, _) => format!("{} (n={n})", ms(Some(v))),
    }
}

/// A summary row's call p50: the median over runs, with its between-run interval when there are
/// two runs or more.
pub fn call_p50_text(r: &SummaryRow) -> String {
    match (r.call_p50_ms, &r.call_p50_ci_ms) {
        (Some(v), Some(i)) => format!("{} [{}–{}]", ms(Some(v)), ms(Some(i.lower)), ms(Some(i.upper))),
        (v, _) => ms(v),
    }
}

/// The confidence of every interval in the reports.
pub const CONFIDENCE: f64 = 0.95;
/// Bootstrap resamples per interval: enough that the bounds move by well under their width
/// from one seed to another.
pub const RESAMPLES: usize = 10_000;
/// Below this many samples a metric gets no interval: a bootstrap of one or two values only
/// repeats them, which would read as certainty.
pub const MIN_CI_SAMPLES: u64 = 3;
/// The base seed of the reports' bootstraps; each metric's seed mixes in its cell and name, so
/// an interval does not depend on which other cells are in the report.
pub const SEED: u64 = 0x6265_6e63_686c_6162; // "benchlab"

/// What a metric row measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    /// Spawn request to initialize result, per spawn (ms).
    ColdStart,
    /// The first tools/list after initialize, per spawn (ms).
    ToolsList,
    /// One tools/call of a serial-calls workload (ms, from the histogram).
    Calls,
    /// RSS of the server's process tree right after initialize (bytes, one reading).
    RssAfterInitialize,
    /// RSS of the server's process tree at the end of the workload (bytes, one reading).
    RssEnd,
    /// HTTP load: correct answers per second of the measured window (one reading).
    Throughput,
    /// HTTP load: latency of one correct call (ms, from the histogram).
    LoadLatency,
    /// HTTP load: failed / all calls in the window (one reading).
    ErrorRate,
    /// HTTP load: the server's CPU during the window, in cores (one reading).
    ServerCpu,
    /// HTTP load: the largest RSS of the server's process tree during the load (one reading).
    RssPeakUnderLoad,
}

impl Metric {
    pub const ALL: [Metric; 10] = [
        Metric::ColdStart,
        Metric::ToolsList,
        Metric::Calls,
        Metric::RssAfterInitialize,
        Metric::RssEnd,
        Metric::Throughput,
        Metric::LoadLatency,
        Metric::ErrorRate,
        Metric::ServerCpu,
        Metric::RssPeakUnderLoad,
    ];

    /// The machine name (CSV, JSON).
    pub fn as_str(self) -> &'static str {
        match self {
            Metric::ColdStart => "cold_start",
            Metric::ToolsList => "tools_list",
            Metric::Calls => "call",
            Metric::RssAfterInitialize => "rss_after_initialize",
            Metric::RssEnd => "rss_end",
            Metric::Throughput => "throughput",
            Metric::LoadLatency => "load_latency",
            Metric::ErrorRate => "error_rate",
            Metric::ServerCpu => "server_cpu",
            Metric::RssPeakUnderLoad => "rss_peak_under_load",
        }
    }

    /// The name people read.
    pub fn label(self) -> &'static str {
        match self {
            Metric::ColdStart => "cold start",
            Metric::ToolsList => "first tools/list",
            Metric::Calls => "tools/call",
            Metric::RssAfterInitialize => "RSS after initialize",
            Metric::RssEnd => "RSS at end",
            Metric::Throughput => "throughput",
            Metric::LoadLatency => "latency under load",
            Metric::ErrorRate => "error rate",
            Metric::ServerCpu => "server CPU",
            Metric::RssPeakUnderLoad => "RSS peak under load",
        }
    }

    pub fn unit(self) -> Unit {
        match self {
            Metric::ColdStart | Metric::ToolsList | Metric::Calls | Metric::LoadLatency => Unit::Ms,
            Metric::RssAfterInitialize | Metric::RssEnd | Metric::RssPeakUnderLoad => Unit::Bytes,
            Metric::Throughput => Unit::Rps,
            Metric::ErrorRate => Unit::Ratio,
            Metric::ServerCpu => Unit::Cores,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Unit {
    Ms,
    Bytes,
    /// Requests per second.
    Rps,
    /// A fraction (0.012 = 1.2%).
    Ratio,
    /// CPU cores busy (1.0 = one core).
    Cores,
}

impl Unit {
    pub fn as_str(self) -> &'static str {
        match self {
            Unit::Ms => "ms",
            Unit::Bytes => "bytes",
            Unit::Rps => "rps",
            Unit::Ratio => "ratio",
            Unit::Cores => "cores",
        }
    }
}

/// One metric of one cell.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MetricRow {
    pub run_id: String,
    /// The cell id, `<server>/<workload>`.
    pub cell: String,
    pub server: String,
    /// The workload kind (`cold_start`, `serial_calls`).
    pub workload: String,
    /// `ok`, or `failed: <reason>` with ` (expected)` when the scenario expected it.
    pub status: String,
    pub metric: Metric,
    pub unit: Unit,
    /// Samples behind the figures (1 for a memory reading).
    pub n: u64,
    /// The median of the samples, or the reading itself.
    pub median: f64,
    /// Bootstrap interval of the median, from `n >= MIN_CI_SAMPLES` samples.
    pub median_ci: Option<Interval>,
    pub p95: Option<f64>,
    pub p95_ci: Option<Interval>,
    pub p99: Option<f64>,
    pub p99_ci: Option<Interval>,
    /// p99.9 and the maximum, from a histogram (calls and load latency).
    pub p999: Option<f64>,
    pub max: Option<f64>,
    pub mean: Option<f64>,
    /// Coefficient of variation of the samples (stdev / mean).
    pub cv: Option<f64>,
    /// `cv` above `stats::NOISY_CV`, for repeated trials (cold starts, first tools/list). Calls
    /// are never flagged: their CV is the shape of one run's latency distribution, not noise.
    pub noisy: bool,
    /// The record's repeat index, for a repeated cell.
    pub repeat: Option<u32>,
}

/// FNV-1a: a stable hash to derive per-metric seeds (std's hasher may change between releases).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

fn seed(cell: &str, metric: Metric) -> u64 {
    SEED ^ fnv1a(format!("{cell}\0{}", metric.as_str()).as_bytes())
}

/// Whether a record is an HTTP load cell (by its workload, so a load cell that failed before
/// measuring still counts).
pub fn is_load(r: &Record) -> bool {
    r.cell.workload.is_load() || r.metrics.load.is_some()
}

/// The status column of a record: `ok`, `ok (noisy host)`, `failed: crash`, `failed: crash (expected)`.
pub fn status_text(r: &Record) -> String {
    let noisy = r.host_check.as_ref().and_then(|h| h.quiet.as_ref()).is_some_and(|q| q.noisy);
    match (r.status, &r.failure) {
        // A cell measured on a loud host is flagged wherever its status shows (its reasons are in
        // `host_check.quiet`).
        (Status::Ok, _) if noisy => "ok (noisy host)".into(),
        (Status::Ok, _) => "ok".into(),
        (Status::Failed, f) => {
            let reason = f.as_ref().map_or("failed", |f| f.reason.as_str());
            if r.as_expected() {
                format!("failed: {reason} (expected)")
            } else {
                format!("failed: {reason}")
            }
        }
    }
}

/// One row per cell and metric it measured, in record order and `Metric::ALL` order. Failed
/// cells contribute what they measured before failing.
pub fn metric_rows(records: &[Record]) -> Vec<MetricRow> {
    let mut out = Vec::new();
    for r in records {
        for metric in Metric::ALL {
            if let Some(row) = metric_row(r, metric) {
                out.push(row);
            }
        }
    }
    out
}

fn metric_row(r: &Record, metric: Metric) -> Option<MetricRow> {
    let m = &r.metrics;
    let cell = r.cell.id.as_str();
    let base = |n: u64, median: f64| MetricRow {
        run_id: r.run_id.clone(),
        cell: cell.to_string(),
        server: r.cell.server.id.clone(),
        workload: r.cell.workload.kind().to_string(),
        status: status_text(r),
        metric,
        unit: metric.unit(),
        n,
        median,
        median_ci: None,
        p95: None,
        p95_ci: None,
        p99: None,
        p99_ci: None,
        p999: None,
        max: None,
        mean: None,
        cv: None,
        noisy: false,
        repeat: r.cell.repeat.map(|p| p.index),
    };
    let samples = match metric {
        Metric::ColdStart => m.cold_start.as_ref(),
        Metric::ToolsList => m.tools_list.as_ref(),
        _ => None,
    };
    match metric {
        Metric::ColdStart | Metric::ToolsList => {
            let s = samples?;
            if s.samples_ms.is_empty() {
                return None;
            }
            let n = s.samples_ms.len() as u64;
            let mut row = base(n, stats::median(&mut s.samples_ms.clone()));
            if n >= MIN_CI_SAMPLES {
                row.median_ci =
                    Some(stats::median_ci(&s.samples_ms, RESAMPLES, CONFIDENCE, seed(cell, metric)));
            }
            row.p95 = Some(s.summary.p95_ms);
            row.p99 = Some(s.summary.p99_ms);
            row.mean = stats::mean(&s.samples_ms);
            row.cv = stats::coefficient_of_variation(&s.samples_ms);
            row.noisy = stats::is_noisy(row.cv);
            Some(row)
        }
        Metric::Calls | Metric::LoadLatency => {
            let c = if metric == Metric::Calls {
                m.calls.as_ref()?
            } else {
                m.load.as_ref()?.latency.as_ref()?
            };
            if metric == Metric::LoadLatency && c.summary.count == 0 {
                return None;
            }
            // A histogram that does not decode still has its stored summary.
            let h = stats::decode_histogram(&c.histogram).ok().filter(|h| !h.is_empty());
            let mut row = base(c.summary.count, c.summary.p50_ms);
            row.p95 = Some(c.summary.p95_ms);
            row.p99 = Some(c.summary.p99_ms);
            row.mean = Some(c.summary.mean_ms);
            if let Some(h) = h {
                if h.len() >= MIN_CI_SAMPLES {
                    let cis = stats::histogram_quantile_cis(
                        &h,
                        &[0.50, 0.95, 0.99],
                        RESAMPLES,
                        CONFIDENCE,
                        seed(cell, metric),
                    );
                    row.median_ci = cis.first().copied();
                    row.p95_ci = cis.get(1).copied();
                    row.p99_ci = cis.get(2).copied();
                }
                row.p999 = Some(h.value_at_quantile(0.999) as f64 / 1e6);
                row.max = Some(h.max() as f64 / 1e6);
                // The CV of single calls describes their latency distribution (a long tail is the
                // norm), not how repeatable the measurement is: shown, never flagged.
                row.cv = stats::histogram_cv(&h);
            }
            Some(row)
        }
        Metric::RssAfterInitialize => m.memory.after_initialize.as_ref().map(|t| base(1, t.rss_bytes as f64)),
        Metric::RssEnd => m.memory.end.as_ref().map(|t| base(1, t.rss_bytes as f64)),
        Metric::Throughput => m.load.as_ref().map(|l| base(l.ok, l.throughput_rps)),
        Metric::ErrorRate => m.load.as_ref().map(|l| base(l.ok + l.failed, l.error_rate)),
        Metric::ServerCpu => m.load.as_ref()?.server_cpu_cores.map(|c| base(1, c)),
        Metric::RssPeakUnderLoad => {
            m.memory.under_load.as_ref()?.peak_during.as_ref().map(|t| base(1, t.rss_bytes as f64))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::tests::sample_record;
    use crate::spec::{Failure, FailureReason, HistogramMetric};
    use crate::spec::{Warmup, Workload};

    fn serial_calls(id: &str) -> Record {
        let mut r = sample_record(id);
        r.cell.id = format!("{id}/serial_calls");
        r.cell.workload = Workload::SerialCalls { tool: "add".into(), warmup: Warmup::Fixed(0), calls: 1000 };
        let mut h = stats::latency_histogram();
        for us in 1..=1000u64 {
            h.record(us * 1000).unwrap();
        }
        r.metrics.calls = Some(HistogramMetric {
            summary: stats::summarize(&h).unwrap(),
            histogram: stats::encode_histogram(&h),
            warmup: None,
        });
        r
    }

    #[test]
    fn metric_rows_carry_intervals_percentiles_and_noise() {
        let rows = metric_rows(&[sample_record("a"), serial_calls("b")]);
        let kinds: Vec<(&str, Metric)> = rows.iter().map(|r| (r.cell.as_str(), r.metric)).collect();
        assert_eq!(
            kinds,
            [
                ("a/cold_start", Metric::ColdStart),
                ("a/cold_start", Metric::RssAfterInitialize),
                ("b/serial_calls", Metric::ColdStart),
                ("b/serial_calls", Metric::Calls),
                ("b/serial_calls", Metric::RssAfterInitialize),
            ]
        );
        let cold = &rows[0];
        assert_eq!((cold.n, cold.median), (3, 0.30000000000000004));
        let ci = cold.median_ci.expect("3 samples get an interval");
        assert!(ci.lower <= cold.median && cold.median <= ci.upper);
        assert!(cold.noisy, "0.1, 0.3, 0.7 spread far more than 10%");
        let calls = &rows[3];
        assert_eq!(calls.n, 1000);
        assert!(calls.median_ci.unwrap().contains(0.5) && calls.p99_ci.is_some());
        assert!(calls.cv.unwrap() > 0.5 && !calls.noisy, "calls are not flagged");
        assert_eq!((rows[1].unit, rows[1].median, rows[1].median_ci), (Unit::Bytes, 4096.0, None));
    }

    #[test]
    fn a_metric_row_does_not_depend_on_the_other_cells() {
        let alone = metric_rows(&[serial_calls("b")]);
        let with_others = metric_rows(&[sample_record("a"), serial_calls("b")]);
        assert_eq!(alone[..], with_others[2..]);
    }

    #[test]
    fn few_samples_get_no_interval_and_failures_their_reason() {
        let mut r = sample_record("a");
        r.metrics.cold_start.as_mut().unwrap().samples_ms.truncate(2);
        r.status = Status::Failed;
        r.failure = Some(Failure::new(FailureReason::Crash, "gone"));
        let rows = metric_rows(&[r]);
        assert_eq!(rows[0].median_ci, None);
        assert_eq!(rows[0].status, "failed: crash");
        let summary = summary_rows(&[serial_calls("b")]);
        assert_eq!(summary[0].call_p50_ms, Some(0.500223));
    }

    #[test]
    fn the_summary_is_the_median_of_the_repeats_with_its_interval_never_the_last() {
        // Issue 47: the floor's three repeats, the last at 1.52 ms; the summary says 1.464.
        let repeats: Vec<Record> = [1.40, 1.464, 1.52]
            .iter()
            .map(|p50| {
                let mut r = sample_record("floor");
                r.metrics.cold_start.as_mut().unwrap().summary.p50_ms = *p50;
                r
            })
            .collect();
        let rows = summary_rows(&repeats);
        assert_eq!(rows.len(), 1);
        let row = &rows[0];
        assert_eq!((row.cold_start_p50_ms, row.cold_start_runs), (Some(1.464), 3));
        let n = repeats[0].metrics.cold_start.as_ref().unwrap().summary.count;
        assert_eq!(row.cold_start_n, Some(3 * n));
        let ci = row.cold_start_p50_ci_ms.expect("three runs get a between-run interval");
        assert!(ci.lower <= 1.40 && 1.52 <= ci.upper, "{ci:?}");
        let text = cold_start_text(row);
        assert!(text.starts_with("1.46 ms [") && text.ends_with("3 runs)"), "{text}");
        // One run: no interval, and the figure is that run's.
        let one = summary_rows(&repeats[2..]);
        assert_eq!((one[0].cold_start_p50_ms, one[0].cold_start_p50_ci_ms), (Some(1.52), None));
        assert!(!cold_start_text(&one[0]).contains('['));
    }
}
