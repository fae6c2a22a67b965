//! What the renderers show of HTTP load cells (concurrency, open_loop, http_api), derived from
//! records once: one row per record (JSON, CSV) and one row per cell with the median across its
//! repeats (tables, Markdown, HTML, Bencher), plus the text forms every renderer shares. Pure:
//! records in, rows out. Stdio cells are not here (see `rows`).

use std::collections::BTreeMap;

use serde::Serialize;

use crate::mcp::transport::ApiStyle;
use crate::record::{Record, Status};
use crate::spec::{Lifecycle, Workload};
use crate::stats;

use super::rows::{is_load, status_text};
use super::units::{cores_text, error_rate_text, rate_number, thousands};

/// One HTTP load cell: one record, or the median of a cell's repeats.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LoadRow {
    pub run_id: String,
    /// The cell id, `<server>/<workload>`.
    pub cell: String,
    pub server: String,
    pub family: String,
    pub sdk_version: String,
    pub runtime: String,
    pub runtime_version: String,
    pub server_cpus: String,
    pub driver_cpus: String,
    /// `streamable-http json/stateless`, `sse`, `http-api`, `http-api gradio`.
    pub transport: String,
    /// `concurrency`, `open_loop`, `http_api`.
    pub workload: String,
    pub tool: String,
    /// `closed` or `open`.
    pub mode: String,
    /// Virtual users (closed loop; open loop: its connections).
    pub workers: u32,
    pub connections: u32,
    /// Concurrency only: `session` or `per_call`.
    pub lifecycle: Option<String>,
    /// Open loop: the target rate, and intended requests that started late or never.
    pub target_rps: Option<f64>,
    pub late: Option<u64>,
    pub dropped: Option<u64>,
    /// The measured window, ms.
    pub window_ms: Option<f64>,
    pub ok: Option<u64>,
    pub failed: Option<u64>,
    /// Correct calls per second of the window.
    pub throughput_rps: Option<f64>,
    /// failed / (ok + failed).
    pub error_rate: Option<f64>,
    /// Failed calls per kind (summed over repeats in a median row).
    pub errors: BTreeMap<String, u64>,
    /// Latency of the correct calls, from the stored histogram (the stored summary when it
    /// does not decode; p99.9 only from the histogram).
    pub p50_ms: Option<f64>,
    pub p90_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    pub p999_ms: Option<f64>,
    pub max_ms: Option<f64>,
    pub sessions: Option<u64>,
    pub reinitializations: Option<u64>,
    /// Kept-alive connections the server dropped and the driver reopened.
    pub reconnects: Option<u64>,
    /// Server process tree CPU during the window, in cores.
    pub server_cpu_cores: Option<f64>,
    /// The driver's own CPU over warm-up and window, in cores (near 1: the client set the pace).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver_cpu_cores: Option<f64>,
    /// The driver's threads, when more than one drove the load (absent: one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver_threads: Option<u32>,
    /// RSS of the server's process tree before, at the peak of and after the load. After: the
    /// level at the end of the idle phase (the median of its last samples) when the cell had
    /// one, else the one reading 500 ms after the load.
    pub rss_idle_bytes: Option<u64>,
    pub rss_peak_bytes: Option<u64>,
    pub rss_after_bytes: Option<u64>,
    /// The range of the samples behind that level (a median row: the widest over its repeats).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rss_after_low_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rss_after_high_bytes: Option<u64>,
    /// The container's cgroup memory peak (includes the shim and page cache).
    pub cgroup_peak_bytes: Option<u64>,
    /// `ok`, `failed: <reason>` (with ` (expected)`); a median row lists failed repeats.
    pub status: String,
    /// The first line of each failure's detail.
    pub failure_detail: Option<String>,
    /// The record's repeat index (per-record rows of a repeated cell).
    pub repeat: Option<u32>,
    /// Records behind the row: 1, or the repeats a median row summarises.
    pub repeats: u32,
}

