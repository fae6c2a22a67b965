//! A cell's backing services in containers: each in its own container on the services' cpuset,
//! memory-limited and sandboxed, joined to the server's network namespace (the cell's loopback,
//! no egress), a mock given its expectations; what it is (image id, its program's installed
//! version); readied and seeded in their containers before the driver starts (`prepare`); its
//! CPU time and memory from its cgroup over the driver's window; and whether it was still
//! running at the end. Removing them is the cell's business (they are in `created`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::engine::{ContainerSpec, Engine, Mount, Network, OutputLine};
use crate::backend::EngineError;
use crate::recipe::{base, LAB_BINARY};
use crate::record::manifest::parse_dpkg_list;
use crate::spec::{
    Failure, FailureReason, Readiness, Sandbox, ServiceJob, ServiceReady, ServiceUsage, ENV_MOCK_EXPECTATIONS,
};

/// A service container that was started.
pub struct Started {
    pub id: String,
    usage: ServiceUsage,
}

/// Creates and starts every service of `job` in the network namespace of `server`; each
/// container made is pushed to `created` (so the cell removes it whatever happens).
pub async fn start<E: Engine>(
    engine: &E,
    services: &[ServiceJob],
    cell_name: &str,
    server: &str,
    labels: &BTreeMap<String, String>,
    lab_exe: &Path,
    created: &mut Vec<String>,
) -> Result<Vec<Started>, EngineError> {
    let mut out = Vec::new();
    for s in services {
        // A service built from its own Dockerfile runs as that image's user, as a server built
        // from its source does (no capabilities all the same).
        let built = s.spec.program.as_ref().is_some_and(|p| p.source.is_some());
        let mut sandbox =
            Sandbox { user: if built { None } else { Sandbox::hardened().user }, ..Sandbox::hardened() };
        for (dir, bytes) in sandbox.scratch.iter_mut() {
            if dir == crate::spec::SCRATCH_DIR {
                *bytes = s.spec.kind.scratch_bytes();
            }
        }
        let mut env = sandbox.environment();
        // A mock's expectations reach it in an environment variable: the service container
        // mounts no volume of the cell's, the engine has no call to put a file in a container,
        // and the scenario caps the text well below Linux's 128 KiB for one variable.
        if let Some(text) = &s.expectations {
            env.push((ENV_MOCK_EXPECTATIONS.to_string(), text.clone()));
        }
        let program = s.spec.program.as_ref();
        env.extend(program.iter().flat_map(|p| p.env.iter().map(|(k, v)| (k.clone(), v.clone()))));
        let spec = ContainerSpec {
            name: format!("{cell_name}-service-{}", s.spec.name),
            image: s.image.clone(),
            cmd: s.spec.argv(LAB_BINARY),
            env,
            labels: labels.clone(),
            cpuset: s.cpus.clone(),
            memory: Some(s.memory_limit_bytes),
            nano_cpus: program.and_then(|p| p.cpus).map(|q| q.nano_cpus()),
            network: Network::Container(server.to_string()),
            mounts: vec![Mount::Bind {
                source: lab_exe.to_path_buf(),
                target: LAB_BINARY.into(),
                read_only: true,
            }],
            sandbox,
        };
        let id = engine.create_container(&spec).await?;
        created.push(id.clone());
        let version = match s.spec.kind.version_package() {
            None if built => built_version(program.and_then(|p| p.source.as_ref()).expect("built")),
            None if program.is_some_and(|p| !p.packages.is_empty()) => {
                program_version(engine, &id, &program.expect("some").packages).await?
            }
            Some(package) => {
                let list = engine.read_file(&id, base::DPKG_LIST_PATH).await?.unwrap_or_default();
                parse_dpkg_list(&String::from_utf8_lossy(&list))
                    .into_iter()
                    .find(|p| p.name == package)
                    .map(|p| p.version)
                    .ok_or_else(|| {
                        EngineError::op("inspect", &s.image, format!("the image has no {package} package"))
                    })?
            }
            None => env!("CARGO_PKG_VERSION").to_string(),
        };
        engine.start(&id).await?;
        let usage = ServiceUsage {
            name: s.spec.name.clone(),
            image_id: s.image.clone(),
            version,
            ..ServiceUsage::default()
        };
        out.push(Started { id, usage });
    }
    Ok(out)
}

