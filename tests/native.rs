//! The native engine against the real host: lab cgroups (limits, placement, clean-up), the null
//! server measured through `run_cell`, `benchlab measure` on a stdlib-only Python server, and the
//! install cache with a real locked Python set. Run as root; cgroup failures fail, never skip.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use benchlab::driver::{DriverEvent, DriverSpec, ServerLaunch, Timeouts};
use benchlab::engine::native::{cgroup, CellLimits, NativeCgroup, NativeEngine};
use benchlab::mcp::transport::Transport;
use benchlab::recipe::{ImagePlan, RecipeBook, ServerWant};
use benchlab::scenario::Workload;

fn exe() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_benchlab"))
}

fn want(family: &str, version: Option<&str>, suite: &str) -> ServerWant {
    ServerWant {
        family: family.into(),
        transport: Transport::Stdio,
        reply: None,
        session: None,
        version: version.map(String::from),
        runtime: None,
        api: None,
        suite: suite.into(),
        env: BTreeMap::new(),
        expect_failure: false,
    }
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap()
}

/// The lab cgroups' folders on this host (each hierarchy's benchlab/ on v1).
fn benchlab_children() -> Vec<PathBuf> {
    let mut out = Vec::new();
    for root in [
        "/sys/fs/cgroup/benchlab",
        "/sys/fs/cgroup/cpuset/benchlab",
        "/sys/fs/cgroup/memory/benchlab",
        "/sys/fs/cgroup/pids/benchlab",
    ] {
        if let Ok(entries) = std::fs::read_dir(root) {
            out.extend(entries.flatten().filter(|e| e.path().is_dir()).map(|e| e.path()));
        }
    }
    out
}

fn status_field(pid: u32, key: &str) -> String {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status.lines().find_map(|l| l.strip_prefix(key)).unwrap().trim().to_string()
}

/// Starts `cmd` inside the group (it joins before exec, as the engine's shim does).
fn join_before_exec(cg: &NativeCgroup, cmd: &mut Command) -> std::process::Child {
    let files: Vec<PathBuf> = cg.procs_files();
    // SAFETY: test code; the child only writes files before exec.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(cmd, move || {
            for f in &files {
                std::fs::write(f, std::process::id().to_string())?;
            }
            Ok(())
        });
    }
    cmd.spawn().unwrap()
}

#[test]
fn a_lab_cgroup_pins_limits_measures_and_goes_away() {
    let name = format!("test-{}", std::process::id());
    let cg = NativeCgroup::create(&name, "1", "0", Some(64 << 20), Some(64))
        .expect("as root, the lab must be able to create its cgroups");
    // Moved in after start: pinned and counted, though its memory stays charged where it was.
    let mut child = Command::new("sleep").arg("30").spawn().unwrap();
    cg.add_task(child.id()).unwrap();
    assert_eq!(status_field(child.id(), "Cpus_allowed_list:"), "1");
    assert_eq!(cg.pids(), vec![child.id()]);
    // Joined before exec: everything it touches is charged to the group.
    let mut joined = join_before_exec(
        &cg,
        Command::new("/usr/bin/python3").args(["-c", "b = bytearray(8 << 20); import time; time.sleep(30)"]),
    );
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(status_field(joined.id(), "Cpus_allowed_list:"), "1");
    let peak = cg.memory_peak().expect("a memory peak");
    assert!(peak > 8 << 20, "peak {peak}");
    assert!(!cg.oom_killed());
    let procs = cg.procs_files();
    assert!(!procs.is_empty());
    cg.remove().unwrap();
    // The process was killed with its group.
    assert!(!child.wait().unwrap().success());
    assert!(!joined.wait().unwrap().success());
    let left: Vec<PathBuf> =
        benchlab_children().into_iter().filter(|p| p.to_string_lossy().ends_with(&name)).collect();
    assert!(left.is_empty(), "left behind: {left:?}");
    assert!(cgroup::describe().starts_with("cgroup v"));
}

#[test]
fn the_oom_killer_is_seen() {
    let cg = NativeCgroup::create("oom", "0", "0", Some(16 << 20), None).unwrap();
    let mut cmd = Command::new("/usr/bin/python3");
    cmd.args(["-c", "import time; b = bytearray(64 << 20); time.sleep(5)"]);
    let status = join_before_exec(&cg, &mut cmd).wait().unwrap();
    assert!(!status.success());
    assert!(cg.oom_killed(), "the 64 MiB allocation in a 16 MiB group must be OOM-killed");
    cg.remove().unwrap();
}

