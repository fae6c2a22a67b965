//! `benchlab worker` (hidden): the role a Slurm job runs on its node — one cell of a run, from
//! the job folder the orchestrator wrote, its outcome written back there. The work lives in
//! `crate::backend::slurm::worker`.

use std::path::PathBuf;

use super::exit::{Exit, OK};
use super::tokio_runtime;

#[derive(Debug, clap::Args)]
pub struct WorkerArgs {
    /// The list of cell folders of a job array (line $SLURM_ARRAY_TASK_ID is this job's).
    #[arg(long)]
    cells: PathBuf,
}

pub(super) fn run(args: WorkerArgs) -> Result<i32, Exit> {
    tokio_runtime()
        .block_on(crate::backend::slurm::worker::run(&args.cells))
        .map_err(|e| Exit::environment(format!("worker: {e}")))?;
    Ok(OK)
}
