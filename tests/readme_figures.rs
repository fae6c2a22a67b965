//! The results READMEs beside an AUDIT.md say no more than the records and the audit: every
//! figure a README states is in AUDIT.md or in the records of a run beside it (within the
//! README's rounding), and every line that calls something reproduced names the claims it means,
//! each of which AUDIT.md judges reproduced. Code spans, links and version numbers are not
//! figures.

use std::path::{Path, PathBuf};

use benchlab::record::store::read_records;

/// A figure as written: its value and how many decimals it was rounded to.
#[derive(Debug)]
struct Figure {
    text: String,
    value: f64,
    decimals: i32,
}

/// Removes code spans and link targets, which hold ids, paths and commands, not figures.
fn prose(line: &str) -> String {
    let mut out = String::new();
    let mut in_code = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '`' => in_code = !in_code,
            ']' if chars.peek() == Some(&'(') => {
                out.push(' ');
                for d in chars.by_ref() {
                    if d == ')' {
                        break;
                    }
                }
            }
            _ if in_code => {}
            _ => out.push(c),
        }
    }
    out
}

/// The figures of a text: numbers not glued to a letter before them (p50, w100, s000), not part
/// of a version or a date (1.0.4, 2026-11-30), with thousands separators allowed.
fn figures(text: &str) -> Vec<Figure> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if !b[i].is_ascii_digit() {
            i += 1;
            continue;
        }
        let start = i;
        while i < b.len()
            && (b[i].is_ascii_digit()
                || b[i] == b'.'
                || (b[i] == b','
                    && i + 1 < b.len()
                    && b[i + 1].is_ascii_digit()
                    && i + 3 < b.len() + 1
                    && b[i + 1..].iter().take(3).all(u8::is_ascii_digit)))
        {
            i += 1;
        }
        let mut tok = &text[start..i];
        while tok.ends_with('.') || tok.ends_with(',') {
            tok = &tok[..tok.len() - 1];
        }
        let glued_before = start > 0
            && (b[start - 1].is_ascii_alphabetic()
                || b[start - 1] == b'_'
                || b[start - 1] == b'-' && start > 1 && b[start - 2].is_ascii_digit());
        let dotted = tok.matches('.').count() > 1;
        let date = i < b.len() && b[i] == b'-' && tok.len() == 4;
        if glued_before || dotted || date || tok.is_empty() {
            continue;
        }
        let plain = tok.replace(',', "");
        if let Ok(value) = plain.parse::<f64>() {
            let decimals = plain.split('.').nth(1).map_or(0, |d| d.len() as i32);
            out.push(Figure { text: tok.to_string(), value, decimals });
        }
    }
    out
}

/// Every number of a JSON value, with the unit conversions a README may show (bytes as MiB and
/// MB, fractions as percent, ms as s and µs).
fn json_numbers(v: &serde_json::Value, out: &mut Vec<f64>) {
    match v {
        serde_json::Value::Number(n) => {
            if let Some(x) = n.as_f64() {
                out.extend([x, x / 1_048_576.0, x / 1e6, x * 100.0, x / 1e3, x * 1e3]);
            }
        }
        serde_json::Value::String(s) => out.extend(any_numbers(s)),
        serde_json::Value::Array(a) => a.iter().for_each(|x| json_numbers(x, out)),
        serde_json::Value::Object(o) => o.values().for_each(|x| json_numbers(x, out)),
        _ => {}
    }
}

/// Every number inside a text, versions included (6.18.44 gives 6, 6.18, 18, 18.44 and 44): what a
/// README may quote from a record's strings (kernel, engine and package versions).
fn any_numbers(s: &str) -> Vec<f64> {
    let mut out = Vec::new();
    for tok in s.split(|c: char| !(c.is_ascii_digit() || c == '.')) {
        let parts: Vec<&str> = tok.split('.').filter(|p| !p.is_empty()).collect();
        for (i, p) in parts.iter().enumerate() {
            out.extend(p.parse::<f64>());
            if let Some(next) = parts.get(i + 1) {
                out.extend(format!("{p}.{next}").parse::<f64>());
            }
        }
    }
    out
}

/// Whether `y` rounds to the figure at its decimals.
fn rounds_to(f: &Figure, y: f64) -> bool {
    let half = 0.5 * 10f64.powi(-f.decimals);
    (y - f.value).abs() <= half * (1.0 + 1e-9) + 1e-12
}

/// The claim ids AUDIT.md lists with their verdicts (its table rows).
fn verdicts(audit: &str) -> Vec<(String, String)> {
    audit
        .lines()
        .filter_map(|l| {
            let rest = l.strip_prefix("| [")?;
            let id = rest.split(']').next()?.to_string();
            let verdict = l.split("**").nth(1)?.to_string();
            Some((id, verdict))
        })
        .collect()
}

