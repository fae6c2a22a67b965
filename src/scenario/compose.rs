//! `benchlab import compose`: a benchmark's compose file turned into a scenario skeleton, as text
//! with comments. Each service with a `build` becomes a `[[server]]` whose `source` is its build
//! context (in the benchmark's repository at a commit, or a folder beside the scenario), with its
//! environment and memory limit; each item the lab cannot take as it is written (a CPU quota,
//! ports, health checks, images from a registry, networks) gets a `# lab:` comment saying what
//! the lab does instead. Pure: compose text in, scenario text out.

use std::collections::BTreeMap;
use std::fmt::Write;

use serde_json::Value;

/// Where the skeleton's sources point.
#[derive(Debug, Clone, Default)]
pub struct ImportOptions {
    /// The scenario's `name`.
    pub name: String,
    /// The compose file as the user named it (for the header).
    pub file: String,
    /// The benchmark's repository and commit: sources become `git` ones; None: `dir` ones,
    /// relative to where the scenario will be written (`context_prefix`).
    pub git: Option<(String, String)>,
    /// Where the compose file's folder is, seen from the scenario's folder (for `dir` sources
    /// and files such as a mock's expectations), `/`-separated, empty for the same folder.
    pub context_prefix: String,
    /// The compose folder's path inside the repository (for `git` sources), empty at its top.
    pub repo_prefix: String,
}

/// Why a compose file cannot be turned into a skeleton.
#[derive(Debug, thiserror::Error)]
pub enum ComposeError {
    #[error("{file}: {message}")]
    Yaml { file: String, message: String },
    #[error("{file}: {at}: {message}")]
    At { file: String, at: String, message: String },
}

fn q(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}

fn join(prefix: &str, rel: &str) -> String {
    let rel = rel.trim_start_matches("./").trim_end_matches('/');
    let rel = if rel == "." { "" } else { rel };
    match (prefix.is_empty(), rel.is_empty()) {
        (true, _) => rel.to_string(),
        (false, true) => prefix.to_string(),
        (false, false) => format!("{prefix}/{rel}"),
    }
}

/// A compose scalar as text (`cpus: 1.0` or `"1.0"`).
fn scalar(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// Compose's memory size (`1G`, `512m`, `1gb`, bytes) as the scenario writes it (`1GiB`):
/// compose's units are binary.
fn memory(s: &str) -> Option<String> {
    let t = s.trim().to_ascii_lowercase();
    let digits = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (n, unit) = t.split_at(digits);
    let n: u64 = n.parse().ok()?;
    let unit = match unit.trim_end_matches('b') {
        "" => return Some(n.to_string()),
        "k" => "KiB",
        "m" => "MiB",
        "g" => "GiB",
        _ => return None,
    };
    Some(format!("{n}{unit}"))
}

/// A service's `environment`, as a list (`K=V`) or a map.
fn environment(v: Option<&Value>) -> BTreeMap<String, String> {
    match v {
        Some(Value::Object(m)) => m.iter().map(|(k, v)| (k.clone(), scalar(v).unwrap_or_default())).collect(),
        Some(Value::Array(a)) => a
            .iter()
            .filter_map(Value::as_str)
            .map(|kv| {
                kv.split_once('=').map_or((kv.to_string(), String::new()), |(k, v)| (k.into(), v.into()))
            })
            .collect(),
        _ => BTreeMap::new(),
    }
}

/// The strings of a list (`ports`, `volumes`, a health check's `test`).
fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array).map(|a| a.iter().filter_map(scalar).collect()).unwrap_or_default()
}

type Map = serde_json::Map<String, Value>;

/// A service's CPU and memory limits (`deploy.resources.limits`, or the older `cpus`/`mem_limit`).
fn limits(svc: &Map) -> (Option<String>, Option<String>) {
    let limits = svc.get("deploy").and_then(|d| d.pointer("/resources/limits"));
    let cpus =
        limits.and_then(|l| l.get("cpus")).and_then(scalar).or_else(|| svc.get("cpus").and_then(scalar));
    let mem = limits
        .and_then(|l| l.get("memory"))
        .and_then(scalar)
        .or_else(|| svc.get("mem_limit").and_then(scalar));
    (cpus, mem)
}

