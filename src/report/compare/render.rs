//! The renderers of `benchlab compare` and `benchlab diff-env`: the formats, and a comparison or
//! an environment diff as a terminal table, plain text, Markdown or JSON. Text only; the figures
//! come from `ratios`.

use std::fmt;
use std::fmt::Write as _;
use std::str::FromStr;

use comfy_table::{presets::UTF8_FULL_CONDENSED, Cell as TCell, CellAlignment, ContentArrangement, Table};

use crate::record::diffenv::{CellEnvDiff, EnvDiff, RunEnvDiff};
use crate::report::markdown::cell as md;
use crate::report::rows::Unit;
use crate::report::units::unit_text;

use super::{CellComparison, Comparison, Method, MetricComparison, Verdict, ERROR_RATE_TOLERANCE};

/// The output formats of `benchlab compare` and `benchlab diff-env`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompareFormat {
    Table,
    Markdown,
    Json,
}

impl CompareFormat {
    pub const ALL: [CompareFormat; 3] = [CompareFormat::Table, CompareFormat::Markdown, CompareFormat::Json];

    pub fn as_str(self) -> &'static str {
        match self {
            CompareFormat::Table => "table",
            CompareFormat::Markdown => "markdown",
            CompareFormat::Json => "json",
        }
    }
}

impl fmt::Display for CompareFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown format {0:?} (one of: table, markdown, json)")]
pub struct UnknownCompareFormat(pub String);

impl FromStr for CompareFormat {
    type Err = UnknownCompareFormat;

    fn from_str(s: &str) -> Result<CompareFormat, UnknownCompareFormat> {
        CompareFormat::ALL
            .into_iter()
            .find(|f| f.as_str() == s)
            .ok_or_else(|| UnknownCompareFormat(s.to_string()))
    }
}

pub fn value_text(unit: Unit, v: f64) -> String {
    unit_text(unit, v)
}

/// A difference of rates in percentage points: `+1.20 pp`.
fn pp(d: f64) -> String {
    format!("{:+.2} pp", d * 100.0)
}

/// `1.502x`, or a difference for error rates.
pub fn ratio_cell(m: &MetricComparison) -> String {
    if m.method == Method::Difference {
        pp(m.ratio.estimate)
    } else {
        ratio_text(m.ratio.estimate)
    }
}

/// `1.502x`.
fn ratio_text(r: f64) -> String {
    if r.is_finite() {
        format!("{r:.3}x")
    } else {
        "—".into()
    }
}

/// `1.421–1.587x`, or `(one reading)`.
pub fn ratio_interval_text(m: &MetricComparison) -> String {
    if m.method == Method::SingleReading {
        "(one reading)".into()
    } else if m.method == Method::Difference && m.ratio.is_finite() {
        format!("{} to {}", pp(m.ratio.lower), pp(m.ratio.upper))
    } else if m.ratio.is_finite() {
        let within = match m.within.filter(|w| m.method == Method::BetweenRuns && w.is_finite()) {
            Some(w) => format!(" between runs (within {:.3}–{:.3}x)", w.lower, w.upper),
            None => String::new(),
        };
        format!("{:.3}–{:.3}x{within}", m.ratio.lower, m.ratio.upper)
    } else {
        "—".into()
    }
}

fn n_text(m: &MetricComparison) -> String {
    if m.n_a == m.n_b {
        m.n_a.to_string()
    } else {
        format!("{}/{}", m.n_a, m.n_b)
    }
}

fn runs_text(runs: &[String]) -> String {
    if runs.is_empty() {
        "(no records)".into()
    } else {
        runs.join(", ")
    }
}

pub fn counts_text(c: &Comparison) -> String {
    c.counts().iter().map(|(v, n)| format!("{n} {}", v.as_str())).collect::<Vec<_>>().join(", ")
}

