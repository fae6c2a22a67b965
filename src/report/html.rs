//! The report as one static HTML page: a version sweep's history first (a table and a chart per
//! metric with its steps), then the summary, inline SVG charts (cold start with confidence
//! whiskers, RSS after initialize, call latency by percentile), the HTTP load table and its charts
//! (throughput, p99 and error rate against workers, latency by percentile per workload and load
//! level, RSS idle against peak under load), per-cell statistics, failures, the environment of
//! every cell and the percentile rule. Self-contained: inline CSS, no scripts, no external
//! resource, and a Content-Security-Policy that forbids fetching any. All text from records is
//! escaped.

use std::fmt::Write as _;

use crate::record::{Record, Status};
use crate::stats;

use super::charts::{self, Bar, Curve, FailedMark, Level, Series, StepMark, VersionPoint};
use super::history::{self, change_text, histories, point_text, step_at, step_line, History, MetricHistory};
use super::load::{self, load_cells, load_summary_rows, status_cell, LoadRow, LOAD_HEADER, LOAD_NOTE};
use super::markdown::{
    cell_counts, host_lines, method_note, recorded_span, run_ids, value_text, PERCENTILE_NOTE,
};
use super::rows::{is_load, metric_rows, summary_rows, Metric, MetricRow, Unit, CONFIDENCE};
use super::units::{mib, ms, ms_interval, percent, rate_number};

/// Escapes text for HTML content and attribute values.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

const STYLE: &str = "\
body{font-family:system-ui,sans-serif;margin:2rem auto;max-width:1100px;padding:0 1rem;color:#222}\
h1{font-size:1.5rem}h2{font-size:1.2rem;margin-top:2rem;border-bottom:1px solid #ddd}\
table{border-collapse:collapse;font-size:.85rem;margin:.5rem 0}\
th,td{border:1px solid #ddd;padding:.25rem .5rem;text-align:left;vertical-align:top}\
th{background:#f4f4f4}td.n{text-align:right;white-space:nowrap}\
code{font-size:.8rem;word-break:break-all}figure{margin:1rem 0}figcaption,.note{color:#555;font-size:.85rem}\
.wide{overflow-x:auto}table.load{font-size:.78rem}table.load td,table.load th{white-space:nowrap}\
table.load td:first-child,table.load th:first-child{position:sticky;left:0;background:#fff}table.load th:first-child{background:#f4f4f4}.noisy{color:#b35c00;font-weight:bold}.failed{color:#b00020}pre{white-space:pre-wrap;font-size:.75rem;background:#f8f8f8;padding:.5rem}";

pub(super) fn chart_or_note(o: &mut String, drawn: Result<String, charts::ChartError>, caption: &str) {
    match drawn {
        Ok(svg) => {
            let _ = write!(o, "<figure>\n{svg}<figcaption>{}</figcaption>\n</figure>\n", esc(caption));
        }
        Err(e) => {
            let _ = writeln!(o, "<p class=\"note\">Chart not drawn: {}</p>", esc(&e.to_string()));
        }
    }
}

/// Per server, the cold-start row with the most samples (the cold_start workload's, normally).
fn cold_start_bars(rows: &[MetricRow]) -> Vec<Bar> {
    let mut best: Vec<&MetricRow> = Vec::new();
    for r in rows.iter().filter(|r| r.metric == Metric::ColdStart) {
        match best.iter_mut().find(|b| b.server == r.server) {
            Some(b) if r.n > b.n => *b = r,
            Some(_) => {}
            None => best.push(r),
        }
    }
    best.into_iter()
        .map(|r| Bar {
            label: r.server.clone(),
            value: r.median,
            ci: r.median_ci.filter(|i| i.is_finite()).map(|i| (i.lower, i.upper)),
            text: format!("{} (n={})", ms(Some(r.median)), r.n),
            color: None,
        })
        .collect()
}

fn rss_bars(records: &[Record]) -> Vec<Bar> {
    summary_rows(records)
        .into_iter()
        .filter_map(|r| {
            let b = r.rss_after_initialize_bytes?;
            Some(Bar {
                label: r.server,
                value: b as f64 / (1024.0 * 1024.0),
                ci: None,
                text: mib(Some(b)),
                color: None,
            })
        })
        .collect()
}

fn latency_curves(records: &[Record]) -> Vec<Curve> {
    records
        .iter()
        .filter_map(|r| {
            let h = stats::decode_histogram(&r.metrics.calls.as_ref()?.histogram).ok()?;
            Some(Curve { label: r.cell.id.clone(), count: h.len(), points: stats::percentile_curve(&h) })
        })
        .filter(|c| !c.points.is_empty())
        .collect()
}