/// What the lab does instead of each item of a service it cannot take as written.
fn notes(svc: &Map) -> Vec<String> {
    let mut notes = Vec::new();
    for p in strings(svc.get("ports")) {
        notes.push(format!(
            "port {p}: nothing is published on the host; the driver reaches the container's port on the cell's loopback"
        ));
    }
    if let Some(h) = svc.get("healthcheck") {
        let test = strings(h.get("test")).join(" ");
        notes.push(format!("healthcheck `{test}`: the lab waits for the MCP handshake instead"));
    }
    for (key, instead) in [
        ("container_name", "cells name their own containers"),
        ("networks", "a cell has a network of its own, loopback only"),
        ("depends_on", "a cell's services are ready before its server starts"),
        ("restart", "a server that exits fails its cell"),
        ("platform", "images are built for this host's platform"),
    ] {
        if svc.contains_key(key) {
            notes.push(format!("`{key}`: {instead}"));
        }
    }
    notes
}

/// A service with a `build`: a `[[server]]` whose source is its build context.
fn server_block(
    out: &mut String,
    name: &str,
    svc: &Map,
    build: &Value,
    opts: &ImportOptions,
    mut notes: Vec<String>,
) -> Result<(), String> {
    let (context, dockerfile) = match build {
        Value::String(c) => (c.clone(), None),
        Value::Object(b) => (
            b.get("context").and_then(Value::as_str).unwrap_or(".").to_string(),
            b.get("dockerfile").and_then(Value::as_str).map(String::from),
        ),
        _ => return Err("is neither a path nor a map".into()),
    };
    if let Some(d) = dockerfile {
        notes.push(format!("dockerfile {d}: a source is built from the Dockerfile at its path's top"));
    }
    let source = match &opts.git {
        Some((url, commit)) => format!(
            "{{ git = {}, commit = {}, path = {} }}",
            q(url),
            q(commit),
            q(&join(&opts.repo_prefix, &context))
        ),
        None => format!("{{ dir = {} }}", q(&join(&opts.context_prefix, &context))),
    };
    let _ = writeln!(out, "\n[[server]]\nid = {}", q(name));
    let _ = writeln!(out, "source = {source}");
    let _ =
        writeln!(out, "transport = \"streamable-http\"   # lab: compose does not say; check the load script");
    if let Some(port) = container_port(svc) {
        let _ = writeln!(out, "port = {port}   # the container's side of its compose `ports`");
    }
    let _ = writeln!(out, "http_path = \"/mcp\"   # lab: compose does not say; check the load script's URL");
    let env = environment(svc.get("environment"));
    if !env.is_empty() {
        let kv: Vec<String> = env.iter().map(|(k, v)| format!("{k} = {}", q(v))).collect();
        let _ = writeln!(out, "env = {{ {} }}", kv.join(", "));
    }
    for n in notes {
        let _ = writeln!(out, "# lab: {n}");
    }
    Ok(())
}

/// The container's side of a service's first published port (`"8082:8082"` → 8082).
fn container_port(svc: &Map) -> Option<u16> {
    strings(svc.get("ports")).first()?.rsplit(':').next()?.split('/').next()?.parse().ok()
}

