//! `benchlab shim` (hidden): the server container's role, started by the orchestrator. The shim
//! itself lives in `crate::shim`; this only maps its outcome to an exit code.

use std::path::PathBuf;

use super::exit::{Exit, OK};

#[derive(Debug, clap::Args)]
pub struct ShimArgs {
    #[arg(long)]
    dir: PathBuf,
    #[arg(long, default_value = "/proc")]
    proc_root: PathBuf,
}

pub(super) fn run(args: ShimArgs) -> Result<i32, Exit> {
    crate::shim::run(&args.dir, &args.proc_root).map_err(|e| Exit::environment(format!("shim: {e:#}")))?;
    Ok(OK)
}
