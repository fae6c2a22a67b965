//! A short soak on the real Docker engine, with a known answer: the built-in null server told to
//! leak exactly 64 KiB of resident pages at every tools/call (`--fault leak:65536`), and the same
//! server without the leak, each under a 20 calls/s open loop for 90 s of steady phase. The leak
//! slope the record carries must contain the true one (64 KiB × the calls answered per hour) and
//! name a leak; the clean server's interval must contain zero and name none. Every load cell's
//! time series (per-interval histograms, resources on the same clock) is checked on the way.
//! Then two connect/disconnect cycles (10 s of load, 5 s idle): the leak is never given back, so
//! each cycle's level after stands a cycle's leak above the one before.
//! Fails (never skips) when no engine answers. About four minutes.

mod common;

use std::process::Command;

use common::engine_must_answer;
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_benchlab");
const ROOT: &str = env!("CARGO_MANIFEST_DIR");
const LEAK: f64 = 65_536.0;
const RATE: f64 = 20.0;

const SCENARIO: &str = r#"
name = "e2e-soak"
suite = "weekly"
order = "as-written"
[placement]
mode = "split"
memory = "1GiB"
[[server]]
id = "leaky"
family = "benchlab-null"
transport = "streamable-http"
env = { BENCHLAB_NULL_FAULT = "leak:65536" }
[[server]]
id = "clean"
family = "benchlab-null"
transport = "streamable-http"
[[workload]]
kind = "soak"
tool = "add_numbers"
rate = 20
connections = 2
idle_before = "5s"
ramp = "5s"
duration = "90s"
idle_after = "10s"
interval = "1s"
leak_floor = "1MiB/h"
cycles = 2
cycle_load = "10s"
cycle_idle = "5s"
"#;