fn summary_table(o: &mut String, records: &[Record]) {
    o.push_str(
        "<table>\n<tr><th>server</th><th>sdk</th><th>runtime</th><th>cpus s/d</th><th>cold start p50</th>\
         <th>tools/list p50</th><th>call p50</th><th>call p95</th><th>call p99</th><th>RSS after init</th>\
         <th>LOC</th><th>status</th></tr>\n",
    );
    for r in summary_rows(records) {
        let cold = super::rows::cold_start_text(&r);
        let _ = writeln!(
            o,
            "<tr><td>{}</td><td>{}</td><td>{} {}</td><td>{}/{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>\
             <td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>\
             <td class=\"n\">{}</td><td{}>{}</td></tr>",
            esc(&r.server),
            esc(&super::labels::sdk_label(&r.family, &r.sdk_version)),
            esc(&r.runtime),
            esc(&r.runtime_version),
            esc(&r.server_cpus),
            esc(&r.driver_cpus),
            esc(&cold),
            esc(&ms(r.tools_list_p50_ms)),
            esc(&super::rows::call_p50_text(&r)),
            esc(&ms(r.call_p95_ms)),
            esc(&ms(r.call_p99_ms)),
            esc(&mib(r.rss_after_initialize_bytes)),
            r.source_loc.map_or("—".into(), |n| n.to_string()),
            if r.status == "ok" { "" } else { " class=\"failed\"" },
            esc(&r.status),
        );
    }
    o.push_str("</table>\n");
}

fn metric_table(o: &mut String, rows: &[MetricRow]) {
    let _ = writeln!(o, "<p class=\"note\">{}</p>", esc(&method_note()));
    let _ = writeln!(
        o,
        "<table>\n<tr><th>cell</th><th>metric</th><th>n</th><th>p50 (median)</th><th>{:.0}% CI</th>\
         <th>p95</th><th>p99</th><th>CV</th><th>noisy</th></tr>",
        CONFIDENCE * 100.0
    );
    for r in rows {
        let _ = writeln!(
            o,
            "<tr><td>{}</td><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>\
             <td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td>{}</td></tr>",
            esc(&r.cell),
            esc(r.metric.label()),
            r.n,
            esc(&value_text(r)),
            esc(&ms_interval(r.median_ci.as_ref())),
            esc(&ms(r.p95)),
            esc(&ms(r.p99)),
            esc(&percent(r.cv)),
            if r.noisy { "<span class=\"noisy\">noisy</span>" } else { "" },
        );
    }
    o.push_str("</table>\n");
}

fn failures(o: &mut String, records: &[Record]) {
    let failed: Vec<&Record> = records.iter().filter(|r| r.status == Status::Failed).collect();
    if failed.is_empty() {
        return;
    }
    o.push_str("<h2>Failures</h2>\n");
    for r in failed {
        let (reason, detail) =
            r.failure.as_ref().map_or(("failed", ""), |f| (f.reason.as_str(), f.detail.as_str()));
        let _ = writeln!(
            o,
            "<details><summary><span class=\"failed\">{}</span>: {}{}</summary><pre>{}</pre></details>",
            esc(&r.cell.id),
            esc(reason),
            if r.as_expected() { " (expected)" } else { "" },
            esc(detail),
        );
    }
}

/// Cells whose server kept memory or processes out of its own figures, and which figure the
/// report shows (only for records that carry a cgroup reading).
fn hidden_section(o: &mut String, records: &[Record]) {
    let Some(lines) = super::hidden::lines(records) else { return };
    let _ = writeln!(
        o,
        "<h2>Memory outside the server's process tree</h2>\n<p class=\"note\">{}</p>",
        esc(super::hidden::FIGURE_NOTE)
    );
    if lines.is_empty() {
        o.push_str("<p>No cell flagged.</p>\n");
        return;
    }
    o.push_str("<ul>\n");
    for (cell, text) in lines {
        let _ = writeln!(o, "<li><span class=\"failed\">{}</span>: {}</li>", esc(&cell), esc(&text));
    }
    o.push_str("</ul>\n");
}

