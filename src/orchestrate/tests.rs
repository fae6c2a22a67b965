//! The scheduler on the scripted backend: fast, no engine. These prove the scheduling rules
//! (slots, resume, interruption, failures, one preparation per image, plan = run); that cells
//! really run is shown by the end-to-end tests on Docker and the native engine.

use std::path::Path;
use std::time::Duration;

use super::*;
use crate::backend::scripted::{Script, ScriptedBackend};
use crate::backend::{Backend, Topology};
use crate::record::store::{read_records, RECORDS_FILE};
use crate::record::Status;
use crate::spec::FailureReason;

const MS: Duration = Duration::from_millis(1);

/// A scenario of `servers` null servers × one cold-start workload, in `mode`, in the order
/// written.
fn scenario(servers: usize, mode: &str) -> Scenario {
    let mut toml = format!(
        "name = \"sched\"\nsuite = \"weekly\"\norder = \"as-written\"\n[placement]\nmode = \"{mode}\"\n"
    );
    for i in 0..servers {
        toml.push_str(&format!("[[server]]\nid = \"s{i}\"\nfamily = \"benchlab-null\"\n"));
    }
    toml.push_str("[[workload]]\nkind = \"cold_start\"\nspawns = 1\n");
    Scenario::parse(Path::new("sched.toml"), toml).expect("a valid scenario")
}

/// The null server and mcp 2.3.0, each with two workloads: four cells, two images.
fn two_images() -> Scenario {
    let toml = r#"
name = "sched2"
suite = "weekly"
[[server]]
id = "null"
family = "benchlab-null"
[[server]]
id = "mcp"
family = "python-mcp"
version = "2.3.0"
runtime = "cpython-bookworm"
[[workload]]
kind = "cold_start"
spawns = 3
[[workload]]
kind = "serial_calls"
tool = "add_numbers"
warmup = 10
calls = 100
"#;
    Scenario::parse(Path::new("sched2.toml"), toml.to_string()).expect("a valid scenario")
}

/// Null servers named `ids`, one cold-start workload, `repeats` each, planned (scenario order).
pub(crate) fn planned(ids: &[&str], repeats: u32) -> Vec<PlannedCell> {
    let mut toml = format!("name = \"order\"\nsuite = \"weekly\"\nrepeats = {repeats}\n");
    for id in ids {
        toml.push_str(&format!("[[server]]\nid = \"{id}\"\nfamily = \"benchlab-null\"\n"));
    }
    toml.push_str("[[workload]]\nkind = \"cold_start\"\nspawns = 1\n");
    let s = Scenario::parse(Path::new("order.toml"), toml).expect("a valid scenario");
    plan(&s, &recipes(), &[0, 1]).expect("a plan")
}

fn recipes() -> RecipeBook {
    RecipeBook::load(Path::new(env!("CARGO_MANIFEST_DIR"))).expect("the checkout's recipes")
}

fn options(dir: &Path, parallel: bool) -> RunOptions {
    let exe = dir.join("benchlab-exe");
    std::fs::write(&exe, b"not really the lab").unwrap();
    RunOptions {
        results_dir: dir.join("results"),
        run_id: Some("run-1".into()),
        benchlab_exe: exe,
        ca_bundle: dir.join("ca.pem"),
        work_dir: dir.join("work"),
        lab_volume_bytes: 1 << 20,
        parallel,
        order_seed: None,
        require_quiet_s: None,
        published: None,
    }
}

fn ok(ms: u64) -> Script {
    Script::Ok { after: Duration::from_millis(ms), cold_start_ns: 1_000_000 }
}

/// Runs with an interruption that never comes.
async fn run_all(
    b: &ScriptedBackend,
    sc: &Scenario,
    opts: &RunOptions,
    earlier: Option<Vec<Record>>,
    events: &mut Vec<Event>,
) -> Result<RunSummary, RunError> {
    let never = std::future::pending::<&'static str>();
    schedule::run_cells(std::slice::from_ref(b), sc, &recipes(), opts, earlier, never, &mut |e| {
        events.push(e)
    })
    .await
}

fn cores(t: &Topology, list: &str) -> Vec<(u32, u32)> {
    crate::placement::parse_cpu_list(list).unwrap().into_iter().map(|c| t.core_of(c)).collect()
}

