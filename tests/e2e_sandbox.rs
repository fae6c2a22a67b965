//! The sandbox end to end on the real Docker engine. A hostile server (tests/fixtures/sandbox/
//! hostile.sh) tries to reach the network, write outside its scratch space, see the host's files,
//! gain privileges and reach the lab around it (the shim's memory and descriptors, the control
//! socket and logs in /lab); it serves MCP only when every attempt failed. Through the lab's own
//! path (`benchlab run` on a throwaway recipe) its cell must pass; run by hand with the engine's
//! defaults instead of the sandbox, the same script must escape and fail, so the test can fail.
//! Servers that hide from their own figures (tests/fixtures/hostile/: a double-forked child that
//! holds memory, a survivor left for later cold starts) must end flagged in their records, with
//! the measured truth beside the tree's figure, and prevented. These tests fail (never skip) when
//! no engine answers: scripts/test.sh starts one.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use benchlab::backend::containers::cell::shim_command;
use benchlab::backend::containers::docker::DockerEngine;
use benchlab::backend::containers::{ContainerSpec, Engine, Mount, Network, OutputLine, LABEL_RUN};
use benchlab::spec::Sandbox;
use common::engine_must_answer;
use serde_json::{json, Value};

const BIN: &str = env!("CARGO_BIN_EXE_benchlab");
const ROOT: &str = env!("CARGO_MANIFEST_DIR");
const CALLS: u64 = 50;

fn hostile_script() -> PathBuf {
    Path::new(ROOT).join("tests/fixtures/sandbox/hostile.sh")
}

/// Removes every container and volume of a test's label, and the throwaway image, even when the
/// test panics.
struct Cleanup {
    label: String,
    image_repo: Option<&'static str>,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        let filter = format!("label={LABEL_RUN}={}", self.label);
        let list = |args: &[&str]| -> Vec<String> {
            let out = Command::new("docker").args(args).output().expect("docker runs");
            String::from_utf8_lossy(&out.stdout).split_whitespace().map(String::from).collect()
        };
        for id in list(&["ps", "-aq", "--filter", &filter]) {
            let _ = Command::new("docker").args(["rm", "-f", "-v", &id]).output();
        }
        for v in list(&["volume", "ls", "-q", "--filter", &filter]) {
            let _ = Command::new("docker").args(["volume", "rm", "-f", &v]).output();
        }
        if let Some(repo) = self.image_repo {
            for img in list(&["images", "-q", repo]) {
                let _ = Command::new("docker").args(["rmi", "-f", &img]).output();
            }
        }
    }
}

/// A host file no container should see.
fn host_marker(dir: &Path) -> PathBuf {
    let marker = dir.join("host-marker");
    std::fs::write(&marker, "this file lives on the host only\n").unwrap();
    marker
}

/// A checkout with one recipe, `hostile`: the hostile script as its `weekly` server.
fn throwaway_checkout(root: &Path) {
    let about = "A server that tries to leave its sandbox (tests/e2e_sandbox.rs)";
    common::script_checkout(root, "hostile", about, &hostile_script());
}

#[test]
fn a_hostile_server_is_contained_on_the_lab_path() {
    engine_must_answer();
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("checkout");
    throwaway_checkout(&root);
    let marker = host_marker(tmp.path());
    let scenario = root.join("sandbox.toml");
    std::fs::write(
        &scenario,
        format!(
            r#"name = "sandbox"
suite = "weekly"

[placement]
mode = "split"
memory = "256MiB"

[[server]]
id = "hostile"
family = "hostile"
version = "1"
env = {{ HOST_MARKER = "{}" }}

[[workload]]
kind = "serial_calls"
tool = "add_numbers"
warmup = 0
calls = {CALLS}
"#,
            marker.display()
        ),
    )
    .unwrap();
    let run_id = format!("sandbox-{}", std::process::id());
    let _cleanup = Cleanup { label: run_id.clone(), image_repo: Some("benchlab/hostile") };
    let results = tmp.path().join("results");
    let out = Command::new(BIN)
        .arg("run")
        .arg(&scenario)
        .arg("--root")
        .arg(&root)
        .args(["--run-id", &run_id, "--results"])
        .arg(&results)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let text = std::fs::read_to_string(results.join("sandbox").join(&run_id).join("records.jsonl"))
        .unwrap_or_else(|e| panic!("no records ({e}); stdout:\n{stdout}\nstderr:\n{stderr}"));
    let records: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(records.len(), 1);
    let r = &records[0];
    // The script serves only when every attempt failed: an ok cell is the proof.
    assert_eq!(r["status"], "ok", "the hostile server got out of the lab's sandbox: {}", r["failure"]);
    assert_eq!(r["metrics"]["calls"]["summary"]["count"], CALLS);
    assert_eq!(out.status.code(), Some(0), "stdout:\n{stdout}\nstderr:\n{stderr}");
}

