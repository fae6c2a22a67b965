//! The metric rows as CSV (RFC 4180): one row per cell and metric, durations in ms to the
//! nanosecond, memory in bytes, throughput in req/s, error rates as fractions, CPU in cores, for
//! spreadsheets and data frames. HTTP load cells add their throughput, latency (with p99.9 and
//! max), error rate, server CPU and peak RSS rows; a repeated cell has one row per repeat, told
//! apart by the `repeat` column.

use std::fmt::Write as _;

use crate::record::Record;
use crate::stats::Interval;

use super::rows::{metric_rows, Unit};

const HEADER: &str = "run_id,cell,server,workload,status,metric,unit,n,median,ci_lower,ci_upper,confidence,p95,p99,mean,cv,noisy,p999,max,repeat";

/// Quotes a field when it holds a separator, a quote or a line break.
fn field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// A figure in the row's unit: ms with 6 decimals (1 ns), bytes as an integer; empty when absent.
fn num(v: Option<f64>, unit: Unit) -> String {
    match v {
        Some(x) if x.is_finite() => match unit {
            Unit::Ms => format!("{x:.6}"),
            Unit::Bytes => format!("{}", x.round() as u64),
            Unit::Rps => format!("{x:.3}"),
            Unit::Ratio => format!("{x:.6}"),
            Unit::Cores => format!("{x:.4}"),
        },
        _ => String::new(),
    }
}

/// One row per cell and metric, with a header line. A cell that failed before measuring
/// anything has no row (the Markdown and HTML reports list failures).
pub fn csv(records: &[Record]) -> String {
    let mut o = String::new();
    o.push_str(HEADER);
    o.push('\n');
    for r in metric_rows(records) {
        let ci: Option<&Interval> = r.median_ci.as_ref().filter(|i| i.is_finite());
        let _ = writeln!(
            o,
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
            field(&r.run_id),
            field(&r.cell),
            field(&r.server),
            field(&r.workload),
            field(&r.status),
            r.metric.as_str(),
            r.unit.as_str(),
            r.n,
            num(Some(r.median), r.unit),
            num(ci.map(|i| i.lower), r.unit),
            num(ci.map(|i| i.upper), r.unit),
            ci.map_or(String::new(), |i| format!("{}", i.confidence)),
            num(r.p95, r.unit),
            num(r.p99, r.unit),
            num(r.mean, r.unit),
            r.cv.map_or(String::new(), |c| format!("{c:.4}")),
            r.noisy,
            num(r.p999, r.unit),
            num(r.max, r.unit),
            r.repeat.map_or(String::new(), |i| i.to_string()),
        );
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_quoted_only_when_they_must_be() {
        assert_eq!(field("plain/cell"), "plain/cell");
        assert_eq!(field("a,b"), "\"a,b\"");
        assert_eq!(field("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(num(Some(0.1234567891), Unit::Ms), "0.123457");
        assert_eq!(num(Some(51609600.0), Unit::Bytes), "51609600");
        assert_eq!(num(None, Unit::Ms), "");
        assert_eq!(HEADER.split(',').count(), 20);
    }
}
