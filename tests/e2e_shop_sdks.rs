//! The `shop` suite (docs/TOOLS-shop.md) on real SDKs: mcp 1.30.0's FastMCP, fastmcp 4.1.3 and
//! the TS SDK 1.32.2 on Node and on Bun, each over streamable HTTP against the cell's Redis and the
//! lab's API service, with its ecosystem's async clients (images/*/servers/*-shop/). Each runs as
//! its family's `*-shop` API generation on the labelled lock `shop` (the plain lock's set plus
//! the clients), so the shop sources and clients enter only these images.
//!
//! Two tests: without an engine, every image the checkout could build before the shop servers
//! came keeps its input hash (the checkout is compared with a copy stripped of them); on the real
//! Docker engine, the four servers pass the shop gate (a checkout and its effect included) and a
//! get_cart load with every answer checked. The second fails (never skips) when no engine answers.
//! Each of the four runs a second time with `workers = 2` (ids suffixed `-2w`), in its runtime's
//! own model: uvicorn's worker processes (Python), `node:cluster` (Node and Bun).

mod common;

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use benchlab::mcp::transport::Transport;
use benchlab::recipe::{RecipeBook, ServerWant};
use common::engine_must_answer;
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_benchlab");
const ROOT: &str = env!("CARGO_MANIFEST_DIR");
const SEED: u64 = 7;

/// (server id, family, version, runtime, API generation) of the shop servers.
const SHOP_SERVERS: &[(&str, &str, &str, &str, &str)] = &[
    ("python-mcp-1.30.0", "python-mcp", "1.30.0", "cpython-bookworm", "fastmcp1-shop"),
    ("fastmcp-4.1.3", "fastmcp", "4.1.3", "cpython-bookworm", "fastmcp-shop"),
    ("ts-sdk-1.32.2-node", "ts-sdk", "1.32.2", "node-22.12.0", "mcpserver-shop"),
    ("ts-sdk-1.32.2-bun", "ts-sdk", "1.32.2", "bun-1.1.38", "mcpserver-shop"),
];

/// Whether a file or folder name belongs to the shop servers (their sources and labelled locks).
fn is_shop(name: &str) -> bool {
    name.ends_with("-shop") || name.ends_with("+shop")
}

/// Copies `images/` and `lockfiles/` without the shop servers: their folders left out, their API
/// tables and `also` entries taken out of the recipes.
fn checkout_without_shop(root: &Path, to: &Path) {
    fn copy(from: &Path, to: &Path) {
        std::fs::create_dir_all(to).unwrap();
        for e in std::fs::read_dir(from).unwrap().flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if is_shop(&name) {
                continue;
            }
            if e.path().is_dir() {
                copy(&e.path(), &to.join(&name));
            } else {
                std::fs::copy(e.path(), to.join(&name)).unwrap();
            }
        }
    }
    copy(&root.join("images"), &to.join("images"));
    copy(&root.join("lockfiles"), &to.join("lockfiles"));
    for e in std::fs::read_dir(to.join("images")).unwrap().flatten() {
        let path = e.path().join("recipe.toml");
        let Ok(text) = std::fs::read_to_string(&path) else { continue };
        let mut recipe: toml::Table = toml::from_str(&text).unwrap();
        if let Some(apis) = recipe.get_mut("api").and_then(|a| a.as_table_mut()) {
            apis.retain(|name, _| !is_shop(name));
        }
        for v in recipe.get_mut("version").and_then(|v| v.as_array_mut()).into_iter().flatten() {
            if let Some(also) = v.get_mut("also").and_then(|a| a.as_array_mut()) {
                also.retain(|a| !a.as_str().is_some_and(is_shop));
            }
        }
        std::fs::write(&path, toml::to_string(&recipe).unwrap()).unwrap();
    }
}

