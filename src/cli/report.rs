//! `benchlab report`: a finished run's records rendered in a format, with a warning first when
//! its store does not audit clean. The renderers live in `report`.

use std::path::{Path, PathBuf};

use super::exit::{Exit, FAILED, OK};
use super::{load_run, records_path};
use crate::report;

#[derive(Debug, clap::Args)]
pub struct ReportArgs {
    /// A run folder (holding records.jsonl) or a records.jsonl file.
    run: PathBuf,
    /// Output format: table, json, markdown, csv, bencher (Bencher Metric Format), html (a
    /// self-contained page with SVG charts) or history (JSON of the history across SDK
    /// versions of a sweep: points with intervals and the steps beyond noise). Table,
    /// Markdown and HTML show that history too when the run holds one.
    #[arg(long, default_value = "table", value_parser = clap::value_parser!(report::Format))]
    format: report::Format,
    /// Write to FILE instead of stdout.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// Same as --format json.
    #[arg(long)]
    json: bool,
    /// Split the report by where cells ran: `node` gives one table (section, block; JSON: one
    /// key) per cluster node, titled with its CPU model, kernel and engine, so figures from
    /// different machines are never pooled in one row.
    #[arg(long, value_name = "node", value_parser = ["node"])]
    by: Option<String>,
}

pub(super) fn run(args: ReportArgs) -> Result<i32, Exit> {
    let format = if args.json { report::Format::Json } else { args.format };
    report_cmd(&args.run, format, args.out.as_deref(), args.by.is_some())
}

fn report_cmd(run: &Path, format: report::Format, out: Option<&Path>, by_node: bool) -> Result<i32, Exit> {
    let records = load_run(run)?;
    // A report from a store that does not audit clean says so before anything else.
    let path = records_path(run);
    let audit = crate::record::audit::audit(&path);
    if let Some(first) = audit.first_problem() {
        eprintln!(
            "warning: {} does not audit clean ({} problem(s); the first is {first}); `benchlab audit {}` lists them",
            path.display(),
            audit.problems.len(),
            run.display()
        );
    }
    let text = match by_node {
        true => report::render_by_node(format, &records),
        false => report::render(format, &records),
    };
    match out {
        Some(p) => {
            std::fs::write(p, text).map_err(|e| Exit::environment(format!("write {}: {e}", p.display())))?
        }
        None => print!("{text}"),
    }
    Ok(if records.iter().all(|r| r.as_expected()) { OK } else { FAILED })
}
