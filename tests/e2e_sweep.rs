//! End to end, for version sweeps and the native engine, on the real Docker engine and real
//! cgroups: a [[matrix]] over a release range runs from the committed release list and its
//! history report names the versions, and a second plan builds nothing; `benchlab lock` over a
//! range keeps fresh locks and relocks a missing one bounded by its release day; `--parallel`
//! runs shared-placement cells two at a time on CPUs that share no core (and says why a split
//! scenario cannot here); one scenario holds both engines; the native engine runs the quickstart
//! and the seed 001 scenario. Fails (never skips) when no engine answers.

mod common;

use common::engine_must_answer;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_benchlab");
const ROOT: &str = env!("CARGO_MANIFEST_DIR");

fn benchlab(args: &[&str]) -> Output {
    Command::new(BIN).current_dir(ROOT).args(args).output().unwrap()
}

fn text(out: &Output) -> String {
    format!("{}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

/// Runs a scenario (a file of the checkout, or TOML text written to a temp file) with extra
/// arguments; returns the output, the run folder and its records.
fn run(scenario: &str, extra: &[&str], dir: &Path) -> (Output, PathBuf, Vec<Value>) {
    let file = if scenario.starts_with("scenarios/") {
        PathBuf::from(ROOT).join(scenario)
    } else {
        let f = dir.join("scenario.toml");
        std::fs::write(&f, scenario).unwrap();
        f
    };
    let results = dir.join("results");
    let mut args = vec!["run", file.to_str().unwrap(), "--results", results.to_str().unwrap()];
    args.extend_from_slice(extra);
    let out = benchlab(&args);
    let run = std::fs::read_dir(&results)
        .unwrap_or_else(|e| panic!("no results ({e}):\n{}", text(&out)))
        .flatten()
        .flat_map(|s| std::fs::read_dir(s.path()).unwrap().flatten())
        .map(|r| r.path())
        .next()
        .unwrap_or_else(|| panic!("no run folder:\n{}", text(&out)));
    let records = std::fs::read_to_string(run.join("records.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    (out, run, records)
}

fn ok(r: &Value) -> bool {
    r["status"] == "ok"
}

#[test]
fn a_release_range_matrix_runs_reports_its_history_and_plans_no_build_after() {
    engine_must_answer();
    let dir = tempfile::tempdir().unwrap();
    // A sweep: random order, repeats and A/A controls by default; two runs and one control here
    // to keep it short.
    let scenario = r#"
name = "e2e-sweep"
suite = "weekly"
repeats = 2
[[matrix]]
id = "mcp-{version}"
family = "python-mcp"
versions = "1.29.0..1.30.0"
runtimes = ["cpython-bookworm"]
api = "lowlevel"
controls = ["first"]
[[workload]]
kind = "cold_start"
spawns = 2
[[workload]]
kind = "serial_calls"
tool = "add_numbers"
warmup = 10
calls = 100
"#;
    let (out, run_dir, recs) = run(scenario, &["--engine", "docker", "--order-seed", "7"], dir.path());
    assert!(out.status.success(), "{}", text(&out));
    // 3 releases × 2 workloads × 2 runs, and the control's 2 workloads at start, middle and end.
    assert_eq!(recs.len(), 12 + 6, "{}", text(&out));
    let mut ids: Vec<&str> = recs.iter().map(|r| r["cell"]["id"].as_str().unwrap()).collect();
    let written: Vec<&str> = ids.clone();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(
        ids,
        [
            "mcp-1.29.0/cold_start",
            "mcp-1.29.0/serial_calls",
            "mcp-1.29.1/cold_start",
            "mcp-1.29.1/serial_calls",
            "mcp-1.30.0/cold_start",
            "mcp-1.30.0/serial_calls"
        ]
    );
    assert_ne!(
        &written[2..8],
        [
            "mcp-1.29.0/cold_start",
            "mcp-1.29.0/serial_calls",
            "mcp-1.29.0/cold_start",
            "mcp-1.29.0/serial_calls",
            "mcp-1.29.1/cold_start",
            "mcp-1.29.1/serial_calls"
        ]
    );
    for (i, r) in recs.iter().enumerate() {
        let s = &r["schedule"];
        assert_eq!(
            (s["order"].as_str(), s["seed"].as_u64(), s["position"].as_u64(), s["of"].as_u64()),
            (Some("random"), Some(7), Some(i as u64), Some(18)),
            "{r}"
        );
        let control = s["control"].as_str();
        let expected = match i {
            0 | 1 => Some("start"),
            8 | 9 => Some("middle"),
            16 | 17 => Some("end"),
            _ => None,
        };
        assert_eq!(control, expected, "position {i}");
        if control.is_some() {
            assert_eq!(r["cell"]["server"]["sdk_version"], "1.29.0");
            assert!(r["cell"]["repeat"].is_null());
        }
    }
    assert!(recs.iter().all(ok), "{}", text(&out));
    assert!(recs.iter().all(|r| r["cell"]["server"]["api"] == "lowlevel"));
    // Each release ran its own locked version.
    for r in &recs {
        let v = r["cell"]["server"]["sdk_version"].as_str().unwrap();
        let pkgs = r["environment"]["image"]["packages"].as_array().unwrap();
        assert!(pkgs.iter().any(|p| p["name"] == "mcp" && p["version"] == v), "{v}: {pkgs:?}");
    }
    // The history across the three versions, as JSON: runs as the unit, the control's drift.
    let h = benchlab(&["report", run_dir.to_str().unwrap(), "--format", "history"]);
    assert!(h.status.success(), "{}", text(&h));
    let v: Value = serde_json::from_slice(&h.stdout).unwrap();
    let series = v["series"].as_array().unwrap();
    assert_eq!(series.len(), 2, "one series per workload: {v}");
    for s in series {
        assert_eq!(s["versions"], serde_json::json!(["1.29.0", "1.29.1", "1.30.0"]));
        let m = &s["metrics"][0];
        for p in m["points"].as_array().unwrap() {
            assert_eq!((p["runs"].as_u64(), p["interval"].as_str()), (Some(2), Some("between_runs")), "{p}");
            assert!(p["within_lower"].is_number(), "{p}");
        }
        assert_eq!(m["controls"][0]["version"], "1.29.0", "{m}");
        assert_eq!(m["controls"][0]["values"].as_array().unwrap().len(), 3, "{m}");
        assert!(m["control_drift"].as_f64().unwrap() >= 0.0);
    }
    let table = benchlab(&["report", run_dir.to_str().unwrap()]);
    let table_text = String::from_utf8_lossy(&table.stdout);
    assert!(table_text.contains("History") && table_text.contains("A/A controls, "), "{}", text(&table));
    // A second look builds nothing: every image is in the engine; it states the noise model's cost.
    let file = dir.path().join("scenario.toml");
    let p = benchlab(&["plan", file.to_str().unwrap(), "--json"]);
    assert!(p.status.success(), "{}", text(&p));
    let plan: Value = serde_json::from_slice(&p.stdout).unwrap();
    assert_eq!(plan["cells"], 18);
    assert_eq!(
        (plan["noise"]["repeats"].as_u64(), plan["noise"]["control_cells"].as_u64()),
        (Some(2), Some(6)),
        "{plan}"
    );
    let images = plan["images"].as_array().unwrap();
    assert_eq!(images.len(), 3);
    assert!(images.iter().all(|i| i["state"] == "cached"), "{plan}");
}

#[test]
fn locking_a_range_keeps_fresh_locks_and_relocks_a_missing_one_as_of_its_release_day() {
    engine_must_answer();
    let root = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(Path::new(ROOT).join("images"), root.path().join("images")).unwrap();
    let family = root.path().join("lockfiles/python-mcp");
    std::fs::create_dir_all(&family).unwrap();
    for v in ["1.29.0", "1.29.1", "1.30.0"] {
        let name = format!("{v}-cpython-bookworm");
        let from = Path::new(ROOT).join("lockfiles/python-mcp").join(&name);
        std::fs::create_dir_all(family.join(&name)).unwrap();
        for f in std::fs::read_dir(&from).unwrap().flatten() {
            std::fs::copy(f.path(), family.join(&name).join(f.file_name())).unwrap();
        }
    }
    let rootarg = root.path().to_str().unwrap();
    let lock = |what: &str| {
        benchlab(&["lock", "python-mcp", what, "--runtime", "cpython-bookworm", "--root", rootarg])
    };
    let first = lock("1.29.0..1.30.0");
    assert!(first.status.success(), "{}", text(&first));
    assert!(
        !String::from_utf8_lossy(&first.stdout).contains("locked "),
        "fresh locks were redone:\n{}",
        text(&first)
    );
    let releases = std::fs::read_to_string(family.join("releases.toml")).unwrap();
    assert!(releases.contains("\"1.29.1\" = \"20"), "{releases}");
    std::fs::remove_dir_all(family.join("1.29.1-cpython-bookworm")).unwrap();
    let second = lock("1.29.0..1.30.0");
    assert!(second.status.success(), "{}", text(&second));
    let out = String::from_utf8_lossy(&second.stdout);
    assert_eq!(out.matches("locked ").count(), 1, "{}", text(&second));
    let dir = family.join("1.29.1-cpython-bookworm");
    let before = std::fs::read_to_string(dir.join("exclude-newer")).unwrap();
    assert!(before.trim().ends_with("T23:59:59Z"), "{before}");
    let lock = std::fs::read_to_string(dir.join("requirements.txt")).unwrap();
    assert!(lock.contains("mcp==1.29.1") && lock.contains("--hash=sha256:"), "{lock}");
}

#[test]
fn parallel_runs_shared_cells_two_at_a_time_on_cpus_that_share_no_core() {
    engine_must_answer();
    let dir = tempfile::tempdir().unwrap();
    let scenario = r#"
name = "e2e-parallel"
suite = "weekly"
[placement]
mode = "shared"
memory = "256MiB"
[[server]]
id = "a"
family = "benchlab-null"
[[server]]
id = "b"
family = "benchlab-null"
[[workload]]
kind = "serial_calls"
tool = "add_numbers"
warmup = 50
calls = 3000
"#;
    let (out, _run, recs) = run(scenario, &["--parallel", "--engine", "docker"], dir.path());
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(recs.len(), 2);
    assert!(recs.iter().all(ok));
    let cpus = benchlab::placement::available_cpus();
    let expect = |mode: benchlab::spec::PlacementMode| {
        let spec = benchlab::spec::PlacementSpec { mode, ..Default::default() };
        benchlab::placement::slots(&spec, &cpus).len()
    };
    let shared_slots = expect(benchlab::spec::PlacementMode::Shared);
    assert!(shared_slots >= 2, "this test needs two CPUs on different cores: {cpus:?}");
    assert!(text(&out).contains(&format!("{shared_slots} cell(s) run at once")), "{}", text(&out));
    let slots: Vec<(u64, String)> = recs
        .iter()
        .map(|r| {
            let p = &r["cell"]["placement"];
            assert_eq!(p["parallel"]["slots"], shared_slots, "{p}");
            assert_eq!(p["server_cpus"], p["driver_cpus"], "shared placement: {p}");
            (p["parallel"]["slot"].as_u64().unwrap(), p["server_cpus"].as_str().unwrap().to_string())
        })
        .collect();
    assert_ne!(slots[0].0, slots[1].0, "both slots used: {slots:?}");
    assert_ne!(slots[0].1, slots[1].1, "different CPUs: {slots:?}");

    // A split cell needs two cores: on a two-CPU machine one at a time, and it says so.
    let dir = tempfile::tempdir().unwrap();
    let split =
        scenario.replace("mode = \"shared\"", "mode = \"split\"").replace("calls = 3000", "calls = 200");
    let (out, _run, recs) = run(&split, &["--parallel", "--engine", "docker"], dir.path());
    assert!(out.status.success(), "{}", text(&out));
    let split_slots = expect(benchlab::spec::PlacementMode::Split).max(1);
    assert!(text(&out).contains(&format!("{split_slots} cell(s) run at once")), "{}", text(&out));
    if split_slots == 1 {
        assert!(recs.iter().all(|r| r["cell"]["placement"].get("parallel").is_none()));
    }
}

#[test]
fn one_scenario_runs_the_same_server_under_both_engines() {
    engine_must_answer();
    let dir = tempfile::tempdir().unwrap();
    let scenario = r#"
name = "e2e-engines"
suite = "weekly"
[[server]]
id = "null-docker"
family = "benchlab-null"
engine = "docker"
[[server]]
id = "null-native"
family = "benchlab-null"
engine = "native"
[[workload]]
kind = "serial_calls"
tool = "add_numbers"
warmup = 50
calls = 500
"#;
    let (out, _run, recs) = run(scenario, &[], dir.path());
    assert!(out.status.success(), "{}", text(&out));
    // The two cells run in a random order: find each by its engine.
    let mut kinds: Vec<&str> =
        recs.iter().map(|r| r["environment"]["engine"]["kind"].as_str().unwrap()).collect();
    kinds.sort_unstable();
    assert_eq!(kinds, ["docker", "native"]);
    assert!(recs.iter().all(ok));
    let native = recs.iter().find(|r| r["environment"]["engine"]["kind"] == "native").unwrap();
    assert!(native["environment"]["engine"]["api_version"].as_str().unwrap().starts_with("cgroup v"));
}

#[test]
fn the_native_engine_runs_the_quickstart_and_its_run_audits_clean() {
    let dir = tempfile::tempdir().unwrap();
    let (out, run_dir, recs) = run("scenarios/quickstart.toml", &["--engine", "native"], dir.path());
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(recs.len(), 4);
    assert!(recs.iter().all(ok), "{}", text(&out));
    assert!(recs.iter().all(|r| r["environment"]["engine"]["kind"] == "native"));
    let mcp = recs.iter().find(|r| r["cell"]["id"] == "mcp-2.3.0/serial_calls").unwrap();
    assert!(mcp["environment"]["image"]["reference"].as_str().unwrap().starts_with("native:"));
    assert!(mcp["metrics"]["calls"]["summary"]["p50_ms"].as_f64().unwrap() > 0.0);
    let audit = benchlab(&["audit", run_dir.to_str().unwrap()]);
    assert!(audit.status.success(), "{}", text(&audit));
}

#[test]
fn the_native_engine_runs_seed_001_with_its_runtime_deviation_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let (out, _run, recs) = run(
        "scenarios/seed-001-python-servers.toml",
        // The first-import server needs a fresh image per cell: the native engine refuses it.
        &[
            "--engine",
            "native",
            "--only",
            "fastmcp-4.1.3/*",
            "--only",
            "fastmcp-4.1.3-defaults/*",
            "--only",
            "mcp-2.3.0*",
        ],
        dir.path(),
    );
    assert!(out.status.success(), "{}", text(&out));
    // 4 servers × 3 workloads, each three times (the scenario's `repeats = 3`).
    assert_eq!(recs.len(), 36);
    // Every cell did what the scenario expects (the 1.x import on 2.3.0 fails, as it says).
    let failed: Vec<&str> =
        recs.iter().filter(|r| !ok(r)).map(|r| r["cell"]["id"].as_str().unwrap()).collect();
    assert!(failed.iter().all(|id| id.starts_with("mcp-2.3.0-with-1.x-import/")), "{failed:?}");
    let devs = recs[0]["environment"]["deviations"].to_string();
    assert!(devs.contains("cpython-bookworm lock"), "{devs}");
}
