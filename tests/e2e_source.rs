//! Bring your own benchmark, end to end on the real Docker engine, from a git repository the test
//! makes (no network: its URL is served by `--source-mirror`): a server with its own Dockerfile
//! (`FROM python:3.11-slim`, mapped by a `[source.base]` rule to a Debian bookworm base) and a
//! stdlib MCP server on its own port and path, a MockServer-style expectations file in the same
//! repository, a compose file that `import compose` turns into a skeleton, and a scenario with the
//! benchmark's own suite, a CPU quota, and a k6-style load (stages, think time, a flow of
//! sessions). The run's record says what was built from what and how it deviates; bad input (an
//! unknown tool in a flow, a commit the mirror lacks, a FROM without a rule) is refused at its
//! place with exit 2 and nothing recorded. Fails (never skips) when no engine answers.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::{engine_must_answer, records_in};
use sha2::{Digest, Sha256};

const BIN: &str = env!("CARGO_BIN_EXE_benchlab");
const ROOT: &str = env!("CARGO_MANIFEST_DIR");
const URL: &str = "https://example.invalid/bench/byo";
const SERVER: &str = include_str!("fixtures/source-server/server.py");
const EXPECTATIONS: &str = r#"[{"httpRequest": {"method": "GET", "path": "/api"},
 "httpResponse": {"statusCode": 200, "body": "{\"ok\": true, \"items\": 3}"}}]"#;
/// A service of the benchmark's own, built from its folder's Dockerfile: an HTTP counter with a
/// health route and a seed route.
const COUNTER: &str = "import http.server\nseeded = []\nclass H(http.server.BaseHTTPRequestHandler):\n    def do_GET(self):\n        if self.path == '/seed':\n            seeded.append(3)\n        body = {'/health': 'ok', '/seed': 'seeded %d' % sum(seeded)}.get(self.path)\n        self.send_response(200 if body else 404)\n        self.end_headers()\n        self.wfile.write((body or '').encode())\nhttp.server.HTTPServer(('127.0.0.1', 9100), H).serve_forever()\n";
const COMPOSE: &str = "services:\n  py:\n    build: ./server\n    ports:\n      - \"9000:9000\"\n    environment:\n      - SERVER_TYPE=py\n    deploy:\n      resources:\n        limits:\n          cpus: \"0.5\"\n          memory: 512M\n  mock-api:\n    image: mockserver/mockserver:latest\n    environment:\n      - MOCKSERVER_INITIALIZATION_JSON_PATH=/config/mockserver.json\n    volumes:\n      - ./mock/expectations.json:/config/mockserver.json:ro\n";

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .current_dir(dir)
        .args(["-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"])
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// The benchmark's repository: its server folder, its mock's expectations, its compose file.
fn repository(dir: &Path) -> String {
    let files = [
        (
            "server/Dockerfile",
            "FROM python:3.11-slim\nWORKDIR /srv/app\nCOPY server.py .\nEXPOSE 9000\nCMD [\"python3\", \"server.py\"]\n",
        ),
        ("server/server.py", SERVER),
        ("mock/expectations.json", EXPECTATIONS),
        ("counter/Dockerfile", "FROM python:3.11-slim\nWORKDIR /srv/counter\nCOPY counter.py .\nCMD [\"python3\", \"counter.py\"]\n"),
        ("counter/counter.py", COUNTER),
        ("docker-compose.yml", COMPOSE),
    ];
    for (p, c) in files {
        std::fs::create_dir_all(dir.join(p).parent().unwrap()).unwrap();
        std::fs::write(dir.join(p), c).unwrap();
    }
    git(dir, &["init", "-q", "-b", "main"]);
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-q", "-m", "the benchmark"]);
    git(dir, &["rev-parse", "HEAD"])
}