/// How the cell reached the server: the transport with its reply and session modes.
pub fn transport_label(r: &Record) -> String {
    let t = r.cell.transport.as_str();
    let Some(h) = &r.cell.http else { return t.to_string() };
    match t {
        "http-api" => match h.api_style {
            Some(ApiStyle::Gradio) => "http-api gradio".into(),
            _ => t.to_string(),
        },
        "streamable-http" => match (h.reply, h.session) {
            (Some(rep), Some(s)) => format!("{t} {}/{}", rep.as_str(), s.as_str()),
            (Some(rep), None) => format!("{t} {}", rep.as_str()),
            (None, Some(s)) => format!("{t} {}", s.as_str()),
            (None, None) => t.to_string(),
        },
        _ => t.to_string(),
    }
}

fn status_and_detail(r: &Record) -> (String, Option<String>) {
    let status = status_text(r);
    let detail = match (r.status, &r.failure) {
        (Status::Failed, Some(f)) => f.detail.lines().next().map(str::to_string),
        _ => None,
    };
    (status, detail)
}

/// One row per load record, in record order.
/// Rows grouped by server, then by workload and workers, whatever order the run took (a random
/// order spreads one server's cells over the run); a server's repeats keep their run order.
pub fn load_rows(records: &[Record]) -> Vec<LoadRow> {
    // A row decodes its record's histograms: on every CPU.
    let load: Vec<&Record> = records.iter().filter(|r| is_load(r)).collect();
    let mut rows: Vec<LoadRow> = crate::par::par_map(&load, |r| load_row(r));
    rows.sort_by(|a, b| {
        (&a.run_id, &a.server, &a.transport, &a.workload, &a.lifecycle, &a.tool, a.workers).cmp(&(
            &b.run_id,
            &b.server,
            &b.transport,
            &b.workload,
            &b.lifecycle,
            &b.tool,
            b.workers,
        ))
    });
    rows
}

/// The tool a load calls, or its mix (`get_cart×3 + search_products×1`).
fn tool_text(w: &Workload) -> String {
    match w {
        Workload::Concurrency { mix, .. } if !mix.is_empty() => {
            mix.iter().map(|m| format!("{}×{}", m.tool, m.weight)).collect::<Vec<_>>().join(" + ")
        }
        w => w.tool().unwrap_or("").to_string(),
    }
}

