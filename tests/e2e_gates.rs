//! End to end on the real Docker engine, for every recipe: every stdio server passes the
//! correctness gate of every suite it serves (scenarios/gate-all.toml), and every HTTP server
//! variant on one runtime per language passes it over its transports and is measured
//! (scenarios/gate-http.toml; the committed run covers every runtime). The images are
//! tests/e2e_images.rs's (built first, by scripts/test.sh; a missing one is built here). The two
//! gates run one after the other, so gate-http's short measured loads share the host with
//! nothing of the suite's. Fails (never skips) when no engine answers.

mod common;

use common::engine_must_answer;
use common::{first_run_records as records, lab_ok as lab};
use std::process::Command;

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_benchlab");
const ROOT: &str = env!("CARGO_MANIFEST_DIR");

#[test]
fn every_stdio_server_passes_the_gate_and_every_http_variant_is_measured() {
    engine_must_answer();
    let results = tempfile::tempdir().unwrap();
    let out = Command::new(BIN)
        .current_dir(ROOT)
        .args(["run", "scenarios/gate-all.toml", "--results"])
        .arg(results.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "gate-all failed:\n{stderr}");
    let recs = records(&results.path().join("gate-all"));
    assert_eq!(recs.len(), 46);
    for r in &recs {
        let id = r["cell"]["id"].as_str().unwrap();
        if r["cell"]["expect"] == "failure" {
            // mcp 2.3.0's stdio server on PyPy 7.3.19 (fcntl.F_DUPFD_CLOEXEC is missing).
            assert!(id.starts_with("python-mcp-2.3.0-pypy-trixie-"), "{id}");
            assert_eq!(r["status"], "failed", "{id}");
            let why = r["failure"]["detail"].as_str().unwrap_or("");
            assert!(why.contains("F_DUPFD_CLOEXEC"), "{id} failed otherwise: {why}");
            continue;
        }
        assert_eq!(r["status"], "ok", "{id}: {}", r["failure"]);
        let runtime = r["environment"]["runtime"]["version"].as_str().unwrap();
        let wanted = r["cell"]["server"]["runtime"].as_str().unwrap();
        // The runtime actually installed is the one the recipe names.
        match wanted {
            "cpython-bookworm" => assert!(runtime.starts_with("3.11."), "{wanted}: {runtime}"),
            "cpython-trixie" => assert!(runtime.starts_with("3.13."), "{wanted}: {runtime}"),
            // Debian trixie's pypy3: PyPy 7.3 implementing Python 3.11.
            "pypy-trixie" => {
                assert!(
                    runtime.starts_with("7.3.") && runtime.contains("(Python 3.11."),
                    "{wanted}: {runtime}"
                );
                assert_eq!(r["environment"]["runtime"]["name"], "pypy");
            }
            // The compiler that built the static binary: trixie's rustc-web, 1.88 or newer (the
            // least rmcp's macros build with).
            "rustc-web-trixie" => {
                let minor: u32 = runtime.split('.').nth(1).and_then(|m| m.parse().ok()).unwrap_or(0);
                assert!(runtime.starts_with("1.") && minor >= 88, "{wanted}: {runtime}");
                assert_eq!(r["environment"]["runtime"]["name"], "rust");
            }
            other => assert!(other.ends_with(runtime), "{other}: {runtime}"),
        }
        assert!(r["cell"]["server"]["source"]["loc"].as_u64().unwrap() > 5);
    }

    // Every HTTP variant (transport x reply x session x suite) on CPython 3.11, Node 22, Bun and rmcp,
    // with a short load: the gate passes and calls are measured, except legacy SSE on Bun 1.1.38,
    // which the scenario expects to fail (its node:http withholds the endpoint event).
    let only = [
        "--only",
        "*-cpython-bookworm-*",
        "--only",
        "*-node-22.12.0-*",
        "--only",
        "*-bun-1.1.38-*",
        "--only",
        "*-rustc-web-trixie-*",
    ];
    // The cells those patterns pick, as `plan` counts them: the run must record every one.
    let plan = lab(&[&["plan", "scenarios/gate-http.toml", "--json"][..], &only].concat(), "plan gate-http");
    let planned = serde_json::from_slice::<Value>(&plan.stdout).unwrap()["cells"].as_u64().unwrap() as usize;
    let http = Command::new(BIN)
        .current_dir(ROOT)
        // A 1 s window, as the committed gate-http run's: at 0.4 s, one pause of a Gradio REST
        // route (its calls take about 10 ms) left a window without a completed call, on a host
        // with nothing but the soak beside it (2026-12-07).
        .args(["run", "scenarios/gate-http.toml", "--warmup", "100ms", "--duration", "1s"])
        .args(only)
        .arg("--results")
        .arg(results.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&http.stderr);
    assert!(http.status.success(), "gate-http failed:\n{stderr}");
    let recs = records(&results.path().join("gate-http"));
    assert!(planned >= 60, "{planned} HTTP cells planned");
    assert_eq!(recs.len(), planned, "HTTP cells recorded against planned");
    let mut transports = std::collections::BTreeSet::new();
    for r in &recs {
        let id = r["cell"]["id"].as_str().unwrap();
        if r["cell"]["expect"] == "failure" {
            assert!(id.contains("bun-1.1.38") && id.contains("-sse/"), "{id}");
            assert_eq!(r["status"], "failed", "{id}");
            // Listening, yet no endpoint event within the server's own 10 s start-up limit (a
            // port that never opened is retried until the limit, then fails as a crash).
            assert_eq!(r["failure"]["reason"], "startup_timeout", "{id}");
            let why = r["failure"]["detail"].as_str().unwrap_or("");
            assert!(why.starts_with("handshake: no answer within"), "{id}: {why}");
            assert_eq!(r["cell"]["timeouts"]["startup_ms"], 10_000, "{id}");
            continue;
        }
        assert_eq!(r["status"], "ok", "{id}: {}", r["failure"]);
        assert!(r["metrics"]["load"]["ok"].as_u64().unwrap() > 0, "{id}");
        transports.insert(format!(
            "{} {} {}",
            r["cell"]["transport"].as_str().unwrap(),
            r["cell"]["http"]["reply"].as_str().unwrap_or("-"),
            r["cell"]["http"]["session"].as_str().unwrap_or("-")
        ));
    }
    for t in [
        "sse - -",
        "streamable-http json stateless",
        "streamable-http sse stateful",
        "http-api sse stateless",
    ] {
        assert!(transports.contains(t), "no {t} cell among {transports:?}");
    }
}
