//! The metrics in Bencher Metric Format (BMF) JSON, for continuous benchmarking:
//! `{ "<cell id>": { "<measure>": { "value", "lower_value", "upper_value" } } }`. The bounds are
//! the confidence interval of the value when it has one, and left out when it does not.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::record::Record;
use crate::stats::Interval;

use super::load::{load_rows, load_summary_rows, LoadRow};
use super::rows::{metric_rows, Metric};

#[derive(Debug, Serialize)]
struct Measure {
    value: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    lower_value: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    upper_value: Option<f64>,
}

fn measure(value: Option<f64>, ci: Option<&Interval>) -> Option<Measure> {
    let value = value.filter(|v| v.is_finite())?;
    let ci = ci.filter(|i| i.is_finite());
    Some(Measure { value, lower_value: ci.map(|i| i.lower), upper_value: ci.map(|i| i.upper) })
}

/// Bencher Metric Format JSON. Benchmarks are cells (by id), measures are `cold_start_ms`,
/// `tools_list_ms` (medians), `call_p50_ms`, `call_p95_ms`, `call_p99_ms`,
/// `rss_after_init_bytes` and `rss_end_bytes`. HTTP load cells give `throughput_rps` (higher is
/// better), `latency_p50_ms`, `latency_p90_ms`, `latency_p99_ms`, `latency_p999_ms`,
/// `latency_max_ms`, `error_rate` (a fraction), `server_cpu_cores`, `rss_peak_under_load_bytes`
/// and `cgroup_peak_bytes`: the median of a cell's repeats, bounded by the smallest and largest
/// repeat when there are several. Keys are sorted; when several runs hold the same cell id, a
/// later record's measure replaces an earlier one's.
pub fn bencher_json(records: &[Record]) -> String {
    let mut out: BTreeMap<String, BTreeMap<&'static str, Measure>> = BTreeMap::new();
    for row in metric_rows(records) {
        let entries: Vec<(&'static str, Option<Measure>)> = match row.metric {
            Metric::ColdStart => vec![("cold_start_ms", measure(Some(row.median), row.median_ci.as_ref()))],
            Metric::ToolsList => vec![("tools_list_ms", measure(Some(row.median), row.median_ci.as_ref()))],
            Metric::Calls => vec![
                ("call_p50_ms", measure(Some(row.median), row.median_ci.as_ref())),
                ("call_p95_ms", measure(row.p95, row.p95_ci.as_ref())),
                ("call_p99_ms", measure(row.p99, row.p99_ci.as_ref())),
            ],
            Metric::RssAfterInitialize => vec![("rss_after_init_bytes", measure(Some(row.median), None))],
            Metric::RssEnd => vec![("rss_end_bytes", measure(Some(row.median), None))],
            // Load cells: from the load rows below, the median of their repeats.
            Metric::Throughput
            | Metric::LoadLatency
            | Metric::ErrorRate
            | Metric::ServerCpu
            | Metric::RssPeakUnderLoad => vec![],
        };
        for (name, m) in entries {
            if let Some(m) = m {
                out.entry(row.cell.clone()).or_default().insert(name, m);
            }
        }
    }
    let per_record = load_rows(records);
    for row in load_summary_rows(records) {
        let repeats: Vec<&LoadRow> =
            per_record.iter().filter(|r| r.run_id == row.run_id && r.cell == row.cell).collect();
        let spread = |get: fn(&LoadRow) -> Option<f64>| {
            let v: Vec<f64> = repeats.iter().filter_map(|r| get(r)).filter(|x| x.is_finite()).collect();
            (v.len() > 1).then(|| {
                (v.iter().copied().fold(f64::MAX, f64::min), v.iter().copied().fold(f64::MIN, f64::max))
            })
        };
        let m = |get: fn(&LoadRow) -> Option<f64>| {
            let value = get(&row).filter(|v| v.is_finite())?;
            let s = spread(get);
            Some(Measure { value, lower_value: s.map(|x| x.0), upper_value: s.map(|x| x.1) })
        };
        let entries: [(&'static str, Option<Measure>); 10] = [
            ("throughput_rps", m(|r| r.throughput_rps)),
            ("latency_p50_ms", m(|r| r.p50_ms)),
            ("latency_p90_ms", m(|r| r.p90_ms)),
            ("latency_p99_ms", m(|r| r.p99_ms)),
            ("latency_p999_ms", m(|r| r.p999_ms)),
            ("latency_max_ms", m(|r| r.max_ms)),
            ("error_rate", m(|r| r.error_rate)),
            ("server_cpu_cores", m(|r| r.server_cpu_cores)),
            ("rss_peak_under_load_bytes", m(|r| r.rss_peak_bytes.map(|b| b as f64))),
            ("cgroup_peak_bytes", m(|r| r.cgroup_peak_bytes.map(|b| b as f64))),
        ];
        for (name, x) in entries {
            if let Some(x) = x {
                out.entry(row.cell.clone()).or_default().insert(name, x);
            }
        }
    }
    let mut s = serde_json::to_string_pretty(&out).expect("measures serialise");
    s.push('\n');
    s
}