/// A service that runs a registry image: named, and a MockServer's expectations found among its
/// volumes for the lab's mock service.
fn image_block(
    out: &mut String,
    name: &str,
    svc: &Map,
    image: &str,
    opts: &ImportOptions,
    notes: Vec<String>,
) {
    let _ = writeln!(
        out,
        "\n# lab: service {name:?} runs the image {image}, which cannot be pulled here (no container"
    );
    let _ = writeln!(
        out,
        "# lab: registry is reached); the lab starts what it can build or install from Debian."
    );
    if image.starts_with("mockserver/mockserver") {
        let env = environment(svc.get("environment"));
        let init = env.get("MOCKSERVER_INITIALIZATION_JSON_PATH").cloned().unwrap_or_default();
        let host_file = strings(svc.get("volumes")).into_iter().find_map(|v| {
            let mut parts = v.splitn(3, ':');
            let (host, inside) = (parts.next()?, parts.next()?);
            (inside == init).then(|| host.to_string())
        });
        let port = container_port(svc).unwrap_or(1080);
        match host_file {
            Some(f) => {
                // Read from the repository at the commit where the servers are, else beside here.
                let expectations = match &opts.git {
                    Some(_) => format!("source:{}", join(&opts.repo_prefix, &f)),
                    None => join(&opts.context_prefix, &f),
                };
                let _ =
                    writeln!(out, "# lab: its MockServer expectations are served by the lab's mock service:");
                let _ = writeln!(out, "[[service]]\nkind = \"mock\"\nname = {}", q(name));
                let _ = writeln!(out, "expectations = {}", q(&expectations));
                let _ = writeln!(out, "port = {port}");
            }
            None => {
                let _ =
                    writeln!(out, "# lab: its expectations file was not found among its volumes ({init:?}).");
            }
        }
    } else {
        program_skeleton(out, name, svc, image);
    }
    for n in notes {
        let _ = writeln!(out, "# lab: {n}");
    }
}

/// A registry image other than MockServer: a program service to complete by hand, commented
/// out, with what the compose file says of its command, port, environment, health check and
/// limits (docs/reproduce.md, step 5). The packages are the user's to name: which Debian package
/// provides the program is not in the compose file (a `redis` image's is suggested).
fn program_skeleton(out: &mut String, name: &str, svc: &Map, image: &str) {
    let port = container_port(svc)
        .map_or_else(|| "0   # its port: not published in the compose file".into(), |p| p.to_string());
    let command = strings(svc.get("command"));
    let packages = match image.split([':', '@']).next().unwrap_or("").rsplit('/').next() {
        Some("redis") => "[\"redis-server\"]",
        Some("postgres") => "[\"postgresql-15\"]",
        _ => "[]   # the Debian packages that provide its program",
    };
    let _ = writeln!(out, "# lab: to start it, write it as a program service on Debian's packages:");
    let _ =
        writeln!(out, "# [[service]]\n# kind = \"program\"\n# name = {}\n# packages = {packages}", q(name));
    match command.is_empty() {
        true => {
            let _ = writeln!(out, "# command = []   # the image's own command is not in the compose file");
        }
        false => {
            let _ = writeln!(
                out,
                "# command = [{}]   # its compose command, with the program's path",
                command.iter().map(|c| q(c)).collect::<Vec<_>>().join(", ")
            );
        }
    }
    let _ = writeln!(out, "# port = {port}");
    if let Some(test) = svc.get("healthcheck").map(|h| strings(h.get("test"))).filter(|t| !t.is_empty()) {
        let argv: Vec<String> = match test[0].as_str() {
            "CMD-SHELL" => vec!["/bin/sh".into(), "-c".into(), test[1..].join(" ")],
            "CMD" => test[1..].to_vec(),
            _ => test,
        };
        let _ = writeln!(
            out,
            "# ready = {{ command = [{}] }}   # its healthcheck",
            argv.iter().map(|c| q(c)).collect::<Vec<_>>().join(", ")
        );
    }
    let env = environment(svc.get("environment"));
    if !env.is_empty() {
        let pairs: Vec<String> = env.iter().map(|(k, v)| format!("{k} = {}", q(v))).collect();
        let _ = writeln!(out, "# env = {{ {} }}", pairs.join(", "));
    }
    let (cpus, mem) = limits(svc);
    if let Some(c) = cpus {
        let _ = writeln!(out, "# cpus = {c}");
    }
    if let Some(m) = mem {
        match memory(&m) {
            Some(lab) => {
                let _ = writeln!(out, "# memory = {}   # its compose limit {m}", q(&lab));
            }
            None => {
                let _ = writeln!(
                    out,
                    "# memory = \"\"   # its compose limit {m:?}, in the lab's units (\"512MiB\")"
                );
            }
        }
    }
}

