//! The site's shared layout (head, top bar, the page's data as inline JSON, the script) and its
//! smaller pages: a scenario's claims audit (verdicts grouped by the evidence they rest on, the
//! source's words beside the lab's figure), the compare page of a scenario's runs (every ordered
//! pair judged by `benchlab compare`, one shown at a time) and each run's own report.

use std::fmt::Write as _;

use crate::claims::{self, Audit, ClaimResult};
use crate::report::compare::{self, text as ct, Comparison};
use crate::report::esc;

use super::model::slug;
use super::RunInput;

/// One page: `depth` folders below the site's root, `kind` in `body[data-page]`, the page's
/// data (JSON) inline when it has any.
pub(super) fn layout(kind: &str, depth: usize, title: &str, body: &str, data: Option<String>) -> String {
    let up = "../".repeat(depth);
    let mut o = String::with_capacity(body.len() + 1024);
    let _ = write!(
        o,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{} · benchlab results</title>\n<link rel=\"stylesheet\" href=\"{up}site.css\">\n</head>\n\
         <body data-page=\"{kind}\">\n<header class=\"top\"><a href=\"{up}index.html\">benchlab results</a>\
         {}</header>\n<main>\n{body}</main>\n",
        esc(title),
        if depth == 0 { String::new() } else { format!("<span>{}</span>", esc(title)) }
    );
    if let Some(json) = data {
        // `<` only occurs inside JSON strings, where \u003c is the same character.
        let _ = writeln!(
            o,
            "<script type=\"application/json\" id=\"data\">{}</script>",
            json.replace('<', "\\u003c")
        );
    }
    let _ = write!(o, "<script src=\"{up}site.js\"></script>\n</body>\n</html>\n");
    o
}

pub(super) fn audit_path(scenario: &str) -> String {
    format!("audit/{}.html", slug(scenario))
}

pub(super) fn compare_path(scenario: &str) -> String {
    format!("compare/{}.html", slug(scenario))
}

pub(super) fn run_path(scenario: &str, run: &str) -> String {
    format!("runs/{}/{}.html", slug(scenario), slug(run))
}

fn figure(r: &ClaimResult, v: Option<f64>) -> String {
    v.map_or("—".into(), |v| claims::show(v, &r.unit))
}

fn measured_text(r: &ClaimResult) -> String {
    let mut s = figure(r, r.measured);
    if let Some(i) = r.interval {
        let _ = write!(s, " [{} – {}]", claims::show(i.lower, &r.unit), claims::show(i.upper, &r.unit));
    }
    if r.noisy {
        s.push_str(" noisy");
    }
    s
}

fn claim_rows(o: &mut String, results: &[&ClaimResult]) {
    o.push_str(
        "<div class=\"wide\"><table class=\"claims\"><thead><tr><th>claim</th><th>the source says</th>\
         <th>claimed</th><th>the lab measured (95 %)</th><th>verdict</th><th>why</th></tr></thead><tbody>\n",
    );
    for r in results {
        let selftest =
            r.self_test.as_ref().map_or(String::new(), |t| format!(" · self-test: {}", t.status.as_str()));
        let _ = writeln!(
            o,
            "<tr id=\"{}\"><td><code>{}</code></td><td>“{}”<br><span class=\"note\">{} § {}</span></td>\
             <td class=\"n\">{}</td><td class=\"n\">{}</td><td><span class=\"v v-{}\">{}</span></td>\
             <td>{}<br><span class=\"note\">judged as {}{}</span></td></tr>",
            esc(&r.id),
            esc(&r.id),
            esc(&r.statement),
            esc(&r.source.file),
            esc(&r.source.section),
            esc(&figure(r, r.claimed)),
            esc(&measured_text(r)),
            r.verdict.as_str(),
            r.verdict.as_str(),
            esc(&r.explanation),
            esc(&r.judged_as),
            esc(&selftest)
        );
    }
    o.push_str("</tbody></table></div>\n");
}

/// A scenario's claims audit: the counts, then per distinct measurement its verdict and claims.
pub(super) fn audit_page(a: &Audit, runs: &[RunInput]) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "<h1>Claims audit: {}</h1>", esc(&a.scenario));
    let run_id = a.run.as_deref().and_then(|p| p.rsplit('/').next()).unwrap_or("");
    let run_link = match runs.iter().find(|r| r.id == run_id && r.scenario == a.scenario) {
        Some(r) => format!("<a href=\"../{}\">{}</a>", run_path(&r.scenario, &r.id), esc(&r.id)),
        None => esc(run_id),
    };
    let _ = writeln!(
        o,
        "<p><code>benchlab verify</code> of {} against run {run_link} ({} records; lab host {}).</p>",
        esc(&a.scenario_file),
        a.records,
        esc(a.lab_host.as_deref().unwrap_or("—"))
    );
    let counts: Vec<String> =
        claims::Verdict::ALL.iter().map(|v| format!("{} {}", a.count(*v), v.as_str())).collect();
    let _ = writeln!(o, "<p><strong>{}</strong> claims: {}.</p>", a.results.len(), counts.join(", "));
    let cannot = a.cannot_fail();
    if !cannot.is_empty() {
        let ids: Vec<&str> = cannot.iter().map(|r| r.id.as_str()).collect();
        let _ = writeln!(
            o,
            "<p class=\"failed\">Claims that cannot fail (self-test): {}</p>",
            esc(&ids.join(", "))
        );
    }
    let _ = writeln!(o, "<h2>By evidence ({} distinct measurements)</h2>", a.evidence.len());
    for e in &a.evidence {
        let verdict = e.verdict_text();
        let _ = writeln!(o, "<h3><span class=\"v v-{verdict}\">{verdict}</span> {}</h3>", esc(&e.key));
        let results: Vec<&ClaimResult> = a.results.iter().filter(|r| e.claims.contains(&r.id)).collect();
        claim_rows(&mut o, &results);
    }
    let rest: Vec<&ClaimResult> = a.results.iter().filter(|r| r.evidence.is_none()).collect();
    if !rest.is_empty() {
        o.push_str("<h2>Findings and claims on no measurement</h2>\n");
        claim_rows(&mut o, &rest);
    }
    let _ = writeln!(
        o,
        "<p class=\"note\">Intervals are {:.0} %. A figure is reproduced when its whole interval lies within the \
         claim's tolerance band, contradicted when it lies wholly outside, inconclusive when it straddles an edge; a \
         figure with a coefficient of variation over {:.0} % is widened by it first. Every claim is judged again \
         with its figure halved and doubled: one that stays reproduced both ways cannot fail.</p>",
        a.confidence * 100.0,
        a.noisy_cv * 100.0
    );
    layout("audit", 1, &format!("audit: {}", a.scenario), &o, None)
}

