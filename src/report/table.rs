//! The terminal table of the summary rows (comfy-table).

use comfy_table::{presets::UTF8_FULL_CONDENSED, Cell as TCell, CellAlignment, ContentArrangement, Table};

use super::units::{mib, ms};
use super::SummaryRow;

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