/// What one hand-made cell gave: the driver's outcome and the script's report.
struct Cell {
    outcome: Value,
    report: String,
}

/// Runs the real shim and driver in two containers made through the lab's engine code, with
/// `sandbox` on both, and the hostile script (bind-mounted) as the server.
async fn hostile_cell(sandbox: Sandbox, label: &str, marker: &Path) -> Cell {
    let engine = DockerEngine::connect().await.unwrap();
    let mut labels = BTreeMap::new();
    labels.insert(LABEL_RUN.to_string(), label.to_string());
    // A host folder as /lab (mode 1777 like the lab's volume) instead of the lab's tmpfs volume,
    // whose content goes when the last container using it stops: the report must outlive them.
    let lab = tempfile::tempdir().unwrap();
    std::fs::set_permissions(lab.path(), std::os::unix::fs::PermissionsExt::from_mode(0o1777)).unwrap();
    let mounts = vec![
        Mount::Bind { source: BIN.into(), target: "/benchlab/benchlab".into(), read_only: true },
        Mount::Bind { source: hostile_script(), target: "/srv/hostile.sh".into(), read_only: true },
        Mount::Bind { source: lab.path().into(), target: "/lab".into(), read_only: false },
    ];
    // The lab's own split: the shim's container and the driver's get their users from the
    // sandbox, as the lab's cells do.
    let spec = |role: &str, cmd: Vec<String>, network: Network| ContainerSpec {
        name: format!("{label}-{role}"),
        image: "benchlab/base:bookworm".into(),
        cmd,
        env: sandbox.environment(),
        labels: labels.clone(),
        cpuset: String::new(),
        memory: Some(256 << 20),
        nano_cpus: None,
        network,
        mounts: mounts.clone(),
        sandbox: if role == "server" { sandbox.for_shim() } else { sandbox.for_driver() },
    };
    let server = engine
        .create_container(&spec("server", shim_command(&sandbox), Network::Loopback { hosts: Vec::new() }))
        .await
        .unwrap();
    engine.start(&server).await.unwrap();
    let driver_spec = json!({
        "lab_dir": "/lab",
        "server": {
            "argv": ["/bin/bash", "/srv/hostile.sh"],
            "env": [["BENCHLAB_SUITE", "weekly"], ["HOST_MARKER", marker]],
            "cwd": null
        },
        "suite": "weekly",
        "workload": {"kind": "serial_calls", "tool": "add_numbers", "warmup": 0, "calls": CALLS},
        "timeouts": {"startup_ms": 15000, "call_ms": 5000, "stop_grace_ms": 1000, "term_ms": 1000},
    });
    let driver = engine
        .create_container(&spec(
            "driver",
            vec!["/benchlab/benchlab".into(), "driver".into(), "--spec".into(), driver_spec.to_string()],
            Network::Container(server.clone()),
        ))
        .await
        .unwrap();
    engine.start(&driver).await.unwrap();
    let mut lines = Vec::new();
    let mut on_line = |line| {
        let (OutputLine::Stdout(text) | OutputLine::Stderr(text)) = line;
        lines.push(text)
    };
    let follow = engine.follow(&driver, &mut on_line);
    tokio::time::timeout(Duration::from_secs(120), follow).await.expect("the cell ends").unwrap();
    let _ = tokio::time::timeout(Duration::from_secs(10), engine.wait(&server)).await;
    for id in [&driver, &server] {
        engine.remove_container(id).await.unwrap();
    }
    // The server's stderr, as the shim copied it into the first spawn's log.
    let report = std::fs::read_to_string(lab.path().join("s0.stderr.log"));
    let outcome = lines
        .iter()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|e| e["type"] == "outcome")
        .unwrap_or_else(|| panic!("no outcome from the driver:\n{}", lines.join("\n")))["outcome"]
        .clone();
    let report = report.expect("the shim wrote the script's stderr to /lab/s0.stderr.log");
    Cell { outcome, report }
}

/// Every attempt the script makes, by the name it reports.
const ATTEMPTS: &[&str] = &[
    "network",
    "write /etc",
    "write /usr",
    "write /",
    "write the server's own code (/srv)",
    "see the host's marker file",
    "see the host's /root/.cargo",
    "see the engine socket",
    "run as root",
    "hold capabilities",
    "gain privileges through exec (no_new_privs unset)",
    "make a setuid-root shell",
    "mount a file system",
    "write /proc/sys",
    "run without a pids limit",
    "write the shim's memory (/proc/1/mem)",
    "read the shim's memory (/proc/1/mem)",
    "list the shim's descriptors (/proc/1/fd)",
    "read the shim's environment",
    "run without the lab's seccomp filter (one beyond the engine's)",
    "write the shared /lab volume",
    "list /lab",
    "append to a spawn's stderr log in /lab",
    "rename the control socket",
    "unlink the control socket",
    "reach the control socket",
];