fn load_row(r: &Record) -> LoadRow {
    let s = &r.cell.server;
    let (mut workers, mut connections, mut target_rps, mut lifecycle) = (0, 0, None, None);
    let tool = tool_text(&r.cell.workload);
    match &r.cell.workload {
        Workload::Concurrency { workers: w, lifecycle: l, session_calls, .. } => {
            (workers, connections) = (*w, *w);
            lifecycle = Some(match l {
                Lifecycle::Session => "session".to_string(),
                Lifecycle::PerCall => "per_call".to_string(),
                Lifecycle::Iteration => format!("iteration of {session_calls} calls"),
            });
        }
        Workload::HttpApi { workers: w, .. } => (workers, connections) = (*w, *w),
        Workload::OpenLoop { rate, connections: c, .. } => {
            (workers, connections, target_rps) = (*c, *c, Some(*rate as f64));
        }
        _ => {}
    }
    let (status, failure_detail) = status_and_detail(r);
    let mut row = LoadRow {
        run_id: r.run_id.clone(),
        cell: r.cell.id.clone(),
        server: s.id.clone(),
        family: s.family.clone(),
        sdk_version: s.sdk_version.clone(),
        runtime: s.runtime.clone(),
        runtime_version: s.runtime_version.clone(),
        server_cpus: r.cell.placement.server_cpus.clone(),
        driver_cpus: r.cell.placement.driver_cpus.clone(),
        transport: transport_label(r),
        workload: r.cell.workload.kind().to_string(),
        tool,
        mode: if target_rps.is_some() { "open".into() } else { "closed".into() },
        workers,
        connections,
        lifecycle,
        target_rps,
        late: None,
        dropped: None,
        window_ms: None,
        ok: None,
        failed: None,
        throughput_rps: None,
        error_rate: None,
        errors: BTreeMap::new(),
        p50_ms: None,
        p90_ms: None,
        p99_ms: None,
        p999_ms: None,
        max_ms: None,
        sessions: None,
        reinitializations: None,
        reconnects: None,
        server_cpu_cores: None,
        driver_cpu_cores: None,
        driver_threads: None,
        rss_idle_bytes: None,
        rss_peak_bytes: None,
        rss_after_bytes: None,
        rss_after_low_bytes: None,
        rss_after_high_bytes: None,
        cgroup_peak_bytes: None,
        status,
        failure_detail,
        repeat: r.cell.repeat.map(|p| p.index),
        repeats: 1,
    };
    if let Some(l) = &r.metrics.load {
        row.mode = l.mode.as_str().into();
        if l.workers > 0 {
            row.workers = l.workers;
        }
        if l.connections > 0 {
            row.connections = l.connections;
        }
        row.target_rps = l.target_rps.or(row.target_rps);
        row.late = l.late;
        row.dropped = l.dropped;
        row.window_ms = Some(l.window_ms);
        row.ok = Some(l.ok);
        row.failed = Some(l.failed);
        row.throughput_rps = Some(l.throughput_rps);
        row.error_rate = Some(l.error_rate);
        row.errors = l.errors.clone();
        row.sessions = Some(l.sessions);
        row.reinitializations = Some(l.reinitializations);
        row.reconnects = Some(l.reconnects);
        row.server_cpu_cores = l.server_cpu_cores;
        row.driver_cpu_cores = l.driver_cpu_cores;
        row.driver_threads = l.driver_threads;
        if let Some(lat) = &l.latency {
            let h = stats::decode_histogram(&lat.histogram).ok().filter(|h| !h.is_empty());
            match h {
                Some(h) => {
                    let q = |q: f64| Some(h.value_at_quantile(q) as f64 / 1e6);
                    (row.p50_ms, row.p90_ms, row.p99_ms, row.p999_ms) = (q(0.5), q(0.9), q(0.99), q(0.999));
                    row.max_ms = Some(h.max() as f64 / 1e6);
                }
                None if lat.summary.count > 0 => {
                    let m = &lat.summary;
                    (row.p50_ms, row.p90_ms, row.p99_ms) = (Some(m.p50_ms), Some(m.p90_ms), Some(m.p99_ms));
                    row.max_ms = Some(m.max_ms);
                }
                None => {}
            }
        }
    }
    if let Some(m) = &r.metrics.memory.under_load {
        row.rss_idle_bytes = m.idle_before.as_ref().map(|t| t.rss_bytes);
        row.rss_peak_bytes = m.peak_during.as_ref().map(|t| t.rss_bytes);
        row.rss_after_bytes = m.after.as_ref().map(|t| t.rss_bytes);
        if let Some(l) = &m.after_level {
            row.rss_after_bytes = Some(l.estimate);
            (row.rss_after_low_bytes, row.rss_after_high_bytes) = (Some(l.lower), Some(l.upper));
        }
        row.cgroup_peak_bytes = m.cgroup_peak_bytes;
    }
    row
}

/// The median of the values present (the mean of the middle two for an even count).
fn median_of(values: impl Iterator<Item = Option<f64>>) -> Option<f64> {
    let mut v: Vec<f64> = values.flatten().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        None
    } else {
        Some(stats::median(&mut v))
    }
}

fn median_u64(values: impl Iterator<Item = Option<u64>>) -> Option<u64> {
    median_of(values.map(|v| v.map(|x| x as f64))).map(|x| x.round() as u64)
}

