//! The stdio bridge on the host, with no container engine: a real `benchlab shim` and a real
//! `benchlab driver` talking over a real Unix socket and real FIFOs, against the built-in null
//! server and against misbehaving servers (shell scripts) that must give the right failure.

use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::{json, Value};

const BIN: &str = env!("CARGO_BIN_EXE_benchlab");

/// Runs shim + driver in a fresh folder; returns the driver's outcome object.
fn drive(argv: Vec<String>, workload: Value) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let mut shim =
        Command::new(BIN).args(["shim", "--dir"]).arg(dir.path()).stdin(Stdio::null()).spawn().unwrap();
    let spec = json!({
        "lab_dir": dir.path(),
        "server": {"argv": argv, "env": [["BENCHLAB_SUITE", "weekly"]], "cwd": null},
        "suite": "weekly",
        "workload": workload,
        "timeouts": {"startup_ms": 3000, "call_ms": 1500, "stop_grace_ms": 500, "term_ms": 500},
    });
    let out = Command::new(BIN).args(["driver", "--spec", &spec.to_string()]).output().unwrap();
    let status = shim.wait().unwrap();
    assert!(status.success(), "the shim exits cleanly after the driver's shutdown");
    let stdout = String::from_utf8(out.stdout).unwrap();
    let last = stdout
        .lines()
        .last()
        .unwrap_or_else(|| panic!("no driver output; stderr: {}", String::from_utf8_lossy(&out.stderr)));
    let event: Value = serde_json::from_str(last).unwrap();
    assert_eq!(event["type"], "outcome");
    event["outcome"].clone()
}

fn script(dir: &Path, name: &str, body: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
    Command::new("chmod").arg("+x").arg(&p).status().unwrap();
    p.display().to_string()
}

#[test]
fn null_server_serial_calls_are_measured_and_checked() {
    let o = drive(
        vec![BIN.into(), "null-server".into()],
        json!({"kind": "serial_calls", "tool": "add_numbers", "warmup": 50, "calls": 500}),
    );
    assert_eq!(o["failure"], Value::Null, "{o}");
    assert_eq!(o["calls_ok"], 500);
    assert_eq!(o["protocol_version"], "2025-11-25");
    assert!(o["memory_after_initialize"]["rss_bytes"].as_u64().unwrap() > 0);
    assert!(o["calls_histogram"].as_str().unwrap().len() > 10);
}

#[test]
fn null_server_cold_starts_many_times_without_losing_its_input() {
    // A fast server reads its stdin at once: the bridge must not let it see end-of-file first.
    let o = drive(vec![BIN.into(), "null-server".into()], json!({"kind": "cold_start", "spawns": 30}));
    assert_eq!(o["failure"], Value::Null, "{o}");
    assert_eq!(o["cold_start_ns"].as_array().unwrap().len(), 30);
    assert_eq!(o["exits"].as_array().unwrap().len(), 30);
}

#[test]
fn a_server_that_dies_at_start_is_a_crash() {
    let d = tempfile::tempdir().unwrap();
    let s = script(d.path(), "dies.sh", "echo 'fatal: no config' >&2; exit 3");
    let o = drive(vec![s], json!({"kind": "cold_start", "spawns": 1}));
    assert_eq!(o["failure"]["reason"], "crash", "{o}");
    assert!(
        o["failure"]["detail"].as_str().unwrap().contains("fatal: no config"),
        "stderr tail is kept: {o}"
    );
}

#[test]
fn a_banner_on_stdout_is_a_protocol_error() {
    let d = tempfile::tempdir().unwrap();
    let s = script(d.path(), "banner.sh", &format!("echo 'Welcome to my server!'; exec {BIN} null-server"));
    let o = drive(vec![s], json!({"kind": "cold_start", "spawns": 1}));
    assert_eq!(o["failure"]["reason"], "protocol_error", "{o}");
    assert!(o["failure"]["detail"].as_str().unwrap().contains("Welcome"), "{o}");
}

#[test]
fn a_server_that_never_answers_is_a_startup_timeout_and_is_killed() {
    let d = tempfile::tempdir().unwrap();
    // Ignores SIGTERM too: the shim must escalate to SIGKILL.
    let s = script(d.path(), "hang.sh", "trap '' TERM; while true; do sleep 1; done");
    let o = drive(vec![s], json!({"kind": "cold_start", "spawns": 1}));
    assert_eq!(o["failure"]["reason"], "startup_timeout", "{o}");
}

#[test]
fn a_wrong_answer_fails_the_gate() {
    let d = tempfile::tempdir().unwrap();
    // A server whose add_numbers is off by one: answers the handshake and tools/list through the
    // null server's replies, then a wrong tools/call result.
    let body = r#"
while IFS= read -r line; do
  id=$(printf '%s' "$line" | sed -n 's/.*"id":\([0-9]*\).*/\1/p')
  case "$line" in
    *'"initialize"'*) printf '{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"bad","version":"0"}}}\n' "$id" ;;
    *'"tools/list"'*) printf '{"jsonrpc":"2.0","id":%s,"result":{"tools":[{"name":"add_numbers","inputSchema":{}},{"name":"echo","inputSchema":{}},{"name":"word_count","inputSchema":{}}]}}\n' "$id" ;;
    *'"tools/call"'*) printf '{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"43"}]}}\n' "$id" ;;
  esac
done"#;
    let s = script(d.path(), "wrong.sh", body);
    let o = drive(vec![s], json!({"kind": "serial_calls", "tool": "add_numbers", "warmup": 0, "calls": 10}));
    assert_eq!(o["failure"]["reason"], "wrong_result", "{o}");
    let detail = o["failure"]["detail"].as_str().unwrap();
    assert!(detail.contains("expected 42, got 43"), "{detail}");
}

#[test]
fn the_server_gets_anonymous_pipes_like_a_local_child() {
    // Bun 1.1 reads a named FIFO on stdin only at end of file: the bridge must hand the server
    // the same kind of kernel object a local client's fork would, an anonymous pipe.
    let d = tempfile::tempdir().unwrap();
    let s = script(
        d.path(),
        "pipes.sh",
        &format!(
            "case \"$(readlink /proc/$$/fd/0) $(readlink /proc/$$/fd/1)\" in\n  pipe:*' 'pipe:*) exec {BIN} null-server ;;\n  *) echo \"not pipes: $(readlink /proc/$$/fd/0) $(readlink /proc/$$/fd/1)\" >&2; exit 9 ;;\nesac"
        ),
    );
    let o = drive(vec![s], json!({"kind": "cold_start", "spawns": 2}));
    assert_eq!(o["failure"], Value::Null, "{o}");
}
