//! `benchlab run` as a user drives it, on the hidden scripted engine (`--engine scripted`: canned
//! outcomes, nothing measured; as hyperfine's debug mode), so progress, interruption and
//! resumption are checked in the tier that needs nothing of the host, waiting on the run's own
//! lines instead of on time: a cell that hangs until it is interrupted, a cell that fails, and
//! the resumptions that follow. tests/e2e_interrupt.rs and tests/e2e_resume.rs show the same on
//! the real engine, with containers to clean up.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::Value;
use std::time::Duration;

mod common;

const BIN: &str = env!("CARGO_BIN_EXE_benchlab");
const ROOT: &str = env!("CARGO_MANIFEST_DIR");

fn lab(args: &[&str]) -> Command {
    let mut c = Command::new(BIN);
    c.current_dir(ROOT).args(args);
    c
}

use common::records_in as records;

fn text(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The quickstart on the scripted engine in the order written, with the given scripts, into a
/// run folder of `results` named `run_id`.
fn quickstart(results: &Path, run_id: &str, scripts: &[&str]) -> Command {
    let mut c = lab(&["run", "scenarios/quickstart.toml", "--engine", "scripted", "--order", "as-written"]);
    c.args(["--run-id", run_id, "--results"]).arg(results);
    for s in scripts {
        c.args(["--script", s]);
    }
    c
}

fn run_dir(results: &Path, run_id: &str) -> PathBuf {
    results.join("quickstart").join(run_id)
}

fn audit_clean(dir: &Path) {
    let out = lab(&["audit"]).arg(dir).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stdout));
}

#[test]
fn progress_names_each_cell_as_it_starts_and_ends_and_a_failure_with_its_reason() {
    let results = tempfile::tempdir().unwrap();
    let out =
        quickstart(results.path(), "progress", &["mcp-2.3.0/serial_calls=fail:crash"]).output().unwrap();
    let err = text(&out);
    // A cell that does not do what the scenario expects is exit 1, after every cell ran.
    assert_eq!(out.status.code(), Some(1), "{err}");
    let lines: Vec<&str> = err.lines().collect();
    let at = |needle: &str| {
        lines.iter().position(|l| l.contains(needle)).unwrap_or_else(|| panic!("{needle}: {err}"))
    };
    let order = [
        at("cell 1/4 null/cold_start"),
        at("  null/cold_start ok"),
        at("cell 2/4 null/serial_calls"),
        at("cell 3/4 mcp-2.3.0/cold_start"),
        at("cell 4/4 mcp-2.3.0/serial_calls"),
        at("  mcp-2.3.0/serial_calls FAILED crash: scripted failure"),
        at("1 cell(s) did not do what the scenario expects:"),
    ];
    assert!(order.windows(2).all(|w| w[0] < w[1]), "{err}");
    let recs = records(&run_dir(results.path(), "progress"));
    assert_eq!(recs.len(), 4);
    assert!(recs.iter().all(|r| r["environment"]["engine"]["kind"] == "scripted"), "scripted records say so");
    audit_clean(&run_dir(results.path(), "progress"));
}

#[test]
fn sigint_during_a_cell_keeps_the_records_written_and_resume_runs_only_the_rest() {
    let results = tempfile::tempdir().unwrap();
    let mut child = quickstart(results.path(), "interrupted", &["mcp-2.3.0/cold_start=hang"])
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    // The third cell hangs until it is abandoned: once it has started, the interruption lands
    // in it, however slow the host.
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    common::read_until(&mut lines, "its third cell started", Duration::from_secs(600), |l| {
        l.contains("mcp-2.3.0/cold_start: scripted")
    });
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), nix::sys::signal::Signal::SIGINT)
        .unwrap();
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    assert_eq!(child.wait().unwrap().code(), Some(130), "{rest:#?}");
    let said = rest.join("\n");
    assert!(said.contains("interrupted by SIGINT during cell mcp-2.3.0/cold_start: 2 of 4 cells"), "{said}");
    assert!(said.contains("--resume"), "it says how to go on: {said}");
    let dir = run_dir(results.path(), "interrupted");
    let ids = |recs: &[Value]| {
        recs.iter().map(|r| r["cell"]["id"].as_str().unwrap().to_string()).collect::<Vec<_>>()
    };
    assert_eq!(ids(&records(&dir)), ["null/cold_start", "null/serial_calls"]);
    audit_clean(&dir);

    // Resumed: only the two cells without a record run, appended to the same chain.
    let out = lab(&["run", "--engine", "scripted", "--resume"]).arg(&dir).output().unwrap();
    let err = text(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("2 cell(s) already had an ok record and were skipped, 2 ran now"), "{err}");
    assert!(
        !err.contains("null/cold_start ok") && !err.contains("null/serial_calls ok"),
        "none runs again: {err}"
    );
    // The two recorded first stay first; the resumed two follow (in the resumed run's order).
    let mut after = ids(&records(&dir));
    assert_eq!(after[..2], ["null/cold_start", "null/serial_calls"]);
    after[2..].sort();
    assert_eq!(after[2..], ["mcp-2.3.0/cold_start", "mcp-2.3.0/serial_calls"]);
    audit_clean(&dir);
}

#[test]
fn a_failed_cell_is_run_again_by_resume_and_a_finished_run_resumes_to_nothing() {
    let results = tempfile::tempdir().unwrap();
    let out = quickstart(results.path(), "failed", &["null/serial_calls=fail:timeout"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let dir = run_dir(results.path(), "failed");
    assert_eq!(records(&dir).len(), 4);

    let out = lab(&["run", "--engine", "scripted", "--resume"]).arg(&dir).output().unwrap();
    let err = text(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("3 cell(s) already had an ok record and were skipped, 1 ran now"), "{err}");
    // The failed record stays in the chain; the cell's ok record follows it.
    let recs = records(&dir);
    let tries: Vec<&str> = recs
        .iter()
        .filter(|r| r["cell"]["id"] == "null/serial_calls")
        .map(|r| r["status"].as_str().unwrap())
        .collect();
    assert_eq!(tries, ["failed", "ok"]);
    audit_clean(&dir);

    let again = lab(&["run", "--engine", "scripted", "--resume"]).arg(&dir).output().unwrap();
    let err = text(&again);
    assert_eq!(again.status.code(), Some(0), "{err}");
    assert!(err.contains("4 cell(s) already had an ok record and were skipped, 0 ran now"), "{err}");
    assert_eq!(records(&dir).len(), 5);
}

#[test]
fn a_script_without_the_scripted_engine_or_spelled_wrong_is_refused_with_exit_2() {
    let results = tempfile::tempdir().unwrap();
    for (args, says) in [
        (&["--script", "*=ok"][..], "--script needs --engine scripted"),
        (&["--engine", "scripted", "--script", "*=sleep"][..], "expected ok[:DURATION], hang or fail:REASON"),
        (&["--engine", "scripted", "--script", "null"][..], "expected CELL=WHAT"),
    ] {
        let out = lab(&["run", "scenarios/quickstart.toml", "--results"])
            .arg(results.path())
            .args(args)
            .output()
            .unwrap();
        let err = text(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
    assert!(std::fs::read_dir(results.path()).unwrap().next().is_none(), "nothing was written");
}
