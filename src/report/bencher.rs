//! The metrics in Bencher Metric Format (BMF) JSON, for continuous benchmarking:
//! `{ "<cell id>": { "<measure>": { "value", "lower_value", "upper_value" } } }`. The bounds are
//! the confidence interval of the value when it has one, and left out when it does not.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::record::Record;
use crate::stats::Interval;

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
/// `rss_after_init_bytes` and `rss_end_bytes`. Keys are sorted; when several runs hold the same
/// cell id, a later record's measure replaces an earlier one's.
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
        };
        for (name, m) in entries {
            if let Some(m) = m {
                out.entry(row.cell.clone()).or_default().insert(name, m);
            }
        }
    }
    let mut s = serde_json::to_string_pretty(&out).expect("measures serialise");
    s.push('\n');
    s
}
