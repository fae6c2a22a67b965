//! Renderers of a claims audit: the terminal table, JSON and the Markdown audit report (AUDIT.md).
//! Pure: an [`Audit`] in, text out.

use std::fmt::Write as _;

use comfy_table::{presets::UTF8_FULL_CONDENSED, ContentArrangement, Table};

use super::{num, show, Audit, ClaimResult, Verdict};

fn claimed_text(r: &ClaimResult) -> String {
    match (r.claimed, r.kind) {
        (Some(c), _) => show(c, &r.unit),
        (None, super::Kind::Ordering) => "ordered as listed".into(),
        _ => "—".into(),
    }
}

fn measured_text(r: &ClaimResult) -> String {
    match (r.measured, &r.interval) {
        (Some(m), Some(i)) => format!("{} [{}–{}]", show(m, &r.unit), num(i.lower), num(i.upper)),
        (Some(m), None) => show(m, &r.unit),
        _ => "—".into(),
    }
}

fn tolerance_text(r: &ClaimResult) -> String {
    r.tolerance.map_or("—".into(), |t| format!("±{:.0}%", t * 100.0))
}

fn source_text(r: &ClaimResult) -> String {
    let mut s = format!("{} § {}", r.source.file, r.source.section);
    if let Some(row) = &r.source.row {
        let _ = write!(s, " / {row}");
    }
    s
}

fn counts_line(a: &Audit) -> String {
    Verdict::ALL.iter().map(|v| format!("{} {}", a.count(*v), v.as_str())).collect::<Vec<_>>().join(", ")
}

/// The terminal table, then the counts.
pub fn table(a: &Audit) -> String {
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED).set_content_arrangement(ContentArrangement::Dynamic);
    t.set_header(vec!["claim", "kind", "verdict", "claimed", "measured [95% CI]", "tol", "judged as"]);
    for r in &a.results {
        t.add_row(vec![
            r.id.clone(),
            r.kind.as_str().to_string(),
            format!("{}{}", r.verdict.as_str(), if r.noisy { " (noisy)" } else { "" }),
            claimed_text(r),
            measured_text(r),
            tolerance_text(r),
            r.judged_as.clone(),
        ]);
    }
    let mut out = format!("{t}\n");
    let _ = writeln!(
        out,
        "{}: {} claim(s) against {}: {}",
        a.scenario,
        a.results.len(),
        run_text(a),
        counts_line(a)
    );
    out
}

fn run_text(a: &Audit) -> String {
    match (&a.run, a.records) {
        (Some(run), n) if n > 0 => format!("{run} ({n} records)"),
        (Some(run), _) => format!("{run} (no records)"),
        (None, _) => "no run (the scenario has no run with records yet)".into(),
    }
}

pub fn json(a: &Audit) -> String {
    let mut s = serde_json::to_string_pretty(a).expect("audits serialise");
    s.push('\n');
    s
}

fn md(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

/// The Markdown audit report: what was read, the counts, a table, and every claim explained.
pub fn markdown(a: &Audit) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "# Claims audit: {}\n", a.scenario);
    let _ = writeln!(
        o,
        "`benchlab verify {}` against {}. Lab host: {}. Intervals are {:.0}% bootstrap intervals; a cell whose coefficient of variation exceeds {:.0}% is flagged noisy and its claims are never contradicted, only inconclusive. A figure is reproduced when its whole interval lies within the claim's tolerance band ([v/(1+t), v·(1+t)]), contradicted when the whole interval lies outside it. Absolute figures from other hardware are judged by the ratio they imply to the reference figure named in the claim.\n",
        a.scenario_file,
        run_text(a),
        a.lab_host.as_deref().unwrap_or("—"),
        a.confidence * 100.0,
        a.noisy_cv * 100.0
    );
    let _ = writeln!(o, "**{}** claim(s): {}.\n", a.results.len(), counts_line(a));
    let _ = writeln!(o, "| claim | kind | verdict | claimed | measured [95% CI] | tolerance | judged as |");
    let _ = writeln!(o, "|---|---|---|---|---|---|---|");
    for r in &a.results {
        let _ = writeln!(
            o,
            "| [{}](#{}) | {} | **{}**{} | {} | {} | {} | {} |",
            r.id,
            r.id.to_lowercase(),
            r.kind.as_str(),
            r.verdict.as_str(),
            if r.noisy { " (noisy)" } else { "" },
            md(&claimed_text(r)),
            md(&measured_text(r)),
            tolerance_text(r),
            md(&r.judged_as)
        );
    }
    let _ = writeln!(o, "\n## Every claim\n");
    for r in &a.results {
        let _ = writeln!(o, "### {}\n", r.id);
        let _ = writeln!(o, "- **Source:** {}", md(&source_text(r)));
        let _ = writeln!(o, "- **Statement:** “{}”", md(&r.statement));
        let _ = writeln!(o, "- **Verdict:** **{}** ({})", r.verdict.as_str(), md(&r.judged_as));
        let _ = writeln!(o, "- **Why:** {}", md(&r.explanation));
        if !r.cells.is_empty() {
            let _ = writeln!(
                o,
                "- **Cells:** {}",
                r.cells.iter().map(|c| format!("`{c}`")).collect::<Vec<_>>().join(", ")
            );
        }
        if !r.environment.is_empty() {
            let _ = writeln!(o, "- **Environment differences that could explain a gap:**");
            for e in &r.environment {
                let _ = writeln!(o, "  - {}", md(e));
            }
        }
        o.push('\n');
    }
    o
}