fn environment(o: &mut String, records: &[Record]) {
    o.push_str("<h2>Environment</h2>\n<ul>\n");
    for line in host_lines(records) {
        let _ = writeln!(o, "<li>Host: {}</li>", esc(&line));
    }
    o.push_str(
        "</ul>\n<table>\n<tr><th>cell</th><th>runtime</th><th>cpus server / driver</th><th>memory limit</th>\
         <th>image</th><th>image input hash</th><th>env hash</th><th>deviations</th></tr>\n",
    );
    for r in records {
        let e = &r.environment;
        let deviations = if e.deviations.is_empty() {
            "—".to_string()
        } else {
            let items: String = e.deviations.iter().map(|d| format!("<li>{}</li>", esc(d))).collect();
            format!("<ul>{items}</ul>")
        };
        let _ = writeln!(
            o,
            "<tr><td>{}</td><td>{} {}</td><td>{} / {}{}</td><td class=\"n\">{}</td><td><code>{}</code></td>\
             <td><code>{}</code></td><td><code>{}</code></td><td>{deviations}</td></tr>",
            esc(&r.cell.id),
            esc(&e.runtime.name),
            esc(&e.runtime.version),
            esc(&e.placement.server_cpus),
            esc(&e.placement.driver_cpus),
            if e.placement.shared { " (shared)" } else { "" },
            esc(&mib(Some(e.placement.memory_limit_bytes))),
            esc(&e.image.reference),
            esc(&e.image.input_hash),
            esc(&r.env_hash),
        );
    }
    o.push_str("</table>\n");
}

/// The whole report as one self-contained HTML page.
pub fn html(records: &[Record]) -> String {
    let rows = metric_rows(records);
    let runs = run_ids(records).join(", ");
    let mut o = String::new();
    let _ = write!(
        o,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>benchlab report: {}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n",
        esc(&runs)
    );
    let _ = writeln!(o, "<h1>benchlab report: {}</h1>", esc(&runs));
    let _ = write!(o, "<p>{}.", esc(&cell_counts(records)));
    if let Some((first, last)) = recorded_span(records) {
        let _ = write!(o, " Recorded {} to {}.", esc(first), esc(last));
    }
    o.push_str("</p>\n");
    // A version sweep is read for its history: it comes first, before a table of every cell.
    let hs = histories(records);
    if !hs.is_empty() {
        o.push_str("<p class=\"note\">A version sweep: its history across versions comes first; the summary of every cell follows it.</p>\n");
        history_section(&mut o, &hs);
    }
    let load_rows = load_summary_rows(records);
    let stdio = !summary_rows(records).is_empty() || load_rows.is_empty();
    if stdio {
        o.push_str("<h2>Summary</h2>\n");
        summary_table(&mut o, records);
    }
    if !load_rows.is_empty() {
        load_section(&mut o, records, &load_rows);
    }
    let steps = super::steps::step_lines(records);
    if !steps.is_empty() {
        o.push_str("<h2>Steps</h2>\n");
        for l in steps {
            let _ = writeln!(o, "<p>{}</p>", esc(&l));
        }
    }
    super::services::html_table(&mut o, records);
    let claims = super::labels::claims(records);
    if !claims.is_empty() {
        let _ = writeln!(
            o,
            "<h2>{}</h2>\n<p class=\"note\">{}</p>\n<ul>",
            super::labels::CLAIMS_HEADING,
            esc(super::labels::CLAIMS_NOTE)
        );
        for c in &claims {
            let _ = writeln!(o, "<li>{}: {}</li>", esc(&c.server), esc(&super::labels::claim_line(c)));
        }
        o.push_str("</ul>\n");
    }
    if stdio {
        stdio_charts(&mut o, records, &rows);
    }

    super::timeseries::over_time_section(&mut o, records);
    o.push_str("<h2>Per cell</h2>\n");
    metric_table(&mut o, &rows);
    failures(&mut o, records);
    hidden_section(&mut o, records);
    environment(&mut o, records);
    let _ = writeln!(o, "<p class=\"note\">{}</p>", esc(PERCENTILE_NOTE));
    o.push_str("</body>\n</html>\n");
    o
}

