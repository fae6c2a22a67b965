//! The results READMEs beside an AUDIT.md say no more than the records and the audit: every
//! figure a README states is in AUDIT.md or in the records of a run beside it (within the
//! README's rounding), and every line that calls something reproduced names the claims it means,
//! each of which AUDIT.md judges reproduced. Code spans, links and version numbers are not
//! figures.

use std::path::{Path, PathBuf};

use benchlab::record::store::read_records;

/// A figure as written: its value, how many decimals it was rounded to, and its unit (what
/// follows it, or the unit of the figure an interval `[a–b]` belongs to).
#[derive(Debug, Clone)]
struct Figure {
    text: String,
    value: f64,
    decimals: i32,
    unit: Unit,
}

/// The units a figure may carry; a figure is only compared with figures of its kind.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Unit {
    None,
    /// A ratio (`56x`): only AUDIT.md's ratios say one, the records hold none.
    Times,
    /// A duration, as its factor to milliseconds.
    Time(f64),
    /// A size, as its factor to bytes.
    Bytes(f64),
    Percent,
}

impl Unit {
    fn parse(word: &str) -> Option<Unit> {
        Some(match word {
            "x" | "×" => Unit::Times,
            "ns" => Unit::Time(1e-6),
            "µs" | "us" => Unit::Time(1e-3),
            "ms" => Unit::Time(1.0),
            "s" => Unit::Time(1e3),
            "min" => Unit::Time(60e3),
            "B" => Unit::Bytes(1.0),
            "KiB" => Unit::Bytes(1024.0),
            "MiB" => Unit::Bytes(1_048_576.0),
            "GiB" => Unit::Bytes(1_073_741_824.0),
            "kB" | "KB" => Unit::Bytes(1e3),
            "MB" => Unit::Bytes(1e6),
            "GB" => Unit::Bytes(1e9),
            "%" => Unit::Percent,
            _ => return None,
        })
    }

    /// `value` in this unit as the same quantity in `to` (None between kinds).
    fn convert(self, value: f64, to: Unit) -> Option<f64> {
        match (self, to) {
            (Unit::Time(a), Unit::Time(b)) | (Unit::Bytes(a), Unit::Bytes(b)) => Some(value * a / b),
            (a, b) if a == b => Some(value),
            _ => None,
        }
    }
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

/// The unit after a number ending at byte `end`: a word glued to it or after one space, and
/// where it ends. `Err(())` when letters glued to the number are no unit (digits inside a hash
/// or an id such as `3419bf2e`): then the number is no figure.
fn unit_after(text: &str, end: usize) -> Result<(Unit, usize), ()> {
    let rest = &text[end..];
    let word_len =
        |s: &str| s.find(|c: char| !(c.is_alphanumeric() || c == '%' || c == '×')).unwrap_or(s.len());
    let glued = word_len(rest);
    if glued > 0 {
        return match Unit::parse(&rest[..glued]) {
            Some(u) => Ok((u, end + glued)),
            None => Err(()),
        };
    }
    if let Some(after) = rest.strip_prefix(' ') {
        let n = word_len(after);
        if let Some(u) = Unit::parse(&after[..n]) {
            return Ok((u, end + 1 + n));
        }
    }
    Ok((Unit::None, end))
}

/// The figures of a text: whole numbers with their units, never digits glued to a letter before
/// them (p50, w100, s000) or to letters after them that are no unit (a hash's `228b`), not part
/// of a version or a date (1.0.4, 2026-11-30), with thousands separators allowed. The bounds of
/// an interval `[a–b]` right after a figure take its unit when they have none of their own.
fn figures(text: &str) -> Vec<Figure> {
    let b = text.as_bytes();
    let mut out: Vec<Figure> = Vec::new();
    // The unit an open interval's bounds take, until its `]`.
    let mut interval: Option<(Unit, usize)> = None;
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
                    && i + 3 < b.len() + 1
                    && b[i + 1..].iter().take(3).filter(|c| c.is_ascii_digit()).count() == 3))
        {
            i += 1;
        }
        let mut tok = &text[start..i];
        while tok.ends_with('.') || tok.ends_with(',') {
            tok = &tok[..tok.len() - 1];
        }
        let end = start + tok.len();
        let glued_before = start > 0
            && (b[start - 1].is_ascii_alphabetic()
                || b[start - 1] == b'_'
                || b[start - 1] == b'-' && start > 1 && b[start - 2].is_ascii_alphanumeric());
        let dotted = tok.matches('.').count() > 1;
        let date = i < b.len() && b[i] == b'-' && tok.len() == 4;
        let Ok((unit, unit_end)) = unit_after(text, end) else {
            // Skip the rest of the glued word too.
            while i < b.len() && b[i].is_ascii_alphanumeric() {
                i += 1;
            }
            continue;
        };
        if glued_before || dotted || date || tok.is_empty() {
            continue;
        }
        let plain = tok.replace(',', "");
        let Ok(value) = plain.parse::<f64>() else { continue };
        let decimals = plain.split('.').nth(1).map_or(0, |d| d.len() as i32);
        let unit = match (unit, interval) {
            (Unit::None, Some((u, close))) if start < close => u,
            _ => unit,
        };
        out.push(Figure { text: tok.to_string(), value, decimals, unit });
        // An interval right after a figure with a unit: `228x [199–267]`.
        let after = text[unit_end..].trim_start();
        if unit != Unit::None && after.starts_with('[') {
            let open = text.len() - after.len();
            interval = text[open..].find(']').map(|c| (unit, open + c));
        }
        i = i.max(unit_end);
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

