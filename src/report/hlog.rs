//! HdrHistogram interval logs (`.hlog`) of a run's histograms, in log format 1.3 as HdrHistogram's
//! Java `HistogramLogWriter` writes it, so HdrHistogram's own tools (Java `HistogramLogReader` and
//! `HistogramLogProcessor`, the Python and Go ports, the Rust crate's `IntervalLogIterator`) read
//! what benchlab measured. One file per load cell (`metrics.load.latency`) and per calls histogram
//! (`metrics.calls`), each holding the record's one histogram as one interval, and one per load
//! time series (`metrics.load.series`, `.series.hlog`) with a line per interval; every encoding
//! is the record's own bytes. Pure: records in, file names and text out; writing files is the
//! CLI's.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use crate::record::Record;
use crate::stats::{decode_histogram, DecodeError};

/// The version of the log format written (HdrHistogram's `HISTOGRAM_LOG_FORMAT_VERSION`).
pub const FORMAT_VERSION: &str = "1.3";

/// The legend line of the Java writer (`outputLegend`).
pub const LEGEND: &str =
    "\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_Histogram\"";

/// Recorded values are nanoseconds; `Interval_Max` is written in milliseconds, divided by the
/// Java writer's default `maxValueUnitRatio` (the msec : nsec ratio).
pub const MAX_VALUE_UNIT_RATIO: f64 = 1_000_000.0;

/// One interval log: its file name (no folder) and its whole text.
#[derive(Debug, Clone, PartialEq)]
pub struct HlogFile {
    pub name: String,
    pub text: String,
    /// The record it comes from, and how many values its histogram holds.
    pub seq: u64,
    pub count: u64,
}

/// A histogram in the records that is not a V2 HdrHistogram.
#[derive(Debug, thiserror::Error)]
#[error("record seq {seq} (cell {cell}): {what}: {source}")]
pub struct HlogError {
    pub seq: u64,
    pub cell: String,
    pub what: &'static str,
    #[source]
    pub source: DecodeError,
}

/// What one interval log holds.
struct Interval<'a> {
    record: &'a Record,
    /// What the values are, for the header comment.
    what: &'static str,
    /// One line per interval: its start in seconds from the log's base time, its length in
    /// seconds when the record knows it (a load cell's window, a series' interval), and the
    /// record's base64 V2 deflate encoding, written as it is stored.
    lines: Vec<(f64, Option<f64>, &'a str)>,
    /// The log's start, seconds since the epoch, when the record knows it; records keep
    /// the window's length but not its start, so today this is always `None` (0.000).
    start_epoch_s: Option<f64>,
    /// The file name's suffix before `.hlog` beyond the cell and repeat (`.calls` when a record
    /// holds both kinds).
    suffix: &'static str,
}

/// The interval logs of `records`, in record order: a load cell's latency
/// (`<cell>[.rN].hlog`), a calls histogram (`<cell>[.rN].hlog`, `<cell>[.rN].calls.hlog` when
/// the record also holds a load latency). `/` in a cell id becomes `__`; a name already taken by
/// an earlier record of the same cell gets `.seqN`.
pub fn hlog_files(records: &[Record]) -> Result<Vec<HlogFile>, HlogError> {
    let mut out = Vec::new();
    let mut taken = BTreeSet::new();
    for r in records {
        let load = r.metrics.load.as_ref().and_then(|l| l.latency.as_ref().map(|h| (l, h)));
        let mut intervals = Vec::new();
        if let Some((l, h)) = load {
            intervals.push(Interval {
                record: r,
                what: "latency of the correct calls in the load window (open loop: from the intended send time)",
                lines: vec![(0.0, Some(l.window_ms / 1000.0), &h.histogram)],
                start_epoch_s: None,
                suffix: "",
            });
        }
        if let Some(s) = r.metrics.load.as_ref().and_then(|l| l.series.as_ref()) {
            let len = s.interval_ms as f64 / 1000.0;
            intervals.push(Interval {
                record: r,
                what: "latency of the correct calls per interval of the load's time series (starts from the load's first due call, warm-up or ramp included)",
                lines: s
                    .intervals
                    .iter()
                    .filter_map(|i| Some((i.t_ms as f64 / 1000.0, Some(len), i.histogram.as_deref()?)))
                    .collect(),
                start_epoch_s: None,
                suffix: ".series",
            });
        }
        if let Some(c) = &r.metrics.calls {
            intervals.push(Interval {
                record: r,
                what: "latency of the serial tool calls",
                lines: vec![(0.0, None, &c.histogram)],
                start_epoch_s: None,
                suffix: if load.is_some() { ".calls" } else { "" },
            });
        }
        for i in intervals {
            let mut name = format!("{}{}", base_name(r), i.suffix);
            if !taken.insert(name.clone()) {
                name = format!("{name}.seq{}", r.seq);
                taken.insert(name.clone());
            }
            let (text, count) = log_text(&i)?;
            out.push(HlogFile { name: format!("{name}.hlog"), text, seq: r.seq, count });
        }
    }
    Ok(out)
}