#[test]
fn a_known_leak_is_recovered_within_its_interval_and_a_clean_server_names_none() {
    engine_must_answer();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("e2e-soak.toml");
    std::fs::write(&file, SCENARIO).unwrap();
    let out = Command::new(BIN)
        .current_dir(ROOT)
        .args(["run"])
        .arg(&file)
        .arg("--results")
        .arg(dir.path().join("results"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "run failed:\n{stderr}");
    let runs = dir.path().join("results").join("e2e-soak");
    let run = std::fs::read_dir(&runs).unwrap().next().unwrap().unwrap().path();
    let text = std::fs::read_to_string(run.join("records.jsonl")).unwrap();
    let recs: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let by = |id: &str| recs.iter().find(|r| r["cell"]["server"]["id"] == id).expect(id);
    let schema: Value = serde_json::from_str(benchlab::record::SCHEMA).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();

    for r in &recs {
        let id = r["cell"]["id"].as_str().unwrap();
        assert_eq!(r["status"], "ok", "{id}: {}", r["failure"]);
        let errors: Vec<String> = validator.iter_errors(r).map(|e| e.to_string()).collect();
        assert!(errors.is_empty(), "{id}: {errors:?}");
        let load = &r["metrics"]["load"];
        let s = &load["series"];
        // The series: 1 s intervals from the first call due through ramp (5 s) and steady (90 s),
        // on to the last completion. What is asserted here are relations between what the lab
        // recorded that hold however busy the host is (a stall moves completions, never the
        // schedule): no window of wall-clock time is assumed.
        assert_eq!(s["interval_ms"], 1000, "{id}");
        let from = s["window_from_ms"].as_u64().unwrap();
        let to = s["window_to_ms"].as_u64().unwrap();
        assert_eq!((from, to), (5_000, 95_000), "{id}");
        let intervals = s["intervals"].as_array().unwrap();
        let t = |i: &Value| i["t_ms"].as_u64().unwrap();
        let ok_of = |i: &Value| i["ok"].as_u64().unwrap();
        // The last call is due just before 95 s and completes after it; the series ends with the
        // interval of the last completion.
        assert!(intervals.len() >= 95, "{id}: {} intervals", intervals.len());
        assert!(intervals.iter().enumerate().all(|(k, i)| t(i) == 1000 * k as u64), "{id}: gapless");
        let last = intervals.last().unwrap();
        assert!(ok_of(last) + last["failed"].as_u64().unwrap() > 0, "{id}: the series ends at a completion");
        // The load counts the calls due in the window (whenever they completed); the series
        // counts completions. Every call due in the window completes after it opens, so the
        // intervals from its start hold at least the window's calls; what they hold beyond
        // that can only be the ramp's calls completing late, and the ramp (0 to 20/s over 5 s)
        // has 50 calls due.
        let ok = load["ok"].as_u64().unwrap();
        let from_window_on: u64 = intervals.iter().filter(|i| t(i) >= from).map(ok_of).sum();
        assert!(
            ok <= from_window_on && from_window_on <= ok + 50,
            "{id}: intervals from the window on {from_window_on}, window {ok}"
        );
        // The ramp climbs: the calls due in its first second are about 2, and no call completes
        // before it is due.
        let first = ok_of(&intervals[0]);
        assert!(first < 10, "{id}: {first} calls in the ramp's first second");
        // One resource reading per interval at most, on the series' clock (a reading the host
        // delayed stands for its interval, and the next keeps to the clock, so a stall may leave
        // an interval without one).
        let res = &s["resources"];
        let stamps: Vec<u64> = res["t_ms"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap()).collect();
        let n = stamps.len();
        assert!(
            stamps.windows(2).all(|w| w[0] / 1000 < w[1] / 1000),
            "{id}: one reading per interval: {stamps:?}"
        );
        assert!(n <= intervals.len() + 1 && n >= intervals.len() / 2, "{id}: {n} resource samples");
        assert_eq!(res["rss_bytes"].as_array().unwrap().len(), n);
        assert!(res["cpu_ns"][n - 1].as_u64() > res["cpu_ns"][0].as_u64(), "{id}: CPU time grows");
        assert!(load["soak"]["idle_before"]["estimate"].as_u64() > Some(0), "{id}");
        let cycles = load["soak"]["cycles"].as_array().unwrap();
        assert_eq!(cycles.len(), 2, "{id}");
        for c in cycles {
            // 20 calls/s for 10 s, all at once (no ramp): 200 due. A slot a stalled host leaves
            // untaken at the end is dropped, so fewer may be answered, never more.
            assert!((100..=200).contains(&c["ok"].as_u64().unwrap()), "{id}: {c}");
            assert_eq!(c["failed"], 0, "{id}: {c}");
            assert!(
                c["peak_rss_bytes"].as_u64() > Some(0) && c["after"]["n"].as_u64() >= Some(3),
                "{id}: {c}"
            );
        }
    }

    let slope = |id: &str| {
        let s = &by(id)["metrics"]["load"]["soak"]["rss_bytes_per_hour"];
        (s["estimate"].as_f64().unwrap(), s["lower"].as_f64().unwrap(), s["upper"].as_f64().unwrap())
    };
    // The truth: 64 KiB per call answered, at the rate the steady phase answered them.
    let leaky = &by("leaky")["metrics"]["load"];
    let per_hour = leaky["ok"].as_f64().unwrap() / (leaky["window_ms"].as_f64().unwrap() / 3.6e6);
    // Paced at 20/s, it cannot answer faster; slots a stalled host drops make it slower.
    assert!(
        per_hour / 3600.0 <= RATE + 0.5 && per_hour / 3600.0 >= 0.8 * RATE,
        "the open loop kept its rate: {per_hour}/h"
    );
    let truth = LEAK * per_hour;
    let (est, lo, hi) = slope("leaky");
    eprintln!("leaky: {est:.4e} B/h [{lo:.4e}, {hi:.4e}], true {truth:.4e}");
    assert!(lo <= truth && truth <= hi, "the true slope {truth} is outside [{lo}, {hi}]");
    assert_eq!(leaky["soak"]["leak"], true);
    // RSS after the idle phase stays up: a leak is not given back when the clients leave.
    let after = by("leaky")["metrics"]["memory"]["under_load"]["after_level"]["estimate"].as_f64().unwrap();
    let before = leaky["soak"]["idle_before"]["estimate"].as_f64().unwrap();
    assert!(after - before > 0.8 * LEAK * RATE * 90.0, "{before} → {after}");
    // Each cycle leaks 200 calls × 64 KiB more, and keeps it.
    let mut level = after;
    for c in leaky["soak"]["cycles"].as_array().unwrap() {
        let next = c["after"]["estimate"].as_f64().unwrap();
        assert!(next - level > 0.8 * LEAK * RATE * 10.0, "cycle: {level} → {next}");
        assert!(c["peak_rss_bytes"].as_f64().unwrap() >= next - LEAK * 8.0, "{c}");
        level = next;
    }

    let (est, lo, hi) = slope("clean");
    eprintln!("clean: {est:.4e} B/h [{lo:.4e}, {hi:.4e}]");
    assert!(lo <= 0.0 && 0.0 <= hi, "the clean server's interval [{lo}, {hi}] excludes zero");
    assert_eq!(by("clean")["metrics"]["load"]["soak"]["leak"], false);
}