fn comparison_html(c: &Comparison) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "<p>{}</p>", esc(&ct::hosts_text(c)));
    let _ = writeln!(o, "<p>{} cells compared: {}.</p>", c.cells.len(), esc(&ct::counts_text(c)));
    o.push_str(
        "<div class=\"wide\"><table><thead><tr><th>cell</th><th>metric</th><th>a</th><th>b</th><th>b/a</th>\
         <th>95 % interval</th><th>verdict</th></tr></thead><tbody>\n",
    );
    for m in c.metrics() {
        let verdict = m.verdict.label(m.unit);
        let _ = writeln!(
            o,
            "<tr><td><code>{}</code></td><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>\
             <td class=\"n\">{}</td><td class=\"n\">{}</td><td><span class=\"v v-{}\">{verdict}</span></td></tr>",
            esc(&m.cell),
            esc(m.metric.label()),
            esc(&ct::value_text(m.unit, m.a)),
            esc(&ct::value_text(m.unit, m.b)),
            esc(&ct::ratio_cell(m)),
            esc(&ct::ratio_interval_text(m)),
            m.verdict.as_str()
        );
    }
    o.push_str("</tbody></table></div>\n");
    let list = |o: &mut String, what: &str, items: Vec<String>| {
        if !items.is_empty() {
            let _ = writeln!(
                o,
                "<details><summary>{what}: {}</summary><p>{}</p></details>",
                items.len(),
                esc(&items.join(", "))
            );
        }
    };
    list(&mut o, "Cells only in a", c.only_in_a.clone());
    list(&mut o, "Cells only in b", c.only_in_b.clone());
    list(
        &mut o,
        "Cells failed in a run",
        c.failed.iter().map(|f| format!("{} ({} / {})", f.cell, f.status_a, f.status_b)).collect(),
    );
    list(&mut o, "Environment differences of every cell", c.env_common.iter().map(ct::diff_line).collect());
    let _ = writeln!(o, "<p class=\"note\">{}</p>", esc(&ct::rule_text(c)));
    o
}

/// Every ordered pair of a scenario's runs compared; the script shows the chosen pair.
pub(super) fn compare_page(scenario: &str, runs: &[&RunInput]) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "<h1>Compare runs: {}</h1>", esc(scenario));
    let options: String =
        runs.iter().map(|r| format!("<option value=\"{0}\">{0}</option>", esc(&r.id))).collect();
    let _ = writeln!(
        o,
        "<form class=\"controls\"><label>a <select id=\"run-a\">{options}</select></label> \
         <label>b <select id=\"run-b\">{options}</select></label></form>\n\
         <p class=\"note\">Each pair is judged as <code>benchlab compare a b</code> does (threshold {} %).</p>\n\
         <div id=\"cmp-out\"></div>",
        compare::DEFAULT_THRESHOLD_PCT
    );
    // The pair shown first: the one with the most cells in common, the newest among equals.
    let mut best = (0, 0, 0);
    for (i, a) in runs.iter().enumerate() {
        for (j, b) in runs.iter().enumerate() {
            if i != j {
                let c = compare::compare(&a.records, &b.records, compare::DEFAULT_THRESHOLD_PCT);
                if i < j && c.cells.len() >= best.0 {
                    best = (c.cells.len(), i, j);
                }
                let _ = writeln!(o, "<template id=\"cmp-{i}-{j}\">{}</template>", comparison_html(&c));
            }
        }
    }
    let ids: Vec<&str> = runs.iter().map(|r| r.id.as_str()).collect();
    let json = serde_json::json!({ "runs": ids, "first": [best.1, best.2] }).to_string();
    layout("compare", 1, &format!("compare: {scenario}"), &o, Some(json))
}

/// A run's own report (`benchlab report --format html`) with the site's way back on top.
pub(super) fn run_page(r: &RunInput) -> String {
    let report = crate::report::html(&r.records);
    let mut nav = format!(
        "<body data-page=\"run\">\n<p class=\"note\"><a href=\"../../index.html\">benchlab results</a> · scenario {} · \
         run {}</p>\n",
        esc(&r.scenario),
        esc(&r.id)
    );
    if let Some(d) = &r.damaged {
        let _ = writeln!(nav, "<p class=\"failed\">This run's store does not audit clean: {}</p>", esc(d));
    }
    report.replacen("<body>\n", &nav, 1)
}
