//! The site's front page: what the site holds, the newest steps the history rule found, the
//! claims audits' verdict counts, each series' figures at its newest release (filterable by
//! family, runtime, transport and workload, the filters kept in the address as a permalink), the
//! history pages and every run.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use crate::claims::{Audit, Verdict};
use crate::report::compare::text::value_text;
use crate::report::esc;
use crate::report::history::{step_line, HistoryMetric};

use super::model::{PageKey, Series};
use super::pages::{audit_path, compare_path, layout, run_path};
use super::RunInput;

const SHOWN_STEPS: usize = 6;

/// `<select id="f-NAME">` of the values, all first.
fn filter_select(o: &mut String, name: &str, label: &str, values: &BTreeSet<&str>) {
    let _ = write!(
        o,
        "<label>{label} <select id=\"f-{name}\" data-filter=\"{name}\"><option value=\"\">all</option>"
    );
    for v in values {
        let _ = write!(o, "<option value=\"{0}\">{0}</option>", esc(v));
    }
    o.push_str("</select></label> ");
}

fn newest_steps(o: &mut String, series: &[Series]) {
    let mut steps: Vec<(&Series, &crate::report::Step)> =
        series.iter().flat_map(|s| s.history.steps.iter().map(move |st| (s, st))).collect();
    steps.sort_by(|a, b| b.0.newest.cmp(&a.0.newest).then(b.1.index.cmp(&a.1.index)));
    let _ = writeln!(o, "<h2>Newest steps ({} found by the history rule)</h2>", steps.len());
    if steps.is_empty() {
        o.push_str("<p>No series moved beyond noise between releases.</p>\n");
        return;
    }
    o.push_str("<ul class=\"steps\">\n");
    for (k, (s, st)) in steps.iter().enumerate() {
        if k == SHOWN_STEPS {
            let _ = write!(
                o,
                "</ul>\n<details><summary>{} older steps</summary><ul class=\"steps\">\n",
                steps.len() - k
            );
        }
        let class = if st.regression { "regression" } else { "improvement" };
        let _ = writeln!(
            o,
            "<li class=\"{class}\"><a href=\"{}#metric={}\">{}</a> — {} <span class=\"note\">({}; {})</span></li>",
            s.page.path(),
            metric_param(st.metric),
            esc(&s.page.title()),
            esc(&step_line(&s.history, st)),
            esc(&s.history.key.workload),
            esc(&s.host)
        );
    }
    o.push_str("</ul>\n");
    if steps.len() > SHOWN_STEPS {
        o.push_str("</details>\n");
    }
}

/// The history page's `#metric` value of a metric (both call percentiles are `call`).
pub(super) fn metric_param(m: HistoryMetric) -> &'static str {
    match m {
        HistoryMetric::CallP50 | HistoryMetric::CallP99 => "call",
        m => m.as_str(),
    }
}

fn audits(o: &mut String, audits: &[Audit]) {
    if audits.is_empty() {
        return;
    }
    o.push_str(
        "<h2>Audits of published claims</h2>\n<div class=\"wide\"><table><thead><tr><th>scenario</th>",
    );
    for v in Verdict::ALL {
        let _ = write!(o, "<th>{}</th>", v.as_str().replace('_', " "));
    }
    o.push_str("<th>cannot fail</th></tr></thead><tbody>\n");
    for a in audits {
        let _ = write!(o, "<tr><td><a href=\"{}\">{}</a></td>", audit_path(&a.scenario), esc(&a.scenario));
        for v in Verdict::ALL {
            let _ = write!(o, "<td class=\"n\">{}</td>", a.count(v));
        }
        let _ = writeln!(o, "<td class=\"n\">{}</td></tr>", a.cannot_fail().len());
    }
    o.push_str("</tbody></table></div>\n");
}

const LATEST_METRICS: [HistoryMetric; 5] = [
    HistoryMetric::ColdStart,
    HistoryMetric::CallP50,
    HistoryMetric::CallP99,
    HistoryMetric::Throughput,
    HistoryMetric::RssAfterInitialize,
];

