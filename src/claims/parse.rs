//! The `[[claim]]` tables of a scenario file: their schema, parsing with file:line:column errors,
//! unknown keys refused, and validation against the scenario's own cells. It reads text and
//! nothing else; measuring and judging live in `measure` and `mod`.
//!
//! # Schema
//!
//! A claim is a `[[claim]]` table at the end of a scenario file. Every claim has:
//!
//! ```toml
//! [[claim]]
//! id = "s000-stdio-p50-node"          # unique in the file; other claims refer to it
//! source = { file = "000_6fe3b4b3acef3dc1.txt", section = "The Executive Decision Matrix",
//!            row = "Stdio Round-Trip Latency (p50)",
//!            hardware = { cpu_model = "AMD EPYC 9654", cpus = 8 } }   # row, hardware optional
//! statement = "0.82 ms (Node.js)"     # the source's own words
//! kind = "absolute"                   # absolute | ratio | ordering | soak_slope | outcome | finding
//! ```
//!
//! and, by kind:
//!
//! - `absolute`: `measure` (a selector), `value`, `unit`, optional `tolerance` (relative, default
//!   0.15: reproduced when the measured interval lies within [value/(1+t), value·(1+t)]) and
//!   optional `relative_to = "<claim id>"`: another absolute claim of the same unit. When the lab's
//!   hardware does not match `source.hardware`, the figure is judged by the ratio it implies to
//!   that claim (value / other value against the measured ratio of the two selectors).
//! - `ratio`: `numerator` and `denominator` selectors, `value` (e.g. 1.42 from 643/461), optional
//!   `tolerance`. Units cancel, so hardware does not matter.
//! - `ordering`: `items`, a list of selectors from the smallest to the largest; every adjacent pair
//!   is judged by the interval of their ratio (above 1: holds; below 1/(1+t): reversed, with
//!   `tolerance` t defaulting to 0).
//! - `soak_slope`: `measure` (metric `rss_slope`), `value` (the slope claimed, e.g. 0) and `unit`
//!   (`MiB/h`), `duration` (e.g. "24h"). No workload of the lab runs that long: not measured.
//! - `outcome`: `cell` and `expect = "failure" | "success"`, optional `reason` (a record failure
//!   reason such as `crash`): whether the cell did what the source says.
//! - `finding`: an inconsistency inside the source. `figures` (a list of `{ label, value }` as the
//!   source prints them), `check` and `explanation`. `check = "differ"`: figures that should agree
//!   and do not; `"identical"`: figures of different things that are identical; `"arithmetic"`:
//!   `figures[0]` should equal `expected` (what the source's other figures give) and does not.
//!   The check is made here, when the file is read: a finding its figures do not show is an error.
//!
//! A selector is `{ cell = "<server>/<workload>", metric = "...", stat = "...", aggregate = "..." }`.
//! `cell` may use `*` wildcards and `,` between alternatives, and must match at least one cell of the scenario; with several
//! matches, `aggregate` (`mean`, `median`, `min`, `max`) says how they combine (required). Metrics
//! and their statistics (the first is the default):
//!
//! | metric | stats | unit |
//! |---|---|---|
//! | `cold_start`, `tools_list` | p50, mean, min, max, p95, p99, first, rest_p50 | ms |
//! | `calls` | p50, p90, p95, p99, max, mean, total | ms (total: s) |
//! | `rss_after_initialize` | value | bytes |
//! | `loc` | value | lines |
//! | `throughput` | value | req/s |
//! | `latency` (HTTP load) | p50, p90, p95, p99, max, mean | ms |
//! | `error_rate` | value | fraction (`%` in claims) |
//! | `server_cpu` | value | cores (`%` in claims: 100% = one core) |
//! | `rss_idle`, `rss_peak`, `rss_after`, `cgroup_peak` | value | bytes |
//! | `rss_slope` | value | MiB/h (soak_slope only) |
//!
//! Units a claim may give: `ms`, `s`, `MB` (10^6 bytes), `MiB`, `req/s`, `%`, `lines`, `cores`,
//! `MiB/h`; the unit must fit the metric.

