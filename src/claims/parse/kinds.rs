//! From a claim as written (`raw::RawClaim`) to its typed `Body`: the keys each kind takes, the
//! keys it needs, selectors checked against the scenario's cells, units converted to the metric's
//! own, and one conversion per kind. Every error carries the span it points at.

use std::ops::Range;

use toml::Spanned;

use super::cite::{self, Files};
use super::raw::{RawClaim, RawFigure, RawSelector};
use super::types::{
    cell_matches, Body, Cited, ConsistencyCheck, Dim, Figure, Kind, Selector, DEFAULT_TOLERANCE, METRICS,
};

/// The default tolerance of an error rate claim, in percentage points: a published 0 % is
/// reproduced by a measured interval within [0, 0.1 %].
pub const DEFAULT_POINTS: f64 = 0.1;

/// The steps a load records (`LoadMetrics::steps`) besides its tools.
pub const STEPS: &[&str] = &["initialize", "tools/list", "session", "delete", "http"];

pub(super) type SpanErr = (Range<usize>, String);

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
        // A share as a result file writes it (0.25, not 25 %).
        "fraction" => (Dim::Fraction, 1.0),
        _ => return None,
    })
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
    let step = match &r.step {
        None => None,
        Some(st) if metric == "latency" && !st.get_ref().is_empty() => Some(st.get_ref().clone()),
        Some(st) => {
            return Err((
                st.span(),
                format!(
                    "`step` selects one step's latency (metric \"latency\"): a tool's name, or one of {}",
                    STEPS.join(", ")
                ),
            ))
        }
    };
    Ok(Selector { cell: cell.clone(), metric: metric.clone(), stat, aggregate: r.aggregate, step })
}

/// The keys a kind takes besides `id`, `source`, `statement` and `kind`.
fn keys_of(kind: Kind) -> &'static [&'static str] {
    match kind {
        Kind::Absolute => &["measure", "value", "unit", "tolerance", "relative_to"],
        Kind::Ratio => &["numerator", "denominator", "value", "tolerance"],
        Kind::Ordering => &["items", "tolerance"],
        Kind::SoakSlope => &["measure", "value", "unit", "duration"],
        Kind::Outcome => &["cell", "expect", "reason", "detail"],
        Kind::Finding => &["figures", "check", "expected", "explanation"],
        Kind::Consistency => &["figures", "check", "tolerance"],
    }
}

/// One claim being converted: the table as written, its kind and the span of `kind` (where a
/// missing key is reported), and the scenario's cells its selectors must match.
struct Fields<'a> {
    c: &'a RawClaim,
    kind: Kind,
    kspan: Range<usize>,
    cell_ids: &'a [String],
    files: Files<'a>,
}

impl<'a> Fields<'a> {
    fn need(&self, name: &str, present: bool) -> Result<(), SpanErr> {
        if present {
            Ok(())
        } else {
            Err((self.kspan.clone(), format!("a {} claim needs `{name}`", self.kind.as_str())))
        }
    }

