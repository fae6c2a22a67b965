//! Faulty HTTP servers end to end on the real Docker engine. One `benchlab run` sweeps the
//! built-in null server over streamable HTTP told to misbehave in every way `null-server --fault`
//! knows, each striking after 200 tools/call (the gate's included) so the load measures a
//! healthy server first: it stops listening, resets connections mid-answer, answers 503 or 429,
//! stalls its event stream, sends malformed SSE or JSON, forgets every session (404), leaks until
//! the cgroup kills it, exits; between two healthy cells. A fault the client survives is a
//! degraded record (status ok, the calls before it kept, its errors counted under the kind that
//! names the fault, with examples); one that kills the server is a failed record with its reason
//! and the time into the load. The sweep goes on; `audit` is clean; nothing of the run is left in
//! the engine. Fails (never skips) when no engine answers.

mod common;

use std::process::Command;

use benchlab::backend::containers::LABEL_RUN;
use common::engine_must_answer;
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_benchlab");
const ROOT: &str = env!("CARGO_MANIFEST_DIR");
/// tools/call requests each fault lets through (the gate's three included).
const AFTER: u64 = 200;

/// What a cell must come to.
enum Expect {
    /// Served throughout: status ok, no error.
    Healthy,
    /// Status ok with the calls before the fault, and errors mostly of this kind, one of whose
    /// examples says this.
    Degraded(&'static str, &'static str),
    /// Status failed with this reason, the detail saying this.
    Failed(&'static str, &'static str),
}

/// Each server: id, `$BENCHLAB_NULL_FAULT`, stateful, what its record must say.
const SERVERS: &[(&str, &str, bool, Expect)] = &[
    ("none", "", false, Expect::Healthy),
    ("refuse", "refuse@200", false, Expect::Degraded("connect", "refused")),
    ("reset", "reset@200", false, Expect::Degraded("connect", "reset")),
    ("status-503", "status:503@200", false, Expect::Degraded("http_status", "503")),
    ("status-429", "status:429@200", false, Expect::Degraded("rate_limited", "429")),
    ("sse-stall", "sse_stall@200", false, Expect::Degraded("timeout", "")),
    ("bad-sse", "bad_sse@200", false, Expect::Degraded("protocol_error", "not a JSON-RPC message")),
    ("bad-json", "bad_json@200", false, Expect::Degraded("protocol_error", "")),
    ("drop-session", "drop_session@200", true, Expect::Degraded("session_expired", "404")),
    ("oom", "leak:1048576", false, Expect::Failed("oom", "into it")),
    ("exit", "exit@200", false, Expect::Failed("crash", "into it")),
    ("none-after", "", false, Expect::Healthy),
];

fn scenario() -> String {
    let mut s = String::from(
        r#"name = "e2e-http-faults"
suite = "weekly"
order = "as-written"
[placement]
mode = "split"
memory = "256MiB"
[timeouts]
startup_ms = 10000
call_ms = 1000
[[workload]]
kind = "concurrency"
tool = "add_numbers"
workers = 2
warmup = "0s"
duration = "2s"
idle_after = "0s"
"#,
    );
    for (id, fault, stateful, _) in SERVERS {
        s.push_str(&format!(
            "[[server]]\nid = \"{id}\"\nfamily = \"benchlab-null\"\ntransport = \"streamable-http\"\n"
        ));
        if *stateful {
            s.push_str("session = \"stateful\"\n");
        }
        if !fault.is_empty() {
            s.push_str(&format!("env = {{ BENCHLAB_NULL_FAULT = \"{fault}\" }}\n"));
        }
    }
    s
}

fn docker_list(args: &[&str]) -> Vec<String> {
    let out = Command::new("docker").args(args).output().expect("docker runs");
    String::from_utf8_lossy(&out.stdout).split_whitespace().map(String::from).collect()
}

/// Removes whatever of the run is left in the engine, even when the test panics.
struct Cleanup(String);

impl Drop for Cleanup {
    fn drop(&mut self) {
        let filter = format!("label={LABEL_RUN}={}", self.0);
        for id in docker_list(&["ps", "-aq", "--filter", &filter]) {
            let _ = Command::new("docker").args(["rm", "-f", "-v", &id]).output();
        }
        for v in docker_list(&["volume", "ls", "-q", "--filter", &filter]) {
            let _ = Command::new("docker").args(["volume", "rm", "-f", &v]).output();
        }
    }
}

