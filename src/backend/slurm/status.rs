//! Where a Slurm run stands (`benchlab status`), from its job folder and the queue: each cell
//! queued, running on a node (with its CPUs and attempt), or done (ok or failed), and the Slurm
//! state and reason of its job. It reads; it changes nothing.

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::ctl::{JobRow, Slurm};
use super::jobs::{read_json, CellDir, WorkerJob, JOBS_FILE};

/// One cell of a run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CellState {
    pub cell: String,
    /// `queued`, `running`, `ok`, `failed` (its outcome is in), or `ended` (its job ended
    /// without an outcome: the orchestrator records why).
    pub state: String,
    pub job: String,
    pub node: Option<String>,
    pub cpus: Option<String>,
    pub attempt: u32,
    /// Slurm's state and reason, while the controller knows the job.
    pub slurm: Option<String>,
}

/// A run's cells on the cluster.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunState {
    pub run_id: String,
    pub job_folder: PathBuf,
    pub cells: Vec<CellState>,
}

impl RunState {
    /// How many cells are in each state, in a fixed order.
    pub fn counts(&self) -> Vec<(&'static str, usize)> {
        ["queued", "running", "ok", "failed", "ended"]
            .into_iter()
            .map(|s| (s, self.cells.iter().filter(|c| c.state == s).count()))
            .collect()
    }
}

/// The run's cells from its job folder (`<jobs root>/<run id>`), with the queue's view of them.
pub async fn run_state(jobs_root: &Path, run_id: &str, slurm: &Slurm) -> Result<RunState, String> {
    let folder = jobs_root.join(run_id);
    let jobs = std::fs::read_to_string(folder.join(JOBS_FILE)).map_err(|e| {
        format!(
            "{}: {e}\n  no Slurm job of run {run_id} is recorded there (it ran locally, or its jobs went \
             to another --slurm-dir)",
            folder.join(JOBS_FILE).display()
        )
    })?;
    let queue = slurm.queue().await.unwrap_or_default();
    let mut cells = Vec::new();
    for line in jobs.lines() {
        let Some((array, list)) = line.split_once(' ') else { continue };
        let list = std::fs::read_to_string(list).unwrap_or_default();
        for (task, dir) in list.lines().enumerate() {
            cells.push(cell_state(&CellDir(PathBuf::from(dir)), array, task as u32, &queue));
        }
    }
    Ok(RunState { run_id: run_id.to_string(), job_folder: folder, cells })
}

fn cell_state(dir: &CellDir, array: &str, task: u32, queue: &[JobRow]) -> CellState {
    let cell = read_json::<WorkerJob>(&dir.job()).map(|w| w.job.cell_id).unwrap_or_else(|e| e);
    let row = queue.iter().find(|r| r.array_job_id == array && r.array_task_id == Some(task));
    let attempt = dir.last_attempt();
    let state = match (dir.read_outcome(), &attempt, row) {
        (Some(o), _, _) if o.failure.is_some() || o.driver.failure.is_some() => "failed",
        (Some(_), _, _) => "ok",
        (None, _, Some(r)) if r.state == "PENDING" || r.state.starts_with("REQUEUE") => "queued",
        (None, Some(_), Some(r)) if !super::ctl::is_final(&r.state) => "running",
        (None, None, Some(r)) if !super::ctl::is_final(&r.state) => "queued",
        (None, _, _) => "ended",
    };
    CellState {
        cell,
        state: state.into(),
        job: format!("{array}_{task}"),
        node: attempt.as_ref().map(|a| a.node.clone()),
        cpus: attempt.as_ref().map(|a| a.cpus.clone()),
        attempt: attempt.map_or(0, |a| a.attempt),
        slurm: row.map(|r| format!("{} ({})", r.state, r.reason)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::slurm::jobs::{write_json, Attempt};
    use crate::backend::CellOutcome;
    use crate::spec::{Failure, FailureReason};

    fn row(state: &str) -> JobRow {
        JobRow {
            id: "9_0".into(),
            array_job_id: "9".into(),
            array_task_id: Some(0),
            state: state.into(),
            nodes: "n1".into(),
            reason: "None".into(),
            comment: String::new(),
        }
    }

    #[test]
    fn a_cell_is_queued_running_or_done_by_its_folder_and_the_queue() {
        let d = tempfile::tempdir().unwrap();
        let dir = CellDir(d.path().to_path_buf());
        let state = |q: &[JobRow]| cell_state(&dir, "9", 0, q).state;
        assert_eq!(state(&[row("PENDING")]), "queued");
        assert_eq!(state(&[]), "ended", "gone from the queue with no outcome");
        let a = Attempt {
            attempt: 1,
            node: "n1".into(),
            job_id: "9_0".into(),
            cpus: "0".into(),
            started_unix_ms: 1,
        };
        write_json(&dir.attempt(1), &a).unwrap();
        let running = cell_state(&dir, "9", 0, &[row("RUNNING")]);
        assert_eq!(
            (running.state.as_str(), running.node.as_deref(), running.attempt),
            ("running", Some("n1"), 1)
        );
        assert_eq!(state(&[row("REQUEUED")]), "queued");
        write_json(&dir.outcome(), &CellOutcome::default()).unwrap();
        assert_eq!(state(&[row("COMPLETED")]), "ok");
        let failed =
            CellOutcome { failure: Some(Failure::new(FailureReason::Oom, "x")), ..CellOutcome::default() };
        write_json(&dir.outcome(), &failed).unwrap();
        assert_eq!(state(&[]), "failed");
    }
}
