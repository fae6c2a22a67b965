//! The native engine against the real host: lab cgroups (limits, placement, clean-up), the null
//! server measured through `run_cell`, `benchlab measure` on a stdlib-only Python server, and the
//! install cache with a real locked Python set. Run as root; cgroup failures fail, never skip.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use benchlab::backend::native::{cgroup, CellLimits, NativeCgroup, NativeEngine};
use benchlab::mcp::transport::Transport;
use benchlab::recipe::{ImagePlan, RecipeBook, ServerWant};
use benchlab::spec::{DriverEvent, DriverSpec, ServerLaunch, Timeouts};
use benchlab::spec::{Warmup, Workload};

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
        program: None,
        lock: None,
        no_bytecode: false,
        workers: 1,
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
    let mem = cg.memory_dir().unwrap();
    let read = |f: &str| std::fs::read_to_string(mem.join(f)).ok().map(|t| t.trim().to_string());
    match read("memory.max") {
        Some(max) => {
            assert_eq!(max, (64u64 << 20).to_string());
            assert_eq!(read("memory.swap.max").as_deref(), Some("0"));
        }
        None => {
            assert_eq!(read("memory.limit_in_bytes"), Some((64u64 << 20).to_string()));
            // Swap off where the kernel accounts it.
            if let Some(memsw) = read("memory.memsw.limit_in_bytes") {
                assert_eq!(memsw, (64u64 << 20).to_string());
            }
        }
    }
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
    weekly_spec(plan.launch.clone(), workload)
}

/// A weekly-suite spec (run_cell puts the cache entry's launch in place of an empty `server`).
fn weekly_spec(server: ServerLaunch, workload: Workload) -> DriverSpec {
    DriverSpec {
        lab_dir: PathBuf::new(),
        server,
        http: None,
        suite: "weekly".into(),
        suite_data: None,
        workload,
        timeouts: Timeouts::default(),
        ungated: None,
        services: Vec::new(),
        driver_cpus: Vec::new(),
    }
}

/// Server on CPU 1, driver on CPU 0, with a memory limit and the sandbox's pids limit.
fn split_limits(memory_limit: u64) -> CellLimits {
    CellLimits {
        server_cpus: "1".into(),
        driver_cpus: "0".into(),
        memory_limit: Some(memory_limit),
        pids_limit: Some(1024),
    }
}

