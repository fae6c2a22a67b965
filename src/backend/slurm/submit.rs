//! Submitting cells and following their jobs: cells handed over within a short window go in
//! together, one job array per kind of resources; each cell then follows its task — queued,
//! running on a node (the worker's attempt file), the driver's progress (its events file), and
//! its end: the worker's outcome, or a failure named by the Slurm state when a job ends without
//! one (TIMEOUT, OUT_OF_MEMORY, NODE_FAIL, CANCELLED, …).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::oneshot;

use super::ctl::{is_final, JobRow};
use super::jobs::{write_json, CellDir, Resources, WorkerJob};
use super::SlurmBackend;
use crate::backend::{CellEvent, CellOutcome, RanOn};
use crate::record::Dispatch;
use crate::spec::{Failure, FailureReason};

/// Seconds a job gets beyond its cell's own bound: pulling the image, starting containers.
pub const SETUP_SECONDS: u64 = 120;

/// How long cells handed over together wait for each other before they are submitted.
const BATCH_WINDOW: Duration = Duration::from_millis(200);

/// How often a cell looks at its job.
const POLL: Duration = Duration::from_millis(250);

/// A cell waiting to be submitted.
pub struct Pending {
    dir: CellDir,
    resources: Resources,
    seconds: u64,
    cell_id: String,
    /// The run's frozen lab binary, which the job runs.
    exe: std::path::PathBuf,
    tx: oneshot::Sender<Result<Submitted, String>>,
}

/// A cell's task in a submitted job array.
#[derive(Debug, Clone)]
struct Submitted {
    /// `<array job id>_<task>`: what squeue and scancel call it.
    id: String,
    array_job_id: String,
    task: u32,
}

static ARRAYS: AtomicUsize = AtomicUsize::new(0);

/// Submits one cell (with whatever others arrive in the same window) and follows it to its
/// outcome.
pub async fn run(
    b: &SlurmBackend,
    run_dir: &Path,
    dir: CellDir,
    worker: WorkerJob,
    on_event: &mut (dyn FnMut(CellEvent) + Send),
) -> CellOutcome {
    let failed = |what: String| CellOutcome::engine_error(what, Default::default());
    // A resumed run may reuse a cell's folder: what an earlier attempt wrote goes first.
    let _ = std::fs::remove_dir_all(&dir.0);
    if let Err(e) = std::fs::create_dir_all(&dir.0).and_then(|_| write_json(&dir.job(), &worker)) {
        return failed(format!("write the job folder {}: {e}", dir.0.display()));
    }
    let seconds = worker.job.time_limit().as_secs() + SETUP_SECONDS;
    let (tx, rx) = oneshot::channel();
    let resources = Resources::of(&worker.job);
    let (cell_id, exe) = (worker.job.cell_id.clone(), worker.job.benchlab_exe.clone());
    let pending = Pending { dir: dir.clone(), resources, seconds, cell_id, exe, tx };
    b.pending.lock().expect("not poisoned").push(pending);
    tokio::time::sleep(BATCH_WINDOW).await;
    let batch = std::mem::take(&mut *b.pending.lock().expect("not poisoned"));
    if !batch.is_empty() {
        submit_batch(b, run_dir, batch).await;
    }
    let task = match rx.await {
        Ok(Ok(t)) => t,
        Ok(Err(e)) => return failed(e),
        Err(_) => return failed("the cell's submission was lost".into()),
    };
    on_event(CellEvent::Queued { job: task.id.clone() });
    follow(b, &dir, &task, &worker, run_dir, on_event).await
}

