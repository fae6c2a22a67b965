//! End to end on the real Docker engine: SIGINT in the middle of a run keeps every record already
//! written, abandons the cell in flight, removes the run's containers and volumes, and exits 130.
//! Fails (never skips) when no engine answers.

mod common;

use common::engine_must_answer;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_benchlab");
const ROOT: &str = env!("CARGO_MANIFEST_DIR");

#[test]
fn sigint_mid_run_keeps_records_and_leaves_nothing_running() {
    engine_must_answer();
    let results = tempfile::tempdir().unwrap();
    let mut child = Command::new(BIN)
        .current_dir(ROOT)
        // In the order written: the third cell (mcp-2.3.0/cold_start) is a long one.
        .args([
            "run",
            "scenarios/quickstart.toml",
            "--order",
            "as-written",
            "--run-id",
            "interrupted",
            "--results",
        ])
        .arg(results.path())
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    // Wait until the third cell's driver reports progress (its containers are up and it is
    // measuring: an event, not a time), then interrupt.
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    common::read_until(&mut lines, "its third cell measured", Duration::from_secs(600), |l| {
        l.starts_with("  mcp-2.3.0/cold_start: ")
    });
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), nix::sys::signal::Signal::SIGINT)
        .unwrap();
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130), "{rest:#?}");
    let text = rest.join("\n");
    assert!(text.contains("interrupted by SIGINT during cell mcp-2.3.0/cold_start"), "{text}");
    // The two finished cells are recorded and intact; the abandoned one is not.
    let records =
        std::fs::read_to_string(results.path().join("quickstart/interrupted/records.jsonl")).unwrap();
    assert_eq!(records.lines().count(), 2, "{records}");
    let out =
        Command::new(BIN).arg("report").arg(results.path().join("quickstart/interrupted")).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // Nothing of the run is left in the engine.
    for what in [&["ps", "-aq"][..], &["volume", "ls", "-q"][..]] {
        let left = Command::new("docker")
            .args(what)
            .args(["--filter", "label=org.benchlab.run=interrupted"])
            .output()
            .unwrap();
        assert!(String::from_utf8_lossy(&left.stdout).trim().is_empty(), "left behind: {what:?}");
    }
}