use std::collections::BTreeSet;
use std::ops::Range;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use toml::Spanned;

use crate::text::{glob_match, line_col};

/// A claims problem, located in its file.
#[derive(Debug, thiserror::Error)]
pub enum ClaimsError {
    #[error("{path}:{line}:{column}: {message}")]
    At { path: PathBuf, line: usize, column: usize, message: String },
    #[error("{path}: {message}")]
    Whole { path: PathBuf, message: String },
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Hardware {
    /// A substring of the CPU model (`AMD EPYC 9654`), matched case-insensitively.
    pub cpu_model: String,
    /// Logical CPUs the source ran on.
    pub cpus: u32,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Source {
    /// The seed file name.
    pub file: String,
    pub section: String,
    pub row: Option<String>,
    pub hardware: Option<Hardware>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    Absolute,
    Ratio,
    Ordering,
    SoakSlope,
    Outcome,
    Finding,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Absolute => "absolute",
            Kind::Ratio => "ratio",
            Kind::Ordering => "ordering",
            Kind::SoakSlope => "soak_slope",
            Kind::Outcome => "outcome",
            Kind::Finding => "finding",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Aggregate {
    Mean,
    Median,
    Min,
    Max,
}

/// What a metric is measured in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Dim {
    Ms,
    Seconds,
    Bytes,
    Rps,
    Fraction,
    Cores,
    Lines,
    MibPerHour,
}

impl Dim {
    pub fn as_str(self) -> &'static str {
        match self {
            Dim::Ms => "ms",
            Dim::Seconds => "s",
            Dim::Bytes => "bytes",
            Dim::Rps => "req/s",
            Dim::Fraction => "fraction",
            Dim::Cores => "cores",
            Dim::Lines => "lines",
            Dim::MibPerHour => "MiB/h",
        }
    }
}

/// The metrics a selector may name, their statistics (the first is the default) and unit.
pub const METRICS: &[(&str, &[&str], Dim)] = &[
    ("cold_start", &["p50", "mean", "min", "max", "p95", "p99", "first", "rest_p50"], Dim::Ms),
    ("tools_list", &["p50", "mean", "min", "max", "p95", "p99", "first", "rest_p50"], Dim::Ms),
    ("calls", &["p50", "p90", "p95", "p99", "max", "mean", "total"], Dim::Ms),
    ("rss_after_initialize", &["value"], Dim::Bytes),
    ("loc", &["value"], Dim::Lines),
    ("throughput", &["value"], Dim::Rps),
    ("latency", &["p50", "p90", "p95", "p99", "max", "mean"], Dim::Ms),
    ("error_rate", &["value"], Dim::Fraction),
    ("server_cpu", &["value"], Dim::Cores),
    ("rss_idle", &["value"], Dim::Bytes),
    ("rss_peak", &["value"], Dim::Bytes),
    ("rss_after", &["value"], Dim::Bytes),
    ("cgroup_peak", &["value"], Dim::Bytes),
    ("rss_slope", &["value"], Dim::MibPerHour),
];

/// The unit of a metric's statistic (`calls` `total` is in seconds).
pub fn dim_of(metric: &str, stat: &str) -> Option<Dim> {
    let (_, _, dim) = METRICS.iter().find(|(m, _, _)| *m == metric)?;
    Some(if metric == "calls" && stat == "total" { Dim::Seconds } else { *dim })
}

/// A claim unit: the dimension it fits and the factor to the metric's own unit.
fn unit(u: &str) -> Option<(Dim, f64)> {
    Some(match u {
        "ms" => (Dim::Ms, 1.0),
        "s" => (Dim::Seconds, 1.0),
        "MB" => (Dim::Bytes, 1e6),
        "MiB" => (Dim::Bytes, 1_048_576.0),
        "req/s" => (Dim::Rps, 1.0),
        "lines" => (Dim::Lines, 1.0),
        "cores" => (Dim::Cores, 1.0),
        "MiB/h" => (Dim::MibPerHour, 1.0),
        _ => return None,
    })
}

/// A selector as written.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSelector {
    cell: Spanned<String>,
    metric: Spanned<String>,
    stat: Option<Spanned<String>>,
    aggregate: Option<Aggregate>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFigure {
    label: String,
    value: f64,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawClaim {
    id: Spanned<String>,
    source: Source,
    statement: String,
    kind: Spanned<Kind>,
    measure: Option<Spanned<RawSelector>>,
    numerator: Option<Spanned<RawSelector>>,
    denominator: Option<Spanned<RawSelector>>,
    items: Option<Spanned<Vec<Spanned<RawSelector>>>>,
    value: Option<Spanned<f64>>,
    unit: Option<Spanned<String>>,
    tolerance: Option<Spanned<f64>>,
    relative_to: Option<Spanned<String>>,
    duration: Option<String>,
    cell: Option<Spanned<String>>,
    expect: Option<Spanned<String>>,
    reason: Option<String>,
    figures: Option<Vec<RawFigure>>,
    check: Option<Spanned<String>>,
    expected: Option<f64>,
    explanation: Option<String>,
}

/// The scenario file seen by the claims parser: its `[[claim]]` tables and nothing else (the
/// scenario parser owns and checks the rest).
#[derive(Debug, Deserialize)]
struct RawFile {
    #[serde(rename = "claim", default)]
    claims: Vec<Spanned<RawClaim>>,
}

/// Which measured value a claim is about.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Selector {
    /// A cell id, possibly with `*` wildcards.
    pub cell: String,
    pub metric: String,
    pub stat: String,
    pub aggregate: Option<Aggregate>,
}

impl Selector {
    pub fn dim(&self) -> Dim {
        dim_of(&self.metric, &self.stat).expect("validated when parsed")
    }