/// Every server want that resolves against `book`: each lock folder (plain or labelled) of
/// `lockfiles`, with each API generation of its recipe, suite and transport, and each program.
fn every_want(lockfiles: &Path, images: &Path) -> Vec<ServerWant> {
    let mut out = Vec::new();
    for fam in std::fs::read_dir(lockfiles).unwrap().flatten().filter(|e| e.path().is_dir()) {
        let family = fam.file_name().to_string_lossy().into_owned();
        let recipe: toml::Table =
            toml::from_str(&std::fs::read_to_string(images.join(&family).join("recipe.toml")).unwrap())
                .unwrap();
        let apis: Vec<Option<String>> = std::iter::once(None)
            .chain(recipe["api"].as_table().unwrap().keys().map(|k| Some(k.clone())))
            .collect();
        for folder in std::fs::read_dir(fam.path()).unwrap().flatten().filter(|e| e.path().is_dir()) {
            let name = folder.file_name().to_string_lossy().into_owned();
            let (version, rest) = name.split_once('-').unwrap();
            let (runtime, lock) = match rest.split_once('+') {
                Some((r, l)) => (r, Some(l.to_string())),
                None => (rest, None),
            };
            let base = ServerWant {
                family: family.clone(),
                version: Some(version.into()),
                runtime: Some(runtime.into()),
                lock,
                // Lets every API generation resolve on every version: the image does not depend on it.
                expect_failure: true,
                ..Default::default()
            };
            for api in &apis {
                for (suite, transport) in [
                    ("weekly", Transport::Stdio),
                    ("weekly", Transport::StreamableHttp),
                    ("bench", Transport::StreamableHttp),
                ] {
                    out.push(ServerWant { api: api.clone(), suite: suite.into(), transport, ..base.clone() });
                }
                for (program, suite) in [("seed-000", "tax"), ("seed-001", "weekly")] {
                    out.push(ServerWant {
                        api: api.clone(),
                        suite: suite.into(),
                        program: Some(program.into()),
                        ..base.clone()
                    });
                }
                let no_bytecode = ServerWant {
                    api: api.clone(),
                    suite: "tax".into(),
                    program: Some("seed-000".into()),
                    no_bytecode: true,
                    ..base.clone()
                };
                out.push(no_bytecode);
            }
        }
    }
    out
}

#[test]
fn existing_images_keep_their_input_hashes() {
    let root = Path::new(ROOT);
    let dir = tempfile::tempdir().unwrap();
    checkout_without_shop(root, dir.path());
    let before = RecipeBook::load(dir.path()).unwrap();
    let now = RecipeBook::load(root).unwrap();
    let mut compared = BTreeSet::new();
    for want in every_want(&dir.path().join("lockfiles"), &dir.path().join("images")) {
        let Ok(old) = before.resolve(&want) else { continue };
        let new = now.resolve(&want).unwrap_or_else(|e| panic!("{want:?} no longer resolves: {e}"));
        let (h_old, h_new) = (old.input_hash("base", "fetch"), new.input_hash("base", "fetch"));
        assert_eq!(h_old, h_new, "the input hash of {want:?} changed");
        let files = &new.build.as_ref().unwrap().files;
        assert!(!files.iter().any(|(n, _)| n.contains("shop")), "{want:?} holds a shop file");
        compared.insert(h_new);
    }
    eprintln!("{} distinct existing images keep their input hashes", compared.len());
    // Every plain and labelled lock of the checkout (sweeps' releases included) is compared.
    assert!(compared.len() > 150, "only {} distinct images compared", compared.len());

    // The shop images: their own sources and lock, and no existing image's hash.
    for &(id, family, version, runtime, api) in SHOP_SERVERS {
        let want = ServerWant {
            family: family.into(),
            version: Some(version.into()),
            runtime: Some(runtime.into()),
            api: Some(api.into()),
            lock: Some("shop".into()),
            suite: "shop".into(),
            transport: Transport::StreamableHttp,
            ..Default::default()
        };
        let plan = now.resolve(&want).unwrap_or_else(|e| panic!("{id}: {e}"));
        let names: Vec<&str> = plan.build.as_ref().unwrap().files.iter().map(|(n, _)| n.as_str()).collect();
        assert!(names.iter().any(|n| n.starts_with("srv/shop_http.")), "{id}: {names:?}");
        assert!(names.iter().all(|n| !n.starts_with("srv/") || n.starts_with("srv/shop")), "{id}: {names:?}");
        assert!(!compared.contains(&plan.input_hash("base", "fetch")), "{id}");
        // Without the labelled lock the shop API has no clients: it is the lock that brings them.
        let lock = names.iter().find(|n| n.ends_with("requirements.txt") || n.ends_with("package-lock.json"));
        let (_, text) =
            plan.build.as_ref().unwrap().files.iter().find(|(n, _)| Some(&n.as_str()) == lock).unwrap();
        let text = String::from_utf8_lossy(text);
        assert!(text.contains("redis"), "{id}: the lock holds no Redis client");
    }
}

/// The server workers of each shop server's twin (`<id>-2w`).
const WORKERS: u32 = 2;

/// The processes at least in a twin's tree at its load peak: the process the lab started and its
/// two workers. uvicorn: the supervisor and two worker processes (plus multiprocessing's resource
/// tracker, which its spawn context starts); Node's `cluster`: the primary and two workers; Bun
/// 1.1.38's `node:cluster` forks two worker processes under the primary too (each binding the
/// port itself with SO_REUSEPORT), so three for every runtime.
const MIN_PROCESSES: u64 = 1 + WORKERS as u64;

