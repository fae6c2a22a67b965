//! The lab's own cost outside the measurements, on the real Docker engine: a scenario of 1 and
//! of 10 cells of the floor server (serial calls, a few ms of measurement each) run warm — the
//! image built, nothing to build — so that the difference is what each further cell costs (its
//! containers created, started and torn down, the shim and driver started, the gate, the record
//! written) and the rest is what a run costs once (plan, image checks, host fingerprint, the
//! store); then `report` and `audit` over a run of 100,000 records made from those records and
//! chained as the store chains them, and `verify` of seed-000-stdio's claims over 100,000 records
//! made from its newest committed run. Each over rounds, with the median and the spread. Beside
//! the per-cell cost, its peer in the same run: the engine alone creating, starting and removing
//! the same two containers (the server's on its own loopback-only network, the sidecar in it,
//! the volume, the sandbox) around nothing (`sleep` and `true`), and the quiet check's fixed probe;
//! what is left is the lab's own.
//!
//! Run: `cargo bench --bench overhead` (needs the engine: `bash scripts/engine.sh`).
//! BENCH_ROUNDS sets the rounds (default 3), BENCH_RECORDS the big run's records (100000).
//! BENCH_BIG_FROM=<run folder> times only `report` and `audit` over a big run made from that run's
//! records, and `verify` (no engine needed); BENCH_KEEP=1 keeps the big runs for profiling.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use benchlab::backend::containers::docker::DockerEngine;
use benchlab::backend::containers::{ContainerSpec, Engine, Mount, Network};
use benchlab::host::fingerprint::median_interval;
use benchlab::host::quiet::BEFORE_WINDOW;
use benchlab::record::Record;
use benchlab::spec::Sandbox;

const LAB: &str = env!("CARGO_BIN_EXE_benchlab");
const ROOT: &str = env!("CARGO_MANIFEST_DIR");

fn spread(v: &[f64], unit: &str) -> String {
    spread_of(v, unit, "rounds")
}

/// The median and the range of `v`, the range named by what its values are.
fn spread_of(v: &[f64], unit: &str, what: &str) -> String {
    let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    format!("{:.2} {unit} ({what} {lo:.2}–{hi:.2})", median_interval(v).0)
}

fn scenario(dir: &Path, cells: u32) -> PathBuf {
    let p = dir.join(format!("overhead-{cells}.toml"));
    std::fs::write(
        &p,
        format!(
            "name = \"overhead-{cells}\"\nsuite = \"weekly\"\nrepeats = {cells}\n\n[placement]\nmode = \"split\"\nmemory = \"1GiB\"\n\n[[server]]\nid = \"null\"\nfamily = \"benchlab-null\"\n\n[[workload]]\nkind = \"serial_calls\"\ntool = \"add_numbers\"\nwarmup = 0\ncalls = 100\n"
        ),
    )
    .expect("write the scenario");
    p
}