#[tokio::test]
async fn parallel_slots_never_share_a_physical_core() {
    for (mode, per_cell) in [("shared", 1), ("split", 2)] {
        let d = tempfile::tempdir().unwrap();
        let topology = ScriptedBackend::smt_topology(8); // 4 cores × 2 threads
        let b = ScriptedBackend::new(topology.clone(), ok(40));
        let summary =
            run_all(&b, &scenario(8, mode), &options(d.path(), true), None, &mut Vec::new()).await.unwrap();
        assert_eq!(summary.records.len(), 8);
        let slots = 4 / per_cell;
        let together = b.together();
        assert!(!together.is_empty(), "{mode}: cells ran at once");
        for group in &together {
            assert!(group.len() <= slots, "{mode}: at most {slots} at once: {group:?}");
            let mut seen = Vec::new();
            for (_, p) in group {
                let mut mine = cores(&topology, &p.server_cpus);
                mine.extend(cores(&topology, &p.driver_cpus));
                mine.dedup();
                assert_eq!(mine.len(), per_cell, "{mode}: a cell takes {per_cell} core(s): {p:?}");
                for c in mine {
                    assert!(!seen.contains(&c), "{mode}: two cells on core {c:?}: {group:?}");
                    seen.push(c);
                }
            }
        }
        for r in &summary.records {
            let slot = r.cell.placement.parallel.expect("a parallel record names its slot");
            assert_eq!(slot.slots as usize, slots);
            assert_eq!(r.cell.placement.shared, mode == "shared");
        }
    }
}

#[tokio::test]
async fn a_failed_cell_never_stops_the_run() {
    let d = tempfile::tempdir().unwrap();
    let b = ScriptedBackend::new(ScriptedBackend::smt_topology(2), ok(1))
        .script("s0/cold_start", Script::Fail { after: MS, reason: FailureReason::Crash });
    let summary =
        run_all(&b, &scenario(3, "split"), &options(d.path(), false), None, &mut Vec::new()).await.unwrap();
    let status: Vec<(String, Status)> =
        summary.records.iter().map(|r| (r.cell.id.clone(), r.status)).collect();
    assert_eq!(
        status,
        [
            ("s0/cold_start".to_string(), Status::Failed),
            ("s1/cold_start".to_string(), Status::Ok),
            ("s2/cold_start".to_string(), Status::Ok)
        ]
    );
    assert_eq!(summary.records[0].failure.as_ref().unwrap().reason, FailureReason::Crash);
}

#[tokio::test]
async fn resume_runs_exactly_the_missing_cells() {
    let d = tempfile::tempdir().unwrap();
    let opts = options(d.path(), false);
    let sc = scenario(4, "split");
    let first = ScriptedBackend::new(ScriptedBackend::smt_topology(2), ok(1))
        .script("s2/cold_start", Script::Fail { after: MS, reason: FailureReason::Timeout });
    let summary = run_all(&first, &sc, &opts, None, &mut Vec::new()).await.unwrap();
    assert_eq!(summary.records.iter().filter(|r| r.status == Status::Ok).count(), 3);

    let second = ScriptedBackend::new(ScriptedBackend::smt_topology(2), ok(1));
    let run_dir = summary.run_dir.clone();
    let resumed =
        resume(std::slice::from_ref(&second), &run_dir, &recipes(), &opts, &mut |_| {}, &mut |_| {})
            .await
            .unwrap();
    let ran: Vec<String> = second.calls().into_iter().filter(|c| c.starts_with("run ")).collect();
    assert_eq!(ran, ["run s2/cold_start"], "only the cell without an ok record runs again");
    assert_eq!(resumed.skipped, 3);
    let stored = read_records(&run_dir.join(RECORDS_FILE)).unwrap();
    assert_eq!(stored.len(), 5, "nothing earlier is lost: 4 + the rerun");
    assert!(crate::record::audit::audit(&run_dir.join(RECORDS_FILE)).is_clean());
}

#[tokio::test]
async fn a_random_order_is_recorded_and_a_resumed_run_keeps_it() {
    let d = tempfile::tempdir().unwrap();
    let mut opts = options(d.path(), false);
    opts.order_seed = Some(1234);
    let mut sc = scenario(6, "split");
    sc.order = crate::spec::Order::Random;
    sc.repeats = 2;
    let first = ScriptedBackend::new(ScriptedBackend::smt_topology(2), ok(1))
        .script("s4/cold_start", Script::Fail { after: MS, reason: FailureReason::Timeout });
    let summary = run_all(&first, &sc, &opts, None, &mut Vec::new()).await.unwrap();
    let order: Vec<String> = summary.records.iter().map(|r| r.cell.id.clone()).collect();
    let written: Vec<String> =
        (0..6).flat_map(|i| [format!("s{i}/cold_start"), format!("s{i}/cold_start")]).collect();
    assert_ne!(order, written, "not the order written");
    for (i, r) in summary.records.iter().enumerate() {
        let s = r.schedule.as_ref().expect("every record has its place");
        assert_eq!(
            (s.order, s.seed, s.position, s.of),
            (crate::spec::Order::Random, Some(1234), i as u32, 12)
        );
        // Round-robin: the first six are the first round.
        assert_eq!(r.cell.repeat.unwrap().index, (i / 6) as u32);
    }
    // Resumed with another seed on the command line: the run's own seed and places are kept.
    opts.order_seed = Some(99);
    let second = ScriptedBackend::new(ScriptedBackend::smt_topology(2), ok(1));
    let resumed = resume(
        std::slice::from_ref(&second),
        &summary.run_dir,
        &recipes(),
        &opts,
        &mut |s| {
            s.order = crate::spec::Order::Random;
            s.repeats = 2;
        },
        &mut |_| {},
    )
    .await
    .unwrap();
    assert_eq!(resumed.records.len(), 2, "the two failed cells run again");
    for r in &resumed.records {
        let s = r.schedule.as_ref().unwrap();
        let before = summary
            .records
            .iter()
            .find(|e| e.cell.id == r.cell.id && e.cell.repeat == r.cell.repeat)
            .unwrap();
        assert_eq!((s.seed, s.position), (Some(1234), before.schedule.as_ref().unwrap().position));
    }
}