#[test]
fn every_http_fault_is_a_degraded_or_failed_record_with_its_reason_and_the_sweep_goes_on() {
    engine_must_answer();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("e2e-http-faults.toml");
    std::fs::write(&file, scenario()).unwrap();
    let run_id = format!("http-faults-{}", std::process::id());
    let _cleanup = Cleanup(run_id.clone());
    let results = dir.path().join("results");
    let out = Command::new(BIN)
        .current_dir(ROOT)
        .arg("run")
        .arg(&file)
        .args(["--run-id", &run_id, "--results"])
        .arg(&results)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let run = results.join("e2e-http-faults").join(&run_id);
    let text = std::fs::read_to_string(run.join("records.jsonl"))
        .unwrap_or_else(|e| panic!("no records ({e}); stderr:\n{stderr}"));
    let recs: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(recs.len(), SERVERS.len(), "stderr:\n{stderr}");
    for (id, _, _, expect) in SERVERS {
        let r = recs
            .iter()
            .find(|r| r["cell"]["server"]["id"] == *id)
            .unwrap_or_else(|| panic!("no record of {id}; stderr:\n{stderr}"));
        let load = &r["metrics"]["load"];
        eprintln!(
            "{id:13} {:7} {:15} ok={:4} errors={} reinit={} {}",
            r["status"],
            r["failure"]["reason"],
            load["ok"],
            load["errors"],
            load["reinitializations"],
            r["failure"]["detail"].as_str().unwrap_or("").lines().next().unwrap_or("")
        );
        match expect {
            Expect::Healthy => {
                assert_eq!(r["status"], "ok", "{id}: {}", r["failure"]);
                assert_eq!(load["failed"], 0, "{id}: {load}");
                assert!(load["ok"].as_u64().unwrap() > AFTER, "{id}: {load}");
            }
            Expect::Degraded(kind, says) => degraded(id, r, kind, says),
            Expect::Failed(reason, says) => {
                assert_eq!(r["status"], "failed", "{id}: {load}");
                assert_eq!(r["failure"]["reason"], *reason, "{id}: {}", r["failure"]);
                let detail = r["failure"]["detail"].as_str().unwrap();
                assert!(detail.contains(says), "{id}: {detail}");
                // What was measured before the server died is kept.
                assert!(load["ok"].as_u64().unwrap() > 0, "{id}: the calls before it: {load}");
                assert!(!load["series"]["intervals"].as_array().unwrap().is_empty(), "{id}: {load}");
            }
        }
    }
    let by_id = |id: &str| recs.iter().find(|r| r["cell"]["server"]["id"] == id).unwrap();
    // The session the server forgot was re-initialized before its call was given up.
    assert!(by_id("drop-session")["metrics"]["load"]["reinitializations"].as_u64() > Some(0));
    // The kernel's kill is the reason, and the memory limit is named.
    let oom = by_id("oom")["failure"]["detail"].as_str().unwrap();
    assert!(oom.contains("memory limit (256 MiB)"), "{oom}");

    // Some cells failed: exit 1, and the store is sound.
    assert_eq!(out.status.code(), Some(1), "stderr:\n{stderr}");
    let audit = Command::new(BIN).arg("audit").arg(&run).output().unwrap();
    assert!(audit.status.success(), "{}", String::from_utf8_lossy(&audit.stdout));
    // Nothing of the run is left in the engine.
    let filter = format!("label={LABEL_RUN}={run_id}");
    for what in [&["ps", "-aq"][..], &["volume", "ls", "-q"][..], &["network", "ls", "-q"][..]] {
        let left = docker_list(&[what, &["--filter", filter.as_str()][..]].concat());
        assert!(left.is_empty(), "docker {what:?} left {left:?}");
    }
}

/// A fault the client survived: the calls before it in the window, then errors of `kind`.
fn degraded(id: &str, r: &Value, kind: &str, says: &str) {
    let load = &r["metrics"]["load"];
    assert_eq!(r["status"], "ok", "{id}: {}", r["failure"]);
    let ok = load["ok"].as_u64().unwrap();
    assert!((1..=AFTER).contains(&ok), "{id}: the calls before the fault, no more: {load}");
    let errors = load["errors"].as_object().unwrap();
    let (top, n) = errors.iter().max_by_key(|(_, n)| n.as_u64()).unwrap_or_else(|| panic!("{id}: {load}"));
    assert_eq!(top, kind, "{id}: {load}");
    assert!(n.as_u64() > Some(0));
    let examples: Vec<&str> =
        load["error_examples"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
    assert!(examples.iter().any(|e| e.starts_with(kind) && e.contains(says)), "{id}: {examples:?}");
    // The time series holds what the totals hold.
    let intervals = load["series"]["intervals"].as_array().unwrap();
    let sum = |k: &str| intervals.iter().map(|i| i[k].as_u64().unwrap()).sum::<u64>();
    assert!(sum("ok") >= ok && sum("failed") >= load["failed"].as_u64().unwrap(), "{id}: {load}");
}