/// Runs a scenario; its wall time in seconds, its run folder, and the seconds its records say
/// were measured (each cell's calls: count × mean).
fn run(scenario: &Path, results: &Path, id: &str) -> (f64, PathBuf, f64) {
    let t0 = Instant::now();
    let out = Command::new(LAB)
        .args(["run"])
        .arg(scenario)
        .args(["--root", ROOT, "--results"])
        .arg(results)
        .args(["--run-id", id, "--order", "as-written", "--json"])
        .output()
        .expect("run benchlab");
    let wall = t0.elapsed().as_secs_f64();
    assert!(
        out.status.success(),
        "benchlab run failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let name = scenario.file_stem().and_then(|s| s.to_str()).expect("a name");
    let dir = results.join(name).join(id);
    let mut measured = 0.0;
    for r in records(&dir) {
        let v = serde_json::to_value(&r.metrics).expect("metrics");
        let s = &v["calls"]["summary"];
        measured += s["count"].as_f64().unwrap_or(0.0) * s["mean_ms"].as_f64().unwrap_or(0.0) / 1e3;
    }
    (wall, dir, measured)
}

fn records(dir: &Path) -> Vec<Record> {
    let text = std::fs::read_to_string(dir.join("records.jsonl")).expect("records");
    text.lines().map(|l| serde_json::from_str(l).expect("a record")).collect()
}

/// A copy of `dir` whose store holds `n` records: its records over and over, each re-numbered and
/// chained as the store chains them.
fn big_run(dir: &Path, n: usize, into: &Path) -> PathBuf {
    let out = into.join(dir.file_name().expect("a run folder"));
    std::fs::create_dir_all(&out).expect("mkdir");
    for e in std::fs::read_dir(dir).expect("read the run").flatten() {
        if e.path().is_file() && e.file_name() != "records.jsonl" {
            std::fs::copy(e.path(), out.join(e.file_name())).expect("copy");
        }
    }
    let base = records(dir);
    let mut text = String::new();
    let mut prev: Option<String> = None;
    for i in 0..n {
        let mut r = base[i % base.len()].clone();
        r.seq = i as u64;
        r.prev_hash = prev.clone();
        r.hash = r.compute_hash();
        prev = Some(r.hash.clone());
        text.push_str(&serde_json::to_string(&r).expect("serialise"));
        text.push('\n');
    }
    std::fs::write(out.join("records.jsonl"), text).expect("write the records");
    let head = serde_json::json!({"records": n, "hash": prev});
    std::fs::write(out.join("records.head"), head.to_string()).expect("write the head");
    out
}

fn timed(args: &[&str], dir: &Path) -> f64 {
    let t0 = Instant::now();
    let out = Command::new(LAB).args(args).arg(dir).output().expect("run benchlab");
    let s = t0.elapsed().as_secs_f64();
    // verify exits 1 when a claim is contradicted: a verdict, not a failure of the command.
    let verdict = args.first() == Some(&"verify") && out.status.code() == Some(1);
    assert!(
        out.status.success() || verdict,
        "benchlab {args:?} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    s
}

fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        println!("benches/overhead: a benchmark; run it with `cargo bench --bench overhead`");
        return;
    }
    let rounds: usize = std::env::var("BENCH_ROUNDS").ok().and_then(|s| s.parse().ok()).unwrap_or(3);
    let n: usize = std::env::var("BENCH_RECORDS").ok().and_then(|s| s.parse().ok()).unwrap_or(100_000);
    let tmp = tempfile::tempdir().expect("a scratch folder");
    if let Some(from) = std::env::var_os("BENCH_BIG_FROM") {
        let big = big_run(Path::new(&from), n, &tmp.path().join("big"));
        report_and_audit(&big, n, rounds);
        verify_big(n, rounds, tmp.path());
        if std::env::var_os("BENCH_KEEP").is_some() {
            println!("  the big run is kept: {}", big.display());
            let _ = tmp.keep();
        }
        return;
    }
    let docker = Command::new("docker").arg("info").output();
    assert!(
        docker.is_ok_and(|o| o.status.success()),
        "no Docker engine answers: start it with `bash scripts/engine.sh`"
    );
    let (one, ten) = (scenario(tmp.path(), 1), scenario(tmp.path(), 10));
    let results = tmp.path().join("results");
    // Warm: the floor image is built (or found) once, before anything is timed.
    run(&one, &results, "warm");
    println!("warm runs of the floor server on the Docker engine (serial calls, 100 each); {rounds} rounds");
    let (mut per_cell, mut fixed, mut ten_outside) = (Vec::new(), Vec::new(), Vec::new());
    let mut last = PathBuf::new();
    for round in 0..rounds {
        let (w1, _, m1) = run(&one, &results, &format!("one-{round}"));
        let (w10, dir, m10) = run(&ten, &results, &format!("ten-{round}"));
        let (o1, o10) = (w1 - m1, w10 - m10);
        let cell = (o10 - o1) / 9.0;
        println!(
            "round {}: 1 cell {w1:.2} s ({m1:.3} s measured), 10 cells {w10:.2} s ({m10:.3} s measured): {cell:.2} s per further cell, {:.2} s once per run",
            round + 1,
            o1 - cell
        );
        per_cell.push(cell);
        fixed.push(o1 - cell);
        ten_outside.push(o10);
        last = dir;
    }
    let engine_alone = engine_alone(rounds);
    println!("\nsummary (median over {rounds} rounds, and the spread):");
    println!(
        "  each cell outside its measurement (containers up and down, shim, driver, gate, record): {}",
        spread(&per_cell, "s")
    );
    let probe = BEFORE_WINDOW.as_secs_f64();
    println!(
        "    of it: the quiet check's probe before the cell {probe:.2} s; the engine alone creating, starting and removing the same two containers around nothing {}; the lab's own (shim, driver, gate, record) the rest, {:.2} s",
        spread(&engine_alone, "s"),
        median_interval(&per_cell).0 - probe - median_interval(&engine_alone).0
    );
    println!("  once per run (plan, image checks, fingerprint, store): {}", spread(&fixed, "s"));
    println!("  a warm 10-cell run outside its measurements: {}", spread(&ten_outside, "s"));
    let big = big_run(&last, n, &tmp.path().join("big"));
    report_and_audit(&big, n, rounds);
    verify_big(n, rounds, tmp.path());
}