/// `[placement]`: the servers' one memory limit and CPU quota, or why there is none.
fn placement_block(out: &mut String, memories: &[(String, String)], cpus: &[(String, String)]) {
    out.push_str("\n[placement]\n");
    let quotas: std::collections::BTreeSet<&String> = cpus.iter().map(|(_, c)| c).collect();
    match quotas.into_iter().collect::<Vec<_>>()[..] {
        [one] => match one.parse::<f64>() {
            Ok(c) if c > 0.0 => {
                let _ = writeln!(
                    out,
                    "cpus = {c:?}   # every server's compose CPU limit ({one}): a quota on top of the server's own CPU"
                );
            }
            _ => {
                let _ = writeln!(out, "# lab: CPU limit {one:?} is not a number of CPUs the lab reads");
            }
        },
        [] => {}
        _ => {
            let each: Vec<String> = cpus.iter().map(|(n, c)| format!("{n} {c}")).collect();
            let _ = writeln!(
                out,
                "# lab: the servers' CPU limits differ ({}); a scenario has one",
                each.join(", ")
            );
        }
    }
    let distinct: std::collections::BTreeSet<&String> = memories.iter().map(|(_, m)| m).collect();
    match distinct.into_iter().collect::<Vec<_>>()[..] {
        [one] => match memory(one) {
            Some(m) => {
                let _ = writeln!(out, "memory = {}   # every server's compose memory limit ({one})", q(&m));
            }
            None => {
                let _ = writeln!(
                    out,
                    "# lab: memory limit {one:?} is not a size the lab reads; write it as \"1GiB\""
                );
            }
        },
        [] => {}
        _ => {
            let each: Vec<String> = memories.iter().map(|(n, m)| format!("{n} {m}")).collect();
            let _ = writeln!(
                out,
                "# lab: the servers' memory limits differ ({}); a scenario has one",
                each.join(", ")
            );
        }
    }
}

