//! The worker role (`benchlab worker --cells LIST`), run by a Slurm job on its node: it picks its
//! cell's folder from the list by the array task id, places the cell on the CPUs Slurm allocated
//! (its own affinity), pulls the image by digest, runs the cell through the node's own backend,
//! and writes the outcome — with the node's host, engine, speed fingerprint (measured once per
//! run and node, before the cell, cached in the run's job folder) and the job's ids — into the
//! folder.
//! A cell whose job was requeued once already is not run again: its outcome is the node failure.

use std::io::Write;
use std::path::{Path, PathBuf};

use super::jobs::{read_json, write_json, Attempt, CellDir, WorkerJob};
use crate::backend::containers::docker::DockerEngine;
use crate::backend::containers::{ContainersBackend, Engine};
use crate::backend::native::{NativeBackend, NativeEngine};
use crate::backend::{
    Backend, BackendConfig, BackendKind, CellEvent, CellOutcome, EngineError, NodeFacts, RanOn,
};
use crate::host::fingerprint::{self, Fingerprint};
use crate::placement::{available_cpus, core_of, format_cpu_list};
use crate::record::Dispatch;
use crate::spec::{DriverEvent, Failure, FailureReason, Placement};

/// The label on a cell's containers naming its Slurm job, which the nodes' epilog removes by.
pub const LABEL_SLURM_JOB: &str = "benchlab.slurm_job";

/// Runs the cell the list names for this array task; errors only when there is no cell folder
/// to write an outcome into.
pub async fn run(list: &Path) -> Result<(), String> {
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    let task: usize = env("SLURM_ARRAY_TASK_ID").and_then(|t| t.parse().ok()).unwrap_or(0);
    let text = std::fs::read_to_string(list).map_err(|e| format!("read {}: {e}", list.display()))?;
    let dir = text
        .lines()
        .nth(task)
        .map(|l| CellDir(PathBuf::from(l.trim())))
        .ok_or_else(|| format!("{} has no line {task}", list.display()))?;
    let wj: WorkerJob = read_json(&dir.job())?;
    let attempt = env("SLURM_RESTART_COUNT").and_then(|n| n.parse::<u32>().ok()).unwrap_or(0) + 1;
    let node = env("SLURMD_NODENAME").unwrap_or_else(super::hostname);
    let array = env("SLURM_ARRAY_JOB_ID");
    let job_id = match (&array, env("SLURM_ARRAY_TASK_ID")) {
        (Some(a), Some(t)) => format!("{a}_{t}"),
        _ => env("SLURM_JOB_ID").unwrap_or_default(),
    };
    let cpus = available_cpus();
    let dispatch = Dispatch {
        scheduler: "slurm".into(),
        cluster: wj.cluster.clone(),
        partition: wj.partition.clone(),
        node: node.clone(),
        job_id: job_id.clone(),
        array_job_id: array,
        array_task_id: env("SLURM_ARRAY_TASK_ID").and_then(|t| t.parse().ok()),
        allocated_cpus: format_cpu_list(&cpus),
        attempts: attempt,
        requeued: None,
        image_digest: wj.digest.clone(),
    };
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let started = Attempt {
        attempt,
        node: node.clone(),
        job_id,
        cpus: format_cpu_list(&cpus),
        started_unix_ms: now_ms,
    };
    write_json(&dir.attempt(attempt), &started).map_err(|e| format!("write attempt: {e}"))?;
    // An array has one name; a running task is a job of its own, named after its cell here so
    // squeue and the accounting show which cell each job is (best effort).
    if let Some(id) = env("SLURM_JOB_ID") {
        let _ = tokio::process::Command::new("scontrol")
            .args(["update", &format!("jobid={id}"), &format!("name=benchlab:{}", wj.job.cell_id)])
            .output()
            .await;
    }
    // Before the cell, never beside it: the node's speed, once per run (a third attempt only
    // reads what an earlier task measured, and runs nothing).
    let fingerprint = node_fingerprint(&dir, &node, &cpus, attempt <= 2).await;
    let outcome = if attempt > 2 {
        let detail = format!(
            "node failure: job {} was requeued once already after its node failed, and is not run a third \
             time (now on {node})",
            started.job_id
        );
        CellOutcome { failure: Some(Failure::new(FailureReason::NodeFail, detail)), ..CellOutcome::default() }
    } else {
        let slurm_job = env("SLURM_JOB_ID").unwrap_or_default();
        match run_here(&wj, &dir, &cpus, &slurm_job).await {
            Ok((mut o, facts)) => {
                o.ran_on = Some(RanOn { dispatch: dispatch.clone(), node: Some(facts) });
                o
            }
            Err(e) => CellOutcome::engine_error(format!("on node {node}: {e}"), Default::default()),
        }
    };
    let mut outcome = match outcome.ran_on {
        Some(_) => outcome,
        None => CellOutcome { ran_on: Some(RanOn { dispatch, node: None }), ..outcome },
    };
    outcome.fingerprint = fingerprint;
    write_json(&dir.outcome(), &outcome).map_err(|e| format!("write outcome: {e}"))
}