/// A service built from its own source is the version of that source: its origin and path.
fn built_version(source: &crate::spec::ServerSource) -> String {
    let origin = match &source.origin {
        crate::spec::SourceOrigin::Git { url, commit } => format!("{url} at {commit}"),
        crate::spec::SourceOrigin::Dir { dir } => format!("the folder {dir}"),
        crate::spec::SourceOrigin::Tarball { file, sha256 } => format!("{file} (sha256 {sha256})"),
    };
    match source.path.as_str() {
        "" => format!("built from {origin}"),
        path => format!("built from {origin}, {path}/"),
    }
}

/// A program service's version: each package it names with its installed Debian version.
async fn program_version<E: Engine>(
    engine: &E,
    id: &str,
    packages: &[String],
) -> Result<String, EngineError> {
    let list = engine.read_file(id, base::DPKG_LIST_PATH).await?.unwrap_or_default();
    let installed = parse_dpkg_list(&String::from_utf8_lossy(&list));
    let named: Vec<String> = packages
        .iter()
        .map(|name| match installed.iter().find(|p| &p.name == name) {
            Some(p) => format!("{name} {}", p.version),
            None => format!("{name} (not installed)"),
        })
        .collect();
    Ok(named.join(", "))
}

/// Readies and seeds every service in its own container, in order, before the driver starts:
/// the lab's own kinds by the lab's binary there (`ready_own`); a program service by its probe
/// (a TCP connection or an HTTP GET made by the lab's binary there, or its own command), tried
/// until it passes or the start-up limit passes, then its seed command, once, which must exit 0. A service that never becomes ready, exits first, or whose seed fails,
/// fails the cell as `service`, with what it said.
pub async fn prepare<E: Engine>(
    engine: &E,
    started: &[Started],
    jobs: &[ServiceJob],
    startup: Duration,
) -> Result<Vec<ServiceReady>, Failure> {
    let mut out = Vec::new();
    for (service, job) in started.iter().zip(jobs) {
        let Some(program) = &job.spec.program else {
            out.push(ready_own(engine, service, job, startup).await?);
            continue;
        };
        let name = &job.spec.name;
        let fail =
            |what: String| Failure::new(FailureReason::Service, format!("service {name:?} (program) {what}"));
        let env: Vec<(String, String)> = program.env.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        let port = job.spec.port();
        let probe = match &program.ready {
            Readiness::Tcp => {
                vec![LAB_BINARY.into(), "service-probe".into(), "tcp".into(), format!("127.0.0.1:{port}")]
            }
            Readiness::Http { path } => {
                vec![
                    LAB_BINARY.into(),
                    "service-probe".into(),
                    "http".into(),
                    format!("http://127.0.0.1:{port}{path}"),
                ]
            }
            Readiness::Command { argv } => argv.clone(),
        };
        let began = Instant::now();
        loop {
            let (code, said) = match engine.exec(&service.id, &probe, &env).await {
                Ok(r) => r,
                Err(e) => return Err(fail(gone_or(engine, &service.id, e).await)),
            };
            if code == 0 {
                break;
            }
            if began.elapsed() >= startup {
                return Err(fail(format!(
                    "was not ready within {} ms: its probe `{}` last exited with code {code}: {}",
                    startup.as_millis(),
                    probe.join(" "),
                    tail(&said)
                )));
            }
            tokio::time::sleep(PROBE_EVERY).await;
        }
        let ready_ms = began.elapsed().as_secs_f64() * 1e3;
        let said = match &program.seed_command {
            None => String::new(),
            Some(argv) => match engine.exec(&service.id, argv, &env).await {
                Ok((0, said)) => said,
                Ok((code, said)) => {
                    return Err(fail(format!(
                        "could not be seeded: its seed command `{}` exited with code {code}: {}",
                        argv.join(" "),
                        tail(&said)
                    )))
                }
                Err(e) => return Err(fail(gone_or(engine, &service.id, e).await)),
            },
        };
        out.push(ServiceReady {
            name: name.clone(),
            ready_ms,
            seed_sha256: crate::hash::sha256_hex(said.as_bytes()),
            items: 0,
        });
    }
    Ok(out)
}

