//! `benchlab report --hlog` read by an independent implementation: the interval logs of committed
//! runs (load cells of `gate-http` and `rmcp-vs-floor` with their time series, calls histograms of
//! `seed-000-stdio`) are written by the real binary and read back by HdrHistogram's Python port
//! (`tests/hlog_check.py`, module `hdrh`), which must find the histograms benchlab decodes from the records: count, min, max, mean and
//! every bucket. Fails, never skips, when the venv that `scripts/test.sh` creates is missing or
//! lacks the package.

use std::path::{Path, PathBuf};
use std::process::Command;

use benchlab::record::store::read_records;
use benchlab::report::hlog::{hlog_files, MAX_VALUE_UNIT_RATIO};
use benchlab::stats::decode_histogram;
use serde_json::{json, Map, Value};

const BIN: &str = env!("CARGO_BIN_EXE_benchlab");
/// The Python that `scripts/test.sh` sets up, with the `hdrhistogram` package (module `hdrh`).
const PYTHON: &str = "/tmp/benchlab-work/attest-venv/bin/python3";

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The (last) run folder under `results/<scenario>`.
fn committed_run(scenario: &str) -> PathBuf {
    let dir = root().join("results").join(scenario);
    let mut runs: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("records.jsonl").is_file())
        .collect();
    runs.sort();
    runs.pop().unwrap_or_else(|| panic!("no run under {}", dir.display()))
}

fn python_with_hdrh() -> &'static str {
    assert!(
        Path::new(PYTHON).exists(),
        "{PYTHON} is missing: run scripts/test.sh, which creates the venv and installs hdrhistogram"
    );
    let probe = Command::new(PYTHON).args(["-c", "import hdrh.log, hdrh.histogram"]).output().unwrap();
    assert!(
        probe.status.success(),
        "{PYTHON} cannot import hdrh ({}): scripts/test.sh installs the hdrhistogram package",
        String::from_utf8_lossy(&probe.stderr).trim()
    );
    PYTHON
}

/// One histogram as benchlab decodes it, in the shape `tests/hlog_check.py` compares.
fn decoded(encoded: &str, length_s: f64, start_s: f64) -> (u64, Value) {
    let h = decode_histogram(encoded).unwrap();
    let written_max: f64 = format!("{:.3}", h.max() as f64 / MAX_VALUE_UNIT_RATIO).parse().unwrap();
    let buckets: Vec<Value> =
        h.iter_recorded().map(|v| json!([v.value_iterated_to(), v.count_at_value()])).collect();
    let value = json!({
        "count": h.len(),
        "min_ns": h.min(),
        "max_ns": h.max(),
        "mean_ns": h.mean(),
        "interval_length_s": length_s,
        "interval_max_ms": written_max,
        "start_s": start_s,
        "buckets": buckets,
    });
    (h.len(), value)
}

/// What benchlab decodes from the run's records, keyed by the file each goes to: a load window
/// or a calls histogram as one interval, a load's time series (`.series.hlog`) as one interval
/// per line.
fn expected(run: &Path) -> Map<String, Value> {
    let records = read_records(&run.join("records.jsonl")).unwrap();
    let files = hlog_files(&records).unwrap();
    let mut out = Map::new();
    for f in files {
        let r = records.iter().find(|r| r.seq == f.seq).unwrap();
        let load = r.metrics.load.as_ref();
        let (count, value) = if f.name.ends_with(".series.hlog") {
            let series = load.and_then(|l| l.series.as_ref()).expect("a series file comes from a series");
            let len = series.interval_ms as f64 / 1000.0;
            let intervals: Vec<(u64, Value)> = series
                .intervals
                .iter()
                .filter_map(|i| Some(decoded(i.histogram.as_deref()?, len, i.t_ms as f64 / 1000.0)))
                .collect();
            let total = intervals.iter().map(|(n, _)| n).sum();
            (total, json!({ "intervals": intervals.into_iter().map(|(_, v)| v).collect::<Vec<_>>() }))
        } else {
            match (load.and_then(|l| l.latency.as_ref().map(|h| (l.window_ms, h))), &r.metrics.calls) {
                (Some((window_ms, h)), _) if !f.name.ends_with(".calls.hlog") => {
                    decoded(&h.histogram, window_ms / 1000.0, 0.0)
                }
                (_, Some(c)) => decoded(&c.histogram, 0.0, 0.0),
                _ => unreachable!("a file comes from a histogram"),
            }
        };
        assert_eq!(count, f.count, "{}", f.name);
        out.insert(f.name.clone(), value);
    }
    out
}

/// Exports the run's interval logs with the binary and checks them with hdrh; returns hdrh's
/// summary line.
fn export_and_check(scenario: &str) -> String {
    let python = python_with_hdrh();
    let run = committed_run(scenario);
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("hlog");
    let export = Command::new(BIN).arg("report").arg(&run).arg("--hlog").arg(&out_dir).output().unwrap();
    assert!(export.status.success(), "{}", String::from_utf8_lossy(&export.stderr));
    let listed = String::from_utf8(export.stdout).unwrap();

    let want = expected(&run);
    assert!(!want.is_empty(), "{scenario} holds histograms");
    assert_eq!(listed.lines().count(), want.len(), "one path printed per file written:\n{listed}");
    let expected_path = dir.path().join("expected.json");
    std::fs::write(&expected_path, serde_json::to_string(&want).unwrap()).unwrap();

    let check = Command::new(python)
        .arg(root().join("tests/hlog_check.py"))
        .arg(&out_dir)
        .arg(&expected_path)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&check.stdout);
    assert!(check.status.success(), "hdrh disagrees:\n{stdout}\n{}", String::from_utf8_lossy(&check.stderr));
    let summary = stdout.lines().last().unwrap_or_default().to_string();
    assert_eq!(summary, format!("checked {} file(s) with hdrh: 0 differ", want.len()));
    summary
}

#[test]
fn hdrh_reads_the_load_cells_of_a_committed_run_as_benchlab_decodes_them() {
    export_and_check("gate-http");
}

#[test]
fn hdrh_reads_the_calls_histograms_of_a_committed_run_as_benchlab_decodes_them() {
    export_and_check("seed-000-stdio");
}

#[test]
fn a_run_without_histograms_is_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(BIN)
        .arg("report")
        .arg(committed_run("gate-all"))
        .arg("--hlog")
        .arg(dir.path().join("none"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no interval log to write"));
    assert!(!dir.path().join("none").exists(), "nothing created");
}

#[test]
fn hdrh_reads_load_time_series_of_several_intervals_as_benchlab_decodes_them() {
    // 5 s loads: each `.series.hlog` holds several interval lines.
    export_and_check("rmcp-vs-floor");
}
