//! End to end on a real Slurm cluster (the lab's own two nodes on this host, brought up by
//! `scripts/slurm-up.sh`, which `scripts/test.sh` runs) and the real Docker engine: the quickstart
//! through Slurm with images pulled by digest from the run's registry; an 8-cell shared sweep on
//! both nodes at once on disjoint CPUs; a node taken down mid-run; Ctrl-C mid-run and `--resume`;
//! bad cluster input refused before anything runs. Fails (never skips) when the cluster or the
//! engine does not answer. The tests take turns: they share the cluster's two nodes.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_benchlab");
const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// One test at a time on the cluster.
static CLUSTER: Mutex<()> = Mutex::new(());

/// A run id no earlier test run used (job folders are named by run id).
fn unique(prefix: &str) -> String {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
    format!("{prefix}-{nanos:x}")
}

fn slurm_conf() -> PathBuf {
    let dir = std::env::var_os("BENCHLAB_SLURM_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| std::env::temp_dir().join("benchlab-work/slurm"));
    dir.join("slurm.conf")
}

fn slurm(program: &str, args: &[&str]) -> Output {
    Command::new(program).args(args).env("SLURM_CONF", slurm_conf()).output().unwrap()
}

/// The cluster answers with both nodes up, or the test fails saying how to bring it up.
fn cluster_must_answer() -> std::sync::MutexGuard<'static, ()> {
    common::engine_must_answer();
    let guard = CLUSTER.lock().unwrap_or_else(|e| e.into_inner());
    let conf = slurm_conf();
    assert!(
        conf.exists(),
        "no lab cluster at {}: run scripts/slurm-up.sh (scripts/test.sh does)",
        conf.display()
    );
    // A node an earlier test left down comes back first.
    for n in ["n1", "n2"] {
        let _ = slurm("scontrol", &["update", &format!("nodename={n}"), "state=resume"]);
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let out = slurm("sinfo", &["-h", "-N", "-o", "%N %t"]);
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        let up = text
            .lines()
            .filter(|l| l.ends_with(" idle") || l.ends_with(" mix") || l.ends_with(" alloc"))
            .count();
        if out.status.success() && up == 2 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the lab's Slurm cluster does not answer with two nodes up (run scripts/slurm-up.sh): {}{}",
            text,
            String::from_utf8_lossy(&out.stderr)
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    guard
}

fn run_args(scenario: &str, results: &Path, run_id: &str) -> Vec<String> {
    let mut a: Vec<String> =
        ["run", scenario, "--backend", "slurm", "--run-id", run_id, "--results"].map(String::from).to_vec();
    a.push(results.display().to_string());
    a.push("--slurm-conf".into());
    a.push(slurm_conf().display().to_string());
    a
}

/// `benchlab run --resume DIR --backend slurm`.
fn resume(dir: &Path) -> Output {
    Command::new(BIN)
        .current_dir(ROOT)
        .args(["run", "--resume"])
        .arg(dir)
        .args(["--backend", "slurm", "--slurm-conf"])
        .arg(slurm_conf())
        .output()
        .unwrap()
}

fn records(dir: &Path) -> Vec<Value> {
    std::fs::read_to_string(dir.join("records.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn audit_is_clean(dir: &Path) {
    let out = Command::new(BIN).arg("audit").arg(dir).output().unwrap();
    assert!(
        out.status.success(),
        "audit: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// No container or volume of the run is left, and no job of it is queued or running.
fn nothing_left(run_id: &str) {
    for what in [&["ps", "-aq"][..], &["volume", "ls", "-q"][..]] {
        let left = Command::new("docker")
            .args(what)
            .args(["--filter", &format!("label=org.benchlab.run={run_id}")])
            .output()
            .unwrap();
        assert!(String::from_utf8_lossy(&left.stdout).trim().is_empty(), "left behind: {what:?}");
    }
    let q = slurm("squeue", &["-h", "-o", "%i %T %k"]);
    let q = String::from_utf8_lossy(&q.stdout);
    assert!(!q.lines().any(|l| l.contains(run_id)), "jobs of the run still queued or running:\n{q}");
}

fn dispatch(r: &Value) -> &Value {
    r.get("dispatch").unwrap_or_else(|| panic!("a record without dispatch: {r}"))
}

/// The node each CPU belongs to in the lab's cluster: n1 has CPU 0, n2 CPU 1.
fn check_nodes_and_cpus(recs: &[Value]) -> BTreeSet<String> {
    let mut nodes = BTreeSet::new();
    for r in recs {
        let d = dispatch(r);
        let node = d["node"].as_str().unwrap().to_string();
        let cpus = d["allocated_cpus"].as_str().unwrap();
        let want = if node == "n1" { "0" } else { "1" };
        assert_eq!(cpus, want, "{node} ran on CPU {cpus}: {d}");
        // The cell ran on exactly what Slurm allocated (shared: server and driver there).
        let p = &r["environment"]["placement"];
        assert_eq!((p["server_cpus"].as_str().unwrap(), p["driver_cpus"].as_str().unwrap()), (cpus, cpus));
        nodes.insert(node);
    }
    nodes
}

#[test]
fn quickstart_runs_on_both_nodes_from_images_pulled_by_digest() {
    let _cluster = cluster_must_answer();
    let slurm_quickstart = unique("slurm-quickstart");
    let results = tempfile::tempdir().unwrap();
    let out = Command::new(BIN)
        .current_dir(ROOT)
        .args(run_args("scenarios/quickstart-shared-core.toml", results.path(), &slurm_quickstart))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(0), "{err}{}", String::from_utf8_lossy(&out.stdout));
    let dir = results.path().join("quickstart-shared-core").join(&slurm_quickstart);
    let recs = records(&dir);
    assert_eq!(recs.len(), 4);
    assert!(recs.iter().all(|r| r["status"] == "ok"), "{recs:#?}");
    assert_eq!(check_nodes_and_cpus(&recs), BTreeSet::from(["n1".to_string(), "n2".to_string()]));
    // One image, one identity, wherever it ran: the same id and registry digest on both nodes.
    let mut by_image: BTreeMap<String, BTreeSet<(String, String)>> = BTreeMap::new();
    for r in &recs {
        let img = &r["environment"]["image"];
        let digest = dispatch(r)["image_digest"].as_str().expect("a digest").to_string();
        assert!(digest.starts_with("sha256:"), "{digest}");
        by_image
            .entry(img["reference"].as_str().unwrap().into())
            .or_default()
            .insert((img["image_id"].as_str().unwrap().into(), digest));
    }
    assert_eq!(by_image.len(), 2, "{by_image:?}");
    assert!(by_image.values().all(|ids| ids.len() == 1), "{by_image:?}");
    // The nodes pulled each image by that digest from the run's registry (its access log): a
    // GET of the manifest, or a HEAD when the node's engine holds its layers already and only
    // checks that the registry's manifest has that digest.
    let pushed = err.lines().find(|l| l.starts_with("pushed image 127.0.0.1:")).expect(&err);
    let port = pushed["pushed image 127.0.0.1:".len()..].split('/').next().unwrap();
    let log = std::env::temp_dir().join(format!("benchlab-work/registry/registry-{port}.log"));
    let log = std::fs::read_to_string(&log).unwrap_or_else(|e| panic!("{}: {e}", log.display()));
    for ids in by_image.values() {
        let (_, digest) = ids.iter().next().unwrap();
        assert!(
            log.lines().any(|l| (l.contains("\"GET /v2/") || l.contains("\"HEAD /v2/"))
                && l.contains(&format!("/manifests/{digest} HTTP"))),
            "no pull of {digest} in the registry's log"
        );
    }
    // Node facts: the node's engine, not the cluster's, and the job that ran each cell.
    for r in &recs {
        assert_eq!(r["environment"]["engine"]["kind"], "docker");
        assert!(dispatch(r)["job_id"].as_str().unwrap().contains('_'), "an array task id");
        assert_eq!(dispatch(r)["attempts"], 1);
    }
    audit_is_clean(&dir);
    nothing_left(&slurm_quickstart);
    // The table splits by node on request.
    let rep = Command::new(BIN).arg("report").arg(&dir).args(["--by", "node"]).output().unwrap();
    let table = String::from_utf8_lossy(&rep.stdout);
    assert!(rep.status.success() && table.contains("n1") && table.contains("n2"), "{table}");
}

#[test]
fn the_nodes_run_cells_natively_when_asked() {
    let _cluster = cluster_must_answer();
    let run_id = unique("slurm-native");
    let results = tempfile::tempdir().unwrap();
    let out = Command::new(BIN)
        .current_dir(ROOT)
        .args(run_args("scenarios/quickstart-shared-core.toml", results.path(), &run_id))
        .args(["--engine", "native"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("cells run on the nodes' native engine"), "{err}");
    let dir = results.path().join("quickstart-shared-core").join(&run_id);
    let recs = records(&dir);
    assert_eq!(recs.len(), 4);
    assert_eq!(check_nodes_and_cpus(&recs), BTreeSet::from(["n1".to_string(), "n2".to_string()]));
    for r in &recs {
        assert_eq!(r["environment"]["engine"]["kind"], "native", "{}", r["environment"]["engine"]);
        assert!(dispatch(r).get("image_digest").is_none(), "nothing is pulled for a native cell");
    }
    audit_is_clean(&dir);
    nothing_left(&run_id);
}

/// Starts a Slurm run of the 8-cell sweep with its stderr read line by line.
fn start_sweep(
    results: &Path,
    run_id: &str,
    extra: &[&str],
) -> (std::process::Child, std::io::Lines<BufReader<std::process::ChildStderr>>) {
    let mut child = Command::new(BIN)
        .current_dir(ROOT)
        .args(run_args("scenarios/cluster-sweep.toml", results, run_id))
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let lines = BufReader::new(child.stderr.take().unwrap()).lines();
    (child, lines)
}

/// Reads lines until one contains `what`; all lines read so far.
fn until(
    lines: &mut impl Iterator<Item = std::io::Result<String>>,
    what: &str,
    seen: &mut Vec<String>,
) -> String {
    let started = Instant::now();
    loop {
        let line = lines
            .next()
            .unwrap_or_else(|| panic!("the run ended before {what:?}:\n{}", seen.join("\n")))
            .unwrap();
        seen.push(line.clone());
        if line.contains(what) {
            return line;
        }
        assert!(started.elapsed() < Duration::from_secs(900), "{}", seen.join("\n"));
    }
}

/// Each cell's node and when its worker ran (start, end), Unix ms, from the run's job folder.
fn job_spans(run_id: &str) -> Vec<(String, u64, u64)> {
    let cells = std::env::temp_dir().join(format!("benchlab-work/slurm-jobs/{run_id}/cells"));
    let mut out = Vec::new();
    for e in std::fs::read_dir(&cells).unwrap().flatten() {
        let attempt: Value =
            serde_json::from_str(&std::fs::read_to_string(e.path().join("attempt-1.json")).unwrap()).unwrap();
        let ended = std::fs::metadata(e.path().join("outcome.json")).unwrap().modified().unwrap();
        let ended = ended.duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64;
        out.push((
            attempt["node"].as_str().unwrap().to_string(),
            attempt["started_unix_ms"].as_u64().unwrap(),
            ended,
        ));
    }
    out
}

#[test]
fn a_shared_sweep_of_eight_cells_runs_on_both_nodes_at_once() {
    let _cluster = cluster_must_answer();
    let slurm_sweep = unique("slurm-sweep");
    let results = tempfile::tempdir().unwrap();
    let (mut child, lines) = start_sweep(results.path(), &slurm_sweep, &[]);
    let mut seen: Vec<String> = lines.map_while(Result::ok).collect();
    seen.retain(|l| !l.is_empty());
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0), "{}", seen.join("\n"));
    assert!(
        !seen.iter().any(|l| l.contains("REQUEUED")),
        "nothing failed, nothing was requeued:\n{}",
        seen.join("\n")
    );
    let dir = results.path().join("cluster-sweep").join(&slurm_sweep);
    let recs = records(&dir);
    assert_eq!(recs.len(), 8);
    assert!(recs.iter().all(|r| r["status"] == "ok"));
    assert_eq!(check_nodes_and_cpus(&recs), BTreeSet::from(["n1".to_string(), "n2".to_string()]));
    // Submitted as one job array.
    let arrays: BTreeSet<&str> = recs.iter().map(|r| dispatch(r)["array_job_id"].as_str().unwrap()).collect();
    assert_eq!(arrays.len(), 1, "{arrays:?}");
    // At once: a cell on n1 and one on n2 ran at the same time (each job folder holds when its
    // worker started and, by the outcome's time, when it ended).
    let spans = job_spans(&slurm_sweep);
    assert_eq!(spans.len(), 8, "{spans:?}");
    let overlap = spans.iter().any(|(n, a, b)| spans.iter().any(|(m, c, d)| n != m && a < d && c < b));
    assert!(overlap, "no two cells ran on both nodes at the same time: {spans:?}");
    audit_is_clean(&dir);
    nothing_left(&slurm_sweep);
}

#[test]
fn a_node_taken_down_mid_run_requeues_its_cell_and_the_rest_complete() {
    let _cluster = cluster_must_answer();
    let slurm_node_down = unique("slurm-node-down");
    let results = tempfile::tempdir().unwrap();
    let (mut child, mut lines) = start_sweep(results.path(), &slurm_node_down, &[]);
    let mut seen = Vec::new();
    // Wait for a long cell (mcp's cold start) to be running, then take its node down. The run's
    // order is random and Slurm places each cell, so either node may be the one.
    let node = loop {
        let line = until(&mut lines, "running on n", &mut seen);
        if line.contains("mcp-2.3.0/cold_start") {
            let at = line.find("running on ").unwrap() + "running on ".len();
            break line[at..].split_whitespace().next().unwrap().to_string();
        }
    };
    std::thread::sleep(Duration::from_secs(2));
    let down = slurm(
        "scontrol",
        &["update", &format!("nodename={node}"), "state=down", "reason=benchlab-test-node-down"],
    );
    assert!(down.status.success(), "{}", String::from_utf8_lossy(&down.stderr));
    seen.extend(lines.map_while(Result::ok));
    let status = child.wait().unwrap();
    let _ = slurm("scontrol", &["update", &format!("nodename={node}"), "state=resume"]);
    let text = seen.join("\n");
    assert!(text.contains("REQUEUED"), "{text}");
    let dir = results.path().join("cluster-sweep").join(&slurm_node_down);
    let recs = records(&dir);
    assert_eq!(recs.len(), 8, "every cell has its record:\n{text}");
    // The cell that was on the downed node ran again (attempt 2, the requeue named) or failed
    // saying the node failed; every other cell is ok.
    let hit: Vec<&Value> = recs.iter().filter(|r| dispatch(r)["attempts"].as_u64() > Some(1)).collect();
    assert_eq!(hit.len(), 1, "exactly the cell that was on {node} was requeued:\n{text}");
    for r in &hit {
        let d = dispatch(r);
        assert!(d["requeued"].as_str().is_some_and(|s| s.contains(node.as_str())), "{d}");
        if r["status"] == "failed" {
            assert_eq!(r["failure"]["reason"], "node_fail", "{r}");
        } else {
            // The lab's cluster returns a node to service at once (ReturnToService=2), so the
            // second attempt may land on either node; it is a new job run, from the start.
            assert_eq!(d["attempts"], 2, "{d}");
        }
    }
    let failed: Vec<&Value> = recs.iter().filter(|r| r["status"] != "ok").collect();
    assert!(failed.iter().all(|r| r["failure"]["reason"] == "node_fail"), "{failed:#?}");
    assert_eq!(status.code(), Some(if failed.is_empty() { 0 } else { 1 }), "{text}");
    audit_is_clean(&dir);
    nothing_left(&slurm_node_down);
}

#[test]
fn ctrl_c_cancels_the_jobs_and_resume_runs_only_the_missing_cells() {
    let _cluster = cluster_must_answer();
    let slurm_interrupted = unique("slurm-interrupted");
    let results = tempfile::tempdir().unwrap();
    let (mut child, mut lines) = start_sweep(results.path(), &slurm_interrupted, &[]);
    let mut seen = Vec::new();
    until(&mut lines, " ok (on n", &mut seen);
    until(&mut lines, "running on", &mut seen);
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), nix::sys::signal::Signal::SIGINT)
        .unwrap();
    seen.extend(lines.map_while(Result::ok));
    let status = child.wait().unwrap();
    let text = seen.join("\n");
    assert_eq!(status.code(), Some(130), "{text}");
    assert!(text.contains("interrupted by SIGINT"), "{text}");
    let dir = results.path().join("cluster-sweep").join(&slurm_interrupted);
    let before = records(&dir).len();
    assert!((1..8).contains(&before), "{before} records:\n{text}");
    audit_is_clean(&dir);
    nothing_left(&slurm_interrupted);
    // `benchlab status` tells which cells are done and which ended with the interruption.
    let st = Command::new(BIN)
        .arg("status")
        .arg(&dir)
        .arg("--json")
        .arg("--slurm-conf")
        .arg(slurm_conf())
        .output()
        .unwrap();
    assert!(st.status.success(), "{}", String::from_utf8_lossy(&st.stderr));
    let st: Value = serde_json::from_slice(&st.stdout).unwrap();
    let states: Vec<&str> =
        st["state"]["cells"].as_array().unwrap().iter().map(|c| c["state"].as_str().unwrap()).collect();
    assert_eq!(states.len(), 8, "{st}");
    // A cell whose outcome came in as the run was stopped is ok here without a record.
    assert!(states.iter().filter(|s| **s == "ok").count() >= before, "{st}");
    assert!(
        states.iter().all(|s| ["ok", "ended"].contains(s)),
        "nothing queued or running after Ctrl-C: {st}"
    );
    assert_eq!(st["records"], before);

    // --resume submits only the cells without an ok record.
    let out = resume(&dir);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let queued = err.lines().filter(|l| l.contains(": queued as job ")).count();
    assert_eq!(queued, 8 - before, "{err}");
    let recs = records(&dir);
    assert_eq!(recs.len(), 8);
    let ids: BTreeSet<(String, u64)> = recs
        .iter()
        .map(|r| {
            (r["cell"]["id"].as_str().unwrap().to_string(), r["cell"]["repeat"]["index"].as_u64().unwrap())
        })
        .collect();
    assert_eq!(ids.len(), 8, "every cell once: {ids:?}");
    audit_is_clean(&dir);
    nothing_left(&slurm_interrupted);
}

#[test]
fn after_a_kill_9_the_next_run_cancels_the_orphaned_jobs_and_resume_finishes() {
    let _cluster = cluster_must_answer();
    let slurm_killed = unique("slurm-killed");
    let results = tempfile::tempdir().unwrap();
    let (mut child, mut lines) = start_sweep(results.path(), &slurm_killed, &[]);
    let mut seen = Vec::new();
    until(&mut lines, "running on", &mut seen);
    child.kill().unwrap(); // SIGKILL: no clean-up at all
    child.wait().unwrap();
    drop(lines);
    let q = String::from_utf8_lossy(&slurm("squeue", &["-h", "-o", "%i %k"]).stdout).to_string();
    assert!(
        q.contains(&format!("benchlab run {slurm_killed} owner ")),
        "the killed run's jobs live on:\n{q}"
    );
    let dir = results.path().join("cluster-sweep").join(&slurm_killed);
    let out = resume(&dir);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("left by benchlab") && err.contains(&format!("(run {slurm_killed})")), "{err}");
    let recs = records(&dir);
    assert_eq!(recs.len(), 8, "{err}");
    audit_is_clean(&dir);
    nothing_left(&slurm_killed);
    // The dead run's registry was stopped too: only registries of live benchlabs are left.
    let reg = std::env::temp_dir().join("benchlab-work/registry");
    let owners: Vec<String> = std::fs::read_dir(&reg)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().to_string())
        .filter(|n| n.ends_with(".owner"))
        .collect();
    for o in owners {
        let text = std::fs::read_to_string(reg.join(&o)).unwrap_or_default();
        let token = text.split_whitespace().nth(1).unwrap_or_default().to_string();
        let pid = token.split('-').next().unwrap_or_default();
        assert!(Path::new(&format!("/proc/{pid}")).exists(), "{o}: a registry of a dead benchlab is left");
    }
}