/// The stdio charts: cold start, RSS after initialize, call latency by percentile.
fn stdio_charts(o: &mut String, records: &[Record], rows: &[MetricRow]) {
    o.push_str("<h2>Charts</h2>\n");
    let cold = cold_start_bars(rows);
    if cold.is_empty() {
        o.push_str("<p class=\"note\">No cold starts in these records.</p>\n");
    } else {
        chart_or_note(
            o,
            charts::bars("Cold start, median per server", "ms", &cold),
            &format!(
                "Spawn request to initialize result: median of each server's cold starts, whiskers at the {:.0}% bootstrap confidence interval.",
                CONFIDENCE * 100.0
            ),
        );
    }
    let rss = rss_bars(records);
    if rss.is_empty() {
        o.push_str("<p class=\"note\">No memory readings in these records.</p>\n");
    } else {
        chart_or_note(
            o,
            charts::bars("RSS after initialize, per server", "MiB", &rss),
            "Resident memory of the server's process tree right after initialize (one reading).",
        );
    }
    let curves = latency_curves(records);
    if curves.is_empty() {
        o.push_str("<p class=\"note\">No serial-calls histograms in these records.</p>\n");
    } else {
        chart_or_note(
            o,
            charts::percentiles("tools/call latency by percentile", &curves),
            "Each serial-calls cell's recorded histogram: latency (log scale) against percentile, \
             spaced by 1/(1−q) so that the tail gets room; each curve ends at its maximum.",
        );
    }
}

/// `server · transport` (with the lifecycle when it is per-call): one line in the load charts.
fn series_key(r: &LoadRow) -> String {
    match r.lifecycle.as_deref() {
        Some("per_call") => format!("{} · {} per-call", r.server, r.transport),
        _ => format!("{} · {}", r.server, r.transport),
    }
}