    /// A key the kind needs: its value, or the error at `kind`.
    fn required<T>(&self, name: &str, v: &'a Option<T>) -> Result<&'a T, SpanErr> {
        self.need(name, v.is_some())?;
        Ok(v.as_ref().expect("checked"))
    }

    /// Keys a kind does not use are errors, at the key.
    fn refuse_foreign_keys(&self) -> Result<(), SpanErr> {
        let (c, kspan) = (self.c, &self.kspan);
        let allowed = keys_of(self.kind);
        let present: [(&str, Option<Range<usize>>); 15] = [
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
            ("detail", c.detail.as_ref().map(|x| x.span())),
            ("figures", c.figures.as_ref().map(|x| x.span())),
            ("check", c.check.as_ref().map(|x| x.span())),
        ];
        for (name, span) in present {
            if let Some(span) = span {
                if !allowed.contains(&name) {
                    return Err((
                        span,
                        format!("`{name}` does not belong in a {} claim", self.kind.as_str()),
                    ));
                }
            }
        }
        Ok(())
    }

    fn selector(&self, s: &Spanned<RawSelector>) -> Result<Selector, SpanErr> {
        selector(s, self.cell_ids)
    }

    fn tolerance(&self, default: f64) -> Result<f64, SpanErr> {
        match &self.c.tolerance {
            None => Ok(default),
            Some(t) if t.get_ref().is_finite() && *t.get_ref() >= 0.0 => Ok(*t.get_ref()),
            Some(t) => Err((t.span(), "`tolerance` is a fraction >= 0 (0.15 = 15%)".into())),
        }
    }

    /// `value`, which must be above 0 (at least 0 when `zero` allows it): written, or read from
    /// the result file the claim's `source` cites (`path`; a value written beside it must agree).
    fn positive(&self, zero: bool) -> Result<(f64, Vec<Cited>), SpanErr> {
        let src = &self.c.source;
        let (v, span, cited) = match (&src.results, &src.path) {
            (Some(results), Some(path)) => {
                let cited = cite::read(self.files, results, path.get_ref(), path.span())?;
                cite::agree(self.c.value.as_ref(), &cited)?;
                (cited.value, path.span(), vec![cited])
            }
            _ => {
                let v = self.required("value", &self.c.value)?;
                (*v.get_ref(), v.span(), Vec::new())
            }
        };
        if v.is_finite() && (v > 0.0 || (zero && v == 0.0)) {
            Ok((v, cited))
        } else {
            let least = if zero { "at least 0" } else { "above 0" };
            Err((span, format!("`value` must be a number {least}, not {v}")))
        }
    }

    /// The figures `source.paths` cites, one per item (`want` of them), when it is given.
    fn cited_paths(&self, want: usize) -> Result<Option<Vec<Cited>>, SpanErr> {
        let src = &self.c.source;
        let Some(paths) = &src.paths else { return Ok(None) };
        let Some(results) = &src.results else {
            return Err((paths.span(), "`paths` are JSON Pointers into the file `results` names".into()));
        };
        if paths.get_ref().len() != want {
            return Err((
                paths.span(),
                format!(
                    "a {} claim cites {want} figures with `paths`, not {}",
                    self.kind.as_str(),
                    paths.get_ref().len()
                ),
            ));
        }
        let cited = paths
            .get_ref()
            .iter()
            .map(|p| cite::read(self.files, results, p, paths.span()))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Some(cited))
    }

    /// A figure of a finding or consistency claim: a literal `value` (a consistency claim says
    /// where it comes from with `from`), or one read from a result file (`results`, `path`).
    fn figure(&self, f: &RawFigure) -> Result<Figure, SpanErr> {
        let span = self.c.figures.as_ref().map_or(self.kspan.clone(), |x| x.span());
        let (value, cited) = match (&f.results, &f.path) {
            (Some(results), Some(path)) => {
                let cited = cite::read(self.files, results, path.get_ref(), path.span())?;
                cite::agree(f.value.as_ref(), &cited)?;
                (cited.value, Some(cited))
            }
            (None, None) => match &f.value {
                Some(v) => (*v.get_ref(), None),
                None => {
                    return Err((
                        span,
                        format!("figure {:?} needs a `value`, or `results` and `path`", f.label),
                    ))
                }
            },
            _ => return Err((span, format!("figure {:?}: `results` and `path` go together", f.label))),
        };
        if self.kind == Kind::Consistency && cited.is_none() && f.from.is_none() {
            return Err((
                f.value.as_ref().map_or(span, |v| v.span()),
                format!("figure {:?} is written as a literal: say where it comes from with `from`", f.label),
            ));
        }
        Ok(Figure { label: f.label.clone(), value, cited, from: f.from.clone() })
    }