/// Every whole number inside a text, versions split (6.18.44 gives 6, 6.18, 18, 18.44 and 44):
/// what a README may quote from a record's strings (kernel, engine and package versions). Digits
/// glued to letters (a hash, an id) are none.
fn any_numbers(s: &str) -> Vec<f64> {
    let mut out = Vec::new();
    for word in s.split(|c: char| !(c.is_ascii_alphanumeric() || c == '.')) {
        if word.chars().any(|c| c.is_ascii_alphabetic()) {
            continue;
        }
        let parts: Vec<&str> = word.split('.').filter(|p| !p.is_empty()).collect();
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

/// Whether a README figure is one AUDIT.md states (a figure of the same kind, in its unit, or one
/// without a unit) or one the records hold (any figure but a ratio, which records never hold).
fn found(f: &Figure, audit: &[Figure], records: &[f64]) -> bool {
    let in_audit = audit.iter().any(|a| match (a.unit, f.unit) {
        (Unit::None, _) | (_, Unit::None) => rounds_to(f, a.value),
        (from, to) => from.convert(a.value, to).is_some_and(|v| rounds_to(f, v)),
    });
    in_audit || (f.unit != Unit::Times && records.iter().any(|y| rounds_to(f, *y)))
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
    let audit_figures: Vec<Figure> = audit.lines().flat_map(figures).collect();
    let judged = verdicts(audit);
    let mut problems = Vec::new();
    for (n, line) in readme.lines().enumerate() {
        let text = prose(line);
        for f in figures(&text) {
            if !found(&f, &audit_figures, record_numbers) {
                let unit = if f.unit == Unit::None { String::new() } else { format!(" ({:?})", f.unit) };
                problems.push(format!(
                    "line {}: {:?}{unit} is in neither AUDIT.md nor the records",
                    n + 1,
                    f.text
                ));
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

/// Issue 47's misquotes put back into a copy of seed 001's README, checked against its real
/// AUDIT.md and records: "228x" (digits found only inside hashes) and "[199–267]" (a stale
/// sample and a cold start in ms, not ratios) must both be caught, and the fixed line passes.
#[test]
fn seed_001s_misquoted_ratio_is_caught() {
    let dir = results().join("seed-001-python-servers");
    let readme = std::fs::read_to_string(dir.join("README.md")).unwrap();
    let audit = std::fs::read_to_string(dir.join("AUDIT.md")).unwrap();
    let mut numbers = Vec::new();
    for run in std::fs::read_dir(&dir).unwrap().filter_map(|e| e.ok().map(|e| e.path())) {
        if run.join("records.jsonl").exists() {
            for r in read_records(&run.join("records.jsonl")).unwrap() {
                json_numbers(&serde_json::to_value(&r).unwrap(), &mut numbers);
            }
        }
    }
    assert!(readme.contains("225x [159–319]"), "the committed README states AUDIT.md's figure");
    assert!(check(&readme, &audit, &numbers).is_empty());
    let misquoted = readme.replace("225x [159–319]", "228x [199–267]");
    let problems = check(&misquoted, &audit, &numbers);
    for bad in ["\"228\"", "\"199\"", "\"267\""] {
        assert!(problems.iter().any(|p| p.contains(bad)), "{bad} not caught: {problems:?}");
    }
    assert_eq!(problems.len(), 3, "{problems:?}");
}

#[test]
fn digits_inside_hashes_and_other_units_are_not_figures_found() {
    let audit =
        "env 3419bf2ee3d2541528972a315a892a9ec576 and 228abc; cold start 267 ms; ratio 225x [159–319]";
    // 228 is only inside hex words, 267 only in ms: as a ratio neither is found.
    assert_eq!(check("the ratio 228x", audit, &[]).len(), 1);
    assert_eq!(check("the ratio 267x", audit, &[]).len(), 1);
    assert!(check("cold start 267 ms, 0.267 s, ratio 225x [159–319]", audit, &[]).is_empty());
    // Interval bounds take the unit of their figure: 267 as a bound of a ratio is not 267 ms.
    assert_eq!(check("ratio 225x [159–267]", audit, &[]).len(), 1);
    // Records hold no ratios, only values.
    assert_eq!(check("ratio 3.5x", "", &[3.5]).len(), 1);
    assert!(check("p50 3.5 ms", "", &[3.5]).is_empty());
    // A hash in a README is no figure either.
    assert!(check("run a228b3", "", &[]).is_empty());
}