/// The skeleton scenario of a compose file.
pub fn skeleton(compose: &str, opts: &ImportOptions) -> Result<String, ComposeError> {
    let file = opts.file.clone();
    let doc: Value = serde_norway::from_str(compose)
        .map_err(|e| ComposeError::Yaml { file: file.clone(), message: e.to_string() })?;
    let at = |at: String, message: String| ComposeError::At { file: file.clone(), at, message };
    let services = doc
        .get("services")
        .and_then(Value::as_object)
        .ok_or_else(|| at("services".into(), "no `services` map: is this a compose file?".into()))?;
    let mut out = String::new();
    let _ = writeln!(out, "# A scenario skeleton written by `benchlab import compose {}`.", opts.file);
    let _ = writeln!(
        out,
        "# Check every line. A `# lab:` comment names what the lab cannot take as it is written,"
    );
    let _ = writeln!(
        out,
        "# and what it does instead; docs/reproduce.md says what to fill in by hand (the load)."
    );
    let _ = writeln!(out, "name = {}", q(&opts.name));
    let _ = writeln!(out, "description = {}", q(&format!("Reproduction of the benchmark in {}", opts.file)));
    let (mut servers, mut others, mut memories, mut quotas) =
        (String::new(), String::new(), Vec::new(), Vec::new());
    for (name, svc) in services {
        let svc = svc.as_object().ok_or_else(|| at(format!("services.{name}"), "is not a map".into()))?;
        let (cpus, mem) = limits(svc);
        let notes = notes(svc);
        match (svc.get("build"), svc.get("image").and_then(Value::as_str)) {
            (Some(build), _) => {
                server_block(&mut servers, name, svc, build, opts, notes)
                    .map_err(|m| at(format!("services.{name}.build"), m))?;
                if let Some(m) = mem {
                    memories.push((name.clone(), m));
                }
                if let Some(c) = cpus {
                    quotas.push((name.clone(), c));
                }
            }
            (None, Some(image)) => image_block(&mut others, name, svc, image, opts, notes),
            (None, None) => {
                return Err(at(format!("services.{name}"), "has neither `build` nor `image`".into()))
            }
        }
    }
    placement_block(&mut out, &memories, &quotas);
    if let Some((url, commit)) = &opts.git {
        let _ = writeln!(
            out,
            "\n[source]\nrepository = {{ git = {}, commit = {} }}   # its committed result files go in `results = [...]`",
            q(url),
            q(commit)
        );
    }
    out.push_str(&servers);
    out.push_str(&others);
    out.push_str(
        "\n# The load: transcribe the benchmark's own load script by hand (its stages, users, calls and\n\
         # their arguments); docs/reproduce.md shows how. A placeholder, so that the file parses:\n\
         # lab: write the benchmark's tools, arguments and checks as a [[suite]] (docs/reproduce.md,\n\
         # lab: step 5); this placeholder calls the lab's `weekly` suite, which they do not serve.\n\
         [[workload]]\nkind = \"concurrency\"\ntool = \"add_numbers\"\nworkers = 1\nduration = \"10s\"\n",
    );
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const COMPOSE: &str = r#"
services:
  python-server:
    build: ./python-server
    container_name: mcp-python-server
    ports:
      - "8082:8082"
    environment:
      - SERVER_TYPE=python
    deploy:
      resources:
        limits:
          cpus: "1.0"
          memory: 1G
    healthcheck:
      test: [ "CMD", "wget", "--spider", "http://localhost:8082/health" ]
  node:
    build:
      context: nodejs-server
      dockerfile: Dockerfile
    environment:
      SERVER_TYPE: nodejs
    deploy:
      resources:
        limits:
          memory: 1G
  mock-api:
    image: mockserver/mockserver:latest
    ports:
      - "1080:1080"
    environment:
      - MOCKSERVER_INITIALIZATION_JSON_PATH=/config/mockserver.json
    volumes:
      - ./mock-api/mockserver.json:/config/mockserver.json:ro
"#;

    fn opts(git: bool) -> ImportOptions {
        ImportOptions {
            name: "repro".into(),
            file: "docker-compose.yml".into(),
            git: git.then(|| ("https://example.invalid/b".into(), "ccb84cf".into())),
            context_prefix: "bench".into(),
            repo_prefix: String::new(),
        }
    }

    #[test]
    fn servers_become_sources_with_their_environment_and_memory_and_the_rest_is_named() {
        let text = skeleton(COMPOSE, &opts(true)).unwrap();
        // It is a scenario the lab reads (servers with sources, a workload).
        let s = crate::scenario::Scenario::parse(std::path::Path::new("repro.toml"), text.clone())
            .unwrap_or_else(|e| panic!("{e}\n{text}"));
        let sources = s.server_sources().unwrap();
        assert_eq!(sources.len(), 2, "{text}");
        assert_eq!(sources[0].server, "node");
        assert_eq!(sources[0].source.path, "nodejs-server");
        assert_eq!(sources[1].source.path, "python-server");
        assert_eq!(s.placement.memory.0, 1 << 30, "{text}");
        assert_eq!(s.placement.cpus.map(|c| c.cpus()), Some(1.0), "{text}");
        assert_eq!(s.services[0].expectations_from.as_deref(), Some("mock-api/mockserver.json"));
        assert_eq!(s.servers[1].env.get("SERVER_TYPE").map(String::as_str), Some("python"));
        for says in [
            "cpus = 1.0   # every server's compose CPU limit (1.0)",
            "port = 8082",
            "port 8082:8082: nothing is published",
            "healthcheck `CMD wget --spider http://localhost:8082/health`",
            "`container_name`: cells name their own containers",
            "mockserver/mockserver:latest, which cannot be pulled",
            "[[service]]\nkind = \"mock\"\nname = \"mock-api\"\nexpectations = \"source:mock-api/mockserver.json\"\nport = 1080",
            "repository = { git = \"https://example.invalid/b\", commit = \"ccb84cf\" }",
        ] {
            assert!(text.contains(says), "{says}:\n{text}");
        }
        let dirs = skeleton(COMPOSE, &opts(false)).unwrap();
        assert!(dirs.contains("source = { dir = \"bench/python-server\" }"), "{dirs}");
        assert!(dirs.contains("expectations = \"bench/mock-api/mockserver.json\""), "{dirs}");
    }

    #[test]
    fn a_registry_image_becomes_a_program_service_to_complete_that_reads_once_uncommented() {
        let compose = format!(
            "{COMPOSE}  cache:\n    image: redis:7-alpine\n    command: [\"redis-server\", \"--port\", \"6390\"]\n    ports: [\"6390:6390\"]\n    healthcheck:\n      test: [\"CMD-SHELL\", \"redis-cli -p 6390 ping\"]\n    deploy:\n      resources:\n        limits:\n          cpus: \"0.5\"\n          memory: 256m\n"
        );
        let text = skeleton(&compose, &opts(true)).unwrap();
        let block = "# [[service]]\n# kind = \"program\"\n# name = \"cache\"\n# packages = [\"redis-server\"]\n# command = [\"redis-server\", \"--port\", \"6390\"]   # its compose command, with the program's path\n# port = 6390\n# ready = { command = [\"/bin/sh\", \"-c\", \"redis-cli -p 6390 ping\"] }   # its healthcheck\n# cpus = 0.5\n# memory = \"256MiB\"   # its compose limit 256m\n";
        assert!(text.contains(block), "{text}");
        // Uncommented as written, it is a program service the lab reads.
        let lines: Vec<&str> = block.lines().map(|l| l.strip_prefix("# ").unwrap_or(l)).collect();
        let uncommented = text.replace(block, &format!("{}\n", lines.join("\n")));
        let s = crate::scenario::Scenario::parse(std::path::Path::new("repro.toml"), uncommented.clone())
            .unwrap_or_else(|e| panic!("{e}\n{uncommented}"));
        let cache = s.services.iter().find(|x| x.name == "cache").expect("the program service");
        let p = cache.program.as_ref().unwrap();
        assert_eq!(
            (cache.port(), p.memory_bytes, p.cpus.map(|c| c.cpus())),
            (6390, Some(256 << 20), Some(0.5))
        );
    }

    #[test]
    fn differing_memory_limits_and_bad_files_are_said_with_where() {
        let two = COMPOSE.replacen("memory: 1G", "memory: 512m", 1);
        let text = skeleton(&two, &opts(false)).unwrap();
        assert!(text.contains("memory limits differ (node 1G, python-server 512m)"), "{text}");
        let e = skeleton("services: [1, 2]", &opts(false)).unwrap_err().to_string();
        assert!(e.contains("no `services` map"), "{e}");
        let e = skeleton("services:\n  x:\n    ports: []\n", &opts(false)).unwrap_err().to_string();
        assert!(e.contains("services.x: has neither `build` nor `image`"), "{e}");
        let e = skeleton("services:\n  x: [\n", &opts(false)).unwrap_err().to_string();
        assert!(e.starts_with("docker-compose.yml: ") && e.contains("line"), "{e}");
        assert_eq!(memory("1G").as_deref(), Some("1GiB"));
        assert_eq!(memory("512mb").as_deref(), Some("512MiB"));
        assert_eq!(memory("2048").as_deref(), Some("2048"));
        assert_eq!(memory("1.5g"), None);
    }
}
