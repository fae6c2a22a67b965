//! Interruptions end to end on the real Docker engine: a benchlab killed with `kill -9` leaves its
//! cell's containers behind; a second benchlab on the same run folder is refused while the first
//! holds it; `benchlab run --resume` then removes the dead one's leftovers (found by their owner
//! label), runs only the cells with no ok record, and nothing is lost or written twice.
//! Fails (never skips) when no engine answers.

mod common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use benchlab::backend::containers::LABEL_RUN;
use common::engine_must_answer;

const BIN: &str = env!("CARGO_BIN_EXE_benchlab");

/// Removes every container and volume of the run's label, even when the test panics.
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
    }
}

fn docker_list(args: &[&str]) -> Vec<String> {
    let out = Command::new("docker").args(args).output().expect("docker runs");
    String::from_utf8_lossy(&out.stdout).split_whitespace().map(String::from).collect()
}

/// Three null-server cells, each long enough to be killed in the middle of.
fn scenario(dir: &Path) -> std::path::PathBuf {
    let mut s = String::from(
        r#"name = "resume"
suite = "weekly"

[placement]
mode = "split"
memory = "256MiB"

[[workload]]
kind = "serial_calls"
tool = "add_numbers"
warmup = 0
calls = 30000
"#,
    );
    for id in ["a", "b", "c"] {
        s.push_str(&format!("\n[[server]]\nid = \"{id}\"\nfamily = \"benchlab-null\"\n"));
    }
    let path = dir.join("resume.toml");
    std::fs::write(&path, s).unwrap();
    path
}

use common::records_in as records;

fn resume(run_dir: &Path) -> std::process::Output {
    resume_with(Path::new(BIN), run_dir)
}

fn resume_with(bin: &Path, run_dir: &Path) -> std::process::Output {
    Command::new(bin).arg("run").arg("--resume").arg(run_dir).output().unwrap()
}

#[test]
fn a_killed_run_is_locked_cleaned_up_and_resumed_without_loss_or_duplicates() {
    engine_must_answer();
    let tmp = tempfile::tempdir().unwrap();
    let scenario = scenario(tmp.path());
    let run_id = format!("resume-{}", std::process::id());
    let _cleanup = Cleanup { label: run_id.clone() };
    let results = tmp.path().join("results");
    let run_dir = results.join("resume").join(&run_id);
    let filter = format!("label={LABEL_RUN}={run_id}");

    // The first benchlab, killed with SIGKILL once its second cell is under way.
    let started = Instant::now();
    let mut first = Command::new(BIN)
        .arg("run")
        .arg(&scenario)
        .args(["--run-id", &run_id, "--results"])
        .arg(&results)
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(first.stderr.take().unwrap()).lines();
    // The second cell's id from its start line, then its driver's first progress line: its
    // containers are up and it is measuring (an event, not a time).
    let mut second: Option<String> = None;
    let seen = common::read_until(&mut lines, "its second cell measured", Duration::from_secs(300), |line| {
        if let Some(rest) = line.strip_prefix("cell 2/3 ") {
            second = rest.split_whitespace().next().map(|id| format!("  {id}: "));
            false
        } else {
            second.as_deref().is_some_and(|p| line.starts_with(p))
        }
    });
    let first_records = records(&run_dir);
    assert_eq!(first_records.len(), 1, "the first cell is recorded: {seen:#?}");
    // The run's order is a seeded permutation: whichever cell came first is the one recorded.
    let done = first_records[0]["cell"]["id"].as_str().unwrap().to_string();

    // While it runs, a second benchlab on the same folder is refused, at once and clearly.
    let refused = resume(&run_dir);
    let text = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(2), "{text}");
    assert!(
        text.contains("is being written by another benchlab") && text.contains(&first.id().to_string()),
        "{text}"
    );
    assert_eq!(records(&run_dir).len(), 1);

    nix::sys::signal::kill(nix::unistd::Pid::from_raw(first.id() as i32), nix::sys::signal::Signal::SIGKILL)
        .unwrap();
    first.wait().unwrap();
    // SIGKILL leaves no chance to clean up: the cell's containers are still there.
    let left = docker_list(&["ps", "-aq", "--filter", &filter]);
    assert!(!left.is_empty(), "the killed run should have left its cell's containers");

    // Resume, with another build of the lab (the same executable plus one byte, so another
    // sha256): the dead benchlab's leftovers go first, then only the two unrecorded cells run, and the change
    // of binary against the run's earlier record is reported, not silently mixed in.
    let other = tmp.path().join("benchlab-rebuilt");
    let mut bytes = std::fs::read(BIN).unwrap();
    bytes.push(0);
    std::fs::write(&other, bytes).unwrap();
    std::fs::set_permissions(&other, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let out = resume_with(&other, &run_dir);
    let text = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{text}");
    let owner = format!("left by benchlab {}-", first.id());
    assert!(text.contains(&owner) && text.contains(&format!("(run {run_id})")), "{text}");
    assert!(text.contains("1 cell(s) already had an ok record and were skipped, 2 ran now"), "{text}");
    assert!(text.contains("environment field(s) differ from the run's earlier records"), "{text}");
    for cell in ["a/serial_calls", "b/serial_calls", "c/serial_calls"].into_iter().filter(|c| *c != done) {
        let line = format!("{cell}: environment changed since record 0");
        assert!(text.contains(&line) && text.contains("benchlab.binary_sha256"), "{cell}: {text}");
    }

    // Nothing lost, nothing twice: one ok record per cell, one chain.
    let all = records(&run_dir);
    let mut cells: Vec<&str> = all.iter().map(|r| r["cell"]["id"].as_str().unwrap()).collect();
    cells.sort();
    assert_eq!(cells, ["a/serial_calls", "b/serial_calls", "c/serial_calls"]);
    assert!(all.iter().all(|r| r["status"] == "ok" && r["run_id"] == run_id.as_str()));
    let audit = Command::new(BIN).arg("audit").arg(&run_dir).output().unwrap();
    assert!(audit.status.success(), "{}", String::from_utf8_lossy(&audit.stdout));
    assert_eq!(docker_list(&["ps", "-aq", "--filter", &filter]), Vec::<String>::new());
    assert_eq!(docker_list(&["volume", "ls", "-q", "--filter", &filter]), Vec::<String>::new());

    // A finished run resumes to nothing.
    let again = resume(&run_dir);
    let text = String::from_utf8_lossy(&again.stderr);
    assert_eq!(again.status.code(), Some(0), "{text}");
    assert!(text.contains("3 cell(s) already had an ok record and were skipped, 0 ran now"), "{text}");
    assert!(!text.contains("environment field(s) differ"), "nothing ran, nothing to compare: {text}");
    assert_eq!(records(&run_dir).len(), 3);
    eprintln!("kill -9, lock and resume took {:?}", started.elapsed());
}
