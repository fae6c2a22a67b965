//! Pure renderers of records: the summary rows (one per server, workloads merged), as a
//! comfy-table for terminals and as JSON for machines. Nothing here runs or reads files.

use comfy_table::{presets::UTF8_FULL_CONDENSED, Cell as TCell, CellAlignment, ContentArrangement, Table};
use serde::Serialize;

use crate::record::{Record, Status};

/// One server's figures across its cells.
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
    pub cold_start_p50_ms: Option<f64>,
    pub cold_start_n: Option<u64>,
    pub tools_list_p50_ms: Option<f64>,
    pub call_p50_ms: Option<f64>,
    pub call_p95_ms: Option<f64>,
    pub call_p99_ms: Option<f64>,
    pub calls: Option<u64>,
    pub rss_after_initialize_bytes: Option<u64>,
    pub rss_end_bytes: Option<u64>,
    /// `ok`, or the failed cells with their reasons.
    pub status: String,
}

/// Merges records into one row per server, in the order servers first appear.
pub fn summary_rows(records: &[Record]) -> Vec<SummaryRow> {
    let mut rows: Vec<SummaryRow> = Vec::new();
    for r in records {
        let s = &r.cell.server;
        let idx = match rows.iter().position(|row| row.server == s.id) {
            Some(i) => i,
            None => {
                rows.push(SummaryRow {
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
                    tools_list_p50_ms: None,
                    call_p50_ms: None,
                    call_p95_ms: None,
                    call_p99_ms: None,
                    calls: None,
                    rss_after_initialize_bytes: None,
                    rss_end_bytes: None,
                    status: "ok".into(),
                });
                rows.len() - 1
            }
        };
        let row = &mut rows[idx];
        let m = &r.metrics;
        let kind = r.cell.workload.kind();
        // Cold start and tools/list come from the cold_start workload when there is one.
        if kind == "cold_start" || row.cold_start_p50_ms.is_none() {
            if let Some(c) = &m.cold_start {
                row.cold_start_p50_ms = Some(c.summary.p50_ms);
                row.cold_start_n = Some(c.summary.count);
            }
            if let Some(t) = &m.tools_list {
                row.tools_list_p50_ms = Some(t.summary.p50_ms);
            }
        }
        if let Some(c) = &m.calls {
            row.call_p50_ms = Some(c.summary.p50_ms);
            row.call_p95_ms = Some(c.summary.p95_ms);
            row.call_p99_ms = Some(c.summary.p99_ms);
            row.calls = Some(c.summary.count);
        }
        if kind == "serial_calls" || row.rss_after_initialize_bytes.is_none() {
            if let Some(mem) = &m.memory.after_initialize {
                row.rss_after_initialize_bytes = Some(mem.rss_bytes);
            }
            if let Some(mem) = &m.memory.end {
                row.rss_end_bytes = Some(mem.rss_bytes);
            }
        }
        if r.status == Status::Failed {
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
    rows
}

fn ms(v: Option<f64>) -> String {
    match v {
        None => "—".into(),
        Some(x) if x < 1.0 => format!("{:.1} µs", x * 1000.0),
        Some(x) if x < 100.0 => format!("{x:.2} ms"),
        Some(x) => format!("{x:.0} ms"),
    }
}

fn mib(v: Option<u64>) -> String {
    v.map_or("—".into(), |b| format!("{:.1} MiB", b as f64 / (1024.0 * 1024.0)))
}

/// The terminal table.
pub fn summary_table(rows: &[SummaryRow]) -> Table {
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED).set_content_arrangement(ContentArrangement::Dynamic);
    t.set_header(vec![
        "server",
        "sdk",
        "runtime",
        "cpus s/d",
        "cold start p50",
        "tools/list p50",
        "call p50",
        "call p95",
        "call p99",
        "RSS after init",
        "LOC",
        "status",
    ]);
    for r in rows {
        let cold = match (r.cold_start_p50_ms, r.cold_start_n) {
            (Some(v), Some(n)) => format!("{} (n={n})", ms(Some(v))),
            _ => "—".into(),
        };
        t.add_row(vec![
            TCell::new(&r.server),
            TCell::new(format!("{} {}", r.family, r.sdk_version)),
            TCell::new(format!("{} {}", r.runtime, r.runtime_version)),
            TCell::new(format!("{}/{}", r.server_cpus, r.driver_cpus)),
            TCell::new(cold).set_alignment(CellAlignment::Right),
            TCell::new(ms(r.tools_list_p50_ms)).set_alignment(CellAlignment::Right),
            TCell::new(ms(r.call_p50_ms)).set_alignment(CellAlignment::Right),
            TCell::new(ms(r.call_p95_ms)).set_alignment(CellAlignment::Right),
            TCell::new(ms(r.call_p99_ms)).set_alignment(CellAlignment::Right),
            TCell::new(mib(r.rss_after_initialize_bytes)).set_alignment(CellAlignment::Right),
            TCell::new(r.source_loc.map_or("—".into(), |n| n.to_string()))
                .set_alignment(CellAlignment::Right),
            TCell::new(&r.status),
        ]);
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_in_the_right_unit() {
        assert_eq!(ms(Some(0.0421)), "42.1 µs");
        assert_eq!(ms(Some(1.234)), "1.23 ms");
        assert_eq!(ms(Some(861.4)), "861 ms");
        assert_eq!(ms(None), "—");
        assert_eq!(mib(Some(3 * 1024 * 1024)), "3.0 MiB");
    }
}
