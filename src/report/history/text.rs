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

/// The bounds of an interval in a point's unit: `598–631` (ms scaled like the value), `1,2–1,3`
/// req/s, MiB for bytes.
fn bounds_text(unit: Unit, value: f64, ci: &Interval) -> String {
    match unit {
        Unit::Ms => {
            let t = ms_interval(Some(&Interval { estimate: value, ..*ci }));
            t.rsplit_once(' ').map_or(t.clone(), |(b, _)| b.to_string())
        }
        Unit::Rps => format!("{}–{}", rate_number(ci.lower), rate_number(ci.upper)),
        _ => format!("{:.1}–{:.1}", ci.lower / 1048576.0, ci.upper / 1048576.0),
    }
}

/// A point as the tables show it: `612 ms [598–631]` (within one run), or with runs as the unit
/// `612 ms [560–668, 3 runs; within 598–631]`, `noisy 1/3` when the quiet check flagged runs,
/// or the value alone without an interval.
pub(in crate::report) fn point_text(unit: Unit, p: &Point) -> String {
    let v = value_text(unit, p.value);
    let noisy = match p.noisy {
        0 => String::new(),
        k => format!(" noisy {k}/{}", p.runs),
    };
    let Some(ci) = p.ci.filter(Interval::is_finite) else { return format!("{v}{noisy}") };
    let bounds = bounds_text(unit, p.value, &ci);
    if !p.between {
        return format!("{v} [{bounds}]{noisy}");
    }
    let within = match p.within.filter(Interval::is_finite) {
        Some(w) => format!("; within {}", bounds_text(unit, p.value, &w)),
        None => String::new(),
    };
    format!("{v} [{bounds}, {} runs{within}]{noisy}", p.runs)
}

/// A control release's drift as the reports show it: `1.1.2 +6 % (start 1.02 ms, middle 1.05 ms,
/// end 1.08 ms)`.
pub fn control_text(unit: Unit, c: &super::ControlDrift) -> String {
    let at: Vec<String> =
        c.values.iter().map(|(at, v)| format!("{} {}", at.as_str(), value_text(unit, *v))).collect();
    format!("{} {} ({})", c.version, change_text(1.0 + c.drift), at.join(", "))
}

/// The notes under a history's table: `HOSTS DIFFER: …` when its records come from hosts of
/// different speed, then one line per metric that had A/A controls: `A/A controls, cold start:
/// up to +6 % — 1.1.2 +6 % (start 301 ms, middle 310 ms, end 319 ms); 1.30.0 +3 % (…)`. A step
/// must move more than that. Then a soak series' leak lines (`leaks::soak_lines`).
pub fn control_lines(h: &History) -> Vec<String> {
    let hosts = h.hosts_differ.iter().map(|d| format!("HOSTS DIFFER: {d}; a step may be the machines'"));
    let controls = h.metrics.iter().filter_map(|m| {
        let d = m.control_drift?;
        let each: Vec<String> = m.controls.iter().map(|c| control_text(m.unit, c)).collect();
        Some(format!(
            "A/A controls, {}: up to {} — {}",
            m.metric.label(),
            change_text(1.0 + d),
            each.join("; ")
        ))
    });
    hosts.chain(controls).chain(super::soak_lines(h)).collect()
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
        "Versions in semver order. With several runs of a version, runs are the unit: the median of the runs' \
         values with a 95% between-run interval (Student t on the logarithms), the within-run interval beside it; \
         with one run, the pooled samples' median (and call percentiles from the histograms) with {:.0}% bootstrap \
         intervals. A/A control measurements (a control release again at the start, middle and end of the run) \
         are left out of the points and shown as the run's drift. A step is a boundary of a penalized \
         least-absolute-deviation piecewise-constant fit of ln(value) (segments of at least {MIN_SEGMENT} versions, \
         penalty {PENALTY_PER_LN_N}·ln(n+1) noise units, noise at least {:.0}%), reported only when the levels differ \
         by at least {:.0}% and by more than the controls drifted, and the two versions either side have disjoint \
         intervals. ▲/▼ marks the first version of a step; `noisy k/n`: k of a point's n runs ran on a loud host.",
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
                                "interval": if p.between { "between_runs" } else { "within_run" },
                                "within_lower": p.within.map(|i| i.lower),
                                "within_upper": p.within.map(|i| i.upper),
                                "n": p.n,
                                "runs": p.runs,
                                "noisy_runs": p.noisy,
                            }),
                        })
                        .collect();
                    serde_json::json!({
                        "metric": m.metric,
                        "unit": m.unit,
                        "points": points,
                        "segments": m.segments,
                        "controls": m.controls,
                        "control_drift": m.control_drift,
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
                "soak": h.soak,
                "leak_changes": h.leak_changes,
                "hosts_differ": h.hosts_differ,
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
