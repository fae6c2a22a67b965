//! The report as Markdown (GitHub-flavoured tables): the summary table, a per-cell table of
//! medians with confidence intervals, percentiles, CV and the noise flag, the version histories of
//! version-matrix sweeps with their steps, the failures, the environment of every cell, and a
//! footnote with the percentile rule. For READMEs and pull-request comments.

use std::fmt::Write as _;

use crate::record::{Record, Status};
use crate::stats::NOISY_CV;

use super::history::{self, histories, point_text, step_at, step_line};
use super::load::{self, load_cells, load_summary_rows, status_cell, LOAD_HEADER, LOAD_NOTE};
use super::rows::{metric_rows, summary_rows, MetricRow, SummaryRow, CONFIDENCE, RESAMPLES};
use super::units::{mib, ms, ms_interval, percent, short, thousands, unit_text};

/// Makes text safe inside a Markdown table cell: no column breaks, no line breaks, no HTML.
pub(super) fn cell(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '|' => out.push_str("\\|"),
            '\\' => out.push_str("\\\\"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '\n' | '\r' => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

/// `8 cells: 7 ok, 1 failed (1 as expected)`.
pub(super) fn cell_counts(records: &[Record]) -> String {
    let ok = records.iter().filter(|r| r.status == Status::Ok).count();
    let failed = records.len() - ok;
    let expected = records.iter().filter(|r| r.status == Status::Failed && r.as_expected()).count();
    let mut s = format!("{} cells: {ok} ok, {failed} failed", records.len());
    if failed > 0 {
        let _ = write!(s, " ({expected} as expected)");
    }
    s
}

/// The distinct run ids, in order of first appearance.
pub(super) fn run_ids(records: &[Record]) -> Vec<&str> {
    let mut ids: Vec<&str> = Vec::new();
    for r in records {
        if !ids.contains(&r.run_id.as_str()) {
            ids.push(&r.run_id);
        }
    }
    ids
}

/// The earliest and latest `recorded_at` (RFC 3339 UTC sorts as text).
pub(super) fn recorded_span(records: &[Record]) -> Option<(&str, &str)> {
    let first = records.iter().map(|r| r.recorded_at.as_str()).min()?;
    let last = records.iter().map(|r| r.recorded_at.as_str()).max()?;
    Some((first, last))
}

/// One line about the machine a record ran on: host, engine and the lab binary.
pub(super) fn host_line(r: &Record) -> String {
    let e = &r.environment;
    let h = &e.host;
    format!(
        "{}, {} logical CPUs (online {}), {:.1} GiB, kernel {}, cgroup v{}; engine {} {} (API {}); benchlab {} (binary sha256 {})",
        h.cpu_model,
        h.logical_cpus,
        h.cpus_online,
        h.memory_bytes as f64 / f64::from(1u32 << 30),
        h.kernel,
        h.cgroup_version,
        e.engine.kind,
        e.engine.version,
        e.engine.api_version,
        e.benchlab.version,
        short(&e.benchlab.binary_sha256),
    )
}

/// The distinct host lines, in order of first appearance.
pub(super) fn host_lines(records: &[Record]) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    for r in records {
        let l = host_line(r);
        if !lines.contains(&l) {
            lines.push(l);
        }
    }
    lines
}

/// The median, or the reading, in its unit.
pub(super) fn value_text(row: &MetricRow) -> String {
    unit_text(row.unit, row.median)
}

/// The footnote of the Markdown and HTML reports: how every percentile in them was taken (the
/// rule `stats::summarize` documents and a test there pins), and where other tools differ.
pub(super) const PERCENTILE_NOTE: &str = "Percentiles are nearest rank: of the n values in ascending \
     order, p(q) is the one of rank max(1, ⌈q·n⌉), never interpolated (of 10 values, p50 is the 5th and \
     p99 the 10th). From an HdrHistogram (calls, load latency) it is reported as the top of that value's \
     bucket, under 0.1 % above it (the Rust hdrhistogram crate's value_at_quantile); from stored samples \
     (cold start, tools/list) it is the sample itself, and p50 is the median. HdrHistogram's Python port \
     and older Java releases round q·n half up instead: with 51 to 99 values their p99 is the second \
     largest value where this one is the largest.";

/// The note under the per-cell table that says how its figures were computed.
pub(super) fn method_note() -> String {
    format!(
        "Medians with {:.0}% bootstrap confidence intervals (percentile method, {} seeded resamples; \
         for calls, of the recorded histogram); p95 and p99 as recorded. CV is the standard deviation \
         over the mean. Repeated trials (cold starts, first tools/list) are noisy when their CV is above \
         {:.0}%; the CV of calls is the spread of single calls in one session, not flagged. Memory is one \
         reading per cell.",
        CONFIDENCE * 100.0,
        thousands(RESAMPLES as u64),
        NOISY_CV * 100.0
    )
}

/// The whole report as Markdown.
pub fn markdown(records: &[Record]) -> String {
    let mut o = String::new();
    let runs = run_ids(records);
    let runs_text = runs.iter().map(|r| format!("`{}`", cell(r))).collect::<Vec<_>>().join(", ");
    let _ = writeln!(o, "# benchlab report: {} {runs_text}\n", if runs.len() == 1 { "run" } else { "runs" });
    let _ = write!(o, "{}.", cell_counts(records));
    if let Some((first, last)) = recorded_span(records) {
        let _ = write!(o, " Recorded {first} to {last}.");
    }
    o.push_str("\n\n");

    let summary = summary_rows(records);
    let load_rows = load_summary_rows(records);
    if !summary.is_empty() || load_rows.is_empty() {
        summary_section(&mut o, &summary);
    }
    if !load_rows.is_empty() {
        let _ = writeln!(
            o,
            "## HTTP load\n\n{LOAD_NOTE} Placement: {}.\n",
            cell(&load::placement_text(&load_rows))
        );
        let _ = writeln!(o, "| {} | status |", LOAD_HEADER.join(" | "));
        let _ = writeln!(o, "|---|---|---|---|---|--:|--:|--:|--:|--:|--:|--:|--:|---|--:|--:|--:|---|");
        for r in &load_rows {
            let cells: Vec<String> = load_cells(r).iter().map(|c| cell(c)).collect();
            let _ = writeln!(o, "| {} | {} |", cells.join(" | "), cell(&status_cell(r)));
        }
        o.push('\n');
        for l in super::timeseries::soak_lines(records) {
            let _ = writeln!(o, "{}\n", cell(&l));
        }
    }
    for l in super::steps::step_lines(records).into_iter().chain(super::services::service_lines(records)) {
        let _ = writeln!(o, "{}\n", cell(&l));
    }
    let claims = super::labels::claims(records);
    if !claims.is_empty() {
        let _ = writeln!(o, "## {}\n\n{}\n", super::labels::CLAIMS_HEADING, super::labels::CLAIMS_NOTE);
        for c in &claims {
            let _ = writeln!(o, "- {}: {}", cell(&c.server), cell(&super::labels::claim_line(c)));
        }
        o.push('\n');
    }
    history_section(&mut o, records);
    per_cell_and_rest(&mut o, records);
    o
}

fn history_section(o: &mut String, records: &[Record]) {
    if let Some(h) = history_markdown(records) {
        o.push_str(&h);
    }
}

/// `## History across versions`, when some series has at least [`history::MIN_VERSIONS`]
/// versions: the method, then per series a table of versions × metrics and its steps. `None`
/// when no series is a history.
pub fn history_markdown(records: &[Record]) -> Option<String> {
    let hs = histories(records);
    if hs.is_empty() {
        return None;
    }
    let mut out = String::new();
    let o = &mut out;
    let _ = writeln!(o, "## History across versions\n\n{}\n", cell(&history::method_note()));
    for h in &hs {
        let _ = writeln!(
            o,
            "### {}\n\n{} versions, runtime {}.\n",
            cell(&h.label),
            h.versions.len(),
            cell(&h.runtime_versions.join(", "))
        );
        let mut labels: Vec<&str> = h.metrics.iter().map(|m| m.metric.label()).collect();
        let mut align = "--:|".repeat(labels.len());
        if h.api_changes() {
            labels.insert(0, "api");
            align.insert_str(0, "---|");
        }
        if h.any_failure() {
            labels.push("failed");
            align.push_str("---|");
        }
        let _ = writeln!(o, "| {} version | {} |", cell(&h.key.family), labels.join(" | "));
        let _ = writeln!(o, "|---|{align}");
        for (vi, v) in h.versions.iter().enumerate() {
            let api = h.api_changes().then(|| cell(&h.apis[vi]));
            let cells: Vec<String> = api
                .into_iter()
                .chain(h.metrics.iter().map(|m| match &m.points[vi] {
                    None => "—".to_string(),
                    Some(p) => match step_at(h, m.metric, vi) {
                        Some(s) => format!("**{} {}**", history::arrow(s), point_text(m.unit, p)),
                        None => point_text(m.unit, p),
                    },
                }))
                .chain(h.any_failure().then(|| cell(h.failures[vi].as_deref().unwrap_or(""))))
                .collect();
            let _ = writeln!(o, "| {} | {} |", cell(v), cells.join(" | "));
        }
        o.push('\n');
        for l in history::control_lines(h) {
            let _ = writeln!(o, "{}\n", cell(&l));
        }
        if h.steps.is_empty() {
            o.push_str("No step beyond noise.\n\n");
        } else {
            for s in &h.steps {
                let _ = writeln!(o, "- {}", cell(&step_line(h, s)));
            }
            o.push('\n');
        }
    }
    Some(out)
}

fn summary_section(o: &mut String, summary: &[SummaryRow]) {
    o.push_str("## Summary\n\n");
    o.push_str(
        "Each figure is the median over the runs (a cell's repeats) that measured it; in brackets the \
         95 % between-run interval (Student t on the logarithms), when there are two runs or more.\n\n",
    );
    o.push_str(
        "| server | sdk | runtime | cpus s/d | cold start p50 | tools/list p50 | call p50 | call p95 | call p99 | RSS after init | LOC | status |\n",
    );
    o.push_str("|---|---|---|---|--:|--:|--:|--:|--:|--:|--:|---|\n");
    for r in summary {
        let cold = super::rows::cold_start_text(r);
        let _ = writeln!(
            o,
            "| {} | {} | {} {} | {}/{} | {cold} | {} | {} | {} | {} | {} | {} | {} |",
            cell(&r.server),
            cell(&super::labels::sdk_label(&r.family, &r.sdk_version)),
            cell(&r.runtime),
            cell(&r.runtime_version),
            cell(&r.server_cpus),
            cell(&r.driver_cpus),
            ms(r.tools_list_p50_ms),
            super::rows::call_p50_text(r),
            ms(r.call_p95_ms),
            ms(r.call_p99_ms),
            mib(r.rss_after_initialize_bytes),
            r.source_loc.map_or("—".into(), |n| n.to_string()),
            cell(&r.status),
        );
    }
    o.push('\n');
}

fn per_cell_and_rest(o: &mut String, records: &[Record]) {
    o.push_str("## Per cell\n\n");
    o.push_str(&method_note());
    o.push_str("\n\n");
    let _ = writeln!(
        o,
        "| cell | metric | n | p50 (median) | {:.0}% CI | p95 | p99 | CV | noisy |",
        CONFIDENCE * 100.0
    );
    o.push_str("|---|---|--:|--:|--:|--:|--:|--:|---|\n");
    for row in metric_rows(records) {
        let _ = writeln!(
            o,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            cell(&row.cell),
            row.metric.label(),
            row.n,
            value_text(&row),
            ms_interval(row.median_ci.as_ref()),
            ms(row.p95),
            ms(row.p99),
            percent(row.cv),
            if row.noisy { "noisy" } else { "" },
        );
    }

    let failed: Vec<&Record> = records.iter().filter(|r| r.status == Status::Failed).collect();
    if !failed.is_empty() {
        o.push_str("\n## Failures\n\n| cell | reason | expected | detail |\n|---|---|---|---|\n");
        for r in failed {
            let (reason, detail) = r
                .failure
                .as_ref()
                .map_or(("failed", ""), |f| (f.reason.as_str(), f.detail.lines().next().unwrap_or("")));
            let _ = writeln!(
                o,
                "| {} | {reason} | {} | {} |",
                cell(&r.cell.id),
                if r.as_expected() { "yes" } else { "no" },
                cell(detail),
            );
        }
    }

    if let Some(lines) = super::hidden::lines(records) {
        let _ =
            writeln!(o, "\n## Memory outside the server's process tree\n\n{}\n", super::hidden::FIGURE_NOTE);
        if lines.is_empty() {
            o.push_str("No cell flagged.\n");
        }
        for (id, text) in lines {
            let _ = writeln!(o, "- `{}`: {}", cell(&id), cell(&text));
        }
    }

    o.push_str("\n## Environment\n\n");
    o.push_str(
        "| cell | runtime | cpus server/driver | memory limit | image input hash | env hash | deviations |\n",
    );
    o.push_str("|---|---|---|--:|---|---|---|\n");
    for r in records {
        let e = &r.environment;
        let deviations =
            if e.deviations.is_empty() { "—".to_string() } else { cell(&e.deviations.join("; ")) };
        let _ = writeln!(
            o,
            "| {} | {} {} | {}/{}{} | {} | `{}` | `{}` | {deviations} |",
            cell(&r.cell.id),
            cell(&e.runtime.name),
            cell(&e.runtime.version),
            cell(&e.placement.server_cpus),
            cell(&e.placement.driver_cpus),
            if e.placement.shared { " (shared)" } else { "" },
            mib(Some(e.placement.memory_limit_bytes)),
            short(&e.image.input_hash),
            short(&r.env_hash),
        );
    }
    o.push('\n');
    for line in host_lines(records) {
        let _ = writeln!(o, "- Host: {}", cell(&line));
    }
    let _ = writeln!(o, "\n{PERCENTILE_NOTE}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_cells_cannot_break_the_table() {
        assert_eq!(cell("a|b\nc<d>"), "a\\|b c&lt;d&gt;");
        assert_eq!(thousands(10_000), "10,000");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1_234_567), "1,234,567");
    }
}