/// The rule the verdicts follow, in one sentence.
pub fn rule_text(c: &Comparison) -> String {
    let hi = 1.0 + c.threshold_pct / 100.0;
    format!(
        "Ratios are b/a with {:.0}% intervals; slower when the interval is above {hi:.3}, faster when below {:.3}, \
         unchanged when inside, inconclusive when it straddles a bound (threshold {}%). Throughput is higher-is-better: \
         its verdict reads a/b, so a drop is slower. With two or more runs of a cell on each side, runs are the \
         unit: one value per run, the interval between runs (Welch t on the logarithms), the within-run one beside \
         it, n counts runs. Error rates are compared as b − a in percentage points \
         (more errors beyond {:.1} pp).",
        c.confidence * 100.0,
        1.0 / hi,
        c.threshold_pct,
        ERROR_RATE_TOLERANCE * 100.0
    )
}

/// A manifest value for a terminal or a table: sha256 hex shortened to 12 characters (JSON
/// keeps them whole).
pub(super) fn show_short(v: Option<&serde_json::Value>) -> String {
    let s = EnvDiff::show(v);
    let hex = s.strip_prefix("sha256:").unwrap_or(&s);
    if hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        format!("{}…", &s[..s.len() - 64 + 12])
    } else {
        s
    }
}

pub fn diff_line(d: &EnvDiff) -> String {
    format!("{}: {} → {}", d.path, show_short(d.a.as_ref()), show_short(d.b.as_ref()))
}

/// The per-metric table of a comparison (comfy-table).
pub fn compare_table(c: &Comparison) -> Table {
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED).set_content_arrangement(ContentArrangement::Dynamic);
    t.set_header(vec!["cell", "metric", "n", "a", "b", "b/a", "95% interval", "verdict"]);
    for m in c.metrics() {
        t.add_row(vec![
            TCell::new(&m.cell),
            TCell::new(m.metric.label()),
            TCell::new(n_text(m)).set_alignment(CellAlignment::Right),
            TCell::new(value_text(m.unit, m.a)).set_alignment(CellAlignment::Right),
            TCell::new(value_text(m.unit, m.b)).set_alignment(CellAlignment::Right),
            TCell::new(ratio_cell(m)).set_alignment(CellAlignment::Right),
            TCell::new(ratio_interval_text(m)).set_alignment(CellAlignment::Right),
            TCell::new(m.verdict.label(m.unit)),
        ]);
    }
    t
}

/// Cell-specific environment differences (beyond the common ones), one line each.
fn specific_diffs<'a>(c: &'a Comparison, cell: &'a CellComparison) -> impl Iterator<Item = &'a EnvDiff> {
    cell.env_diff.iter().filter(|d| !c.env_common.contains(d))
}

/// The terminal form: the table, then unmatched, failed and skipped cells and the environment
/// differences.
/// The hosts line: whether the two runs' machines have the same speed (their fingerprints), or
/// that a run has none.
pub fn hosts_text(c: &Comparison) -> String {
    match &c.hosts {
        None => "hosts: no speed fingerprint in one of the runs (recorded before fingerprints); whether they ran on \
                 machines of the same speed is unknown"
            .into(),
        Some(h) if h.differs => format!(
            "HOSTS DIFFER IN SPEED ({}): every b/a below mixes the SDK with the machine; compare runs from one host\n  \
             a: {}\n  b: {}",
            h.line, h.a, h.b
        ),
        Some(h) => format!("hosts: {} (a: {}; b: {})", h.line, h.a, h.b),
    }
}

pub fn compare_text(c: &Comparison) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "a: {}\nb: {}", runs_text(&c.runs_a), runs_text(&c.runs_b));
    let _ = writeln!(o, "{}", hosts_text(c));
    let _ = writeln!(o, "{}", rule_text(c));
    if c.cells.iter().any(|cell| !cell.metrics.is_empty()) {
        let _ = writeln!(o, "{}", compare_table(c));
    }
    let _ = writeln!(o, "{} cells compared: {}.", c.cells.len(), counts_text(c));
    for (label, ids) in [("only in a", &c.only_in_a), ("only in b", &c.only_in_b)] {
        if !ids.is_empty() {
            let _ = writeln!(o, "{label}: {}", ids.join(", "));
        }
    }
    for f in &c.failed {
        let _ = writeln!(o, "not compared (failed): {} — a: {}, b: {}", f.cell, f.status_a, f.status_b);
    }
    for s in &c.skipped {
        let _ = writeln!(o, "skipped: {} {} — {}", s.cell, s.metric.label(), s.reason);
    }
    if c.env_common.is_empty() && c.cells.iter().all(|cell| cell.env_diff.is_empty()) {
        o.push_str("environment: identical in every compared cell\n");
    } else {
        if !c.env_common.is_empty() {
            o.push_str("environment, every cell:\n");
            for d in &c.env_common {
                let _ = writeln!(o, "  {}", diff_line(d));
            }
        }
        for cell in &c.cells {
            let mut lines = specific_diffs(c, cell).peekable();
            if lines.peek().is_some() {
                let _ = writeln!(o, "environment, {}:", cell.cell);
                for d in lines {
                    let _ = writeln!(o, "  {}", diff_line(d));
                }
            }
        }
    }
    o
}

