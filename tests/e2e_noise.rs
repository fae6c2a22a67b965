//! End to end, the noise model on the real Docker engine: an A/A sweep — one release (mcp 1.30.0,
//! the low-level server on bookworm) measured as six servers, three runs each in random order,
//! with A/A controls, its records then labelled as six different releases — must name no step in
//! its history; every record carries its place in the order. Fails (never skips) when no engine
//! answers.

mod common;

use std::path::PathBuf;
use std::process::Command;

use benchlab::record::store::read_records;
use benchlab::report::histories;

const BIN: &str = env!("CARGO_BIN_EXE_benchlab");
const ROOT: &str = env!("CARGO_MANIFEST_DIR");
const LABELS: usize = 6;

#[test]
fn an_aa_sweep_of_one_release_labelled_as_six_names_no_step() {
    common::engine_must_answer();
    let dir = tempfile::tempdir().unwrap();
    let mut toml = String::from(
        "name = \"aa\"\nsuite = \"weekly\"\nrepeats = 3\ncontrols = [\"aa-0\", \"aa-5\"]\n[placement]\nmode = \"split\"\n",
    );
    for k in 0..LABELS {
        toml.push_str(&format!(
            "[[server]]\nid = \"aa-{k}\"\nfamily = \"python-mcp\"\nversion = \"1.30.0\"\nruntime = \"cpython-bookworm\"\napi = \"lowlevel\"\n"
        ));
    }
    toml.push_str(
        "[[workload]]\nkind = \"serial_calls\"\ntool = \"add_numbers\"\nwarmup = 100\ncalls = 400\n",
    );
    let file = dir.path().join("aa.toml");
    std::fs::write(&file, toml).unwrap();
    let results = dir.path().join("results");
    let out = Command::new(BIN)
        .current_dir(ROOT)
        .args(["run", file.to_str().unwrap(), "--results", results.to_str().unwrap(), "--engine", "docker"])
        .output()
        .unwrap();
    let say = format!("{}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{say}");
    let run: PathBuf = std::fs::read_dir(results.join("aa")).unwrap().flatten().next().unwrap().path();
    let mut records = read_records(&run.join("records.jsonl")).unwrap();
    assert_eq!(records.len(), LABELS * 3 + 2 * 3, "{say}");
    assert!(records.iter().all(|r| r.status == benchlab::record::Status::Ok), "{say}");
    // Every record has its place; the order is not the order written.
    let seeds: Vec<Option<u32>> = records.iter().map(|r| r.schedule.as_ref().unwrap().seed).collect();
    assert!(seeds.iter().all(|s| s.is_some() && *s == seeds[0]));
    let servers: Vec<&str> = records.iter().map(|r| r.cell.server.id.as_str()).collect();
    assert_ne!(servers[2..5], ["aa-0", "aa-0", "aa-0"], "repeats run round-robin, not together");
    // The same release, labelled as six: the history must see one level.
    for r in &mut records {
        let k: usize = r.cell.server.id.trim_start_matches("aa-").parse().unwrap();
        r.cell.server.sdk_version = format!("1.{k}.0");
    }
    let hs = histories(&records);
    assert_eq!(hs.len(), 1, "one series: {hs:?}");
    let h = &hs[0];
    let p50 = &h.metrics[0];
    let text: Vec<String> = p50
        .points
        .iter()
        .zip(&h.versions)
        .map(|(p, v)| format!("{v}: {:?}", p.as_ref().map(|p| (p.value, p.ci, p.runs, p.noisy))))
        .collect();
    assert!(p50.points.iter().flatten().all(|p| p.between && p.runs == 3), "{text:?}");
    assert_eq!(p50.controls.len(), 2, "{:?}", p50.controls);
    assert!(
        h.steps.is_empty(),
        "an A/A sweep named a step: {:?}\npoints: {text:#?}\ncontrols: {:?}",
        h.steps,
        p50.controls
    );
    eprintln!("A/A call p50 by label: {text:#?}\ncontrol drift {:?}", p50.control_drift);
}
