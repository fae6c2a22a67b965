//! The HTML report's "Over time" section: for every load cell with a time series, its latency
//! percentiles per interval and its server's RSS (with the idle phase after the load appended)
//! over time, the measured window shaded; a soak's figures (leak slope, idle levels, drift)
//! written under its charts. Pure: records in, HTML out.

use std::fmt::Write as _;

use super::charts::{self, Series};
use super::html::{chart_or_note, esc};
use crate::record::Record;
use crate::spec::{LoadSeries, SoakFigures, MIN_CALLS_FOR_DRIFT};
use crate::stats::{self, Slope};

/// Cells drawn at most; the rest are named (a sweep has hundreds of load cells).
const MAX_CELLS: usize = 12;
const MIB: f64 = 1_048_576.0;

/// Latency p50 and p99 per interval (ms), over the intervals with enough calls.
fn latency_series(s: &LoadSeries) -> Vec<Series> {
    let mut p50 = Series { label: "p50".into(), points: Vec::new() };
    let mut p99 = Series { label: "p99".into(), points: Vec::new() };
    for i in s.intervals.iter().filter(|i| i.ok >= MIN_CALLS_FOR_DRIFT.min(5)) {
        let Some(h) = i.histogram.as_deref().and_then(|h| stats::decode_histogram(h).ok()) else { continue };
        let mid = (i.t_ms as f64 + s.interval_ms as f64 / 2.0) / 1e3;
        p50.points.push((mid, h.value_at_quantile(0.5) as f64 / 1e6));
        p99.points.push((mid, h.value_at_quantile(0.99) as f64 / 1e6));
    }
    vec![p50, p99]
}

/// The server tree's RSS (MiB) under load, then in the idle phase after it (its clock starts
/// when the last connection closed, put after the load's last sample).
fn memory_series(r: &Record, s: &LoadSeries) -> Vec<Series> {
    let res = &s.resources;
    let mut rss = Series {
        label: "RSS".into(),
        points: res
            .t_ms
            .iter()
            .zip(&res.rss_bytes)
            .map(|(t, b)| (*t as f64 / 1e3, *b as f64 / MIB))
            .collect(),
    };
    let after = r.metrics.memory.under_load.as_ref().and_then(|u| u.after_series.as_ref());
    let end = res.t_ms.last().copied().unwrap_or(s.window_to_ms) as f64 / 1e3;
    let mut idle = Series { label: "RSS, idle after the load".into(), points: Vec::new() };
    if let Some(a) = after {
        idle.points =
            a.t_ms.iter().zip(&a.rss_bytes).map(|(t, b)| (end + *t as f64 / 1e3, *b as f64 / MIB)).collect();
    }
    let cgroup = Series {
        label: "cgroup usage".into(),
        points: res
            .t_ms
            .iter()
            .zip(&res.cgroup_bytes)
            .filter_map(|(t, b)| Some((*t as f64 / 1e3, (*b)? as f64 / MIB)))
            .collect(),
    };
    rss.points.sort_by(|a, b| a.0.total_cmp(&b.0));
    vec![rss, idle, cgroup]
}

/// A latency axis label: `160`, `2.5`, `0.125` (as many decimals as the magnitude needs).
fn ms_tick(y: f64) -> String {
    if y.abs() >= 10.0 || y == 0.0 {
        format!("{y:.0}")
    } else if y.abs() >= 1.0 {
        format!("{y:.1}")
    } else {
        format!("{y:.3}")
    }
}

fn slope_text(s: Option<Slope>, k: f64, unit: &str) -> String {
    s.map_or("—".into(), |s| {
        format!(
            "{:+.3} {unit} (95% CI {:+.3} to {:+.3}, n_eff {:.0})",
            s.estimate * k,
            s.lower * k,
            s.upper * k,
            s.n_effective
        )
    })
}