    pub fn text(&self) -> String {
        let agg = self.aggregate.map_or(String::new(), |a| format!(" ({a:?} over matches)").to_lowercase());
        format!("{} {} {}{agg}", self.cell, self.metric, self.stat)
    }
}

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Figure {
    pub label: String,
    pub value: f64,
}

/// What a claim says, typed.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Body {
    /// `value` is in the metric's own unit (converted from the claim's).
    Absolute {
        measure: Selector,
        value: f64,
        unit: String,
        tolerance: f64,
        relative_to: Option<String>,
    },
    Ratio {
        numerator: Selector,
        denominator: Selector,
        value: f64,
        tolerance: f64,
    },
    /// Smallest first.
    Ordering {
        items: Vec<Selector>,
        tolerance: f64,
    },
    SoakSlope {
        measure: Selector,
        value: f64,
        unit: String,
        duration: String,
    },
    Outcome {
        cell: String,
        expect_failure: bool,
        reason: Option<String>,
    },
    Finding {
        figures: Vec<Figure>,
        check: String,
        expected: Option<f64>,
        explanation: String,
    },
}

/// One claim of a source.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Claim {
    pub id: String,
    pub source: SourceRef,
    pub statement: String,
    pub body: Body,
    /// 1-based line of the claim in its file.
    pub line: usize,
}

/// `Source` in serialisable form.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct SourceRef {
    pub file: String,
    pub section: String,
    pub row: Option<String>,
    pub hardware: Option<(String, u32)>,
}

impl Claim {
    pub fn kind(&self) -> Kind {
        match self.body {
            Body::Absolute { .. } => Kind::Absolute,
            Body::Ratio { .. } => Kind::Ratio,
            Body::Ordering { .. } => Kind::Ordering,
            Body::SoakSlope { .. } => Kind::SoakSlope,
            Body::Outcome { .. } => Kind::Outcome,
            Body::Finding { .. } => Kind::Finding,
        }
    }
}

/// The default relative tolerance of absolute and ratio claims.
pub const DEFAULT_TOLERANCE: f64 = 0.15;

