//! Backing services on the real Docker engine: a Redis (Debian's redis-server), the lab's API
//! service and a PostgreSQL (Debian's postgresql-15) beside the built-in null server serving the
//! `shop` suite. Four servers in one run share the scenario's services: the gate of each writes
//! (a checkout) and reads its effect, so the later ones pass only if the services were fresh and
//! seeded for each; one answers wrong totals and must fail the gate; one runs two workers. Each
//! runs a get_cart load and iterations of a mix (a session per iteration, each step timed). A
//! second run's API service exits after 40 requests mid-cell: the cell fails as `service`,
//! naming it, and nothing is left running. Fails (never skips) when no engine answers.

mod common;

use std::process::Command;

use common::engine_must_answer;
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_benchlab");
const ROOT: &str = env!("CARGO_MANIFEST_DIR");
const SEED: u64 = 7;

/// Debian's PostgreSQL 15 beside them (no shop tool reads it: it is there to be started, seeded
/// and measured).
const POSTGRES: &str = "[[service]]\nkind = \"postgres\"\nseed = 7\n";

/// Iterations as k6 drives MCP servers: a session per iteration, five calls of a weighted mix.
const SESSIONS: &str = r#"[[workload]]
kind = "concurrency"
name = "sessions"
lifecycle = "iteration"
mix = { get_cart = 3, search_products = 1, get_stock = 1 }
session_calls = 5
workers = 4
warmup = "1s"
duration = "4s"
idle_after = "0s"
"#;

fn scenario(name: &str, servers: &str, api_fault: Option<&str>) -> String {
    let fault = api_fault.map(|f| format!("fault = \"{f}\"\n")).unwrap_or_default();
    // The dying service needs one workload and no database.
    let sessions = if api_fault.is_none() { SESSIONS } else { "" };
    let postgres = if api_fault.is_none() { POSTGRES } else { "" };
    format!(
        r#"
name = "{name}"
suite = "shop"
order = "as-written"
[placement]
mode = "split"
memory = "512MiB"
{servers}
[[service]]
kind = "redis"
seed = {SEED}
[[service]]
kind = "api"
seed = {SEED}
{fault}
{postgres}
[[workload]]
kind = "concurrency"
tool = "get_cart"
workers = 4
warmup = "1s"
duration = "4s"
idle_after = "0s"
{sessions}
"#
    )
}

fn server(id: &str, fault: Option<&str>) -> String {
    let env = fault.map(|f| format!("env = {{ BENCHLAB_NULL_FAULT = \"{f}\" }}\n")).unwrap_or_default();
    format!("[[server]]\nid = \"{id}\"\nfamily = \"benchlab-null\"\ntransport = \"streamable-http\"\n{env}")
}

/// The floor server as two workers (threads with a listener each on one port, SO_REUSEPORT).
const TWO_WORKERS: &str = "[[server]]\nid = \"threads\"\nfamily = \"benchlab-null\"\ntransport = \"streamable-http\"\nworkers = 2\n";

/// Runs a scenario; returns the run's output, records and run id.
fn run(name: &str, text: &str, dir: &std::path::Path) -> (std::process::Output, Vec<Value>, String) {
    let file = dir.join(format!("{name}.toml"));
    std::fs::write(&file, text).unwrap();
    let out = Command::new(BIN)
        .current_dir(ROOT)
        .arg("run")
        .arg(&file)
        .arg("--results")
        .arg(dir.join("results"))
        .output()
        .unwrap();
    let runs = dir.join("results").join(name);
    let run = std::fs::read_dir(&runs)
        .unwrap_or_else(|e| panic!("no run folder {runs:?} ({e}):\n{}", String::from_utf8_lossy(&out.stderr)))
        .next()
        .unwrap()
        .unwrap()
        .path();
    let text = std::fs::read_to_string(run.join("records.jsonl")).unwrap();
    let recs = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    (out, recs, run.file_name().unwrap().to_string_lossy().into_owned())
}