#[test]
fn the_null_server_runs_natively() {
    let book = RecipeBook::load(Path::new(env!("CARGO_MANIFEST_DIR"))).unwrap();
    let plan = book.resolve(&want("benchlab-null", None, "weekly")).unwrap();
    let engine = NativeEngine::new().expect("cgroups as root");
    let limits = split_limits(256 << 20);
    rt().block_on(async {
        let env = engine.prepare(&plan, Path::new("/nonexistent"), &mut |_| {}).await.unwrap();
        assert!(env.cached);
        let mut progress = 0;
        let spec = null_spec(
            &plan,
            Workload::SerialCalls { tool: "echo".into(), warmup: Warmup::Fixed(200), calls: 2000 },
        );
        let run = engine
            .run_cell(launched(spec.clone(), &env), &limits, &exe(), Duration::from_secs(120), &mut |e| {
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
            .run_cell(launched(spec, &env), &limits, &exe(), Duration::from_secs(120), &mut |_| {})
            .await
            .unwrap();
        assert!(run.outcome.failure.is_none(), "{:?}", run.outcome.failure);
        assert_eq!(run.outcome.cold_start_ns.len(), 5);
        assert_eq!(run.outcome.exits.len(), 5);
    });
}

#[test]
fn a_time_limit_kills_the_cell_with_or_without_a_cgroup() {
    let book = RecipeBook::load(Path::new(env!("CARGO_MANIFEST_DIR"))).unwrap();
    let plan = book.resolve(&want("benchlab-null", None, "weekly")).unwrap();
    let limits =
        CellLimits { server_cpus: "1".into(), driver_cpus: "0".into(), memory_limit: None, pids_limit: None };
    for (engine, marker) in [
        (NativeEngine::new().expect("cgroups as root"), "600.4242"),
        (NativeEngine::pinned_only(), "600.4343"),
    ] {
        let mut spec = null_spec(
            &plan,
            Workload::SerialCalls { tool: "echo".into(), warmup: Warmup::Fixed(0), calls: 1 },
        );
        // A server that never answers.
        spec.server = ServerLaunch { argv: vec!["sleep".into(), marker.into()], env: vec![], cwd: None };
        let started = Instant::now();
        let err = rt()
            .block_on(engine.run_spec(spec, &limits, &exe(), Duration::from_secs(3), &mut |_| {}))
            .unwrap_err();
        assert!(err.to_string().contains("did not finish"), "{err}");
        assert!(started.elapsed() < Duration::from_secs(30));
        std::thread::sleep(Duration::from_millis(200));
        let left = Command::new("pgrep").args(["-f", &format!("sleep {marker}")]).output().unwrap();
        assert!(
            left.stdout.is_empty(),
            "the server outlived its cell: {}",
            String::from_utf8_lossy(&left.stdout)
        );
    }
}

/// A stdio MCP server in plain Python (no SDK): initialize, tools/list with one tool, tools/call.
const TINY_SERVER: &str = r#"
import json, sys

def send(msg):
    sys.stdout.write(json.dumps(msg) + "\n")
    sys.stdout.flush()

for line in sys.stdin:
    line = line.strip()
    if not line:
        continue
    req = json.loads(line)
    method, rid = req.get("method"), req.get("id")
    if rid is None:
        continue
    if method == "initialize":
        result = {"protocolVersion": req["params"]["protocolVersion"], "capabilities": {"tools": {}},
                  "serverInfo": {"name": "tiny", "version": "0.1"}}
    elif method == "tools/list":
        result = {"tools": [{"name": "echo", "description": "echo", "inputSchema": {"type": "object"}}]}
    elif method == "tools/call":
        args = req["params"].get("arguments", {})
        if args.get("fail"):
            result = {"content": [{"type": "text", "text": "asked to fail"}], "isError": True}
        else:
            result = {"content": [{"type": "text", "text": json.dumps(args)}], "isError": False}
    else:
        send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "no such method"}})
        continue
    send({"jsonrpc": "2.0", "id": rid, "result": result})
"#;

fn tiny_server_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("server.py"), TINY_SERVER).unwrap();
    dir
}

fn measure(dir: &Path, args: &[&str]) -> std::process::Output {
    Command::new(exe()).arg("measure").args(args).current_dir(dir).output().unwrap()
}

