//! From a claim as written (`raw::RawClaim`) to its typed `Body`: the keys each kind takes, the
//! keys it needs, selectors checked against the scenario's cells, units converted to the metric's
//! own, and one conversion per kind. Every error carries the span it points at.

use std::ops::Range;

use toml::Spanned;

use super::raw::{RawClaim, RawSelector};
use super::types::{cell_matches, Body, Dim, Figure, Kind, Selector, DEFAULT_TOLERANCE, METRICS};

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
    Ok(Selector { cell: cell.clone(), metric: metric.clone(), stat, aggregate: r.aggregate })
}

/// The keys a kind takes besides `id`, `source`, `statement` and `kind`.
fn keys_of(kind: Kind) -> &'static [&'static str] {
    match kind {
        Kind::Absolute => &["measure", "value", "unit", "tolerance", "relative_to"],
        Kind::Ratio => &["numerator", "denominator", "value", "tolerance"],
        Kind::Ordering => &["items", "tolerance"],
        Kind::SoakSlope => &["measure", "value", "unit", "duration"],
        Kind::Outcome => &["cell", "expect", "reason"],
        Kind::Finding => &["figures", "check", "expected", "explanation"],
    }
}

/// One claim being converted: the table as written, its kind and the span of `kind` (where a
/// missing key is reported), and the scenario's cells its selectors must match.
struct Fields<'a> {
    c: &'a RawClaim,
    kind: Kind,
    kspan: Range<usize>,
    cell_ids: &'a [String],
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

    /// `value`, which must be above 0.
    fn positive(&self) -> Result<f64, SpanErr> {
        let v = self.required("value", &self.c.value)?;
        if v.get_ref().is_finite() && *v.get_ref() > 0.0 {
            Ok(*v.get_ref())
        } else {
            Err((v.span(), "`value` must be a number above 0".into()))
        }
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
                            "unknown unit {:?} (one of: ms, s, MB, MiB, req/s, %, lines, cores, MiB/h)",
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
pub(super) fn body(c: &RawClaim, cell_ids: &[String]) -> Result<Body, SpanErr> {
    let f = Fields { c, kind: *c.kind.get_ref(), kspan: c.kind.span(), cell_ids };
    f.refuse_foreign_keys()?;
    match f.kind {
        Kind::Absolute => absolute(&f),
        Kind::Ratio => ratio(&f),
        Kind::Ordering => ordering(&f),
        Kind::SoakSlope => soak_slope(&f),
        Kind::Outcome => outcome(&f),
        Kind::Finding => finding(&f),
    }
}

fn absolute(f: &Fields) -> Result<Body, SpanErr> {
    let measure = f.selector(f.required("measure", &f.c.measure)?)?;
    let value = f.positive()?;
    let (unit, factor) = f.unit_for(&measure)?;
    Ok(Body::Absolute {
        measure,
        value: value * factor,
        unit,
        tolerance: f.tolerance(DEFAULT_TOLERANCE)?,
        relative_to: f.c.relative_to.as_ref().map(|r| r.get_ref().clone()),
    })
}

fn ratio(f: &Fields) -> Result<Body, SpanErr> {
    let numerator = f.required("numerator", &f.c.numerator)?;
    let denominator = f.required("denominator", &f.c.denominator)?;
    let numerator = f.selector(numerator)?;
    let denominator = f.selector(denominator)?;
    if numerator.dim() != denominator.dim() {
        return Err((f.kspan.clone(), "a ratio's numerator and denominator must be in the same unit".into()));
    }
    Ok(Body::Ratio {
        numerator,
        denominator,
        value: f.positive()?,
        tolerance: f.tolerance(DEFAULT_TOLERANCE)?,
    })
}

fn ordering(f: &Fields) -> Result<Body, SpanErr> {
    let items_raw = f.required("items", &f.c.items)?;
    if items_raw.get_ref().len() < 2 {
        return Err((items_raw.span(), "an ordering needs at least two items".into()));
    }
    let items = items_raw.get_ref().iter().map(|s| f.selector(s)).collect::<Result<Vec<_>, _>>()?;
    if items.iter().any(|i| i.dim() != items[0].dim()) {
        return Err((items_raw.span(), "an ordering's items must be in the same unit".into()));
    }
    Ok(Body::Ordering { items, tolerance: f.tolerance(0.0)? })
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
    Ok(Body::Outcome { cell: cell.get_ref().clone(), expect_failure, reason: f.c.reason.clone() })
}

fn finding(f: &Fields) -> Result<Body, SpanErr> {
    f.need("figures", f.c.figures.as_ref().is_some_and(|f| !f.is_empty()))?;
    let check = f.required("check", &f.c.check)?;
    let explanation = f.required("explanation", &f.c.explanation)?;
    let figures: Vec<Figure> =
        f.c.figures
            .as_ref()
            .expect("checked")
            .iter()
            .map(|f| Figure { label: f.label.clone(), value: f.value })
            .collect();
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
    Ok(Body::Finding {
        figures,
        check: check.get_ref().clone(),
        expected: f.c.expected,
        explanation: explanation.clone(),
    })
}