fn soak_text(f: &SoakFigures, r: &Record) -> String {
    let after = r.metrics.memory.under_load.as_ref().and_then(|u| u.after_level);
    let lvl = |l: Option<crate::spec::MemoryLevel>| {
        l.map_or("—".into(), |l| format!("{:.1} MiB", l.estimate as f64 / MIB))
    };
    let mut text = format!(
        "Soak: RSS slope {} over the steady phase — {} (floor {:.1} MiB/h). Idle level {} before the load, {} after it. Latency drift: p50 {}, p99 {}.",
        slope_text(f.rss_bytes_per_hour, 1.0 / MIB, "MiB/h"),
        if f.leak { "a leak is named" } else { "no leak named" },
        f.leak_floor_bytes_per_hour as f64 / MIB,
        lvl(f.idle_before),
        lvl(after),
        slope_text(f.p50_ms_per_hour, 1.0, "ms/h"),
        slope_text(f.p99_ms_per_hour, 1.0, "ms/h"),
    );
    if !f.cycles.is_empty() {
        let mib = |b: Option<u64>| b.map_or("—".into(), |b| format!("{:.1}", b as f64 / MIB));
        let each: Vec<String> = f
            .cycles
            .iter()
            .map(|c| {
                let failed = if c.failed > 0 { format!(", {} failed", c.failed) } else { String::new() };
                format!(
                    "{} → {} MiB ({} calls{failed})",
                    mib(c.peak_rss_bytes),
                    mib(c.after.map(|l| l.estimate)),
                    c.ok
                )
            })
            .collect();
        text.push_str(&format!(
            " {} connect/disconnect cycles, peak → level after: {}.",
            f.cycles.len(),
            each.join(", ")
        ));
    }
    text
}

/// One line per soak record, for the text reports: `Soak ts-1.0.4-node/soak-w100: RSS slope …`.
pub(super) fn soak_lines(records: &[Record]) -> Vec<String> {
    records
        .iter()
        .filter_map(|r| {
            let f = r.metrics.load.as_ref()?.soak.as_ref()?;
            let run = r.cell.repeat.map(|p| format!(" (run {})", p.index + 1)).unwrap_or_default();
            let text = soak_text(f, r);
            Some(format!("{}{run}: {}", r.cell.id, text.strip_prefix("Soak: ").unwrap_or(&text)))
        })
        .map(|l| format!("Soak {l}"))
        .collect()
}

/// The section, or nothing when no record has a time series.
pub(super) fn over_time_section(o: &mut String, records: &[Record]) {
    let mut cells: Vec<(&Record, &LoadSeries)> =
        records.iter().filter_map(|r| Some((r, r.metrics.load.as_ref()?.series.as_ref()?))).collect();
    if cells.is_empty() {
        return;
    }
    // Soaks first, then in the records' order.
    cells.sort_by_key(|(r, _)| r.metrics.load.as_ref().is_none_or(|l| l.soak.is_none()));
    o.push_str("<h2>Over time</h2>\n");
    for (r, s) in cells.iter().take(MAX_CELLS) {
        let name = match r.cell.repeat {
            Some(p) => format!("{} (run {})", r.cell.id, p.index + 1),
            None => r.cell.id.clone(),
        };
        let _ = writeln!(o, "<h3>{}</h3>", esc(&name));
        let window = (s.window_from_ms as f64 / 1e3, s.window_to_ms as f64 / 1e3);
        chart_or_note(
            o,
            charts::over_time("Latency per interval", "ms", &latency_series(s), window, &ms_tick),
            &format!(
                "p50 and p99 of the calls answered in each {} ms interval (those with at least 5 calls), warm-up or ramp included.",
                s.interval_ms
            ),
        );
        chart_or_note(
            o,
            charts::over_time("Server memory", "MiB", &memory_series(r, s), window, &|y| format!("{y:.0}")),
            "The server tree's RSS and its container's cgroup usage at the start of each interval, then the tree's RSS every 250 ms in the idle phase after the load.",
        );
        if let Some(f) = r.metrics.load.as_ref().and_then(|l| l.soak.as_ref()) {
            let _ = writeln!(o, "<p>{}</p>", esc(&soak_text(f, r)));
        }
    }
    if cells.len() > MAX_CELLS {
        let rest: Vec<String> = cells[MAX_CELLS..].iter().map(|(r, _)| r.cell.id.clone()).collect();
        let _ = writeln!(
            o,
            "<p class=\"note\">{} more cells have time series, not drawn here: {}.</p>",
            rest.len(),
            esc(&rest.join(", "))
        );
    }
}