#[test]
fn measure_prints_a_table_for_a_plain_python_server() {
    let dir = tiny_server_dir();
    let out = measure(
        dir.path(),
        &["--runs", "3", "--calls", "200", "--warmup", "20", "--", "python3", "server.py"],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    for needle in [
        "cold start (3 runs)",
        "tools/list",
        "serial calls (200",
        "throughput",
        "RSS",
        "placement:",
        "gate: off",
    ] {
        assert!(stdout.contains(needle), "no {needle:?} in\n{stdout}");
    }
    assert!(stdout.contains("cgroup v"), "as root the server runs in a cgroup:\n{stdout}");
}

#[test]
fn measure_json_gives_numbers() {
    let dir = tiny_server_dir();
    let out = measure(
        dir.path(),
        &[
            "--json",
            "--runs",
            "2",
            "--calls",
            "100",
            "--warmup",
            "10",
            "--tool",
            "echo",
            "--args",
            r#"{"m": 1}"#,
            "--memory",
            "256MiB",
            "--",
            "python3",
            "server.py",
        ],
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let num = |p: &str| v.pointer(p).and_then(|x| x.as_f64()).unwrap_or_else(|| panic!("no {p} in {v}"));
    assert!(num("/cold_start/p50_ms") > 0.0);
    assert_eq!(num("/cold_start/count"), 2.0);
    assert!(num("/tools_list/p50_ms") > 0.0);
    assert!(num("/calls/p50_ms") > 0.0);
    assert_eq!(num("/calls/count"), 100.0);
    assert!(num("/throughput_per_s") > 0.0);
    assert!(num("/memory_after_initialize/rss_bytes") > 0.0);
    assert!(num("/cgroup_peak_bytes") > 0.0);
    assert_eq!(num("/placement/memory_limit_bytes"), (256u64 << 20) as f64);
    assert_eq!(v["server_info"]["name"], "tiny");
    assert_ne!(v["placement"]["server_cpus"], v["placement"]["driver_cpus"]);
}

#[test]
fn measure_fails_on_a_tool_error_and_on_a_suite_mismatch() {
    let dir = tiny_server_dir();
    let out = measure(
        dir.path(),
        &[
            "--runs",
            "0",
            "--calls",
            "5",
            "--warmup",
            "0",
            "--args",
            r#"{"fail": true}"#,
            "--",
            "python3",
            "server.py",
        ],
    );
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stdout));
    assert!(String::from_utf8_lossy(&out.stderr).contains("asked to fail"));
    let out = measure(
        dir.path(),
        &["--suite", "weekly", "--runs", "1", "--calls", "0", "--", "python3", "server.py"],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("weekly"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The CA bundle downloads need here (the host's network may intercept TLS).
fn ca_bundle() -> PathBuf {
    std::env::var_os("SSL_CERT_FILE")
        .map(PathBuf::from)
        .filter(|p| p.is_file())
        .unwrap_or_else(|| PathBuf::from("/etc/ssl/certs/ca-certificates.crt"))
}

#[test]
fn a_locked_python_set_installs_once_and_then_hits_the_cache_and_runs() {
    let book = RecipeBook::load(Path::new(env!("CARGO_MANIFEST_DIR"))).unwrap();
    let plan = book.resolve(&want("python-mcp", Some("2.3.0"), "weekly")).unwrap();
    assert_eq!(plan.runtime_kind.as_str(), "cpython");
    let cache = tempfile::tempdir().unwrap();
    let rt = rt();
    let mut lines = Vec::new();
    let started = Instant::now();
    let first = rt
        .block_on(benchlab::backend::native::cache::prepare_in(cache.path(), &plan, &ca_bundle(), &mut |l| {
            lines.push(l.to_string())
        }))
        .unwrap_or_else(|e| panic!("{e}\n{}", lines.join("\n")));
    let install = started.elapsed();
    assert!(!first.cached);
    assert!(first.dir.join("venv/bin/python").exists());
    assert!(first.packages.iter().any(|p| p.name == "mcp" && p.version == "2.3.0"), "{:?}", first.packages);
    assert!(first.runtime_version.starts_with("3."));
    assert!(first.launch.argv[0].starts_with(&first.dir.display().to_string()), "{:?}", first.launch);
    assert!(!first.launch.argv.iter().any(|a| a.starts_with("/srv") || a.starts_with("/opt/venv")));

    let started = Instant::now();
    let mut hit_log = Vec::new();
    let second = rt
        .block_on(benchlab::backend::native::cache::prepare_in(cache.path(), &plan, &ca_bundle(), &mut |l| {
            hit_log.push(l.to_string())
        }))
        .unwrap();
    let hit = started.elapsed();
    assert!(second.cached);
    assert_eq!(second.input_hash, first.input_hash);
    assert_eq!(second.packages, first.packages);
    assert!(hit_log.iter().any(|l| l.contains("cache hit")), "{hit_log:?}");
    assert!(hit < Duration::from_secs(2), "a hit took {hit:?}");
    // Only the finished entry is left: no temporary folders.
    let entries: Vec<String> = std::fs::read_dir(cache.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(entries, vec![first.input_hash.clone()]);
    eprintln!("python-mcp 2.3.0: install {install:?}, cache hit {hit:?}");

    // And the server runs natively, correctness gate on.
    let engine = NativeEngine::new().expect("cgroups as root");
    let limits = split_limits(512 << 20);
    let spec = weekly_spec(
        ServerLaunch { argv: vec![], env: vec![], cwd: None },
        Workload::SerialCalls { tool: "add_numbers".into(), warmup: Warmup::Fixed(20), calls: 200 },
    );
    let run = rt
        .block_on(engine.run_cell(
            launched(spec, &second),
            &limits,
            &exe(),
            Duration::from_secs(300),
            &mut |_| {},
        ))
        .unwrap();
    assert!(run.outcome.failure.is_none(), "{:?}", run.outcome.failure);
    assert_eq!(run.outcome.calls_ok, 200);
    let hist = benchlab::stats::decode_histogram(run.outcome.calls_histogram.as_ref().unwrap()).unwrap();
    eprintln!(
        "python-mcp 2.3.0 natively: cold start {:.0} ms, serial p50 {:.0} us, cgroup peak {} MiB",
        run.outcome.cold_start_ns[0] as f64 / 1e6,
        hist.value_at_quantile(0.5) as f64 / 1e3,
        run.memory_peak.unwrap_or(0) >> 20
    );
}

/// Installs a ts-sdk lock for `runtime` into a fresh cache and runs its weekly server natively.
fn ts_sdk_runs_natively(runtime: &str, kind: &str) {
    let book = RecipeBook::load(Path::new(env!("CARGO_MANIFEST_DIR"))).unwrap();
    let mut w = want("ts-sdk", Some("1.32.2"), "weekly");
    w.runtime = Some(runtime.into());
    let plan = book.resolve(&w).unwrap();
    assert_eq!(plan.runtime_kind.as_str(), kind);
    let cache = tempfile::tempdir().unwrap();
    let rt = rt();
    let mut lines = Vec::new();
    let started = Instant::now();
    let env = rt
        .block_on(benchlab::backend::native::cache::prepare_in(cache.path(), &plan, &ca_bundle(), &mut |l| {
            lines.push(l.to_string())
        }))
        .unwrap_or_else(|e| panic!("{e}\n{}", lines.join("\n")));
    assert!(!env.cached);
    assert!(Path::new(&env.interpreter).is_file(), "{}", env.interpreter);
    assert!(env.packages.iter().any(|p| p.name == "@modelcontextprotocol/sdk" && p.version == "1.32.2"));
    let wanted_version = runtime.split('-').nth(1).unwrap();
    assert_eq!(env.runtime_version, wanted_version);
    eprintln!("ts-sdk 1.32.2 on {runtime}: install {:?}", started.elapsed());
    let engine = NativeEngine::new().expect("cgroups as root");
    let limits = split_limits(1 << 30);
    let spec = weekly_spec(
        ServerLaunch { argv: vec![], env: vec![], cwd: None },
        Workload::SerialCalls { tool: "echo".into(), warmup: Warmup::Fixed(20), calls: 200 },
    );
    let run = rt
        .block_on(engine.run_cell(
            launched(spec, &env),
            &limits,
            &exe(),
            Duration::from_secs(300),
            &mut |_| {},
        ))
        .unwrap();
    assert!(run.outcome.failure.is_none(), "{:?}", run.outcome.failure);
    assert_eq!(run.outcome.calls_ok, 200);
}

#[test]
fn a_locked_node_set_installs_and_runs() {
    ts_sdk_runs_natively("node-20.20.2", "node");
}

#[test]
fn a_locked_bun_set_installs_and_runs() {
    ts_sdk_runs_natively("bun-1.1.38", "bun");
}

#[test]
fn measure_without_root_pins_cpus_only_and_says_so() {
    let dir = tiny_server_dir();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    // As nobody: no cgroup can be made.
    let out = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
        .arg(exe())
        .args([
            "measure",
            "--json",
            "--runs",
            "1",
            "--calls",
            "20",
            "--warmup",
            "0",
            "--",
            "/usr/bin/python3",
            "server.py",
        ])
        .current_dir(dir.path())
        .env("HOME", dir.path())
        .output()
        .expect("setpriv (util-linux) runs the test as nobody");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("CPU pinning only"));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["placement"]["isolation"], "none (CPU affinity only)");
    assert!(v["cgroup_peak_bytes"].is_null());
    assert!(v["calls"]["p50_ms"].as_f64().unwrap() > 0.0);
}

/// The spec with the install's launch in place of the plan's (as the native backend does).
fn launched(mut spec: DriverSpec, env: &benchlab::backend::native::NativeEnv) -> DriverSpec {
    spec.server = env.launch.clone();
    spec
}

/// The main job without an engine: the quickstart runs on the native engine (its servers
/// installed from the lockfiles), with a notice that says so.
#[test]
fn without_an_engine_the_main_job_falls_back_to_the_native_engine_and_says_so() {
    let d = tempfile::tempdir().unwrap();
    let out = Command::new(exe())
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(["run", "scenarios/quickstart.toml", "--results"])
        .arg(d.path())
        .env("DOCKER_HOST", format!("unix://{}/no-engine.sock", d.path().display()))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("notice: no container engine answers") && err.contains("native engine"), "{err}");
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(table.contains("mcp-2.3.0") && table.contains("null"), "{table}");
}