#[test]
fn the_sandbox_is_what_contains_the_hostile_server() {
    engine_must_answer();
    let tmp = tempfile::tempdir().unwrap();
    let marker = host_marker(tmp.path());
    let label = format!("sandbox-hand-{}", std::process::id());
    let _cleanup = Cleanup { label: label.clone(), image_repo: None };
    let rt = tokio::runtime::Runtime::new().unwrap();

    // Hardened: every attempt fails, what a server needs still works, and MCP is served.
    let hard = rt.block_on(hostile_cell(Sandbox::hardened(), &format!("{label}-hard"), &marker));
    assert_eq!(hard.outcome["failure"], Value::Null, "{}\nreport:\n{}", hard.outcome, hard.report);
    assert_eq!(hard.outcome["calls_ok"], CALLS);
    assert!(hard.report.contains("running as uid=65534(nobody)"), "{}", hard.report);
    for needed in ["tools present", "write scratch"] {
        assert!(hard.report.contains(&format!("allowed: {needed}")), "{needed}:\n{}", hard.report);
    }
    for attempt in ATTEMPTS {
        assert!(hard.report.contains(&format!("contained: {attempt}")), "{attempt}:\n{}", hard.report);
    }
    assert!(!hard.report.contains("ESCAPED") && !hard.report.contains("BROKEN"), "{}", hard.report);

    // The engine's defaults, same image, mounts and network: the script gets out and refuses to
    // serve, so a sandbox that stopped working would fail the lab-path test.
    let open = rt.block_on(hostile_cell(Sandbox::none(), &format!("{label}-open"), &marker));
    assert_eq!(open.outcome["failure"]["reason"], "crash", "{}\nreport:\n{}", open.outcome, open.report);
    for escape in [
        "write /etc",
        "write /usr",
        "write /",
        "run as root",
        "hold capabilities",
        "make a setuid-root shell",
        "run without a pids limit",
        "list the shim's descriptors (/proc/1/fd)",
        "write the shared /lab volume",
        "list /lab",
        "append to a spawn's stderr log in /lab",
        "rename the control socket",
        "reach the control socket",
    ] {
        assert!(open.report.contains(&format!("ESCAPED: {escape}")), "{escape}:\n{}", open.report);
    }
    // Network and host files stay out of reach without the sandbox too: those come from the
    // network mode and the mounts, which both runs share; so does the shim's memory, which the
    // shim itself guards (non-dumpable, and the seccomp filter it gives every server, which sets
    // no_new_privs with it). A root server still lists the root shim's descriptors.
    for held in [
        "network",
        "see the host's marker file",
        "see the engine socket",
        "write the shim's memory (/proc/1/mem)",
        "read the shim's memory (/proc/1/mem)",
        "run without the lab's seccomp filter (one beyond the engine's)",
        "gain privileges through exec (no_new_privs unset)",
    ] {
        assert!(open.report.contains(&format!("contained: {held}")), "{held}:\n{}", open.report);
    }
}

/// Runs `scenario` (its text) through `benchlab run` on the checkout at `root`; returns the
/// records, in the order written.
fn run_on_lab_path(root: &Path, results: &Path, name: &str, scenario: &str, run_id: &str) -> Vec<Value> {
    let path = root.join(format!("{name}.toml"));
    std::fs::write(&path, scenario).unwrap();
    let out = Command::new(BIN)
        .arg("run")
        .arg(&path)
        .arg("--root")
        .arg(root)
        .args(["--run-id", run_id, "--results"])
        .arg(results)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let text = std::fs::read_to_string(results.join(name).join(run_id).join("records.jsonl"))
        .unwrap_or_else(|e| panic!("no records ({e}); stdout:\n{stdout}\nstderr:\n{stderr}"));
    text.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

/// The record of `server`'s `kind` cell.
fn cell<'a>(records: &'a [Value], server: &str, kind: &str) -> &'a Value {
    records
        .iter()
        .find(|r| r["cell"]["server"]["id"] == server && r["cell"]["workload"]["kind"] == kind)
        .unwrap_or_else(|| panic!("no {server} {kind} record among {}", records.len()))
}

fn bytes(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a byte count: {v}"))
}

/// What the leaker hoards outside its tree: well above the 32 MiB flag, well below the cell's
/// memory limit.
const HOARD: u64 = 150_000_000;
const SPAWNS: u64 = 3;

