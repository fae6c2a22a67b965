//! End to end on the real Docker engine, over HTTP: the built-in null server in its container,
//! the driver in a sidecar sharing only its network namespace, streamable HTTP stateless and
//! stateful, closed loop, open loop and the plain REST route; memory sampled during the load and,
//! for the closed loop, in a 3 s idle phase after it; the measured window; and a server too slow
//! for the call limit fails its gate over HTTP with a named reason. Fails (never skips) when no
//! engine answers.

mod common;

use common::engine_must_answer;
use std::process::Command;

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_benchlab");
const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// The open loop both scenarios run: 2,000 calls/s over 8 connections for 1 s.
macro_rules! open_loop_2000 {
    () => {
        r#"[[workload]]
kind = "open_loop"
tool = "echo"
rate = 2000
connections = 8
warmup = "300ms"
duration = "1s"
idle_after = "0s"
"#
    };
}

const SCENARIO: &str = concat!(
    r#"
name = "e2e-http"
suite = "weekly"
[placement]
mode = "split"
memory = "256MiB"
[[server]]
id = "null"
family = "benchlab-null"
transport = "streamable-http"
[[server]]
id = "null-stateful"
family = "benchlab-null"
transport = "streamable-http"
session = "stateful"
[[workload]]
kind = "concurrency"
tool = "add_numbers"
workers = [1, 4]
warmup = "300ms"
duration = "1s"
idle_after = "3s"
"#,
    open_loop_2000!(),
    r#"[[workload]]
kind = "http_api"
tool = "word_count"
workers = 2
warmup = "300ms"
duration = "1s"
idle_after = "0s"
"#
);

/// The one run of scenario `name` under `dir`'s results.
fn run_dir(dir: &tempfile::TempDir, name: &str) -> std::path::PathBuf {
    std::fs::read_dir(dir.path().join("results").join(name)).unwrap().next().unwrap().unwrap().path()
}

/// Asserts a record is valid against the record schema.
fn valid_record(id: &str, r: &Value) {
    let schema: Value = serde_json::from_str(benchlab::record::SCHEMA).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    assert!(
        validator.is_valid(r),
        "{id}: {:?}",
        validator.iter_errors(r).map(|e| e.to_string()).collect::<Vec<_>>()
    );
}

fn run(scenario: &str, name: &str) -> (std::process::Output, Vec<Value>, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join(format!("{name}.toml"));
    std::fs::write(&file, scenario).unwrap();
    let out = Command::new(BIN)
        .current_dir(ROOT)
        .arg("run")
        .arg(&file)
        .arg("--results")
        .arg(dir.path().join("results"))
        .output()
        .unwrap();
    let text = std::fs::read_to_string(run_dir(&dir, name).join("records.jsonl")).unwrap();
    let recs = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    (out, recs, dir)
}

