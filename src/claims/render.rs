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
        "flips at",
        "self-test",
    ]);
    for r in &a.results {
        t.add_row(vec![
            r.id.clone(),
            r.kind.as_str().to_string(),
            r.verdict_text(),
            claimed_text(r),
            measured_text(r),
            tolerance_text(r),
            r.judged_as.clone(),
            margin_text(r),
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
    let _ = writeln!(out, "{}", gate_line(a));
    if a.damaged() {
        let _ = writeln!(out, "{}", damage_line(a));
    }
    out
}

/// The exit gate and what it caught: `verify`'s exit code, said.
pub fn gate_line(a: &Audit) -> String {
    let parts: Vec<String> =
        a.gate.iter().map(|g| format!("{} ({} caught)", g.as_str(), g.caught(a))).collect();
    format!("exit gate: --fail-on {} → exit {}", parts.join(", "), a.exit_code())
}

fn damage_line(a: &Audit) -> String {
    let bad: Vec<String> = a.runs.iter().filter_map(|r| r.damage.clone()).collect();
    format!(
        "DAMAGED STORE, judged anyway (--allow-damaged): {}. Its records may not be what was measured.",
        bad.join("; ")
    )
}

/// Where a band verdict would flip: `±13.2% (0.4% inside)`.
fn margin_text(r: &ClaimResult) -> String {
    let Some(m) = &r.margin else { return "—".into() };
    let pts = r.judged_as.contains(POINTS);
    let amount = |x: f64| if pts { format!("{} pp", num(x * 100.0)) } else { format!("{}%", num(x * 100.0)) };
    let at = match (m.flips_at, m.flips_to) {
        (Some(f), Some(to)) => format!("±{} → {}", amount(f), to.as_str()),
        _ => "never".into(),
    };
    let edge = match (m.edge_distance, r.verdict) {
        (Some(d), Verdict::Reproduced) => format!(" ({} inside)", amount(d)),
        (Some(d), _) => format!(" ({} outside)", amount(d)),
        _ => String::new(),
    };
    format!("{at}{edge}{}", if m.marginal { ", marginal" } else { "" })
}

/// A normalised figure side by side: raw, reference, ratio, normalised.
fn normalised_text(r: &ClaimResult) -> Option<String> {
    let n = r.normalised.as_ref()?;
    let interval = n
        .normalised_interval
        .map_or(String::new(), |i| format!(" [{}–{}]", show(i.lower, &n.unit), show(i.upper, &n.unit)));
    Some(format!(
        "raw: lab {} vs source {}; reference {}: lab {} vs source {}; ratio: lab {} vs source {}; normalised: lab {}{interval} vs source {}",
        show(n.raw_measured, &n.unit),
        show(n.raw_claimed, &n.unit),
        n.reference,
        show(n.reference_measured, &n.unit),
        show(n.reference_claimed, &n.unit),
        show(n.ratio_measured, "ratio"),
        show(n.ratio_claimed, "ratio"),
        show(n.normalised, &n.unit),
        show(n.raw_claimed, &n.unit)
    ))
}

fn disagreeing_text(r: &ClaimResult) -> String {
    let runs: Vec<String> = r
        .disagreeing_runs
        .iter()
        .map(|d| {
            let m = d.measured.map_or(String::new(), |m| format!(", measured {}", show(m, &r.unit)));
            format!("{} alone: {}{m}", d.run_id, d.verdict.as_str())
        })
        .collect();
    runs.join("; ")
}

fn run_text(a: &Audit) -> String {
    match (&a.run, a.records) {
        (Some(_), n) if n > 0 && a.runs.len() > 1 => {
            let each: Vec<String> =
                a.runs.iter().map(|r| match r.stored > r.records {
                    true => format!("{} ({} of its {} records: the cells that ran the newest run's image on a host of its CPU)", r.run_id, r.records, r.stored),
                    false => format!("{} ({} records)", r.run_id, r.records),
                }).collect();
            format!("{} runs judged together ({n} records: {})", a.runs.len(), each.join(", "))
        }
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

const RULES: &str = "Intervals are {conf}%: for a cell that ran two or more times, between runs (Student t on the logarithms of the runs' values, never narrower than the runs' pooled within-run interval, which is shown beside it), and a ratio of two such cells by Welch's t; otherwise bootstrap intervals within one run. A figure is reproduced when its whole interval lies within the claim's tolerance band ([v/(1+t), v·(1+t)]), contradicted when the whole interval lies outside it, inconclusive when it straddles an edge. A figure with no between-run interval (one reading, or one run's histogram) gets no verdict: inconclusive, whatever its value. A soak's share of memory released after its clients left, with connect/disconnect cycles, is the mean over its disconnections with the Student t interval between them (one server process: not between runs). A noisy figure (coefficient of variation over {cv}%) has its interval widened by 1 + CV on each side and is judged by the same rule. Absolute figures from other hardware are judged by the ratio they imply to the reference figure named in the claim. An error rate is judged in percentage points: the band is [v − t, v + t]. A consistency claim relates the source's own figures and is judged from its files alone: consistent is reproduced, inconsistent contradicted. A claim whose condition the lab did not reproduce is not_measured. Self-test: every claim is judged again with its figure halved and doubled (an ordering reversed, an outcome flipped); one that stays reproduced both ways cannot fail. Every run of the scenario that shares the newest run's environment (host CPU, image per cell) is judged together, its repeats pooled, and each run alone: a run whose own verdict differs is named. A soak from one run is one reading: no verdict. An absolute figure judged through a reference is normalised: the lab's ratio times the source's reference figure, shown beside the raw figures. Each band verdict names the tolerance at which it would flip; one that a tenth of its tolerance would flip is marginal and listed first. An outcome with a `detail` pattern needs the failure's message to match as well as its category; a cell that ran a stand-in for the source's program says so on its verdicts.";

/// The summary an auditor reads first: the marginal verdicts, then what reproduced, what did
/// not and on what evidence (marginal ones first in each group), and the runs that disagree.
fn summary(o: &mut String, a: &Audit) {
    let _ = writeln!(o, "## Summary\n");
    let marginal: Vec<&ClaimResult> = a.results.iter().filter(|r| r.is_marginal()).collect();
    let _ = writeln!(o, "**Marginal** ({}: a tenth of the tolerance would flip them):\n", marginal.len());
    if marginal.is_empty() {
        let _ = writeln!(o, "- none\n");
    } else {
        for r in marginal {
            let _ = writeln!(
                o,
                "- [{}](#{}): {}, flips at {}",
                r.id,
                r.id.to_lowercase(),
                r.verdict.as_str(),
                md(margin_text(r).trim_end_matches(", marginal"))
            );
        }
        o.push('\n');
    }
    let groups: [(&str, Verdict); 4] = [
        ("Reproduced", Verdict::Reproduced),
        ("Contradicted", Verdict::Contradicted),
        ("Not decided (inconclusive)", Verdict::Inconclusive),
        ("Not measured", Verdict::NotMeasured),
    ];
    for (title, v) in groups {
        let mut rs: Vec<&ClaimResult> = a.results.iter().filter(|r| r.verdict == v).collect();
        rs.sort_by_key(|r| !r.is_marginal());
        let _ = writeln!(o, "**{title}** ({}):\n", rs.len());
        if rs.is_empty() {
            let _ = writeln!(o, "- none\n");
            continue;
        }
        for r in rs {
            let on = r.evidence.as_deref().map_or(String::new(), |e| format!(" — on {}", md(e)));
            let figure = match (&r.normalised, r.measured) {
                (Some(n), _) => format!(
                    " — normalised {} against {} (raw: lab {}; ratio {} against {} to `{}`)",
                    show(n.normalised, &n.unit),
                    show(n.raw_claimed, &n.unit),
                    show(n.raw_measured, &n.unit),
                    md(&measured_text(r)),
                    md(&claimed_text(r)),
                    n.reference
                ),
                (None, Some(_)) => {
                    format!(" — measured {} against {}", md(&measured_text(r)), md(&claimed_text(r)))
                }
                (None, None) => String::new(),
            };
            let how = match r.verdict_text() {
                t if t == r.verdict.as_str() => String::new(),
                t => format!(" — {}", md(&t)),
            };
            let _ = writeln!(
                o,
                "- [{}](#{}): “{}”{figure}{on}{how}",
                r.id,
                r.id.to_lowercase(),
                md(&r.statement)
            );
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
    if a.runs.len() > 1 {
        let split: Vec<&ClaimResult> = a.results.iter().filter(|r| !r.disagreeing_runs.is_empty()).collect();
        let _ = writeln!(
            o,
            "**Runs that disagree with the verdict** ({} claim(s), each run judged alone):\n",
            split.len()
        );
        if split.is_empty() {
            let _ = writeln!(o, "- none\n");
        } else {
            for r in split {
                let _ = writeln!(
                    o,
                    "- [{}](#{}): {} on all runs; {}",
                    r.id,
                    r.id.to_lowercase(),
                    r.verdict.as_str(),
                    md(&disagreeing_text(r))
                );
            }
            o.push('\n');
        }
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
    if a.damaged() {
        let _ = writeln!(o, "> **{}**\n", md(&damage_line(a)));
    }
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
    let _ = writeln!(o, "**Exit gate:** {}.\n", gate_line(a).trim_start_matches("exit gate: "));
    summary(&mut o, a);
    let _ = writeln!(o, "## Every verdict\n");
    let _ = writeln!(
        o,
        "| claim | kind | verdict | claimed | measured [95% CI] | tolerance | flips at | judged as | self-test |"
    );
    let _ = writeln!(o, "|---|---|---|---|---|---|---|---|---|");
    let mut rows: Vec<&ClaimResult> = a.results.iter().collect();
    rows.sort_by_key(|r| !r.is_marginal());
    for r in rows {
        let _ = writeln!(
            o,
            "| [{}](#{}) | {} | **{}**{} | {} | {} | {} | {} | {} | {} |",
            r.id,
            r.id.to_lowercase(),
            r.kind.as_str(),
            r.verdict.as_str(),
            md(r.verdict_text().trim_start_matches(r.verdict.as_str())),
            md(&claimed_text(r)),
            md(&measured_text(r)),
            tolerance_text(r),
            md(&margin_text(r)),
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
    every_claim(&mut o, a);
    o
}

/// Every claim explained: its source, statement, verdict and why, where it would flip, its
/// normalised figures, stand-ins, the runs that disagree, the self-test, evidence, cells and
/// environment.
fn every_claim(o: &mut String, a: &Audit) {
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
        let _ = writeln!(o, "- **Verdict:** **{}** ({})", md(&r.verdict_text()), md(&r.judged_as));
        let _ = writeln!(o, "- **Why:** {}", md(&r.explanation));
        if r.margin.is_some() {
            let _ = writeln!(o, "- **Flips at:** {}", md(&margin_text(r)));
        }
        if let Some(n) = normalised_text(r) {
            let _ = writeln!(o, "- **Normalised:** {}", md(&n));
        }
        for s in &r.stand_in {
            let _ = writeln!(o, "- **On a stand-in:** {}", md(s));
        }
        if !r.disagreeing_runs.is_empty() {
            let _ = writeln!(o, "- **Runs that disagree:** {}", md(&disagreeing_text(r)));
        }
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
}