/// One row per load cell (run and cell id), in order of first appearance: a cell measured once
/// is its record's row; a repeated cell shows the median across its repeats of every figure
/// (throughput, percentiles, CPU, memory), the error rate pooled (all failed over all calls) and
/// error kinds, ok, failed, late and dropped summed over the repeats, and `repeats` set to their number. Failed repeats still count with
/// what they measured; the status names them.
pub fn load_summary_rows(records: &[Record]) -> Vec<LoadRow> {
    let mut groups: Vec<Vec<LoadRow>> = Vec::new();
    for row in load_rows(records) {
        match groups.iter_mut().find(|g| g[0].run_id == row.run_id && g[0].cell == row.cell) {
            Some(g) => g.push(row),
            None => groups.push(vec![row]),
        }
    }
    groups.into_iter().map(merge_repeats).collect()
}

fn merge_repeats(mut g: Vec<LoadRow>) -> LoadRow {
    if g.len() == 1 {
        return g.pop().expect("one row");
    }
    let n = g.len();
    let f = |get: fn(&LoadRow) -> Option<f64>| median_of(g.iter().map(get));
    let u = |get: fn(&LoadRow) -> Option<u64>| median_u64(g.iter().map(get));
    let sum = |get: fn(&LoadRow) -> Option<u64>| {
        let v: Vec<u64> = g.iter().filter_map(get).collect();
        (!v.is_empty()).then(|| v.iter().sum())
    };
    let mut errors: BTreeMap<String, u64> = BTreeMap::new();
    for r in &g {
        for (k, v) in &r.errors {
            *errors.entry(k.clone()).or_default() += v;
        }
    }
    let failed: Vec<&LoadRow> = g.iter().filter(|r| r.status != "ok").collect();
    let status = if failed.is_empty() {
        "ok".to_string()
    } else {
        let mut kinds: Vec<&str> = failed.iter().map(|r| r.status.as_str()).collect();
        kinds.dedup();
        format!("{} ({} of {n} repeats)", kinds.join("; "), failed.len())
    };
    let failure_detail = failed.iter().find_map(|r| r.failure_detail.clone());
    let mut out = g[0].clone();
    out.window_ms = f(|r| r.window_ms);
    out.throughput_rps = f(|r| r.throughput_rps);
    // Pooled, so that it agrees with the summed error kinds.
    out.error_rate = match (sum(|r| r.ok), sum(|r| r.failed)) {
        (Some(ok), Some(failed)) if ok + failed > 0 => Some(failed as f64 / (ok + failed) as f64),
        _ => f(|r| r.error_rate),
    };
    out.p50_ms = f(|r| r.p50_ms);
    out.p90_ms = f(|r| r.p90_ms);
    out.p99_ms = f(|r| r.p99_ms);
    out.p999_ms = f(|r| r.p999_ms);
    out.max_ms = f(|r| r.max_ms);
    out.server_cpu_cores = f(|r| r.server_cpu_cores);
    out.driver_cpu_cores = f(|r| r.driver_cpu_cores);
    out.driver_threads = g.iter().filter_map(|r| r.driver_threads).max();
    out.rss_idle_bytes = u(|r| r.rss_idle_bytes);
    out.rss_peak_bytes = u(|r| r.rss_peak_bytes);
    out.rss_after_bytes = u(|r| r.rss_after_bytes);
    out.rss_after_low_bytes = g.iter().filter_map(|r| r.rss_after_low_bytes).min();
    out.rss_after_high_bytes = g.iter().filter_map(|r| r.rss_after_high_bytes).max();
    out.cgroup_peak_bytes = u(|r| r.cgroup_peak_bytes);
    out.ok = sum(|r| r.ok);
    out.failed = sum(|r| r.failed);
    out.late = sum(|r| r.late);
    out.dropped = sum(|r| r.dropped);
    out.sessions = sum(|r| r.sessions);
    out.reinitializations = sum(|r| r.reinitializations);
    out.reconnects = sum(|r| r.reconnects);
    out.errors = errors;
    out.status = status;
    out.failure_detail = failure_detail;
    out.repeat = None;
    out.repeats = n as u32;
    out
}

// ---------------------------------------------------------------------------------------------
// Text every renderer shares.