#[test]
fn bad_cluster_input_is_refused_before_anything_runs() {
    let _cluster = cluster_must_answer();
    let results = tempfile::tempdir().unwrap();
    let run = |extra: &[&str], scenario: &str| {
        Command::new(BIN)
            .current_dir(ROOT)
            .args(run_args(scenario, results.path(), "refused"))
            .args(extra)
            .output()
            .unwrap()
    };
    let out = run(&["--partition", "nosuch"], "scenarios/quickstart-shared-core.toml");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("no partition nosuch") && err.contains("lab"), "{err}");
    // A split cell needs two cores on one node; these nodes have one.
    let out = run(&[], "scenarios/quickstart.toml");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("needs 2 CPUs on one node"), "{err}");
    let out = run(&["--slurm-opt=--nodelist=n9"], "scenarios/quickstart-shared-core.toml");
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
    // No controller: an environment error saying how to start one.
    let out = Command::new(BIN)
        .current_dir(ROOT)
        .args(["run", "scenarios/quickstart-shared-core.toml", "--backend", "slurm", "--results"])
        .arg(results.path())
        .args(["--slurm-conf", "/nonexistent/slurm.conf"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(err.contains("slurm-up.sh"), "{err}");
    assert!(!results.path().join("quickstart-shared-core").exists(), "nothing ran");
    assert!(!results.path().join("quickstart").exists(), "nothing ran");
}

/// The faulty checkout (tests/common) and a scenario of one server that hangs in the middle of a
/// call, with call timeouts far beyond the Slurm time limit the test gives its job.
fn hanging_checkout(root: &Path) -> PathBuf {
    common::faulty_checkout(root);
    let scenario = root.join("hang.toml");
    std::fs::write(
        &scenario,
        "name = \"slurm-hang\"\nsuite = \"weekly\"\n\n[placement]\nmode = \"shared\"\nmemory = \"256MiB\"\n\n\
         [timeouts]\nstartup_ms = 10000\ncall_ms = 600000\n\n[[workload]]\nkind = \"serial_calls\"\n\
         tool = \"add_numbers\"\nwarmup = 0\ncalls = 20\n\n[[server]]\nid = \"hang_mid_call\"\nfamily = \"faulty\"\n\
         version = \"1\"\nenv = { FAULT = \"hang_mid_call\", FAULT_AFTER = \"5\" }\n",
    )
    .unwrap();
    scenario
}

#[test]
fn a_job_past_its_slurm_time_limit_is_a_timeout_record_named_by_slurm() {
    let _cluster = cluster_must_answer();
    let slurm_timeout = unique("slurm-timeout");
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("checkout");
    let scenario = hanging_checkout(&root);
    let results = tmp.path().join("results");
    // `--slurm-opt=--time=1` comes after the lab's own --time, so Slurm stops the job at one
    // minute, long before the cell's own ten-minute call timeout would.
    let started = Instant::now();
    let out = Command::new(BIN)
        .current_dir(ROOT)
        .args(run_args(&scenario.display().to_string(), &results, &slurm_timeout))
        .args(["--root"])
        .arg(&root)
        .arg("--slurm-opt=--time=1")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    for img in ["benchlab/faulty", "*/benchlab/faulty"] {
        let ids = Command::new("docker")
            .args(["images", "-q", "--filter", &format!("reference={img}")])
            .output()
            .unwrap();
        for id in String::from_utf8_lossy(&ids.stdout).split_whitespace() {
            let _ = Command::new("docker").args(["rmi", "-f", id]).output();
        }
    }
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(started.elapsed() < Duration::from_secs(400), "{:?}", started.elapsed());
    let dir = results.join("slurm-hang").join(&slurm_timeout);
    let recs = records(&dir);
    assert_eq!(recs.len(), 1, "{err}");
    let f = &recs[0]["failure"];
    assert_eq!(f["reason"], "timeout", "{f}");
    let detail = f["detail"].as_str().unwrap();
    assert!(detail.contains("Slurm stopped job") && detail.contains("Slurm state TIMEOUT"), "{detail}");
    assert!(dispatch(&recs[0])["job_id"].as_str().unwrap().contains('_'));
    audit_is_clean(&dir);
    nothing_left(&slurm_timeout);
}