/// Submits waiting cells: one job array per kind of resources, its tasks reading their cell
/// folders from a list file.
async fn submit_batch(b: &SlurmBackend, run_dir: &Path, batch: Vec<Pending>) {
    let mut groups: BTreeMap<Resources, Vec<Pending>> = BTreeMap::new();
    for p in batch {
        groups.entry(p.resources.clone()).or_default().push(p);
    }
    let run_id = b.run.lock().expect("not poisoned").as_ref().map(|r| r.id.clone()).unwrap_or_default();
    let script = run_dir.join("worker.sh");
    for (resources, cells) in groups {
        let n = ARRAYS.fetch_add(1, Ordering::Relaxed);
        let list = run_dir.join(format!("array-{}-{n}.list", std::process::id()));
        let lines: String = cells.iter().map(|p| format!("{}\n", p.dir.0.display())).collect();
        let exe = cells[0].exe.clone();
        let written = std::fs::create_dir_all(run_dir.join("logs"))
            .and_then(|_| std::fs::write(&list, lines))
            .and_then(|_| std::fs::write(&script, super::jobs::worker_script(&exe)));
        if let Err(e) = written {
            for p in cells {
                let _ = p.tx.send(Err(format!("write {}: {e}", list.display())));
            }
            continue;
        }
        let seconds = cells.iter().map(|p| p.seconds).max().unwrap_or(SETUP_SECONDS);
        let name = match cells.len() {
            1 => cells[0].cell_id.clone(),
            k => format!("{} +{} cells", cells[0].cell_id, k - 1),
        };
        let mut args = vec![
            format!("--job-name=benchlab:{name}"),
            format!("--partition={}", b.partition.name),
            format!("--array=0-{}", cells.len() - 1),
            "--requeue".into(),
            format!("--output={}", run_dir.join("logs/%A_%a.out").display()),
            format!("--comment={}", job_comment(&run_id)),
            format!("--chdir={}", run_dir.display()),
        ];
        args.extend(resources.sbatch_args(seconds));
        args.extend(b.opts.sbatch.iter().cloned());
        args.push(script.display().to_string());
        args.push(list.display().to_string());
        match b.slurm.submit(&args).await {
            Ok(id) => {
                b.submitted.lock().expect("not poisoned").push(id.clone());
                // `benchlab status` finds the run's jobs here.
                let _ =
                    append_line(&run_dir.join(super::jobs::JOBS_FILE), &format!("{id} {}", list.display()));
                for (task, p) in cells.into_iter().enumerate() {
                    let t =
                        Submitted { id: format!("{id}_{task}"), array_job_id: id.clone(), task: task as u32 };
                    let _ = p.tx.send(Ok(t));
                }
            }
            Err(e) => {
                for p in cells {
                    let _ = p.tx.send(Err(format!("sbatch refused the job: {e}")));
                }
            }
        }
    }
}

/// The comment of a run's jobs: the run and its owner, `<host>:<pid>-<start time>`, so a later
/// benchlab on the same host can tell a dead run's jobs (see [`parse_comment`]).
pub fn job_comment(run_id: &str) -> String {
    format!(
        "benchlab run {run_id} owner {}:{}",
        super::hostname(),
        crate::backend::containers::owners::owner_token()
    )
}

/// The run, host and owner token of a lab job's comment; None for any other job.
pub fn parse_comment(comment: &str) -> Option<(&str, &str, &str)> {
    let (run, owner) = comment.strip_prefix("benchlab run ")?.split_once(" owner ")?;
    let (host, token) = owner.split_once(':')?;
    Some((run, host, token))
}

fn append_line(path: &Path, line: &str) -> std::io::Result<()> {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new().create(true).append(true).open(path)?;
    writeln!(f, "{line}")
}