/// This node's speed fingerprint for the run: the one a task of the run cached in the run's job
/// folder (`fingerprint-<node>.json`), else — when `may_measure` — measured now on the job's
/// CPUs (the last, where the server goes, and the first) and cached. Two tasks racing both
/// measure; either file is fine, each written whole by a rename. `None` when there is none.
async fn node_fingerprint(dir: &CellDir, node: &str, cpus: &[u32], may_measure: bool) -> Option<Fingerprint> {
    // A cell's folder is `<run's job folder>/cells/<cell>`.
    let cache = dir.0.parent()?.parent()?.join(fingerprint_file(node));
    if let Ok(f) = read_json::<Fingerprint>(&cache) {
        return Some(f);
    }
    if !may_measure {
        return None;
    }
    let (&first, &last) = (cpus.first()?, cpus.last()?);
    let f = tokio::task::spawn_blocking(move || fingerprint::measure(last, first)).await.ok()?;
    // Unique per process: two tasks on one node never write the same temporary file.
    let tmp = cache.with_extension(format!("json.{}.tmp", std::process::id()));
    let written = std::fs::write(&tmp, serde_json::to_vec_pretty(&f).expect("a fingerprint serialises"))
        .and_then(|()| std::fs::rename(&tmp, &cache));
    if written.is_err() {
        // The cache only saves the next task a second; the cell keeps its fingerprint.
        let _ = std::fs::remove_file(&tmp);
    }
    Some(f)
}

/// The file of a run's job folder caching a node's fingerprint (Slurm's node names are host
/// names: no `/`).
pub fn fingerprint_file(node: &str) -> String {
    format!("fingerprint-{node}.json")
}

/// Runs the cell on this node's backend, on the allocated CPUs.
async fn run_here(
    wj: &WorkerJob,
    dir: &CellDir,
    cpus: &[u32],
    slurm_job: &str,
) -> Result<(CellOutcome, NodeFacts), EngineError> {
    let mut job = wj.job.clone();
    job.placement =
        placement_on(&wj.job.placement, cpus).map_err(|e| EngineError::op("place", &job.cell_id, e))?;
    if !slurm_job.is_empty() {
        job.labels.insert(LABEL_SLURM_JOB.into(), slurm_job.to_string());
    }
    let config = BackendConfig {
        ca_bundle: wj.ca_bundle.clone(),
        work_dir: wj.work_dir.clone(),
        lab_volume_bytes: wj.lab_volume_bytes,
    };
    let mut events = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.events())
        .map_err(|e| EngineError::Io { what: format!("open {}", dir.events().display()), source: e })?;
    let mut on_event = |e: CellEvent| {
        if let CellEvent::Driver(d @ DriverEvent::Progress { .. }) = e {
            let _ = writeln!(events, "{}", serde_json::to_string(&d).expect("events serialise"));
        }
    };
    let (outcome, engine) = match wj.node_engine {
        BackendKind::Native => {
            let b = NativeBackend::new(NativeEngine::new()?, config);
            (b.run_cell(&job, &wj.prepared, &mut on_event).await, b.describe().await?)
        }
        _ => {
            let engine = DockerEngine::connect().await?;
            if let Some(pull) = &wj.pull {
                // By digest from the run's registry: the same bytes on every node.
                let got = engine.pull(pull).await?;
                if got.id != wj.prepared.id {
                    return Err(EngineError::op(
                        "pull",
                        pull,
                        format!("the node got image {} where the run built {}", got.id, wj.prepared.id),
                    ));
                }
            }
            let b = ContainersBackend::new(engine, config).await?;
            (b.run_cell(&job, &wj.prepared, &mut on_event).await, b.describe().await?)
        }
    };
    let host = crate::record::manifest::read_host(Path::new("/"));
    Ok((outcome, NodeFacts { host, engine, placement: job.placement }))
}