#[tokio::test]
async fn an_interruption_leaves_no_cell_running_and_loses_no_record() {
    let d = tempfile::tempdir().unwrap();
    let b =
        ScriptedBackend::new(ScriptedBackend::smt_topology(8), ok(5)).script("s2/cold_start", Script::Hang);
    let opts = options(d.path(), false);
    let bref = &b;
    // The "signal" comes once the hanging cell is running.
    let interrupt = async move {
        while !bref.calls().iter().any(|c| c == "run s2/cold_start") {
            tokio::time::sleep(MS).await;
        }
        "SIGINT"
    };
    let err = schedule::run_cells(
        std::slice::from_ref(&b),
        &scenario(4, "split"),
        &recipes(),
        &opts,
        None,
        interrupt,
        &mut |_| {},
    )
    .await
    .unwrap_err();
    match &err {
        RunError::Interrupted { signal, done, total, cell, .. } => {
            assert_eq!((*signal, *done, *total, cell.as_str()), ("SIGINT", 2, 4, "s2/cold_start"));
        }
        other => panic!("expected an interruption, got {other}"),
    }
    assert_eq!(b.running(), 0, "no cell is left running");
    assert!(b.calls().contains(&"abandon run-1".to_string()), "{:?}", b.calls());
    assert!(!b.calls().contains(&"run s3/cold_start".to_string()), "nothing starts after the signal");
    let path = opts.results_dir.join("sched/run-1").join(RECORDS_FILE);
    let stored = read_records(&path).unwrap();
    assert_eq!(
        stored.iter().map(|r| r.cell.id.as_str()).collect::<Vec<_>>(),
        ["s0/cold_start", "s1/cold_start"]
    );
    assert!(crate::record::audit::audit(&path).is_clean());
}

#[tokio::test]
async fn an_image_is_prepared_once_per_run() {
    let d = tempfile::tempdir().unwrap();
    let b = ScriptedBackend::new(ScriptedBackend::smt_topology(2), ok(1));
    let summary = run_all(&b, &two_images(), &options(d.path(), false), None, &mut Vec::new()).await.unwrap();
    assert_eq!(summary.records.len(), 4);
    let prepared: Vec<String> = b.calls().into_iter().filter(|c| c.starts_with("prepare ")).collect();
    assert_eq!(prepared.len(), 2, "two distinct images for four cells: {prepared:?}");
    assert_eq!(summary.images_built, 2);
}

#[tokio::test]
async fn plan_and_run_agree_on_images_and_estimated_time() {
    let d = tempfile::tempdir().unwrap();
    let b = ScriptedBackend::new(ScriptedBackend::smt_topology(2), ok(1));
    let sc = two_images();
    let opts = options(d.path(), false);
    // What `benchlab plan` computes.
    let mut cells = plan(&sc, &recipes(), &b.topology().cpus).unwrap();
    admit(std::slice::from_ref(&b), &recipes(), &mut cells).await.unwrap();
    let learned = estimate::learned_from(&opts.results_dir);
    let mut images = Vec::new();
    for (i, p) in distinct_images(&cells) {
        let state = b.state(&p).await;
        let planned = view::PlannedImage {
            engine: b.kind().as_str().into(),
            family: p.family.clone(),
            version: p.version.clone(),
            runtime: p.runtime_name.clone(),
            variant: p.variant(),
            state,
        };
        assert_eq!(i, 0);
        images.push((planned, p.runtime_kind));
    }
    let view = view::PlanView::new(&sc, &cells, images, &learned, 1);
    // What the run does.
    let mut events = Vec::new();
    run_all(&b, &sc, &opts, None, &mut events).await.unwrap();
    let planned_images = events.iter().find_map(|e| match e {
        Event::Planned { images, .. } => Some(*images),
        _ => None,
    });
    assert_eq!(planned_images, Some(view.images.len()));
    let first_eta = events.iter().find_map(|e| match e {
        Event::CellStarted { index: 0, eta_s, .. } => *eta_s,
        _ => None,
    });
    let eta = first_eta.expect("the first cell has an estimate");
    assert!((eta - view.cell_seconds).abs() < 1e-9, "run {eta} s vs plan {} s", view.cell_seconds);
    assert_eq!(view.cells, 4);
}