/// The engine's part of a cell, `rounds` times (each the median of 5): a tmpfs volume, the server's
/// container (loopback only, memory-limited, on CPU 1) started, the sidecar in its network (on
/// CPU 0) started and waited for, both removed and the volume too — as a cell makes them, both
/// sandboxed and mounting the lab's binary, but running `sleep` and `true` instead of the shim
/// and the driver, on the bare base the floor server's cells run on.
fn engine_alone(rounds: usize) -> Vec<f64> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
    rt.block_on(async {
        let engine = DockerEngine::connect().await.expect("the Docker engine");
        // Labelled as this bench's own, so that what an earlier, failed round left is removed
        // first (and nothing of any run's).
        const KEY: &str = "org.benchlab.bench-overhead";
        let _ = engine.remove_labelled(KEY).await;
        let label = format!("benchlab-bench-overhead-{}", std::process::id());
        let labels: std::collections::BTreeMap<String, String> = [(KEY.to_string(), label.clone())].into();
        let sandbox = Sandbox::hardened();
        let mut rounds_out = Vec::new();
        for round in 0..rounds {
            let mut times = Vec::new();
            for i in 0..5 {
                let name = format!("{label}-{round}-{i}");
                let volume = format!("{name}-lab");
                let mounts = vec![
                    Mount::Bind { source: LAB.into(), target: "/benchlab/benchlab".into(), read_only: true },
                    Mount::Volume { name: volume.clone(), target: "/lab".into() },
                ];
                let spec = |role: &str, cmd: &[&str], cpuset: &str, memory, network| ContainerSpec {
                    name: format!("{name}-{role}"),
                    image: "benchlab/base:bookworm".into(),
                    cmd: cmd.iter().map(|s| s.to_string()).collect(),
                    env: sandbox.environment(),
                    labels: labels.clone(),
                    cpuset: cpuset.into(),
                    memory,
                    nano_cpus: None,
                    network,
                    mounts: mounts.clone(),
                    sandbox: sandbox.clone(),
                };
                let t0 = Instant::now();
                engine.create_volume(&volume, 64 << 20, &labels).await.expect("a volume");
                let server = engine
                    .create_container(&spec(
                        "server",
                        &["sleep", "600"],
                        "1",
                        Some(1 << 30),
                        Network::Loopback { hosts: Vec::new() },
                    ))
                    .await
                    .expect("the server's container");
                engine.start(&server).await.expect("start the server's container");
                let sidecar = engine
                    .create_container(&spec(
                        "driver",
                        &["true"],
                        "0",
                        None,
                        Network::Container(server.clone()),
                    ))
                    .await
                    .expect("the sidecar");
                engine.start(&sidecar).await.expect("start the sidecar");
                engine.wait(&sidecar).await.expect("the sidecar ends");
                for id in [&sidecar, &server] {
                    engine.remove_container(id).await.expect("remove a container");
                }
                engine.remove_volume(&volume).await.expect("remove the volume");
                times.push(t0.elapsed().as_secs_f64());
            }
            println!(
                "round {}: the engine alone, the same two containers around nothing: {}",
                round + 1,
                spread_of(&times, "s", "5 times:")
            );
            rounds_out.push(median_interval(&times).0);
        }
        rounds_out
    })
}

/// `verify` of seed-000-stdio's claims over a run of `n` records made from its newest committed
/// run's records (each cell repeated over and over).
fn verify_big(n: usize, rounds: usize, tmp: &Path) {
    let runs = Path::new(ROOT).join("results/seed-000-stdio");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&runs)
        .expect("results/seed-000-stdio")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join("records.jsonl").exists())
        .collect();
    dirs.sort();
    let newest = dirs.last().expect("a committed seed-000-stdio run");
    let big = big_run(newest, n, &tmp.join("verify"));
    let scenario = Path::new(ROOT).join("scenarios/seed-000-stdio.toml");
    let scenario = scenario.to_str().expect("a UTF-8 path");
    let times: Vec<f64> = (0..rounds).map(|_| timed(&["verify", scenario, "--run"], &big)).collect();
    println!("  benchlab verify (seed-000-stdio's claims) over {n} records: {}", spread(&times, "s"));
}

/// `report` and `audit` over the big run, each `rounds` times, with the median and spread.
fn report_and_audit(big: &Path, n: usize, rounds: usize) {
    let bytes = std::fs::metadata(big.join("records.jsonl")).map(|m| m.len()).unwrap_or(0);
    let (mut report, mut audit) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        report.push(timed(&["report"], big));
        audit.push(timed(&["audit"], big));
    }
    println!("  benchlab report over {n} records ({:.2} GB): {}", bytes as f64 / 1e9, spread(&report, "s"));
    println!("  benchlab audit over {n} records: {}", spread(&audit, "s"));
}
