//! The histories as the renderers show them: a point with its interval, a change, a step's line,
//! the method note, and the JSON form of `Format::History`. Text only; the tables, Markdown and
//! HTML around it belong to their renderers.

use crate::record::Record;
use crate::stats::Interval;

use super::series::{histories, MIN_VERSIONS};
use super::steps::{MIN_SEGMENT, MIN_STEP_CHANGE, NOISE_FLOOR, PENALTY_PER_LN_N};
use super::{History, HistoryMetric, Point, Step};
use crate::report::rows::{Unit, CONFIDENCE, RESAMPLES};
use crate::report::units::{ms_interval, rate_number, unit_text};

/// A value in its unit: `612 ms`, `102.3 µs`, `1,234 req/s`, `45.2 MiB`.
fn value_text(unit: Unit, v: f64) -> String {
    unit_text(unit, v)
}

/// A point as the tables show it: `612 ms [598–631]`, or the value alone without an interval.
pub(in crate::report) fn point_text(unit: Unit, p: &Point) -> String {
    let v = value_text(unit, p.value);
    let Some(ci) = p.ci.filter(Interval::is_finite) else { return v };
    let bounds = match unit {
        Unit::Ms => {
            let t = ms_interval(Some(&Interval { estimate: p.value, ..ci }));
            t.rsplit_once(' ').map_or(t.clone(), |(b, _)| b.to_string())
        }
        Unit::Rps => format!("{}–{}", rate_number(ci.lower), rate_number(ci.upper)),
        _ => return v,
    };
    format!("{v} [{bounds}]")
}

/// `+38 %`, `−12 %`.
pub(in crate::report) fn change_text(ratio: f64) -> String {
    let pct = (ratio - 1.0) * 100.0;
    if pct >= 0.0 {
        format!("+{pct:.0} %")
    } else {
        format!("−{:.0} %", -pct)
    }
}

/// `▲` for a step up, `▼` for a step down.
pub(in crate::report) fn arrow(step: &Step) -> &'static str {
    if step.ratio >= 1.0 {
        "▲"
    } else {
        "▼"
    }
}

/// `cold start ▲ +38 % at python-mcp 1.9.0 (1.8.1 612 ms → 1.9.0 845 ms; levels 610 ms → 842 ms), regression`,
/// with `; api fastmcp → mcpserver` when the server source's API generation changes there too.
pub fn step_line(h: &History, s: &Step) -> String {
    let unit = s.metric.unit();
    let api = match (h.apis.get(s.from_index), h.apis.get(s.index)) {
        (Some(a), Some(b)) if a != b => format!("; api {a} → {b}"),
        _ => String::new(),
    };
    format!(
        "{} {} {} at {} {} ({} {} → {} {}; levels {} → {}{api}), {}",
        s.metric.label(),
        arrow(s),
        change_text(s.ratio),
        h.key.family,
        s.to_version,
        s.from_version,
        value_text(unit, s.from_value),
        s.to_version,
        value_text(unit, s.to_value),
        value_text(unit, s.before),
        value_text(unit, s.after),
        if s.regression { "regression" } else { "improvement" },
    )
}

/// The step that starts at version `index` for `metric`, if any.
pub(in crate::report) fn step_at(h: &History, metric: HistoryMetric, index: usize) -> Option<&Step> {
    h.steps.iter().find(|s| s.metric == metric && s.index == index)
}

/// The note that says how the history figures and steps were made.
pub fn method_note() -> String {
    format!(
        "Versions in semver order; repeats of a cell pooled. Medians (and call percentiles from the pooled \
         histograms) with {:.0}% bootstrap intervals. A step is a boundary of a penalized least-absolute-deviation \
         piecewise-constant fit of ln(value) (segments of at least {MIN_SEGMENT} versions, penalty {PENALTY_PER_LN_N}·ln(n+1) \
         noise units, noise at least {:.0}%), reported only when the levels differ by at least {:.0}% and the two \
         versions either side have disjoint intervals. ▲/▼ marks the first version of a step.",
        CONFIDENCE * 100.0,
        NOISE_FLOOR * 100.0,
        MIN_STEP_CHANGE * 100.0,
    )
}

/// The histories as JSON: `{"method": {...}, "series": [{key, label, runtime_versions, versions,
/// failures, apis,
/// metrics: [{metric, unit, points: [{version, value, lower, upper, n} | null], segments}],
/// steps}]}`.
pub fn history_json(records: &[Record]) -> serde_json::Value {
    let series: Vec<serde_json::Value> = histories(records)
        .iter()
        .map(|h| {
            let metrics: Vec<serde_json::Value> = h
                .metrics
                .iter()
                .map(|m| {
                    let points: Vec<serde_json::Value> = m
                        .points
                        .iter()
                        .zip(&h.versions)
                        .map(|(p, v)| match p {
                            None => serde_json::Value::Null,
                            Some(p) => serde_json::json!({
                                "version": v,
                                "value": p.value,
                                "lower": p.ci.map(|i| i.lower),
                                "upper": p.ci.map(|i| i.upper),
                                "n": p.n,
                            }),
                        })
                        .collect();
                    serde_json::json!({
                        "metric": m.metric,
                        "unit": m.unit,
                        "points": points,
                        "segments": m.segments,
                    })
                })
                .collect();
            serde_json::json!({
                "key": h.key,
                "label": h.label,
                "runtime_versions": h.runtime_versions,
                "versions": h.versions,
                "apis": h.apis,
                "failures": h.failures,
                "metrics": metrics,
                "steps": h.steps,
            })
        })
        .collect();
    serde_json::json!({
        "method": {
            "confidence": CONFIDENCE,
            "resamples": RESAMPLES,
            "min_versions": MIN_VERSIONS,
            "min_step_change": MIN_STEP_CHANGE,
            "noise_floor": NOISE_FLOOR,
            "penalty_per_ln_n": PENALTY_PER_LN_N,
            "min_segment": MIN_SEGMENT,
        },
        "series": series,
    })
}