#[test]
fn leftovers_of_dead_labs_are_removed_and_live_ones_kept() {
    // A live lab's group (ours) and a dead lab's (a pid above any pid_max).
    let live = NativeCgroup::create("live", "0", "0", None, None).unwrap();
    let engine = NativeEngine::new().expect("cgroups as root");
    let stale = "4999999999.stale";
    let roots: Vec<PathBuf> = [
        "/sys/fs/cgroup/benchlab",
        "/sys/fs/cgroup/cpuset/benchlab",
        "/sys/fs/cgroup/memory/benchlab",
        "/sys/fs/cgroup/pids/benchlab",
    ]
    .iter()
    .map(PathBuf::from)
    .filter(|p| p.is_dir())
    .collect();
    assert!(!roots.is_empty());
    for r in &roots {
        std::fs::create_dir(r.join(stale)).unwrap();
    }
    assert!(engine.remove_leftovers() >= 1);
    assert!(!benchlab_children().iter().any(|p| p.ends_with(stale)));
    assert!(benchlab_children().iter().any(|p| p.to_string_lossy().ends_with(".live")));
    live.remove().unwrap();
}

fn null_spec(plan: &ImagePlan, workload: Workload) -> DriverSpec {
    DriverSpec {
        lab_dir: PathBuf::new(),
        server: plan.launch.clone(),
        http: None,
        suite: "weekly".into(),
        workload,
        timeouts: Timeouts::default(),
    }
}

#[test]
fn the_null_server_runs_natively() {
    let book = RecipeBook::load(Path::new(env!("CARGO_MANIFEST_DIR"))).unwrap();
    let plan = book.resolve(&want("benchlab-null", None, "weekly")).unwrap();
    let engine = NativeEngine::new().expect("cgroups as root");
    let limits = CellLimits {
        server_cpus: "1".into(),
        driver_cpus: "0".into(),
        memory_limit: Some(256 << 20),
        pids_limit: Some(1024),
    };
    rt().block_on(async {
        let env = engine.prepare(&plan, Path::new("/nonexistent"), &mut |_| {}).await.unwrap();
        assert!(env.cached);
        let mut progress = 0;
        let spec = null_spec(&plan, Workload::SerialCalls { tool: "echo".into(), warmup: 200, calls: 2000 });
        let run = engine
            .run_cell(&env, spec.clone(), &limits, &exe(), Duration::from_secs(120), &mut |e| {
                if matches!(e, DriverEvent::Progress { .. }) {
                    progress += 1
                }
            })
            .await
            .unwrap();
        assert!(run.outcome.failure.is_none(), "{:?}", run.outcome.failure);
        assert_eq!(run.outcome.calls_ok, 2000);
        assert!(progress > 0);
        assert!(!run.oom_killed);
        assert!(run.memory_peak.unwrap() > 0);
        let hist = benchlab::stats::decode_histogram(run.outcome.calls_histogram.as_ref().unwrap()).unwrap();
        eprintln!(
            "null server, native serial calls: p50 {:.1} us, p99 {:.1} us, cgroup peak {} KiB",
            hist.value_at_quantile(0.5) as f64 / 1e3,
            hist.value_at_quantile(0.99) as f64 / 1e3,
            run.memory_peak.unwrap() >> 10
        );
        let spec = null_spec(&plan, Workload::ColdStart { spawns: 5 });
        let run = engine
            .run_cell(&env, spec, &limits, &exe(), Duration::from_secs(120), &mut |_| {})
            .await
            .unwrap();
        assert!(run.outcome.failure.is_none(), "{:?}", run.outcome.failure);
        assert_eq!(run.outcome.cold_start_ns.len(), 5);
        assert_eq!(run.outcome.exits.len(), 5);
    });
}

#[test]
fn a_time_limit_kills_the_cell() {
    let book = RecipeBook::load(Path::new(env!("CARGO_MANIFEST_DIR"))).unwrap();
    let plan = book.resolve(&want("benchlab-null", None, "weekly")).unwrap();
    let engine = NativeEngine::new().expect("cgroups as root");
    let limits =
        CellLimits { server_cpus: "1".into(), driver_cpus: "0".into(), memory_limit: None, pids_limit: None };
    let mut spec = null_spec(&plan, Workload::SerialCalls { tool: "echo".into(), warmup: 0, calls: 1 });
    // A server that never answers.
    spec.server = ServerLaunch { argv: vec!["sleep".into(), "600".into()], env: vec![], cwd: None };
    let started = Instant::now();
    let err = rt()
        .block_on(engine.run_spec(spec, &limits, &exe(), Duration::from_secs(3), &mut |_| {}))
        .unwrap_err();
    assert!(err.to_string().contains("did not finish"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(30));
}