    /// `unit` and its factor to the selector's own unit; it must fit the selector's metric.
    fn unit_for(&self, sel: &Selector) -> Result<(String, f64), SpanErr> {
        let u = self.required("unit", &self.c.unit)?;
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
                        "unknown unit {:?} (one of: ms, s, MB, MiB, req/s, %, fraction, lines, cores, MiB/h)",
                        u.get_ref()
                    ),
                    ))
                }
            },
        };
        Ok((u.get_ref().clone(), factor))
    }
}

/// The typed body of a claim as written, checked against the scenario's cells.
/// and the published figures it cites from the source's result files.
pub(super) fn body(c: &RawClaim, cell_ids: &[String], files: Files) -> Result<(Body, Vec<Cited>), SpanErr> {
    let f = Fields { c, kind: *c.kind.get_ref(), kspan: c.kind.span(), cell_ids, files };
    f.refuse_foreign_keys()?;
    f.check_source()?;
    let none = |b: Body| (b, Vec::new());
    match f.kind {
        Kind::Absolute => absolute(&f),
        Kind::Ratio => ratio(&f),
        Kind::Ordering => ordering(&f),
        Kind::SoakSlope => soak_slope(&f).map(none),
        Kind::Outcome => outcome(&f).map(none),
        Kind::Finding => finding(&f),
        Kind::Consistency => consistency(&f),
    }
}

impl Fields<'_> {
    /// A claim's `source` is a seed file (`file`, `section`) or a result file (`results` with
    /// `path` or `paths`, which kinds take which is checked by each kind).
    fn check_source(&self) -> Result<(), SpanErr> {
        let s = &self.c.source;
        let seed = s.file.is_some() || s.section.is_some();
        let cites = s.results.is_some() || s.path.is_some() || s.paths.is_some();
        let span = s.results.as_ref().map_or(self.c.id.span(), |r| r.span());
        match (seed, cites) {
            (true, true) => Err((span, "a claim's `source` is a seed file (`file`, `section`) or a result file (`results`, `path`), not both".into())),
            (false, false) => Err((self.c.id.span(), "a claim's `source` needs `file` and `section`, or `results` and `path`".into())),
            (true, false) if s.file.is_none() || s.section.is_none() => {
                Err((self.c.id.span(), "a claim's `source` needs both `file` and `section`".into()))
            }
            (false, true) if s.results.is_none() => Err((
                s.path.as_ref().map_or(span, |p| p.span()),
                "`path` is a JSON Pointer into the file `results` names".into(),
            )),
            (false, true) if s.path.is_some() && s.paths.is_some() => {
                Err((span, "a claim cites one figure (`path`) or several (`paths`), not both".into()))
            }
            (false, true) => {
                let one = matches!(self.kind, Kind::Absolute);
                let many = matches!(self.kind, Kind::Ratio | Kind::Ordering);
                let ok = match (&s.path, &s.paths) {
                    (Some(_), None) => one,
                    (None, Some(_)) => many,
                    // Finding and consistency cite per figure; `results` alone names the file.
                    (None, None) => matches!(self.kind, Kind::Finding | Kind::Consistency),
                    _ => false,
                };
                if ok {
                    Ok(())
                } else {
                    Err((
                        span,
                        format!(
                            "a {} claim cites {}",
                            self.kind.as_str(),
                            match self.kind {
                                Kind::Absolute => "one figure: `path`",
                                Kind::Ratio => "its two figures: `paths = [numerator, denominator]`",
                                Kind::Ordering => "one figure per item: `paths`, smallest first",
                                Kind::Finding | Kind::Consistency => "its figures in `figures` (each with `results` and `path`)",
                                _ => "no result file",
                            }
                        ),
                    ))
                }
            }
            (true, false) => Ok(()),
        }
    }
}