#[test]
fn null_server_over_streamable_http_closed_open_and_rest() {
    engine_must_answer();
    let (out, recs, _dir) = run(SCENARIO, "e2e-http");
    assert!(out.status.success(), "run failed:\n{}", String::from_utf8_lossy(&out.stderr));
    // The run's order is a seeded permutation: the cells, whatever their order.
    let mut ids: Vec<&str> = recs.iter().map(|r| r["cell"]["id"].as_str().unwrap()).collect();
    ids.sort_unstable();
    assert_eq!(
        ids,
        [
            "null-stateful/concurrency-w1",
            "null-stateful/concurrency-w4",
            "null-stateful/http_api-w2",
            "null-stateful/open_loop",
            "null/concurrency-w1",
            "null/concurrency-w4",
            "null/http_api-w2",
            "null/open_loop",
        ]
    );
    for r in &recs {
        let id = r["cell"]["id"].as_str().unwrap();
        valid_record(id, r);
        assert_eq!(r["status"], "ok", "{id}: {}", r["failure"]);
        assert_eq!(r["format_version"], 3);
        let load = &r["metrics"]["load"];
        assert!(load["ok"].as_u64().unwrap() > 0, "{id}: {load}");
        assert_eq!(load["failed"], 0, "{id}: {load}");
        assert_eq!(load["error_rate"], 0.0);
        assert!(load["latency"]["summary"]["p50_ms"].as_f64().unwrap() > 0.0);
        assert!(load["server_cpu_cores"].as_f64().unwrap() > 0.0, "{id}: the server's own CPU");
        let mem = &r["metrics"]["memory"]["under_load"];
        assert!(mem["samples"].as_u64().unwrap() >= 2, "{id}: {mem}");
        assert!(mem["peak_during"]["rss_bytes"].as_u64().unwrap() >= 1 << 20);
        assert!(mem["cgroup_peak_bytes"].as_u64().unwrap() > 0);
        // The window: nominal 1 s; closed loop measures exactly that, open loop runs on to its
        // last answer (well under a second after on this server).
        assert_eq!(load["window_nominal_ms"], 1000, "{id}");
        let window = load["window_ms"].as_f64().unwrap();
        if id.contains("open_loop") {
            assert!((1000.0..2000.0).contains(&window), "{id}: window {window}");
        } else {
            assert_eq!(window, 1000.0, "{id}");
        }
        let rps = load["ok"].as_f64().unwrap() / (window / 1e3);
        assert!((load["throughput_rps"].as_f64().unwrap() - rps).abs() < 1e-6, "{id}: rate over the window");
        if id.contains("concurrency") {
            idle_phase_was_sampled(id, mem);
        } else {
            // Without an idle phase: one reading after, no series, no level.
            assert!(mem.get("idle_after_ms").is_none() && mem.get("after_series").is_none(), "{id}: {mem}");
            assert!(mem.get("after_level").is_none(), "{id}: {mem}");
            assert!(mem["after"]["rss_bytes"].as_u64().unwrap() >= 1 << 20, "{id}: {mem}");
        }
        // A split cell's driver has one CPU here: one thread, and the record says nothing more.
        assert_eq!(r["cell"]["placement"]["driver_cpus"], "0", "{id}");
        assert!(load.get("driver_threads").is_none(), "{id}: {load}");
        let http = &r["cell"]["http"];
        assert_eq!(http["port"], 8000);
        let stateful = id.starts_with("null-stateful");
        assert_eq!(http["session"], if stateful { "stateful" } else { "stateless" });
        let transport = if id.contains("http_api") { "http-api" } else { "streamable-http" };
        assert_eq!(r["cell"]["transport"], transport);
    }
    // Closed loop: one MCP session per virtual user (no re-initialization on a healthy server).
    let by_id = |id: &str| recs.iter().find(|r| r["cell"]["id"] == id).unwrap_or_else(|| panic!("no {id}"));
    let w4 = &by_id("null-stateful/concurrency-w4")["metrics"]["load"];
    assert_eq!(w4["sessions"], 4);
    assert_eq!(w4["reinitializations"], 0);
    // Open loop: the schedule issues exactly rate x nominal window, and on a server this fast
    // every one is answered. (The achieved rate is ok over the window, which runs on to the last
    // answer: one slow answer on a shared host moves it, so it is checked above as ok/window,
    // not against the asked rate.)
    let open = &by_id("null/open_loop")["metrics"]["load"];
    assert_eq!(open["target_rps"], 2000.0);
    assert_eq!(open["ok"], 2000, "every scheduled call answered: {open}");
    assert_eq!(open["dropped"], 0);
}