/// `<cell id, / as __>[.rN]`, with anything but letters, digits, `.`, `_`, `-` and `+` as `_` so
/// the name is one file in the folder whatever the id holds.
fn base_name(r: &Record) -> String {
    let mut name: String = r
        .cell
        .id
        .replace('/', "__")
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '+') { c } else { '_' })
        .collect();
    if name.starts_with('.') {
        name.insert(0, '_');
    }
    if let Some(rep) = r.cell.repeat {
        let _ = write!(name, ".r{}", rep.index);
    }
    name
}

/// One line of a comment: no line breaks inside.
fn one_line(s: &str) -> String {
    s.replace(['\n', '\r'], " ")
}

/// The whole log of one file, and the number of values its histograms hold.
fn log_text(i: &Interval<'_>) -> Result<(String, u64), HlogError> {
    let r = i.record;
    let mut o = String::new();
    let repeat = r.cell.repeat.map_or(String::new(), |p| format!(", repeat {} of {}", p.index + 1, p.of));
    let _ = writeln!(
        o,
        "#[Logged with benchlab {}: run {}, seq {}, cell {}{repeat}, status {}: {}]",
        one_line(&r.environment.benchlab.version),
        one_line(&r.run_id),
        r.seq,
        one_line(&r.cell.id),
        match r.status {
            crate::record::Status::Ok => "ok",
            crate::record::Status::Failed => "failed",
        },
        i.what
    );
    let _ = writeln!(o, "#[Histogram log format version {FORMAT_VERSION}]");
    let start = i.start_epoch_s.unwrap_or(0.0);
    match i.start_epoch_s {
        Some(s) => {
            let when = crate::record::rfc3339(s as u64);
            let _ = writeln!(o, "#[StartTime: {s:.3} (seconds since epoch), {when}]");
        }
        None => {
            let _ = writeln!(
                o,
                "#[StartTime: 0.000 (seconds since epoch), unknown: the record keeps no window start]"
            );
        }
    }
    let _ = writeln!(o, "#[BaseTime: {start:.3} (seconds since epoch)]");
    let _ = writeln!(
        o,
        "#[Values in nanoseconds; Interval_Max in milliseconds (maxValueUnitRatio {MAX_VALUE_UNIT_RATIO:.1})]"
    );
    if i.lines.iter().any(|l| l.1.is_none()) {
        o.push_str("#[Interval_Length 0.000: the record keeps no window for these calls]\n");
    }
    let _ = writeln!(o, "{LEGEND}");
    let mut count = 0;
    for (at, length, encoded) in &i.lines {
        let h = decode_histogram(encoded).map_err(|source| HlogError {
            seq: r.seq,
            cell: r.cell.id.clone(),
            what: i.what,
            source,
        })?;
        count += h.len();
        let max = if h.is_empty() { 0.0 } else { h.max() as f64 / MAX_VALUE_UNIT_RATIO };
        // The Java writer's "%.3f,%.3f,%.3f,%s": start relative to BaseTime, length, max, payload.
        let _ = writeln!(o, "{at:.3},{:.3},{max:.3},{encoded}", length.unwrap_or(0.0));
    }
    Ok((o, count))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::tests::sample_record;
    use crate::spec::cell::Repeat;
    use crate::spec::outcome::HistogramMetric;
    use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};

    fn histogram(values_ns: &[u64]) -> hdrhistogram::Histogram<u64> {
        let mut h = crate::stats::latency_histogram();
        for &v in values_ns {
            h.record(v).unwrap();
        }
        h
    }

    fn calls_record(id: &str, seq: u64, values_ns: &[u64]) -> Record {
        let mut r = sample_record(id);
        r.seq = seq;
        r.cell.id = format!("{id}/serial_calls");
        let h = histogram(values_ns);
        r.metrics.calls = Some(HistogramMetric {
            summary: crate::stats::summarize(&h).unwrap(),
            histogram: crate::stats::encode_histogram(&h),
            warmup: None,
        });
        r
    }

    /// The first load cell of a committed run, as stored.
    fn committed_load_record() -> Record {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("results/gate-http");
        let file = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path().join(crate::record::files::RECORDS_FILE))
            .find(|p| p.is_file())
            .unwrap();
        let records = crate::record::store::read_records(&file).unwrap();
        records.into_iter().find(|r| r.metrics.load.as_ref().is_some_and(|l| l.latency.is_some())).unwrap()
    }

    #[test]
    fn a_calls_histogram_is_one_interval_in_the_java_writers_layout() {
        let r = calls_record("null", 4, &[1_000_000, 2_000_000, 12_345_678]);
        let files = hlog_files(std::slice::from_ref(&r)).unwrap();
        assert_eq!(files.len(), 1);
        let f = &files[0];
        assert_eq!((f.name.as_str(), f.seq, f.count), ("null__serial_calls.hlog", 4, 3));
        let lines: Vec<&str> = f.text.lines().collect();
        assert!(
            lines[0].starts_with("#[Logged with benchlab ") && lines[0].contains("seq 4"),
            "{}",
            lines[0]
        );
        assert_eq!(lines[1], "#[Histogram log format version 1.3]");
        assert!(lines[2].starts_with("#[StartTime: 0.000 (seconds since epoch), "), "{}", lines[2]);
        assert_eq!(lines[3], "#[BaseTime: 0.000 (seconds since epoch)]");
        assert!(lines[4].starts_with("#[Values in nanoseconds; Interval_Max in milliseconds"));
        assert_eq!(lines[6], LEGEND);
        let encoded = &r.metrics.calls.as_ref().unwrap().histogram;
        let max = histogram(&[12_345_678]).max() as f64 / 1e6;
        assert_eq!(lines[7], format!("0.000,0.000,{max:.3},{encoded}"), "the record's bytes, as stored");
        assert_eq!(lines.len(), 8);
    }

    #[test]
    fn the_rust_crates_reader_reads_it_back() {
        let r = committed_load_record();
        let l = r.metrics.load.as_ref().unwrap();
        let stored = decode_histogram(&l.latency.as_ref().unwrap().histogram).unwrap();
        let files = hlog_files(std::slice::from_ref(&r)).unwrap();
        assert_eq!(files[0].name, format!("{}.hlog", r.cell.id.replace('/', "__")));
        let entries: Vec<_> =
            IntervalLogIterator::new(files[0].text.as_bytes()).collect::<Result<_, _>>().unwrap();
        let intervals: Vec<_> = entries
            .iter()
            .filter_map(|e| match e {
                LogEntry::Interval(i) => Some(i),
                _ => None,
            })
            .collect();
        assert_eq!(intervals.len(), 1);
        let i = intervals[0];
        assert_eq!(i.start_timestamp(), std::time::Duration::ZERO);
        assert!((i.duration().as_secs_f64() - (l.window_ms / 1000.0)).abs() < 0.0005);
        assert!((i.max() - stored.max() as f64 / 1e6).abs() < 0.0005);
        assert_eq!(decode_histogram(i.encoded_histogram()).unwrap(), stored);
        assert!(entries.iter().any(|e| matches!(e, LogEntry::BaseTime(d) if d.is_zero())));
    }

    #[test]
    fn a_time_series_is_a_log_of_its_intervals() {
        let mut r = calls_record("null", 5, &[1_000]);
        r.metrics.calls = None;
        let (a, b) = (histogram(&[1_000_000, 3_000_000]), histogram(&[2_000_000]));
        let (ea, eb) = (crate::stats::encode_histogram(&a), crate::stats::encode_histogram(&b));
        let interval = |t_ms, ok, h: Option<&String>| crate::spec::SeriesInterval {
            t_ms,
            ok,
            failed: 0,
            histogram: h.cloned(),
        };
        r.metrics.load = Some(Box::new(crate::spec::LoadMetrics {
            series: Some(crate::spec::LoadSeries {
                interval_ms: 500,
                intervals: vec![
                    interval(0, 2, Some(&ea)),
                    interval(500, 0, None),
                    interval(1000, 1, Some(&eb)),
                ],
                ..Default::default()
            }),
            ..Default::default()
        }));
        let files = hlog_files(std::slice::from_ref(&r)).unwrap();
        assert_eq!(files.len(), 1, "no latency histogram: the series alone");
        assert_eq!((files[0].name.as_str(), files[0].count), ("null__serial_calls.series.hlog", 3));
        let entries: Vec<_> =
            IntervalLogIterator::new(files[0].text.as_bytes()).collect::<Result<_, _>>().unwrap();
        let starts: Vec<f64> = entries
            .iter()
            .filter_map(|e| match e {
                LogEntry::Interval(i) => Some(i.start_timestamp().as_secs_f64()),
                _ => None,
            })
            .collect();
        assert_eq!(starts, [0.0, 1.0], "an interval without answers has no line");
        let max = b.max() as f64 / 1e6;
        assert!(files[0].text.contains(&format!("1.000,0.500,{max:.3},{eb}\n")), "{}", files[0].text);
    }

    #[test]
    fn names_carry_the_repeat_and_never_collide() {
        let mut a = calls_record("s", 0, &[1_000]);
        a.cell.repeat = Some(Repeat { index: 0, of: 2, fresh_container: false });
        let mut b = calls_record("s", 1, &[2_000]);
        b.cell.repeat = Some(Repeat { index: 1, of: 2, fresh_container: false });
        let c = calls_record("s", 2, &[3_000]);
        let d = calls_record("s", 3, &[4_000]);
        let mut odd = calls_record("x", 4, &[5_000]);
        odd.cell.id = "../a b/c".into();
        let files = hlog_files(&[a, b, c, d, odd]).unwrap();
        let names: Vec<&str> = files.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "s__serial_calls.r0.hlog",
                "s__serial_calls.r1.hlog",
                "s__serial_calls.hlog",
                "s__serial_calls.seq3.hlog",
                "_..__a_b__c.hlog"
            ]
        );
        assert!(files[1].text.lines().next().unwrap().contains("repeat 2 of 2"), "{}", files[1].text);
    }

    #[test]
    fn a_known_start_is_written_as_start_and_base_time() {
        let r = calls_record("s", 0, &[1_000]);
        let encoded = r.metrics.calls.as_ref().unwrap().histogram.clone();
        let i = Interval {
            record: &r,
            what: "w",
            lines: vec![(0.0, Some(2.0), &encoded)],
            start_epoch_s: Some(86_400.25),
            suffix: "",
        };
        let (text, count) = log_text(&i).unwrap();
        assert_eq!(count, 1);
        assert!(
            text.contains("#[StartTime: 86400.250 (seconds since epoch), 1970-01-02T00:00:00Z]\n"),
            "{text}"
        );
        assert!(text.contains("#[BaseTime: 86400.250 (seconds since epoch)]\n"));
        assert!(text.contains("\n0.000,2.000,0.001,"), "{text}");
        assert!(!text.contains("Interval_Length 0.000"));
    }

    #[test]
    fn a_record_without_histograms_gives_no_file_and_a_bad_one_an_error() {
        assert!(hlog_files(&[sample_record("s")]).unwrap().is_empty());
        let mut r = calls_record("s", 7, &[1_000]);
        r.metrics.calls.as_mut().unwrap().histogram = "AAAA".into();
        let e = hlog_files(&[r]).unwrap_err().to_string();
        assert!(
            e.starts_with("record seq 7 (cell s/serial_calls): latency of the serial tool calls: "),
            "{e}"
        );
    }
}
