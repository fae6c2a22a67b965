//! Faulty servers end to end on the real Docker engine. One `benchlab run` sweeps a scenario whose
//! servers misbehave in every way tests/fixtures/faulty/server.sh knows (crash at start or after
//! some calls, hang before initialize or mid-call, a banner or garbage on stdout, wrong answers,
//! memory past the limit, a fork bomb, a start slower than the limit, SIGTERM ignored), between
//! two healthy cells. Each faulty cell must be recorded `failed` with its own reason and keep what
//! was measured before the fault; the sweep goes on; nothing of the run is left in the engine; the
//! exit code says cells failed. Fails (never skips) when no engine answers.

mod common;

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use benchlab::backend::containers::LABEL_RUN;
use common::engine_must_answer;
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_benchlab");
const CALLS: u64 = 100;
/// tools/call requests a proxied fault lets through before it strikes (FAULT_AFTER).
const AFTER: u64 = 20;
/// The weekly suite's correctness gate: three tools/call before the measured ones.
const GATE: u64 = 3;

/// Removes every container and volume of the run's label, and the fixture image, even when the
/// test panics.
struct Cleanup {
    label: String,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        let filter = format!("label={LABEL_RUN}={}", self.label);
        for id in docker_list(&["ps", "-aq", "--filter", &filter]) {
            let _ = Command::new("docker").args(["rm", "-f", "-v", &id]).output();
        }
        for v in docker_list(&["volume", "ls", "-q", "--filter", &filter]) {
            let _ = Command::new("docker").args(["volume", "rm", "-f", &v]).output();
        }
        for img in docker_list(&["images", "-q", "benchlab/faulty"]) {
            let _ = Command::new("docker").args(["rmi", "-f", &img]).output();
        }
    }
}

fn docker_list(args: &[&str]) -> Vec<String> {
    let out = Command::new("docker").args(args).output().expect("docker runs");
    String::from_utf8_lossy(&out.stdout).split_whitespace().map(String::from).collect()
}

/// Each server of the sweep: its id (= $FAULT) and the status and reason its cell must get.
const SERVERS: &[(&str, Option<&str>)] = &[
    ("none", None),
    ("crash_at_start", Some("crash")),
    ("crash_after_calls", Some("crash")),
    ("hang_before_initialize", Some("startup_timeout")),
    ("slow_start", Some("startup_timeout")),
    ("hang_mid_call", Some("timeout")),
    ("banner", Some("protocol_error")),
    ("garbage_mid_stream", Some("protocol_error")),
    ("wrong_answers", Some("wrong_result")),
    ("oom", Some("oom")),
    ("fork_bomb", Some("startup_timeout")),
    // Served correctly; the stop had to SIGKILL it (checked below).
    ("ignore_sigterm", None),
];

fn scenario(root: &Path) -> String {
    let mut s = format!(
        r#"name = "faults"
suite = "weekly"

[placement]
mode = "split"
memory = "256MiB"

[timeouts]
startup_ms = 4000
call_ms = 3000
stop_grace_ms = 300
term_ms = 700

[[workload]]
kind = "serial_calls"
tool = "add_numbers"
warmup = 0
calls = {CALLS}
"#
    );
    // `none` again at the end: the sweep still runs a healthy cell after every fault.
    for (id, fault) in SERVERS.iter().map(|(f, _)| (*f, *f)).chain([("none_after", "none")]) {
        s.push_str(&format!(
            "\n[[server]]\nid = \"{id}\"\nfamily = \"faulty\"\nversion = \"1\"\nenv = {{ FAULT = \"{fault}\", FAULT_AFTER = \"{AFTER}\" }}\n"
        ));
    }
    let path = root.join("faults.toml");
    std::fs::write(&path, &s).unwrap();
    path.display().to_string()
}

fn count(r: &Value) -> u64 {
    r["metrics"]["calls"]["summary"]["count"].as_u64().unwrap_or(0)
}

