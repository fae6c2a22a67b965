//! End to end on the real Docker engine, over HTTP: the built-in null server in its container,
//! the driver in a sidecar sharing only its network namespace, streamable HTTP stateless and
//! stateful, closed loop, open loop and the plain REST route; memory sampled during the load;
//! and a server too slow for the call limit fails its gate over HTTP with a named reason.
//! Fails (never skips) when no engine answers.

mod common;

use common::engine_must_answer;
use std::process::Command;

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_benchlab");
const ROOT: &str = env!("CARGO_MANIFEST_DIR");

const SCENARIO: &str = r#"
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
[[workload]]
kind = "open_loop"
tool = "echo"
rate = 2000
connections = 8
warmup = "300ms"
duration = "1s"
[[workload]]
kind = "http_api"
tool = "word_count"
workers = 2
warmup = "300ms"
duration = "1s"
"#;

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
    let runs = dir.path().join("results").join(name);
    let run = std::fs::read_dir(&runs).unwrap().next().unwrap().unwrap().path();
    let text = std::fs::read_to_string(run.join("records.jsonl")).unwrap();
    let recs = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    (out, recs, dir)
}

#[test]
fn null_server_over_streamable_http_closed_open_and_rest() {
    engine_must_answer();
    let (out, recs, _dir) = run(SCENARIO, "e2e-http");
    assert!(out.status.success(), "run failed:\n{}", String::from_utf8_lossy(&out.stderr));
    let schema: Value = serde_json::from_str(benchlab::record::SCHEMA).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let ids: Vec<&str> = recs.iter().map(|r| r["cell"]["id"].as_str().unwrap()).collect();
    assert_eq!(
        ids,
        [
            "null/concurrency-w1",
            "null/concurrency-w4",
            "null/open_loop",
            "null/http_api-w2",
            "null-stateful/concurrency-w1",
            "null-stateful/concurrency-w4",
            "null-stateful/open_loop",
            "null-stateful/http_api-w2"
        ]
    );
    for r in &recs {
        let id = r["cell"]["id"].as_str().unwrap();
        assert!(
            validator.is_valid(r),
            "{id}: {:?}",
            validator.iter_errors(r).map(|e| e.to_string()).collect::<Vec<_>>()
        );
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
        let http = &r["cell"]["http"];
        assert_eq!(http["port"], 8000);
        let stateful = id.starts_with("null-stateful");
        assert_eq!(http["session"], if stateful { "stateful" } else { "stateless" });
        let transport = if id.contains("http_api") { "http-api" } else { "streamable-http" };
        assert_eq!(r["cell"]["transport"], transport);
    }
    // Closed loop: one MCP session per virtual user (no re-initialization on a healthy server).
    let w4 = &recs[5]["metrics"]["load"];
    assert_eq!(w4["sessions"], 4);
    assert_eq!(w4["reinitializations"], 0);
    // Open loop: the achieved rate is the asked one on a server this fast.
    let open = &recs[2]["metrics"]["load"];
    assert_eq!(open["target_rps"], 2000.0);
    let achieved = open["throughput_rps"].as_f64().unwrap();
    assert!((1900.0..=2100.0).contains(&achieved), "open loop achieved {achieved}/s");
    assert_eq!(open["dropped"], 0);
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