/// One series per server × transport over the closed-loop cells, x = workers.
fn series_over_workers(rows: &[LoadRow], y: fn(&LoadRow) -> Option<f64>) -> Vec<Series> {
    let mut out: Vec<Series> = Vec::new();
    for r in rows.iter().filter(|r| r.mode == "closed" && r.workers > 0) {
        let Some(v) = y(r).filter(|v| v.is_finite()) else { continue };
        let key = series_key(r);
        match out.iter_mut().find(|s| s.label == key) {
            Some(s) => s.points.push((f64::from(r.workers), v)),
            None => out.push(Series { label: key, points: vec![(f64::from(r.workers), v)] }),
        }
    }
    for s in &mut out {
        s.points.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    out
}

/// Latency curves of the load cells, one group per workload and load level, one curve per
/// server × transport (repeats' histograms pooled).
fn load_curve_groups(records: &[Record]) -> Vec<(String, Vec<Curve>)> {
    type Named = (String, hdrhistogram::Histogram<u64>);
    let mut groups: Vec<(String, Vec<Named>)> = Vec::new();
    for (r, row) in records.iter().filter(|r| is_load(r)).zip(load::load_rows(records)) {
        let Some(lat) = r.metrics.load.as_ref().and_then(|l| l.latency.as_ref()) else { continue };
        let Ok(h) = stats::decode_histogram(&lat.histogram) else { continue };
        if h.is_empty() {
            continue;
        }
        let group = format!(
            "{} {}{}",
            row.workload,
            load::workers_text(&row),
            if row.mode == "open" { "" } else { " workers" }
        );
        let label = series_key(&row);
        let gi = match groups.iter().position(|g| g.0 == group) {
            Some(i) => i,
            None => {
                groups.push((group, Vec::new()));
                groups.len() - 1
            }
        };
        let curves = &mut groups[gi].1;
        match curves.iter_mut().find(|c| c.0 == label) {
            Some(c) => {
                let _ = c.1.add(&h);
            }
            None => curves.push((label, h)),
        }
    }
    groups
        .into_iter()
        .map(|(g, cs)| {
            let curves = cs
                .into_iter()
                .map(|(label, h)| Curve { label, count: h.len(), points: stats::percentile_curve(&h) })
                .collect();
            (g, curves)
        })
        .collect()
}

/// Per server: the lowest idle RSS and the highest peak under load, side by side.
fn rss_load_bars(rows: &[LoadRow]) -> Vec<Bar> {
    let mut servers: Vec<(String, Option<u64>, Option<u64>)> = Vec::new();
    for r in rows {
        let i = match servers.iter().position(|s| s.0 == r.server) {
            Some(i) => i,
            None => {
                servers.push((r.server.clone(), None, None));
                servers.len() - 1
            }
        };
        let s = &mut servers[i];
        if let Some(v) = r.rss_idle_bytes {
            s.1 = Some(s.1.map_or(v, |x| x.min(v)));
        }
        if let Some(v) = r.rss_peak_bytes {
            s.2 = Some(s.2.map_or(v, |x| x.max(v)));
        }
    }
    let mut bars = Vec::new();
    for (i, (server, idle, peak)) in servers.into_iter().enumerate() {
        for (what, v) in [("idle", idle), ("peak under load", peak)] {
            if let Some(b) = v {
                bars.push(Bar {
                    label: format!("{server} {what}"),
                    value: b as f64 / (1024.0 * 1024.0),
                    ci: None,
                    text: mib(Some(b)),
                    color: Some(i),
                });
            }
        }
    }
    bars
}

/// The HTTP load table and its charts.
fn load_section(o: &mut String, records: &[Record], rows: &[LoadRow]) {
    let place = load::placement_text(rows);
    let _ = writeln!(
        o,
        "<h2>HTTP load</h2>\n<p class=\"note\">{} Placement: {}.</p>",
        esc(LOAD_NOTE),
        esc(&place)
    );
    // One line per row (no cell wraps), the server column kept in view when the table scrolls.
    o.push_str("<div class=\"wide\"><table class=\"load\">\n<tr>");
    for h in LOAD_HEADER.iter().chain(std::iter::once(&"status")) {
        let _ = write!(o, "<th>{}</th>", esc(h));
    }
    o.push_str("</tr>\n");
    for r in rows {
        o.push_str("<tr>");
        for (i, c) in load_cells(r).iter().enumerate() {
            let class = if (5..=12).contains(&i) || i == 14 || i == 16 { " class=\"n\"" } else { "" };
            let _ = write!(o, "<td{class}>{}</td>", esc(c));
        }
        let failed = if r.status == "ok" { "" } else { " class=\"failed\"" };
        let _ = writeln!(o, "<td{failed}>{}</td></tr>", esc(&status_cell(r)));
    }
    o.push_str("</table></div>\n<h2>Load charts</h2>\n");
    let closed = rows.iter().any(|r| r.mode == "closed");
    if closed {
        let where_ = format!("({place})");
        chart_or_note(
            o,
            charts::lines(
                &format!("Throughput vs workers {where_}"),
                "workers (log scale)",
                "req/s",
                &series_over_workers(rows, |r| r.throughput_rps),
                &|y| rate_number(y),
            ),
            "Correct answers per second of the measured window, closed loop (concurrency and http_api), one line per server and transport; a repeated cell at its median.",
        );
        chart_or_note(
            o,
            charts::lines(
                &format!("p99 latency vs workers {where_}"),
                "workers (log scale)",
                "p99 (ms)",
                &series_over_workers(rows, |r| r.p99_ms),
                &|y| format!("{y:.1}"),
            ),
            "99th percentile of correct calls from each cell's histogram, closed loop.",
        );
        chart_or_note(
            o,
            charts::lines(
                &format!("Error rate vs workers {where_}"),
                "workers (log scale)",
                "failed / all calls (%)",
                &series_over_workers(rows, |r| r.error_rate.map(|e| e * 100.0)),
                &|y| format!("{y:.1}%"),
            ),
            "Failed calls over all calls in the window, closed loop (0 is drawn: a flat line at 0 means no errors).",
        );
    }
    for (group, curves) in load_curve_groups(records) {
        chart_or_note(
            o,
            charts::percentiles(&format!("Latency by percentile, {group} ({place})"), &curves),
            &format!(
                "{group}: each server and transport's recorded histogram (repeats pooled), latency (log scale) against \
                 percentile spaced by 1/(1−q); open loop from the intended send time."
            ),
        );
    }
    let rss = rss_load_bars(rows);
    if !rss.is_empty() {
        chart_or_note(
            o,
            charts::bars(&format!("RSS idle vs peak under load, per server ({place})"), "MiB", &rss),
            "Resident memory of the server's process tree before the load (lowest over its cells) and at the largest sample during it (highest over its cells).",
        );
    }
}

/// `History across versions`, when some series has at least [`history::MIN_VERSIONS`] versions:
/// per series its table and steps, then a chart per metric.
fn history_section(o: &mut String, hs: &[History]) {
    let _ = writeln!(
        o,
        "<h2>History across versions</h2>\n<p class=\"note\">{}</p>",
        esc(&history::method_note())
    );
    for h in hs {
        let _ = writeln!(
            o,
            "<h3>{}</h3>\n<p class=\"note\">{} versions, runtime {}.</p>",
            esc(&h.label),
            h.versions.len(),
            esc(&h.runtime_versions.join(", "))
        );
        let _ = write!(o, "<div class=\"wide\"><table>\n<tr><th>{} version</th>", esc(&h.key.family));
        if h.api_changes() {
            o.push_str("<th>api</th>");
        }
        for m in &h.metrics {
            let _ = write!(o, "<th>{}</th>", esc(m.metric.label()));
        }
        if h.any_failure() {
            o.push_str("<th>failed</th>");
        }
        o.push_str("</tr>\n");
        for (vi, v) in h.versions.iter().enumerate() {
            let _ = write!(o, "<tr><td>{}</td>", esc(v));
            if h.api_changes() {
                let _ = write!(o, "<td>{}</td>", esc(&h.apis[vi]));
            }
            for m in &h.metrics {
                match (&m.points[vi], step_at(h, m.metric, vi)) {
                    (None, _) => o.push_str("<td class=\"n\">—</td>"),
                    (Some(p), None) => {
                        let _ = write!(o, "<td class=\"n\">{}</td>", esc(&point_text(m.unit, p)));
                    }
                    (Some(p), Some(s)) => {
                        let _ = write!(
                            o,
                            "<td class=\"n\"{}>{} {}</td>",
                            step_style(s.regression),
                            history::arrow(s),
                            esc(&point_text(m.unit, p))
                        );
                    }
                }
            }
            if h.any_failure() {
                let _ =
                    write!(o, "<td class=\"failed\">{}</td>", esc(h.failures[vi].as_deref().unwrap_or("")));
            }
            o.push_str("</tr>\n");
        }
        o.push_str("</table></div>\n");
        for l in history::control_lines(h) {
            let _ = writeln!(o, "<p class=\"note\">{}</p>", esc(&l));
        }
        if h.steps.is_empty() {
            o.push_str("<p class=\"note\">No step beyond noise.</p>\n");
        } else {
            o.push_str("<ul>\n");
            for s in &h.steps {
                let _ = writeln!(o, "<li{}>{}</li>", step_style(s.regression), esc(&step_line(h, s)));
            }
            o.push_str("</ul>\n");
        }
        for m in &h.metrics {
            history_chart(o, h, m);
        }
    }
}

/// The colour of a step: the page's red for a regression, green for an improvement (a style
/// attribute, so that it goes beside a class).
fn step_style(regression: bool) -> &'static str {
    if regression {
        " style=\"color:#b00020\""
    } else {
        " style=\"color:#2e7d32\""
    }
}

