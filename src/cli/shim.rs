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
    /// `uid:gid` to start servers as, when not the shim's own: the shim then closes `--dir` to
    /// that user.
    #[arg(long, value_parser = parse_user)]
    server_user: Option<(u32, u32)>,
    /// The memory cgroup folder that holds the server side alone (a native cell's lab cgroup);
    /// PID 1 of a container reads its container's own without it.
    #[arg(long)]
    memory_cgroup: Option<PathBuf>,
}

fn parse_user(text: &str) -> Result<(u32, u32), String> {
    let (uid, gid) =
        text.split_once(':').ok_or_else(|| format!("{text:?}: write uid:gid, e.g. 65534:65534"))?;
    let n = |v: &str| v.parse::<u32>().map_err(|e| format!("{text:?}: {v:?} is not a number ({e})"));
    Ok((n(uid)?, n(gid)?))
}

pub(super) fn run(args: ShimArgs) -> Result<i32, Exit> {
    crate::shim::run(&args.dir, &args.proc_root, args.server_user, args.memory_cgroup)
        .map_err(|e| Exit::environment(format!("shim: {e:#}")))?;
    Ok(OK)
}
