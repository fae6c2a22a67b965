//! The shared job folder between the orchestrator and its Slurm workers: one folder per cell
//! (`job.json` in; `attempt-<n>.json` when a worker starts, `events.jsonl` as it runs, and
//! `outcome.json` out, written whole by a rename), the list each job array reads its cells
//! from, the worker's batch script, and the resources a cell asks Slurm for. Values only: the
//! orchestrator appends records, never a worker.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::ctl::time_arg;
use crate::backend::{BackendKind, CellOutcome, Prepared};
use crate::spec::{CellJob, DriverEvent};

/// The file of a run's job folder listing the job arrays it submitted: `<array id> <list file>`
/// a line (the list's line N is task N's cell folder).
pub const JOBS_FILE: &str = "jobs.txt";

/// Everything a worker needs to run one cell on its node.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WorkerJob {
    pub job: CellJob,
    pub prepared: Prepared,
    /// The node's backend: containers or native.
    pub node_engine: BackendKind,
    /// What nodes pull (`<registry>/<repo>@sha256:…`), for a container image.
    pub pull: Option<String>,
    /// The image's digest in the registry.
    pub digest: Option<String>,
    pub ca_bundle: PathBuf,
    pub work_dir: PathBuf,
    pub lab_volume_bytes: u64,
    /// The cluster's name and the partition, for the record.
    pub cluster: String,
    pub partition: String,
}

/// What a worker writes when it starts an attempt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Attempt {
    pub attempt: u32,
    pub node: String,
    pub job_id: String,
    pub cpus: String,
    /// When the worker started, Unix milliseconds (the node's clock).
    #[serde(default)]
    pub started_unix_ms: u64,
}

/// The file names of one cell's folder.
#[derive(Debug, Clone)]
pub struct CellDir(pub PathBuf);

impl CellDir {
    pub fn job(&self) -> PathBuf {
        self.0.join("job.json")
    }
    pub fn outcome(&self) -> PathBuf {
        self.0.join("outcome.json")
    }
    pub fn events(&self) -> PathBuf {
        self.0.join("events.jsonl")
    }
    pub fn attempt(&self, n: u32) -> PathBuf {
        self.0.join(format!("attempt-{n}.json"))
    }

    /// The newest attempt a worker wrote.
    pub fn last_attempt(&self) -> Option<Attempt> {
        (1..=8).rev().find_map(|n| read_json::<Attempt>(&self.attempt(n)).ok())
    }

    pub fn read_outcome(&self) -> Option<CellOutcome> {
        read_json(&self.outcome()).ok()
    }

    /// An attempt after `after` (the next, or the one past it when a requeue came before the
    /// next one's worker started): two file opens, whatever the number of attempts.
    pub fn attempt_after(&self, after: u32) -> Option<Attempt> {
        (after + 1..=after + 2).rev().find_map(|n| read_json::<Attempt>(&self.attempt(n)).ok())
    }

    /// The driver's events past byte `from`, and where the next read starts (only what is new
    /// is read).
    pub fn events_since(&self, from: u64) -> (Vec<DriverEvent>, u64) {
        use std::io::{Read, Seek, SeekFrom};
        let mut new = Vec::new();
        let read = std::fs::File::open(self.events())
            .and_then(|mut f| f.seek(SeekFrom::Start(from)).and_then(|_| f.read_to_end(&mut new)));
        if read.is_err() {
            return (Vec::new(), from);
        }
        // Only whole lines: a line being written is read next time.
        let end = new.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        let events = new[..end]
            .split(|&b| b == b'\n')
            .filter_map(|l| serde_json::from_slice::<DriverEvent>(l).ok())
            .collect();
        (events, from + end as u64)
    }
}

/// The folder of a cell's job in a run's job folder.
pub fn cell_dir(run_jobs: &Path, index: usize, cell_id: &str) -> CellDir {
    let safe: String = cell_id
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || "-_.".contains(c) { c } else { '_' })
        .collect();
    // The pid keeps a resumed run's folders apart from those of the run it resumes.
    CellDir(run_jobs.join("cells").join(format!("{}-{index:04}-{safe}", std::process::id())))
}

pub fn read_json<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<T, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("read {}: {e}", path.display()))?;
    serde_json::from_slice(&bytes).map_err(|e| format!("parse {}: {e}", path.display()))
}