/// Containers and volumes the run left behind (by its label).
fn leftovers(run_id: &str) -> String {
    let label = format!("label=org.benchlab.run={run_id}");
    let ps = Command::new("docker").args(["ps", "-aq", "--filter", &label]).output().unwrap();
    let vols = Command::new("docker").args(["volume", "ls", "-q", "--filter", &label]).output().unwrap();
    format!("{}{}", String::from_utf8_lossy(&ps.stdout).trim(), String::from_utf8_lossy(&vols.stdout).trim())
}

#[test]
fn services_are_seeded_reset_between_servers_measured_and_a_dead_one_fails_its_cell() {
    engine_must_answer();
    let dir = tempfile::tempdir().unwrap();
    let schema: Value = serde_json::from_str(benchlab::record::SCHEMA).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let servers = [
        server("first", None),
        server("second", None),
        server("wrong", Some("shop_wrong")),
        TWO_WORKERS.into(),
    ]
    .concat();
    let (out, recs, run_id) = run("e2e-services", &scenario("e2e-services", &servers, None), dir.path());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(recs.len(), 8, "{stderr}");
    let by = |id: &str| recs.iter().find(|r| r["cell"]["id"] == format!("{id}/concurrency-w4")).expect(id);
    let expected_seed = benchlab::mcp::shop::seed_sha256(&benchlab::mcp::shop::dataset(SEED));
    for id in ["first", "second", "threads"] {
        let r = by(id);
        assert_eq!(r["status"], "ok", "{id}: {}\n{stderr}", r["failure"]);
        assert!(validator.is_valid(r), "{id} does not match the record schema");
        let services = r["metrics"]["services"].as_array().unwrap();
        assert_eq!(services.len(), 3, "{id}");
        for s in services {
            assert_eq!(s["seed_sha256"], expected_seed.as_str(), "{id}: {s}");
            assert!(s["items"].as_u64().unwrap() > 0, "{id}: {s}");
            assert!(s["ready_ms"].as_f64().unwrap() >= 0.0);
            assert!(s["memory_peak_bytes"].as_u64().unwrap() > 1 << 20, "{id}: {s}");
            assert!(s["window_s"].as_f64().unwrap() > 4.0, "{id}: {s}");
            assert!(s.get("exited").is_none(), "{id}: {s}");
        }
        // Under load every call reads Redis and the API: both spend CPU.
        for s in services.iter().filter(|s| s["name"] != "postgres") {
            assert!(s["cpu_s"].as_f64().unwrap() > 0.01, "{id}: {s}");
        }
        let env = r["environment"]["services"].as_array().unwrap();
        let redis = env.iter().find(|s| s["kind"] == "redis").unwrap();
        assert!(redis["version"].as_str().unwrap().starts_with("5:7."), "{redis}");
        let pg = env.iter().find(|s| s["kind"] == "postgres").unwrap();
        assert!(pg["version"].as_str().unwrap().starts_with("15."), "{pg}");
        // 120 products and their 120 stock rows, loaded before the server started.
        let pg_metrics = services.iter().find(|s| s["name"] == "postgres").unwrap();
        assert_eq!(pg_metrics["items"], 240, "{pg_metrics}");
        let api = env.iter().find(|s| s["kind"] == "api").unwrap();
        assert_eq!(api["version"], env!("CARGO_PKG_VERSION"));
        assert_eq!(r["cell"]["services"].as_array().unwrap().len(), 3);
        let placement = &r["cell"]["placement"];
        assert!(placement["services_cpus"].is_string(), "{placement}");
        assert!(r["metrics"]["load"]["ok"].as_u64().unwrap() > 100, "{}", r["metrics"]["load"]);
    }
    // Iterations: every step has its histogram, and the counts agree with each other.
    for id in ["first", "second"] {
        let r = recs.iter().find(|r| r["cell"]["id"] == format!("{id}/sessions-w4")).unwrap();
        assert_eq!(r["status"], "ok", "{id}: {}", r["failure"]);
        assert!(validator.is_valid(r), "{id}/sessions does not match the record schema");
        let load = &r["metrics"]["load"];
        let steps = load["steps"].as_object().unwrap();
        let count = |k: &str| steps[k]["summary"]["count"].as_u64().unwrap_or_else(|| panic!("{k}: {load}"));
        let iterations = load["iterations"].as_u64().unwrap();
        assert!(iterations > 10, "{load}");
        assert_eq!(count("session"), iterations);
        // Every completed iteration made its five calls; steps of cut-short iterations count too.
        let tools = count("get_cart") + count("search_products") + count("get_stock");
        assert_eq!(tools, load["ok"].as_u64().unwrap());
        assert!(tools >= 5 * iterations, "{tools} calls for {iterations} iterations");
        assert!(count("initialize") >= iterations && count("tools/list") >= iterations);
        // The mix's weights: get_cart three times as often as each other tool (give or take an
        // iteration's worth at the window's edges).
        let (cart, search) = (count("get_cart") as f64, count("search_products") as f64);
        assert!((cart / search - 3.0).abs() < 0.5, "get_cart {cart} vs search_products {search}");
        // A session's p50 is longer than any one of its steps' p50.
        let p50 = |k: &str| steps[k]["summary"]["p50_ms"].as_f64().unwrap();
        assert!(p50("session") > p50("get_cart") && p50("session") > p50("initialize"));
    }
    // Two workers: both bound the port (or the server would have exited), the record says how
    // many, and on this two-CPU host that they shared the server's one CPU.
    let threads = by("threads");
    assert_eq!(threads["cell"]["server"]["workers"], 2);
    let deviations = threads["environment"]["deviations"].to_string();
    if benchlab::placement::available_cpus().len() < 3 {
        assert!(deviations.contains("2 server workers on 1 CPU(s)"), "{deviations}");
    } else {
        assert_eq!(
            threads["cell"]["placement"]["server_cpus"].as_str().unwrap().len(),
            3,
            "two CPUs: \"a-b\""
        );
    }
    let wrong = by("wrong");
    assert_eq!(wrong["status"], "failed");
    assert_eq!(wrong["failure"]["reason"], "wrong_result", "{}", wrong["failure"]);
    assert_eq!(leftovers(&run_id), "", "run {run_id} left containers or volumes");

    // The API service dies after 40 requests, in the middle of the load.
    let (_, recs, run_id) = run(
        "e2e-services-dies",
        &scenario("e2e-services-dies", &server("victim", None), Some("exit@40")),
        dir.path(),
    );
    assert_eq!(recs.len(), 1);
    let r = &recs[0];
    assert_eq!(r["status"], "failed");
    assert_eq!(r["failure"]["reason"], "service", "{}", r["failure"]);
    let detail = r["failure"]["detail"].as_str().unwrap();
    assert!(detail.contains("service \"api\" exited with code 3"), "{detail}");
    let api =
        r["metrics"]["services"].as_array().unwrap().iter().find(|s| s["name"] == "api").unwrap().clone();
    assert_eq!(api["exited"], 3, "{api}");
    assert!(validator.is_valid(r), "the failed record does not match the schema");
    assert_eq!(leftovers(&run_id), "", "run {run_id} left containers or volumes");
}