/// The README's problems: figures found nowhere, "reproduced" said of what the audit does not.
fn check(readme: &str, audit: &str, record_numbers: &[f64]) -> Vec<String> {
    let mut audit_numbers: Vec<f64> = any_numbers(&audit.replace(',', ""));
    audit_numbers.extend_from_slice(record_numbers);
    let judged = verdicts(audit);
    let mut problems = Vec::new();
    for (n, line) in readme.lines().enumerate() {
        let text = prose(line);
        for f in figures(&text) {
            if !audit_numbers.iter().any(|y| rounds_to(&f, *y)) {
                problems.push(format!("line {}: {:?} is in neither AUDIT.md nor the records", n + 1, f.text));
            }
        }
    }
    // Wrapped lines join into blocks (a list item, a paragraph), so the claim ids a sentence
    // names may sit on the line after the word.
    let mut blocks: Vec<(usize, String)> = Vec::new();
    for (n, line) in readme.lines().enumerate() {
        let starts = line.trim().is_empty()
            || line.starts_with("- ")
            || line.starts_with('#')
            || line.starts_with('|');
        match blocks.last_mut() {
            Some((_, b)) if !starts && !b.is_empty() => {
                b.push(' ');
                b.push_str(line.trim());
            }
            _ => blocks.push((n, line.trim().to_string())),
        }
    }
    for (n, line) in &blocks {
        let (n, line) = (*n, line.as_str());
        for clause in line.split(". ").flat_map(|c| c.split("; ")) {
            let lower = prose(clause).to_lowercase();
            let says_reproduced = lower.match_indices("reproduced").any(|(at, _)| {
                let before = lower[..at].trim_end();
                // "not reproduced", "unreproduced", and counts ("3 reproduced", checked as figures).
                let count = before.ends_with(|c: char| c.is_ascii_digit()) && lower[..at].ends_with(' ');
                !(before.ends_with("not")
                    || before.ends_with("never")
                    || lower[..at].ends_with("un")
                    || count)
            });
            if !says_reproduced {
                continue;
            }
            let named: Vec<&(String, String)> =
                judged.iter().filter(|(id, _)| clause.contains(&format!("`{id}`"))).collect();
            if named.is_empty() {
                problems.push(format!(
                    "line {}: says reproduced without naming the claims (`id`) it means",
                    n + 1
                ));
            }
            for (id, v) in named {
                if v != "reproduced" {
                    problems.push(format!("line {}: calls `{id}` reproduced; AUDIT.md says {v}", n + 1));
                }
            }
        }
    }
    problems
}

fn results() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("results")
}

#[test]
fn readmes_state_only_what_records_and_audits_hold() {
    let mut checked = 0;
    let mut problems = Vec::new();
    for entry in std::fs::read_dir(results()).unwrap() {
        let dir = entry.unwrap().path();
        let (readme, audit) = (dir.join("README.md"), dir.join("AUDIT.md"));
        if !(readme.exists() && audit.exists()) {
            continue;
        }
        let mut numbers = Vec::new();
        for run in std::fs::read_dir(&dir).unwrap().filter_map(|e| e.ok().map(|e| e.path())) {
            let records = run.join("records.jsonl");
            if records.exists() {
                for r in read_records(&records).unwrap() {
                    json_numbers(&serde_json::to_value(&r).unwrap(), &mut numbers);
                }
            }
        }
        let (readme_text, audit_text) =
            (std::fs::read_to_string(&readme).unwrap(), std::fs::read_to_string(&audit).unwrap());
        for p in check(&readme_text, &audit_text, &numbers) {
            problems.push(format!("{}: {p}", readme.display()));
        }
        checked += 1;
    }
    assert!(checked >= 3, "expected the reproduction READMEs beside their AUDIT.md, found {checked}");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_check_catches_figures_and_verdicts_it_cannot_find() {
    let audit = "| [a-1](#a-1) | ratio | **contradicted** | 1.39x | 1.32x [1.20–1.41] |\n| [b](#b) | ratio | **reproduced** | 2.00x | 2.01x |";
    assert!(check("The ratio is 1.32 here (`a-1`).", audit, &[]).is_empty());
    assert!(check("Cold start 929 ms.", audit, &[929.4]).is_empty());
    let p = check("The ratio is 1.35 here.", audit, &[]);
    assert_eq!(p.len(), 1, "{p:?}");
    let p = check("Reproduced: the ratio (`a-1`).", audit, &[]);
    assert!(p[0].contains("AUDIT.md says contradicted"), "{p:?}");
    assert!(check("Reproduced: the ordering.", audit, &[])[0].contains("without naming"));
    assert!(check("Reproduced: `b`. Not reproduced: `a-1`.", audit, &[]).is_empty());
    // Versions, dates, code spans and glued ids are not figures.
    assert!(check("mcp 1.30.0 on 2026-11-30, `run 123.4`, p50 and w100.", audit, &[]).is_empty());
}
