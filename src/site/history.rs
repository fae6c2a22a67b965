//! A history page: every series of one family × runtime × transport (split by workload,
//! placement, server environment and host class), one chart per metric drawn by the page's
//! script from the data inline (points with 95 % intervals, the fitted levels, the named steps;
//! hover or click a point for its release, lock and records), a workload filter, metric and
//! percentile switches, and two releases compared side by side. Every choice is kept in the
//! address, so each view has a permalink.

use std::fmt::Write as _;

use serde::Serialize;

use crate::report::esc;
use crate::report::history::{compare_versions, method_note};

use super::model::{series_json, PageKey, Series, SeriesJson, THRESHOLD_PCT};

#[derive(Serialize)]
struct PageData<'a> {
    threshold_pct: f64,
    versions: Vec<&'a str>,
    series: Vec<SeriesJson<'a>>,
}

fn select(o: &mut String, id: &str, label: &str, options: &[(String, String)]) {
    let _ = write!(o, "<label>{label} <select id=\"{id}\">");
    for (value, text) in options {
        let _ = write!(o, "<option value=\"{}\">{}</option>", esc(value), esc(text));
    }
    o.push_str("</select></label> ");
}

pub(super) fn history_page(key: &PageKey, series: &[&Series]) -> String {
    // Longest histories first: a sweep's series before the single releases of reproductions.
    let mut series = series.to_vec();
    series.sort_by_key(|s| std::cmp::Reverse(s.history.versions.len()));
    let series = &series[..];
    let mut versions: Vec<&str> =
        series.iter().flat_map(|s| s.history.versions.iter().map(String::as_str)).collect();
    versions.sort_by(|a, b| compare_versions(a, b));
    versions.dedup();
    let mut workloads: Vec<&str> = series.iter().map(|s| s.history.key.workload.as_str()).collect();
    workloads.sort_unstable();
    workloads.dedup();
    let mut metrics: Vec<(String, String)> = vec![("all".into(), "all".into())];
    for s in series {
        for m in &s.history.metrics {
            let p = super::front::metric_param(m.metric);
            let label = if p == "call" { "call latency" } else { m.metric.label() };
            if !metrics.iter().any(|(v, _)| v == p) {
                metrics.push((p.to_string(), label.to_string()));
            }
        }
    }
    let mut o = String::new();
    let _ = writeln!(o, "<h1>{}</h1>", esc(&key.title()));
    let hosts: Vec<&str> = {
        let mut h: Vec<&str> = series.iter().map(|s| s.host.as_str()).collect();
        h.sort_unstable();
        h.dedup();
        h
    };
    let _ = writeln!(
        o,
        "<p>{} series over {} releases, on {}.</p>",
        series.len(),
        versions.len(),
        esc(&hosts.join("; "))
    );
    o.push_str("<form class=\"controls\">");
    let mut w: Vec<(String, String)> = vec![(String::new(), "all".into())];
    w.extend(workloads.iter().map(|x| (x.to_string(), x.to_string())));
    select(&mut o, "f-workload", "workload", &w);
    select(&mut o, "metric", "metric", &metrics);
    select(&mut o, "pct", "percentile", &[("p50".into(), "p50".into()), ("p99".into(), "p99".into())]);
    o.push_str("</form>\n");
    o.push_str("<h2>Compare two releases</h2>\n<form class=\"controls\">");
    let vs: Vec<(String, String)> = versions.iter().map(|v| (v.to_string(), v.to_string())).collect();
    select(&mut o, "cmp-a", "a", &vs);
    select(&mut o, "cmp-b", "b", &vs);
    let _ = writeln!(
        o,
        "</form>\n<div id=\"cmp-out\"></div>\n<p class=\"note\">b/a per series and metric, with the 95 % interval \
         <code>benchlab compare</code> would give two runs: between runs (Welch's t on the logarithms, never narrower \
         than within) when both releases ran two or more times, else MOVER from the two points' intervals. Slower \
         when the interval lies above {t1:.2}, faster below 1/{t1:.2}, unchanged inside, inconclusive across a bound \
         (threshold {THRESHOLD_PCT} %; throughput is higher-is-better).</p>",
        t1 = 1.0 + THRESHOLD_PCT / 100.0
    );
    o.push_str("<div id=\"detail\" class=\"detail\" hidden></div>\n<div id=\"charts\"></div>\n");
    let _ = writeln!(o, "<h2>How steps are found</h2>\n<p class=\"note\">{}</p>", esc(&method_note()));
    let data = PageData {
        threshold_pct: THRESHOLD_PCT,
        versions,
        series: series.iter().map(|s| series_json(s)).collect(),
    };
    let json = serde_json::to_string(&data).expect("page data serialises");
    super::pages::layout("history", 1, &key.title(), &o, Some(json))
}