fn history_chart(o: &mut String, h: &History, m: &MetricHistory) {
    let scale = if m.unit == Unit::Bytes { 1.0 / (1024.0 * 1024.0) } else { 1.0 };
    let (y_desc, label): (&str, fn(f64) -> String) = match m.unit {
        Unit::Bytes => ("MiB", |y| format!("{y:.0}")),
        Unit::Rps => ("req/s", |y| rate_number(y)),
        _ => ("ms", |y| {
            let s = format!("{y:.3}");
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        }),
    };
    let points: Vec<Option<VersionPoint>> = m
        .points
        .iter()
        .map(|p| {
            p.as_ref().map(|p| VersionPoint {
                value: p.value * scale,
                ci: p.ci.filter(|i| i.is_finite()).map(|i| (i.lower * scale, i.upper * scale)),
            })
        })
        .collect();
    let levels: Vec<Level> =
        m.segments.iter().map(|s| Level { first: s.first, last: s.last, level: s.level * scale }).collect();
    let steps: Vec<StepMark> = h
        .steps
        .iter()
        .filter(|s| s.metric == m.metric)
        .map(|s| StepMark {
            index: s.index,
            text: format!("{} {} at {}", history::arrow(s), change_text(s.ratio), s.to_version),
            regression: s.regression,
        })
        .collect();
    // Versions without a point of this metric because their cells failed.
    let failed: Vec<FailedMark> = (0..h.versions.len())
        .filter(|&i| m.points[i].is_none() && h.failures[i].is_some())
        .map(|index| FailedMark { index })
        .collect();
    chart_or_note(
        o,
        charts::versions_line(
            &format!("{}: {}", m.metric.label(), h.label),
            y_desc,
            &h.versions,
            &points,
            &levels,
            &steps,
            &failed,
            &label,
        ),
        &format!(
            "{} per SDK version{}; grey dashes are the fitted levels, vertical lines the steps (red a regression, green an improvement), a red cross a version whose cells failed.",
            m.metric.label(),
            if points.iter().flatten().any(|p| p.ci.is_some()) {
                format!(", bars at the {:.0}% interval", CONFIDENCE * 100.0)
            } else {
                String::new()
            }
        ),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup_and_quotes() {
        assert_eq!(esc(r#"<a href="x">'&'</a>"#), "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;");
    }
}
