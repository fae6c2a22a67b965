//! `benchlab audit`: a run's store checked and the problems shown as a table or JSON, with its
//! warnings (checks the store cannot support, such as a missing head) and notes. The audit itself
//! lives in `record::audit`; it never repairs.

use std::path::{Path, PathBuf};

use super::exit::{Exit, BAD_INPUT, OK};
use super::records_path;

#[derive(Debug, clap::Args)]
pub struct AuditArgs {
    /// A run folder (holding records.jsonl) or a records.jsonl file.
    run: PathBuf,
    /// Print the full report as JSON.
    #[arg(long)]
    json: bool,
}

pub(super) fn run(args: AuditArgs) -> Result<i32, Exit> {
    audit_cmd(&args.run, args.json)
}

fn audit_cmd(run: &Path, json: bool) -> Result<i32, Exit> {
    let path = records_path(run);
    let report = crate::record::audit::audit(&path);
    if json {
        println!("{}", serde_json::to_string_pretty(&report).expect("reports serialise"));
        return Ok(if report.is_clean() { OK } else { BAD_INPUT });
    }
    let short = |v: &str| {
        if v.len() == 64 && v.chars().all(|c| c.is_ascii_hexdigit()) {
            format!("{}…", &v[..12])
        } else {
            v.to_string()
        }
    };
    let warned = match report.warnings.len() {
        0 => String::new(),
        n => format!("; {n} warning(s) below"),
    };
    match report.first_problem() {
        None => println!(
            "{}: intact: {} record(s) of run {}, last seq {} (hash {}){warned}",
            path.display(),
            report.records,
            report.run_id.as_deref().unwrap_or("—"),
            report.last_seq.map_or("—".into(), |s| s.to_string()),
            report.last_hash.as_deref().map_or("—".into(), short)
        ),
        Some(first) => {
            println!(
                "{}: DAMAGED: {} problem(s); the first is {first}",
                path.display(),
                report.problems.len()
            );
            let mut t = comfy_table::Table::new();
            t.load_preset(comfy_table::presets::UTF8_FULL_CONDENSED);
            t.set_header(vec!["line", "col", "seq", "cell", "check", "expected", "found"]);
            for p in &report.problems {
                let opt = |v: Option<String>| v.unwrap_or_else(|| "-".into());
                t.add_row(vec![
                    opt(p.line.map(|l| l.to_string())),
                    opt(p.column.map(|c| c.to_string())),
                    opt(p.seq.map(|s| s.to_string())),
                    opt(p.cell_id.clone()),
                    p.check.as_str().to_string(),
                    short(&p.expected),
                    short(&p.found),
                ]);
            }
            println!("{t}");
            for (check, _) in report.counts() {
                println!("  {}: {}", check.as_str(), check.describe());
            }
        }
    }
    // Warnings are not damage (the exit code stays), but a reader must not miss them.
    for warning in &report.warnings {
        println!("warning: {warning}");
    }
    for note in &report.notes {
        println!("note: {note}");
    }
    Ok(if report.is_clean() { OK } else { BAD_INPUT })
}
