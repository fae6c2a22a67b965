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
        (Some(m), Some(i)) => {
            // The bounds in the unit `show` gives the estimate (a share in %, bytes in MiB).
            let scale = match r.unit.as_str() {
                "fraction" => 100.0,
                "bytes" => 1.0 / 1_048_576.0,
                _ => 1.0,
            };
            format!("{} [{}–{}]", show(m, &r.unit), num(i.lower * scale), num(i.upper * scale))
        }
        (Some(m), None) => show(m, &r.unit),
        _ => "—".into(),
    }
}

fn tolerance_text(r: &ClaimResult) -> String {
    match r.tolerance {
        Some(t) if r.judged_as.contains(POINTS) => {
            let pp = format!("{:.3}", t * 100.0);
            format!("±{} pp", pp.trim_end_matches('0').trim_end_matches('.'))
        }
        Some(t) => format!("±{:.0}%", t * 100.0),
        None => "—".into(),
    }
}

/// What `judged_as` says of an error rate judged in percentage points.
pub(super) const POINTS: &str = "percentage points";

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
    t.set_header(vec![
        "claim",
        "kind",
        "verdict",
        "claimed",
        "measured [95% CI]",
        "tol",
        "judged as",
        "self-test",
    ]);
    for r in &a.results {
        t.add_row(vec![
            r.id.clone(),
            r.kind.as_str().to_string(),
            format!("{}{}", r.verdict.as_str(), if r.noisy { " (noisy)" } else { "" }),
            claimed_text(r),
            measured_text(r),
            tolerance_text(r),
            r.judged_as.clone(),
            self_test_text(r),
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
    let _ = writeln!(out, "evidence: {}; self-test: {}", evidence_line(a), self_test_line(a));
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

fn self_test_text(r: &ClaimResult) -> String {
    r.self_test.as_ref().map_or("—".into(), |t| t.status.as_str().to_string())
}

fn evidence_line(a: &Audit) -> String {
    let (per, mixed) = super::evidence::counts(&a.evidence);
    let mut parts: Vec<String> = per.iter().map(|(v, n)| format!("{n} {}", v.as_str())).collect();
    parts.push(format!("{mixed} mixed"));
    format!("{} distinct measurement(s): {}", a.evidence.len(), parts.join(", "))
}

fn self_test_line(a: &Audit) -> String {
    use super::selftest::Status;
    let n =
        |s: Status| a.results.iter().filter(|r| r.self_test.as_ref().is_some_and(|t| t.status == s)).count();
    format!(
        "{} can fail, {} cannot fail, {} never decide",
        n(Status::CanFail),
        n(Status::CannotFail),
        n(Status::NeverDecides)
    )
}

const RULES: &str = "Intervals are {conf}%: for a cell that ran two or more times, between runs (Student t on the logarithms of the runs' values, never narrower than the runs' pooled within-run interval, which is shown beside it), and a ratio of two such cells by Welch's t; otherwise bootstrap intervals within one run. A figure is reproduced when its whole interval lies within the claim's tolerance band ([v/(1+t), v·(1+t)]), contradicted when the whole interval lies outside it, inconclusive when it straddles an edge. A figure with no between-run interval (one reading, or one run's histogram) gets no verdict: inconclusive, whatever its value. A soak's share of memory released after its clients left, with connect/disconnect cycles, is the mean over its disconnections with the Student t interval between them (one server process: not between runs). A noisy figure (coefficient of variation over {cv}%) has its interval widened by 1 + CV on each side and is judged by the same rule. Absolute figures from other hardware are judged by the ratio they imply to the reference figure named in the claim. An error rate is judged in percentage points: the band is [v − t, v + t]. A consistency claim relates the source's own figures and is judged from its files alone: consistent is reproduced, inconsistent contradicted. A claim whose condition the lab did not reproduce is not_measured. Self-test: every claim is judged again with its figure halved and doubled (an ordering reversed, an outcome flipped); one that stays reproduced both ways cannot fail, and makes `verify` fail.";

/// The summary an auditor reads first: what reproduced, what did not, and on what evidence.
fn summary(o: &mut String, a: &Audit) {
    let _ = writeln!(o, "## Summary\n");
    let groups: [(&str, Verdict); 4] = [
        ("Reproduced", Verdict::Reproduced),
        ("Contradicted", Verdict::Contradicted),
        ("Not decided (inconclusive)", Verdict::Inconclusive),
        ("Not measured", Verdict::NotMeasured),
    ];
    for (title, v) in groups {
        let rs: Vec<&ClaimResult> = a.results.iter().filter(|r| r.verdict == v).collect();
        let _ = writeln!(o, "**{title}** ({}):\n", rs.len());
        if rs.is_empty() {
            let _ = writeln!(o, "- none\n");
            continue;
        }
        for r in rs {
            let on = r.evidence.as_deref().map_or(String::new(), |e| format!(" — on {}", md(e)));
            let figure = match r.measured {
                Some(_) => format!(" — measured {} against {}", md(&measured_text(r)), md(&claimed_text(r))),
                None => String::new(),
            };
            let _ = writeln!(o, "- [{}](#{}): “{}”{figure}{on}", r.id, r.id.to_lowercase(), md(&r.statement));
        }
        o.push('\n');
    }
    let cf = a.cannot_fail();
    if !cf.is_empty() {
        let ids: Vec<String> = cf.iter().map(|r| format!("`{}`", r.id)).collect();
        let _ = writeln!(
            o,
            "**Cannot fail** (reproduced with the figure halved and doubled): {}\n",
            ids.join(", ")
        );
    }
}

/// Every environment difference the claims' records show, once: computed from the records and
/// the scenario, not written by hand.
fn deviations(o: &mut String, a: &Audit) {
    let mut seen: Vec<&str> = Vec::new();
    for e in a.results.iter().flat_map(|r| &r.environment) {
        if !seen.contains(&e.as_str()) {
            seen.push(e);
        }
    }
    let _ = writeln!(
        o,
        "## Differences from the source (derived from the records and the scenario's [source])\n"
    );
    if seen.is_empty() {
        let _ = writeln!(o, "- none (no claim was measured)\n");
    }
    for e in seen {
        let _ = writeln!(o, "- {}", md(e));
    }
    o.push('\n');
}

/// The Markdown audit report: what was read, the counts, the summary, a table, the evidence, the
/// differences from the source, and every claim explained.
pub fn markdown(a: &Audit) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "# Claims audit: {}\n", a.scenario);
    let rules = RULES
        .replace("{conf}", &format!("{:.0}", a.confidence * 100.0))
        .replace("{cv}", &format!("{:.0}", a.noisy_cv * 100.0));
    let _ = writeln!(
        o,
        "`benchlab verify {}` against {}. Lab host: {}. {rules}\n",
        a.scenario_file,
        run_text(a),
        a.lab_host.as_deref().unwrap_or("—"),
    );
    let _ = writeln!(o, "**{}** claim(s): {}.\n", a.results.len(), counts_line(a));
    let _ = writeln!(o, "**Evidence:** {}.\n", evidence_line(a));
    let _ = writeln!(o, "**Self-test:** {}.\n", self_test_line(a));
    summary(&mut o, a);
    let _ = writeln!(o, "## Every verdict\n");
    let _ = writeln!(
        o,
        "| claim | kind | verdict | claimed | measured [95% CI] | tolerance | judged as | self-test |"
    );
    let _ = writeln!(o, "|---|---|---|---|---|---|---|---|");
    for r in &a.results {
        let _ = writeln!(
            o,
            "| [{}](#{}) | {} | **{}**{} | {} | {} | {} | {} | {} |",
            r.id,
            r.id.to_lowercase(),
            r.kind.as_str(),
            r.verdict.as_str(),
            if r.noisy { " (noisy)" } else { "" },
            md(&claimed_text(r)),
            md(&measured_text(r)),
            tolerance_text(r),
            md(&r.judged_as),
            self_test_text(r)
        );
    }
    let _ = writeln!(o, "\n## Evidence: verdicts per distinct measurement\n");
    let _ = writeln!(o, "| measurement | claims | verdict |");
    let _ = writeln!(o, "|---|---|---|");
    for e in &a.evidence {
        let ids: Vec<String> = e.claims.iter().map(|c| format!("`{c}`")).collect();
        let _ = writeln!(
            o,
            "| {} | {} ({}) | {} |",
            md(&e.key),
            ids.join(", "),
            e.claims.len(),
            e.verdict_text()
        );
    }
    o.push('\n');
    deviations(&mut o, a);
    let _ = writeln!(o, "## Every claim\n");
    for r in &a.results {
        let _ = writeln!(o, "### {}\n", r.id);
        let _ = writeln!(o, "- **Source:** {}", md(&source_text(r)));
        for c in &r.source.cited {
            let _ = writeln!(
                o,
                "- **Published figure:** `{}` at `{}` = {} in {} at commit {} (file sha256 {})",
                c.pointer,
                c.file,
                c.value,
                md(&c.git),
                c.commit,
                c.sha256
            );
        }
        let _ = writeln!(o, "- **Statement:** “{}”", md(&r.statement));
        let _ = writeln!(o, "- **Verdict:** **{}** ({})", r.verdict.as_str(), md(&r.judged_as));
        let _ = writeln!(o, "- **Why:** {}", md(&r.explanation));
        if let Some(t) = &r.self_test {
            let _ = writeln!(
                o,
                "- **Self-test:** {} (halved: {}, doubled: {}, interval ×3: {})",
                t.status.as_str(),
                t.halved.as_str(),
                t.doubled.as_str(),
                t.widened.as_str()
            );
        }
        if let Some(e) = &r.evidence {
            let _ = writeln!(o, "- **Evidence:** {}", md(e));
        }
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
