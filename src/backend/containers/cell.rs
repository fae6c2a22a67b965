//! One cell in containers: a tmpfs volume shared as `/lab`, the server container (the shim, on
//! the server's cpuset, memory-limited, no network) and the sidecar (the driver, on the driver's
//! cpuset, in the server's network namespace), both sandboxed alike and mounting the lab's frozen
//! binary read-only. The driver's output goes through the shared driver link; whatever happens,
//! both containers and the volume are removed. Around it, the quiet-host check (`host::quiet`):
//! a probe before anything is created (with `--require-quiet`, a wait that may refuse the cell)
//! and a window from the driver's start to its end, the two containers being the cell's own.
//! Backing services (`services`) start between the two, in the server's network namespace.
//! What is measured is the driver's business.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

use super::engine::{ContainerSpec, Engine, Mount, Network, OutputLine, LABEL_RUN};
use super::owners::{owner_token, LABEL_OWNER};
use super::services;
use crate::backend::link::DriverLink;
use crate::backend::{CellOutcome, EngineError, ImageFacts, Prepared};
use crate::host::quiet::{Own, QuietCheck};
use crate::recipe::{base, IMAGE_MANIFEST_PATH, LAB_BINARY};
use crate::record::manifest::{parse_dpkg_list, Package, RuntimeManifest};
use crate::spec::{CellJob, DriverEvent, DriverOutcome, Failure, FailureReason, ServiceUsage};

/// Runs one cell and removes its containers and volume, whatever happened.
pub async fn run<E: Engine>(
    engine: &E,
    job: &CellJob,
    image: &Prepared,
    lab_volume_bytes: u64,
    image_facts: &Mutex<HashMap<String, ImageFacts>>,
    on_event: &mut (dyn FnMut(DriverEvent) + Send),
) -> CellOutcome {
    let name = format!("benchlab-{}-{}", short(&job.run_id), job.index);
    let volume = format!("{name}-lab");
    let facts_of = || image_facts.lock().expect("not poisoned").get(&image.id).cloned().unwrap_or_default();
    let cpus = [job.placement.server_cpus.as_str(), job.placement.driver_cpus.as_str()];
    let mut check = QuietCheck::new(Path::new("/"), &cpus);
    if let Err(detail) = check.before(job.require_quiet_s).await {
        return CellOutcome {
            failure: Some(Failure::new(FailureReason::NoisyHost, detail)),
            facts: facts_of(),
            sandbox: Some(job.sandbox.clone()),
            quiet: Some(check.finish()),
            ..CellOutcome::default()
        };
    }
    let mut created: Vec<String> = Vec::new();
    let cell = Cell { engine, job, image, name: &name, volume: &volume, lab_volume_bytes };
    let result = cell.run(&mut created, &mut check, image_facts, on_event).await;
    // A cell that failed after its start still closes its window (a no-op when it was closed).
    check.cell_ended().await;
    for id in created.iter().rev() {
        let _ = engine.remove_container(id).await;
    }
    let _ = engine.remove_volume(&volume).await;
    let facts = facts_of();
    let mut outcome = match result {
        Ok((driver, oom, services)) => {
            let failure = oom.then(|| {
                // What the driver saw (a crash, usually, with the server's stderr) stays in the
                // detail: the kernel's kill is the cause, not the whole story.
                let seen =
                    driver.failure.as_ref().map(|f| format!("; the driver saw {f}")).unwrap_or_default();
                Failure::new(
                    FailureReason::Oom,
                    format!(
                        "the server container was killed for exceeding its memory limit ({} MiB){seen}",
                        job.placement.memory_limit_bytes >> 20
                    ),
                )
            });
            let failure = failure.or_else(|| service_failure(&services, &driver));
            CellOutcome {
                driver,
                failure,
                facts,
                sandbox: Some(job.sandbox.clone()),
                services,
                ..CellOutcome::default()
            }
        }
        Err(e) => CellOutcome { sandbox: Some(job.sandbox.clone()), ..CellOutcome::engine_error(e, facts) },
    };
    outcome.quiet = Some(check.finish());
    outcome
}

/// A service that exited before the cell ended fails it, whatever the driver saw (which stays
/// in the detail: a server's errors are usually the service's absence).
fn service_failure(services: &[ServiceUsage], driver: &DriverOutcome) -> Option<Failure> {
    let gone: Vec<String> = services
        .iter()
        .filter_map(|s| {
            s.exited.map(|code| format!("service {:?} exited with code {code} during the cell", s.name))
        })
        .collect();
    if gone.is_empty() {
        return None;
    }
    let seen = driver.failure.as_ref().map(|f| format!("; the driver saw {f}")).unwrap_or_default();
    Some(Failure::new(FailureReason::Service, format!("{}{seen}", gone.join("; "))))
}

