//! `benchlab status`: where a Slurm run stands — each cell queued, running (node, CPUs, attempt)
//! or done — from its job folder and the cluster's queue, beside the records written so far.
//! The reading lives in `crate::backend::slurm::status`.

use std::path::PathBuf;

use comfy_table::{presets::UTF8_FULL_CONDENSED, Table};

use super::exit::{Exit, OK};
use super::tokio_runtime;
use crate::backend::slurm::{ctl::Slurm, jobs_root, SlurmOptions};

#[derive(Debug, clap::Args)]
pub struct StatusArgs {
    /// The run folder (<results>/<scenario>/<run id>), while it runs or after.
    run: PathBuf,
    /// Print the state as JSON.
    #[arg(long)]
    json: bool,
    /// Where the run's job folders are (the run's --slurm-dir; default <work>/slurm-jobs).
    #[arg(long, value_name = "DIR")]
    slurm_dir: Option<PathBuf>,
    /// The cluster's slurm.conf (default: $SLURM_CONF, else the client's own).
    #[arg(long, value_name = "FILE")]
    slurm_conf: Option<PathBuf>,
}

pub(super) fn run(args: StatusArgs) -> Result<i32, Exit> {
    let run_id = args
        .run
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| Exit::input(format!("{}: not a run folder", args.run.display())))?
        .to_string();
    let opts = SlurmOptions { jobs_dir: args.slurm_dir.clone(), ..SlurmOptions::default() };
    let work = super::work_dir();
    let slurm = Slurm { conf: args.slurm_conf.clone() };
    let state = tokio_runtime()
        .block_on(crate::backend::slurm::status::run_state(&jobs_root(&opts, &work), &run_id, &slurm))
        .map_err(Exit::input)?;
    let records = super::load_run(&args.run).map(|r| r.len()).unwrap_or(0);
    if args.json {
        let v = serde_json::json!({ "records": records, "state": state });
        println!("{}", serde_json::to_string_pretty(&v).expect("JSON serialises"));
        return Ok(OK);
    }
    let counts: Vec<String> =
        state.counts().into_iter().filter(|(_, n)| *n > 0).map(|(s, n)| format!("{n} {s}")).collect();
    println!(
        "run {}: {} cell(s) on the cluster: {}; {records} record(s) in {}",
        state.run_id,
        state.cells.len(),
        counts.join(", "),
        args.run.display()
    );
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED)
        .set_header(["cell", "state", "job", "node", "CPUs", "attempt", "slurm"]);
    for c in &state.cells {
        t.add_row([
            c.cell.clone(),
            c.state.clone(),
            c.job.clone(),
            c.node.clone().unwrap_or_else(|| "—".into()),
            c.cpus.clone().unwrap_or_else(|| "—".into()),
            if c.attempt == 0 { "—".into() } else { c.attempt.to_string() },
            c.slurm.clone().unwrap_or_else(|| "gone from the queue".into()),
        ]);
    }
    println!("{t}");
    println!("job logs: {}/logs/", state.job_folder.display());
    Ok(OK)
}