/// A program service of the scenario's own: Debian's redis-server as a benchmark would bring it
/// (its command, port, a probe command, a seed command and its own limits).
fn program_scenario(name: &str, service: &str) -> String {
    format!(
        r#"
name = "{name}"
[timeouts]
startup_ms = 4000
[[server]]
id = "null"
family = "benchlab-null"
transport = "streamable-http"
[[service]]
kind = "program"
name = "cache"
packages = ["redis-server"]
command = ["/usr/bin/redis-server", "--port", "6390", "--save", "", "--appendonly", "no", "--dir", "/tmp"]
port = 6390
cpus = 0.5
memory = "128MiB"
{service}
[[workload]]
kind = "concurrency"
tool = "echo"
workers = 2
warmup = "0s"
duration = "2s"
idle_after = "0s"
"#
    )
}

#[test]
fn a_program_service_is_readied_seeded_and_measured_and_one_never_ready_or_unseeded_fails_its_cell() {
    engine_must_answer();
    let dir = tempfile::tempdir().unwrap();
    let schema: Value = serde_json::from_str(benchlab::record::SCHEMA).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let good = "ready = { command = [\"/usr/bin/redis-cli\", \"-p\", \"6390\", \"ping\"] }\nseed_command = [\"/usr/bin/redis-cli\", \"-p\", \"6390\", \"set\", \"greeting\", \"hello\"]\n";
    let (out, recs, run_id) = run("e2e-program", &program_scenario("e2e-program", good), dir.path());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(recs.len(), 1, "{stderr}");
    let r = &recs[0];
    assert_eq!(r["status"], "ok", "{}\n{stderr}", r["failure"]);
    assert!(validator.is_valid(r), "the record does not match the schema");
    let m = &r["metrics"]["services"][0];
    assert_eq!(m["name"], "cache", "{m}");
    // What its seed command printed is what the record's hash is of.
    let said = benchlab::hash::sha256_hex(b"OK\n");
    assert_eq!(m["seed_sha256"], said.as_str(), "{m}");
    assert!(m["ready_ms"].as_f64().unwrap() >= 0.0, "{m}");
    assert!(m["memory_peak_bytes"].as_u64().unwrap() > 1 << 20, "{m}");
    assert!(m["window_s"].as_f64().unwrap() > 1.0, "{m}");
    let env = &r["environment"]["services"][0];
    assert_eq!(env["kind"], "program", "{env}");
    assert!(env["version"].as_str().unwrap().starts_with("redis-server 5:7."), "{env}");
    let spec = &r["cell"]["services"][0]["program"];
    assert_eq!(spec["memory_bytes"], 128 << 20, "{spec}");
    assert_eq!(spec["cpus"], 0.5, "{spec}");
    assert_eq!(leftovers(&run_id), "", "run {run_id} left containers or volumes");

    // Redis answers no HTTP: an http probe never passes, and the cell fails at the start-up limit.
    let (_, recs, run_id) = run(
        "e2e-program-never",
        &program_scenario("e2e-program-never", "ready = { http = \"/health\" }\n"),
        dir.path(),
    );
    let r = &recs[0];
    assert_eq!(r["status"], "failed");
    assert_eq!(r["failure"]["reason"], "service", "{}", r["failure"]);
    let detail = r["failure"]["detail"].as_str().unwrap();
    assert!(detail.contains("service \"cache\" (program) was not ready within 4000 ms"), "{detail}");
    assert!(detail.contains("service-probe http http://127.0.0.1:6390/health"), "{detail}");
    assert!(validator.is_valid(r), "the failed record does not match the schema");
    assert_eq!(leftovers(&run_id), "", "run {run_id} left containers or volumes");

    // A seed command that fails: its exit code and what it said, and no measurement.
    let failing = "seed_command = [\"/bin/sh\", \"-c\", \"echo cannot load the catalogue >&2; exit 3\"]\n";
    let (_, recs, run_id) =
        run("e2e-program-seed", &program_scenario("e2e-program-seed", failing), dir.path());
    let r = &recs[0];
    assert_eq!(r["status"], "failed");
    assert_eq!(r["failure"]["reason"], "service", "{}", r["failure"]);
    let detail = r["failure"]["detail"].as_str().unwrap();
    assert!(detail.contains("could not be seeded: its seed command"), "{detail}");
    assert!(detail.contains("exited with code 3: cannot load the catalogue"), "{detail}");
    assert!(r["metrics"]["load"].is_null(), "{}", r["metrics"]["load"]);
    assert!(validator.is_valid(r), "the failed record does not match the schema");
    assert_eq!(leftovers(&run_id), "", "run {run_id} left containers or volumes");
}
