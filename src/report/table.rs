//! The terminal tables (comfy-table): the stdio summary rows, the HTTP load cells in a table of
//! their own, and the version histories of version-matrix sweeps (a table per series).

use comfy_table::{presets::UTF8_FULL_CONDENSED, Cell as TCell, CellAlignment, ContentArrangement, Table};

use crate::record::Record;

use super::history::{self, histories, point_text, step_at, step_line};
use super::load::{load_cells, load_summary_rows, placement_text, status_cell, LoadRow, LOAD_HEADER};
use super::rows::{summary_rows, SummaryRow};
use super::units::{mib, ms};

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
        let cold = super::rows::cold_start_text(r);
        t.add_row(vec![
            TCell::new(&r.server),
            TCell::new(super::labels::sdk_label(&r.family, &r.sdk_version)),
            TCell::new(format!("{} {}", r.runtime, r.runtime_version)),
            TCell::new(format!("{}/{}", r.server_cpus, r.driver_cpus)),
            TCell::new(cold).set_alignment(CellAlignment::Right),
            TCell::new(ms(r.tools_list_p50_ms)).set_alignment(CellAlignment::Right),
            TCell::new(super::rows::call_p50_text(r)).set_alignment(CellAlignment::Right),
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

/// The load cells' terminal table: one row per cell, a repeated cell as the median of its
/// repeats (the status says of how many).
pub fn load_table(rows: &[LoadRow]) -> Table {
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED).set_content_arrangement(ContentArrangement::Dynamic);
    let mut header: Vec<&str> = LOAD_HEADER.to_vec();
    header.push("status");
    t.set_header(header);
    for r in rows {
        let mut cells: Vec<TCell> = load_cells(r)
            .into_iter()
            .enumerate()
            .map(|(i, c)| {
                let cell = TCell::new(c);
                // Figures right-aligned: workers onwards, except the errors and RSS texts.
                if (5..=12).contains(&i) || i == 14 || i == 16 {
                    cell.set_alignment(CellAlignment::Right)
                } else {
                    cell
                }
            })
            .collect();
        cells.push(TCell::new(status_cell(r)));
        t.add_row(cells);
    }
    t
}

/// Everything `benchlab report --format table` prints: the stdio summary when there are stdio
/// cells, the load table when there are load cells (an empty summary table when there is
/// neither).
pub fn tables(records: &[Record]) -> String {
    let summary = summary_rows(records);
    let load = load_summary_rows(records);
    let mut out = String::new();
    if !summary.is_empty() || load.is_empty() {
        out.push_str(&summary_table(&summary).to_string());
        out.push('\n');
    }
    if !load.is_empty() {
        if !summary.is_empty() {
            out.push('\n');
        }
        out.push_str(&format!("HTTP load ({})\n", placement_text(&load)));
        out.push_str(&load_table(&load).to_string());
        out.push('\n');
        for l in super::timeseries::soak_lines(records) {
            out.push_str(&l);
            out.push('\n');
        }
    }
    for l in super::steps::step_lines(records).into_iter().chain(super::services::service_lines(records)) {
        out.push_str(&l);
        out.push('\n');
    }
    let claims = super::labels::claims(records);
    if !claims.is_empty() {
        out.push_str(&format!("\n{}: {}\n", super::labels::CLAIMS_HEADING, super::labels::CLAIMS_NOTE));
        for c in &claims {
            out.push_str(&format!("  {}: {}\n", c.server, super::labels::claim_line(c)));
        }
    }
    // Only flagged cells: a run where nothing hid prints nothing more.
    if let Some(flagged) = super::hidden::lines(records).filter(|l| !l.is_empty()) {
        out.push_str("\nMemory outside the server's process tree (the RSS above is the tree's):\n");
        for (id, text) in flagged {
            out.push_str(&format!("  {id}: {text}\n"));
        }
    }
    if let Some(h) = history_table(records) {
        out.push('\n');
        out.push_str(&h);
    }
    out
}

/// The version histories as text: per series with at least [`history::MIN_VERSIONS`] versions, a
/// title line, a table of versions × metrics (value [95 % interval], `▲`/`▼` where a step starts)
/// and one line per step. `None` when no series is a history.
pub fn history_table(records: &[Record]) -> Option<String> {
    let hs = histories(records);
    if hs.is_empty() {
        return None;
    }
    let mut out = String::new();
    for (i, h) in hs.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        out.push_str(&format!(
            "History: {} ({} versions, runtime {})\n",
            h.label,
            h.versions.len(),
            h.runtime_versions.join(", ")
        ));
        let mut t = Table::new();
        t.load_preset(UTF8_FULL_CONDENSED).set_content_arrangement(ContentArrangement::Dynamic);
        let mut header = vec![format!("{} version", h.key.family)];
        if h.api_changes() {
            header.push("api".into());
        }
        header.extend(h.metrics.iter().map(|m| m.metric.label().to_string()));
        if h.any_failure() {
            header.push("failed".into());
        }
        t.set_header(header);
        for (vi, v) in h.versions.iter().enumerate() {
            let mut row = vec![TCell::new(v)];
            if h.api_changes() {
                row.push(TCell::new(&h.apis[vi]));
            }
            for m in &h.metrics {
                let text = match &m.points[vi] {
                    None => "—".to_string(),
                    Some(p) => match step_at(h, m.metric, vi) {
                        Some(s) => format!("{} {}", history::arrow(s), point_text(m.unit, p)),
                        None => point_text(m.unit, p),
                    },
                };
                row.push(TCell::new(text).set_alignment(CellAlignment::Right));
            }
            if h.any_failure() {
                row.push(TCell::new(h.failures[vi].as_deref().unwrap_or("")));
            }
            t.add_row(row);
        }
        out.push_str(&t.to_string());
        out.push('\n');
        for l in history::control_lines(h) {
            out.push_str(&format!("  {l}\n"));
        }
        if h.steps.is_empty() {
            out.push_str("  no step beyond noise\n");
        }
        for s in &h.steps {
            out.push_str(&format!("  {}\n", step_line(h, s)));
        }
    }
    Some(out)
}