fn absolute(f: &Fields) -> Result<(Body, Vec<Cited>), SpanErr> {
    let measure = f.selector(f.required("measure", &f.c.measure)?)?;
    // An error rate is compared in percentage points: a published 0 is a figure like any other.
    let points = measure.metric == "error_rate";
    let (value, cited) = f.positive(points)?;
    let (unit, factor) = f.unit_for(&measure)?;
    let tolerance =
        if points { f.tolerance(DEFAULT_POINTS)? / 100.0 } else { f.tolerance(DEFAULT_TOLERANCE)? };
    let body = Body::Absolute {
        measure,
        value: value * factor,
        unit,
        tolerance,
        relative_to: f.c.relative_to.as_ref().map(|r| r.get_ref().clone()),
        points,
    };
    Ok((body, cited))
}

fn ratio(f: &Fields) -> Result<(Body, Vec<Cited>), SpanErr> {
    let numerator = f.required("numerator", &f.c.numerator)?;
    let denominator = f.required("denominator", &f.c.denominator)?;
    let numerator = f.selector(numerator)?;
    let denominator = f.selector(denominator)?;
    if numerator.dim() != denominator.dim() {
        return Err((f.kspan.clone(), "a ratio's numerator and denominator must be in the same unit".into()));
    }
    let (value, cited) = match f.cited_paths(2)? {
        Some(c) => {
            if !(c[0].value > 0.0 && c[1].value > 0.0) {
                return Err((
                    f.kspan.clone(),
                    format!("the cited figures {} and {} must be above 0", c[0].text(), c[1].text()),
                ));
            }
            let v = c[0].value / c[1].value;
            if let Some(w) = &f.c.value {
                if (w.get_ref() - v).abs() > 0.005 * v {
                    return Err((
                        w.span(),
                        format!(
                            "`value` {} disagrees with the {} the cited figures give ({} / {})",
                            w.get_ref(),
                            super::super::num(v),
                            c[0].text(),
                            c[1].text()
                        ),
                    ));
                }
            }
            (v, c)
        }
        None => f.positive(false)?,
    };
    Ok((Body::Ratio { numerator, denominator, value, tolerance: f.tolerance(DEFAULT_TOLERANCE)? }, cited))
}

fn ordering(f: &Fields) -> Result<(Body, Vec<Cited>), SpanErr> {
    let items_raw = f.required("items", &f.c.items)?;
    if items_raw.get_ref().len() < 2 {
        return Err((items_raw.span(), "an ordering needs at least two items".into()));
    }
    let items = items_raw.get_ref().iter().map(|s| f.selector(s)).collect::<Result<Vec<_>, _>>()?;
    if items.iter().any(|i| i.dim() != items[0].dim()) {
        return Err((items_raw.span(), "an ordering's items must be in the same unit".into()));
    }
    // Published figures, one per item: the source's own files must show the order claimed.
    let cited = f.cited_paths(items.len())?.unwrap_or_default();
    if let Some(k) = (1..cited.len()).find(|k| cited[*k].value < cited[k - 1].value) {
        return Err((
            f.c.source.paths.as_ref().map_or(f.kspan.clone(), |p| p.span()),
            format!(
                "the cited figures are not in the order claimed (smallest first): {} is above {}",
                cited[k - 1].text(),
                cited[k].text()
            ),
        ));
    }
    Ok((Body::Ordering { items, tolerance: f.tolerance(0.0)? }, cited))
}

fn soak_slope(f: &Fields) -> Result<Body, SpanErr> {
    let m = f.required("measure", &f.c.measure)?;
    let measure = f.selector(m)?;
    if measure.metric != "rss_slope" {
        return Err((m.span(), "a soak_slope claim measures `rss_slope`".into()));
    }
    let value = f.required("value", &f.c.value)?;
    let (unit, factor) = f.unit_for(&measure)?;
    let duration = f.required("duration", &f.c.duration)?;
    Ok(Body::SoakSlope { measure, value: *value.get_ref() * factor, unit, duration: duration.clone() })
}