/// The cell's placement on the CPUs Slurm allocated: shared, server and driver on all of them;
/// split, the server on the last core's CPUs and the driver on the others.
pub fn placement_on(planned: &Placement, cpus: &[u32]) -> Result<Placement, String> {
    placement_with(planned, cpus, core_of)
}

fn placement_with(
    planned: &Placement,
    cpus: &[u32],
    core: impl Fn(u32) -> (u32, u32),
) -> Result<Placement, String> {
    if cpus.is_empty() {
        return Err("Slurm allocated no CPU to the job".into());
    }
    let (server, driver) = if planned.shared {
        (cpus.to_vec(), cpus.to_vec())
    } else {
        let last = core(cpus[cpus.len() - 1]);
        let (server, driver): (Vec<u32>, Vec<u32>) = cpus.iter().partition(|&&c| core(c) == last);
        if driver.is_empty() {
            return Err(format!(
                "a split cell needs two physical cores and Slurm allocated {} (one core)",
                format_cpu_list(cpus)
            ));
        }
        (server, driver)
    };
    Ok(Placement {
        server_cpus: format_cpu_list(&server),
        driver_cpus: format_cpu_list(&driver),
        parallel: None,
        ..planned.clone()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn planned(shared: bool) -> Placement {
        Placement {
            server_cpus: "1".into(),
            driver_cpus: "0".into(),
            shared,
            memory_limit_bytes: 1 << 30,
            parallel: None,
            services_cpus: None,
            services_share_driver: false,
            cpu_quota: None,
        }
    }

    #[test]
    fn cells_go_on_the_cpus_slurm_allocated() {
        let own_core = |c: u32| (0, c);
        let p = placement_with(&planned(true), &[3], own_core).unwrap();
        assert_eq!((p.server_cpus.as_str(), p.driver_cpus.as_str()), ("3", "3"));
        let p = placement_with(&planned(false), &[2, 3], own_core).unwrap();
        assert_eq!((p.server_cpus.as_str(), p.driver_cpus.as_str()), ("3", "2"));
        assert_eq!(p.memory_limit_bytes, 1 << 30);
        // Two hyperthreads of one core are not two cores.
        let one_core = |_: u32| (0, 0);
        assert!(placement_with(&planned(false), &[2, 3], one_core)
            .unwrap_err()
            .contains("two physical cores"));
        assert!(placement_with(&planned(true), &[], own_core).is_err());
    }

    #[tokio::test]
    async fn a_node_fingerprint_is_read_from_the_run_folder() {
        let run = tempfile::tempdir().unwrap();
        let dir = CellDir(run.path().join("cells").join("1-0000-null"));
        // A third attempt measures nothing: without a cached fingerprint it has none.
        assert_eq!(node_fingerprint(&dir, "n1", &[0], false).await, None);
        let f =
            Fingerprint { measured_at: "2026-01-01T00:00:00Z".into(), cpus: "1,0".into(), probes: vec![] };
        std::fs::write(run.path().join("fingerprint-n1.json"), serde_json::to_vec(&f).unwrap()).unwrap();
        assert_eq!(node_fingerprint(&dir, "n1", &[0], false).await, Some(f.clone()));
        assert_eq!(
            node_fingerprint(&dir, "n1", &[0, 1], true).await,
            Some(f),
            "the cache, not a measurement"
        );
        assert_eq!(node_fingerprint(&dir, "n2", &[0], false).await, None, "another node's is not this one's");
    }
}