/// A short, stable token of a run id for container names.
fn short(run_id: &str) -> String {
    crate::hash::sha256_hex(run_id.as_bytes())[..8].to_string()
}

/// The names and inputs of one cell's containers.
struct Cell<'a, E: Engine> {
    engine: &'a E,
    job: &'a CellJob,
    image: &'a Prepared,
    name: &'a str,
    volume: &'a str,
    lab_volume_bytes: u64,
}

impl<E: Engine> Cell<'_, E> {
    /// Creates and starts both containers, follows the driver to its outcome, and tells whether
    /// the server container was OOM-killed. Every container made is pushed to `created`; the
    /// quiet check's during window spans the driver's run.
    async fn run(
        &self,
        created: &mut Vec<String>,
        check: &mut QuietCheck,
        image_facts: &Mutex<HashMap<String, ImageFacts>>,
        on_event: &mut (dyn FnMut(DriverEvent) + Send),
    ) -> Result<(DriverOutcome, bool, Vec<ServiceUsage>), EngineError> {
        let (engine, job) = (self.engine, self.job);
        let mut labels = BTreeMap::new();
        labels.insert(LABEL_RUN.to_string(), job.run_id.clone());
        labels.insert(LABEL_OWNER.to_string(), owner_token().to_string());
        labels.insert("org.benchlab.cell".to_string(), job.cell_id.clone());
        labels.extend(job.labels.clone());
        engine.create_volume(self.volume, self.lab_volume_bytes, &labels).await?;
        let mounts = vec![
            Mount::Bind { source: job.benchlab_exe.clone(), target: LAB_BINARY.into(), read_only: true },
            Mount::Volume { name: self.volume.into(), target: "/lab".into() },
        ];
        let server = engine
            .create_container(&self.container("server", shim_command(&job.sandbox), &labels, &mounts))
            .await?;
        created.push(server.clone());
        let known = image_facts.lock().expect("not poisoned").contains_key(&self.image.id);
        if !known {
            let facts = read_image_facts(engine, &server).await?;
            image_facts.lock().expect("not poisoned").insert(self.image.id.clone(), facts);
        }
        engine.start(&server).await?;
        let services =
            services::start(engine, &job.services, self.name, &server, &labels, &job.benchlab_exe, created)
                .await?;
        // Every service is readied and seeded in its own container before the driver starts; one
        // that is not fails the cell here, with what each service was until then.
        let readied =
            match services::prepare(engine, &services, &job.services, job.driver.timeouts.startup()).await {
                Ok(readied) => readied,
                Err(failure) => {
                    let window = services::open(&services, Path::new("/"));
                    let usage = services::close(engine, services, window, Path::new("/")).await;
                    let driver = DriverOutcome { failure: Some(failure), ..DriverOutcome::default() };
                    return Ok((driver, false, usage));
                }
            };

        let mut spec = job.driver.clone();
        spec.lab_dir = "/lab".into();
        spec.driver_cpus = crate::placement::driver_thread_cpus(&job.placement);
        let spec_json = serde_json::to_string(&spec).expect("specs serialise");
        let mut sidecar = self.container(
            "driver",
            vec![LAB_BINARY.into(), "driver".into(), "--spec".into(), spec_json],
            &labels,
            &mounts,
        );
        sidecar.cpuset = job.placement.driver_cpus.clone();
        sidecar.memory = None;
        sidecar.nano_cpus = None;
        sidecar.network = Network::Container(server.clone());
        let driver = engine.create_container(&sidecar).await?;
        created.push(driver.clone());
        engine.start(&driver).await?;
        // Opened once both run, so the engine's work of starting them is not counted as noise.
        let mut own = vec![server.clone(), driver.clone()];
        own.extend(services.iter().map(|s| s.id.clone()));
        check.cell_started(Own::cgroups_containing(own)).await;
        let window = services::open(&services, Path::new("/"));

        let mut link = DriverLink::new(on_event);
        let mut on_line = |line| match line {
            OutputLine::Stdout(text) => link.stdout(text),
            OutputLine::Stderr(text) => link.stderr(text),
        };
        let limit = job.time_limit();
        match tokio::time::timeout(limit, engine.follow(&driver, &mut on_line)).await {
            Ok(r) => {
                check.cell_ended().await;
                r?
            }
            Err(_) => {
                return Err(EngineError::op(
                    "run",
                    &job.cell_id,
                    format!("the cell did not finish within {limit:?}; its containers were removed"),
                ))
            }
        }
        // Read before anything is removed: an exited service has no cgroup left to read.
        let services = services::close(engine, services, window, Path::new("/")).await;
        let driver_exit = engine.wait(&driver).await?;
        // The shim exits after the driver's shutdown request; give it a moment, then read its state.
        let server_exit = tokio::time::timeout(Duration::from_secs(10), engine.wait(&server)).await;
        let oom = matches!(server_exit, Ok(Ok(s)) if s.oom_killed);
        // The follow stream can end before the last lines of a driver that just exited (the
        // engine closes it with the container); the outcome is its last line, so a driver that
        // exited without one seen is read once more, whole, before it is called a failure. Its
        // events were passed on already.
        let finished = match link.finish() {
            Err(_) if driver_exit.code == 0 => reread(engine, &driver).await?,
            first => first,
        };
        match finished {
            Ok(mut o) => {
                o.services.splice(0..0, readied);
                Ok((o, oom, services))
            }
            Err(tail) => Err(EngineError::op(
                "run driver for",
                &job.cell_id,
                format!("it exited with code {} without an outcome; its output:\n{tail}", driver_exit.code),
            )),
        }
    }

    /// The server container's spec (the sidecar starts from it). Both containers are sandboxed
    /// alike, but for their users: with a `lab_user`, the shim runs as root in the lab's group
    /// (keeping only what starts the server as its own user) and the driver as the lab's user, so
    /// both reach the socket and logs in /lab and the server reaches neither; HOME and TMPDIR
    /// point at the scratch tmpfs.
    fn container(
        &self,
        role: &str,
        cmd: Vec<String>,
        labels: &BTreeMap<String, String>,
        mounts: &[Mount],
    ) -> ContainerSpec {
        let sandbox = match role {
            "server" => self.job.sandbox.for_shim(),
            _ => self.job.sandbox.for_driver(),
        };
        ContainerSpec {
            name: format!("{}-{role}", self.name),
            image: self.image.id.clone(),
            cmd,
            env: sandbox.environment(),
            labels: labels.clone(),
            cpuset: self.job.placement.server_cpus.clone(),
            memory: Some(self.job.placement.memory_limit_bytes),
            nano_cpus: self.job.placement.cpu_quota.map(|q| q.nano_cpus()),
            // Each service listens on the cell's loopback; its name resolves there too, so a server
            // written for a compose file (`http://mock-api:1080/api`) finds it by that name.
            network: Network::Loopback {
                hosts: self.job.services.iter().map(|s| s.spec.name.clone()).collect(),
            },
            mounts: mounts.to_vec(),
            sandbox,
        }
    }
}