/// Writes a value whole: to a temporary file, then renamed over the name, so a reader sees
/// the old file or the new one.
pub fn write_json<T: Serialize>(path: &Path, value: &T) -> std::io::Result<()> {
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, serde_json::to_vec_pretty(value).expect("job values serialise"))?;
    std::fs::rename(&tmp, path)
}

/// What a cell asks Slurm for.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Resources {
    /// CPUs on one node: 1 (server and driver share a core) or 2 (split: two physical cores).
    pub cpus: u32,
    /// The whole node (load cells).
    pub exclusive: bool,
    /// Memory on the node, MiB: the server's limit and room for the driver and the worker.
    pub memory_mb: u64,
}

impl Resources {
    pub fn of(job: &CellJob) -> Resources {
        Resources {
            cpus: if job.placement.shared { 1 } else { 2 },
            exclusive: job.driver.workload.is_load(),
            memory_mb: (job.placement.memory_limit_bytes >> 20) + 512,
        }
    }

    /// The sbatch options for these resources and a time limit in seconds.
    pub fn sbatch_args(&self, seconds: u64) -> Vec<String> {
        let mut args = vec![
            format!("--cpus-per-task={}", self.cpus),
            "--ntasks=1".into(),
            "--nodes=1".into(),
            format!("--mem={}M", self.memory_mb),
            format!("--time={}", time_arg(seconds)),
        ];
        if self.exclusive {
            args.push("--exclusive".into());
        }
        if self.cpus > 1 {
            // Two CPUs of two physical cores, never two hyperthreads of one.
            args.push("--hint=nomultithread".into());
        }
        args
    }
}

/// The batch script every job of a run runs: the frozen lab binary in its worker role, which
/// picks its cell from the list file by the array task id.
pub fn worker_script(benchlab_exe: &Path) -> String {
    format!(
        "#!/bin/sh\n# benchlab worker: runs one cell of a run on this node (the list file's line \
         number $SLURM_ARRAY_TASK_ID) and writes its outcome into the cell's job folder.\nexec '{}' worker --cells \"$1\"\n",
        benchlab_exe.display()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_read_a_whole_line_at_a_time() {
        let d = tempfile::tempdir().unwrap();
        let cell = cell_dir(d.path(), 3, "null/cold start");
        assert!(cell.0.ends_with(format!("cells/{}-0003-null_cold_start", std::process::id())));
        std::fs::create_dir_all(&cell.0).unwrap();
        let line = serde_json::to_string(&DriverEvent::Progress { phase: "calls".into(), done: 1, total: 2 })
            .unwrap();
        std::fs::write(cell.events(), format!("{line}\n{}", &line[..5])).unwrap();
        let (events, at) = cell.events_since(0);
        assert_eq!(events.len(), 1);
        assert_eq!(at as usize, line.len() + 1);
        let (again, same) = cell.events_since(at);
        assert!(again.is_empty());
        assert_eq!(same, at);
    }

    #[test]
    fn the_next_attempt_is_found_even_past_one_that_never_started() {
        let d = tempfile::tempdir().unwrap();
        let cell = CellDir(d.path().to_path_buf());
        let a = |n| Attempt {
            attempt: n,
            node: "n1".into(),
            job_id: "1_0".into(),
            cpus: "0".into(),
            started_unix_ms: 0,
        };
        write_json(&cell.attempt(1), &a(1)).unwrap();
        write_json(&cell.attempt(3), &a(3)).unwrap();
        assert_eq!(cell.attempt_after(0).map(|a| a.attempt), Some(1));
        assert_eq!(cell.attempt_after(1).map(|a| a.attempt), Some(3));
        assert_eq!(cell.attempt_after(3), None);
    }

    #[test]
    fn resources_and_time_become_sbatch_options() {
        let r = Resources { cpus: 2, exclusive: true, memory_mb: 1536 };
        let args = r.sbatch_args(61);
        assert!(args.contains(&"--cpus-per-task=2".to_string()));
        assert!(args.contains(&"--exclusive".to_string()));
        assert!(args.contains(&"--mem=1536M".to_string()));
        assert!(args.contains(&"--time=2".to_string()));
        assert!(args.contains(&"--hint=nomultithread".to_string()));
        assert!(!Resources { exclusive: false, ..r }.sbatch_args(5).contains(&"--exclusive".to_string()));
    }
}