#[test]
fn every_fault_is_recorded_with_its_reason_and_the_sweep_goes_on() {
    engine_must_answer();
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("checkout");
    common::faulty_checkout(&root);
    let scenario = scenario(&root);
    let run_id = format!("faults-{}", std::process::id());
    let _cleanup = Cleanup { label: run_id.clone() };
    let results = tmp.path().join("results");
    let started = Instant::now();
    let out = Command::new(BIN)
        .args(["run", &scenario, "--root"])
        .arg(&root)
        .args(["--run-id", &run_id, "--results"])
        .arg(&results)
        .output()
        .unwrap();
    let took = started.elapsed();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    eprintln!("the sweep of {} cells took {took:?}", SERVERS.len() + 1);
    let text = std::fs::read_to_string(results.join("faults").join(&run_id).join("records.jsonl"))
        .unwrap_or_else(|e| panic!("no records ({e}); stdout:\n{stdout}\nstderr:\n{stderr}"));
    let records: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let by_id = |id: &str| -> &Value {
        records
            .iter()
            .find(|r| r["cell"]["server"]["id"] == id)
            .unwrap_or_else(|| panic!("no record of {id}; stdout:\n{stdout}\nstderr:\n{stderr}"))
    };
    assert_eq!(records.len(), SERVERS.len() + 1, "stderr:\n{stderr}");

    // Every cell's status and reason.
    for (id, reason) in SERVERS {
        let r = by_id(id);
        let detail = r["failure"]["detail"].as_str().unwrap_or("").lines().next().unwrap_or("").to_string();
        eprintln!("{id:24} {:7} {:16} calls={:3} {detail}", r["status"], r["failure"]["reason"], count(r));
        match reason {
            Some(reason) => {
                assert_eq!(r["status"], "failed", "{id}: {}", r["failure"]);
                assert_eq!(r["failure"]["reason"], *reason, "{id}: {}", r["failure"]["detail"]);
            }
            None => assert_eq!(r["status"], "ok", "{id}: {}", r["failure"]),
        }
    }
    for id in ["none", "none_after"] {
        assert_eq!(by_id(id)["status"], "ok");
        assert_eq!(count(by_id(id)), CALLS, "{id}");
    }

    // What was measured before the fault is kept: the handshake, tools/list, memory and every
    // call answered before it struck; nothing is invented for faults before the handshake.
    let before = AFTER - GATE;
    for id in ["crash_after_calls", "hang_mid_call", "garbage_mid_stream", "wrong_answers", "oom"] {
        let r = by_id(id);
        assert_eq!(count(r), before, "{id}: calls kept");
        assert_eq!(r["metrics"]["cold_start"]["samples_ms"].as_array().map(Vec::len), Some(1), "{id}");
        assert!(r["metrics"]["tools_list"].is_object(), "{id}");
        assert!(r["metrics"]["memory"]["after_initialize"]["rss_bytes"].as_u64() > Some(0), "{id}");
        assert_eq!(r["observed"]["server_info"]["name"], "benchlab-null", "{id}");
    }
    for id in ["crash_at_start", "hang_before_initialize", "slow_start", "banner", "fork_bomb"] {
        let r = by_id(id);
        assert!(r["metrics"]["cold_start"].is_null(), "{id}: {}", r["metrics"]);
        assert!(r["metrics"]["calls"].is_null(), "{id}");
    }

    // The details say what happened, with the server's own stderr where it had some.
    let detail = |id: &str| by_id(id)["failure"]["detail"].as_str().unwrap_or("").to_string();
    assert!(
        detail("crash_at_start").contains("exiting before the handshake"),
        "{}",
        detail("crash_at_start")
    );
    assert!(detail("wrong_answers").contains("expected"), "{}", detail("wrong_answers"));
    assert!(detail("banner").contains("listening on stdio"), "{}", detail("banner"));
    // The kernel's kill is the reason; what the driver saw of it stays in the detail.
    assert!(detail("oom").contains("memory limit (256 MiB)"), "{}", detail("oom"));
    assert!(detail("oom").contains("the driver saw crash"), "{}", detail("oom"));
    assert!(detail("oom").contains("allocating past the memory limit"), "{}", detail("oom"));
    // The pids limit is what stopped the bomb: bash reports the forks the kernel refused.
    assert!(detail("fork_bomb").contains("Resource temporarily unavailable"), "{}", detail("fork_bomb"));

    // A server that ignores SIGTERM is served and measured, and the stop had to SIGKILL it.
    let stubborn = &by_id("ignore_sigterm")["observed"]["exits"][0];
    assert_eq!(stubborn["how"], "killed", "{stubborn}");
    assert_eq!(stubborn["signal"], 9, "{stubborn}");
    assert!(stubborn["stop_ms"].as_f64() >= Some(1000.0), "grace + term first: {stubborn}");
    // A healthy one exits by itself once its stdin closes (often before the shim is asked to stop).
    let polite = &by_id("none")["observed"]["exits"][0]["how"];
    assert!(polite == "exited" || polite == "already_exited", "{polite}");

    // Some cells failed: exit 1, and the store is sound.
    assert_eq!(out.status.code(), Some(1), "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(stderr.contains("did not do what the scenario expects"), "{stderr}");
    let audit = Command::new(BIN).arg("audit").arg(results.join("faults").join(&run_id)).output().unwrap();
    assert!(audit.status.success(), "{}", String::from_utf8_lossy(&audit.stdout));

    // Nothing of the run is left in the engine: no container (so no process of any server) and
    // no volume.
    let filter = format!("label={LABEL_RUN}={run_id}");
    assert_eq!(docker_list(&["ps", "-aq", "--filter", &filter]), Vec::<String>::new());
    assert_eq!(docker_list(&["volume", "ls", "-q", "--filter", &filter]), Vec::<String>::new());
}