fn scenario(commit: &str, flow: &str) -> String {
    format!(
        r#"name = "byo"
repeats = 1

[[suite]]
name = "byo"
[[suite.tool]]
name = "add"
args = {{ a = 2, b = 3 }}
check = {{ path = "/sum", equals = 5 }}
[[suite.tool]]
name = "fetch"
args = {{ url = "http://mock-api:1080/api" }}
check = {{ path = "/body/items", equals = 3 }}

[placement]
memory = "512MiB"
cpus = 0.5

[source]
repository = {{ git = "{URL}", commit = "{commit}" }}

[source.base]
"python:3.11-slim" = {{ suite = "bookworm", packages = ["python3"] }}

[[server]]
id = "py"
source = {{ git = "{URL}", commit = "{commit}", path = "server" }}
transport = "streamable-http"
http_path = "/rpc"
env = {{ SERVER_TYPE = "py" }}

[[service]]
kind = "mock"
name = "mock-api"
expectations = "source:mock/expectations.json"

[[service]]
kind = "program"
name = "counter"
source = {{ git = "{URL}", commit = "{commit}", path = "counter" }}
port = 9100
ready = {{ http = "/health" }}
seed_command = ["python3", "-c", "import urllib.request as u; print(u.urlopen('http://127.0.0.1:9100/seed').read().decode())"]

[[workload]]
name = "k6"
kind = "concurrency"
stages = [{{ duration = "1s", target = 3 }}, {{ duration = "2s", target = 3 }}, {{ duration = "1s", target = 0 }}]
think = "20ms"
flow = {flow}
idle_after = "0s"
"#
    )
}

struct Lab {
    dir: tempfile::TempDir,
    commit: String,
}