/// One of the lab's own services readied and seeded in its container by the lab's binary there
/// (`benchlab service-ready`): what it did, or the failure it names.
async fn ready_own<E: Engine>(
    engine: &E,
    service: &Started,
    job: &ServiceJob,
    startup: Duration,
) -> Result<ServiceReady, Failure> {
    let spec = serde_json::to_string(&job.spec).expect("specs serialise");
    let argv =
        [LAB_BINARY, "service-ready", "--spec", &spec, "--startup-ms", &startup.as_millis().to_string()]
            .map(String::from);
    let fail = |what: String| Failure::new(FailureReason::Service, what);
    let (code, said) = match engine.exec(&service.id, &argv, &[]).await {
        Ok(r) => r,
        Err(e) => {
            let why = gone_or(engine, &service.id, e).await;
            return Err(fail(format!("service {:?} ({}) {why}", job.spec.name, job.spec.kind.as_str())));
        }
    };
    let last = said.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("");
    match (code, serde_json::from_str::<ServiceReady>(last)) {
        (0, Ok(ready)) => Ok(ready),
        (0, Err(e)) => {
            Err(fail(format!("service {:?}: its readiness check answered {last:?} ({e})", job.spec.name)))
        }
        _ => Err(fail(tail(&said))),
    }
}

/// How often a program service's probe is tried.
const PROBE_EVERY: Duration = Duration::from_millis(100);

/// Why a command could not run in a service's container: it exited (with its last output), or
/// the engine's own error.
async fn gone_or<E: Engine>(engine: &E, id: &str, e: EngineError) -> String {
    match tokio::time::timeout(Duration::from_millis(200), engine.wait(id)).await {
        Ok(Ok(state)) => {
            let mut lines = Vec::new();
            let _ = engine
                .output(id, &mut |l| match l {
                    OutputLine::Stdout(t) | OutputLine::Stderr(t) => lines.push(t),
                })
                .await;
            format!("exited with code {} before it was ready: {}", state.code, tail(&lines.join("\n")))
        }
        _ => format!("could not run a command in its container: {e}"),
    }
}

/// The last lines of what a command said (at most 600 bytes), or that it said nothing.
fn tail(said: &str) -> String {
    let said = said.trim();
    match said.len() {
        0 => "it said nothing".into(),
        n if n <= 600 => said.to_string(),
        n => {
            let mut at = n - 600;
            while !said.is_char_boundary(at) {
                at += 1;
            }
            format!("…{}", &said[at..])
        }
    }
}

/// Readings of the services' cgroups at the driver's start, to subtract at its end.
pub struct Window {
    started: Instant,
    cpu_ns: Vec<Option<u64>>,
}

/// Reads every service's CPU time now (the window's start).
pub fn open(services: &[Started], root: &Path) -> Window {
    Window { started: Instant::now(), cpu_ns: services.iter().map(|s| read(root, &s.id).cpu_ns).collect() }
}

/// Closes the window: each service's CPU over it and its memory, read before anything is
/// removed; then whether each is still running (an exit is a failure of the cell).
pub async fn close<E: Engine>(
    engine: &E,
    services: Vec<Started>,
    window: Window,
    root: &Path,
) -> Vec<ServiceUsage> {
    let window_s = window.started.elapsed().as_secs_f64();
    let mut out = Vec::new();
    for (s, before) in services.into_iter().zip(window.cpu_ns) {
        let now = read(root, &s.id);
        let mut usage = ServiceUsage {
            cpu_s: before.zip(now.cpu_ns).map(|(a, b)| b.saturating_sub(a) as f64 / 1e9),
            window_s: Some(window_s),
            memory_peak_bytes: now.memory_peak,
            memory_end_bytes: now.memory,
            ..s.usage
        };
        // Still running: waiting on it times out at once.
        if let Ok(Ok(state)) = tokio::time::timeout(Duration::from_millis(200), engine.wait(&s.id)).await {
            usage.exited = Some(state.code);
        }
        out.push(usage);
    }
    out
}

/// One reading of a container's cgroup (v1: cpuacct and memory controllers; v2: the unified
/// tree), under `root` (`/` in production, a fixture folder in tests). A container that has
/// exited has no cgroup left: every field is None.
#[derive(Debug, Default, PartialEq)]
struct Reading {
    cpu_ns: Option<u64>,
    memory: Option<u64>,
    memory_peak: Option<u64>,
}

