//! The report renderers over committed runs (results/ is never rewritten, so its records are
//! fixed inputs): snapshots of Markdown, CSV, Bencher JSON and the summary JSON with the run id
//! and timestamps redacted, and structural checks of the HTML page, whose SVG is too large and
//! too incidental to snapshot. The rendered pages are left in the test's scratch folder
//! (target/tmp) for a person to look at.

use std::path::Path;

use benchlab::record::store::read_records;
use benchlab::record::Record;
use benchlab::report::{self, Format};

const SEED_000: &str = "results/seed-000-stdio/20261130T095040Z-seed-000-stdio-8336/records.jsonl";
const SEED_001: &str =
    "results/seed-001-python-servers/20261130T095003Z-seed-001-python-servers-6622/records.jsonl";

fn records(path: &str) -> Vec<Record> {
    read_records(&Path::new(env!("CARGO_MANIFEST_DIR")).join(path)).expect("committed records read")
}

/// Replaces what differs between runs of the same cells: run ids and write times.
fn redact(text: &str, records: &[Record]) -> String {
    let mut s = text.to_string();
    for r in records {
        s = s.replace(&r.run_id, "[run-id]").replace(&r.recorded_at, "[recorded-at]");
    }
    s
}

fn keep_for_people(name: &str, html: &str) {
    let _ = std::fs::write(Path::new(env!("CARGO_TARGET_TMPDIR")).join(name), html);
}

#[test]
fn markdown_of_seed_000() {
    let r = records(SEED_000);
    insta::assert_snapshot!("seed_000_markdown", redact(&report::markdown(&r), &r));
}

#[test]
fn csv_of_seed_000() {
    let r = records(SEED_000);
    let csv = report::csv(&r);
    let header_fields = csv.lines().next().unwrap().split(',').count();
    assert!(csv.lines().all(|l| l.split(',').count() == header_fields), "{csv}");
    insta::assert_snapshot!("seed_000_csv", redact(&csv, &r));
}

#[test]
fn bencher_json_of_seed_000() {
    let r = records(SEED_000);
    let text = report::bencher_json(&r);
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let benchmarks = v.as_object().unwrap();
    assert_eq!(benchmarks.len(), r.len(), "one benchmark per cell");
    for (name, measures) in benchmarks {
        assert!(r.iter().any(|rec| &rec.cell.id == name), "{name}");
        for (measure, m) in measures.as_object().unwrap() {
            let value = m["value"].as_f64().unwrap();
            if let (Some(lo), Some(hi)) = (m.get("lower_value"), m.get("upper_value")) {
                let (lo, hi) = (lo.as_f64().unwrap(), hi.as_f64().unwrap());
                assert!(lo <= value && value <= hi, "{name} {measure}: {lo} <= {value} <= {hi}");
            }
        }
    }
    assert!(benchmarks["ts-1.0.4-node/serial_calls"].get("call_p99_ms").is_some());
    assert!(benchmarks["ts-1.0.4-node/cold_start"]["cold_start_ms"].get("lower_value").is_some());
    insta::assert_snapshot!("seed_000_bencher", redact(&text, &r));
}

#[test]
fn summary_json_of_seed_000() {
    let r = records(SEED_000);
    insta::assert_snapshot!("seed_000_summary_json", redact(&report::render(Format::Json, &r), &r));
}

#[test]
fn markdown_and_csv_of_a_run_with_expected_failures() {
    let r = records(SEED_001);
    let md = report::markdown(&r);
    assert!(md.contains("## Failures"));
    assert!(md.contains("| mcp-2.3.0-with-1.x-import/cold_start | crash | yes |"), "{md}");
    // Every Markdown table row has its table's column count: no text broke a row.
    for table in md.split("\n\n").filter(|b| b.starts_with('|')) {
        let columns = |l: &str| l.replace("\\|", "").matches('|').count();
        let first = columns(table.lines().next().unwrap());
        assert!(table.lines().all(|l| columns(l) == first), "{table}");
    }
    // The failed cells measured nothing, so they have no metric rows; the CSV is metrics only.
    let csv = report::csv(&r);
    assert!(!csv.contains("with-1.x-import"), "{csv}");
    // A header, 9 measured cells x 5 metrics, less calls in the 3 cold_start cells.
    assert_eq!(csv.lines().count(), 1 + 9 * 5 - 3);
}

/// Structure every page must have: the charts, no fetch of anything, every cell and its
/// environment shown.
fn check_page(html: &str, records: &[Record], charts: usize) {
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert!(html.trim_end().ends_with("</html>"));
    assert_eq!(html.matches("<svg").count(), charts, "inline SVG charts");
    assert_eq!(html.matches("</svg>").count(), charts);
    for fetch in ["<script", "<link", "<img", "<iframe", "src=", "href=", "url(", "@import"] {
        assert!(!html.contains(fetch), "the page must fetch nothing, found {fetch:?}");
    }
    assert!(html.contains("Content-Security-Policy"));
    assert_eq!(html.matches("<table").count(), html.matches("</table>").count());
    for r in records {
        assert!(html.contains(&r.cell.id), "cell {} shown", r.cell.id);
        let e = &r.environment;
        assert!(html.contains(&e.image.input_hash), "input hash of {}", r.cell.id);
        assert!(html.contains(&r.env_hash));
        assert!(html.contains(&format!("{} {}", e.runtime.name, e.runtime.version)));
        for d in &e.deviations {
            assert!(html.contains(d), "deviation {d:?} shown");
        }
    }
}

#[test]
fn html_of_seed_000() {
    let r = records(SEED_000);
    let html = report::html(&r);
    keep_for_people("seed-000.html", &html);
    // Cold start bars, RSS bars, the percentile plot.
    check_page(&html, &r, 3);
    assert!(!html.contains("http://") && !html.contains("https://"), "no URL at all");
    // Four serial-calls cells, four curves in the legend.
    for cell in ["ts-1.0.4-node/serial_calls", "mcp-1.1.2/serial_calls"] {
        assert!(html.contains(&format!(">\n{cell}\n</text>")), "legend names {cell}");
    }
    assert_eq!(html, report::html(&r), "the page is a function of the records");
}

#[test]
fn html_of_a_run_with_expected_failures_escapes_their_details() {
    let r = records(SEED_001);
    let html = report::html(&r);
    keep_for_people("seed-001.html", &html);
    check_page(&html, &r, 3);
    // The server's traceback quotes code: it is shown as text, never as markup.
    assert!(html.contains("No module named &#39;mcp.server.fastmcp&#39;"));
    assert!(html.contains("(expected)"));
}

#[test]
fn an_empty_run_renders_without_charts() {
    for f in Format::ALL {
        let out = report::render(f, &[]);
        assert!(out.ends_with('\n'), "{f}");
    }
    let html = report::html(&[]);
    assert_eq!(html.matches("<svg").count(), 0);
    assert!(html.contains("No cold starts"));
    assert_eq!(report::bencher_json(&[]).trim(), "{}");
}
