//! `benchlab diff-env`: the environment differences between two runs. The diff lives in
//! `record::diffenv`, its rendering in `report`.

use std::path::PathBuf;

use super::exit::{Exit, OK};
use super::load_run;
use crate::report;

#[derive(Debug, clap::Args)]
pub struct DiffEnvArgs {
    run_a: PathBuf,
    run_b: PathBuf,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

pub(super) fn run(args: DiffEnvArgs) -> Result<i32, Exit> {
    let d = crate::record::diffenv::diff_runs(&load_run(&args.run_a)?, &load_run(&args.run_b)?);
    let format = if args.json { report::CompareFormat::Json } else { report::CompareFormat::Table };
    print!("{}", report::render_diff_env(format, &d));
    Ok(OK)
}