/// The comparison as Markdown, for pull-request comments.
pub fn compare_markdown(c: &Comparison) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "# benchlab compare\n");
    let _ = writeln!(o, "- a: `{}`\n- b: `{}`\n", md(&runs_text(&c.runs_a)), md(&runs_text(&c.runs_b)));
    let _ = writeln!(o, "{}\n", md(&hosts_text(c)));
    let _ = writeln!(o, "{}\n", rule_text(c));
    let _ = writeln!(o, "{} cells compared: {}.\n", c.cells.len(), counts_text(c));
    if c.metrics().next().is_some() {
        o.push_str("| cell | metric | n | a | b | b/a | 95% interval | verdict |\n");
        o.push_str("|---|---|--:|--:|--:|--:|--:|---|\n");
        for m in c.metrics() {
            let verdict = match m.verdict {
                Verdict::Slower | Verdict::Faster => format!("**{}**", m.verdict.label(m.unit)),
                v => v.label(m.unit).to_string(),
            };
            let _ = writeln!(
                o,
                "| {} | {} | {} | {} | {} | {} | {} | {verdict} |",
                md(&m.cell),
                m.metric.label(),
                n_text(m),
                value_text(m.unit, m.a),
                value_text(m.unit, m.b),
                ratio_cell(m),
                ratio_interval_text(m),
            );
        }
        o.push('\n');
    }
    if !c.only_in_a.is_empty() || !c.only_in_b.is_empty() || !c.failed.is_empty() || !c.skipped.is_empty() {
        o.push_str("## Not compared\n\n");
        for id in &c.only_in_a {
            let _ = writeln!(o, "- `{}`: only in a", md(id));
        }
        for id in &c.only_in_b {
            let _ = writeln!(o, "- `{}`: only in b", md(id));
        }
        for f in &c.failed {
            let _ = writeln!(o, "- `{}`: a {}, b {}", md(&f.cell), md(&f.status_a), md(&f.status_b));
        }
        for s in &c.skipped {
            let _ = writeln!(o, "- `{}` {}: {}", md(&s.cell), s.metric.label(), md(&s.reason));
        }
        o.push('\n');
    }
    o.push_str("## Environment differences\n\n");
    if c.env_common.is_empty() && c.cells.iter().all(|cell| cell.env_diff.is_empty()) {
        o.push_str("None: every compared cell ran in the same environment.\n");
        return o;
    }
    o.push_str("| cell | field | a | b |\n|---|---|---|---|\n");
    for d in &c.env_common {
        let _ = writeln!(o, "{}", diff_row_md("every cell", d));
    }
    for cell in &c.cells {
        for d in specific_diffs(c, cell) {
            let _ = writeln!(o, "{}", diff_row_md(&cell.cell, d));
        }
    }
    o
}

fn diff_row_md(cell: &str, d: &EnvDiff) -> String {
    format!(
        "| {} | `{}` | {} | {} |",
        md(cell),
        md(&d.path),
        md(&show_short(d.a.as_ref())),
        md(&show_short(d.b.as_ref()))
    )
}

/// Renders a comparison. Every output ends with a newline.
pub fn render_compare(format: CompareFormat, c: &Comparison) -> String {
    let mut out = match format {
        CompareFormat::Table => compare_text(c),
        CompareFormat::Markdown => compare_markdown(c),
        CompareFormat::Json => serde_json::to_string_pretty(c).expect("comparisons serialise"),
    };
    if !out.ends_with('\n') {
        out.push('\n');
    }
    out
}

