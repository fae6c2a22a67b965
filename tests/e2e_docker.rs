//! End to end on the real Docker engine: `benchlab run scenarios/quickstart.toml` twice. The first
//! run may bootstrap bases and build images; both write ok records that match the JSON Schema,
//! with disjoint cpusets and an env_hash; the second builds nothing and has the same env_hashes.
//! A container's output read whole after it exits (`Engine::output`, the second read a driver
//! gets when the follow stream ended before its outcome line) holds every line the follow stream
//! saw, in order, and the rest. These tests fail (never skip) when no engine answers:
//! scripts/test.sh starts one.

mod common;

use common::engine_must_answer;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_benchlab");
const ROOT: &str = env!("CARGO_MANIFEST_DIR");

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
    records: Vec<Value>,
}

fn run_quickstart(results: &Path, run_id: &str) -> Run {
    let out = Command::new(BIN)
        .current_dir(ROOT)
        .args(["run", "scenarios/quickstart.toml", "--run-id", run_id, "--results"])
        .arg(results)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let text = std::fs::read_to_string(results.join("quickstart").join(run_id).join("records.jsonl"))
        .unwrap_or_else(|e| panic!("no records ({e}); stderr:\n{stderr}"));
    let records = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    Run { code: out.status.code().unwrap_or(-1), stdout, stderr, records }
}

fn ms(r: &Value, path: &[&str]) -> f64 {
    let mut v = r;
    for p in path {
        v = &v[*p];
    }
    v.as_f64().unwrap_or_else(|| panic!("{path:?} missing in {}", r["cell"]["id"]))
}

#[test]
fn quickstart_runs_for_real_and_reruns_from_cache() {
    engine_must_answer();
    let results = tempfile::tempdir().unwrap();
    let schema: Value = serde_json::from_str(benchlab::record::SCHEMA).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();

    let first = run_quickstart(results.path(), "first");
    assert_eq!(first.code, 0, "stdout:\n{}\nstderr:\n{}", first.stdout, first.stderr);
    assert!(first.stdout.contains("cold start p50"), "the table is printed:\n{}", first.stdout);
    assert_eq!(first.records.len(), 4, "null and mcp-2.3.0, cold_start and serial_calls");

    let mut prev: Option<String> = None;
    for r in &first.records {
        let errors: Vec<String> =
            validator.iter_errors(r).map(|e| format!("{} at {}", e, e.instance_path)).collect();
        assert!(errors.is_empty(), "record {} breaks the schema: {errors:#?}", r["cell"]["id"]);
        assert_eq!(r["status"], "ok", "{}", r["failure"]);
        let p = &r["cell"]["placement"];
        let (s, d) = (p["server_cpus"].as_str().unwrap(), p["driver_cpus"].as_str().unwrap());
        let sc = benchlab::placement::parse_cpu_list(s).unwrap();
        let dc = benchlab::placement::parse_cpu_list(d).unwrap();
        assert!(sc.iter().all(|c| !dc.contains(c)), "server {s} and driver {d} must be disjoint");
        assert_eq!(r["environment"]["placement"], *p);
        assert_eq!(r["env_hash"].as_str().unwrap().len(), 64);
        // The chain and the hashes hold.
        assert_eq!(r["prev_hash"].as_str().map(String::from), prev);
        let rec: benchlab::record::Record = serde_json::from_value(r.clone()).unwrap();
        assert_eq!(rec.compute_hash(), rec.hash);
        assert_eq!(rec.environment.hash(), rec.env_hash);
        prev = Some(rec.hash.clone());
    }

    let by_id: BTreeMap<String, &Value> =
        first.records.iter().map(|r| (r["cell"]["id"].as_str().unwrap().to_string(), r)).collect();
    let mcp_cold = &by_id["mcp-2.3.0/cold_start"];
    let mcp_calls = &by_id["mcp-2.3.0/serial_calls"];
    let null_calls = &by_id["null/serial_calls"];
    let null_cold = &by_id["null/cold_start"];
    // Honest figures, with bounds wide enough for a noisy shared machine.
    let cold = ms(mcp_cold, &["metrics", "cold_start", "summary", "p50_ms"]);
    assert!((50.0..10_000.0).contains(&cold), "mcp 2.3.0 cold start {cold} ms");
    let mcp_p50 = ms(mcp_calls, &["metrics", "calls", "summary", "p50_ms"]);
    assert!(mcp_p50 < 5.0, "mcp 2.3.0 call p50 {mcp_p50} ms should be well under 5 ms");
    let null_p50 = ms(null_calls, &["metrics", "calls", "summary", "p50_ms"]);
    assert!(null_p50 < mcp_p50, "the floor ({null_p50} ms) is below the SDK ({mcp_p50} ms)");
    assert!(ms(null_cold, &["metrics", "cold_start", "summary", "p50_ms"]) < cold);
    assert_eq!(mcp_calls["metrics"]["calls"]["summary"]["count"], 2000);
    // The environment says what was installed.
    let pkgs = mcp_calls["environment"]["image"]["packages"].as_array().unwrap();
    assert!(pkgs.iter().any(|p| p["name"] == "mcp" && p["version"] == "2.3.0"), "{pkgs:?}");
    assert!(mcp_calls["environment"]["runtime"]["version"].as_str().unwrap().starts_with("3.11."));
    assert!(mcp_calls["environment"]["image"]["system_packages"].as_array().unwrap().len() > 50);
    assert_eq!(mcp_calls["environment"]["image"]["base"]["rootfs_sha256"].as_str().unwrap().len(), 64);
    assert!(mcp_calls["metrics"]["memory"]["after_initialize"]["rss_bytes"].as_u64().unwrap() > 10 << 20);

    let second = run_quickstart(results.path(), "second");
    assert_eq!(second.code, 0, "stderr:\n{}", second.stderr);
    assert!(!second.stderr.contains("building "), "the second run builds nothing:\n{}", second.stderr);
    assert!(!second.stderr.contains("bootstrapping"), "{}", second.stderr);
    assert!(second.stderr.contains("cache hit, no build"), "{}", second.stderr);
    assert!(second.stdout.contains("every image was a cache hit"), "{}", second.stdout);
    // Each run has its own random order: the same cells, matched by id.
    let by_id2: BTreeMap<String, &Value> =
        second.records.iter().map(|r| (r["cell"]["id"].as_str().unwrap().to_string(), r)).collect();
    assert_eq!(by_id.keys().collect::<Vec<_>>(), by_id2.keys().collect::<Vec<_>>());
    for (a, b) in by_id.values().zip(by_id2.values()) {
        assert_eq!(a["cell"]["id"], b["cell"]["id"]);
        assert_eq!(
            a["env_hash"], b["env_hash"],
            "same software, same host: same env_hash for {}",
            a["cell"]["id"]
        );
    }

    // The report reads the records back.
    let out = Command::new(BIN)
        .arg("report")
        .arg(results.path().join("quickstart").join("second"))
        .arg("--json")
        .output()
        .unwrap();
    assert!(out.status.success());
    let rows: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(rows.as_array().unwrap().len(), 2);

    // Nothing of the two runs is left in the engine (whatever other labs on the host run).
    for run_id in ["first", "second"] {
        let label = format!("label=org.benchlab.run={run_id}");
        let left = Command::new("docker").args(["ps", "-aq", "--filter", &label]).output().unwrap();
        assert!(String::from_utf8_lossy(&left.stdout).trim().is_empty(), "run {run_id} left containers");
    }
}

