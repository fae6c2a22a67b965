//! `benchlab report`: a finished run's records rendered in a format, or its histograms written as
//! HdrHistogram interval logs (`--hlog`), with a warning first when its store does not audit
//! clean. The renderers and the log writer live in `report`.

use std::path::{Path, PathBuf};

use super::exit::{Exit, FAILED, OK};
use super::records_path;
use crate::record::store::read_audited;
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
    /// Instead of a report, write HdrHistogram interval logs (log format 1.3, as HdrHistogram's
    /// Java HistogramLogWriter writes them) into DIR, created if missing: one
    /// `<cell id, / as __>[.rN].hlog` per load cell (its latency) and per calls histogram,
    /// holding the record's histogram as one interval (values in nanoseconds, Interval_Max in
    /// milliseconds). Prints the files written; exit 2 when the run holds no histogram.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["format", "out", "json", "by"])]
    hlog: Option<PathBuf>,
}

pub(super) fn run(args: ReportArgs) -> Result<i32, Exit> {
    if let Some(dir) = &args.hlog {
        return hlog_cmd(&args.run, dir);
    }
    let format = if args.json { report::Format::Json } else { args.format };
    report_cmd(&args.run, format, args.out.as_deref(), args.by.is_some())
}

/// `--hlog DIR`: the run's interval logs written into DIR, one path per line on stdout. The exit
/// code is the report's: 1 when some cell did not do what the scenario expects.
fn hlog_cmd(run: &Path, dir: &Path) -> Result<i32, Exit> {
    let records = load_warning_unless_clean(run)?;
    let files = report::hlog::hlog_files(&records).map_err(|e| Exit::input(e.to_string()))?;
    if files.is_empty() {
        return Err(Exit::input(format!(
            "{} holds no load latency and no calls histogram: no interval log to write",
            records_path(run).display()
        )));
    }
    std::fs::create_dir_all(dir).map_err(|e| Exit::environment(format!("create {}: {e}", dir.display())))?;
    let mut written = Vec::with_capacity(files.len());
    for f in &files {
        let path = dir.join(&f.name);
        std::fs::write(&path, &f.text)
            .map_err(|e| Exit::environment(format!("write {}: {e}", path.display())))?;
        written.push(path);
    }
    for path in written {
        println!("{}", path.display());
    }
    Ok(if records.iter().all(|r| r.as_expected()) { OK } else { FAILED })
}

/// The run's records; a report from a store that does not audit clean says so before anything
/// else (a store that cannot be read is refused first).
fn load_warning_unless_clean(run: &Path) -> Result<Vec<crate::record::Record>, Exit> {
    let path = records_path(run);
    let (records, audit) = read_audited(&path).map_err(|e| Exit::input(e.to_string()))?;
    if let Some(first) = audit.first_problem() {
        eprintln!(
            "warning: {} does not audit clean ({} problem(s); the first is {first}); `benchlab audit {}` lists them",
            path.display(),
            audit.problems.len(),
            run.display()
        );
    }
    Ok(records)
}

fn report_cmd(run: &Path, format: report::Format, out: Option<&Path>, by_node: bool) -> Result<i32, Exit> {
    let records = load_warning_unless_clean(run)?;
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
    let code = if records.iter().all(|r| r.as_expected()) { OK } else { FAILED };
    crate::par::drop_aside(records);
    Ok(code)
}