/// `10`, `10 per-call`, `open 5,000/s` (connections are in their own column).
pub fn workers_text(r: &LoadRow) -> String {
    match (r.mode.as_str(), r.target_rps) {
        ("open", Some(rate)) => format!("open {}/s", rate_number(rate)),
        _ => match r.lifecycle.as_deref() {
            Some("per_call") => format!("{} per-call", r.workers),
            _ => r.workers.to_string(),
        },
    }
}

/// Throughput, with the target for open loop: `9,231`, `4,980 of 5,000`.
pub fn throughput_text(r: &LoadRow) -> String {
    match (r.throughput_rps, r.target_rps) {
        (None, _) => "—".into(),
        (Some(t), Some(target)) => format!("{} of {}", rate_number(t), rate_number(target)),
        (Some(t), None) => rate_number(t),
    }
}

/// `timeout 12, http_status 3`, largest first (ties by name); empty when nothing failed.
pub fn errors_text(errors: &BTreeMap<String, u64>) -> String {
    let mut kinds: Vec<(&String, &u64)> = errors.iter().filter(|(_, n)| **n > 0).collect();
    kinds.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    kinds.iter().map(|(k, n)| format!("{k} {n}")).collect::<Vec<_>>().join(", ")
}

/// The error rate and its kinds: `0 %`, `1.50 % (timeout 12, http_status 3)`; connections the
/// server dropped between requests (reopened, not errors) follow: `0 %; reconnects 812`.
pub fn errors_cell(r: &LoadRow) -> String {
    let kinds = errors_text(&r.errors);
    let mut s = if kinds.is_empty() {
        error_rate_text(r.error_rate)
    } else {
        format!("{} ({kinds})", error_rate_text(r.error_rate))
    };
    if let Some(n) = r.reconnects.filter(|n| *n > 0) {
        s.push_str(&format!("; reconnects {}", thousands(n)));
    }
    s
}

/// Open loop: `late 2, dropped 0`; closed loop: `—`.
pub fn open_loop_text(r: &LoadRow) -> String {
    if r.mode != "open" {
        return "—".into();
    }
    let n = |v: Option<u64>| v.map_or("—".into(), thousands);
    format!("late {}, dropped {}", n(r.late), n(r.dropped))
}

fn mib_number(b: u64) -> String {
    format!("{:.1}", b as f64 / (1024.0 * 1024.0))
}

/// `15.1 → 15.4 → 15.4 MiB` (idle → peak → after), `—` parts where a reading is missing; a
/// level after the load comes with its range: `15.1 → 15.4 → 15.2 [15.1–15.3] MiB`.
pub fn rss_text(r: &LoadRow) -> String {
    if r.rss_idle_bytes.is_none() && r.rss_peak_bytes.is_none() && r.rss_after_bytes.is_none() {
        return "—".into();
    }
    let p = |v: Option<u64>| v.map_or("—".into(), mib_number);
    let mut s = format!("{} → {}", p(r.rss_idle_bytes), p(r.rss_peak_bytes));
    if r.rss_after_bytes.is_some() {
        s.push_str(&format!(" → {}", p(r.rss_after_bytes)));
    }
    if let (Some(lo), Some(hi)) = (r.rss_after_low_bytes, r.rss_after_high_bytes) {
        s.push_str(&format!(" [{}–{}]", mib_number(lo), mib_number(hi)));
    }
    s.push_str(" MiB");
    s
}

/// The status with the repeat count of a median row: `ok`, `ok (median of 3)`.
pub fn status_cell(r: &LoadRow) -> String {
    let mut s = r.status.clone();
    if r.repeats > 1 {
        s = format!("{s} (median of {})", r.repeats);
    }
    if let Some(d) = &r.failure_detail {
        s = format!("{s}: {d}");
    }
    s
}

/// The column headers of the load tables (terminal, Markdown, HTML).
pub const LOAD_HEADER: [&str; 17] = [
    "server",
    "sdk",
    "runtime",
    "transport",
    "tool",
    "workers",
    "window",
    "req/s",
    "p50",
    "p90",
    "p99",
    "p99.9",
    "max",
    "errors",
    "server CPU",
    "RSS idle → peak → after",
    "cgroup peak",
];