fn read(root: &Path, id: &str) -> Reading {
    let num = |p: PathBuf| std::fs::read_to_string(p).ok().and_then(|t| t.trim().parse::<u64>().ok());
    let v1 = |controller: &str| {
        [format!("docker/{id}"), format!("system.slice/docker-{id}.scope")]
            .into_iter()
            .map(|rel| root.join("sys/fs/cgroup").join(controller).join(rel))
            .find(|p| p.is_dir())
    };
    if let (Some(cpu), Some(mem)) = (v1("cpuacct"), v1("memory")) {
        return Reading {
            cpu_ns: num(cpu.join("cpuacct.usage")),
            memory: num(mem.join("memory.usage_in_bytes")),
            memory_peak: num(mem.join("memory.max_usage_in_bytes")),
        };
    }
    // cgroup v2 (untested on this lab's host, which mounts v1 only).
    let v2 = [format!("system.slice/docker-{id}.scope"), format!("docker/{id}")]
        .into_iter()
        .map(|rel| root.join("sys/fs/cgroup").join(rel))
        .find(|p| p.join("cpu.stat").is_file());
    match v2 {
        Some(dir) => Reading {
            cpu_ns: std::fs::read_to_string(dir.join("cpu.stat")).ok().and_then(|t| {
                t.lines()
                    .find_map(|l| l.strip_prefix("usage_usec "))
                    .and_then(|v| v.trim().parse::<u64>().ok())
                    .map(|us| us * 1000)
            }),
            memory: num(dir.join("memory.current")),
            memory_peak: num(dir.join("memory.peak")),
        },
        None => Reading::default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::containers::fake::FakeEngine;
    use crate::spec::ServiceSpec;

    #[test]
    fn a_mock_gets_its_expectations_in_its_environment_and_its_port_in_its_argv() {
        let spec = crate::spec::test_mock(Some(1081), &"ab".repeat(32));
        let text = r#"{"httpRequest": {"path": "/api"}, "httpResponse": {}}"#;
        let job = |expectations: Option<&str>| ServiceJob {
            spec: spec.clone(),
            image: "img".into(),
            cpus: "1".into(),
            memory_limit_bytes: 1 << 30,
            expectations: expectations.map(str::to_string),
        };
        let engine = FakeEngine::new();
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let mut created = Vec::new();
        let jobs = [
            job(Some(text)),
            ServiceJob { spec: ServiceSpec { name: "other".into(), ..spec.clone() }, ..job(None) },
        ];
        rt.block_on(start(&engine, &jobs, "cell", "server", &BTreeMap::new(), Path::new("/x"), &mut created))
            .unwrap();
        let made = engine.containers();
        let var = |c: &ContainerSpec| {
            c.env.iter().find(|(k, _)| k == ENV_MOCK_EXPECTATIONS).map(|(_, v)| v.clone())
        };
        assert_eq!(var(&made[0]).as_deref(), Some(text));
        assert_eq!(var(&made[1]), None, "no text, no variable");
        assert_eq!(
            made[0].cmd[1..],
            ["service-mock", "--port", "1081", "--expectations-env", ENV_MOCK_EXPECTATIONS]
        );
        assert_eq!(created, ["cell-service-mock-api", "cell-service-other"]);
    }

    #[test]
    fn reads_cgroup_v1_and_v2_and_nothing_for_a_gone_container() {
        let root = tempfile::tempdir().unwrap();
        let cg = root.path().join("sys/fs/cgroup");
        std::fs::create_dir_all(cg.join("cpuacct/docker/abc")).unwrap();
        std::fs::create_dir_all(cg.join("memory/docker/abc")).unwrap();
        std::fs::write(cg.join("cpuacct/docker/abc/cpuacct.usage"), "1500000000\n").unwrap();
        std::fs::write(cg.join("memory/docker/abc/memory.usage_in_bytes"), "4096\n").unwrap();
        std::fs::write(cg.join("memory/docker/abc/memory.max_usage_in_bytes"), "8192\n").unwrap();
        assert_eq!(
            read(root.path(), "abc"),
            Reading { cpu_ns: Some(1_500_000_000), memory: Some(4096), memory_peak: Some(8192) }
        );
        assert_eq!(read(root.path(), "gone"), Reading::default());
        let v2 = cg.join("system.slice/docker-def.scope");
        std::fs::create_dir_all(&v2).unwrap();
        std::fs::write(v2.join("cpu.stat"), "usage_usec 250\nuser_usec 200\n").unwrap();
        std::fs::write(v2.join("memory.current"), "100\n").unwrap();
        std::fs::write(v2.join("memory.peak"), "300\n").unwrap();
        assert_eq!(
            read(root.path(), "def"),
            Reading { cpu_ns: Some(250_000), memory: Some(100), memory_peak: Some(300) }
        );
    }
}