fn outcome(f: &Fields) -> Result<Body, SpanErr> {
    let cell = f.required("cell", &f.c.cell)?;
    if !f.cell_ids.contains(cell.get_ref()) {
        return Err((cell.span(), format!("cell {:?} is not a cell of the scenario", cell.get_ref())));
    }
    let e = f.required("expect", &f.c.expect)?;
    let expect_failure = match e.get_ref().as_str() {
        "failure" => true,
        "success" => false,
        _ => return Err((e.span(), "`expect` is \"failure\" or \"success\"".into())),
    };
    let detail = match &f.c.detail {
        Some(d) if !expect_failure => {
            return Err((d.span(), "`detail` describes a failure: only with expect = \"failure\"".into()))
        }
        Some(d) => match regex::Regex::new(d.get_ref()) {
            Ok(_) => Some(d.get_ref().clone()),
            Err(e) => return Err((d.span(), format!("`detail` is not a regular expression: {e}"))),
        },
        None => None,
    };
    Ok(Body::Outcome { cell: cell.get_ref().clone(), expect_failure, reason: f.c.reason.clone(), detail })
}

fn figures(f: &Fields) -> Result<Vec<Figure>, SpanErr> {
    f.need("figures", f.c.figures.as_ref().is_some_and(|f| !f.get_ref().is_empty()))?;
    f.c.figures.as_ref().expect("checked").get_ref().iter().map(|x| f.figure(x)).collect()
}

fn finding(f: &Fields) -> Result<(Body, Vec<Cited>), SpanErr> {
    let figures = figures(f)?;
    let check = f.required("check", &f.c.check)?;
    let explanation = f.required("explanation", &f.c.explanation)?;
    let shown = match check.get_ref().as_str() {
        "differ" => figures.len() >= 2 && figures.iter().any(|f| f.value != figures[0].value),
        "identical" => figures.len() >= 2 && figures.iter().all(|f| f.value == figures[0].value),
        "arithmetic" => match f.c.expected {
            Some(e) => (figures[0].value - e).abs() > 1e-9 * e.abs().max(1.0),
            None => return Err((check.span(), "an arithmetic finding needs `expected`".into())),
        },
        _ => return Err((check.span(), "`check` is \"differ\", \"identical\" or \"arithmetic\"".into())),
    };
    if !shown {
        return Err((
            check.span(),
            format!("the figures do not show the finding (check {:?})", check.get_ref()),
        ));
    }
    let cited = figures.iter().filter_map(|x| x.cited.clone()).collect();
    let body = Body::Finding {
        figures,
        check: check.get_ref().clone(),
        expected: f.c.expected,
        explanation: explanation.clone(),
    };
    Ok((body, cited))
}

fn consistency(f: &Fields) -> Result<(Body, Vec<Cited>), SpanErr> {
    let figures = figures(f)?;
    let check = f.required("check", &f.c.check)?;
    let (check, want) = match check.get_ref().as_str() {
        "equal" => (ConsistencyCheck::Equal, 2..=usize::MAX),
        "quotient" => (ConsistencyCheck::Quotient, 3..=3),
        _ => return Err((check.span(), "`check` is \"equal\" (every figure the same) or \"quotient\" (figures[0] / figures[1] = figures[2])".into())),
    };
    if !want.contains(&figures.len()) {
        let span = f.c.figures.as_ref().map_or(f.kspan.clone(), |x| x.span());
        let need = if check == ConsistencyCheck::Equal { "two figures or more" } else { "three figures" };
        return Err((span, format!("a consistency check {:?} relates {need}, not {}", check, figures.len())));
    }
    if check == ConsistencyCheck::Quotient && figures[1].value == 0.0 {
        return Err((
            f.kspan.clone(),
            format!("figure {:?} is 0: nothing can be divided by it", figures[1].label),
        ));
    }
    let cited = figures.iter().filter_map(|x| x.cited.clone()).collect();
    Ok((Body::Consistency { figures, check, tolerance: f.tolerance(0.01)? }, cited))
}
