//! Pure renderers of records: the summary rows (one per server) as a terminal table and JSON, and
//! the full report as Markdown, CSV, Bencher Metric Format JSON and a static HTML page with SVG
//! charts; version histories of version-matrix sweeps (`history`) inside the table, Markdown and
//! HTML reports and on their own (`history_table`, `history_markdown`, `history_json`); and
//! HdrHistogram interval logs (`hlog`) of the load and calls histograms. Nothing
//! here runs, reads files or fetches anything; every renderer is a function of the records it is
//! given.

mod bencher;
mod charts;
pub mod compare;
mod csv;
mod hidden;
pub mod history;
pub mod hlog;
mod html;
mod labels;
mod load;
mod markdown;
mod rows;
mod services;
mod steps;
mod table;
mod timeseries;
mod units;

use std::fmt;
use std::str::FromStr;

use crate::record::Record;

pub use bencher::bencher_json;
pub use compare::{
    compare, compare_markdown, compare_table, compare_text, diff_env_markdown, diff_env_table, diff_env_text,
    gate, gate_failures, render_compare, render_diff_env, CellComparison, CompareFormat, CompareMetric,
    Comparison, FailedCell, Method, MetricComparison, SkippedMetric, UnknownCompareFormat, Verdict,
    DEFAULT_THRESHOLD_PCT,
};
pub use csv::csv;
pub use history::{compare_versions, histories, history_json, History, HistoryMetric, Step};
pub use html::{esc, html};
pub use load::{load_rows, load_summary_rows, transport_label, LoadRow};
pub use markdown::{history_markdown, markdown};
pub use rows::{
    is_load, metric_rows, status_text, summary_rows, Metric, MetricRow, SummaryRow, Unit, CONFIDENCE,
    MIN_CI_SAMPLES, RESAMPLES, SEED,
};
pub use table::{history_table, load_table, summary_table, tables};

/// The output formats of `benchlab report`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// The summary rows as a terminal table, and the load cells (one row per cell, the median
    /// of its repeats) as a second one.
    Table,
    /// The summary rows as pretty JSON: an array of stdio summary rows when the records hold no
    /// HTTP load cell (as before load cells existed), otherwise an object
    /// `{"summary": [...], "load": [...]}` with one load row per record (repeats separate).
    Json,
    /// Summary, per-cell statistics, failures and environments as Markdown.
    Markdown,
    /// One row per cell and metric.
    Csv,
    /// Bencher Metric Format JSON.
    Bencher,
    /// One self-contained page with SVG charts.
    Html,
    /// The history across versions (series of one family × runtime at ≥ 3 SDK versions) as
    /// JSON: points with 95 % intervals, fitted levels and the steps beyond noise.
    History,
}

impl Format {
    pub const ALL: [Format; 7] = [
        Format::Table,
        Format::Json,
        Format::Markdown,
        Format::Csv,
        Format::Bencher,
        Format::Html,
        Format::History,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Format::Table => "table",
            Format::Json => "json",
            Format::Markdown => "markdown",
            Format::Csv => "csv",
            Format::Bencher => "bencher",
            Format::Html => "html",
            Format::History => "history",
        }
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown report format {0:?} (one of: table, json, markdown, csv, bencher, html, history)")]
pub struct UnknownFormat(pub String);

impl FromStr for Format {
    type Err = UnknownFormat;