impl Lab {
    fn new() -> Lab {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("repo")).unwrap();
        let commit = repository(&dir.path().join("repo"));
        Lab { dir, commit }
    }

    fn write(&self, name: &str, text: &str) -> PathBuf {
        let p = self.dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    fn lab(&self, args: &[&str]) -> Output {
        Command::new(BIN)
            .current_dir(ROOT)
            .args(args)
            .arg("--source-mirror")
            .arg(format!("{URL}={}", self.dir.path().join("repo").display()))
            .output()
            .unwrap()
    }
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn a_benchmark_from_its_own_repository_is_built_served_loaded_and_recorded() {
    engine_must_answer();
    let lab = Lab::new();

    // The compose file imports to a skeleton that takes its server by source, port and limits.
    let skeleton = lab.dir.path().join("skeleton.toml");
    let out = Command::new(BIN)
        .args(["import", "compose"])
        .arg(lab.dir.path().join("repo/docker-compose.yml"))
        .args(["--git", URL, "--commit", &lab.commit, "-o"])
        .arg(&skeleton)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let text = std::fs::read_to_string(&skeleton).unwrap();
    assert!(text.contains("path = \"server\""), "{text}");
    assert!(text.contains("port = 9000") && text.contains("cpus = 0.5"), "{text}");
    assert!(text.contains("expectations = \"source:mock/expectations.json\""), "{text}");

    let flow = r#"[["add"], ["fetch"], ["tools/list"]]"#;
    let path = lab.write("byo.toml", &scenario(&lab.commit, flow));
    let results = lab.dir.path().join("results");
    let out = lab.lab(&["run", path.to_str().unwrap(), "--results", results.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let run = std::fs::read_dir(results.join("byo")).unwrap().next().unwrap().unwrap().path();
    let recs = records_in(&run);
    assert_eq!(recs.len(), 1);
    let r = &recs[0];
    assert_eq!(r["status"], "ok", "{}", r["failure"]);

    // What was built, from what.
    let server = &r["cell"]["server"];
    assert_eq!(server["family"], "source");
    let built = &server["built_from"];
    assert_eq!(built["source"]["origin"]["git"]["url"], URL);
    assert_eq!(built["source"]["origin"]["git"]["commit"], lab.commit.as_str(), "the full commit");
    assert_eq!(built["source"]["path"], "server");
    assert_eq!(built["files"], 2);
    assert_eq!(r["cell"]["http"]["port"], 9000, "the Dockerfile's one EXPOSE");
    assert_eq!(r["cell"]["http"]["path"], "/rpc");
    assert_eq!(r["environment"]["placement"]["cpu_quota"], 0.5);
    // The service built from its own folder: its Dockerfile's command, readied over HTTP and
    // seeded by its command, whose answer the record hashes.
    let counter =
        r["metrics"]["services"].as_array().unwrap().iter().find(|s| s["name"] == "counter").unwrap();
    let said = format!("{:x}", Sha256::digest(b"seeded 3\n"));
    assert_eq!(counter["seed_sha256"], said.as_str(), "{counter}");
    let spec = r["cell"]["services"].as_array().unwrap().iter().find(|s| s["name"] == "counter").unwrap();
    assert_eq!(spec["program"]["command"], serde_json::json!(["python3", "counter.py"]), "{spec}");
    let env =
        r["environment"]["services"].as_array().unwrap().iter().find(|s| s["name"] == "counter").unwrap();
    assert!(env["version"].as_str().unwrap().starts_with(&format!("built from {URL} at ")), "{env}");
    // Its runtime: what its base rule installed, with the version the image holds.
    let runtime = r["environment"]["runtime"]["version"].as_str().unwrap();
    assert!(runtime.starts_with("python3 3.11."), "{runtime}");
    let deviations: Vec<&str> =
        r["environment"]["deviations"].as_array().unwrap().iter().map(|d| d.as_str().unwrap()).collect();
    assert!(
        deviations.iter().any(|d| d.starts_with(
            "Dockerfile line 1: `FROM python:3.11-slim` built on a lab base instead (Debian bookworm with python3)"
        )),
        "{deviations:?}"
    );
    // The mock served the repository's own file, and its answers were checked through the server.
    let sha = hex::encode(Sha256::digest(EXPECTATIONS.as_bytes()));
    assert_eq!(r["cell"]["services"][0]["expectations_sha256"], sha.as_str());

    // The load ran its stages and flow: every step is there, and the counts agree.
    let load = &r["metrics"]["load"];
    let steps = load["steps"].as_object().unwrap();
    for s in ["add", "fetch", "tools/list", "initialize", "session", "http"] {
        assert!(steps.contains_key(s), "no step {s}: {:?}", steps.keys().collect::<Vec<_>>());
    }
    assert!(load["peak_vus"].as_u64().unwrap() <= 3);
    assert_eq!(load["failed"], 0);
    let count = |s: &str| steps[s]["summary"]["count"].as_u64().unwrap();
    let sessions = count("initialize");
    assert!(count("add") + count("fetch") + count("tools/list") <= sessions, "one step a session");
    // Every session is initialize, initialized and its one step (a stateless server: no DELETE).
    assert!(load["http_requests"].as_u64().unwrap() >= 3 * count("add"));
}

#[test]
fn bad_input_is_refused_at_its_place_before_anything_is_built_or_recorded() {
    let lab = Lab::new();
    let results = lab.dir.path().join("results");
    let run = |text: &str| {
        let path = lab.write("byo.toml", text);
        lab.lab(&["run", path.to_str().unwrap(), "--results", results.to_str().unwrap()])
    };
    // A tool the suite lacks, in the flow: at its place.
    let text = scenario(&lab.commit, r#"[["add"], ["subtract"]]"#);
    let line = text.lines().position(|l| l.starts_with("flow = ")).unwrap() + 1;
    let out = run(&text);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(&format!("byo.toml:{line}:")) && stderr(&out).contains("subtract"),
        "{}",
        stderr(&out)
    );

    // A commit the mirror lacks: at the server's `commit`.
    let text = scenario(&lab.commit, r#"[["add"]]"#).replacen(&lab.commit, &"e".repeat(40), 2);
    let out = run(&text);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("is not in the mirror"), "{}", stderr(&out));

    // A FROM without a rule: what to write, at the server's `source`.
    let text =
        scenario(&lab.commit, r#"[["add"]]"#).replace("\"python:3.11-slim\" = ", "\"python:3.12-slim\" = ");
    let line = text.lines().position(|l| l.starts_with("source = ")).unwrap() + 1;
    let out = run(&text);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains(&format!("byo.toml:{line}:")), "{err}");
    assert!(err.contains("no [source.base] rule for `FROM python:3.11-slim`"), "{err}");
    assert!(!results.exists(), "nothing was recorded");
}