/// The note under every load table that says how its figures were made.
pub const LOAD_NOTE: &str = "Load cells (HTTP): req/s counts correct answers per second of the measured window \
     (open loop: achieved of target, with requests that started late or were dropped); latency percentiles \
     of correct calls from the recorded HdrHistogram (open loop: from the intended send time, corrected for \
     coordinated omission); errors are failed / all calls in the window, always shown, with their kinds; server \
     CPU in cores (1.00 = one core busy); RSS of the server's process tree before, at its peak during and after \
     the load (after: with an idle phase, the median of its last 5 s or last fifth [min–max of those \
     samples]; else one reading 500 ms after); cgroup peak includes the shim and page cache. A repeated cell \
     shows the median of its repeats (error rate and kinds pooled over the repeats); JSON and CSV give one row \
     per repeat.";

/// A window in seconds: `2.0 s`.
pub fn window_text(ms: Option<f64>) -> String {
    ms.filter(|x| x.is_finite()).map_or("—".into(), |x| format!("{:.1} s", x / 1000.0))
}

/// The cells of one load row, in `LOAD_HEADER` order (status last, outside the header array).
pub fn load_cells(r: &LoadRow) -> Vec<String> {
    use super::units::{mib, ms};
    let mut workers = workers_text(r);
    if r.mode == "open" {
        workers = format!("{workers} ({} conn)", r.connections);
    }
    vec![
        r.server.clone(),
        super::labels::sdk_label(&r.family, &r.sdk_version),
        format!("{} {}", r.runtime, r.runtime_version),
        r.transport.clone(),
        r.tool.clone(),
        workers,
        window_text(r.window_ms),
        throughput_text(r),
        ms(r.p50_ms),
        ms(r.p90_ms),
        ms(r.p99_ms),
        ms(r.p999_ms),
        ms(r.max_ms),
        {
            let e = errors_cell(r);
            let o = open_loop_text(r);
            if o == "—" {
                e
            } else {
                format!("{e}; {o}")
            }
        },
        match (r.driver_cpu_cores, r.driver_threads) {
            (Some(d), Some(n)) => {
                format!("{} (driver {} on {n} threads)", cores_text(r.server_cpu_cores), cores_text(Some(d)))
            }
            (Some(d), None) => format!("{} (driver {})", cores_text(r.server_cpu_cores), cores_text(Some(d))),
            (None, _) => cores_text(r.server_cpu_cores),
        },
        rss_text(r),
        mib(r.cgroup_peak_bytes),
    ]
}

/// The distinct placements of the rows: `server cpus 1, driver cpus 0`.
pub fn placement_text(rows: &[LoadRow]) -> String {
    let mut seen: Vec<String> = Vec::new();
    for r in rows {
        let p = format!("server cpus {}, driver cpus {}", r.server_cpus, r.driver_cpus);
        if !seen.contains(&p) {
            seen.push(p);
        }
    }
    seen.join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_read_compactly() {
        assert_eq!(error_rate_text(Some(0.0)), "0 %");
        assert_eq!(error_rate_text(Some(0.0001234)), "0.012 %");
        assert_eq!(error_rate_text(Some(0.034)), "3.40 %");
        assert_eq!(error_rate_text(None), "—");
        let e: BTreeMap<String, u64> =
            [("http_status".to_string(), 3), ("timeout".to_string(), 12), ("connect".to_string(), 0)].into();
        assert_eq!(errors_text(&e), "timeout 12, http_status 3");
        assert_eq!(rate_number(14384.5), "14,385");
        assert_eq!(rate_number(933.0), "933.0");
        assert_eq!(rate_number(2.5), "2.50");
        assert_eq!(median_of([Some(3.0), None, Some(1.0), Some(2.0)].into_iter()), Some(2.0));
        assert_eq!(median_of([None].into_iter()), None);
    }
}