/// The engine's second read of a container's output: after the container exited, `output` gives
/// every line, stdout and stderr apart, the last one without its newline too; the follow stream
/// saw a prefix of it (all of it, unless the engine closed the stream early).
#[test]
fn a_containers_output_is_read_whole_after_it_exits() {
    use benchlab::backend::containers::docker::DockerEngine;
    use benchlab::backend::containers::{ContainerSpec, Engine, Network, OutputLine};
    engine_must_answer();
    // The base the lab bootstraps (already there after any earlier run: then this builds nothing).
    let base = Command::new(BIN).args(["base", "--suite", "bookworm"]).output().unwrap();
    assert!(base.status.success(), "{}", String::from_utf8_lossy(&base.stderr));
    const LINES: usize = 3000;
    let label = format!("output-{}", std::process::id());
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let engine = DockerEngine::connect().await.unwrap();
        let script = format!(
            "for i in $(seq 1 {LINES}); do echo \"out $i\"; done; echo 'err line' >&2; printf 'last, no newline'"
        );
        let spec = ContainerSpec {
            name: label.clone(),
            image: "benchlab/base:bookworm".into(),
            cmd: vec!["/bin/bash".into(), "-c".into(), script],
            env: Vec::new(),
            labels: BTreeMap::from([("org.benchlab.test".to_string(), label.clone())]),
            cpuset: String::new(),
            memory: Some(64 << 20),
            nano_cpus: None,
            network: Network::Loopback { hosts: Vec::new() },
            mounts: Vec::new(),
            sandbox: benchlab::spec::Sandbox::none(),
        };
        let id = engine.create_container(&spec).await.unwrap();
        engine.start(&id).await.unwrap();
        let (mut followed, mut whole) = (Vec::new(), Vec::new());
        let followed_ok = engine.follow(&id, &mut |l| followed.push(l)).await;
        let exit = engine.wait(&id).await;
        let whole_ok = engine.output(&id, &mut |l| whole.push(l)).await;
        engine.remove_container(&id).await.unwrap();
        followed_ok.unwrap();
        whole_ok.unwrap();
        assert_eq!(exit.unwrap().code, 0);

        let stdout = |lines: &[OutputLine]| -> Vec<String> {
            lines.iter().filter_map(|l| if let OutputLine::Stdout(t) = l { Some(t.clone()) } else { None }).collect()
        };
        let mut expected: Vec<String> = (1..=LINES).map(|i| format!("out {i}")).collect();
        expected.push("last, no newline".into());
        assert_eq!(stdout(&whole), expected);
        assert_eq!(whole.iter().filter(|l| matches!(l, OutputLine::Stderr(_))).collect::<Vec<_>>(), [
            &OutputLine::Stderr("err line".into())
        ]);
        let seen = stdout(&followed);
        assert_eq!(seen[..], expected[..seen.len()], "the follow stream saw a prefix of the output");
        if seen.len() < expected.len() {
            eprintln!("the follow stream ended {} lines early", expected.len() - seen.len());
        }
    });
}