type SpanErr = (Range<usize>, String);

/// Parses the claims of a scenario file. `cell_ids` are the scenario's cells: every selector
/// must match one of them.
pub fn parse_claims(path: &Path, source: &str, cell_ids: &[String]) -> Result<Vec<Claim>, ClaimsError> {
    let at = |span: Range<usize>, message: String| {
        let (line, column) = line_col(source, span.start);
        ClaimsError::At { path: path.into(), line, column, message }
    };
    let raw: RawFile = toml::from_str(source).map_err(|e| match e.span() {
        Some(span) => at(span, e.message().to_string()),
        None => ClaimsError::Whole { path: path.into(), message: e.message().to_string() },
    })?;
    let mut claims = Vec::new();
    let mut ids = BTreeSet::new();
    for c in &raw.claims {
        let span = c.span();
        let c = c.get_ref();
        if !ids.insert(c.id.get_ref().clone()) {
            return Err(at(c.id.span(), format!("claim id {:?} is used twice", c.id.get_ref())));
        }
        let body = body(c, cell_ids).map_err(|(s, m)| at(s, m))?;
        let (line, _) = line_col(source, span.start);
        claims.push(Claim {
            id: c.id.get_ref().clone(),
            source: SourceRef {
                file: c.source.file.clone(),
                section: c.source.section.clone(),
                row: c.source.row.clone(),
                hardware: c.source.hardware.as_ref().map(|h| (h.cpu_model.clone(), h.cpus)),
            },
            statement: c.statement.clone(),
            body,
            line,
        });
    }
    // relative_to must name an absolute claim of the same unit.
    for (c, raw) in claims.iter().zip(&raw.claims) {
        if let Body::Absolute { measure, relative_to: Some(other), .. } = &c.body {
            let span = raw.get_ref().relative_to.as_ref().map(|r| r.span()).unwrap_or(raw.span());
            match claims.iter().find(|o| &o.id == other).map(|o| &o.body) {
                Some(Body::Absolute { measure: om, .. }) if om.dim() == measure.dim() && other != &c.id => {}
                Some(_) => {
                    return Err(at(
                        span,
                        format!("`relative_to` {other:?} is not another absolute claim in the same unit"),
                    ))
                }
                None => return Err(at(span, format!("`relative_to` names no claim: {other:?}"))),
            }
        }
    }
    Ok(claims)
}

/// Whether a selector's cell pattern (`*` wildcards, alternatives separated by `,`) matches an id.
pub fn cell_matches(pattern: &str, id: &str) -> bool {
    pattern.split(',').any(|p| glob_match(p.trim(), id))
}

fn selector(s: &Spanned<RawSelector>, cell_ids: &[String]) -> Result<Selector, SpanErr> {
    let r = s.get_ref();
    let cell = r.cell.get_ref();
    let matches = cell_ids.iter().filter(|id| cell_matches(cell, id)).count();
    if matches == 0 {
        return Err((r.cell.span(), format!("cell {cell:?} matches no cell of the scenario")));
    }
    if matches > 1 && r.aggregate.is_none() {
        return Err((
            r.cell.span(),
            format!("cell {cell:?} matches {matches} cells: say how they combine with `aggregate` (mean, median, min, max)"),
        ));
    }
    let metric = r.metric.get_ref();
    let Some((_, stats, _)) = METRICS.iter().find(|(m, _, _)| m == metric) else {
        let names: Vec<&str> = METRICS.iter().map(|(m, _, _)| *m).collect();
        return Err((r.metric.span(), format!("unknown metric {metric:?} (one of: {})", names.join(", "))));
    };
    let stat = match &r.stat {
        None => stats[0].to_string(),
        Some(s) if stats.contains(&s.get_ref().as_str()) => s.get_ref().clone(),
        Some(s) => {
            return Err((
                s.span(),
                format!("metric {metric} has no stat {:?} (one of: {})", s.get_ref(), stats.join(", ")),
            ))
        }
    };
    Ok(Selector { cell: cell.clone(), metric: metric.clone(), stat, aggregate: r.aggregate })
}