/// The table of a run-level environment diff: common differences first, then each cell's own.
pub fn diff_env_table(d: &RunEnvDiff) -> Table {
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED).set_content_arrangement(ContentArrangement::Dynamic);
    t.set_header(vec!["cell", "field", "change", "a", "b"]);
    let mut row = |cell: &str, x: &EnvDiff| {
        t.add_row(vec![
            TCell::new(cell),
            TCell::new(&x.path),
            TCell::new(format!("{:?}", x.kind).to_lowercase()),
            TCell::new(show_short(x.a.as_ref())),
            TCell::new(show_short(x.b.as_ref())),
        ]);
    };
    for x in &d.common {
        row("every cell", x);
    }
    for c in &d.cells {
        for x in &c.specific {
            row(&c.cell, x);
        }
    }
    t
}

fn cells_line(d: &RunEnvDiff) -> String {
    let same = d.cells.iter().filter(|c| c.diffs.is_empty()).count();
    format!("{} cells in both runs, {same} with identical environments (equal env_hash).", d.cells.len())
}

fn identical_cells(d: &RunEnvDiff) -> Vec<&CellEnvDiff> {
    d.cells.iter().filter(|c| c.diffs.is_empty()).collect()
}

/// `benchlab diff-env` for people.
pub fn diff_env_text(d: &RunEnvDiff) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "a: {}\nb: {}", runs_text(&d.runs_a), runs_text(&d.runs_b));
    let _ = writeln!(o, "{}", cells_line(d));
    if d.common.is_empty() && d.cells.iter().all(|c| c.specific.is_empty()) {
        o.push_str("no environment differences\n");
    } else {
        let _ = writeln!(o, "{}", diff_env_table(d));
    }
    for (label, ids) in [("only in a", &d.only_in_a), ("only in b", &d.only_in_b)] {
        if !ids.is_empty() {
            let _ = writeln!(o, "{label}: {}", ids.join(", "));
        }
    }
    o
}

/// `benchlab diff-env` as Markdown.
pub fn diff_env_markdown(d: &RunEnvDiff) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "# benchlab diff-env\n");
    let _ = writeln!(o, "- a: `{}`\n- b: `{}`\n", md(&runs_text(&d.runs_a)), md(&runs_text(&d.runs_b)));
    let _ = writeln!(o, "{}\n", cells_line(d));
    if d.common.is_empty() && d.cells.iter().all(|c| c.specific.is_empty()) {
        o.push_str("No environment differences.\n");
    } else {
        o.push_str("| cell | field | a | b |\n|---|---|---|---|\n");
        for x in &d.common {
            let _ = writeln!(o, "{}", diff_row_md("every cell", x));
        }
        for c in &d.cells {
            for x in &c.specific {
                let _ = writeln!(o, "{}", diff_row_md(&c.cell, x));
            }
        }
    }
    let same = identical_cells(d);
    if !same.is_empty() && same.len() < d.cells.len() {
        let ids = same.iter().map(|c| format!("`{}`", md(&c.cell))).collect::<Vec<_>>().join(", ");
        let _ = writeln!(o, "\nIdentical: {ids}.");
    }
    for (label, ids) in [("Only in a", &d.only_in_a), ("Only in b", &d.only_in_b)] {
        if !ids.is_empty() {
            let ids = ids.iter().map(|i| format!("`{}`", md(i))).collect::<Vec<_>>().join(", ");
            let _ = writeln!(o, "\n{label}: {ids}.");
        }
    }
    o
}

/// Renders a run-level environment diff. Every output ends with a newline.
pub fn render_diff_env(format: CompareFormat, d: &RunEnvDiff) -> String {
    let mut out = match format {
        CompareFormat::Table => diff_env_text(d),
        CompareFormat::Markdown => diff_env_markdown(d),
        CompareFormat::Json => serde_json::to_string_pretty(d).expect("diffs serialise"),
    };
    if !out.ends_with('\n') {
        out.push('\n');
    }
    out
}