    fn from_str(s: &str) -> Result<Format, UnknownFormat> {
        Format::ALL.into_iter().find(|f| f.as_str() == s).ok_or_else(|| UnknownFormat(s.to_string()))
    }
}

/// Records grouped by where they ran (`benchlab report --by node`), in first-seen order, each
/// with a title naming the node, its CPU model, kernel and engine.
pub fn by_node(records: &[Record]) -> Vec<(String, String, Vec<Record>)> {
    let mut groups: Vec<(String, String, Vec<Record>)> = Vec::new();
    for r in records {
        let key = crate::record::diffenv::ran_on(r);
        match groups.iter_mut().find(|(k, _, _)| *k == key) {
            Some((_, _, g)) => g.push(r.clone()),
            None => {
                let e = &r.environment;
                let title = format!(
                    "{key}: {}, kernel {}, {} {}",
                    e.host.cpu_model, e.host.kernel, e.engine.kind, e.engine.version
                );
                groups.push((key, title, vec![r.clone()]));
            }
        }
    }
    groups
}

/// Renders records in a format, one part per node they ran on: a titled table, Markdown section
/// or CSV block each; JSON as an object keyed by node.
pub fn render_by_node(format: Format, records: &[Record]) -> String {
    let groups = by_node(records);
    if matches!(format, Format::Json | Format::Bencher | Format::History) {
        let parts: serde_json::Map<String, serde_json::Value> = groups
            .iter()
            .map(|(k, _, g)| {
                let v = serde_json::from_str(&render(format, g)).expect("the renderer writes JSON");
                (k.clone(), v)
            })
            .collect();
        return serde_json::to_string_pretty(&parts).expect("JSON serialises") + "\n";
    }
    let mut out = String::new();
    for (_, title, g) in &groups {
        match format {
            Format::Markdown => out.push_str(&format!("## {title}\n\n")),
            Format::Html => {}
            _ => out.push_str(&format!("{title} ({} record(s))\n", g.len())),
        }
        out.push_str(&render(format, g));
        out.push('\n');
    }
    out
}

/// Renders records in a format. Every output ends with a newline.
pub fn render(format: Format, records: &[Record]) -> String {
    let mut out = match format {
        Format::Table => tables(records),
        Format::Json => summary_json(records),
        Format::Markdown => markdown(records),
        Format::Csv => csv(records),
        Format::Bencher => bencher_json(records),
        Format::Html => html(records),
        Format::History => serde_json::to_string_pretty(&history_json(records)).expect("JSON serialises"),
    };
    if !out.ends_with('\n') {
        out.push('\n');
    }
    out
}

/// Records grouped by run and server, each server's cells in their ids' natural order (`w10`
/// before `w50` before `w100`), whatever order the run took; repeats keep their run order. The
/// per-cell lines (steps, services) follow it, as the load tables do.
/// Only the records `keep` keeps are sorted (a per-cell line is for few of many records).
pub(crate) fn in_cell_order(records: &[Record], keep: impl Fn(&Record) -> bool) -> Vec<&Record> {
    let mut v: Vec<&Record> = records.iter().filter(|r| keep(r)).collect();
    v.sort_by_cached_key(|r| {
        let r: &Record = r;
        (r.run_id.as_str(), r.cell.server.id.as_str(), natural(&r.cell.id))
    });
    v
}

/// A string as runs of text and numbers, numbers compared by value.
fn natural(s: &str) -> Vec<(&str, u64)> {
    let mut out = Vec::new();
    let mut rest = s;
    while !rest.is_empty() {
        let text_end = rest.find(|c: char| c.is_ascii_digit()).unwrap_or(rest.len());
        let (text, tail) = rest.split_at(text_end);
        let num_end = tail.find(|c: char| !c.is_ascii_digit()).unwrap_or(tail.len());
        let (num, tail) = tail.split_at(num_end);
        out.push((text, num.parse().unwrap_or(0)));
        rest = tail;
    }
    out
}

/// The JSON of `Format::Json` (see there).
fn summary_json(records: &[Record]) -> String {
    let load = load_rows(records);
    if load.is_empty() {
        return serde_json::to_string_pretty(&summary_rows(records)).expect("rows serialise");
    }
    let v = serde_json::json!({ "summary": summary_rows(records), "load": load });
    serde_json::to_string_pretty(&v).expect("rows serialise")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_parse_from_their_names() {
        for f in Format::ALL {
            assert_eq!(f.as_str().parse::<Format>(), Ok(f));
            assert_eq!(f.to_string(), f.as_str());
        }
        let e = "svg".parse::<Format>().unwrap_err().to_string();
        assert!(e.contains("\"svg\"") && e.contains("bencher"), "{e}");
    }

    #[test]
    fn cells_come_grouped_by_server_in_natural_order() {
        assert!(super::natural("s/concurrency-w10") < super::natural("s/concurrency-w50"));
        assert!(super::natural("s/concurrency-w50") < super::natural("s/concurrency-w100"));
        assert!(super::natural("a-2w/x") > super::natural("a-1w/x"));
        assert_eq!(super::natural("w10x"), vec![("w", 10), ("x", 0)]);
    }
}