#[test]
fn servers_that_hide_from_their_figures_end_flagged_and_prevented() {
    engine_must_answer();
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("checkout");
    let fixtures = Path::new(ROOT).join("tests/fixtures/hostile");
    common::script_checkout(
        &root,
        "leaker",
        "A server hiding memory in a detached child",
        &fixtures.join("leaker.sh"),
    );
    common::script_checkout(
        &root,
        "survivor",
        "A server leaving a warm survivor",
        &fixtures.join("survivor.sh"),
    );
    let run_id = format!("hostile-{}", std::process::id());
    let _cleanup = Cleanup { label: run_id.clone(), image_repo: Some("benchlab/leaker") };
    let _cleanup_survivor = Cleanup { label: run_id.clone(), image_repo: Some("benchlab/survivor") };
    let scenario = format!(
        r#"name = "hostile"
suite = "weekly"

[placement]
mode = "split"
memory = "512MiB"

[[server]]
id = "leaker"
family = "leaker"
version = "1"
env = {{ HOARD_BYTES = "{HOARD}" }}

[[server]]
id = "survivor"
family = "survivor"
version = "1"

[[workload]]
kind = "serial_calls"
tool = "add_numbers"
warmup = 0
calls = {CALLS}

[[workload]]
kind = "cold_start"
spawns = {SPAWNS}
"#
    );
    let records = run_on_lab_path(&root, &tmp.path().join("results"), "hostile", &scenario, &run_id);
    assert_eq!(records.len(), 4, "{records:#?}");
    for r in &records {
        assert_eq!(r["status"], "ok", "{}: {}", r["cell"]["id"], r["failure"]);
    }

    // The double-forked hoard: the tree's figure stays small, the cgroup's holds it, the record
    // is flagged, and the child was found and killed at the stop.
    let leak = cell(&records, "leaker", "serial_calls");
    let memory = &leak["metrics"]["memory"];
    let tree_end = bytes(&memory["end"]["rss_bytes"]);
    let cgroup_end = bytes(&memory["cgroup_end"]["usage_bytes"]);
    let outside = &memory["outside_tree"];
    assert!(tree_end < HOARD / 2, "the tree's figure holds the hoard after all: {memory}");
    assert!(cgroup_end >= HOARD, "the cgroup missed the hoard: {memory}");
    assert!(bytes(&outside["bytes"]) >= HOARD * 9 / 10, "not flagged as outside the tree: {memory}");
    let left = &leak["observed"]["left_behind"];
    assert_eq!(left["spawns"], 1, "{}", leak["observed"]);
    assert!(bytes(&left["processes"]) >= 1, "{}", leak["observed"]);
    assert!(bytes(&left["rss_bytes"]) >= HOARD * 9 / 10, "the leftover's RSS: {}", leak["observed"]);
    eprintln!(
        "leaker: tree RSS at the end {} MiB, cgroup usage {} MiB, outside the tree {} MiB, left behind {}",
        tree_end >> 20,
        cgroup_end >> 20,
        bytes(&outside["bytes"]) >> 20,
        left
    );
    // Every cold start left one, and each was gone before the next spawn: its hoard was not
    // there to be counted twice.
    let cold = cell(&records, "leaker", "cold_start");
    assert_eq!(cold["observed"]["left_behind"]["spawns"], SPAWNS, "{}", cold["observed"]);
    let peak_after_init = bytes(&cold["metrics"]["memory"]["cgroup_after_initialize"]["usage_bytes"]);
    let usage_end = bytes(&cold["metrics"]["memory"]["cgroup_end"]["usage_bytes"]);
    assert!(usage_end < 2 * HOARD, "earlier spawns' hoards were still held: {}", cold["metrics"]["memory"]);
    assert!(peak_after_init >= HOARD, "{}", cold["metrics"]["memory"]);

    // The warm survivor: every spawn left one, none found its predecessor (the script would have
    // crashed), so every cold start was cold.
    let warm = cell(&records, "survivor", "cold_start");
    assert_eq!(warm["observed"]["left_behind"]["spawns"], SPAWNS, "{}", warm["observed"]);
    assert_eq!(warm["metrics"]["cold_start"]["samples_ms"].as_array().map(Vec::len), Some(SPAWNS as usize));
    let serial = cell(&records, "survivor", "serial_calls");
    // The survivor is a stopped shell (and the shell that started it, when it outlives its exec).
    assert_eq!(serial["observed"]["left_behind"]["spawns"], 1, "{}", serial["observed"]);
    assert!(bytes(&serial["observed"]["left_behind"]["processes"]) >= 1, "{}", serial["observed"]);
    // A server that keeps to its tree is not flagged.
    assert_eq!(warm["metrics"]["memory"]["outside_tree"], Value::Null, "{}", warm["metrics"]["memory"]);
    assert_eq!(
        records.iter().filter(|r| r["environment"]["sandbox"]["lab_user"] == "65533:65533").count(),
        4
    );
}