/// Follows one task until its worker's outcome is there or its job ends without one.
async fn follow(
    b: &SlurmBackend,
    dir: &CellDir,
    task: &Submitted,
    worker: &WorkerJob,
    run_dir: &Path,
    on_event: &mut (dyn FnMut(CellEvent) + Send),
) -> CellOutcome {
    let mut events_at = 0;
    let mut attempt = 0;
    let mut last_node = String::new();
    let mut last_cpus = String::new();
    let mut requeued: Option<String> = None;
    let mut seen_running = false;
    let mut missing = 0;
    loop {
        let (events, at) = dir.events_since(events_at);
        events_at = at;
        events.into_iter().for_each(|e| on_event(CellEvent::Driver(e)));
        if let Some(a) = dir.attempt_after(attempt) {
            if a.attempt > 1 && requeued.is_none() {
                // Requeued and started again between two looks at the queue.
                let reason =
                    format!("Slurm requeued job {} and started it again as attempt {}", task.id, a.attempt);
                requeued = Some(format!("{reason} after node {last_node} failed under it"));
                on_event(CellEvent::Requeued { node: last_node.clone(), reason });
            }
            attempt = a.attempt;
            last_node = a.node.clone();
            last_cpus = a.cpus.clone();
            on_event(CellEvent::Running { node: a.node, cpus: a.cpus });
        }
        if let Some(o) = dir.read_outcome() {
            settle(b, task).await;
            return with_requeue(o, requeued);
        }
        let rows = b.rows().await;
        let row =
            rows.iter().find(|r| r.array_job_id == task.array_job_id && r.array_task_id == Some(task.task));
        if row.is_some() {
            missing = 0;
        }
        match row {
            Some(r) if r.state == "RUNNING" => {
                seen_running = true;
                if !r.nodes.is_empty() {
                    last_node = r.nodes.clone();
                }
            }
            // Back in the queue after the queue showed it running (the rows only move forward in
            // time; a worker's attempt file can be ahead of them, so it does not count here).
            Some(r) if r.state.starts_with("REQUEUE") || (r.state == "PENDING" && seen_running) => {
                if requeued.is_none() {
                    let reason = format!("Slurm requeued job {} ({}, {})", task.id, r.state, r.reason);
                    requeued = Some(format!("{reason} after node {last_node} failed under it"));
                    on_event(CellEvent::Requeued { node: last_node.clone(), reason });
                }
            }
            Some(r) if is_final(&r.state) => {
                // The outcome is renamed into place before the job ends; read it once more.
                tokio::time::sleep(POLL).await;
                if let Some(o) = dir.read_outcome() {
                    return with_requeue(o, requeued);
                }
                let at = Where { attempts: attempt.max(1), node: &last_node, cpus: &last_cpus };
                return ended_without_outcome(r, task, worker, at, run_dir, requeued);
            }
            Some(_) => {}
            None => {
                missing += 1;
                if missing > 120 {
                    let detail = format!(
                        "job {} left the queue without an outcome (the controller forgot it, or it was \
                         purged); its log: {}",
                        task.id,
                        log_path(run_dir, task).display()
                    );
                    return CellOutcome::engine_error(detail, Default::default());
                }
            }
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Once the outcome is in, the job ends by itself within moments; one that does not (a worker
/// stuck after writing, an attempt on a node that was declared dead but still runs) is cancelled,
/// so nothing of the cell runs on once its record is written.
async fn settle(b: &SlurmBackend, task: &Submitted) {
    for _ in 0..40 {
        let rows = b.rows().await;
        let row =
            rows.iter().find(|r| r.array_job_id == task.array_job_id && r.array_task_id == Some(task.task));
        if row.is_none_or(|r| is_final(&r.state)) {
            return;
        }
        tokio::time::sleep(POLL).await;
    }
    let _ = b.slurm.cancel(std::slice::from_ref(&task.id)).await;
}

/// The worker's outcome, with why its job was requeued when it was.
fn with_requeue(mut o: CellOutcome, requeued: Option<String>) -> CellOutcome {
    if let Some(r) = o.ran_on.as_mut() {
        if r.dispatch.attempts > 1 && r.dispatch.requeued.is_none() {
            r.dispatch.requeued = Some(requeued.unwrap_or_else(|| "requeued by Slurm".into()));
        }
    }
    o
}

fn log_path(run_dir: &Path, task: &Submitted) -> std::path::PathBuf {
    run_dir.join("logs").join(format!("{}_{}.out", task.array_job_id, task.task))
}

/// Where a job's last attempt ran, as its worker said.
struct Where<'a> {
    attempts: u32,
    node: &'a str,
    cpus: &'a str,
}

/// The failure a job's final Slurm state stands for, and what to say of it.
fn slurm_failure(state: &str, job: &str, node: &str) -> (FailureReason, String) {
    let on = if node.is_empty() { String::new() } else { format!(" on node {node}") };
    match state {
        "TIMEOUT" => (FailureReason::Timeout, format!("Slurm stopped job {job} at its time limit{on}")),
        "OUT_OF_MEMORY" => {
            (FailureReason::Oom, format!("Slurm killed job {job} for exceeding its memory{on}"))
        }
        "NODE_FAIL" => (FailureReason::NodeFail, format!("node {node} failed under job {job}")),
        "CANCELLED" => (FailureReason::EngineError, format!("job {job} was cancelled outside the lab{on}")),
        s => (FailureReason::EngineError, format!("job {job} ended {s}{on} without an outcome")),
    }
}

/// A failed cell from a job that ended with no outcome: the Slurm state is the reason.
fn ended_without_outcome(
    r: &JobRow,
    task: &Submitted,
    worker: &WorkerJob,
    at: Where<'_>,
    run_dir: &Path,
    requeued: Option<String>,
) -> CellOutcome {
    let Where { attempts, node, cpus } = at;
    let log = log_path(run_dir, task);
    let tail = crate::shim::tail(&log, 1000).unwrap_or_default();
    let (reason, what) = slurm_failure(&r.state, &task.id, node);
    let detail =
        format!("{what} (Slurm state {}, reason {}); log {}:\n{tail}", r.state, r.reason, log.display());
    let dispatch = Dispatch {
        scheduler: "slurm".into(),
        cluster: worker.cluster.clone(),
        partition: worker.partition.clone(),
        node: node.to_string(),
        job_id: task.id.clone(),
        array_job_id: Some(task.array_job_id.clone()),
        array_task_id: Some(task.task),
        allocated_cpus: cpus.to_string(),
        attempts,
        requeued,
        image_digest: worker.digest.clone(),
    };
    CellOutcome {
        failure: Some(Failure::new(reason, detail)),
        ran_on: Some(RanOn { dispatch, node: None }),
        ..CellOutcome::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_comment_names_its_run_and_owner() {
        let c = job_comment("run-1");
        let (run, host, token) = parse_comment(&c).unwrap();
        assert_eq!((run, host), ("run-1", super::super::hostname().as_str()));
        assert_eq!(token, crate::backend::containers::owners::owner_token());
        assert_eq!(parse_comment("benchlab run r owner h:1-2"), Some(("r", "h", "1-2")));
        assert_eq!(parse_comment("someone else's job"), None);
        assert_eq!(parse_comment("(null)"), None);
    }

    #[test]
    fn slurm_states_become_named_failures() {
        let reason = |state| slurm_failure(state, "7_3", "n1").0;
        assert_eq!(reason("TIMEOUT"), FailureReason::Timeout);
        assert_eq!(reason("OUT_OF_MEMORY"), FailureReason::Oom);
        assert_eq!(reason("NODE_FAIL"), FailureReason::NodeFail);
        assert_eq!(reason("CANCELLED"), FailureReason::EngineError);
        let (r, what) = slurm_failure("BOOT_FAIL", "7_3", "");
        assert_eq!(r, FailureReason::EngineError);
        assert_eq!(what, "job 7_3 ended BOOT_FAIL without an outcome");
        assert!(slurm_failure("TIMEOUT", "7_3", "n1").1.contains("on node n1"));
    }

    #[test]
    fn a_requeued_outcome_says_why_and_a_first_attempt_says_nothing() {
        let dispatch = |attempts| Dispatch {
            scheduler: "slurm".into(),
            cluster: "c".into(),
            partition: "p".into(),
            node: "n2".into(),
            job_id: "1_0".into(),
            array_job_id: Some("1".into()),
            array_task_id: Some(0),
            allocated_cpus: "1".into(),
            attempts,
            requeued: None,
            image_digest: None,
        };
        let outcome = |attempts| CellOutcome {
            ran_on: Some(RanOn { dispatch: dispatch(attempts), node: None }),
            ..CellOutcome::default()
        };
        let seen = Some("Slurm requeued job 1_0 after node n1 failed under it".to_string());
        let o = with_requeue(outcome(2), seen.clone());
        assert_eq!(o.ran_on.unwrap().dispatch.requeued, seen);
        let o = with_requeue(outcome(2), None);
        assert_eq!(o.ran_on.unwrap().dispatch.requeued.as_deref(), Some("requeued by Slurm"));
        let o = with_requeue(outcome(1), seen);
        assert_eq!(o.ran_on.unwrap().dispatch.requeued, None);
    }
}