fn scenario() -> String {
    let servers: String = SHOP_SERVERS
        .iter()
        .flat_map(|(id, family, version, runtime, api)| {
            let entry = format!(
                "family = \"{family}\"\nversion = \"{version}\"\nruntime = \"{runtime}\"\napi = \"{api}\"\nlock = \"shop\"\ntransport = \"streamable-http\"\n"
            );
            [
                format!("[[server]]\nid = \"{id}\"\n{entry}"),
                format!("[[server]]\nid = \"{id}-2w\"\n{entry}workers = {WORKERS}\n"),
            ]
        })
        .collect();
    format!(
        r#"
name = "e2e-shop-sdks"
suite = "shop"
order = "as-written"
[placement]
mode = "split"
memory = "512MiB"
{servers}
# Redis as the scenario writes it; the API service each shop recipe declares it needs
# (`services = ["redis", "api"]`), which joins on the scenario's seed.
[[service]]
kind = "redis"
seed = {SEED}

[[workload]]
kind = "concurrency"
tool = "get_cart"
workers = 4
warmup = "1s"
duration = "3s"
idle_after = "0s"
"#
    )
}

#[test]
fn the_sdks_serve_the_shop_over_streamable_http() {
    engine_must_answer();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("e2e-shop-sdks.toml");
    std::fs::write(&file, scenario()).unwrap();
    let out = Command::new(BIN)
        .current_dir(ROOT)
        .arg("run")
        .arg(&file)
        .arg("--results")
        .arg(dir.path().join("results"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let runs = dir.path().join("results").join("e2e-shop-sdks");
    let run = std::fs::read_dir(&runs)
        .unwrap_or_else(|e| panic!("no run folder {runs:?} ({e}):\n{stderr}"))
        .next()
        .unwrap()
        .unwrap()
        .path();
    let text = std::fs::read_to_string(run.join("records.jsonl")).unwrap();
    let recs: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let expected_seed = benchlab::mcp::shop::seed_sha256(&benchlab::mcp::shop::dataset(SEED));
    for r in &recs {
        let id = r["cell"]["server"]["id"].as_str().unwrap_or("?");
        let load = &r["metrics"]["load"];
        eprintln!(
            "{id:<23} {:<7} {:>9.1} req/s  p50 {:>7.3} ms  ok {}  failed {}  processes at peak {}",
            r["status"].as_str().unwrap_or("?"),
            load["throughput_rps"].as_f64().unwrap_or(f64::NAN),
            load["latency"]["summary"]["p50_ms"].as_f64().unwrap_or(f64::NAN),
            load["ok"],
            load["failed"],
            r["metrics"]["memory"]["under_load"]["peak_during"]["processes"],
        );
    }
    assert_eq!(recs.len(), 2 * SHOP_SERVERS.len(), "{stderr}");
    let twins = SHOP_SERVERS.iter().map(|&(id, f, v, rt, api)| (format!("{id}-2w"), f, v, rt, api, WORKERS));
    let all = SHOP_SERVERS.iter().map(|&(id, f, v, rt, api)| (id.to_string(), f, v, rt, api, 1)).chain(twins);
    for (id, family, version, runtime, api, workers) in all {
        let id = id.as_str();
        let r = recs
            .iter()
            .find(|r| r["cell"]["server"]["id"] == id)
            .unwrap_or_else(|| panic!("{id}: no record"));
        assert_eq!(r["status"], "ok", "{id}: {}\n{stderr}", r["failure"]);
        let server = &r["cell"]["server"];
        assert_eq!(server["family"], family, "{id}");
        assert_eq!(server["sdk_version"], version, "{id}");
        assert_eq!(server["runtime"], runtime, "{id}");
        assert_eq!(server["api"], api, "{id}");
        assert!(server["source"]["file"].as_str().unwrap().contains("-shop/shop_http."), "{server}");
        let load = &r["metrics"]["load"];
        assert!(load["ok"].as_u64().unwrap() > 0, "{id}: {load}");
        assert_eq!(load["failed"], 0, "{id}: {load}");
        for s in r["metrics"]["services"].as_array().unwrap() {
            assert_eq!(s["seed_sha256"], expected_seed.as_str(), "{id}: {s}");
        }
        let declared: Vec<(&str, Option<&str>)> = r["cell"]["services"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| (s["name"].as_str().unwrap(), s["declared_by"].as_str()))
            .collect();
        let by = format!("the recipe of {family}, [api.{api}]");
        assert_eq!(declared, [("redis", None), ("api", Some(by.as_str()))], "{id}");
        assert_eq!(r["metrics"]["services"].as_array().unwrap().len(), 2, "{id}");
        let processes = r["metrics"]["memory"]["under_load"]["peak_during"]["processes"].as_u64();
        if workers > 1 {
            assert_eq!(server["workers"], workers, "{id}: {server}");
            assert!(
                processes.is_some_and(|p| p >= MIN_PROCESSES),
                "{id}: {processes:?} processes at peak, not {MIN_PROCESSES}+"
            );
        }
    }
    assert!(out.status.success(), "the run failed:\n{stderr}");
}