/// A cell whose driver cpuset has two CPUs drives its load from two threads, one pinned to
/// each, its connections dealt between them (closed loop) or its schedule dealt slot by slot
/// (open loop): every answer still checked, the counts and histograms merged, and the record and
/// the report say how many threads drove it.
#[test]
fn a_driver_given_two_cpus_drives_the_load_from_two_threads() {
    engine_must_answer();
    let scenario = concat!(
        r#"
name = "e2e-http-threads"
suite = "weekly"
[placement]
mode = "shared"
server_cpus = "0-1"
driver_cpus = "0-1"
memory = "256MiB"
[[server]]
id = "null"
family = "benchlab-null"
transport = "streamable-http"
session = "stateful"
[[workload]]
kind = "concurrency"
tool = "add_numbers"
workers = 4
warmup = "300ms"
duration = "1s"
idle_after = "0s"
"#,
        open_loop_2000!()
    );
    let (out, recs, dir) = run(scenario, "e2e-http-threads");
    assert!(out.status.success(), "run failed:\n{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(recs.len(), 2);
    for r in &recs {
        let id = r["cell"]["id"].as_str().unwrap();
        valid_record(id, r);
        assert_eq!(r["status"], "ok", "{id}: {}", r["failure"]);
        assert_eq!(r["cell"]["placement"]["driver_cpus"], "0-1", "{id}");
        let load = &r["metrics"]["load"];
        assert_eq!(load["driver_threads"], 2, "{id}: {load}");
        assert!(load["ok"].as_u64().unwrap() > 0, "{id}: {load}");
        assert_eq!(load["failed"], 0, "{id}: {load}");
        assert!(load["latency"]["summary"]["count"].as_u64().unwrap() > 0, "{id}: {load}");
    }
    let by_id = |id: &str| recs.iter().find(|r| r["cell"]["id"] == id).unwrap_or_else(|| panic!("no {id}"));
    // Closed loop: each of the 4 virtual users opened one session, whichever thread it ran on;
    // the histogram holds every answer of the window from both threads.
    let closed = &by_id("null/concurrency-w4")["metrics"]["load"];
    assert_eq!(closed["sessions"], 4, "{closed}");
    assert_eq!(closed["reinitializations"], 0);
    // Open loop: the two threads' shares of the schedule add up to exactly rate x window.
    let open = &by_id("null/open_loop")["metrics"]["load"];
    assert_eq!(open["ok"], 2000, "every scheduled call answered once: {open}");
    assert_eq!(open["dropped"], 0);
    assert_eq!(open["latency"]["summary"]["count"], 2000, "{open}");
    // The report's load table says so.
    let report = Command::new(BIN).arg("report").arg(run_dir(&dir, "e2e-http-threads")).output().unwrap();
    let text = String::from_utf8_lossy(&report.stdout);
    assert!(report.status.success(), "{}", String::from_utf8_lossy(&report.stderr));
    assert!(text.contains("on 2 threads"), "{text}");
}

/// A 3 s idle phase: a series every 250 ms from the last connection's close to 3 s after, the
/// levels at its end within their ranges, and `after` its last reading.
fn idle_phase_was_sampled(id: &str, mem: &Value) {
    assert_eq!(mem["idle_after_ms"], 3000, "{id}");
    let s = &mem["after_series"];
    let list = |k: &str| s[k].as_array().unwrap_or_else(|| panic!("{id}: no {k} in {s}")).clone();
    let (t, rss, cgroup) = (list("t_ms"), list("rss_bytes"), list("cgroup_bytes"));
    assert!(t.len() == rss.len() && t.len() == cgroup.len(), "{id}: {s}");
    // 0, 250, ..., 3000: 13 readings (a slow shim answer may cost one).
    assert!((12..=13).contains(&t.len()), "{id}: {} samples: {s}", t.len());
    let t: Vec<u64> = t.iter().map(|v| v.as_u64().unwrap()).collect();
    assert!(t[0] < 250 && t.windows(2).all(|w| w[0] < w[1]), "{id}: {t:?}");
    let last = *t.last().unwrap();
    assert!((3000..3400).contains(&last), "{id}: the phase covers about 3 s: {t:?}");
    assert!(rss.iter().all(|v| v.as_u64().unwrap() >= 1 << 20), "{id}: {s}");
    assert!(cgroup.iter().all(|v| v.as_u64().is_some_and(|b| b > 0)), "{id}: the shim reads its cgroup: {s}");
    for key in ["after_level", "after_cgroup_level"] {
        let l = &mem[key];
        let n = |k: &str| l[k].as_u64().unwrap_or_else(|| panic!("{id}: {key}.{k} in {l}"));
        assert!(n("lower") <= n("estimate") && n("estimate") <= n("upper"), "{id}: {key} {l}");
        assert!(n("n") >= 3 && n("to_ms") == last && n("from_ms") >= 2000, "{id}: {key} {l}");
        eprintln!(
            "{id}: {key} {:.2} MiB [{:.2}–{:.2}] over {} samples, {}–{} ms",
            n("estimate") as f64 / 1048576.0,
            n("lower") as f64 / 1048576.0,
            n("upper") as f64 / 1048576.0,
            n("n"),
            n("from_ms"),
            n("to_ms")
        );
    }
    assert_eq!(mem["after"]["rss_bytes"], *rss.last().unwrap(), "{id}: after is the last reading");
    eprintln!(
        "{id}: RSS idle {} peak {} after {} bytes; series t_ms {t:?}",
        mem["idle_before"]["rss_bytes"], mem["peak_during"]["rss_bytes"], mem["after"]["rss_bytes"]
    );
}

#[test]
fn a_gate_call_over_http_that_times_out_fails_the_cell_as_a_timeout() {
    engine_must_answer();
    // The null server's async_sleep blocks for 50 ms; a 20 ms call limit times every call out.
    let scenario = r#"
name = "e2e-http-timeouts"
suite = "bench"
[timeouts]
call_ms = 20
[[server]]
id = "null"
family = "benchlab-null"
transport = "streamable-http"
[[workload]]
kind = "concurrency"
tool = "echo"
workers = 1
warmup = "100ms"
duration = "500ms"
"#;
    let (out, recs, _dir) = run(scenario, "e2e-http-timeouts");
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(recs.len(), 1);
    assert_eq!(recs[0]["status"], "failed");
    assert_eq!(recs[0]["failure"]["reason"], "timeout", "{}", recs[0]["failure"]);
    assert!(recs[0]["failure"]["detail"].as_str().unwrap().contains("gate"));
}