fn body(c: &RawClaim, cell_ids: &[String]) -> Result<Body, SpanErr> {
    let kind = *c.kind.get_ref();
    let kspan = c.kind.span();
    let need = |name: &str, present: bool| {
        if present {
            Ok(())
        } else {
            Err((kspan.clone(), format!("a {} claim needs `{name}`", kind.as_str())))
        }
    };
    // Keys a kind does not use are errors, at the key.
    let allowed: &[&str] = match kind {
        Kind::Absolute => &["measure", "value", "unit", "tolerance", "relative_to"],
        Kind::Ratio => &["numerator", "denominator", "value", "tolerance"],
        Kind::Ordering => &["items", "tolerance"],
        Kind::SoakSlope => &["measure", "value", "unit", "duration"],
        Kind::Outcome => &["cell", "expect", "reason"],
        Kind::Finding => &["figures", "check", "expected", "explanation"],
    };
    let present: [(&str, Option<Range<usize>>); 14] = [
        ("measure", c.measure.as_ref().map(|x| x.span())),
        ("numerator", c.numerator.as_ref().map(|x| x.span())),
        ("denominator", c.denominator.as_ref().map(|x| x.span())),
        ("items", c.items.as_ref().map(|x| x.span())),
        ("value", c.value.as_ref().map(|x| x.span())),
        ("unit", c.unit.as_ref().map(|x| x.span())),
        ("tolerance", c.tolerance.as_ref().map(|x| x.span())),
        ("relative_to", c.relative_to.as_ref().map(|x| x.span())),
        ("duration", c.duration.as_ref().map(|_| kspan.clone())),
        ("cell", c.cell.as_ref().map(|x| x.span())),
        ("expect", c.expect.as_ref().map(|x| x.span())),
        ("reason", c.reason.as_ref().map(|_| kspan.clone())),
        ("figures", c.figures.as_ref().map(|_| kspan.clone())),
        ("check", c.check.as_ref().map(|x| x.span())),
    ];
    for (name, span) in present {
        if let Some(span) = span {
            if !allowed.contains(&name) {
                return Err((span, format!("`{name}` does not belong in a {} claim", kind.as_str())));
            }
        }
    }
    let tolerance = |default: f64| -> Result<f64, SpanErr> {
        match &c.tolerance {
            None => Ok(default),
            Some(t) if t.get_ref().is_finite() && *t.get_ref() >= 0.0 => Ok(*t.get_ref()),
            Some(t) => Err((t.span(), "`tolerance` is a fraction >= 0 (0.15 = 15%)".into())),
        }
    };
    let positive = |v: &Option<Spanned<f64>>| -> Result<f64, SpanErr> {
        need("value", v.is_some())?;
        let v = v.as_ref().expect("checked");
        if v.get_ref().is_finite() && *v.get_ref() > 0.0 {
            Ok(*v.get_ref())
        } else {
            Err((v.span(), "`value` must be a number above 0".into()))
        }
    };
    let unit_for = |sel: &Selector| -> Result<(String, f64), SpanErr> {
        need("unit", c.unit.is_some())?;
        let u = c.unit.as_ref().expect("checked");
        let dim = sel.dim();
        let factor = match (u.get_ref().as_str(), dim) {
            ("%", Dim::Fraction | Dim::Cores) => 0.01,
            (name, _) => match unit(name) {
                Some((d, f)) if d == dim => f,
                Some(_) | None if u.get_ref() == "%" || unit(u.get_ref()).is_some() => {
                    return Err((
                        u.span(),
                        format!(
                            "unit {:?} does not fit {} {} ({})",
                            u.get_ref(),
                            sel.metric,
                            sel.stat,
                            dim.as_str()
                        ),
                    ))
                }
                _ => {
                    return Err((
                        u.span(),
                        format!(
                            "unknown unit {:?} (one of: ms, s, MB, MiB, req/s, %, lines, cores, MiB/h)",
                            u.get_ref()
                        ),
                    ))
                }
            },
        };
        Ok((u.get_ref().clone(), factor))
    };
    Ok(match kind {
        Kind::Absolute => {
            need("measure", c.measure.is_some())?;
            let measure = selector(c.measure.as_ref().expect("checked"), cell_ids)?;
            let value = positive(&c.value)?;
            let (unit, factor) = unit_for(&measure)?;
            Body::Absolute {
                measure,
                value: value * factor,
                unit,
                tolerance: tolerance(DEFAULT_TOLERANCE)?,
                relative_to: c.relative_to.as_ref().map(|r| r.get_ref().clone()),
            }
        }
        Kind::Ratio => {
            need("numerator", c.numerator.is_some())?;
            need("denominator", c.denominator.is_some())?;
            let numerator = selector(c.numerator.as_ref().expect("checked"), cell_ids)?;
            let denominator = selector(c.denominator.as_ref().expect("checked"), cell_ids)?;
            if numerator.dim() != denominator.dim() {
                return Err((kspan, "a ratio's numerator and denominator must be in the same unit".into()));
            }
            Body::Ratio {
                numerator,
                denominator,
                value: positive(&c.value)?,
                tolerance: tolerance(DEFAULT_TOLERANCE)?,
            }
        }
        Kind::Ordering => {
            need("items", c.items.is_some())?;
            let items_raw = c.items.as_ref().expect("checked");
            if items_raw.get_ref().len() < 2 {
                return Err((items_raw.span(), "an ordering needs at least two items".into()));
            }
            let items =
                items_raw.get_ref().iter().map(|s| selector(s, cell_ids)).collect::<Result<Vec<_>, _>>()?;
            if items.iter().any(|i| i.dim() != items[0].dim()) {
                return Err((items_raw.span(), "an ordering's items must be in the same unit".into()));
            }
            Body::Ordering { items, tolerance: tolerance(0.0)? }
        }
        Kind::SoakSlope => {
            need("measure", c.measure.is_some())?;
            let m = c.measure.as_ref().expect("checked");
            let measure = selector(m, cell_ids)?;
            if measure.metric != "rss_slope" {
                return Err((m.span(), "a soak_slope claim measures `rss_slope`".into()));
            }
            need("value", c.value.is_some())?;
            let (unit, factor) = unit_for(&measure)?;
            need("duration", c.duration.is_some())?;
            Body::SoakSlope {
                measure,
                value: *c.value.as_ref().expect("checked").get_ref() * factor,
                unit,
                duration: c.duration.clone().expect("checked"),
            }
        }
        Kind::Outcome => {
            need("cell", c.cell.is_some())?;
            let cell = c.cell.as_ref().expect("checked");
            if !cell_ids.contains(cell.get_ref()) {
                return Err((
                    cell.span(),
                    format!("cell {:?} is not a cell of the scenario", cell.get_ref()),
                ));
            }
            need("expect", c.expect.is_some())?;
            let e = c.expect.as_ref().expect("checked");
            let expect_failure = match e.get_ref().as_str() {
                "failure" => true,
                "success" => false,
                _ => return Err((e.span(), "`expect` is \"failure\" or \"success\"".into())),
            };
            Body::Outcome { cell: cell.get_ref().clone(), expect_failure, reason: c.reason.clone() }
        }
        Kind::Finding => {
            need("figures", c.figures.as_ref().is_some_and(|f| !f.is_empty()))?;
            need("check", c.check.is_some())?;
            need("explanation", c.explanation.is_some())?;
            let figures: Vec<Figure> = c
                .figures
                .as_ref()
                .expect("checked")
                .iter()
                .map(|f| Figure { label: f.label.clone(), value: f.value })
                .collect();
            let check = c.check.as_ref().expect("checked");
            let shown = match check.get_ref().as_str() {
                "differ" => figures.len() >= 2 && figures.iter().any(|f| f.value != figures[0].value),
                "identical" => figures.len() >= 2 && figures.iter().all(|f| f.value == figures[0].value),
                "arithmetic" => match c.expected {
                    Some(e) => (figures[0].value - e).abs() > 1e-9 * e.abs().max(1.0),
                    None => return Err((check.span(), "an arithmetic finding needs `expected`".into())),
                },
                _ => {
                    return Err((
                        check.span(),
                        "`check` is \"differ\", \"identical\" or \"arithmetic\"".into(),
                    ))
                }
            };
            if !shown {
                return Err((
                    check.span(),
                    format!("the figures do not show the finding (check {:?})", check.get_ref()),
                ));
            }
            Body::Finding {
                figures,
                check: check.get_ref().clone(),
                expected: c.expected,
                explanation: c.explanation.clone().expect("checked"),
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cells() -> Vec<String> {
        ["a/cold_start", "b/cold_start", "a/serial_calls", "g1/api-echo-w10", "g2/api-echo-w10"]
            .iter()
            .map(|s| s.to_string())
            .collect()
    }

    fn parse(s: &str) -> Result<Vec<Claim>, ClaimsError> {
        parse_claims(Path::new("x.toml"), s, &cells())
    }

    const HEAD: &str = "name = \"x\"\n[[server]]\nid = \"a\"\n";

    #[test]
    fn parses_every_kind() {
        let text = format!(
            "{HEAD}{}",
            r#"
[[claim]]
id = "abs"
source = { file = "000.txt", section = "Round 1", row = "p50", hardware = { cpu_model = "EPYC", cpus = 8 } }
statement = "0.82 ms"
kind = "absolute"
measure = { cell = "a/serial_calls", metric = "calls" }
value = 0.82
unit = "ms"
relative_to = "abs2"

[[claim]]
id = "abs2"
source = { file = "000.txt", section = "Round 1" }
statement = "38 MB"
kind = "absolute"
measure = { cell = "a/serial_calls", metric = "calls", stat = "p99" }
value = 1.42
unit = "ms"
tolerance = 0.3

[[claim]]
id = "mem"
source = { file = "000.txt", section = "Round 4" }
statement = "38 MB"
kind = "absolute"
measure = { cell = "a/cold_start", metric = "rss_after_initialize" }
value = 38
unit = "MB"

[[claim]]
id = "r"
source = { file = "001.txt", section = "What we found" }
statement = "643 vs 461"
kind = "ratio"
numerator = { cell = "a/cold_start", metric = "cold_start", stat = "rest_p50" }
denominator = { cell = "b/cold_start", metric = "cold_start", stat = "rest_p50" }
value = 1.42

[[claim]]
id = "o"
source = { file = "000.txt", section = "Round 4" }
statement = "a < b"
kind = "ordering"
items = [{ cell = "a/cold_start", metric = "cold_start" }, { cell = "b/cold_start", metric = "cold_start" }]

[[claim]]
id = "agg"
source = { file = "003.txt", section = "Throughput" }
statement = "gradio 48"
kind = "absolute"
measure = { cell = "g*/api-echo-w10", metric = "throughput", aggregate = "mean" }
value = 48.22
unit = "req/s"

[[claim]]
id = "soak"
source = { file = "000.txt", section = "Round 4" }
statement = "zero leaks over 24 h"
kind = "soak_slope"
measure = { cell = "a/cold_start", metric = "rss_slope" }
value = 0
unit = "MiB/h"
duration = "24h"

[[claim]]
id = "out"
source = { file = "001.txt", section = "What we found" }
statement = "fails"
kind = "outcome"
cell = "b/cold_start"
expect = "failure"
reason = "crash"

[[claim]]
id = "f"
source = { file = "000.txt", section = "Round 3" }
statement = "18 lines vs 24 lines"
kind = "finding"
figures = [{ label = "table", value = 18 }, { label = "text", value = 24 }]
check = "differ"
explanation = "the table and its own text disagree"
"#
        );
        let claims = parse(&text).unwrap();
        assert_eq!(claims.len(), 9);
        assert_eq!(claims[0].source.hardware, Some(("EPYC".into(), 8)));
        assert_eq!(claims[0].line, 5);
        let kinds: Vec<&str> = claims.iter().map(|c| c.kind().as_str()).collect();
        assert_eq!(
            kinds,
            [
                "absolute",
                "absolute",
                "absolute",
                "ratio",
                "ordering",
                "absolute",
                "soak_slope",
                "outcome",
                "finding"
            ]
        );
        match &claims[0].body {
            Body::Absolute { measure, value, tolerance, .. } => {
                assert_eq!((measure.stat.as_str(), *value, *tolerance), ("p50", 0.82, DEFAULT_TOLERANCE));
            }
            b => panic!("{b:?}"),
        }
        match &claims[2].body {
            Body::Absolute { value, .. } => assert_eq!(*value, 38e6),
            b => panic!("{b:?}"),
        }
    }

    fn err(s: &str) -> String {
        parse(&format!("{HEAD}{s}")).unwrap_err().to_string()
    }

    const BASE: &str =
        "[[claim]]\nid = \"c\"\nsource = { file = \"f\", section = \"s\" }\nstatement = \"x\"\n";

    #[test]
    fn errors_point_at_the_key() {
        let e = err(&format!("{BASE}kind = \"absolute\"\nmesure = 1\n"));
        assert!(e.starts_with("x.toml:9:1:") && e.contains("unknown field `mesure`"), "{e}");
        let e = err(&format!(
            "{BASE}kind = \"absolute\"\nmeasure = {{ cell = \"zz/cold_start\", metric = \"cold_start\" }}\nvalue = 1\nunit = \"ms\"\n"
        ));
        assert!(e.starts_with("x.toml:9:") && e.contains("matches no cell"), "{e}");
        let e = err(&format!(
            "{BASE}kind = \"absolute\"\nmeasure = {{ cell = \"a/cold_start\", metric = \"cold_start\", stat = \"p42\" }}\nvalue = 1\nunit = \"ms\"\n"
        ));
        assert!(e.contains("has no stat \"p42\""), "{e}");
        let e = err(&format!(
            "{BASE}kind = \"absolute\"\nmeasure = {{ cell = \"a/cold_start\", metric = \"cold_start\" }}\nvalue = 1\nunit = \"MB\"\n"
        ));
        assert!(e.starts_with("x.toml:11:8:") && e.contains("does not fit"), "{e}");
        let e = err(&format!("{BASE}kind = \"ratio\"\nitems = []\n"));
        assert!(e.contains("`items` does not belong in a ratio claim"), "{e}");
        let e = err(&format!(
            "{BASE}kind = \"absolute\"\nmeasure = {{ cell = \"g*/api-echo-w10\", metric = \"throughput\" }}\nvalue = 1\nunit = \"req/s\"\n"
        ));
        assert!(e.contains("aggregate"), "{e}");
        let e = err(&format!(
            "{BASE}kind = \"finding\"\nfigures = [{{ label = \"a\", value = 6 }}, {{ label = \"b\", value = 6 }}]\ncheck = \"differ\"\nexplanation = \"e\"\n"
        ));
        assert!(e.contains("do not show the finding"), "{e}");
        let e = err(&format!(
            "{BASE}kind = \"absolute\"\nmeasure = {{ cell = \"a/cold_start\", metric = \"cold_start\" }}\nvalue = 1\nunit = \"ms\"\nrelative_to = \"nope\"\n"
        ));
        assert!(e.contains("names no claim"), "{e}");
        let e = err(&format!("{BASE}kind = \"outcome\"\ncell = \"a/cold_start\"\nexpect = \"maybe\"\n"));
        assert!(e.contains("`expect` is"), "{e}");
        let twice = format!("{BASE}kind = \"outcome\"\ncell = \"a/cold_start\"\nexpect = \"success\"\n");
        let e = err(&format!("{twice}{twice}"));
        assert!(e.contains("used twice"), "{e}");
    }
}