#[test]
fn a_server_s_startup_ms_is_its_cells_start_up_limit_and_the_others_keep_the_scenario_s() {
    let toml = r#"
name = "limits"
suite = "weekly"
[timeouts]
startup_ms = 60000
call_ms = 5000
[[server]]
id = "slow"
family = "benchlab-null"
[[server]]
id = "quick"
family = "benchlab-null"
startup_ms = 10000
[[workload]]
kind = "cold_start"
spawns = 1
"#;
    let s = Scenario::parse(Path::new("limits.toml"), toml.to_string()).expect("a valid scenario");
    let cells = plan(&s, &recipes(), &[0, 1]).expect("a plan");
    let limits: Vec<(&str, u64, u64)> =
        cells.iter().map(|c| (c.server_id.as_str(), c.timeouts.startup_ms, c.timeouts.call_ms)).collect();
    assert_eq!(limits, [("slow", 60_000, 5_000), ("quick", 10_000, 5_000)]);
}

/// `scenarios/gate-http.toml` is written by hand from the recipes; this keeps it whole: exactly
/// one server per HTTP variant the recipes declare (`RecipeBook::http_variants`), each in one
/// closed loop, and every streamable HTTP server with a REST route also in the `http_api`
/// workload of its closed loop's tool, where the scenario has one (the bench suite's).
#[test]
fn gate_http_holds_every_http_variant_the_recipes_declare() {
    use crate::mcp::transport::{ReplyMode, SessionMode, Transport};
    use std::collections::BTreeMap;
    type Key = (String, String, String, String, Transport, Option<ReplyMode>, Option<SessionMode>);
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let book = crate::recipe::RecipeBook::load(root).unwrap();
    let declared: BTreeMap<Key, bool> = book
        .http_variants()
        .into_iter()
        .map(|v| ((v.family, v.version, v.runtime, v.suite, v.transport, v.reply, v.session), v.rest))
        .collect();
    let path = root.join("scenarios/gate-http.toml");
    let s = Scenario::load(&path).unwrap();
    let mut listed = BTreeMap::<Key, String>::new();
    for e in &s.servers {
        let key = (
            e.family.get_ref().clone(),
            e.version.as_ref().map(|v| v.get_ref().clone()).unwrap_or_default(),
            e.runtime.as_ref().map(|v| v.get_ref().clone()).unwrap_or_default(),
            e.suite.clone().unwrap_or_else(|| s.suite.clone()),
            e.transport.as_ref().map(|t| *t.get_ref()).unwrap_or_default(),
            e.reply.as_ref().map(|x| *x.get_ref()),
            e.session.as_ref().map(|x| *x.get_ref()),
        );
        let id = e.id.get_ref().clone();
        assert!(listed.insert(key.clone(), id.clone()).is_none(), "{id}: a second server for {key:?}");
    }
    let missing: Vec<&Key> = declared.keys().filter(|k| !listed.contains_key(*k)).collect();
    let extra: Vec<&String> =
        listed.iter().filter(|(k, _)| !declared.contains_key(*k)).map(|(_, id)| id).collect();
    assert!(missing.is_empty(), "{}: no server for these declared variants: {missing:#?}", path.display());
    assert!(extra.is_empty(), "{}: servers the recipes do not declare: {extra:?}", path.display());
    // Each server in one closed loop (the loader checks its tool is the server's suite's); the
    // REST servers also in the http_api workload of that tool, where there is one (the bench
    // suite's `echo`), and no others. (The loader refuses a workload naming no server.)
    let of_kind = |kind: &str, id: &str| -> Vec<&crate::spec::Workload> {
        s.workloads
            .iter()
            .zip(&s.workload_servers)
            .filter(|(w, only)| w.kind() == kind && only.as_ref().is_some_and(|l| l.iter().any(|x| x == id)))
            .map(|(w, _)| w)
            .collect()
    };
    for (key, id) in &listed {
        let closed = of_kind("concurrency", id);
        assert_eq!(closed.len(), 1, "{id}: in {} closed loops", closed.len());
        let rest_tool = s.workloads.iter().any(|x| x.kind() == "http_api" && x.tool() == closed[0].tool());
        let rest: Vec<_> = of_kind("http_api", id).into_iter().map(|w| w.tool()).collect();
        let expected = if declared[key] && rest_tool { vec![closed[0].tool()] } else { vec![] };
        assert_eq!(rest, expected, "{id}: the tools of the http_api workloads it is in");
    }
}