/// A driver's output read once more, whole, for its outcome line (its events were passed on
/// already).
async fn reread<E: Engine>(engine: &E, driver: &str) -> Result<Result<DriverOutcome, String>, EngineError> {
    let mut no_events = |_| {};
    let mut again = DriverLink::new(&mut no_events);
    engine
        .output(driver, &mut |line| match line {
            OutputLine::Stdout(text) => again.stdout(text),
            OutputLine::Stderr(text) => again.stderr(text),
        })
        .await?;
    Ok(again.finish())
}

/// The server container's command: the shim on /lab, starting the server as the sandbox's
/// server user when that is not the shim's own.
pub fn shim_command(sandbox: &crate::spec::Sandbox) -> Vec<String> {
    let mut cmd = vec![LAB_BINARY.to_string(), "shim".into(), "--dir".into(), "/lab".into()];
    if let Some((uid, gid)) = sandbox.server_user() {
        cmd.extend(["--server-user".to_string(), format!("{uid}:{gid}")]);
    }
    cmd
}

/// What an image says about itself: its Debian packages and the image manifest (runtime version,
/// installed packages), read from a created container.
async fn read_image_facts<E: Engine>(engine: &E, container: &str) -> Result<ImageFacts, EngineError> {
    let mut facts = ImageFacts::default();
    if let Some(bytes) = engine.read_file(container, base::DPKG_LIST_PATH).await? {
        facts.system_packages = parse_dpkg_list(&String::from_utf8_lossy(&bytes));
    }
    if let Some(bytes) = engine.read_file(container, IMAGE_MANIFEST_PATH).await? {
        #[derive(serde::Deserialize)]
        struct ImageJson {
            runtime: RuntimeManifest,
            packages: Vec<Package>,
        }
        let parsed: ImageJson =
            serde_json::from_slice(&bytes).map_err(|e| EngineError::op("parse", IMAGE_MANIFEST_PATH, e))?;
        facts.runtime_version = Some(parsed.runtime.version);
        facts.packages = parsed.packages;
        facts.packages.sort();
    }
    Ok(facts)
}