fn latest(o: &mut String, series: &[Series]) {
    let set = |f: fn(&Series) -> &str| -> BTreeSet<&str> { series.iter().map(f).collect() };
    o.push_str("<h2>Latest figures</h2>\n<form class=\"controls\">");
    filter_select(o, "family", "family", &set(|s| &s.page.family));
    filter_select(o, "runtime", "runtime", &set(|s| &s.page.runtime));
    filter_select(o, "transport", "transport", &set(|s| &s.page.transport));
    filter_select(o, "workload", "workload", &set(|s| &s.history.key.workload));
    o.push_str("<span id=\"shown\" class=\"note\"></span></form>\n");
    o.push_str(
        "<p class=\"note\">Each series at its newest release: medians, with 95 % intervals on its history page. \
         A series is one server family × runtime × transport × workload × placement × server environment on one \
         host class; figures from different host classes are never one line.</p>\n",
    );
    o.push_str("<div class=\"wide\"><table id=\"latest\" class=\"filterable\"><thead><tr><th>series</th><th>release</th>");
    for m in LATEST_METRICS {
        let _ = write!(o, "<th>{}</th>", m.label());
    }
    o.push_str("</tr></thead><tbody>\n");
    for s in series {
        let h = &s.history;
        let Some(last) =
            (0..h.versions.len()).rev().find(|&i| h.metrics.iter().any(|m| m.points[i].is_some()))
        else {
            continue;
        };
        let _ = write!(
            o,
            "<tr data-family=\"{}\" data-runtime=\"{}\" data-transport=\"{}\" data-workload=\"{}\">\
             <td><a href=\"{}\">{}</a> <span class=\"note\">{} · cpus {}/{}{}</span></td><td>{}</td>",
            esc(&s.page.family),
            esc(&s.page.runtime),
            esc(&s.page.transport),
            esc(&h.key.workload),
            s.page.path(),
            esc(&s.page.title()),
            esc(&h.key.workload),
            esc(&h.key.server_cpus),
            esc(&h.key.driver_cpus),
            if h.key.env.is_empty() { String::new() } else { format!(" · {}", esc(&h.key.env)) },
            esc(&h.versions[last])
        );
        for want in LATEST_METRICS {
            let point = h.metrics.iter().find(|m| m.metric == want).and_then(|m| m.points[last].as_ref());
            match point {
                Some(p) => {
                    let _ = write!(o, "<td class=\"n\">{}</td>", esc(&value_text(want.unit(), p.value)));
                }
                None => o.push_str("<td class=\"n\">—</td>"),
            }
        }
        o.push_str("</tr>\n");
    }
    o.push_str("</tbody></table></div>\n");
}

fn history_list(o: &mut String, pages: &[(PageKey, Vec<&Series>)]) {
    o.push_str("<h2>Histories</h2>\n<ul id=\"histories\" class=\"filterable cols\">\n");
    for (page, series) in pages {
        let versions = series.iter().map(|x| x.history.versions.len()).max().unwrap_or(0);
        let _ = writeln!(
            o,
            "<li data-family=\"{}\" data-runtime=\"{}\" data-transport=\"{}\"><a href=\"{}\">{}</a> \
             <span class=\"note\">{} series, up to {versions} releases</span></li>",
            esc(&page.family),
            esc(&page.runtime),
            esc(&page.transport),
            page.path(),
            esc(&page.title()),
            series.len()
        );
    }
    o.push_str("</ul>\n");
}

fn run_list(o: &mut String, runs: &[RunInput]) {
    o.push_str(
        "<h2>Runs</h2>\n<div class=\"wide\"><table><thead><tr><th>scenario</th><th>run</th><th>records</th>\
         <th>not as expected</th><th>host</th></tr></thead><tbody>\n",
    );
    for r in runs.iter().rev() {
        let off = r.records.iter().filter(|x| !x.as_expected()).count();
        let compare = match runs.iter().filter(|x| x.scenario == r.scenario).count() >= 2 {
            true => format!(" <a class=\"note\" href=\"{}\">compare</a>", compare_path(&r.scenario)),
            false => String::new(),
        };
        let host = r.records.first().map(super::host_class).unwrap_or_default();
        let damaged = if r.damaged.is_some() { " <span class=\"failed\">store damaged</span>" } else { "" };
        let _ = writeln!(
            o,
            "<tr><td>{}{compare}</td><td><a href=\"{}\">{}</a>{damaged}</td><td class=\"n\">{}</td>\
             <td class=\"n\">{off}</td><td>{}</td></tr>",
            esc(&r.scenario),
            run_path(&r.scenario, &r.id),
            esc(&r.id),
            r.records.len(),
            esc(&host)
        );
    }
    o.push_str("</tbody></table></div>\n");
}

pub(super) fn front_page(
    runs: &[RunInput],
    series: &[Series],
    pages: &[(PageKey, Vec<&Series>)],
    audit_list: &[Audit],
) -> String {
    let mut o = String::new();
    let records: usize = runs.iter().map(|r| r.records.len()).sum();
    let hosts: BTreeSet<String> = series.iter().map(|s| s.host.clone()).collect();
    let scenarios: BTreeSet<&str> = runs.iter().map(|r| r.scenario.as_str()).collect();
    let _ = writeln!(
        o,
        "<h1>benchlab results</h1>\n<p>{} runs of {} scenarios, {records} records, {} series on {} host \
         class(es): {}.</p>",
        runs.len(),
        scenarios.len(),
        series.len(),
        hosts.len(),
        esc(&hosts.into_iter().collect::<Vec<_>>().join("; "))
    );
    newest_steps(&mut o, series);
    audits(&mut o, audit_list);
    latest(&mut o, series);
    history_list(&mut o, pages);
    run_list(&mut o, runs);
    layout("front", 0, "benchlab results", &o, None)
}
